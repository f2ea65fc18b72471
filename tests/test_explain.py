from __future__ import annotations

from typing import TypedDict

import jax.numpy as jnp
import pytest

import treespec
from treespec import Dynamic, Static


class Config(TypedDict):
    n_layers: Static[int]
    scale: Dynamic[float]


def step(params: Dynamic[dict[str, jnp.ndarray]], x, cfg: Config):
    return x


def test_explain_without_arguments_prints_the_annotation_tree(
    capsys: pytest.CaptureFixture[str],
) -> None:
    treespec.explain(step)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "step"
    assert "  params: Dynamic[dict[str, Array]]" in out
    assert "  cfg: Config" in out
    assert "    'n_layers': Static[int]" in out


def test_explain_with_arguments_gives_one_line_per_leaf_with_its_source(
    capsys: pytest.CaptureFixture[str],
) -> None:
    treespec.explain(
        step, {"w": jnp.ones(2)}, jnp.ones(3), {"n_layers": 2, "scale": 0.5}
    )
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line for line in lines[1:]}
    assert set(rows) == {"params['w']", "x", "cfg['n_layers']", "cfg['scale']"}
    assert " dynamic " in rows["params['w']"]
    assert "Dynamic on parameter 'params' of step" in rows["params['w']"]
    assert " static " in rows["cfg['n_layers']"]
    assert "Static on Config['n_layers']" in rows["cfg['n_layers']"]
    assert "default 'infer' (an array)" in rows["x"]


def test_explain_of_a_jitted_function_uses_its_flags(
    capsys: pytest.CaptureFixture[str],
) -> None:
    jitted = treespec.jit(step, static_flags={"cfg": {"scale": True}})
    treespec.explain(
        jitted, {"w": jnp.ones(2)}, jnp.ones(3), {"n_layers": 2, "scale": 0.5}
    )
    out = capsys.readouterr().out
    scale = next(line for line in out.splitlines() if line.startswith("cfg['scale']"))
    assert " static " in scale and "static_flags['cfg']['scale']" in scale


def test_explain_reports_invalid_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    treespec.explain(step, {"w": jnp.ones(2)}, jnp.ones(3), {"n_layers": 2})
    out = capsys.readouterr().out
    assert "required key 'scale' of Config" in out


def test_explain_of_grad_shows_the_floats_it_differentiates(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # grad traces the unannotated floats of the arguments it differentiates;
    # explain says what the transform does, not what jit would.
    def loss(x, y):  # type: ignore[no-untyped-def]
        return x * y

    treespec.explain(treespec.grad(loss), 2.0, 3.0)
    text = capsys.readouterr().out
    lines = dict(line.split(None, 1) for line in text.splitlines()[1:])
    assert lines["x"].startswith("dynamic"), text
    assert lines["y"].startswith("static"), text
    assert float(treespec.grad(loss)(2.0, 3.0)) == 3.0


def test_explain_tells_a_numpy_bool_from_a_python_bool(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # They hash alike and make two programs: explain shows which came.
    import numpy as np

    def f(x, flag: Static[bool]):  # type: ignore[no-untyped-def]
        return x

    treespec.explain(f, jnp.ones(2), np.bool_(True))
    treespec.explain(f, jnp.ones(2), True)
    out = capsys.readouterr().out.splitlines()
    rows = [line.split("<-")[0] for line in out if line.startswith("flag")]
    assert "numpy.bool True" in rows[0] and "numpy" not in rows[1]
    assert " bool True " in rows[1]
