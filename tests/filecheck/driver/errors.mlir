// RUN: not presk-opt %s -p no-such-pass 2>&1 | filecheck %s --check-prefix=UNKNOWN
// RUN: not presk-opt %s -p csee 2>&1 | filecheck %s --check-prefix=CLOSE
// RUN: not presk-opt %s -p 'cse{bogus=1}' 2>&1 | filecheck %s --check-prefix=OPTION
// RUN: not presk-opt %s -p 'cse{' 2>&1 | filecheck %s --check-prefix=SYNTAX
// RUN: not presk-opt %s --pass-pipeline='builtin.module(func.func(cse))' 2>&1 | filecheck %s --check-prefix=NESTED
// RUN: not presk-opt %S/Inputs/does-not-exist.mlir 2>&1 | filecheck %s --check-prefix=MISSING
// RUN: not presk-opt %S/Inputs/type_error.mlir 2>&1 | filecheck %s --check-prefix=LOCATED
//
// Every user error is one `EXXXX` diagnostic and exit code 1, never a traceback.

func.func @f() {
  func.return
}

// UNKNOWN: presk: error: E3001: unknown pass 'no-such-pass'
// UNKNOWN-NOT: Traceback
// CLOSE: presk: error: E3001: unknown pass 'csee'; did you mean 'cse'?
// OPTION: presk: error: E3002: bad options for pass 'cse'
// SYNTAX: presk: error: E3002: bad pass pipeline 'cse{'
// NESTED: presk: error: E3002: {{.*}}passes nested on 'func.func' are not supported
// MISSING: presk: error: E0001: cannot open input file '{{.*}}does-not-exist.mlir': no such file

// LOCATED:      type_error.mlir:3:3: error: E2001: Expected arguments to have the same types as the function output types
// LOCATED-NEXT: {{^}}  func.return %a : i32
// LOCATED-NEXT: {{^}}  ^
