// RUN: presk-opt %s --split-input-file | filecheck %s
//
// Each chunk is parsed and printed on its own; the outputs are joined by the
// same marker, so chunk N of the output is chunk N of the input.

func.func @first() {
  func.return
}

// -----

!t = i64
func.func @second(%x: !t) -> !t {
  func.return %x : !t
}

// CHECK:      builtin.module {
// CHECK-NEXT:   func.func @first() {
// CHECK:      // -----
// CHECK-NEXT: !t = i64
// CHECK-EMPTY:
// CHECK-NEXT: builtin.module {
// CHECK-NEXT:   func.func @second(%x: !t) -> !t {
