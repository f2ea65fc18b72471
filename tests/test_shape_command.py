"""`python -m treespec check` as a project runs it (`treespec/_shapes/command.py`,
`user_code.py`): JAX imported from a folder outside site-packages, and files of
a package checked as the modules they are (pre-commit passes file paths)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import jax

ROOT = Path(__file__).resolve().parent.parent


def _run(
    *args: str, cwd: Path, path: tuple[Path, ...] = ()
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "treespec", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(map(str, (*path, ROOT)))},
        check=False,
    )


PROJECT = """
import jax.numpy as jnp
import treespec
from jaxtyping import Array, Float


@treespec.jit
def project(x: Float[Array, "b n"], w: Float[Array, "n m"]) -> Float[Array, "b m"]:
    return x @ w.T
"""


def test_jax_installed_outside_site_packages_is_a_library(tmp_path: Path) -> None:
    # As on a TPU VM, or with a source checkout: JAX on PYTHONPATH, not in
    # site-packages. The error is still the user's line, never JAX's.
    libs = tmp_path / "libs"
    shutil.copytree(
        Path(jax.__file__).parent,
        libs / "jax",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    (tmp_path / "proj.py").write_text(PROJECT)
    done = _run("check", "proj.py", cwd=tmp_path, path=(libs,))
    lines = done.stdout.splitlines()
    assert done.returncode == 1, done.stdout + done.stderr
    assert lines[0].startswith("proj.py:9: error: project: "), lines
    assert "dot_general" in lines[0]
