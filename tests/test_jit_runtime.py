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

from .conftest import child_env


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


@pytest.mark.parametrize("whole", [False, True], ids=["planned", "static-layout"])
def test_clear_cache_under_load_never_makes_a_call_raise(whole: bool) -> None:
    # As under jax.jit: a call that loses the race with clear_cache() (and a
    # collection, which frees the plans it was split by) traces again.
    import gc
    import time

    if whole:

        @treespec.jit
        def f(x: Dynamic[jax.Array], cfg: Static[dict[str, int]]) -> jax.Array:
            return x * cfg["k"]
    else:

        @treespec.jit
        def f(x, cfg: Static[dict[str, int]]) -> jax.Array:  # type: ignore[no-untyped-def]
            return x * cfg["k"]

    errors: list[BaseException] = []
    wrong: list[float] = []
    stop = time.monotonic() + 4.0

    def caller(k: int) -> None:
        while time.monotonic() < stop:
            try:
                out = float(f(jnp.ones(()), {"k": k}))
            except BaseException as error:
                errors.append(error)
                return
            if out != k:
                wrong.append(out)

    def clearer() -> None:
        while time.monotonic() < stop:
            f.clear_cache()
            gc.collect()

    threads = [threading.Thread(target=caller, args=(k % 3 + 1,)) for k in range(8)]
    threads.append(threading.Thread(target=clearer))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == [] and wrong == []


_IMPORT_RACE = """
import importlib.abc, importlib.machinery, sys, threading, time

class Slow(importlib.abc.MetaPathFinder):
    # jaxtyping's import takes long: it is in sys.modules, partly run, for 1 s.
    def find_spec(self, name, path, target=None):
        if name != "jaxtyping":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        run = spec.loader.exec_module
        def exec_module(module):
            time.sleep(1.0)
            run(module)
        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, Slow())
import jax, jax.numpy as jnp, treespec
from treespec import Static
assert "jaxtyping" not in sys.modules

@treespec.jit
def first(x: jax.Array, n: Static[int]) -> jax.Array:
    return x * n

errors = []
def call():  # the first validated call imports jaxtyping
    try:
        first(jnp.ones(2), 2)
    except BaseException as error:
        errors.append(error)

def decorate():  # meanwhile another thread decorates
    time.sleep(0.3)
    try:
        def second(x: jax.Array, cfg: dict[str, int], k: Static[int]) -> jax.Array:
            return x * k
        treespec.jit(second)(jnp.ones(2), {"a": 1}, 3)
    except BaseException as error:
        errors.append(error)

threads = [threading.Thread(target=call), threading.Thread(target=decorate)]
for t in threads: t.start()
for t in threads: t.join(timeout=60)
print("errors:", [repr(e) for e in errors])
"""


def test_decorating_while_another_thread_imports_jaxtyping_is_safe() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_RACE],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("errors: []"), done.stdout + done.stderr
