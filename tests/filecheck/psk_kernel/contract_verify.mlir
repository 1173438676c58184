// RUN: not presk-opt %s --split-input-file 2>&1 | filecheck %s
//
// psk_kernel.contract's verifier, on PSK-Kernel written by hand: each buffer
// has one axis per name; a blocked operand 1 (`rhs_block`, what psk-pack
// makes of an NN contraction's) has one more, its blocks as wide as
// `rhs_block`, and K, J as its last named axes. Each is a located error,
// never a traceback.

// CHECK: contract_verify.mlir:[[# @LINE + 2]]:3: error: E2001: the lhs buffer memref<4x8x1xf32> has 3 axes, not 2
psk_kernel.kernel @dot(%0: memref<4x8x1xf32>, %1: memref<8x16xf32>, %2: memref<4x16xf32>) "f/%0" {
  psk_kernel.contract %0, %1 -> %2 {outer = [], i = "i", j = "j", k = "k", lhs_axes = ["i", "k"], rhs_axes = ["k", "j"], out_axes = ["i", "j"], arith_type = f32} : memref<4x8x1xf32>, memref<8x16xf32> -> memref<4x16xf32>
}

// -----

// CHECK: contract_verify.mlir:[[# @LINE + 2]]:3: error: E2001: the rhs buffer memref<8x16xf32> has 2 axes, not 3
psk_kernel.kernel @dot(%0: memref<4x8xf32>, %1: memref<8x16xf32>, %2: memref<4x16xf32>) "f/%0" {
  psk_kernel.contract %0, %1 -> %2 {outer = [], i = "i", j = "j", k = "k", lhs_axes = ["i", "k"], rhs_axes = ["k", "j"], out_axes = ["i", "j"], arith_type = f32, rhs_block = 16 : i64} : memref<4x8xf32>, memref<8x16xf32> -> memref<4x16xf32>
}

// -----

// CHECK: contract_verify.mlir:[[# @LINE + 2]]:3: error: E2001: the blocked panel memref<2x8x8xf32> has blocks of 8 columns, not 16
psk_kernel.kernel @dot(%0: memref<4x8xf32>, %1: memref<2x8x8xf32>, %2: memref<4x16xf32>) "f/%0" {
  psk_kernel.contract %0, %1 -> %2 {outer = [], i = "i", j = "j", k = "k", lhs_axes = ["i", "k"], rhs_axes = ["k", "j"], out_axes = ["i", "j"], arith_type = f32, rhs_block = 16 : i64} : memref<4x8xf32>, memref<2x8x8xf32> -> memref<4x16xf32>
}

// -----

// CHECK: contract_verify.mlir:[[# @LINE + 2]]:3: error: E2001: a blocked operand 1 is read along K, then J: its axes end in K, J
psk_kernel.kernel @dot(%0: memref<4x8xf32>, %1: memref<1x16x8xf32>, %2: memref<4x16xf32>) "f/%0" {
  psk_kernel.contract %0, %1 -> %2 {outer = [], i = "i", j = "j", k = "k", lhs_axes = ["i", "k"], rhs_axes = ["j", "k"], out_axes = ["i", "j"], arith_type = f32, nt, rhs_block = 8 : i64} : memref<4x8xf32>, memref<1x16x8xf32> -> memref<4x16xf32>
}

// -----

// An epilogue adds or multiplies, nothing else.
// CHECK: contract_verify.mlir:[[# @LINE + 2]]:3: error: E2001: epilogue_op is one of add, mul, not 'div'
psk_kernel.kernel @dot(%0: memref<4x8xf32>, %1: memref<8x16xf32>, %2: memref<4x16xf32>) "f/%0" {
  psk_kernel.contract %0, %1 -> %2 {outer = [], i = "i", j = "j", k = "k", lhs_axes = ["i", "k"], rhs_axes = ["k", "j"], out_axes = ["i", "j"], arith_type = f32, addend_literal = 2.0 : f32, epilogue_op = "div"} : memref<4x8xf32>, memref<8x16xf32> -> memref<4x16xf32>
}
