// RUN: presk-opt %s -p psk-autodiff | filecheck %s
// RUN: presk-opt %s -p psk-autodiff | presk-opt | filecheck %s
// RUN: presk run %s --entry grad --pass-pipeline='builtin.module(psk-autodiff)' --print-values | filecheck %s --check-prefix=OUT
// RUN: presk run %s --entry grad --backend kernel --realize f64 --print-values | filecheck %s --check-prefix=OUT
// RUN: presk run %s --entry grad --backend native --realize f64 --print-values | filecheck %s --check-prefix=OUT

// LayerNorm's shape: the backward pass reads x − μ, σ and x̂ = (x − μ)/σ.
// A residual that one arithmetic op (add, sub, mul, div, neg) computes from
// other residuals is recomputed by the backward function instead of saved:
// the forward function saves x − μ and σ, and `.bwd` divides them again (the
// same op on the same values, so the same bits). A residual another
// recomputed one reads stays saved, so no recomputation reads a value that
// is no longer there: `%c = %xc · 2` reads x − μ, which is saved, and is
// itself no operand of another recomputation.

!H = !psk_core.tensor<[row: 2, embed: 4]>
!S = !psk_core.tensor<[row: 2]>
!R = !psk_core.real

func.func @norm(%x: !H, %g: !H) -> !R {
  %mu = psk_core.mean %x [embed] : !S
  %xc = psk_core.sub %x, %mu : !H
  %sq = psk_core.pow %xc, 2 : !H
  %var = psk_core.mean %sq [embed] : !S
  %sigma = psk_core.sqrt %var : !S
  %xhat = psk_core.div %xc, %sigma : !H
  %y = psk_core.mul %xhat, %g : !H
  %l = psk_core.sum %y [row, embed] : !R
  func.return %l : !R
}

func.func @grad(%x: !H {psk_core.init = "normal"}, %g: !H {psk_core.init = "normal"}) -> !H {
  %0 = psk_core.grad @norm(%x, %g) wrt [0] : !H
  func.return %0 : !H
}

// x̂ is no residual: the forward function saves g, σ and x − μ only.
// CHECK-LABEL: func.func @norm.fwd
// CHECK:         %xhat = psk_core.div %xc, %sigma : !H
// CHECK:         %res = psk_core.tuple {{.*}} : !psk_core.tuple<!H, !S, !H>

// The backward function divides them again, before x̂'s first reader.
// CHECK-LABEL: func.func @norm.bwd(%res: !psk_core.tuple<!H, !S, !H>, %ct: !R) -> !H
// CHECK-DAG:     %[[SIGMA:.*]] = psk_core.proj %res[1] : !S
// CHECK-DAG:     %[[XC:.*]] = psk_core.proj %res[2] : !H
// CHECK:         %xhat = psk_core.div %[[XC]], %[[SIGMA]] : !H
// CHECK-NOT:     psk_core.proj %res[3]

// The gradient of Σ g·(x − μ)/σ: the same digits on every backend.
// OUT:      {{\[\[}}-0.13181791889091654 -1.6778786308226485  -0.7374476078681891   2.547144157581754  ]
// OUT-NEXT:  [-0.7802713479212553   1.4502488436001137  -0.8625129832294323   0.19253548755057315{{\]\]}}
