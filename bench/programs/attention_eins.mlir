// The course GPT's attention eins (corpus/nlp/gpt.mlir, SelfAttention.apply)
// on their own, for the layout benchmark (bench/bench_attention.py): the
// scores q kᵀ (an NT ein, the one a pack applies to) and the values p v (NN).
// Sizes: B and T are dims; H = 6 heads and hd = 64 as in the course GPT.
!Q = !psk_core.tensor<[batch: B, heads: 6, seq: T, hd: 64]>
!K = !psk_core.tensor<[batch: B, heads: 6, seq2: T, hd: 64]>
!S = !psk_core.tensor<[batch: B, heads: 6, seq: T, seq2: T]>
!P = !psk_core.tensor<[batch: B, heads: 6, seq: T, seq2: T]>
!V = !psk_core.tensor<[batch: B, heads: 6, seq2: T, hd: 64]>
!O = !psk_core.tensor<[batch: B, heads: 6, seq: T, hd: 64]>

// q kᵀ: scores[b, h, s, t] = Σ_d q[b, h, s, d] k[b, h, t, d].
func.func @scores(%q: !Q, %k: !K) -> !S {
  %0 = psk_core.ein %q[batch, heads, seq, hd], %k[batch, heads, seq2, hd] : !S
  func.return %0 : !S
}

// p v: values[b, h, s, d] = Σ_t p[b, h, s, t] v[b, h, t, d].
func.func @values(%p: !P, %v: !V) -> !O {
  %0 = psk_core.ein %p[batch, heads, seq, seq2], %v[batch, heads, seq2, hd] : !O
  func.return %0 : !O
}
