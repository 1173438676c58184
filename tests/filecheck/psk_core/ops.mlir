// RUN: presk-opt %s | presk-opt | filecheck %s
// RUN: presk-opt %s --print-op-generic | presk-opt | filecheck %s
//
// Round trip of every PSK-Core operation (all 39 of the PSKCore dialect) and
// type (all 5): parse, verify, print, parse the printed form again, print
// again; the second RUN goes through the generic form. The CHECK lines pin
// down the printed (custom) syntax, including the type aliases defined below.

!X = !psk_core.tensor<[batch: B, seq: T, embed: D]>
!Bias = !psk_core.tensor<[embed: D]>
!Ids = !psk_core.index<[batch: B, seq: T], V>
!Unused = !psk_core.tensor<[never: 1]>

// Only the aliases the module uses are printed back, in definition order.
// CHECK:      !X = !psk_core.tensor<[batch: B, seq: T, embed: D]>
// CHECK-NEXT: !Bias = !psk_core.tensor<[embed: D]>
// CHECK-NEXT: !Ids = !psk_core.index<[batch: B, seq: T], V>
// CHECK-NOT:  !Unused

// CHECK: builtin.module {

// Compile-time constant sizes: an integer, or an expression of others.
psk_core.const_dim @D = 64
psk_core.const_dim @H = 4
psk_core.const_dim @HD = "D / H"
psk_core.const_dim @F = "4 * D"
psk_core.const_dim @L = 2 {note = "layers"}
// CHECK-NEXT: psk_core.const_dim @D = 64
// CHECK-NEXT: psk_core.const_dim @H = 4
// CHECK-NEXT: psk_core.const_dim @HD = "D / H"
// CHECK-NEXT: psk_core.const_dim @F = "4 * D"
// CHECK-NEXT: psk_core.const_dim @L = 2 {note = "layers"}

// ---------------------------------------------------------------------------
// Types.

func.func @types(%r: !psk_core.real,
                 %t: !psk_core.tensor<[row: 3, col: N]>,
                 %i: !psk_core.index<[pos: 8], 2>,
                 %rec: !psk_core.record<w: !psk_core.tensor<[in: D, out: F]>, b: !psk_core.tensor<[out: F]>, s: !psk_core.real>,
                 %tup: !psk_core.tuple<!psk_core.real, !psk_core.tensor<[k: 2]>>,
                 %nested: !psk_core.record<inner: !psk_core.record<g: !psk_core.real>, pair: !psk_core.tuple<!psk_core.real, !psk_core.index<[k: K], 10>>>) -> !psk_core.real {
  func.return %r : !psk_core.real
}
// CHECK-LABEL: func.func @types(
// CHECK-SAME:    %r: !psk_core.real,
// CHECK-SAME:    %t: !psk_core.tensor<[row: 3, col: N]>,
// CHECK-SAME:    %i: !psk_core.index<[pos: 8], 2>,
// CHECK-SAME:    %rec: !psk_core.record<w: !psk_core.tensor<[in: D, out: F]>, b: !psk_core.tensor<[out: F]>, s: !psk_core.real>,
// CHECK-SAME:    %tup: !psk_core.tuple<!psk_core.real, !psk_core.tensor<[k: 2]>>,
// CHECK-SAME:    %nested: !psk_core.record<inner: !psk_core.record<g: !psk_core.real>, pair: !psk_core.tuple<!psk_core.real, !psk_core.index<[k: K], 10>>>) -> !psk_core.real {
// CHECK-NEXT:    func.return %r : !psk_core.real

// ---------------------------------------------------------------------------
// Elementwise primitives; broadcasting by name.

func.func @elementwise(%x: !X, %b: !Bias, %m: !psk_core.tensor<[batch: B, seq: T]>, %c: !psk_core.real) -> !X {
  // [embed] and [batch, seq] both broadcast into [batch, seq, embed].
  %0 = psk_core.add %x, %b : !X
  %1 = psk_core.sub %0, %m : !X
  %2 = psk_core.mul %m, %1 : !X
  // A real broadcasts into anything.
  %3 = psk_core.div %c, %2 : !X
  %4 = psk_core.max %3, %c : !X
  %5 = psk_core.neg %4 : !X
  %6 = psk_core.exp %5 : !X
  %7 = psk_core.log %6 : !X
  %8 = psk_core.sqrt %7 : !X
  %9 = psk_core.tanh %8 : !X
  %10 = psk_core.gelu %9 : !X
  %11 = psk_core.pow %10, 3 : !X
  %12 = psk_core.pow %c, 1 : !psk_core.real
  %13 = psk_core.add %c, %12 : !psk_core.real
  %14 = psk_core.mul %b, %b {tag = "bias squared"} : !Bias
  %15 = psk_core.erf %9 : !X
  func.return %11 : !X
}
// CHECK-LABEL: func.func @elementwise(%x: !X, %b: !Bias, %m: !psk_core.tensor<[batch: B, seq: T]>, %c: !psk_core.real) -> !X {
// CHECK-NEXT:    %0 = psk_core.add %x, %b : !X
// CHECK-NEXT:    %1 = psk_core.sub %0, %m : !X
// CHECK-NEXT:    %2 = psk_core.mul %m, %1 : !X
// CHECK-NEXT:    %3 = psk_core.div %c, %2 : !X
// CHECK-NEXT:    %4 = psk_core.max %3, %c : !X
// CHECK-NEXT:    %5 = psk_core.neg %4 : !X
// CHECK-NEXT:    %6 = psk_core.exp %5 : !X
// CHECK-NEXT:    %7 = psk_core.log %6 : !X
// CHECK-NEXT:    %8 = psk_core.sqrt %7 : !X
// CHECK-NEXT:    %9 = psk_core.tanh %8 : !X
// CHECK-NEXT:    %10 = psk_core.gelu %9 : !X
// CHECK-NEXT:    %11 = psk_core.pow %10, 3 : !X
// CHECK-NEXT:    %12 = psk_core.pow %c, 1 : !psk_core.real
// CHECK-NEXT:    %13 = psk_core.add %c, %12 : !psk_core.real
// CHECK-NEXT:    %14 = psk_core.mul %b, %b {tag = "bias squared"} : !Bias
// CHECK-NEXT:    %15 = psk_core.erf %9 : !X
// CHECK-NEXT:    func.return %11 : !X

func.func @where(%mask: !psk_core.index<[seq: T, key: T], 2>, %s: !psk_core.tensor<[head: H, seq: T, key: T]>, %c: !psk_core.real) -> !psk_core.tensor<[head: H, seq: T, key: T]> {
  %0 = psk_core.where %mask, %s, %c : !psk_core.tensor<[head: H, seq: T, key: T]>
  %1 = psk_core.where %mask, %c, %s : !psk_core.tensor<[head: H, seq: T, key: T]>
  func.return %0 : !psk_core.tensor<[head: H, seq: T, key: T]>
}
// CHECK-LABEL: func.func @where(
// CHECK-NEXT:    %0 = psk_core.where %mask, %s, %c : !psk_core.tensor<[head: H, seq: T, key: T]>
// CHECK-NEXT:    %1 = psk_core.where %mask, %c, %s : !psk_core.tensor<[head: H, seq: T, key: T]>

// Elementwise primitives apply leaf by leaf to records and tuples; a real
// broadcasts into every leaf (e.g. a learning rate times a gradient tree).
func.func @trees(%p: !psk_core.record<w: !psk_core.tensor<[in: D, out: F]>, b: !psk_core.tensor<[out: F]>>,
                 %g: !psk_core.record<w: !psk_core.tensor<[in: D, out: F]>, b: !psk_core.tensor<[out: F]>>,
                 %lr: !psk_core.real,
                 %t: !psk_core.tuple<!psk_core.real, !Bias>) -> !psk_core.record<w: !psk_core.tensor<[in: D, out: F]>, b: !psk_core.tensor<[out: F]>> {
  %0 = psk_core.mul %lr, %g : !psk_core.record<w: !psk_core.tensor<[in: D, out: F]>, b: !psk_core.tensor<[out: F]>>
  %1 = psk_core.sub %p, %0 : !psk_core.record<w: !psk_core.tensor<[in: D, out: F]>, b: !psk_core.tensor<[out: F]>>
  %2 = psk_core.sqrt %1 : !psk_core.record<w: !psk_core.tensor<[in: D, out: F]>, b: !psk_core.tensor<[out: F]>>
  %3 = psk_core.add %t, %t : !psk_core.tuple<!psk_core.real, !Bias>
  %4 = psk_core.mul %t, %lr : !psk_core.tuple<!psk_core.real, !Bias>
  func.return %1 : !psk_core.record<w: !psk_core.tensor<[in: D, out: F]>, b: !psk_core.tensor<[out: F]>>
}
// CHECK-LABEL: func.func @trees(
// CHECK-NEXT:    %0 = psk_core.mul %lr, %g : !psk_core.record<w: !psk_core.tensor<[in: D, out: F]>, b: !psk_core.tensor<[out: F]>>
// CHECK-NEXT:    %1 = psk_core.sub %p, %0 : !psk_core.record<w: !psk_core.tensor<[in: D, out: F]>, b: !psk_core.tensor<[out: F]>>
// CHECK-NEXT:    %2 = psk_core.sqrt %1 : !psk_core.record<w: !psk_core.tensor<[in: D, out: F]>, b: !psk_core.tensor<[out: F]>>
// CHECK-NEXT:    %3 = psk_core.add %t, %t : !psk_core.tuple<!psk_core.real, !Bias>
// CHECK-NEXT:    %4 = psk_core.mul %t, %lr : !psk_core.tuple<!psk_core.real, !Bias>

// ---------------------------------------------------------------------------
// Reductions.

func.func @reductions(%x: !X) -> !psk_core.real {
  %0 = psk_core.sum %x [embed] : !psk_core.tensor<[batch: B, seq: T]>
  %1 = psk_core.mean %x [batch, seq] : !Bias
  %2 = psk_core.reduce_max %x [seq] : !psk_core.tensor<[batch: B, embed: D]>
  %3 = psk_core.sum %x [embed, batch, seq] : !psk_core.real
  func.return %3 : !psk_core.real
}
// CHECK-LABEL: func.func @reductions(%x: !X) -> !psk_core.real {
// CHECK-NEXT:    %0 = psk_core.sum %x [embed] : !psk_core.tensor<[batch: B, seq: T]>
// CHECK-NEXT:    %1 = psk_core.mean %x [batch, seq] : !Bias
// CHECK-NEXT:    %2 = psk_core.reduce_max %x [seq] : !psk_core.tensor<[batch: B, embed: D]>
// CHECK-NEXT:    %3 = psk_core.sum %x [embed, batch, seq] : !psk_core.real

// ---------------------------------------------------------------------------
// Contractions, softmax, cross-entropy, gather.

func.func @contractions(%x: !X, %w: !psk_core.tensor<[in: D, out: F]>, %v: !Bias,
                        %q: !psk_core.tensor<[b: B, h: H, s: T, d: HD]>,
                        %k: !psk_core.tensor<[b: B, h: H, t: T, d: HD]>) -> !psk_core.tensor<[b: B, h: H, s: T, t: T]> {
  %0 = psk_core.dot %x, %w : !psk_core.tensor<[batch: B, seq: T, out: F]>
  %1 = psk_core.dot %v, %v : !psk_core.real
  // Two operands: the scores of attention, summing over d.
  %2 = psk_core.ein %q[b, h, s, d], %k[b, h, t, d] : !psk_core.tensor<[b: B, h: H, s: T, t: T]>
  // One operand: a transpose with relabelling.
  %3 = psk_core.ein %w[i, o] : !psk_core.tensor<[o: F, i: D]>
  // One operand, summing an axis that is not an output.
  %4 = psk_core.ein %x[b, s, e] : !psk_core.tensor<[e: D, b: B]>
  func.return %2 : !psk_core.tensor<[b: B, h: H, s: T, t: T]>
}
// CHECK-LABEL: func.func @contractions(
// CHECK-NEXT:    %0 = psk_core.dot %x, %w : !psk_core.tensor<[batch: B, seq: T, out: F]>
// CHECK-NEXT:    %1 = psk_core.dot %v, %v : !psk_core.real
// CHECK-NEXT:    %2 = psk_core.ein %q[b, h, s, d], %k[b, h, t, d] : !psk_core.tensor<[b: B, h: H, s: T, t: T]>
// CHECK-NEXT:    %3 = psk_core.ein %w[i, o] : !psk_core.tensor<[o: F, i: D]>
// CHECK-NEXT:    %4 = psk_core.ein %x[b, s, e] : !psk_core.tensor<[e: D, b: B]>

func.func @softmax(%s: !psk_core.tensor<[b: B, h: H, s: T, t: T]>) -> !psk_core.tensor<[b: B, h: H, s: T, t: T]> {
  %0 = psk_core.softmax %s [t] : !psk_core.tensor<[b: B, h: H, s: T, t: T]>
  %m = psk_core.causal_mask : !psk_core.index<[s: T, t: T], 2>
  %1 = psk_core.softmax %s [t] mask %m : !psk_core.tensor<[b: B, h: H, s: T, t: T]>
  func.return %1 : !psk_core.tensor<[b: B, h: H, s: T, t: T]>
}
// CHECK-LABEL: func.func @softmax(
// CHECK-NEXT:    %0 = psk_core.softmax %s [t] : !psk_core.tensor<[b: B, h: H, s: T, t: T]>
// CHECK-NEXT:    %m = psk_core.causal_mask : !psk_core.index<[s: T, t: T], 2>
// CHECK-NEXT:    %1 = psk_core.softmax %s [t] mask %m : !psk_core.tensor<[b: B, h: H, s: T, t: T]>

func.func @lookup_and_loss(%table: !psk_core.tensor<[vocab: V, embed: D]>, %ids: !Ids,
                           %logits: !psk_core.tensor<[batch: B, seq: T, vocab: V]>) -> !psk_core.real {
  %0 = psk_core.gather %table, %ids : !X
  %1 = psk_core.cross_entropy %logits, %ids [vocab] : !psk_core.real
  func.return %1 : !psk_core.real
}
// CHECK-LABEL: func.func @lookup_and_loss(%table: !psk_core.tensor<[vocab: V, embed: D]>, %ids: !Ids, %logits: !psk_core.tensor<[batch: B, seq: T, vocab: V]>) -> !psk_core.real {
// CHECK-NEXT:    %0 = psk_core.gather %table, %ids : !X
// CHECK-NEXT:    %1 = psk_core.cross_entropy %logits, %ids [vocab] : !psk_core.real

// ---------------------------------------------------------------------------
// Structure: broadcasting, summing down, zeros (of reals, tensors and trees),
// axis split/merge, indices, comparisons.

func.func @structure(%x: !X, %b: !Bias, %c: !psk_core.real,
                     %p: !psk_core.record<w: !Bias, s: !psk_core.real>,
                     %t: !psk_core.tuple<!psk_core.real, !Bias>) -> !X {
  %0 = psk_core.broadcast_like %b, %x : !X
  %1 = psk_core.broadcast_like %c, %x : !X
  %2 = psk_core.sum_to %0, %b : !Bias
  %3 = psk_core.sum_to %0, %c : !psk_core.real
  %4 = psk_core.zeros_like %x : !X
  %5 = psk_core.zeros_like %c : !psk_core.real
  %6 = psk_core.zeros_like %p : !psk_core.record<w: !Bias, s: !psk_core.real>
  %7 = psk_core.zeros_like %t : !psk_core.tuple<!psk_core.real, !Bias>
  %8 = psk_core.split %x [embed -> heads, hd] : !psk_core.tensor<[batch: B, seq: T, heads: H, hd: HD]>
  %9 = psk_core.merge %8 [heads, hd -> embed] : !X
  %10 = psk_core.split %b [embed -> two, half] : !psk_core.tensor<[two: 2, half: 32]>
  %11 = psk_core.arange : !psk_core.index<[seq: T], C>
  %12 = psk_core.arange : !psk_core.index<[pos: 4], 8>
  %13 = psk_core.causal_mask : !psk_core.index<[seq: T, key: T], 2>
  %14 = psk_core.compare ge %x, %1 : !psk_core.index<[batch: B, seq: T, embed: D], 2>
  %15 = psk_core.compare ne %b, %b : !psk_core.index<[embed: D], 2>
  func.return %9 : !X
}
// CHECK-LABEL: func.func @structure(
// CHECK-NEXT:    %0 = psk_core.broadcast_like %b, %x : !X
// CHECK-NEXT:    %1 = psk_core.broadcast_like %c, %x : !X
// CHECK-NEXT:    %2 = psk_core.sum_to %0, %b : !Bias
// CHECK-NEXT:    %3 = psk_core.sum_to %0, %c : !psk_core.real
// CHECK-NEXT:    %4 = psk_core.zeros_like %x : !X
// CHECK-NEXT:    %5 = psk_core.zeros_like %c : !psk_core.real
// CHECK-NEXT:    %6 = psk_core.zeros_like %p : !psk_core.record<w: !Bias, s: !psk_core.real>
// CHECK-NEXT:    %7 = psk_core.zeros_like %t : !psk_core.tuple<!psk_core.real, !Bias>
// CHECK-NEXT:    %8 = psk_core.split %x [embed -> heads, hd] : !psk_core.tensor<[batch: B, seq: T, heads: H, hd: HD]>
// CHECK-NEXT:    %9 = psk_core.merge %8 [heads, hd -> embed] : !X
// CHECK-NEXT:    %10 = psk_core.split %b [embed -> two, half] : !psk_core.tensor<[two: 2, half: 32]>
// CHECK-NEXT:    %11 = psk_core.arange : !psk_core.index<[seq: T], C>
// CHECK-NEXT:    %12 = psk_core.arange : !psk_core.index<[pos: 4], 8>
// CHECK-NEXT:    %13 = psk_core.causal_mask : !psk_core.index<[seq: T, key: T], 2>
// CHECK-NEXT:    %14 = psk_core.compare ge %x, %1 : !psk_core.index<[batch: B, seq: T, embed: D], 2>
// CHECK-NEXT:    %15 = psk_core.compare ne %b, %b : !psk_core.index<[embed: D], 2>
// CHECK-NEXT:    func.return %9 : !X

// ---------------------------------------------------------------------------
// Constants, sizes, records, tuples.

func.func @constants() -> !psk_core.real {
  %0 = psk_core.constant 0.5 : !psk_core.real
  %1 = psk_core.constant -2.0 : !psk_core.real
  %2 = psk_core.constant 1.0e-05 : !psk_core.real
  %3 = psk_core.constant 3 : !psk_core.real
  %4 = psk_core.constant 0.1 : !psk_core.real
  %5 = psk_core.constant 1.0e+16 : !psk_core.real
  // The bound value of a size (a constant or a dimension) as a real.
  %6 = psk_core.size HD : !psk_core.real
  %7 = psk_core.size B {tag = "batch"} : !psk_core.real
  func.return %0 : !psk_core.real
}
// CHECK-LABEL: func.func @constants() -> !psk_core.real {
// CHECK-NEXT:    %0 = psk_core.constant 0.5 : !psk_core.real
// CHECK-NEXT:    %1 = psk_core.constant -2.0 : !psk_core.real
// CHECK-NEXT:    %2 = psk_core.constant 1.0e-05 : !psk_core.real
// CHECK-NEXT:    %3 = psk_core.constant 3.0 : !psk_core.real
// CHECK-NEXT:    %4 = psk_core.constant 0.1 : !psk_core.real
// CHECK-NEXT:    %5 = psk_core.constant 1.0e+16 : !psk_core.real
// CHECK-NEXT:    %6 = psk_core.size HD : !psk_core.real
// CHECK-NEXT:    %7 = psk_core.size B {tag = "batch"} : !psk_core.real

func.func @records(%w: !psk_core.tensor<[in: D, out: F]>, %b: !psk_core.tensor<[out: F]>, %c: !psk_core.real) -> !psk_core.real {
  %p = psk_core.record w = %w, b = %b : !psk_core.record<w: !psk_core.tensor<[in: D, out: F]>, b: !psk_core.tensor<[out: F]>>
  %0 = psk_core.field %p["b"] : !psk_core.tensor<[out: F]>
  %1 = psk_core.set_field %p["b"], %0 : !psk_core.record<w: !psk_core.tensor<[in: D, out: F]>, b: !psk_core.tensor<[out: F]>>
  %n = psk_core.record inner = %p, s = %c : !psk_core.record<inner: !psk_core.record<w: !psk_core.tensor<[in: D, out: F]>, b: !psk_core.tensor<[out: F]>>, s: !psk_core.real>
  %2 = psk_core.field %n["s"] : !psk_core.real
  %t = psk_core.tuple %c, %b, %p : !psk_core.tuple<!psk_core.real, !psk_core.tensor<[out: F]>, !psk_core.record<w: !psk_core.tensor<[in: D, out: F]>, b: !psk_core.tensor<[out: F]>>>
  %3 = psk_core.proj %t[0] : !psk_core.real
  %4 = psk_core.proj %t[2] : !psk_core.record<w: !psk_core.tensor<[in: D, out: F]>, b: !psk_core.tensor<[out: F]>>
  %5 = psk_core.tuple %c : !psk_core.tuple<!psk_core.real>
  // The empty tuple and the empty record.
  %6 = psk_core.tuple : !psk_core.tuple<>
  %7 = psk_core.record : !psk_core.record<>
  %8 = "psk_core.tuple"() : () -> !psk_core.tuple<>
  func.return %3 : !psk_core.real
}
// CHECK-LABEL: func.func @records(
// CHECK-NEXT:    %p = psk_core.record w = %w, b = %b : !psk_core.record<w: !psk_core.tensor<[in: D, out: F]>, b: !psk_core.tensor<[out: F]>>
// CHECK-NEXT:    %0 = psk_core.field %p["b"] : !psk_core.tensor<[out: F]>
// CHECK-NEXT:    %1 = psk_core.set_field %p["b"], %0 : !psk_core.record<w: !psk_core.tensor<[in: D, out: F]>, b: !psk_core.tensor<[out: F]>>
// CHECK-NEXT:    %n = psk_core.record inner = %p, s = %c : !psk_core.record<inner: !psk_core.record<w: !psk_core.tensor<[in: D, out: F]>, b: !psk_core.tensor<[out: F]>>, s: !psk_core.real>
// CHECK-NEXT:    %2 = psk_core.field %n["s"] : !psk_core.real
// CHECK-NEXT:    %t = psk_core.tuple %c, %b, %p : !psk_core.tuple<!psk_core.real, !psk_core.tensor<[out: F]>, !psk_core.record<w: !psk_core.tensor<[in: D, out: F]>, b: !psk_core.tensor<[out: F]>>>
// CHECK-NEXT:    %3 = psk_core.proj %t[0] : !psk_core.real
// CHECK-NEXT:    %4 = psk_core.proj %t[2] : !psk_core.record<w: !psk_core.tensor<[in: D, out: F]>, b: !psk_core.tensor<[out: F]>>
// CHECK-NEXT:    %5 = psk_core.tuple %c : !psk_core.tuple<!psk_core.real>
// CHECK-NEXT:    %6 = psk_core.tuple : !psk_core.tuple<>
// CHECK-NEXT:    %7 = psk_core.record : !psk_core.record<>
// CHECK-NEXT:    %8 = psk_core.tuple : !psk_core.tuple<>

// ---------------------------------------------------------------------------
// Functions, calls and fold over a stacked parameter tree.

func.func @Block.apply(%p: !psk_core.record<w: !psk_core.tensor<[in: D, out: D]>, g: !Bias>, %x: !X) -> !X {
  %w = psk_core.field %p["w"] : !psk_core.tensor<[in: D, out: D]>
  %g = psk_core.field %p["g"] : !Bias
  %0 = psk_core.ein %x[batch, seq, in], %w[in, embed] : !X
  %1 = psk_core.mul %0, %g : !X
  func.return %1 : !X
}
// CHECK-LABEL: func.func @Block.apply(%p: !psk_core.record<w: !psk_core.tensor<[in: D, out: D]>, g: !Bias>, %x: !X) -> !X {
// CHECK-NEXT:    %w = psk_core.field %p["w"] : !psk_core.tensor<[in: D, out: D]>
// CHECK-NEXT:    %g = psk_core.field %p["g"] : !Bias
// CHECK-NEXT:    %0 = psk_core.ein %x[batch, seq, in], %w[in, embed] : !X
// CHECK-NEXT:    %1 = psk_core.mul %0, %g : !X
// CHECK-NEXT:    func.return %1 : !X

// Every leaf of %blocks carries the leading layer axis `layer: L`; the
// callee takes one layer (the leaves without it) and the state.
func.func @stack(%blocks: !psk_core.record<w: !psk_core.tensor<[layer: L, in: D, out: D]>, g: !psk_core.tensor<[layer: L, embed: D]>>,
                 %x: !X {psk_core.init = "positive"},
                 %one: !psk_core.record<w: !psk_core.tensor<[in: D, out: D]>, g: !Bias>) -> !X {
  %0 = psk_core.fold @Block.apply(%blocks, %x) : !X
  %1 = func.call @Block.apply(%one, %0) : (!psk_core.record<w: !psk_core.tensor<[in: D, out: D]>, g: !Bias>, !X) -> !X
  func.return %1 : !X
}
// CHECK-LABEL: func.func @stack(%blocks: !psk_core.record<w: !psk_core.tensor<[layer: L, in: D, out: D]>, g: !psk_core.tensor<[layer: L, embed: D]>>, %x: !X {psk_core.init = "positive"}, %one: !psk_core.record<w: !psk_core.tensor<[in: D, out: D]>, g: !Bias>) -> !X {
// CHECK-NEXT:    %0 = psk_core.fold @Block.apply(%blocks, %x) : !X
// CHECK-NEXT:    %1 = func.call @Block.apply(%one, %0) : (!psk_core.record<w: !psk_core.tensor<[in: D, out: D]>, g: !Bias>, !X) -> !X
// CHECK-NEXT:    func.return %1 : !X

// A fold whose layers are scalars: the leaves are [layer: L] tensors, one
// layer of each is a real.
func.func @Scale.step(%s: !psk_core.tuple<!psk_core.real>, %x: !psk_core.real) -> !psk_core.real {
  %a = psk_core.proj %s[0] : !psk_core.real
  %0 = psk_core.mul %a, %x : !psk_core.real
  func.return %0 : !psk_core.real
}
func.func @scalars(%r: !psk_core.record<t: !psk_core.tuple<!psk_core.tensor<[layer: L]>>>, %x: !psk_core.real) -> !psk_core.real {
  %t = psk_core.field %r["t"] : !psk_core.tuple<!psk_core.tensor<[layer: L]>>
  %0 = psk_core.fold @Scale.run(%r, %x) : !psk_core.real
  func.return %0 : !psk_core.real
}
func.func @Scale.run(%s: !psk_core.record<t: !psk_core.tuple<!psk_core.real>>, %x: !psk_core.real) -> !psk_core.real {
  %t = psk_core.field %s["t"] : !psk_core.tuple<!psk_core.real>
  %0 = func.call @Scale.step(%t, %x) : (!psk_core.tuple<!psk_core.real>, !psk_core.real) -> !psk_core.real
  func.return %0 : !psk_core.real
}
// CHECK-LABEL: func.func @scalars(
// CHECK-NEXT:    %t = psk_core.field %r["t"] : !psk_core.tuple<!psk_core.tensor<[layer: L]>>
// CHECK-NEXT:    %0 = psk_core.fold @Scale.run(%r, %x) : !psk_core.real
// CHECK-LABEL: func.func @Scale.run(
// CHECK-NEXT:    %t = psk_core.field %s["t"] : !psk_core.tuple<!psk_core.real>
// CHECK-NEXT:    %0 = func.call @Scale.step(%t, %x) : (!psk_core.tuple<!psk_core.real>, !psk_core.real) -> !psk_core.real

// CHECK: }
