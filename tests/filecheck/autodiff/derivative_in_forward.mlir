// RUN: presk-opt %s -p psk-autodiff | filecheck %s
// RUN: presk-opt %s -p psk-autodiff | presk-opt | filecheck %s
// RUN: presk run %s --entry grad --pass-pipeline='builtin.module(psk-autodiff)' --print-values | filecheck %s --check-prefix=OUT
// RUN: presk run %s --entry grad --backend kernel --realize f64 --print-values | filecheck %s --check-prefix=OUT
// RUN: presk run %s --entry grad --backend native --realize f64 --print-values | filecheck %s --check-prefix=OUT

// An MLP's activation: GELU's backward reads its input x only to compute
// gelu'(x) = ½·(1 + erf(x/√2)) + x·exp(−x²/2)/√(2π), which the cotangent then
// multiplies. The forward function computes gelu'(x) instead, where x is at
// hand (and its own gelu has the same erf), and saves it in x's place: the
// same size, and a backward that is one product. The same ops run on the same
// values, so the gradient keeps its digits on every backend.

!H = !psk_core.tensor<[row: 2, embed: 4]>
!W = !psk_core.tensor<[embed: 4, out: 3]>
!O = !psk_core.tensor<[row: 2, out: 3]>
!R = !psk_core.real

func.func @mlp(%x: !H, %w: !W) -> !R {
  %h = psk_core.gelu %x : !H
  %y = psk_core.dot %h, %w : !O
  %l = psk_core.sum %y [row, out] : !R
  func.return %l : !R
}

func.func @grad(%x: !H {psk_core.init = "normal"}, %w: !W {psk_core.init = "normal"}) -> !H {
  %0 = psk_core.grad @mlp(%x, %w) wrt [0] : !H
  func.return %0 : !H
}

// The forward function: gelu'(x) after the value, saved in the tuple where x was.
// CHECK-LABEL: func.func @mlp.fwd
// CHECK:         %h = psk_core.gelu %x : !H
// CHECK:         %[[A:.*]] = psk_core.mul %x, %{{.*}} : !H
// CHECK-NEXT:    %[[ERF:.*]] = psk_core.erf %[[A]] : !H
// CHECK:         %[[E:.*]] = psk_core.exp %{{.*}} : !H
// CHECK:         %[[D:.*]] = psk_core.add %{{.*}}, %{{.*}} : !H
// CHECK-NEXT:    %res = psk_core.tuple %w, %[[D]], %y : !psk_core.tuple<!W, !H, !O>

// The backward function: no erf, no exp; the cotangent times the saved derivative.
// CHECK-LABEL: func.func @mlp.bwd(%res: !psk_core.tuple<!W, !H, !O>, %ct: !R) -> !H
// CHECK:         %[[DS:.*]] = psk_core.proj %res[1] : !H
// CHECK-NOT:     psk_core.erf
// CHECK-NOT:     psk_core.exp
// CHECK:         %[[CTH:.*]] = psk_core.ein %{{.*}}[row, out], %w[embed, out] : !H
// CHECK-NEXT:    %[[G:.*]] = psk_core.mul %[[CTH]], %[[DS]] : !H
// CHECK-NEXT:    func.return %[[G]] : !H

// The gradient: the same digits as with gelu'(x) computed in the backward function, on every backend.
// OUT:      {{\[\[}}-1.5549180882304547 -0.9890024418799922 -2.3891819276101653  0.6638088687568731]
// OUT-NEXT:  [-0.2876415857814891 -1.9426857716808748 -2.840736271625315   1.2169044058064435{{\]\]}}
