// The IR examples of docs/reference.md, one chunk per ```mlir block, kept
// equal to the document by the second RUN line (edit both together). Each
// example must parse, verify and print back; some are run to check the
// semantics the reference states.
//
// RUN: presk-opt %s --split-input-file | filecheck %s
// RUN: python %S/Inputs/doc_examples.py check %S/../../../docs/reference.md %s
//
// softmax with the causal mask: row i is 1/(i+1) at keys 0..i, 0 after.
// RUN: python %S/Inputs/doc_examples.py chunk %s causal_attention > %t.softmax.mlir
// RUN: presk run %t.softmax.mlir --entry causal_attention --dim T=3 --print-values | filecheck %s --check-prefix=MASKED
// MASKED:      shape (3, 3)
// MASKED-NEXT: {{\[\[}}1. 0. 0. ]
// MASKED-NEXT: [0.5 0.5 0. ]
// MASKED-NEXT: [0.3333333333333333 0.3333333333333333 0.3333333333333333]]
//
// softmax rows sum to 1: the mean of a T x T result is 1/T whatever the input.
// RUN: presk run %t.softmax.mlir --entry plain_softmax --dim T=4 | filecheck %s --check-prefix=PLAIN
// PLAIN: shape (4, 4) {{.*}} mean 0.25 {{.*}}
//
// cross_entropy of all-zero logits over 4 classes is log 4.
// RUN: python %S/Inputs/doc_examples.py chunk %s loss > %t.loss.mlir
// RUN: presk run %t.loss.mlir --entry loss --dim B=2 --dim T=3 | filecheck %s --check-prefix=LOSS
// LOSS: 1.3862943611198906
//
// constant: 1.0e-05 + 3.
// RUN: python %S/Inputs/doc_examples.py chunk %s eps > %t.eps.mlir
// RUN: presk run %t.eps.mlir --entry eps | filecheck %s --check-prefix=EPS
// EPS: 3.00001
//
// size follows --const: 1/sqrt(HD) with HD = D / H.
// RUN: python %S/Inputs/doc_examples.py chunk %s scale > %t.scale.mlir
// RUN: presk run %t.scale.mlir --entry scale --dim T=2 --print-values | filecheck %s --check-prefix=SCALE64
// RUN: presk run %t.scale.mlir --entry scale --dim T=2 --const D=16 --print-values | filecheck %s --check-prefix=SCALE16
// SCALE64: {{\[\[}}0.25 0.25]
// SCALE16: {{\[\[}}0.5 0.5]
//
// fold: three layers, each adding 1 * 1.
// RUN: python %S/Inputs/doc_examples.py chunk %s stack > %t.fold.mlir
// RUN: presk run %t.fold.mlir --entry stack --print-values | filecheck %s --check-prefix=FOLD
// FOLD: [4. 4.]
//
// arange's fit to its range is checked when the sizes are bound.
// RUN: python %S/Inputs/doc_examples.py chunk %s positions > %t.arange.mlir
// RUN: not presk run %t.arange.mlir --entry positions --dim T=3 --dim C=2 --dim D=2 2>&1 | filecheck %s --check-prefix=ARANGE
// ARANGE: E4002: arange of 3 indices does not fit its range 2

!Act = !psk_core.tensor<[batch: B, seq: T, embed: D]>
!Linear = !psk_core.record<w: !psk_core.tensor<[in: D, out: F]>, b: !psk_core.tensor<[out: F]>>
psk_core.const_dim @D = 64
psk_core.const_dim @F = "4 * D"
func.func @types(%x: !Act, %p: !Linear, %ids: !psk_core.index<[batch: B, seq: T], V>,
                 %pair: !psk_core.tuple<!psk_core.real, !Act>, %lr: !psk_core.real) -> !Act {
  func.return %x : !Act
}
// CHECK: !Act = !psk_core.tensor<[batch: B, seq: T, embed: D]>
// CHECK: !Linear = !psk_core.record<w: !psk_core.tensor<[in: D, out: F]>, b: !psk_core.tensor<[out: F]>>
// CHECK: psk_core.const_dim @D = 64
// CHECK: psk_core.const_dim @F = "4 * D"
// CHECK-LABEL: func.func @types(
// CHECK-SAME: %x: !Act, %p: !Linear, %ids: !psk_core.index<[batch: B, seq: T], V>, %pair: !psk_core.tuple<!psk_core.real, !Act>, %lr: !psk_core.real) -> !Act {
// CHECK-NEXT: func.return %x : !Act

// -----

!X = !psk_core.tensor<[batch: B, seq: T, embed: D]>
!P = !psk_core.record<w: !psk_core.tensor<[in: D, out: D]>, b: !psk_core.tensor<[out: D]>>
func.func @centre_and_scale(%x: !X, %g: !psk_core.tensor<[embed: D]>) -> !X {
  %mu = psk_core.mean %x [embed] : !psk_core.tensor<[batch: B, seq: T]>
  %c = psk_core.sub %x, %mu : !X
  %y = psk_core.mul %c, %g : !X
  %h = psk_core.constant 0.5 : !psk_core.real
  %z = psk_core.mul %h, %y : !X
  func.return %z : !X
}
func.func @sgd(%p: !P, %grad: !P, %lr: !psk_core.real) -> !P {
  %step = psk_core.mul %lr, %grad : !P
  %new = psk_core.sub %p, %step : !P
  func.return %new : !P
}
// CHECK: !X = !psk_core.tensor<[batch: B, seq: T, embed: D]>
// CHECK: !P = !psk_core.record<w: !psk_core.tensor<[in: D, out: D]>, b: !psk_core.tensor<[out: D]>>
// CHECK-LABEL: func.func @centre_and_scale(
// CHECK-SAME: %x: !X, %g: !psk_core.tensor<[embed: D]>) -> !X {
// CHECK-NEXT: %mu = psk_core.mean %x [embed] : !psk_core.tensor<[batch: B, seq: T]>
// CHECK-NEXT: %c = psk_core.sub %x, %mu : !X
// CHECK-NEXT: %y = psk_core.mul %c, %g : !X
// CHECK-NEXT: %h = psk_core.constant 0.5 : !psk_core.real
// CHECK-NEXT: %z = psk_core.mul %h, %y : !X
// CHECK-NEXT: func.return %z : !X
// CHECK-LABEL: func.func @sgd(
// CHECK-SAME: %p: !P, %grad: !P, %lr: !psk_core.real) -> !P {
// CHECK-NEXT: %step = psk_core.mul %lr, %grad : !P
// CHECK-NEXT: %new = psk_core.sub %p, %step : !P
// CHECK-NEXT: func.return %new : !P

// -----

func.func @binary(%x: !psk_core.tensor<[row: 2, col: 3]>, %b: !psk_core.tensor<[col: 3]>, %c: !psk_core.real) -> !psk_core.tensor<[row: 2, col: 3]> {
  %0 = psk_core.add %x, %b : !psk_core.tensor<[row: 2, col: 3]>
  %1 = psk_core.sub %0, %c : !psk_core.tensor<[row: 2, col: 3]>
  %2 = psk_core.mul %b, %1 : !psk_core.tensor<[row: 2, col: 3]>
  %3 = psk_core.div %2, %c : !psk_core.tensor<[row: 2, col: 3]>
  %4 = psk_core.max %3, %c : !psk_core.tensor<[row: 2, col: 3]>
  func.return %4 : !psk_core.tensor<[row: 2, col: 3]>
}
// CHECK-LABEL: func.func @binary(
// CHECK-SAME: %x: !psk_core.tensor<[row: 2, col: 3]>, %b: !psk_core.tensor<[col: 3]>, %c: !psk_core.real) -> !psk_core.tensor<[row: 2, col: 3]> {
// CHECK-NEXT: %0 = psk_core.add %x, %b : !psk_core.tensor<[row: 2, col: 3]>
// CHECK-NEXT: %1 = psk_core.sub %0, %c : !psk_core.tensor<[row: 2, col: 3]>
// CHECK-NEXT: %2 = psk_core.mul %b, %1 : !psk_core.tensor<[row: 2, col: 3]>
// CHECK-NEXT: %3 = psk_core.div %2, %c : !psk_core.tensor<[row: 2, col: 3]>
// CHECK-NEXT: %4 = psk_core.max %3, %c : !psk_core.tensor<[row: 2, col: 3]>
// CHECK-NEXT: func.return %4 : !psk_core.tensor<[row: 2, col: 3]>

// -----

func.func @unary(%x: !psk_core.tensor<[n: 4]>) -> !psk_core.tensor<[n: 4]> {
  %0 = psk_core.neg %x : !psk_core.tensor<[n: 4]>
  %1 = psk_core.exp %0 : !psk_core.tensor<[n: 4]>
  %2 = psk_core.log %1 : !psk_core.tensor<[n: 4]>
  %3 = psk_core.sqrt %1 : !psk_core.tensor<[n: 4]>
  %4 = psk_core.tanh %3 : !psk_core.tensor<[n: 4]>
  %5 = psk_core.gelu %4 : !psk_core.tensor<[n: 4]>
  %6 = psk_core.erf %5 : !psk_core.tensor<[n: 4]>
  func.return %6 : !psk_core.tensor<[n: 4]>
}
// CHECK-LABEL: func.func @unary(
// CHECK-SAME: %x: !psk_core.tensor<[n: 4]>) -> !psk_core.tensor<[n: 4]> {
// CHECK-NEXT: %0 = psk_core.neg %x : !psk_core.tensor<[n: 4]>
// CHECK-NEXT: %1 = psk_core.exp %0 : !psk_core.tensor<[n: 4]>
// CHECK-NEXT: %2 = psk_core.log %1 : !psk_core.tensor<[n: 4]>
// CHECK-NEXT: %3 = psk_core.sqrt %1 : !psk_core.tensor<[n: 4]>
// CHECK-NEXT: %4 = psk_core.tanh %3 : !psk_core.tensor<[n: 4]>
// CHECK-NEXT: %5 = psk_core.gelu %4 : !psk_core.tensor<[n: 4]>
// CHECK-NEXT: %6 = psk_core.erf %5 : !psk_core.tensor<[n: 4]>
// CHECK-NEXT: func.return %6 : !psk_core.tensor<[n: 4]>

// -----

func.func @cube(%x: !psk_core.real) -> !psk_core.real {
  %0 = psk_core.pow %x, 3 : !psk_core.real
  func.return %0 : !psk_core.real
}
// CHECK-LABEL: func.func @cube(
// CHECK-SAME: %x: !psk_core.real) -> !psk_core.real {
// CHECK-NEXT: %0 = psk_core.pow %x, 3 : !psk_core.real
// CHECK-NEXT: func.return %0 : !psk_core.real

// -----

func.func @masked_fill(%s: !psk_core.tensor<[head: H, q: T, k: T]>) -> !psk_core.tensor<[head: H, q: T, k: T]> {
  %m = psk_core.causal_mask : !psk_core.index<[q: T, k: T], 2>
  %ninf = psk_core.constant -1.0e+30 : !psk_core.real
  %0 = psk_core.where %m, %s, %ninf : !psk_core.tensor<[head: H, q: T, k: T]>
  func.return %0 : !psk_core.tensor<[head: H, q: T, k: T]>
}
// CHECK-LABEL: func.func @masked_fill(
// CHECK-SAME: %s: !psk_core.tensor<[head: H, q: T, k: T]>) -> !psk_core.tensor<[head: H, q: T, k: T]> {
// CHECK-NEXT: %m = psk_core.causal_mask : !psk_core.index<[q: T, k: T], 2>
// CHECK-NEXT: %ninf = psk_core.constant -1.0e+30 : !psk_core.real
// CHECK-NEXT: %0 = psk_core.where %m, %s, %ninf : !psk_core.tensor<[head: H, q: T, k: T]>
// CHECK-NEXT: func.return %0 : !psk_core.tensor<[head: H, q: T, k: T]>

// -----

func.func @relu(%x: !psk_core.tensor<[n: N]>, %zero: !psk_core.tensor<[n: N]>) -> !psk_core.tensor<[n: N]> {
  %m = psk_core.compare gt %x, %zero : !psk_core.index<[n: N], 2>
  %0 = psk_core.where %m, %x, %zero : !psk_core.tensor<[n: N]>
  func.return %0 : !psk_core.tensor<[n: N]>
}
// CHECK-LABEL: func.func @relu(
// CHECK-NEXT: %m = psk_core.compare gt %x, %zero : !psk_core.index<[n: N], 2>
// CHECK-NEXT: %0 = psk_core.where %m, %x, %zero : !psk_core.tensor<[n: N]>
// CHECK-NEXT: func.return %0 : !psk_core.tensor<[n: N]>

// -----

func.func @reductions(%x: !psk_core.tensor<[batch: B, seq: T, embed: D]>) -> !psk_core.real {
  %0 = psk_core.sum %x [embed] : !psk_core.tensor<[batch: B, seq: T]>
  %1 = psk_core.mean %x [batch, seq] : !psk_core.tensor<[embed: D]>
  %2 = psk_core.reduce_max %x [seq] : !psk_core.tensor<[batch: B, embed: D]>
  %3 = psk_core.mean %x [batch, seq, embed] : !psk_core.real
  func.return %3 : !psk_core.real
}
// CHECK-LABEL: func.func @reductions(
// CHECK-SAME: %x: !psk_core.tensor<[batch: B, seq: T, embed: D]>) -> !psk_core.real {
// CHECK-NEXT: %0 = psk_core.sum %x [embed] : !psk_core.tensor<[batch: B, seq: T]>
// CHECK-NEXT: %1 = psk_core.mean %x [batch, seq] : !psk_core.tensor<[embed: D]>
// CHECK-NEXT: %2 = psk_core.reduce_max %x [seq] : !psk_core.tensor<[batch: B, embed: D]>
// CHECK-NEXT: %3 = psk_core.mean %x [batch, seq, embed] : !psk_core.real
// CHECK-NEXT: func.return %3 : !psk_core.real

// -----

func.func @linear(%x: !psk_core.tensor<[batch: B, in: D]>, %w: !psk_core.tensor<[in: D, out: F]>) -> !psk_core.tensor<[batch: B, out: F]> {
  %0 = psk_core.dot %x, %w : !psk_core.tensor<[batch: B, out: F]>
  func.return %0 : !psk_core.tensor<[batch: B, out: F]>
}
// CHECK-LABEL: func.func @linear(
// CHECK-SAME: %x: !psk_core.tensor<[batch: B, in: D]>, %w: !psk_core.tensor<[in: D, out: F]>) -> !psk_core.tensor<[batch: B, out: F]> {
// CHECK-NEXT: %0 = psk_core.dot %x, %w : !psk_core.tensor<[batch: B, out: F]>
// CHECK-NEXT: func.return %0 : !psk_core.tensor<[batch: B, out: F]>

// -----

func.func @scores(%q: !psk_core.tensor<[b: B, h: H, s: T, d: HD]>, %k: !psk_core.tensor<[b: B, h: H, t: T, d: HD]>) -> !psk_core.tensor<[b: B, h: H, s: T, t: T]> {
  %0 = psk_core.ein %q[b, h, s, d], %k[b, h, t, d] : !psk_core.tensor<[b: B, h: H, s: T, t: T]>
  func.return %0 : !psk_core.tensor<[b: B, h: H, s: T, t: T]>
}
func.func @transpose(%w: !psk_core.tensor<[in: D, out: F]>) -> !psk_core.tensor<[o: F, i: D]> {
  %0 = psk_core.ein %w[i, o] : !psk_core.tensor<[o: F, i: D]>
  func.return %0 : !psk_core.tensor<[o: F, i: D]>
}
// CHECK-LABEL: func.func @scores(
// CHECK-SAME: %q: !psk_core.tensor<[b: B, h: H, s: T, d: HD]>, %k: !psk_core.tensor<[b: B, h: H, t: T, d: HD]>) -> !psk_core.tensor<[b: B, h: H, s: T, t: T]> {
// CHECK-NEXT: %0 = psk_core.ein %q[b, h, s, d], %k[b, h, t, d] : !psk_core.tensor<[b: B, h: H, s: T, t: T]>
// CHECK-NEXT: func.return %0 : !psk_core.tensor<[b: B, h: H, s: T, t: T]>
// CHECK-LABEL: func.func @transpose(
// CHECK-SAME: %w: !psk_core.tensor<[in: D, out: F]>) -> !psk_core.tensor<[o: F, i: D]> {
// CHECK-NEXT: %0 = psk_core.ein %w[i, o] : !psk_core.tensor<[o: F, i: D]>
// CHECK-NEXT: func.return %0 : !psk_core.tensor<[o: F, i: D]>

// -----

func.func @causal_attention(%s: !psk_core.tensor<[q: T, k: T]> {psk_core.init = "ones"}) -> !psk_core.tensor<[q: T, k: T]> {
  %m = psk_core.causal_mask : !psk_core.index<[q: T, k: T], 2>
  %p = psk_core.softmax %s [k] mask %m : !psk_core.tensor<[q: T, k: T]>
  func.return %p : !psk_core.tensor<[q: T, k: T]>
}
func.func @plain_softmax(%s: !psk_core.tensor<[q: T, k: T]>) -> !psk_core.tensor<[q: T, k: T]> {
  %p = psk_core.softmax %s [k] : !psk_core.tensor<[q: T, k: T]>
  func.return %p : !psk_core.tensor<[q: T, k: T]>
}
// CHECK-LABEL: func.func @causal_attention(
// CHECK-SAME: %s: !psk_core.tensor<[q: T, k: T]> {psk_core.init = "ones"}) -> !psk_core.tensor<[q: T, k: T]> {
// CHECK-NEXT: %m = psk_core.causal_mask : !psk_core.index<[q: T, k: T], 2>
// CHECK-NEXT: %p = psk_core.softmax %s [k] mask %m : !psk_core.tensor<[q: T, k: T]>
// CHECK-NEXT: func.return %p : !psk_core.tensor<[q: T, k: T]>
// CHECK-LABEL: func.func @plain_softmax(
// CHECK-SAME: %s: !psk_core.tensor<[q: T, k: T]>) -> !psk_core.tensor<[q: T, k: T]> {
// CHECK-NEXT: %p = psk_core.softmax %s [k] : !psk_core.tensor<[q: T, k: T]>
// CHECK-NEXT: func.return %p : !psk_core.tensor<[q: T, k: T]>

// -----

func.func @loss(%logits: !psk_core.tensor<[batch: B, seq: T, vocab: 4]> {psk_core.init = "zeros"}, %targets: !psk_core.index<[batch: B, seq: T], 4>) -> !psk_core.real {
  %0 = psk_core.cross_entropy %logits, %targets [vocab] : !psk_core.real
  func.return %0 : !psk_core.real
}
// CHECK-LABEL: func.func @loss(
// CHECK-SAME: %logits: !psk_core.tensor<[batch: B, seq: T, vocab: 4]> {psk_core.init = "zeros"}, %targets: !psk_core.index<[batch: B, seq: T], 4>) -> !psk_core.real {
// CHECK-NEXT: %0 = psk_core.cross_entropy %logits, %targets [vocab] : !psk_core.real
// CHECK-NEXT: func.return %0 : !psk_core.real

// -----

func.func @embed(%table: !psk_core.tensor<[vocab: V, embed: D]>, %ids: !psk_core.index<[batch: B, seq: T], V>) -> !psk_core.tensor<[batch: B, seq: T, embed: D]> {
  %0 = psk_core.gather %table, %ids : !psk_core.tensor<[batch: B, seq: T, embed: D]>
  func.return %0 : !psk_core.tensor<[batch: B, seq: T, embed: D]>
}
// CHECK-LABEL: func.func @embed(
// CHECK-SAME: %table: !psk_core.tensor<[vocab: V, embed: D]>, %ids: !psk_core.index<[batch: B, seq: T], V>) -> !psk_core.tensor<[batch: B, seq: T, embed: D]> {
// CHECK-NEXT: %0 = psk_core.gather %table, %ids : !psk_core.tensor<[batch: B, seq: T, embed: D]>
// CHECK-NEXT: func.return %0 : !psk_core.tensor<[batch: B, seq: T, embed: D]>

// -----

func.func @bias_grad(%b: !psk_core.tensor<[embed: D]>, %x: !psk_core.tensor<[batch: B, embed: D]>) -> !psk_core.tensor<[embed: D]> {
  %0 = psk_core.broadcast_like %b, %x : !psk_core.tensor<[batch: B, embed: D]>
  %1 = psk_core.sum_to %0, %b : !psk_core.tensor<[embed: D]>
  %2 = psk_core.zeros_like %b : !psk_core.tensor<[embed: D]>
  %3 = psk_core.add %1, %2 : !psk_core.tensor<[embed: D]>
  func.return %3 : !psk_core.tensor<[embed: D]>
}
// CHECK-LABEL: func.func @bias_grad(
// CHECK-SAME: %b: !psk_core.tensor<[embed: D]>, %x: !psk_core.tensor<[batch: B, embed: D]>) -> !psk_core.tensor<[embed: D]> {
// CHECK-NEXT: %0 = psk_core.broadcast_like %b, %x : !psk_core.tensor<[batch: B, embed: D]>
// CHECK-NEXT: %1 = psk_core.sum_to %0, %b : !psk_core.tensor<[embed: D]>
// CHECK-NEXT: %2 = psk_core.zeros_like %b : !psk_core.tensor<[embed: D]>
// CHECK-NEXT: %3 = psk_core.add %1, %2 : !psk_core.tensor<[embed: D]>
// CHECK-NEXT: func.return %3 : !psk_core.tensor<[embed: D]>

// -----

func.func @heads(%x: !psk_core.tensor<[batch: B, seq: T, embed: 64]>) -> !psk_core.tensor<[batch: B, seq: T, embed: 64]> {
  %0 = psk_core.split %x [embed -> head, hd] : !psk_core.tensor<[batch: B, seq: T, head: 4, hd: 16]>
  %1 = psk_core.merge %0 [head, hd -> embed] : !psk_core.tensor<[batch: B, seq: T, embed: 64]>
  func.return %1 : !psk_core.tensor<[batch: B, seq: T, embed: 64]>
}
// CHECK-LABEL: func.func @heads(
// CHECK-SAME: %x: !psk_core.tensor<[batch: B, seq: T, embed: 64]>) -> !psk_core.tensor<[batch: B, seq: T, embed: 64]> {
// CHECK-NEXT: %0 = psk_core.split %x [embed -> head, hd] : !psk_core.tensor<[batch: B, seq: T, head: 4, hd: 16]>
// CHECK-NEXT: %1 = psk_core.merge %0 [head, hd -> embed] : !psk_core.tensor<[batch: B, seq: T, embed: 64]>
// CHECK-NEXT: func.return %1 : !psk_core.tensor<[batch: B, seq: T, embed: 64]>

// -----

func.func @positions(%table: !psk_core.tensor<[ctx: C, embed: D]>) -> !psk_core.tensor<[seq: T, embed: D]> {
  %pos = psk_core.arange : !psk_core.index<[seq: T], C>
  %0 = psk_core.gather %table, %pos : !psk_core.tensor<[seq: T, embed: D]>
  func.return %0 : !psk_core.tensor<[seq: T, embed: D]>
}
// CHECK-LABEL: func.func @positions(
// CHECK-SAME: %table: !psk_core.tensor<[ctx: C, embed: D]>) -> !psk_core.tensor<[seq: T, embed: D]> {
// CHECK-NEXT: %pos = psk_core.arange : !psk_core.index<[seq: T], C>
// CHECK-NEXT: %0 = psk_core.gather %table, %pos : !psk_core.tensor<[seq: T, embed: D]>
// CHECK-NEXT: func.return %0 : !psk_core.tensor<[seq: T, embed: D]>

// -----

func.func @eps() -> !psk_core.real {
  %0 = psk_core.constant 1.0e-05 : !psk_core.real
  %1 = psk_core.constant 3 : !psk_core.real
  %2 = psk_core.add %0, %1 : !psk_core.real
  func.return %2 : !psk_core.real
}
// CHECK-LABEL: func.func @eps(
// CHECK-SAME: ) -> !psk_core.real {
// CHECK-NEXT: %0 = psk_core.constant 1.0e-05 : !psk_core.real
// CHECK-NEXT: %1 = psk_core.constant 3.0 : !psk_core.real
// CHECK-NEXT: %2 = psk_core.add %0, %1 : !psk_core.real
// CHECK-NEXT: func.return %2 : !psk_core.real

// -----

psk_core.const_dim @D = 64
psk_core.const_dim @H = 4
psk_core.const_dim @HD = "D / H"
func.func @scale(%s: !psk_core.tensor<[q: T, k: T]> {psk_core.init = "ones"}) -> !psk_core.tensor<[q: T, k: T]> {
  %hd = psk_core.size HD : !psk_core.real
  %r = psk_core.sqrt %hd : !psk_core.real
  %0 = psk_core.div %s, %r : !psk_core.tensor<[q: T, k: T]>
  func.return %0 : !psk_core.tensor<[q: T, k: T]>
}
// CHECK: psk_core.const_dim @D = 64
// CHECK: psk_core.const_dim @H = 4
// CHECK: psk_core.const_dim @HD = "D / H"
// CHECK-LABEL: func.func @scale(
// CHECK-SAME: %s: !psk_core.tensor<[q: T, k: T]> {psk_core.init = "ones"}) -> !psk_core.tensor<[q: T, k: T]> {
// CHECK-NEXT: %hd = psk_core.size HD : !psk_core.real
// CHECK-NEXT: %r = psk_core.sqrt %hd : !psk_core.real
// CHECK-NEXT: %0 = psk_core.div %s, %r : !psk_core.tensor<[q: T, k: T]>
// CHECK-NEXT: func.return %0 : !psk_core.tensor<[q: T, k: T]>

// -----

!L = !psk_core.record<w: !psk_core.tensor<[in: D, out: F]>, b: !psk_core.tensor<[out: F]>>
func.func @records(%w: !psk_core.tensor<[in: D, out: F]>, %b: !psk_core.tensor<[out: F]>) -> !L {
  %p = psk_core.record w = %w, b = %b : !L
  %0 = psk_core.field %p["b"] : !psk_core.tensor<[out: F]>
  %1 = psk_core.neg %0 : !psk_core.tensor<[out: F]>
  %2 = psk_core.set_field %p["b"], %1 : !L
  func.return %2 : !L
}
// CHECK: !L = !psk_core.record<w: !psk_core.tensor<[in: D, out: F]>, b: !psk_core.tensor<[out: F]>>
// CHECK-LABEL: func.func @records(
// CHECK-SAME: %w: !psk_core.tensor<[in: D, out: F]>, %b: !psk_core.tensor<[out: F]>) -> !L {
// CHECK-NEXT: %p = psk_core.record w = %w, b = %b : !L
// CHECK-NEXT: %0 = psk_core.field %p["b"] : !psk_core.tensor<[out: F]>
// CHECK-NEXT: %1 = psk_core.neg %0 : !psk_core.tensor<[out: F]>
// CHECK-NEXT: %2 = psk_core.set_field %p["b"], %1 : !L
// CHECK-NEXT: func.return %2 : !L

// -----

func.func @tuples(%a: !psk_core.real, %x: !psk_core.tensor<[n: 3]>) -> !psk_core.tensor<[n: 3]> {
  %t = psk_core.tuple %a, %x : !psk_core.tuple<!psk_core.real, !psk_core.tensor<[n: 3]>>
  %0 = psk_core.proj %t[0] : !psk_core.real
  %1 = psk_core.proj %t[1] : !psk_core.tensor<[n: 3]>
  %2 = psk_core.mul %0, %1 : !psk_core.tensor<[n: 3]>
  func.return %2 : !psk_core.tensor<[n: 3]>
}
// CHECK-LABEL: func.func @tuples(
// CHECK-SAME: %a: !psk_core.real, %x: !psk_core.tensor<[n: 3]>) -> !psk_core.tensor<[n: 3]> {
// CHECK-NEXT: %t = psk_core.tuple %a, %x : !psk_core.tuple<!psk_core.real, !psk_core.tensor<[n: 3]>>
// CHECK-NEXT: %0 = psk_core.proj %t[0] : !psk_core.real
// CHECK-NEXT: %1 = psk_core.proj %t[1] : !psk_core.tensor<[n: 3]>
// CHECK-NEXT: %2 = psk_core.mul %0, %1 : !psk_core.tensor<[n: 3]>
// CHECK-NEXT: func.return %2 : !psk_core.tensor<[n: 3]>

// -----

func.func @Scale.apply(%x: !psk_core.tensor<[n: N]>, %s: !psk_core.real) -> !psk_core.tensor<[n: N]> {
  %0 = psk_core.mul %x, %s : !psk_core.tensor<[n: N]>
  func.return %0 : !psk_core.tensor<[n: N]>
}
func.func @main(%x: !psk_core.tensor<[n: N]>, %v: !psk_core.tensor<[n: N]> {psk_core.init = "positive"}) -> (!psk_core.tensor<[n: N]>, !psk_core.real) {
  %0 = psk_core.sqrt %v : !psk_core.tensor<[n: N]>
  %h = psk_core.constant 0.5 : !psk_core.real
  %1 = func.call @Scale.apply(%0, %h) : (!psk_core.tensor<[n: N]>, !psk_core.real) -> !psk_core.tensor<[n: N]>
  %2 = psk_core.sum %x [n] : !psk_core.real
  func.return %1, %2 : !psk_core.tensor<[n: N]>, !psk_core.real
}
// CHECK-LABEL: func.func @Scale.apply(
// CHECK-SAME: %x: !psk_core.tensor<[n: N]>, %s: !psk_core.real) -> !psk_core.tensor<[n: N]> {
// CHECK-NEXT: %0 = psk_core.mul %x, %s : !psk_core.tensor<[n: N]>
// CHECK-NEXT: func.return %0 : !psk_core.tensor<[n: N]>
// CHECK-LABEL: func.func @main(
// CHECK-SAME: %x: !psk_core.tensor<[n: N]>, %v: !psk_core.tensor<[n: N]> {psk_core.init = "positive"}) -> (!psk_core.tensor<[n: N]>, !psk_core.real) {
// CHECK-NEXT: %0 = psk_core.sqrt %v : !psk_core.tensor<[n: N]>
// CHECK-NEXT: %h = psk_core.constant 0.5 : !psk_core.real
// CHECK-NEXT: %1 = func.call @Scale.apply(%0, %h) : (!psk_core.tensor<[n: N]>, !psk_core.real) -> !psk_core.tensor<[n: N]>
// CHECK-NEXT: %2 = psk_core.sum %x [n] : !psk_core.real
// CHECK-NEXT: func.return %1, %2 : !psk_core.tensor<[n: N]>, !psk_core.real

// -----

!Blocks = !psk_core.record<w: !psk_core.tensor<[layer: L, embed: 2]>, s: !psk_core.tensor<[layer: L]>>
!Block = !psk_core.record<w: !psk_core.tensor<[embed: 2]>, s: !psk_core.real>
!X = !psk_core.tensor<[embed: 2]>
psk_core.const_dim @L = 3
func.func @Block.apply(%p: !Block, %x: !X) -> !X {
  %w = psk_core.field %p["w"] : !X
  %s = psk_core.field %p["s"] : !psk_core.real
  %0 = psk_core.mul %w, %s : !X
  %1 = psk_core.add %x, %0 : !X
  func.return %1 : !X
}
func.func @stack(%blocks: !Blocks {psk_core.init = "ones"}, %x: !X {psk_core.init = "ones"}) -> !X {
  %0 = psk_core.fold @Block.apply(%blocks, %x) : !X
  func.return %0 : !X
}
// CHECK: !Blocks = !psk_core.record<w: !psk_core.tensor<[layer: L, embed: 2]>, s: !psk_core.tensor<[layer: L]>>
// CHECK: !Block = !psk_core.record<w: !psk_core.tensor<[embed: 2]>, s: !psk_core.real>
// CHECK: !X = !psk_core.tensor<[embed: 2]>
// CHECK: psk_core.const_dim @L = 3
// CHECK-LABEL: func.func @Block.apply(
// CHECK-SAME: %p: !Block, %x: !X) -> !X {
// CHECK-NEXT: %w = psk_core.field %p["w"] : !X
// CHECK-NEXT: %s = psk_core.field %p["s"] : !psk_core.real
// CHECK-NEXT: %0 = psk_core.mul %w, %s : !X
// CHECK-NEXT: %1 = psk_core.add %x, %0 : !X
// CHECK-NEXT: func.return %1 : !X
// CHECK-LABEL: func.func @stack(
// CHECK-SAME: %blocks: !Blocks {psk_core.init = "ones"}, %x: !X {psk_core.init = "ones"}) -> !X {
// CHECK-NEXT: %0 = psk_core.fold @Block.apply(%blocks, %x) : !X
// CHECK-NEXT: func.return %0 : !X

// -----

psk_core.const_dim @D = 64
psk_core.const_dim @H = 4
psk_core.const_dim @HD = "D / H"
psk_core.const_dim @F = "4 * D"
func.func @mlp_shapes(%x: !psk_core.tensor<[batch: B, embed: D]>, %w: !psk_core.tensor<[embed: D, hidden: F]>) -> !psk_core.tensor<[batch: B, hidden: F]> {
  %0 = psk_core.dot %x, %w : !psk_core.tensor<[batch: B, hidden: F]>
  func.return %0 : !psk_core.tensor<[batch: B, hidden: F]>
}
// CHECK: psk_core.const_dim @D = 64
// CHECK: psk_core.const_dim @H = 4
// CHECK: psk_core.const_dim @HD = "D / H"
// CHECK: psk_core.const_dim @F = "4 * D"
// CHECK-LABEL: func.func @mlp_shapes(
// CHECK-SAME: %x: !psk_core.tensor<[batch: B, embed: D]>, %w: !psk_core.tensor<[embed: D, hidden: F]>) -> !psk_core.tensor<[batch: B, hidden: F]> {
// CHECK-NEXT: %0 = psk_core.dot %x, %w : !psk_core.tensor<[batch: B, hidden: F]>
// CHECK-NEXT: func.return %0 : !psk_core.tensor<[batch: B, hidden: F]>
