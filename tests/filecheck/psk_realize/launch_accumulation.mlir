// RUN: env PRESK_THREADS=2 presk-opt %s --split-input-file --verify-diagnostics -p psk-verify-layout
//
// Condition 7, at launch: a running sum kept in the output buffer (the
// row-wise form, or a k-block loop enclosing the I or J block loop in the
// order) and a softmax in two passes (exp(x − m) stored, then divided in
// place) need the storage type to be the arithmetic type: none of them on
// bf16, which stores in bf16 and computes in f32.

// accepted: in f32 and f64, every running sum may live in the output
!A = !psk_core.tensor<[i: 4, k: 64]>
!W = !psk_core.tensor<[k: 64, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> (!O, !O, !O) {
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <form = "row-wise"> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.nest "f/%1" realize <f64, f64> layout <kblock = 32, order = "KIJ"> : !O {
    %1 = psk_core.dot %a, %w : !O
    psk_realize.yield %1 : !O
  }
  %2 = psk_realize.nest "f/%2" realize <f32, f32> layout <passes = 2> : !O {
    %2 = psk_core.softmax %1 [j] : !O
    psk_realize.yield %2 : !O
  }
  func.return %0, %1, %2 : !O, !O, !O
}

// -----

// accepted: in bf16, a k-block innermost keeps the sums in registers, and three passes
!A = !psk_core.tensor<[i: 4, k: 64]>
!W = !psk_core.tensor<[k: 64, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!M = !psk_core.index<[i: 4, j: 16], 2>
func.func @f(%a: !A, %w: !W, %m: !M) -> (!O, !O, !O) {
  %0 = psk_realize.nest "f/%0" realize <bf16, f32> layout <kblock = 32, order = "JIK"> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.nest "f/%1" realize <bf16, f32> layout <kblock = 32> : !O {
    %1 = psk_core.dot %a, %w : !O
    psk_realize.yield %1 : !O
  }
  %2 = psk_realize.nest "f/%2" realize <bf16, f32> layout <passes = 3> : !O {
    %2 = psk_core.softmax %1 [j] mask %m : !O
    psk_realize.yield %2 : !O
  }
  func.return %0, %1, %2 : !O, !O, !O
}

// -----

// accepted: the default of a bf16 dot whose J is no multiple of eight is tiled [1, 1], not row-wise
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 12]>
!O = !psk_core.tensor<[i: 4, j: 12]>
func.func @f(%a: !A, %w: !W) -> !O {
  %0 = psk_realize.nest "f/%0" realize <bf16, f32> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// the row-wise form in bf16
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 12]>
!O = !psk_core.tensor<[i: 4, j: 12]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "form": condition 7: the row-wise form keeps each running sum in the output buffer, stored in bf16 while the arithmetic is f32, from one k to the next, which needs the storage type to be the arithmetic type}}
  %0 = psk_realize.nest "f/%0" realize <bf16, f32> layout <form = "row-wise"> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// a k-block loop enclosing both block loops, in bf16
!A = !psk_core.tensor<[i: 4, k: 64]>
!W = !psk_core.tensor<[k: 64, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "order": condition 7: with the order "KIJ" the k-block loop encloses the I block loop and the J block loop, so each running sum is kept in the output buffer, stored in bf16 while the arithmetic is f32, from one block of K to the next, which needs the storage type to be the arithmetic type}}
  %0 = psk_realize.nest "f/%0" realize <bf16, f32> layout <kblock = 32, order = "KIJ"> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// a k-block loop enclosing the J block loop, in bf16 (attention's values)
!P = !psk_core.tensor<[batch: 2, heads: 2, seq: 8, seq2: 64]>
!V = !psk_core.tensor<[batch: 2, heads: 2, seq2: 64, hd: 16]>
!O = !psk_core.tensor<[batch: 2, heads: 2, seq: 8, hd: 16]>
func.func @f(%p: !P, %v: !V) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "order": condition 7: with the order "IKJ" the k-block loop encloses the J block loop, so each running sum is kept in the output buffer}}
  %0 = psk_realize.nest "f/%0" realize <bf16, f32> layout <tile = [4, 8], kblock = 32, order = "IKJ"> : !O {
    %0 = psk_core.ein %p[batch, heads, seq, seq2], %v[batch, heads, seq2, hd] : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// a softmax in two passes, in bf16
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "passes": condition 7: two passes store exp(x − m) in the output buffer, stored in bf16 while the arithmetic is f32, and divide it in place, which needs the storage type to be the arithmetic type}}
  %0 = psk_realize.nest "f/%0" realize <bf16, f32> layout <passes = 2> : !S {
    %0 = psk_core.softmax %x [t] : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// a masked softmax in two passes, in bf16 (attention's)
!S = !psk_core.tensor<[batch: 2, heads: 2, seq: 8, seq2: 8]>
!M = !psk_core.index<[seq: 8, seq2: 8], 2>
func.func @f(%x: !S, %m: !M) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "passes": condition 7: two passes store exp(x − m) in the output buffer}}
  %0 = psk_realize.nest "f/%0" realize <bf16, f32> layout <passes = 2, split = {depth = 1, workers = 2}> : !S {
    %0 = psk_core.softmax %x [seq2] mask %m : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}
