// RUN: env PRESK_THREADS=2 presk-opt %s --split-input-file --verify-diagnostics -p psk-verify-layout
//
// The pack at launch. On an NT contraction operand 1 is copied to a panel
// with the axes (the outer axes it carries..., K, J); on an NN one (a dot,
// attention's values) to a blocked panel (..., J/n_j, K, n_j). The seed's
// condition 9 (a pack only on an NT contraction) is lifted, so both are
// accepted; a row-wise contraction's pack is condition 3's
// (launch_tile.mlir). `"both"` packs operand 0 as well, into blocks of the
// tile's rows (condition 3: a tile of more than one row, dividing I where
// the k-block loop encloses the I block loop).

// accepted: attention's scores (NT), packed, with and without lanes; false anywhere
!Q = !psk_core.tensor<[batch: 2, heads: 2, seq: 16, hd: 32]>
!K = !psk_core.tensor<[batch: 2, heads: 2, seq2: 16, hd: 32]>
!S = !psk_core.tensor<[batch: 2, heads: 2, seq: 16, seq2: 16]>
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%q: !Q, %k: !K, %a: !A, %w: !W) -> (!S, !S, !O) {
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <pack = true> : !S {
    %0 = psk_core.ein %q[batch, heads, seq, hd], %k[batch, heads, seq2, hd] : !S
    psk_realize.yield %0 : !S
  }
  %1 = psk_realize.nest "f/%1" realize <f32, f32> layout <tile = [2, 8], lanes = 8, pack = true> : !S {
    %1 = psk_core.ein %q[batch, heads, seq, hd], %k[batch, heads, seq2, hd] : !S
    psk_realize.yield %1 : !S
  }
  %2 = psk_realize.nest "f/%2" realize <f32, f32> layout <pack = false> : !O {
    %2 = psk_core.dot %a, %w : !O
    psk_realize.yield %2 : !O
  }
  func.return %0, %1, %2 : !S, !S, !O
}

// -----

// accepted: an NT ein whose operand 1 carries no outer axis (a panel [K, J])
!X = !psk_core.tensor<[b: 2, i: 4, n: 8]>
!W = !psk_core.tensor<[j: 16, n: 8]>
!O = !psk_core.tensor<[b: 2, i: 4, j: 16]>
func.func @f(%x: !X, %w: !W) -> !O {
  %0 = psk_realize.nest "f/%0" realize <f64, f64> layout <tile = [4, 8], lanes = 4, pack = true> : !O {
    %0 = psk_core.ein %x[b, i, n], %w[j, n] : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// accepted: a pack on a dot (its default tile [1, 8]) and on attention's values (NN): blocked panels
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!P = !psk_core.tensor<[batch: 2, heads: 2, seq: 8, seq2: 8]>
!V = !psk_core.tensor<[batch: 2, heads: 2, seq2: 8, hd: 16]>
!R = !psk_core.tensor<[batch: 2, heads: 2, seq: 8, hd: 16]>
func.func @f(%a: !A, %w: !W, %p: !P, %v: !V) -> (!O, !R) {
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <pack = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.nest "f/%1" realize <f32, f32> layout <tile = [4, 16], lanes = 8, pack = true> : !R {
    %1 = psk_core.ein %p[batch, heads, seq, seq2], %v[batch, heads, seq2, hd] : !R
    psk_realize.yield %1 : !R
  }
  func.return %0, %1 : !O, !R
}

// -----

// accepted: "both" on an NN dot and on attention's scores (NT): operand 0 gets the panel of the tile's rows
// too; I = 6 in tiles of 4 rows shifts the last tile back, which the panel's last block holds
!A = !psk_core.tensor<[i: 6, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 6, j: 16]>
!Q = !psk_core.tensor<[batch: 2, heads: 2, seq: 16, hd: 32]>
!K = !psk_core.tensor<[batch: 2, heads: 2, seq2: 16, hd: 32]>
!S = !psk_core.tensor<[batch: 2, heads: 2, seq: 16, seq2: 16]>
func.func @f(%a: !A, %w: !W, %q: !Q, %k: !K) -> (!O, !S) {
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <tile = [4, 8], pack = "both"> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.nest "f/%1" realize <f32, f32> layout <tile = [2, 8], lanes = 8, kblock = 32, order = "KIJ", pack = "both"> : !S {
    %1 = psk_core.ein %q[batch, heads, seq, hd], %k[batch, heads, seq2, hd] : !S
    psk_realize.yield %1 : !S
  }
  func.return %0, %1 : !O, !S
}

// -----

// refused: "both" on a tile of one row (condition 3)
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "pack": condition 3: the pack "both" copies operand 0 to a panel of the tile's m_i rows, and this tile has one row, whose operand 0 elements are consecutive already: state "pack": true}}
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <pack = "both"> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// refused: "both" where the k-block loop encloses an I block loop whose tile does not divide I (condition 3)
!A = !psk_core.tensor<[i: 6, k: 64]>
!W = !psk_core.tensor<[k: 64, j: 16]>
!O = !psk_core.tensor<[i: 6, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "pack": condition 3: the pack "both" copies operand 0 to a panel of whole blocks of the tile's m_i = 4 rows, which do not divide I (i) = 6, and with the order "KIJ" the k-block loop encloses the I block loop, whose last tile clamps its rows past I's end to the last row: no block of the panel holds them}}
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <tile = [4, 8], kblock = 32, order = "KIJ", pack = "both"> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}
