"""Shapes checked without data (`check_shapes`: `treespec/_shapes/`: `abstract.py`,
`check.py`, `outcomes.py`, `user_code.py`, `report.py`) and its command (`python
-m treespec check`, `command.py`)."""

from __future__ import annotations

import abc
import enum
import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal, NamedTuple, TypedDict

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jaxtyping import (
    Array,
    Bool,
    Complex,
    Float,
    Int,
    Key,
    PRNGKeyArray,
    PyTree,
    Shaped,
    UInt32,
)

import treespec
from treespec import Dynamic, Static, ValidationError
from treespec._shapes.command import main

from .conftest import child_env

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "tests" / "shapes" / "model.py"


def _line(fun: Any, text: str) -> int:
    """The line of `fun`'s source that contains `text`."""
    import inspect

    lines, start = inspect.getsourcelines(fun)
    (offset,) = [i for i, line in enumerate(lines) if text in line]
    return start + offset


# -- outcomes ----------------------------------------------------------------


def _helper(x: jax.Array, w: jax.Array) -> jax.Array:
    return x + jnp.tanh(x @ w)  # runs whenever n == m


@treespec.jit
def block(x: Float[Array, "b n"], w: Float[Array, "n m"]) -> Float[Array, "b m"]:
    return _helper(x, w)


def test_an_error_is_reported_at_the_innermost_line_of_user_code() -> None:
    report = treespec.check_shapes(block)
    assert not report.ok
    (error,) = report.errors
    assert error.line == _line(_helper, "x + jnp.tanh")
    assert error.function == "block"
    assert "(b, n), (b, m)" in error.message
    assert error.format().endswith(f": error: block: {error.message}")


@treespec.jit
def _merge(
    x: Float[Array, "b h w c"], skip: Float[Array, "b h w c"]
) -> Float[Array, "b h w c"]:
    return x + skip


@treespec.jit
def up_block(x: Float[Array, "b h w c"]) -> Float[Array, "b h w c"]:
    skip = jnp.concatenate([x, x], axis=-1)
    return _merge(x, skip)  # the call


def test_a_nested_calls_refused_argument_is_said_once_on_one_line() -> None:
    (error,) = treespec.check_shapes(up_block).errors
    assert error.line == _line(up_block, "# the call")
    # The callee, then the argument and its key path, each said once.
    assert error.message.startswith("_merge: argument skip, at skip: expected ")
    assert error.message.count("argument skip") == 1
    assert "problem" not in error.message
    assert error.message.endswith("got float32[b,h,w,2*c]")


_INSTALLED = """
import jax.numpy as jnp
from jaxtyping import Array, Float

import treespec


def _helper(x, w):
    return x + jnp.tanh(x @ w)  # runs whenever n == m


@treespec.jit
def block(x: Float[Array, "b n"], w: Float[Array, "n m"]) -> Float[Array, "b m"]:
    return _helper(x, w)
"""


def test_a_checked_function_under_site_packages_is_still_the_users_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An installed package of the user's (`pip install .` of their project):
    # its file lies in a library folder, yet the error is reported at its line
    # (the checked function's file is the user's, wherever it lies).
    from treespec._shapes import owners

    library = tmp_path / "site-packages"
    library.mkdir()
    (library / "installed_model.py").write_text(_INSTALLED)
    folders = (*owners._SITE_DIRS, str(library.resolve()))
    monkeypatch.setattr(owners, "_SITE_DIRS", folders)
    monkeypatch.syspath_prepend(str(library))
    monkeypatch.delitem(sys.modules, "installed_model", raising=False)
    import installed_model  # type: ignore[import-not-found]

    (error,) = treespec.check_shapes(installed_model.block).errors
    line = _INSTALLED.splitlines().index(
        "    return x + jnp.tanh(x @ w)  # runs whenever n == m"
    )
    assert error.file.endswith("installed_model.py")
    assert error.line == line + 1, str(error)  # the helper's own line
    assert "(b, n), (b, m)" in error.message


@treespec.jit
def center(x: Float[Array, "b n"]) -> Float[Array, "b n"]:
    return x - x.mean(axis=1, keepdims=True)


def test_a_correct_function_is_ok_with_its_symbolic_output() -> None:
    report = treespec.check_shapes(center)
    assert report.ok and report.problems == ()
    ((statics, out),) = report.outputs
    assert statics == "" and str(out.shape) == "(b, n)"
    assert str(report) == "center: ok"


@treespec.jit
def transposed(x: Float[Array, "b n"]) -> Float[Array, "b n"]:
    y = x.T
    return y


def test_a_return_mismatch_is_reported_at_the_return() -> None:
    (error,) = treespec.check_shapes(transposed).errors
    assert error.line == _line(transposed.__wrapped__, "return y")
    assert "the return value: expected Float[Array, 'b n']" in error.message
    assert "got float32[n,b]" in error.message


@treespec.jit
def pairs(x: Float[Array, "b n"]) -> Float[Array, "b n"]:
    return x.reshape(x.shape[0], -1, 2).reshape(x.shape)


def test_an_unstated_relation_is_a_note_that_constraints_state() -> None:
    report = treespec.check_shapes(pairs)
    assert report.ok
    (note,) = report.notes
    assert note.line == _line(pairs.__wrapped__, "reshape")
    assert "constraints=" in note.message
    assert treespec.check_shapes(pairs, constraints=("n == 2*k",)).problems == ()


@treespec.jit
def gram_gap(
    f: Float[Array, "b h w c"], target: Float[Array, "b c c"]
) -> Float[Array, "b c c"]:
    flat = f.reshape(f.shape[0], -1, f.shape[-1])
    gram = flat @ flat.transpose(0, 2, 1)  # (b, h*w, h*w): both axes c's
    return gram - target


def test_a_relation_two_axes_need_is_stated_once() -> None:
    (note,) = treespec.check_shapes(gram_gap).notes
    assert note.message.count("c == h*w") == 2, note.message  # said, stated
    assert "constraints=('c == h*w',)" in note.message, note.message


@treespec.jit
def needs_n(x: Float[Array, "b n"], n: Static[int]) -> Float[Array, "b n"]:
    return x * n


@treespec.jit
def needs_how(x: Float[Array, "b n"], how: Static[str]) -> Float[Array, " b"]:
    return getattr(jnp, how)(x, axis=1)


def test_a_static_leaf_without_a_value_skips_the_function_with_a_note() -> None:
    report = treespec.check_shapes(needs_how)
    assert report.ok and report.skipped
    (note,) = report.notes
    assert "how (Static[str]) has no value" in note.message
    assert "check_shapes(needs_how, how=...)" in note.message
    assert treespec.check_shapes(needs_how, how="sum").problems == ()
    # A static int is a size, an unknown checked at every size: not skipped.
    report = treespec.check_shapes(needs_n)
    assert report.problems == () and not report.skipped, str(report)
    assert treespec.check_shapes(needs_n, n=3).problems == ()


@treespec.jit
def unshaped(x: jax.Array) -> jax.Array:
    return x


def test_an_annotation_that_says_no_shape_skips_with_a_note() -> None:
    (note,) = treespec.check_shapes(unshaped).problems
    assert note.skipped and "says no shape" in note.message


@treespec.jit
def branches(x: Float[Array, "n"]) -> Float[Array, "n"]:
    if x.sum() > 0:
        return x
    return -x


def test_control_flow_on_traced_values_is_a_note() -> None:
    (note,) = treespec.check_shapes(branches).problems
    assert note.severity == "note" and "values of traced arrays" in note.message
    assert note.line == _line(branches.__wrapped__, "if x.sum()")


class Mode(enum.Enum):
    SUM = "sum"
    MEAN = "mean"


@treespec.jit
def modes(
    x: Float[Array, "b n"],
    kind: Static[Literal["keep", "pool"]],
    mode: Static[Mode],
    flag: Static[bool],
) -> Float[Array, "b n"]:
    if kind == "pool" and mode is Mode.MEAN and flag:
        return x.mean(axis=0)
    return x


def test_bool_literal_and_enum_values_are_each_checked() -> None:
    report = treespec.check_shapes(modes)
    assert len(report.outputs) == 7  # 2 * 2 * 2 runs, one failed
    (error,) = report.errors
    assert "kind='pool'" in error.message and "flag=True" in error.message
    assert treespec.check_shapes(modes, kind="keep").ok


def test_past_the_cap_a_note_says_how_many_combinations_were_left_out() -> None:
    @treespec.jit
    def many(
        x: Float[Array, "n"], a: bool, b: bool, c: bool, d: bool, e: bool
    ) -> Float[Array, "n"]:
        return x

    report = treespec.check_shapes(many)
    assert report.ok and len(report.outputs) == treespec._shapes.check.MAX_COMBINATIONS
    (note,) = report.notes
    assert "checked 16 of 32 combinations" in note.message


def test_a_keyword_that_names_no_parameter_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="'m'"):
        treespec.check_shapes(needs_n, m=3)


def test_tracebacks_are_unfiltered_in_the_checking_thread_only() -> None:
    import threading

    seen: dict[str, str] = {}

    def other() -> None:
        seen["other"] = jax.config.jax_traceback_filtering  # type: ignore[attr-defined]

    @treespec.jit
    def peek(x: Float[Array, "n"]) -> Float[Array, "n"]:
        seen["checking"] = jax.config.jax_traceback_filtering  # type: ignore[attr-defined]
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        return x

    before = jax.config.jax_traceback_filtering  # type: ignore[attr-defined]
    assert treespec.check_shapes(peek).ok
    assert seen == {"checking": "off", "other": before}
    assert jax.config.jax_traceback_filtering == before  # type: ignore[attr-defined]


# -- annotation forms --------------------------------------------------------


class Pair(NamedTuple):
    a: Float[Array, "n"]
    b: Float[Array, "n"]


class Batch(TypedDict):
    x: Float[Array, "b n"]
    y: Int[Array, "b"]


@treespec.dataclass
class Linear:
    w: Float[Array, "n m"]
    bias: Float[Array, "m"]
    scale: Static[float] = 1.0


class EqxLinear(eqx.Module):
    w: Float[Array, "n m"]
    bias: Float[Array, "m"]

    @treespec.jit
    def __call__(self, x: Float[Array, "b n"]) -> Float[Array, "b m"]:
        return x @ self.w + self.bias

    @treespec.jit
    def wrong(self, x: Float[Array, "b n"]) -> Float[Array, "b m"]:
        return x @ self.w.T + self.bias


def _forms() -> list[tuple[str, Any, Any]]:
    """(form, a correct function, the same with a shape bug)."""

    def pair(f: Any) -> Any:
        return treespec.jit(f)

    return [
        (
            "keyword-only",
            pair(lambda x, *, w: x @ w),
            pair(lambda x, *, w: x @ w.T),
        ),
        ("NamedTuple", pair(_nt_ok), pair(_nt_bad)),
        ("TypedDict", pair(_td_ok), pair(_td_bad)),
        ("treespec.dataclass", pair(_dc_ok), pair(_dc_bad)),
        ("tuple", pair(_tuple_ok), pair(_tuple_bad)),
        ("PyTree", pair(_pytree_ok), pair(_pytree_bad)),
        ("*args", pair(_args_ok), pair(_args_bad)),
        ("fixed size", pair(_fixed_ok), pair(_fixed_bad)),
        ("expression", pair(_expr_ok), pair(_expr_bad)),
        ("#broadcast", pair(_bcast_ok), pair(_bcast_bad)),
        ("*batch", pair(_star_ok), pair(_star_bad)),
        ("...", pair(_dots_ok), pair(_dots_bad)),
        ("dtype", pair(_dtype_ok), pair(_dtype_bad)),
    ]


def _nt_ok(p: Pair) -> Float[Array, "n"]:
    return p.a + p.b


def _nt_bad(p: Pair) -> Float[Array, "n"]:
    return p.a + p.b[:, None]


def _td_ok(batch: Batch) -> Float[Array, "b"]:
    return batch["x"].sum(1) + batch["y"]


def _td_bad(batch: Batch) -> Float[Array, "b"]:
    return batch["x"].sum(0) + batch["y"]


def _dc_ok(lin: Linear, x: Float[Array, "b n"]) -> Float[Array, "b m"]:
    return x @ lin.w * lin.scale + lin.bias


def _dc_bad(lin: Linear, x: Float[Array, "b n"]) -> Float[Array, "b m"]:
    return x @ lin.w * lin.scale + x


def _tuple_ok(t: tuple[Float[Array, "n"], Float[Array, "n m"]]) -> Float[Array, "m"]:
    return t[0] @ t[1]


def _tuple_bad(t: tuple[Float[Array, "n"], Float[Array, "n m"]]) -> Float[Array, "m"]:
    return t[1] @ t[0]


def _pytree_ok(tree: PyTree[Float[Array, "n"]]) -> PyTree[Float[Array, "n"]]:
    return jax.tree.map(lambda v: v * 2, tree)


def _pytree_bad(tree: PyTree[Float[Array, "n"]]) -> PyTree[Float[Array, "n"]]:
    return jax.tree.map(lambda v: v[1:], tree)


def _args_ok(*xs: Float[Array, "n"]) -> Float[Array, "n"]:
    return sum(xs, jnp.zeros(xs[0].shape))


def _args_bad(*xs: Float[Array, "n"]) -> Float[Array, "n"]:
    return jnp.stack(xs)


def _fixed_ok(x: Float[Array, "b 3"], w: Float[Array, "3 4"]) -> Float[Array, "b 4"]:
    return x @ w


def _fixed_bad(x: Float[Array, "b 3"], w: Float[Array, "3 4"]) -> Float[Array, "b 4"]:
    return x @ w[:2]


def _expr_ok(x: Float[Array, "n"], y: Float[Array, "m"]) -> Float[Array, "n+m"]:
    return jnp.concatenate([x, y])


def _expr_bad(x: Float[Array, "n"], y: Float[Array, "m"]) -> Float[Array, "n+m"]:
    return jnp.concatenate([x, y[1:]])


def _bcast_ok(x: Float[Array, "b n"], s: Float[Array, "#b n"]) -> Float[Array, "b n"]:
    return x * s


def _bcast_bad(x: Float[Array, "b n"], s: Float[Array, "#b n"]) -> Float[Array, "b n"]:
    return x * s.sum(0)[:, None]


def _star_ok(x: Float[Array, "*batch n"]) -> Float[Array, "*batch"]:
    return x.sum(-1)


def _star_bad(x: Float[Array, "*batch n"]) -> Float[Array, "*batch"]:
    return x.sum(0)


def _dots_ok(x: Float[Array, "... n"], w: Float[Array, "n m"]) -> Float[Array, "... m"]:
    return x @ w


def _dots_bad(
    x: Float[Array, "... n"], w: Float[Array, "n m"]
) -> Float[Array, "... m"]:
    return x @ w.T


def _dtype_ok(
    x: Int[Array, "n"], m: Bool[Array, "n"], s: Shaped[Array, "n"]
) -> Int[Array, "n"]:
    return jnp.where(m, x, 0) + s.astype(jnp.int32)


def _dtype_bad(
    x: Int[Array, "n"], m: Bool[Array, "n"], s: Shaped[Array, "n"]
) -> Int[Array, "n"]:
    return jnp.where(m, x, 0) + s


@pytest.mark.parametrize(("form", "good", "bad"), _forms(), ids=lambda v: str(v))
def test_each_annotation_form_checks_clean_and_finds_its_bug(
    form: str, good: Any, bad: Any
) -> None:
    if form == "keyword-only":
        good = treespec.jit(_kw_ok)
        bad = treespec.jit(_kw_bad)
    assert treespec.check_shapes(good).problems == ()
    report = treespec.check_shapes(bad)
    assert report.errors, (form, str(report))
    assert not report.notes, str(report)


def _kw_ok(x: Float[Array, "b n"], *, w: Float[Array, "n m"]) -> Float[Array, "b m"]:
    return x @ w


def _kw_bad(x: Float[Array, "b n"], *, w: Float[Array, "n m"]) -> Float[Array, "b m"]:
    return x @ w.T


def test_a_method_gets_an_abstract_self_from_the_field_annotations() -> None:
    assert treespec.check_shapes(EqxLinear.__call__).problems == ()
    (error,) = treespec.check_shapes(EqxLinear.wrong).errors
    assert error.line == _line(EqxLinear.wrong.__wrapped__, "self.w.T")


def test_a_bound_method_keeps_its_instance() -> None:
    lin = EqxLinear(jnp.ones((3, 4)), jnp.ones(4))
    ((_, out),) = treespec.check_shapes(lin.__call__).outputs
    assert str(out.shape) == "(b, 4)"
    (error,) = treespec.check_shapes(lin.wrong).errors
    assert "(3,) and (4,)" in error.message


def test_flax_struct_and_registered_dataclasses_are_built() -> None:
    import dataclasses

    struct = pytest.importorskip("flax.struct")

    @struct.dataclass
    class State:
        w: Float[Array, "n m"]
        name: str = struct.field(pytree_node=False, default="s")

    @jax.tree_util.register_dataclass
    @dataclasses.dataclass
    class Reg:
        w: Float[Array, "n m"]

    @treespec.jit
    def f(s: State, r: Reg, x: Float[Array, "b n"]) -> Float[Array, "b m"]:
        return x @ s.w + x @ r.w

    @treespec.jit
    def g(s: State, r: Reg, x: Float[Array, "b n"]) -> Float[Array, "b m"]:
        return x @ s.w + x @ r.w.T

    assert treespec.check_shapes(f).problems == ()
    assert treespec.check_shapes(g).errors


# -- values given ------------------------------------------------------------


@treespec.jit
def apply_mlp(mlp: eqx.nn.MLP, x: Float[Array, "b 8"]) -> Float[Array, "b 2"]:
    return jax.vmap(mlp)(x)


@treespec.jit
def apply_mlp_wrong(mlp: eqx.nn.MLP, x: Float[Array, "b 8"]) -> Float[Array, "b 2"]:
    return jax.vmap(mlp)(x.T)


def test_a_model_of_library_layers_is_checked_with_the_instance_given() -> None:
    mlp = eqx.nn.MLP(8, 2, 16, 2, key=jax.random.key(0))
    (note,) = treespec.check_shapes(apply_mlp).problems
    assert note.skipped and "check_shapes(apply_mlp, mlp=...)" in note.message
    report = treespec.check_shapes(apply_mlp, mlp=mlp)
    assert report.problems == ()
    assert str(report.outputs[0][1].shape) == "(b, 2)"
    (error,) = treespec.check_shapes(apply_mlp_wrong, mlp=mlp).errors
    assert "got (8,) and (b,)" in error.message
    assert error.line == _line(apply_mlp_wrong.__wrapped__, "x.T")


def test_a_value_given_binds_its_dimensions_for_the_arguments_built() -> None:
    lin = Linear(jnp.ones((3, 5)), jnp.ones(5))
    ((_, out),) = treespec.check_shapes(treespec.jit(_dc_ok), lin=lin).outputs
    assert str(out.shape) == "(b, 5)"
    with_bad = Linear(jnp.ones((3, 5)), jnp.ones(4))
    (error,) = treespec.check_shapes(treespec.jit(_dc_ok), lin=with_bad).errors
    assert "argument lin" in error.message


def test_dynamic_scalars_and_defaults_are_built() -> None:
    @treespec.jit
    def f(
        x: Float[Array, "n"], lr: Dynamic[float], steps: Static[int] = 2
    ) -> Float[Array, "n"]:
        for _ in range(steps):
            x = x * lr
        return x

    assert treespec.check_shapes(f).problems == ()


# -- the model file, the planted bugs, the examples ---------------------------

#: Each planted bug: its kind, the line of `model.py` it replaces, the bug.
BUGS = [
    ("missing keepdims",
     "    return (x - mean) / jnp.sqrt(var + 1e-5) * scale + bias",
     "    return (x - x.mean(-1)) / jnp.sqrt(var + 1e-5) * scale + bias"),
    ("einsum indices", '    q = jnp.einsum("sd,dhk->hsk", x, layer.wq[i])',
     '    q = jnp.einsum("sd,hdk->hsk", x, layer.wq[i])'),
    ("transpose", "    scores = q @ jnp.swapaxes(k, -1, -2) / jnp.sqrt(q.shape[-1])",
     "    scores = q @ k / jnp.sqrt(q.shape[-1])"),
    ("bias width", "    h = act(x @ layer.w1[i] + layer.b1[i])",
     "    h = act(x @ layer.w1[i] + layer.b2[i])"),
    ("contraction", "    return h @ layer.w2[i] + layer.b2[i]",
     "    return h @ layer.w1[i] + layer.b2[i]"),
    ("one Literal mode", "            x = x * 0.9",
     "            x = x + x.mean(axis=0)[:, None]"),
    ("residual width", "        x = x + mlp(layers, i, x, cfg.activation)",
     "        x = x + jax.nn.gelu(x @ layers.w1[i])"),
    ("vmap axis",
     '    return jax.vmap(lambda t: forward(params, t, cfg, "eval"))(tokens)',
     '    return jax.vmap(lambda t: forward(params, t, cfg, "eval"), 1)(tokens)'),
    ("concatenate axis", "    return jnp.concatenate([x, x], axis=-1)",
     "    return jnp.concatenate([x, x], axis=0)"),
    ("reduction axis", "    return x.mean(axis=0)", "    return x.mean(axis=1)"),
    ("scan carry",
     "    carry, _ = jax.lax.scan(lambda c, _: (c * 0.5 + x, None), x, None, length=3)",
     "    carry, _ = jax.lax.scan(lambda c, _: (c[1:], None), x, None, length=3)"),
    ("return dtype", "    return (logits.argmax(-1) == labels).mean()",
     "    return (logits.argmax(-1) == labels).sum()"),
]  # fmt: skip


def _check(capsys: pytest.CaptureFixture[str], *targets: str) -> tuple[int, str]:
    status = main(["check", *targets])
    return status, capsys.readouterr().out


def test_the_model_file_checks_clean(capsys: pytest.CaptureFixture[str]) -> None:
    status, out = _check(capsys, str(MODEL))
    assert (status, out) == (0, "checked 6 functions: 0 errors, 0 notes, 0 skipped\n")


@pytest.mark.parametrize(("kind", "clean", "bug"), BUGS, ids=[b[0] for b in BUGS])
def test_each_planted_bug_is_reported_at_its_line(
    kind: str, clean: str, bug: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = MODEL.read_text()
    assert source.count(clean + "\n") == 1
    planted = source.replace(clean + "\n", bug + "\n")
    line = planted.splitlines().index(bug) + 1
    path = tmp_path / f"model_{kind.replace(' ', '_')}.py"
    path.write_text(planted)
    status, out = _check(capsys, str(path))
    assert status == 1, out
    errors = [row for row in out.splitlines() if ": error: " in row]
    assert errors, out
    assert {row.split(":")[1] for row in errors} == {str(line)}, out
    assert ": note: " not in out


BUGGY = ROOT / "tests" / "shapes" / "model_bugs.py"

#: The function each bug of `model_bugs.py` is reported in, and what its
#: message must say of the dimensions, by the names the annotations give them.
FOUND = {
    "contraction": ("feed_contraction", "got (f,) and (d,)"),
    "transpose": ("attend_transpose", "got (k,) and (s,)"),
    "missing keepdims": ("normed", "(s, d), (s,)"),
    "concatenate axis": (
        "widen",
        "'s 2*d'] with s bound by x, d bound by x, got float32[2*s,d]",
    ),
    "einsum indices": ("attend_einsum", "lhs.shape=(d, h, k)"),
    "residual width": ("residual", "(s, d), (s, f)"),
    "bias width": ("feed_bias", "(s, f), (d,)"),
    "reduction axis": ("pool", "'d'] with d bound by x, got float32[s]"),
    "one Literal mode": ("forward", "(s, d), (d, 1). (with mode='train')"),
    "scan carry": ("smooth", "float32[s,d] but the corresponding output carry"),
    "vmap axis": ("batched", "'b s v'] with b bound by tokens, s bound by tokens"),
    "return dtype": ("accuracy", "expected Float[Array, ''], got int32[]"),
}


def test_one_check_of_the_buggy_model_reports_every_bug_at_its_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    marked = {
        number: match.group(1)
        for number, text in enumerate(BUGGY.read_text().splitlines(), 1)
        if (match := re.search(r"  # BUG: ([\w ]+)$", text))
    }
    assert sorted(marked.values()) == sorted(FOUND)  # every kind, once each
    status, out = _check(capsys, str(BUGGY))
    assert status == 1
    errors = {}
    for row in out.splitlines()[:-1]:
        found = re.fullmatch(r"[^:]+:(\d+): error: ([\w.]+): (.*)", row)
        assert found, row  # an error line, never a note
        errors[int(found.group(1))] = (found.group(2), found.group(3))
    assert set(errors) == set(marked), out  # no more, no fewer
    for number, kind in marked.items():
        function, message = errors[number]
        expected_function, about_the_dimensions = FOUND[kind]
        assert function == expected_function, (kind, out)
        assert about_the_dimensions in message, (kind, message)
    assert out.splitlines()[-1] == "checked 12 functions: 12 errors, 0 notes, 0 skipped"


def test_the_examples_check_every_function_with_no_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # What the quickstart advertises: every function it shows is checked, the
    # step through `check_with` beside it (its config's `hidden` has no value
    # to take from its annotation), data_parallel's with its traced rate.
    status, out = _check(capsys, str(ROOT / "examples"))
    assert status == 0, out
    summary = "checked 4 functions: 0 errors, 0 notes, 0 skipped"
    assert out.splitlines() == [summary], out


def _example(name: str) -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        f"example_{name}", ROOT / "examples" / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # the TypedDicts' hints are read from it
    spec.loader.exec_module(module)
    return module


def test_the_examples_are_traced_and_their_steps_check_with_a_config_given() -> None:
    quickstart, data_parallel = _example("quickstart"), _example("data_parallel")
    report = treespec.check_shapes(quickstart.mlp)  # each Literal activation
    assert report.problems == () and len(report.outputs) == 3
    assert {str(out.shape) for _, out in report.outputs} == {"(b, 1)"}
    cfg = {"hidden": 32, "activation": "tanh", "learning_rate": 0.1}
    ((_, (params, loss)),) = treespec.check_shapes(quickstart.step, cfg=cfg).outputs
    assert str(params["w1"].shape) == "(n, h)" and loss.shape == ()
    assert treespec.check_shapes(data_parallel.loss_fn).problems == ()
    cfg = {"learning_rate": 0.05, "activation": "relu"}
    report = treespec.check_shapes(data_parallel.train_step, cfg=cfg)
    assert report.problems == () and len(report.outputs) == 1


# -- the command ---------------------------------------------------------------


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "treespec", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=child_env(),
        check=False,
    )


SMALL = """
import jax.numpy as jnp
import treespec
from jaxtyping import Array, Float
from treespec import Static


@treespec.jit
def center(x: Float[Array, "b n"]) -> Float[Array, "b n"]:
    return x - x.mean(axis=1)


@treespec.jit
def pool(x: Float[Array, "b n"], how: Static[str]) -> Float[Array, " b"]:
    return getattr(jnp, how)(x, axis=1)
"""


def test_the_command_prints_mypy_lines_a_summary_and_exits_1(tmp_path: Path) -> None:
    (tmp_path / "small.py").write_text(SMALL)
    done = _run("check", "small.py", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines() == [
        "small.py:10: error: center: Incompatible shapes for broadcasting: "
        "shapes=[(b, n), (b,)]",
        "small.py:14: note: pool: skipped: how (Static[str]) has no value; give "
        "one: check_shapes(pool, how=...), or say how to build it beside the "
        "function: @treespec.check_with(how=...)",
        "checked 2 functions: 1 error, 0 notes, 1 skipped",
    ]


def test_the_command_has_a_json_format_and_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "small.py").write_text(SMALL)
    done = _run("check", "--format", "json", "small.py", cwd=tmp_path)
    found = json.loads(done.stdout)
    assert (found["functions"], found["errors"], found["skipped"]) == (2, 1, 1)
    assert found["problems"][0]["line"] == 10
    assert found["problems"][0]["severity"] == "error"
    missing = _run("check", "nothing_here.py", cwd=tmp_path)
    assert missing.returncode == 2 and "nothing_here.py" in missing.stderr


# The command behaves as a CI tool (issue 40, 5).

# Files that name treespec, as a model file does: one that never does is not
# imported at all (tests/test_shape_command.py).
_EXITS = """
import sys
import treespec
print("a script's work")
sys.exit(0)
"""

_PARSES = """
import argparse
parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=3)
options = parser.parse_args()
"""

_RAISES_AT_IMPORT = """
import treespec
raise RuntimeError("no data directory here")
"""


def test_a_module_that_exits_or_raises_at_import_is_an_error_and_the_rest_is_checked(
    tmp_path: Path,
) -> None:
    (tmp_path / "a_exits.py").write_text(_EXITS)
    (tmp_path / "b_raises.py").write_text(_RAISES_AT_IMPORT)
    (tmp_path / "c_small.py").write_text(SMALL)
    done = _run("check", "a_exits.py", "b_raises.py", "c_small.py", cwd=tmp_path)
    lines = done.stdout.splitlines()
    assert done.returncode == 1, done.stdout + done.stderr
    assert any(
        line.startswith("a_exits.py:")
        and "error" in line
        and "exited at import" in line
        for line in lines
    ), lines
    assert any(
        line.startswith("b_raises.py:") and "RuntimeError" in line for line in lines
    )
    # The file after them is still checked, its error found.
    assert any(line.startswith("c_small.py:10: error: center") for line in lines)
    assert "a script's work" not in done.stdout.splitlines()[-1]


def test_a_script_is_imported_with_its_own_argv(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(_PARSES + SMALL)
    done = _run("check", "train.py", cwd=tmp_path)
    assert "unrecognized arguments" not in done.stderr
    assert done.stdout.splitlines()[-1].startswith("checked 2 functions: 1 error")


def test_a_folder_skips_hidden_folders_virtual_environments_and_build_output(
    tmp_path: Path,
) -> None:
    project = tmp_path / "proj"
    (project / "src").mkdir(parents=True)
    (project / "src" / "model.py").write_text(SMALL)
    for skipped in (".venv", "venv", "build", "dist", "node_modules", ".hidden"):
        (project / skipped / "lib").mkdir(parents=True)
        (project / skipped / "lib" / "boom.py").write_text(_RAISES_AT_IMPORT)
    (project / "venv" / "pyvenv.cfg").write_text("home = /usr\n")
    (project / "src" / "site-packages").mkdir()
    (project / "src" / "site-packages" / "boom.py").write_text(_RAISES_AT_IMPORT)
    done = _run("check", "proj", cwd=tmp_path)
    assert "boom" not in done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].startswith("checked 2 functions: 1 error")


def test_a_path_that_does_not_exist_is_a_usage_error_before_any_import(
    tmp_path: Path,
) -> None:
    (tmp_path / "small.py").write_text(_EXITS)
    done = _run("check", "small.py", "this.py", cwd=tmp_path)
    assert done.returncode == 2
    assert "this.py" in done.stderr
    assert "Zen of Python" not in done.stdout and "a script's work" not in done.stdout


def test_nothing_to_check_is_not_a_pass(tmp_path: Path) -> None:
    # A checker that exits 0 having checked nothing would let CI pass.
    (tmp_path / "plain.py").write_text("x = 1\n")
    done = _run("check", "plain.py", cwd=tmp_path)
    assert done.returncode == 1
    assert "no function" in done.stdout + done.stderr


_QUIET_TPU_INIT = "ignore::UserWarning:jax._src.cloud_tpu_init"


def _interrupted_check(
    tmp_path: Path, source: str, *, press: bool = True
) -> tuple[int, str]:
    """Exit status and stderr of the command on a file that, once the checker
    imports it, writes `started`, then does what `source` says. With `press`,
    Ctrl-C is pressed once the file has started; else the file presses it."""
    import signal
    import time

    (tmp_path / "slow.py").write_text(
        f"import treespec\nfrom pathlib import Path\nPath('started').touch()\n{source}"
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "treespec", "check", "slow.py"],
        cwd=tmp_path,
        # On a TPU VM, JAX's import warns about the VM's kernel settings; the
        # one line asserted is the checker's own.
        env={**child_env(), "PYTHONWARNINGS": _QUIET_TPU_INIT},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120  # JAX's import, on a busy machine
        while not (tmp_path / "started").exists() and process.poll() is None:
            assert time.monotonic() < deadline, "the checker never imported slow.py"
            time.sleep(0.05)
        if press and process.poll() is None:
            process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    finally:
        process.kill()
    return process.returncode, err


def test_ctrl_c_exits_130_with_one_line(tmp_path: Path) -> None:
    status, err = _interrupted_check(tmp_path, "import time\ntime.sleep(60)\n")
    assert status == 130
    assert err.strip() == "interrupted", err


def test_ctrl_c_in_a_gc_callback_is_not_lost(tmp_path: Path) -> None:
    # JAX runs a callback at every garbage collection, all through its
    # import; Python ignores what a callback raises, and a KeyboardInterrupt
    # raised there was lost: the check went on (and exited 1 having checked
    # nothing). The file presses Ctrl-C from a callback of its own.
    source = (
        "import gc, os, signal, time\n"
        "def _callback(phase, info):\n"
        "    if phase == 'start':\n"
        "        gc.callbacks.remove(_callback)\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "gc.callbacks.append(_callback)\n"
        "gc.collect()\n"
        "time.sleep(60)\n"
    )
    status, err = _interrupted_check(tmp_path, source, press=False)
    assert status == 130
    assert err.strip() == "interrupted", err


def test_pre_commit_can_run_the_check() -> None:
    hooks = (ROOT / ".pre-commit-hooks.yaml").read_text()
    assert "id: treespec-check" in hooks
    assert "entry: python -m treespec check" in hooks


# Keys and other JAX types are built (issue 40, 2).


def _noisy_typed(key: PRNGKeyArray, x: Float[Array, "n"]) -> Float[Array, "n"]:
    return x + jax.random.normal(key, x.shape)


def _noisy_key(key: Key[Array, ""], x: Float[Array, "n"]) -> Float[Array, "n"]:
    return x + jax.random.normal(key, x.shape)


def _noisy_raw(key: UInt32[Array, "2"], x: Float[Array, "n"]) -> Float[Array, "n"]:
    return x + jax.random.normal(key, x.shape)


def _noisy_bug(key: Key[Array, ""], x: Float[Array, "n"]) -> Float[Array, "n"]:
    return x + jax.random.normal(key, (x.shape[0] + 1,))  # BUG: one too many


@pytest.mark.parametrize("fun", [_noisy_typed, _noisy_key, _noisy_raw])
def test_prng_keys_are_built(fun: Any) -> None:
    report = treespec.check_shapes(treespec.jit(fun))
    assert report.ok and not report.problems, str(report)


def test_a_bug_beside_a_key_is_found() -> None:
    report = treespec.check_shapes(treespec.jit(_noisy_bug))
    assert [p.severity for p in report.problems] == ["error"], str(report)


def test_a_librarys_state_alias_is_never_built_as_a_guess() -> None:
    # optax.OptState is a union of arrays, containers and scalars: no value
    # of it can be guessed; it is taken from a value given, or the function
    # is skipped with a note naming it (issue 40, 2).
    import optax

    def step(
        params: Float[Array, "n"], opt_state: optax.OptState, g: Float[Array, "n"]
    ) -> Float[Array, "n"]:
        return params - g

    report = treespec.check_shapes(treespec.jit(step))
    assert not report.outputs
    (note,) = report.problems
    assert note.severity == "note" and note.skipped and "opt_state" in note.message
    given = optax.sgd(0.1).init(jnp.ones(3))
    assert treespec.check_shapes(treespec.jit(step), opt_state=given).ok


# Every mode (issue 40, 4): a static bool, Literal or Enum takes every value,
# its default first; a value given wins.


@treespec.jit
def _pooled(x: Float[Array, "b n"], pool: Static[bool] = False) -> Float[Array, "b n"]:
    if pool:
        return x.mean(axis=1)  # BUG: only when pool=True
    return x


@treespec.jit
def _attention(
    x: Float[Array, "t d"],
    kind: Static[Literal["global", "local"]] = "global",
) -> Float[Array, "t d"]:
    if kind == "local":
        return x[1:]  # BUG: only in the local mode
    return x


@pytest.mark.parametrize("fun", [_pooled, _attention], ids=["bool", "Literal"])
def test_a_static_mode_is_checked_in_every_value_not_only_its_default(
    fun: Any,
) -> None:
    report = treespec.check_shapes(fun)
    assert [p.severity for p in report.problems] == ["error"], str(report)
    assert len(report.outputs) == 1  # the default's run passed; the other fails
    # The bug is real: on arrays, the other mode fails, the default runs.
    other = True if fun is _pooled else "local"
    fun(jnp.ones((4, 3)))
    with pytest.raises(ValidationError):
        fun(jnp.ones((4, 3)), other)


def test_a_static_mode_given_a_value_is_checked_at_that_value_only() -> None:
    report = treespec.check_shapes(_pooled, pool=False)
    assert report.ok and len(report.outputs) == 1


# What the checker does and no test held (issue 40, 7): each of these fails
# when the line it pins is broken.


def test_exactly_the_cap_of_combinations_is_checked_with_no_note() -> None:
    @treespec.jit
    def four(
        x: Float[Array, "n"], a: bool, b: bool, c: bool, d: bool
    ) -> Float[Array, "n"]:
        return x

    report = treespec.check_shapes(four)
    assert len(report.outputs) == treespec._shapes.check.MAX_COMBINATIONS == 16
    assert report.ok and not report.problems


def test_the_second_run_makes_each_star_dims_two_dimensions_and_each_hash_dim_1() -> (
    None
):
    @treespec.jit
    def only_with_two_batch_dims(x: Float[Array, "*b n"]) -> Float[Array, "*b n"]:
        if x.ndim > 2:
            return x[..., 1:]  # found only where *b is two dimensions
        return x

    report = treespec.check_shapes(only_with_two_batch_dims)
    assert [p.severity for p in report.problems] == ["error"], str(report)
    assert "two dimensions" in report.problems[0].message

    @treespec.jit
    def only_at_one(x: Float[Array, "#k n"]) -> Float[Array, "#k n"]:
        if x.shape[0] == 1:
            return x[:, 1:]  # found only where #k is 1
        return x

    assert [p.severity for p in treespec.check_shapes(only_at_one).problems] == [
        "error"
    ]


def test_static_values_are_named_only_when_some_runs_passed() -> None:
    @treespec.jit
    def always(x: Float[Array, "n"], flag: bool) -> Float[Array, "n"]:
        return x[1:]

    (error,) = treespec.check_shapes(always).problems
    assert "(with" not in error.message

    @treespec.jit
    def every_run(
        x: Float[Array, "n"], mode: Static[Literal["x"]], flag: bool
    ) -> Float[Array, "n"]:
        return x[1:]  # in every run: mode='x' in each, yet not named

    (error,) = treespec.check_shapes(every_run).problems
    assert error.severity == "error" and "(with" not in error.message, str(error)


def test_with_constraints_given_an_undecidable_comparison_is_a_note() -> None:
    @treespec.jit
    def window(x: Float[Array, "n"]) -> Float[Array, "n"]:
        if x.shape[0] > 12:  # n >= 2 does not decide it
            return x
        return x[1:]

    (note,) = treespec.check_shapes(window, constraints=("n >= 2",)).problems
    assert note.severity == "note", str(note)
    assert note.message.startswith("needs a relation between sizes"), str(note)
    assert "constraints=('n >= 13',)" in note.message


def test_two_sizes_that_must_be_even_get_a_symbol_each() -> None:
    import ast

    @treespec.jit
    def quarters(x: Float[Array, "h g"]) -> Float[Array, "h//2 g//2"]:
        h, g = x.shape
        return x.reshape(h // 2, 2, g // 2, 2).sum(axis=(1, 3))

    (note,) = treespec.check_shapes(quarters).problems
    assert note.severity == "note", str(note)
    found = re.search(r"constraints=(\(.+?\)) \(JAX's syntax\)", note.message)
    assert found, note.message
    stated = ast.literal_eval(found.group(1))
    halves = {c.split("== 2*")[1] for c in stated}
    assert [c.split(" ==")[0] for c in stated] == ["h", "g"], stated
    assert len(halves) == 2, stated  # h == 2*k, g == 2*k would make h == g
    assert treespec.check_shapes(quarters, constraints=stated).ok


def test_report_outputs_label_each_run_by_its_own_variant() -> None:
    @treespec.jit
    def summed(x: Float[Array, "*batch n"]) -> Float[Array, "*batch"]:
        return x.sum(-1)

    report = treespec.check_shapes(summed)
    assert report.ok, str(report)
    labels = [label for label, _ in report.outputs]
    assert labels == ["", "each #dim 1 and each *dims/... two dimensions"]
    assert [len(out.shape) for _, out in report.outputs] == [1, 2]


def test_the_value_asked_for_a_nested_static_leaf_names_its_parameter() -> None:
    class Cfg(TypedDict):
        depth: Static[int]

    @treespec.jit
    def deep(x: Float[Array, "n"], cfg: Cfg) -> Float[Array, "n"]:
        return x

    (note,) = treespec.check_shapes(deep).problems
    assert "check_shapes(" in note.message and "cfg=..." in note.message


@pytest.mark.parametrize(
    "marker", [Dynamic, treespec.Donate], ids=["Dynamic", "Donate"]
)
def test_a_traced_python_scalar_is_built_as_a_traced_scalar(marker: Any) -> None:
    def scaled(x: Float[Array, "n"], lr: float) -> Float[Array, "n"]:
        return x * lr

    scaled.__annotations__["lr"] = marker[float]
    report = treespec.check_shapes(treespec.jit(scaled))
    assert report.ok, str(report)
    (output,) = [out for _, out in report.outputs]
    assert output.dtype == jnp.float32


def test_each_underscore_dimension_gets_its_own_size() -> None:
    @treespec.jit
    def same(x: Float[Array, "_ _"]) -> Float[Array, "_ _"]:
        return x + x.T  # fine only if both sizes were one size

    assert [p.severity for p in treespec.check_shapes(same).problems] == ["error"]


def test_the_array_branch_of_an_optional_array_defaulting_to_none_is_checked() -> None:
    @treespec.jit
    def masked(
        x: Float[Array, "n"], mask: Float[Array, "m"] | None = None
    ) -> Float[Array, "n"]:
        if mask is not None:
            return x * mask  # n against m: the array branch's bug
        return x

    assert [p.severity for p in treespec.check_shapes(masked).problems] == ["error"]


def test_a_star_dims_that_takes_zero_dimensions_matches() -> None:
    @treespec.jit
    def flat(x: Float[Array, "*b n"], y: Float[Array, " n"]) -> Float[Array, "*b n"]:
        return x + y

    assert treespec.check_shapes(flat).ok


def test_str_of_a_report_with_only_notes_prints_the_notes() -> None:
    @treespec.jit
    def needs(x: Float[Array, "n"], how: Static[str]) -> Float[Array, "n"]:
        return getattr(jnp, how)(x)

    report = treespec.check_shapes(needs)
    assert report.ok and report.problems
    assert "note" in str(report) and "how=..." in str(report)


_METHODS = """
import equinox as eqx
import jax
import treespec
from jaxtyping import Array, Float

class Layer(eqx.Module):
    w: Float[Array, "n m"]

    @treespec.jit
    def __call__(self, x: Float[Array, "b n"]) -> Float[Array, "b m"]:
        return x @ self.w.T
"""


def test_the_command_checks_jitted_methods_of_classes_in_the_file(
    tmp_path: Path,
) -> None:
    (tmp_path / "layer.py").write_text(_METHODS)
    done = _run("check", "layer.py", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines()[0].startswith("layer.py:12: error:")
    assert done.stdout.splitlines()[-1].startswith("checked 1 function: 1 error")


def test_an_error_raised_by_the_users_own_code_is_a_note() -> None:
    @treespec.jit
    def picky(x: Float[Array, "n"]) -> Float[Array, "n"]:
        raise NotImplementedError("not for this model")

    (problem,) = treespec.check_shapes(picky).problems
    assert problem.severity == "note"


@treespec.jit
def _mix(x: Float[Array, "t h k"], w: Float[Array, "k d"]) -> Float[Array, "t d"]:
    return jnp.einsum("thk,hd->td", x, w)  # h where k belongs


class _Normed(eqx.Module):
    norm: eqx.nn.LayerNorm

    def __init__(self, d: int) -> None:
        self.norm = eqx.nn.LayerNorm(d)

    @treespec.jit
    def __call__(self, x: Float[Array, "t d"]) -> Float[Array, "t d"]:
        return self.norm(x)  # one row at a time: should be jax.vmap(self.norm)(x)


def test_a_shape_error_raised_by_a_library_the_code_calls_is_an_error() -> None:
    # opt_einsum's label check and Equinox's LayerNorm invariant refuse these
    # shapes as JAX's own checks would: errors at the user's line, not notes.
    (error,) = treespec.check_shapes(_mix).problems
    assert error.severity == "error", str(error)
    assert error.line == _line(_mix, "jnp.einsum")
    (error,) = [
        p
        for p in treespec.check_shapes(_Normed.__call__).problems
        if p.severity == "error"
    ]
    assert error.line == _line(_Normed.__call__, "self.norm(x)"), str(error)
    # Both are real: on arrays they raise.
    with pytest.raises(ValueError):
        _mix(jnp.ones((2, 3, 4)), jnp.ones((4, 5)))
    with pytest.raises(ValueError):
        _Normed(4)(jnp.ones((3, 4)))


def test_an_error_raised_by_the_users_own_installed_helper_stays_a_note() -> None:
    @treespec.jit
    def picky(x: Float[Array, "n"]) -> Float[Array, "n"]:
        if x.ndim != 1:
            raise ValueError("one axis only")
        raise ValueError("not for this model")  # the user's own refusal

    (problem,) = treespec.check_shapes(picky).problems
    assert problem.severity == "note"


def test_the_constraint_suggested_for_n_greater_than_2_is_n_at_least_3() -> None:
    from treespec._shapes.outcomes import suggestion

    text = "Symbolic dimension comparison 'n' > '2' is inconclusive."
    assert suggestion(text) == "n >= 3"
    assert suggestion(text, "n", {"n": 2}) == "n <= 2"  # where it ran
    assert suggestion(text, "n", {"n": 5}) == "n >= 3"

    @treespec.jit
    def window(x: Float[Array, "n"]) -> Float[Array, "n"]:
        if x.shape[0] > 12:  # a relation JAX cannot decide for every n
            return x
        return x[1:]  # wrong at the sizes it excludes

    (note,) = treespec.check_shapes(window).problems
    assert note.severity == "note"
    assert "constraints=('n >= 13',)" in note.message, note.message
    assert treespec.check_shapes(window, constraints=("n >= 13",)).ok


def test_a_threshold_note_suggests_the_side_at_which_the_code_runs() -> None:
    @treespec.jit
    def window(x: Float[Array, "n"]) -> Float[Array, "n"]:
        if x.shape[0] > 12:
            return x[1:]  # wrong above the threshold: the code runs below it
        return x

    (note,) = treespec.check_shapes(window).problems
    assert note.severity == "note"
    assert "constraints=('n <= 12',)" in note.message, note.message
    assert treespec.check_shapes(window, constraints=("n <= 12",)).ok


# Symbolic where JAX decides, concrete witnesses where it cannot (issue 40,
# 1): a size used as a number, an equality or a division JAX cannot decide.


@treespec.jit
def _attend(q: Float[Array, "t d"], k: Float[Array, "s d"]) -> Float[Array, "t s"]:
    scale = 1 / math.sqrt(q.shape[-1])  # a size used as a number
    return (q @ k.T) * scale


@treespec.jit
def _attend_bug(q: Float[Array, "t d"], k: Float[Array, "s d"]) -> Float[Array, "t s"]:
    scale = q.shape[-1] ** -0.5
    return (q @ k.T)[:, 1:] * scale  # BUG: one key short


@treespec.jit
def _pool(x: Float[Array, "c h w"]) -> Float[Array, "c h//2 w//2"]:
    return jax.lax.reduce_window(
        x, -jnp.inf, jax.lax.max, (1, 2, 2), (1, 2, 2), "VALID"
    )


@treespec.jit
def _sinusoid(t: Float[Array, " n"], x: Float[Array, "n d"]) -> Float[Array, "n d"]:
    half = x.shape[-1] // 2
    freqs = jnp.exp(-jnp.arange(half) / half)
    angles = t[:, None] * freqs[None, :]
    emb = jnp.concatenate([jnp.sin(angles), jnp.cos(angles)], axis=-1)
    if x.shape[-1] % 2:
        emb = jnp.pad(emb, ((0, 0), (0, 1)))
    return x + emb


@treespec.jit
def _rope(x: Float[Array, "t h"]) -> Float[Array, "t h"]:
    a, b = jnp.split(x, 2, axis=-1)  # assumes an even head size
    return jnp.concatenate([-b, a], axis=-1)


@treespec.jit
def _loop(x: Float[Array, "n"]) -> Float[Array, "n"]:
    for _ in range(x.shape[0] % 3):  # a size as a Python int
        x = x * 2
    return x


@treespec.jit
def _reflect(x: Float[Array, "c h w"]) -> Float[Array, "c h+2 w+2"]:
    return jnp.pad(x, ((0, 0), (1, 1), (1, 1)), mode="reflect")  # h > 1: JAX's


@treespec.jit
def _reflect_bug(x: Float[Array, "c h w"]) -> Float[Array, "c h+2 w+2"]:
    return jnp.pad(x, ((0, 0), (1, 1), (0, 1)), mode="reflect")  # BUG: w+1


@treespec.jit
def _squeezed(x: Float[Array, "b 1"]) -> Float[Array, " b"]:
    return x.squeeze()  # JAX: "not supported with shape polymorphism"


@treespec.jit
def _shuffled(key: PRNGKeyArray, x: Float[Array, "n d"]) -> Float[Array, "n d"]:
    return jax.random.permutation(key, x)  # JAX: "shape polymorphism for ..."


@treespec.jit
def _prefix_sums(x: Float[Array, "t d"]) -> Float[Array, "t d"]:
    return jax.lax.associative_scan(jnp.add, x, axis=0)  # "of non-constant size"


@treespec.jit
def _repeated(tokens: Int[Array, " n"]) -> Bool[Array, " n"]:
    return jnp.array([True] * tokens.shape[0])  # a list times a size (public code)


@pytest.mark.parametrize(
    "fun",
    [
        *(_attend, _pool, _sinusoid, _loop, _reflect, _squeezed, _shuffled),
        *(_repeated, _prefix_sums),
    ],
    ids=[
        *("sqrt", "pool", "sinusoid", "range", "reflect", "squeeze", "permutation"),
        *("list-times-size", "associative-scan"),
    ],
)
def test_a_clean_function_jax_cannot_decide_symbolically_has_no_error(fun: Any) -> None:
    report = treespec.check_shapes(fun)
    assert report.errors == (), str(report)
    assert not any("not checked past" in p.message for p in report.problems), str(
        report
    )


@treespec.jit
def _rotated(x: Float[Array, "s d"], sin: Float[Array, "s d"]) -> Float[Array, "s d"]:
    return x * sin


def _rotary_attention(x: jax.Array, mask: jax.Array) -> jax.Array:
    d = x.shape[-1]
    freqs = jnp.arange(0, d, 2) / d  # ceil(d/2) of them
    sin = jnp.sin(jnp.concatenate([freqs, freqs]))[None, :] * jnp.ones((x.shape[0], 1))
    q = _rotated(x, sin)  # needs an even d
    logits = jnp.where(mask, q @ x.T, -1e9)  # the mask's shape
    return jax.nn.softmax(logits, axis=-1) @ x


@treespec.jit
def _rotary(x: Float[Array, "s d"], mask: Bool[Array, "s s"]) -> Float[Array, "s d"]:
    return _rotary_attention(x, mask)


@treespec.jit
def _rotary_bug(
    x: Float[Array, "s d"], mask: Bool[Array, "s d"]
) -> Float[Array, "s d"]:
    return _rotary_attention(x, mask)  # BUG: a mask of s by d


def test_a_bug_past_a_line_that_needs_an_even_size_is_the_error() -> None:
    # esm-jax: the rotary table holds only at an even head size (a note),
    # and the mask is wrong at every size. The odd witness stops at the
    # rotary line, the even one at the mask's: the error is the mask's.
    (note,) = treespec.check_shapes(_rotary).problems
    assert note.severity == "note" and "d is even" in note.message, str(note)
    (error,) = treespec.check_shapes(_rotary_bug).errors
    assert error.line == _line(_rotary_attention, "# the mask's shape"), str(error)


@treespec.jit
def _smoothed(x: Float[Array, " n"], kernel: Float[Array, " k"]) -> Float[Array, " n"]:
    return jnp.convolve(x, kernel, mode="same")  # max(n, k) long: k <= n


@treespec.jit
def _smoothed_bug(
    x: Float[Array, " n"], kernel: Float[Array, " k"]
) -> Float[Array, " n"]:
    return jnp.convolve(x, kernel, mode="valid")  # BUG: n - k + 1 long


def test_an_ordering_between_named_sizes_is_a_note_never_an_error() -> None:
    # The witnesses give later names larger sizes: a kernel longer than its
    # signal. With the sizes the other way round it runs: an ordering, a
    # note (DESIGN); a length wrong in every order stays an error.
    report = treespec.check_shapes(_smoothed)
    assert report.errors == (), str(report)
    (note,) = report.notes
    assert "holds only at some sizes" in note.message, str(note)
    assert "constraints=('n >= k',)" in note.message, str(note)
    (error,) = treespec.check_shapes(_smoothed_bug).errors
    assert error.line == _line(_smoothed_bug, "# BUG"), str(error)


@treespec.jit
def _expert_choice(
    x: Float[Array, "t d"], w_gate: Float[Array, "d e"], capacity: treespec.Static[int]
) -> Int[Array, "e capacity"]:
    scores = jax.nn.softmax(x @ w_gate, axis=-1).T  # experts choose tokens
    return jax.lax.top_k(scores, capacity)[1]


def test_a_static_count_top_k_asks_for_past_the_axis_is_an_ordering() -> None:
    # JAX's `got k=19 with shape=[e, t]`: the count is read as `capacity`,
    # which the swap with `t` lets run.
    (note,) = treespec.check_shapes(_expert_choice).problems
    assert note.severity == "note", str(note)
    assert "constraints=('t >= capacity',)" in note.message, str(note)


def _patches(x: Any, kernel: Any, rows: int) -> Any:
    """A ViT's patchify stem: a `p`-strided `p`x`p` convolution."""
    p = kernel.shape[-1]
    strides = (rows, p)  # the rows' stride
    return jax.lax.conv_general_dilated(x, kernel, strides, padding="VALID")


@treespec.jit
def _patchify(
    x: Float[Array, "b c h w"], kernel: Float[Array, "d c p p"]
) -> Float[Array, "b d h//p w//p"]:
    return _patches(x, kernel, kernel.shape[-1])


@treespec.jit
def _patchify_bug(
    x: Float[Array, "b c h w"], kernel: Float[Array, "d c p p"]
) -> Float[Array, "b d h//p w//p"]:
    return _patches(x, kernel, 1)  # BUG: rows not strided


def test_witnesses_with_a_patch_larger_than_its_image_are_taken_the_other_way() -> None:
    # The witnesses give the kernel's `p` a larger size than `h`: no patch
    # at all, an empty output any stride passes. With the names the other
    # way round every patch is there, and the unstrided rows show.
    report = treespec.check_shapes(_patchify)
    assert report.problems == (), str(report)
    ((_, output),) = report.outputs
    assert 0 not in output.shape, output
    (error,) = treespec.check_shapes(_patchify_bug).errors
    assert error.line == _line(_patchify_bug, "# BUG"), str(error)
    assert "h//p" in error.message, str(error)
    # The rows unstrided, `h - p + 1` of them, at the sizes it names.
    at = dict(re.findall(r"\b([hp])=(\d+)\b", error.message.split("found at")[1]))
    rows = re.search(r"got float32\[b,d,(\d+),", error.message)
    assert rows and int(rows[1]) == int(at["h"]) - int(at["p"]) + 1, str(error)


def _spectral(x: Any, w: Any, bins: int, zeros_width: int) -> Any:
    """A Fourier layer's mixing of its lowest `m` modes (an FNO's)."""
    n, m = x.shape[1], w.shape[0]
    x_ft = jnp.fft.rfft(x, axis=1)  # n//2 + 1 bins
    out_ft = jnp.einsum("bmc,mco->bmo", x_ft[:, :m], w)  # m of them: m <= bins
    full = jnp.zeros((x.shape[0], bins, zeros_width), dtype=out_ft.dtype)
    return jnp.fft.irfft(full.at[:, :m].set(out_ft), n=n, axis=1)  # the modes set


@treespec.jit
def _fourier(
    x: Float[Array, "b n c"], w: Complex[Array, "m c co"]
) -> Float[Array, "b n co"]:
    return _spectral(x, w, x.shape[1] // 2 + 1, w.shape[2])


@treespec.jit
def _fourier_bug(
    x: Float[Array, "b n c"], w: Complex[Array, "m c co"]
) -> Float[Array, "b n co"]:
    return _spectral(x, w, x.shape[1] // 2 + 1, x.shape[2])  # BUG: c wide


def test_a_size_against_a_smaller_number_that_moves_is_an_ordering() -> None:
    # The witnesses make m larger than n//2 + 1 (19 modes of 7 bins): with
    # m below the bins, it runs. An ordering against an expression of a
    # named size, a note that states it in JAX's syntax; a bug further on,
    # the error at its line.
    report = treespec.check_shapes(_fourier)
    assert report.errors == (), str(report)
    (note,) = report.notes
    assert note.line == _line(_spectral, "# m of them"), str(note)
    assert "with m <= n//2 + 1 it runs at" in note.message, str(note)
    assert "constraints=('m <= floordiv(n, 2) + 1',)" in note.message, str(note)
    (error,) = treespec.check_shapes(_fourier_bug).errors
    assert error.line == _line(_spectral, "# the modes set"), str(error)
    # JAX's words differ by version (`requested type=complex64[b,m,c]`,
    # `requested shape (b, m, c)`); the sizes are the same.
    compact = error.message.replace(" ", "")
    assert re.search(r"b,m,co\W.*b,m,c\W", compact), str(error)


def test_the_ordering_a_note_states_is_held_by_the_witnesses() -> None:
    # Stated, the ordering is held at the witnesses JAX's symbolic sizes
    # need (the `.at[:, :m]` JAX cannot index symbolically): no finding,
    # and the bug further on still the error.
    stated = ("m <= floordiv(n, 2) + 1",)
    assert treespec.check_shapes(_fourier, constraints=stated).problems == ()
    (error,) = treespec.check_shapes(_fourier_bug, constraints=stated).errors
    assert error.line == _line(_spectral, "# the modes set"), str(error)


def test_constraints_no_witness_tried_satisfies_stop_the_check_in_a_note() -> None:
    stated = ("n >= 100*m",)  # no witnesses lie that far apart
    (note,) = treespec.check_shapes(_fourier, constraints=stated).problems
    assert note.severity == "note", str(note)
    assert "no witness sizes tried satisfy them" in note.message, str(note)


@pytest.mark.parametrize(
    ("constraints", "sizes", "held"),
    [
        (("m <= floordiv(n, 2) + 1",), {"m": 7, "n": 13}, True),
        (("m <= floordiv(n, 2) + 1",), {"m": 8, "n": 13}, False),
        (("d == 4*k", "n >= 2"), {"d": 12, "k": 3, "n": 2}, True),
        (("max(a, b) >= mod(c, 4) - 1",), {"a": 1, "b": 2, "c": 7}, True),
        (("a >= b",), {"a": 1}, False),  # a size it does not name
        (("a >= b; import os",), {"a": 1, "b": 1}, False),  # not JAX's syntax
    ],
)
def test_constraints_are_read_at_concrete_sizes_in_jaxs_syntax(
    constraints: tuple[str, ...], sizes: dict[str, int], held: bool
) -> None:
    from treespec._shapes.sizes import holds

    assert holds(constraints, sizes) is held


def test_a_number_the_body_hard_codes_is_no_ordering() -> None:
    @treespec.jit
    def first_modes(x: Float[Array, "b m"]) -> Float[Array, "b m"]:
        return x[:, :7] + 0 * x.sum()  # 7, whatever m is

    (error,) = treespec.check_shapes(first_modes).errors
    assert "holds only" not in error.message, str(error)


@treespec.jit
def _spectrum(u: Float[Array, "c ... n"]) -> Float[Array, "c ... n"]:
    n = u.shape[-1]
    return u * jnp.ones((1,) + (n,) * (u.ndim - 1))  # exponax: each axis is n


@treespec.jit
def _anything(u: Float[Array, "c _ n"]) -> Float[Array, "c n"]:
    return u[:, 0] + u[:, :, 0]  # the `_` axis against n


def test_the_axes_of_an_ellipsis_or_underscore_are_said_as_written() -> None:
    # exponax's `"C ... N"`: the message names the axes of `...` as the user
    # reads them, never an internal name (`_dots0`, `_any1`).
    for fun, shown in ((_spectrum, "(c, ...[0], n)"), (_anything, "(c, _)")):
        error, *_ = treespec.check_shapes(fun).errors  # (and at rank 2)
        assert "_dots" not in error.message and "_any" not in error.message, error
        assert shown in error.message, str(error)


def test_a_reflect_pad_jax_cannot_lower_symbolically_is_checked_at_witnesses() -> None:
    # "Shape polymorphism is supported for jnp.pad with 'reflect' ... only
    # when ... the axis size (= h) is larger than 1": a limit, not a bug.
    (error,) = treespec.check_shapes(_reflect_bug).errors
    assert error.line == _line(_reflect_bug, "return"), str(error)
    assert "w+2" in error.message and "concrete sizes" in error.message, str(error)


def test_witness_sizes_are_written_as_names_at_the_end_of_a_sentence_too() -> None:
    from treespec._shapes.witness import by_names

    sizes = {"h": 11, "w": 13}
    text = "but width // 1 != 11. got (143,), 2.5 and n=11"
    assert by_names(text, sizes) == "but width // 1 != h. got (h*w,), 2.5 and n=11"
    assert by_names("(called at line 22)", sizes) == "(called at line 22)"


def test_a_count_or_an_index_in_a_finding_is_never_written_as_a_size() -> None:
    # Issue 56's public code: `26 problems` was `2*w problems`, and the
    # twelfth block `self.blocks[h]`; an array's shape is still named.
    from treespec._shapes.witness import by_names

    sizes = {"h": 11, "w": 13}
    text = "26 problems: at self.blocks[11].act, got float32[11,143]; bool[13]"
    assert by_names(text, sizes) == (
        "26 problems: at self.blocks[11].act, got float32[h,h*w]; bool[w]"
    )


_CALLED_AT_22 = """
import jax.numpy as jnp
from jaxtyping import Array, Float

import treespec


def helper(q, k):
    return q @ k  # k not transposed


@treespec.jit
def attend(q: Float[Array, "t d"], k: Float[Array, "s d"]) -> Float[Array, "t s"]:
    scale = q.shape[-1] ** -0.5  # a size used as a number: witnesses decide
{padding}
    return helper(q, k) * scale
"""


def test_a_line_number_is_never_written_as_a_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The call is at line 22, twice the first witness size (11).
    head = _CALLED_AT_22.format(padding="").splitlines()
    padding = "\n".join(["    # ..."] * (23 - len(head)))
    text = _CALLED_AT_22.format(padding=padding)
    assert text.splitlines()[21].strip() == "return helper(q, k) * scale"
    (tmp_path / "called_at_22.py").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "called_at_22", raising=False)
    import called_at_22  # type: ignore[import-not-found]

    (error,) = treespec.check_shapes(called_at_22.attend).errors
    assert "(called at line 22)" in error.message, error.message
    assert error.line == 9  # the helper's line


def test_a_bug_after_a_size_used_as_a_number_is_found_at_concrete_sizes() -> None:
    (error,) = treespec.check_shapes(_attend_bug).problems
    assert error.severity == "error", str(error)
    assert "concrete sizes" in error.message
    assert "s" in error.message and "t" in error.message
    # The bug is real: on arrays it fails, and a quick test's t == s hides
    # nothing here (it fails at every size).
    with pytest.raises(ValidationError):
        _attend_bug(jnp.ones((3, 4)), jnp.ones((5, 4)))


def test_an_unstated_divisibility_is_a_note_naming_the_relation() -> None:
    (note,) = treespec.check_shapes(_rope).problems
    assert note.severity == "note", str(note)
    assert "h" in note.message and "constraints=" in note.message
    _rope(jnp.ones((3, 4)))  # even: runs
    with pytest.raises(ValueError):
        _rope(jnp.ones((3, 5)))  # odd: JAX refuses


@treespec.jit
def _pairs(x: Float[Array, "b n"]) -> Float[Array, "b k 2"]:
    return x.reshape(x.shape[0], -1, 2)  # needs an even n, whatever b


@treespec.jit
def _halves(x: Float[Array, "t h"], y: Float[Array, "t g"]) -> Float[Array, "t h//2"]:
    return jnp.split(x, 2, axis=-1)[0] + jnp.split(y, 2, axis=-1)[0][:, :1]


def test_an_unstated_parity_names_the_dimension_that_needs_it() -> None:
    # The reshape needs n even; b may be anything: the note says n, and the
    # constraint it suggests makes the check pass.
    (note,) = treespec.check_shapes(_pairs).problems
    assert note.severity == "note", str(note)
    assert note.message.startswith("holds only when n is even:"), note.message
    assert "constraints=('n == 2*k',)" in note.message, note.message
    assert treespec.check_shapes(_pairs, constraints=("n == 2*k",)).ok
    _pairs(jnp.ones((3, 4)))  # odd b, even n: runs
    with pytest.raises(TypeError):
        _pairs(jnp.ones((4, 3)))  # even b, odd n: JAX refuses


def test_parities_that_two_dimensions_need_are_both_named() -> None:
    (note,) = treespec.check_shapes(_halves).problems
    assert note.severity == "note", str(note)
    assert note.message.startswith("holds only when h and g are even:"), note.message
    _halves(jnp.ones((3, 4)), jnp.ones((3, 6)))
    with pytest.raises(ValueError):
        _halves(jnp.ones((3, 4)), jnp.ones((3, 5)))


def _gqa_body(q: jax.Array, k: jax.Array, swap: bool) -> jax.Array:
    t, heads, head_dim = q.shape
    kv = k.shape[1]
    a, b = jnp.split(q, 2, axis=-1)  # rotate halves: an even head_dim
    q = jnp.concatenate([-b, a], axis=-1) * head_dim**-0.5
    q = q.reshape(t, kv, heads // kv, head_dim)  # kv heads divide heads
    spec = "tgkh,skh->tkgs" if swap else "tkgh,skh->tkgs"
    return jnp.einsum(spec, q, k).reshape(t, heads, t)


@treespec.jit
def _gqa(
    q: Float[Array, "t heads head_dim"], k: Float[Array, "t kv head_dim"]
) -> Float[Array, "t heads t"]:
    return _gqa_body(q, k, swap=False)


@treespec.jit
def _gqa_swapped(
    q: Float[Array, "t heads head_dim"], k: Float[Array, "t kv head_dim"]
) -> Float[Array, "t heads t"]:
    return _gqa_body(q, k, swap=True)  # runs only when heads == kv * kv


def test_sizes_that_must_divide_each_other_are_a_note_not_an_error() -> None:
    # Grouped-query attention needs an even head_dim and kv dividing heads:
    # distinct primes break both, yet nothing is wrong. A witness whose sizes
    # divide each other runs it: a note, never an error.
    report = treespec.check_shapes(_gqa)
    assert report.errors == (), str(report)
    (note,) = report.notes
    assert "divide" in note.message and "constraints=" in note.message, str(note)
    _gqa(jnp.ones((3, 8, 4)), jnp.ones((3, 2, 4)))  # runs: 2 divides 8


def test_a_bug_past_sizes_that_must_divide_is_found_at_its_line() -> None:
    (error,) = treespec.check_shapes(_gqa_swapped).errors
    assert error.line == _line(_gqa_body, "jnp.einsum(spec"), str(error)
    _gqa_swapped(jnp.ones((3, 4, 2)), jnp.ones((3, 2, 2)))  # heads == kv * kv
    with pytest.raises(ValueError):  # opt_einsum's label check
        _gqa_swapped(jnp.ones((3, 8, 4)), jnp.ones((3, 2, 4)))


@treespec.jit
def _rope_wrong_axis(x: Float[Array, "t n h"]) -> Float[Array, "t n h"]:
    a, b = jnp.split(x, 2, axis=1)  # should split h, not n
    angle = jnp.arange(x.shape[-1] // 2)
    return jnp.concatenate([a * angle, b * angle], axis=1)


def test_a_bug_seen_at_even_sizes_beats_a_split_of_odd_ones() -> None:
    # At odd sizes the split of n fails first (a division); at even sizes
    # the bug's own line fails: the error is reported there.
    (error,) = treespec.check_shapes(_rope_wrong_axis).errors
    assert error.line == _line(_rope_wrong_axis, "a * angle"), str(error)
    _rope_wrong_axis(jnp.ones((3, 4, 2)))  # h == 2: the angle broadcasts
    with pytest.raises(ValueError):
        _rope_wrong_axis(jnp.ones((3, 4, 6)))


@treespec.jit
def _pool_same(x: Float[Array, "c h w"]) -> Float[Array, "c h//2 w//2"]:
    window = (1, 2, 2)
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, window, window, "SAME")


def test_a_return_that_breaks_its_annotation_at_odd_sizes_is_a_note() -> None:
    # SAME padding rounds h/2 up: right at even sizes, wrong at odd ones,
    # where the annotation says h//2. A divisibility against the return
    # annotation: a note saying h and w even (DESIGN, "an error is certain").
    report = treespec.check_shapes(_pool_same)
    assert report.ok, str(report)
    (note,) = report.notes
    assert "holds only when h and w are even" in note.message, str(note)
    assert "constraints=('h == 2*k_h', 'w == 2*k_w')" in note.message, str(note)
    stated = ("h == 2*k_h", "w == 2*k_w")
    assert treespec.check_shapes(_pool_same, constraints=stated).problems == ()
    _pool_same(jnp.ones((3, 4, 6)))
    with pytest.raises(ValidationError):
        _pool_same(jnp.ones((3, 5, 7)))


@treespec.jit
def _with_positions(
    tokens: Float[Array, "h w d"], pos: Float[Array, "n d"]
) -> Float[Array, "n d"]:
    return tokens.reshape(-1, tokens.shape[-1]) + pos  # n is h*w, unsaid


def test_a_size_of_its_own_against_a_product_of_others_is_a_relation_note() -> None:
    # `n` stands for h*w, which no annotation says: a note naming the
    # relation, not an error at sizes the annotations allow but no caller
    # would pass.
    report = treespec.check_shapes(_with_positions)
    assert report.errors == (), str(report)
    (note,) = report.notes
    assert "n == h*w" in note.message and "constraints=" in note.message, str(note)
    assert treespec.check_shapes(_with_positions, constraints=("n == h*w",)).ok
    _with_positions(jnp.ones((2, 3, 4)), jnp.ones((6, 4)))


@treespec.jit
def _mapped_pairs(
    tokens: Float[Array, "h w d"], pos: Float[Array, "n d"]
) -> Float[Array, "n d"]:
    flat = tokens.reshape(-1, tokens.shape[-1])
    return jax.vmap(jnp.add)(flat, pos)  # n is h*w, unsaid


@treespec.jit
def _mapped_pairs_bug(
    tokens: Float[Array, "n d"], pos: Float[Array, "m d"]
) -> Float[Array, "n d"]:
    return jax.vmap(jnp.add)(tokens, pos)  # BUG: m positions for n tokens


def test_the_sizes_a_vmap_maps_inconsistently_are_read_as_any_two_sizes() -> None:
    # JAX's "vmap got inconsistent sizes ... had size n ... had size h*w"
    # is the relation n == h*w, as the same sizes added would be; two names
    # that differ stay an error at the line.
    report = treespec.check_shapes(_mapped_pairs)
    assert report.errors == (), str(report)
    (note,) = report.notes
    assert "n == h*w" in note.message, str(note)
    (error,) = treespec.check_shapes(_mapped_pairs_bug).errors
    assert error.line == _line(_mapped_pairs_bug, "# BUG"), str(error)


@treespec.jit
def _outer(x: Float[Array, "b n"], w: Float[Array, "n m"]) -> Float[Array, "b m"]:
    return _inner_helper(x, w)  # the call


def _inner_helper(x: jax.Array, w: jax.Array) -> jax.Array:
    return x + jnp.tanh(x @ w)


def test_an_error_inside_a_helper_names_the_line_that_called_it() -> None:
    (error,) = treespec.check_shapes(_outer).errors
    assert error.line == _line(_inner_helper, "x + jnp.tanh")
    called = _line(_outer, "# the call")
    assert error.message.endswith(f"(called at line {called})"), str(error)


# Modules built from their constructors (issue 40, 3): a field that is an
# `eqx.nn` layer gives no shape, so `self` is made by the class's `__init__`.


class _Block(eqx.Module):
    linear1: eqx.nn.Linear
    linear2: eqx.nn.Linear
    norm: eqx.nn.LayerNorm

    def __init__(self, d: int, hidden: int, *, key: PRNGKeyArray) -> None:
        k1, k2 = jax.random.split(key)
        self.linear1 = eqx.nn.Linear(d, hidden, key=k1)
        self.linear2 = eqx.nn.Linear(hidden, d, key=k2)
        self.norm = eqx.nn.LayerNorm(d)

    @treespec.jit
    def __call__(self, x: Float[Array, "t d"]) -> Float[Array, "t d"]:
        h = jax.vmap(lambda r: self.linear2(jax.nn.gelu(self.linear1(r))))(x)
        return jax.vmap(self.norm)(x + h)


class _BlockBug(eqx.Module):
    linear1: eqx.nn.Linear
    linear2: eqx.nn.Linear

    def __init__(self, d: int, hidden: int, *, key: PRNGKeyArray) -> None:
        k1, k2 = jax.random.split(key)
        self.linear1 = eqx.nn.Linear(d, hidden, key=k1)
        self.linear2 = eqx.nn.Linear(hidden, d, key=k2)

    @treespec.jit
    def __call__(self, x: Float[Array, "t d"]) -> Float[Array, "t d"]:
        return jax.vmap(self.linear1)(x)  # BUG: hidden where d is promised


def test_a_module_made_of_library_layers_is_built_from_its_constructor() -> None:
    report = treespec.check_shapes(_Block.__call__)
    assert report.errors == () and report.outputs, str(report)
    assert not any(p.skipped for p in report.problems), str(report)
    # `hidden` is no dimension of `__call__`: a size of its own (symbolic,
    # then a witness), never a guess at 1, so nothing to say.
    assert report.notes == (), str(report)


def test_a_bug_in_a_module_built_from_its_constructor_is_found() -> None:
    report = treespec.check_shapes(_BlockBug.__call__)
    assert [p.severity for p in report.problems if p.severity == "error"] == [
        "error"
    ], str(report)
    # The bug is real: with d != hidden the module fails on arrays.
    model = _BlockBug(4, 6, key=jax.random.key(0))
    with pytest.raises(ValidationError):
        model(jnp.ones((3, 4)))


class _Head(eqx.Module):
    proj: eqx.nn.Linear

    def __init__(self, d: int, classes: int, *, key: PRNGKeyArray) -> None:
        self.proj = eqx.nn.Linear(d, classes, key=key)

    @treespec.jit
    def __call__(self, x: Float[Array, "b d"]) -> Float[Array, "b classes"]:
        return jax.vmap(self.proj)(x)


class _HeadResidual(_Head):
    @treespec.jit
    def __call__(self, x: Float[Array, "b d"]) -> Float[Array, "b classes"]:
        return jax.vmap(self.proj)(x) + x  # BUG: runs only when classes == d


def test_a_constructor_size_named_in_the_return_annotation_takes_that_size() -> None:
    # `classes` is named only by the return: it is that dimension, not 1 (at
    # which the bug's (b, classes) + (b, d) would broadcast).
    report = treespec.check_shapes(_Head.__call__)
    assert report.problems == (), str(report)
    (error,) = treespec.check_shapes(_HeadResidual.__call__).errors
    assert "(b, classes), (b, d)" in error.message, str(error)
    with pytest.raises(TypeError):
        _HeadResidual(4, 3, key=jax.random.key(0))(jnp.ones((2, 4)))


class _Widen(eqx.Module):
    inner: eqx.nn.Linear
    outer: eqx.nn.Linear

    def __init__(self, d: int, hidden: int, *, key: PRNGKeyArray) -> None:
        k1, k2 = jax.random.split(key)
        self.inner = eqx.nn.Linear(d, hidden, key=k1)
        self.outer = eqx.nn.Linear(hidden, d, key=k2)

    @treespec.jit
    def __call__(self, x: Float[Array, "b d"]) -> Float[Array, "b d"]:
        h = jax.vmap(self.inner)(x)
        return jax.vmap(self.outer)(h) + h  # BUG: runs when hidden is 1 (or d)


def test_a_constructor_size_no_annotation_names_is_not_taken_as_1() -> None:
    # At 1 the bug would broadcast in silence. `hidden` is an unknown solved
    # from the sizes the annotations name (DESIGN, "an error is certain"):
    # the code runs at hidden == d, which the note says, in plain sight.
    report = treespec.check_shapes(_Widen.__call__)
    assert report.ok, str(report)
    (note,) = report.notes
    assert "hidden == d" in note.message and "=1" not in note.message, str(report)
    _Widen(4, 4, key=jax.random.key(0))(jnp.ones((2, 4)))  # hidden == d: runs
    with pytest.raises(TypeError):
        _Widen(4, 6, key=jax.random.key(0))(jnp.ones((2, 4)))


class _Pooled(eqx.Module):
    conv: eqx.nn.Conv2d
    pool: eqx.nn.MaxPool2d
    mlp: eqx.nn.MLP

    def __init__(self, c: int, d: int, *, key: PRNGKeyArray) -> None:
        k1, k2 = jax.random.split(key)
        self.conv = eqx.nn.Conv2d(c, d, kernel_size=3, padding=1, key=k1)
        self.pool = eqx.nn.MaxPool2d(kernel_size=2, stride=2)
        self.mlp = eqx.nn.MLP(d, d, d, depth=1, key=k2)

    @treespec.jit
    def __call__(self, x: Float[Array, "c h w"]) -> Float[Array, " d"]:
        y = self.pool(jax.nn.relu(self.conv(x)))
        return self.mlp(y.mean(axis=(1, 2)))


def test_a_module_holding_functions_is_built_from_its_constructor() -> None:
    # MaxPool2d keeps its reduction and MLP its activation as fields:
    # functions, which jax.eval_shape cannot return; Equinox's can.
    report = treespec.check_shapes(_Pooled.__call__)
    assert report.errors == () and report.outputs, str(report)
    assert not any(p.skipped for p in report.problems), str(report)


def test_a_module_given_as_a_value_still_wins() -> None:
    # Its sizes are its own (d=4): no constructor runs, nothing is assumed.
    model = _Block(4, 6, key=jax.random.key(0))
    x = jax.ShapeDtypeStruct((3, 4), jnp.float32)
    report = treespec.check_shapes(_Block.__call__, self=model, x=x)
    assert report.ok and not report.notes, str(report)


class _NBlock(nnx.Module):
    def __init__(self, d: int, hidden: int, *, rngs: nnx.Rngs) -> None:
        self.l1 = nnx.Linear(d, hidden, rngs=rngs)
        self.l2 = nnx.Linear(hidden, d, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.l2(jax.nn.gelu(self.l1(x)))


@treespec.jit
def _apply_nnx(model: _NBlock, x: Float[Array, "t d"]) -> Float[Array, "t d"]:
    return model(x)


@treespec.jit
def _apply_eqx(model: _Block, x: Float[Array, "t d"]) -> Float[Array, "t d"]:
    return model(x)


@pytest.mark.parametrize("fun", [_apply_nnx, _apply_eqx], ids=["nnx", "equinox"])
def test_a_function_taking_a_module_builds_it_from_its_constructor(fun: Any) -> None:
    # `hidden` is named by no annotation: a size of its own, said nowhere.
    report = treespec.check_shapes(fun)
    assert report.problems == () and report.outputs, str(report)


class _Stack(eqx.Module):
    layers: list[eqx.nn.Linear]

    def __init__(self, d: int, n_layers: int, *, key: PRNGKeyArray) -> None:
        keys = jax.random.split(key, n_layers)
        self.layers = [eqx.nn.Linear(d, d, key=k) for k in keys]

    @treespec.jit
    def __call__(self, x: Float[Array, " d"]) -> Float[Array, " d"]:
        for layer in self.layers:
            x = layer(x)
        return x


@pytest.mark.parametrize(
    ("name", "count"),
    [
        ("num_heads", True),
        ("n_layers", True),
        ("depth", True),
        ("groups", True),
        ("hidden_dim", False),
        ("head_dim", False),
        ("hidden_size", False),
        ("out_channels", False),
        ("d_model", False),
    ],
)
def test_a_constructor_int_is_a_count_or_a_size_by_its_name(
    name: str, count: bool
) -> None:
    # A count with no default is 1 (said in a note); a size (`hidden_dim`)
    # is a dimension of its own.
    from treespec._shapes.construct import _COUNT

    assert bool(_COUNT.search(name)) is count


def test_a_count_a_constructor_takes_is_1_and_said() -> None:
    report = treespec.check_shapes(_Stack.__call__)
    assert report.errors == () and report.outputs, str(report)
    (note,) = report.notes
    assert "self.n_layers=1" in note.message and "self=..." in note.message


class _EvenHeads(eqx.Module):
    proj: eqx.nn.Linear

    def __init__(self, d: int, key: PRNGKeyArray) -> None:
        if d % 2:  # the constructor's own refusal, at odd sizes only
            raise ValueError(f"d={d} is not divisible by the 2 heads")
        self.proj = eqx.nn.Linear(d, d, key=key)

    @treespec.jit
    def __call__(self, x: Float[Array, "t d"]) -> Float[Array, "t d"]:
        return jax.vmap(self.proj)(x)


def test_a_constructor_refusing_a_witness_size_is_a_note_naming_its_refusal() -> None:
    report = treespec.check_shapes(_EvenHeads.__call__)  # never raises
    assert report.errors == (), str(report)
    (note,) = report.notes
    assert "_EvenHeads(d=11) refused: ValueError: d=11 is not divisible" in (
        note.message
    ), note.message
    assert "constraints=('d == 2*k',)" in note.message, note.message


class _IntOnly(eqx.Module):
    w: jax.Array

    def __init__(self, d: int) -> None:
        if not isinstance(d, int):  # refuses a symbolic size, in its own words
            raise TypeError("d must be a Python int")
        self.w = jnp.zeros((d, d))

    @treespec.jit
    def __call__(self, x: Float[Array, "t d"]) -> Float[Array, "t d"]:
        return x @ self.w


def test_a_constructor_refusing_a_symbolic_size_is_run_at_concrete_sizes() -> None:
    report = treespec.check_shapes(_IntOnly.__call__)
    assert report.problems == () and report.outputs, str(report)


# Modules built from their constructors all the way down (issue 48, 2).


class _ResBlock(eqx.Module):
    norm: eqx.nn.GroupNorm
    conv: eqx.nn.Conv2d

    def __init__(self, c: int, groups: int = 4, *, key: PRNGKeyArray) -> None:
        self.norm = eqx.nn.GroupNorm(groups, c)
        self.conv = eqx.nn.Conv2d(c, c, 3, padding=1, key=key)

    @treespec.jit
    def __call__(self, x: Float[Array, "c h w"]) -> Float[Array, "c h w"]:
        return x + self.conv(jax.nn.silu(self.norm(x)))


class _ResBlockBug(_ResBlock):
    @treespec.jit
    def __call__(self, x: Float[Array, "c h w"]) -> Float[Array, "c h w"]:
        return x[:, 1:] + self.conv(jax.nn.silu(self.norm(x)))  # BUG: one row


def test_a_nested_layer_with_annotated_fields_is_built_by_the_users_init() -> None:
    # GroupNorm's `groups: int` has no default of its own: the block's
    # constructor says 4, and c must be a multiple of it.
    report = treespec.check_shapes(_ResBlock.__call__)
    assert report.errors == () and not any(p.skipped for p in report.problems), str(
        report
    )
    (error,) = treespec.check_shapes(_ResBlockBug.__call__).errors
    assert error.line == _line(_ResBlockBug.__call__, "# BUG"), str(error)


class _NnxDown(nnx.Module):
    def __init__(self, cin: int, cout: int, *, rngs: nnx.Rngs) -> None:
        self.conv = nnx.Conv(cin, cout, (3, 3), strides=(2, 2), rngs=rngs)
        self.norm = nnx.GroupNorm(cout, num_groups=4, rngs=rngs)


@treespec.jit
def _nnx_down(m: _NnxDown, x: Float[Array, "b h w c"]) -> Float[Array, "b h//2 w//2 o"]:
    return m.norm(m.conv(x))


@treespec.jit
def _nnx_down_bug(
    m: _NnxDown, x: Float[Array, "b h w c"]
) -> Float[Array, "b h//2 w//2 o"]:
    return m.norm(m.conv(x)).swapaxes(1, 2)  # BUG: h and w swapped


def test_an_nnx_layer_refusing_a_first_stand_in_is_given_the_next() -> None:
    # NNX's GroupNorm says "does not divide" of 4 groups of 2 channels, at
    # the first pass's stand-in 2: a refusal, never a failure of the checker.
    report = treespec.check_shapes(_nnx_down)
    assert report.errors == () and not report.skipped, str(report)
    (error,) = treespec.check_shapes(_nnx_down_bug).errors
    assert error.line == _line(_nnx_down_bug, "# BUG"), str(error)


class _Bijection(eqx.Module):
    @abc.abstractmethod
    def __init__(self) -> None: ...

    @treespec.jit
    def __call__(self, x: Float[Array, " n"]) -> Float[Array, " n"]:
        return self.forward(x)

    @abc.abstractmethod
    def forward(self, x: jax.Array) -> jax.Array: ...


class _Masked(eqx.Module):
    bijector: _Bijection
    mask: Float[Array, " n"]

    @treespec.jit
    def __call__(self, x: Float[Array, " n"]) -> Float[Array, " n"]:
        return self.mask * self.bijector(x)


def test_an_abstract_class_is_a_skip_that_names_it_never_a_checker_failure() -> None:
    # flowMC's abstract `Bijection`, as `self` and as a field's annotation:
    # only a subclass can be built, and which one the annotation cannot say.
    (note,) = treespec.check_shapes(_Bijection.__call__).problems
    assert note.skipped, str(note)
    assert "self cannot be built: _Bijection is an abstract class" in note.message
    (note,) = treespec.check_shapes(_Masked.__call__).problems
    assert note.skipped and "checker failed" not in note.message, str(note)
    assert "skipped: self.bijector (_Bijection" in note.message, str(note)


class _EqxAttention(eqx.Module):
    attn: eqx.nn.MultiheadAttention

    def __init__(self, d: int, *, key: PRNGKeyArray) -> None:
        self.attn = eqx.nn.MultiheadAttention(num_heads=4, query_size=d, key=key)

    @treespec.jit
    def __call__(self, x: Float[Array, "t d"]) -> Float[Array, "t d"]:
        return self.attn(x, x, x)


class _NnxAttention(nnx.Module):
    def __init__(self, d: int, *, rngs: nnx.Rngs) -> None:
        self.attn = nnx.MultiHeadAttention(4, d, rngs=rngs, decode=False)

    @treespec.jit
    def __call__(self, x: Float[Array, "t d"]) -> Float[Array, "t d"]:
        return self.attn(x)


@pytest.mark.parametrize("cls", [_EqxAttention, _NnxAttention], ids=["eqx", "nnx"])
def test_attention_with_several_heads_inside_a_users_module_is_built(
    cls: Any,
) -> None:
    report = treespec.check_shapes(cls.__call__)
    assert report.errors == (), str(report)
    assert not any(p.skipped for p in report.problems), str(report)


def test_constraints_given_hold_at_the_witnesses_a_constructor_is_run_at() -> None:
    # `d == 4*k` stated: the witnesses are k's, d four times it, never d=11.
    stated = treespec.check_shapes(_NnxAttention.__call__, constraints=("d == 4*k",))
    assert stated.problems == () and stated.outputs, str(stated)


def test_a_constructors_own_refusal_is_shown_in_the_note() -> None:
    report = treespec.check_shapes(_NnxAttention.__call__)
    assert any("must be divisible" in p.message for p in report.notes), str(report)


def test_a_static_int_checked_only_at_its_default_is_said() -> None:
    # So that a user knows `groups` was checked at 1 only (issue 40, 4).
    @treespec.jit
    def grouped(x: Float[Array, "c n"], groups: Static[int] = 1) -> Float[Array, "c n"]:
        return x.reshape(groups, -1, x.shape[-1]).reshape(x.shape)

    report = treespec.check_shapes(grouped)
    assert report.ok and report.defaults == (("groups", 1),)
    assert str(report).endswith("grouped: ok (groups=1: checked at its default only)")
    assert treespec.check_shapes(grouped, groups=2).defaults == ()


@treespec.jit
def _odd_branch(x: Float[Array, "b d"]) -> Float[Array, "b d"]:
    half = jnp.ones((x.shape[0], x.shape[-1] // 2))
    emb = jnp.concatenate([half, half], axis=-1)
    if x.shape[-1] % 2:  # an odd width: meant to work, padded by a column
        return x + jnp.pad(emb, ((0, 1), (0, 0)))  # the wrong axis padded
    return x + emb


@treespec.jit
def _odd_branch_right(x: Float[Array, "b d"]) -> Float[Array, "b d"]:
    half = jnp.ones((x.shape[0], x.shape[-1] // 2))
    emb = jnp.concatenate([half, half], axis=-1)
    if x.shape[-1] % 2:
        emb = jnp.pad(emb, ((0, 0), (0, 1)))
    return x + emb


def test_a_failure_in_a_branch_taken_only_at_odd_sizes_is_an_error() -> None:
    # The code has a branch for an odd d: odd sizes are meant to work, and
    # the branch that fails there is the bug, at its line; not a parity the
    # annotations leave unstated (that is a failure on a line both run).
    (error,) = treespec.check_shapes(_odd_branch).errors
    assert error.line == _line(_odd_branch, "jnp.pad(emb, ((0, 1)"), str(error)
    assert "concrete sizes" in error.message and "d=" in error.message, str(error)
    assert treespec.check_shapes(_odd_branch_right).problems == ()
    _odd_branch(jnp.ones((3, 4)))  # an even d: a quick test passes
    _odd_branch_right(jnp.ones((3, 5)))
    with pytest.raises(TypeError):
        _odd_branch(jnp.ones((3, 5)))


@treespec.jit
def _halve(x: Float[Array, "b d"]) -> Float[Array, "b d//2"]:
    return x.reshape(x.shape[0], -1, 2).sum(-1)  # needs an even d


@treespec.jit
def _halve_twice(x: Float[Array, "b d"]) -> Float[Array, "b d//2"]:
    y = _halve(x)  # a jitted helper: cached, not traced again at a size
    return y + _halve(x)


def test_a_parity_a_jitted_helper_needs_stays_a_note() -> None:
    # The helper's line fails at odd sizes and is cached at even ones (its
    # body does not run again): the line that led there, `_halve(x)`, runs at
    # both, so this is no branch of the code's own: a parity note.
    report = treespec.check_shapes(_halve_twice)
    assert report.errors == (), str(report)
    (note,) = report.notes
    assert note.message.startswith("holds only when d is even"), str(note)


@treespec.jit
def _capacity(x: Float[Array, "n d"], w: Float[Array, "d e"]) -> Float[Array, "n d"]:
    capacity = max(1, int(1.25 * x.shape[0] / w.shape[1]))  # a size as a number
    return x * capacity


@treespec.jit
def _capacity_bug(
    x: Float[Array, "n d"], w: Float[Array, "d e"]
) -> Float[Array, "n d"]:
    capacity = max(1, int(1.25 * x.shape[0] / w.shape[1]))
    return (x @ w) * capacity  # (n, e): right only when d == e


def test_a_size_made_a_traced_number_is_checked_at_concrete_sizes() -> None:
    # `1.25 * n` at a symbolic n is a traced array, and `int()` of it a
    # ConcretizationTypeError: a limit of symbolic sizes, not a value the
    # code needs. The witnesses check past it.
    assert treespec.check_shapes(_capacity).problems == ()
    (error,) = treespec.check_shapes(_capacity_bug).errors
    assert error.line == _line(_capacity_bug, "(x @ w) * capacity"), str(error)
    assert "concrete sizes" in error.message, str(error)
    _capacity_bug(jnp.ones((8, 3)), jnp.ones((3, 3)))
    with pytest.raises(ValidationError):
        _capacity_bug(jnp.ones((8, 3)), jnp.ones((3, 5)))


@treespec.jit
def _value_needed(x: Float[Array, " n"]) -> Float[Array, " n"]:
    return x if x.sum() > 0 else -x  # a value, at every size


def test_a_value_the_code_needs_stays_a_note_at_concrete_sizes_too() -> None:
    (note,) = treespec.check_shapes(_value_needed).problems
    assert note.severity == "note" and "values of traced arrays" in note.message


def _conv(x: jax.Array, kernel: jax.Array, groups: int) -> jax.Array:
    return jax.lax.conv_general_dilated(
        x,
        kernel,
        (1, 1),
        "SAME",
        dimension_numbers=("NHWC", "HWIO", "NHWC"),
        feature_group_count=groups,
    )


@treespec.jit
def _grouped_conv(
    x: Float[Array, "b h w c"], kernel: Float[Array, "3 3 g c_out"]
) -> Float[Array, "b h w c_out"]:
    return _conv(x, kernel, 4)  # needs 4 to divide c (and c == 4*g)


@treespec.jit
def _depthwise_nchw(
    x: Float[Array, "b h w c"], kernel: Float[Array, "3 3 1 c"]
) -> Float[Array, "b h w c"]:
    return _conv(x, kernel, x.shape[1])  # NCHW's channel axis in NHWC code


def test_a_group_count_that_must_divide_the_channels_is_a_relation() -> None:
    # JAX says "4 does not divide c", a ValueError: an unstated divisibility,
    # never an error, whatever JAX raises for it.
    report = treespec.check_shapes(_grouped_conv)
    assert report.errors == (), str(report)
    _grouped_conv(jnp.ones((2, 5, 5, 8)), jnp.ones((3, 3, 2, 8)))  # c == 4*g
    with pytest.raises(ValueError):
        _grouped_conv(jnp.ones((2, 5, 5, 6)), jnp.ones((3, 3, 2, 8)))


def test_a_group_count_read_from_the_wrong_axis_is_an_error() -> None:
    (error,) = treespec.check_shapes(_depthwise_nchw).errors
    assert f"called at line {_line(_depthwise_nchw, 'x.shape[1]')}" in error.message
    _depthwise_nchw(jnp.ones((2, 4, 5, 4)), jnp.ones((3, 3, 1, 4)))  # h == c
    with pytest.raises(ValueError):
        _depthwise_nchw(jnp.ones((2, 5, 6, 4)), jnp.ones((3, 3, 1, 4)))


@treespec.jit
def _cross_heads(
    x: Float[Array, "b q d"], memory: Float[Array, "b k d"]
) -> Float[Array, "b 4 q k"]:
    b, q, d = x.shape
    queries = x.reshape(b, q, 4, d // 4)  # needs 4 to divide d
    keys = memory.reshape(b, q, 4, d // 4)  # the query length for the keys
    return jnp.einsum("bqhd,bkhd->bhqk", queries, keys)


def test_a_reshape_that_fails_where_sizes_divide_is_reported_at_its_line() -> None:
    # At the primes the first reshape fails (4 does not divide d); where
    # every size divides the others it runs, and the second fails: that line.
    (error,) = treespec.check_shapes(_cross_heads).errors
    assert error.line == _line(_cross_heads, "keys = memory.reshape"), str(error)
    _cross_heads(jnp.ones((2, 3, 8)), jnp.ones((2, 3, 8)))  # q == k
    with pytest.raises(TypeError):
        _cross_heads(jnp.ones((2, 3, 8)), jnp.ones((2, 5, 8)))


@treespec.jit
def _keys_as_queries(
    x: Float[Array, "b q d"], memory: Float[Array, "b k d"]
) -> Float[Array, "b q d"]:
    b, q, d = x.shape
    keys = memory.reshape(b, q, d)  # k for q: runs only when k == q
    return x + keys


def test_a_reshape_that_changes_the_size_is_an_error_at_its_line() -> None:
    # JAX checks a reshape's size only where every size is a number: at
    # symbolic sizes this traced without a word, and the check said ok.
    (error,) = treespec.check_shapes(_keys_as_queries).errors
    assert error.line == _line(_keys_as_queries, "memory.reshape"), str(error)
    assert error.message.startswith("cannot reshape array of shape (b, k, d)")
    assert "into shape (b, q, d)" in error.message, str(error)
    _keys_as_queries(jnp.ones((2, 3, 4)), jnp.ones((2, 3, 4)))
    with pytest.raises(TypeError):
        _keys_as_queries(jnp.ones((2, 3, 4)), jnp.ones((2, 5, 4)))


def _flatten(x: jax.Array) -> jax.Array:
    n = x.shape[0]
    return jax.lax.reshape(x, (n * n,))  # square habit; lax never checks it


@treespec.jit
def _scan_flatten(xs: Float[Array, "t n m"]) -> Float[Array, "t n*m"]:
    def step(carry: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        return carry, _flatten(x)

    return jax.lax.scan(step, 0.0, xs)[1]


def test_a_reshape_inside_a_scan_and_a_helper_is_found_there() -> None:
    # The return value disagrees too (n*n for n*m); the reshape comes first,
    # and is why: it is the one reported.
    (error,) = treespec.check_shapes(_scan_flatten).errors
    assert error.line == _line(_flatten, "jax.lax.reshape"), str(error)
    assert f"called at line {_line(_scan_flatten, 'jax.lax.scan')}" in error.message


@treespec.jit
def _group_norm(
    x: Float[Array, "c h w"], groups: Static[int] = 32
) -> Float[Array, "c h w"]:
    c, h, w = x.shape
    g = x.reshape(groups, c // groups, h, w)  # needs 32 to divide c
    g = (g - g.mean(axis=(1, 2, 3), keepdims=True)) / (g.std() + 1e-5)
    return g.reshape(c, h, w)


def test_a_reshape_into_32_groups_needs_sizes_32_divides_a_note() -> None:
    report = treespec.check_shapes(_group_norm)
    assert report.errors == (), str(report)
    assert "divide" in report.notes[0].message, str(report)
    _group_norm(jnp.ones((64, 3, 5)))


def _conv_nhwc(x: jax.Array, kernel: jax.Array, stride: int) -> jax.Array:
    return jax.lax.conv_general_dilated(
        x, kernel, (stride, stride), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )


def _avg_pool(x: jax.Array) -> jax.Array:
    window = (1, 2, 2, 1)
    return jax.lax.reduce_window(x, 0.0, jax.lax.add, window, window, "VALID") / 4


@treespec.jit
def _downsample(
    x: Float[Array, "b h w c"], kernel: Float[Array, "3 3 c c"]
) -> Float[Array, "b (h+1)//2 (w+1)//2 c"]:
    y = _conv_nhwc(x, kernel, 2)  # SAME, stride 2: ceil(h/2)
    return y + x[:, ::2, ::2, :]  # a strided shortcut: ceil(h/2) too


@treespec.jit
def _downsample_pooled(
    x: Float[Array, "b h w c"], kernel: Float[Array, "3 3 c c"]
) -> Float[Array, "b (h+1)//2 (w+1)//2 c"]:
    y = _conv_nhwc(x, kernel, 2)
    return y + _avg_pool(x)  # floor(h/2): right only at even sizes


def test_a_parity_the_annotation_rounds_is_no_assumption_but_a_bug() -> None:
    # `(h+1)//2` says what an odd h gives: odd sizes are meant to work, and
    # failing at them is an error, not a parity the annotations leave out.
    assert treespec.check_shapes(_downsample).problems == ()
    (error,) = treespec.check_shapes(_downsample_pooled).errors
    assert error.line == _line(_downsample_pooled, "_avg_pool(x)"), str(error)
    assert "(h+1)//2" in error.message, str(error)
    x, kernel = jnp.ones((2, 6, 4, 3)), jnp.ones((3, 3, 3, 3))
    _downsample_pooled(x, kernel)
    _downsample(jnp.ones((2, 7, 5, 3)), kernel)
    with pytest.raises(TypeError):
        _downsample_pooled(jnp.ones((2, 7, 5, 3)), kernel)


# -- found by an independent review of the rules above --------------------------


def _rope_rows(x: jax.Array) -> jax.Array:
    x1, x2 = jnp.split(x, 2, axis=-1)  # rotary: needs an even width
    angle = jnp.arange(x.shape[0])[:, None] * jnp.ones(x.shape[-1] // 2)
    return jnp.concatenate([x1 * jnp.cos(angle), x2 * jnp.sin(angle)], axis=-1)


@treespec.jit
def _short_or_blocked(x: Float[Array, "n d"]) -> Float[Array, "n d"]:
    if x.shape[0] <= 16:  # a short sequence: one block
        return _rope_rows(x)
    padded = jnp.pad(x, ((0, -x.shape[0] % 16), (0, 0)))
    return _rope_rows(padded)[: x.shape[0]]


@treespec.jit
def _pool_pairs_glu(x: Float[Array, "n d"]) -> Float[Array, "m d//2"]:
    n, d = x.shape
    if n % 2 == 0:
        a, b = jnp.split(x.reshape(n // 2, 2, d).mean(1), 2, axis=-1)
        return a * jax.nn.sigmoid(b)
    x = jnp.concatenate([x, x[-1:]], axis=0)  # an odd length: the last row again
    a, b = jnp.split(x.reshape((n + 1) // 2, 2, d).mean(1), 2, axis=-1)
    return a * jax.nn.sigmoid(b)


def test_a_branch_on_another_size_or_a_threshold_is_no_odd_branch() -> None:
    # Both need an even d, which the annotations leave unstated; the branch
    # the failing run takes is on n (a threshold, a parity of n), not on d:
    # a note, as for any unstated parity.
    for fun in (_short_or_blocked, _pool_pairs_glu):
        report = treespec.check_shapes(fun)
        assert report.errors == (), str(report)
        assert "holds only when d is even" in report.notes[0].message, str(report)
    _short_or_blocked(jnp.ones((8, 4)))
    _short_or_blocked(jnp.ones((40, 6)))
    _pool_pairs_glu(jnp.ones((7, 4)))


@treespec.jit
def _odd_branch_scoped(x: Float[Array, "b d"]) -> Float[Array, "b d"]:
    with jax.named_scope("embedding"):
        half = jnp.ones((x.shape[0], x.shape[-1] // 2))
        emb = jnp.concatenate([half, half], axis=-1)
        if x.shape[-1] % 2:
            return x + jnp.pad(emb, ((0, 1), (0, 0)))  # the wrong axis padded
        return x + emb


def test_an_odd_branch_inside_a_with_block_is_found_too() -> None:
    (error,) = treespec.check_shapes(_odd_branch_scoped).errors
    assert error.line == _line(_odd_branch_scoped, "jnp.pad(emb"), str(error)


@treespec.jit
def _gqa_gated(
    q: Float[Array, "n h d"], k: Float[Array, "n kv d"]
) -> Float[Array, "n h d"]:
    n, h, d = q.shape
    grouped = q.reshape(n, k.shape[1], -1, d)  # kv must divide h
    out = (grouped * k[:, :, None, :]).reshape(n, h, d)
    return q + jnp.concatenate([jax.nn.sigmoid(q), out], axis=1)  # meant a product


def test_a_number_with_two_readings_is_no_relation() -> None:
    # At a chain witness 2*h (144 at h=72) is also kv*kv (at kv=12): no
    # relation `h == kv*kv` may be read from it; the bug is an error.
    (error,) = treespec.check_shapes(_gqa_gated).errors
    assert error.line == _line(_gqa_gated, "jnp.concatenate"), str(error)
    with pytest.raises(TypeError):
        _gqa_gated(jnp.ones((5, 8, 4)), jnp.ones((5, 2, 4)))


@treespec.jit
def _fused_qkv_split_by_tokens(
    x: Float[Array, "b t d"], w_qkv: Float[Array, "d 3*d"], w_out: Float[Array, "d d"]
) -> Float[Array, "b t d"]:
    q, k, v = jnp.split(x @ w_qkv, 3, axis=1)  # the tokens split, not the features
    scores = jax.nn.softmax(jnp.einsum("bqe,bke->bqk", q, k), axis=-1)
    return jnp.einsum("bqk,bke->bqe", scores, v) @ w_out


def test_three_times_a_size_is_read_as_such_at_a_chain_witness() -> None:
    # Blind corpus: where t divides by 3 (a chain witness, b=72, d=12) the
    # attention's output is 3*d wide against w_out's d. 36 is 3*d and b // 2
    # there: it was read as b // 2 only, a relation `b == 2*d` to state,
    # and the bug passed as a note. Two readings make it a number: an error.
    (error,) = treespec.check_shapes(_fused_qkv_split_by_tokens).errors
    assert error.line == _line(_fused_qkv_split_by_tokens, "@ w_out"), str(error)
    assert "b == 2*d" not in error.message, str(error)
    with pytest.raises(TypeError):
        _fused_qkv_split_by_tokens(
            jnp.ones((2, 6, 4)), jnp.ones((4, 12)), jnp.ones((4, 4))
        )


@treespec.jit
def _conv3d_same(
    x: Float[Array, "b c t h w"],
    kernel: Float[Array, "o c kt kh kw"],
    bias: Float[Array, " o"],
) -> Float[Array, "b o t h w"]:
    y = jax.lax.conv_general_dilated(x, kernel, (1, 1, 1), padding="VALID")  # not SAME
    return y + bias[None, :, None, None, None]


def test_a_kernel_larger_than_its_input_at_nine_names_is_decided_by_chains() -> None:
    # Blind corpus: the witnesses give the kernel (named last) sizes larger
    # than the video's, so VALID's output axes are empty there, a failure
    # that reads as sizes not dividing. Nine names had no chain witness,
    # so the bug was a note; at a chain the kernel is the smaller: an error.
    (error,) = treespec.check_shapes(_conv3d_same).errors
    assert error.line == _line(_conv3d_same, "return y"), str(error)
    assert "the return value" in error.message, str(error)
    x, kernel = jnp.ones((1, 2, 5, 6, 7)), jnp.ones((3, 2, 3, 3, 3))
    with pytest.raises(treespec.ValidationError):
        _conv3d_same(x, kernel, jnp.ones(3))


@treespec.jit
def _block_sum(x: Float[Array, "n d"]) -> Float[Array, "(n+3)//4 d"]:
    n, d = x.shape
    pad = -n % 4  # whole blocks of 4
    return jnp.pad(x, ((0, pad), (0, 0))).reshape((n + pad) // 4, 4, d).sum(1)


def test_a_reshape_jax_cannot_decide_is_no_error_where_no_witness_runs() -> None:
    # With constraints the symbolic answer stands: a reshape whose sizes JAX
    # cannot prove equal (mod, floordiv) is a note there, never an error.
    assert treespec.check_shapes(_block_sum).errors == ()
    report = treespec.check_shapes(_block_sum, constraints=("d >= 1",))
    assert report.errors == (), str(report)
    _block_sum(jnp.ones((7, 3)))


@treespec.jit
def _unet_level(
    x: Float[Array, "b h w c"], kernel: Float[Array, "3 3 c c"]
) -> tuple[Float[Array, "b h w c"], Float[Array, "b (h+1)//2 (w+1)//2 c"]]:
    down = _conv_nhwc(x, kernel, 2)  # SAME, stride 2: ceil(h/2)
    up = jnp.repeat(jnp.repeat(down, 2, axis=1), 2, axis=2)  # h when h is even
    return x + up, down


def test_a_rounded_annotation_makes_only_a_floor_against_its_ceiling_an_error() -> None:
    # The annotation's (h+1)//2 is what the convolution gives; the x2
    # upsample needs an even h, as a U-Net's levels do: a parity note. Only
    # a failure between (h+1)//2 and h//2 (a floor where the annotation says
    # what an odd h gives) is an error.
    report = treespec.check_shapes(_unet_level)
    assert report.errors == (), str(report)
    assert "holds only when h and w are even" in report.notes[0].message
    _unet_level(jnp.ones((1, 8, 6, 3)), jnp.ones((3, 3, 3, 3)))


@treespec.jit
def _gqa_repeat(
    q: Float[Array, "n h d"], k: Float[Array, "n kv d"]
) -> Float[Array, "n h d"]:
    return q + jnp.repeat(k, q.shape[1] // k.shape[1], axis=1)  # kv divides h


def test_a_size_of_zero_from_a_division_is_a_relation() -> None:
    # At the primes h // kv is 0 (h=13, kv=17): an empty axis, which only
    # sizes that divide each other avoid. A note, never an error.
    report = treespec.check_shapes(_gqa_repeat)
    assert report.errors == (), str(report)
    _gqa_repeat(jnp.ones((7, 8, 2)), jnp.ones((7, 2, 2)))


def test_the_relation_a_chain_finds_is_suggested_in_syntax_jax_takes() -> None:
    # `but c // 4 != g`: the constraint JAX's parser takes is `c == 4*g`;
    # given, the check goes on, and the next divisibility it meets (c_out,
    # in 4 groups) is a note still, never an error.
    (note,) = treespec.check_shapes(_grouped_conv).notes
    assert "constraints=('c == 4*g',)" in note.message, str(note)
    report = treespec.check_shapes(_grouped_conv, constraints=("c == 4*g",))
    assert report.errors == (), str(report)
    assert "c_out" in report.notes[0].message, str(report)


@treespec.jit
def small_halves(x: Float[Array, "n"]) -> Float[Array, "n"]:
    if x.shape[0] // 2 > 5:
        return x[:1]  # runs only where n // 2 <= 5
    return x * 2


@treespec.jit
def longer(x: Float[Array, "n"], y: Float[Array, "m"]) -> Float[Array, "n"]:
    if 2 * x.shape[0] > y.shape[0] + 10:
        return x * 2
    return x[:1]  # runs only where 2n > m + 10


def _suggested(fun: Any) -> str:
    (note,) = treespec.check_shapes(fun).notes
    found = re.search(r"constraints=\('(.+?)',\)", note.message)
    assert found, note.message
    return found.group(1)


def test_a_threshold_written_with_floor_division_suggests_the_side_that_runs() -> None:
    # JAX writes `x.shape[0] // 2 > 5` as floordiv(n, 2): the note gives the
    # side the code ran at, and stated, it checks.
    relation = _suggested(small_halves)
    assert relation == "floordiv(n, 2) <= 5", relation
    assert treespec.check_shapes(small_halves, constraints=(relation,)).ok


def test_a_strict_comparison_of_two_sizes_suggests_that_comparison() -> None:
    # `2 * n > m + 10` is no parity: it is 2*n >= m + 11, said as the code
    # compares, and stated, it checks.
    relation = _suggested(longer)
    assert "2*k" not in relation and ">=" in relation, relation
    report = treespec.check_shapes(longer, constraints=(relation,))
    assert report.problems == (), str(report)


@pytest.mark.parametrize(
    ("text", "needed"),
    [
        # A validation of an instance's own name against the call's: one
        # way only, `d__1` must be `d` (never `d` must be `d__1`).
        (
            "argument x, at x: expected Float[Array, 'batch d'], "
            "got float32[batch,d__1]",
            {"d__1": "d"},
        ),
        # Against an annotation's number, in a validation, it takes it.
        (
            "argument x, at x: expected Float[Array, 'b 3'], got float32[b,d__1]",
            {"d__1": "3"},
        ),
        # Two names of instances: the first one takes the other, once.
        (
            "TypeError: dot_general requires contracting dimensions to have "
            "the same shape, got (in__1,) and (out__2,).",
            {"in__1": "out__2"},
        ),
    ],
)
def test_what_a_failure_says_an_instances_own_size_must_be(
    text: str, needed: dict[str, str]
) -> None:
    from treespec._shapes.relations import relations_needed

    assert relations_needed(text) == needed


_RESHAPE = "cannot reshape array of shape ({},) (size {}) into shape {} (size {})"


@pytest.mark.parametrize(
    ("old", "new", "size", "needed"),
    [
        # A norm's scale over `[b, n, d]`, as JAX writes a list and a tuple.
        ("latent_dim", "[1, 1, d]", "d", {"latent_dim": "d"}),
        ("latent_dim", "(1, 1, d)", "d", {"latent_dim": "d"}),
        # A flat table over two axes: their product.
        ("n_pos", "(t, d)", "d*t", {"n_pos": "d*t"}),
        # A named size is no unknown to take; nor one against its own double.
        ("c", "(h, w)", "h*w", {}),
        ("n_pos", "(2, n_pos)", "2*n_pos", {}),
    ],
)
def test_a_vector_reshaped_needs_its_size_to_be_the_new_shapes(
    old: str, new: str, size: str, needed: dict[str, str]
) -> None:
    from treespec._shapes.relations import relations_needed

    text = _RESHAPE.format(old, old, new, size)
    assert relations_needed(text, {"latent_dim", "n_pos"}) == needed


def test_a_suggested_constraint_is_the_comparison_the_code_makes() -> None:
    from treespec._shapes.outcomes import suggestion

    # No relation to state for an inequality: the parity is suggested.
    assert suggestion("comparison 'n' != 'm'") == "n == 2*k"
    # The code ran where m >= n + 1, not where n >= m.
    text = "comparison 'n' >= 'm'"
    assert suggestion(text, runs_at={"n": 2, "m": 5}) == "m >= n + 1"
    assert suggestion(text, runs_at={"n": 5, "m": 2}) == "n >= m"


def test_the_checks_own_traces_are_no_retrace_storm(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A nested function given a size as a plain int is traced once per size
    # the check runs at, in a body or in a constructor: the check's doing,
    # not the user's program, and nothing is compiled. So no retrace warning
    # or log on the command's output, no trace counted, and none that a
    # later retrace of the user's is explained against.
    import logging

    monkeypatch.setenv("TREESPEC_EXPLAIN_RECOMPILES", "1")

    @treespec.jit
    def table(n: int) -> Float[Array, " n"]:
        return jnp.arange(n) * 1.0

    def user(k: int) -> Any:
        @treespec.jit
        def scaled(x: Float[Array, "t d"]) -> Float[Array, "t d"]:
            return x * table(int(x.shape[1]) + k)[k:]  # a number: at witnesses

        return scaled

    class Scaled(eqx.Module):
        scale: jax.Array

        def __init__(self, dim: int) -> None:
            self.scale = table(dim)  # a constructor's own nested call

        @treespec.jit
        def __call__(self, x: Float[Array, "t dim"]) -> Float[Array, "t dim"]:
            return x * self.scale

    with caplog.at_level(logging.INFO, logger="treespec"):
        for k in range(1, 8):
            assert treespec.check_shapes(user(k)).ok
        for _ in range(3):
            assert treespec.check_shapes(Scaled.__call__).ok
        assert [r.getMessage() for r in caplog.records] == []
        assert table.trace_count == 0
        for n in range(101, 108):  # the user's own calls, as before
            table(n)
    assert table.trace_count == 7
    storm = [r.getMessage() for r in caplog.records if "table traced" in r.getMessage()]
    assert len(storm) == 1 and "traced 6 times" in storm[0], storm


def test_the_checks_traces_of_a_nested_shard_map_are_not_the_users(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `shard_map` (as `pmap`) counts its traces itself: the check's are not
    # counted, and the user's first call is no retrace to explain.
    import logging

    from jax.sharding import Mesh, PartitionSpec

    monkeypatch.setenv("TREESPEC_EXPLAIN_RECOMPILES", "1")
    mesh = Mesh(jax.devices()[:1], ("x",))

    def _doubled(x: Float[Array, "t d"]) -> Float[Array, "t d"]:
        return x * 2.0

    doubled = treespec.shard_map(
        _doubled, mesh, in_specs=PartitionSpec(), out_specs=PartitionSpec()
    )

    @treespec.jit
    def outer(x: Float[Array, "t d"]) -> Float[Array, "t d"]:
        return doubled(x) + 1.0

    with caplog.at_level(logging.INFO, logger="treespec"):
        assert treespec.check_shapes(outer).ok
        assert doubled.trace_count == 0
        doubled(jnp.ones((4, 3)))  # the user's first call
    assert doubled.trace_count == 1
    assert not [r for r in caplog.records if "retrac" in r.getMessage()], caplog.text


@treespec.jit
def host_scaled(x: Float[Array, " n"]) -> Float[Array, " n"]:
    return x * np.ones(x.shape[0], dtype=np.float32)  # made on the host


@treespec.jit
def host_scaled_bug(x: Float[Array, " n"]) -> Float[Array, " n"]:
    return x * np.ones(x.shape[0] + 1, dtype=np.float32)  # the bug: one too many


def test_a_numpy_array_of_a_size_is_checked_at_concrete_sizes() -> None:
    # NumPy takes no symbolic size (`expected a sequence of integers or a
    # single integer, got 'n'`): a limit of symbolic sizes, never the
    # code's error; the witnesses decide, and find the twin's bug.
    assert host_scaled(jnp.ones(3)).shape == (3,)
    report = treespec.check_shapes(host_scaled)
    assert report.problems == (), str(report)
    (error,) = treespec.check_shapes(host_scaled_bug).errors
    assert "concrete sizes" in error.message, str(error)
