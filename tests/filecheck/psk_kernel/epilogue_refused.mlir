// RUN: presk-opt %s --split-input-file --verify-diagnostics -p psk-epilogue
//
// psk-epilogue's own guard of the seed's epilogue conditions, on the
// launches (the plan's checks refuse these earlier, on the program; this
// IR is written by hand, past them).

// the product is a result of the entry
// expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": the product's value is a result of the entry, which its own kernel must store}}
psk_kernel.kernel @dot(%0: memref<4x8xf32>, %1: memref<8x16xf32>, %2: memref<4x16xf32>) "f/%0" attributes {layout = #psk_realize.layout<epilogue = true, default(form = "tiled", tile = [1, 8])>} {
  psk_kernel.contract %0, %1 -> %2 {outer = [], i = "i", j = "j", k = "k", lhs_axes = ["i", "k"], rhs_axes = ["k", "j"], out_axes = ["i", "j"], arith_type = f32} : memref<4x8xf32>, memref<8x16xf32> -> memref<4x16xf32>
}
psk_kernel.host @f(%0: memref<4x8xf32>, %1: memref<8x16xf32>) -> (memref<4x16xf32>) {
  %2 = psk_kernel.alloc : memref<4x16xf32>
  psk_kernel.launch @dot(%0, %1, %2) {site = "f/%0"} : memref<4x8xf32>, memref<8x16xf32>, memref<4x16xf32>
  psk_kernel.return %2 : memref<4x16xf32>
}

// -----

// the product is read by a kernel that is not a lone addition
// expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": the product's value is read by another launch than its add or mul}}
psk_kernel.kernel @dot(%0: memref<4x8xf32>, %1: memref<8x16xf32>, %2: memref<4x16xf32>) "f/%0" attributes {layout = #psk_realize.layout<epilogue = true, default(form = "tiled", tile = [1, 8])>} {
  psk_kernel.contract %0, %1 -> %2 {outer = [], i = "i", j = "j", k = "k", lhs_axes = ["i", "k"], rhs_axes = ["k", "j"], out_axes = ["i", "j"], arith_type = f32} : memref<4x8xf32>, memref<8x16xf32> -> memref<4x16xf32>
}
psk_kernel.kernel @mul(%0: memref<4x16xf32>, %1: memref<4x16xf32>) "f/%1" {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c16 = arith.constant 16 : index
  scf.for %i = %c0 to %c4 step %c1 {
    scf.for %j = %c0 to %c16 step %c1 {
      %x = memref.load %0[%i, %j] : memref<4x16xf32>
      %y = arith.mulf %x, %x : f32
      memref.store %y, %1[%i, %j] : memref<4x16xf32>
    }
  }
}
psk_kernel.host @f(%0: memref<4x8xf32>, %1: memref<8x16xf32>) -> (memref<4x16xf32>) {
  %2 = psk_kernel.alloc : memref<4x16xf32>
  psk_kernel.launch @dot(%0, %1, %2) {site = "f/%0"} : memref<4x8xf32>, memref<8x16xf32>, memref<4x16xf32>
  %3 = psk_kernel.alloc : memref<4x16xf32>
  psk_kernel.launch @mul(%2, %3) {site = "f/%1"} : memref<4x16xf32>, memref<4x16xf32>
  psk_kernel.return %3 : memref<4x16xf32>
}

// -----

// with lanes, an operand [j, i] runs along J but not innermost
// expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": with lanes, the added operand runs along J (j) as its innermost axis or not at all; its axes are j, i}}
psk_kernel.kernel @dot(%0: memref<16x8xf32>, %1: memref<8x16xf32>, %2: memref<16x16xf32>) "f/%0" attributes {layout = #psk_realize.layout<lanes = 8, epilogue = true, default(form = "tiled", tile = [1, 8])>} {
  psk_kernel.contract %0, %1 -> %2 {outer = [], i = "i", j = "j", k = "k", lhs_axes = ["i", "k"], rhs_axes = ["k", "j"], out_axes = ["i", "j"], arith_type = f32} : memref<16x8xf32>, memref<8x16xf32> -> memref<16x16xf32>
}
psk_kernel.kernel @add(%0: memref<16x16xf32>, %1: memref<16x16xf32>, %2: memref<16x16xf32>) "f/%1" {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  scf.for %i = %c0 to %c16 step %c1 {
    scf.for %j = %c0 to %c16 step %c1 {
      %x = memref.load %0[%i, %j] : memref<16x16xf32>
      %t = memref.load %1[%j, %i] : memref<16x16xf32>
      %y = arith.addf %x, %t : f32
      memref.store %y, %2[%i, %j] : memref<16x16xf32>
    }
  }
}
psk_kernel.host @f(%0: memref<16x8xf32>, %1: memref<8x16xf32>, %t: memref<16x16xf32>) -> (memref<16x16xf32>) {
  %2 = psk_kernel.alloc : memref<16x16xf32>
  psk_kernel.launch @dot(%0, %1, %2) {site = "f/%0"} : memref<16x8xf32>, memref<8x16xf32>, memref<16x16xf32>
  %3 = psk_kernel.alloc : memref<16x16xf32>
  psk_kernel.launch @add(%2, %t, %3) {site = "f/%1"} : memref<16x16xf32>, memref<16x16xf32>, memref<16x16xf32>
  psk_kernel.return %3 : memref<16x16xf32>
}
