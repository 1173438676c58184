// RUN: presk-opt %s -p psk-autodiff | filecheck %s
// RUN: presk-opt %s -p psk-autodiff | presk-opt | filecheck %s
//
// The adjoint of every primitive with a rule (presk/passes/autodiff_rules.py),
// one small function each, read in its generated `.bwd`. docs/training.md §3
// states each rule; tests/unit/test_autodiff.py checks their values against
// central differences. The cotangent of a broadcast operand is summed over the
// axes it lacks (`sum ... [a]`); values a rule reads come from the residuals.

!M = !psk_core.tensor<[a: 2, b: 3]>
!V = !psk_core.tensor<[b: 3]>
!R = !psk_core.real

func.func @add(%x: !M, %y: !V) -> !R {
  %0 = psk_core.add %x, %y : !M
  %1 = psk_core.sum %0 [a, b] : !R
  func.return %1 : !R
}
func.func @sub(%x: !M, %y: !V) -> !R {
  %0 = psk_core.sub %x, %y : !M
  %1 = psk_core.sum %0 [a, b] : !R
  func.return %1 : !R
}
func.func @mul(%x: !M, %y: !V) -> !R {
  %0 = psk_core.mul %x, %y : !M
  %1 = psk_core.sum %0 [a, b] : !R
  func.return %1 : !R
}
func.func @div(%x: !M, %y: !V) -> !R {
  %0 = psk_core.div %x, %y : !M
  %1 = psk_core.sum %0 [a, b] : !R
  func.return %1 : !R
}
func.func @unary(%x: !V) -> !R {
  %0 = psk_core.neg %x : !V
  %1 = psk_core.exp %0 : !V
  %2 = psk_core.log %1 : !V
  %3 = psk_core.sqrt %2 : !V
  %4 = psk_core.tanh %3 : !V
  %5 = psk_core.sum %4 [b] : !R
  func.return %5 : !R
}
func.func @gelu(%x: !V) -> !R {
  %0 = psk_core.gelu %x : !V
  %1 = psk_core.sum %0 [b] : !R
  func.return %1 : !R
}
func.func @erf(%x: !V) -> !R {
  %0 = psk_core.erf %x : !V
  %1 = psk_core.sum %0 [b] : !R
  func.return %1 : !R
}
func.func @pow(%x: !V) -> !R {
  %0 = psk_core.pow %x, 3 : !V
  %1 = psk_core.sum %0 [b] : !R
  func.return %1 : !R
}
func.func @where(%m: !psk_core.index<[b: 3], 2>, %x: !M, %y: !R) -> !R {
  %0 = psk_core.where %m, %x, %y : !M
  %1 = psk_core.sum %0 [a, b] : !R
  func.return %1 : !R
}
func.func @mean(%x: !M) -> !R {
  %0 = psk_core.mean %x [a] : !V
  %1 = psk_core.sum %0 [b] : !R
  func.return %1 : !R
}
func.func @dot(%x: !M, %w: !psk_core.tensor<[b: 3, c: 4]>) -> !R {
  %0 = psk_core.dot %x, %w : !psk_core.tensor<[a: 2, c: 4]>
  %1 = psk_core.sum %0 [a, c] : !R
  func.return %1 : !R
}
func.func @ein(%q: !M, %k: !psk_core.tensor<[t: 4, b: 3]>) -> !R {
  %0 = psk_core.ein %q[s, d], %k[t, d] : !psk_core.tensor<[s: 2, t: 4]>
  %1 = psk_core.sum %0 [s, t] : !R
  func.return %1 : !R
}
func.func @softmax(%x: !M, %c: !M) -> !R {
  %0 = psk_core.softmax %x [b] : !M
  %1 = psk_core.mul %0, %c : !M
  %2 = psk_core.sum %1 [a, b] : !R
  func.return %2 : !R
}
func.func @cross_entropy(%l: !M, %t: !psk_core.index<[a: 2], 3>) -> !R {
  %0 = psk_core.cross_entropy %l, %t [b] : !R
  func.return %0 : !R
}
func.func @gather(%table: !psk_core.tensor<[v: 5, b: 3]>, %ids: !psk_core.index<[a: 2], 5>) -> !R {
  %0 = psk_core.gather %table, %ids : !M
  %1 = psk_core.sum %0 [a, b] : !R
  func.return %1 : !R
}
func.func @broadcast_sum_to(%x: !V, %t: !M) -> !R {
  %0 = psk_core.broadcast_like %x, %t : !M
  %1 = psk_core.sum_to %0, %x : !V
  %2 = psk_core.sum %1 [b] : !R
  func.return %2 : !R
}
func.func @split_merge(%x: !psk_core.tensor<[e: 6]>) -> !R {
  %0 = psk_core.split %x [e -> h, d] : !psk_core.tensor<[h: 2, d: 3]>
  %1 = psk_core.merge %0 [h, d -> e] : !psk_core.tensor<[e: 6]>
  %2 = psk_core.sum %1 [e] : !R
  func.return %2 : !R
}
func.func @trees(%p: !psk_core.record<w: !V, s: !R>) -> !R {
  %w = psk_core.field %p["w"] : !V
  %s = psk_core.field %p["s"] : !R
  %t = psk_core.tuple %w, %s : !psk_core.tuple<!V, !R>
  %0 = psk_core.proj %t[0] : !V
  %z = psk_core.zeros_like %0 : !V
  %q = psk_core.set_field %p["w"], %z : !psk_core.record<w: !V, s: !R>
  %r = psk_core.record w = %0, s = %s : !psk_core.record<w: !V, s: !R>
  %u = psk_core.add %q, %r : !psk_core.record<w: !V, s: !R>
  %1 = psk_core.field %u["w"] : !V
  %2 = psk_core.sum %1 [b] : !R
  func.return %2 : !R
}
func.func @constants(%x: !V) -> !R {
  %k = psk_core.constant 2.0 : !R
  %n = psk_core.size N : !R
  %0 = psk_core.mul %x, %k : !V
  %1 = psk_core.div %0, %n : !V
  %2 = psk_core.sum %1 [b] : !R
  func.return %2 : !R
}
func.func @call(%x: !V) -> !R {
  %0 = func.call @unary(%x) : (!V) -> !R
  func.return %0 : !R
}

func.func @gradients(%x: !M, %y: !V, %m: !psk_core.index<[b: 3], 2>, %r: !R, %w: !psk_core.tensor<[b: 3, c: 4]>,
                     %k: !psk_core.tensor<[t: 4, b: 3]>, %c: !M, %t: !psk_core.index<[a: 2], 3>,
                     %table: !psk_core.tensor<[v: 5, b: 3]>, %ids: !psk_core.index<[a: 2], 5>,
                     %e: !psk_core.tensor<[e: 6]>, %p: !psk_core.record<w: !V, s: !R>) {
  %0 = psk_core.grad @add(%x, %y) wrt [0, 1] : !psk_core.tuple<!M, !V>
  %1 = psk_core.grad @sub(%x, %y) wrt [0, 1] : !psk_core.tuple<!M, !V>
  %2 = psk_core.grad @mul(%x, %y) wrt [0, 1] : !psk_core.tuple<!M, !V>
  %3 = psk_core.grad @div(%x, %y) wrt [0, 1] : !psk_core.tuple<!M, !V>
  %4 = psk_core.grad @unary(%y) wrt [0] : !V
  %5 = psk_core.grad @gelu(%y) wrt [0] : !V
  %6 = psk_core.grad @pow(%y) wrt [0] : !V
  %7 = psk_core.grad @where(%m, %x, %r) wrt [1, 2] : !psk_core.tuple<!M, !R>
  %8 = psk_core.grad @mean(%x) wrt [0] : !M
  %9 = psk_core.grad @dot(%x, %w) wrt [0, 1] : !psk_core.tuple<!M, !psk_core.tensor<[b: 3, c: 4]>>
  %10 = psk_core.grad @ein(%x, %k) wrt [0, 1] : !psk_core.tuple<!M, !psk_core.tensor<[t: 4, b: 3]>>
  %11 = psk_core.grad @softmax(%x, %c) wrt [0] : !M
  %12 = psk_core.grad @cross_entropy(%x, %t) wrt [0] : !M
  %13 = psk_core.grad @gather(%table, %ids) wrt [0] : !psk_core.tensor<[v: 5, b: 3]>
  %14 = psk_core.grad @broadcast_sum_to(%y, %x) wrt [0] : !V
  %15 = psk_core.grad @split_merge(%e) wrt [0] : !psk_core.tensor<[e: 6]>
  %16 = psk_core.grad @trees(%p) wrt [0] : !psk_core.record<w: !V, s: !R>
  %17 = psk_core.grad @constants(%y) wrt [0] : !V
  %18 = psk_core.grad @call(%y) wrt [0] : !V
  %19 = psk_core.grad @erf(%y) wrt [0] : !V
  func.return
}

// CHECK-LABEL: func.func @add.bwd(%res: !psk_core.tuple<!M>, %ct: !R) -> (!M, !V)
// CHECK:         %[[CT:.*]] = psk_core.broadcast_like %ct, %{{.*}} : !M
// CHECK-NEXT:    %[[DY:.*]] = psk_core.sum %[[CT]] [a] : !V
// CHECK-NEXT:    func.return %[[CT]], %[[DY]] : !M, !V

// CHECK-LABEL: func.func @sub.bwd
// CHECK:         %[[CT:.*]] = psk_core.broadcast_like %ct, %{{.*}} : !M
// CHECK-NEXT:    %[[N:.*]] = psk_core.neg %[[CT]] : !M
// CHECK-NEXT:    %[[DY:.*]] = psk_core.sum %[[N]] [a] : !V
// CHECK-NEXT:    func.return %[[CT]], %[[DY]] : !M, !V

// CHECK-LABEL: func.func @mul.bwd(%res: !psk_core.tuple<!V, !M>, %ct: !R) -> (!M, !V)
// CHECK-NEXT:    %y = psk_core.proj %res[0] : !V
// CHECK-NEXT:    %x = psk_core.proj %res[1] : !M
// CHECK-NEXT:    %[[CT:.*]] = psk_core.broadcast_like %ct, %x : !M
// CHECK-NEXT:    %[[DX:.*]] = psk_core.mul %[[CT]], %y : !M
// CHECK-NEXT:    %[[P:.*]] = psk_core.mul %[[CT]], %x : !M
// CHECK-NEXT:    %[[DY:.*]] = psk_core.sum %[[P]] [a] : !V
// CHECK-NEXT:    func.return %[[DX]], %[[DY]] : !M, !V

// x / y: ct / y, and −(ct · (x / y)) / y summed over a.
// CHECK-LABEL: func.func @div.bwd
// CHECK-NEXT:    %y = psk_core.proj %res[0] : !V
// CHECK-NEXT:    %[[Q:.*]] = psk_core.proj %res[1] : !M
// CHECK-NEXT:    %[[CT:.*]] = psk_core.broadcast_like %ct, %[[Q]] : !M
// CHECK-NEXT:    %[[DX:.*]] = psk_core.div %[[CT]], %y : !M
// CHECK-NEXT:    %[[A:.*]] = psk_core.mul %[[CT]], %[[Q]] : !M
// CHECK-NEXT:    %[[B:.*]] = psk_core.div %[[A]], %y : !M
// CHECK-NEXT:    %[[C:.*]] = psk_core.neg %[[B]] : !M
// CHECK-NEXT:    %[[DY:.*]] = psk_core.sum %[[C]] [a] : !V
// CHECK-NEXT:    func.return %[[DX]], %[[DY]] : !M, !V

// tanh: 1 − y²; sqrt: 0.5 / y; log: 1 / x; exp: y; neg: −1.
// CHECK-LABEL: func.func @unary.bwd
// CHECK-NEXT:    %[[TANH:.*]] = psk_core.proj %res[0] : !V
// CHECK-NEXT:    %[[SQRT:.*]] = psk_core.proj %res[1] : !V
// CHECK-NEXT:    %[[EXP:.*]] = psk_core.proj %res[2] : !V
// CHECK-NEXT:    %[[CT:.*]] = psk_core.broadcast_like %ct, %[[TANH]] : !V
// CHECK-NEXT:    %[[YY:.*]] = psk_core.mul %[[TANH]], %[[TANH]] : !V
// CHECK-NEXT:    %[[ONE:.*]] = psk_core.constant 1.0 : !R
// CHECK-NEXT:    %[[D:.*]] = psk_core.sub %[[ONE]], %[[YY]] : !V
// CHECK-NEXT:    %[[C1:.*]] = psk_core.mul %[[CT]], %[[D]] : !V
// CHECK-NEXT:    %[[HALF:.*]] = psk_core.constant 0.5 : !R
// CHECK-NEXT:    %[[C2:.*]] = psk_core.mul %[[C1]], %[[HALF]] : !V
// CHECK-NEXT:    %[[C3:.*]] = psk_core.div %[[C2]], %[[SQRT]] : !V
// CHECK-NEXT:    %[[C4:.*]] = psk_core.div %[[C3]], %[[EXP]] : !V
// CHECK-NEXT:    %[[C5:.*]] = psk_core.mul %[[C4]], %[[EXP]] : !V
// CHECK-NEXT:    %[[C6:.*]] = psk_core.neg %[[C5]] : !V
// CHECK-NEXT:    func.return %[[C6]] : !V

// gelu'(x) = ½·(1 + erf(x/√2)) + x·exp(−x²/2)/√(2π): through erf, finite at 0; only x is saved.
// CHECK-LABEL: func.func @gelu.bwd(%res: !psk_core.tuple<!V>, %ct: !R) -> !V
// CHECK-NEXT:    %x = psk_core.proj %res[0] : !V
// CHECK-NEXT:    %[[CT:.*]] = psk_core.broadcast_like %ct, %x : !V
// CHECK-NEXT:    %[[ONE:.*]] = psk_core.constant 1.0 : !R
// CHECK-NEXT:    %[[R2:.*]] = psk_core.constant 0.7071067811865475 : !R
// CHECK-NEXT:    %[[A:.*]] = psk_core.mul %x, %[[R2]] : !V
// CHECK-NEXT:    %[[ERF:.*]] = psk_core.erf %[[A]] : !V
// CHECK-NEXT:    %[[B:.*]] = psk_core.add %[[ONE]], %[[ERF]] : !V
// CHECK-NEXT:    %[[HALF:.*]] = psk_core.constant 0.5 : !R
// CHECK-NEXT:    %[[CDF:.*]] = psk_core.mul %[[HALF]], %[[B]] : !V
// CHECK:         %[[E:.*]] = psk_core.exp %{{.*}} : !V
// CHECK-NEXT:    %[[S:.*]] = psk_core.constant 2.5066282746310002 : !R
// CHECK-NEXT:    %[[PHI:.*]] = psk_core.div %[[E]], %[[S]] : !V
// CHECK-NEXT:    %[[XPHI:.*]] = psk_core.mul %x, %[[PHI]] : !V
// CHECK-NEXT:    %[[D:.*]] = psk_core.add %[[CDF]], %[[XPHI]] : !V
// CHECK-NEXT:    psk_core.mul %[[CT]], %[[D]] : !V


// CHECK-LABEL: func.func @pow.bwd
// CHECK:         %[[P:.*]] = psk_core.pow %x, 2 : !V
// CHECK-NEXT:    %[[N:.*]] = psk_core.constant 3.0 : !R
// CHECK-NEXT:    psk_core.mul %[[N]], %[[P]] : !V

// The branch not taken gets an exact zero; the real branch is summed.
// CHECK-LABEL: func.func @where.bwd
// CHECK:         %m = psk_core.proj %res[0] : !psk_core.index<[b: 3], 2>
// CHECK:         %[[CT:.*]] = psk_core.broadcast_like %ct, %{{.*}} : !M
// CHECK-NEXT:    %[[Z:.*]] = psk_core.constant 0.0 : !R
// CHECK-NEXT:    %[[DX:.*]] = psk_core.where %m, %[[CT]], %[[Z]] : !M
// CHECK-NEXT:    %[[NOT:.*]] = psk_core.where %m, %[[Z]], %[[CT]] : !M
// CHECK-NEXT:    %[[DR:.*]] = psk_core.sum %[[NOT]] [a, b] : !R
// CHECK-NEXT:    func.return %[[DX]], %[[DR]] : !M, !R

// CHECK-LABEL: func.func @mean.bwd
// CHECK:         %[[N:.*]] = psk_core.constant 2.0 : !R
// CHECK-NEXT:    %[[B:.*]] = psk_core.broadcast_like %{{.*}}, %x : !M
// CHECK-NEXT:    psk_core.div %[[B]], %[[N]] : !M

// ct · wᵀ and xᵀ · ct, as eins.
// CHECK-LABEL: func.func @dot.bwd
// CHECK:         %[[CT:.*]] = psk_core.broadcast_like %ct, %{{.*}} : !psk_core.tensor<[a: 2, c: 4]>
// CHECK-NEXT:    %[[DX:.*]] = psk_core.ein %[[CT]][a, c], %w[b, c] : !M
// CHECK-NEXT:    %[[DW:.*]] = psk_core.ein %x[a, b], %[[CT]][a, c] : !psk_core.tensor<[b: 3, c: 4]>
// CHECK-NEXT:    func.return %[[DX]], %[[DW]]

// The labels renamed so that each output reads as its operand's axes.
// CHECK-LABEL: func.func @ein.bwd
// CHECK:         %[[CT:.*]] = psk_core.broadcast_like %ct, %{{.*}} : !psk_core.tensor<[s: 2, t: 4]>
// CHECK-NEXT:    %[[DQ:.*]] = psk_core.ein %[[CT]][a, t], %k[t, b] : !M
// CHECK-NEXT:    %[[DK:.*]] = psk_core.ein %[[CT]][s, t], %q[s, b] : !psk_core.tensor<[t: 4, b: 3]>
// CHECK-NEXT:    func.return %[[DQ]], %[[DK]]

// y · (ct − Σ_b ct · y).
// CHECK-LABEL: func.func @softmax.bwd
// CHECK-NEXT:    %c = psk_core.proj %res[0] : !M
// CHECK-NEXT:    %[[Y:.*]] = psk_core.proj %res[1] : !M
// CHECK:         %[[G:.*]] = psk_core.mul %{{.*}}, %c : !M
// CHECK-NEXT:    %[[GY:.*]] = psk_core.mul %[[G]], %[[Y]] : !M
// CHECK-NEXT:    %[[S:.*]] = psk_core.sum %[[GY]] [b] : !psk_core.tensor<[a: 2]>
// CHECK-NEXT:    %[[D:.*]] = psk_core.sub %[[G]], %[[S]] : !M
// CHECK-NEXT:    psk_core.mul %[[Y]], %[[D]] : !M

// (softmax(l) − onehot(t)) · ct / N: the one-hot rows of the identity L + Lᵀ − 1.
// CHECK-LABEL: func.func @cross_entropy.bwd
// CHECK:         %[[MASK:.*]] = psk_core.causal_mask : !psk_core.index<[r: 3, c: 3], 2>
// CHECK:         %[[L:.*]] = psk_core.where %[[MASK]], %{{.*}}, %{{.*}} : !psk_core.tensor<[r: 3, c: 3]>
// CHECK-NEXT:    %[[LT:.*]] = psk_core.ein %[[L]][c, r] : !psk_core.tensor<[r: 3, c: 3]>
// CHECK-NEXT:    %[[SUM:.*]] = psk_core.add %[[L]], %[[LT]]
// CHECK-NEXT:    %[[I:.*]] = psk_core.sub %[[SUM]], %{{.*}} : !psk_core.tensor<[r: 3, c: 3]>
// CHECK-NEXT:    %[[HOT:.*]] = psk_core.gather %[[I]], %t : !psk_core.tensor<[a: 2, c: 3]>
// CHECK-NEXT:    %[[HOTL:.*]] = psk_core.ein %[[HOT]][a, b] : !M
// CHECK-NEXT:    %[[P:.*]] = psk_core.softmax %l [b] : !M
// CHECK-NEXT:    %[[D:.*]] = psk_core.sub %[[P]], %[[HOTL]] : !M
// CHECK-NEXT:    %[[N:.*]] = psk_core.constant 2.0 : !R
// CHECK-NEXT:    %[[S:.*]] = psk_core.div %ct, %[[N]] : !R
// CHECK-NEXT:    psk_core.mul %[[D]], %[[S]] : !M

// The scatter-add as a contraction of the one-hot rows with the cotangent.
// CHECK-LABEL: func.func @gather.bwd
// CHECK:         %[[HOT:.*]] = psk_core.gather %{{.*}}, %ids : !psk_core.tensor<[a: 2, c: 5]>
// CHECK-NEXT:    %[[D:.*]] = psk_core.ein %[[HOT]][a, v], %{{.*}}[a, b] : !psk_core.tensor<[v: 5, b: 3]>
// CHECK-NEXT:    func.return %[[D]]

// CHECK-LABEL: func.func @broadcast_sum_to.bwd
// CHECK:         %[[B:.*]] = psk_core.broadcast_like %{{.*}}, %{{.*}} : !M
// CHECK-NEXT:    %[[S:.*]] = psk_core.sum %[[B]] [a] : !V
// CHECK-NEXT:    func.return %[[S]] : !V

// CHECK-LABEL: func.func @split_merge.bwd
// CHECK:         %[[S:.*]] = psk_core.split %{{.*}} [e -> h, d] : !psk_core.tensor<[h: 2, d: 3]>
// CHECK-NEXT:    %[[M:.*]] = psk_core.merge %[[S]] [h, d -> e] : !psk_core.tensor<[e: 6]>
// CHECK-NEXT:    func.return %[[M]]

// Field reads, tuples, set_field and record: one record of the field cotangents.
// CHECK-LABEL: func.func @trees.bwd
// CHECK:         %[[W:.*]] = psk_core.broadcast_like %ct, %{{.*}} : !V
// CHECK-NEXT:    %[[Z:.*]] = psk_core.zeros_like %ct : !R
// CHECK-NEXT:    %[[U:.*]] = psk_core.record w = %[[W]], s = %[[Z]]
// CHECK:         psk_core.record w = %{{.*}}, s = %{{.*}} : !psk_core.record<w: !V, s: !R>

// Constants and sizes are recomputed, not saved.
// CHECK-LABEL: func.func @constants.bwd(%res: !psk_core.tuple<!V>, %ct: !R) -> !V
// CHECK-DAG:     %k = psk_core.constant 2.0 : !R
// CHECK-DAG:     %n = psk_core.size N : !R
// CHECK:         %[[D:.*]] = psk_core.div %{{.*}}, %n : !V
// CHECK-NEXT:    psk_core.mul %[[D]], %k : !V

// A call: the callee's .bwd, its residuals one element of the caller's.
// CHECK-LABEL: func.func @call.bwd(%res: !psk_core.tuple<!psk_core.tuple<!V, !V, !V>>, %ct: !R) -> !V
// CHECK-NEXT:    %[[R:.*]] = psk_core.proj %res[0] : !psk_core.tuple<!V, !V, !V>
// CHECK-NEXT:    %[[D:.*]] = func.call @unary.bwd(%[[R]], %ct) : (!psk_core.tuple<!V, !V, !V>, !R) -> !V
// CHECK-NEXT:    func.return %[[D]] : !V

// erf'(x) = (2/√π)·exp(−x²).
// CHECK-LABEL: func.func @erf.bwd(%res: !psk_core.tuple<!V>, %ct: !R) -> !V
// CHECK:         %[[SQ:.*]] = psk_core.mul %x, %x : !V
// CHECK-NEXT:    %[[N:.*]] = psk_core.neg %[[SQ]] : !V
// CHECK-NEXT:    %[[E:.*]] = psk_core.exp %[[N]] : !V
// CHECK-NEXT:    %[[K:.*]] = psk_core.constant 1.1283791670955126 : !R
// CHECK-NEXT:    %[[D:.*]] = psk_core.mul %[[K]], %[[E]] : !V
// CHECK-NEXT:    psk_core.mul %{{.*}}, %[[D]] : !V
