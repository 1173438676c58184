// The seed's plan example ("The realization plan"), in presk's syntax: a
// function @twice with two dots, x · w1 then · w2, and a function @attend
// with a softmax, so that tests/plan/two_dots.json names a nest of each kind
// it states a decision of. The first dot's J (hidden, 64) is a multiple of
// eight, so its default is tiled [1, 8]; the second's (out, 12) is not, so
// its default is the row-wise form.
//
// RUN: presk dump %s --stage realize --dim B=4 --plan @%S/two_dots.json | filecheck %s
// RUN: presk dump %s --stage kernel --entry twice --dim B=4 --plan @%S/two_dots.json | filecheck %s --check-prefix=KERNEL
// RUN: env PRESK_THREADS=2 presk-opt %s -p 'psk-bind{dims="B=4"},psk-fuse,psk-realize{plan="%S/two_dots.json"},psk-verify-layout' | filecheck %s --check-prefix=VERIFIED
//
// CHECK: psk_realize.nest "twice/%0" realize <f32, f32> layout <lanes = 8, default(form = "tiled", tile = [1, 8], kblock = "none", order = "IJ", split = "executor", pack = false, epilogue = false)>
// CHECK: psk_realize.nest "twice/%1" realize <f32, f32> layout <lanes = 1, default(form = "row-wise", split = "executor", epilogue = false)>
// CHECK: psk_realize.nest "attend/%1" realize <f32, f32> layout <passes = 3, default(split = "executor")>
//
// psk-fuse-slices runs the two products row by row in one kernel: its loop
// over the batch holds the first's tiles of [1, 8] in 8 lanes, then the
// second's row-wise sums.
//
// KERNEL: psk_kernel.kernel @"dot+dot_1"
// KERNEL: vector.fma
// KERNEL: math.fma
//
// VERIFIED: psk_realize.nest "twice/%0" realize <f32, f32> layout <lanes = 8,
// VERIFIED: psk_realize.nest "attend/%1" realize <f32, f32> layout <passes = 3,

!X  = !psk_core.tensor<[batch: B, embed: 16]>
!W1 = !psk_core.tensor<[embed: 16, hidden: 64]>
!H  = !psk_core.tensor<[batch: B, hidden: 64]>
!W2 = !psk_core.tensor<[hidden: 64, out: 12]>
!Y  = !psk_core.tensor<[batch: B, out: 12]>

// x · w1 · w2: two contraction nests.
func.func @twice(%x: !X, %w1: !W1, %w2: !W2) -> !Y {
  %0 = psk_core.dot %x, %w1 : !H
  %1 = psk_core.dot %0, %w2 : !Y
  func.return %1 : !Y
}

!Q = !psk_core.tensor<[batch: B, seq: 8, hd: 16]>
!K = !psk_core.tensor<[batch: B, seq2: 8, hd: 16]>
!S = !psk_core.tensor<[batch: B, seq: 8, seq2: 8]>

// softmax(q kᵀ) over seq2: a contraction nest (NT), then a softmax nest.
func.func @attend(%q: !Q, %k: !K) -> !S {
  %0 = psk_core.ein %q[batch, seq, hd], %k[batch, seq2, hd] : !S
  %1 = psk_core.softmax %0 [seq2] : !S
  func.return %1 : !S
}
