// RUN: presk-opt %s --split-input-file --verify-diagnostics
//
// The typing rules of PSK-Core, one chunk per violated rule.
//
// Coverage: psk_core.py, psk_core_rules.py and psk_core_types.py hold 76
// `raise VerifyException` sites. 61 have a chunk below that triggers them
// with their own message (E2001); one more (FoldOp, "which is not defined")
// is pre-empted by the driver's E2002 check and has a chunk for that, and
// another (CompareOp's "predicate ... is none of") by the parser's check of
// the same words. The 13 others cannot be reached from IR text, because an
// earlier check always fires first; each has a chunk showing that earlier
// check where one exists:
//   psk_core_types.size_value   "an axis size is an integer or a name"
//       (sizes are only built by the type parser, as integers or names)
//   rules.reduce        "reduces a tensor of reals"     } the ops' operand
//   rules.dot           "'dot' takes two tensors"       } constraints
//   rules.ein           "'ein' takes tensors"           } (operand_def(TensorType),
//   rules.softmax       "'softmax' takes a tensor"      }  IndexTensorType) are
//   rules.cross_entropy "takes logits (a tensor) and"   }  checked before the
//   rules.gather        "'gather' takes a table and"    }  typing rule
//   rules.split         "'split' takes a tensor"        }
//   rules.merge         "'merge' takes a tensor"        }
//   EinOp    "'ein' gives a tensor"           } result constraints
//   RecordOp "'record' gives a record type"   } (result_def(...)) first
//   rules.ein "'ein' output names an axis twice": the output names are the
//       result type's axis names, which the tensor type already keeps distinct
//   unstack "a stacked tree's leaves are tensors, not": fold's layer count
//       (_tensor_leaves) refuses a non-tensor leaf first
//
// Type verifiers run while the type is parsed: the error (E2001) is placed
// at the operation being parsed (a function's signature: the func.func line).

// ===========================================================================
// Types (psk_core_types.py)
// ===========================================================================

// expected-error @+1 {{E2001: a tensor has at least one axis; a value with none is !psk_core.real}}
func.func @no_axes(%x: !psk_core.tensor<[]>) {
  func.return
}

// -----

// expected-error @+1 {{E2001: axis names must be distinct, got [seq, seq]}}
func.func @duplicate_axis(%x: !psk_core.tensor<[seq: T, seq: T]>) {
  func.return
}

// -----

// expected-error @+1 {{E2001: axis 'embed' has size 0; sizes are positive}}
func.func @zero_size(%x: !psk_core.tensor<[batch: B, embed: 0]>) {
  func.return
}

// -----

// expected-error @+1 {{E2001: axis 'embed' has size -4; sizes are positive}}
func.func @negative_size(%x: !psk_core.tensor<[embed: -4]>) {
  func.return
}

// -----

// Past 2^63 the size could not be a kernel's i64 constant; past 2^40 it is no machine's buffer.
// expected-error @+1 {{E2001: axis 'embed' has size 99999999999999999999; sizes are at most 2^40 = 1099511627776}}
func.func @huge_size(%x: !psk_core.tensor<[embed: 99999999999999999999]>) {
  func.return
}

// -----

// The index tensor type shares the axis checks.
// expected-error @+1 {{E2001: axis names must be distinct, got [t, t]}}
func.func @index_duplicate_axis(%m: !psk_core.index<[t: 4, t: 4], 2>) {
  func.return
}

// -----

// expected-error @+1 {{E2001: an index range is positive, got 0}}
func.func @index_range_zero(%m: !psk_core.index<[t: 4], 0>) {
  func.return
}

// -----

// expected-error @+1 {{E2001: record field names must be distinct, got ['w', 'w']}}
func.func @duplicate_field(%p: !psk_core.record<w: !psk_core.real, w: !psk_core.real>) {
  func.return
}

// -----

// expected-error @+1 {{E2001: a record field is a PSK-Core type, not f32}}
func.func @record_of_f32(%p: !psk_core.record<w: f32>) {
  func.return
}

// -----

// expected-error @+1 {{E2001: a tuple element is a PSK-Core type, not i64}}
func.func @tuple_of_i64(%t: !psk_core.tuple<!psk_core.real, i64>) {
  func.return
}

// ===========================================================================
// Every op: the declared result type must be the one the rule gives
// ===========================================================================

// -----

func.func @result_mismatch(%x: !psk_core.tensor<[a: 2]>, %y: !psk_core.tensor<[b: 3]>) {
  // expected-error @+1 {{E2001: result type is tensor[a: 3], but the typing rule gives tensor[a: 2]}}
  %0 = psk_core.add %x, %x : !psk_core.tensor<[a: 3]>
  func.return
}

// -----

// A real does not take the type of what it is added to implicitly: the result is declared.
func.func @result_mismatch_real(%c: !psk_core.real) {
  // expected-error @+1 {{E2001: result type is tensor[a: 2], but the typing rule gives real}}
  %0 = psk_core.mul %c, %c : !psk_core.tensor<[a: 2]>
  func.return
}

// ===========================================================================
// Broadcasting and elementwise primitives (psk_core_rules.py)
// ===========================================================================

// -----

func.func @broadcast_order(%x: !psk_core.tensor<[a: 2, b: 3]>, %y: !psk_core.tensor<[b: 3, a: 2]>) {
  // expected-error @+1 {{E2001: cannot broadcast [a: 2, b: 3] with [b: 3, a: 2]: the axes of one operand must appear, in order and with equal sizes, in the other's}}
  %0 = psk_core.add %x, %y : !psk_core.tensor<[a: 2, b: 3]>
  func.return
}

// -----

func.func @broadcast_sizes(%x: !psk_core.tensor<[batch: B, embed: D]>, %b: !psk_core.tensor<[embed: E]>) {
  // expected-error @+1 {{E2001: cannot broadcast [batch: B, embed: D] with [embed: E]}}
  %0 = psk_core.add %x, %b : !psk_core.tensor<[batch: B, embed: D]>
  func.return
}

// -----

func.func @broadcast_disjoint(%x: !psk_core.tensor<[a: 2]>, %y: !psk_core.tensor<[b: 2]>) {
  // expected-error @+1 {{E2001: cannot broadcast [a: 2] with [b: 2]}}
  %0 = psk_core.mul %x, %y : !psk_core.tensor<[a: 2, b: 2]>
  func.return
}

// -----

func.func @elementwise_index(%i: !psk_core.index<[a: 2], 5>) {
  // expected-error @+1 {{E2001: 'psk_core.exp' takes reals, tensors of reals or parameter trees, not index[a: 2] < 5}}
  %0 = psk_core.exp %i : !psk_core.index<[a: 2], 5>
  func.return
}

// -----

func.func @tree_with_tensor(%p: !psk_core.record<w: !psk_core.tensor<[a: 2]>>, %x: !psk_core.tensor<[a: 2]>) {
  // expected-error @+1 {{E2001: 'psk_core.add' on a parameter tree takes trees of the same structure or reals, got record{w: tensor[a: 2]} and tensor[a: 2]}}
  %0 = psk_core.add %p, %x : !psk_core.record<w: !psk_core.tensor<[a: 2]>>
  func.return
}

// -----

func.func @record_with_tuple(%p: !psk_core.record<w: !psk_core.real>, %t: !psk_core.tuple<!psk_core.real>) {
  // expected-error @+1 {{E2001: 'psk_core.sub' on a parameter tree takes trees of the same structure or reals, got record{w: real} and tuple(real)}}
  %0 = psk_core.sub %p, %t : !psk_core.record<w: !psk_core.real>
  func.return
}

// -----

func.func @records_field_order(%p: !psk_core.record<w: !psk_core.real, b: !psk_core.real>,
                               %q: !psk_core.record<b: !psk_core.real, w: !psk_core.real>) {
  // expected-error @+1 {{E2001: 'psk_core.add' on records needs the same fields in the same order, got record{w: real, b: real} and record{b: real, w: real}}}
  %0 = psk_core.add %p, %q : !psk_core.record<w: !psk_core.real, b: !psk_core.real>
  func.return
}

// -----

func.func @tuple_lengths(%s: !psk_core.tuple<!psk_core.real>, %t: !psk_core.tuple<!psk_core.real, !psk_core.real>) {
  // expected-error @+1 {{E2001: 'psk_core.mul' on tuples needs equal lengths, got tuple(real) and tuple(real, real)}}
  %0 = psk_core.mul %s, %t : !psk_core.tuple<!psk_core.real>
  func.return
}

// -----

// Leaf by leaf: a mismatch inside a tree is reported with the leaves' axes.
func.func @tree_leaf_mismatch(%p: !psk_core.record<w: !psk_core.tensor<[a: 2]>>, %q: !psk_core.record<w: !psk_core.tensor<[a: 3]>>) {
  // expected-error @+1 {{E2001: cannot broadcast [a: 2] with [a: 3]}}
  %0 = psk_core.add %p, %q : !psk_core.record<w: !psk_core.tensor<[a: 2]>>
  func.return
}

// -----

func.func @pow_zero(%x: !psk_core.tensor<[a: 2]>) {
  // expected-error @+1 {{E2001: 'pow' takes an exponent of at least 1, got 0}}
  %0 = psk_core.pow %x, 0 : !psk_core.tensor<[a: 2]>
  func.return
}

// -----

func.func @pow_negative(%x: !psk_core.real) {
  // expected-error @+1 {{E2001: 'pow' takes an exponent of at least 1, got -2}}
  %0 = psk_core.pow %x, -2 : !psk_core.real
  func.return
}

// -----

func.func @where_trees(%m: !psk_core.index<[a: 2], 2>, %p: !psk_core.record<w: !psk_core.tensor<[a: 2]>>) {
  // expected-error @+1 {{E2001: 'where' selects between reals or tensors, not parameter trees}}
  %0 = psk_core.where %m, %p, %p : !psk_core.record<w: !psk_core.tensor<[a: 2]>>
  func.return
}

// -----

func.func @where_mask_range(%m: !psk_core.index<[a: 2], 3>, %x: !psk_core.tensor<[a: 2]>) {
  // expected-error @+1 {{E2001: 'where' takes a mask of indices in [0, 2), not index[a: 2] < 3}}
  %0 = psk_core.where %m, %x, %x : !psk_core.tensor<[a: 2]>
  func.return
}

// -----

// The mask does not widen the result: it must broadcast into the result of
// the two branches.
func.func @where_mask_axes(%m: !psk_core.index<[s: T, t: T], 2>, %x: !psk_core.tensor<[t: T]>) {
  // expected-error @+1 {{E2001: 'where' mask axes [s: T, t: T] do not broadcast into [t: T]}}
  %0 = psk_core.where %m, %x, %x : !psk_core.tensor<[t: T]>
  func.return
}

// -----

func.func @where_mask_real_branches(%m: !psk_core.index<[t: T], 2>, %c: !psk_core.real) {
  // expected-error @+1 {{E2001: 'where' mask axes [t: T] do not broadcast into []}}
  %0 = psk_core.where %m, %c, %c : !psk_core.real
  func.return
}

// ===========================================================================
// Reductions
// ===========================================================================

// -----

// Pre-empts rules.reduce's "reduces a tensor of reals" (unreachable from IR).
func.func @reduce_real(%c: !psk_core.real) {
  // expected-error @+1 {{E2001: operand 'operand' at position 0 does not verify: !psk_core.real should be of base attribute psk_core.tensor}}
  %0 = "psk_core.sum"(%c) <{reduced = ["a"]}> : (!psk_core.real) -> !psk_core.real
  func.return
}

// -----

func.func @reduce_no_axis(%x: !psk_core.tensor<[a: 2]>) {
  // expected-error @+1 {{E2001: 'psk_core.sum' needs at least one axis to reduce over}}
  %0 = psk_core.sum %x [] : !psk_core.tensor<[a: 2]>
  func.return
}

// -----

func.func @reduce_twice(%x: !psk_core.tensor<[a: 2, b: 3]>) {
  // expected-error @+1 {{E2001: 'psk_core.mean' names an axis twice: [a, a]}}
  %0 = psk_core.mean %x [a, a] : !psk_core.tensor<[b: 3]>
  func.return
}

// -----

func.func @reduce_missing_axis(%x: !psk_core.tensor<[a: 2, b: 3]>) {
  // expected-error @+1 {{E2001: 'psk_core.reduce_max' over axis 'c', which tensor[a: 2, b: 3] does not have}}
  %0 = psk_core.reduce_max %x [c] : !psk_core.tensor<[a: 2, b: 3]>
  func.return
}

// -----

func.func @reduce_result(%x: !psk_core.tensor<[a: 2, b: 3]>) {
  // expected-error @+1 {{E2001: result type is tensor[a: 2], but the typing rule gives tensor[b: 3]}}
  %0 = psk_core.sum %x [a] : !psk_core.tensor<[a: 2]>
  func.return
}

// ===========================================================================
// Contractions
// ===========================================================================

// -----

// Pre-empts rules.dot's "'dot' takes two tensors" (unreachable from IR).
func.func @dot_real(%c: !psk_core.real, %x: !psk_core.tensor<[a: 2]>) {
  // expected-error @+1 {{E2001: operand 'lhs' at position 0 does not verify}}
  %0 = psk_core.dot %c, %x : !psk_core.real
  func.return
}

// -----

func.func @dot_sizes(%x: !psk_core.tensor<[b: B, in: D]>, %w: !psk_core.tensor<[in: E, out: F]>) {
  // expected-error @+1 {{E2001: 'dot' contracts the last axis of the left operand (in: D) with the first of the right (in: E); their sizes differ}}
  %0 = psk_core.dot %x, %w : !psk_core.tensor<[b: B, out: F]>
  func.return
}

// -----

func.func @dot_duplicate_axis(%x: !psk_core.tensor<[out: F, in: D]>, %w: !psk_core.tensor<[in: D, out: F]>) {
  // expected-error @+1 {{E2001: 'dot' would give an axis name twice: [out, out]}}
  %0 = psk_core.dot %x, %w : !psk_core.tensor<[out: F, o2: F]>
  func.return
}

// -----

func.func @ein_label_lists(%x: !psk_core.tensor<[a: 2]>) {
  // expected-error @+1 {{E2001: 'ein' needs one label list per operand}}
  %0 = "psk_core.ein"(%x) <{labels = [["a"], ["b"]]}> : (!psk_core.tensor<[a: 2]>) -> !psk_core.tensor<[a: 2]>
  func.return
}

// -----

// Pre-empts rules.ein's "'ein' takes tensors" (unreachable from IR).
func.func @ein_index(%i: !psk_core.index<[a: 2], 4>) {
  // expected-error @+1 {{E2001: operand 'inputs' at position 0 does not verify}}
  %0 = psk_core.ein %i[a] : !psk_core.tensor<[a: 2]>
  func.return
}

// -----

func.func @ein_label_count(%x: !psk_core.tensor<[a: 2, b: 3]>) {
  // expected-error @+1 {{E2001: 'ein' labels [i] do not match the 2 axes of tensor[a: 2, b: 3]}}
  %0 = psk_core.ein %x[i] : !psk_core.tensor<[i: 2]>
  func.return
}

// -----

func.func @ein_label_twice(%x: !psk_core.tensor<[a: 2, b: 2]>) {
  // expected-error @+1 {{E2001: 'ein' labels an operand's two axes alike: [i, i]}}
  %0 = psk_core.ein %x[i, i] : !psk_core.tensor<[i: 2]>
  func.return
}

// -----

func.func @ein_label_sizes(%q: !psk_core.tensor<[s: T, d: 64]>, %k: !psk_core.tensor<[t: T, d: 32]>) {
  // expected-error @+1 {{E2001: 'ein' label 'd' has sizes 64 and 32}}
  %0 = psk_core.ein %q[s, d], %k[t, d] : !psk_core.tensor<[s: T, t: T]>
  func.return
}

// -----

// Pre-empts rules.ein's "output names an axis twice" (unreachable from IR).
// expected-error @+2 {{E2001: axis names must be distinct, got [i, i]}}
func.func @ein_output_twice(%x: !psk_core.tensor<[a: 2, b: 2]>) {
  %0 = psk_core.ein %x[i, j] : !psk_core.tensor<[i: 2, i: 2]>
  func.return
}

// -----

func.func @ein_output_unknown(%x: !psk_core.tensor<[a: 2, b: 3]>) {
  // expected-error @+1 {{E2001: 'ein' output axis 'k' is no operand's label}}
  %0 = psk_core.ein %x[i, j] : !psk_core.tensor<[j: 3, k: 2]>
  func.return
}

// -----

func.func @ein_output_size(%x: !psk_core.tensor<[a: 2, b: 3]>) {
  // expected-error @+1 {{E2001: result type is tensor[j: 4], but the typing rule gives tensor[j: 3]}}
  %0 = psk_core.ein %x[i, j] : !psk_core.tensor<[j: 4]>
  func.return
}

// -----

// Pre-empts EinOp's "'ein' gives a tensor" (unreachable from IR).
func.func @ein_real(%x: !psk_core.tensor<[a: 2]>) {
  // expected-error @+1 {{E2001: result 'result' at position 0 does not verify}}
  %0 = psk_core.ein %x[i] : !psk_core.real
  func.return
}

// ===========================================================================
// Softmax, cross-entropy, gather
// ===========================================================================

// -----

// Pre-empts rules.softmax's "'softmax' takes a tensor of reals" (unreachable from IR).
func.func @softmax_real(%c: !psk_core.real) {
  // expected-error @+1 {{E2001: operand 'operand' at position 0 does not verify}}
  %0 = psk_core.softmax %c [t] : !psk_core.real
  func.return
}

// -----

func.func @softmax_axis(%s: !psk_core.tensor<[s: T, t: T]>) {
  // expected-error @+1 {{E2001: 'softmax' over axis 'k', which tensor[s: T, t: T] does not have}}
  %0 = psk_core.softmax %s [k] : !psk_core.tensor<[s: T, t: T]>
  func.return
}

// -----

func.func @softmax_mask_range(%s: !psk_core.tensor<[s: T, t: T]>, %m: !psk_core.index<[s: T, t: T], V>) {
  // expected-error @+1 {{E2001: 'softmax' takes a mask of indices in [0, 2), not index[s: T, t: T] < V}}
  %0 = psk_core.softmax %s [t] mask %m : !psk_core.tensor<[s: T, t: T]>
  func.return
}

// -----

func.func @softmax_mask_axes(%s: !psk_core.tensor<[b: B, s: T, t: T]>, %m: !psk_core.index<[t: T, s: T], 2>) {
  // expected-error @+1 {{E2001: 'softmax' mask axes [t: T, s: T] do not broadcast into [b: B, s: T, t: T]}}
  %0 = psk_core.softmax %s [t] mask %m : !psk_core.tensor<[b: B, s: T, t: T]>
  func.return
}

// -----

func.func @softmax_result(%s: !psk_core.tensor<[s: T, t: T]>) {
  // expected-error @+1 {{E2001: result type is tensor[s: T], but the typing rule gives tensor[s: T, t: T]}}
  %0 = psk_core.softmax %s [t] : !psk_core.tensor<[s: T]>
  func.return
}

// -----

// Pre-empts rules.cross_entropy's "takes logits (a tensor) and targets (indices)" (unreachable from IR).
func.func @cross_entropy_targets_real(%l: !psk_core.tensor<[n: N, v: V]>, %t: !psk_core.tensor<[n: N]>) {
  // expected-error @+1 {{E2001: operand 'targets' at position 1 does not verify}}
  %0 = psk_core.cross_entropy %l, %t [v] : !psk_core.real
  func.return
}

// -----

func.func @cross_entropy_axis(%l: !psk_core.tensor<[n: N, v: V]>, %t: !psk_core.index<[n: N], V>) {
  // expected-error @+1 {{E2001: 'cross_entropy' over class axis 'vocab', which the logits do not have}}
  %0 = psk_core.cross_entropy %l, %t [vocab] : !psk_core.real
  func.return
}

// -----

func.func @cross_entropy_target_axes(%l: !psk_core.tensor<[b: B, s: T, v: V]>, %t: !psk_core.index<[s: T, b: B], V>) {
  // expected-error @+1 {{E2001: 'cross_entropy' targets have axes [s: T, b: B], the logits without 'v' have [b: B, s: T]}}
  %0 = psk_core.cross_entropy %l, %t [v] : !psk_core.real
  func.return
}

// -----

func.func @cross_entropy_range(%l: !psk_core.tensor<[n: N, v: V]>, %t: !psk_core.index<[n: N], W>) {
  // expected-error @+1 {{E2001: 'cross_entropy' targets range over W, the class axis 'v' has V}}
  %0 = psk_core.cross_entropy %l, %t [v] : !psk_core.real
  func.return
}

// -----

// Pre-empts rules.gather's "takes a table and indices" (unreachable from IR).
func.func @gather_real_ids(%e: !psk_core.tensor<[v: V, d: D]>, %i: !psk_core.tensor<[n: N]>) {
  // expected-error @+1 {{E2001: operand 'ids' at position 1 does not verify}}
  %0 = psk_core.gather %e, %i : !psk_core.tensor<[n: N, d: D]>
  func.return
}

// -----

func.func @gather_range(%e: !psk_core.tensor<[vocab: V, embed: D]>, %i: !psk_core.index<[n: N], 100>) {
  // expected-error @+1 {{E2001: 'gather' indices range over 100, the table's first axis 'vocab' has V}}
  %0 = psk_core.gather %e, %i : !psk_core.tensor<[n: N, embed: D]>
  func.return
}

// -----

func.func @gather_duplicate_axis(%e: !psk_core.tensor<[vocab: V, n: D]>, %i: !psk_core.index<[n: N], V>) {
  // expected-error @+1 {{E2001: 'gather' would give an axis name twice: [n, n]}}
  %0 = psk_core.gather %e, %i : !psk_core.tensor<[n: N, m: D]>
  func.return
}

// ===========================================================================
// Structure: broadcast_like, sum_to, zeros_like, split, merge, arange, causal_mask
// ===========================================================================

// -----

func.func @broadcast_like_wider(%x: !psk_core.tensor<[a: 2, b: 3]>, %y: !psk_core.tensor<[b: 3]>) {
  // expected-error @+1 {{E2001: 'broadcast_like': tensor[a: 2, b: 3] does not broadcast into tensor[b: 3]}}
  %0 = psk_core.broadcast_like %x, %y : !psk_core.tensor<[b: 3]>
  func.return
}

// -----

func.func @broadcast_like_result(%x: !psk_core.tensor<[b: 3]>, %y: !psk_core.tensor<[a: 2, b: 3]>) {
  // expected-error @+1 {{E2001: result type is tensor[b: 3], but the typing rule gives tensor[a: 2, b: 3]}}
  %0 = psk_core.broadcast_like %x, %y : !psk_core.tensor<[b: 3]>
  func.return
}

// -----

func.func @sum_to_wider(%x: !psk_core.tensor<[b: 3]>, %y: !psk_core.tensor<[a: 2, b: 3]>) {
  // expected-error @+1 {{E2001: 'sum_to': tensor[a: 2, b: 3] does not broadcast into tensor[b: 3], so there is nothing to sum it down to}}
  %0 = psk_core.sum_to %x, %y : !psk_core.tensor<[a: 2, b: 3]>
  func.return
}

// -----

func.func @zeros_like_index(%i: !psk_core.index<[n: N], V>) {
  // expected-error @+1 {{E2001: 'zeros_like' of an index tensor is not defined}}
  %0 = psk_core.zeros_like %i : !psk_core.index<[n: N], V>
  func.return
}

// -----

// Pre-empts rules.split's "'split' takes a tensor" (unreachable from IR).
func.func @split_real(%c: !psk_core.real) {
  // expected-error @+1 {{E2001: operand 'operand' at position 0 does not verify}}
  %0 = "psk_core.split"(%c) <{axis = "a"}> : (!psk_core.real) -> !psk_core.tensor<[b: 2, c: 2]>
  func.return
}

// -----

func.func @split_missing_axis(%x: !psk_core.tensor<[a: 2, b: 6]>) {
  // expected-error @+1 {{E2001: 'split' of axis 'z', which tensor[a: 2, b: 6] does not have}}
  %0 = "psk_core.split"(%x) <{axis = "z"}> : (!psk_core.tensor<[a: 2, b: 6]>) -> !psk_core.tensor<[c: 1, d: 2, b: 6]>
  func.return
}

// -----

func.func @split_rank(%x: !psk_core.tensor<[a: 2, b: 6]>) {
  // expected-error @+1 {{E2001: 'split' gives one axis more than its operand}}
  %0 = "psk_core.split"(%x) <{axis = "b"}> : (!psk_core.tensor<[a: 2, b: 6]>) -> !psk_core.tensor<[a: 2, c: 6]>
  func.return
}

// -----

func.func @split_product(%x: !psk_core.tensor<[a: 2, b: 6]>) {
  // expected-error @+1 {{E2001: 'split' of axis 'b': 2 * 4 != 6}}
  %0 = psk_core.split %x [b -> c, d] : !psk_core.tensor<[a: 2, c: 2, d: 4]>
  func.return
}

// -----

func.func @split_others(%x: !psk_core.tensor<[a: 2, b: 6]>) {
  // expected-error @+1 {{E2001: result type is tensor[z: 2, c: 2, d: 3], but the typing rule gives tensor[a: 2, c: 2, d: 3]}}
  %0 = psk_core.split %x [b -> c, d] : !psk_core.tensor<[z: 2, c: 2, d: 3]>
  func.return
}

// -----

// Pre-empts rules.merge's "'merge' takes a tensor" (unreachable from IR).
func.func @merge_real(%c: !psk_core.real) {
  // expected-error @+1 {{E2001: operand 'operand' at position 0 does not verify}}
  %0 = "psk_core.merge"(%c) <{merged = ["a", "b"]}> : (!psk_core.real) -> !psk_core.tensor<[c: 4]>
  func.return
}

// -----

func.func @merge_not_adjacent(%x: !psk_core.tensor<[a: 2, b: 3, c: 4]>) {
  // expected-error @+1 {{E2001: 'merge' needs adjacent axes 'a', 'c' of tensor[a: 2, b: 3, c: 4]}}
  %0 = psk_core.merge %x [a, c -> m] : !psk_core.tensor<[m: 8, b: 3]>
  func.return
}

// -----

func.func @merge_wrong_order(%x: !psk_core.tensor<[a: 2, b: 3]>) {
  // expected-error @+1 {{E2001: 'merge' needs adjacent axes 'b', 'a' of tensor[a: 2, b: 3]}}
  %0 = "psk_core.merge"(%x) <{merged = ["b", "a"]}> : (!psk_core.tensor<[a: 2, b: 3]>) -> !psk_core.tensor<[m: 6]>
  func.return
}

// -----

// Only the generic form can name other than two axes.
func.func @merge_one_name(%x: !psk_core.tensor<[a: 2, b: 3]>) {
  // expected-error @+1 {{E2001: 'merge' merges exactly two axes, got [a]}}
  %0 = "psk_core.merge"(%x) <{merged = ["a"]}> : (!psk_core.tensor<[a: 2, b: 3]>) -> !psk_core.tensor<[c: 6]>
  func.return
}

// -----

func.func @merge_three_names(%x: !psk_core.tensor<[a: 2, b: 3, c: 4]>) {
  // expected-error @+1 {{E2001: 'merge' merges exactly two axes, got [a, b, c]}}
  %0 = "psk_core.merge"(%x) <{merged = ["a", "b", "c"]}> : (!psk_core.tensor<[a: 2, b: 3, c: 4]>) -> !psk_core.tensor<[m: 24]>
  func.return
}

// -----

func.func @merge_product(%x: !psk_core.tensor<[a: 2, b: 3]>) {
  // expected-error @+1 {{E2001: 'merge' of axis 'm': 2 * 3 != 5}}
  %0 = psk_core.merge %x [a, b -> m] : !psk_core.tensor<[m: 5]>
  func.return
}

// -----

func.func @arange_rank() {
  // expected-error @+1 {{E2001: 'arange' gives an index tensor of one axis}}
  %0 = psk_core.arange : !psk_core.index<[a: 2, b: 2], 4>
  func.return
}

// -----

func.func @arange_fit() {
  // expected-error @+1 {{E2001: 'arange' of 8 indices does not fit the range 4}}
  %0 = psk_core.arange : !psk_core.index<[a: 8], 4>
  func.return
}

// -----

func.func @causal_mask_square() {
  // expected-error @+1 {{E2001: 'causal_mask' gives a square index tensor of two axes with range 2}}
  %0 = psk_core.causal_mask : !psk_core.index<[s: T, t: S], 2>
  func.return
}

// -----

func.func @causal_mask_range() {
  // expected-error @+1 {{E2001: 'causal_mask' gives a square index tensor of two axes with range 2}}
  %0 = psk_core.causal_mask : !psk_core.index<[s: T, t: T], 3>
  func.return
}

// -----

func.func @compare_types(%a: !psk_core.tensor<[n: 3]>, %b: !psk_core.tensor<[m: 3]>) {
  // expected-error @+1 {{E2001: 'compare' takes two tensors of one type, got tensor[n: 3] and tensor[m: 3] (broadcast_like widens one)}}
  %0 = psk_core.compare lt %a, %b : !psk_core.index<[n: 3], 2>
  func.return
}

// -----

func.func @compare_reals(%a: !psk_core.real, %b: !psk_core.real) {
  // expected-error @+1 {{E2001: 'compare' takes two tensors of one type, got real and real (broadcast_like widens one)}}
  %0 = psk_core.compare lt %a, %b : !psk_core.index<[n: 3], 2>
  func.return
}

// -----

func.func @compare_predicate(%a: !psk_core.tensor<[n: 3]>) {
  // expected-error @+1 {{'compare' predicate 'gte' is none of eq, ne, lt, le, gt, ge}}
  %0 = psk_core.compare gte %a, %a : !psk_core.index<[n: 3], 2>
  func.return
}

// -----

func.func @compare_result(%a: !psk_core.tensor<[n: 3]>) {
  // expected-error @+1 {{E2001: result type is index[n: 3] < 3, but the typing rule gives index[n: 3] < 2}}
  %0 = psk_core.compare eq %a, %a : !psk_core.index<[n: 3], 3>
  func.return
}

// -----

func.func @causal_mask_rank() {
  // expected-error @+1 {{E2001: 'causal_mask' gives a square index tensor of two axes with range 2}}
  %0 = psk_core.causal_mask : !psk_core.index<[s: T], 2>
  func.return
}

// ===========================================================================
// Constants, records, tuples
// ===========================================================================

// -----

func.func @constant_overflow() {
  // expected-error @+1 {{E2001: a constant is finite, got inf}}
  %0 = psk_core.constant 1.0e999 : !psk_core.real
  func.return
}

// -----

func.func @constant_nan() {
  // expected-error @+1 {{E2001: a constant is finite, got nan}}
  %0 = "psk_core.constant"() <{value = 0x7FF8000000000000 : f64}> : () -> !psk_core.real
  func.return
}

// -----

// Pre-empts RecordOp's "'record' gives a record type" (unreachable from IR).
func.func @record_not_record(%c: !psk_core.real) {
  // expected-error @+1 {{E2001: result 'result' at position 0 does not verify}}
  %0 = "psk_core.record"(%c) : (!psk_core.real) -> !psk_core.real
  func.return
}

// -----

func.func @record_field_count(%c: !psk_core.real) {
  // expected-error @+1 {{E2001: 'record' of record{a: real, b: real} needs 2 fields, got 1}}
  %0 = "psk_core.record"(%c) : (!psk_core.real) -> !psk_core.record<a: !psk_core.real, b: !psk_core.real>
  func.return
}

// -----

func.func @record_field_type(%c: !psk_core.real) {
  // expected-error @+1 {{E2001: result type is record{a: tensor[x: 2]}, but the typing rule gives record{a: real}}}
  %0 = psk_core.record a = %c : !psk_core.record<a: !psk_core.tensor<[x: 2]>>
  func.return
}

// -----

func.func @field_missing(%p: !psk_core.record<w: !psk_core.real>) {
  // expected-error @+1 {{E2001: 'field' "b" of record{w: real}, which has no such field}}
  %0 = psk_core.field %p["b"] : !psk_core.real
  func.return
}

// -----

func.func @set_field_missing(%p: !psk_core.record<w: !psk_core.real>, %c: !psk_core.real) {
  // expected-error @+1 {{E2001: 'set_field' "b" of record{w: real}, which has no such field}}
  %0 = psk_core.set_field %p["b"], %c : !psk_core.record<w: !psk_core.real>
  func.return
}

// -----

func.func @set_field_type(%p: !psk_core.record<w: !psk_core.real>, %x: !psk_core.tensor<[a: 2]>) {
  // expected-error @+1 {{E2001: 'set_field' "w" is real, the value is tensor[a: 2]}}
  %0 = psk_core.set_field %p["w"], %x : !psk_core.record<w: !psk_core.real>
  func.return
}

// -----

func.func @proj_range(%t: !psk_core.tuple<!psk_core.real, !psk_core.real>) {
  // expected-error @+1 {{E2001: 'proj' 2 of tuple(real, real) is out of range}}
  %0 = psk_core.proj %t[2] : !psk_core.real
  func.return
}

// -----

func.func @proj_negative(%t: !psk_core.tuple<!psk_core.real>) {
  // expected-error @+1 {{E2001: 'proj' -1 of tuple(real) is out of range}}
  %0 = "psk_core.proj"(%t) <{index = #builtin.int<-1>}> : (!psk_core.tuple<!psk_core.real>) -> !psk_core.real
  func.return
}

// -----

func.func @tuple_result(%c: !psk_core.real) {
  // expected-error @+1 {{E2001: result type is tuple(real, real), but the typing rule gives tuple(real)}}
  %0 = psk_core.tuple %c : !psk_core.tuple<!psk_core.real, !psk_core.real>
  func.return
}

// ===========================================================================
// fold
// ===========================================================================

// -----

func.func @Block.apply(%p: !psk_core.record<w: !psk_core.tensor<[d: D]>>, %x: !psk_core.tensor<[d: D]>) -> !psk_core.tensor<[d: D]> {
  func.return %x : !psk_core.tensor<[d: D]>
}
func.func @fold_layers(%s: !psk_core.record<w: !psk_core.tensor<[layer: L, d: D]>, b: !psk_core.tensor<[layer: M, d: D]>>, %x: !psk_core.tensor<[d: D]>) {
  // expected-error @+1 {{E2001: 'fold' needs every leaf of the stacked tree to share its first axis}}
  %0 = psk_core.fold @Block.apply(%s, %x) : !psk_core.tensor<[d: D]>
  func.return
}

// -----

func.func @Empty.apply(%p: !psk_core.record<>, %x: !psk_core.real) -> !psk_core.real {
  func.return %x : !psk_core.real
}
func.func @fold_no_leaves(%s: !psk_core.record<>, %x: !psk_core.real) {
  // expected-error @+1 {{E2001: 'fold' needs every leaf of the stacked tree to share its first axis, got set()}}
  %0 = psk_core.fold @Empty.apply(%s, %x) : !psk_core.real
  func.return
}

// -----

func.func @Block.apply(%p: !psk_core.record<w: !psk_core.real>, %x: !psk_core.real) -> !psk_core.real {
  func.return %x : !psk_core.real
}
func.func @fold_result(%s: !psk_core.record<w: !psk_core.tensor<[layer: L]>>, %x: !psk_core.real) {
  // expected-error @+1 {{E2001: 'fold' gives a value of its initial state's type}}
  %0 = psk_core.fold @Block.apply(%s, %x) : !psk_core.tensor<[d: D]>
  func.return
}

// -----

// FoldOp's own "which is not defined" is pre-empted by the driver's check
// of every callee (E2002).
func.func @fold_undefined(%s: !psk_core.record<w: !psk_core.tensor<[layer: L]>>, %x: !psk_core.real) {
  // expected-error @+1 {{E2002: call to unknown function @Nowhere.apply}}
  %0 = psk_core.fold @Nowhere.apply(%s, %x) : !psk_core.real
  func.return
}

// -----

psk_core.const_dim @L = 2
func.func @fold_not_function(%s: !psk_core.record<w: !psk_core.tensor<[layer: L]>>, %x: !psk_core.real) {
  // expected-error @+1 {{E2001: 'fold' calls @L, which is not a function}}
  %0 = psk_core.fold @L(%s, %x) : !psk_core.real
  func.return
}

// -----

// The callee must take one layer (the leaves without their first axis) and
// the state, and give the state.
func.func @Block.apply(%p: !psk_core.record<w: !psk_core.tensor<[layer: L, d: D]>>, %x: !psk_core.tensor<[d: D]>) -> !psk_core.tensor<[d: D]> {
  func.return %x : !psk_core.tensor<[d: D]>
}
func.func @fold_signature(%s: !psk_core.record<w: !psk_core.tensor<[layer: L, d: D]>>, %x: !psk_core.tensor<[d: D]>) {
  // expected-error @+1 {{E2001: 'fold' calls @Block.apply with (record{w: tensor[d: D]}, tensor[d: D]) -> tensor[d: D], but its type is (record{w: tensor[layer: L, d: D]}, tensor[d: D]) -> (tensor[d: D])}}
  %0 = psk_core.fold @Block.apply(%s, %x) : !psk_core.tensor<[d: D]>
  func.return
}

// -----

func.func @Block.apply(%p: !psk_core.record<w: !psk_core.real>, %x: !psk_core.real) -> !psk_core.real {
  func.return %x : !psk_core.real
}
func.func @fold_real_leaf(%s: !psk_core.record<w: !psk_core.tensor<[layer: L]>, n: !psk_core.record<c: !psk_core.real>>, %x: !psk_core.real) {
  // expected-error @+1 {{E2001: a stacked tree's leaves are tensors; n.c is real}}
  %0 = psk_core.fold @Block.apply(%s, %x) : !psk_core.real
  func.return
}

// -----

func.func @Block.apply(%p: !psk_core.tuple<!psk_core.real>, %x: !psk_core.real) -> !psk_core.real {
  func.return %x : !psk_core.real
}
func.func @fold_index_leaf(%s: !psk_core.record<t: !psk_core.tuple<!psk_core.index<[layer: L], 4>>>, %x: !psk_core.real) {
  // expected-error @+1 {{E2001: a stacked tree's leaves are tensors; t.0 is index[layer: L] < 4}}
  %0 = psk_core.fold @Block.apply(%s, %x) : !psk_core.real
  func.return
}

// ===========================================================================
// const_dim
// ===========================================================================

// -----

// expected-error @+1 {{E2001: a constant size is an integer or an expression string}}
"psk_core.const_dim"() <{sym_name = "D", value = 1.5 : f64}> : () -> ()

// -----

// expected-error @+1 {{E2001: constant size @D is 0; sizes are positive}}
psk_core.const_dim @D = 0

// -----

// expected-error @+1 {{E2001: constant size @D is -8; sizes are positive}}
psk_core.const_dim @D = -8

// -----

// expected-error @+1 {{E2001: constant size @D is 1099511627777; sizes are at most 2^40 = 1099511627776}}
psk_core.const_dim @D = 1099511627777

// -----

// expected-error @+1 {{E2001: size expression 'D + H': unexpected '+'}}
psk_core.const_dim @HD = "D + H"

// -----

// expected-error @+1 {{E2001: size expression 'D H': expected * or /}}
psk_core.const_dim @HD = "D H"

// -----

// expected-error @+1 {{E2001: size expression '* D': expected a name or integer}}
psk_core.const_dim @HD = "* D"

// -----

// expected-error @+1 {{E2001: size expression 'D /' is incomplete}}
psk_core.const_dim @HD = "D /"

// -----

// expected-error @+1 {{E2001: size expression '' is incomplete}}
psk_core.const_dim @HD = ""

// -----

// expected-error @+2 {{E2001: @loop calls itself: PSK-Core functions do not recurse (a loop is a psk_core.fold)}}
func.func @loop(%x: !psk_core.real) -> !psk_core.real {
  %0 = func.call @loop(%x) : (!psk_core.real) -> !psk_core.real
  func.return %0 : !psk_core.real
}

// -----

func.func @ping(%x: !psk_core.real) -> !psk_core.real {
  %0 = func.call @pong(%x) : (!psk_core.real) -> !psk_core.real
  func.return %0 : !psk_core.real
}
func.func @pong(%x: !psk_core.real) -> !psk_core.real {
  // expected-error @+1 {{E2001: @ping calls itself through @pong: PSK-Core functions do not recurse (a loop is a psk_core.fold)}}
  %0 = func.call @ping(%x) : (!psk_core.real) -> !psk_core.real
  func.return %0 : !psk_core.real
}
