"""The routes of treespec.jit (`treespec._runtime.calling.routes`), each held
to the same behaviour.

- The positional route: wholly dynamic arguments go to JAX unflattened, the
  rest is flattened and planned per tree structure; a structure whose leaves
  are all static gets interned keys, and a plain dict of scalars a probe
  (no flatten per call).
- The call route: keywords or extra `*args`, `(args, kwargs)` flattened.
"""

from __future__ import annotations

import dataclasses
import logging
from functools import partial
from typing import Any, NamedTuple, TypedDict

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import treespec
from treespec import Donate, Dynamic, Static, ValidationError

from .conftest import child_env


class Config(TypedDict):
    depth: Static[int]
    name: Static[str]
    sizes: Static[list[int]]
    scale: Static[float | int | bool]


CFG = {"depth": 2, "name": "a", "sizes": [1, 2], "scale": 1}


def _make(counter: dict[str, int]) -> Any:
    @treespec.jit
    def f(params: Donate[dict[str, jax.Array]], x: Dynamic[jax.Array], cfg: Config):
        counter["n"] += 1
        return x * cfg["depth"] * sum(cfg["sizes"]) + 0 * params["w"], cfg["name"]

    return f


def _interned(f: Any, *args: Any) -> bool:
    """Whether this call's key is interned (its flattened leaves all static)."""
    from treespec._runtime.calling.layout import StaticKey

    key, _ = f._splitter.split_call(args, {})
    return type(key) is StaticKey


def test_all_static_structures_get_interned_keys() -> None:
    f = _make({"n": 0})
    assert f._splitter.positional.whole_idx == (0, 1)
    assert _interned(f, {"w": jnp.ones(2)}, jnp.ones(2), CFG)
    g = treespec.jit(lambda p, x, c: x, static_flags=[False, False, True])
    assert _interned(g, {"w": jnp.ones(2)}, jnp.ones(2), CFG)
    h = treespec.jit(lambda x, c: x)  # "infer": arrays are traced
    assert not _interned(h, jnp.ones(2), {"a": 1})
    assert _interned(h, 1.0, {"a": 1})  # no array: every leaf static


def test_static_layout_cache_keys(counter: dict[str, int]) -> None:
    f = _make(counter)
    out, name = f({"w": jnp.ones(2)}, jnp.ones(2), dict(CFG))
    np.testing.assert_allclose(out, 6.0)
    assert name == "a"
    f({"w": jnp.ones(2)}, jnp.zeros(2), dict(CFG))
    assert counter["n"] == 1
    f({"w": jnp.ones(2)}, jnp.ones(2), {**CFG, "scale": 1.0})  # a float: a new key
    f({"w": jnp.ones(2)}, jnp.ones(2), {**CFG, "scale": True})
    assert counter["n"] == 3
    sizes = [1, 2]
    f({"w": jnp.ones(2)}, jnp.ones(2), {**CFG, "sizes": sizes})
    sizes.append(3)  # mutated in place: seen at the next call
    out, _ = f({"w": jnp.ones(2)}, jnp.ones(2), {**CFG, "sizes": sizes})
    np.testing.assert_allclose(out, 12.0)


def test_static_layout_sees_a_mutated_static_list(counter: dict[str, int]) -> None:
    # Every argument wholly static or wholly dynamic: the static layout. The same
    # list object, mutated in place, must make a new key (never a stale result).
    @treespec.jit
    def f(x: Dynamic[jax.Array], ks: Static[list[int]]) -> jax.Array:
        counter["n"] += 1
        return x * sum(ks)

    ks = [1, 2]
    np.testing.assert_allclose(f(jnp.ones(1), ks), 3.0)
    ks.append(3)
    np.testing.assert_allclose(f(jnp.ones(1), ks), 6.0)
    ks[0] = 10
    np.testing.assert_allclose(f(jnp.ones(1), ks), 15.0)
    assert counter["n"] == 3
    ks[:] = [1, 2]  # back to a content already seen: a cache hit, right value
    np.testing.assert_allclose(f(jnp.ones(1), ks), 3.0)
    assert counter["n"] == 3 and f.trace_count == 3


def test_static_layout_sees_a_mutated_config_in_place(counter: dict[str, int]) -> None:
    f = _make(counter)
    cfg = {**CFG, "sizes": [1, 2]}
    out, name = f({"w": jnp.ones(2)}, jnp.ones(2), cfg)
    np.testing.assert_allclose(out, 6.0)  # depth 2 * sum 3
    cfg["sizes"].append(3)  # the same dict holding the same, mutated, list
    out, _ = f({"w": jnp.ones(2)}, jnp.ones(2), cfg)
    np.testing.assert_allclose(out, 12.0)
    cfg["depth"] = 3  # the same dict, a static value replaced in place
    cfg["name"] = "b"
    out, name = f({"w": jnp.ones(2)}, jnp.ones(2), cfg)
    np.testing.assert_allclose(out, 18.0)
    assert name == "b" and counter["n"] == 3


def test_static_layout_donates_whole_arguments() -> None:
    f = _make({"n": 0})
    params = {"w": jnp.ones(2)}
    f(params, jnp.ones(2), CFG)
    assert params["w"].is_deleted()

    # Outputs of the same shape and dtype as every input: JAX could reuse any
    # donated buffer, so only the Donate argument may be consumed.
    @treespec.jit
    def g(
        params: Donate[dict[str, jax.Array]], x: Dynamic[jax.Array], cfg: Config
    ) -> Any:
        return params["w"] + x, params["w"] * x, x * cfg["depth"]

    params, x = {"w": jnp.full(2, 3.0)}, jnp.full(2, 2.0)
    outs = g(params, x, CFG)
    np.testing.assert_allclose(outs, [[5.0, 5.0], [6.0, 6.0], [4.0, 4.0]])
    assert params["w"].is_deleted()
    assert not x.is_deleted()
    np.testing.assert_allclose(x, 2.0)  # still readable
    outs = g({"w": jnp.ones(2)}, x, CFG)  # and usable again
    np.testing.assert_allclose(outs[0], 3.0)
    assert not x.is_deleted()


def test_static_layout_validation_names_the_leaf() -> None:
    f = _make({"n": 0})
    with pytest.raises(ValidationError) as info:
        f({"w": jnp.ones(2)}, jnp.ones(2), {**CFG, "depth": "2"})
    assert "argument cfg, at cfg['depth']: expected Static[int], got str '2'" in str(
        info.value
    )
    with pytest.raises(ValidationError, match=r"cfg\['extra'\].*unexpected key"):
        f({"w": jnp.ones(2)}, jnp.ones(2), {**CFG, "extra": 1})
    with pytest.raises(ValidationError) as info:
        f({"w": jnp.ones(2)}, jnp.ones(2), {**CFG, "sizes": [np.ones(2)]})
    msg = str(info.value)
    assert "cfg['sizes'][0]" in msg and "hashable" in msg and "Dynamic" in msg


def test_static_layout_without_validation_resolves_an_extra_key_by_the_default(
    counter: dict[str, int],
) -> None:
    # validate=False checks nothing against the annotations: an extra key is a
    # leaf like any unannotated one ("infer": an array there is traced), as on
    # every route. With validation on, it is named.
    @partial(treespec.jit, validate=False)
    def f(x: Dynamic[jax.Array], cfg: Config) -> Any:
        counter["n"] += 1
        return x + cfg["extra"].sum()

    np.testing.assert_allclose(f(jnp.ones(1), {**CFG, "extra": jnp.ones(3)}), 4.0)
    np.testing.assert_allclose(f(jnp.ones(1), {**CFG, "extra": jnp.zeros(3)}), 1.0)
    assert counter["n"] == 1
    g = treespec.jit(f.__wrapped__)
    with pytest.raises(ValidationError, match=r"cfg\['extra'\].*unexpected key"):
        g(jnp.ones(1), {**CFG, "extra": jnp.ones(3)})


def test_static_layout_explains_recompiles(caplog: pytest.LogCaptureFixture) -> None:
    @partial(treespec.jit, explain_recompiles=True)
    def f(x: Dynamic[jax.Array], cfg: Config) -> Any:
        return x

    with caplog.at_level(logging.WARNING, logger="treespec"):
        f(jnp.ones(1), CFG)
        f(jnp.ones(1), {**CFG, "name": "b"})
    (record,) = caplog.records
    assert "cfg['name']: 'a' (str) -> 'b' (str)" in record.getMessage()


def test_static_layout_lower_shardings_and_clear_cache(counter: dict[str, int]) -> None:
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("d",))
    replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())

    @partial(treespec.jit, in_shardings=(replicated, None), out_shardings=replicated)
    def f(x: Dynamic[jax.Array], cfg: Config) -> jax.Array:
        counter["n"] += 1
        return x * cfg["depth"]

    assert _interned(f, jnp.ones(2), CFG)
    out = f(jnp.ones(2), CFG)
    assert out.sharding == replicated
    compiled = f.lower(jnp.ones(2), CFG).compile()
    np.testing.assert_allclose(compiled(jnp.ones(2), CFG), 2.0)
    f.clear_cache()
    f(jnp.ones(2), CFG)
    assert counter["n"] >= 2


def test_static_layout_tracer_at_a_static_leaf() -> None:
    @treespec.jit
    def f(x: Dynamic[jax.Array], cfg: Config) -> jax.Array:
        return x * cfg["depth"]

    with pytest.raises(ValidationError) as info:
        jax.jit(lambda d: f(jnp.ones(2), {**CFG, "depth": d}))(3)
    msg = str(info.value)
    assert "cfg['depth']" in msg and "traced value reached a static leaf" in msg


# A config of scalars only: the hot path looks it up by its probe, unflattened.
class Scalars(TypedDict):
    depth: Static[int]
    name: Static[str]
    scale: Static[float | int | bool]


def _echo(counter: dict[str, int]) -> Any:
    @treespec.jit
    def f(x: Dynamic[jax.Array], cfg: Scalars) -> Any:
        counter["n"] += 1
        return x * cfg["depth"], dict(cfg)

    return f


def test_scalar_dict_is_probed_not_flattened(counter: dict[str, int], spy: Any) -> None:
    from treespec._runtime.calling.positional import PositionalRoute

    f = _echo(counter)
    f(jnp.ones(2), {"depth": 2, "name": "a", "scale": 1})
    route = f._splitter.positional
    assert route.probing and len(route.probes) == 1
    slow = spy(PositionalRoute, "split")
    out, cfg = f(jnp.zeros(2), {"depth": 2, "name": "a", "scale": 1})  # a new dict
    assert slow == [] and counter["n"] == 1
    assert cfg == {"depth": 2, "name": "a", "scale": 1}
    np.testing.assert_allclose(out, 0.0)


def test_scalar_dict_keys_keep_types_order_and_mutation_apart(
    counter: dict[str, int],
) -> None:
    f = _echo(counter)
    seen = []
    for scale in (1, 1.0, True, 1, 1.0, True):
        _, cfg = f(jnp.ones(2), {"depth": 2, "name": "a", "scale": scale})
        seen.append(type(cfg["scale"]))
    assert seen == [int, float, bool] * 2 and counter["n"] == 3
    # The same items in another order are the same key: no new trace.
    _, cfg = f(jnp.ones(2), {"scale": True, "name": "a", "depth": 2})
    assert counter["n"] == 3 and cfg["scale"] is True
    # Mutated in place between calls: the next call sees the new value.
    config = {"depth": 2, "name": "a", "scale": 1}
    f(jnp.ones(2), config)
    config["depth"] = 5
    out, cfg = f(jnp.ones(2), config)
    np.testing.assert_allclose(out, 5.0)
    assert cfg["depth"] == 5 and counter["n"] == 4


def test_dict_that_cannot_be_probed_turns_probing_off(counter: dict[str, int]) -> None:
    @partial(treespec.jit, static_flags=[False, True])
    def f(x: jax.Array, cfg: dict[str, Any]) -> Any:
        counter["n"] += 1
        return x * sum(cfg["sizes"])

    sizes = [1, 2]
    np.testing.assert_allclose(f(jnp.ones(1), {"sizes": sizes}), 3.0)
    route = f._splitter.positional
    assert not route.probing and not route.probes
    sizes.append(3)
    np.testing.assert_allclose(f(jnp.ones(1), {"sizes": sizes}), 6.0)
    f.clear_cache()
    assert route.probing


def test_a_dict_subclass_config_never_answers_a_plain_dict(
    counter: dict[str, int],
) -> None:
    import collections

    # Only a plain dict registers a probe: an OrderedDict of the same items is
    # another tree structure, and each call must receive the container it passed.
    @partial(treespec.jit, static_flags=[False, True])
    def f(x: jax.Array, cfg: dict[str, Any]) -> Any:
        counter["n"] += 1
        return x * cfg["depth"], type(cfg).__name__

    ordered = collections.OrderedDict(depth=2, name="a")
    for cfg in (ordered, {"depth": 2, "name": "a"}, ordered, dict(ordered)):
        out, name = f(jnp.ones(1), cfg)
        np.testing.assert_allclose(out, 2.0)
        assert name == type(cfg).__name__
    assert counter["n"] == 2


def test_static_keys_are_bounded(
    counter: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    from treespec._runtime.calling import routes as _routes

    monkeypatch.setattr(_routes, "MAX_STATIC_KEYS", 3)
    f = _echo(counter)
    route = f._splitter.positional
    for depth in [*range(1, 8), 1, 2]:
        out, cfg = f(jnp.ones(1), {"depth": depth, "name": "a", "scale": 0.5})
        np.testing.assert_allclose(out, float(depth))
        assert cfg["depth"] == depth
        assert len(route._interned) <= 3
        assert len(route.probes) <= 3


def test_unhashable_scalar_config_value_is_named() -> None:
    f = _echo({"n": 0})
    with pytest.raises(ValidationError) as info:
        f(jnp.ones(2), {"depth": 2, "name": "a", "scale": np.float32([1.0])})
    assert "cfg['scale']" in str(info.value)
    with pytest.raises(ValidationError, match=r"cfg\['depth'\].*static"):
        jax.jit(lambda d: f(jnp.ones(2), {"depth": d, "name": "a", "scale": 1}))(3)


_SCALARS = st.one_of(
    st.integers(-2, 2),
    st.floats(-2, 2, allow_nan=False),
    st.booleans(),
    st.sampled_from(["", "a", "b"]),
    st.none(),
)


@settings(max_examples=30, deadline=None)
@given(
    configs=st.lists(st.dictionaries(st.sampled_from("abc"), _SCALARS), max_size=8),
    rnd=st.randoms(use_true_random=False),
)
def test_probed_configs_trace_once_per_key_and_come_back_exact(
    configs: list[dict[str, Any]], rnd: Any
) -> None:
    f = treespec.jit(lambda x, cfg: (x, cfg), static_flags=[False, True])
    distinct = set()
    for config in configs:
        items = list(config.items())
        rnd.shuffle(items)  # the key order must not matter
        _, out = f(jnp.ones(1), dict(items))
        assert out == config
        assert {k: type(v) for k, v in out.items()} == {
            k: type(v) for k, v in config.items()
        }
        distinct.add(frozenset((k, type(v), v) for k, v in config.items()))
        assert f.trace_count == len(distinct)


def test_enum_values_are_probed(counter: dict[str, int]) -> None:
    import enum

    class Act(enum.IntEnum):
        RELU = 1
        TANH = 2

    @partial(treespec.jit, static_flags=[False, True])
    def f(x: jax.Array, cfg: dict[str, Any]) -> Any:
        counter["n"] += 1
        return jnp.tanh(x) if cfg["act"] is Act.TANH else x, cfg["act"]

    for act in (Act.RELU, 1, Act.TANH, Act.RELU, 1):  # 1 == Act.RELU: still apart
        _, out = f(jnp.ones(1), {"act": act})
        assert out == act and type(out) is type(act)
    assert f._splitter.positional.probing and counter["n"] == 3


def test_compiled_checks_the_static_values_it_was_lowered_for() -> None:
    f = _echo({"n": 0})
    cfg = {"depth": 2, "name": "a", "scale": 1}
    compiled = f.lower(jnp.ones(2), cfg).compile()
    out, _ = compiled(jnp.ones(2), dict(cfg))  # an equal new dict is fine
    np.testing.assert_allclose(out, 2.0)
    f.clear_cache()  # new interned keys: still the same static values
    out, _ = compiled(jnp.ones(2), {"name": "a", "scale": 1, "depth": 2})
    np.testing.assert_allclose(out, 2.0)
    for other, said in (
        ({**cfg, "depth": 3}, r"cfg\['depth'\]: compiled for 2, called with 3"),
        ({**cfg, "scale": 1.0}, r"compiled for 1 \(int\), called with 1.0 \(float\)"),
    ):
        with pytest.raises(ValidationError, match=said):
            compiled(jnp.ones(2), other)


class _Pair(NamedTuple):
    a: int
    b: str


@treespec.dataclass
class _Inner:
    w: Dynamic[jax.Array]
    tag: str


def test_any_below_static_takes_the_static_layout_for_plain_containers(
    counter: dict[str, int],
) -> None:
    @treespec.jit
    def f(x: Dynamic[jax.Array], cfg: Static[dict[str, Any]]) -> Any:
        counter["n"] += 1
        inner = cfg.get("inner")
        traced = isinstance(inner.w, jax.core.Tracer) if inner is not None else None
        return x * cfg["k"], traced

    route = f._splitter.positional
    assert _interned(f, jnp.ones(1), {"k": 2, "name": "a"})
    f(jnp.ones(1), {"k": 2, "name": "a"})
    f(jnp.ones(1), {"k": 2, "name": "a"})
    assert route.probes and counter["n"] == 1
    out, _ = f(jnp.ones(1), {"k": 3, "sizes": [1, (2, None)]})  # nested: flattened
    np.testing.assert_allclose(out, 3.0)
    assert counter["n"] == 2
    # A pytree class under the Any may carry markers of its own: here its
    # Dynamic field is traced (planned path), and new values of it hit the cache.
    out, traced = f(jnp.ones(1), {"k": 2, "inner": _Inner(jnp.ones(2), "t")})
    assert traced is True and counter["n"] == 3
    f(jnp.ones(1), {"k": 2, "inner": _Inner(jnp.zeros(2), "t")})
    assert counter["n"] == 3
    f(jnp.ones(1), {"k": 2, "inner": _Inner(jnp.zeros(2), "u")})  # tag is static
    assert counter["n"] == 4
    assert not _interned(f, jnp.ones(1), {"k": 2, "inner": _Inner(jnp.ones(2), "t")})
    # A class with no markers of its own (all static): interned again.
    f(jnp.ones(1), {"k": 2, "pair": _Pair(1, "x")})
    f(jnp.ones(1), {"k": 2, "pair": _Pair(1, "x")})
    assert counter["n"] == 5
    assert _interned(f, jnp.ones(1), {"k": 2, "pair": _Pair(1, "x")})
    # One plan per tree structure: two plain dicts, the _Inner one, the _Pair one.
    assert len(route._plans) == 4


@treespec.dataclass
class _Opt:
    lr: Dynamic[float]
    steps: int


def test_inner_dynamic_marker_under_an_outer_static_is_traced(
    counter: dict[str, int],
) -> None:
    # The nearest marker wins: `lr` is traced although `cfg` says Static, so
    # the argument is not wholly static and the call must not be keyed on it.
    @treespec.jit
    def f(x: Dynamic[jax.Array], cfg: Static[dict[str, _Opt]]) -> Any:
        counter["n"] += 1
        opt = cfg["opt"]
        return x * opt.lr * opt.steps, isinstance(opt.lr, jax.core.Tracer)

    out, traced = f(jnp.ones(2), {"opt": _Opt(0.5, 2)})
    np.testing.assert_allclose(out, 1.0)
    assert traced is True and counter["n"] == 1
    out, _ = f(jnp.ones(2), {"opt": _Opt(0.25, 2)})  # a new lr: no retrace
    np.testing.assert_allclose(out, 0.5)
    assert counter["n"] == 1
    out, _ = f(jnp.ones(2), {"opt": _Opt(0.25, 3)})  # steps stays static
    np.testing.assert_allclose(out, 0.75)
    assert counter["n"] == 2
    opt = _Opt(1.0, 3)
    out, _ = f(jnp.ones(2), {"opt": opt})
    np.testing.assert_allclose(out, 3.0)
    assert counter["n"] == 2
    flags = treespec.flag_tree((jnp.ones(2), {"opt": opt}), f)
    assert flags == (False, {"opt": _Opt(False, True)})


def test_only_static_arguments_still_name_an_unhashable_leaf() -> None:
    @treespec.jit
    def f(table: Static[Any], n: Static[int]) -> int:
        return n

    assert f._splitter.positional.whole_idx == ()
    assert _interned(f, (1, "a"), 2)
    assert f((1, "a"), 2) == 2
    with pytest.raises(ValidationError, match=r"(?s)argument table.*Dynamic"):
        f(jnp.ones(3), 2)
    with pytest.raises(ValidationError, match=r"table\['w'\]"):
        f({"w": np.ones(2)}, 2)


# The call route (keywords) gets the same donation, shardings and diagnosis as
# the positional one; `clear_cache` forgets what every route keeps.


def test_keyword_calls_donate_only_the_donate_leaves() -> None:
    @treespec.jit
    def f(params: Donate[dict[str, jax.Array]], x: Dynamic[jax.Array]) -> Any:
        return params["w"] + x, params["w"] * x

    params, x = {"w": jnp.full(2, 3.0)}, jnp.full(2, 2.0)
    np.testing.assert_allclose(f(params=params, x=x), [[5.0, 5.0], [6.0, 6.0]])
    assert params["w"].is_deleted()
    assert not x.is_deleted()
    np.testing.assert_allclose(x, 2.0)


def test_in_shardings_reach_jax_on_both_routes() -> None:
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("d",))
    rows = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("d"))

    # No out_shardings: the outputs follow the inputs, which are only
    # NamedSharding-placed if `in_shardings` reached `jax.jit`.
    @partial(treespec.jit, in_shardings={"x": rows, "tree": rows, "n": None})
    def f(x: Dynamic[jax.Array], tree: dict[str, jax.Array], n: Static[int]) -> Any:
        return x * n, tree["a"] * n

    x, tree = jnp.ones(4), {"a": jnp.ones(4)}
    # `tree`, a dict of arrays, is dynamic as a whole like `x`.
    assert f._splitter.positional.whole_idx == (0, 1)
    for out in (f(x, tree, 2), f(x=x, tree=tree, n=2), f(x, tree=tree, n=2)):
        np.testing.assert_allclose(out, 2.0)
        assert all(isinstance(o.sharding, jax.sharding.NamedSharding) for o in out)
    for args, kwargs in [((x, tree, 2), {}), ((), {"x": x, "tree": tree, "n": 2})]:
        out = f.lower(*args, **kwargs).compile()(*args, **kwargs)
        assert all(isinstance(o.sharding, jax.sharding.NamedSharding) for o in out)

    # A keyword-only parameter: every call takes the call route.
    @partial(treespec.jit, in_shardings={"x": rows, "tree": rows, "n": None})
    def g(x: jax.Array, tree: dict[str, Any], *, n: Static[int]) -> Any:
        return x * n, tree["a"] * n

    for out in (g(x, tree, n=2), g(x=x, tree=tree, n=2)):
        np.testing.assert_allclose(out, 2.0)
        assert all(isinstance(o.sharding, jax.sharding.NamedSharding) for o in out)
    assert g._splitter.general._plans and not g._splitter.positional._plans


def test_keyword_call_with_an_unhashable_static_leaf_is_named() -> None:
    f = treespec.jit(lambda x, cfg: x)
    with pytest.raises(ValidationError, match=r"cfg\['a'\].*hashable"):
        f(x=jnp.ones(2), cfg={"a": {1, 2}})
    g = _echo({"n": 0})
    with pytest.raises(ValidationError) as info:
        g(x=jnp.ones(2), cfg={"depth": 2, "name": "a", "scale": np.float32([1.0])})
    assert "cfg['scale']" in str(info.value)


def test_clear_cache_forgets_plans_interned_keys_and_probes(
    counter: dict[str, int],
) -> None:
    f = _echo(counter)
    cfg = {"depth": 1, "name": "a", "scale": 0.5}
    f(jnp.ones(1), cfg)
    f(x=jnp.ones(1), cfg=cfg)  # the same bound call
    positional = f._splitter.positional
    assert positional._plans and positional._interned and positional.probes
    assert counter["n"] == 1
    f.clear_cache()
    assert not positional._plans
    assert not positional._interned and not positional.probes
    f(jnp.ones(1), cfg)
    f(x=jnp.ones(1), cfg=cfg)
    assert counter["n"] == 2  # traced again, once

    @treespec.jit
    def h(x: jax.Array, *, k: Static[int]) -> jax.Array:
        counter["n"] += 1
        return x * k

    h(jnp.ones(1), k=2)
    general = h._splitter.general
    assert general._plans
    h.clear_cache()
    assert not general._plans
    h(jnp.ones(1), k=2)
    assert counter["n"] == 4  # the call route traces again too


def test_probes_stay_bounded_over_many_key_orders(
    counter: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    import itertools

    from treespec._runtime.calling import routes as _routes

    monkeypatch.setattr(_routes, "MAX_STATIC_KEYS", 3)
    f = treespec.jit(lambda x, cfg: x * cfg["a"], static_flags=[False, True])
    route = f._splitter.positional
    cfg = {"a": 1, "b": 2.0, "c": "s", "d": None}
    for order in itertools.permutations(cfg):
        np.testing.assert_allclose(f(jnp.ones(1), {k: cfg[k] for k in order}), 1.0)
        assert 1 <= len(route.probes) <= 3
    assert len(route._interned) == 1
    assert f.trace_count == 1


def test_starting_over_forgets_the_probes_with_the_interned_keys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from treespec._runtime.calling import routes as _routes

    # Past MAX_STATIC_KEYS the route starts over. A probe kept from before
    # would still answer rightly (with the old key, which JAX may still hold
    # compiled), but one config would then have two keys: the old one for its
    # old key order, a new one for another order. A key stands for its
    # content by identity, so there must be one per content.
    monkeypatch.setattr(_routes, "MAX_STATIC_KEYS", 3)
    f = treespec.jit(lambda x, cfg: x * len(cfg), static_flags=[False, True])
    route = f._splitter.positional
    for cfg in ({"a": 1, "b": 2}, (1,), (2,), (3,)):  # tuples: keys, no probes
        f(jnp.ones(1), cfg)
    for cfg in ({"b": 2, "a": 1}, {"a": 1, "b": 2}):
        np.testing.assert_allclose(f(jnp.ones(1), cfg), 2.0)
    first, second = route.probes.values()
    assert first is second
    assert list(route._interned.values()).count(first) == 1


def test_route_helpers_keep_their_contracts() -> None:
    from treespec._runtime.calling.routes import key_split, key_static, make_key

    f = _echo({"n": 0})
    cfg = {"depth": 1, "name": "a", "scale": 0.5}
    key, _ = f._splitter.split_call((jnp.ones(1), cfg), {})
    split = key_split(key)
    assert key_static(make_key(split, (1, "a", 0.5))) == (1, "a", 0.5)
    assert key_static(key) == (1, "a", 0.5)
    # The plan of a structure is built once: a second `_plan` call (another
    # thread that waited on the lock) gets the same one.
    route = f._splitter.positional
    (treedef,) = route._plans
    assert route._plan((jnp.ones(1), cfg), {}, treedef, skip=route._skip) is split.plan


def test_extra_positional_arguments_take_the_call_route() -> None:
    @treespec.jit
    def f(x: jax.Array, *rest: int) -> jax.Array:
        return x * sum(rest)

    np.testing.assert_allclose(f(jnp.ones(2), 1, 2), 3.0)
    assert f._splitter.route_for((jnp.ones(2), 1, 2), {}) is f._splitter.general
    compiled = f.lower(jnp.ones(2), 1, 2).compile()
    np.testing.assert_allclose(compiled(jnp.ones(2), 1, 2), 3.0)


def test_wholly_dynamic_arguments_are_found_through_every_level() -> None:
    from jaxtyping import PyTree

    # A marker two levels down keeps the argument flattened: its leaf stays static.
    @treespec.jit
    def f(x: Dynamic[dict[str, tuple[Static[int], jax.Array]]]) -> list[jax.Array]:
        n, a = x["k"]
        return [a] * n

    assert f._splitter.positional.whole_idx == ()
    assert len(f({"k": (2, jnp.ones(1))})) == 2
    assert len(f({"k": (3, jnp.ones(1))})) == 3

    # Positional-only parameters and a PyTree of anything are wholly dynamic too.
    @treespec.jit
    def g(a: Dynamic[jax.Array], t: Dynamic[PyTree], /) -> jax.Array:
        return a + t["b"]

    assert g._splitter.positional.whole_idx == (0, 1)
    np.testing.assert_allclose(g(jnp.ones(1), {"b": jnp.ones(1)}), 2.0)


def test_false_flag_donates_whole_only_a_donate_argument() -> None:
    from jaxtyping import PyTree

    @partial(treespec.jit, static_flags=[False] * 4)
    def f(
        p: tuple[Donate[jax.Array], jax.Array],
        q: Donate[jax.Array],
        r: PyTree[Donate[Any]],
        s: Donate[tuple[jax.Array, Dynamic[jax.Array]]],
    ) -> Any:
        return p[0] + p[1], q * 2, r["a"] * 2, s[0] + s[1]

    route = f._splitter.positional
    assert route.whole_idx == (1,) and route.whole_kinds[0].value == "donate"
    p, q = (jnp.ones(2), jnp.ones(2)), jnp.ones(2)
    r, s = {"a": jnp.ones(2)}, (jnp.ones(2), jnp.ones(2))
    f(p, q, r, s)
    assert p[0].is_deleted() and q.is_deleted() and r["a"].is_deleted()
    assert s[0].is_deleted()
    assert not p[1].is_deleted() and not s[1].is_deleted()


def test_flags_and_unannotated_places_keep_arguments_flattened() -> None:
    # A True flag beats the Dynamic marker: the int stays static.
    @partial(treespec.jit, static_flags=[True])
    def f(n: Dynamic[int]) -> list[int]:
        return list(range(n))

    assert f._splitter.positional.whole_idx == ()
    assert f(3) == [0, 1, 2]

    # An unannotated place below may hold a class with its own markers.
    @treespec.jit
    def g(x: Dynamic[dict[str, Any]]) -> Any:
        return x["a"] * 2

    assert g._splitter.positional.whole_idx == ()
    np.testing.assert_allclose(g({"a": jnp.ones(1)}), 2.0)


class _Tree(TypedDict):
    value: Static[int]
    children: list[_Tree]


def test_a_marker_inside_a_recursive_class_keeps_the_argument_flattened() -> None:
    @treespec.jit
    def f(t: Dynamic[_Tree], ts: Dynamic[list[_Tree]], x: jax.Array) -> jax.Array:
        return x * len(range(t["value"])) * len(range(ts[0]["value"]))

    assert f._splitter.positional.whole_idx == (2,)  # only x, an array
    tree = {"value": 2, "children": [{"value": 3, "children": []}]}
    np.testing.assert_allclose(f(tree, [tree], jnp.ones(1)), 4.0)


# -- a call of another structure -----------------------------------------------
#
# Plans are per tree structure: a container, None or a NamedTuple where an
# earlier call had a leaf or a tuple is another structure, never answered by
# the plan (or the trace) of the earlier one.


class _Pair(NamedTuple):
    a: Any
    b: Any


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class _Meta:
    w: jax.Array
    name: str = dataclasses.field(metadata={"static": True})


def _same(a: Any, b: Any) -> bool:
    """Equal trees of equal types, arrays by value."""
    if isinstance(a, jax.Array) or isinstance(b, jax.Array):
        return isinstance(a, jax.Array) and bool(jnp.array_equal(a, b))
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        # JAX rebuilds a dict in sorted key order, as jax.jit does.
        return sorted(a) == sorted(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, _Meta):
        return a.name == b.name and _same(a.w, b.w)
    return bool(a == b)


def _echo_tree() -> Any:
    @treespec.jit
    def echo(t: Any, x: Dynamic[jax.Array]) -> Any:
        return t, x

    return echo


@pytest.mark.parametrize(
    "trees",
    [
        [3, (1, 2), [1, 2], None, 4],  # a container or None where a leaf was
        [(1, 2), _Pair(1, 2), (1, 2)],  # a NamedTuple where a tuple was
        [{"a": 1}, {"a": (1, 2)}, {"a": None}, {"b": 1}],
        [[1, 2], (1, 2), [1, (2,)]],
        [_Meta(jnp.ones(2), "a"), _Meta(jnp.ones(2), "b"), _Meta(jnp.zeros(2), "a")],
        [1, 1.0, True, np.int32(1)],  # equal leaves of other types
    ],
)
def test_a_call_of_another_structure_is_never_answered_by_an_earlier_one(
    trees: list[Any],
) -> None:
    echo = _echo_tree()
    for tree in trees * 2:
        got, _ = echo(tree, jnp.ones(1))
        assert _same(got, tree), (got, tree)


_leaf = st.one_of(
    st.integers(-2, 2),
    st.sampled_from([0.5, True, False, "a", "b", None]),
    st.integers(0, 2).map(lambda n: jnp.full((n,), 1.0)),
)
_tree = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.builds(_Pair, inner, inner),
        st.dictionaries(st.sampled_from("xyz"), inner, max_size=3),
        st.builds(_Meta, st.just(jnp.ones(1)), st.sampled_from("ab")),
    ),
    max_leaves=6,
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_tree, min_size=1, max_size=6))
def test_any_sequence_of_structures_comes_back_exact(trees: list[Any]) -> None:
    # One function, called with structures in any order: each call sees what
    # it was given (types included), whatever the last call's structure was.
    echo = _echo_tree()
    for tree in trees + trees[::-1]:
        got, _ = echo(tree, jnp.ones(1))
        assert _same(got, tree), (got, tree)


def test_the_call_route_keeps_structures_apart_too(counter: dict[str, int]) -> None:
    @treespec.jit
    def f(x: Dynamic[jax.Array], *, n: Any) -> Any:
        counter["n"] += 1
        return x, n

    for n in [1, (1, 2), 1, [1], 1.0, None]:
        _, got = f(jnp.ones(1), n=n)
        assert _same(got, n)
    assert counter["n"] == 5  # 1 twice: one trace


def test_the_same_immutable_static_objects_reuse_the_last_key() -> None:
    # S4's shape: traced leaves beside static ones. A call whose static leaves
    # are the very objects of the last call (builtin, immutable) reuses its
    # interned key; equal new objects make an equal key, so one trace.
    count = {"n": 0}

    @treespec.jit
    def f(x: jax.Array, cfg: dict[str, Any]) -> jax.Array:
        count["n"] += 1
        return x * cfg["k"]

    cfg = {"k": 3, "name": "a", "w": jnp.ones(1)}
    key1, _ = f._splitter.split_call((jnp.ones(1), cfg), {})
    key2, _ = f._splitter.split_call((jnp.ones(1), cfg), {})
    assert key1 is key2
    f(jnp.ones(1), cfg)
    f(jnp.ones(1), {"k": int("3"), "name": "".join("a"), "w": jnp.ones(1)})
    assert count["n"] == 1
    f(jnp.ones(1), {**cfg, "k": 4})
    assert count["n"] == 2


class _Mutable:
    """Hashable by a field that changes in place (JAX #9024's trap)."""

    def __init__(self, k: int) -> None:
        self.k = k

    def __hash__(self) -> int:
        return hash(self.k)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Mutable) and other.k == self.k


def test_a_static_object_changed_in_place_is_never_answered_by_identity() -> None:
    @treespec.jit
    def f(x: jax.Array, m: Static[_Mutable], n: Static[int]) -> jax.Array:
        return x * m.k * n

    m = _Mutable(2)
    np.testing.assert_allclose(f(jnp.ones(1), m, 1), 2.0)
    m.k = 5  # the same object, another value: the key must see it
    np.testing.assert_allclose(f(jnp.ones(1), m, 1), 5.0)


@pytest.mark.parametrize(
    "values",
    [
        list(range(8)),
        [(i, -i) for i in range(8)],
        [{"k": i, "s": "a"} for i in range(8)],
    ],
    ids=["int", "tuple", "dict of scalars"],
)
def test_past_the_static_key_bound_nothing_compiled_is_traced_again(
    values: list[Any],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from treespec._runtime.calling import routes as _routes

    monkeypatch.setattr(_routes, "MAX_STATIC_KEYS", 5)
    f = treespec.jit(lambda x, s: x, static_flags=[False, True])
    g = treespec.jit(lambda s: s, static_flags=[True])  # every leaf static
    with caplog.at_level(logging.WARNING, logger="treespec"):
        for _ in range(3):  # 8 distinct values cycled 3 times
            for value in values:
                np.testing.assert_allclose(f(jnp.ones(1), value), 1.0)
                assert g(value) == value
    assert (f.trace_count, g.trace_count) == (8, 8)
    crossed = [r for r in caplog.records if "TREESPEC_MAX_STATIC_KEYS" in r.message]
    assert len(crossed) == 2 and all(r.name == "treespec" for r in crossed)
    assert all(r.levelno == logging.WARNING for r in crossed)  # seen by default
    assert "5 distinct static keys" in crossed[0].getMessage()
    assert len(f._splitter.positional._interned) <= 5


def test_the_static_key_bound_is_read_from_the_environment() -> None:
    import subprocess
    import sys

    def bound(value: str) -> subprocess.CompletedProcess[str]:
        code = (
            "from treespec._runtime.calling import routes; "
            "print(routes.MAX_STATIC_KEYS)"
        )
        env = child_env(TREESPEC_MAX_STATIC_KEYS=value)
        return subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True
        )

    assert bound("250").stdout.strip() == "250"
    assert bound("").stdout.strip() == "4096"  # unset: the documented default
    refused = bound("many")
    assert refused.returncode != 0
    assert "TREESPEC_MAX_STATIC_KEYS='many'" in refused.stderr


class _SameHash(type):
    """Classes whose instances' keys hash alike: a key's hash is then the same
    for a `Scale(2)` and a `Shift(2)`, and only equality tells them apart."""

    def __hash__(cls) -> int:
        return 7

    def __eq__(cls, other: object) -> bool:
        return cls is other


class _Scale(metaclass=_SameHash):
    def __init__(self, k: int) -> None:
        self.k = k

    def __hash__(self) -> int:
        return hash(self.k)

    def __eq__(self, other: object) -> bool:  # as often written: no type check
        return self.k == other.k  # type: ignore[attr-defined,no-any-return]

    def __call__(self, x: jax.Array) -> jax.Array:
        return x * self.k


class _Shift(metaclass=_SameHash):
    def __init__(self, offset: int) -> None:
        self.offset = offset

    def __hash__(self) -> int:
        return hash(self.offset)

    def __eq__(self, other: object) -> bool:
        return self.offset == other.offset  # type: ignore[attr-defined,no-any-return]

    def __call__(self, x: jax.Array) -> jax.Array:
        return x + self.offset


@pytest.mark.parametrize("where", ["argument", "in a dict"])
def test_static_keys_compare_the_type_first_as_jax_does(where: str) -> None:
    # A user's __eq__ never sees an object of another class: keys whose hashes
    # collide are told apart by their leaves' types first, as JAX compares
    # its static arguments.
    def apply(x: jax.Array, op: Static[Any]) -> jax.Array:
        return (op["op"] if isinstance(op, dict) else op)(x)

    def wrap(op: Any) -> Any:
        return {"op": op} if where == "in a dict" else op

    f, g = treespec.jit(apply), treespec.jit(lambda x, op: apply(x, op) * 10)
    np.testing.assert_allclose(f(jnp.ones(2), wrap(_Scale(2))), 2.0)
    np.testing.assert_allclose(f(jnp.ones(2), wrap(_Shift(2))), 3.0)
    np.testing.assert_allclose(g(jnp.ones(2), wrap(_Shift(3))), 40.0)
    np.testing.assert_allclose(g(jnp.ones(2), wrap(_Scale(3))), 30.0)


class _Refuses:
    """A static value whose == raises (a dataclass holding an array does)."""

    def __init__(self, k: int) -> None:
        self.k = k

    def __hash__(self) -> int:
        return 1

    error: type[Exception] = ValueError

    def __eq__(self, other: object) -> bool:
        raise self.error("cannot compare")

    def __call__(self, x: jax.Array) -> jax.Array:
        return x * self.k


class _RefusesWithTypeError(_Refuses):
    """A TypeError from == is no unhashable leaf: the leaf hashes."""

    error = TypeError


@pytest.mark.parametrize("refuses", [_Refuses, _RefusesWithTypeError])
@pytest.mark.parametrize("where", ["argument", "in a dict", "beside a traced leaf"])
def test_a_static_leaf_whose_eq_raises_is_named_and_poisons_nothing(
    where: str, refuses: type[_Refuses]
) -> None:
    def apply(x: jax.Array, cfg: Static[Any]) -> jax.Array:
        return cfg["op"](x) if isinstance(cfg, dict) else cfg(x)

    if where == "beside a traced leaf":
        f = treespec.jit(lambda x, cfg: cfg["op"](x) * cfg["w"])

        def call(op: Any) -> Any:
            return f(jnp.ones(2), {"op": op, "w": jnp.ones(2)})
    else:
        f = treespec.jit(apply)

        def call(op: Any) -> Any:
            return f(jnp.ones(2), {"op": op} if where == "in a dict" else op)

    np.testing.assert_allclose(call(refuses(2)), 2.0)
    with pytest.raises(ValidationError) as info:
        call(refuses(3))
    message = str(info.value)
    assert "cfg" in message and refuses.__name__ in message, message
    assert "__eq__" in message
    assert "cannot compare" in message
    # Nothing is poisoned: this function and any other still run.
    np.testing.assert_allclose(call(_Scale(4)), 4.0)
    np.testing.assert_allclose(treespec.jit(apply)(jnp.ones(2), _Scale(5)), 5.0)


class _Cfg:
    """A mutable config hashed by value, as a user writes one."""

    def __init__(self, k: int) -> None:
        self.k = k

    def __hash__(self) -> int:
        return hash(self.k)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Cfg) and self.k == other.k


def _step(x: Any, cfg: Static[_Cfg]) -> Any:
    return x * cfg.k


def _step_array(x: jax.Array, cfg: Static[_Cfg]) -> jax.Array:
    return x * cfg.k


def _step_dict(x: jax.Array, cfg: Static[dict[str, Any]]) -> jax.Array:
    return x * cfg["c"].k


def _step_rest(x: jax.Array, *rest: Static[_Cfg]) -> jax.Array:
    return x * rest[0].k


_CHANGED_IN_PLACE = {
    # x unannotated: x and cfg flattened together, a traced and a static leaf
    "positional, mixed": (treespec.jit(_step), lambda c: (jnp.ones(2), c)),
    # x an array: handed to JAX whole; cfg alone, all static
    "positional, whole and static": (
        treespec.jit(_step_array),
        lambda c: (jnp.ones(2), c),
    ),
    "positional, a static dict": (
        treespec.jit(_step_dict),
        lambda c: (jnp.ones(2), {"c": c}),
    ),
    "call route (*args)": (treespec.jit(_step_rest), lambda c: (jnp.ones(2), c)),
    "vmap": (treespec.vmap(_step_array), lambda c: (jnp.ones((3, 2)), c)),
    "checkpoint": (treespec.checkpoint(_step_array), lambda c: (jnp.ones(2), c)),
    "grad": (
        treespec.grad(lambda x, cfg: jnp.sum(_step_array(x, cfg))),
        lambda c: (jnp.ones(2), c),
    ),
}


@pytest.mark.parametrize("route", sorted(_CHANGED_IN_PLACE))
def test_a_config_changed_in_place_is_seen_at_its_next_call(route: str) -> None:
    # The Performance page's promise: a static object hashed by value and
    # changed in place gets a new key at its next call, on every route.
    transformed, args = _CHANGED_IN_PLACE[route]
    cfg = _Cfg(2)
    first = transformed(*args(cfg))
    cfg.k = 5
    second = transformed(*args(cfg))
    np.testing.assert_allclose(second, np.asarray(first) * 5 / 2)
