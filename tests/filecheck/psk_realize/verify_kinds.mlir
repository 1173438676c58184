// RUN: presk-opt %s --split-input-file --verify-diagnostics
//
// The plan's first check, hand-written: a layout states only decisions its
// nest's kind has (E7002 naming the nest, the decision and the reason).
// Every decision a softmax lacks (form, tile, kblock, order, lanes, pack,
// epilogue) is stated on a softmax and on each kind of "other" nest (a
// fusion group, a reduction, a dot whose right operand has rank three, an
// ein that is not of the contraction pattern), passes on those and on each
// contraction pattern (dot, NN ein, NT ein). The value stated is always in
// its decision's domain, so the kind is what refuses it. A tile is also
// refused on eight more nests that are no contraction (a dot with a rank-1
// operand on either side, an ein of one operand, summing two axes the
// operands do not both carry before I and J, with its left operand (K, I)
// and its right one (J, K), or its right operand's outer axes out of
// order, a gather, a cross_entropy). The split, which every nest has,
// and a softmax's passes are accepted.
//
// One chunk per (decision, nest); verify_contractions.mlir shows the
// contractions accepting theirs.

// form = "tiled" on a softmax
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "form": "form" is not a decision of this nest, which is a softmax}}
  %0 = psk_realize.nest "f/%0" layout <form = "tiled"> : !S {
    %0 = psk_core.softmax %x [t] : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// tile = [1, 8] on a softmax
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": "tile" is not a decision of this nest, which is a softmax}}
  %0 = psk_realize.nest "f/%0" layout <tile = [1, 8]> : !S {
    %0 = psk_core.softmax %x [t] : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// kblock = 32 on a softmax
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "kblock": "kblock" is not a decision of this nest, which is a softmax}}
  %0 = psk_realize.nest "f/%0" layout <kblock = 32> : !S {
    %0 = psk_core.softmax %x [t] : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// order = "JI" on a softmax
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "order": "order" is not a decision of this nest, which is a softmax}}
  %0 = psk_realize.nest "f/%0" layout <order = "JI"> : !S {
    %0 = psk_core.softmax %x [t] : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// lanes = 4 on a softmax
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "lanes": "lanes" is not a decision of this nest, which is a softmax}}
  %0 = psk_realize.nest "f/%0" layout <lanes = 4> : !S {
    %0 = psk_core.softmax %x [t] : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// pack = true on a softmax
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "pack": "pack" is not a decision of this nest, which is a softmax}}
  %0 = psk_realize.nest "f/%0" layout <pack = true> : !S {
    %0 = psk_core.softmax %x [t] : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// epilogue = false on a softmax
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": "epilogue" is not a decision of this nest, which is a softmax}}
  %0 = psk_realize.nest "f/%0" layout <epilogue = false> : !S {
    %0 = psk_core.softmax %x [t] : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// epilogue = true on a softmax
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": "epilogue" is not a decision of this nest, which is a softmax}}
  %0 = psk_realize.nest "f/%0" layout <epilogue = true> : !S {
    %0 = psk_core.softmax %x [t] : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// form = "tiled" on a group
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "form": "form" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.group "f/%0" layout <form = "tiled"> : !S {
    %0 = psk_core.exp %x : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// tile = [1, 8] on a group
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": "tile" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.group "f/%0" layout <tile = [1, 8]> : !S {
    %0 = psk_core.exp %x : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// kblock = 32 on a group
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "kblock": "kblock" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.group "f/%0" layout <kblock = 32> : !S {
    %0 = psk_core.exp %x : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// order = "JI" on a group
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "order": "order" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.group "f/%0" layout <order = "JI"> : !S {
    %0 = psk_core.exp %x : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// lanes = 4 on a group
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "lanes": "lanes" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.group "f/%0" layout <lanes = 4> : !S {
    %0 = psk_core.exp %x : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// pack = true on a group
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "pack": "pack" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.group "f/%0" layout <pack = true> : !S {
    %0 = psk_core.exp %x : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// epilogue = false on a group
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": "epilogue" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.group "f/%0" layout <epilogue = false> : !S {
    %0 = psk_core.exp %x : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// epilogue = true on a group
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": "epilogue" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.group "f/%0" layout <epilogue = true> : !S {
    %0 = psk_core.exp %x : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// passes on a group
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "passes": "passes" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.group "f/%0" layout <passes = 2> : !S {
    %0 = psk_core.exp %x : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// form = "tiled" on a reduction
!S = !psk_core.tensor<[s: 8, t: 8]>
!R = !psk_core.tensor<[s: 8]>
func.func @f(%x: !S) -> !R {
  // expected-error @+1 {{E7002: nest "f/%0", decision "form": "form" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <form = "tiled"> : !R {
    %0 = psk_core.sum %x [t] : !R
    psk_realize.yield %0 : !R
  }
  func.return %0 : !R
}

// -----

// tile = [1, 8] on a reduction
!S = !psk_core.tensor<[s: 8, t: 8]>
!R = !psk_core.tensor<[s: 8]>
func.func @f(%x: !S) -> !R {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": "tile" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <tile = [1, 8]> : !R {
    %0 = psk_core.sum %x [t] : !R
    psk_realize.yield %0 : !R
  }
  func.return %0 : !R
}

// -----

// kblock = 32 on a reduction
!S = !psk_core.tensor<[s: 8, t: 8]>
!R = !psk_core.tensor<[s: 8]>
func.func @f(%x: !S) -> !R {
  // expected-error @+1 {{E7002: nest "f/%0", decision "kblock": "kblock" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <kblock = 32> : !R {
    %0 = psk_core.sum %x [t] : !R
    psk_realize.yield %0 : !R
  }
  func.return %0 : !R
}

// -----

// order = "JI" on a reduction
!S = !psk_core.tensor<[s: 8, t: 8]>
!R = !psk_core.tensor<[s: 8]>
func.func @f(%x: !S) -> !R {
  // expected-error @+1 {{E7002: nest "f/%0", decision "order": "order" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <order = "JI"> : !R {
    %0 = psk_core.sum %x [t] : !R
    psk_realize.yield %0 : !R
  }
  func.return %0 : !R
}

// -----

// lanes = 4 on a reduction
!S = !psk_core.tensor<[s: 8, t: 8]>
!R = !psk_core.tensor<[s: 8]>
func.func @f(%x: !S) -> !R {
  // expected-error @+1 {{E7002: nest "f/%0", decision "lanes": "lanes" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <lanes = 4> : !R {
    %0 = psk_core.sum %x [t] : !R
    psk_realize.yield %0 : !R
  }
  func.return %0 : !R
}

// -----

// pack = true on a reduction
!S = !psk_core.tensor<[s: 8, t: 8]>
!R = !psk_core.tensor<[s: 8]>
func.func @f(%x: !S) -> !R {
  // expected-error @+1 {{E7002: nest "f/%0", decision "pack": "pack" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <pack = true> : !R {
    %0 = psk_core.sum %x [t] : !R
    psk_realize.yield %0 : !R
  }
  func.return %0 : !R
}

// -----

// epilogue = false on a reduction
!S = !psk_core.tensor<[s: 8, t: 8]>
!R = !psk_core.tensor<[s: 8]>
func.func @f(%x: !S) -> !R {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": "epilogue" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <epilogue = false> : !R {
    %0 = psk_core.sum %x [t] : !R
    psk_realize.yield %0 : !R
  }
  func.return %0 : !R
}

// -----

// epilogue = true on a reduction
!S = !psk_core.tensor<[s: 8, t: 8]>
!R = !psk_core.tensor<[s: 8]>
func.func @f(%x: !S) -> !R {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": "epilogue" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <epilogue = true> : !R {
    %0 = psk_core.sum %x [t] : !R
    psk_realize.yield %0 : !R
  }
  func.return %0 : !R
}

// -----

// passes on a reduction
!S = !psk_core.tensor<[s: 8, t: 8]>
!R = !psk_core.tensor<[s: 8]>
func.func @f(%x: !S) -> !R {
  // expected-error @+1 {{E7002: nest "f/%0", decision "passes": "passes" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <passes = 2> : !R {
    %0 = psk_core.sum %x [t] : !R
    psk_realize.yield %0 : !R
  }
  func.return %0 : !R
}

// -----

// form = "tiled" on a dot_rank3
!A = !psk_core.tensor<[i: 4, k: 8]>
!W3 = !psk_core.tensor<[k: 8, j: 16, n: 2]>
!O3 = !psk_core.tensor<[i: 4, j: 16, n: 2]>
func.func @f(%a: !A, %w: !W3) -> !O3 {
  // expected-error @+1 {{E7002: nest "f/%0", decision "form": "form" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <form = "tiled"> : !O3 {
    %0 = psk_core.dot %a, %w : !O3
    psk_realize.yield %0 : !O3
  }
  func.return %0 : !O3
}

// -----

// tile = [1, 8] on a dot_rank3
!A = !psk_core.tensor<[i: 4, k: 8]>
!W3 = !psk_core.tensor<[k: 8, j: 16, n: 2]>
!O3 = !psk_core.tensor<[i: 4, j: 16, n: 2]>
func.func @f(%a: !A, %w: !W3) -> !O3 {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": "tile" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <tile = [1, 8]> : !O3 {
    %0 = psk_core.dot %a, %w : !O3
    psk_realize.yield %0 : !O3
  }
  func.return %0 : !O3
}

// -----

// kblock = 32 on a dot_rank3
!A = !psk_core.tensor<[i: 4, k: 8]>
!W3 = !psk_core.tensor<[k: 8, j: 16, n: 2]>
!O3 = !psk_core.tensor<[i: 4, j: 16, n: 2]>
func.func @f(%a: !A, %w: !W3) -> !O3 {
  // expected-error @+1 {{E7002: nest "f/%0", decision "kblock": "kblock" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <kblock = 32> : !O3 {
    %0 = psk_core.dot %a, %w : !O3
    psk_realize.yield %0 : !O3
  }
  func.return %0 : !O3
}

// -----

// order = "JI" on a dot_rank3
!A = !psk_core.tensor<[i: 4, k: 8]>
!W3 = !psk_core.tensor<[k: 8, j: 16, n: 2]>
!O3 = !psk_core.tensor<[i: 4, j: 16, n: 2]>
func.func @f(%a: !A, %w: !W3) -> !O3 {
  // expected-error @+1 {{E7002: nest "f/%0", decision "order": "order" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <order = "JI"> : !O3 {
    %0 = psk_core.dot %a, %w : !O3
    psk_realize.yield %0 : !O3
  }
  func.return %0 : !O3
}

// -----

// lanes = 4 on a dot_rank3
!A = !psk_core.tensor<[i: 4, k: 8]>
!W3 = !psk_core.tensor<[k: 8, j: 16, n: 2]>
!O3 = !psk_core.tensor<[i: 4, j: 16, n: 2]>
func.func @f(%a: !A, %w: !W3) -> !O3 {
  // expected-error @+1 {{E7002: nest "f/%0", decision "lanes": "lanes" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <lanes = 4> : !O3 {
    %0 = psk_core.dot %a, %w : !O3
    psk_realize.yield %0 : !O3
  }
  func.return %0 : !O3
}

// -----

// pack = true on a dot_rank3
!A = !psk_core.tensor<[i: 4, k: 8]>
!W3 = !psk_core.tensor<[k: 8, j: 16, n: 2]>
!O3 = !psk_core.tensor<[i: 4, j: 16, n: 2]>
func.func @f(%a: !A, %w: !W3) -> !O3 {
  // expected-error @+1 {{E7002: nest "f/%0", decision "pack": "pack" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <pack = true> : !O3 {
    %0 = psk_core.dot %a, %w : !O3
    psk_realize.yield %0 : !O3
  }
  func.return %0 : !O3
}

// -----

// epilogue = false on a dot_rank3
!A = !psk_core.tensor<[i: 4, k: 8]>
!W3 = !psk_core.tensor<[k: 8, j: 16, n: 2]>
!O3 = !psk_core.tensor<[i: 4, j: 16, n: 2]>
func.func @f(%a: !A, %w: !W3) -> !O3 {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": "epilogue" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <epilogue = false> : !O3 {
    %0 = psk_core.dot %a, %w : !O3
    psk_realize.yield %0 : !O3
  }
  func.return %0 : !O3
}

// -----

// epilogue = true on a dot_rank3
!A = !psk_core.tensor<[i: 4, k: 8]>
!W3 = !psk_core.tensor<[k: 8, j: 16, n: 2]>
!O3 = !psk_core.tensor<[i: 4, j: 16, n: 2]>
func.func @f(%a: !A, %w: !W3) -> !O3 {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": "epilogue" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <epilogue = true> : !O3 {
    %0 = psk_core.dot %a, %w : !O3
    psk_realize.yield %0 : !O3
  }
  func.return %0 : !O3
}

// -----

// passes on a dot_rank3
!A = !psk_core.tensor<[i: 4, k: 8]>
!W3 = !psk_core.tensor<[k: 8, j: 16, n: 2]>
!O3 = !psk_core.tensor<[i: 4, j: 16, n: 2]>
func.func @f(%a: !A, %w: !W3) -> !O3 {
  // expected-error @+1 {{E7002: nest "f/%0", decision "passes": "passes" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <passes = 2> : !O3 {
    %0 = psk_core.dot %a, %w : !O3
    psk_realize.yield %0 : !O3
  }
  func.return %0 : !O3
}

// -----

// form = "tiled" on a ein_other
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!T = !psk_core.tensor<[j: 16, i: 4]>
func.func @f(%a: !A, %w: !W) -> !T {
  // expected-error @+1 {{E7002: nest "f/%0", decision "form": "form" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <form = "tiled"> : !T {
    %0 = psk_core.ein %a[i, k], %w[k, j] : !T
    psk_realize.yield %0 : !T
  }
  func.return %0 : !T
}

// -----

// tile = [1, 8] on a ein_other
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!T = !psk_core.tensor<[j: 16, i: 4]>
func.func @f(%a: !A, %w: !W) -> !T {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": "tile" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <tile = [1, 8]> : !T {
    %0 = psk_core.ein %a[i, k], %w[k, j] : !T
    psk_realize.yield %0 : !T
  }
  func.return %0 : !T
}

// -----

// kblock = 32 on a ein_other
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!T = !psk_core.tensor<[j: 16, i: 4]>
func.func @f(%a: !A, %w: !W) -> !T {
  // expected-error @+1 {{E7002: nest "f/%0", decision "kblock": "kblock" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <kblock = 32> : !T {
    %0 = psk_core.ein %a[i, k], %w[k, j] : !T
    psk_realize.yield %0 : !T
  }
  func.return %0 : !T
}

// -----

// order = "JI" on a ein_other
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!T = !psk_core.tensor<[j: 16, i: 4]>
func.func @f(%a: !A, %w: !W) -> !T {
  // expected-error @+1 {{E7002: nest "f/%0", decision "order": "order" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <order = "JI"> : !T {
    %0 = psk_core.ein %a[i, k], %w[k, j] : !T
    psk_realize.yield %0 : !T
  }
  func.return %0 : !T
}

// -----

// lanes = 4 on a ein_other
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!T = !psk_core.tensor<[j: 16, i: 4]>
func.func @f(%a: !A, %w: !W) -> !T {
  // expected-error @+1 {{E7002: nest "f/%0", decision "lanes": "lanes" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <lanes = 4> : !T {
    %0 = psk_core.ein %a[i, k], %w[k, j] : !T
    psk_realize.yield %0 : !T
  }
  func.return %0 : !T
}

// -----

// pack = true on a ein_other
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!T = !psk_core.tensor<[j: 16, i: 4]>
func.func @f(%a: !A, %w: !W) -> !T {
  // expected-error @+1 {{E7002: nest "f/%0", decision "pack": "pack" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <pack = true> : !T {
    %0 = psk_core.ein %a[i, k], %w[k, j] : !T
    psk_realize.yield %0 : !T
  }
  func.return %0 : !T
}

// -----

// epilogue = false on a ein_other
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!T = !psk_core.tensor<[j: 16, i: 4]>
func.func @f(%a: !A, %w: !W) -> !T {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": "epilogue" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <epilogue = false> : !T {
    %0 = psk_core.ein %a[i, k], %w[k, j] : !T
    psk_realize.yield %0 : !T
  }
  func.return %0 : !T
}

// -----

// epilogue = true on a ein_other
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!T = !psk_core.tensor<[j: 16, i: 4]>
func.func @f(%a: !A, %w: !W) -> !T {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": "epilogue" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <epilogue = true> : !T {
    %0 = psk_core.ein %a[i, k], %w[k, j] : !T
    psk_realize.yield %0 : !T
  }
  func.return %0 : !T
}

// -----

// passes on a ein_other
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!T = !psk_core.tensor<[j: 16, i: 4]>
func.func @f(%a: !A, %w: !W) -> !T {
  // expected-error @+1 {{E7002: nest "f/%0", decision "passes": "passes" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <passes = 2> : !T {
    %0 = psk_core.ein %a[i, k], %w[k, j] : !T
    psk_realize.yield %0 : !T
  }
  func.return %0 : !T
}

// -----

// passes on a contraction (dot)
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "passes": "passes" is not a decision of this nest, which is a contraction}}
  %0 = psk_realize.nest "f/%0" layout <passes = 3> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// passes on a contraction (ein_nn)
!P = !psk_core.tensor<[b: 2, h: 2, s: 8, t: 8]>
!V = !psk_core.tensor<[b: 2, h: 2, t: 8, d: 4]>
!O = !psk_core.tensor<[b: 2, h: 2, s: 8, d: 4]>
func.func @f(%p: !P, %v: !V) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "passes": "passes" is not a decision of this nest, which is a contraction}}
  %0 = psk_realize.nest "f/%0" layout <passes = 3> : !O {
    %0 = psk_core.ein %p[b, h, s, t], %v[b, h, t, d] : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// passes on a contraction (ein_nt)
!Q = !psk_core.tensor<[b: 2, h: 2, s: 8, d: 4]>
!K = !psk_core.tensor<[b: 2, h: 2, t: 8, d: 4]>
!O = !psk_core.tensor<[b: 2, h: 2, s: 8, t: 8]>
func.func @f(%q: !Q, %k: !K) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "passes": "passes" is not a decision of this nest, which is a contraction}}
  %0 = psk_realize.nest "f/%0" layout <passes = 3> : !O {
    %0 = psk_core.ein %q[b, h, s, d], %k[b, h, t, d] : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// tile on a dot whose right operand has rank one
!A = !psk_core.tensor<[i: 4, k: 8]>
!V = !psk_core.tensor<[k: 8]>
!I = !psk_core.tensor<[i: 4]>
func.func @f(%a: !A, %v: !V) -> !I {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": "tile" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <tile = [1, 8]> : !I {
    %0 = psk_core.dot %a, %v : !I
    psk_realize.yield %0 : !I
  }
  func.return %0 : !I
}

// -----

// tile on a dot whose left operand has rank one
!V = !psk_core.tensor<[k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!J = !psk_core.tensor<[j: 16]>
func.func @f(%v: !V, %w: !W) -> !J {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": "tile" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <tile = [1, 8]> : !J {
    %0 = psk_core.dot %v, %w : !J
    psk_realize.yield %0 : !J
  }
  func.return %0 : !J
}

// -----

// tile on a ein of one operand (a transpose)
!A = !psk_core.tensor<[i: 4, k: 8]>
!T = !psk_core.tensor<[k: 8, i: 4]>
func.func @f(%a: !A) -> !T {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": "tile" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <tile = [1, 8]> : !T {
    %0 = psk_core.ein %a[i, k] : !T
    psk_realize.yield %0 : !T
  }
  func.return %0 : !T
}

// -----

// tile on a ein summing two axes
!A = !psk_core.tensor<[i: 4, k: 8, l: 2]>
!W = !psk_core.tensor<[k: 8, l: 2, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": "tile" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <tile = [1, 8]> : !O {
    %0 = psk_core.ein %a[i, k, l], %w[k, l, j] : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// tile on a ein whose left operand carries K before I (TN) while its right one carries K innermost
!A = !psk_core.tensor<[k: 8, i: 4]>
!W = !psk_core.tensor<[j: 16, k: 8]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": "tile" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <tile = [1, 8]> : !O {
    %0 = psk_core.ein %a[k, i], %w[j, k] : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// tile on a ein whose right operand's outer axes are out of the output's order
!A = !psk_core.tensor<[b: 2, c: 3, i: 4, k: 8]>
!W = !psk_core.tensor<[c: 3, b: 2, k: 8, j: 16]>
!O = !psk_core.tensor<[b: 2, c: 3, i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": "tile" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <tile = [1, 8]> : !O {
    %0 = psk_core.ein %a[b, c, i, k], %w[c, b, k, j] : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// tile on a gather
!Tab = !psk_core.tensor<[vocab: 10, embed: 8]>
!Ids = !psk_core.index<[seq: 4], 10>
!E = !psk_core.tensor<[seq: 4, embed: 8]>
func.func @f(%t: !Tab, %ids: !Ids) -> !E {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": "tile" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <tile = [1, 8]> : !E {
    %0 = psk_core.gather %t, %ids : !E
    psk_realize.yield %0 : !E
  }
  func.return %0 : !E
}

// -----

// tile on a cross_entropy
!L = !psk_core.tensor<[seq: 4, vocab: 10]>
!Ids = !psk_core.index<[seq: 4], 10>
!R = !psk_core.real
func.func @f(%l: !L, %ids: !Ids) -> !R {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": "tile" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <tile = [1, 8]> : !R {
    %0 = psk_core.cross_entropy %l, %ids [vocab] : !R
    psk_realize.yield %0 : !R
  }
  func.return %0 : !R
}

// -----

// split on a softmax: accepted
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  %0 = psk_realize.nest "f/%0" layout <split = {depth = 0, workers = 2}> : !S {
    %0 = psk_core.softmax %x [t] : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// split on a group: accepted
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  %0 = psk_realize.group "f/%0" layout <split = {depth = 0, workers = 2}> : !S {
    %0 = psk_core.exp %x : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// split on a reduction: accepted
!S = !psk_core.tensor<[s: 8, t: 8]>
!R = !psk_core.tensor<[s: 8]>
func.func @f(%x: !S) -> !R {
  %0 = psk_realize.nest "f/%0" layout <split = {depth = 0, workers = 2}> : !R {
    %0 = psk_core.sum %x [t] : !R
    psk_realize.yield %0 : !R
  }
  func.return %0 : !R
}

// -----

// split on a dot_rank3: accepted
!A = !psk_core.tensor<[i: 4, k: 8]>
!W3 = !psk_core.tensor<[k: 8, j: 16, n: 2]>
!O3 = !psk_core.tensor<[i: 4, j: 16, n: 2]>
func.func @f(%a: !A, %w: !W3) -> !O3 {
  %0 = psk_realize.nest "f/%0" layout <split = {depth = 0, workers = 2}> : !O3 {
    %0 = psk_core.dot %a, %w : !O3
    psk_realize.yield %0 : !O3
  }
  func.return %0 : !O3
}

// -----

// split on a ein_other: accepted
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!T = !psk_core.tensor<[j: 16, i: 4]>
func.func @f(%a: !A, %w: !W) -> !T {
  %0 = psk_realize.nest "f/%0" layout <split = {depth = 0, workers = 2}> : !T {
    %0 = psk_core.ein %a[i, k], %w[k, j] : !T
    psk_realize.yield %0 : !T
  }
  func.return %0 : !T
}

// -----

// a softmax's own decisions: accepted
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  %0 = psk_realize.nest "f/%0" layout <passes = 2, split = "none"> : !S {
    %0 = psk_core.softmax %x [t] : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}
