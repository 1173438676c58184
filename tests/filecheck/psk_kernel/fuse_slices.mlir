// psk-fuse-slices: a row sum that runs two rows an iteration, then a kernel
// that subtracts each row's sum from the row, one row an iteration. Both
// loop over the rows, and the second reads of the sums only its own row's,
// so they merge: one loop over the blocks of two rows, the sums first, then
// the subtraction over the block's rows in a loop of its own (row 2·b + r).
// With no cache to fit in (budget=0) nothing merges.
//
// RUN: presk-opt %s -p psk-fuse-slices | filecheck %s
// RUN: presk-opt %s -p 'psk-fuse-slices{budget=0}' | filecheck %s --check-prefix=BUDGET
//
// CHECK:      psk_kernel.kernel @"rowsum+center"(%0: memref<4x3xf32>, %1: memref<4xf32>, %2: memref<4x3xf32>) "f/%1+f/%2" {
// CHECK:        scf.for %[[B:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:          scf.for {{.*}} iter_args
// CHECK:          memref.store %{{.*}}, %1[%{{.*}}] : memref<4xf32>
// CHECK:          memref.store %{{.*}}, %1[%{{.*}}] : memref<4xf32>
// CHECK:          %[[TWO:.*]] = arith.constant 2 : index
// CHECK:          scf.for %[[R:.*]] = %{{.*}} to %[[TWO]] step %{{.*}} {
// CHECK-NEXT:       %[[FIRST:.*]] = arith.muli %[[B]], %[[TWO]] : index
// CHECK-NEXT:       %[[ROW:.*]] = arith.addi %[[FIRST]], %[[R]] : index
// CHECK-NEXT:       scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:         memref.load %0[%[[ROW]], %[[J]]]
// CHECK-NEXT:         memref.load %1[%[[ROW]]]
// CHECK:            } {psk_kernel.parallel}
// CHECK-NEXT:     } {psk_kernel.parallel}
// CHECK-NEXT:   } {psk_kernel.parallel}
// CHECK:      psk_kernel.launch @"rowsum+center"(%x, %s, %c) {site = "f/%1+f/%2"}
// CHECK-NOT:  psk_kernel.launch
//
// BUDGET: psk_kernel.launch @rowsum
// BUDGET: psk_kernel.launch @center

builtin.module {
  psk_kernel.kernel @rowsum(%0: memref<4x3xf32>, %1: memref<4xf32>) "f/%1" {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %z = arith.constant 0.0 : f32
    scf.for %b = %c0 to %c2 step %c1 {
      %r0 = arith.muli %b, %c2 : index
      %r1 = arith.addi %r0, %c1 : index
      %s0, %s1 = scf.for %j = %c0 to %c3 step %c1 iter_args(%a0 = %z, %a1 = %z) -> (f32, f32) {
        %x0 = memref.load %0[%r0, %j] : memref<4x3xf32>
        %n0 = arith.addf %a0, %x0 : f32
        %x1 = memref.load %0[%r1, %j] : memref<4x3xf32>
        %n1 = arith.addf %a1, %x1 : f32
        scf.yield %n0, %n1 : f32, f32
      }
      memref.store %s0, %1[%r0] : memref<4xf32>
      memref.store %s1, %1[%r1] : memref<4xf32>
    } {psk_kernel.parallel}
  }
  psk_kernel.kernel @center(%0: memref<4x3xf32>, %1: memref<4xf32>, %2: memref<4x3xf32>) "f/%2" {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c3 = arith.constant 3 : index
    %c4 = arith.constant 4 : index
    scf.for %i = %c0 to %c4 step %c1 {
      scf.for %j = %c0 to %c3 step %c1 {
        %x = memref.load %0[%i, %j] : memref<4x3xf32>
        %m = memref.load %1[%i] : memref<4xf32>
        %y = arith.subf %x, %m : f32
        memref.store %y, %2[%i, %j] : memref<4x3xf32>
      } {psk_kernel.parallel}
    } {psk_kernel.parallel}
  }
  psk_kernel.host @f(%x: memref<4x3xf32>) -> (memref<4x3xf32>) {
    %s = psk_kernel.alloc : memref<4xf32>
    psk_kernel.launch @rowsum(%x, %s) {site = "f/%1"} : memref<4x3xf32>, memref<4xf32>
    %c = psk_kernel.alloc : memref<4x3xf32>
    psk_kernel.launch @center(%x, %s, %c) {site = "f/%2"} : memref<4x3xf32>, memref<4xf32>, memref<4x3xf32>
    psk_kernel.return %c : memref<4x3xf32>
  }
}
