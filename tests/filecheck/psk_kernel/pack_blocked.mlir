// RUN: presk-opt %s --march x86-64-v4 -p 'psk-fuse,psk-realize{plan="%S/Inputs/pack_blocked.json"},psk-lower-kernel{entry=f},psk-pack' | filecheck %s --check-prefix=PACKED
// RUN: presk-opt %s --march x86-64-v4 -p 'psk-fuse,psk-realize{plan="%S/Inputs/pack_blocked.json"},psk-lower-kernel{entry=f},psk-pack,psk-tile,psk-vectorize' | filecheck %s --check-prefix=TILED
//
// psk-pack on an NN contraction (a dot, tile [4, 16], 16 lanes): operand 1
// w[k, j] is copied to a blocked panel [j / 16, k, 16], one block per tile
// column, so that a tile reads its columns as one contiguous stream instead
// of rows J apart. The contract keeps its axes and reads the panel through
// `rhs_block`; the tile's vector load of operand 1 is at [column block, k, 0].
// The copy reads w in its own order: row k, then every block's piece of it
// (16 rows at a time when they divide K; here K = 4, row by row).

!A = !psk_core.tensor<[i: 8, k: 4]>
!W = !psk_core.tensor<[k: 4, j: 32]>
!O = !psk_core.tensor<[i: 8, j: 32]>
func.func @f(%a: !A, %w: !W) -> !O {
  %0 = psk_core.dot %a, %w : !O
  func.return %0 : !O
}

// PACKED:      psk_kernel.kernel @pack(%0: memref<4x32xf32>, %1: memref<2x4x16xf32>) "f/%0" {
// PACKED:        scf.for %[[K:[0-9]+]] =
// PACKED-NEXT:     scf.for %[[JB:[0-9]+]] =
// PACKED-NEXT:       scf.for %[[S:[0-9]+]] =
// PACKED-NEXT:         %[[BASE:[0-9]+]] = arith.muli %[[JB]], %{{[0-9]+}} : index
// PACKED-NEXT:         %[[J:[0-9]+]] = arith.addi %[[BASE]], %[[S]] : index
// PACKED-NEXT:         %[[X:[0-9]+]] = memref.load %0[%[[K]], %[[J]]] : memref<4x32xf32>
// PACKED-NEXT:         memref.store %[[X]], %1[%[[JB]], %[[K]], %[[S]]] : memref<2x4x16xf32>
// PACKED:      psk_kernel.kernel @dot(%0: memref<8x4xf32>, %1: memref<2x4x16xf32>, %2: memref<8x32xf32>) "f/%0" attributes {layout = #psk_realize.layout<tile = [4, 16], lanes = 16, default(
// PACKED-NEXT:   psk_kernel.contract %0, %1 -> %2 {{.*}} rhs_axes = ["__k", "j"], {{.*}} rhs_block = 16 : i64} : memref<8x4xf32>, memref<2x4x16xf32> -> memref<8x32xf32>
// PACKED:        %3 = psk_kernel.alloc : memref<2x4x16xf32>
// PACKED-NEXT:   psk_kernel.launch @pack(%1, %3)
// PACKED-NEXT:   psk_kernel.launch @dot(%0, %3, %2)

// TILED:       psk_kernel.kernel @dot(
// TILED:         scf.for %{{[0-9]+}} =
// TILED-NEXT:      scf.for %[[J:[0-9]+]] =
// TILED:           scf.for %[[K:[0-9]+]] = {{.*}} iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
// TILED-COUNT-4:     memref.load %0[
// TILED:             vector.load %1[%[[J]], %[[K]], %{{[0-9]+}}] : memref<2x4x16xf32>, vector<16xf32>
// TILED-NOT:         vector.load
// TILED-COUNT-4:     vector.fma
// TILED:         } {psk_kernel.parallel, psk_kernel.lanes = 16 : i64}
