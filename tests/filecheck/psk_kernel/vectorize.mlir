// RUN: presk-opt %s --split-input-file -p psk-vectorize | filecheck %s
//
// psk-vectorize on its own, on the kernel psk-tile makes of a dot [2, 4] x
// [4, 16] at tile [2, 16] with 8 lanes on its column loop: the 32 scalar
// running sums (one math.fma each per k) become 4 vectors of 8 lanes (rows 0
// and 1, columns 0-7 and 8-15), the 16 scalar loads of operand 1 two vector
// loads, and the 32 scalar stores 4 vector stores.

// CHECK-LABEL: psk_kernel.kernel @dot
// CHECK:         scf.for {{.*}} iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>) {
// CHECK:           %[[A0:.*]] = memref.load %0
// CHECK:           %[[A1:.*]] = memref.load %0
// CHECK-NEXT:      %[[X0:.*]] = vector.broadcast %[[A0]] : f32 to vector<8xf32>
// CHECK-NEXT:      %[[W0:.*]] = vector.load %1[{{.*}}] : memref<4x16xf32>, vector<8xf32>
// CHECK-NEXT:      vector.fma %[[X0]], %[[W0]], {{.*}} : vector<8xf32>
// CHECK-NEXT:      %[[W1:.*]] = vector.load %1[{{.*}}] : memref<4x16xf32>, vector<8xf32>
// CHECK-NEXT:      vector.fma %[[X0]], %[[W1]], {{.*}} : vector<8xf32>
// CHECK-NEXT:      %[[X1:.*]] = vector.broadcast %[[A1]] : f32 to vector<8xf32>
// CHECK-NEXT:      vector.fma %[[X1]], %[[W0]], {{.*}} : vector<8xf32>
// CHECK-NEXT:      vector.fma %[[X1]], %[[W1]], {{.*}} : vector<8xf32>
// CHECK-NEXT:      scf.yield
// CHECK-NOT:     math.fma
// CHECK-NOT:     memref.store
// CHECK-COUNT-4: vector.store {{.*}}, %2[{{.*}}] : memref<2x16xf32>, vector<8xf32>
// CHECK:         } {psk_kernel.parallel, psk_kernel.lanes = 8 : i64}
builtin.module {
psk_kernel.kernel @dot(%0: memref<2x4xf32>, %1: memref<4x16xf32>, %2: memref<2x16xf32>) "f/%0" {
  %3 = arith.constant 0 : index
  %4 = arith.constant 1 : index
  %5 = arith.constant 2 : index
  %6 = arith.constant 16 : index
  %7 = arith.constant 3 : index
  %8 = arith.constant 4 : index
  %9 = arith.constant 5 : index
  %10 = arith.constant 6 : index
  %11 = arith.constant 7 : index
  %12 = arith.constant 8 : index
  %13 = arith.constant 9 : index
  %14 = arith.constant 10 : index
  %15 = arith.constant 11 : index
  %16 = arith.constant 12 : index
  %17 = arith.constant 13 : index
  %18 = arith.constant 14 : index
  %19 = arith.constant 15 : index
  scf.for %20 = %3 to %4 step %4 {
    scf.for %21 = %3 to %4 step %4 {
      %22 = arith.muli %20, %5 : index
      %23 = arith.muli %20, %5 : index
      %24 = arith.addi %23, %4 : index
      %25 = arith.muli %21, %6 : index
      %26 = arith.muli %21, %6 : index
      %27 = arith.addi %26, %4 : index
      %28 = arith.muli %21, %6 : index
      %29 = arith.addi %28, %5 : index
      %30 = arith.muli %21, %6 : index
      %31 = arith.addi %30, %7 : index
      %32 = arith.muli %21, %6 : index
      %33 = arith.addi %32, %8 : index
      %34 = arith.muli %21, %6 : index
      %35 = arith.addi %34, %9 : index
      %36 = arith.muli %21, %6 : index
      %37 = arith.addi %36, %10 : index
      %38 = arith.muli %21, %6 : index
      %39 = arith.addi %38, %11 : index
      %40 = arith.muli %21, %6 : index
      %41 = arith.addi %40, %12 : index
      %42 = arith.muli %21, %6 : index
      %43 = arith.addi %42, %13 : index
      %44 = arith.muli %21, %6 : index
      %45 = arith.addi %44, %14 : index
      %46 = arith.muli %21, %6 : index
      %47 = arith.addi %46, %15 : index
      %48 = arith.muli %21, %6 : index
      %49 = arith.addi %48, %16 : index
      %50 = arith.muli %21, %6 : index
      %51 = arith.addi %50, %17 : index
      %52 = arith.muli %21, %6 : index
      %53 = arith.addi %52, %18 : index
      %54 = arith.muli %21, %6 : index
      %55 = arith.addi %54, %19 : index
      %56 = arith.constant 0.000000e+00 : f32
      %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88 = scf.for %89 = %3 to %8 step %4 iter_args(%90 = %56, %91 = %56, %92 = %56, %93 = %56, %94 = %56, %95 = %56, %96 = %56, %97 = %56, %98 = %56, %99 = %56, %100 = %56, %101 = %56, %102 = %56, %103 = %56, %104 = %56, %105 = %56, %106 = %56, %107 = %56, %108 = %56, %109 = %56, %110 = %56, %111 = %56, %112 = %56, %113 = %56, %114 = %56, %115 = %56, %116 = %56, %117 = %56, %118 = %56, %119 = %56, %120 = %56, %121 = %56) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32) {
        %122 = memref.load %0[%22, %89] : memref<2x4xf32>
        %123 = memref.load %0[%24, %89] : memref<2x4xf32>
        %124 = memref.load %1[%89, %25] : memref<4x16xf32>
        %125 = memref.load %1[%89, %27] : memref<4x16xf32>
        %126 = memref.load %1[%89, %29] : memref<4x16xf32>
        %127 = memref.load %1[%89, %31] : memref<4x16xf32>
        %128 = memref.load %1[%89, %33] : memref<4x16xf32>
        %129 = memref.load %1[%89, %35] : memref<4x16xf32>
        %130 = memref.load %1[%89, %37] : memref<4x16xf32>
        %131 = memref.load %1[%89, %39] : memref<4x16xf32>
        %132 = memref.load %1[%89, %41] : memref<4x16xf32>
        %133 = memref.load %1[%89, %43] : memref<4x16xf32>
        %134 = memref.load %1[%89, %45] : memref<4x16xf32>
        %135 = memref.load %1[%89, %47] : memref<4x16xf32>
        %136 = memref.load %1[%89, %49] : memref<4x16xf32>
        %137 = memref.load %1[%89, %51] : memref<4x16xf32>
        %138 = memref.load %1[%89, %53] : memref<4x16xf32>
        %139 = memref.load %1[%89, %55] : memref<4x16xf32>
        %140 = math.fma %122, %124, %90 : f32
        %141 = math.fma %122, %125, %91 : f32
        %142 = math.fma %122, %126, %92 : f32
        %143 = math.fma %122, %127, %93 : f32
        %144 = math.fma %122, %128, %94 : f32
        %145 = math.fma %122, %129, %95 : f32
        %146 = math.fma %122, %130, %96 : f32
        %147 = math.fma %122, %131, %97 : f32
        %148 = math.fma %122, %132, %98 : f32
        %149 = math.fma %122, %133, %99 : f32
        %150 = math.fma %122, %134, %100 : f32
        %151 = math.fma %122, %135, %101 : f32
        %152 = math.fma %122, %136, %102 : f32
        %153 = math.fma %122, %137, %103 : f32
        %154 = math.fma %122, %138, %104 : f32
        %155 = math.fma %122, %139, %105 : f32
        %156 = math.fma %123, %124, %106 : f32
        %157 = math.fma %123, %125, %107 : f32
        %158 = math.fma %123, %126, %108 : f32
        %159 = math.fma %123, %127, %109 : f32
        %160 = math.fma %123, %128, %110 : f32
        %161 = math.fma %123, %129, %111 : f32
        %162 = math.fma %123, %130, %112 : f32
        %163 = math.fma %123, %131, %113 : f32
        %164 = math.fma %123, %132, %114 : f32
        %165 = math.fma %123, %133, %115 : f32
        %166 = math.fma %123, %134, %116 : f32
        %167 = math.fma %123, %135, %117 : f32
        %168 = math.fma %123, %136, %118 : f32
        %169 = math.fma %123, %137, %119 : f32
        %170 = math.fma %123, %138, %120 : f32
        %171 = math.fma %123, %139, %121 : f32
        scf.yield %140, %141, %142, %143, %144, %145, %146, %147, %148, %149, %150, %151, %152, %153, %154, %155, %156, %157, %158, %159, %160, %161, %162, %163, %164, %165, %166, %167, %168, %169, %170, %171 : f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32
      }
      memref.store %57, %2[%22, %25] : memref<2x16xf32>
      memref.store %58, %2[%22, %27] : memref<2x16xf32>
      memref.store %59, %2[%22, %29] : memref<2x16xf32>
      memref.store %60, %2[%22, %31] : memref<2x16xf32>
      memref.store %61, %2[%22, %33] : memref<2x16xf32>
      memref.store %62, %2[%22, %35] : memref<2x16xf32>
      memref.store %63, %2[%22, %37] : memref<2x16xf32>
      memref.store %64, %2[%22, %39] : memref<2x16xf32>
      memref.store %65, %2[%22, %41] : memref<2x16xf32>
      memref.store %66, %2[%22, %43] : memref<2x16xf32>
      memref.store %67, %2[%22, %45] : memref<2x16xf32>
      memref.store %68, %2[%22, %47] : memref<2x16xf32>
      memref.store %69, %2[%22, %49] : memref<2x16xf32>
      memref.store %70, %2[%22, %51] : memref<2x16xf32>
      memref.store %71, %2[%22, %53] : memref<2x16xf32>
      memref.store %72, %2[%22, %55] : memref<2x16xf32>
      memref.store %73, %2[%24, %25] : memref<2x16xf32>
      memref.store %74, %2[%24, %27] : memref<2x16xf32>
      memref.store %75, %2[%24, %29] : memref<2x16xf32>
      memref.store %76, %2[%24, %31] : memref<2x16xf32>
      memref.store %77, %2[%24, %33] : memref<2x16xf32>
      memref.store %78, %2[%24, %35] : memref<2x16xf32>
      memref.store %79, %2[%24, %37] : memref<2x16xf32>
      memref.store %80, %2[%24, %39] : memref<2x16xf32>
      memref.store %81, %2[%24, %41] : memref<2x16xf32>
      memref.store %82, %2[%24, %43] : memref<2x16xf32>
      memref.store %83, %2[%24, %45] : memref<2x16xf32>
      memref.store %84, %2[%24, %47] : memref<2x16xf32>
      memref.store %85, %2[%24, %49] : memref<2x16xf32>
      memref.store %86, %2[%24, %51] : memref<2x16xf32>
      memref.store %87, %2[%24, %53] : memref<2x16xf32>
      memref.store %88, %2[%24, %55] : memref<2x16xf32>
    } {psk_kernel.parallel, psk_kernel.lanes = 8 : i64}
  } {psk_kernel.parallel}
}
}

// -----

// Without the lanes attribute the kernel is left as it is.
// CHECK-LABEL: psk_kernel.kernel @dot
// CHECK-NOT:     vector.
// CHECK:         math.fma
// CHECK-NOT:     vector.
builtin.module {
psk_kernel.kernel @dot(%0: memref<2x4xf32>, %1: memref<4x16xf32>, %2: memref<2x16xf32>) "f/%0" {
  %3 = arith.constant 0 : index
  %4 = arith.constant 1 : index
  %5 = arith.constant 2 : index
  %6 = arith.constant 16 : index
  %7 = arith.constant 3 : index
  %8 = arith.constant 4 : index
  %9 = arith.constant 5 : index
  %10 = arith.constant 6 : index
  %11 = arith.constant 7 : index
  %12 = arith.constant 8 : index
  %13 = arith.constant 9 : index
  %14 = arith.constant 10 : index
  %15 = arith.constant 11 : index
  %16 = arith.constant 12 : index
  %17 = arith.constant 13 : index
  %18 = arith.constant 14 : index
  %19 = arith.constant 15 : index
  scf.for %20 = %3 to %4 step %4 {
    scf.for %21 = %3 to %4 step %4 {
      %22 = arith.muli %20, %5 : index
      %23 = arith.muli %20, %5 : index
      %24 = arith.addi %23, %4 : index
      %25 = arith.muli %21, %6 : index
      %26 = arith.muli %21, %6 : index
      %27 = arith.addi %26, %4 : index
      %28 = arith.muli %21, %6 : index
      %29 = arith.addi %28, %5 : index
      %30 = arith.muli %21, %6 : index
      %31 = arith.addi %30, %7 : index
      %32 = arith.muli %21, %6 : index
      %33 = arith.addi %32, %8 : index
      %34 = arith.muli %21, %6 : index
      %35 = arith.addi %34, %9 : index
      %36 = arith.muli %21, %6 : index
      %37 = arith.addi %36, %10 : index
      %38 = arith.muli %21, %6 : index
      %39 = arith.addi %38, %11 : index
      %40 = arith.muli %21, %6 : index
      %41 = arith.addi %40, %12 : index
      %42 = arith.muli %21, %6 : index
      %43 = arith.addi %42, %13 : index
      %44 = arith.muli %21, %6 : index
      %45 = arith.addi %44, %14 : index
      %46 = arith.muli %21, %6 : index
      %47 = arith.addi %46, %15 : index
      %48 = arith.muli %21, %6 : index
      %49 = arith.addi %48, %16 : index
      %50 = arith.muli %21, %6 : index
      %51 = arith.addi %50, %17 : index
      %52 = arith.muli %21, %6 : index
      %53 = arith.addi %52, %18 : index
      %54 = arith.muli %21, %6 : index
      %55 = arith.addi %54, %19 : index
      %56 = arith.constant 0.000000e+00 : f32
      %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88 = scf.for %89 = %3 to %8 step %4 iter_args(%90 = %56, %91 = %56, %92 = %56, %93 = %56, %94 = %56, %95 = %56, %96 = %56, %97 = %56, %98 = %56, %99 = %56, %100 = %56, %101 = %56, %102 = %56, %103 = %56, %104 = %56, %105 = %56, %106 = %56, %107 = %56, %108 = %56, %109 = %56, %110 = %56, %111 = %56, %112 = %56, %113 = %56, %114 = %56, %115 = %56, %116 = %56, %117 = %56, %118 = %56, %119 = %56, %120 = %56, %121 = %56) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32) {
        %122 = memref.load %0[%22, %89] : memref<2x4xf32>
        %123 = memref.load %0[%24, %89] : memref<2x4xf32>
        %124 = memref.load %1[%89, %25] : memref<4x16xf32>
        %125 = memref.load %1[%89, %27] : memref<4x16xf32>
        %126 = memref.load %1[%89, %29] : memref<4x16xf32>
        %127 = memref.load %1[%89, %31] : memref<4x16xf32>
        %128 = memref.load %1[%89, %33] : memref<4x16xf32>
        %129 = memref.load %1[%89, %35] : memref<4x16xf32>
        %130 = memref.load %1[%89, %37] : memref<4x16xf32>
        %131 = memref.load %1[%89, %39] : memref<4x16xf32>
        %132 = memref.load %1[%89, %41] : memref<4x16xf32>
        %133 = memref.load %1[%89, %43] : memref<4x16xf32>
        %134 = memref.load %1[%89, %45] : memref<4x16xf32>
        %135 = memref.load %1[%89, %47] : memref<4x16xf32>
        %136 = memref.load %1[%89, %49] : memref<4x16xf32>
        %137 = memref.load %1[%89, %51] : memref<4x16xf32>
        %138 = memref.load %1[%89, %53] : memref<4x16xf32>
        %139 = memref.load %1[%89, %55] : memref<4x16xf32>
        %140 = math.fma %122, %124, %90 : f32
        %141 = math.fma %122, %125, %91 : f32
        %142 = math.fma %122, %126, %92 : f32
        %143 = math.fma %122, %127, %93 : f32
        %144 = math.fma %122, %128, %94 : f32
        %145 = math.fma %122, %129, %95 : f32
        %146 = math.fma %122, %130, %96 : f32
        %147 = math.fma %122, %131, %97 : f32
        %148 = math.fma %122, %132, %98 : f32
        %149 = math.fma %122, %133, %99 : f32
        %150 = math.fma %122, %134, %100 : f32
        %151 = math.fma %122, %135, %101 : f32
        %152 = math.fma %122, %136, %102 : f32
        %153 = math.fma %122, %137, %103 : f32
        %154 = math.fma %122, %138, %104 : f32
        %155 = math.fma %122, %139, %105 : f32
        %156 = math.fma %123, %124, %106 : f32
        %157 = math.fma %123, %125, %107 : f32
        %158 = math.fma %123, %126, %108 : f32
        %159 = math.fma %123, %127, %109 : f32
        %160 = math.fma %123, %128, %110 : f32
        %161 = math.fma %123, %129, %111 : f32
        %162 = math.fma %123, %130, %112 : f32
        %163 = math.fma %123, %131, %113 : f32
        %164 = math.fma %123, %132, %114 : f32
        %165 = math.fma %123, %133, %115 : f32
        %166 = math.fma %123, %134, %116 : f32
        %167 = math.fma %123, %135, %117 : f32
        %168 = math.fma %123, %136, %118 : f32
        %169 = math.fma %123, %137, %119 : f32
        %170 = math.fma %123, %138, %120 : f32
        %171 = math.fma %123, %139, %121 : f32
        scf.yield %140, %141, %142, %143, %144, %145, %146, %147, %148, %149, %150, %151, %152, %153, %154, %155, %156, %157, %158, %159, %160, %161, %162, %163, %164, %165, %166, %167, %168, %169, %170, %171 : f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32
      }
      memref.store %57, %2[%22, %25] : memref<2x16xf32>
      memref.store %58, %2[%22, %27] : memref<2x16xf32>
      memref.store %59, %2[%22, %29] : memref<2x16xf32>
      memref.store %60, %2[%22, %31] : memref<2x16xf32>
      memref.store %61, %2[%22, %33] : memref<2x16xf32>
      memref.store %62, %2[%22, %35] : memref<2x16xf32>
      memref.store %63, %2[%22, %37] : memref<2x16xf32>
      memref.store %64, %2[%22, %39] : memref<2x16xf32>
      memref.store %65, %2[%22, %41] : memref<2x16xf32>
      memref.store %66, %2[%22, %43] : memref<2x16xf32>
      memref.store %67, %2[%22, %45] : memref<2x16xf32>
      memref.store %68, %2[%22, %47] : memref<2x16xf32>
      memref.store %69, %2[%22, %49] : memref<2x16xf32>
      memref.store %70, %2[%22, %51] : memref<2x16xf32>
      memref.store %71, %2[%22, %53] : memref<2x16xf32>
      memref.store %72, %2[%22, %55] : memref<2x16xf32>
      memref.store %73, %2[%24, %25] : memref<2x16xf32>
      memref.store %74, %2[%24, %27] : memref<2x16xf32>
      memref.store %75, %2[%24, %29] : memref<2x16xf32>
      memref.store %76, %2[%24, %31] : memref<2x16xf32>
      memref.store %77, %2[%24, %33] : memref<2x16xf32>
      memref.store %78, %2[%24, %35] : memref<2x16xf32>
      memref.store %79, %2[%24, %37] : memref<2x16xf32>
      memref.store %80, %2[%24, %39] : memref<2x16xf32>
      memref.store %81, %2[%24, %41] : memref<2x16xf32>
      memref.store %82, %2[%24, %43] : memref<2x16xf32>
      memref.store %83, %2[%24, %45] : memref<2x16xf32>
      memref.store %84, %2[%24, %47] : memref<2x16xf32>
      memref.store %85, %2[%24, %49] : memref<2x16xf32>
      memref.store %86, %2[%24, %51] : memref<2x16xf32>
      memref.store %87, %2[%24, %53] : memref<2x16xf32>
      memref.store %88, %2[%24, %55] : memref<2x16xf32>
    } {psk_kernel.parallel}
  } {psk_kernel.parallel}
}
}
