"""treespec.jit at run time: asynchronous dispatch and concurrent callers."""

from __future__ import annotations

import threading
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import treespec
from treespec import Dynamic, Static


def _slow(x: jax.Array, n: int) -> jax.Array:
    return jax.lax.fori_loop(0, n, lambda i, y: jnp.tanh(y @ y), x)


@pytest.mark.parametrize("whole", [False, True], ids=["planned", "static-layout"])
def test_dispatch_does_not_block_on_the_result(whole: bool) -> None:
    x = jnp.ones((400, 400)) / 400
    raw = jax.jit(_slow, static_argnums=1)
    if whole:

        @treespec.jit
        def ts(x: Dynamic[jax.Array], n: Static[int]) -> jax.Array:
            return _slow(x, n)
    else:
        ts = treespec.jit(_slow, static_flags=[False, True])
    jax.block_until_ready((raw(x, 2), ts(x, 2)))  # compile both first
    # A long computation queued by jax.jit, not finished when it returns. The
    # treespec call takes its result as input, so treespec's own result cannot
    # be ready before it: a call that blocked on its result (or on its inputs)
    # would return a ready one.
    for n in (300, 1000, 3000):
        pending = raw(x, n)
        if not pending.is_ready():
            break
        jax.block_until_ready(pending)
    else:
        pytest.fail("jax.jit itself blocked on every result: nothing to compare")
    ts_out = ts(pending, 2)
    assert not ts_out.is_ready()
    jax.block_until_ready(ts_out)
    np.testing.assert_allclose(ts_out, raw(pending, 2))


@pytest.mark.parametrize("whole", [False, True], ids=["planned", "static-layout"])
def test_threads_share_one_cache(whole: bool) -> None:
    traces: list[int] = []
    lock = threading.Lock()

    def body(x: jax.Array, cfg: dict[str, Any]) -> jax.Array:
        with lock:
            traces.append(cfg["k"])
        return x * cfg["k"] + len(cfg["name"])

    # With x inferred, calls are planned per tree structure; with x Dynamic as
    # a whole, the config (a dict of scalars) is looked up by its probe.
    if whole:

        @treespec.jit
        def f(x: Dynamic[jax.Array], cfg: Static[dict[str, int | str]]) -> jax.Array:
            return body(x, cfg)
    else:

        @treespec.jit
        def f(x, cfg: Static[dict[str, Any]]) -> jax.Array:  # type: ignore[no-untyped-def]
            return body(x, cfg)

    # The x-inferred config is planned per structure (an array in x is traced).
    assert f._splitter.positional.whole_idx == ((0,) if whole else ())

    configs = [{"k": k, "name": "n" * k} for k in range(1, 6)]
    errors: list[BaseException] = []
    results: list[tuple[int, float]] = []
    start = threading.Barrier(8)

    def worker(seed: int) -> None:
        try:
            start.wait()
            for i in range(40):
                cfg = configs[(seed + i) % 5]
                out = f(jnp.ones(3), dict(cfg))
                with lock:
                    results.append((cfg["k"], float(out[0])))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(results) == 8 * 40
    assert all(value == 2 * k for k, value in results)
    warm = len(traces)
    assert sorted(set(traces)) == [1, 2, 3, 4, 5]
    assert warm == 5, traces
    for cfg in configs:
        f(jnp.ones(3), dict(cfg))
    assert len(traces) == warm  # once warm, no config traces again
    if whole:  # the five configs went through the probe lookup
        route = f._splitter.positional
        assert route.probing and len(route.probes) == 5
