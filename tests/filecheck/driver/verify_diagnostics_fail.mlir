// RUN: not presk-opt %S/Inputs/unmet.mlir --split-input-file --verify-diagnostics 2>&1 | filecheck %s
//
// An expectation nothing meets and an error nothing expects both fail the run.

// CHECK: unmet.mlir:2:6: error: expected error "E2001: this error never happens" was not produced
// CHECK: unmet.mlir:9:3: error: unexpected error: E2001: Expected arguments to have the same types
// CHECK: unmet.mlir:16:3: error: unexpected error: E2001:
// CHECK: unmet.mlir:15:6: error: expected error "E2001" was not produced
// CHECK-NOT: Traceback
