// RUN: presk-opt %s --march x86-64-v4 -p 'psk-fuse,psk-realize{plan="%S/Inputs/tile_remainders.json"},psk-lower-kernel{entry=f},psk-pack,psk-tile' | filecheck %s --check-prefix=TILED
// RUN: presk-opt %s --march x86-64-v4 -p 'psk-fuse,psk-realize{plan="%S/Inputs/tile_remainders.json"},psk-lower-kernel{entry=f},psk-pack,psk-tile,psk-vectorize' | filecheck %s --check-prefix=VECTOR
//
// A tile and a k-block that do not divide their axes: a dot of I = 6, K = 70,
// J = 92 (the corpus GPT's vocabulary) tiled [4, 16], k-block 32 in the order
// "JIK", 16 lanes, packed. The I and J block loops run ⌈6/4⌉ = 2 and
// ⌈92/16⌉ = 6 times; block b starts at min(b·m, N − m) (`arith.minsi`), so the
// last tile is shifted back to end at the axis's end and overlaps the one
// before it (rows 2..5, columns 76..91), computing its shared elements again
// with the same chains. The k-block loop runs ⌈70/32⌉ = 3 times, each block
// over [32·b, min(32·b + 32, 70)): the last one cut short, k still
// increasing. The blocked panel has ⌈92/16⌉ = 6 blocks, its last one the
// columns 76..91 that the shifted last tile reads, and the tile's columns
// stay consecutive, so psk-vectorize loads and stores them as vectors from
// an unaligned column.

!A = !psk_core.tensor<[i: 6, k: 70]>
!W = !psk_core.tensor<[k: 70, j: 92]>
!O = !psk_core.tensor<[i: 6, j: 92]>
func.func @f(%a: !A, %w: !W) -> !O {
  %0 = psk_core.dot %a, %w : !O
  func.return %0 : !O
}

// TILED:      psk_kernel.kernel @pack(%0: memref<70x92xf32>, %1: memref<6x70x16xf32>) "f/%0" {
// TILED-DAG:    %[[SIX:[0-9]+]] = arith.constant 6 : index
// TILED-DAG:    %[[SIXTEEN:[0-9]+]] = arith.constant 16 : index
// TILED-DAG:    %[[LAST:[0-9]+]] = arith.constant 76 : index
// TILED:        scf.for %[[K:[0-9]+]] =
// TILED-NEXT:     scf.for %[[JB:[0-9]+]] = %{{[0-9]+}} to %[[SIX]]
// TILED-NEXT:       scf.for %[[S:[0-9]+]] =
// TILED-NEXT:         %[[BASE:[0-9]+]] = arith.muli %[[JB]], %[[SIXTEEN]] : index
// TILED-NEXT:         %[[START:[0-9]+]] = arith.minsi %[[BASE]], %[[LAST]] : index
// TILED-NEXT:         %[[J:[0-9]+]] = arith.addi %[[START]], %[[S]] : index
// TILED-NEXT:         %[[X:[0-9]+]] = memref.load %0[%[[K]], %[[J]]] : memref<70x92xf32>
// TILED-NEXT:         memref.store %[[X]], %1[%[[JB]], %[[K]], %[[S]]] : memref<6x70x16xf32>

// TILED:      psk_kernel.kernel @dot(%0: memref<6x70xf32>, %1: memref<6x70x16xf32>, %2: memref<6x92xf32>) "f/%0"
// TILED-DAG:    %[[TWO:[0-9]+]] = arith.constant 2 : index
// TILED-DAG:    %[[THREE:[0-9]+]] = arith.constant 3 : index
// TILED-DAG:    %[[BLOCKS:[0-9]+]] = arith.constant 6 : index
// TILED-DAG:    %[[LAST_COL:[0-9]+]] = arith.constant 76 : index
// TILED-DAG:    %[[KB:[0-9]+]] = arith.constant 32 : index
// TILED-DAG:    %[[KSIZE:[0-9]+]] = arith.constant 70 : index
// TILED:        scf.for %[[JV:[0-9]+]] = %{{[0-9]+}} to %[[BLOCKS]]
// TILED-NEXT:     scf.for %[[IV:[0-9]+]] = %{{[0-9]+}} to %[[TWO]]
// TILED-NEXT:       %[[I0:[0-9]+]] = arith.muli %[[IV]], %{{[0-9]+}} : index
// TILED-NEXT:       %[[ROW:[0-9]+]] = arith.minsi %[[I0]], %[[TWO]] : index
// TILED:            %[[J0:[0-9]+]] = arith.muli %[[JV]], %{{[0-9]+}} : index
// TILED-NEXT:       %[[COL:[0-9]+]] = arith.minsi %[[J0]], %[[LAST_COL]] : index
// TILED:            scf.for %[[B:[0-9]+]] = %{{[0-9]+}} to %[[THREE]] step %{{[0-9]+}} iter_args(
// TILED-NEXT:         %[[LO:[0-9]+]] = arith.muli %[[B]], %[[KB]] : index
// TILED-NEXT:         %[[END:[0-9]+]] = arith.addi %[[LO]], %[[KB]] : index
// TILED-NEXT:         %[[HI:[0-9]+]] = arith.minsi %[[END]], %[[KSIZE]] : index
// TILED-NEXT:         scf.for %[[KV:[0-9]+]] = %[[LO]] to %[[HI]] step %{{[0-9]+}} iter_args(
// TILED:                memref.load %0[%[[ROW]], %[[KV]]] : memref<6x70xf32>
// TILED:                memref.load %1[%[[JV]], %[[KV]], %{{[0-9]+}}] : memref<6x70x16xf32>
// TILED:            memref.store %{{[0-9]+}}, %2[%[[ROW]], %[[COL]]] : memref<6x92xf32>
// TILED:          } {psk_kernel.parallel}
// TILED-NEXT:   } {psk_kernel.parallel, psk_kernel.lanes = 16 : i64}
// TILED:        psk_kernel.alloc : memref<6x70x16xf32>

// VECTOR:     psk_kernel.kernel @dot(
// VECTOR:           %[[ROW:[0-9]+]] = arith.minsi
// VECTOR:           %[[COL:[0-9]+]] = arith.minsi
// VECTOR:           scf.for {{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
// VECTOR:             arith.minsi
// VECTOR-NEXT:        scf.for {{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
// VECTOR:               vector.load %1[{{.*}}] : memref<6x70x16xf32>, vector<16xf32>
// VECTOR-COUNT-4:       vector.fma
// VECTOR:           vector.store %{{[0-9]+}}, %2[%[[ROW]], %[[COL]]] : memref<6x92xf32>, vector<16xf32>
// VECTOR:         } {psk_kernel.parallel, psk_kernel.lanes = 16 : i64}
