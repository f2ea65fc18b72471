"""A ViT's patch embedding on one image (channels first): by a strided
convolution, or by cutting the image into patches with reshapes and applying
the same kernel as a matrix; then a class token and learned position
embeddings. The patch size `p` is the kernel's. Twins with one planted bug
are marked `# BUG: kind`."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

import treespec


class PatchEmbed(eqx.Module):
    kernel: Float[Array, "d c p p"]
    bias: Float[Array, " d"]


class ViTEmbed(eqx.Module):
    patch: PatchEmbed
    cls_token: Float[Array, "1 d"]
    # One per patch of the training images, and one for the class token.
    pos_embed: Float[Array, "n d"]


@treespec.jit
def patch_embed_conv(
    pe: PatchEmbed, x: Float[Array, "c h w"]
) -> Float[Array, "(h//p)*(w//p) d"]:
    p = pe.kernel.shape[-1]
    y = jax.lax.conv_general_dilated(x[None], pe.kernel, (p, p), "VALID")[0]
    return y.reshape(y.shape[0], -1).T + pe.bias


@treespec.jit
def patch_embed_conv_layout(
    pe: PatchEmbed, x: Float[Array, "c h w"]
) -> Float[Array, "(h//p)*(w//p) d"]:
    p = pe.kernel.shape[-1]
    y = jax.lax.conv_general_dilated(x[None], pe.kernel, (p, p), "VALID")[0]
    return y.reshape(y.shape[0], -1) + pe.bias  # BUG: patches left on the last axis


@treespec.jit
def patch_embed(
    pe: PatchEmbed, x: Float[Array, "c h w"]
) -> Float[Array, "(h//p)*(w//p) d"]:
    c, h, w = x.shape
    d, _, p, _ = pe.kernel.shape
    patches = x.reshape(c, h // p, p, w // p, p)
    patches = patches.transpose(1, 3, 0, 2, 4).reshape(-1, c * p * p)
    return patches @ pe.kernel.reshape(d, -1).T + pe.bias


@treespec.jit
def patch_embed_square(
    pe: PatchEmbed, x: Float[Array, "c h w"]
) -> Float[Array, "(h//p)*(w//p) d"]:
    c, h, w = x.shape  # noqa: RUF059 (the bug's)
    d, _, p, _ = pe.kernel.shape
    patches = x.reshape(c, h // p, p, h // p, p)  # BUG: h for w (square images)
    patches = patches.transpose(1, 3, 0, 2, 4).reshape(-1, c * p * p)
    return patches @ pe.kernel.reshape(d, -1).T + pe.bias


@treespec.jit
def vit_embed(vit: ViTEmbed, x: Float[Array, "c h w"]) -> Float[Array, "n d"]:
    kernel = vit.patch.kernel
    p = kernel.shape[-1]
    y = jax.lax.conv_general_dilated(x[None], kernel, (p, p), "VALID")[0]
    tokens = y.reshape(y.shape[0], -1).T + vit.patch.bias
    tokens = jnp.concatenate([vit.cls_token, tokens], axis=0)
    return tokens + vit.pos_embed


@treespec.jit
def vit_embed_same(vit: ViTEmbed, x: Float[Array, "c h w"]) -> Float[Array, "n d"]:
    kernel = vit.patch.kernel
    p = kernel.shape[-1]
    y = jax.lax.conv_general_dilated(x[None], kernel, (p, p), "SAME")[0]
    tokens = y.reshape(y.shape[0], -1).T + vit.patch.bias
    tokens = jnp.concatenate([vit.cls_token, tokens], axis=0)
    return tokens + vit.pos_embed  # BUG: SAME padding adds partial patches
