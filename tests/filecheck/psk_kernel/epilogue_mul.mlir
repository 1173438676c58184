// A mul as the epilogue: attention's scores times their scale (a real), the
// product's value read by that mul alone. psk-epilogue folds the two
// launches into one of "ein+mul", whose contract multiplies each finished
// sum by the scale (epilogue_op = "mul"); psk-tile does it before the store.
//
// RUN: presk-opt %s -p 'psk-bind{dims="B=2"},psk-fuse,psk-realize{plan="%S/Inputs/epilogue_mul.json"},psk-lower-kernel{entry=scores}' | filecheck %s --check-prefix=LOWERED
// RUN: presk-opt %s -p 'psk-bind{dims="B=2"},psk-fuse,psk-realize{plan="%S/Inputs/epilogue_mul.json"},psk-lower-kernel{entry=scores},psk-epilogue' | filecheck %s --check-prefix=EPILOGUE
// RUN: presk-opt %s -p 'psk-bind{dims="B=2"},psk-fuse,psk-realize{plan="%S/Inputs/epilogue_mul.json"},psk-lower-kernel{entry=scores},psk-epilogue' | presk-opt | filecheck %s --check-prefix=EPILOGUE
// RUN: presk-opt %s -p 'psk-bind{dims="B=2"},psk-fuse,psk-realize{plan="%S/Inputs/epilogue_mul.json"},psk-lower-kernel{entry=scores},psk-epilogue,psk-tile' | filecheck %s --check-prefix=TILED

// LOWERED: psk_kernel.launch @ein(
// LOWERED: psk_kernel.launch @mul(

// EPILOGUE:     psk_kernel.kernel @"ein+mul"(%0: memref<2x8x16xf32>, %1: memref<2x8x16xf32>, %2: memref<f32>, %3: memref<2x8x8xf32>) "scores/%0"
// EPILOGUE:     psk_kernel.contract %0, %1 plus %2 : memref<f32> -> %3 {{{.*}}addend_type = !R, product_first, epilogue_op = "mul"}
// EPILOGUE-NOT: psk_kernel.kernel @mul
// EPILOGUE:     psk_kernel.launch @"ein+mul"
// EPILOGUE-NOT: psk_kernel.launch @mul(

// Each of the tile's 2 × 8 sums, finished, is multiplied by the scale loaded from its buffer, then stored.
// TILED:          psk_kernel.kernel @"ein+mul"
// TILED-COUNT-16: math.fma
// TILED:          %[[SCALE:.*]] = memref.load %2[] : memref<f32>
// TILED-NEXT:     %[[SCALED:.*]] = arith.mulf %{{.*}}, %[[SCALE]] : f32
// TILED-NEXT:     memref.store %[[SCALED]], %3[

!Q = !psk_core.tensor<[batch: B, seq: 8, hd: 16]>
!K = !psk_core.tensor<[batch: B, seq2: 8, hd: 16]>
!S = !psk_core.tensor<[batch: B, seq: 8, seq2: 8]>
!R = !psk_core.real

func.func @scores(%q: !Q, %k: !K, %c: !R) -> !S {
  %0 = psk_core.ein %q[batch, seq, hd], %k[batch, seq2, hd] : !S
  %1 = psk_core.mul %0, %c : !S
  %2 = psk_core.softmax %1 [seq2] : !S
  func.return %2 : !S
}
