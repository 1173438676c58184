// RUN: presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/pack_blocked_short.json"},psk-lower-kernel{entry=f},psk-pack' | filecheck %s
//
// A blocked panel whose blocks are narrower than the pack's register block
// (8 f32 columns against 16): each block's row is copied as one vector of 8
// lanes, with no loop over its elements. Element by element, the innermost
// loop of 8 copies ran behind the streaming stores' alignment peel (it never
// reached their vector part), and the course GPT's [8, 256, 1536] f32 panel
// of blocks of 8 took 3 ms where the same bytes in blocks of 32 took 0.9.
// No width of the machine is stated: the vector is the block's.

!A = !psk_core.tensor<[i: 8, k: 4]>
!W = !psk_core.tensor<[k: 4, j: 24]>
!O = !psk_core.tensor<[i: 8, j: 24]>
func.func @f(%a: !A, %w: !W) -> !O {
  %0 = psk_core.dot %a, %w : !O
  func.return %0 : !O
}

// CHECK:      psk_kernel.kernel @pack(%0: memref<4x24xf32>, %1: memref<3x4x8xf32>) "f/%0" {
// CHECK-NEXT:   %[[ZERO:[0-9]+]] = arith.constant 0 : index
// CHECK:        scf.for %[[K:[0-9]+]] =
// CHECK-NEXT:     scf.for %[[JB:[0-9]+]] =
// CHECK-NEXT:       %[[J:[0-9]+]] = arith.muli %[[JB]], %{{[0-9]+}} : index
// CHECK-NEXT:       %[[ROW:[0-9]+]] = vector.load %0[%[[K]], %[[J]]] : memref<4x24xf32>, vector<8xf32>
// CHECK-NEXT:       vector.store %[[ROW]], %1[%[[JB]], %[[K]], %[[ZERO]]] : memref<3x4x8xf32>, vector<8xf32>
// CHECK-NEXT:     } {psk_kernel.parallel}
// CHECK-NEXT:   } {psk_kernel.parallel}
