"""U-Net pieces (NHWC): pooling down-block, upsampling up-block with skip
concatenation, valid-conv crop-and-concat, timestep-conditioned residual
block and an attention gate (Attention U-Net)."""

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Float

import treespec


def conv2d(x, kernel, padding="SAME"):
    return lax.conv_general_dilated(
        x, kernel, (1, 1), padding, dimension_numbers=("NHWC", "HWIO", "NHWC")
    )


# --------------------------------------------------------------------------
# Down block: conv, keep the skip, 2x2 mean-pool by reshape
# --------------------------------------------------------------------------


@treespec.jit
def down_block(
    x: Float[Array, "b h w c_in"], kernel: Float[Array, "3 3 c_in c_out"]
) -> tuple[Float[Array, "b h//2 w//2 c_out"], Float[Array, "b h w c_out"]]:
    skip = jax.nn.silu(conv2d(x, kernel))
    b, h, w, c = skip.shape
    down = skip.reshape(b, h // 2, 2, w // 2, 2, c).mean(axis=(2, 4))
    return down, skip


@treespec.jit
def down_block_hw_swapped(
    x: Float[Array, "b h w c_in"], kernel: Float[Array, "3 3 c_in c_out"]
) -> tuple[Float[Array, "b h//2 w//2 c_out"], Float[Array, "b h w c_out"]]:
    skip = jax.nn.silu(conv2d(x, kernel))
    b, h, w, c = skip.shape
    down = skip.reshape(b, w // 2, 2, h // 2, 2, c).mean(axis=(2, 4))  # BUG: h and w swapped in the pooling reshape
    return down, skip


# --------------------------------------------------------------------------
# Up block: nearest 2x upsample, concat skip on channels, conv
# --------------------------------------------------------------------------


class UpBlock(eqx.Module):
    kernel: Float[Array, "3 3 c+s c_out"]


@treespec.jit
def up_block(
    x: Float[Array, "b h w c"], skip: Float[Array, "b 2*h 2*w s"], p: UpBlock
) -> Float[Array, "b 2*h 2*w c_out"]:
    b, h, w, c = x.shape
    up = jax.image.resize(x, (b, 2 * h, 2 * w, c), method="nearest")
    y = jnp.concatenate([up, skip], axis=-1)
    return jax.nn.silu(conv2d(y, p.kernel))


@treespec.jit
def up_block_resize_hw(
    x: Float[Array, "b h w c"], skip: Float[Array, "b 2*h 2*w s"], p: UpBlock
) -> Float[Array, "b 2*h 2*w c_out"]:
    b, h, w, c = x.shape
    up = jax.image.resize(x, (b, 2 * w, 2 * h, c), method="nearest")  # BUG: target size written (w, h)
    y = jnp.concatenate([up, skip], axis=-1)
    return jax.nn.silu(conv2d(y, p.kernel))


# --------------------------------------------------------------------------
# Original U-Net (valid convs): centre-crop the larger skip, then concat
# --------------------------------------------------------------------------


@treespec.jit
def crop_and_concat(
    x: Float[Array, "b h w c"], skip: Float[Array, "b hs ws s"]
) -> Float[Array, "b h w c+s"]:
    h, w = x.shape[1], x.shape[2]
    dh = (skip.shape[1] - h) // 2
    dw = (skip.shape[2] - w) // 2
    cropped = skip[:, dh : dh + h, dw : dw + w, :]
    return jnp.concatenate([x, cropped], axis=-1)


@treespec.jit
def crop_and_concat_square(
    x: Float[Array, "b h w c"], skip: Float[Array, "b hs ws s"]
) -> Float[Array, "b h w c+s"]:
    h, w = x.shape[1], x.shape[2]
    dh = (skip.shape[1] - h) // 2
    dw = (skip.shape[2] - w) // 2
    cropped = skip[:, dh : dh + h, dw : dw + h, :]  # BUG: width crop uses the height
    return jnp.concatenate([x, cropped], axis=-1)


# --------------------------------------------------------------------------
# Diffusion U-Net residual block with a timestep embedding
# --------------------------------------------------------------------------


class TimeResBlock(eqx.Module):
    conv1: Float[Array, "3 3 c c"]
    conv2: Float[Array, "3 3 c c"]
    temb_proj: Float[Array, "e c"]


@treespec.jit
def time_res_block(
    p: TimeResBlock, x: Float[Array, "b h w c"], temb: Float[Array, "b e"]
) -> Float[Array, "b h w c"]:
    y = conv2d(jax.nn.silu(x), p.conv1)
    y = y + (jax.nn.silu(temb) @ p.temb_proj)[:, None, None, :]
    y = conv2d(jax.nn.silu(y), p.conv2)
    return x + y


@treespec.jit
def time_res_block_one_axis(
    p: TimeResBlock, x: Float[Array, "b h w c"], temb: Float[Array, "b e"]
) -> Float[Array, "b h w c"]:
    y = conv2d(jax.nn.silu(x), p.conv1)
    y = y + (jax.nn.silu(temb) @ p.temb_proj)[:, None, :]  # BUG: only one spatial axis added, batch meets height
    y = conv2d(jax.nn.silu(y), p.conv2)
    return x + y


# --------------------------------------------------------------------------
# Attention gate (Oktay et al.): additive attention on the skip features
# --------------------------------------------------------------------------


class AttentionGate(eqx.Module):
    w_x: Float[Array, "c_x c_i"]
    w_g: Float[Array, "c_g c_i"]
    psi: Float[Array, "c_i 1"]


@treespec.jit
def attention_gate(
    p: AttentionGate, x: Float[Array, "b h w c_x"], g: Float[Array, "b h w c_g"]
) -> Float[Array, "b h w c_x"]:
    a = jax.nn.relu(x @ p.w_x + g @ p.w_g)
    alpha = jax.nn.sigmoid(a @ p.psi)
    return x * alpha


@treespec.jit
def attention_gate_squeezed(
    p: AttentionGate, x: Float[Array, "b h w c_x"], g: Float[Array, "b h w c_g"]
) -> Float[Array, "b h w c_x"]:
    a = jax.nn.relu(x @ p.w_x + g @ p.w_g)
    alpha = jax.nn.sigmoid(a @ p.psi)
    return x * alpha.squeeze(-1)  # BUG: squeezed gate broadcasts against the channel axis
