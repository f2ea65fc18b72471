"""The resolution rule (`treespec._runtime.planning.resolve`): flag, then
nearest marker, then default.

Every route obeys the same rule; these tests pin the cases where it is easy to
get wrong: markers around unions, and flags over annotations with markers.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any, NamedTuple, Optional, TypedDict, Union

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxtyping import PyTree

import treespec
from treespec import Dynamic, SpecError, Static, ValidationError

from .conftest import resolve


def test_a_marker_around_a_union_covers_container_members() -> None:
    def f(x: Static[Optional[list[int]]]) -> None: ...

    # The union's marker wins over the default, for a container value too.
    assert resolve(f, [1, 2], _default="dynamic") == {
        "x[0]": "static",
        "x[1]": "static",
    }


class Cfg(TypedDict):
    bias: Dynamic[Optional[tuple[float, float]]]
    n: Static[int]


def test_dynamic_optional_tuple_traces_its_floats(counter: dict[str, int]) -> None:
    @treespec.jit
    def f(x: jax.Array, cfg: Cfg) -> jax.Array:
        counter["n"] += 1
        bias = cfg["bias"]
        if bias is None:
            return x
        assert all(isinstance(b, jax.core.Tracer) for b in bias)
        return x + bias[0] * bias[1]

    np.testing.assert_allclose(f(jnp.ones(1), {"bias": (1.0, 2.0), "n": 1}), 3.0)
    np.testing.assert_allclose(f(jnp.ones(1), {"bias": (2.0, 2.0), "n": 1}), 5.0)
    assert counter["n"] == 1  # new float values: no retrace
    np.testing.assert_allclose(f(jnp.ones(1), {"bias": None, "n": 1}), 1.0)
    assert resolve(f.__wrapped__, jnp.ones(1), {"bias": (1.0, 2.0), "n": 1}) == {
        "x": "dynamic",
        "cfg['bias'][0]": "dynamic",
        "cfg['bias'][1]": "dynamic",
        "cfg['n']": "static",
    }


@pytest.mark.parametrize(
    ("annotation", "member"),
    [
        (Static[Optional[Dynamic[int]]], "Dynamic[int]"),
        (Dynamic[Optional[Union[Static[int], Static[float]]]], "Static[int]"),
    ],
)
def test_a_member_marked_otherwise_inside_a_marked_union_is_refused(
    annotation: object, member: str
) -> None:
    def f(n, x):  # type: ignore[no-untyped-def]
        return x

    f.__annotations__ = {"n": annotation}
    with pytest.raises(SpecError) as info:
        treespec.jit(f)
    msg = str(info.value)
    assert "parameter 'n'" in msg and member in msg
    assert "a marker directly inside another" in msg


def test_an_unmarked_union_whose_members_disagree_is_refused_inside_a_marker() -> None:
    def f(n: Static[Union[int, Dynamic[float]]]) -> None: ...

    with pytest.raises(SpecError, match=r"Dynamic\[float\] \(Dynamic\)"):
        treespec.jit(f)


def test_a_member_marked_alike_inside_a_marked_union_is_fine() -> None:
    @treespec.jit
    def f(n: Static[Optional[Static[int]]], x: jax.Array) -> jax.Array:
        return x * (n or 1)

    np.testing.assert_allclose(f(3, jnp.ones(1)), 3.0)
    np.testing.assert_allclose(f(None, jnp.ones(1)), 1.0)
    assert f.trace_count == 2


@pytest.mark.parametrize("flags", [False, {"t": False}, [False]])
def test_a_false_flag_beats_static_markers_in_split_and_validation(
    flags: object,
) -> None:
    def total(t: list[Static[int]]) -> jax.Array:
        assert all(isinstance(v, jax.core.Tracer) for v in t)
        return sum(t)  # type: ignore[return-value]

    f = treespec.jit(total, static_flags=flags)
    assert int(f([jnp.int32(1), jnp.int32(2)])) == 3
    assert int(f([3, 4])) == 7  # Python ints traced too: the flag says so
    assert f.trace_count == 2  # int32 arrays, then weakly typed ints


def test_a_false_flag_inside_a_prefix_tree_beats_the_field_marker() -> None:
    class Pair(TypedDict):
        a: Static[int]
        b: jax.Array

    @partial(treespec.jit, static_flags=[{"a": False, "b": None}])
    def f(p: Pair) -> jax.Array:
        assert isinstance(p["a"], jax.core.Tracer)
        return p["a"] * p["b"]

    np.testing.assert_allclose(f({"a": 2, "b": jnp.ones(1)}), 2.0)
    np.testing.assert_allclose(f({"a": 5, "b": jnp.ones(1)}), 5.0)
    assert f.trace_count == 1


def test_markers_inside_abstract_and_collections_containers_are_honoured(
    counter: dict[str, int],
) -> None:
    import collections
    from collections.abc import Mapping, Sequence

    @treespec.jit
    def f(
        cfg: Mapping[str, Dynamic[float]],
        sizes: Sequence[Static[int]],
        table: collections.OrderedDict[str, Dynamic[float]],
        counts: collections.defaultdict[str, Static[int]],
    ) -> jax.Array:
        counter["n"] += 1
        assert isinstance(cfg["a"], jax.core.Tracer)
        assert all(type(s) is int for s in sizes)
        assert isinstance(table["t"], jax.core.Tracer)
        assert type(counts["c"]) is int
        return cfg["a"] * sum(sizes) + table["t"] * counts["c"]

    def call(a: float, t: float) -> float:
        table = collections.OrderedDict(t=t)
        counts = collections.defaultdict(int, c=2)
        return float(f({"a": a}, (1, 2), table, counts))

    assert call(1.0, 1.0) == 5.0
    assert call(2.0, 3.0) == 12.0  # new Python floats: traced, no retrace
    assert counter["n"] == 1
    assert resolve(
        f.__wrapped__,
        {"a": 1.0},
        [3],
        collections.OrderedDict(t=1.0),
        collections.defaultdict(int, c=2),
    ) == {
        "cfg['a']": "dynamic",
        "sizes[0]": "static",
        "table['t']": "dynamic",
        "counts['c']": "static",
    }


def test_a_value_that_is_not_the_annotated_mapping_is_named() -> None:
    from collections.abc import Mapping

    @treespec.jit
    def f(cfg: Mapping[str, Dynamic[float]]) -> jax.Array:
        return cfg[0]  # type: ignore[index]

    with pytest.raises(treespec.ValidationError, match=r"argument cfg.*Mapping"):
        f([1.0])


def test_a_recursive_alias_is_followed_without_recursing_forever() -> None:
    from typing import Union as U

    tree_alias = U[jax.Array, list["TreeAlias"]]
    module = {"TreeAlias": tree_alias, "jax": jax, "Dynamic": Dynamic}

    def f(t):  # type: ignore[no-untyped-def]
        return t

    f.__annotations__ = {"t": Dynamic[tree_alias]}
    f.__globals__.update(module)
    jitted = treespec.jit(f)
    out = jitted([jnp.ones(1), [jnp.ones(2)]])
    np.testing.assert_allclose(out[1][0], 1.0)


@treespec.dataclass
class _Node:
    w: Dynamic[float]
    tag: Static[str]
    left: "_Node | None"


def test_a_field_spelled_like_the_enclosing_annotation_keeps_its_markers() -> None:
    @treespec.jit
    def depth_sum(t: "_Node | None") -> jax.Array:
        total = jnp.zeros(())
        while t is not None:
            assert isinstance(t.w, jax.core.Tracer) and type(t.tag) is str
            total = total + t.w
            t = t.left
        return total

    tree = _Node(1.0, "a", _Node(2.0, "b", None))
    np.testing.assert_allclose(depth_sum(tree), 3.0)
    np.testing.assert_allclose(depth_sum(_Node(5.0, "a", _Node(2.0, "b", None))), 7.0)
    assert depth_sum.trace_count == 1  # the nested w is traced, not static


@pytest.mark.parametrize(
    "annotation",
    [
        "jax.Array",
        "np.ndarray",
        "np.ndarray[Any, np.dtype[np.float32]]",
        "Float[Array, '']",
        "ArrayLike",
        "Optional[jax.Array]",
    ],
)
def test_an_unmarked_array_annotation_traces_whatever_comes(
    annotation: str, counter: dict[str, int]
) -> None:
    from typing import Any  # noqa: F401 (the annotations are evaluated here)

    from jax.typing import ArrayLike  # noqa: F401
    from jaxtyping import Array, Float  # noqa: F401

    def scale(x, k):  # type: ignore[no-untyped-def]
        counter["n"] += 1
        assert isinstance(k, jax.core.Tracer)
        return x * k

    scale.__annotations__ = {"k": eval(annotation)}
    f = treespec.jit(scale)
    for k in (2.0, 3.0, 4.0):  # Python floats at an array annotation: traced
        np.testing.assert_allclose(f(jnp.ones(2), k), k)
    assert counter["n"] == 1
    assert resolve(scale, jnp.ones(2), 2.0)["k"] == "dynamic"


def test_scalar_annotations_and_unannotated_scalars_stay_static() -> None:
    def f(a: float, b: int | float, c):  # type: ignore[no-untyped-def]
        return a

    assert resolve(f, 1.0, 2, 3.0) == {"a": "static", "b": "static", "c": "static"}


def test_a_dict_of_arrays_is_dynamic_as_a_whole(counter: dict[str, int]) -> None:
    @treespec.jit
    def f(params: dict[str, jax.Array], n: Static[int]) -> jax.Array:
        counter["n"] += 1
        return params["w"] * n + params["b"]

    assert f._splitter.positional.whole_idx == (0,)  # handed to JAX unflattened
    np.testing.assert_allclose(f({"w": jnp.ones(2), "b": 1.0}, 2), 3.0)
    np.testing.assert_allclose(f({"w": jnp.ones(2), "b": 2.0}, 2), 4.0)
    assert counter["n"] == 1  # the Python float there is traced


def test_default_static_still_holds_array_annotated_scalars_static() -> None:
    def f(x: jax.Array):  # type: ignore[no-untyped-def]
        return x

    assert resolve(f, 2.0, _default="static") == {"x": "static"}
    assert resolve(f, 2.0, _default="dynamic") == {"x": "dynamic"}


def test_a_sequence_flag_for_var_positional_covers_each_extra_argument() -> None:
    def f(*xs: int) -> None: ...

    flags = {"xs": [True, False]}
    assert resolve(f, 1, 2, _flags=flags) == {"xs[0]": "static", "xs[1]": "dynamic"}
    with pytest.raises(SpecError, match=r"has 2 entries but the call passes more \*xs"):
        resolve(f, 1, 2, 3, _flags=flags)


def test_a_bool_flag_for_var_keyword_covers_every_keyword() -> None:
    # An int is static by default: False makes every keyword of **kw traced.
    def f(**kw: int) -> None: ...

    assert resolve(f, a=1, b=2, _flags={"kw": False}) == {
        "kw['a']": "dynamic",
        "kw['b']": "dynamic",
    }


def test_a_container_in_an_optional_follows_its_member() -> None:
    # The tuple member's markers apply to a tuple (an int is static by default).
    def f(x: tuple[Dynamic[int], int] | None) -> None: ...

    assert resolve(f, (1, 2)) == {"x[0]": "dynamic", "x[1]": "static"}
    assert resolve(f, None) == {}


def test_an_array_argument_given_a_container_or_none_names_what_was_expected() -> None:
    @treespec.jit
    def f(x: jax.Array) -> jax.Array:
        return x

    with pytest.raises(
        treespec.ValidationError,
        match=r"\.f: 1 problem in argument x\n"
        r"  argument x, at x: expected Array, got tuple \(float32\[1\], float32\[1\]\)",
    ):
        f((jnp.ones(1), jnp.ones(1)))
    with pytest.raises(
        treespec.ValidationError, match=r"at x: expected Array, got NoneType None"
    ):
        f(None)

    # An array annotation that is no class (a parametrised ndarray) too.
    @treespec.jit
    def g(x: np.ndarray[Any, np.dtype[np.float32]]) -> jax.Array:
        return x

    with pytest.raises(
        treespec.ValidationError,
        match=r"argument x, at x: expected ndarray\[Any, dtype\[float32\]\], got tuple",
    ):
        g((np.ones(1, np.float32),))


class _Point(NamedTuple):
    x: Dynamic[float]
    label: Static[str]


def test_a_namedtuple_and_a_plain_tuple_are_not_taken_for_one_another() -> None:
    @treespec.jit
    def by_class(p: _Point) -> jax.Array:
        return jnp.asarray(p.x)

    @treespec.jit
    def by_items(p: tuple[Dynamic[float], Static[str]]) -> jax.Array:
        return jnp.asarray(p[0])

    np.testing.assert_allclose(by_class(_Point(1.0, "a")), 1.0)
    np.testing.assert_allclose(by_items((2.0, "a")), 2.0)
    with pytest.raises(
        treespec.ValidationError,
        match=r"argument p, at p: expected _Point, got tuple \(1\.0, 'a'\)",
    ):
        by_class((1.0, "a"))
    # A NamedTuple's children are its fields, not items: the items' markers
    # would not reach them.
    with pytest.raises(
        treespec.ValidationError,
        match=r"argument p, at p: expected tuple\[Dynamic\[float\], Static\[str\]\], "
        r"got _Point",
    ):
        by_items(_Point(1.0, "a"))


def test_a_pytree_of_a_union_takes_the_marker_its_members_share(
    counter: dict[str, int],
) -> None:
    # An int is static by default: only the members' Dynamic traces these.
    @treespec.jit
    def total(t: PyTree[Dynamic[int] | Dynamic[float]]) -> jax.Array:
        counter["n"] += 1
        assert all(isinstance(v, jax.core.Tracer) for v in jax.tree_util.tree_leaves(t))
        return sum(jax.tree_util.tree_leaves(t))  # type: ignore[return-value]

    assert float(total({"a": 1, "b": [2, 3.0]})) == 6.0
    assert float(total({"a": 4, "b": [5, 6.0]})) == 15.0
    assert counter["n"] == 1  # new ints: traced, no retrace
    assert resolve(total.__wrapped__, {"a": 1, "b": [2, 3.0]}) == {
        "t['a']": "dynamic",
        "t['b'][0]": "dynamic",
        "t['b'][1]": "dynamic",
    }


def test_a_call_that_does_not_fit_the_signature_is_a_type_error() -> None:
    def f(x: jax.Array, n: Static[int] = 2) -> jax.Array:
        return x * n

    # vmap takes the call as written (its in_axes follow it): the signature is
    # checked when the call is resolved, and so is explain's call.
    batched = treespec.vmap(f)
    np.testing.assert_allclose(batched(jnp.ones((2, 1))), 2.0)
    np.testing.assert_allclose(batched(jnp.ones((2, 1)), n=3), 3.0)
    with pytest.raises(
        TypeError, match=r"\.f\(\): got an unexpected keyword argument 'm'$"
    ):
        batched(jnp.ones((2, 1)), m=3)
    with pytest.raises(TypeError, match=r"\.f\(\): too many positional arguments$"):
        batched(jnp.ones((2, 1)), 2, 3)
    with pytest.raises(TypeError, match=r"\.f\(\): missing a required argument: 'x'$"):
        treespec.explain(f, n=3)


def test_grad_holds_keyword_only_floats_static() -> None:
    # Only the differentiated positional argument's floats are traced; a float
    # passed to a keyword-only parameter or **kwargs is held static, so it is
    # checked as a static value.
    def loss(x: float, *, scale: int, **extra: int) -> jax.Array:
        return x * scale  # type: ignore[return-value]

    grad = treespec.grad(loss)
    assert float(grad(1.5, scale=3)) == 3.0
    with pytest.raises(treespec.ValidationError) as info:
        grad(1.5, scale=2.5, other=0.5)
    msg = str(info.value)
    assert "at scale: expected int (static), got float 2.5" in msg
    assert "at extra['other']: expected int (static), got float 0.5" in msg


@dataclasses.dataclass(frozen=True)
class _FrozenConfig:
    n: int = 2


@dataclasses.dataclass
class _MutableConfig:  # eq without frozen: __hash__ is None
    n: int = 2


@pytest.mark.parametrize("annotation", [object, Any], ids=["object", "Any"])
@pytest.mark.parametrize("default", ["infer", "dynamic", "error"])
def test_static_object_and_any_hold_any_hashable_value_static(
    annotation: Any, default: str
) -> None:
    # A frozen dataclass is a class with annotated fields: the marker around
    # it is still the nearest one, whatever the default policy says.
    def scale(x: Dynamic[jax.Array], cfg: Static[annotation]) -> jax.Array:  # type: ignore[valid-type]
        return x * cfg.n

    f = treespec.jit(scale, default=default)
    np.testing.assert_array_equal(f(jnp.ones(2), _FrozenConfig()), 2 * jnp.ones(2))
    np.testing.assert_array_equal(f(jnp.ones(2), _FrozenConfig(3)), 3 * jnp.ones(2))
    assert f.trace_count == 2
    with pytest.raises(ValidationError) as info:
        f(jnp.ones(2), _MutableConfig())
    message = str(info.value)
    assert "argument cfg, at cfg" in message and "hashable" in message, message
