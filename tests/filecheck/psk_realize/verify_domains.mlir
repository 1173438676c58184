// RUN: presk-opt %s --split-input-file --verify-diagnostics
//
// The plan's first check, hand-written: every decision's value lies in its
// domain (the seed's table; shapes aside, which the launch checks), and a
// decision presk does not know is refused by name. One chunk per
// violation: E7002 naming the nest, the decision and the reason. Values of
// every JSON type the layout syntax writes (strings, integers, booleans,
// lists, records); floats and null, which only a plan's JSON can write, are
// in plan_*.mlir and tests/unit/test_plan_check.py. The last chunks state
// every value of every domain and are accepted.

// form: an unknown form
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "form": the form is "tiled" or "row-wise", not "columnar"}}
  %0 = psk_realize.nest "f/%0" layout <form = "columnar"> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// form: names are case-sensitive
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "form": the form is "tiled" or "row-wise", not "Tiled"}}
  %0 = psk_realize.nest "f/%0" layout <form = "Tiled"> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// form: an integer
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "form": the form is "tiled" or "row-wise", not 1}}
  %0 = psk_realize.nest "f/%0" layout <form = 1> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// form: a list
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "form": the form is "tiled" or "row-wise", not ["tiled"]}}
  %0 = psk_realize.nest "f/%0" layout <form = ["tiled"]> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// form: a boolean
!Q = !psk_core.tensor<[b: 2, h: 2, s: 8, d: 4]>
!K = !psk_core.tensor<[b: 2, h: 2, t: 8, d: 4]>
!O = !psk_core.tensor<[b: 2, h: 2, s: 8, t: 8]>
func.func @f(%q: !Q, %k: !K) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "form": the form is "tiled" or "row-wise", not true}}
  %0 = psk_realize.nest "f/%0" layout <form = true> : !O {
    %0 = psk_core.ein %q[b, h, s, d], %k[b, h, t, d] : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// tile: m_i not 1, 2, 4 or 8
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": a tile is [1, 1], or m_i in 1, 2, 4, 6, 8 and n_j in 4, 8, 16, 32; not [3, 8]}}
  %0 = psk_realize.nest "f/%0" layout <tile = [3, 8]> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// tile: m_i 8
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": a tile is [1, 1], or m_i in 1, 2, 4, 6, 8 and n_j in 4, 8, 16, 32; not [16, 8]}}
  %0 = psk_realize.nest "f/%0" layout <tile = [16, 8]> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// tile: n_j not 4, 8 or 16
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": a tile is [1, 1], or m_i in 1, 2, 4, 6, 8 and n_j in 4, 8, 16, 32; not [1, 2]}}
  %0 = psk_realize.nest "f/%0" layout <tile = [1, 2]> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// tile: n_j 64 (the widest tile is two 512-bit registers of f32 per row: n_j 32)
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": a tile is [1, 1], or m_i in 1, 2, 4, 6, 8 and n_j in 4, 8, 16, 32; not [4, 64]}}
  %0 = psk_realize.nest "f/%0" layout <tile = [4, 64]> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// tile: n_j 1 with m_i above 1 (only [1, 1] has one column)
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": a tile is [1, 1], or m_i in 1, 2, 4, 6, 8 and n_j in 4, 8, 16, 32; not [2, 1]}}
  %0 = psk_realize.nest "f/%0" layout <tile = [2, 1]> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// tile: zero
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": a tile is [1, 1], or m_i in 1, 2, 4, 6, 8 and n_j in 4, 8, 16, 32; not [0, 0]}}
  %0 = psk_realize.nest "f/%0" layout <tile = [0, 0]> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// tile: negative
!Q = !psk_core.tensor<[b: 2, h: 2, s: 8, d: 4]>
!K = !psk_core.tensor<[b: 2, h: 2, t: 8, d: 4]>
!O = !psk_core.tensor<[b: 2, h: 2, s: 8, t: 8]>
func.func @f(%q: !Q, %k: !K) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": a tile is [1, 1], or m_i in 1, 2, 4, 6, 8 and n_j in 4, 8, 16, 32; not [-1, 4]}}
  %0 = psk_realize.nest "f/%0" layout <tile = [-1, 4]> : !O {
    %0 = psk_core.ein %q[b, h, s, d], %k[b, h, t, d] : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// tile: one integer in a list
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": a tile is [m_i, n_j], two integers, not [4]}}
  %0 = psk_realize.nest "f/%0" layout <tile = [4]> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// tile: three integers
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": a tile is [m_i, n_j], two integers, not [1, 8, 1]}}
  %0 = psk_realize.nest "f/%0" layout <tile = [1, 8, 1]> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// tile: empty
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": a tile is [m_i, n_j], two integers, not []}}
  %0 = psk_realize.nest "f/%0" layout <tile = []> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// tile: a string inside
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": a tile is [m_i, n_j], two integers, not [1, "8"]}}
  %0 = psk_realize.nest "f/%0" layout <tile = [1, "8"]> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// tile: a boolean inside is no integer
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": a tile is [m_i, n_j], two integers, not [true, 8]}}
  %0 = psk_realize.nest "f/%0" layout <tile = [true, 8]> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// tile: a nested list
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": a tile is [m_i, n_j], two integers, not [[1, 8]]}}
  %0 = psk_realize.nest "f/%0" layout <tile = [[1, 8]]> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// tile: an integer
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": a tile is [m_i, n_j], two integers, not 8}}
  %0 = psk_realize.nest "f/%0" layout <tile = 8> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// tile: a string
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": a tile is [m_i, n_j], two integers, not "1x8"}}
  %0 = psk_realize.nest "f/%0" layout <tile = "1x8"> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// tile: a record
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": a tile is [m_i, n_j], two integers, not {"m": 1, "n": 8}}
  %0 = psk_realize.nest "f/%0" layout <tile = {m = 1, n = 8}> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// kblock: 64
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "kblock": a k-block is "none", 32 or 128, not 64}}
  %0 = psk_realize.nest "f/%0" layout <kblock = 64> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// jblock: 300 (the J-blocks are 256, 512 and 1024 columns)
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "jblock": a J-block is "none", 256, 512 or 1024 columns, not 300}}
  %0 = psk_realize.nest "f/%0" layout <jblock = 300> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// kblock: 0
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "kblock": a k-block is "none", 32 or 128, not 0}}
  %0 = psk_realize.nest "f/%0" layout <kblock = 0> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// kblock: a number as a string
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "kblock": a k-block is "none", 32 or 128, not "32"}}
  %0 = psk_realize.nest "f/%0" layout <kblock = "32"> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// kblock: another spelling of none
!Q = !psk_core.tensor<[b: 2, h: 2, s: 8, d: 4]>
!K = !psk_core.tensor<[b: 2, h: 2, t: 8, d: 4]>
!O = !psk_core.tensor<[b: 2, h: 2, s: 8, t: 8]>
func.func @f(%q: !Q, %k: !K) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "kblock": a k-block is "none", 32 or 128, not "None"}}
  %0 = psk_realize.nest "f/%0" layout <kblock = "None"> : !O {
    %0 = psk_core.ein %q[b, h, s, d], %k[b, h, t, d] : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// kblock: a boolean
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "kblock": a k-block is "none", 32 or 128, not false}}
  %0 = psk_realize.nest "f/%0" layout <kblock = false> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// kblock: a list
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "kblock": a k-block is "none", 32 or 128, not [32]}}
  %0 = psk_realize.nest "f/%0" layout <kblock = [32]> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// order: names K without a k-block
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "order": order "IJK" names K, but there is no k-block: without one the order is "IJ" or "JI"}}
  %0 = psk_realize.nest "f/%0" layout <order = "IJK"> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// order: names K with the k-block stated none
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "order": order "KIJ" names K, but there is no k-block: without one the order is "IJ" or "JI"}}
  %0 = psk_realize.nest "f/%0" layout <kblock = "none", order = "KIJ"> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// order: IJ with a k-block
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "order": with a k-block of 32 the order is a permutation of "IJK", not "IJ"}}
  %0 = psk_realize.nest "f/%0" layout <kblock = 32, order = "IJ"> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// order: JI with a k-block
!Q = !psk_core.tensor<[b: 2, h: 2, s: 8, d: 4]>
!K = !psk_core.tensor<[b: 2, h: 2, t: 8, d: 4]>
!O = !psk_core.tensor<[b: 2, h: 2, s: 8, t: 8]>
func.func @f(%q: !Q, %k: !K) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "order": with a k-block of 128 the order is a permutation of "IJK", not "JI"}}
  %0 = psk_realize.nest "f/%0" layout <kblock = 128, order = "JI"> : !O {
    %0 = psk_core.ein %q[b, h, s, d], %k[b, h, t, d] : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// order: not a permutation
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "order": an order is "IJ", "JI", or with a k-block a permutation of "IJK"; not "IK"}}
  %0 = psk_realize.nest "f/%0" layout <order = "IK"> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// order: a letter twice
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "order": an order is "IJ", "JI", or with a k-block a permutation of "IJK"; not "IJJ"}}
  %0 = psk_realize.nest "f/%0" layout <kblock = 32, order = "IJJ"> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// order: lower case
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "order": an order is "IJ", "JI", or with a k-block a permutation of "IJK"; not "ij"}}
  %0 = psk_realize.nest "f/%0" layout <order = "ij"> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// order: an integer
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "order": an order is "IJ", "JI", or with a k-block a permutation of "IJK"; not 12}}
  %0 = psk_realize.nest "f/%0" layout <order = 12> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// order: a list of letters
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "order": an order is "IJ", "JI", or with a k-block a permutation of "IJK"; not ["I", "J"]}}
  %0 = psk_realize.nest "f/%0" layout <order = ["I", "J"]> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// lanes: 3
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "lanes": lanes are 1, a register's width (2, 4, 8, 16) or full, not 3}}
  %0 = psk_realize.nest "f/%0" layout <lanes = 3> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// lanes: 0
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "lanes": lanes are 1, a register's width (2, 4, 8, 16) or full, not 0}}
  %0 = psk_realize.nest "f/%0" layout <lanes = 0> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// lanes: 32
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "lanes": lanes are 1, a register's width (2, 4, 8, 16) or full, not 32}}
  %0 = psk_realize.nest "f/%0" layout <lanes = 32> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// lanes: negative
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "lanes": lanes are 1, a register's width (2, 4, 8, 16) or full, not -4}}
  %0 = psk_realize.nest "f/%0" layout <lanes = -4> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// lanes: a string
!Q = !psk_core.tensor<[b: 2, h: 2, s: 8, d: 4]>
!K = !psk_core.tensor<[b: 2, h: 2, t: 8, d: 4]>
!O = !psk_core.tensor<[b: 2, h: 2, s: 8, t: 8]>
func.func @f(%q: !Q, %k: !K) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "lanes": lanes are 1, a register's width (2, 4, 8, 16) or full, not "4"}}
  %0 = psk_realize.nest "f/%0" layout <lanes = "4"> : !O {
    %0 = psk_core.ein %q[b, h, s, d], %k[b, h, t, d] : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// lanes: a boolean
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "lanes": lanes are 1, a register's width (2, 4, 8, 16) or full, not true}}
  %0 = psk_realize.nest "f/%0" layout <lanes = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// lanes: the executor's default is not a value a plan states
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "lanes": lanes are 1, a register's width (2, 4, 8, 16) or full, not "widest"}}
  %0 = psk_realize.nest "f/%0" layout <lanes = "widest"> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// split: an unknown string
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "split": a split is "none" or {"depth": d, "workers": p}, not "auto"}}
  %0 = psk_realize.nest "f/%0" layout <split = "auto"> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// split: the executor's default is not a value a plan states
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "split": a split is "none" or {"depth": d, "workers": p}, not "executor"}}
  %0 = psk_realize.nest "f/%0" layout <split = "executor"> : !S {
    %0 = psk_core.softmax %x [t] : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// split: an integer
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "split": a split is "none" or {"depth": d, "workers": p}, not 2}}
  %0 = psk_realize.nest "f/%0" layout <split = 2> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// split: a list
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "split": a split is "none" or {"depth": d, "workers": p}, not [1, 2]}}
  %0 = psk_realize.group "f/%0" layout <split = [1, 2]> : !S {
    %0 = psk_core.exp %x : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// split: no workers
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "split": a split is "none" or {"depth": d, "workers": p}, not {"depth": 1}}
  %0 = psk_realize.nest "f/%0" layout <split = {depth = 1}> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// split: no depth
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "split": a split is "none" or {"depth": d, "workers": p}, not {"workers": 2}}
  %0 = psk_realize.nest "f/%0" layout <split = {workers = 2}> : !S {
    %0 = psk_core.softmax %x [t] : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// split: an empty record
!S = !psk_core.tensor<[s: 8, t: 8]>
!R = !psk_core.tensor<[s: 8]>
func.func @f(%x: !S) -> !R {
  // expected-error @+1 {{E7002: nest "f/%0", decision "split": a split is "none" or {"depth": d, "workers": p}, not {}}
  %0 = psk_realize.nest "f/%0" layout <split = {}> : !R {
    %0 = psk_core.sum %x [t] : !R
    psk_realize.yield %0 : !R
  }
  func.return %0 : !R
}

// -----

// split: an extra key
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "split": a split is "none" or {"depth": d, "workers": p}, not {"depth": 1, "workers": 2, "axis": 0}}
  %0 = psk_realize.nest "f/%0" layout <split = {depth = 1, workers = 2, axis = 0}> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// split: depth 3
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "split": a split's depth is 0, 1 or 2 (the loop, outermost first), not 3}}
  %0 = psk_realize.nest "f/%0" layout <split = {depth = 3, workers = 2}> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// split: depth -1
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "split": a split's depth is 0, 1 or 2 (the loop, outermost first), not -1}}
  %0 = psk_realize.group "f/%0" layout <split = {depth = -1, workers = 2}> : !S {
    %0 = psk_core.exp %x : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// split: depth a string
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "split": a split's depth is 0, 1 or 2 (the loop, outermost first), not "1"}}
  %0 = psk_realize.nest "f/%0" layout <split = {depth = "1", workers = 2}> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// split: depth a boolean
!S = !psk_core.tensor<[s: 8, t: 8]>
!R = !psk_core.tensor<[s: 8]>
func.func @f(%x: !S) -> !R {
  // expected-error @+1 {{E7002: nest "f/%0", decision "split": a split's depth is 0, 1 or 2 (the loop, outermost first), not true}}
  %0 = psk_realize.nest "f/%0" layout <split = {depth = true, workers = 2}> : !R {
    %0 = psk_core.sum %x [t] : !R
    psk_realize.yield %0 : !R
  }
  func.return %0 : !R
}

// -----

// split: depth a list
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "split": a split's depth is 0, 1 or 2 (the loop, outermost first), not [1]}}
  %0 = psk_realize.nest "f/%0" layout <split = {depth = [1], workers = 2}> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// split: no workers at all
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "split": a split's workers are a positive integer, not 0}}
  %0 = psk_realize.nest "f/%0" layout <split = {depth = 0, workers = 0}> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// split: negative workers
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "split": a split's workers are a positive integer, not -2}}
  %0 = psk_realize.nest "f/%0" layout <split = {depth = 1, workers = -2}> : !S {
    %0 = psk_core.softmax %x [t] : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// split: workers a string
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "split": a split's workers are a positive integer, not "all"}}
  %0 = psk_realize.nest "f/%0" layout <split = {depth = 1, workers = "all"}> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// split: workers a boolean
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "split": a split's workers are a positive integer, not true}}
  %0 = psk_realize.group "f/%0" layout <split = {depth = 0, workers = true}> : !S {
    %0 = psk_core.exp %x : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// split: workers a record
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "split": a split's workers are a positive integer, not {"n": 2}}
  %0 = psk_realize.nest "f/%0" layout <split = {depth = 0, workers = {n = 2}}> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// pack: an integer
!Q = !psk_core.tensor<[b: 2, h: 2, s: 8, d: 4]>
!K = !psk_core.tensor<[b: 2, h: 2, t: 8, d: 4]>
!O = !psk_core.tensor<[b: 2, h: 2, s: 8, t: 8]>
func.func @f(%q: !Q, %k: !K) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "pack": a pack is true, false or "both", not 1}}
  %0 = psk_realize.nest "f/%0" layout <pack = 1> : !O {
    %0 = psk_core.ein %q[b, h, s, d], %k[b, h, t, d] : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// pack: a string
!Q = !psk_core.tensor<[b: 2, h: 2, s: 8, d: 4]>
!K = !psk_core.tensor<[b: 2, h: 2, t: 8, d: 4]>
!O = !psk_core.tensor<[b: 2, h: 2, s: 8, t: 8]>
func.func @f(%q: !Q, %k: !K) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "pack": a pack is true, false or "both", not "true"}}
  %0 = psk_realize.nest "f/%0" layout <pack = "true"> : !O {
    %0 = psk_core.ein %q[b, h, s, d], %k[b, h, t, d] : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// pack: a list
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "pack": a pack is true, false or "both", not [true]}}
  %0 = psk_realize.nest "f/%0" layout <pack = [true]> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// epilogue: an integer
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": an epilogue is true or false, not 1}}
  %0 = psk_realize.nest "f/%0" layout <epilogue = 1> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// epilogue: a string
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": an epilogue is true or false, not "yes"}}
  %0 = psk_realize.nest "f/%0" layout <epilogue = "yes"> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// epilogue: a record
!Q = !psk_core.tensor<[b: 2, h: 2, s: 8, d: 4]>
!K = !psk_core.tensor<[b: 2, h: 2, t: 8, d: 4]>
!O = !psk_core.tensor<[b: 2, h: 2, s: 8, t: 8]>
func.func @f(%q: !Q, %k: !K) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": an epilogue is true or false, not {"add": true}}
  %0 = psk_realize.nest "f/%0" layout <epilogue = {add = true}> : !O {
    %0 = psk_core.ein %q[b, h, s, d], %k[b, h, t, d] : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// passes: 1
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "passes": a softmax takes 2 or 3 passes, not 1}}
  %0 = psk_realize.nest "f/%0" layout <passes = 1> : !S {
    %0 = psk_core.softmax %x [t] : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// passes: 4
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "passes": a softmax takes 2 or 3 passes, not 4}}
  %0 = psk_realize.nest "f/%0" layout <passes = 4> : !S {
    %0 = psk_core.softmax %x [t] : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// passes: 0
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "passes": a softmax takes 2 or 3 passes, not 0}}
  %0 = psk_realize.nest "f/%0" layout <passes = 0> : !S {
    %0 = psk_core.softmax %x [t] : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// passes: a string
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "passes": a softmax takes 2 or 3 passes, not "2"}}
  %0 = psk_realize.nest "f/%0" layout <passes = "2"> : !S {
    %0 = psk_core.softmax %x [t] : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// passes: a boolean
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "passes": a softmax takes 2 or 3 passes, not true}}
  %0 = psk_realize.nest "f/%0" layout <passes = true> : !S {
    %0 = psk_core.softmax %x [t] : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// passes: a list
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "passes": a softmax takes 2 or 3 passes, not [2]}}
  %0 = psk_realize.nest "f/%0" layout <passes = [2]> : !S {
    %0 = psk_core.softmax %x [t] : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// unknown decision on a contraction
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tiles": there is no decision "tiles"; the decisions are form, tile, kblock, jblock, order, lanes, split, pack, passes, epilogue}}
  %0 = psk_realize.nest "f/%0" layout <tiles = [1, 8]> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// unknown decision: names are case-sensitive
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "Tile": there is no decision "Tile"; the decisions are form, tile, kblock, jblock, order, lanes, split, pack, passes, epilogue}}
  %0 = psk_realize.nest "f/%0" layout <Tile = [1, 8]> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// unknown decision beside valid ones
!Q = !psk_core.tensor<[b: 2, h: 2, s: 8, d: 4]>
!K = !psk_core.tensor<[b: 2, h: 2, t: 8, d: 4]>
!O = !psk_core.tensor<[b: 2, h: 2, s: 8, t: 8]>
func.func @f(%q: !Q, %k: !K) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "vectorize": there is no decision "vectorize"; the decisions are form, tile, kblock, jblock, order, lanes, split, pack, passes, epilogue}}
  %0 = psk_realize.nest "f/%0" layout <tile = [4, 16], vectorize = true, lanes = 4> : !O {
    %0 = psk_core.ein %q[b, h, s, d], %k[b, h, t, d] : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// unknown decision on a softmax
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "fused": there is no decision "fused"; the decisions are form, tile, kblock, jblock, order, lanes, split, pack, passes, epilogue}}
  %0 = psk_realize.nest "f/%0" layout <fused = true> : !S {
    %0 = psk_core.softmax %x [t] : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// unknown decision on a group
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "threads": there is no decision "threads"; the decisions are form, tile, kblock, jblock, order, lanes, split, pack, passes, epilogue}}
  %0 = psk_realize.group "f/%0" layout <threads = 4> : !S {
    %0 = psk_core.exp %x : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// unknown decision on a reduction
!S = !psk_core.tensor<[s: 8, t: 8]>
!R = !psk_core.tensor<[s: 8]>
func.func @f(%x: !S) -> !R {
  // expected-error @+1 {{E7002: nest "f/%0", decision "unroll": there is no decision "unroll"; the decisions are form, tile, kblock, jblock, order, lanes, split, pack, passes, epilogue}}
  %0 = psk_realize.nest "f/%0" layout <unroll = 2> : !R {
    %0 = psk_core.sum %x [t] : !R
    psk_realize.yield %0 : !R
  }
  func.return %0 : !R
}

// -----

// a decision of another kind, out of its domain too: the kind is reported
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": "tile" is not a decision of this nest, which is a softmax}}
  %0 = psk_realize.nest "f/%0" layout <tile = [3, 3]> : !S {
    %0 = psk_core.softmax %x [t] : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// an unknown decision and a decision of another kind: the unknown one is reported
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  // expected-error @+1 {{E7002: nest "f/%0", decision "lane": there is no decision "lane"; the decisions are form, tile, kblock, jblock, order, lanes, split, pack, passes, epilogue}}
  %0 = psk_realize.nest "f/%0" layout <tile = [1, 8], lane = 4> : !S {
    %0 = psk_core.softmax %x [t] : !S
    psk_realize.yield %0 : !S
  }
  func.return %0 : !S
}

// -----

// a valid decision of the wrong kind, then one out of its domain: the kind is reported
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "passes": "passes" is not a decision of this nest, which is a contraction}}
  %0 = psk_realize.nest "f/%0" layout <passes = 2, tile = [3, 8]> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// Every value of every contraction decision's domain: accepted
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  %0 = psk_realize.nest "f/%0" layout <form = "tiled"> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.nest "f/%1" layout <form = "row-wise"> : !O {
    %1 = psk_core.dot %a, %w : !O
    psk_realize.yield %1 : !O
  }
  %2 = psk_realize.nest "f/%2" layout <tile = [1, 1]> : !O {
    %2 = psk_core.dot %a, %w : !O
    psk_realize.yield %2 : !O
  }
  %3 = psk_realize.nest "f/%3" layout <tile = [1, 4]> : !O {
    %3 = psk_core.dot %a, %w : !O
    psk_realize.yield %3 : !O
  }
  %4 = psk_realize.nest "f/%4" layout <tile = [1, 8]> : !O {
    %4 = psk_core.dot %a, %w : !O
    psk_realize.yield %4 : !O
  }
  %5 = psk_realize.nest "f/%5" layout <tile = [1, 16]> : !O {
    %5 = psk_core.dot %a, %w : !O
    psk_realize.yield %5 : !O
  }
  %6 = psk_realize.nest "f/%6" layout <tile = [2, 4]> : !O {
    %6 = psk_core.dot %a, %w : !O
    psk_realize.yield %6 : !O
  }
  %7 = psk_realize.nest "f/%7" layout <tile = [2, 8]> : !O {
    %7 = psk_core.dot %a, %w : !O
    psk_realize.yield %7 : !O
  }
  %8 = psk_realize.nest "f/%8" layout <tile = [2, 16]> : !O {
    %8 = psk_core.dot %a, %w : !O
    psk_realize.yield %8 : !O
  }
  %9 = psk_realize.nest "f/%9" layout <tile = [4, 4]> : !O {
    %9 = psk_core.dot %a, %w : !O
    psk_realize.yield %9 : !O
  }
  %10 = psk_realize.nest "f/%10" layout <tile = [4, 8]> : !O {
    %10 = psk_core.dot %a, %w : !O
    psk_realize.yield %10 : !O
  }
  %11 = psk_realize.nest "f/%11" layout <tile = [4, 16]> : !O {
    %11 = psk_core.dot %a, %w : !O
    psk_realize.yield %11 : !O
  }
  %12 = psk_realize.nest "f/%12" layout <kblock = "none"> : !O {
    %12 = psk_core.dot %a, %w : !O
    psk_realize.yield %12 : !O
  }
  %13 = psk_realize.nest "f/%13" layout <kblock = 32> : !O {
    %13 = psk_core.dot %a, %w : !O
    psk_realize.yield %13 : !O
  }
  %14 = psk_realize.nest "f/%14" layout <kblock = 128> : !O {
    %14 = psk_core.dot %a, %w : !O
    psk_realize.yield %14 : !O
  }
  %15 = psk_realize.nest "f/%15" layout <order = "IJ"> : !O {
    %15 = psk_core.dot %a, %w : !O
    psk_realize.yield %15 : !O
  }
  %16 = psk_realize.nest "f/%16" layout <order = "JI"> : !O {
    %16 = psk_core.dot %a, %w : !O
    psk_realize.yield %16 : !O
  }
  %17 = psk_realize.nest "f/%17" layout <kblock = 32, order = "IJK"> : !O {
    %17 = psk_core.dot %a, %w : !O
    psk_realize.yield %17 : !O
  }
  %18 = psk_realize.nest "f/%18" layout <kblock = 32, order = "IKJ"> : !O {
    %18 = psk_core.dot %a, %w : !O
    psk_realize.yield %18 : !O
  }
  %19 = psk_realize.nest "f/%19" layout <kblock = 32, order = "JIK"> : !O {
    %19 = psk_core.dot %a, %w : !O
    psk_realize.yield %19 : !O
  }
  %20 = psk_realize.nest "f/%20" layout <kblock = 32, order = "JKI"> : !O {
    %20 = psk_core.dot %a, %w : !O
    psk_realize.yield %20 : !O
  }
  %21 = psk_realize.nest "f/%21" layout <kblock = 32, order = "KIJ"> : !O {
    %21 = psk_core.dot %a, %w : !O
    psk_realize.yield %21 : !O
  }
  %22 = psk_realize.nest "f/%22" layout <kblock = 32, order = "KJI"> : !O {
    %22 = psk_core.dot %a, %w : !O
    psk_realize.yield %22 : !O
  }
  %23 = psk_realize.nest "f/%23" layout <lanes = 1> : !O {
    %23 = psk_core.dot %a, %w : !O
    psk_realize.yield %23 : !O
  }
  %24 = psk_realize.nest "f/%24" layout <lanes = 2> : !O {
    %24 = psk_core.dot %a, %w : !O
    psk_realize.yield %24 : !O
  }
  %25 = psk_realize.nest "f/%25" layout <lanes = 4> : !O {
    %25 = psk_core.dot %a, %w : !O
    psk_realize.yield %25 : !O
  }
  %26 = psk_realize.nest "f/%26" layout <lanes = 8> : !O {
    %26 = psk_core.dot %a, %w : !O
    psk_realize.yield %26 : !O
  }
  %27 = psk_realize.nest "f/%27" layout <lanes = 16> : !O {
    %27 = psk_core.dot %a, %w : !O
    psk_realize.yield %27 : !O
  }
  %28 = psk_realize.nest "f/%28" layout <split = "none"> : !O {
    %28 = psk_core.dot %a, %w : !O
    psk_realize.yield %28 : !O
  }
  %29 = psk_realize.nest "f/%29" layout <split = {depth = 0, workers = 1}> : !O {
    %29 = psk_core.dot %a, %w : !O
    psk_realize.yield %29 : !O
  }
  %30 = psk_realize.nest "f/%30" layout <split = {depth = 0, workers = 7}> : !O {
    %30 = psk_core.dot %a, %w : !O
    psk_realize.yield %30 : !O
  }
  %31 = psk_realize.nest "f/%31" layout <split = {depth = 1, workers = 1}> : !O {
    %31 = psk_core.dot %a, %w : !O
    psk_realize.yield %31 : !O
  }
  %32 = psk_realize.nest "f/%32" layout <split = {depth = 1, workers = 7}> : !O {
    %32 = psk_core.dot %a, %w : !O
    psk_realize.yield %32 : !O
  }
  %33 = psk_realize.nest "f/%33" layout <split = {depth = 2, workers = 1}> : !O {
    %33 = psk_core.dot %a, %w : !O
    psk_realize.yield %33 : !O
  }
  %34 = psk_realize.nest "f/%34" layout <split = {depth = 2, workers = 7}> : !O {
    %34 = psk_core.dot %a, %w : !O
    psk_realize.yield %34 : !O
  }
  %35 = psk_realize.nest "f/%35" layout <pack = true> : !O {
    %35 = psk_core.dot %a, %w : !O
    psk_realize.yield %35 : !O
  }
  %36 = psk_realize.nest "f/%36" layout <pack = false> : !O {
    %36 = psk_core.dot %a, %w : !O
    psk_realize.yield %36 : !O
  }
  %37 = psk_realize.nest "f/%37" layout <epilogue = false> : !O {
    %37 = psk_core.dot %a, %w : !O
    psk_realize.yield %37 : !O
  }
  func.return %37 : !O
}

// -----

// A softmax's passes and split: accepted
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> !S {
  %0 = psk_realize.nest "f/%0" layout <passes = 2> : !S {
    %0 = psk_core.softmax %x [t] : !S
    psk_realize.yield %0 : !S
  }
  %1 = psk_realize.nest "f/%1" layout <passes = 3, split = {depth = 0, workers = 4}> : !S {
    %1 = psk_core.softmax %0 [t] : !S
    psk_realize.yield %1 : !S
  }
  %2 = psk_realize.group "f/%2" layout <split = "none"> : !S {
    %2 = psk_core.exp %1 : !S
    psk_realize.yield %2 : !S
  }
  func.return %2 : !S
}
