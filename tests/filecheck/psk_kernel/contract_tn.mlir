// RUN: presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/contract_tn.json"},psk-lower-kernel{entry=f}' | filecheck %s --check-prefix=CONTRACT
// RUN: presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/contract_tn.json"},psk-lower-kernel{entry=f},psk-pack,psk-tile' | filecheck %s --check-prefix=TILED
// RUN: presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/contract_tn.json"},psk-lower-kernel{entry=g},psk-pack,psk-tile' | filecheck %s --check-prefix=OUTPUT
// RUN: presk dump %s --stage llvm --entry f --plan @%S/Inputs/contract_tn.json | filecheck %s --check-prefix=LLVM
// RUN: presk dump %s --stage llvm --entry g --plan @%S/Inputs/contract_tn.json | filecheck %s --check-prefix=UNPACKED
// RUN: presk dump %s --stage llvm --entry f --plan @%S/Inputs/contract_tn_enclosed.json | filecheck %s --check-prefix=ENCLOSED
//
// A dot's right derivative, xᵀ · ct, is a TN contraction: both operands
// carry the summed axes (b, s) before I and J. K is the innermost of them
// (s, which a k-block divides); the contract names the others in `k_outer`,
// and each is one loop, outermost first, around K's loops: the order of
// their flat index, so no operand is reshaped and the kernel's signature
// is its operands' own. Operand 0 is read along I inside the tile (its m
// elements side by side), operand 1 along J. The pack copies both to
// blocked panels that keep the summed axes after their block axis: operand
// 1 to [J / n, b, s, n], operand 0 to [I / m, b, s, m], so that a tile's k
// run one after the other instead of a row of I (or J) apart. At each k
// the tile's first load from operand 0's panel carries
// `psk_kernel.prefetch_ahead`: native code also asks for the panel's line
// 4 KiB further on (`llvm.prefetch`, into L1), which changes no value.
// Where the k-block loop encloses I and J (g, order KIJ), the loop over b
// sits at K's place in the order, and a tile's sums start from zero at the
// first block of the flat index (b, k-block) only.

!X = !psk_core.tensor<[b: 2, s: 64, i: 4]>
!C = !psk_core.tensor<[b: 2, s: 64, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%x: !X, %ct: !C) -> !O {
  %0 = psk_core.ein %x[b, s, i], %ct[b, s, j] : !O
  func.return %0 : !O
}
func.func @g(%x: !X, %ct: !C) -> !O {
  %0 = psk_core.ein %x[b, s, i], %ct[b, s, j] : !O
  func.return %0 : !O
}

// CONTRACT:      psk_kernel.kernel @ein(%0: memref<2x64x4xf32>, %1: memref<2x64x16xf32>, %2: memref<4x16xf32>) "f/%0"
// CONTRACT-NEXT:   psk_kernel.contract %0, %1 -> %2 {outer = [], i = "i", j = "j", k = "s", lhs_axes = ["b", "s", "i"], rhs_axes = ["b", "s", "j"], out_axes = ["i", "j"], arith_type = f32, k_outer = ["b"]} : memref<2x64x4xf32>, memref<2x64x16xf32> -> memref<4x16xf32>

// TILED:       psk_kernel.kernel @pack(%0: memref<2x64x16xf32>, %1: memref<2x2x64x8xf32>) "f/%0" {
// TILED:       psk_kernel.kernel @pack_1(%0: memref<2x64x4xf32>, %1: memref<2x2x64x2xf32>) "f/%0" {
// TILED:       psk_kernel.kernel @ein(%0: memref<2x2x64x2xf32>, %1: memref<2x2x64x8xf32>, %2: memref<4x16xf32>) "f/%0"
// TILED:         scf.for %[[I:[0-9]+]] = {{.*}} {
// TILED-NEXT:      scf.for %[[J:[0-9]+]] = {{.*}} {
// TILED:             = scf.for %[[B:[0-9]+]] = {{.*}} iter_args(
// TILED-NEXT:          = scf.for %[[S:[0-9]+]] = {{.*}} iter_args(
// TILED-NEXT:            %[[R0:[0-9]+]] = memref.load %0[%[[I]], %[[B]], %[[S]], %{{[0-9]+}}] {psk_kernel.prefetch_ahead = 4096 : i64} : memref<2x2x64x2xf32>
// TILED-NEXT:            %[[R1:[0-9]+]] = memref.load %0[%[[I]], %[[B]], %[[S]], %{{[0-9]+}}] : memref<2x2x64x2xf32>
// TILED-NEXT:            %{{[0-9]+}} = memref.load %1[%[[J]], %[[B]], %[[S]], %{{[0-9]+}}] : memref<2x2x64x8xf32>
// TILED:           } {psk_kernel.parallel}
// TILED:         } {psk_kernel.parallel}

// OUTPUT:      psk_kernel.kernel @ein(%0: memref<2x64x4xf32>, %1: memref<2x64x16xf32>, %2: memref<4x16xf32>) "g/%0"
// OUTPUT:        scf.for %[[B:[0-9]+]] = {{.*}} {
// OUTPUT-NEXT:     scf.for %[[KB:[0-9]+]] = {{.*}} {
// OUTPUT-NEXT:       scf.for %[[I:[0-9]+]] = {{.*}} {
// OUTPUT-NEXT:         scf.for %[[J:[0-9]+]] = {{.*}} {
// OUTPUT:                %[[FLAT0:[0-9]+]] = arith.muli %[[B]], %{{[0-9]+}} : index
// OUTPUT-NEXT:           %[[FLAT:[0-9]+]] = arith.addi %[[FLAT0]], %[[KB]] : index
// OUTPUT-NEXT:           %[[FIRST:[0-9]+]] = arith.cmpi eq, %[[FLAT]], %{{[0-9]+}} : index
// OUTPUT:                arith.select %[[FIRST]],

// LLVM-LABEL: define void @"ein"(
// LLVM:         %[[AT:"\.[0-9]+"]] = getelementptr inbounds float, ptr %"buf0", i64 %{{.*}}
// LLVM-NEXT:    %[[AHEAD:"\.[0-9]+"]] = getelementptr i8, ptr %[[AT]], i64 4096
// LLVM-NEXT:    call void @"llvm.prefetch.p0"(ptr %[[AHEAD]], i32 0, i32 3, i32 1)
// LLVM-NEXT:    load float, ptr %[[AT]], align 4
// LLVM-NOT:     llvm.prefetch
// LLVM:         ret void

// Operand 0 read in place (no pack) asks for nothing; nor does a packed panel under a k-block loop that
// encloses I and J (KIJ), where the line ahead is the tile's next k-block, read after every other tile.
// UNPACKED-NOT: call void @"llvm.prefetch.p0"
// ENCLOSED:     define void @"pack_1"(
// ENCLOSED-NOT: call void @"llvm.prefetch.p0"
