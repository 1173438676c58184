// MiniGPT: a tiny GPT for quick tests. Like corpus/nlp/gpt.mlir but with its
// output projection tied to the token embedding (logits by ein against
// tok_emb, which the gather reads too) and a bias-free MLP.
//
//   MiniGPT.apply(params, ids) -> logits   loss(params, ids, targets) -> real
//   adamw.step(params, grads, m, v, b1t, b2t, lr) -> (params', m', v')

!H      = !psk_core.tensor<[batch: B, seq: T, embed: D]>
!Stat   = !psk_core.tensor<[batch: B, seq: T]>
!Hh     = !psk_core.tensor<[batch: B, seq: T, heads: H, hd: HD]>
!Q      = !psk_core.tensor<[batch: B, heads: H, seq: T, hd: HD]>
!K      = !psk_core.tensor<[batch: B, heads: H, seq2: T, hd: HD]>
!S      = !psk_core.tensor<[batch: B, heads: H, seq: T, seq2: T]>
!Hid    = !psk_core.tensor<[batch: B, seq: T, hidden: F]>
!PosE   = !psk_core.tensor<[seq: T, embed: D]>
!Logits = !psk_core.tensor<[batch: B, seq: T, vocab: V]>
!Ids    = !psk_core.index<[batch: B, seq: T], V>
!Pos    = !psk_core.index<[seq: T], C>
!Mask   = !psk_core.index<[seq: T, seq2: T], 2>
!R      = !psk_core.real

!E      = !psk_core.tensor<[embed: D]>
!LN     = !psk_core.record<g: !E, b: !E>
!W      = !psk_core.tensor<[embed_in: D, embed: D]>
!Attn   = !psk_core.record<wq: !W, wk: !W, wv: !W, wo: !W>
!W1     = !psk_core.tensor<[embed: D, hidden: F]>
!W2     = !psk_core.tensor<[hidden: F, embed: D]>
!MLP    = !psk_core.record<w1: !W1, w2: !W2>
!Block  = !psk_core.record<ln1: !LN, attn: !Attn, ln2: !LN, mlp: !MLP>

!LE     = !psk_core.tensor<[layer: L, embed: D]>
!LW     = !psk_core.tensor<[layer: L, embed_in: D, embed: D]>
!LLN    = !psk_core.record<g: !LE, b: !LE>
!LAttn  = !psk_core.record<wq: !LW, wk: !LW, wv: !LW, wo: !LW>
!LMLP   = !psk_core.record<w1: !psk_core.tensor<[layer: L, embed: D, hidden: F]>, w2: !psk_core.tensor<[layer: L, hidden: F, embed: D]>>
!Blocks = !psk_core.record<ln1: !LLN, attn: !LAttn, ln2: !LLN, mlp: !LMLP>

!Tok    = !psk_core.tensor<[vocab: V, embed: D]>
!PosT   = !psk_core.tensor<[ctx: C, embed: D]>
!Mini   = !psk_core.record<tok_emb: !Tok, pos_emb: !PosT, blocks: !Blocks, ln_f: !LN>
!Adam   = !psk_core.tuple<!Mini, !Mini, !Mini>

psk_core.const_dim @V = 16
psk_core.const_dim @D = 16
psk_core.const_dim @H = 2
psk_core.const_dim @L = 2
psk_core.const_dim @C = 16
psk_core.const_dim @F = "4 * D"
psk_core.const_dim @HD = "D / H"

func.func @MiniGPT.apply(%params: !Mini, %ids: !Ids) -> !Logits {
  %0 = psk_core.field %params["tok_emb"] : !Tok
  %1 = psk_core.field %params["pos_emb"] : !PosT
  %2 = psk_core.field %params["blocks"] : !Blocks
  %3 = psk_core.field %params["ln_f"] : !LN
  %4 = psk_core.gather %0, %ids : !H
  %5 = psk_core.arange : !Pos
  %6 = psk_core.gather %1, %5 : !PosE
  %7 = psk_core.add %4, %6 : !H
  %8 = psk_core.fold @Block.apply(%2, %7) : !H
  %9 = func.call @LayerNorm.apply(%3, %8) : (!LN, !H) -> !H
  // Tied output projection: logits[b, s, v] = sum over embed of h[b, s, e] tok_emb[v, e].
  %10 = psk_core.ein %9[batch, seq, embed], %0[vocab, embed] : !Logits
  func.return %10 : !Logits
}

func.func @loss(%params: !Mini, %ids: !Ids, %targets: !Ids) -> !R {
  %0 = func.call @MiniGPT.apply(%params, %ids) : (!Mini, !Ids) -> !Logits
  %1 = psk_core.cross_entropy %0, %targets [vocab] : !R
  func.return %1 : !R
}

func.func @Block.apply(%p: !Block, %h: !H) -> !H {
  %0 = psk_core.field %p["ln1"] : !LN
  %1 = psk_core.field %p["attn"] : !Attn
  %2 = psk_core.field %p["ln2"] : !LN
  %3 = psk_core.field %p["mlp"] : !MLP
  %4 = func.call @LayerNorm.apply(%0, %h) : (!LN, !H) -> !H
  %5 = func.call @SelfAttention.apply(%1, %4) : (!Attn, !H) -> !H
  %6 = psk_core.add %h, %5 : !H
  %7 = func.call @LayerNorm.apply(%2, %6) : (!LN, !H) -> !H
  %8 = func.call @MLP.apply(%3, %7) : (!MLP, !H) -> !H
  %9 = psk_core.add %6, %8 : !H
  func.return %9 : !H
}

func.func @LayerNorm.apply(%p: !LN, %x: !H) -> !H {
  %0 = psk_core.constant 1.0e-05 : !R
  %1 = psk_core.mean %x [embed] : !Stat
  %2 = psk_core.sub %x, %1 : !H
  %3 = psk_core.pow %2, 2 : !H
  %4 = psk_core.mean %3 [embed] : !Stat
  %5 = psk_core.add %4, %0 : !Stat
  %6 = psk_core.sqrt %5 : !Stat
  %7 = psk_core.div %2, %6 : !H
  %8 = psk_core.field %p["g"] : !E
  %9 = psk_core.field %p["b"] : !E
  %10 = psk_core.mul %7, %8 : !H
  %11 = psk_core.add %10, %9 : !H
  func.return %11 : !H
}

// The scale 1/sqrt(HD) is computed from the bound size, so it follows --const D=... .
func.func @SelfAttention.apply(%p: !Attn, %x: !H) -> !H {
  %0 = psk_core.field %p["wq"] : !W
  %1 = psk_core.field %p["wk"] : !W
  %2 = psk_core.field %p["wv"] : !W
  %3 = psk_core.field %p["wo"] : !W
  %4 = psk_core.dot %x, %0 : !H
  %5 = psk_core.split %4 [embed -> heads, hd] : !Hh
  %6 = psk_core.ein %5[batch, seq, heads, hd] : !Q
  %7 = psk_core.dot %x, %1 : !H
  %8 = psk_core.split %7 [embed -> heads, hd] : !Hh
  %9 = psk_core.ein %8[batch, seq2, heads, hd] : !K
  %10 = psk_core.dot %x, %2 : !H
  %11 = psk_core.split %10 [embed -> heads, hd] : !Hh
  %12 = psk_core.ein %11[batch, seq2, heads, hd] : !K
  %13 = psk_core.ein %6[batch, heads, seq, hd], %9[batch, heads, seq2, hd] : !S
  %hd = psk_core.size HD : !R
  %root_hd = psk_core.sqrt %hd : !R
  %one = psk_core.constant 1.0 : !R
  %14 = psk_core.div %one, %root_hd : !R
  %15 = psk_core.mul %13, %14 : !S
  %16 = psk_core.causal_mask : !Mask
  %17 = psk_core.softmax %15 [seq2] mask %16 : !S
  %18 = psk_core.ein %17[batch, heads, seq, seq2], %12[batch, heads, seq2, hd] : !Q
  %19 = psk_core.ein %18[batch, heads, seq, hd] : !Hh
  %20 = psk_core.merge %19 [heads, hd -> embed] : !H
  %21 = psk_core.dot %20, %3 : !H
  func.return %21 : !H
}

func.func @MLP.apply(%p: !MLP, %x: !H) -> !H {
  %0 = psk_core.field %p["w1"] : !W1
  %1 = psk_core.field %p["w2"] : !W2
  %2 = psk_core.dot %x, %0 : !Hid
  %3 = psk_core.gelu %2 : !Hid
  %4 = psk_core.dot %3, %1 : !H
  func.return %4 : !H
}

// AdamW as in corpus/nlp/gpt.mlir: beta1 = 0.9, beta2 = 0.999, eps = 1e-8,
// weight decay 0.01; b1t = beta1^t and b2t = beta2^t are passed as reals
// because pow's exponent is a constant integer. Generated inputs take v > 0
// and b1t = b2t = 0 (the limit of large t), so sqrt is real.
func.func @adamw.step(%params: !Mini, %grads: !Mini, %m: !Mini, %v: !Mini {psk_core.init = "positive"},
                      %b1t: !R {psk_core.init = "zeros"}, %b2t: !R {psk_core.init = "zeros"}, %lr: !R) -> !Adam {
  %0 = psk_core.constant 1.0 : !R
  %1 = psk_core.constant 0.9 : !R
  %2 = psk_core.constant 0.999 : !R
  %3 = psk_core.constant 1.0e-08 : !R
  %4 = psk_core.constant 0.01 : !R
  %5 = psk_core.sub %0, %1 : !R
  %6 = psk_core.sub %0, %2 : !R
  %7 = psk_core.sub %0, %b1t : !R
  %8 = psk_core.sub %0, %b2t : !R
  %9 = psk_core.mul %m, %1 : !Mini
  %10 = psk_core.mul %grads, %5 : !Mini
  %11 = psk_core.add %9, %10 : !Mini
  %12 = psk_core.mul %v, %2 : !Mini
  %13 = psk_core.pow %grads, 2 : !Mini
  %14 = psk_core.mul %13, %6 : !Mini
  %15 = psk_core.add %12, %14 : !Mini
  %16 = psk_core.div %11, %7 : !Mini
  %17 = psk_core.div %15, %8 : !Mini
  %18 = psk_core.sqrt %17 : !Mini
  %19 = psk_core.add %18, %3 : !Mini
  %20 = psk_core.div %16, %19 : !Mini
  %21 = psk_core.mul %params, %4 : !Mini
  %22 = psk_core.add %20, %21 : !Mini
  %23 = psk_core.mul %22, %lr : !Mini
  %24 = psk_core.sub %params, %23 : !Mini
  %25 = psk_core.tuple %24, %11, %15 : !Adam
  func.return %25 : !Adam
}
