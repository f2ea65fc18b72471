"""The blind2 corpus: clean/twin pairs and relation-only functions, with sizes.

Each pair is `(module, clean_name, twin_name, build, distinct, lucky, note)`:
`build(fn, s)` calls `fn` (a function, or a class of METHOD_CLASSES, which it
builds and calls) on fresh random arrays of the sizes in `s`; at every dict of
`distinct` the clean one runs and the twin raises a shape error; at every
dict of `lucky` both run. Each relation is `(module, name, build, sizes_list,
note)`: correct code that holds only when the sizes satisfy a relation the
annotations do not state; every dict given satisfies it.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import b2_audio_conv
import b2_batchnorm_state
import b2_beam_search
import b2_ctc
import b2_diffusion
import b2_einops_mixer
import b2_perceiver
import b2_vit_window
import equinox as eqx
import jax.numpy as jnp
from _arrays import key, rand, randint
from flax import nnx

METHOD_CLASSES = {
    "PatchEmbed",
    "PatchEmbedBug",
    "ConvEncoder",
    "ConvEncoderBug",
    "PerceiverBlock",
    "PerceiverBlockBug",
    "ConvBN",
    "ConvBNBug",
    "MLPBN",
    "MLPBNBug",
    "ConvCTCHead",
    "ConvCTCHeadBug",
}


def _pos(s, dims):
    return jnp.abs(rand(s, dims)) + 0.1


def _unit(s, dims):
    """Values in (0.05, 0.95): betas, cumulative alphas."""
    return 0.05 + 0.9 * (jnp.tanh(rand(s, dims)) + 1) / 2


# ---------------------------------------------------------------- builds

vit, audio, perc, ein, bn, beam, ctc, diff = (
    b2_vit_window,
    b2_audio_conv,
    b2_perceiver,
    b2_einops_mixer,
    b2_batchnorm_state,
    b2_beam_search,
    b2_ctc,
    b2_diffusion,
)


def _cross_params(s):
    return b2_perceiver.CrossParams(wq=rand(s, "d k"), wk=rand(s, "c k"), wv=rand(s, "c k"), wo=rand(s, "k d"))


def _with_state(cls, *args):
    model, state = eqx.nn.make_with_state(cls)(*args, key=key())
    return model, state


def _bn_stats(s):
    return b2_batchnorm_state.BNStats(mean=rand(s, "c"), var=_pos(s, "c"))


PAIRS = [
    # ------------------------------------------------ ViT / Swin
    (
        vit, "prepend_cls", "prepend_cls_bug",
        lambda fn, s: fn(rand(s, "b n e"), rand(s, "1 1 e"), rand(s, "n+1 e")),
        [{"b": 2, "n": 3, "e": 5}, {"b": 4, "n": 7, "e": 6}],
        [{"b": 3, "n": 3, "e": 5}],
        "class token broadcast to (n, 1, e): runs when b == n",
    ),
    (
        vit, "PatchEmbed", "PatchEmbedBug",
        lambda cls, s: cls(weight=rand(s, "q e"), bias=rand(s, "e"), pos=rand(s, "n e"))(rand(s, "b n q")),
        [{"b": 2, "n": 3, "q": 5, "e": 7}],
        [{"b": 2, "n": 3, "q": 5, "e": 5}],
        "weight transposed: runs when q == e",
    ),
    (
        vit, "window_partition", "window_partition_bug",
        lambda fn, s: fn(rand(s, "b h w c"), window=s["ws"]),
        [{"b": 3, "h": 4, "w": 6, "c": 5, "ws": 2}, {"b": 5, "h": 6, "w": 9, "c": 2, "ws": 3}],
        [{"b": 3, "h": 4, "w": 4, "c": 5, "ws": 2}],
        "width split with h // window: runs when h == w (clean needs h, w divisible by window)",
    ),
    (
        vit, "window_attention", "window_attention_bug",
        lambda fn, s: fn(
            rand(s, "m n c"), rand(s, "c h k"), rand(s, "c h k"), rand(s, "c h k"), rand(s, "h k c"), rand(s, "h n n"), rand(s, "m n n")
        ),
        [{"m": 2, "n": 3, "c": 5, "h": 4, "k": 6}],
        [{"m": 4, "n": 3, "c": 5, "h": 4, "k": 6}, {"m": 1, "n": 3, "c": 5, "h": 4, "k": 6}],
        "mask[None] against (m, h, n, n): runs when m == h or m == 1",
    ),
    (
        vit, "vit_loss", "vit_loss_bug",
        lambda fn, s: fn(rand(s, "b n e"), rand(s, "e k"), randint(s, "b", s["k"])),
        [{"b": 2, "n": 3, "e": 5, "k": 7}],
        [{"b": 3, "n": 3, "e": 5, "k": 7}],
        "mean over the batch gives (n, e): the label gather runs when b == n",
    ),
    # ------------------------------------------------ audio convs
    (
        audio, "strided_stack", "strided_stack_bug",
        lambda fn, s: fn(rand(s, "b t c"), rand(s, "k c h"), rand(s, "k h h"), stride=s["st"]),
        [{"b": 6, "t": 17, "c": 5, "k": 3, "h": 7, "st": 2}],
        [{"b": 6, "t": 17, "c": 5, "k": 3, "h": 8, "st": 2}],
        "NCW layout for a NWC tensor: runs when the first conv's output length equals h",
    ),
    (
        audio, "causal_block", "causal_block_bug",
        lambda fn, s: fn(rand(s, "b t c"), rand(s, "k c o"), rand(s, "c o"), dilation=s["dil"]),
        [{"b": 2, "t": 13, "c": 5, "k": 3, "o": 7, "dil": 4}],
        [{"b": 2, "t": 13, "c": 5, "k": 1, "o": 7, "dil": 4}, {"b": 2, "t": 13, "c": 5, "k": 3, "o": 7, "dil": 1}],
        "causal pad without dilation: the residual add runs when k == 1 or dilation == 1",
    ),
    (
        audio, "frame_signal", "frame_signal_bug",
        lambda fn, s: fn(rand(s, "b n"), rand(s, "l"), hop=s["hop"]),
        [{"b": 2, "n": 13, "l": 5, "hop": 3}],
        [{"b": 2, "n": 13, "l": 3, "hop": 3}],
        "frames of hop samples: the window multiply runs when hop == l",
    ),
    (
        audio, "log_mel", "log_mel_bug",
        lambda fn, s: fn(rand(s, "b f k"), rand(s, "k m")),
        [{"b": 2, "f": 3, "k": 5, "m": 7}],
        [{"b": 2, "f": 3, "k": 5, "m": 5}],
        "filterbank letters swapped: runs when k == m",
    ),
    (
        audio, "ConvEncoder", "ConvEncoderBug",
        lambda cls, s: cls(s["c"], s["h"], s["d"], key=key())(rand(s, "c t")),
        [{"c": 2, "t": 5, "h": 3, "d": 7}],
        [{"c": 2, "t": 3, "h": 3, "d": 7}],
        "Linear vmapped over channels: runs when t == h",
    ),
    # ------------------------------------------------ Perceiver
    (
        perc, "cross_attend", "cross_attend_bug",
        lambda fn, s: fn(rand(s, "n d"), rand(s, "b m c"), _cross_params(s)),
        [{"n": 2, "d": 3, "b": 4, "m": 5, "c": 6, "k": 7}],
        [{"n": 2, "d": 3, "b": 4, "m": 5, "c": 3, "k": 7}],
        "keys projected with wq: runs when c == d",
    ),
    (
        perc, "cross_attend", "cross_attend_values_bug",
        lambda fn, s: fn(rand(s, "n d"), rand(s, "b m c"), _cross_params(s)),
        [{"n": 2, "d": 3, "b": 4, "m": 5, "c": 6, "k": 7}],
        [{"n": 5, "d": 3, "b": 4, "m": 5, "c": 6, "k": 7}],
        "values indexed by the latent letter: runs when n == m",
    ),
    (
        perc, "latent_self_attention", "latent_self_attention_bug",
        lambda fn, s: fn(rand(s, "b n d"), rand(s, "d 3 h k"), rand(s, "h k d")),
        [{"b": 2, "n": 3, "d": 5, "h": 4, "k": 6}],
        [{"b": 2, "n": 4, "d": 5, "h": 4, "k": 6}],
        "heads before positions into the output einsum: runs when n == h",
    ),
    (
        perc, "latent_classifier", "latent_classifier_bug",
        lambda fn, s: fn(rand(s, "b n d"), rand(s, "d o")),
        [{"b": 2, "n": 3, "d": 5, "o": 7}],
        [{"b": 2, "n": 5, "d": 5, "o": 7}],
        "mean over features: runs when n == d",
    ),
    (
        perc, "PerceiverBlock", "PerceiverBlockBug",
        lambda cls, s: cls(s["d"], s["c"], s["k"], rngs=nnx.Rngs(0))(rand(s, "b n d"), rand(s, "b m c")),
        [{"b": 2, "n": 3, "d": 5, "m": 4, "c": 6, "k": 7}],
        [{"b": 2, "n": 3, "d": 5, "m": 4, "c": 5, "k": 7}],
        "input LayerNorm of width d: runs when c == d",
    ),
    # ------------------------------------------------ einops
    (
        ein, "token_mixing", "token_mixing_bug",
        lambda fn, s: fn(rand(s, "b n c"), rand(s, "n f"), rand(s, "f n")),
        [{"b": 2, "n": 3, "c": 5, "f": 7}],
        [{"b": 2, "n": 5, "c": 5, "f": 7}],
        "token MLP on the channel axis: runs when n == c",
    ),
    (
        ein, "add_positions", "add_positions_bug",
        lambda fn, s: fn(rand(s, "b n c"), rand(s, "n c")),
        [{"b": 2, "n": 3, "c": 5}],
        [{"b": 2, "n": 4, "c": 4}],
        "repeated table transposed: runs when n == c",
    ),
    (
        ein, "pool_head", "pool_head_bug",
        lambda fn, s: fn(rand(s, "b n c"), rand(s, "c k")),
        [{"b": 2, "n": 3, "c": 5, "k": 7}],
        [{"b": 2, "n": 5, "c": 5, "k": 7}],
        "reduced the channels: runs when n == c",
    ),
    (
        ein, "fused_attention", "fused_attention_bug",
        lambda fn, s: fn(rand(s, "b n d"), rand(s, "d 3 h k"), rand(s, "h k d")),
        [{"b": 2, "n": 3, "d": 5, "h": 4, "k": 6}],
        [{"b": 2, "n": 4, "d": 5, "h": 4, "k": 6}],
        "merged (n k) instead of (h k): runs when n == h",
    ),
    (
        ein, "gated_channel_mix", "gated_channel_mix_bug",
        lambda fn, s: fn(rand(s, "b n c"), rand(s, "c e"), rand(s, "b n")),
        [{"b": 2, "n": 3, "c": 5, "e": 7}],
        [{"b": 2, "n": 5, "c": 5, "e": 7}],
        "gate as (b, 1, n): runs when n == c",
    ),
    # ------------------------------------------------ BatchNorm with state
    (
        bn, "ConvBN", "ConvBNBug",
        lambda cls, s: (lambda m: m[0](rand(s, "b c t"), m[1]))(_with_state(cls, s["c"], s["h"])),
        [{"b": 2, "c": 3, "t": 5, "h": 4}],
        [{"b": 2, "c": 4, "t": 5, "h": 4}],
        "BatchNorm of width c after a conv to h: runs when c == h",
    ),
    (
        bn, "MLPBN", "MLPBNBug",
        lambda cls, s: (lambda m: m[0](rand(s, "b d"), m[1]))(_with_state(cls, s["d"], s["f"], s["o"])),
        [{"b": 2, "d": 3, "f": 5, "o": 7}],
        [{"b": 3, "d": 3, "f": 5, "o": 7}],
        "vmapped over features: runs when b == d",
    ),
    (
        bn, "image_forward", "image_forward_bug",
        lambda fn, s: fn(*_with_state(b2_batchnorm_state.ImageBN, s["c"], s["f"], s["k"]), rand(s, "b h w c")),
        [{"b": 2, "h": 3, "w": 4, "c": 5, "f": 6, "k": 7}],
        [{"b": 2, "h": 3, "w": 5, "c": 5, "f": 6, "k": 7}],
        "moveaxis(1, -1) puts w in the channel slot: runs when w == c",
    ),
    (
        bn, "batch_norm_train", "batch_norm_train_bug",
        lambda fn, s: fn(rand(s, "b t c"), rand(s, "c"), rand(s, "c"), _bn_stats(s)),
        [{"b": 2, "t": 3, "c": 5}],
        [{"b": 2, "t": 5, "c": 5}],
        "mean over (0, 2) gives (t,): runs when t == c",
    ),
    (
        bn, "batch_norm_eval", "batch_norm_eval_bug",
        lambda fn, s: fn(rand(s, "b c"), rand(s, "c"), rand(s, "c"), _bn_stats(s)),
        [{"b": 2, "c": 3}],
        [{"b": 3, "c": 3}],
        "mean as a column (c, 1): runs when b == c",
    ),
    # ------------------------------------------------ beam search
    (
        beam, "beam_step", "beam_step_bug",
        lambda fn, s: fn(rand(s, "b k v"), rand(s, "b k")),
        [{"b": 2, "k": 3, "v": 5}],
        [{"b": 2, "k": 3, "v": 3}],
        "scores as (b, 1, k): runs when k == v",
    ),
    (
        beam, "reorder_history", "reorder_history_bug",
        lambda fn, s: fn(randint(s, "b k t", 9), randint(s, "b k", s["k"]), randint(s, "b k", 9)),
        [{"b": 2, "k": 3, "t": 5}],
        [{"b": 3, "k": 3, "t": 5}],
        "arange(b)[None] against (b, k) parents: runs when b == k",
    ),
    (
        beam, "beam_decode", "beam_decode_bug",
        lambda fn, s: fn(rand(s, "v e"), rand(s, "e e"), randint(s, "b", s["v"]), beam=s["beam"], steps=s["steps"]),
        [{"v": 7, "e": 5, "b": 2, "beam": 3, "steps": 4}],
        [{"v": 5, "e": 5, "b": 2, "beam": 3, "steps": 4}],
        "h @ emb (not emb.T): runs when v == e",
    ),
    (
        beam, "pick_best", "pick_best_bug",
        lambda fn, s: fn(randint(s, "b k t", 9), rand(s, "b k"), randint(s, "b k", 5) + 1),
        [{"b": 2, "k": 3, "t": 5}],
        [{"b": 3, "k": 3, "t": 5}],
        "argmax over the batch gives (k,): the gather runs when b == k",
    ),
    (
        beam, "reorder_cache", "reorder_cache_bug",
        lambda fn, s: fn(rand(s, "b k l d"), randint(s, "s b k", s["k"])),
        [{"b": 2, "k": 3, "l": 4, "d": 5, "s": 6}],
        [{"b": 2, "k": 3, "l": 4, "d": 5, "s": 2}],
        "parents[:, i] is (s, k): runs when s == b",
    ),
    # ------------------------------------------------ CTC
    (
        ctc, "ctc_forward", "ctc_forward_bug",
        lambda fn, s: fn(rand(s, "b t v"), randint(s, "b l", s["v"] - 1) + 1),
        [{"b": 2, "t": 7, "v": 5, "l": 3}],
        [{"b": 2, "t": 3, "v": 5, "l": 1}],
        "scan over the batch axis: runs when t - 1 == b",
    ),
    (
        ctc, "greedy_decode", "greedy_decode_bug",
        lambda fn, s: fn(rand(s, "b t v"), rand(s, "b t")),
        [{"b": 2, "t": 3, "v": 5}],
        [{"b": 2, "t": 5, "v": 5}],
        "argmax over time gives (b, v): runs when t == v",
    ),
    (
        ctc, "optax_ctc", "optax_ctc_bug",
        lambda fn, s: fn(rand(s, "b t v"), jnp.zeros((s["b"], s["t"])), randint(s, "b l", s["v"] - 1) + 1, jnp.zeros((s["b"], s["l"]))),
        [{"b": 2, "t": 7, "v": 5, "l": 3}],
        [{"b": 2, "t": 4, "v": 5, "l": 4}],
        "padding masks swapped: runs when t == l",
    ),
    (
        ctc, "framewise_ce", "framewise_ce_bug",
        lambda fn, s: fn(rand(s, "b t v"), randint(s, "b t", s["v"]), jnp.ones((s["b"], s["t"]))),
        [{"b": 2, "t": 3, "v": 5}],
        [{"b": 3, "t": 3, "v": 5}],
        "mask.T: runs when b == t",
    ),
    (
        ctc, "ConvCTCHead", "ConvCTCHeadBug",
        lambda cls, s: cls(s["d"], s["v"], rngs=nnx.Rngs(0))(rand(s, "b t d")),
        [{"b": 2, "t": 3, "d": 5, "v": 7}],
        [{"b": 2, "t": 5, "d": 5, "v": 7}],
        "channels-first into a channels-last conv: runs when t == d",
    ),
    # ------------------------------------------------ diffusion / MDN
    (
        diff, "ddpm_step", "ddpm_step_bug",
        lambda fn, s: fn(rand(s, "b h w c"), rand(s, "b h w c"), rand(s, "b h w c"), randint(s, "b", s["n"]), _unit(s, "n") * 0.5),
        [{"b": 2, "h": 3, "w": 4, "c": 5, "n": 6}],
        [{"b": 3, "h": 3, "w": 4, "c": 5, "n": 6}, {"b": 1, "h": 3, "w": 4, "c": 5, "n": 6}],
        "coefficient (b, 1, 1) lines up with h: runs when b == h or b == 1",
    ),
    (
        diff, "time_mlp", "time_mlp_bug",
        lambda fn, s: fn(rand(s, "b"), rand(s, "k"), rand(s, "2*k d")),
        [{"b": 2, "k": 3, "d": 5}],
        [{"b": 3, "k": 3, "d": 5}],
        "outer product (k, b): runs when b == k",
    ),
    (
        diff, "film_condition", "film_condition_bug",
        lambda fn, s: fn(rand(s, "b n d"), rand(s, "b e"), rand(s, "e 2 d")),
        [{"b": 2, "n": 3, "d": 5, "e": 7}],
        [{"b": 3, "n": 3, "d": 5, "e": 7}],
        "scale[None] is (1, b, d): runs when n == b",
    ),
    (
        diff, "denoise_loss", "denoise_loss_bug",
        lambda fn, s: fn(rand(s, "b n"), rand(s, "b n"), randint(s, "b", s["s"]), _unit(s, "s"), rand(s, "n n"), rand(s, "s")),
        [{"b": 2, "n": 3, "s": 5}],
        [{"b": 3, "n": 3, "s": 5}],
        "per-example loss over the batch axis: runs when n == b",
    ),
    (
        diff, "mdn_nll", "mdn_nll_bug",
        lambda fn, s: fn(rand(s, "b d"), rand(s, "d k"), rand(s, "d k o"), rand(s, "d k o"), rand(s, "b o")),
        [{"b": 2, "d": 3, "k": 5, "o": 7}],
        [{"b": 2, "d": 3, "k": 5, "o": 5}, {"b": 2, "d": 3, "k": 5, "o": 1}],
        "targets as (b, o, 1): runs when k == o or o == 1",
    ),
]

RELATIONS = [
    (
        vit, "patchify",
        lambda fn, s: fn(rand(s, "b h w c"), patch=s["p"]),
        [{"b": 2, "h": 6, "w": 9, "c": 5, "p": 3}, {"b": 3, "h": 4, "w": 8, "c": 5, "p": 4}],
        "h and w divisible by patch",
    ),
    (
        audio, "fold_frames",
        lambda fn, s: fn(rand(s, "b t c"), stride=s["stride"]),
        [{"b": 2, "t": 12, "c": 5, "stride": 4}, {"b": 3, "t": 10, "c": 7, "stride": 2}],
        "t divisible by stride",
    ),
    (
        perc, "split_heads",
        lambda fn, s: fn(rand(s, "b n d"), heads=s["heads"]),
        [{"b": 2, "n": 3, "d": 8, "heads": 4}, {"b": 2, "n": 5, "d": 12, "heads": 4}],
        "d divisible by heads",
    ),
    (
        ein, "to_patches",
        lambda fn, s: fn(rand(s, "b h w c"), patch=s["p"]),
        [{"b": 3, "h": 6, "w": 4, "c": 5, "p": 2}, {"b": 2, "h": 6, "w": 9, "c": 5, "p": 3}],
        "h and w divisible by patch",
    ),
    (
        ctc, "subsample_time",
        lambda fn, s: fn(rand(s, "b t c"), rand(s, "q e"), factor=s["factor"]),
        [{"b": 2, "t": 10, "c": 3, "q": 6, "e": 7, "factor": 2}, {"b": 2, "t": 9, "c": 4, "q": 12, "e": 5, "factor": 3}],
        "t divisible by factor and q == factor * c",
    ),
    (
        diff, "timestep_embedding",
        lambda fn, s: fn(rand(s, "b"), rand(s, "e d")),
        [{"b": 3, "e": 6, "d": 5}, {"b": 2, "e": 8, "d": 3}],
        "e even",
    ),
]
