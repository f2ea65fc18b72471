"""A size that only the return annotation names (`dout` of `-> "b dout"`)
and that always comes out as a size the arguments' annotations name (`din`):
the function returns din where its annotation keeps a size of its own.
DESIGN: between sizes the annotations name, an equality the body needs is an
error (distinct names may differ, as in jaxtyping). It is read at symbolic
sizes, where a size that comes out as a name is that name for every value;
an unknown the code set equal to it (a constructor's `out_features == din`)
is how it usually got there, and the message says so."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

import jax

from .._model.errors import Issue
from .._model.spec import Node
from .._runtime.calling.splitter import Splitter
from .._runtime.planning.resolve import walk_value
from .._runtime.reading.typing_forms import is_jaxtyping_array
from .arguments import Target
from .leaves import own_names
from .orders import witnesses
from .readings import by_names
from .report import ShapeIssue
from .tracing import returned_line, trace

__all__ = ["returned_issue"]


def returned_issue(
    output: Any,
    t: Target,
    splitter: Splitter,
    taken: tuple[dict[str, str], Collection[str]],
    runs: tuple[Callable[[dict[str, int]], Any], Callable[[Any], Any]],
    names: tuple[Sequence[str], Mapping[str, int]] | None,
) -> ShapeIssue | None:
    """The error of `t`'s `output` where a size only the return annotation
    names came out another (`returned_as_another`): at symbolic sizes, else
    at every witness of the `names` (those free, and those a value given
    fixes; None: no witness runs); at the line that returned it. `runs`
    are the run at concrete sizes (its output), and its call built at them
    (None: at symbolic sizes). `taken` are the relations the run took
    (unknown -> size), and those of them guessed (`relations.matched`):
    one assignment of several that pass, so a size that came out by a
    guess is an error only where the run fails with the guess made the
    return's own size instead (`_forced`). Only where an unknown was set
    to that argument's size: a static's choice, a default or a library's
    own (`padding="SAME"`) that keeps two sizes equal is the caller's to
    make. Sizes a value given fixes stay put at every witness: never
    read."""
    relations, guessed = taken
    of = (t.spec.returns, [p.node for p in t.spec.params])
    led = set(relations.values())
    if not led & own_names(of[1]):
        return None  # no unknown was set to an argument's size: none led there
    said = returned_as_another(output, *of, (relations, led))
    at: dict[str, Any] | None = None
    if said is None and names is not None and concrete_return_only(output, *of):
        free, fixed = names
        every = (witnesses(free), fixed)
        at, said = at_witnesses(runs[0], every, *of, (relations, led))
    if said is None:
        return None
    issue, pair = said
    if not _forced(t, splitter, (runs[1], at), (relations, guessed), pair):
        return None
    message = f"{issue.loc}: expected {issue.expected}, got {issue.got}"
    line = _returned_at(t, splitter, runs[1], at)
    return ShapeIssue("error", t.file, line, t.name, message)


def _forced(
    t: Target,
    splitter: Splitter,
    call: tuple[Callable[[Any], Any], Any],
    taken: tuple[dict[str, str], Collection[str]],
    pair: tuple[str, str],
) -> bool:
    """Whether the run (`call`: its arguments built at sizes) fails with the
    unknowns guessed equal to `came` set to any other size the annotations
    name, the return's `name` first (`pair`): where one runs, the guess was
    one of several that pass (`k == b` of a `top_k`, where `k == n` runs
    too), and nothing forces `name` to come out `came`. True where no guess
    led there."""
    relations, guessed = taken
    name, came = pair
    unknowns = [k for k in guessed if relations.get(k) == came]
    others = own_names([t.spec.returns, *(p.node for p in t.spec.params)])
    before = dict(relations)
    try:
        for other in [name, *sorted(others - {name, came})] if unknowns else []:
            relations.update(dict.fromkeys(unknowns, other))
            try:
                args, kwargs = call[0](call[1])
            except Exception:  # a build that refuses those sizes: not one that runs
                continue
            if trace(t.inner, splitter, args, kwargs).error is None:
                return False
    finally:
        relations.clear()
        relations.update(before)
    return True


def _returned_at(
    t: Target, splitter: Splitter, call: Callable[[Any], Any], at: Any
) -> int:
    """The line of `t` that returned, in a run of its `call` built at `at`;
    its `def` line where that build refuses the sizes (a library's
    constructor may, at symbolic sizes a relation set equal)."""
    try:
        return returned_line(t.inner, splitter, *call(at)) or t.line
    except Exception:  # the finding stands, at the `def` line
        return t.line


def returned_as_another(
    output: Any,
    returns: Node,
    arguments: Iterable[Node],
    taken: tuple[Mapping[str, str], Collection[str]],
    sizes: Mapping[str, int] | None = None,
) -> tuple[Issue, tuple[str, str]] | None:
    """What is wrong with `output`, returned under the annotation `returns`
    (the return value's check already passed), where a name only `returns`
    uses came out as exactly another name of the `arguments`' annotations,
    and the two names; None where none did. At concrete `sizes` (each free
    name's, distinct: a witness), a size that is one name's and no other's
    is read as that name. `taken`: the relations (unknown -> size) the run
    took, said where they led there, and the sizes that count (`led`)."""
    relations, led = taken
    theirs = own_names(arguments)
    for path, text, leaf, token, size in _return_only_axes(output, returns, theirs):
        if sizes is None:
            came = str(size) if str(size) in theirs else None
        else:
            alike = [name for name in theirs if sizes.get(name) == size]
            came = alike[0] if len(alike) == 1 else None
        if came is not None and came != token and came in led:
            return _said(path, text, leaf, (token, came), relations), (token, came)
    return None


def concrete_return_only(output: Any, returns: Node, arguments: Iterable[Node]) -> bool:
    """Whether `output` has an axis that only `returns` names at a concrete
    size (a run at witnesses): `returned_as_another` reads it at those."""
    axes = _return_only_axes(output, returns, own_names(arguments))
    return any(type(size) is int for *_, size in axes)


def at_witnesses(
    trace_at: Callable[[dict[str, int]], Any],
    witnessed: tuple[list[dict[str, int]], Mapping[str, int]],
    returns: Node,
    arguments: Iterable[Node],
    relations: tuple[Mapping[str, str], Collection[str]],
) -> tuple[dict[str, int], tuple[Issue, tuple[str, str]] | None]:
    """`returned_as_another` at each witness (`witnessed`: those of the free
    names, and the sizes a value given fixes; `trace_at` gives the output
    there): what it says at the first, its sizes written as names, where it
    says it at every one (at one, a size may meet another by chance); else
    None. A fixed size, the same at every witness, is never read."""
    every, fixed = witnessed
    said = [
        returned_as_another(
            trace_at({**at, **fixed}), returns, arguments, relations, at
        )
        for at in every
    ]
    pairs = {found[1] for found in said if found is not None}
    if not every or not all(said) or said[0] is None or len(pairs) != 1:
        return {}, None  # at one, or as other names, a size meets one by chance
    (issue, pair), sizes = said[0], {**every[0], **fixed}
    return sizes, (dataclasses.replace(issue, got=by_names(issue.got, every[0])), pair)


def _return_only_axes(
    output: Any, returns: Node, theirs: frozenset[str]
) -> list[tuple[str, str, Any, str, Any]]:
    """The axes of `output` that a name only `returns` uses describes: the
    key path, the annotation as written, the leaf, the name, its size."""
    mine = own_names([returns]) - theirs
    if not mine:
        return []
    infos, _, _ = walk_value(output, returns, path="return", check=False)
    found = []
    for info, leaf in zip(infos, jax.tree_util.tree_leaves(output)):
        annotation = getattr(info.node, "annotation", None)
        shape = getattr(leaf, "shape", None)
        if not is_jaxtyping_array(annotation) or shape is None:
            continue
        tokens = str(getattr(annotation, "dim_str", "")).split()
        if len(tokens) != len(shape) or any(t[:1] in "*#." for t in tokens):
            continue
        found += [
            (info.path, info.node.text, leaf, token, size)
            for token, size in zip(tokens, shape)
            if token in mine
        ]
    return found


def _said(
    path: str,
    expected: str,
    leaf: Any,
    names: tuple[str, str],
    relations: Mapping[str, str],
) -> Issue:
    name, came = names
    where = "the return value" + (f", at {path}" if path != "return" else "")
    shape = ",".join(map(str, leaf.shape))
    why = [f"{k} == {v}" for k, v in relations.items() if v == came]
    because = f" ({', '.join(why)}, as the code needs)" if why else ""
    return Issue(
        where,
        expected,
        f"{leaf.dtype}[{shape}]: {name}, which only the return annotation "
        f"names, always comes out {came}{because}, a size the annotations "
        "keep distinct from it",
    )
