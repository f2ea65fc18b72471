"""One trace of a checked function at the arguments built for it.

The call is validated on the way in and out as a transform's call is (the
splitter's checks), traced to a program under `jax.make_jaxpr` (nothing is
computed), and the program's reshapes are checked, which JAX does not do at
symbolic sizes (`reshapes.py`). A reshape that fails is reported before a
return value that disagrees with its annotation: it comes first, and is
often why.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Any, Literal

import jax

from .._model.spec import Spec
from .._runtime.calling.splitter import Splitter
from .._runtime.reading.flags import Flags
from .reshapes import Unequal, unequal_reshape
from .user_code import is_abstract, lines_run, unfiltered_tracebacks

__all__ = ["Traced", "returned_line", "splitter_for", "trace"]

Stage = Literal["arguments", "body", "return"]


@dataclasses.dataclass(frozen=True)
class Traced:
    """What a trace found: the output (its arrays abstract), or the error
    raised and at which stage of the call (`arguments`, `body`, `return`)."""

    output: Any = None
    error: Exception | None = None
    stage: Stage = "body"


def splitter_for(fun: Any, spec: Spec, flags: Flags, default: str) -> Splitter:
    """What checks `fun`'s calls against `spec` (with `flags` and the
    `default` marker) as a transform's are: made once per checked function,
    as a transform makes it once, and used for every trace."""
    return Splitter(
        spec,
        flags,
        default,
        validate=True,
        signature=_signature(fun),
        allow_whole=False,
    )


def trace(
    fun: Any,
    splitter: Splitter,
    args: list[Any],
    kwargs: dict[str, Any],
    *,
    returns: bool = True,
) -> Traced:
    """`fun(*args, **kwargs)` traced, its abstract arrays (`jax.ShapeDtypeStruct`)
    as JAX's inputs, validated by `splitter` (`splitter_for`) as a call of a
    transform is (its return value only with `returns`)."""
    leaves, tree = jax.tree_util.tree_flatten((args, kwargs))
    where = [i for i, leaf in enumerate(leaves) if is_abstract(leaf)]
    stage: list[Stage] = ["arguments"]
    aside: list[Any] = []

    def body(*dynamic: Any, returned: bool = True) -> Any:
        full = list(leaves)
        for i, value in zip(where, dynamic):
            full[i] = value
        a, k = jax.tree_util.tree_unflatten(tree, full)
        checked = splitter.validate_call(*splitter.split_call(tuple(a), k))
        stage[0] = "body"
        result = fun(*a, **k)
        stage[0] = "return"
        if returned:
            splitter.validate_return(result, checked)
        out, out_tree = jax.tree_util.tree_flatten(result)
        aside[:] = [out, out_tree]
        return [leaf for leaf in out if isinstance(leaf, jax.Array)]

    abstract = [leaves[i] for i in where]
    try:
        with unfiltered_tracebacks():
            traced = body if returns else functools.partial(body, returned=False)
            program, shapes = jax.make_jaxpr(traced, return_shape=True)(*abstract)
    except Exception as error:  # what JAX (or the body) raised: reported
        if stage[0] == "return":  # a reshape JAX let pass may be why
            unchecked = functools.partial(body, returned=False)
            if (unequal := _reshape_in(unchecked, abstract)) is not None:
                return Traced(error=unequal)
        return Traced(error=error, stage=stage[0])
    unequal = unequal_reshape(program)
    if unequal is not None:
        return Traced(error=unequal)
    out, out_tree = aside
    arrays = iter(shapes)
    return Traced(
        jax.tree_util.tree_unflatten(
            out_tree,
            [next(arrays) if isinstance(leaf, jax.Array) else leaf for leaf in out],
        )
    )


def returned_line(
    fun: Any, splitter: Splitter, args: list[Any], kwargs: dict[str, Any]
) -> int | None:
    """The line of `fun` whose `return` ended the call, traced again without
    the return value's check (`trace`); None where no `return` of its own
    ran."""
    with lines_run(fun) as ran:
        trace(fun, splitter, args, kwargs, returns=False)
    return ran.returned


def _reshape_in(body: Any, abstract: list[Any]) -> Unequal | None:
    """The first reshape of `body`'s program whose sizes differ, or None."""
    try:
        with unfiltered_tracebacks():
            return unequal_reshape(jax.make_jaxpr(body)(*abstract))
    except Exception:  # traced once already: this one should too
        return None


def _signature(fun: Any) -> inspect.Signature | None:
    try:
        return inspect.signature(fun)
    except (TypeError, ValueError):
        return None
