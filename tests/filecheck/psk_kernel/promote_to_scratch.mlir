// psk-promote-to-scratch: after psk-fuse-slices, the row sums %s are written
// and read back inside one kernel, a block of two rows per iteration, and
// nothing else uses them: they become the kernel's scratch, folded onto the
// two rows of an iteration, and leave the launch and the host program.
// The centred values %c are the host's result: they stay a buffer.
//
// RUN: presk-opt %s -p psk-fuse-slices,psk-promote-to-scratch | filecheck %s
// RUN: presk-opt %s -p psk-fuse-slices,psk-promote-to-scratch | presk-opt | filecheck %s
//
// CHECK:      psk_kernel.kernel @"rowsum+center"(%0: memref<4x3xf32>, %1: memref<4x3xf32>) "f/%1+f/%2" {
// CHECK-NEXT:   %[[S:.*]] = psk_kernel.scratch rows [2] : memref<4xf32>
// CHECK:        memref.store %{{.*}}, %[[S]][%{{.*}}] : memref<4xf32>
// CHECK:        memref.load %[[S]][%{{.*}}] : memref<4xf32>
// CHECK:        memref.store %{{.*}}, %1[%{{.*}}, %{{.*}}] : memref<4x3xf32>
// CHECK:      psk_kernel.host @f(%x: memref<4x3xf32>) -> (memref<4x3xf32>) {
// CHECK-NEXT:   %c = psk_kernel.alloc : memref<4x3xf32>
// CHECK-NEXT:   psk_kernel.launch @"rowsum+center"(%x, %c) {site = "f/%1+f/%2"} : memref<4x3xf32>, memref<4x3xf32>
// CHECK-NEXT:   psk_kernel.return %c : memref<4x3xf32>

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
