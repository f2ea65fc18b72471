"""A corpus of models written as the JAX ecosystem writes them, with bugs
planted (issue 40, item 6): `tests/shapes/corpus/`.

Each file holds clean jitted functions and methods and, for each, twins:
copies with one realistic bug, on the line marked `# BUG: kind`, a bug that
passes at the sizes a quick test picks (two sizes equal, a size 1, even
sizes, square images) and fails at others.

- Ground truth, on real arrays: each clean function runs at distinct sizes
  (its jit validates the return annotation); each twin runs at its lucky
  sizes and raises at distinct ones (and what it raises is JAX's shape
  error or treespec's `ValidationError`).
- The checker (`python -m treespec check`), run once over the folder: each
  bug is an error at its line, in its function, and the twin has no other
  error; no clean function has an error or is skipped. Where the checker
  does otherwise today, the case is an `xfail(strict=True)` saying what it
  does.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import importlib.util
import io
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from treespec import ValidationError
from treespec._shapes.command import main

CORPUS = Path(__file__).resolve().parent / "shapes" / "corpus"
FILES = sorted(path.stem for path in CORPUS.glob("*.py"))

# -- the corpus, as its source says -------------------------------------------


@dataclasses.dataclass(frozen=True)
class Jitted:
    """A function or method a treespec transform wraps, by the name the
    checker reports it under."""

    file: str
    function: str
    first: int
    last: int


@dataclasses.dataclass(frozen=True)
class Bug:
    file: str
    function: str
    line: int
    kind: str


def _is_jitted(node: ast.FunctionDef) -> bool:
    return any(ast.unparse(d).startswith("treespec.jit") for d in node.decorator_list)


def _jitted(file: str) -> list[Jitted]:
    tree = ast.parse((CORPUS / f"{file}.py").read_text())
    found = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            candidates = [(f"{node.name}.", item) for item in node.body]
        else:
            candidates = [("", node)]
        for prefix, fun in candidates:
            if isinstance(fun, ast.FunctionDef) and _is_jitted(fun):
                end = fun.end_lineno or fun.lineno
                found.append(Jitted(file, prefix + fun.name, fun.lineno, end))
    return found


def _bugs(file: str, jitted: list[Jitted]) -> list[Bug]:
    bugs = []
    lines = (CORPUS / f"{file}.py").read_text().splitlines()
    for number, text in enumerate(lines, 1):
        match = re.search(r"  # BUG: (.+)$", text)
        if match:
            (owner,) = [j for j in jitted if j.first <= number <= j.last]
            bugs.append(Bug(file, owner.function, number, match.group(1)))
    return bugs


JITTED = [j for file in FILES for j in _jitted(file)]
BUGS = [bug for file in FILES for bug in _bugs(file, _jitted(file))]
TWINS = {(bug.file, bug.function) for bug in BUGS}
CLEAN = [j for j in JITTED if (j.file, j.function) not in TWINS]


def test_the_corpus_holds_about_thirty_clean_functions_and_thirty_bugs() -> None:
    assert len(FILES) == 10
    assert len(CLEAN) >= 30 and len(BUGS) >= 30
    twins = [(bug.file, bug.function) for bug in BUGS]
    assert len(twins) == len(set(twins))  # one bug per twin: none hides another


# -- ground truth on real arrays ----------------------------------------------


@functools.cache
def corpus(file: str) -> ModuleType:
    """A corpus file, imported under a name of its own."""
    name = f"shape_corpus_{file}"
    spec = importlib.util.spec_from_file_location(name, CORPUS / f"{file}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # for the hints of its dataclasses
    spec.loader.exec_module(module)
    return module


Sizes = dict[str, Any]
#: Runs a function of a corpus module (by its name) on real arrays of sizes.
Call = Callable[[ModuleType, str, Sizes], Any]


def _normal(seed: int, *shape: int) -> jax.Array:
    # NumPy's generator: JAX's would compile once per shape.
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), jnp.float32)


def _attr(module: ModuleType, function: str) -> Any:
    return getattr(module, function.split(".")[0])


# equinox_mlp


def _linear(m: ModuleType, f: str, s: Sizes) -> Any:
    layer = _attr(m, f)(s["in_size"], s["out_size"], jax.random.key(0))
    return layer(_normal(1, s["in_size"]))


def _mlp(m: ModuleType, f: str, s: Sizes) -> Any:
    mlp = _attr(m, f)(s["in_size"], s["width"], s["out_size"], key=jax.random.key(0))
    return mlp(_normal(1, s["batch"], s["in_size"]), s.get("normalize", False))


def _self_attention(m: ModuleType, f: str, s: Sizes) -> Any:
    attention = _attr(m, f)(s["d"], s["heads"], key=jax.random.key(0))
    return attention(_normal(1, s["t"], s["d"]), s.get("causal", False))


# gru_scan


def _gru_params(m: ModuleType, s: Sizes) -> Any:
    return m.init_gru(jax.random.key(0), s["in_size"], s["hidden"])


def _gru_cell(m: ModuleType, f: str, s: Sizes) -> Any:
    h = _normal(1, s["batch"], s["hidden"])
    return getattr(m, f)(_gru_params(m, s), h, _normal(2, s["batch"], s["in_size"]))


def _gru(m: ModuleType, f: str, s: Sizes) -> Any:
    xs = _normal(1, s["batch"], s["time"], s["in_size"])
    return getattr(m, f)(_gru_params(m, s), xs, _normal(2, s["batch"], s["hidden"]))


def _encode(m: ModuleType, f: str, s: Sizes) -> Any:
    xs = _normal(1, s["batch"], s["time"], s["in_size"])
    lengths = np.random.default_rng(2).integers(1, s["time"] + 1, s["batch"])
    mask = jnp.asarray(np.arange(s["time"])[None, :] < lengths[:, None])
    return getattr(m, f)(_gru_params(m, s), xs, mask)


# cnn_pool


def _pool(m: ModuleType, f: str, s: Sizes) -> Any:
    return getattr(m, f)(_normal(0, s["c"], s["h"], s["w"]))


def _group_norm(m: ModuleType, f: str, s: Sizes) -> Any:
    x = _normal(0, s["c"], s["h"], s["w"])
    return getattr(m, f)(x, 1 + _normal(1, s["c"]), _normal(2, s["c"]))


def _classify(m: ModuleType, f: str, s: Sizes) -> Any:
    c, c_in = s["c"], s["c_in"]
    net = m.ConvNet(
        stem=_normal(0, c, c_in, 3, 3),
        blocks=_normal(1, s["depth"], c, c, 3, 3) / 3,
        head=_normal(2, c, s["classes"]),
        head_bias=_normal(3, s["classes"]),
    )
    return getattr(m, f)(net, _normal(4, c_in, s["h"], s["w"]), s.get("pool", "max"))


# vae


def _vae_params(s: Sizes) -> dict[str, jax.Array]:
    n, hidden, latent = s["n"], s["hidden"], s["latent"]
    shapes = {
        "enc_w": (n, hidden),
        "enc_b": (hidden,),
        "enc_out_w": (hidden, 2 * latent),
        "enc_out_b": (2 * latent,),
        "dec_w": (latent, hidden),
        "dec_b": (hidden,),
        "dec_out_w": (hidden, n),
        "dec_out_b": (n,),
    }
    return {name: _normal(i, *shape) for i, (name, shape) in enumerate(shapes.items())}


def _vae_encode(m: ModuleType, f: str, s: Sizes) -> Any:
    return getattr(m, f)(_vae_params(s), _normal(10, s["b"], s["n"]))


def _vae_reparameterize(m: ModuleType, f: str, s: Sizes) -> Any:
    mean, logvar = _normal(10, s["b"], s["latent"]), _normal(11, s["b"], s["latent"])
    return getattr(m, f)(jax.random.key(0), mean, logvar)


def _vae_decode(m: ModuleType, f: str, s: Sizes) -> Any:
    return getattr(m, f)(_vae_params(s), _normal(10, s["b"], s["latent"]))


def _vae_elbo(m: ModuleType, f: str, s: Sizes) -> Any:
    x = _normal(10, s["b"], s["n"])
    return getattr(m, f)(_vae_params(s), jax.random.key(0), x, s.get("mc", False))


# gemma_block


def _gemma_attention_weights(m: ModuleType, s: Sizes) -> Any:
    heads, kv, d, h = s["heads"], s["kv_heads"], s["d"], s["head_dim"]
    return m.AttentionWeights(
        q_einsum=_normal(0, heads, d, h),
        kv_einsum=_normal(1, 2, kv, d, h),
        attn_vec_einsum=_normal(2, heads, h, d),
    )


def _gemma_inputs(s: Sizes) -> tuple[jax.Array, jax.Array, jax.Array]:
    t = s["t"]
    mask = jnp.asarray(np.tril(np.ones((t, t), dtype=bool)))
    return _normal(5, t, s["d"]), jnp.arange(t), mask


def _gemma_rms_norm(m: ModuleType, f: str, s: Sizes) -> Any:
    return getattr(m, f)(_normal(0, s["t"], s["d"]), _normal(1, s["d"]))


def _gemma_attention(m: ModuleType, f: str, s: Sizes) -> Any:
    weights = _gemma_attention_weights(m, s)
    modes = {"attn_type": s.get("attn_type", "global")}
    if "window" in s:
        modes["sliding_window"] = s["window"]
    return getattr(m, f)(weights, *_gemma_inputs(s), **modes)


def _gemma_feed_forward(m: ModuleType, f: str, s: Sizes) -> Any:
    d, ffw = s["d"], s["ffw"]
    gating, linear = _normal(0, 2, d, ffw), _normal(1, ffw, d)
    return getattr(m, f)(gating, linear, _normal(2, s["t"], d))


def _gemma_block(m: ModuleType, f: str, s: Sizes) -> Any:
    d, ffw = s["d"], s["ffw"]
    weights = m.BlockWeights(
        pre_attention_norm=_normal(0, d),
        attn=_gemma_attention_weights(m, s),
        pre_ffw_norm=_normal(1, d),
        gating_einsum=_normal(2, 2, d, ffw),
        linear=_normal(3, ffw, d),
    )
    attn_type = s.get("attn_type", "global")
    return getattr(m, f)(weights, *_gemma_inputs(s), attn_type)


# rotary


def _rope(m: ModuleType, f: str, s: Sizes) -> Any:
    x = _normal(0, s["t"], s["n"], s["h"])
    return getattr(m, f)(x, jnp.arange(s["t"]))


def _rotary(m: ModuleType, f: str, s: Sizes) -> Any:
    cos, sin = m.rope_tables(s["l"], s["h"])
    q = _normal(0, s["t"], s["n"], s["h"])
    return getattr(m, f)(q, cos, sin, jnp.arange(s["t"]))


def _timestep(m: ModuleType, f: str, s: Sizes) -> Any:
    t = 1000 * np.random.default_rng(0).random(s["b"], np.float32)
    return getattr(m, f)(t, _normal(1, s["b"], s["d"]))


# vit_patch


def _patch_embed(m: ModuleType, s: Sizes) -> Any:
    p = s["p"]
    return m.PatchEmbed(
        kernel=_normal(0, s["d"], s["c"], p, p), bias=_normal(1, s["d"])
    )


def _patches(m: ModuleType, f: str, s: Sizes) -> Any:
    return getattr(m, f)(_patch_embed(m, s), _normal(2, s["c"], s["h"], s["w"]))


def _vit(m: ModuleType, f: str, s: Sizes) -> Any:
    # The position embeddings of the image size the model was trained at.
    n = 1 + (s["h"] // s["p"]) * (s["w"] // s["p"])
    vit = m.ViTEmbed(
        patch=_patch_embed(m, s),
        cls_token=_normal(3, 1, s["d"]),
        pos_embed=_normal(4, n, s["d"]),
    )
    # The image: of that size, or of another (`image_h`, `image_w`).
    h, w = s.get("image_h") or s["h"], s.get("image_w") or s["w"]
    return getattr(m, f)(vit, _normal(5, s["c"], h, w))


# train_step


def _classifier(m: ModuleType, s: Sizes) -> Any:
    return m.Classifier(
        w1=_normal(0, s["n"], s["hidden"]),
        b1=_normal(1, s["hidden"]),
        w2=_normal(2, s["hidden"], s["classes"]),
        b2=_normal(3, s["classes"]),
    )


def _batch(s: Sizes) -> tuple[jax.Array, jax.Array]:
    labels = np.random.default_rng(5).integers(0, s["classes"], s["b"], np.int32)
    return _normal(4, s["b"], s["n"]), labels


def _loss(m: ModuleType, f: str, s: Sizes) -> Any:
    return getattr(m, f)(_classifier(m, s), *_batch(s))


def _mixup(m: ModuleType, f: str, s: Sizes) -> Any:
    return getattr(m, f)(_classifier(m, s), jax.random.key(6), *_batch(s))


def _train(m: ModuleType, f: str, s: Sizes) -> Any:
    model = _classifier(m, s)
    return getattr(m, f)(model, m.optimizer.init(model), *_batch(s))


# eqx_layers


def _apply_block(m: ModuleType, f: str, s: Sizes) -> Any:
    block = m.MLPBlock(s["d_model"], s["hidden"], key=jax.random.key(0))
    return getattr(m, f)(block, _normal(1, s["batch"], s["d_model"]))


def _rnn(m: ModuleType, f: str, s: Sizes) -> Any:
    rnn = _attr(m, f)(s["in_size"], s["out_size"], s["hidden"], key=jax.random.key(0))
    return rnn(_normal(1, s["seq"], s["in_size"]))


def _conv_block(m: ModuleType, f: str, s: Sizes) -> Any:
    block = _attr(m, f)(s["in_channels"], s["out_channels"], key=jax.random.key(0))
    return block(_normal(1, s["in_channels"], s["h"], s["w"]))


def _transformer(m: ModuleType, f: str, s: Sizes) -> Any:
    block = _attr(m, f)(s["d_model"], s["heads"], s["mlp"], key=jax.random.key(0))
    return block(_normal(1, s["seq"], s["d_model"]), s.get("causal", False))


# nnx_modules


def _nnx_mlp(m: ModuleType, f: str, s: Sizes) -> Any:
    mlp = _attr(m, f)(s["din"], s["dmid"], s["dout"], rngs=nnx.Rngs(0))
    return mlp(_normal(1, s["b"], s["din"]))


def _nnx_cnn(m: ModuleType, f: str, s: Sizes) -> Any:
    model = m.CNN(s["in_features"], s["classes"], rngs=nnx.Rngs(0))
    images = _normal(1, s["b"], s["in_features"], s["height"], s["width"])
    return getattr(m, f)(model, images)


def _nnx_encoder(m: ModuleType, f: str, s: Sizes) -> Any:
    block = _attr(m, f)(s["d_model"], s["heads"], s["d_ff"], rngs=nnx.Rngs(0))
    lengths = np.arange(s["b"]) % s["t"] + 1
    padding = jnp.asarray(np.arange(s["t"])[None, :] < lengths[:, None])
    x = _normal(1, s["b"], s["t"], s["d_model"])
    return block(x, padding, s.get("causal", False))


def _xfail(cases: dict[tuple[str, str], str], file: str, function: str) -> Any:
    reason = cases.get((file, function))
    return [pytest.mark.xfail(strict=True, reason=reason)] if reason else []


@dataclasses.dataclass(frozen=True)
class Case:
    """How to run one function on real arrays: at `distinct` sizes (all
    different, none 1), and for a twin at the `lucky` sizes its bug passes
    at. `mode` names the static values set in the sizes, for the id."""

    file: str
    function: str
    call: Call
    distinct: Sizes
    lucky: Sizes | None = None
    mode: str = ""

    @property
    def id(self) -> str:
        return f"{self.file}:{self.function}" + (f"[{self.mode}]" if self.mode else "")


def _cases() -> list[Case]:
    c = Case
    linear = {"in_size": 3, "out_size": 5}
    mlp = {"batch": 2, "in_size": 3, "width": 5, "out_size": 7}
    attn = {"t": 3, "d": 10, "heads": 2}  # head_dim 5
    gru = {"batch": 2, "time": 3, "in_size": 4, "hidden": 5}
    image = {"c": 3, "h": 6, "w": 10}
    net = {"c": 4, "c_in": 3, "depth": 2, "classes": 5, "h": 6, "w": 10}
    vae = {"b": 2, "n": 3, "hidden": 5, "latent": 4}
    gemma = {"t": 5, "d": 7, "heads": 6, "kv_heads": 2, "head_dim": 4, "ffw": 9}
    rope = {"t": 3, "n": 5, "h": 8, "l": 7}
    vit = {"d": 5, "c": 3, "p": 2, "h": 6, "w": 8}
    train = {"b": 3, "n": 5, "hidden": 7, "classes": 4}
    block = {"batch": 3, "d_model": 5, "hidden": 7}
    rnn = {"seq": 3, "in_size": 4, "out_size": 2, "hidden": 5}
    conv = {"in_channels": 2, "out_channels": 3, "h": 6, "w": 8}
    transformer = {"seq": 3, "d_model": 8, "heads": 2, "mlp": 6}
    nnx_mlp = {"b": 2, "din": 3, "dmid": 5, "dout": 4}
    nnx_cnn = {"b": 2, "in_features": 3, "height": 8, "width": 12, "classes": 5}
    encoder = {"b": 2, "t": 3, "d_model": 8, "heads": 4, "d_ff": 6}
    return [
        # equinox_mlp
        c("equinox_mlp", "Linear.__call__", _linear, linear),
        c("equinox_mlp", "LinearTransposed.__call__", _linear, linear,
          {"in_size": 4, "out_size": 4}),
        c("equinox_mlp", "MLP.__call__", _mlp, mlp),
        c("equinox_mlp", "MLP.__call__", _mlp, {**mlp, "normalize": True},
          mode="normalize"),
        c("equinox_mlp", "MLPBiasWidth.__call__", _mlp, mlp,
          {**mlp, "width": 7}),
        c("equinox_mlp", "MLPNormKeepdims.__call__", _mlp, {**mlp, "normalize": True},
          {**mlp, "batch": 5, "normalize": True}, mode="normalize"),
        c("equinox_mlp", "SelfAttention.__call__", _self_attention, attn),
        c("equinox_mlp", "SelfAttention.__call__", _self_attention,
          {**attn, "causal": True}, mode="causal"),
        c("equinox_mlp", "AttentionOutputEinsum.__call__", _self_attention, attn,
          {"t": 3, "d": 4, "heads": 2}),
        c("equinox_mlp", "AttentionCausalMask.__call__", _self_attention,
          {**attn, "causal": True}, {"t": 4, "d": 4, "heads": 2, "causal": True},
          mode="causal"),
        # gru_scan
        c("gru_scan", "gru_cell", _gru_cell, gru),
        c("gru_scan", "gru_cell_mixed", _gru_cell, gru, {**gru, "in_size": 5}),
        c("gru_scan", "gru", _gru, gru),
        c("gru_scan", "gru_time_major", _gru, gru, {**gru, "time": 2}),
        c("gru_scan", "encode", _encode, gru),
        c("gru_scan", "encode_mask_axis", _encode, gru, {**gru, "hidden": 2}),
        # cnn_pool
        c("cnn_pool", "max_pool", _pool, {"c": 3, "h": 5, "w": 7}),
        c("cnn_pool", "max_pool_same", _pool, {"c": 3, "h": 5, "w": 7}, image),
        c("cnn_pool", "avg_pool", _pool, image),
        c("cnn_pool", "avg_pool_swapped", _pool, image, {**image, "w": 6}),
        c("cnn_pool", "avg_pool_axes", _pool, image, {"c": 3, "h": 4, "w": 4}),
        c("cnn_pool", "group_norm", _group_norm, {"c": 64, "h": 3, "w": 5}),
        c("cnn_pool", "group_norm_scale", _group_norm, {"c": 64, "h": 3, "w": 5},
          {"c": 32, "h": 3, "w": 32}),
        c("cnn_pool", "classify", _classify, net),
        c("cnn_pool", "classify", _classify, {**net, "pool": "avg"}, mode="avg"),
        c("cnn_pool", "classify_pool_axes", _classify, net, {**net, "w": 8}),
        # vae
        c("vae", "encode", _vae_encode, vae),
        c("vae", "encode_bias", _vae_encode, vae, {**vae, "n": 8}),
        c("vae", "reparameterize", _vae_reparameterize, vae),
        c("vae", "reparameterize_noise", _vae_reparameterize, vae,
          {**vae, "b": 4}),
        c("vae", "decode", _vae_decode, vae),
        c("vae", "decode_transposed", _vae_decode, vae, {**vae, "hidden": 4}),
        c("vae", "negative_elbo", _vae_elbo, vae),
        c("vae", "negative_elbo", _vae_elbo, {**vae, "mc": True}, mode="mc"),
        c("vae", "negative_elbo_kl_axis", _vae_elbo, vae, {**vae, "b": 4}),
        c("vae", "negative_elbo_mc", _vae_elbo, {**vae, "mc": True},
          {**vae, "b": 4, "mc": True}, mode="mc"),
        # gemma_block
        c("gemma_block", "rms_norm", _gemma_rms_norm, gemma),
        c("gemma_block", "rms_norm_keepdims", _gemma_rms_norm, gemma,
          {**gemma, "d": 5}),
        c("gemma_block", "attention", _gemma_attention, gemma),
        c("gemma_block", "attention", _gemma_attention,
          {**gemma, "attn_type": "local_sliding", "window": 3}, mode="local"),
        c("gemma_block", "attention_groups", _gemma_attention, gemma,
          {**gemma, "heads": 4}),
        c("gemma_block", "attention_window", _gemma_attention,
          {**gemma, "attn_type": "local_sliding", "window": 3},
          {**gemma, "attn_type": "local_sliding", "window": 5}, mode="local"),
        c("gemma_block", "feed_forward", _gemma_feed_forward, gemma),
        c("gemma_block", "feed_forward_einsum", _gemma_feed_forward, gemma,
          {**gemma, "ffw": 7}),
        c("gemma_block", "block", _gemma_block, gemma),
        c("gemma_block", "block", _gemma_block,
          {**gemma, "attn_type": "local_sliding"}, mode="local"),
        c("gemma_block", "block_no_down_projection", _gemma_block, gemma,
          {**gemma, "ffw": 7}),
        # rotary
        c("rotary", "apply_rope", _rope, rope),
        c("rotary", "apply_rope_heads_axis", _rope, rope, {**rope, "n": 3}),
        c("rotary", "apply_rotary", _rotary, rope),
        c("rotary", "apply_rotary_table", _rotary, rope, {**rope, "l": 3}),
        c("rotary", "timestep_embedding", _timestep, {"b": 2, "d": 5}),
        c("rotary", "timestep_embedding", _timestep, {"b": 2, "d": 6}, mode="even"),
        c("rotary", "timestep_embedding_pad", _timestep, {"b": 2, "d": 5},
          {"b": 2, "d": 6}),
        # vit_patch
        c("vit_patch", "patch_embed_conv", _patches, vit),
        c("vit_patch", "patch_embed_conv_layout", _patches, vit,
          {**vit, "d": 8, "h": 4}),
        c("vit_patch", "patch_embed", _patches, vit),
        c("vit_patch", "patch_embed_square", _patches, vit, {**vit, "w": 6}),
        c("vit_patch", "vit_embed", _vit, vit),
        c("vit_patch", "vit_embed", _vit, {**vit, "image_h": 7, "image_w": 9},
          mode="7x9 image"),
        c("vit_patch", "vit_embed_same", _vit, {**vit, "image_h": 7, "image_w": 9},
          vit),
        # train_step
        c("train_step", "loss_fn", _loss, train),
        c("train_step", "loss_fn_classes", _loss, train, {**train, "b": 4}),
        c("train_step", "mixup_step", _mixup, train),
        c("train_step", "mixup_step_perm", _mixup, train, {**train, "b": 5}),
        c("train_step", "train_step", _train, train),
        c("train_step", "train_step_accuracy", _train, train, {**train, "b": 4}),
        # eqx_layers
        c("eqx_layers", "apply_block", _apply_block, block),
        c("eqx_layers", "apply_block_norm_axis", _apply_block, block,
          {**block, "batch": 5}),
        c("eqx_layers", "apply_block_no_fc2", _apply_block, block,
          {**block, "hidden": 5}),
        c("eqx_layers", "RNN.__call__", _rnn, rnn),
        c("eqx_layers", "RNNLastInput.__call__", _rnn, rnn, {**rnn, "hidden": 4}),
        c("eqx_layers", "ConvBlock.__call__", _conv_block, conv),
        c("eqx_layers", "ConvBlockSkip.__call__", _conv_block, conv,
          {**conv, "out_channels": 2}),
        c("eqx_layers", "TransformerBlock.__call__", _transformer, transformer),
        c("eqx_layers", "TransformerBlock.__call__", _transformer,
          {**transformer, "causal": True}, mode="causal"),
        c("eqx_layers", "TransformerBlockMask.__call__", _transformer,
          {**transformer, "causal": True},
          {**transformer, "seq": 8, "causal": True}, mode="causal"),
        # nnx_modules
        c("nnx_modules", "MLP.__call__", _nnx_mlp, nnx_mlp),
        c("nnx_modules", "MLPResidual.__call__", _nnx_mlp, nnx_mlp,
          {**nnx_mlp, "dout": 3}),
        c("nnx_modules", "apply_cnn", _nnx_cnn, nnx_cnn),
        c("nnx_modules", "apply_cnn_layout", _nnx_cnn, nnx_cnn,
          {**nnx_cnn, "width": 3}),
        c("nnx_modules", "EncoderBlock.__call__", _nnx_encoder, encoder),
        c("nnx_modules", "EncoderBlock.__call__", _nnx_encoder,
          {**encoder, "causal": True}, mode="causal"),
        c("nnx_modules", "EncoderBlockSeqFirst.__call__", _nnx_encoder, encoder,
          {**encoder, "t": 2}),
    ]  # fmt: skip


CASES = _cases()
CLEAN_CASES = [case for case in CASES if case.lucky is None]
TWIN_CASES = [case for case in CASES if case.lucky is not None]


def test_every_function_of_the_corpus_has_its_ground_truth() -> None:
    assert {(c.file, c.function) for c in CLEAN_CASES} == {
        (j.file, j.function) for j in CLEAN
    }
    assert {(c.file, c.function) for c in TWIN_CASES} == TWINS


def test_the_distinct_sizes_are_distinct_and_more_than_1() -> None:
    for case in CASES:
        sizes = [v for v in case.distinct.values() if type(v) is int]
        assert len(set(sizes)) == len(sizes) and min(sizes) > 1, case.id


@pytest.fixture(scope="module", autouse=True)
def _fast_compiles() -> Iterator[None]:
    """XLA's optimizations off while this file runs: its functions run once,
    on small arrays, and compiling them costs more than running them."""
    flag = "jax_disable_most_optimizations"
    before = jax.config.values[flag]
    jax.config.update(flag, True)  # type: ignore[no-untyped-call]
    yield
    jax.config.update(flag, before)  # type: ignore[no-untyped-call]


def _run(case: Case, sizes: Sizes) -> Any:
    out = case.call(corpus(case.file), case.function, sizes)
    return jax.block_until_ready(out)  # type: ignore[no-untyped-call]


@pytest.mark.parametrize("case", CLEAN_CASES, ids=[c.id for c in CLEAN_CASES])
def test_a_clean_function_runs_at_distinct_sizes(case: Case) -> None:
    _run(case, case.distinct)


@pytest.mark.parametrize("case", TWIN_CASES, ids=[c.id for c in TWIN_CASES])
def test_a_twin_runs_at_its_lucky_sizes(case: Case) -> None:
    assert case.lucky is not None
    _run(case, case.lucky)


@pytest.mark.parametrize("case", TWIN_CASES, ids=[c.id for c in TWIN_CASES])
def test_a_twin_fails_at_distinct_sizes(case: Case) -> None:
    # Any exception: which one is the next test's concern.
    with pytest.raises(Exception):  # noqa: B017
        _run(case, case.distinct)


#: Twins whose failure at distinct sizes is none of JAX's shape errors nor
#: treespec's `ValidationError` (none: a wrong return under a size expression
#: such as `h//2` raised jaxtyping's AnnotationError until it was fixed).
OTHER_RAISES: dict[tuple[str, str], str] = {}


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            case, id=case.id, marks=_xfail(OTHER_RAISES, case.file, case.function)
        )
        for case in TWIN_CASES
    ],
)
def test_a_twin_fails_with_a_shape_error_or_a_validation_error(case: Case) -> None:
    with pytest.raises((TypeError, ValueError, ValidationError)):
        _run(case, case.distinct)


# -- the checker ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Finding:
    file: str
    line: int
    severity: str
    function: str
    message: str


@dataclasses.dataclass(frozen=True)
class Checked:
    status: int
    findings: list[Finding]
    summary: str

    def of(self, file: str, function: str) -> list[Finding]:
        return [f for f in self.findings if (f.file, f.function) == (file, function)]

    def errors(self, file: str, function: str) -> list[Finding]:
        return [f for f in self.of(file, function) if f.severity == "error"]

    def shown(self, file: str, function: str) -> str:
        rows = [f"{f.line}: {f.severity}: {f.message}" for f in self.of(file, function)]
        return "\n".join(rows) or "nothing reported"


@pytest.fixture(scope="module")
def checked() -> Checked:
    """One run of `python -m treespec check tests/shapes/corpus`."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(["check", str(CORPUS)])
    *rows, summary = out.getvalue().splitlines()
    findings = []
    for row in rows:
        match = re.fullmatch(r"(.+?):(\d+): (error|note): ([\w.]+): (.*)", row)
        assert match, row
        path, line, severity, function, message = match.groups()
        findings.append(
            Finding(Path(path).stem, int(line), severity, function, message)
        )
    return Checked(status, findings, summary)


def test_the_check_imports_every_file_and_checks_every_function(
    checked: Checked,
) -> None:
    assert checked.status == 1  # there are bugs
    assert checked.summary.startswith(f"checked {len(JITTED)} functions: ")
    known = {(j.file, j.function) for j in JITTED}
    assert all((f.file, f.function) in known for f in checked.findings), checked
    assert not any("the checker failed" in f.message for f in checked.findings)


# What the checker does today where it falls short (issue 40, item 6). Each
# entry is an xfail(strict=True): when the checker learns the case, its test
# passes, fails as an XPASS, and the entry goes.

_OPT_STATE = "skipped: opt_state (optax.OptState) has no value to be built from"

#: A bug that one size of a constructor's, solved, makes run (DESIGN: an
#: unknown solved beside a named size too, never an error at a guess).
_UNTOLD = (
    "a note under DESIGN's 'an error is certain' (issue 56): {rel} makes it "
    "run, and no annotation tells the two sizes apart, so the bug shows as the "
    "note's assumption '{rel}', not as an error"
)

#: Bugs the checker does not report as an error at their line.
MISSED: dict[tuple[str, str], str] = {
    ("train_step", "train_step_accuracy"): _OPT_STATE,
    ("cnn_pool", "max_pool_same"): (
        "a note under DESIGN's 'an error is certain' (issue 56): SAME padding's "
        "ceil(h/2) equals the annotation's h//2 wherever h and w are even, a "
        "divisibility against the return annotation, said in the note"
    ),
    ("eqx_layers", "apply_block_no_fc2"): _UNTOLD.format(rel="hidden_size == d_model"),
    ("eqx_layers", "RNNLastInput.__call__"): _UNTOLD.format(
        rel="hidden_size == in_size"
    ),
    ("vit_patch", "vit_embed_same"): (
        "a note, as for the clean vit_embed: the position embeddings' n is a "
        "size of its own that no annotation ties to the patch count, so SAME "
        "and VALID padding cannot be told apart ('needs a relation ... n == "
        "...')"
    ),
}

#: Twins with an error at another line than their bug's.
ELSEWHERE: dict[tuple[str, str], str] = {}

#: Clean functions the checker reports an error in.
FALSE_ERRORS: dict[tuple[str, str], str] = {}

#: Clean functions the checker skips.
SKIPPED: dict[tuple[str, str], str] = {
    ("train_step", "train_step"): _OPT_STATE,
}


def _bug_params(known: dict[tuple[str, str], str]) -> list[Any]:
    return [
        pytest.param(
            bug,
            id=f"{bug.file}:{bug.function}:{bug.line} {bug.kind}",
            marks=_xfail(known, bug.file, bug.function),
        )
        for bug in BUGS
    ]


def _clean_params(known: dict[tuple[str, str], str]) -> list[Any]:
    return [
        pytest.param(
            j, id=f"{j.file}:{j.function}", marks=_xfail(known, j.file, j.function)
        )
        for j in CLEAN
    ]


def _at_bug(bug: Bug, finding: Finding) -> bool:
    """An error at the bug's line, or inside what the bug's line calls (the
    message says "called at line N"); or, where the bug's value is what the
    next line returns, the return value's error at that `return`."""
    if finding.line == bug.line or f"(called at line {bug.line})" in finding.message:
        return True
    returned = _source(bug.file)[bug.line + 1].strip().startswith("return ")
    return (
        returned
        and finding.line == bug.line + 1
        and finding.message.startswith("the return value")
    )


@functools.cache
def _source(file: str) -> list[str]:
    return ["", *(CORPUS / f"{file}.py").read_text().splitlines()]


@pytest.mark.parametrize("bug", _bug_params(MISSED))
def test_each_bug_is_an_error_at_its_line(bug: Bug, checked: Checked) -> None:
    errors = checked.errors(bug.file, bug.function)
    assert any(_at_bug(bug, f) for f in errors), checked.shown(bug.file, bug.function)


@pytest.mark.parametrize("bug", _bug_params(ELSEWHERE))
def test_a_twin_has_no_error_but_at_its_bug(bug: Bug, checked: Checked) -> None:
    errors = checked.errors(bug.file, bug.function)
    assert all(_at_bug(bug, f) for f in errors), checked.shown(bug.file, bug.function)


@pytest.mark.parametrize("clean", _clean_params(FALSE_ERRORS))
def test_a_clean_function_has_no_error(clean: Jitted, checked: Checked) -> None:
    errors = checked.errors(clean.file, clean.function)
    assert not errors, checked.shown(clean.file, clean.function)


@pytest.mark.parametrize("clean", _clean_params(SKIPPED))
def test_a_clean_function_is_not_skipped(clean: Jitted, checked: Checked) -> None:
    skips = [
        f
        for f in checked.of(clean.file, clean.function)
        if f.message.startswith("skipped:")
    ]
    assert not skips, checked.shown(clean.file, clean.function)


def test_an_optax_step_is_checked_with_its_state_given() -> None:
    # The command skips a step taking `optax.OptState` (no value can be
    # guessed); given the state (and the model it was made for), the check
    # finds the twin's bug at its line, and nothing in the clean step.
    import treespec

    m = corpus("train_step")
    model = _classifier(m, {"n": 5, "hidden": 7, "classes": 4})
    state = m.optimizer.init(model)
    clean = treespec.check_shapes(m.train_step, model=model, opt_state=state)
    assert clean.problems == () and clean.outputs, str(clean)
    (bug,) = [b for b in BUGS if b.function == "train_step_accuracy"]
    twin = treespec.check_shapes(m.train_step_accuracy, model=model, opt_state=state)
    assert [e.line for e in twin.errors] == [bug.line], str(twin)
