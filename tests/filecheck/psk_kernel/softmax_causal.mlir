// RUN: presk-opt %s -p 'psk-bind{dims="T=4"},psk-fuse,psk-realize,psk-lower-kernel{entry=scores}' | filecheck %s
// RUN: presk-opt %s -p 'psk-bind{dims="T=4"},psk-fuse,psk-realize,psk-lower-kernel{entry=scores},psk-softmax-passes' | filecheck %s --check-prefix=LOOPS
// RUN: presk run %s --entry scores --dim T=4 --realize f32 --backend native --print-values | filecheck %s --check-prefix=OUT
// RUN: presk run %s --entry scores --dim T=4 --realize f32 --backend kernel --print-values | filecheck %s --check-prefix=OUT

// A softmax masked by `causal_mask` computes the mask from its loop counters: the structured op
// names the mask's two axes (`causal`) and reads no mask buffer; its passes compare the counter of
// seq2 with the row's seq (`cmpi ule`, as `causal_mask`'s own kernel does), so the bits are those
// of reading the mask. The mask's kernel still runs for any other reader.
!S = !psk_core.tensor<[heads: 2, seq: T, seq2: T]>
!Mask = !psk_core.index<[seq: T, seq2: T], 2>

func.func @scores(%x: !S) -> !S {
  %m = psk_core.causal_mask : !Mask
  %0 = psk_core.softmax %x [seq2] mask %m : !S
  func.return %0 : !S
}

// CHECK:      psk_kernel.kernel @softmax(%0: memref<2x4x4xf64>, %1: memref<4x4xi64>, %2: memref<2x4x4xf64>)
// CHECK-NEXT:   psk_kernel.softmax %0 -> %2 {{{.*}}causal = ["seq", "seq2"]} : memref<2x4x4xf64> -> memref<2x4x4xf64>

// LOOPS:      psk_kernel.kernel @softmax(
// LOOPS-NOT:    memref.load %1
// LOOPS:        scf.for %[[K:[0-9]+]] = {{.*}} iter_args(
// LOOPS-NEXT:     arith.cmpi ule, %[[K]], %{{[0-9]+}} : index
// LOOPS-NOT:    memref.load %1
// LOOPS:      psk_kernel.host @scores

// Row s of each head: the softmax of its first s + 1 scores, 0 beyond; the same bits on both backends.
// OUT:      {{\[\[\[}}1.          0.          0.          0.         ]
// OUT-NEXT:   [0.28961298  0.71038705  0.          0.         ]
// OUT-NEXT:   [0.37678507  0.21486042  0.40835452  0.         ]
// OUT-NEXT:   [0.058559373 0.4811987   0.17228687  0.2879551  ]]
