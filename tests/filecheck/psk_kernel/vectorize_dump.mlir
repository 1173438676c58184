// RUN: echo '{"realization": "f32", "layout": {"gemm/%0": {"tile": [4, 16], "kblock": 32, "order": "JIK", "lanes": 16}}}' > %t.f32.json
// RUN: presk dump %s --march x86-64-v4 --stage kernel --entry gemm --dim N=32 --plan @%t.f32.json | filecheck %s
// RUN: echo '{"realization": "f64", "layout": {"bias/%0": {"tile": [2, 8], "lanes": 4, "epilogue": true}}}' > %t.f64.json
// RUN: presk dump %s --stage kernel --entry bias --dim N=32 --plan @%t.f64.json | filecheck %s --check-prefix=EPI
// RUN: echo '{"realization": "f32", "layout": {"gemm/%0": {"tile": [4, 16], "kblock": 32, "order": "JKI", "lanes": 8}}}' > %t.out.json
// RUN: presk dump %s --stage kernel --entry gemm --dim N=32 --plan @%t.out.json | filecheck %s --check-prefix=OUT
// RUN: echo '{"realization": "f32", "layout": {"gemm/%0": {"tile": [4, 16]}}}' > %t.scalar.json
// RUN: presk dump %s --stage kernel --entry gemm --dim N=32 --plan @%t.scalar.json | filecheck %s --check-prefix=SCALAR
// RUN: echo '{"realization": "bf16", "layout": {"gemm/%0": {"tile": [4, 16], "lanes": 1}}}' > %t.bf16.json
// RUN: presk dump %s --stage kernel --entry gemm --dim N=32 --plan @%t.bf16.json | filecheck %s --check-prefix=SCALAR
//
// psk-vectorize in the pipeline: a tiled contraction whose column loop states
// lanes runs its register tile as vectors across the tile's columns. Tile
// [4, 16] with 16 lanes: per k, 4 broadcasts of operand 0, one vector load of
// operand 1, 4 vector fmas into 4 running vectors (one per row), threaded
// through the k-block loop and the k loop; the tile is stored as 4 vectors.

!A = !psk_core.tensor<[i: N, k: N]>
!B = !psk_core.tensor<[k2: N, j: N]>
!C = !psk_core.tensor<[i: N, j: N]>
!J = !psk_core.tensor<[j: N]>
func.func @gemm(%a: !A, %b: !B) -> !C {
  %0 = psk_core.dot %a, %b : !C
  func.return %0 : !C
}
func.func @bias(%a: !A, %b: !B, %c: !J) -> !C {
  %0 = psk_core.dot %a, %b : !C
  %1 = psk_core.add %0, %c : !C
  func.return %1 : !C
}

// CHECK:       psk_kernel.kernel @dot
// CHECK:         %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %[[Z:.*]] = vector.broadcast %[[ZERO]] : f32 to vector<16xf32>
// CHECK-NEXT:    scf.for {{.*}} iter_args({{.*}} = %[[Z]], {{.*}} = %[[Z]], {{.*}} = %[[Z]], {{.*}} = %[[Z]]) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
// CHECK-NEXT:      scf.for {{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
// CHECK-COUNT-4:     memref.load %0
// CHECK:             %[[X:.*]] = vector.broadcast {{.*}} : f32 to vector<16xf32>
// CHECK-NEXT:        %[[W:.*]] = vector.load %1[{{.*}}] : memref<32x32xf32>, vector<16xf32>
// CHECK-NEXT:        vector.fma %[[X]], %[[W]], {{.*}} : vector<16xf32>
// CHECK-COUNT-3:     vector.fma {{.*}} : vector<16xf32>
// CHECK-NEXT:        scf.yield {{.*}} : vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>
// CHECK-NOT:     math.fma
// CHECK-NOT:     memref.store
// CHECK-COUNT-4: vector.store {{.*}}, %2[{{.*}}] : memref<32x32xf32>, vector<16xf32>
// CHECK:         psk_kernel.lanes = 16

// The epilogue (f64, 4 lanes, tile [2, 8]): the bias along J is loaded as a
// vector and added to each finished vector sum before its store.
// EPI:       psk_kernel.kernel @"dot+add"
// EPI:         vector.fma {{.*}} : vector<4xf64>
// EPI:         %[[BIAS:.*]] = vector.load %2[{{.*}}] : memref<32xf64>, vector<4xf64>
// EPI-NEXT:    %[[SUM:.*]] = arith.addf %{{.*}}, %[[BIAS]] : vector<4xf64>
// EPI-NEXT:    vector.store %[[SUM]], %3[{{.*}}] : memref<32x32xf64>, vector<4xf64>
// EPI-NOT:     memref.store

// The k-block loop around the I block loop (order JKI): each tile's sums wait
// in the output between blocks; the first block starts from zero (a select on
// the block variable between a broadcast zero and a vector load of the output).
// OUT:       %[[FIRST:.*]] = arith.cmpi eq
// OUT:       %[[OLD:.*]] = vector.load %2[{{.*}}] : memref<32x32xf32>, vector<8xf32>
// OUT:       arith.select %[[FIRST]], %{{.*}}, %[[OLD]] : vector<8xf32>
// OUT:       vector.fma
// OUT:       vector.store {{.*}} : memref<32x32xf32>, vector<8xf32>

// No lanes stated, or bf16 (no lanes): the tile stays scalar.
// SCALAR-NOT: vector.
// SCALAR:     math.fma
// SCALAR-NOT: vector.
