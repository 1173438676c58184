// RUN: env PRESK_THREADS=2 presk-opt %s --split-input-file --verify-diagnostics -p psk-verify-layout
//
// Condition 8, at launch: the loop a split divides, at its depth, is
// parallel, with two iterations or more. Depth d counts the nest's loops
// outermost first: for a tiled contraction its outer axes, then its block
// loops in the order (I and J, and the k-block loop, which sums), then the
// loop over K; for a row-wise one its outer axes, I, K, J; for a softmax or
// a reduction its kept axes, then the reduced ones; for a group or any other
// nest the axes of its result.

// accepted: attention's scores split at depth 1, its heads; at depth 2, its I blocks
!Q = !psk_core.tensor<[batch: 2, heads: 2, seq: 16, hd: 32]>
!K = !psk_core.tensor<[batch: 2, heads: 2, seq2: 16, hd: 32]>
!S = !psk_core.tensor<[batch: 2, heads: 2, seq: 16, seq2: 16]>
func.func @f(%q: !Q, %k: !K) -> (!S, !S) {
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <tile = [4, 16], kblock = 32, order = "JIK", lanes = 8, split = {depth = 1, workers = 2}, pack = true> : !S {
    %0 = psk_core.ein %q[batch, heads, seq, hd], %k[batch, heads, seq2, hd] : !S
    psk_realize.yield %0 : !S
  }
  %1 = psk_realize.nest "f/%1" realize <f32, f32> layout <tile = [4, 8], split = {depth = 2, workers = 1}> : !S {
    %1 = psk_core.ein %q[batch, heads, seq, hd], %k[batch, heads, seq2, hd] : !S
    psk_realize.yield %1 : !S
  }
  func.return %0, %1 : !S, !S
}

// -----

// accepted: a dot's I and J block loops (depth 0 and 1), in either order
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> (!O, !O, !O) {
  %0 = psk_realize.nest "f/%0" realize <f64, f64> layout <split = {depth = 0, workers = 2}> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.nest "f/%1" realize <f64, f64> layout <split = {depth = 1, workers = 2}> : !O {
    %1 = psk_core.dot %a, %w : !O
    psk_realize.yield %1 : !O
  }
  %2 = psk_realize.nest "f/%2" realize <f64, f64> layout <tile = [4, 8], order = "JI", split = {depth = 0, workers = 2}> : !O {
    %2 = psk_core.dot %a, %w : !O
    psk_realize.yield %2 : !O
  }
  func.return %0, %1, %2 : !O, !O, !O
}

// -----

// accepted: the kept axes of a softmax and of a reduction, the axes of a group and of a gather
!X = !psk_core.tensor<[batch: 2, seq: 4, embed: 8]>
!R = !psk_core.tensor<[batch: 2, seq: 4]>
!E = !psk_core.tensor<[vocab: 16, embed: 8]>
!Ids = !psk_core.index<[batch: 2, seq: 4], 16>
func.func @f(%x: !X, %e: !E, %ids: !Ids) -> (!X, !R, !X, !X) {
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <passes = 2, split = {depth = 1, workers = 2}> : !X {
    %0 = psk_core.softmax %x [embed] : !X
    psk_realize.yield %0 : !X
  }
  %1 = psk_realize.nest "f/%1" realize <f32, f32> layout <split = {depth = 1, workers = 2}> : !R {
    %1 = psk_core.mean %x [embed] : !R
    psk_realize.yield %1 : !R
  }
  %2 = psk_realize.group "f/%2" realize <f32, f32> layout <split = {depth = 2, workers = 2}> : !X {
    %2 = psk_core.exp %x : !X
    psk_realize.yield %2 : !X
  }
  %3 = psk_realize.nest "f/%3" realize <f32, f32> layout <split = {depth = 0, workers = 2}> : !X {
    %3 = psk_core.gather %e, %ids : !X
    psk_realize.yield %3 : !X
  }
  func.return %0, %1, %2, %3 : !X, !R, !X, !X
}

// -----

// the split's loop has one iteration: a batch of one
!Q = !psk_core.tensor<[batch: 1, heads: 2, seq: 16, hd: 32]>
!K = !psk_core.tensor<[batch: 1, heads: 2, seq2: 16, hd: 32]>
!S = !psk_core.tensor<[batch: 1, heads: 2, seq: 16, seq2: 16]>
func.func @f(%q: !Q, %k: !K) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "split": condition 8: the split's loop at depth 0 is the loop over batch, with 1 iteration; a split divides a loop of two iterations or more}}
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <split = {depth = 0, workers = 2}> : !S {
    %0 = psk_core.ein %q[batch, heads, seq, hd], %k[batch, heads, seq2, hd] : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// the split's loop has one iteration: one block of J
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "split": condition 8: the split's loop at depth 1 is the J block loop (j in blocks of 16), with 1 iteration; a split divides a loop of two iterations or more}}
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <tile = [1, 16], split = {depth = 1, workers = 2}> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// the split's loop sums: the loop over K of a dot, below its two block loops
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "split": condition 8: the split's loop at depth 2 is the loop over K (k), which sums, so it is not parallel}}
  %0 = psk_realize.nest "f/%0" realize <f64, f64> layout <split = {depth = 2, workers = 2}> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// the split's loop sums: a k-block loop outermost
!A = !psk_core.tensor<[i: 4, k: 64]>
!W = !psk_core.tensor<[k: 64, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "split": condition 8: the split's loop at depth 0 is the k-block loop (k in blocks of 32), which sums, so it is not parallel}}
  %0 = psk_realize.nest "f/%0" realize <f64, f64> layout <kblock = 32, order = "KIJ", split = {depth = 0, workers = 2}> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// the split's loop sums: the loop over K of a row-wise dot
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 12]>
!O = !psk_core.tensor<[i: 4, j: 12]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "split": condition 8: the split's loop at depth 1 is the loop over K (k), which sums, so it is not parallel}}
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <split = {depth = 1, workers = 2}> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// the three-pass softmax runs its innermost kept axis in blocks of rows (16 f32 rows at most, the
// largest power of two dividing it): seq = 4 is one block, a loop of 1 iteration
!X = !psk_core.tensor<[batch: 2, seq: 4, embed: 8]>
func.func @f(%x: !X) -> !X {
  // expected-error @+1 {{E7002: nest "f/%0", decision "split": condition 8: the split's loop at depth 1 is the loop over seq in blocks of 4 rows, with 1 iteration; a split divides a loop of two iterations or more}}
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <split = {depth = 1, workers = 2}> : !X {
    %0 = psk_core.softmax %x [embed] : !X
    psk_realize.yield %0 : !X
  }
  func.return %0 : !X
}

// -----

// accepted: seq = 32 in blocks of 16 rows is a loop of 2 iterations
!Y = !psk_core.tensor<[batch: 2, seq: 32, embed: 8]>
func.func @f(%y: !Y) -> !Y {
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <split = {depth = 1, workers = 2}> : !Y {
    %0 = psk_core.softmax %y [embed] : !Y
    psk_realize.yield %0 : !Y
  }
  func.return %0 : !Y
}

// -----

// the split's loop sums: the axis of a softmax
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "split": condition 8: the split's loop at depth 1 is the loop over t, which sums, so it is not parallel}}
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <split = {depth = 1, workers = 2}> : !S {
    %0 = psk_core.softmax %x [t] : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// the split's loop sums: a reduced axis
!X = !psk_core.tensor<[batch: 2, seq: 4, embed: 8]>
!R = !psk_core.tensor<[batch: 2, seq: 4]>
func.func @f(%x: !X) -> !R {
  // expected-error @+1 {{E7002: nest "f/%0", decision "split": condition 8: the split's loop at depth 2 is the loop over embed, which sums, so it is not parallel}}
  %0 = psk_realize.nest "f/%0" realize <f64, f64> layout <split = {depth = 2, workers = 2}> : !R {
    %0 = psk_core.sum %x [embed] : !R
    psk_realize.yield %0 : !R
  }
  func.return %0 : !R
}

// -----

// no loop at that depth: a group of one axis
!X = !psk_core.tensor<[n: 8]>
func.func @f(%x: !X) -> !X {
  // expected-error @+1 {{E7002: nest "f/%0", decision "split": condition 8: the nest has 1 loop (the loop over n): there is no loop at depth 1 to split}}
  %0 = psk_realize.group "f/%0" realize <f32, f32> layout <split = {depth = 1, workers = 2}> : !X {
    %0 = psk_core.exp %x : !X
    psk_realize.yield %0 : !X
  }
  func.return %0 : !X
}

// -----

// no loop at all: a group computing a real
!R = !psk_core.real
func.func @f(%x: !R) -> !R {
  // expected-error @+1 {{E7002: nest "f/%0", decision "split": condition 8: the nest computes one value, without a loop: there is no loop at depth 0 to split}}
  %0 = psk_realize.group "f/%0" realize <f32, f32> layout <split = {depth = 0, workers = 2}> : !R {
    %0 = psk_core.exp %x : !R
    psk_realize.yield %0 : !R
  }
  func.return %0 : !R
}
