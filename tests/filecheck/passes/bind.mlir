// RUN: presk-opt %s -p 'psk-bind{dims="B=2,T=8"}' | filecheck %s
// RUN: presk-opt %s -p 'psk-bind{dims="B=2" consts="D=16"}' | filecheck %s --check-prefix=PARTIAL
// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-bind{dims="B=2,T=8" consts="D=16"})' | filecheck %s --check-prefix=OVERRIDE

psk_core.const_dim @D = 64
psk_core.const_dim @H = 2
psk_core.const_dim @HD = "D / H"

func.func @heads(%x: !psk_core.tensor<[batch: B, seq: T, embed: D]>) -> !psk_core.tensor<[batch: B, seq: T, heads: H, hd: HD]> {
  %y = psk_core.split %x [embed -> heads, hd] : !psk_core.tensor<[batch: B, seq: T, heads: H, hd: HD]>
  func.return %y : !psk_core.tensor<[batch: B, seq: T, heads: H, hd: HD]>
}

// Every constant is bound (declared values, expressions evaluated) and the
// declarations go; the listed dimension variables are bound.
// CHECK-NOT:  const_dim
// CHECK:      func.func @heads(%x: !psk_core.tensor<[batch: 2, seq: 8, embed: 64]>) -> !psk_core.tensor<[batch: 2, seq: 8, heads: 2, hd: 32]> {
// CHECK-NEXT:   %y = psk_core.split %x [embed -> heads, hd] : !psk_core.tensor<[batch: 2, seq: 8, heads: 2, hd: 32]>

// A dimension variable that is not listed stays symbolic.
// PARTIAL:    func.func @heads(%x: !psk_core.tensor<[batch: 2, seq: T, embed: 16]>) -> !psk_core.tensor<[batch: 2, seq: T, heads: 2, hd: 8]> {

// OVERRIDE:   func.func @heads(%x: !psk_core.tensor<[batch: 2, seq: 8, embed: 16]>)
