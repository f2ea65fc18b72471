"""A diffusion sampler step (DDPM), timestep embeddings, FiLM conditioning, and a mixture-density head."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

import treespec
from treespec import Static

# ---------------------------------------------------------------- relation


@treespec.jit
def timestep_embedding(t: Float[Array, " b"], w: Float[Array, "e d"], max_period: Static[float] = 10000.0) -> Float[Array, "b d"]:
    """Sinusoidal embedding of width e, then a projection (e must be even)."""
    half = w.shape[0] // 2
    freqs = jnp.exp(-jnp.log(max_period) * jnp.arange(half) / half)
    args = t[:, None] * freqs[None]
    emb = jnp.concatenate([jnp.sin(args), jnp.cos(args)], axis=-1)
    return emb @ w


# ---------------------------------------------------------------- DDPM ancestral step


@treespec.jit
def ddpm_step(
    x: Float[Array, "b h w c"],
    eps: Float[Array, "b h w c"],
    noise: Float[Array, "b h w c"],
    t: Int[Array, " b"],
    betas: Float[Array, " n"],
) -> Float[Array, "b h w c"]:
    alphas = 1.0 - betas
    abar = jnp.cumprod(alphas)
    a_t = alphas[t][:, None, None, None]
    ab_t = abar[t][:, None, None, None]
    mean = (x - (1 - a_t) / jnp.sqrt(1 - ab_t) * eps) / jnp.sqrt(a_t)
    sigma = jnp.sqrt(betas[t])[:, None, None, None]
    return mean + jnp.where(t[:, None, None, None] > 0, sigma, 0.0) * noise


@treespec.jit
def ddpm_step_bug(
    x: Float[Array, "b h w c"],
    eps: Float[Array, "b h w c"],
    noise: Float[Array, "b h w c"],
    t: Int[Array, " b"],
    betas: Float[Array, " n"],
) -> Float[Array, "b h w c"]:
    alphas = 1.0 - betas
    abar = jnp.cumprod(alphas)
    a_t = alphas[t][:, None, None]  # BUG: one axis short, the per-example coefficient lines up with the height axis
    ab_t = abar[t][:, None, None, None]
    mean = (x - (1 - a_t) / jnp.sqrt(1 - ab_t) * eps) / jnp.sqrt(a_t)
    sigma = jnp.sqrt(betas[t])[:, None, None, None]
    return mean + jnp.where(t[:, None, None, None] > 0, sigma, 0.0) * noise


# ---------------------------------------------------------------- learned-frequency embedding + MLP


@treespec.jit
def time_mlp(t: Float[Array, " b"], freqs: Float[Array, " k"], w: Float[Array, "2*k d"]) -> Float[Array, "b d"]:
    args = t[:, None] * freqs[None, :]
    emb = jnp.concatenate([jnp.sin(args), jnp.cos(args)], axis=-1)
    return jax.nn.silu(emb @ w)


@treespec.jit
def time_mlp_bug(t: Float[Array, " b"], freqs: Float[Array, " k"], w: Float[Array, "2*k d"]) -> Float[Array, "b d"]:
    args = t[None, :] * freqs[:, None]  # BUG: outer product in the wrong order (k, b)
    emb = jnp.concatenate([jnp.sin(args), jnp.cos(args)], axis=-1)
    return jax.nn.silu(emb @ w)


# ---------------------------------------------------------------- FiLM conditioning


@treespec.jit
def film_condition(x: Float[Array, "b n d"], t_emb: Float[Array, "b e"], w_film: Float[Array, "e 2 d"]) -> Float[Array, "b n d"]:
    scale, shift = jnp.einsum("be,esd->sbd", t_emb, w_film)
    return x * (1 + scale[:, None]) + shift[:, None]


@treespec.jit
def film_condition_bug(x: Float[Array, "b n d"], t_emb: Float[Array, "b e"], w_film: Float[Array, "e 2 d"]) -> Float[Array, "b n d"]:
    scale, shift = jnp.einsum("be,esd->sbd", t_emb, w_film)
    return x * (1 + scale[None]) + shift[:, None]  # BUG: scale broadcast over the batch, not the tokens


# ---------------------------------------------------------------- denoising loss


@treespec.jit
def denoise_loss(
    x0: Float[Array, "b n"],
    noise: Float[Array, "b n"],
    t: Int[Array, " b"],
    abar: Float[Array, " s"],
    w: Float[Array, "n n"],
    weights: Float[Array, " s"],
) -> Float[Array, ""]:
    a = abar[t][:, None]
    xt = jnp.sqrt(a) * x0 + jnp.sqrt(1 - a) * noise
    per_example = ((xt @ w - noise) ** 2).mean(axis=1)
    return (per_example * weights[t]).mean()


@treespec.jit
def denoise_loss_bug(
    x0: Float[Array, "b n"],
    noise: Float[Array, "b n"],
    t: Int[Array, " b"],
    abar: Float[Array, " s"],
    w: Float[Array, "n n"],
    weights: Float[Array, " s"],
) -> Float[Array, ""]:
    a = abar[t][:, None]
    xt = jnp.sqrt(a) * x0 + jnp.sqrt(1 - a) * noise
    per_example = ((xt @ w - noise) ** 2).mean(axis=0)  # BUG: mean over the batch instead of the features
    return (per_example * weights[t]).mean()


# ---------------------------------------------------------------- mixture-density head


@treespec.jit
def mdn_nll(
    h: Float[Array, "b d"],
    w_pi: Float[Array, "d k"],
    w_mu: Float[Array, "d k o"],
    w_sigma: Float[Array, "d k o"],
    y: Float[Array, "b o"],
) -> Float[Array, ""]:
    log_pi = jax.nn.log_softmax(h @ w_pi, axis=-1)
    mu = jnp.einsum("bd,dko->bko", h, w_mu)
    log_sigma = jnp.einsum("bd,dko->bko", h, w_sigma)
    z = (y[:, None, :] - mu) * jnp.exp(-log_sigma)
    comp = -0.5 * (z**2).sum(-1) - log_sigma.sum(-1) - 0.5 * y.shape[-1] * jnp.log(2 * jnp.pi)
    return -jax.nn.logsumexp(log_pi + comp, axis=-1).mean()


@treespec.jit
def mdn_nll_bug(
    h: Float[Array, "b d"],
    w_pi: Float[Array, "d k"],
    w_mu: Float[Array, "d k o"],
    w_sigma: Float[Array, "d k o"],
    y: Float[Array, "b o"],
) -> Float[Array, ""]:
    log_pi = jax.nn.log_softmax(h @ w_pi, axis=-1)
    mu = jnp.einsum("bd,dko->bko", h, w_mu)
    log_sigma = jnp.einsum("bd,dko->bko", h, w_sigma)
    z = (y[:, :, None] - mu) * jnp.exp(-log_sigma)  # BUG: targets expanded on the wrong axis
    comp = -0.5 * (z**2).sum(-1) - log_sigma.sum(-1) - 0.5 * y.shape[-1] * jnp.log(2 * jnp.pi)
    return -jax.nn.logsumexp(log_pi + comp, axis=-1).mean()
