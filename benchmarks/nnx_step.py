"""A Flax NNX training step: treespec.jit against nnx.jit and jax.jit with a hand split.

Run: python benchmarks/nnx_step.py [--quick] [--only tiny|small]

The NNX idiom: a model with BatchNorm and Dropout, an `nnx.Optimizer`, and a
step that changes both in place:

    def train_step(model, optimizer, x, y):
        loss, grads = nnx.value_and_grad(loss_fn)(model, x, y)
        optimizer.update(model, grads)
        return loss

Contenders, each leaving the caller's model and optimizer updated after
every step (NNX's reference semantics):

- `nnx.jit`: the step as it is;
- `jax.jit + split/merge`: `jax.jit` of a pure step, with a hand
  `nnx.split` of `(model, optimizer)` before each call, `nnx.merge` inside,
  and `nnx.update` after (what `nnx.jit` does, written out);
- `treespec.jit`: the step as it is.

And, for reference, `jax.jit, state threaded`: the split done once before
the loop and the state passed from step to step (Flax's performance guide),
so the caller's objects are updated only after the loop: the floor any of
the three can reach.

Two sizes: `tiny` (dispatch-bound: a call's Python overhead shows) and
`small` (a step with some work in it). Loops of `steps` steps with one
`block_until_ready` at the end (as a training loop runs), rounds interleaved,
the best round of each kept, in one process. The losses after the rounds and
the optimizer's step count are printed: they must agree.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import jax
import optax
from _timing import machine
from flax import nnx

import treespec

SIZES = {
    # name: (inputs, hidden, classes, batch)
    "tiny": (8, 16, 4, 8),
    "small": (64, 256, 10, 128),
}


class Net(nnx.Module):
    def __init__(self, sizes: tuple[int, int, int], rngs: nnx.Rngs) -> None:
        d_in, hidden, classes = sizes
        self.l1 = nnx.Linear(d_in, hidden, rngs=rngs)
        self.bn1 = nnx.BatchNorm(hidden, rngs=rngs)
        self.l2 = nnx.Linear(hidden, hidden, rngs=rngs)
        self.bn2 = nnx.BatchNorm(hidden, rngs=rngs)
        self.drop = nnx.Dropout(0.1, rngs=rngs)
        self.out = nnx.Linear(hidden, classes, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = self.drop(nnx.relu(self.bn1(self.l1(x))))
        x = self.drop(nnx.relu(self.bn2(self.l2(x))))
        return self.out(x)


def loss_fn(model: Net, x: jax.Array, y: jax.Array) -> jax.Array:
    logits = model(x)
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


def train_step(
    model: Net, optimizer: nnx.Optimizer, x: jax.Array, y: jax.Array
) -> jax.Array:
    loss, grads = nnx.value_and_grad(loss_fn)(model, x, y)
    optimizer.update(model, grads)
    return loss


@jax.jit
def _pure_step(graphdef: Any, state: Any, x: jax.Array, y: jax.Array) -> Any:
    model, optimizer = nnx.merge(graphdef, state)
    loss = train_step(model, optimizer, x, y)
    return loss, nnx.state((model, optimizer))


def hand_split(
    model: Net, optimizer: nnx.Optimizer, x: jax.Array, y: jax.Array
) -> jax.Array:
    """What `nnx.jit` does, by hand: split, a pure `jax.jit` step, update."""
    graphdef, state = nnx.split((model, optimizer))
    loss, state = _pure_step(graphdef, state, x, y)
    nnx.update((model, optimizer), state)
    return loss  # type: ignore[no-any-return]


def fresh(size: str) -> tuple[Net, nnx.Optimizer]:
    d_in, hidden, classes, _ = SIZES[size]
    model = Net((d_in, hidden, classes), nnx.Rngs(0, dropout=1))
    optimizer = nnx.Optimizer(model, optax.adamw(1e-3), wrt=nnx.Param)
    return model, optimizer


def contenders() -> dict[str, Callable[..., Any]]:
    return {
        "nnx.jit": nnx.jit(train_step),
        "jax.jit + split/merge": hand_split,
        "treespec.jit": treespec.jit(train_step),
    }


def timed(step: Callable[..., Any], objects: Any, batch: Any, steps: int) -> float:
    """Seconds per step of `steps` steps on the caller's objects."""
    model, optimizer = objects
    x, y = batch
    jax.block_until_ready(nnx.state(model))
    start = time.perf_counter()
    for _ in range(steps):
        loss = step(model, optimizer, x, y)
    jax.block_until_ready((loss, nnx.state((model, optimizer))))
    return (time.perf_counter() - start) / steps


def threaded(objects: Any, batch: Any, steps: int) -> float:
    """The floor: the state passed from step to step, updated once after."""
    model, optimizer = objects
    x, y = batch
    graphdef, state = nnx.split((model, optimizer))
    jax.block_until_ready(state)
    start = time.perf_counter()
    for _ in range(steps):
        loss, state = _pure_step(graphdef, state, x, y)
    jax.block_until_ready((loss, state))
    seconds = (time.perf_counter() - start) / steps
    nnx.update((model, optimizer), state)
    return seconds


def run_size(size: str, steps: int, rounds: int) -> tuple[str, dict[str, float]]:
    d_in, hidden, classes, batch_n = SIZES[size]
    x = jax.random.normal(jax.random.key(0), (batch_n, d_in))
    y = jax.random.randint(jax.random.key(1), (batch_n,), 0, classes)
    steppers = contenders()
    objects = {name: fresh(size) for name in steppers}
    floor = "jax.jit, state threaded"
    objects[floor] = fresh(size)
    best = {name: float("inf") for name in objects}
    for name, step in steppers.items():  # compile and warm up
        timed(step, objects[name], (x, y), 2)
    threaded(objects[floor], (x, y), 2)
    for _ in range(rounds):
        for name, step in steppers.items():
            best[name] = min(best[name], timed(step, objects[name], (x, y), steps))
        best[floor] = min(best[floor], threaded(objects[floor], (x, y), steps))
    leaves = len(jax.tree.leaves(nnx.state(objects["treespec.jit"])))
    base = best["jax.jit + split/merge"]
    lines = [
        f"### {size}: {d_in} -> {hidden} -> {hidden} -> {classes}, batch {batch_n} "
        f"({leaves} arrays in the model and adamw's state)",
        "",
        "| contender | best step | / jax.jit + split/merge | / nnx.jit |",
        "| --- | --- | --- | --- |",
    ]
    ratios = {}
    for name, seconds in best.items():
        ratio = seconds / base
        ratios[f"{size} {name} / split"] = ratio
        ratios[f"{size} {name} / nnx.jit"] = seconds / best["nnx.jit"]
        lines.append(
            f"| {name} | {seconds * 1e6:,.0f} µs | {ratio:.2f} | "
            f"{seconds / best['nnx.jit']:.2f} |"
        )
    losses = {name: float(loss_fn(model, x, y)) for name, (model, _) in objects.items()}
    counts = {name: int(opt.step[...]) for name, (_, opt) in objects.items()}
    agree = (
        len({round(v, 4) for v in losses.values()}) == 1
        and len(set(counts.values())) == 1
    )
    shown = ", ".join(f"{n} {v:.5f}" for n, v in losses.items())
    lines += [
        "",
        f"Loss after the rounds: {shown}; optimizer steps: "
        f"{sorted(set(counts.values()))} ({'equal' if agree else 'NOT EQUAL'}).",
    ]
    if not agree:
        raise SystemExit("\n".join(lines) + "\nthe contenders disagree")
    return "\n".join(lines), ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer steps and rounds")
    parser.add_argument("--only", choices=sorted(SIZES), help="run one size")
    opts = parser.parse_args()
    kind = jax.devices()[0].device_kind
    print(f"# treespec NNX training-step benchmark\n\n{machine()}, device {kind}\n")
    for size in SIZES:
        if opts.only not in (None, size):
            continue
        steps = 20 if opts.quick else 100
        rounds = 3 if opts.quick else 7
        text, _ = run_size(size, steps, rounds)
        print(text, "\n")


if __name__ == "__main__":
    main()
