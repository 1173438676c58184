"""Independent numpy implementations of every corpus entry, written from the math.

These are the oracles `test_corpus.py` holds the reference interpreter to.
They are deliberately written the way a numpy user would write the models
(matrix products with `@`, transposes, `reshape`, a `-inf` mask, log-sum-exp),
not by transcribing the IR, so that a wrong typing or a wrong primitive in the
corpus or the interpreter shows up as a disagreement.

Values follow the interpreter's conventions: a record is a dict keyed by its
field names, a tuple a tuple, a real a Python float, a tensor an ndarray with
its axes in the order of its type (so `[batch, seq, embed]` is `x[b, s, e]`,
and a weight `[embed_in, embed]` is used as `x @ w`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

_erf = np.vectorize(math.erf, otypes=[np.float64])
"""numpy has no erf; `math.erf` is correctly rounded to within an ulp or so in float64."""

LN_EPS = 1e-5
ADAM_BETA1 = 0.9
ADAM_BETA2 = 0.999
ADAM_EPS = 1e-8
ADAM_WEIGHT_DECAY = 0.01


# -- building blocks -----------------------------------------------------------


def gelu(x: np.ndarray) -> np.ndarray:
    """The exact GELU, x Φ(x), with Φ the standard normal CDF."""
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    shifted = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def layer_norm(p: dict, x: np.ndarray, eps: float = LN_EPS) -> np.ndarray:
    """Normalize over the last axis: (x − μ)/√(σ² + ε)·g + b, σ² the biased variance."""
    mu = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * p["g"] + p["b"]


def causal_self_attention(p: dict, x: np.ndarray, n_heads: int) -> np.ndarray:
    """softmax(Q Kᵀ/√d_h + causal mask) V per head, heads concatenated, then W_o."""
    batch, seq, d_model = x.shape
    d_head = d_model // n_heads

    def heads(w: np.ndarray) -> np.ndarray:  # [batch, seq, d] -> [batch, heads, seq, d_head]
        return (x @ w).reshape(batch, seq, n_heads, d_head).transpose(0, 2, 1, 3)

    q, k, v = heads(p["wq"]), heads(p["wk"]), heads(p["wv"])
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d_head)
    future = np.triu(np.ones((seq, seq), dtype=bool), k=1)  # key position after the query
    scores = np.where(future, -np.inf, scores)
    out = softmax(scores, axis=-1) @ v  # [batch, heads, seq, d_head]
    out = out.transpose(0, 2, 1, 3).reshape(batch, seq, d_model)
    return out @ p["wo"]


def cross_entropy(logits: np.ndarray, targets: np.ndarray) -> float:
    """Mean over positions of −log softmax(logits)[target], classes on the last axis."""
    m = logits.max(axis=-1, keepdims=True)
    log_z = np.log(np.exp(logits - m).sum(axis=-1)) + m[..., 0]
    picked = np.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    return float(np.mean(log_z - picked))


def layer(tree: Any, index: int) -> Any:
    """Slice layer `index` out of a stacked parameter tree (leading axis of every leaf)."""
    if isinstance(tree, dict):
        return {k: layer(v, index) for k, v in tree.items()}
    return tree[index]


def n_layers(tree: Any) -> int:
    while isinstance(tree, dict):
        tree = next(iter(tree.values()))
    return tree.shape[0]


def tree_map(fn: Callable[..., np.ndarray], *trees: Any) -> Any:
    if isinstance(trees[0], dict):
        return {k: tree_map(fn, *(t[k] for t in trees)) for k in trees[0]}
    return fn(*trees)


# -- corpus/mlp.mlir -----------------------------------------------------------


def linear(p: dict, x: np.ndarray) -> np.ndarray:
    return x @ p["w"] + p["b"]


def mlp_apply(params: dict, x: np.ndarray) -> np.ndarray:
    return linear(params["fc2"], gelu(linear(params["fc1"], x)))


def mse(params: dict, x: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean((mlp_apply(params, x) - y) ** 2))


# -- corpus/nlp/gpt.mlir ---------------------------------------------------------


def gpt_mlp(p: dict, x: np.ndarray) -> np.ndarray:
    return linear(p["proj"], gelu(linear(p["fc"], x)))


def gpt_block(p: dict, h: np.ndarray, n_heads: int) -> np.ndarray:
    h = h + causal_self_attention(p["attn"], layer_norm(p["ln1"], h), n_heads)
    return h + gpt_mlp(p["mlp"], layer_norm(p["ln2"], h))


def gpt_apply(params: dict, ids: np.ndarray, n_heads: int) -> np.ndarray:
    seq = ids.shape[1]
    h = params["tok_emb"][ids] + params["pos_emb"][:seq]
    blocks = params["blocks"]
    for i in range(n_layers(blocks)):
        h = gpt_block(layer(blocks, i), h, n_heads)
    return layer_norm(params["ln_f"], h) @ params["head"]


def gpt_loss(params: dict, ids: np.ndarray, targets: np.ndarray, n_heads: int) -> float:
    return cross_entropy(gpt_apply(params, ids, n_heads), targets)


# -- corpus/minigpt.mlir ---------------------------------------------------------


def mini_mlp(p: dict, x: np.ndarray) -> np.ndarray:
    return gelu(x @ p["w1"]) @ p["w2"]


def mini_block(p: dict, h: np.ndarray, n_heads: int) -> np.ndarray:
    h = h + causal_self_attention(p["attn"], layer_norm(p["ln1"], h), n_heads)
    return h + mini_mlp(p["mlp"], layer_norm(p["ln2"], h))


def minigpt_apply(params: dict, ids: np.ndarray, n_heads: int) -> np.ndarray:
    seq = ids.shape[1]
    h = params["tok_emb"][ids] + params["pos_emb"][:seq]
    blocks = params["blocks"]
    for i in range(n_layers(blocks)):
        h = mini_block(layer(blocks, i), h, n_heads)
    # The output projection is the token embedding, transposed (tied weights).
    return layer_norm(params["ln_f"], h) @ params["tok_emb"].T


def minigpt_loss(params: dict, ids: np.ndarray, targets: np.ndarray, n_heads: int) -> float:
    return cross_entropy(minigpt_apply(params, ids, n_heads), targets)


# -- AdamW (both GPTs) -----------------------------------------------------------


def adamw_step(
    params: dict, grads: dict, m: dict, v: dict, b1t: float, b2t: float, lr: float
) -> tuple[dict, dict, dict]:
    """One AdamW step (Loshchilov & Hutter, decoupled weight decay), per leaf.

    `b1t` and `b2t` are β1^t and β2^t for the step number t.
    """

    def new_m(g: np.ndarray, m_: np.ndarray) -> np.ndarray:
        return ADAM_BETA1 * m_ + (1 - ADAM_BETA1) * g

    def new_v(g: np.ndarray, v_: np.ndarray) -> np.ndarray:
        return ADAM_BETA2 * v_ + (1 - ADAM_BETA2) * g * g

    m2 = tree_map(new_m, grads, m)
    v2 = tree_map(new_v, grads, v)

    def new_p(p: np.ndarray, m_: np.ndarray, v_: np.ndarray) -> np.ndarray:
        m_hat = m_ / (1 - b1t)
        v_hat = v_ / (1 - b2t)
        return p - lr * (m_hat / (np.sqrt(v_hat) + ADAM_EPS) + ADAM_WEIGHT_DECAY * p)

    return tree_map(new_p, params, m2, v2), m2, v2
