"""Shared helpers: resolve a call into {key path: kind} for assertions."""

from __future__ import annotations

import inspect
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import pytest

from treespec._runtime.api import spec_for
from treespec._runtime.planning.build import build_plan
from treespec._runtime.reading.flags import normalize_flags


def resolve(
    fun: Any, *args: Any, _flags: Any = None, _default: str = "infer", **kwargs: Any
) -> dict[str, str]:
    """{leaf path: 'static' | 'dynamic' | 'donate'} for one call of `fun`."""
    spec = spec_for(fun, inspect.currentframe().f_back.f_locals)  # type: ignore[union-attr]
    plan, issues = build_plan(
        spec, normalize_flags(_flags, spec), _default, args, kwargs, None
    )
    assert not issues, issues
    leaves = jax.tree_util.tree_leaves((args, kwargs))
    return {
        info.path: info.resolve(leaf).value for info, leaf in zip(plan.infos, leaves)
    }


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Callable[[Any, str], list[tuple[Any, ...]]]:
    """`spy(module, name)` wraps a module function; returns the list of its calls."""

    def install(module: Any, name: str) -> list[tuple[Any, ...]]:
        calls: list[tuple[Any, ...]] = []
        original = getattr(module, name)

        def recording(*args: Any, **kwargs: Any) -> Any:
            calls.append(args)
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, recording)
        return calls

    return install


@pytest.fixture
def counter() -> dict[str, int]:
    """A trace counter: increment `counter['n']` inside a traced function."""
    return {"n": 0}


ROOT = Path(__file__).resolve().parent.parent

#: JAX features newer than the JAX floor of pyproject.toml: their tests skip
#: on an older JAX, saying what they need.
HAS_TREE_STATIC = hasattr(jax.tree, "static")
needs_tree_static = pytest.mark.skipif(
    not HAS_TREE_STATIC, reason="jax.tree.static() needs JAX 0.9.1 or newer"
)


def child_env(path: tuple[Any, ...] = (), **overrides: str) -> dict[str, str]:
    """The environment of a Python process a test starts: the parent's, with
    `path` then this checkout first on `PYTHONPATH` and the parent's path
    kept (on a TPU VM, JAX is found through it), and, while this process
    holds an accelerator (one process at a time may hold a TPU chip), the
    CPU platform. Keys of `overrides` win."""
    path = [*map(str, path), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    if jax.default_backend() != "cpu":
        env["JAX_PLATFORMS"] = "cpu"
    env.update(overrides)
    return env


def _can_listen() -> bool:
    """Whether this machine lets a process listen on a loopback TCP port
    (`jax.distributed` needs one; a sandboxed TPU VM refuses it)."""
    try:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen()
    except OSError:
        return False
    return True


needs_tcp = pytest.mark.skipif(
    not _can_listen(),
    reason="this machine refuses loopback TCP sockets, which jax.distributed's "
    "coordinator needs",
)


def run_mypy(
    target: Path, config: Path, cwd: Path, skip: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """mypy on `target` with this checkout's treespec and plugin (mypy imports
    plugins from `sys.path`, not `MYPYPATH`), one line per finding; the files
    named in `skip` are left out of a folder."""
    path = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(config),
            "--no-incremental",
            "--show-error-codes",
            "--no-error-summary",
            "--hide-error-context",
            *(f"--exclude=/{name}$" for name in skip),
            str(target),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "MYPYPATH": str(ROOT), "PYTHONPATH": path},
        cwd=cwd,
        timeout=900,
        check=False,
    )
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return done


#: The slow part of the suite, by file, and why each is slow: about three
#: quarters of its time on a 2-core machine. `-m "not slow and not browser"`
#: runs the rest (README); CI runs everything.
SLOW = {
    "test_shape_blind.py": "the shape checker on a blind corpus of model files",
    "test_shape_blind2.py": "the shape checker on a second blind corpus",
    "test_shape_corpus.py": "the shape checker on its corpus of twins",
    "test_docs.py": "runs every code block of the docs and builds the site",
    "test_typing.py": "runs mypy and basedpyright on the case files",
    "test_agreement.py": "runs mypy with the plugin for every case it compares",
    "test_multiprocess.py": "starts jax.distributed jobs of 2 processes",
    "test_multidevice.py": "starts 8-device processes",
}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by mark
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests of the files in `SLOW` with `slow`."""
    for item in items:
        if item.path.name in SLOW:
            item.add_marker(pytest.mark.slow)
