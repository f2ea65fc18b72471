"""A call's plan: each argument at its place, walked by the resolution rule.

`build_plan` runs once per tree structure of a function's calls: for each
positional and keyword argument, its parameter, its flag entry and where that
entry was written (`static_flags[...]`), then the walk of `resolve.py` over
the argument's leaves; the `Plan` keeps every leaf's `LeafInfo` in JAX's
flatten order.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..._model.errors import Issue, SpecError, plural
from ..._model.rules import DEFAULT_POLICIES, uncovered_fix
from ..._model.spec import KEYWORD_KINDS, Param, Spec
from ..reading.flags import FlagEntry, Flags, flag_kind
from .plan import Plan
from .resolve import Walk, walk

__all__ = ["DEFAULTS", "build_plan", "check_default", "check_fits"]

#: The default policies (one table, read by the mypy plugin too).
DEFAULTS: tuple[str, ...] = DEFAULT_POLICIES


def check_fits(
    signature: inspect.Signature,
    name: str,
    args: tuple[Any, ...] | Sequence[Any],
    kwargs: Mapping[str, Any],
) -> None:
    """Raise the `TypeError` Python would for a call that does not fit.

    A keyword named like a positional-only parameter goes to `**kwargs` when
    there is one (which takes any name), never to that parameter.
    `Signature.bind` follows that rule only from Python 3.13 on (before, it
    raises), so the call is checked without such keywords: every Python then
    binds as Python calls.
    """
    params = signature.parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        only = {p.name for p in params if p.kind is p.POSITIONAL_ONLY}
        kwargs = {k: v for k, v in kwargs.items() if k not in only}
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise TypeError(f"{name}(): {exc}") from None


def check_default(default: str) -> None:
    if default not in DEFAULTS:
        raise SpecError(
            f"default must be one of {', '.join(map(repr, DEFAULTS))}; got {default!r}."
        )


def _positional_place(
    spec: Spec, flags: Flags, i: int
) -> tuple[Param, str, FlagEntry, str]:
    """The parameter, name, flag entry and flag source of positional argument i."""
    positional = spec.positional
    if i < len(positional):
        param = positional[i]
        return (
            param,
            param.name,
            flags.by_name.get(param.name),
            flags.source.get(param.name, "static_flags"),
        )
    var_pos = spec.var_positional
    assert var_pos is not None
    j = i - len(positional)
    name = f"{var_pos.name}[{j}]"
    outer: Any = flags.by_name.get(var_pos.name)
    source = flags.source.get(var_pos.name, f"static_flags[{var_pos.name!r}]")
    if flag_kind(outer) != "sequence":
        return var_pos, name, outer, source
    if j >= len(outer):
        raise SpecError(
            f"{source} has {plural(len(outer), 'entry')} but the call passes "
            f"more *{var_pos.name} arguments: give one entry per argument, or "
            f"one entry for all of them ({source} = False, say)."
        )
    return var_pos, name, outer[j], f"{source}[{j}]"


def _keyword_place(
    spec: Spec, flags: Flags, key: str
) -> tuple[Param, str, FlagEntry, str]:
    """The parameter, name, flag entry and flag source of keyword argument key."""
    named = spec.param(key)
    if named is not None and named.kind in KEYWORD_KINDS:
        return (
            named,
            key,
            flags.by_name.get(key),
            flags.source.get(key, f"static_flags[{key!r}]"),
        )
    var_kw = spec.var_keyword
    assert var_kw is not None
    outer: Any = flags.by_name.get(var_kw.name)
    if flag_kind(outer) == "mapping":
        flag = outer.get(key)
    elif flag_kind(outer) in ("bool", "callable"):
        flag = outer
    else:
        flag = None
    name = f"{var_kw.name}[{key!r}]"
    return var_kw, name, flag, f"static_flags[{var_kw.name!r}][{key!r}]"


def build_plan(
    spec: Spec,
    flags: Flags,
    default: str,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    treedef: Any,
    *,
    signature: inspect.Signature | None = None,
    check: bool = True,
    skip: frozenset[int] = frozenset(),
    float_args: frozenset[int] = frozenset(),
    numbers: Callable[[], int] | None = None,
) -> tuple[Plan, list[Issue]]:
    """Resolve every leaf of `(args, kwargs)`, in `jax.tree_util` flatten order.

    Positional arguments whose index is in `skip` are left out (the caller hands
    them to JAX whole). In the positional parameters whose index is in
    `float_args` (what `grad` differentiates), "infer" traces unannotated
    Python floats too. `numbers` numbers the plan's splits (one counter per
    function, see `plan.SplitId`).
    """
    check_default(default)
    if signature is not None:
        check_fits(signature, spec.name, args, kwargs)
    w = Walk(default=default, check=check)
    positional = spec.positional
    for i, value in enumerate(args):
        if i in skip:
            continue
        param, name, flag, src = _positional_place(spec, flags, i)
        w.trace_floats = i in float_args
        walk(w, value, param.node, name, name, None, flag, src)
    float_names = {positional[i].name for i in float_args if i < len(positional)}
    for key in sorted(kwargs):
        param, name, flag, src = _keyword_place(spec, flags, key)
        w.trace_floats = key in float_names
        walk(w, kwargs[key], param.node, name, name, None, flag, src)
    w.trace_floats = False
    if w.uncovered:
        raise SpecError(
            f"default='error' and no marker or flag covers "
            f"{', '.join(w.uncovered)} in the call of {spec.name}. {uncovered_fix()}"
        )
    # The structure's issues only: `validate.plan_issues` adds the others.
    return Plan(treedef, tuple(w.infos), tuple(w.held), numbers), w.issues
