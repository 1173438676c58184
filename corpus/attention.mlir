// Causal multi-head self-attention, H heads of HD = D / H:
//   q, k, v = x.wq, x.wk, x.wv, each split into heads and moved before seq;
//   scores = q.k^T / sqrt(HD) over hd; masked softmax over seq2; values;
//   heads merged back into embed; output projection.
// Both two-operand eins are contraction nests: outer axes (batch, heads),
// then I (seq), then J (seq2, resp. hd), summed over one axis K (hd, resp. seq2).
// The scale 1/sqrt(HD) is computed from the bound size, so it follows --const D=... .

!X    = !psk_core.tensor<[batch: B, seq: T, embed: D]>
!W    = !psk_core.tensor<[embed_in: D, embed: D]>
!Attn = !psk_core.record<wq: !W, wk: !W, wv: !W, wo: !W>
!Xh   = !psk_core.tensor<[batch: B, seq: T, heads: H, hd: HD]>
!Q    = !psk_core.tensor<[batch: B, heads: H, seq: T, hd: HD]>
!K    = !psk_core.tensor<[batch: B, heads: H, seq2: T, hd: HD]>
!S    = !psk_core.tensor<[batch: B, heads: H, seq: T, seq2: T]>
!Mask = !psk_core.index<[seq: T, seq2: T], 2>
!R    = !psk_core.real

psk_core.const_dim @D = 16
psk_core.const_dim @H = 2
psk_core.const_dim @HD = "D / H"

func.func @SelfAttention.apply(%p: !Attn, %x: !X) -> !X {
  %0 = psk_core.field %p["wq"] : !W
  %1 = psk_core.field %p["wk"] : !W
  %2 = psk_core.field %p["wv"] : !W
  %3 = psk_core.field %p["wo"] : !W
  // Queries on (seq), keys and values relabelled to seq2.
  %4 = psk_core.dot %x, %0 : !X
  %5 = psk_core.split %4 [embed -> heads, hd] : !Xh
  %6 = psk_core.ein %5[batch, seq, heads, hd] : !Q
  %7 = psk_core.dot %x, %1 : !X
  %8 = psk_core.split %7 [embed -> heads, hd] : !Xh
  %9 = psk_core.ein %8[batch, seq2, heads, hd] : !K
  %10 = psk_core.dot %x, %2 : !X
  %11 = psk_core.split %10 [embed -> heads, hd] : !Xh
  %12 = psk_core.ein %11[batch, seq2, heads, hd] : !K
  // Scores, scaled and causally masked.
  %13 = psk_core.ein %6[batch, heads, seq, hd], %9[batch, heads, seq2, hd] : !S
  %hd = psk_core.size HD : !R
  %root_hd = psk_core.sqrt %hd : !R
  %one = psk_core.constant 1.0 : !R
  %14 = psk_core.div %one, %root_hd : !R
  %15 = psk_core.mul %13, %14 : !S
  %16 = psk_core.causal_mask : !Mask
  %17 = psk_core.softmax %15 [seq2] mask %16 : !S
  // Weighted values, heads merged back into embed, output projection.
  %18 = psk_core.ein %17[batch, heads, seq, seq2], %12[batch, heads, seq2, hd] : !Q
  %19 = psk_core.ein %18[batch, heads, seq, hd] : !Xh
  %20 = psk_core.merge %19 [heads, hd -> embed] : !X
  %21 = psk_core.dot %20, %3 : !X
  func.return %21 : !X
}
