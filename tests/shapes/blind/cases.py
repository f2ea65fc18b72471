"""The blind corpus's cases: how to run each function on real arrays, at
distinct sizes and at the lucky sizes a twin's bug passes at. A twin differs
from its clean function in one line, marked `# BUG:` (`tests/_blind.py`'s
`twin_diff` checks it).

Written, with the eight model files beside it, by a session that had read
neither the shape checker nor the other corpus (`tests/shapes/corpus/`), from
a brief: model code as the ecosystem writes it, one planted bug per twin.
`tests/test_shape_blind.py` runs it.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import jax
import jax.numpy as jnp
from flax import nnx

_KEY = [jax.random.key(0)]


def _next_key():
    _KEY[0], k = jax.random.split(_KEY[0])
    return k


def rnd(*shape):
    return jax.random.normal(_next_key(), shape) * 0.5


def rint(hi, *shape):
    return jax.random.randint(_next_key(), shape, 0, hi)


def rbool(*shape):
    m = jax.random.bernoulli(_next_key(), 0.7, shape)
    return m.at[..., 0].set(True)


def S(**kw):
    return kw


# --------------------------------------------------------------------------
# Builders: build(fn, s) calls fn (a function, or a class whose __call__ is
# checked) on fresh arrays of sizes s.
# --------------------------------------------------------------------------

import attention as A
import gnn as G
import losses as L
import moe as M
import norms as N
import resnet as R
import sequence as Q
import unet as U


def b_basic(fn, s):
    p = R.BasicBlock(
        rnd(3, 3, s["ci"], s["co"]),
        rnd(3, 3, s["co"], s["co"]),
        rnd(1, 1, s["ci"], s["co"]),
    )
    return fn(p, rnd(s["b"], s["h"], s["w"], s["ci"]), s.get("act", "relu"))


def b_down(fn, s):
    p = R.DownBlock(
        rnd(3, 3, s["ci"], s["co"]),
        rnd(3, 3, s["co"], s["co"]),
        rnd(1, 1, s["ci"], s["co"]),
    )
    return fn(p, rnd(s["b"], s["h"], s["w"], s["ci"]))


def b_bottleneck(fn, s):
    p = R.Bottleneck(
        rnd(s["ci"], s["cm"]),
        rnd(3, 3, s["cm"], s["cm"]),
        rnd(s["cm"], s["co"]),
        rnd(s["ci"], s["co"]),
    )
    return fn(p, rnd(s["b"], s["h"], s["w"], s["ci"]))


def b_sep(fn, s):
    p = R.SeparableConv(rnd(s["k"], s["k"], 1, s["c"]), rnd(s["c"], s["co"]))
    return fn(p, rnd(s["b"], s["h"], s["w"], s["c"]))


def b_head(fn, s):
    return fn(rnd(s["b"], s["h"], s["w"], s["c"]), rnd(s["c"], s["n"]), rnd(s["n"]))


def b_stem(fn, s):
    return fn(rnd(s["b"], s["h"], s["w"], 3), rnd(7, 7, 3, s["c"]))


def b_grouped(fn, s):
    return fn(
        rnd(s["b"], s["h"], s["w"], s["ci"]), rnd(3, 3, s["cg"], s["co"]), s["groups"]
    )


def b_down_unet(fn, s):
    return fn(rnd(s["b"], s["h"], s["w"], s["ci"]), rnd(3, 3, s["ci"], s["co"]))


def b_up(fn, s):
    x = rnd(s["b"], s["h"], s["w"], s["c"])
    skip = rnd(s["b"], 2 * s["h"], 2 * s["w"], s["s"])
    return fn(x, skip, U.UpBlock(rnd(3, 3, s["c"] + s["s"], s["co"])))


def b_crop(fn, s):
    return fn(
        rnd(s["b"], s["h"], s["w"], s["c"]), rnd(s["b"], s["hs"], s["ws"], s["s"])
    )


def b_timeres(fn, s):
    p = U.TimeResBlock(
        rnd(3, 3, s["c"], s["c"]), rnd(3, 3, s["c"], s["c"]), rnd(s["e"], s["c"])
    )
    return fn(p, rnd(s["b"], s["h"], s["w"], s["c"]), rnd(s["b"], s["e"]))


def b_gate(fn, s):
    p = U.AttentionGate(rnd(s["cx"], s["ci"]), rnd(s["cg"], s["ci"]), rnd(s["ci"], 1))
    return fn(
        p, rnd(s["b"], s["h"], s["w"], s["cx"]), rnd(s["b"], s["h"], s["w"], s["cg"])
    )


def _lstm(s):
    return Q.LSTM(rnd(4, s["d"], s["h"]), rnd(4, s["h"], s["h"]), rnd(4, s["h"]))


def b_lstm(fn, s):
    return fn(
        _lstm(s), rnd(s["t"], s["b"], s["d"]), rnd(s["b"], s["h"]), rnd(s["b"], s["h"])
    )


def b_lstm_bf(fn, s):
    return fn(_lstm(s), rnd(s["b"], s["t"], s["d"]))


def _ssm(s):
    d, n = s["d"], s["n"]
    return Q.DiagSSM(rnd(d, n), rnd(d, n), rnd(d, n), rnd(d), rnd(d) - 2.0)


def b_ssm(fn, s):
    return fn(_ssm(s), rnd(s["b"], s["t"], s["d"]))


def b_ssm_fft(fn, s):
    return fn(_ssm(s), rnd(s["b"], s["d"], s["l"]))


def b_causal(fn, s):
    return fn(rnd(s["b"], s["t"], s["ci"]), rnd(s["k"], s["ci"], s["co"]))


def b_wavenet(fn, s):
    c, h = s["c"], s["h"]
    p = Q.WaveNetLayer(rnd(2, c, h), rnd(2, c, h), rnd(h, c), rnd(h, s["s"]))
    return fn(p, rnd(s["b"], s["t"], c))


def b_merge(fn, s):
    return fn(rnd(s["b"], s["t"], s["d"]), rnd(s["m"], s["e"]))


def _cross(s):
    d, e = s["d"], s["e"]
    return A.CrossAttention(rnd(d, d), rnd(e, d), rnd(e, d), rnd(d, d))


def b_cross(fn, s):
    return fn(_cross(s), rnd(s["b"], s["q"], s["d"]), rnd(s["b"], s["k"], s["e"]))


def b_cross_mask(fn, s):
    return fn(
        _cross(s),
        rnd(s["b"], s["q"], s["d"]),
        rnd(s["b"], s["k"], s["e"]),
        rbool(s["b"], s["k"]),
    )


def _self(s):
    d = s["d"]
    return A.SelfAttention(rnd(d, d), rnd(d, d), rnd(d, d), rnd(d, d))


def b_alibi(fn, s):
    return fn(_self(s), rnd(s["b"], s["t"], s["d"]), causal=s.get("causal", True))


def b_t5(fn, s):
    return fn(
        rnd(s["b"], s["h"], s["q"], s["dk"]),
        rnd(s["b"], s["h"], s["k"], s["dk"]),
        rnd(s["nb"], s["h"]),
    )


def b_fused(fn, s):
    p = A.FusedAttention(rnd(3, s["d"], s["d"]), rnd(s["d"], s["d"]))
    return fn(p, rnd(s["b"], s["t"], s["d"]))


def b_local(fn, s):
    return fn(_self(s), rnd(s["b"], s["t"], s["d"]), s["window"], s["heads"])


def _moe(s):
    d, e, f = s["d"], s["e"], s["f"]
    return M.MoE(rnd(d, e), rnd(e, d, f), rnd(e, f, d))


def b_moe_btd(fn, s):
    return fn(_moe(s), rnd(s["b"], s["t"], s["d"]))


def b_moe_nd(fn, s):
    return fn(_moe(s), rnd(s["n"], s["d"]))


def b_lb(fn, s):
    return fn(rnd(s["n"], s["e"]))


def b_clip(fn, s):
    return fn(
        rnd(s["n"], s["di"]),
        rnd(s["n"], s["dt"]),
        rnd(s["di"], s["e"]),
        rnd(s["dt"], s["e"]),
        jnp.float32(2.0),
    )


def b_siglip(fn, s):
    return fn(
        rnd(s["n"], s["d"]), rnd(s["n"], s["d"]), jnp.float32(2.3), jnp.float32(-10.0)
    )


def b_tied(fn, s):
    return fn(L.TiedLM(rnd(s["v"], s["d"]), rnd(s["d"])), rint(s["v"], s["b"], s["t"]))


def b_ls(fn, s):
    return fn(rnd(s["b"], s["c"]), rint(s["c"], s["b"]))


def b_nce(fn, s):
    return fn(rnd(s["b"], s["d"]), rnd(s["b"], s["d"]), rnd(s["b"], s["k"], s["d"]))


def b_pool(fn, s):
    return fn(rnd(s["b"], s["t"], s["d"]), rbool(s["b"], s["t"]))


def _graph(s):
    return G.Graph(
        rnd(s["n"], s["d"]),
        rnd(s["e"], s["f"]),
        rint(s["n"], s["e"]),
        rint(s["n"], s["e"]),
    )


def b_gcn(fn, s):
    return fn(_graph(s), rnd(s["d"], s["h"]))


def b_gat(fn, s):
    return fn(G.GAT(rnd(s["d"], s["h"]), rnd(s["h"]), rnd(s["h"])), _graph(s))


def b_edge(fn, s):
    return fn(
        _graph(s), G.EdgeMLP(rnd(2 * s["d"] + s["f"], s["h"]), rnd(s["h"], s["f"]))
    )


def b_readout(fn, s):
    return fn(
        rnd(s["n"], s["d"]),
        rint(s["g"], s["n"]),
        rnd(s["d"], s["c"]),
        rnd(s["g"], s["c"]),
    )


def b_rms(fn, s):
    return fn(rnd(*s["batch"], s["d"]), rnd(s["d"]))


def b_ln_nchw(fn, s):
    return fn(rnd(s["b"], s["c"], s["h"], s["w"]), rnd(s["c"]), rnd(s["c"]))


def b_bn(fn, s):
    return fn(
        rnd(s["b"], s["h"], s["w"], s["c"]), rnd(s["c"]), rnd(s["c"]), rnd(s["c"])
    )


def b_ff(cls, s):
    model = cls(s["d"], s["hidden"], key=_next_key())
    return model(rnd(s["t"], s["d"]))


def b_ada(cls, s):
    model = cls(s["d"], s["cd"], rngs=nnx.Rngs(0))
    return model(rnd(s["b"], s["t"], s["d"]), rnd(s["b"], s["cd"]))


def b_grms(fn, s):
    return fn(rnd(s["b"], s["t"], s["d"]), rnd(s["d"]), s["groups"])


# --------------------------------------------------------------------------
# The cases. PAIRS: (module, clean, twin, build, distinct sizes, lucky sizes,
# what the clean one is). RELATIONS: (module, fn, build, sizes, relation).
# --------------------------------------------------------------------------

PAIRS = [
    # resnet.py
    (
        R,
        "basic_block",
        "basic_block_no_proj",
        b_basic,
        [S(b=2, h=5, w=7, ci=3, co=6), S(b=2, h=5, w=7, ci=3, co=6, act="gelu")],
        [S(b=2, h=5, w=7, ci=4, co=4), S(b=2, h=5, w=7, ci=4, co=4, act="gelu")],
        "residual block with 1x1 projection shortcut, c_in -> c_out",
    ),
    (
        R,
        "downsample_block",
        "downsample_block_avgpool",
        b_down,
        [S(b=2, h=7, w=9, ci=3, co=5), S(b=2, h=9, w=6, ci=3, co=5)],
        [S(b=2, h=8, w=6, ci=3, co=5), S(b=1, h=4, w=10, ci=2, co=3)],
        "stride-2 residual block, SAME conv and strided 1x1 projection (ceil(h/2))",
    ),
    (
        R,
        "bottleneck",
        "bottleneck_expand_transposed",
        b_bottleneck,
        [S(b=2, h=5, w=6, ci=3, cm=5, co=7)],
        [S(b=2, h=5, w=6, ci=3, cm=6, co=6)],
        "1x1-3x3-1x1 bottleneck with projection shortcut",
    ),
    (
        R,
        "separable_conv",
        "separable_conv_nchw_groups",
        b_sep,
        [S(b=2, h=5, w=7, c=3, k=3, co=4)],
        [S(b=2, h=4, w=7, c=4, k=3, co=5)],
        "depthwise (feature_group_count=c) then pointwise conv",
    ),
    (
        R,
        "classifier_head",
        "classifier_head_pool_axes",
        b_head,
        [S(b=2, h=5, w=7, c=3, n=4)],
        [S(b=2, h=5, w=3, c=3, n=4)],
        "global average pool over H, W and a linear classifier",
    ),
    (
        R,
        "stem",
        "stem_pad2",
        b_stem,
        [S(b=2, h=13, w=11, c=4), S(b=1, h=18, w=15, c=4)],
        [S(b=2, h=16, w=8, c=4), S(b=1, h=12, w=20, c=3)],
        "7x7/2 conv pad 3 then 3x3/2 max-pool pad 1 (ceil(h/4))",
    ),
    # unet.py
    (
        U,
        "down_block",
        "down_block_hw_swapped",
        b_down_unet,
        [S(b=2, h=6, w=10, ci=3, co=5)],
        [S(b=2, h=8, w=8, ci=3, co=5)],
        "conv + 2x2 mean-pool by reshape, returning (pooled, skip); needs even h, w",
    ),
    (
        U,
        "up_block",
        "up_block_resize_hw",
        b_up,
        [S(b=2, h=3, w=5, c=2, s=4, co=6)],
        [S(b=2, h=4, w=4, c=2, s=4, co=6)],
        "nearest 2x upsample, concat skip on channels, conv",
    ),
    (
        U,
        "crop_and_concat",
        "crop_and_concat_square",
        b_crop,
        [
            S(b=2, h=5, w=7, hs=9, ws=11, c=2, s=3),
            S(b=2, h=7, w=5, hs=11, ws=9, c=2, s=3),
        ],
        [S(b=2, h=6, w=6, hs=10, ws=12, c=2, s=3)],
        "centre-crop the larger skip to x's size and concat (needs hs >= h, ws >= w)",
    ),
    (
        U,
        "time_res_block",
        "time_res_block_one_axis",
        b_timeres,
        [S(b=2, h=5, w=7, c=3, e=4)],
        [S(b=3, h=3, w=5, c=4, e=6), S(b=1, h=5, w=7, c=3, e=4)],
        "residual conv block with timestep embedding added per channel",
    ),
    (
        U,
        "attention_gate",
        "attention_gate_squeezed",
        b_gate,
        [S(b=2, h=5, w=7, cx=3, cg=4, ci=6)],
        [S(b=4, h=4, w=4, cx=4, cg=3, ci=5)],
        "additive attention gate scaling skip features",
    ),
    # sequence.py
    (
        Q,
        "lstm",
        "lstm_input_weight_recurrent",
        b_lstm,
        [S(t=5, b=2, d=3, h=4)],
        [S(t=5, b=2, d=4, h=4)],
        "time-major LSTM over lax.scan, gates stacked (4, ., h)",
    ),
    (
        Q,
        "lstm_batch_first",
        "lstm_batch_first_no_swap_back",
        b_lstm_bf,
        [S(b=2, t=5, d=3, h=4)],
        [S(b=3, t=3, d=3, h=4)],
        "batch-major LSTM: swap to time-major for scan and back",
    ),
    (
        Q,
        "diag_ssm",
        "diag_ssm_input_axis",
        b_ssm,
        [S(b=2, t=5, d=3, n=4)],
        [S(b=2, t=5, d=3, n=3)],
        "diagonal S4D recurrence over lax.scan with state (b, d, n)",
    ),
    (
        Q,
        "ssm_fft_conv",
        "ssm_fft_conv_length_axis",
        b_ssm_fft,
        [S(b=2, d=3, l=5, n=4)],
        [S(b=2, d=4, l=4, n=3)],
        "S4D kernel via Vandermonde, causal FFT convolution over length l",
    ),
    (
        Q,
        "causal_conv1d",
        "causal_conv1d_half_pad",
        b_causal,
        [S(b=2, t=7, ci=3, co=5, k=3), S(b=2, t=7, ci=3, co=5, k=5)],
        [S(b=2, t=7, ci=3, co=5, k=2), S(b=2, t=7, ci=3, co=5, k=1)],
        "causal 1-D conv, left padding k-1",
    ),
    (
        Q,
        "wavenet_layer",
        "wavenet_layer_skip_as_res",
        b_wavenet,
        [S(b=2, t=7, c=3, h=4, s=5)],
        [S(b=2, t=7, c=3, h=4, s=3)],
        "WaveNet gated dilated causal layer with residual and skip outputs",
    ),
    # attention.py
    (
        A,
        "cross_attention",
        "cross_attention_query_len",
        b_cross,
        [S(b=2, q=5, k=7, d=8, e=6)],
        [S(b=2, q=5, k=5, d=8, e=6)],
        "multi-head cross-attention, query length != key length (heads divide d)",
    ),
    (
        A,
        "masked_cross_attention",
        "masked_cross_attention_mask_axis",
        b_cross_mask,
        [S(b=2, q=5, k=7, d=8, e=6)],
        [S(b=2, q=6, k=6, d=8, e=6)],
        "cross-attention with a key padding mask, heads-first layout (heads divide d)",
    ),
    (
        A,
        "alibi_attention",
        "alibi_attention_slope_axis",
        b_alibi,
        [S(b=2, t=7, d=8), S(b=2, t=7, d=8, causal=False)],
        [S(b=2, t=4, d=8), S(b=2, t=4, d=8, causal=False)],
        "causal self-attention with ALiBi per-head distance bias (heads divide d)",
    ),
    (
        A,
        "t5_scores",
        "t5_scores_bias_transposed",
        b_t5,
        [S(b=2, h=3, q=5, k=7, dk=4, nb=6)],
        [S(b=2, h=3, q=5, k=5, dk=4, nb=6)],
        "q.k scores plus T5 relative position bias (h, q, k)",
    ),
    (
        A,
        "fused_attention",
        "fused_attention_value_layout",
        b_fused,
        [S(b=2, t=7, d=8)],
        [S(b=2, t=4, d=8)],
        "self-attention with a stacked (3, d, d) QKV projection (heads divide d)",
    ),
    # moe.py
    (
        M,
        "moe_dense_topk",
        "moe_dense_topk_onehot_depth",
        b_moe_btd,
        [S(b=2, t=3, d=5, e=4, f=6)],
        [S(b=2, t=3, d=5, e=2, f=6)],
        "dense MoE with renormalised top-k gates",
    ),
    (
        M,
        "switch_ffn",
        "switch_ffn_dispatch_axes",
        b_moe_nd,
        [S(n=15, d=5, e=3, f=4), S(n=12, d=5, e=3, f=4)],
        [S(n=16, d=5, e=4, f=6)],
        "Switch top-1 routing with capacity n/e, einsum dispatch and combine",
    ),
    (
        M,
        "load_balancing_loss",
        "load_balancing_loss_token_mean",
        b_lb,
        [S(n=7, e=4)],
        [S(n=4, e=4)],
        "Switch auxiliary load-balancing loss",
    ),
    (
        M,
        "expert_choice_ffn",
        "expert_choice_ffn_no_transpose",
        b_moe_nd,
        [S(n=15, d=5, e=3, f=4), S(n=9, d=5, e=6, f=4)],
        [S(n=4, d=5, e=4, f=6)],
        "expert-choice routing: each expert takes its top-c tokens, scatter-add back",
    ),
    (
        M,
        "top1_moe",
        "top1_moe_gate_broadcast",
        b_moe_btd,
        [S(b=2, t=3, d=5, e=4, f=6)],
        [S(b=2, t=4, d=8, e=3, f=5)],
        "top-1 MoE with per-token gathered expert weights",
    ),
    # losses.py
    (
        L,
        "clip_loss",
        "clip_loss_no_transpose",
        b_clip,
        [S(n=5, di=3, dt=4, e=6)],
        [S(n=5, di=3, dt=4, e=5)],
        "CLIP symmetric contrastive loss",
    ),
    (
        L,
        "siglip_loss",
        "siglip_loss_norm_keepdims",
        b_siglip,
        [S(n=5, d=3)],
        [S(n=4, d=4)],
        "SigLIP pairwise sigmoid loss",
    ),
    (
        L,
        "tied_lm_loss",
        "tied_lm_loss_untransposed",
        b_tied,
        [S(v=11, d=6, b=2, t=5)],
        [S(v=8, d=8, b=2, t=5)],
        "tied-embedding LM next-token loss with Int tokens",
    ),
    (
        L,
        "label_smoothing_ce",
        "label_smoothing_ce_batch_classes",
        b_ls,
        [S(b=4, c=7)],
        [S(b=5, c=5)],
        "label-smoothed cross entropy per example",
    ),
    (
        L,
        "info_nce",
        "info_nce_concat_batch",
        b_nce,
        [S(b=3, k=5, d=4)],
        [S(b=3, k=1, d=4)],
        "InfoNCE with one positive and k negatives",
    ),
    (
        L,
        "masked_mean_pool",
        "masked_mean_pool_count_axis",
        b_pool,
        [S(b=2, t=5, d=3)],
        [S(b=3, t=5, d=3), S(b=1, t=5, d=3)],
        "masked mean pooling of token states",
    ),
    # gnn.py
    (
        G,
        "gcn_layer",
        "gcn_layer_edge_count",
        b_gcn,
        [S(n=5, e=9, d=3, f=2, h=4)],
        [S(n=6, e=6, d=3, f=2, h=4)],
        "GCN layer, mean aggregation with segment_sum",
    ),
    (
        G,
        "gat_layer",
        "gat_layer_alpha_broadcast",
        b_gat,
        [S(n=5, e=9, d=3, f=2, h=4)],
        [S(n=5, e=7, d=3, f=2, h=7)],
        "graph attention with segment softmax",
    ),
    (
        G,
        "edge_update",
        "edge_update_ungathered",
        b_edge,
        [S(n=5, e=9, d=3, f=2, h=4)],
        [S(n=6, e=6, d=3, f=2, h=4)],
        "interaction-network edge MLP over [sender, receiver, edge]",
    ),
    (
        G,
        "graph_regression_loss",
        "graph_regression_loss_counts",
        b_readout,
        [S(n=9, d=3, c=2, g=4)],
        [S(n=9, d=3, c=2, g=3), S(n=9, d=3, c=2, g=1)],
        "mean readout per graph and MSE regression loss",
    ),
    # norms.py
    (
        N,
        "rms_norm",
        "rms_norm_no_keepdims",
        b_rms,
        [S(batch=(3, 5), d=7), S(batch=(3,), d=7)],
        [S(batch=(4,), d=4), S(batch=(1,), d=5)],
        "RMSNorm over the last axis, *batch leading axes",
    ),
    (
        N,
        "layer_norm_nchw",
        "layer_norm_nchw_last_axis_affine",
        b_ln_nchw,
        [S(b=2, c=3, h=5, w=7)],
        [S(b=2, c=3, h=5, w=3)],
        "channels-first LayerNorm (ConvNeXt)",
    ),
    (
        N,
        "batch_norm_train",
        "batch_norm_train_reduce_axes",
        b_bn,
        [S(b=2, h=3, w=5, c=3)],
        [S(b=2, h=3, w=4, c=4)],
        "train-mode batch norm returning the updated running mean",
    ),
    (
        N,
        "FeedForward",
        "FeedForwardDownOnInput",
        b_ff,
        [S(t=5, d=6, hidden=10)],
        [S(t=5, d=6, hidden=6)],
        "Equinox pre-norm MLP block, eqx.nn layers built in __init__",
    ),
    (
        N,
        "AdaLayerNorm",
        "AdaLayerNormNoTimeAxis",
        b_ada,
        [S(b=2, t=5, d=6, cd=3)],
        [S(b=1, t=5, d=6, cd=3), S(b=3, t=3, d=6, cd=4)],
        "Flax NNX adaptive LayerNorm (shift/scale from a condition)",
    ),
]

RELATIONS = [
    (
        R,
        "grouped_conv",
        b_grouped,
        [
            S(b=2, h=5, w=7, ci=8, cg=2, co=12, groups=4),
            S(b=2, h=5, w=7, ci=9, cg=3, co=6, groups=3),
        ],
        "c_in == groups * c_g and groups divides c_out",
    ),
    (
        Q,
        "merge_token_pairs",
        b_merge,
        [S(b=2, t=6, d=3, m=6, e=5), S(b=3, t=10, d=7, m=14, e=4)],
        "t even and m == 2*d",
    ),
    (
        A,
        "local_window_attention",
        b_local,
        [S(b=2, t=8, d=6, window=4, heads=2), S(b=3, t=12, d=10, window=4, heads=2)],
        "window divides t and heads divide d",
    ),
    (
        M,
        "grouped_expert_ffn",
        b_moe_nd,
        [S(n=12, d=5, e=3, f=7), S(n=20, d=3, e=4, f=6)],
        "num_experts divides n",
    ),
    (
        N,
        "group_rms_norm",
        b_grms,
        [S(b=2, t=5, d=8, groups=4), S(b=3, t=7, d=9, groups=3)],
        "groups divides d",
    ),
]

METHOD_CLASSES = {
    "FeedForward",
    "FeedForwardDownOnInput",
    "AdaLayerNorm",
    "AdaLayerNormNoTimeAxis",
}
