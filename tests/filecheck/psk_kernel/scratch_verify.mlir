// RUN: presk-opt %s --split-input-file --verify-diagnostics
//
// psk_kernel.scratch's verifier: it folds leading axes of a static,
// row-major buffer onto 1 to n rows each, and it lives in a kernel.

psk_kernel.kernel @k(%0: memref<4xf32>) "f/%0" {
  // expected-error @+1 {{a scratch of memref<4xf32> folds 2 leading axes: it has 1}}
  %1 = psk_kernel.scratch rows [1, 1] : memref<4xf32>
}

// -----

psk_kernel.kernel @k(%0: memref<4xf32>) "f/%0" {
  // expected-error @+1 {{a scratch keeps 1 to 4 rows of axis 0 of memref<4x3xf32>, not 5}}
  %1 = psk_kernel.scratch rows [5] : memref<4x3xf32>
}

// -----

psk_kernel.kernel @k(%0: memref<4xf32>) "f/%0" {
  // expected-error @+1 {{a scratch keeps 1 to 4 rows of axis 0 of memref<4x3xf32>, not 0}}
  %1 = psk_kernel.scratch rows [0] : memref<4x3xf32>
}

// -----

psk_kernel.host @f(%x: memref<4xf32>) -> (memref<4xf32>) {
  // expected-error @+1 {{'psk_kernel.scratch' expects parent op 'psk_kernel.kernel'}}
  %1 = psk_kernel.scratch rows [1] : memref<4xf32>
  psk_kernel.return %x : memref<4xf32>
}
