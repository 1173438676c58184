// RUN: presk-opt %s --split-input-file --verify-diagnostics | filecheck %s
//
// Chunks that fail print nothing; their errors must be exactly the
// expected-error annotations. Chunks that succeed are printed as usual.

func.func @ok(%a: i32) -> i32 {
  func.return %a : i32
}
// CHECK: func.func @ok

// -----

func.func @bad_return(%a: i32) -> i64 {
  func.return %a : i32  // expected-error {{E2001: Expected arguments to have the same types as the function output types}}
}

// -----

func.func @mismatch(%a: i32, %b: i64) -> i32 {
  // expected-error @+1 {{E2001: operand is used with type i32}}
  %0 = arith.addi %a, %b : i32
  func.return %0 : i32
}

// -----

func.func @generic(%a: i32, %b: i64) -> i32 {
  %0 = "arith.addi"(%a, %b) : (i32, i64) -> i32
  // expected-error @above {{E2001: operand 'rhs' at position 1 does not verify}}
  func.return %0 : i32
}

// -----

func.func @caller(%a: i32) -> i32 {
  // expected-error @below {{E2002: call to unknown function @missing}}
  %0 = func.call @missing(%a) : (i32) -> i32
  func.return %0 : i32
}

// -----

func.func @f() {
  %0 = arith.constant 1 : i32
  %1 = arith.addi %0, %undefined : i32  // expected-error {{E1004: use of undefined value %undefined}}
  func.return
}

// -----

func.func @g() {
  %0 = no_such.op : () -> ()  // expected-error {{E1002: Operation no_such.op is not registered}}
  func.return
}

// -----

func.func @h(%a: !no_such.type) {  // expected-error {{E1003: 'no_such.type' is not registered}}
  func.return
}

// -----

func.func @last() {
  func.return
}
// CHECK: func.func @last
