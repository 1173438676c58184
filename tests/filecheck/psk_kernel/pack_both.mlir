// RUN: presk-opt %s --march x86-64-v3 -p 'psk-fuse,psk-realize{plan="%S/Inputs/pack_both.json"},psk-lower-kernel{entry=f},psk-pack' | filecheck %s --check-prefix=PACKED
// RUN: presk-opt %s --march x86-64-v3 -p 'psk-fuse,psk-realize{plan="%S/Inputs/pack_both.json"},psk-lower-kernel{entry=f},psk-pack,psk-tile,psk-vectorize' | filecheck %s --check-prefix=TILED
//
// `"pack": "both"` on an NN contraction (a dot, tile [4, 8], 8 lanes):
// operand 1 w[k, j] is copied to the blocked panel [j / 8, k, 8] as `true`
// copies it, and operand 0 a[i, k] to the blocked panel [i / 4, k, 4] of
// the tile's rows, the transposing copy an NT operand 1 gets. The contract
// then names operand 0's axes [k, i], as a TN contraction's, and reads the
// panel through `lhs_block`: at each k a tile's four elements of operand 0
// are side by side at [row block, k, 0..3] rather than a row of K apart.

!A = !psk_core.tensor<[i: 8, k: 4]>
!W = !psk_core.tensor<[k: 4, j: 16]>
!O = !psk_core.tensor<[i: 8, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  %0 = psk_core.dot %a, %w : !O
  func.return %0 : !O
}

// PACKED:      psk_kernel.kernel @pack(%0: memref<4x16xf32>, %1: memref<2x4x8xf32>) "f/%0" {
// PACKED:      psk_kernel.kernel @pack_1(%0: memref<8x4xf32>, %1: memref<2x4x4xf32>) "f/%0" {
// PACKED:        scf.for %[[IB:[0-9]+]] =
// PACKED-NEXT:     scf.for %[[K:[0-9]+]] =
// PACKED-NEXT:       scf.for %[[R:[0-9]+]] =
// PACKED-NEXT:         %[[BASE:[0-9]+]] = arith.muli %[[IB]], %{{[0-9]+}} : index
// PACKED-NEXT:         %[[I:[0-9]+]] = arith.addi %[[BASE]], %[[R]] : index
// PACKED-NEXT:         %[[X:[0-9]+]] = memref.load %0[%[[I]], %[[K]]] : memref<8x4xf32>
// PACKED-NEXT:         memref.store %[[X]], %1[%[[IB]], %[[K]], %[[R]]] : memref<2x4x4xf32>
// PACKED:      psk_kernel.kernel @dot(%0: memref<2x4x4xf32>, %1: memref<2x4x8xf32>, %2: memref<8x16xf32>) "f/%0"
// PACKED-NEXT:   psk_kernel.contract %0, %1 -> %2 {{.*}} lhs_axes = ["__k", "i"], rhs_axes = ["__k", "j"], {{.*}} rhs_block = 8 : i64, lhs_block = 4 : i64}
// PACKED:        %3 = psk_kernel.alloc : memref<2x4x8xf32>
// PACKED-NEXT:   psk_kernel.launch @pack(%1, %3)
// PACKED-NEXT:   %4 = psk_kernel.alloc : memref<2x4x4xf32>
// PACKED-NEXT:   psk_kernel.launch @pack_1(%0, %4)
// PACKED-NEXT:   psk_kernel.launch @dot(%4, %3, %2)

// TILED:       psk_kernel.kernel @dot(
// TILED:         scf.for %[[IB:[0-9]+]] =
// TILED-NEXT:      scf.for %[[JB:[0-9]+]] =
// TILED:           scf.for %[[K:[0-9]+]] = {{.*}} -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>) {
// TILED-NEXT:        memref.load %0[%[[IB]], %[[K]], %{{[0-9]+}}] {psk_kernel.prefetch_ahead = 4096 : i64} : memref<2x4x4xf32>
// TILED-COUNT-3:     memref.load %0[%[[IB]], %[[K]], %{{[0-9]+}}] : memref<2x4x4xf32>
// TILED:             vector.load %1[%[[JB]], %[[K]], %{{[0-9]+}}] : memref<2x4x8xf32>, vector<8xf32>
// TILED-NOT:         vector.load
