// RUN: presk-opt %s -p cse,dce | filecheck %s
// RUN: presk-opt %s --pass-pipeline='builtin.module(cse, dce)' | filecheck %s
// RUN: presk-opt %s --pass-pipeline='any(cse,dce)' | filecheck %s
// RUN: presk-opt %s | filecheck %s --check-prefix=NOPASS
//
// Passes run in order on the whole module, named in xDSL's syntax (-p) or
// MLIR's (--pass-pipeline); both spell the same pipeline.

func.func @f(%a: i32) -> i32 {
  %0 = arith.addi %a, %a : i32
  %1 = arith.addi %a, %a : i32
  %2 = arith.muli %0, %1 : i32
  %unused = arith.muli %2, %2 : i32
  func.return %2 : i32
}

// CHECK:      func.func @f(%a: i32) -> i32 {
// CHECK-NEXT:   %0 = arith.addi %a, %a : i32
// CHECK-NEXT:   %1 = arith.muli %0, %0 : i32
// CHECK-NEXT:   func.return %1 : i32
// CHECK-NEXT: }

// NOPASS: %unused = arith.muli
