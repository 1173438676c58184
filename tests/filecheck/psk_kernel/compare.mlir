// RUN: presk dump %s --stage kernel --entry relu --realize bf16 | filecheck %s
// RUN: presk run %s --entry relu --realize f32 --backend native --print-values | filecheck %s --check-prefix=OUT
// RUN: presk run %s --entry relu --realize f32 --backend kernel --print-values | filecheck %s --check-prefix=OUT

// `compare` is a nest of its own: both operands widened exactly to one type
// (bf16 to f32), an ordered `arith.cmpf`, and the mask as i64, which the
// `where` reads. psk-fuse-launches puts both loops in one kernel and hands
// the mask to the `where` as a value; the mask's buffer, which nothing reads
// any more, goes with its store (psk-promote-to-scratch). Both executors
// give the same values.

func.func @relu(%x: !psk_core.tensor<[n: 4]>, %y: !psk_core.tensor<[n: 4]>) -> !psk_core.tensor<[n: 4]> {
  %m = psk_core.compare gt %x, %y : !psk_core.index<[n: 4], 2>
  %0 = psk_core.where %m, %x, %y : !psk_core.tensor<[n: 4]>
  func.return %0 : !psk_core.tensor<[n: 4]>
}

// CHECK:      psk_kernel.kernel @"compare+where"(%0: memref<4xbf16>, %1: memref<4xbf16>, %2: memref<4xbf16>) "relu/%m+relu/%0" {
// CHECK:        %[[A:.*]] = memref.load %0[%[[I:.*]]] : memref<4xbf16>
// CHECK-NEXT:   %[[WA:.*]] = arith.extf %[[A]] : bf16 to f32
// CHECK-NEXT:   %[[B:.*]] = memref.load %1[%[[I]]] : memref<4xbf16>
// CHECK-NEXT:   %[[WB:.*]] = arith.extf %[[B]] : bf16 to f32
// CHECK-NEXT:   %[[C:.*]] = arith.cmpf ogt, %[[WA]], %[[WB]] : f32
// CHECK-NEXT:   %[[M:.*]] = arith.extui %[[C]] : i1 to i64
// CHECK-NOT:    memref.store %[[M]]
// CHECK:        arith.cmpi ne, %[[M]], %{{.*}} : i64
// CHECK:        memref.store %{{.*}}, %2[%[[I]]] : memref<4xbf16>

// OUT:      @relu (realization f32,
// OUT:        [0.12573022 0.36159506 1.304      0.94708097]
