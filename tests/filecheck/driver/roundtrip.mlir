// RUN: presk-opt %s | filecheck %s
// RUN: presk-opt %s > %t.once && presk-opt %t.once > %t.twice && diff %t.once %t.twice
// RUN: presk-opt %s | presk-opt - | filecheck %s
// RUN: presk-opt %s -o %t.out && filecheck %s --input-file=%t.out
//
// Printing keeps the file's type aliases (only the used ones, in definition
// order) and is a fixed point: printing the printed form changes nothing.

!i = i32
!vec = tensor<4x!i>
!unused = f64

// CHECK:      !i = i32
// CHECK-NEXT: !vec = tensor<4x!i>
// CHECK-NOT:  !unused
// CHECK-EMPTY:
// CHECK-NEXT: builtin.module {
// CHECK-NEXT:   func.func @double(%a: !i) -> !i {
// CHECK-NEXT:     %0 = arith.addi %a, %a : !i
// CHECK-NEXT:     func.return %0 : !i
// CHECK-NEXT:   }
// CHECK-NEXT:   func.func @splat(%v: !vec) -> !vec {
// CHECK-NEXT:     func.return %v : !vec
// CHECK-NEXT:   }
// CHECK-NEXT: }

func.func @double(%a: !i) -> !i {
  %0 = arith.addi %a, %a : !i
  func.return %0 : !i
}

func.func @splat(%v: tensor<4xi32>) -> tensor<4xi32> {
  func.return %v : tensor<4xi32>
}
