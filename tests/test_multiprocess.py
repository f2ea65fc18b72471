"""2-process `jax.distributed` jobs on localhost, and the check's pieces in one process.

The jobs (see `tests/multiprocess/launch.py`) run 2 processes x 2 host CPU
devices over gloo; each has a timeout, and a failing process's output is shown.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, TypedDict

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import treespec
from tests.multiprocess import launch
from treespec import Static
from treespec._runtime.planning import key_text
from treespec._runtime.planning import processes as _processes

from .conftest import child_env, needs_tcp

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "tests" / "multiprocess"


@needs_tcp
def test_two_processes_match_one_process_on_four_devices(tmp_path: Path) -> None:
    # TypedDict config, in/out_shardings over the dynamic view, grad inside jit
    # and jit(grad(...)), a training loop; global arrays from process-local data.
    launch.run(SCRIPTS / "runtime.py", [str(tmp_path)], timeout=90)
    env = child_env(
        XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu"
    )
    subprocess.run(
        [sys.executable, str(SCRIPTS / "runtime.py"), str(tmp_path)],
        env=env,
        check=True,
        timeout=90,
        capture_output=True,
    )
    single = json.loads((tmp_path / "single-0.json").read_text())
    assert single["processes"] == 1
    for index in (0, 1):
        multi = json.loads((tmp_path / f"multi-{index}.json").read_text())
        assert multi["processes"] == 2
        # One trace per process per distinct static key, as in one process.
        assert multi["traces"] == single["traces"] == [2, 1, 2]
        for name in ("losses", "w", "deeper_w", "grad_w", "sums"):
            np.testing.assert_allclose(multi[name], single[name], rtol=1e-5)


@needs_tcp
def test_differing_static_values_raise_on_every_process() -> None:
    outputs = launch.run(SCRIPTS / "divergence.py", timeout=90)
    for index, out in enumerate(outputs):
        # The script asserted type, path and values; its messages say them too.
        assert "cfg['n']: expected the same static value on every process" in out
        assert "got 3 on process 0, 4 on process 1" in out
        assert f"process {index}: done" in out
    assert "no answer from process 1 (this is process 0;" in outputs[0]
    assert "process 0 waited in vain" in outputs[1]


# One process: no distributed client, no check.


class Config(TypedDict):
    n: Static[int]


def test_one_process_does_not_check(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    monkeypatch.setattr(_processes, "describe_key", calls.append)

    @treespec.jit
    def f(x: jax.Array, cfg: Config) -> jax.Array:
        return x * cfg["n"]

    assert f._processes is not None  # on by default; nothing to compare with
    assert float(f(jnp.ones(()), {"n": 3})) == 3.0
    assert calls == [] and _processes.log_prefix() == ""


def test_off_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    assert treespec.jit(lambda x: x, check_processes=False)._processes is None
    monkeypatch.setenv("TREESPEC_CHECK_PROCESSES", "0")
    assert treespec.jit(lambda x: x)._processes is None
    assert treespec.jit(lambda x: x, check_processes=True)._processes is not None


def test_timeout_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _processes.process_timeout() == 60.0
    monkeypatch.setattr(_processes, "timeout", 5.0)
    assert _processes.process_timeout() == 5.0
    monkeypatch.setenv("TREESPEC_PROCESS_TIMEOUT", "2.5")
    assert _processes.process_timeout() == 2.5


def _module_function() -> None: ...


class _Opaque:
    pass


def test_stable_repr_has_no_addresses_and_no_hash_order() -> None:
    assert key_text.stable_repr(_module_function) == (
        "tests.test_multiprocess._module_function"
    )
    assert key_text.stable_repr(_Opaque) == "tests.test_multiprocess._Opaque"
    assert "0x" not in key_text.stable_repr(_Opaque())
    assert key_text.stable_repr(frozenset({"b", "a"})) == "frozenset({'a', 'b'})"
    assert key_text.stable_repr((1, [2.0, True], {"k": None})) == (
        "(1, [2.0, True], {'k': None})"
    )


class _Name(str):
    pass


def test_static_values_of_other_types_with_one_repr_are_told_apart() -> None:
    # A str subclass prints as the str it holds: only its type, in the key's
    # description, keeps two processes passing "a" and _Name("a") apart.
    f = treespec.jit(lambda x, s: x)

    def described(s: Any) -> list[_processes.Leaf]:
        key, dynamic = f._splitter.split_call((jnp.ones(2), s), {})
        return _processes.describe_key(f._splitter.view(key, dynamic))

    plain, named = described("a"), described(_Name("a"))
    assert [leaf.text for leaf in plain] == [leaf.text for leaf in named]
    assert _processes.digest(plain) != _processes.digest(named)
    published = {0: _processes._payload(plain), 1: _processes._payload(named)}
    (issue,) = _processes.differences(published)
    assert issue.got == "'a' (str) on process 0, 'a' (_Name) on process 1"


_DIGEST = """
import jax.numpy as jnp, treespec
from treespec._runtime.planning import processes as _processes
from tests.test_multiprocess import _module_function, _Opaque
f = treespec.jit(lambda x, s: x)
key, dynamic = f._splitter.split_call(
    (jnp.ones(2), (frozenset({"a", "b", "c"}), _module_function, _Opaque(), 1.0)), {}
)
print(_processes.digest(_processes.describe_key(f._splitter.view(key, dynamic))))
"""


def test_digest_is_the_same_in_every_process() -> None:
    # Another process, with another string-hash seed than this one.
    seed = "2" if os.environ.get("PYTHONHASHSEED") == "1" else "1"
    env = child_env(PYTHONHASHSEED=seed)
    done = subprocess.run(
        [sys.executable, "-c", _DIGEST],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(_DIGEST, {})
    assert done.stdout == printed.getvalue()


def test_differences_name_each_leaf_and_value() -> None:
    def payload(n: Any, extra: bool = False) -> str:
        leaves = [_processes.Leaf("cfg['n']", "cfg", "static", "builtins.int", n)]
        if extra:
            leaves.append(_processes.Leaf("cfg['m']", "cfg", "static", "x.T", "1"))
        return _processes._payload(leaves)

    (issue,) = _processes.differences({0: payload("3"), 1: payload("4")})
    assert issue.loc == "argument cfg, at cfg['n']"
    assert issue.got == "3 on process 0, 4 on process 1"
    issues = _processes.differences({0: payload("3"), 1: payload("3", True)})
    assert [i.got for i in issues] == ["1 on process 1, no such leaf on process 0"]


def _example(*args: str) -> subprocess.CompletedProcess[str]:
    env = child_env()
    return subprocess.run(
        [sys.executable, str(ROOT / "examples" / "multihost.py"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=150,  # the example kills its processes after 120 s
        check=False,
    )


@needs_tcp
def test_multihost_example_trains_and_shows_the_error() -> None:
    done = _example()
    assert done.returncode == 0, done.stdout + done.stderr
    for index in (0, 1):
        lines = [
            line.split("] ", 1)[1]
            for line in done.stdout.splitlines()
            if line.startswith(f"[process {index}]")
        ]
        losses = [float(line.split()[-1]) for line in lines if "global loss" in line]
        assert len(losses) == 4 and losses[-1] < losses[0], lines
        assert f"traces of train_step on process {index}: 1" in lines
    # Both processes report the same global loss.
    assert done.stdout.count("step 30  global loss") == 2
    assert (
        len({line[-6:] for line in done.stdout.splitlines() if "step 30" in line}) == 1
    )

    done = _example("--diverge")
    assert done.returncode == 1, done.stdout + done.stderr
    for index in (0, 1):
        assert (
            f"[process {index}]   argument cfg, at cfg['activation']: "
            "expected the same static value on every process" in done.stdout
        ), done.stdout
    assert done.stdout.count("got 'tanh' on process 0, 'relu' on process 1") == 2
