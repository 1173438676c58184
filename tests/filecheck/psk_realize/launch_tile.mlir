// RUN: env PRESK_THREADS=2 presk-opt %s --split-input-file --verify-diagnostics -p psk-verify-layout
//
// Condition 3, checked at the launch shapes by psk-verify-layout (the plan's
// second check): the tile and the k-block are no larger than their axes
// (m_i <= I, n_j <= J, kblock <= K; one that does not divide its axis gets a
// last tile shifted back to the axis's end, or a last k-block cut short),
// a tile divides the axis of every block loop the k-block loop encloses
// (there the running sums wait in the output, and a shifted tile would add
// a block twice), a J-block is no larger than J, and a row-wise contraction has no tile, k-block,
// J-block, order or pack (their neutral values, [1, 1], "none", "none", "IJ" and false, may be stated). A block loop whose
// shifted last tile waits on the k-block loop inside it is serial (condition 8 refuses its split).
// First the accepted forms, then one chunk per refusal.

// accepted: the defaults of a dot whose J is a multiple of eight (tile [1, 8])
!A = !psk_core.tensor<[i: 4, k: 64]>
!W = !psk_core.tensor<[k: 64, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  %0 = psk_realize.nest "f/%0" realize <f32, f32> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// accepted: the largest tile and both k-blocks that divide
!A = !psk_core.tensor<[i: 4, k: 128]>
!W = !psk_core.tensor<[k: 128, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> (!O, !O) {
  %0 = psk_realize.nest "f/%0" realize <f64, f64> layout <tile = [4, 16], kblock = 32, order = "JIK"> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.nest "f/%1" realize <f64, f64> layout <tile = [2, 4], kblock = 128, order = "KJI"> : !O {
    %1 = psk_core.dot %a, %w : !O
    psk_realize.yield %1 : !O
  }
  func.return %0, %1 : !O, !O
}

// -----

// accepted: attention's scores (NT ein) tiled [4, 16] with a k-block of 32 over hd = 32
!Q = !psk_core.tensor<[batch: 2, heads: 2, seq: 16, hd: 32]>
!K = !psk_core.tensor<[batch: 2, heads: 2, seq2: 16, hd: 32]>
!S = !psk_core.tensor<[batch: 2, heads: 2, seq: 16, seq2: 16]>
func.func @f(%q: !Q, %k: !K) -> !S {
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <tile = [4, 16], kblock = 32, order = "JIK", pack = true> : !S {
    %0 = psk_core.ein %q[batch, heads, seq, hd], %k[batch, heads, seq2, hd] : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// accepted: a row-wise dot stating the neutral values of the tiled form's decisions
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 12]>
!O = !psk_core.tensor<[i: 4, j: 12]>
func.func @f(%a: !A, %w: !W) -> !O {
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <form = "row-wise", tile = [1, 1], kblock = "none", order = "IJ", lanes = 1, pack = false> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// accepted: a dot whose J (12) is no multiple of eight, tiled when the form is stated
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 12]>
!O = !psk_core.tensor<[i: 4, j: 12]>
func.func @f(%a: !A, %w: !W) -> !O {
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <form = "tiled", tile = [2, 4]> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// accepted: tiles and k-blocks that do not divide their axes (I = 6 in rows of 4, J = 92 in columns of
// 16, K = 70 in blocks of 32; a dot whose J is no multiple of eight states its tiled form), the k-block
// loop innermost or enclosing only the axes the tile divides
!A = !psk_core.tensor<[i: 6, k: 70]>
!W = !psk_core.tensor<[k: 70, j: 92]>
!O = !psk_core.tensor<[i: 6, j: 92]>
!W2 = !psk_core.tensor<[k: 70, j: 96]>
!O2 = !psk_core.tensor<[i: 6, j: 96]>
func.func @f(%a: !A, %w: !W, %w2: !W2) -> (!O, !O, !O2) {
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <form = "tiled", tile = [4, 16], kblock = 32, order = "JIK", pack = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.nest "f/%1" realize <f64, f64> layout <form = "tiled", tile = [4, 16], order = "JI"> : !O {
    %1 = psk_core.dot %a, %w : !O
    psk_realize.yield %1 : !O
  }
  %2 = psk_realize.nest "f/%2" realize <f64, f64> layout <tile = [4, 16], kblock = 32, order = "IKJ"> : !O2 {
    %2 = psk_core.dot %a, %w2 : !O2
    psk_realize.yield %2 : !O2
  }
  func.return %0, %1, %2 : !O, !O, !O2
}

// -----

// the tile's n_j exceeds J: the scores of a sequence of 8
!Q = !psk_core.tensor<[batch: 2, heads: 2, seq: 8, hd: 32]>
!K = !psk_core.tensor<[batch: 2, heads: 2, seq2: 8, hd: 32]>
!S = !psk_core.tensor<[batch: 2, heads: 2, seq: 8, seq2: 8]>
func.func @f(%q: !Q, %k: !K) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": condition 3: the tile's n_j = 16 exceeds J (seq2) = 8: a tile is no larger than its axes (one that does not divide an axis ends its last block at the axis's end, shifted back)}}
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <tile = [4, 16], pack = true> : !S {
    %0 = psk_core.ein %q[batch, heads, seq, hd], %k[batch, heads, seq2, hd] : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// the tile's m_i exceeds I
!A = !psk_core.tensor<[i: 2, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 2, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": condition 3: the tile's m_i = 4 exceeds I (i) = 2: a tile is no larger than its axes (one that does not divide an axis ends its last block at the axis's end, shifted back)}}
  %0 = psk_realize.nest "f/%0" realize <f64, f64> layout <tile = [4, 8]> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// accepted: the tile's m_i does not divide I, and the k-block loop encloses the I block loop: the
// running sums wait in the output between blocks of K, so the last tile clamps its rows past the end
// to the last row rather than shifting back over the tile before it
!A = !psk_core.tensor<[i: 6, k: 64]>
!W = !psk_core.tensor<[k: 64, j: 16]>
!O = !psk_core.tensor<[i: 6, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  %0 = psk_realize.nest "f/%0" realize <f64, f64> layout <tile = [4, 8], kblock = 32, order = "KIJ"> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// the tile's n_j does not divide J, on a dot tiled by a stated form, and the k-block loop encloses the
// J block loop
!A = !psk_core.tensor<[i: 4, k: 64]>
!W = !psk_core.tensor<[k: 64, j: 12]>
!O = !psk_core.tensor<[i: 4, j: 12]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": condition 3: the tile's n_j = 8 does not divide J (j) = 12, and with the order "IKJ" the k-block loop encloses the J block loop: the running sums wait in the output buffer from one block of K to the next, where a last tile shifted back over the one before it would add their shared elements' block twice}}
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <form = "tiled", tile = [1, 8], kblock = 32, order = "IKJ"> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// condition 8, at the launch shapes too: J = 12 in tiles of 8 around the k-block loop (order "JKI") is
// accepted above, but its J block loop is serial: the shifted last tile reads back the sums it shares
// with the tile before it between blocks of K, so two workers may not run them at once
!A = !psk_core.tensor<[i: 4, k: 64]>
!W = !psk_core.tensor<[k: 64, j: 12]>
!O = !psk_core.tensor<[i: 4, j: 12]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "split": condition 8: the split's loop at depth 0 is the J block loop (j in blocks of 8), whose last tile, shifted back over the one before it, reads back their shared sums between blocks of K, so it is not parallel}}
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <form = "tiled", tile = [1, 8], kblock = 32, order = "JKI", split = {depth = 0, workers = 2}> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// accepted: a k-block that does not divide K, its last block cut short (attention's values summed over
// seq2 = 48 in blocks of 32 and 16), in every order: the tile divides I and J
!P = !psk_core.tensor<[batch: 2, heads: 2, seq: 8, seq2: 48]>
!V = !psk_core.tensor<[batch: 2, heads: 2, seq2: 48, hd: 16]>
!O = !psk_core.tensor<[batch: 2, heads: 2, seq: 8, hd: 16]>
func.func @f(%p: !P, %v: !V) -> !O {
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <tile = [4, 16], kblock = 32, order = "KJI"> : !O {
    %0 = psk_core.ein %p[batch, heads, seq, seq2], %v[batch, heads, seq2, hd] : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// the k-block of 128 is larger than K
!A = !psk_core.tensor<[i: 4, k: 64]>
!W = !psk_core.tensor<[k: 64, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "kblock": condition 3: the k-block of 128 exceeds K (k) = 64: a k-block is no larger than K (one that does not divide K cuts its last block short; "none" sums K in one block)}}
  %0 = psk_realize.nest "f/%0" realize <f64, f64> layout <kblock = 128, order = "IKJ"> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// a row-wise contraction with a tile
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": condition 3: a row-wise contraction keeps its running sums in the output row and has no tile, k-block, J-block, order or pack, but the tile is [1, 8]}}
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <form = "row-wise", tile = [1, 8]> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// a row-wise contraction with a k-block
!A = !psk_core.tensor<[i: 4, k: 64]>
!W = !psk_core.tensor<[k: 64, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "kblock": condition 3: a row-wise contraction keeps its running sums in the output row and has no tile, k-block, J-block, order or pack, but the k-block is 32}}
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <form = "row-wise", kblock = 32> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// a row-wise contraction with an order
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "order": condition 3: a row-wise contraction keeps its running sums in the output row and has no tile, k-block, J-block, order or pack, but the order is "JI"}}
  %0 = psk_realize.nest "f/%0" realize <f64, f64> layout <form = "row-wise", order = "JI"> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// a row-wise contraction with a pack (an NT ein, where a pack is otherwise allowed)
!Q = !psk_core.tensor<[batch: 2, heads: 2, seq: 8, hd: 32]>
!K = !psk_core.tensor<[batch: 2, heads: 2, seq2: 8, hd: 32]>
!S = !psk_core.tensor<[batch: 2, heads: 2, seq: 8, seq2: 8]>
func.func @f(%q: !Q, %k: !K) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "pack": condition 3: a row-wise contraction keeps its running sums in the output row and has no tile, k-block, J-block, order or pack, but the pack is true}}
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <form = "row-wise", pack = true> : !S {
    %0 = psk_core.ein %q[batch, heads, seq, hd], %k[batch, heads, seq2, hd] : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// a tile on a dot that is row-wise by default (J = 12), without stating the form
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 12]>
!O = !psk_core.tensor<[i: 4, j: 12]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": condition 3: a row-wise contraction keeps its running sums in the output row and has no tile, k-block, J-block, order or pack, but the tile is [2, 4]; the form is row-wise by default here, since J (j) = 12 is not a multiple of eight: state "form": "tiled" for a tile}}
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <tile = [2, 4]> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// accepted: a size the module does not bind (a dimension variable) is decided at launch
!A = !psk_core.tensor<[i: N, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: N, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <tile = [4, 16]> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// a size the module declares as a constant is bound by it
psk_core.const_dim @M = 4
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: M]>
!O = !psk_core.tensor<[i: 4, j: M]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": condition 3: the tile's n_j = 8 exceeds J (j) = 4: a tile is no larger than its axes (one that does not divide an axis ends its last block at the axis's end, shifted back)}}
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <form = "tiled", tile = [1, 8]> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// accepted: a J-block that does not divide J (its last block is cut short)
!A = !psk_core.tensor<[i: 4, k: 64]>
!W = !psk_core.tensor<[k: 64, j: 300]>
!O = !psk_core.tensor<[i: 4, j: 300]>
func.func @f(%a: !A, %w: !W) -> !O {
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <form = "tiled", tile = [4, 16], kblock = 32, jblock = 256, order = "JIK"> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// a J-block larger than J
!A = !psk_core.tensor<[i: 4, k: 64]>
!W = !psk_core.tensor<[k: 64, j: 300]>
!O = !psk_core.tensor<[i: 4, j: 300]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "jblock": condition 3: the J-block of 512 exceeds J (j) = 300: a J-block is no larger than J (one that does not divide J cuts its last block short; "none" runs J in one block)}}
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <form = "tiled", tile = [4, 16], jblock = 512> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}
