"""`python -m treespec check` as a project runs it (`treespec/_shapes/command.py`,
`user_code.py`): JAX imported from a folder outside site-packages, and files of
a package checked as the modules they are (pre-commit passes file paths)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import pytest

from .conftest import child_env

ROOT = Path(__file__).resolve().parent.parent


def _run(
    *args: str, cwd: Path, path: tuple[Path, ...] = ()
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "treespec", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=child_env(path),
        check=False,
        timeout=300,  # the command always ends: a hang fails here
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


# A file of a package is checked as the module it is (pre-commit passes paths).

LAYERS = """
import jax.numpy as jnp
from jaxtyping import Array, Float


def dense(x: Float[Array, "b n"], w: Float[Array, "n m"]) -> Float[Array, "b m"]:
    return x @ w
"""

ATTENTION = """
import treespec
from jaxtyping import Array, Float

from .layers import dense


@treespec.jit
def attend(x: Float[Array, "b n"], w: Float[Array, "n m"]) -> Float[Array, "b m"]:
    return dense(x, w{bug})
"""


def _package(root: Path, bug: str) -> list[str]:
    """A package `mypkg` under `root` (in `src/`), as pre-commit would list
    its files: paths relative to the repository's root."""
    package = root / "src" / "mypkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "layers.py").write_text(LAYERS)
    (package / "attention.py").write_text(ATTENTION.format(bug=bug))
    return ["src/mypkg/__init__.py", "src/mypkg/attention.py", "src/mypkg/layers.py"]


def _as_the_hook_runs(files: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """The command as `.pre-commit-hooks.yaml` has pre-commit run it: its
    entry, its args, then the files."""
    hook = (ROOT / ".pre-commit-hooks.yaml").read_text().splitlines()
    entry = next(line for line in hook if line.startswith("  entry: "))
    args = next(line for line in hook if line.startswith("  args: "))
    words = entry.removeprefix("  entry: ").split()
    assert words[:3] == ["python", "-m", "treespec"], words
    extra = args.removeprefix("  args: ").strip("[]").split(", ")
    return _run(*words[3:], *[a for a in extra if a], *files, cwd=cwd)


def test_the_hook_passes_a_correct_package_given_as_file_paths(tmp_path: Path) -> None:
    done = _as_the_hook_runs(_package(tmp_path, ""), tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        done.stdout.splitlines()[-1]
        == "checked 1 function: 0 errors, 0 notes, 0 skipped"
    )


def test_the_hook_blocks_a_bad_package_at_the_bugs_line(tmp_path: Path) -> None:
    done = _as_the_hook_runs(_package(tmp_path, ".T"), tmp_path)
    lines = done.stdout.splitlines()
    assert done.returncode == 1, done.stdout + done.stderr
    bug = os.path.join("src", "mypkg", "layers.py")
    assert lines[0].startswith(f"{bug}:7: error: attend: "), lines
    assert "(called at line 10)" in lines[0]


def test_a_folder_holding_a_package_imports_its_files_as_modules(
    tmp_path: Path,
) -> None:
    _package(tmp_path / "proj", ".T")
    (tmp_path / "proj" / "script.py").write_text(PROJECT)
    done = _run("check", "proj", cwd=tmp_path)
    assert "import" not in done.stdout, done.stdout
    assert (
        done.stdout.splitlines()[-1]
        == "checked 2 functions: 2 errors, 0 notes, 0 skipped"
    )


def test_allow_empty_exits_0_when_there_is_nothing_to_check(tmp_path: Path) -> None:
    # pre-commit hands the check the files a commit changed: none may hold a
    # transform. Without the flag, nothing checked is a failure.
    (tmp_path / "plain.py").write_text("x = 1\n")
    done = _run("check", "--allow-empty", "plain.py", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        "checked 0 functions: 0 errors, 0 notes, 0 skipped"
    ]
    assert _run("check", "plain.py", cwd=tmp_path).returncode == 1


STACK = """
import equinox as eqx
import jax
from jaxtyping import Array, Float

import treespec


class Layer(eqx.Module):
    w: Float[Array, "d d"]


class Stack(eqx.Module):
    layers: tuple[Layer, ...]

    def __init__(self, d: int, depth: int) -> None:
        self.layers = tuple(Layer(jax.numpy.eye(d)) for _ in range(depth))

    @treespec.jit
    def __call__(self, x: Float[Array, "n"]) -> Float[Array, "k"]:
        h = x[:3]
        for layer in self.layers:
            h = layer.w @ h
        return h
"""


def test_a_stack_of_layers_after_a_slice_ends_with_a_note(tmp_path: Path) -> None:
    # Each layer's d must be min(n, 3), a size the checker cannot evaluate:
    # the solving asked for it again and again and never ended. Now the
    # check stops there, in a note in the user's names, and the command ends.
    (tmp_path / "stack.py").write_text(STACK)
    done = _run("check", "stack.py", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    (note, summary) = done.stdout.splitlines()
    assert note.startswith("stack.py:23: note: Stack.__call__: not checked past")
    assert "d of self.layers[0] == min(n, 3)" in note and "d__1" not in note
    assert summary == "checked 1 function: 0 errors, 1 note, 0 skipped"


CROSS = """
import math

import equinox as eqx
import jax
from jaxtyping import Array, Float

import treespec


class Cross(eqx.Module):
    w_q: Float[Array, "d_q d_a"]
    w_k: Float[Array, "d_kv d_a"]
    heads: int = eqx.field(static=True)  # no shape: built by __init__

    def __init__(self, q_dim: int, kv_dim: int, attn_dim: int, *, key: jax.Array):
        self.heads = 1
        self.w_q = jax.random.normal(key, (q_dim, attn_dim)) / math.sqrt(q_dim)
        self.w_k = jax.random.normal(key, (kv_dim, attn_dim)) / math.sqrt(kv_dim)


@treespec.jit
def scores(
    attn: Cross, x: Float[Array, "t d_q"], ctx: Float[Array, "s d_kv"]
) -> Float[Array, "t s"]:
    q = (x @ attn.w_q) / math.sqrt(x.shape[1])  # a size as a number
    return q @ (x @ attn.w_k).T  # keys from x, not ctx
"""


def test_relations_that_undo_each_other_end_the_solving(tmp_path: Path) -> None:
    # x @ w_k asked for kv_dim == d_q, ctx for kv_dim == d_kv: each relation
    # the failures asked for undid the other (at concrete sizes, 11 read as
    # kv_dim where kv_dim == d_q had been taken), and the check never
    # ended. Now the fields say it (`w_k: "d_kv d_a"` holds kv_dim where the
    # function's `d_kv` is): no unknown to solve, and the bug is an error.
    # (`test_solving_ends_when_relations_undo_each_other` holds the loop.)
    (tmp_path / "cross.py").write_text(CROSS)
    done = _run("check", "--timeout", "100", "cross.py", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    (error, summary) = done.stdout.splitlines()
    assert error.startswith("cross.py:27: error: scores:"), done.stdout
    assert "got (d_q,) and (d_kv,)" in error, error
    assert "skipped" not in error and summary.endswith("0 skipped"), done.stdout


SCRIPT = """
import argparse
import pathlib

pathlib.Path("imported").write_text("ran")  # a script's top level
parser = argparse.ArgumentParser()
parser.add_argument("data")
parser.parse_args()  # exits: the command gives it no argument
"""


def test_a_file_that_never_names_treespec_is_not_imported(tmp_path: Path) -> None:
    # pre-commit's `types: [python]` hands over every changed file: a
    # setup.py, a script with required arguments. Their top level never runs.
    (tmp_path / "setup.py").write_text(SCRIPT)
    (tmp_path / "train.py").write_text(SCRIPT)
    quiet = "\n".join(line for line in PRINTS.splitlines() if "print" not in line)
    (tmp_path / "model.py").write_text(quiet)
    done = _run("check", "setup.py", "train.py", "model.py", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (tmp_path / "imported").exists()
    assert done.stdout.splitlines() == [
        "checked 1 function: 0 errors, 0 notes, 0 skipped"
    ]
    # A package's walk leaves them out too, and a file naming treespec that
    # exits at import is still the error it was.
    _package(tmp_path / "proj", "")
    (tmp_path / "proj" / "src" / "mypkg" / "cli.py").write_text(SCRIPT)
    assert _run("check", "proj", cwd=tmp_path).returncode == 0
    assert not (tmp_path / "imported").exists()
    (tmp_path / "named.py").write_text("import treespec\n" + SCRIPT)
    done = _run("check", "named.py", cwd=tmp_path)
    assert done.returncode == 1 and "exited at import" in done.stdout


def test_a_packages_walk_imports_only_what_names_treespec(tmp_path: Path) -> None:
    # Issue 56's public code: a subpackage that never names treespec (its
    # `__init__` needing a module this environment lacks) was imported by
    # the walk and failed the run; a folder without `__init__.py` inside the
    # package (a namespace package) was never entered, its functions passed
    # in silence.
    _package(tmp_path / "proj", "")
    package = tmp_path / "proj" / "src" / "mypkg"
    (package / "extras").mkdir()
    (package / "extras" / "__init__.py").write_text("import not_installed_here\n")
    (package / "models" / "mlp").mkdir(parents=True)
    (package / "models" / "mlp" / "heads.py").write_text(PROJECT.replace("w.T", "w"))
    for given in ("proj/src/mypkg", "mypkg"):  # the package's folder, its name
        done = _run("check", given, cwd=tmp_path, path=(tmp_path / "proj" / "src",))
        assert "not_installed_here" not in done.stdout, done.stdout
        assert done.stdout.splitlines()[-1] == (
            "checked 2 functions: 0 errors, 0 notes, 0 skipped"
        ), done.stdout


PRINTS = """
import jax.numpy as jnp
import treespec
from jaxtyping import Array, Float

print("loading the model file")


@treespec.jit
def scale(x: Float[Array, "b n"]) -> Float[Array, "b n"]:
    print("tracing scale", x.shape)
    return 2 * x
"""


def test_what_checked_code_prints_goes_to_stderr(tmp_path: Path) -> None:
    (tmp_path / "noisy.py").write_text(PRINTS)
    done = _run("check", "--format", "json", "noisy.py", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    found = json.loads(done.stdout)  # nothing but the JSON object
    assert found["functions"] == 1 and found["errors"] == 0
    assert "loading the model file" in done.stderr and "tracing scale" in done.stderr
    text = _run("check", "noisy.py", cwd=tmp_path)
    assert text.stdout.splitlines() == [
        "checked 1 function: 0 errors, 0 notes, 0 skipped"
    ]


PAIRS = """
import treespec
from jaxtyping import Array, Float


@treespec.jit
def pairs(x: Float[Array, "b n"]) -> Float[Array, "b n"]:
    return x.reshape(x.shape[0], -1, 2).reshape(x.shape)


@treespec.jit
def other(y: Float[Array, "m"]) -> Float[Array, "m"]:
    return y
"""


def test_the_command_takes_constraints(tmp_path: Path) -> None:
    # The note suggests a relation; stated from the command, it holds for
    # the functions whose annotations name one of its sizes (not `other`).
    (tmp_path / "pairs.py").write_text(PAIRS)
    plain = _run("check", "pairs.py", cwd=tmp_path)
    assert "constraints=('n == 2*k',)" in plain.stdout, plain.stdout
    done = _run("check", "--constraint", "n == 2*k", "pairs.py", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        "checked 2 functions: 0 errors, 0 notes, 0 skipped"
    ]
    # One JAX cannot read is a usage error, before anything is imported.
    bad = _run("check", "--constraint", "n == ", "pairs.py", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stdout == "", bad.stdout + bad.stderr
    assert bad.stderr.startswith("error: --constraint 'n == ': not a relation")


SKIPPED = """
import jax
import treespec
from jaxtyping import Array, Float


class Opaque:
    pass


@treespec.jit
def step(x: Float[Array, "n"], state: Opaque) -> Float[Array, "n"]:
    return x
"""


def test_a_skipped_function_is_counted_and_fails_under_the_option(
    tmp_path: Path,
) -> None:
    (tmp_path / "step.py").write_text(SKIPPED)
    done = _run("check", "step.py", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].endswith(", 1 skipped")
    assert "skipped" in done.stdout.splitlines()[0]
    strict = _run("check", "--fail-on-skip", "step.py", cwd=tmp_path)
    assert strict.returncode == 1, strict.stdout + strict.stderr
    assert strict.stdout == done.stdout


SLOW_TRACE = """
import time

import treespec
from jaxtyping import Array, Float


@treespec.jit
def slow(x: Float[Array, "n"]) -> Float[Array, "n"]:
    time.sleep(30)  # each trace: past the bound
    return x


@treespec.jit
def quick(x: Float[Array, "n"]) -> Float[Array, "n"]:
    return x
"""


def test_a_check_past_the_time_bound_is_reported_not_checked(tmp_path: Path) -> None:
    import time

    (tmp_path / "slow.py").write_text(SLOW_TRACE)
    start = time.monotonic()
    done = _run("check", "--timeout", "2", "slow.py", cwd=tmp_path)
    assert time.monotonic() - start < 25, "the bound did not end the check"
    assert done.returncode == 0, done.stdout + done.stderr
    note, summary = done.stdout.splitlines()
    assert note.startswith("slow.py:9: note: slow: skipped: its check ran past")
    assert "time bound of 2 s" in note and "--timeout" in note
    assert summary == "checked 2 functions: 0 errors, 0 notes, 1 skipped"
    strict = _run("check", "--timeout", "2", "--fail-on-skip", "slow.py", cwd=tmp_path)
    assert strict.returncode == 1


HOST_MEMORY = """
import numpy as np

import treespec
from jaxtyping import Array, Float


@treespec.jit
def pairs(x: Float[Array, "n"]) -> Float[Array, "n"]:
    table = np.ones(x.shape[0] * 2**24)  # host memory of a size: 1.4 GiB at n=11
    return x * table[0]
"""


def test_host_memory_past_the_bound_is_a_note_not_a_killed_command(
    tmp_path: Path,
) -> None:
    # NumPy on sizes (`np.triu_indices(n)` at a large witness) can ask for
    # more memory than the machine has, and the system then kills the
    # command, every finding of the file lost. Past `--memory` the
    # allocation fails instead: a note at its line, and the check goes on.
    (tmp_path / "host.py").write_text(HOST_MEMORY)
    done = _run("check", "--memory", "1", "host.py", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    note, summary = done.stdout.splitlines()
    assert note.startswith("host.py:10: note: pairs: not checked past this line")
    assert "ran out of memory" in note and "--memory" in note, note
    assert summary == "checked 1 function: 0 errors, 1 note, 0 skipped"


def test_the_memory_bound_is_the_callers_again_after_main(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    resource = pytest.importorskip("resource")
    from treespec._shapes.command import main

    (tmp_path / "scaled_only.py").write_text(PROJECT.replace("x @ w.T", "x @ w"))
    monkeypatch.chdir(tmp_path)
    before = resource.getrlimit(resource.RLIMIT_DATA)
    assert main(["check", "--memory", "4", "scaled_only.py"]) == 0
    assert resource.getrlimit(resource.RLIMIT_DATA) == before


def test_a_constraint_leaves_functions_that_do_not_name_its_sizes_alone(
    tmp_path: Path,
) -> None:
    # Constraints given stop the witnesses of the functions they concern: a
    # function that names none of `n == 2*k`'s sizes keeps them, and its
    # `** -0.5` of a size is checked there as without the option.
    scaled = (
        "\n\n@treespec.jit\n"
        'def scaled(y: Float[Array, "m"]) -> Float[Array, "m"]:\n'
        "    return y * y.shape[0] ** -0.5\n"
    )
    (tmp_path / "pairs.py").write_text(PAIRS + scaled)
    done = _run("check", "--constraint", "n == 2*k", "pairs.py", cwd=tmp_path)
    assert done.stdout.splitlines() == [
        "checked 3 functions: 0 errors, 0 notes, 0 skipped"
    ], done.stdout


def test_a_module_name_python_cannot_find_is_a_usage_error(tmp_path: Path) -> None:
    done = _run("check", "no_such_module_here", cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == "", done.stdout + done.stderr
    assert "no_such_module_here: no such file, directory or module" in done.stderr


def test_a_script_imports_the_modules_beside_it(tmp_path: Path) -> None:
    # `python scripts/run.py` finds `scripts/helpers.py`: so does the check,
    # run from anywhere.
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "helpers.py").write_text(
        "def double(x):\n    return 2 * x\n"
    )
    (tmp_path / "scripts" / "run.py").write_text(
        "from helpers import double\n" + PROJECT.replace("x @ w.T", "double(x @ w)")
    )
    done = _run("check", "scripts/run.py", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        "checked 1 function: 0 errors, 0 notes, 0 skipped"
    ]


def test_a_file_that_fails_at_import_is_that_error_not_nothing_found(
    tmp_path: Path,
) -> None:
    (tmp_path / "broken.py").write_text("import treespec\nraise RuntimeError('no')\n")
    done = _run("check", "broken.py", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "raised RuntimeError at import" in done.stdout, done.stdout
    assert "no function a treespec transform wraps" not in done.stdout, done.stdout


def test_an_in_process_run_leaves_the_alarm_as_it_found_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # `main()` called from a test suite or a notebook arms SIGALRM for its
    # time bound: afterwards the caller's own handler is back and no alarm
    # is left to go off in the caller's code.
    import signal

    from treespec._shapes.command import main

    (tmp_path / "scaled_only.py").write_text(PROJECT.replace("x @ w.T", "x @ w"))
    monkeypatch.chdir(tmp_path)

    def mine(signum: int, frame: object) -> None:
        raise AssertionError("the check's alarm went off in the caller's code")

    previous = signal.signal(signal.SIGALRM, mine)
    try:
        assert main(["check", "--timeout", "60", "scaled_only.py"]) == 0
        assert signal.getsignal(signal.SIGALRM) is mine
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert capsys.readouterr().out.splitlines() == [
        "checked 1 function: 0 errors, 0 notes, 0 skipped"
    ]


def test_a_function_under_two_names_is_checked_once(tmp_path: Path) -> None:
    (tmp_path / "aliased.py").write_text(
        PROJECT.replace("x @ w.T", "x @ w") + "\n\nstep = project\n"
    )
    done = _run("check", "aliased.py", cwd=tmp_path)
    assert done.stdout.splitlines() == [
        "checked 1 function: 0 errors, 0 notes, 0 skipped"
    ], done.stdout + done.stderr


def test_a_folder_python_cannot_import_is_files_not_a_package(tmp_path: Path) -> None:
    # `my-pkg/` holds an `__init__.py` but is no importable package name:
    # its files are checked as the scripts they are.
    (tmp_path / "my-pkg").mkdir()
    (tmp_path / "my-pkg" / "__init__.py").write_text("")
    (tmp_path / "my-pkg" / "model.py").write_text(PROJECT)
    done = _run("check", "my-pkg/model.py", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    (error, summary) = done.stdout.splitlines()
    assert error.startswith("my-pkg/model.py:9: error: project:"), error
    assert summary == "checked 1 function: 1 error, 0 notes, 0 skipped"


WRAPPED = """
import equinox as eqx
import jax
import jax.numpy as jnp
import treespec
from jaxtyping import Array, Float


@eqx.filter_jit
@treespec.jit
def outer_filter_jit(
    x: Float[Array, "b n"], w: Float[Array, "n m"]
) -> Float[Array, "b m"]:
    return x @ w.T  # BUG


@jax.jit
@treespec.jit
def outer_jit(x: Float[Array, "b n"]) -> Float[Array, "b n"]:
    return x * 2


class Model(eqx.Module):
    w: Float[Array, "n m"]

    @eqx.filter_jit
    @treespec.jit
    def __call__(self, x: Float[Array, "b n"]) -> Float[Array, "b m"]:
        return x @ self.w
"""


def test_a_transform_under_another_libraries_is_found(tmp_path: Path) -> None:
    # flowMC's `@eqx.filter_jit` above `@treespec.jit`: the module holds
    # Equinox's wrapper, whose `__wrapped__` is the transform.
    (tmp_path / "wrapped.py").write_text(WRAPPED)
    done = _run("check", "wrapped.py", cwd=tmp_path)
    lines = done.stdout.splitlines()
    assert lines[-1] == "checked 3 functions: 1 error, 0 notes, 0 skipped", done.stdout
    bug = WRAPPED.splitlines().index("    return x @ w.T  # BUG") + 1
    assert lines[0].startswith(f"wrapped.py:{bug}: error: outer_filter_jit:"), lines
