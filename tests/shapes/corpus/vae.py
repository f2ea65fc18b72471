"""A variational autoencoder on flat inputs, its parameters in a TypedDict:
an encoder to a mean and a log-variance, the reparameterisation trick with a
PRNG key, a decoder, and the negative ELBO (an analytic KL, or a Monte Carlo
one). Twins with one planted bug are marked `# BUG: kind`."""

from __future__ import annotations

from typing import TypedDict

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Key, PRNGKeyArray

import treespec
from treespec import Static


class VAEParams(TypedDict):
    enc_w: Float[Array, "n hidden"]
    enc_b: Float[Array, " hidden"]
    enc_out_w: Float[Array, "hidden 2*latent"]
    enc_out_b: Float[Array, " 2*latent"]
    dec_w: Float[Array, "latent hidden"]
    dec_b: Float[Array, " hidden"]
    dec_out_w: Float[Array, "hidden n"]
    dec_out_b: Float[Array, " n"]


@treespec.jit
def encode(
    params: VAEParams, x: Float[Array, "b n"]
) -> tuple[Float[Array, "b latent"], Float[Array, "b latent"]]:
    h = jax.nn.relu(x @ params["enc_w"] + params["enc_b"])
    out = h @ params["enc_out_w"] + params["enc_out_b"]
    mean, logvar = jnp.split(out, 2, axis=-1)
    return mean, logvar


@treespec.jit
def encode_bias(
    params: VAEParams, x: Float[Array, "b n"]
) -> tuple[Float[Array, "b latent"], Float[Array, "b latent"]]:
    h = jax.nn.relu(x @ params["enc_w"] + params["enc_b"])
    out = h @ params["enc_out_w"] + params["dec_out_b"]  # BUG: bias of the wrong width
    mean, logvar = jnp.split(out, 2, axis=-1)
    return mean, logvar


@treespec.jit
def reparameterize(
    key: PRNGKeyArray, mean: Float[Array, "b latent"], logvar: Float[Array, "b latent"]
) -> Float[Array, "b latent"]:
    eps = jax.random.normal(key, mean.shape)
    return mean + jnp.exp(0.5 * logvar) * eps


@treespec.jit
def reparameterize_noise(
    key: PRNGKeyArray, mean: Float[Array, "b latent"], logvar: Float[Array, "b latent"]
) -> Float[Array, "b latent"]:
    batch, latent = mean.shape
    eps = jax.random.normal(key, (latent, batch))
    return mean + jnp.exp(0.5 * logvar) * eps  # BUG: noise drawn transposed


@treespec.jit
def decode(params: VAEParams, z: Float[Array, "b latent"]) -> Float[Array, "b n"]:
    h = jax.nn.relu(z @ params["dec_w"] + params["dec_b"])
    return h @ params["dec_out_w"] + params["dec_out_b"]


@treespec.jit
def decode_transposed(
    params: VAEParams, z: Float[Array, "b latent"]
) -> Float[Array, "b n"]:
    h = jax.nn.relu(z @ params["dec_w"].T + params["dec_b"])  # BUG: transposed weight
    return h @ params["dec_out_w"] + params["dec_out_b"]


@treespec.jit
def negative_elbo(
    params: VAEParams,
    key: Key[Array, ""],
    x: Float[Array, "b n"],
    monte_carlo_kl: Static[bool] = False,
) -> Float[Array, ""]:
    mean, logvar = encode(params, x)
    z = reparameterize(key, mean, logvar)
    x_hat = decode(params, z)
    recon = jnp.sum((x - x_hat) ** 2, axis=-1)
    if monte_carlo_kl:
        std = jnp.exp(0.5 * logvar)
        log_q = jax.scipy.stats.norm.logpdf(z, mean, std).sum(axis=-1)
        log_p = jax.scipy.stats.norm.logpdf(z).sum(axis=-1)
        kl = log_q - log_p
    else:
        terms = 1 + logvar - mean**2 - jnp.exp(logvar)
        kl = -0.5 * jnp.sum(terms, axis=-1)
    # KL per latent dimension, so that the weight of the two terms does not
    # change with the latent size.
    return jnp.mean(recon + kl / float(mean.shape[-1]))


@treespec.jit
def negative_elbo_kl_axis(
    params: VAEParams,
    key: Key[Array, ""],
    x: Float[Array, "b n"],
    monte_carlo_kl: Static[bool] = False,
) -> Float[Array, ""]:
    mean, logvar = encode(params, x)
    z = reparameterize(key, mean, logvar)
    x_hat = decode(params, z)
    recon = jnp.sum((x - x_hat) ** 2, axis=-1)
    if monte_carlo_kl:
        std = jnp.exp(0.5 * logvar)
        log_q = jax.scipy.stats.norm.logpdf(z, mean, std).sum(axis=-1)
        log_p = jax.scipy.stats.norm.logpdf(z).sum(axis=-1)
        kl = log_q - log_p
    else:
        terms = 1 + logvar - mean**2 - jnp.exp(logvar)
        kl = -0.5 * jnp.sum(terms, axis=0)
    return jnp.mean(recon + kl / float(mean.shape[-1]))  # BUG: KL summed over batch


@treespec.jit
def negative_elbo_mc(
    params: VAEParams,
    key: Key[Array, ""],
    x: Float[Array, "b n"],
    monte_carlo_kl: Static[bool] = False,
) -> Float[Array, ""]:
    mean, logvar = encode(params, x)
    z = reparameterize(key, mean, logvar)
    x_hat = decode(params, z)
    recon = jnp.sum((x - x_hat) ** 2, axis=-1)
    if monte_carlo_kl:
        std = jnp.exp(0.5 * logvar)
        log_q = jax.scipy.stats.norm.logpdf(z, mean, std).sum(axis=0)
        log_p = jax.scipy.stats.norm.logpdf(z).sum(axis=-1)
        kl = log_q - log_p  # BUG: log q summed over the batch
    else:
        terms = 1 + logvar - mean**2 - jnp.exp(logvar)
        kl = -0.5 * jnp.sum(terms, axis=-1)
    return jnp.mean(recon + kl / float(mean.shape[-1]))
