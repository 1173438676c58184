// RUN: env PRESK_THREADS=4 presk-opt %s --split-input-file --verify-diagnostics -p psk-verify-layout
//
// Condition 5, at launch: a split's workers are the machine's, p_M, or half
// of them. PRESK_THREADS sets p_M (here 4, so 4 and 2 are allowed); every
// kind of nest has the split.

// accepted: every worker, on a contraction, a softmax, a reduction and a group
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!R = !psk_core.tensor<[i: 4]>
func.func @f(%a: !A, %w: !W) -> (!O, !O, !R, !O) {
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <split = {depth = 0, workers = 4}> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  // in two passes: the three-pass kernel runs its 4 rows in one block of 4, a loop of 1 iteration (launch_split.mlir)
  %1 = psk_realize.nest "f/%1" realize <f32, f32> layout <passes = 2, split = {depth = 0, workers = 4}> : !O {
    %1 = psk_core.softmax %0 [j] : !O
    psk_realize.yield %1 : !O
  }
  %2 = psk_realize.nest "f/%2" realize <f32, f32> layout <split = {depth = 0, workers = 4}> : !R {
    %2 = psk_core.sum %1 [j] : !R
    psk_realize.yield %2 : !R
  }
  %3 = psk_realize.group "f/%3" realize <f32, f32> layout <split = {depth = 1, workers = 4}> : !O {
    %3 = psk_core.exp %1 : !O
    psk_realize.yield %3 : !O
  }
  func.return %0, %1, %2, %3 : !O, !O, !R, !O
}

// -----

// accepted: half of them, and no split
!X = !psk_core.tensor<[n: 8, m: 8]>
func.func @f(%x: !X) -> (!X, !X) {
  %0 = psk_realize.group "f/%0" realize <f64, f64> layout <split = {depth = 0, workers = 2}> : !X {
    %0 = psk_core.exp %x : !X
    psk_realize.yield %0 : !X
  }
  %1 = psk_realize.group "f/%1" realize <f64, f64> layout <split = "none"> : !X {
    %1 = psk_core.neg %x : !X
    psk_realize.yield %1 : !X
  }
  func.return %0, %1 : !X, !X
}

// -----

// three workers: neither 4 nor 2
!X = !psk_core.tensor<[n: 8, m: 8]>
func.func @f(%x: !X) -> !X {
  // expected-error @+1 {{E7002: nest "f/%0", decision "split": condition 5: a split's workers are this machine's 4 or half of them (2), not 3}}
  %0 = psk_realize.group "f/%0" realize <f64, f64> layout <split = {depth = 0, workers = 3}> : !X {
    %0 = psk_core.exp %x : !X
    psk_realize.yield %0 : !X
  }
  func.return %0 : !X
}

// -----

// one worker is no split of a machine of four
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "split": condition 5: a split's workers are this machine's 4 or half of them (2), not 1}}
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <split = {depth = 0, workers = 1}> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// more workers than the machine's: the seed's plan of ten
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "split": condition 5: a split's workers are this machine's 4 or half of them (2), not 10}}
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <passes = 2, split = {depth = 0, workers = 10}> : !S {
    %0 = psk_core.softmax %x [t] : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}
