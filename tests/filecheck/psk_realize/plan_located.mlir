// The plan's first check through the pass on a PSK-Core program: psk-fuse
// makes the nests, psk-realize{plan=...} refuses an ill-formed layout with
// E7002 at the source line of the nest's primitive (a group's root), with
// the line and a caret. Every kind of violation: a decision of another
// kind, a value outside its domain (including JSON's null and floats,
// which the layout syntax cannot write), an unknown decision, and each
// epilogue condition, one of them through a realization record that types
// the add apart from the product.
//
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/located_softmax_tile.json"}' 2>&1 | filecheck %s --check-prefix=SOFTMAX-TILE
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/located_dot_tile.json"}' 2>&1 | filecheck %s --check-prefix=DOT-TILE
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/located_dot_lanes_float.json"}' 2>&1 | filecheck %s --check-prefix=LANES-FLOAT
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/located_dot_order.json"}' 2>&1 | filecheck %s --check-prefix=ORDER
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/located_dot_unknown.json"}' 2>&1 | filecheck %s --check-prefix=UNKNOWN
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/located_group_split_null.json"}' 2>&1 | filecheck %s --check-prefix=SPLIT-NULL
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/located_group_tile.json"}' 2>&1 | filecheck %s --check-prefix=GROUP-TILE
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/located_scores_passes.json"}' 2>&1 | filecheck %s --check-prefix=SCORES-PASSES
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/located_reduction_split.json"}' 2>&1 | filecheck %s --check-prefix=REDUCTION-SPLIT
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/located_epilogue_string.json"}' 2>&1 | filecheck %s --check-prefix=EPILOGUE-STRING
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/located_epilogue_softmax.json"}' 2>&1 | filecheck %s --check-prefix=EPILOGUE-SOFTMAX
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/located_epilogue_fused.json"}' 2>&1 | filecheck %s --check-prefix=EPILOGUE-FUSED
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/located_epilogue_mixed.json"}' 2>&1 | filecheck %s --check-prefix=EPILOGUE-MIXED
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/located_epilogue_twice.json"}' 2>&1 | filecheck %s --check-prefix=EPILOGUE-TWICE
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/located_epilogue_result.json"}' 2>&1 | filecheck %s --check-prefix=EPILOGUE-RESULT
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/located_epilogue_real.json"}' 2>&1 | filecheck %s --check-prefix=EPILOGUE-REAL
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/located_epilogue_wide.json"}' 2>&1 | filecheck %s --check-prefix=EPILOGUE-WIDE
//
// The same program under a plan stating only what each nest's kind has is
// accepted, and what psk-realize prints reads back and verifies.
//
// RUN: presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/located_accepted.json"}' | filecheck %s --check-prefix=ACCEPTED
// RUN: presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/located_accepted.json"}' | presk-opt | filecheck %s --check-prefix=ACCEPTED

!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!B = !psk_core.tensor<[j: 16]>
!N = !psk_core.tensor<[n: 2, i: 4, j: 16]>
!I = !psk_core.tensor<[i: 4]>
!R = !psk_core.real
!Q = !psk_core.tensor<[b: 2, h: 2, s: 8, d: 4]>
!K = !psk_core.tensor<[b: 2, h: 2, t: 8, d: 4]>
!S = !psk_core.tensor<[b: 2, h: 2, s: 8, t: 8]>
!M = !psk_core.tensor<[s: 8, t: 8]>

// A bias after a dot, then a softmax: the product can take the add.
func.func @linear(%a: !A, %w: !W, %b: !B) -> !O {
  // DOT-TILE: plan_located.mlir:[[# @LINE + 14]]:3: error: E7002: {{.*}}Inputs/located_dot_tile.json: nest "linear/%0", decision "tile": a tile is [1, 1], or m_i in 1, 2, 4, 6, 8 and n_j in 4, 8, 16, 32; not [3, 8]
  // DOT-TILE-NEXT: {{^}}  %0 = psk_core.dot %a, %w : !O
  // DOT-TILE-NEXT: {{^}}  ^
  // DOT-TILE-NOT: Traceback
  // LANES-FLOAT: plan_located.mlir:[[# @LINE + 10]]:3: error: E7002: {{.*}}Inputs/located_dot_lanes_float.json: nest "linear/%0", decision "lanes": lanes are 1, a register's width (2, 4, 8, 16) or full, not 4.0
  // ORDER: plan_located.mlir:[[# @LINE + 9]]:3: error: E7002: {{.*}}Inputs/located_dot_order.json: nest "linear/%0", decision "order": order "IJK" names K, but there is no k-block: without one the order is "IJ" or "JI"
  // UNKNOWN: plan_located.mlir:[[# @LINE + 8]]:3: error: E7002: {{.*}}Inputs/located_dot_unknown.json: nest "linear/%0", decision "vector": there is no decision "vector"; the decisions are form, tile, kblock, jblock, order, lanes, split, pack, passes, epilogue
  // EPILOGUE-STRING: plan_located.mlir:[[# @LINE + 7]]:3: error: E7002: {{.*}}Inputs/located_epilogue_string.json: nest "linear/%0", decision "epilogue": an epilogue is true or false, not "true"
  // EPILOGUE-MIXED: plan_located.mlir:[[# @LINE + 6]]:3: error: E7002: {{.*}}Inputs/located_epilogue_mixed.json: nest "linear/%0", decision "epilogue": the add's site "linear/%1" is realized in bf16, the product in f32; one kernel computes both
  // EPILOGUE-MIXED-NEXT: {{^}}  %0 = psk_core.dot %a, %w : !O
  // ACCEPTED-LABEL: func.func @linear(
  // ACCEPTED: psk_realize.nest "linear/%0" realize <bf16, f32> layout <tile = [4, 16], lanes = 1, epilogue = true, default(form = "tiled", kblock = "none", order = "IJ", split = "executor", pack = false)> : !O
  // ACCEPTED: psk_realize.group "linear/%1" realize <bf16, f32> layout <default(split = "executor")> : !O
  // ACCEPTED: psk_realize.nest "linear/%2" realize <bf16, f32> layout <passes = 2, default(split = "executor")> : !O
  %0 = psk_core.dot %a, %w : !O
  %1 = psk_core.add %0, %b : !O
  // SOFTMAX-TILE: plan_located.mlir:[[# @LINE + 5]]:3: error: E7002: {{.*}}Inputs/located_softmax_tile.json: nest "linear/%2", decision "tile": "tile" is not a decision of this nest, which is a softmax
  // SOFTMAX-TILE-NEXT: {{^}}  %2 = psk_core.softmax %1 [j] : !O
  // SOFTMAX-TILE-NEXT: {{^}}  ^
  // SOFTMAX-TILE-NOT: error
  // EPILOGUE-SOFTMAX: plan_located.mlir:[[# @LINE + 1]]:3: error: E7002: {{.*}}Inputs/located_epilogue_softmax.json: nest "linear/%2", decision "epilogue": "epilogue" is not a decision of this nest, which is a softmax
  %2 = psk_core.softmax %1 [j] : !O
  func.return %2 : !O
}

// The add fused with an exp into one group: it does not launch by itself.
func.func @fused(%a: !A, %w: !W, %b: !B) -> !O {
  // EPILOGUE-FUSED: plan_located.mlir:[[# @LINE + 1]]:3: error: E7002: {{.*}}Inputs/located_epilogue_fused.json: nest "fused/%0", decision "epilogue": the add that reads the product is fused into group "fused/%2" of 2 members, so it does not launch by itself
  %0 = psk_core.dot %a, %w : !O
  %1 = psk_core.add %0, %b : !O
  // SPLIT-NULL: plan_located.mlir:[[# @LINE + 3]]:3: error: E7002: {{.*}}Inputs/located_group_split_null.json: nest "fused/%2", decision "split": a split is "none" or {"depth": d, "workers": p}, not null
  // GROUP-TILE: plan_located.mlir:[[# @LINE + 2]]:3: error: E7002: {{.*}}Inputs/located_group_tile.json: nest "fused/%2", decision "tile": "tile" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split
  // GROUP-TILE-NEXT: {{^}}  %2 = psk_core.exp %1 : !O
  %2 = psk_core.exp %1 : !O
  func.return %2 : !O
}

// Two readers of the product.
func.func @twice(%a: !A, %w: !W, %b: !B) -> (!O, !O) {
  // EPILOGUE-TWICE: plan_located.mlir:[[# @LINE + 1]]:3: error: E7002: {{.*}}Inputs/located_epilogue_twice.json: nest "twice/%0", decision "epilogue": the product's value has 2 readers; an epilogue needs one add or mul alone to read it
  %0 = psk_core.dot %a, %w : !O
  %1 = psk_core.add %0, %b : !O
  %2 = psk_core.mul %0, %b : !O
  func.return %1, %2 : !O, !O
}

// The product is the function's result.
func.func @result(%a: !A, %w: !W) -> !O {
  // EPILOGUE-RESULT: plan_located.mlir:[[# @LINE + 1]]:3: error: E7002: {{.*}}Inputs/located_epilogue_result.json: nest "result/%0", decision "epilogue": the product's value is the function's result
  %0 = psk_core.dot %a, %w : !O
  func.return %0 : !O
}

// The add's other operand is a real.
func.func @real(%a: !A, %w: !W, %c: !R) -> !O {
  // EPILOGUE-REAL: plan_located.mlir:[[# @LINE + 1]]:3: error: E7002: {{.*}}Inputs/located_epilogue_real.json: nest "real/%0", decision "epilogue": the add's other operand is a real, not a tensor
  %0 = psk_core.dot %a, %w : !O
  %1 = psk_core.add %c, %0 : !O
  func.return %1 : !O
}

// The add widens the product's output.
func.func @wide(%a: !A, %w: !W, %x: !N) -> !N {
  // EPILOGUE-WIDE: plan_located.mlir:[[# @LINE + 1]]:3: error: E7002: {{.*}}Inputs/located_epilogue_wide.json: nest "wide/%0", decision "epilogue": the add's other operand widens the product's output
  %0 = psk_core.dot %a, %w : !O
  %1 = psk_core.add %0, %x : !N
  func.return %1 : !N
}

// Attention's scores (an NT contraction) and a mask added to them.
func.func @scores(%q: !Q, %k: !K, %m: !M) -> !S {
  // SCORES-PASSES: plan_located.mlir:[[# @LINE + 3]]:3: error: E7002: {{.*}}Inputs/located_scores_passes.json: nest "scores/%0", decision "passes": "passes" is not a decision of this nest, which is a contraction
  // ACCEPTED-LABEL: func.func @scores(
  // ACCEPTED: psk_realize.nest "scores/%0" realize <bf16, f32> layout <kblock = 128, order = "KIJ", pack = true, epilogue = true, default({{.*}})> : !S
  %0 = psk_core.ein %q[b, h, s, d], %k[b, h, t, d] : !S
  %1 = psk_core.add %0, %m : !S
  func.return %1 : !S
}

// A reduction and a group after it.
func.func @stats(%x: !O) -> !I {
  // REDUCTION-SPLIT: plan_located.mlir:[[# @LINE + 4]]:3: error: E7002: {{.*}}Inputs/located_reduction_split.json: nest "stats/%0", decision "split": a split's depth is 0, 1 or 2 (the loop, outermost first), not 3
  // ACCEPTED-LABEL: func.func @stats(
  // ACCEPTED: psk_realize.nest "stats/%0" realize <f32, f32> layout <split = "none"> : !I
  // ACCEPTED: psk_realize.group "stats/%1" realize <f32, f32> layout <default(split = "executor")> : !I
  %0 = psk_core.sum %x [j] : !I
  %1 = psk_core.exp %0 : !I
  func.return %1 : !I
}
