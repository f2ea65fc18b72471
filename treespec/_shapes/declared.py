"""How a shape check builds an argument its annotations cannot: what the
user declares next to the function (`check_with`), run abstractly.

An optimizer state only its optimizer can make (`optax.OptState`), a model
whose sizes are its constructor's: the user says how to make it, from the
other arguments the check builds (`opt_state=lambda params: tx.init(params)`)
or from nothing (`model=lambda: MLP((2, 8, 1), key=jax.random.key(0))`).
The check calls it under `eval_shape` (Equinox's where it is installed,
which keeps a module's non-array fields), so nothing is computed.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import jax

from .._model.spec import Param

__all__ = [
    "ATTRIBUTE",
    "CONSTRAINTS",
    "EquinoxState",
    "NnxOptimizer",
    "build_declared",
    "constraints_of",
    "values_declared",
    "check_with",
    "declared_of",
    "innermost",
]

#: Where `check_with` keeps its builders: on the innermost function, so that
#: it is found above or below any transform (and `functools.wraps`).
ATTRIBUTE = "__treespec_check_with__"
#: The relations `check_with(constraints=...)` states for a function.
CONSTRAINTS = "__treespec_check_constraints__"

_F = TypeVar("_F", bound=Callable[..., Any])


def innermost(fun: Any) -> Any:
    """The function below every wrapper (`__wrapped__`), a method's too."""
    seen: set[int] = set()
    inner = getattr(fun, "__func__", fun)
    while hasattr(inner, "__wrapped__") and id(inner) not in seen:
        seen.add(id(inner))
        inner = inner.__wrapped__
    return inner


def check_with(
    *, constraints: Sequence[str] = (), **builders: Any
) -> Callable[[_F], _F]:
    """Tell `check_shapes` and `python -m treespec check` how to build
    arguments that their annotations cannot describe.

    Each keyword names a parameter of the decorated function. Its value is
    what the check passes there, or a callable that makes it: the callable's
    parameters name other parameters of the function, and it is called with
    the abstract values the check built for them, under `eval_shape`, so
    nothing is computed. A value given to `check_shapes` still wins. The
    function itself is unchanged, above or below a treespec transform.

    **Arguments:**

    - `constraints`: relations between sizes the annotations do not state,
      in JAX's syntax (`"n == 2*k"`, `"t <= max_len"`): what a note of the
      check suggests, stated where the function is; `check_shapes` and the
      command add them to those they are given. (A parameter named
      `constraints` cannot be declared here: give it to `check_shapes`.)
    - `**builders`: parameter name -> a value, or a callable of other
      parameters (by name) that returns it.

    **Returns:**

    A decorator that returns the function it decorates.

    **Raises:**

    `TypeError` at decoration for a name that is no parameter of the
    function, a builder's parameter that names none, or `constraints` that
    is not a sequence of strings.

    !!! example

        ```python
        import jax.numpy as jnp
        import optax
        import treespec
        from jaxtyping import Array, Float

        tx = optax.adam(1e-3)


        @treespec.check_with(opt_state=lambda w: tx.init(w))
        @treespec.jit
        def step(
            w: Float[Array, "n m"], opt_state: optax.OptState
        ) -> Float[Array, "n m"]:
            updates, _ = tx.update(jnp.ones_like(w), opt_state, w)
            return w + updates


        print(treespec.check_shapes(step).ok)
        ```
    """

    if isinstance(constraints, str) or not all(isinstance(c, str) for c in constraints):
        raise TypeError(
            "check_with: constraints takes a sequence of relations, each a "
            f"string in JAX's syntax, e.g. ('n == 2*k',); got {constraints!r}"
        )
    stated = tuple(constraints)

    def attach(fun: _F) -> _F:
        inner = innermost(fun)
        try:
            names = set(inspect.signature(inner).parameters)
        except (TypeError, ValueError):
            names = None
        where = getattr(inner, "__qualname__", repr(inner))
        for name, builder in builders.items():
            _check_names(where, name, builder, names)
        declared = {**getattr(inner, ATTRIBUTE, {}), **builders}
        setattr(inner, ATTRIBUTE, declared)
        if stated:
            setattr(inner, CONSTRAINTS, (*getattr(inner, CONSTRAINTS, ()), *stated))
        return fun

    return attach


def _check_names(where: str, name: str, builder: Any, names: set[str] | None) -> None:
    if names is None:
        return
    if name not in names:
        raise TypeError(f"check_with: {where} has no parameter {name!r}")
    if not callable(builder):
        return
    for used in inspect.signature(builder).parameters:
        if used not in names or used == name:
            raise TypeError(
                f"check_with: the builder of {name!r} takes {used!r}, which is "
                f"no other parameter of {where}"
            )


class _Beside:
    """How an argument is built when nothing is declared, from the model
    the check built for another argument (`build`)."""

    def build(self, built: Mapping[str, Any]) -> Any:
        raise NotImplementedError


class EquinoxState(_Beside):
    """How an argument annotated `eqx.nn.State` is built when nothing is
    declared: the state of the Equinox modules the check built for the other
    arguments (a method's `self` among them), as `eqx.nn.make_with_state`
    makes it beside its model."""

    def build(self, built: Mapping[str, Any]) -> Any:
        import equinox as eqx

        modules = [value for value in built.values() if isinstance(value, eqx.Module)]
        if not modules:
            raise TypeError("no Equinox module among the other arguments")
        return eqx.filter_eval_shape(eqx.nn.State, modules[0])


class NnxOptimizer(_Beside):
    """How an argument annotated `nnx.Optimizer` is built when nothing is
    declared: an optimizer of the Flax NNX module the check built for the
    other arguments (the first, in the signature's order), as a training
    script makes it beside its model. Its transformation (`optax.sgd`)
    cannot change a shape: an update's shapes are the model's."""

    def build(self, built: Mapping[str, Any]) -> Any:
        from flax import nnx

        optax = importlib.import_module("optax")  # Flax's own dependency
        modules = [
            value
            for value in built.values()
            if isinstance(value, nnx.Module) and not isinstance(value, nnx.Optimizer)
        ]
        if not modules:
            raise TypeError("no Flax NNX module among the other arguments")

        def made(model: Any) -> Any:
            try:
                return nnx.Optimizer(model, optax.sgd(1e-3), wrt=nnx.Param)
            except TypeError:  # a Flax before `wrt`
                return nnx.Optimizer(model, optax.sgd(1e-3))  # type: ignore[call-arg]

        return nnx.eval_shape(made, modules[0])


def _is_equinox_state(annotation: Any) -> bool:
    try:
        import equinox as eqx
    except ImportError:
        return False
    return annotation is eqx.nn.State


def _is_nnx_optimizer(annotation: Any) -> bool:
    module = getattr(annotation, "__module__", "") or ""
    if not isinstance(annotation, type) or not module.startswith("flax"):
        return False
    from flax import nnx

    return issubclass(annotation, nnx.Optimizer)


def _annotation(node: Any) -> Any:
    """A leaf's annotation, or a class node's class."""
    return getattr(node, "annotation", None) or getattr(node, "cls", None)


def _implicit(annotation: Any) -> Any:
    """How an argument of this annotation is built when nothing is declared."""
    if _is_equinox_state(annotation):
        return EquinoxState()
    return NnxOptimizer() if _is_nnx_optimizer(annotation) else None


def constraints_of(inner: Any) -> tuple[str, ...]:
    """The relations `check_with(constraints=...)` stated for a function."""
    return tuple(getattr(innermost(inner), CONSTRAINTS, ()))


def declared_of(inner: Any, params: Iterable[Param] = ()) -> Mapping[str, Any]:
    """How to build each argument the annotations cannot describe, by
    parameter name: what `check_with` declared for a function, an
    `EquinoxState` for a parameter annotated `eqx.nn.State` and an
    `NnxOptimizer` for one annotated `nnx.Optimizer`."""
    found = {p.name: _implicit(_annotation(p.node)) for p in params}
    implicit = {name: how for name, how in found.items() if how is not None}
    return {**implicit, **getattr(innermost(inner), ATTRIBUTE, {})}


def values_declared(declared: Mapping[str, Any]) -> dict[str, Any]:
    """The values declared as they are (no builder): used as values given to
    `check_shapes` are, so that their sizes bind the names."""
    return {
        name: value
        for name, value in declared.items()
        if not callable(value) and not isinstance(value, _Beside)
    }


def build_declared(builder: Any, built: Mapping[str, Any]) -> Any:
    """A declared argument: the value, or the builder called abstractly with
    the abstract values of the parameters it names."""
    if isinstance(builder, _Beside):
        return builder.build(built)
    if not callable(builder):
        return builder
    names = list(inspect.signature(builder).parameters)
    args = {name: built[name] for name in names}
    try:
        import equinox as eqx
    except ImportError:  # equinox is optional: JAX's own
        return jax.eval_shape(lambda kw: builder(**kw), args)
    return eqx.filter_eval_shape(lambda kw: builder(**kw), args)
