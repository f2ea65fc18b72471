"""Validation without compiling: `validate(value, annotation)` and `@checked`."""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from typing import Any, TypeVar

import jax
from typing_extensions import ParamSpec

from .._model.errors import AT_THE_CALL, SpecError, ValidationError
from .api import caller_namespace, in_class_body, spec_for
from .calling.splitter import Splitter
from .checking.validate import check_call, pairs_of
from .planning.resolve import walk_value
from .reading.flags import Flags
from .reading.hints import parse_annotation
from .reading.typing_forms import Context

__all__ = ["checked", "validate", "validation_enabled"]

_T = TypeVar("_T")
_P = ParamSpec("_P")
_R = TypeVar("_R")


def validation_enabled() -> bool:
    """False when `TREESPEC_VALIDATE=0` turns validation off process-wide."""
    return os.environ.get("TREESPEC_VALIDATE", "1") != "0"


def validate(value: _T, annotation: Any) -> _T:
    """Check `value` against `annotation` as a validated transform would.

    **Arguments:**

    - `value`: any pytree.
    - `annotation`: its annotation, markers included (`Config`,
      `Dynamic[Float[Array, "b n"]]`, `dict[str, Static[int]]`).

    **Returns:**

    `value` itself, when it conforms.

    **Raises:**

    [`ValidationError`][treespec.ValidationError] listing every problem:
    structure (missing or unexpected `TypedDict` keys, wrong containers, tuple
    lengths), static leaves against their types (beartype), array leaves'
    shapes and dtypes (jaxtyping, with dimension names bound across the whole
    value).

    !!! example

        ```python
        import jax.numpy as jnp
        import treespec
        from jaxtyping import Array, Float
        from treespec import Static

        treespec.validate({"n": 3}, dict[str, Static[int]])
        treespec.validate(
            (jnp.ones((2, 3)), jnp.ones((3, 4))),
            tuple[Float[Array, "b n"], Float[Array, "n m"]],
        )
        try:
            treespec.validate({"n": "3"}, dict[str, Static[int]])
        except treespec.ValidationError as e:
            print(e)
        ```
    """
    if not validation_enabled():
        return value
    node = parse_annotation(annotation, Context({}, caller_namespace(1)), "value")
    infos, issues, _ = walk_value(
        value, node, path="value", argument="value", default="infer", check=True
    )
    issues += check_call(pairs_of(infos, jax.tree_util.tree_leaves(value)))
    if issues:
        raise ValidationError(issues, "validate")
    return value


def checked(fun: Callable[_P, _R]) -> Callable[_P, _R]:
    """Validate a plain function's arguments and return value on every call.

    The same checks and messages as a validated [`treespec.jit`][treespec.jit], for
    code that is not compiled. Decorator order with treespec transforms does not matter:
    inside a trace, traced values are judged by their shapes and dtypes.

    **Arguments:**

    - `fun`: the function; its annotations say what to check.

    **Returns:**

    A wrapper with `fun`'s signature that raises
    [`ValidationError`][treespec.ValidationError] on a bad call or a bad return value.

    !!! example

        ```python
        import jax.numpy as jnp
        import treespec
        from jaxtyping import Array, Float

        @treespec.checked
        def matmul(
            x: Float[Array, "b n"], w: Float[Array, "n m"]
        ) -> Float[Array, "b m"]:
            return x @ w

        matmul(jnp.ones((2, 3)), jnp.ones((3, 4)))
        try:
            matmul(jnp.ones((2, 3)), jnp.ones((4, 4)))
        except treespec.ValidationError as e:
            print(e)
        ```
    """
    localns = caller_namespace(1)

    @functools.cache
    def splitter() -> Splitter:
        # The transforms' own splitter: plans once per tree structure, and the
        # same checks they run while tracing; here they run on every call.
        spec = spec_for(fun, localns)
        wrapper.__treespec_spec__ = spec  # type: ignore[attr-defined]
        return Splitter(
            spec,
            Flags(),
            "infer",
            validate=True,
            signature=inspect.signature(fun),
            allow_whole=False,
        )

    @functools.wraps(fun)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        if not validation_enabled():
            return fun(*args, **kwargs)
        split = splitter()
        with AT_THE_CALL:  # raised at the call, not under treespec's frames
            arguments = split.validate_call(*split.split_call(args, kwargs))
        result = fun(*args, **kwargs)
        with AT_THE_CALL:
            split.validate_return(result, arguments)
        return result

    try:
        splitter()
    except SpecError:
        # A method naming its own class (not defined yet): first call instead.
        if not in_class_body(localns):
            raise
    return wrapper
