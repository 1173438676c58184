// RUN: env PRESK_THREADS=2 presk-opt %s --split-input-file --verify-diagnostics -p psk-verify-layout
//
// The epilogue's conditions at launch: the add's other operand broadcasts
// into the product's output along J, I or the outer axes without widening
// it, and where the tile has lanes it runs along J as its innermost axis or
// not at all. PSK-Core's broadcasting (the axes of one operand appear, in
// order and with equal sizes, in the other's) makes every verified add
// meet both, so these are the accepted forms, each at the launch layouts
// the seed's examples use (tests/plan/epilogue.mlir); the refusals, on IR
// the verifiers would refuse first, are in launch_epilogue_unverified.mlir.
// An epilogue's other layout decisions are checked as on any product: the
// last chunks refuse a bf16 spill and an unpacked NT with lanes.

// accepted: a bias along J after a dot, tiled with lanes
!A = !psk_core.tensor<[i: 4, k: 64]>
!W = !psk_core.tensor<[k: 64, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!Bj = !psk_core.tensor<[j: 16]>
func.func @f(%a: !A, %w: !W, %b: !Bj) -> !O {
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <tile = [4, 16], kblock = 32, lanes = 8, epilogue = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.group "f/%1" realize <f32, f32> : !O {
    %1 = psk_core.add %0, %b : !O
    psk_realize.yield %1 : !O
  }
  func.return %1 : !O
}

// -----

// accepted: the bias before the product, the product row-wise
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 12]>
!O = !psk_core.tensor<[i: 4, j: 12]>
!Bj = !psk_core.tensor<[j: 12]>
func.func @f(%a: !A, %w: !W, %b: !Bj) -> !O {
  %0 = psk_realize.nest "f/%0" realize <f64, f64> layout <epilogue = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.group "f/%1" realize <f64, f64> : !O {
    %1 = psk_core.add %b, %0 : !O
    psk_realize.yield %1 : !O
  }
  func.return %1 : !O
}

// -----

// accepted: a mask carrying I and J after attention's scores, packed, with lanes, split over the heads
!Q = !psk_core.tensor<[batch: 2, heads: 2, seq: 16, hd: 32]>
!K = !psk_core.tensor<[batch: 2, heads: 2, seq2: 16, hd: 32]>
!S = !psk_core.tensor<[batch: 2, heads: 2, seq: 16, seq2: 16]>
!M = !psk_core.tensor<[seq: 16, seq2: 16]>
func.func @f(%q: !Q, %k: !K, %m: !M) -> !S {
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <tile = [4, 16], kblock = 32, order = "JIK", lanes = 8, split = {depth = 1, workers = 2}, pack = true, epilogue = true> : !S {
    %0 = psk_core.ein %q[batch, heads, seq, hd], %k[batch, heads, seq2, hd] : !S
    psk_realize.yield %0 : !S
  }
  %1 = psk_realize.group "f/%1" realize <f32, f32> : !S {
    %1 = psk_core.add %0, %m : !S
    psk_realize.yield %1 : !S
  }
  func.return %1 : !S
}

// -----

// accepted: a residual of the output's shape after attention's values, in bf16 (tiled, a k-block innermost)
!P = !psk_core.tensor<[batch: 2, heads: 2, seq: 8, seq2: 32]>
!V = !psk_core.tensor<[batch: 2, heads: 2, seq2: 32, hd: 16]>
!O = !psk_core.tensor<[batch: 2, heads: 2, seq: 8, hd: 16]>
func.func @f(%p: !P, %v: !V, %r: !O) -> !O {
  %0 = psk_realize.nest "f/%0" realize <bf16, f32> layout <tile = [2, 8], kblock = 32, order = "IJK", epilogue = true> : !O {
    %0 = psk_core.ein %p[batch, heads, seq, seq2], %v[batch, heads, seq2, hd] : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.group "f/%1" realize <bf16, f32> : !O {
    %1 = psk_core.add %r, %0 : !O
    psk_realize.yield %1 : !O
  }
  func.return %1 : !O
}

// -----

// accepted: operands constant along J (the outer axes alone, I alone) with lanes: they do not run along J at all
!P = !psk_core.tensor<[batch: 2, heads: 2, seq: 8, seq2: 8]>
!V = !psk_core.tensor<[batch: 2, heads: 2, seq2: 8, hd: 16]>
!O = !psk_core.tensor<[batch: 2, heads: 2, seq: 8, hd: 16]>
!Bh = !psk_core.tensor<[batch: 2, heads: 2]>
!Bi = !psk_core.tensor<[seq: 8]>
func.func @f(%p: !P, %v: !V, %c: !Bh, %d: !Bi) -> (!O, !O) {
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <tile = [4, 16], lanes = 8, epilogue = true> : !O {
    %0 = psk_core.ein %p[batch, heads, seq, seq2], %v[batch, heads, seq2, hd] : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.group "f/%1" realize <f32, f32> : !O {
    %1 = psk_core.add %0, %c : !O
    psk_realize.yield %1 : !O
  }
  %2 = psk_realize.nest "f/%2" realize <f32, f32> layout <tile = [2, 8], lanes = 8, epilogue = true> : !O {
    %2 = psk_core.ein %p[batch, heads, seq, seq2], %v[batch, heads, seq2, hd] : !O
    psk_realize.yield %2 : !O
  }
  %3 = psk_realize.group "f/%3" realize <f32, f32> : !O {
    %3 = psk_core.add %d, %2 : !O
    psk_realize.yield %3 : !O
  }
  func.return %1, %3 : !O, !O
}

// -----

// an epilogue does not lift condition 7: a bf16 product whose k-block loop encloses the J block loop
!A = !psk_core.tensor<[i: 4, k: 64]>
!W = !psk_core.tensor<[k: 64, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!Bj = !psk_core.tensor<[j: 16]>
func.func @f(%a: !A, %w: !W, %b: !Bj) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "order": condition 7: with the order "IKJ" the k-block loop encloses the J block loop}}
  %0 = psk_realize.nest "f/%0" realize <bf16, f32> layout <kblock = 32, order = "IKJ", epilogue = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.group "f/%1" realize <bf16, f32> : !O {
    %1 = psk_core.add %0, %b : !O
    psk_realize.yield %1 : !O
  }
  func.return %1 : !O
}

// -----

// nor condition 4: a mask after the scores, with lanes and no pack
!Q = !psk_core.tensor<[batch: 2, heads: 2, seq: 16, hd: 32]>
!K = !psk_core.tensor<[batch: 2, heads: 2, seq2: 16, hd: 32]>
!S = !psk_core.tensor<[batch: 2, heads: 2, seq: 16, seq2: 16]>
!M = !psk_core.tensor<[seq: 16, seq2: 16]>
func.func @f(%q: !Q, %k: !K, %m: !M) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "lanes": condition 4: lanes = 8 on an NT contraction need the pack}}
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <tile = [4, 16], lanes = 8, epilogue = true> : !S {
    %0 = psk_core.ein %q[batch, heads, seq, hd], %k[batch, heads, seq2, hd] : !S
    psk_realize.yield %0 : !S
  }
  %1 = psk_realize.group "f/%1" realize <f32, f32> : !S {
    %1 = psk_core.add %0, %m : !S
    psk_realize.yield %1 : !S
  }
  func.return %1 : !S
}
