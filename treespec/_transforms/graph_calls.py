"""A transform's call of its function, traced, and what comes out of it.

While tracing, every transform runs its function through `run` (the return
checked; when the call holds Flax NNX objects, what the function changed in
them handed back beside the result, see `_runtime/planning/graph.py`) and hands its
JAX transform `traced_output`'s arrays; `finish` turns what JAX returned into
the function's result, writing the NNX changes into the caller's objects.
`pmap` and `shard_map`, whose copies run one per device, refuse a change
instead, never drop it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._model.errors import Issue, SpecError, ValidationError, mark_from_body
from .._runtime.calling.splitter import Splitter
from .._runtime.planning.graph import Updated, settle
from .._runtime.planning.graph_session import Session
from .._runtime.planning.plan import Kind, Split
from .outputs import WithStatic, join_output, split_output

__all__ = ["finish", "run", "traced_output"]

#: Why a change of an NNX object in an argument JAX is handed whole is refused.
_WHOLE = (
    "traced whole (Dynamic[...] with nothing below, or a False flag): JAX is "
    "handed it as it is"
)


def run(
    fun: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    split: Split,
    splitter: Splitter,
    checked: Any,
) -> Any:
    """`fun` called on the rebuilt call (while tracing), its return checked;
    when the call holds NNX objects, what it changed comes back beside the
    result (`Updated`)."""
    name = splitter.spec.name
    graph = split.plan.graph
    route = split.plan.route
    whole = route.whole_session(args)
    session = None
    if graph is not None:
        donated = graph.donated(split.kinds, Kind.DONATE)
        session = Session(graph, route.root_of(args, kwargs), split.links, donated)
    try:
        result = fun(*args, **kwargs)
    except Exception as error:  # the user's own: never explained away
        mark_from_body(error)
        raise
    splitter.validate_return(result, checked)
    if whole is not None:
        whole.refuse_changes(result, name, _WHOLE)
    return result if session is None else session.close(result, name)


def finish(
    out: Any,
    split: Split,
    splitter: Splitter,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    write: bool = True,
) -> Any:
    """What a JAX transform of the traced body returned, as the function's
    result: non-array leaves joined back, and what the function changed in
    the call's NNX objects written into the caller's (unless `write` is
    false: `eval_shape`'s values are abstract)."""
    if type(out) is not Updated:
        return join_output(out)
    joined = Updated(
        join_output(out.result), out.indices, join_output(out.values), out.nodes
    )
    call, named = splitter.bind(args, kwargs)
    root = split.plan.route.root_of(call, named)
    return settle(joined, split.plan.graph, root, write=write)


def traced_output(
    out: Any,
    split: Split,
    transform: str,
    name: str,
    writes_back: bool,
    output_tree: str | None,
) -> Any:
    """What a traced body hands its JAX transform: the arrays of the result
    apart from the rest (`outputs.split_output`), and, when the function
    changed NNX objects of its call, their new values too (`Updated`, both
    halves split). A tree of output specs (`output_tree`: `out_shardings`,
    `out_axes`) cannot describe the non-array part nor the new values; a
    transform that cannot write changes back (`writes_back`) refuses them."""
    if type(out) is Updated:
        if not writes_back:
            raise _unwritable(split, out, transform, name)
        if output_tree is not None:
            raise SpecError(
                f"{name} changes NNX Variables of its arguments, whose new "
                f"values a tree of {output_tree} cannot describe (it covers "
                f"the result only): give one {output_tree} entry for the "
                "whole output."
            )
        result, values = split_output(out.result), split_output(out.values)
        return Updated(result, out.indices, values, out.nodes)
    out = split_output(out)
    if output_tree is not None and type(out) is WithStatic:
        # A tree of output specs cannot describe the aux-only part.
        raise SpecError(
            f"{name} returns non-array leaves, which a tree of {output_tree} "
            f"cannot describe (it covers array outputs only): give one "
            f"{output_tree} entry for the whole output"
            + (", or callables (eqx.if_array(0))" if output_tree == "out_axes" else "")
            + ", or return arrays only."
        )
    return out


def _unwritable(
    split: Split, out: Updated, transform: str, name: str
) -> ValidationError:
    """What the function changed in NNX objects, which `transform` cannot
    write back (its copies run one per device)."""
    changed = [split.plan.graph.names[j] for j in out.indices]
    got = (
        f"changed inside: {', '.join(changed[:4])}"
        + (f" and {len(changed) - 4} more" if len(changed) > 4 else "")
        if changed
        else "an argument's NNX module or Variable returned"
    )
    issue = Issue(
        "the NNX objects of the call",
        f"left as they are (treespec.{transform} runs one copy per device, "
        "and does not write their changes back)",
        got,
        "return the new values from the function, or call it through "
        "treespec.jit (which writes them back) with shardings",
    )
    return ValidationError([issue], name)
