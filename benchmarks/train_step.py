"""A training step's own overhead: treespec.jit against jax.jit and equinox.filter_jit.

Run: python benchmarks/train_step.py [--quick] [--only tiny|real]

A small transformer language model trained with optax's adam, as users write
it: the parameters and the optimizer state are passed unannotated (a dict of
arrays, optax's state tuple), and the model's constants sit in a config.
Each contender gets the same data and the same step:

- `jax.jit`: the config as a `NamedTuple` in `static_argnames`;
- `equinox.filter_jit`: the config as a dict (its non-arrays held static);
- `treespec.jit`: the config as a `TypedDict` of `Static[...]` fields, the
  parameters and the optimizer state inferred (arrays traced).

Two sizes: `tiny` (d=64, 16 tokens, batch 4: dispatch-bound, where a step's
Python overhead shows) and `real` (d=512, 256 tokens, batch 16: the device
is busy, so the overhead hides behind it). Two loops each: `async` (a run of
steps, one `block_until_ready` at the end: dispatch stays ahead of the
device, as a training loop runs) and `blocking` (a block after every step, as
a loop that logs the loss each step does). Rounds are interleaved (one loop
of each contender in turn) and the best round of each is kept, in one
process. The losses after the rounds are printed: all three must agree.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any, NamedTuple, TypedDict

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from _timing import machine

import treespec
from treespec import Static

SIZES = {
    # name: (d_model, tokens, batch, layers, heads, vocab)
    "tiny": (64, 16, 4, 2, 4, 256),
    "micro": (8, 4, 1, 2, 2, 16),
    "real": (512, 256, 16, 4, 8, 1024),
}


class Config(TypedDict):
    n_heads: Static[int]
    activation: Static[str]
    causal: Static[bool]


class ConfigTuple(NamedTuple):
    n_heads: int
    activation: str
    causal: bool


def init(size: str, key: jax.Array) -> dict[str, Any]:
    """The parameters: a dict of arrays, as a hand-written model keeps them."""
    d, _, _, layers, _, vocab = SIZES[size]
    keys = iter(jax.random.split(key, 2 + 6 * layers))

    def dense(n_in: int, n_out: int) -> jax.Array:
        return jax.random.normal(next(keys), (n_in, n_out)) / n_in**0.5

    blocks = [
        {
            "q": dense(d, d),
            "k": dense(d, d),
            "v": dense(d, d),
            "o": dense(d, d),
            "up": dense(d, 4 * d),
            "down": dense(4 * d, d),
            "norm1": jnp.ones(d),
            "norm2": jnp.ones(d),
        }
        for _ in range(layers)
    ]
    return {"embed": dense(vocab, d), "blocks": blocks, "norm": jnp.ones(d)}


def _norm(x: jax.Array, scale: jax.Array) -> jax.Array:
    x = x - x.mean(-1, keepdims=True)
    return x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + 1e-6) * scale


def loss_fn(params: Any, tokens: jax.Array, cfg: Any) -> jax.Array:
    """Next-token cross-entropy of a pre-norm transformer."""
    act = getattr(jax.nn, cfg["activation"] if isinstance(cfg, dict) else cfg[1])
    heads = cfg["n_heads"] if isinstance(cfg, dict) else cfg[0]
    causal = cfg["causal"] if isinstance(cfg, dict) else cfg[2]
    x = params["embed"][tokens[:, :-1]]
    b, t, d = x.shape
    mask = jnp.tril(jnp.ones((t, t), bool)) if causal else jnp.ones((t, t), bool)
    for block in params["blocks"]:
        h = _norm(x, block["norm1"])
        q, k, v = (
            (h @ block[n]).reshape(b, t, heads, d // heads) for n in ("q", "k", "v")
        )
        att = jnp.einsum("bqhd,bkhd->bhqk", q, k) / (d // heads) ** 0.5
        att = jax.nn.softmax(jnp.where(mask, att, -1e9), axis=-1)
        x = x + jnp.einsum("bhqk,bkhd->bqhd", att, v).reshape(b, t, d) @ block["o"]
        x = x + act(_norm(x, block["norm2"]) @ block["up"]) @ block["down"]
    logits = _norm(x, params["norm"]) @ params["embed"].T
    logp = jax.nn.log_softmax(logits)
    return -jnp.take_along_axis(logp, tokens[:, 1:, None], -1).mean()


TX = optax.adam(1e-3)


def step(params: Any, opt_state: Any, tokens: jax.Array, cfg: Any) -> Any:
    loss, grads = jax.value_and_grad(loss_fn)(params, tokens, cfg)
    updates, opt_state = TX.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


def ts_step(params: Any, opt_state: Any, tokens: jax.Array, cfg: Config) -> Any:
    return step(params, opt_state, tokens, cfg)


def contenders(size: str) -> dict[str, tuple[Callable[..., Any], Any]]:
    """Each contender's jitted step and the config it is called with."""
    cfg = {"n_heads": SIZES[size][4], "activation": "gelu", "causal": True}
    return {
        "jax.jit": (
            jax.jit(step, static_argnames="cfg"),
            ConfigTuple(**cfg),
        ),
        "equinox.filter_jit": (eqx.filter_jit(step), dict(cfg)),
        "treespec.jit": (treespec.jit(ts_step), Config(**cfg)),  # type: ignore[typeddict-item]
    }


def timed_loop(
    fn: Callable[..., Any],
    cfg: Any,
    state: Any,
    tokens: jax.Array,
    steps: int,
    block: bool,
) -> tuple[float, Any]:
    """Seconds per step of `steps` steps, and the state they end in."""
    params, opt_state = state
    jax.block_until_ready(params)
    start = time.perf_counter()
    for _ in range(steps):
        params, opt_state, loss = fn(params, opt_state, tokens, cfg)
        if block:
            jax.block_until_ready(loss)
    jax.block_until_ready((params, opt_state, loss))
    return (time.perf_counter() - start) / steps, (params, opt_state, loss)


def run_size(size: str, steps: int, rounds: int) -> tuple[str, dict[str, float]]:
    d, tokens_n, batch, layers, _, vocab = SIZES[size]
    params = init(size, jax.random.key(0))
    tokens = jax.random.randint(jax.random.key(1), (batch, tokens_n + 1), 0, vocab)
    opt_state = TX.init(params)
    jitted = contenders(size)
    leaves = len(jax.tree.leaves((params, opt_state)))
    lines = [
        f"### {size}: d={d}, {tokens_n} tokens, batch {batch}, {layers} layers "
        f"({leaves} array leaves in the parameters and adam's state)",
        "",
        "| loop | contender | best step | / jax.jit |",
        "| --- | --- | --- | --- |",
    ]
    ratios: dict[str, float] = {}
    losses: dict[str, float] = {}
    for block in (False, True):
        best = {name: float("inf") for name in jitted}
        for fn, cfg in jitted.values():  # compile and warm up
            timed_loop(fn, cfg, (params, opt_state), tokens, 2, block)
        for _ in range(rounds):
            for name, (fn, cfg) in jitted.items():
                seconds, (_, _, loss) = timed_loop(
                    fn, cfg, (params, opt_state), tokens, steps, block
                )
                best[name] = min(best[name], seconds)
                losses[name] = float(loss)
        loop = "blocking" if block else "async"
        for name, seconds in best.items():
            ratio = seconds / best["jax.jit"]
            ratios[f"{size} {loop} {name} / jax.jit"] = ratio
            lines.append(f"| {loop} | {name} | {seconds * 1e6:,.0f} µs | {ratio:.3f} |")
    agree = len({round(v, 5) for v in losses.values()}) == 1
    shown = ", ".join(f"{n} {v:.6f}" for n, v in losses.items())
    verdict = "equal" if agree else "NOT EQUAL"
    lines += ["", f"Loss after the last round: {shown} ({verdict})."]
    if not agree:
        raise SystemExit("\n".join(lines) + "\nthe contenders' losses differ")
    return "\n".join(lines), ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer steps and rounds")
    parser.add_argument("--only", choices=sorted(SIZES), help="run one size")
    opts = parser.parse_args()
    kind = jax.devices()[0].device_kind
    print(f"# treespec training-step benchmark\n\n{machine()}, device {kind}\n")
    for size in SIZES:
        if opts.only not in (None, size):
            continue
        heavy = size == "real" and jax.default_backend() == "cpu"
        # A dispatch-bound step's ratio moves by a tenth from round to round
        # on a busy 2-core machine: many rounds, the best of each kept.
        steps = 3 if heavy else (20 if opts.quick else 100)
        rounds = 3 if opts.quick or heavy else 9
        text, _ = run_size(size, steps, rounds)
        print(text, "\n")


if __name__ == "__main__":
    main()
