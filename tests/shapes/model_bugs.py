"""`model.py` with bugs planted, for the shape check's tests: one check of
this file reports every bug at its line (`tests/test_shapes.py`). Each bug is
on a line marked `# BUG: kind`, in a function (or a `Literal` mode) of its
own, so that no bug hides another; the rest is `model.py` as it is."""

from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

import treespec
from treespec import Static


@treespec.dataclass
class Config:
    depth: Static[int] = 2
    activation: Static[Literal["gelu", "relu"]] = "gelu"


@treespec.dataclass
class Layer:
    """One block's weights, stacked over the blocks (`L`)."""

    ln_scale: Float[Array, "L d"]
    ln_bias: Float[Array, "L d"]
    wq: Float[Array, "L d h k"]
    wk: Float[Array, "L d h k"]
    wv: Float[Array, "L d h k"]
    wo: Float[Array, "L h k d"]
    w1: Float[Array, "L d f"]
    b1: Float[Array, "L f"]
    w2: Float[Array, "L f d"]
    b2: Float[Array, "L d"]


@treespec.dataclass
class Params:
    embed: Float[Array, "v d"]
    layers: Layer


def layer_norm(
    x: Float[Array, "s d"], scale: Float[Array, "d"], bias: Float[Array, "d"]
) -> Float[Array, "s d"]:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / jnp.sqrt(var + 1e-5) * scale + bias


def layer_norm_keepdims(
    x: Float[Array, "s d"], scale: Float[Array, "d"], bias: Float[Array, "d"]
) -> Float[Array, "s d"]:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    scaled = scale / jnp.sqrt(var + 1e-5)
    return (x - x.mean(-1)) * scaled + bias  # BUG: missing keepdims


def attention(layer: Layer, i: int, x: Float[Array, "s d"]) -> Float[Array, "s d"]:
    q = jnp.einsum("sd,dhk->hsk", x, layer.wq[i])
    k = jnp.einsum("sd,dhk->hsk", x, layer.wk[i])
    v = jnp.einsum("sd,dhk->hsk", x, layer.wv[i])
    scores = q @ jnp.swapaxes(k, -1, -2) / jnp.sqrt(q.shape[-1])
    weights = jax.nn.softmax(scores, axis=-1)
    out = weights @ v
    return jnp.einsum("hsk,hkd->sd", out, layer.wo[i])


def attention_einsum(
    layer: Layer, i: int, x: Float[Array, "s d"]
) -> Float[Array, "s d"]:
    q = jnp.einsum("sd,hdk->hsk", x, layer.wq[i])  # BUG: einsum indices
    k = jnp.einsum("sd,dhk->hsk", x, layer.wk[i])
    return jnp.einsum("hsk,hkd->sd", q * k, layer.wo[i])


def attention_transpose(
    layer: Layer, i: int, x: Float[Array, "s d"]
) -> Float[Array, "s d"]:
    q = jnp.einsum("sd,dhk->hsk", x, layer.wq[i])
    k = jnp.einsum("sd,dhk->hsk", x, layer.wk[i])
    v = jnp.einsum("sd,dhk->hsk", x, layer.wv[i])
    scores = q @ k / jnp.sqrt(q.shape[-1])  # BUG: transpose
    out = jax.nn.softmax(scores, axis=-1) @ v
    return jnp.einsum("hsk,hkd->sd", out, layer.wo[i])


def mlp(
    layer: Layer, i: int, x: Float[Array, "s d"], activation: str
) -> Float[Array, "s d"]:
    act = jax.nn.gelu if activation == "gelu" else jax.nn.relu
    h = act(x @ layer.w1[i] + layer.b1[i])
    return h @ layer.w2[i] + layer.b2[i]


def mlp_bias(layer: Layer, i: int, x: Float[Array, "s d"]) -> Float[Array, "s d"]:
    h = jax.nn.gelu(x @ layer.w1[i] + layer.b2[i])  # BUG: bias width
    return h @ layer.w2[i] + layer.b2[i]


def mlp_contraction(
    layer: Layer, i: int, x: Float[Array, "s d"]
) -> Float[Array, "s d"]:
    h = jax.nn.gelu(x @ layer.w1[i] + layer.b1[i])
    return h @ layer.w1[i] + layer.b2[i]  # BUG: contraction


@treespec.jit
def forward(
    params: Params,
    tokens: Int[Array, "s"],
    cfg: Config,
    mode: Static[Literal["train", "eval"]],
) -> Float[Array, "s v"]:
    x = params.embed[tokens]
    layers = params.layers
    for i in range(cfg.depth):
        h = layer_norm(x, layers.ln_scale[i], layers.ln_bias[i])
        x = x + attention(layers, i, h)
        if mode == "train":
            x = x + x.mean(axis=0)[:, None]  # BUG: one Literal mode
        x = x + mlp(layers, i, x, cfg.activation)
    return x @ params.embed.T


@treespec.jit
def residual(params: Params, tokens: Int[Array, "s"]) -> Float[Array, "s v"]:
    x = params.embed[tokens]
    x = x + jax.nn.gelu(x @ params.layers.w1[0])  # BUG: residual width
    return x @ params.embed.T


@treespec.jit
def normed(layers: Layer, x: Float[Array, "s d"]) -> Float[Array, "s d"]:
    return layer_norm_keepdims(x, layers.ln_scale[0], layers.ln_bias[0])


@treespec.jit
def attend_einsum(layers: Layer, x: Float[Array, "s d"]) -> Float[Array, "s d"]:
    return x + attention_einsum(layers, 0, x)


@treespec.jit
def attend_transpose(layers: Layer, x: Float[Array, "s d"]) -> Float[Array, "s d"]:
    return x + attention_transpose(layers, 0, x)


@treespec.jit
def feed_bias(layers: Layer, x: Float[Array, "s d"]) -> Float[Array, "s d"]:
    return x + mlp_bias(layers, 0, x)


@treespec.jit
def feed_contraction(layers: Layer, x: Float[Array, "s d"]) -> Float[Array, "s d"]:
    return x + mlp_contraction(layers, 0, x)


@treespec.jit
def batched(
    params: Params, tokens: Int[Array, "b s"], cfg: Config
) -> Float[Array, "b s v"]:
    def one(t: Int[Array, "s"]) -> Float[Array, "s v"]:
        return forward(params, t, cfg, "eval")

    return jax.vmap(one, 1)(tokens)  # BUG: vmap axis


@treespec.jit
def widen(x: Float[Array, "s d"]) -> Float[Array, "s 2*d"]:
    return jnp.concatenate([x, x], axis=0)  # BUG: concatenate axis


@treespec.jit
def pool(x: Float[Array, "s d"]) -> Float[Array, "d"]:
    return x.mean(axis=1)  # BUG: reduction axis


@treespec.jit
def smooth(x: Float[Array, "s d"]) -> Float[Array, "s d"]:
    carry, _ = jax.lax.scan(lambda c, _: (c[1:], None), x, length=3)  # BUG: scan carry
    return carry


@treespec.jit
def accuracy(logits: Float[Array, "s v"], labels: Int[Array, "s"]) -> Float[Array, ""]:
    return (logits.argmax(-1) == labels).sum()  # BUG: return dtype
