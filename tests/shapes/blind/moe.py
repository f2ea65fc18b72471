"""Mixture-of-experts layers: dense top-k gating, Switch-style top-1
dispatch with a capacity, the load-balancing auxiliary loss, expert-choice
routing, per-token gathered experts, and a grouped expert FFN."""

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Float

import treespec
from treespec import Static


class MoE(eqx.Module):
    router: Float[Array, "d e"]
    w_in: Float[Array, "e d f"]
    w_out: Float[Array, "e f d"]


# --------------------------------------------------------------------------
# Dense top-k MoE: every expert runs, gates zero outside the top k
# --------------------------------------------------------------------------


@treespec.jit
def moe_dense_topk(
    p: MoE, x: Float[Array, "b t d"], top_k: Static[int] = 2
) -> Float[Array, "b t d"]:
    num_experts = p.router.shape[-1]
    probs = jax.nn.softmax(jnp.einsum("btd,de->bte", x, p.router), axis=-1)
    vals, idx = lax.top_k(probs, top_k)
    gates = jnp.sum(jax.nn.one_hot(idx, num_experts) * vals[..., None], axis=-2)
    gates = gates / jnp.sum(gates, axis=-1, keepdims=True)
    h = jax.nn.gelu(jnp.einsum("btd,edf->btef", x, p.w_in))
    y = jnp.einsum("btef,efd->bted", h, p.w_out)
    return jnp.einsum("bted,bte->btd", y, gates)


@treespec.jit
def moe_dense_topk_onehot_depth(
    p: MoE, x: Float[Array, "b t d"], top_k: Static[int] = 2
) -> Float[Array, "b t d"]:
    num_experts = p.router.shape[-1]
    probs = jax.nn.softmax(jnp.einsum("btd,de->bte", x, p.router), axis=-1)
    vals, idx = lax.top_k(probs, top_k)
    gates = jnp.sum(jax.nn.one_hot(idx, top_k) * vals[..., None], axis=-2)  # BUG: one-hot depth top_k, not num_experts
    gates = gates / jnp.sum(gates, axis=-1, keepdims=True)
    h = jax.nn.gelu(jnp.einsum("btd,edf->btef", x, p.w_in))
    y = jnp.einsum("btef,efd->bted", h, p.w_out)
    return jnp.einsum("bted,bte->btd", y, gates)


# --------------------------------------------------------------------------
# Switch Transformer: top-1 routing, fixed capacity, einsum dispatch/combine
# --------------------------------------------------------------------------


@treespec.jit
def switch_ffn(
    p: MoE, x: Float[Array, "n d"], capacity_factor: Static[float] = 1.0
) -> Float[Array, "n d"]:
    n = x.shape[0]
    num_experts = p.router.shape[-1]
    capacity = max(1, int(capacity_factor * n / num_experts))
    probs = jax.nn.softmax(x @ p.router, axis=-1)
    expert = jnp.argmax(probs, axis=-1)
    gate = jnp.max(probs, axis=-1)
    mask = jax.nn.one_hot(expert, num_experts)
    position = (jnp.cumsum(mask, axis=0) - 1.0) * mask
    mask = mask * (position < capacity)
    dispatch = mask[..., None] * jax.nn.one_hot(position.astype(jnp.int32), capacity)
    expert_in = jnp.einsum("nec,nd->ecd", dispatch, x)
    h = jax.nn.gelu(jnp.einsum("ecd,edf->ecf", expert_in, p.w_in))
    expert_out = jnp.einsum("ecf,efd->ecd", h, p.w_out)
    combine = dispatch * gate[:, None, None]
    return jnp.einsum("nec,ecd->nd", combine, expert_out)


@treespec.jit
def switch_ffn_dispatch_axes(
    p: MoE, x: Float[Array, "n d"], capacity_factor: Static[float] = 1.0
) -> Float[Array, "n d"]:
    n = x.shape[0]
    num_experts = p.router.shape[-1]
    capacity = max(1, int(capacity_factor * n / num_experts))
    probs = jax.nn.softmax(x @ p.router, axis=-1)
    expert = jnp.argmax(probs, axis=-1)
    gate = jnp.max(probs, axis=-1)
    mask = jax.nn.one_hot(expert, num_experts)
    position = (jnp.cumsum(mask, axis=0) - 1.0) * mask
    mask = mask * (position < capacity)
    dispatch = mask[..., None] * jax.nn.one_hot(position.astype(jnp.int32), capacity)
    expert_in = jnp.einsum("nec,nd->ced", dispatch, x)  # BUG: dispatched buffer laid out (capacity, expert, d)
    h = jax.nn.gelu(jnp.einsum("ecd,edf->ecf", expert_in, p.w_in))
    expert_out = jnp.einsum("ecf,efd->ecd", h, p.w_out)
    combine = dispatch * gate[:, None, None]
    return jnp.einsum("nec,ecd->nd", combine, expert_out)


# --------------------------------------------------------------------------
# Switch auxiliary load-balancing loss: E * sum_e f_e * P_e
# --------------------------------------------------------------------------


@treespec.jit
def load_balancing_loss(router_logits: Float[Array, "n e"]) -> Float[Array, ""]:
    num_experts = router_logits.shape[-1]
    probs = jax.nn.softmax(router_logits, axis=-1)
    assigned = jax.nn.one_hot(jnp.argmax(probs, axis=-1), num_experts)
    return num_experts * jnp.sum(assigned.mean(axis=0) * probs.mean(axis=0))


@treespec.jit
def load_balancing_loss_token_mean(router_logits: Float[Array, "n e"]) -> Float[Array, ""]:
    num_experts = router_logits.shape[-1]
    probs = jax.nn.softmax(router_logits, axis=-1)
    assigned = jax.nn.one_hot(jnp.argmax(probs, axis=-1), num_experts)
    return num_experts * jnp.sum(assigned.mean(axis=0) * probs.mean(axis=1))  # BUG: router prob averaged over experts, not tokens


# --------------------------------------------------------------------------
# Expert-choice routing (Zhou et al. 2022): each expert picks its top-c tokens
# --------------------------------------------------------------------------


@treespec.jit
def expert_choice_ffn(
    p: MoE, x: Float[Array, "n d"], capacity_factor: Static[float] = 2.0
) -> Float[Array, "n d"]:
    n, d = x.shape
    num_experts = p.router.shape[-1]
    capacity = min(n, max(1, int(n * capacity_factor / num_experts)))
    scores = jax.nn.softmax(x @ p.router, axis=-1)
    gate, idx = lax.top_k(scores.T, capacity)
    h = jax.nn.gelu(jnp.einsum("ecd,edf->ecf", x[idx], p.w_in))
    out = jnp.einsum("ecf,efd->ecd", h, p.w_out) * gate[..., None]
    return jnp.zeros_like(x).at[idx.reshape(-1)].add(out.reshape(-1, d))


@treespec.jit
def expert_choice_ffn_no_transpose(
    p: MoE, x: Float[Array, "n d"], capacity_factor: Static[float] = 2.0
) -> Float[Array, "n d"]:
    n, d = x.shape
    num_experts = p.router.shape[-1]
    capacity = min(n, max(1, int(n * capacity_factor / num_experts)))
    scores = jax.nn.softmax(x @ p.router, axis=-1)
    gate, idx = lax.top_k(scores, capacity)  # BUG: top-k over experts per token; expert choice needs scores.T
    h = jax.nn.gelu(jnp.einsum("ecd,edf->ecf", x[idx], p.w_in))
    out = jnp.einsum("ecf,efd->ecd", h, p.w_out) * gate[..., None]
    return jnp.zeros_like(x).at[idx.reshape(-1)].add(out.reshape(-1, d))


# --------------------------------------------------------------------------
# Top-1 MoE with per-token gathered expert weights
# --------------------------------------------------------------------------


@treespec.jit
def top1_moe(p: MoE, x: Float[Array, "b t d"]) -> Float[Array, "b t d"]:
    b, t, d = x.shape
    tokens = x.reshape(b * t, d)
    probs = jax.nn.softmax(tokens @ p.router, axis=-1)
    gate = probs.max(axis=-1)
    expert = probs.argmax(axis=-1)
    h = jax.nn.gelu(jnp.einsum("nd,ndf->nf", tokens, p.w_in[expert]))
    y = jnp.einsum("nf,nfd->nd", h, p.w_out[expert])
    return (y * gate[:, None]).reshape(b, t, d)


@treespec.jit
def top1_moe_gate_broadcast(p: MoE, x: Float[Array, "b t d"]) -> Float[Array, "b t d"]:
    b, t, d = x.shape
    tokens = x.reshape(b * t, d)
    probs = jax.nn.softmax(tokens @ p.router, axis=-1)
    gate = probs.max(axis=-1)
    expert = probs.argmax(axis=-1)
    h = jax.nn.gelu(jnp.einsum("nd,ndf->nf", tokens, p.w_in[expert]))
    y = jnp.einsum("nf,nfd->nd", h, p.w_out[expert])
    return (y * gate).reshape(b, t, d)  # BUG: per-token gate (n,) broadcast against the feature axis


# --------------------------------------------------------------------------
# Relation-only: tokens pre-sorted into equal groups per expert (e divides n)
# --------------------------------------------------------------------------


@treespec.jit
def grouped_expert_ffn(p: MoE, x: Float[Array, "n d"]) -> Float[Array, "n d"]:
    n, d = x.shape
    num_experts = p.w_in.shape[0]
    groups = x.reshape(num_experts, n // num_experts, d)
    h = jax.nn.gelu(jnp.einsum("egd,edf->egf", groups, p.w_in))
    return jnp.einsum("egf,efd->egd", h, p.w_out).reshape(n, d)
