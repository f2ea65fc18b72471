"""Runtime validation: what is checked, the message, and when it runs."""

from __future__ import annotations

import dataclasses
import enum
import traceback
from collections.abc import Callable
from functools import partial
from typing import Any, Literal, NamedTuple, NotRequired, TypedDict

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxtyping import Array, Float, Int, PyTree

import treespec
from treespec import Dynamic, Static, ValidationError


class Config(TypedDict):
    n_layers: Static[int]
    activation: Static[Literal["relu", "gelu"]]
    scale: Dynamic[float]
    note: NotRequired[Static[str]]


class Mode(enum.Enum):
    TRAIN = "train"
    EVAL = "eval"


GOOD = {"n_layers": 2, "activation": "relu", "scale": 0.5}


def _messages(call: Callable[[], Any]) -> list[str]:
    with pytest.raises(ValidationError) as info:
        call()
    return [issue.format() for issue in info.value.issues]


@treespec.jit
def step(
    x: Float[Array, "b n"], w: Float[Array, "n m"], cfg: Config
) -> Float[Array, "b m"]:
    return (x @ w) * cfg["scale"]


X, W = jnp.ones((32, 7)), jnp.ones((7, 4))


def test_conforming_call_passes() -> None:
    assert step(X, W, GOOD).shape == (32, 4)
    assert step(X, W, {**GOOD, "note": "n"}).shape == (32, 4)


def test_static_leaves_against_their_types() -> None:
    msgs = _messages(
        lambda: step(X, W, {**GOOD, "n_layers": "3", "activation": "tanh"})
    )
    assert msgs == [
        "argument cfg, at cfg['activation']: expected Static[Literal['relu', 'gelu']], "
        "got str 'tanh'",
        "argument cfg, at cfg['n_layers']: expected Static[int], got str '3'",
    ]


def test_an_int_where_a_float_is_annotated_is_accepted_as_pep_484_says() -> None:
    # feedbax's `damping: float = 0`: mypy and pyright take an int where a
    # float is annotated (and an int or float where a complex is); so does
    # the validation. A str is still refused.
    @treespec.jit
    def scaled(x: jax.Array, k: Static[float], z: Static[complex]) -> jax.Array:
        return x * k * abs(z)

    np.testing.assert_allclose(scaled(jnp.ones(2), 0, 2), 0.0)
    np.testing.assert_allclose(scaled(jnp.ones(2), 2, 1.5), 3.0)
    msgs = _messages(lambda: scaled(jnp.ones(2), "2", 1))
    assert msgs == ["argument k, at k: expected Static[float], got str '2'"]


def test_enums_and_callables() -> None:
    @treespec.jit
    def f(
        x: jax.Array, mode: Static[Mode], act: Static[Callable[[jax.Array], jax.Array]]
    ) -> Any:
        return act(x) if mode is Mode.TRAIN else x

    np.testing.assert_allclose(f(jnp.zeros(2), Mode.TRAIN, jnp.cos), 1.0)
    msgs = _messages(lambda: f(jnp.zeros(2), "train", 3))
    assert any("at mode: expected Static[Mode], got str 'train'" in m for m in msgs)
    assert any(
        "at act: expected Static[Callable" in m and "got int 3" in m for m in msgs
    )


def test_dims_bound_across_arguments_name_who_bound_them() -> None:
    (msg,) = _messages(lambda: step(X, jnp.ones((8, 4)), GOOD))
    assert msg == (
        "argument w, at w: expected Float[Array, 'n m'] with n=7 bound by x, "
        "got float32[8,4]"
    )


class Batch(TypedDict):
    ids: Int[Array, " batch"]
    x: Float[Array, "batch d"]
    y: Float[Array, "batch d"]
    z: Float[Array, "batch d"]


@treespec.jit
def first_x(b: Batch) -> jax.Array:
    return b["x"][0]


def test_a_dimension_the_others_agree_on_blames_only_the_leaf_that_differs() -> None:
    # Only `ids` is wrong, though it is checked first and so binds batch=5.
    batch = {"x": jnp.ones((4, 2)), "y": jnp.ones((4, 2)), "z": jnp.ones((4, 2))}
    (msg,) = _messages(lambda: first_x({"ids": jnp.zeros(5, jnp.int32), **batch}))
    assert msg.startswith(
        "argument b, at b['ids']: expected Int[Array, 'batch'] with batch=4 bound "
        "by b['x'], b['y'], b['z'], got int32[5]"
    ), msg
    assert "batch=4 from b['x'], b['y'], b['z']; batch=5 from b['ids']" in msg, msg


class RotaryTable(NamedTuple):
    cos: Float[Array, "max_len d//2"]  # d is bound by the argument after it


@treespec.jit
def rotate(table: RotaryTable, x: Float[Array, "t d"]) -> jax.Array:
    return x[:, : x.shape[1] // 2] * table.cos[: x.shape[0]]


def test_an_axis_of_an_expression_is_read_after_the_names_it_uses_are_bound() -> None:
    # selective-attention's RoPE: jaxtyping reads `d//2` only once `d` is
    # bound, here by `x`, checked after the table.
    assert rotate(RotaryTable(jnp.ones((16, 4))), jnp.ones((5, 8))).shape == (5, 4)
    (msg,) = _messages(lambda: rotate(RotaryTable(jnp.ones((16, 3))), jnp.ones((5, 8))))
    assert msg == (
        "argument table, at table.cos: expected Float[Array, 'max_len d//2'] "
        "with d=8 bound by x, got float32[16,3]"
    ), msg


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class GatedUnit:
    value: Float[Array, "d 2*h"]  # h is bound by the field after it
    gate: Float[Array, "h 2*h"]


@treespec.jit
def gated(params: GatedUnit, x: Float[Array, "b d"]) -> Float[Array, "b 2*h"]:
    return x @ params.value


def test_an_axis_of_an_expression_waits_for_a_leaf_that_has_one_too() -> None:
    # Blind corpus: TabNet's GLU, whose `"h 2*h"` binds the `h` that the
    # field before it reads. Both have an expression: the one whose names
    # are bound is read first, wherever it comes.
    params = GatedUnit(jnp.ones((3, 8)), jnp.ones((4, 8)))
    assert gated(params, jnp.ones((2, 3))).shape == (2, 8)
    wrong = GatedUnit(jnp.ones((3, 6)), jnp.ones((4, 8)))
    (msg,) = _messages(lambda: gated(wrong, jnp.ones((2, 3))))
    assert msg == (
        "argument params, at params.value: expected Float[Array, 'd 2*h'] "
        "with d=3 bound by x, h=4 bound by params.gate, got float32[3,6]"
    ), msg


def test_an_axis_of_an_expression_no_leaf_binds_is_a_spec_error_naming_it() -> None:
    @treespec.jit
    def half(table: Float[Array, "max_len k//2"]) -> jax.Array:
        return table

    with pytest.raises(treespec.SpecError) as info:
        half(jnp.ones((16, 4)))
    message = str(info.value)
    assert message.startswith("argument table, at table: Float[Array, 'max_len k//2'] ")
    assert "'k//2' names a size no other leaf of the call binds" in message


def test_with_no_minority_every_binding_is_listed() -> None:
    @treespec.checked
    def f(
        a: Float[Array, "n"],
        b: Float[Array, "n"],
        c: Float[Array, "n"],
        d: Float[Array, "n"],
    ) -> None:
        return None

    msgs = _messages(lambda: f(jnp.ones(3), jnp.ones(4), jnp.ones(3), jnp.ones(4)))
    assert [m.split(":")[0] for m in msgs] == ["argument b, at b", "argument d, at d"]
    assert all("n=3 from a, c; n=4 from b, d" in m for m in msgs), msgs


def test_a_leaf_failing_for_another_reason_names_the_first_binder() -> None:
    @treespec.checked
    def f(x: Float[Array, "n"], y: Float[Array, "n"], z: Float[Array, "n"]) -> None:
        return None

    # z disagrees on no dimension (its dtype, then its rank, is wrong): its
    # message says who bound n, and that is x, the first of the two.
    (msg,) = _messages(lambda: f(jnp.ones(3), jnp.ones(3), jnp.ones(3, jnp.int32)))
    assert msg == (
        "argument z, at z: expected Float[Array, 'n'] with n=3 bound by x, got int32[3]"
    )
    (msg,) = _messages(lambda: f(jnp.ones(3), jnp.ones(3), jnp.ones((3, 3))))
    assert "with n=3 bound by x, got float32[3,3]" in msg, msg
    # A leaf that disagrees on n is blamed with every leaf that bound it.
    (msg,) = _messages(lambda: f(jnp.ones(3), jnp.ones(3), jnp.ones(4)))
    assert "with n=3 bound by x, y, got float32[4]" in msg, msg


def test_a_broadcastable_dimension_binds_its_name() -> None:
    @treespec.checked
    def f(x: Float[Array, "#n"], y: Float[Array, "n"]) -> None:
        return None

    f(jnp.ones(1), jnp.ones(4))  # #n of size 1 binds nothing
    (msg,) = _messages(lambda: f(jnp.ones(3), jnp.ones(4)))
    assert msg == (
        "argument y, at y: expected Float[Array, 'n'] with n=3 bound by x, "
        "got float32[4]"
    )


def test_dtype_mismatch() -> None:
    (msg,) = _messages(lambda: step(X.astype(jnp.int32), W, GOOD))
    assert msg == "argument x, at x: expected Float[Array, 'b n'], got int32[32,7]"


def test_return_value_is_checked_with_the_same_dims() -> None:
    @treespec.jit
    def bad(x: Float[Array, "b n"], w: Float[Array, "n m"]) -> Float[Array, "b m"]:
        return (x @ w).T

    (msg,) = _messages(lambda: bad(X, W))
    assert msg.startswith(
        "the return value, at return: expected Float[Array, 'b m'] with "
    )
    assert "b=32 bound by x" in msg and "m=4 bound by w" in msg
    assert msg.endswith("got float32[4,32]")


def test_a_wrong_return_under_a_size_expression_is_a_validation_error() -> None:
    # A 2x2 pool annotated `h//2`: a wrong return is the user's ValidationError
    # naming the return and the sizes, not jaxtyping's AnnotationError (which
    # a size expression raised when the leaf was checked alone).
    @treespec.jit
    def pool(x: Float[Array, "c h w"]) -> Float[Array, "c h//2 w//2"]:
        return x[:, ::2, ::2][:, :, :-1]

    (msg,) = _messages(lambda: pool(jnp.ones((3, 8, 8))))
    assert msg.startswith("the return value, at return: expected Float[Array, 'c h//2")
    assert "h=8 bound by x" in msg and msg.endswith("got float32[3,4,3]")


def test_variadic_fixed_and_broadcast_dims() -> None:
    @treespec.checked
    def f(
        x: Float[Array, "*batch 3"],
        y: Float[Array, "*batch #c"],
        z: Float[Array, "... c"],
    ) -> None:
        return None

    f(jnp.ones((2, 5, 3)), jnp.ones((2, 5, 1)), jnp.ones((9, 1)))
    f(jnp.ones((2, 5, 3)), jnp.ones((2, 5, 4)), jnp.ones((4,)))
    msgs = _messages(lambda: f(jnp.ones((2, 5, 4)), jnp.ones((2, 6, 1)), jnp.ones(1)))
    assert msgs[0].startswith("argument x, at x: expected Float[Array, '*batch 3']")
    (msg,) = _messages(lambda: f(jnp.ones((2, 3)), jnp.ones((4, 1)), jnp.ones(1)))
    assert msg.startswith("argument y, at y: expected Float[Array, '*batch #c']")


def test_pytree_of_arrays() -> None:
    @treespec.checked
    def f(params: PyTree[Float[Array, "n"]]) -> None:
        return None

    f({"a": jnp.ones(3), "b": [jnp.ones(3)]})
    (msg,) = _messages(lambda: f({"a": jnp.ones(3), "b": [jnp.ones(4)]}))
    assert msg.startswith(
        "argument params, at params['b'][0]: expected Float[Array, 'n'] with n=3"
    )


def test_structure_problems_all_reported_together() -> None:
    class Pair(NamedTuple):
        a: Dynamic[jax.Array]
        b: Static[int]

    @treespec.jit
    def f(cfg: Config, pair: Pair, t: tuple[jax.Array, jax.Array]) -> Any:
        return t[0]

    msgs = _messages(
        lambda: f(
            {"n_layers": 1, "scale": 1.0, "bogus": 2}, (jnp.ones(1), 2), (jnp.ones(1),)
        )
    )
    assert len(msgs) == 4
    assert "at cfg['activation']: expected required key 'activation'" in msgs[0]
    assert "at cfg['bogus']" in msgs[1] and "unexpected key 'bogus'" in msgs[1]
    assert "at pair: expected Pair, got tuple" in msgs[2]
    assert (
        "at t: expected tuple[Array, Array] (length 2), got tuple of length 1"
        in msgs[3]
    )


class NS(TypedDict):
    n: Static[int]
    s: Static[str]


def test_every_problem_of_a_call_is_reported_at_once() -> None:
    @treespec.jit
    def f(x: Dynamic[jax.Array], cfg: NS, y: jax.Array) -> Any:
        return x

    for call in (
        lambda: f("abc", {"n": "2"}, jnp.ones(2)),  # positional, x handed whole
        lambda: f("abc", cfg={"n": "2"}, y=jnp.ones(2)),  # keywords
    ):
        with pytest.raises(ValidationError) as info:
            call()
        assert str(info.value).splitlines()[0].endswith("f: 3 problems in 2 arguments")
        x, *cfg = info.value.issues
        assert (x.loc, x.got) == ("argument x, at x", "str 'abc'")
        assert x.expected.startswith("an array or Python scalar, since it is traced")
        assert [i.format() for i in cfg] == [
            "argument cfg, at cfg['s']: expected required key 's' of NS, "
            "got nothing (the key is missing)",
            "argument cfg, at cfg['n']: expected Static[int], got str '2'",
        ]


def test_a_leaf_jax_refuses_does_not_hide_the_other_problems() -> None:
    @treespec.jit
    def f(x: Dynamic[jax.Array], cfg: NS) -> Any:
        return x

    f(jnp.ones(2), {"n": 1, "s": "a"})  # the plan of this structure exists
    msgs = _messages(lambda: f("abc", {"n": "2", "s": "a"}))
    assert len(msgs) == 2
    assert msgs[0].startswith("argument x, at x: expected an array or Python scalar")
    assert msgs[1] == "argument cfg, at cfg['n']: expected Static[int], got str '2'"


def _traced_n(x: Dynamic[jax.Array], n: Dynamic[jax.Array]) -> jax.Array:
    return (x * n).sum()


@pytest.mark.parametrize(
    "call",
    [
        lambda x, n: treespec.jit(_traced_n)(x, n),
        lambda x, n: treespec.jit(_traced_n).trace(x, n),
        lambda x, n: treespec.jit(_traced_n).lower(x, n=n),
        lambda x, n: treespec.jit(_traced_n).eval_shape(x, n),
        lambda x, n: treespec.checkpoint(_traced_n)(x, n),
        lambda x, n: treespec.eval_shape(_traced_n, x, n),
        lambda x, n: treespec.grad(_traced_n)(x, n),
        lambda x, n: treespec.jit(treespec.grad(_traced_n))(x, n),
    ],
    ids=[
        "jit",
        "trace",
        "lower",
        "jit.eval_shape",
        "checkpoint",
        "eval_shape",
        "grad",
        "jit(grad)",
    ],
)
def test_a_leaf_jax_refuses_is_named_under_every_transform_and_stage(
    call: Any,
) -> None:
    # JAX's own refusal of a str at a traced leaf names no parameter of the
    # user's ("Error interpreting argument to <function ...>", or "Argument
    # 'abc' of type <class 'str'> is not a valid JAX type"): every way in
    # raises the ValidationError that jit's call raises.
    with pytest.raises(ValidationError) as info:
        call(jnp.ones(3), "abc")
    (issue,) = info.value.issues
    assert (issue.loc, issue.got) == ("argument n, at n", "str 'abc'")
    assert str(info.value).startswith("_traced_n: 1 problem in argument n")


def test_numpy_integer_at_a_static_int_says_what_came_and_hints_int() -> None:
    @treespec.jit
    def f(x: jax.Array, n: Static[int]) -> Any:
        return x * n

    with pytest.raises(ValidationError) as info:
        f(jnp.ones(2), np.int64(3))
    (issue,) = info.value.issues
    assert (issue.loc, issue.expected, issue.got) == (
        "argument n, at n",
        "Static[int]",
        "numpy.int64 3",
    )
    assert issue.hint.startswith(
        "a NumPy scalar is not a Python int: pass int(...) to hold it static"
    )


def test_list_at_a_dynamic_array_shows_the_values_not_tracers() -> None:
    @treespec.jit
    def f(x: Dynamic[jax.Array]) -> Any:
        return x

    (msg,) = _messages(lambda: f([1, 2]))
    assert msg == "argument x, at x: expected Dynamic[Array], got list [1, 2]"
    # Once the structure is known the check runs while tracing; the call is
    # then diagnosed again with the values the caller passed, never with
    # `JitTracer(...)`s.
    f(jnp.ones(2))
    (msg,) = _messages(lambda: f([1, 2]))
    assert msg == "argument x, at x: expected Dynamic[Array], got list [1, 2]"


def test_non_frozen_dataclass_under_static_hints_frozen() -> None:
    @dataclasses.dataclass
    class Opts:
        depth: int

    @treespec.jit
    def f(x: jax.Array, opts: Static[Opts]) -> Any:
        return x

    with pytest.raises(ValidationError) as info:
        f(jnp.ones(2), Opts(2))
    (issue,) = info.value.issues
    assert issue.loc == "argument opts, at opts"
    assert issue.expected.startswith("a hashable value, since it is static")
    assert issue.hint.startswith("Opts is a dataclass that is not frozen")
    assert "@dataclasses.dataclass(frozen=True)" in issue.hint


def test_total_false_allows_missing_keys() -> None:
    class Opt(TypedDict, total=False):
        lr: Dynamic[float]
        steps: Static[int]

    assert treespec.validate({"steps": 3}, Opt) == {"steps": 3}


def test_scalar_annotations_accept_what_stands_for_them() -> None:
    @treespec.checked
    def f(
        a: Dynamic[float], b: Dynamic[int], c: Dynamic[bool], d: Dynamic[complex]
    ) -> None:
        return None

    f(1.0, 2, True, 1j)
    f(np.float32(1), np.int64(2), np.bool_(True), 1.0)
    f(jnp.float32(1), jnp.array(2), jnp.array(True), jnp.complex64(1))
    f(1, True, True, 2)  # the numeric tower: int is a float, bool an int
    jax.jit(f)(1.0, 2, True, 1j)  # tracers, judged by dtype and shape
    msgs = _messages(lambda: f(jnp.ones(2), 2.5, 1, "x"))
    assert msgs[0].startswith(
        "argument a, at a: expected Dynamic[float] (a Python scalar"
    )
    assert msgs[0].endswith("got float32[2]")
    assert "at b: expected Dynamic[int]" in msgs[1]
    assert "at c: expected Dynamic[bool]" in msgs[2]
    assert "at d: expected Dynamic[complex]" in msgs[3]


def test_checked_inside_scan_vmap_and_jit() -> None:
    @treespec.checked
    def body(c: Float[Array, "n"], x: Float[Array, "n"]) -> Float[Array, "n"]:
        return c + x

    xs = jnp.ones((5, 3))
    final, _ = jax.lax.scan(lambda c, x: (body(c, x), None), jnp.zeros(3), xs)
    np.testing.assert_allclose(final, 5.0)
    np.testing.assert_allclose(jax.vmap(body)(xs, xs), 2.0)
    with pytest.raises(
        ValidationError, match="with n=3 bound by c, got float32\\[4\\]"
    ):
        jax.jit(body)(jnp.ones(3), jnp.ones(4))


def test_decorator_order_does_not_matter() -> None:
    def f(x: Float[Array, "n"], k: Static[int]) -> Float[Array, "n"]:
        return x * k

    for g in (treespec.checked(treespec.jit(f)), treespec.jit(treespec.checked(f))):
        np.testing.assert_allclose(g(jnp.ones(3), 2), 2.0)
        with pytest.raises(
            ValidationError, match=r"at k: expected Static\[int\], got str"
        ):
            g(jnp.ones(3), "2")
        with pytest.raises(
            ValidationError, match=r"at x: expected Float\[Array, 'n'\]"
        ):
            g(jnp.ones((3, 3)), 2)


def test_validate_function() -> None:
    value = {"n": 3, "x": jnp.ones((2, 2))}
    assert treespec.validate(value, dict[str, Any]) is value
    with pytest.raises(ValidationError) as info:
        treespec.validate({"n": "3", "m": 4.5}, dict[str, Static[int]])
    assert [i.loc for i in info.value.issues] == [
        "argument value, at value['m']",
        "argument value, at value['n']",
    ]
    treespec.validate(
        (jnp.ones((2, 3)), jnp.ones((3, 4))),
        tuple[Float[Array, "b n"], Float[Array, "n m"]],
    )
    with pytest.raises(ValidationError, match="n=3 bound by value\\[0\\]"):
        treespec.validate(
            (jnp.ones((2, 3)), jnp.ones((4, 4))),
            tuple[Float[Array, "b n"], Float[Array, "n m"]],
        )


def test_message_anatomy() -> None:
    with pytest.raises(ValidationError) as info:
        step(X, W, {**GOOD, "n_layers": "3"})
    err = info.value
    assert isinstance(err, TypeError)
    assert str(err).splitlines()[0].endswith("step: 1 problem in argument cfg")
    (issue,) = err.issues
    assert (issue.loc, issue.expected, issue.got) == (
        "argument cfg, at cfg['n_layers']",
        "Static[int]",
        "str '3'",
    )
    # Printed alone: no other exception (a JAX one) chained ahead of it.
    printed = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    assert printed.count("Traceback (most recent call last)") == 1, printed
    assert "During handling" not in printed and "direct cause" not in printed
    assert str(err) in printed

    # A leaf JAX itself refuses (an unhashable static): treespec's error names
    # the leaf; JAX's stays reachable as __context__ but is not printed first.
    @treespec.jit
    def g(w: Static[Any]) -> Any:
        return w

    with pytest.raises(ValidationError) as info:
        g(np.ones(3))
    err = info.value
    assert err.__cause__ is None and err.__suppress_context__
    printed = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    assert printed.count("Traceback (most recent call last)") == 1, printed
    assert "argument w, at w" in printed


def test_message_head_counts_problems_and_where_they_are() -> None:
    with pytest.raises(ValidationError) as info:
        step(X, jnp.ones((8, 4)), {**GOOD, "n_layers": "3", "activation": "tanh"})
    assert str(info.value).splitlines()[0] == "step: 3 problems in 2 arguments"

    @treespec.jit
    def bad(x: Float[Array, "b n"]) -> Float[Array, "n b"]:
        return x

    with pytest.raises(ValidationError) as info:
        bad(X)
    head = str(info.value).splitlines()[0]
    assert head.endswith("bad: 1 problem in the return value")
    assert "argument" not in head


def test_validation_runs_once_per_cache_miss(spy: Any) -> None:
    import treespec._runtime.checking.validate as validate

    calls = spy(validate, "_check_indexed")  # every leaf check, arguments and return

    @treespec.jit
    def f(x: Float[Array, "n"], cfg: Config) -> jax.Array:
        return x * cfg["scale"]

    f(jnp.ones(3), GOOD)
    per_trace = len(calls)  # the arguments, then the return value
    assert per_trace > 0
    for scale in (0.1, 0.2, 0.3):  # cache hits: no validation work at all
        f(jnp.ones(3), {**GOOD, "scale": scale})
    assert len(calls) == per_trace
    f(jnp.ones(4), GOOD)  # new shape: new trace, checked again
    f(jnp.ones(4), {**GOOD, "n_layers": 5})  # new static value: checked again
    assert len(calls) == 3 * per_trace


def test_switches(monkeypatch: pytest.MonkeyPatch) -> None:
    def body(x: Float[Array, "n"], k: Static[int]) -> Any:
        return x * 2, k

    # Validated, the same call is refused; validate=False runs it as written.
    with pytest.raises(ValidationError):
        treespec.jit(body)(jnp.ones((2, 2)), "not an int")  # type: ignore[arg-type]
    loose = partial(treespec.jit, validate=False)(body)
    out, k = loose(jnp.ones((2, 2)), "not an int")  # type: ignore[arg-type]
    assert out.shape == (2, 2) and k == "not an int"
    np.testing.assert_allclose(out, 2.0)

    monkeypatch.setenv("TREESPEC_VALIDATE", "0")

    @treespec.jit
    def off(x: Float[Array, "n"]) -> Any:
        return x

    assert off(jnp.ones((2, 2))).shape == (2, 2)
    assert treespec.validate("text", Static[int]) == "text"

    @treespec.checked
    def plain(x: Static[int]) -> int:
        return x

    assert plain("s") == "s"  # type: ignore[arg-type]


def test_jaxtyping_config_is_respected(monkeypatch: pytest.MonkeyPatch) -> None:
    import jaxtyping

    monkeypatch.setattr(jaxtyping.config, "jaxtyping_disable", True)

    @treespec.checked
    def f(x: Int[Array, "n"], k: Static[int]) -> None:
        return None

    f(jnp.ones((2, 2)), 1)  # shapes and dtypes: jaxtyping is off
    with pytest.raises(ValidationError):
        f(jnp.ones(2), "1")  # static types are treespec's own


def test_union_leaves_accept_any_member() -> None:
    @treespec.checked
    def f(
        a: Static[int | str], b: Static[int] | Static[str], c: Dynamic[float] | None
    ) -> None:
        return None

    f(1, "b", 0.5)
    f("a", 2, None)
    (msg,) = _messages(lambda: f(1.5, "b", None))
    assert msg == "argument a, at a: expected Static[int | str], got float 1.5"


def test_validate_false_skips_the_return_check() -> None:
    def body(x: Float[Array, "n"]) -> Float[Array, "n n"]:
        return x

    with pytest.raises(ValidationError, match="return"):
        treespec.jit(body)(jnp.ones(3))
    loose = partial(treespec.jit, validate=False)(body)
    np.testing.assert_allclose(loose(jnp.ones(3)), 1.0)


def test_a_container_no_union_member_fits_is_named() -> None:
    @treespec.jit
    def f(x: int | list[int], y: jax.Array) -> jax.Array:
        return y

    with pytest.raises(ValidationError, match=r"argument x.*dict"):
        f({"a": 1}, jnp.ones(1))


def test_the_return_value_is_blamed_against_the_arguments_size() -> None:
    # Three return leaves agree on n=4, the argument says n=3: the argument's
    # size (checked first, fixed) is the one each of them, outnumbering it,
    # is blamed against.
    @treespec.jit
    def f(
        x: Float[Array, "n"],
    ) -> tuple[Float[Array, "n"], Float[Array, "n"], Float[Array, "n"]]:
        y = jnp.ones(4)
        return y, y, y

    with pytest.raises(ValidationError) as info:
        f(jnp.ones(3))
    message = str(info.value)
    assert "argument x" not in message
    for i in range(3):
        assert f"return[{i}]" in message
    assert "n=3 bound by x" in message
    msgs = _messages(lambda: f(jnp.ones(3)))
    assert len(msgs) == 3, msgs
    for i, msg in enumerate(msgs):
        assert msg.startswith(f"the return value, at return[{i}]"), msg
        assert "with n=3 bound by x, got float32[4]" in msg, msg


# -- what a mutation audit found untested ------------------------------------


def test_a_parameter_annotated_none_refuses_any_other_value() -> None:
    def f(x: jax.Array, flag: None) -> jax.Array:
        return x

    np.testing.assert_array_equal(treespec.jit(f)(jnp.ones(2), None), jnp.ones(2))
    for value in (3, "on", jnp.ones(1)):
        with pytest.raises(ValidationError) as info:
            treespec.jit(f)(jnp.ones(2), value)
        assert [i.loc for i in info.value.issues] == ["argument flag, at flag"]
        assert "expected None" in str(info.value)


def test_instances_of_an_annotated_container_class_are_accepted() -> None:
    import collections

    def f(x: collections.OrderedDict[str, jax.Array]) -> jax.Array:
        return x["a"]

    given = collections.OrderedDict(a=jnp.ones(2))
    np.testing.assert_array_equal(treespec.jit(f)(given), jnp.ones(2))
    with pytest.raises(
        ValidationError, match=r"expected OrderedDict\[str, Array\], got dict"
    ):
        treespec.jit(f)({"a": jnp.ones(2)})


def test_an_arguments_size_wins_over_most_of_the_return_value() -> None:
    def f(
        x: Float[Array, " n"],
    ) -> tuple[Float[Array, " n"], Float[Array, " n"], Float[Array, " n"]]:
        y = jnp.ones(4)
        return y, y, y  # three leaves agree with each other, not with x

    with pytest.raises(ValidationError) as info:
        treespec.jit(f)(jnp.ones(3))
    locs = [issue.loc for issue in info.value.issues]
    assert locs == [f"the return value, at return[{i}]" for i in range(3)], locs
    assert "n=3 bound by x" in str(info.value)


@dataclasses.dataclass(frozen=True)
class _Layer:
    w: Float[Array, "o i"]
    b: Float[Array, " o"]


jax.tree_util.register_dataclass(_Layer, data_fields=["w", "b"], meta_fields=[])


def test_a_returned_instance_binds_its_own_names() -> None:
    # Two layers returned: each binds `o` and `i` in a scope of its own, as
    # jaxtyping checks each instance; inside one instance the names bind.
    def make(x: Float[Array, " n"]) -> tuple[_Layer, _Layer]:
        return _Layer(jnp.ones((3, 2)), jnp.ones(3)), _Layer(
            jnp.ones((5, 3)), jnp.ones(5)
        )

    first, second = treespec.jit(make)(jnp.ones(7))
    assert first.w.shape == (3, 2) and second.w.shape == (5, 3)

    def wrong(x: Float[Array, " n"]) -> tuple[_Layer, _Layer]:
        return _Layer(jnp.ones((3, 2)), jnp.ones(3)), _Layer(
            jnp.ones((5, 3)), jnp.ones(4)
        )

    blamed = r"the return value, at return\[1\]\.b: .*o=5 bound by return\[1\]\.w"
    with pytest.raises(ValidationError, match=blamed):
        treespec.jit(wrong)(jnp.ones(7))
