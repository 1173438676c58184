// RUN: not presk-opt %s --split-input-file -p psk-pack 2>&1 | filecheck %s --check-prefix=PACK
// RUN: not presk-opt %s --split-input-file -p psk-epilogue 2>&1 | filecheck %s --check-prefix=EPILOGUE
// RUN: not presk-opt %s --split-input-file -p psk-vectorize 2>&1 | filecheck %s --check-prefix=VECTORIZE
//
// The layout passes' own guards, on PSK-Kernel written by hand (the plan's
// checks refuse these earlier, on the program): each is an error naming
// what is wrong, never a traceback. Each RUN line applies one pass to every
// chunk; a chunk meant for another pass passes through it unchanged.

// psk-pack: a pack on a row-wise contraction, which has no tile to block its operand 1 by (condition 3)
// PACK: error: E7002: nest "f/%0", decision "pack": condition 3: a row-wise contraction has no tile, so no blocked panel to read
psk_kernel.kernel @dot(%0: memref<4x8xf32>, %1: memref<8x16xf32>, %2: memref<4x16xf32>) "f/%0" attributes {layout = #psk_realize.layout<pack = true, default(form = "row-wise")>} {
  psk_kernel.contract %0, %1 -> %2 {outer = [], i = "i", j = "j", k = "k", lhs_axes = ["i", "k"], rhs_axes = ["k", "j"], out_axes = ["i", "j"], arith_type = f32} : memref<4x8xf32>, memref<8x16xf32> -> memref<4x16xf32>
}

// -----

// psk-epilogue: the add stores another type than the product
// EPILOGUE: error: E7002: nest "f/%0", decision "epilogue": the add stores bf16, the product f32: the storage types differ
psk_kernel.kernel @dot(%0: memref<4x8xf32>, %1: memref<8x16xf32>, %2: memref<4x16xf32>) "f/%0" attributes {layout = #psk_realize.layout<epilogue = true, default(form = "tiled", tile = [1, 8])>} {
  psk_kernel.contract %0, %1 -> %2 {outer = [], i = "i", j = "j", k = "k", lhs_axes = ["i", "k"], rhs_axes = ["k", "j"], out_axes = ["i", "j"], arith_type = f32} : memref<4x8xf32>, memref<8x16xf32> -> memref<4x16xf32>
}
psk_kernel.kernel @add(%0: memref<4x16xf32>, %1: memref<16xf32>, %2: memref<4x16xbf16>) "f/%1" {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c16 = arith.constant 16 : index
  scf.for %i = %c0 to %c4 step %c1 {
    scf.for %j = %c0 to %c16 step %c1 {
      %x = memref.load %0[%i, %j] : memref<4x16xf32>
      %b = memref.load %1[%j] : memref<16xf32>
      %y = arith.addf %x, %b : f32
      %z = arith.truncf %y : f32 to bf16
      memref.store %z, %2[%i, %j] : memref<4x16xbf16>
    }
  }
}
psk_kernel.host @f(%0: memref<4x8xf32>, %1: memref<8x16xf32>, %b: memref<16xf32>) -> (memref<4x16xbf16>) {
  %2 = psk_kernel.alloc : memref<4x16xf32>
  psk_kernel.launch @dot(%0, %1, %2) {site = "f/%0"} : memref<4x8xf32>, memref<8x16xf32>, memref<4x16xf32>
  %3 = psk_kernel.alloc : memref<4x16xbf16>
  psk_kernel.launch @add(%2, %b, %3) {site = "f/%1"} : memref<4x16xf32>, memref<16xf32>, memref<4x16xbf16>
  psk_kernel.return %3 : memref<4x16xbf16>
}

// -----

// psk-vectorize: a loop stating lanes that holds no running sums
// VECTORIZE: passes_refused.mlir:{{[0-9]+}}:3: error: E3003: psk-vectorize: a loop states lanes = 8 but holds no running sums
psk_kernel.kernel @copy(%0: memref<16xf32>, %1: memref<16xf32>) "f/%0" {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  scf.for %j = %c0 to %c16 step %c1 {
    %x = memref.load %0[%j] : memref<16xf32>
    memref.store %x, %1[%j] : memref<16xf32>
  } {psk_kernel.parallel, psk_kernel.lanes = 8 : i64}
}

// -----

// psk-vectorize: a loop stating lanes whose fmas are no register tile
// VECTORIZE: passes_refused.mlir:{{[0-9]+}}:3: error: E3003: psk-vectorize: the loop stating lanes = 8 is not the column loop of a register tile whose columns come in groups of 8 consecutive elements of operand 1, each group updated with one operand-0 value
psk_kernel.kernel @cube(%0: memref<16xf32>, %1: memref<16xf32>) "f/%0" {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  scf.for %j = %c0 to %c16 step %c1 {
    %x = memref.load %0[%j] : memref<16xf32>
    %y = math.fma %x, %x, %x : f32
    memref.store %y, %1[%j] : memref<16xf32>
  } {psk_kernel.parallel, psk_kernel.lanes = 8 : i64}
}
