"""Recurrent and convolutional sequence models in plain JAX: an LSTM over
lax.scan (time-major and batch-major), a diagonal state-space layer (S4D /
Mamba-style linear recurrence, and its FFT convolution form), a causal 1-D
conv for time series, a WaveNet gated layer and a token-merging layer."""

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Float

import treespec
from treespec import Static

# --------------------------------------------------------------------------
# LSTM, gates stacked on a leading axis of 4 (i, f, g, o)
# --------------------------------------------------------------------------


class LSTM(eqx.Module):
    w_ih: Float[Array, "4 d h"]
    w_hh: Float[Array, "4 h h"]
    bias: Float[Array, "4 h"]


@treespec.jit
def lstm(
    p: LSTM,
    xs: Float[Array, "t b d"],
    h0: Float[Array, "b h"],
    c0: Float[Array, "b h"],
) -> Float[Array, "t b h"]:
    def step(carry, x_t):
        h, c = carry
        z = (
            jnp.einsum("bd,gdh->gbh", x_t, p.w_ih)
            + jnp.einsum("bh,ghk->gbk", h, p.w_hh)
            + p.bias[:, None, :]
        )
        i, f, g, o = z[0], z[1], z[2], z[3]
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return (h, c), h

    _, hs = lax.scan(step, (h0, c0), xs)
    return hs


@treespec.jit
def lstm_input_weight_recurrent(
    p: LSTM,
    xs: Float[Array, "t b d"],
    h0: Float[Array, "b h"],
    c0: Float[Array, "b h"],
) -> Float[Array, "t b h"]:
    def step(carry, x_t):
        h, c = carry
        z = (
            jnp.einsum("bd,gdh->gbh", x_t, p.w_ih)
            + jnp.einsum("bh,ghk->gbk", h, p.w_ih)  # BUG: recurrent term uses the input weight w_ih
            + p.bias[:, None, :]
        )
        i, f, g, o = z[0], z[1], z[2], z[3]
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return (h, c), h

    _, hs = lax.scan(step, (h0, c0), xs)
    return hs


def _lstm_cell(p, carry, x_t):
    h, c = carry
    z = (
        jnp.einsum("bd,gdh->gbh", x_t, p.w_ih)
        + jnp.einsum("bh,ghk->gbk", h, p.w_hh)
        + p.bias[:, None, :]
    )
    c = jax.nn.sigmoid(z[1]) * c + jax.nn.sigmoid(z[0]) * jnp.tanh(z[2])
    h = jax.nn.sigmoid(z[3]) * jnp.tanh(c)
    return (h, c), h


@treespec.jit
def lstm_batch_first(p: LSTM, xs: Float[Array, "b t d"]) -> Float[Array, "b t h"]:
    b = xs.shape[0]
    hidden = p.w_hh.shape[-1]
    carry = (jnp.zeros((b, hidden)), jnp.zeros((b, hidden)))
    _, hs = lax.scan(lambda c, x: _lstm_cell(p, c, x), carry, jnp.swapaxes(xs, 0, 1))
    return jnp.swapaxes(hs, 0, 1)


@treespec.jit
def lstm_batch_first_no_swap_back(p: LSTM, xs: Float[Array, "b t d"]) -> Float[Array, "b t h"]:
    b = xs.shape[0]
    hidden = p.w_hh.shape[-1]
    carry = (jnp.zeros((b, hidden)), jnp.zeros((b, hidden)))
    _, hs = lax.scan(lambda c, x: _lstm_cell(p, c, x), carry, jnp.swapaxes(xs, 0, 1))
    return hs  # BUG: scan output is time-major; never swapped back to (b, t, h)


# --------------------------------------------------------------------------
# Diagonal SSM (S4D): x_t -> h_t = a_bar * h_{t-1} + b_bar * x_t, y = <c, h> + D x
# --------------------------------------------------------------------------


class DiagSSM(eqx.Module):
    log_neg_a: Float[Array, "d n"]
    b: Float[Array, "d n"]
    c: Float[Array, "d n"]
    skip: Float[Array, " d"]
    log_dt: Float[Array, " d"]


@treespec.jit
def diag_ssm(p: DiagSSM, x: Float[Array, "b t d"]) -> Float[Array, "b t d"]:
    dt = jnp.exp(p.log_dt)[:, None]
    a_bar = jnp.exp(-jnp.exp(p.log_neg_a) * dt)
    b_bar = p.b * dt

    def step(h, x_t):
        h = a_bar * h + b_bar * x_t[..., None]
        y = jnp.einsum("bdn,dn->bd", h, p.c) + p.skip * x_t
        return h, y

    h0 = jnp.zeros((x.shape[0],) + p.b.shape)
    _, ys = lax.scan(step, h0, jnp.swapaxes(x, 0, 1))
    return jnp.swapaxes(ys, 0, 1)


@treespec.jit
def diag_ssm_input_axis(p: DiagSSM, x: Float[Array, "b t d"]) -> Float[Array, "b t d"]:
    dt = jnp.exp(p.log_dt)[:, None]
    a_bar = jnp.exp(-jnp.exp(p.log_neg_a) * dt)
    b_bar = p.b * dt

    def step(h, x_t):
        h = a_bar * h + b_bar * x_t[:, None]  # BUG: input expanded on the wrong axis, (b,1,d) against (d,n)
        y = jnp.einsum("bdn,dn->bd", h, p.c) + p.skip * x_t
        return h, y

    h0 = jnp.zeros((x.shape[0],) + p.b.shape)
    _, ys = lax.scan(step, h0, jnp.swapaxes(x, 0, 1))
    return jnp.swapaxes(ys, 0, 1)


# --------------------------------------------------------------------------
# The same SSM as a long convolution, computed with an FFT (channels-first)
# --------------------------------------------------------------------------


@treespec.jit
def ssm_fft_conv(p: DiagSSM, u: Float[Array, "b d l"]) -> Float[Array, "b d l"]:
    l = u.shape[-1]
    dt = jnp.exp(p.log_dt)[:, None]
    dt_a = -jnp.exp(p.log_neg_a) * dt
    vandermonde = jnp.exp(dt_a[..., None] * jnp.arange(l))
    kernel = jnp.einsum("dn,dnl->dl", p.c * p.b * dt, vandermonde)
    k_f = jnp.fft.rfft(kernel, n=2 * l)
    u_f = jnp.fft.rfft(u, n=2 * l)
    y = jnp.fft.irfft(u_f * k_f, n=2 * l)[..., :l]
    return y + p.skip[:, None] * u


@treespec.jit
def ssm_fft_conv_length_axis(p: DiagSSM, u: Float[Array, "b d l"]) -> Float[Array, "b d l"]:
    l = u.shape[1]  # BUG: length read from axis 1 (channels-last habit); that is d here
    dt = jnp.exp(p.log_dt)[:, None]
    dt_a = -jnp.exp(p.log_neg_a) * dt
    vandermonde = jnp.exp(dt_a[..., None] * jnp.arange(l))
    kernel = jnp.einsum("dn,dnl->dl", p.c * p.b * dt, vandermonde)
    k_f = jnp.fft.rfft(kernel, n=2 * l)
    u_f = jnp.fft.rfft(u, n=2 * l)
    y = jnp.fft.irfft(u_f * k_f, n=2 * l)[..., :l]
    return y + p.skip[:, None] * u


# --------------------------------------------------------------------------
# Causal 1-D conv for forecasting: left-pad by k-1, VALID conv
# --------------------------------------------------------------------------


@treespec.jit
def causal_conv1d(
    x: Float[Array, "b t c_in"], kernel: Float[Array, "k c_in c_out"]
) -> Float[Array, "b t c_out"]:
    k = kernel.shape[0]
    x = jnp.pad(x, ((0, 0), (k - 1, 0), (0, 0)))
    return lax.conv_general_dilated(
        x, kernel, (1,), "VALID", dimension_numbers=("NWC", "WIO", "NWC")
    )


@treespec.jit
def causal_conv1d_half_pad(
    x: Float[Array, "b t c_in"], kernel: Float[Array, "k c_in c_out"]
) -> Float[Array, "b t c_out"]:
    k = kernel.shape[0]
    x = jnp.pad(x, ((0, 0), (k // 2, 0), (0, 0)))  # BUG: 'same'-style k//2 padding, causal needs k-1
    return lax.conv_general_dilated(
        x, kernel, (1,), "VALID", dimension_numbers=("NWC", "WIO", "NWC")
    )


# --------------------------------------------------------------------------
# WaveNet residual layer: dilated causal conv (kernel 2), gated, res + skip
# --------------------------------------------------------------------------


class WaveNetLayer(eqx.Module):
    w_filter: Float[Array, "2 c h"]
    w_gate: Float[Array, "2 c h"]
    w_res: Float[Array, "h c"]
    w_skip: Float[Array, "h s"]


def _dilated(x, kernel, dilation):
    return lax.conv_general_dilated(
        x,
        kernel,
        window_strides=(1,),
        padding="VALID",
        rhs_dilation=(dilation,),
        dimension_numbers=("NWC", "WIO", "NWC"),
    )


@treespec.jit
def wavenet_layer(
    p: WaveNetLayer, x: Float[Array, "b t c"], dilation: Static[int] = 2
) -> tuple[Float[Array, "b t c"], Float[Array, "b t s"]]:
    xp = jnp.pad(x, ((0, 0), (dilation, 0), (0, 0)))
    z = jnp.tanh(_dilated(xp, p.w_filter, dilation)) * jax.nn.sigmoid(
        _dilated(xp, p.w_gate, dilation)
    )
    return x + z @ p.w_res, z @ p.w_skip


@treespec.jit
def wavenet_layer_skip_as_res(
    p: WaveNetLayer, x: Float[Array, "b t c"], dilation: Static[int] = 2
) -> tuple[Float[Array, "b t c"], Float[Array, "b t s"]]:
    xp = jnp.pad(x, ((0, 0), (dilation, 0), (0, 0)))
    z = jnp.tanh(_dilated(xp, p.w_filter, dilation)) * jax.nn.sigmoid(
        _dilated(xp, p.w_gate, dilation)
    )
    return x + z @ p.w_skip, z @ p.w_skip  # BUG: residual branch projected with the skip weight (s channels)


# --------------------------------------------------------------------------
# Relation-only: merge neighbouring tokens (t even, m == 2*d)
# --------------------------------------------------------------------------


@treespec.jit
def merge_token_pairs(
    x: Float[Array, "b t d"], w: Float[Array, "m e"]
) -> Float[Array, "b t//2 e"]:
    b, t, d = x.shape
    return x.reshape(b, t // 2, 2 * d) @ w
