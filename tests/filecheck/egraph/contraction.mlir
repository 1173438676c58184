// RUN: presk-opt %s -p psk-egraph-opt | filecheck %s
// RUN: presk-opt %S/../../../corpus/attention.mlir -p psk-egraph-opt | filecheck %s --check-prefix=ATTENTION

// (Σ aᵢ bᵢ) / s = Σ (aᵢ / s) bᵢ for a real s. Operation counts price every placement of the one
// division alike and the first of the cheapest terms found is kept: here an operand. Choosing the
// smaller operand by its size is the business of a profile-priced extraction (prices.mlir).
!Q = !psk_core.tensor<[b: 2, s: 8, d: 4]>
!K = !psk_core.tensor<[b: 2, t: 8, d: 4]>
!S = !psk_core.tensor<[b: 2, s: 8, t: 8]>
!R = !psk_core.real

// CHECK-LABEL: func.func @scores(%q: !Q, %k: !K, %r: !R) -> !S {
// CHECK-NEXT:    %{{.*}} = psk_core.div %{{q|k}}, %r
// CHECK-NEXT:    %{{.*}} = psk_core.ein
// CHECK-NEXT:    func.return
func.func @scores(%q: !Q, %k: !K, %r: !R) -> !S {
  %0 = psk_core.ein %q[b, s, d], %k[b, t, d] : !S
  %1 = psk_core.div %0, %r : !S
  func.return %1 : !S
}

// Attention in the corpus multiplies its scores by 1/√hd: that becomes a division of the
// queries, [batch, heads, seq, hd], a quarter of the scores' elements at seq = 4·hd.
// ATTENTION:      %[[Q:.*]] = psk_core.ein %{{.*}}[batch, seq, heads, hd] : !Q
// ATTENTION:      %[[D:.*]] = psk_core.div %[[Q]], %root_hd : !Q
// ATTENTION:      psk_core.ein %[[D]][batch, heads, seq, hd], %{{.*}}[batch, heads, seq2, hd] : !S
// ATTENTION-NOT:  psk_core.mul
