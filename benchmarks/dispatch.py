"""Per-call dispatch time of treespec.jit against jax.jit and equinox.filter_jit.

Run: python benchmarks/dispatch.py [--quick] [--only NAME]

`--only` runs one scenario: S1, S1-annotations, S2, S3, S4, method,
method-classes, step or first-call.

Prints, from one run in one process, the median per-call time of each contender
and the ratios the jit issue targets:

- S1: config + params (8 float32[4,4] arrays, x: float32[4,4], 4 static fields);
  the function returns x, so dispatch is all that is timed.
- S1 under other annotations: Static[dict[str, Any]], arrays left to "infer".
- S2: 10, 100, 1000 dynamic leaves plus 10% static leaves.
- S3: a dependent chain of 200 float32[256,256] matmul steps, one
  block_until_ready at the end (dispatch stays asynchronous).
- First call: trace + compile of S1, a fresh function each repeat.
- S4: a model as a list of 12 register_dataclass layers (each two Dynamic
  float32[4,4] arrays and two Static fields, a str and a bool), a TypedDict
  config of six Static scalars, and x: Dynamic[float32[4,4]]; the function
  returns x. jax.jit gets the same data with JAX-native statics: the layers'
  str/bool as meta fields, the config as a NamedTuple in static_argnums.
- method: `model.apply(x)`, a jitted method of an equinox.Module (two arrays,
  a static int field); jax.jit of the unbound function with the module passed,
  and the method decorated with equinox.filter_jit.
- method-classes: the same for a treespec.dataclass (an array, a Static int)
  and a plain class (jax.jit holds the instance static).
- step: a training step as users write it (an `eqx.nn.MLP` 4-16-16-1, optax's
  sgd, a batch of 8), once returning arrays (the parameters as a dict of
  arrays, the optimizer state, the loss) and once returning the model and the
  optimizer state (an Equinox module, whose activation functions are
  non-array leaves); jax.jit takes the array version, or the model split by
  hand (`eqx.partition` before, `eqx.combine` after, as Equinox's docs show).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from collections.abc import Callable
from typing import Any, NamedTuple, TypedDict

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from _timing import compare, machine, table

import treespec
from treespec import Dynamic, Static


class ConfigNT(NamedTuple):
    n_layers: int
    activation: str
    scale: float
    use_bias: bool


class ConfigTD(TypedDict):
    n_layers: Static[int]
    activation: Static[str]
    scale: Static[float]
    use_bias: Static[bool]


def scenario_s1(number: int, repeat: int) -> dict[str, float]:
    params = {f"w{i}": jnp.ones((4, 4), jnp.float32) for i in range(8)}
    x = jnp.ones((4, 4), jnp.float32)
    cfg_nt = ConfigNT(2, "relu", 0.5, True)
    cfg = {"n_layers": 2, "activation": "relu", "scale": 0.5, "use_bias": True}

    def body(params: Any, x: Any, cfg: Any) -> Any:
        return x

    raw = jax.jit(body, static_argnums=2)
    eqx_f = eqx.filter_jit(body)

    @treespec.jit
    def ts_hints(
        params: Dynamic[dict[str, jax.Array]], x: Dynamic[jax.Array], cfg: ConfigTD
    ) -> jax.Array:
        return x

    ts_flags = treespec.jit(body, static_flags=[False, False, True])
    return compare(
        {
            "jax.jit": lambda: raw(params, x, cfg_nt),
            "equinox.filter_jit": lambda: eqx_f(params, x, cfg),
            "treespec.jit (hints)": lambda: ts_hints(params, x, cfg),
            "treespec.jit (static_flags)": lambda: ts_flags(params, x, cfg),
        },
        number=number,
        repeat=repeat,
    )


def s1_signatures(number: int, repeat: int) -> dict[str, float]:
    """S1 under other annotations: what leaving arrays to "infer" costs."""
    params = {f"w{i}": jnp.ones((4, 4), jnp.float32) for i in range(8)}
    x = jnp.ones((4, 4), jnp.float32)
    cfg_nt = ConfigNT(2, "relu", 0.5, True)
    cfg = {"n_layers": 2, "activation": "relu", "scale": 0.5, "use_bias": True}
    raw = jax.jit(lambda params, x, cfg: x, static_argnums=2)

    @treespec.jit
    def marked(
        params: Dynamic[dict[str, jax.Array]], x: Dynamic[jax.Array], cfg: ConfigTD
    ) -> jax.Array:
        return x

    @treespec.jit
    def any_cfg(
        params: Dynamic[dict[str, jax.Array]],
        x: Dynamic[jax.Array],
        cfg: Static[dict[str, Any]],
    ) -> jax.Array:
        return x

    @treespec.jit
    def inferred(
        params: dict[str, jax.Array], x: jax.Array, cfg: ConfigTD
    ) -> jax.Array:
        return x

    return compare(
        {
            "jax.jit": lambda: raw(params, x, cfg_nt),
            "Dynamic params and x, cfg: ConfigTD": lambda: marked(params, x, cfg),
            "Dynamic params and x, cfg: Static[dict[str, Any]]": lambda: any_cfg(
                params, x, cfg
            ),
            "params and x inferred, cfg: ConfigTD": lambda: inferred(params, x, cfg),
        },
        number=number,
        repeat=repeat,
    )


def scenario_s2(n: int, number: int, repeat: int) -> dict[str, float]:
    params = {f"w{i:04d}": jnp.ones((2,), jnp.float32) for i in range(n)}
    n_static = max(1, n // 10)
    static = tuple(range(n_static))
    static_dict = {f"s{i:04d}": i for i in range(n_static)}

    def body(params: Any, static: Any) -> Any:
        return params["w0000"]

    raw = jax.jit(body, static_argnums=1)
    eqx_f = eqx.filter_jit(body)
    ts_f = treespec.jit(body, static_flags=[False, True])

    @treespec.jit
    def ts_hints(
        params: Dynamic[dict[str, jax.Array]], static: Static[dict[str, int]]
    ) -> jax.Array:
        return params["w0000"]

    return compare(
        {
            "jax.jit": lambda: raw(params, static),
            "equinox.filter_jit": lambda: eqx_f(params, static_dict),
            "treespec.jit (static_flags)": lambda: ts_f(params, static_dict),
            "treespec.jit (hints)": lambda: ts_hints(params, static_dict),
        },
        number=number,
        repeat=repeat,
    )


def scenario_s3(steps: int, repeat: int) -> dict[str, float]:
    x0 = jnp.ones((256, 256), jnp.float32) / 256.0
    w = jnp.eye(256, dtype=jnp.float32)

    def step(x: Any, w: Any, cfg: Any) -> Any:
        return jnp.tanh(x @ w) * cfg["scale"]

    cfg = {"scale": 1.0}
    raw = jax.jit(lambda x, w: jnp.tanh(x @ w) * 1.0)
    eqx_f = eqx.filter_jit(step)
    ts_f = treespec.jit(step)

    def chain(f: Callable[[Any], Any]) -> Callable[[], Any]:
        def run() -> Any:
            x = x0
            for _ in range(steps):
                x = f(x)
            return jax.block_until_ready(x)

        return run

    per_chain = compare(
        {
            "jax.jit": chain(lambda x: raw(x, w)),
            "equinox.filter_jit": chain(lambda x: eqx_f(x, w, cfg)),
            "treespec.jit": chain(lambda x: ts_f(x, w, cfg)),
        },
        number=1,
        repeat=repeat,
    )
    return {name: t / steps for name, t in per_chain.items()}


# S4: a model of register_dataclass layers. For treespec (and equinox) every
# field is a pytree child, so name/use_bias are leaves whose markers make them
# static; for jax.jit they are meta fields, part of the tree structure.
@dataclasses.dataclass
class Layer:
    w: Dynamic[jax.Array]
    b: Dynamic[jax.Array]
    name: Static[str]
    use_bias: Static[bool]


jax.tree_util.register_dataclass(
    Layer, data_fields=["w", "b", "name", "use_bias"], meta_fields=[]
)


@dataclasses.dataclass
class LayerMeta:
    w: jax.Array
    b: jax.Array
    name: str
    use_bias: bool


jax.tree_util.register_dataclass(
    LayerMeta, data_fields=["w", "b"], meta_fields=["name", "use_bias"]
)


class ModelConfigNT(NamedTuple):
    n_layers: int
    d_model: int
    scale: float
    dropout: float
    activation: str
    use_norm: bool


class ModelConfigTD(TypedDict):
    n_layers: Static[int]
    d_model: Static[int]
    scale: Static[float]
    dropout: Static[float]
    activation: Static[str]
    use_norm: Static[bool]


def scenario_s4(number: int, repeat: int) -> dict[str, float]:
    n_layers = 12
    arrays = [
        (jnp.full((4, 4), i, jnp.float32), jnp.full((4, 4), -i, jnp.float32))
        for i in range(n_layers)
    ]
    names = [f"layer{i}" for i in range(n_layers)]
    model = [
        Layer(w, b, name, i % 2 == 0)
        for i, ((w, b), name) in enumerate(zip(arrays, names))
    ]
    model_meta = [
        LayerMeta(w, b, name, i % 2 == 0)
        for i, ((w, b), name) in enumerate(zip(arrays, names))
    ]
    cfg_nt = ModelConfigNT(n_layers, 4, 0.5, 0.1, "gelu", True)
    cfg: ModelConfigTD = {
        "n_layers": n_layers,
        "d_model": 4,
        "scale": 0.5,
        "dropout": 0.1,
        "activation": "gelu",
        "use_norm": True,
    }
    x = jnp.arange(16, dtype=jnp.float32).reshape(4, 4)

    def body(model: Any, cfg: Any, x: Any) -> Any:
        return x

    raw = jax.jit(body, static_argnums=1)
    eqx_f = eqx.filter_jit(body)

    @treespec.jit
    def ts_hints(
        model: list[Layer], cfg: ModelConfigTD, x: Dynamic[jax.Array]
    ) -> jax.Array:
        # Checked while tracing: the markers made these static, the arrays traced.
        layer = model[0]
        assert isinstance(layer.w, jax.core.Tracer)
        assert isinstance(layer.b, jax.core.Tracer)
        assert type(layer.name) is str and type(layer.use_bias) is bool
        assert type(cfg["n_layers"]) is int and type(cfg["activation"]) is str
        assert isinstance(x, jax.core.Tracer)
        return x

    expected = raw(model_meta, cfg_nt, x)
    got = ts_hints(model, cfg, x)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    assert bool(jnp.array_equal(got, expected)) and bool(jnp.array_equal(got, x))
    assert bool(jnp.array_equal(eqx_f(model, cfg, x), expected))
    times = compare(
        {
            "jax.jit": lambda: raw(model_meta, cfg_nt, x),
            "equinox.filter_jit": lambda: eqx_f(model, cfg, x),
            "treespec.jit (hints)": lambda: ts_hints(model, cfg, x),
        },
        number=number,
        repeat=repeat,
    )
    # Every timed call was a cache hit.
    assert ts_hints.trace_count == 1, ts_hints.trace_count
    return times


class _Block(eqx.Module):
    w: jax.Array
    b: jax.Array
    depth: int = eqx.field(static=True)

    def raw(self, x: jax.Array) -> jax.Array:
        return x

    @eqx.filter_jit
    def eqx_apply(self, x: jax.Array) -> jax.Array:
        return x

    @treespec.jit
    def apply(self, x: jax.Array) -> jax.Array:
        return x


def scenario_method(number: int, repeat: int) -> dict[str, float]:
    block = _Block(jnp.ones((4, 4)), jnp.zeros(4), 2)
    x = jnp.ones((4, 4))
    raw = jax.jit(_Block.raw)
    for f in (lambda: raw(block, x), lambda: block.eqx_apply(x)):
        assert bool(jnp.array_equal(f(), x))
    assert bool(jnp.array_equal(block.apply(x), x))
    times = compare(
        {
            "jax.jit": lambda: raw(block, x),
            "equinox.filter_jit": lambda: block.eqx_apply(x),
            "treespec.jit": lambda: block.apply(x),
        },
        number=number,
        repeat=repeat,
    )
    assert vars(_Block)["apply"].trace_count == 1
    return times


@treespec.dataclass
class _Frozen:
    w: jax.Array
    depth: Static[int]

    def raw(self, x: jax.Array) -> jax.Array:
        return x

    @treespec.jit
    def apply(self, x: jax.Array) -> jax.Array:
        return x


class _Plain:
    def __init__(self, depth: int) -> None:
        self.depth = depth

    def raw(self, x: jax.Array) -> jax.Array:
        return x

    @treespec.jit
    def apply(self, x: jax.Array) -> jax.Array:
        return x


def scenario_method_classes(number: int, repeat: int) -> dict[str, float]:
    """A method of a treespec.dataclass and one of a plain class, against
    jax.jit of the unbound function with the instance passed (a plain
    instance as a static argument: jax.jit cannot trace it)."""
    frozen, plain = _Frozen(jnp.ones((4, 4)), 2), _Plain(2)
    x = jnp.ones((4, 4))
    frozen_raw = jax.jit(_Frozen.raw)
    plain_raw = jax.jit(_Plain.raw, static_argnums=0)
    for f in (
        lambda: frozen_raw(frozen, x),
        lambda: frozen.apply(x),
        lambda: plain_raw(plain, x),
        lambda: plain.apply(x),
    ):
        assert bool(jnp.array_equal(f(), x))
    return compare(
        {
            "treespec.dataclass: jax.jit": lambda: frozen_raw(frozen, x),
            "treespec.dataclass: treespec.jit": lambda: frozen.apply(x),
            "plain class: jax.jit (instance static)": lambda: plain_raw(plain, x),
            "plain class: treespec.jit": lambda: plain.apply(x),
        },
        number=number,
        repeat=repeat,
    )


def first_call(repeat: int) -> dict[str, float]:
    params = {f"w{i}": jnp.ones((4, 4), jnp.float32) for i in range(8)}
    x = jnp.ones((4, 4), jnp.float32)
    cfg = {"n_layers": 2, "activation": "relu", "scale": 0.5, "use_bias": True}
    cfg_nt = ConfigNT(2, "relu", 0.5, True)
    times: dict[str, list[float]] = {"jax.jit": [], "treespec.jit": []}
    for i in range(repeat):

        def body(params: Any, x: Any, cfg: Any, i: int = i) -> Any:
            return jnp.sin(x) * i + sum(params.values())

        start = time.perf_counter()
        jax.block_until_ready(jax.jit(body, static_argnums=2)(params, x, cfg_nt))
        times["jax.jit"].append(time.perf_counter() - start)
        start = time.perf_counter()
        jax.block_until_ready(
            treespec.jit(body, static_flags=[False, False, True, None])(params, x, cfg)
        )
        times["treespec.jit"].append(time.perf_counter() - start)
    return {k: statistics.median(v) for k, v in times.items()}


_TX = optax.sgd(1e-2)


def _mlp_loss(model: Any, x: jax.Array, y: jax.Array) -> jax.Array:
    return jnp.mean((jax.vmap(model)(x) - y) ** 2)


def _step_model(model: Any, opt_state: Any, x: jax.Array, y: jax.Array) -> Any:
    """The step that returns the model and the optimizer state."""
    loss, grads = eqx.filter_value_and_grad(_mlp_loss)(model, x, y)
    updates, opt_state = _TX.update(grads, opt_state)
    return eqx.apply_updates(model, updates), opt_state, loss


def scenario_step(number: int, repeat: int) -> dict[str, float]:
    """A training step returning arrays, and one returning the model."""
    model = eqx.nn.MLP(4, 1, 16, 2, key=jax.random.key(0))
    params, static = eqx.partition(model, eqx.is_array)
    opt_state = _TX.init(params)
    x, y = jnp.ones((8, 4)), jnp.zeros((8, 1))

    def step_arrays(params: Any, opt_state: Any, x: jax.Array, y: jax.Array) -> Any:
        def loss(p: Any) -> jax.Array:
            return _mlp_loss(eqx.combine(p, static), x, y)

        value, grads = jax.value_and_grad(loss)(params)
        updates, opt_state = _TX.update(grads, opt_state)
        return optax.apply_updates(params, updates), opt_state, value

    arrays_jax = jax.jit(step_arrays)
    arrays_eqx = eqx.filter_jit(step_arrays)
    arrays_ours = treespec.jit(step_arrays)
    model_eqx = eqx.filter_jit(_step_model)
    model_ours = treespec.jit(_step_model)

    def model_by_hand() -> Any:  # split before, combine after
        p, s = eqx.partition(model, eqx.is_array)
        new, state, loss = arrays_jax(p, opt_state, x, y)
        return eqx.combine(new, s), state, loss

    calls = {
        "arrays: jax.jit": lambda: arrays_jax(params, opt_state, x, y),
        "arrays: equinox.filter_jit": lambda: arrays_eqx(params, opt_state, x, y),
        "arrays: treespec.jit": lambda: arrays_ours(params, opt_state, x, y),
        "model: jax.jit, split by hand": model_by_hand,
        "model: equinox.filter_jit": lambda: model_eqx(model, opt_state, x, y),
        "model: treespec.jit": lambda: model_ours(model, opt_state, x, y),
    }
    losses = {name: float(call()[2]) for name, call in calls.items()}
    assert len(set(losses.values())) == 1, losses
    return compare(calls, number=number, repeat=repeat)


SCENARIOS = (
    "S1",
    "S1-annotations",
    "S2",
    "S3",
    "S4",
    "method",
    "method-classes",
    "step",
    "first-call",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    parser.add_argument(
        "--only", choices=SCENARIOS, metavar="NAME", help="run one scenario"
    )
    opts = parser.parse_args()
    number, repeat = (200, 5) if opts.quick else (2000, 15)

    def runs(name: str) -> bool:
        return opts.only is None or opts.only == name

    print(f"# treespec dispatch benchmark\n\n{machine()}\n")
    ratios: dict[str, float] = {}
    if runs("S1"):
        s1 = scenario_s1(number, repeat)
        print(table("S1: config + params", s1, "jax.jit"), "\n")
        ratios["S1 treespec.jit (hints) / jax.jit"] = (
            s1["treespec.jit (hints)"] / s1["jax.jit"]
        )
        ratios["S1 treespec.jit (static_flags) / jax.jit"] = (
            s1["treespec.jit (static_flags)"] / s1["jax.jit"]
        )
        ratios["S1 equinox.filter_jit / treespec.jit (hints)"] = (
            s1["equinox.filter_jit"] / s1["treespec.jit (hints)"]
        )
    if runs("S1-annotations"):
        s1_other = s1_signatures(number, repeat)
        print(table("S1 under other annotations", s1_other, "jax.jit"), "\n")
    if runs("S2"):
        for n in (10, 100, 1000):
            s2 = scenario_s2(n, max(20, number // max(1, n // 10)), repeat)
            title = f"S2: {n} dynamic leaves + {max(1, n // 10)} static"
            print(table(title, s2, "jax.jit"), "\n")
            if n == 1000:
                ratios["S2 (1000 leaves) treespec.jit / jax.jit"] = (
                    s2["treespec.jit (static_flags)"] / s2["jax.jit"]
                )
    if runs("S3"):
        # Each sample is one chain of 200 matmuls, whose time varies by +-15% on
        # a 2-core machine: many rounds, so the median settles.
        s3 = scenario_s3(200, 10 * repeat)
        print(table("S3: chain of 200 matmul steps (per step)", s3, "jax.jit"), "\n")
        ratios["S3 treespec.jit / jax.jit"] = s3["treespec.jit"] / s3["jax.jit"]
    if runs("first-call"):
        fc = first_call(max(3, repeat // 3))
        print(table("First call (trace + compile)", fc, "jax.jit"), "\n")
        ratios["first call treespec.jit / jax.jit"] = fc["treespec.jit"] / fc["jax.jit"]
    if runs("S4"):
        s4 = scenario_s4(number, repeat)
        title = "S4: 12 register_dataclass layers + TypedDict config"
        print(table(title, s4, "jax.jit"), "\n")
        ratios["S4 treespec.jit / jax.jit"] = s4["treespec.jit (hints)"] / s4["jax.jit"]
        ratios["S4 equinox.filter_jit / treespec.jit"] = (
            s4["equinox.filter_jit"] / s4["treespec.jit (hints)"]
        )
    if runs("method"):
        method = scenario_method(number, repeat)
        print(table("method: a jitted method of an equinox.Module", method, "jax.jit"))
        print()
        ratios["method treespec.jit / jax.jit"] = (
            method["treespec.jit"] / method["jax.jit"]
        )
        ratios["method equinox.filter_jit / treespec.jit"] = (
            method["equinox.filter_jit"] / method["treespec.jit"]
        )
    if runs("method-classes"):
        classes = scenario_method_classes(number, repeat)
        title = "method: of a treespec.dataclass, of a plain class"
        print(table(title, classes, "treespec.dataclass: jax.jit"), "\n")
        ratios["method (treespec.dataclass) treespec.jit / jax.jit"] = (
            classes["treespec.dataclass: treespec.jit"]
            / classes["treespec.dataclass: jax.jit"]
        )
        ratios["method (plain class) treespec.jit / jax.jit"] = (
            classes["plain class: treespec.jit"]
            / classes["plain class: jax.jit (instance static)"]
        )
    if runs("step"):
        step = scenario_step(number // 4, repeat)
        title = "step: a training step returning arrays, and one returning the model"
        print(table(title, step, "arrays: jax.jit"), "\n")
        ratios["step (arrays) treespec.jit / jax.jit"] = (
            step["arrays: treespec.jit"] / step["arrays: jax.jit"]
        )
        ratios["step (model) treespec.jit / jax.jit"] = (
            step["model: treespec.jit"] / step["arrays: jax.jit"]
        )
        ratios["step (model) equinox.filter_jit / treespec.jit"] = (
            step["model: equinox.filter_jit"] / step["model: treespec.jit"]
        )
    if ratios:
        print("### Ratios\n\n| ratio | value |\n| --- | --- |")
        for name, value in ratios.items():
            print(f"| {name} | {value:.2f} |")


if __name__ == "__main__":
    main()
