"""Graph networks over a jraph-style GraphsTuple with jax.ops.segment_sum:
a mean-aggregating GCN layer, graph attention (GAT), an edge-update MLP,
and graph-level regression with mean readout."""

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

import treespec


class Graph(NamedTuple):
    nodes: Float[Array, "n d"]
    edges: Float[Array, "e f"]
    senders: Int[Array, " e"]
    receivers: Int[Array, " e"]


# --------------------------------------------------------------------------
# GCN layer with mean aggregation over incoming edges
# --------------------------------------------------------------------------


@treespec.jit
def gcn_layer(g: Graph, w: Float[Array, "d h"]) -> Float[Array, "n h"]:
    num_nodes = g.nodes.shape[0]
    messages = g.nodes[g.senders] @ w
    agg = jax.ops.segment_sum(messages, g.receivers, num_segments=num_nodes)
    ones = jnp.ones(g.receivers.shape, messages.dtype)
    degree = jax.ops.segment_sum(ones, g.receivers, num_segments=num_nodes)
    return jax.nn.relu(agg / jnp.maximum(degree, 1.0)[:, None])


@treespec.jit
def gcn_layer_edge_count(g: Graph, w: Float[Array, "d h"]) -> Float[Array, "n h"]:
    num_nodes = g.senders.shape[0]  # BUG: number of edges used as the number of segments
    messages = g.nodes[g.senders] @ w
    agg = jax.ops.segment_sum(messages, g.receivers, num_segments=num_nodes)
    ones = jnp.ones(g.receivers.shape, messages.dtype)
    degree = jax.ops.segment_sum(ones, g.receivers, num_segments=num_nodes)
    return jax.nn.relu(agg / jnp.maximum(degree, 1.0)[:, None])


# --------------------------------------------------------------------------
# Graph attention: per-edge logits, segment softmax, weighted aggregation
# --------------------------------------------------------------------------


class GAT(eqx.Module):
    w: Float[Array, "d h"]
    a_src: Float[Array, " h"]
    a_dst: Float[Array, " h"]


@treespec.jit
def gat_layer(p: GAT, g: Graph) -> Float[Array, "n h"]:
    n = g.nodes.shape[0]
    z = g.nodes @ p.w
    logits = jax.nn.leaky_relu(z[g.senders] @ p.a_src + z[g.receivers] @ p.a_dst, 0.2)
    logits = logits - jax.ops.segment_max(logits, g.receivers, num_segments=n)[g.receivers]
    weights = jnp.exp(logits)
    denom = jax.ops.segment_sum(weights, g.receivers, num_segments=n)[g.receivers]
    alpha = weights / (denom + 1e-9)
    return jax.ops.segment_sum(alpha[:, None] * z[g.senders], g.receivers, num_segments=n)


@treespec.jit
def gat_layer_alpha_broadcast(p: GAT, g: Graph) -> Float[Array, "n h"]:
    n = g.nodes.shape[0]
    z = g.nodes @ p.w
    logits = jax.nn.leaky_relu(z[g.senders] @ p.a_src + z[g.receivers] @ p.a_dst, 0.2)
    logits = logits - jax.ops.segment_max(logits, g.receivers, num_segments=n)[g.receivers]
    weights = jnp.exp(logits)
    denom = jax.ops.segment_sum(weights, g.receivers, num_segments=n)[g.receivers]
    alpha = weights / (denom + 1e-9)
    return jax.ops.segment_sum(alpha * z[g.senders], g.receivers, num_segments=n)  # BUG: per-edge alpha (e,) broadcast on features


# --------------------------------------------------------------------------
# Edge update (interaction network): MLP over [sender, receiver, edge]
# --------------------------------------------------------------------------


class EdgeMLP(eqx.Module):
    w1: Float[Array, "2*d+f h"]
    w2: Float[Array, "h f"]


@treespec.jit
def edge_update(g: Graph, p: EdgeMLP) -> Float[Array, "e f"]:
    inputs = jnp.concatenate([g.nodes[g.senders], g.nodes[g.receivers], g.edges], axis=-1)
    return g.edges + jax.nn.relu(inputs @ p.w1) @ p.w2


@treespec.jit
def edge_update_ungathered(g: Graph, p: EdgeMLP) -> Float[Array, "e f"]:
    inputs = jnp.concatenate([g.nodes, g.nodes[g.receivers], g.edges], axis=-1)  # BUG: sender features not gathered per edge
    return g.edges + jax.nn.relu(inputs @ p.w1) @ p.w2


# --------------------------------------------------------------------------
# Graph-level regression: mean-pool nodes per graph, linear head, MSE
# --------------------------------------------------------------------------


@treespec.jit
def graph_regression_loss(
    nodes: Float[Array, "n d"],
    graph_ids: Int[Array, " n"],
    w: Float[Array, "d c"],
    targets: Float[Array, "g c"],
) -> Float[Array, ""]:
    num_graphs = targets.shape[0]
    sums = jax.ops.segment_sum(nodes, graph_ids, num_segments=num_graphs)
    counts = jax.ops.segment_sum(jnp.ones_like(graph_ids, nodes.dtype), graph_ids, num_segments=num_graphs)
    pooled = sums / jnp.maximum(counts, 1.0)[:, None]
    return jnp.mean((pooled @ w - targets) ** 2)


@treespec.jit
def graph_regression_loss_counts(
    nodes: Float[Array, "n d"],
    graph_ids: Int[Array, " n"],
    w: Float[Array, "d c"],
    targets: Float[Array, "g c"],
) -> Float[Array, ""]:
    num_graphs = targets.shape[0]
    sums = jax.ops.segment_sum(nodes, graph_ids, num_segments=num_graphs)
    counts = jax.ops.segment_sum(jnp.ones_like(graph_ids, nodes.dtype), graph_ids, num_segments=num_graphs)
    pooled = sums / jnp.maximum(counts, 1.0)  # BUG: per-graph counts (g,) divide along the feature axis
    return jnp.mean((pooled @ w - targets) ** 2)
