// The course GPT: token and position embeddings, L pre-norm transformer
// blocks, a final layer normalization and a projection to the vocabulary;
// its cross-entropy loss; and one AdamW step over the whole parameter tree.
//
//   GPT.apply(params, ids) -> logits     loss(params, ids, targets) -> real
//   loss_grad(params, ids, targets) -> (loss, d loss / d params)
//   adamw.step(params, grads, m, v, b1t, b2t, lr) -> (params', m', v')
//
// The blocks' parameters are stacked: every leaf of params.blocks has a
// leading [layer: L] axis, and psk_core.fold runs @Block.apply once per layer.

// Activations.
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

// Parameters of one block.
!E      = !psk_core.tensor<[embed: D]>
!LN     = !psk_core.record<g: !E, b: !E>
!W      = !psk_core.tensor<[embed_in: D, embed: D]>
!Attn   = !psk_core.record<wq: !W, wk: !W, wv: !W, wo: !W>
!W1     = !psk_core.tensor<[embed: D, hidden: F]>
!B1     = !psk_core.tensor<[hidden: F]>
!W2     = !psk_core.tensor<[hidden: F, embed: D]>
!Lin1   = !psk_core.record<w: !W1, b: !B1>
!Lin2   = !psk_core.record<w: !W2, b: !E>
!MLP    = !psk_core.record<fc: !Lin1, proj: !Lin2>
!Block  = !psk_core.record<ln1: !LN, attn: !Attn, ln2: !LN, mlp: !MLP>

// The same, stacked over the layers.
!LE     = !psk_core.tensor<[layer: L, embed: D]>
!LW     = !psk_core.tensor<[layer: L, embed_in: D, embed: D]>
!LW1    = !psk_core.tensor<[layer: L, embed: D, hidden: F]>
!LB1    = !psk_core.tensor<[layer: L, hidden: F]>
!LW2    = !psk_core.tensor<[layer: L, hidden: F, embed: D]>
!LLN    = !psk_core.record<g: !LE, b: !LE>
!LAttn  = !psk_core.record<wq: !LW, wk: !LW, wv: !LW, wo: !LW>
!LMLP   = !psk_core.record<fc: !psk_core.record<w: !LW1, b: !LB1>, proj: !psk_core.record<w: !LW2, b: !LE>>
!Blocks = !psk_core.record<ln1: !LLN, attn: !LAttn, ln2: !LLN, mlp: !LMLP>

// The whole model.
!Tok    = !psk_core.tensor<[vocab: V, embed: D]>
!PosT   = !psk_core.tensor<[ctx: C, embed: D]>
!Head   = !psk_core.tensor<[embed: D, vocab: V]>
!GPT    = !psk_core.record<tok_emb: !Tok, pos_emb: !PosT, blocks: !Blocks, ln_f: !LN, head: !Head>
!Adam   = !psk_core.tuple<!GPT, !GPT, !GPT>

psk_core.const_dim @V = 92
psk_core.const_dim @D = 64
psk_core.const_dim @H = 2
psk_core.const_dim @L = 2
psk_core.const_dim @C = 64
psk_core.const_dim @F = "4 * D"
psk_core.const_dim @HD = "D / H"

func.func @GPT.apply(%params: !GPT, %ids: !Ids) -> !Logits {
  %0 = psk_core.field %params["tok_emb"] : !Tok
  %1 = psk_core.field %params["pos_emb"] : !PosT
  %2 = psk_core.field %params["blocks"] : !Blocks
  %3 = psk_core.field %params["ln_f"] : !LN
  %4 = psk_core.field %params["head"] : !Head
  %5 = psk_core.gather %0, %ids : !H
  %6 = psk_core.arange : !Pos
  %7 = psk_core.gather %1, %6 : !PosE
  %8 = psk_core.add %5, %7 : !H
  %9 = psk_core.fold @Block.apply(%2, %8) : !H
  %10 = func.call @LayerNorm.apply(%3, %9) : (!LN, !H) -> !H
  %11 = psk_core.dot %10, %4 : !Logits
  func.return %11 : !Logits
}

// The mean over every position of -log softmax(logits)[target].
func.func @loss(%params: !GPT, %ids: !Ids, %targets: !Ids) -> !R {
  %0 = func.call @GPT.apply(%params, %ids) : (!GPT, !Ids) -> !Logits
  %1 = psk_core.cross_entropy %0, %targets [vocab] : !R
  func.return %1 : !R
}

// The loss and its gradient with respect to every parameter, from GPT-2's
// initialisation when inputs are generated. psk-autodiff expands it only for
// a command on this entry (or on the whole file).
func.func @loss_grad(%params: !GPT {psk_core.init = "gpt2"}, %ids: !Ids, %targets: !Ids) -> !psk_core.tuple<!R, !GPT> {
  %0 = psk_core.value_and_grad @loss(%params, %ids, %targets) wrt [0] : !psk_core.tuple<!R, !GPT>
  func.return %0 : !psk_core.tuple<!R, !GPT>
}

// Pre-norm: h + attn(LN1(h)), then h + MLP(LN2(h)).
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

// (x - mu) / sqrt(var + 1e-5) * g + b over embed; x - mu (%2) has two readers.
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

// Causal self-attention with H heads of HD; the scores are scaled by 1/sqrt(HD),
// computed from the bound size so that it follows --const D=... .
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
  %0 = psk_core.field %p["fc"] : !Lin1
  %1 = psk_core.field %p["proj"] : !Lin2
  %2 = func.call @Linear.apply(%0, %x) : (!Lin1, !H) -> !Hid
  %3 = psk_core.gelu %2 : !Hid
  %4 = func.call @Linear.apply_out(%1, %3) : (!Lin2, !Hid) -> !H
  func.return %4 : !H
}

// x . w + b, embed -> hidden.
func.func @Linear.apply(%p: !Lin1, %x: !H) -> !Hid {
  %0 = psk_core.field %p["w"] : !W1
  %1 = psk_core.field %p["b"] : !B1
  %2 = psk_core.dot %x, %0 : !Hid
  %3 = psk_core.add %2, %1 : !Hid
  func.return %3 : !Hid
}

// x . w + b, hidden -> embed.
func.func @Linear.apply_out(%p: !Lin2, %x: !Hid) -> !H {
  %0 = psk_core.field %p["w"] : !W2
  %1 = psk_core.field %p["b"] : !E
  %2 = psk_core.dot %x, %0 : !H
  %3 = psk_core.add %2, %1 : !H
  func.return %3 : !H
}

// AdamW (decoupled weight decay), beta1 = 0.9, beta2 = 0.999, eps = 1e-8,
// weight decay 0.01, as one elementwise chain over the whole parameter tree:
//   m' = beta1 m + (1 - beta1) g          v' = beta2 v + (1 - beta2) g^2
//   p' = p - lr (m'/(1 - beta1^t) / (sqrt(v'/(1 - beta2^t)) + eps) + wd p)
// The step t enters as b1t = beta1^t and b2t = beta2^t, passed as reals:
// pow takes a constant integer exponent, not a run-time t. Generated inputs
// take v > 0 and b1t = b2t = 0 (the limit of large t), so sqrt is real.
// No intermediate is read outside the chain; m' and v' are also results.
func.func @adamw.step(%params: !GPT, %grads: !GPT, %m: !GPT, %v: !GPT {psk_core.init = "positive"},
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
  %9 = psk_core.mul %m, %1 : !GPT
  %10 = psk_core.mul %grads, %5 : !GPT
  %11 = psk_core.add %9, %10 : !GPT
  %12 = psk_core.mul %v, %2 : !GPT
  %13 = psk_core.pow %grads, 2 : !GPT
  %14 = psk_core.mul %13, %6 : !GPT
  %15 = psk_core.add %12, %14 : !GPT
  %16 = psk_core.div %11, %7 : !GPT
  %17 = psk_core.div %15, %8 : !GPT
  %18 = psk_core.sqrt %17 : !GPT
  %19 = psk_core.add %18, %3 : !GPT
  %20 = psk_core.div %16, %19 : !GPT
  %21 = psk_core.mul %params, %4 : !GPT
  %22 = psk_core.add %20, %21 : !GPT
  %23 = psk_core.mul %22, %lr : !GPT
  %24 = psk_core.sub %params, %23 : !GPT
  %25 = psk_core.tuple %24, %11, %15 : !Adam
  func.return %25 : !Adam
}
