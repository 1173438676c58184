// The seed's epilogue examples (tests/plan/epilogue.psk, "The bias as an
// epilogue"), in presk's syntax: a bias after a dot, a bias before it, a
// mask after attention's scores ein, a residual after its values ein, and an
// operand constant along J. In each function the product (%0) is read by one
// add alone (%1), which fusion leaves in a group of its own, so
// tests/plan/epilogue.json may state "epilogue": true on every product; it
// also gives them tiles, k-blocks, lanes and packs that hold at the sizes
// of tests/plan/entries.txt (B=2, T=16).
//
// RUN: presk dump %s --stage realize --dim B=2 --dim T=16 --plan @%S/epilogue.json | filecheck %s
// RUN: env PRESK_THREADS=2 presk-opt %s -p 'psk-bind{dims="B=2,T=16"},psk-fuse,psk-realize{plan="%S/epilogue.json"},psk-verify-layout' | filecheck %s
//
// CHECK: psk_realize.nest "bias_after/%0" realize <f32, f32> layout <tile = [4, 16], kblock = 32, lanes = 8, epilogue = true,
// CHECK: psk_realize.group "bias_after/%1" realize <f32, f32>
// CHECK: psk_realize.nest "bias_before/%0" realize <f32, f32> layout <epilogue = true, default(form = "row-wise",
// CHECK: psk_realize.nest "constant_along_j/%0" realize <f32, f32> layout <tile = [1, 16], lanes = 8, epilogue = true,
// CHECK: psk_realize.nest "masked_scores/%0" realize <f32, f32> layout <tile = [4, 16], lanes = 8, pack = true, epilogue = true,
// CHECK: psk_realize.nest "residual/%0" realize <f32, f32> layout <tile = [2, 16], order = "JI", lanes = 8, epilogue = true,

!X   = !psk_core.tensor<[batch: B, seq: T, embed: 64]>
!W   = !psk_core.tensor<[embed: 64, hidden: 32]>
!Hd  = !psk_core.tensor<[batch: B, seq: T, hidden: 32]>
!Bh  = !psk_core.tensor<[hidden: 32]>
!W12 = !psk_core.tensor<[embed: 64, out: 12]>
!Y12 = !psk_core.tensor<[batch: B, seq: T, out: 12]>
!B12 = !psk_core.tensor<[out: 12]>
!Row = !psk_core.tensor<[batch: B, seq: T]>

// x · w + b: the bias along J, after the product (Linear.apply).
func.func @bias_after(%x: !X, %w: !W, %b: !Bh) -> !Hd {
  %0 = psk_core.dot %x, %w : !Hd
  %1 = psk_core.add %0, %b : !Hd
  func.return %1 : !Hd
}

// b + x · w: the bias before the product; J = 12 is no multiple of eight, so the product is row-wise.
func.func @bias_before(%x: !X, %w: !W12, %b: !B12) -> !Y12 {
  %0 = psk_core.dot %x, %w : !Y12
  %1 = psk_core.add %b, %0 : !Y12
  func.return %1 : !Y12
}

// x · w + c, c constant along J (it carries the outer axis and I): with lanes, it does not run along J at all.
func.func @constant_along_j(%x: !X, %w: !W, %c: !Row) -> !Hd {
  %0 = psk_core.dot %x, %w : !Hd
  %1 = psk_core.add %0, %c : !Hd
  func.return %1 : !Hd
}

!Q = !psk_core.tensor<[batch: B, heads: 2, seq: T, hd: 16]>
!K = !psk_core.tensor<[batch: B, heads: 2, seq2: T, hd: 16]>
!S = !psk_core.tensor<[batch: B, heads: 2, seq: T, seq2: T]>
!M = !psk_core.tensor<[seq: T, seq2: T]>
!V = !psk_core.tensor<[batch: B, heads: 2, seq2: T, hd: 16]>
!P = !psk_core.tensor<[batch: B, heads: 2, seq: T, seq2: T]>
!O = !psk_core.tensor<[batch: B, heads: 2, seq: T, hd: 16]>

// q kᵀ + m: an additive mask carrying I and J after attention's scores (an NT ein).
func.func @masked_scores(%q: !Q, %k: !K, %m: !M) -> !S {
  %0 = psk_core.ein %q[batch, heads, seq, hd], %k[batch, heads, seq2, hd] : !S
  %1 = psk_core.add %0, %m : !S
  func.return %1 : !S
}

// r + p v: a residual of the output's shape after attention's values (an NN ein).
func.func @residual(%p: !P, %v: !V, %r: !O) -> !O {
  %0 = psk_core.ein %p[batch, heads, seq, seq2], %v[batch, heads, seq2, hd] : !O
  %1 = psk_core.add %r, %0 : !O
  func.return %1 : !O
}
