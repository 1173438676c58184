// RUN: env PRESK_THREADS=2 presk-opt %s --split-input-file --verify-diagnostics -p psk-verify-layout
//
// Condition 4, at launch: lanes are 1 or one of the machine's register widths
// for the storage type, divide the tile's n_j, and on an NT contraction need
// the pack. The register widths are the host's (read from the CPU): every
// width used here is one an AVX2 and an AVX-512 machine both have (8 in f32,
// 4 in f64), every refused one neither has; the machine-specific widths (16
// in f32, 8 in f64 with AVX-512 only) are in tests/unit/test_verify_layout.py.

// accepted: 8 lanes in f32 across a tile of 16 columns, and 8 across 8
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> (!O, !O) {
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <tile = [4, 16], lanes = 8> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.nest "f/%1" realize <f32, f32> layout <lanes = 8> : !O {
    %1 = psk_core.dot %a, %w : !O
    psk_realize.yield %1 : !O
  }
  func.return %0, %1 : !O, !O
}

// -----

// accepted: 4 lanes in f64 across a tile of 8 columns; one lane on anything tiled, in bf16 too
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> (!O, !O) {
  %0 = psk_realize.nest "f/%0" realize <f64, f64> layout <tile = [2, 8], lanes = 4> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.nest "f/%1" realize <bf16, f32> layout <tile = [4, 16], lanes = 1> : !O {
    %1 = psk_core.dot %a, %w : !O
    psk_realize.yield %1 : !O
  }
  func.return %0, %1 : !O, !O
}

// -----

// accepted: lanes on attention's scores (NT) with the pack
!Q = !psk_core.tensor<[batch: 2, heads: 2, seq: 16, hd: 32]>
!K = !psk_core.tensor<[batch: 2, heads: 2, seq2: 16, hd: 32]>
!S = !psk_core.tensor<[batch: 2, heads: 2, seq: 16, seq2: 16]>
func.func @f(%q: !Q, %k: !K) -> !S {
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <tile = [4, 16], lanes = 8, pack = true> : !S {
    %0 = psk_core.ein %q[batch, heads, seq, hd], %k[batch, heads, seq2, hd] : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// accepted: lanes on attention's values (NN), which need no pack
!P = !psk_core.tensor<[batch: 2, heads: 2, seq: 8, seq2: 8]>
!V = !psk_core.tensor<[batch: 2, heads: 2, seq2: 8, hd: 16]>
!O = !psk_core.tensor<[batch: 2, heads: 2, seq: 8, hd: 16]>
func.func @f(%p: !P, %v: !V) -> !O {
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <tile = [2, 16], lanes = 8> : !O {
    %0 = psk_core.ein %p[batch, heads, seq, seq2], %v[batch, heads, seq2, hd] : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// lanes that are no register width of an x86 machine with AVX for f32
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "lanes": condition 4: lanes = 4 is not a register width of this machine for f32: lanes are 1}}
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <tile = [1, 8], lanes = 4> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// two lanes in f64
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "lanes": condition 4: lanes = 2 is not a register width of this machine for f64: lanes are 1}}
  %0 = psk_realize.nest "f/%0" realize <f64, f64> layout <tile = [1, 8], lanes = 2> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// lanes in bf16, which has none
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "lanes": condition 4: lanes = 8, but bf16 has no vector lanes on this machine (it computes one element at a time): its lanes are 1}}
  %0 = psk_realize.nest "f/%0" realize <bf16, f32> layout <tile = [1, 8], lanes = 8> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// lanes wider than the tile's columns
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "lanes": condition 4: lanes = 8 do not divide the tile's n_j = 4}}
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <tile = [4, 4], lanes = 8> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// lanes on a one-column tile: the default tile of attention's scores is [1, 1]
!Q = !psk_core.tensor<[batch: 2, heads: 2, seq: 16, hd: 32]>
!K = !psk_core.tensor<[batch: 2, heads: 2, seq2: 16, hd: 32]>
!S = !psk_core.tensor<[batch: 2, heads: 2, seq: 16, seq2: 16]>
func.func @f(%q: !Q, %k: !K) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "lanes": condition 4: lanes = 8 do not divide the tile's n_j = 1}}
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <lanes = 8, pack = true> : !S {
    %0 = psk_core.ein %q[batch, heads, seq, hd], %k[batch, heads, seq2, hd] : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// lanes on an NT contraction without the pack
!Q = !psk_core.tensor<[batch: 2, heads: 2, seq: 16, hd: 32]>
!K = !psk_core.tensor<[batch: 2, heads: 2, seq2: 16, hd: 32]>
!S = !psk_core.tensor<[batch: 2, heads: 2, seq: 16, seq2: 16]>
func.func @f(%q: !Q, %k: !K) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "lanes": condition 4: lanes = 8 on an NT contraction need the pack: operand 1 carries K (hd) innermost, so J (seq2) is not contiguous; state "pack": true}}
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <tile = [4, 16], lanes = 8> : !S {
    %0 = psk_core.ein %q[batch, heads, seq, hd], %k[batch, heads, seq2, hd] : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// lanes on an NT contraction whose pack is stated false
!Q = !psk_core.tensor<[batch: 2, heads: 2, seq: 16, hd: 32]>
!K = !psk_core.tensor<[batch: 2, heads: 2, seq2: 16, hd: 32]>
!S = !psk_core.tensor<[batch: 2, heads: 2, seq: 16, seq2: 16]>
func.func @f(%q: !Q, %k: !K) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "lanes": condition 4: lanes = 8 on an NT contraction need the pack}}
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <tile = [1, 8], lanes = 8, pack = false> : !S {
    %0 = psk_core.ein %q[batch, heads, seq, hd], %k[batch, heads, seq2, hd] : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// lanes on a row-wise contraction, which has no tile
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "lanes": condition 4: lanes = 8 run across a tile's columns, and a row-wise contraction has no tile: its lanes are 1}}
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <form = "row-wise", lanes = 8> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}
