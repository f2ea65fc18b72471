"""Every problem of one call at once, grouped by argument in parameter order.

A route's view of a call (`CallView`: the flattened leaves with their kinds,
the arguments handed to JAX whole) is checked here: the structure of the whole
arguments, each leaf against its annotation (`validate.py`), and the leaves
JAX would refuse (an unhashable static leaf, a non-array traced one, a
deleted buffer), each named with its fix.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax

from ..._model.errors import RETURN, Issue, ValidationError, argument_of
from ..._model.spec import Node, Param, Spec
from ..planning.plan import CallView, Kind, Plan
from ..planning.resolve import walk_value
from ..planning.values import is_array_like
from ..reading.flags import Flags
from .diagnose import deleted_issue, static_issue, traced_issue
from .validate import Pair, check_call, pairs_of

__all__ = ["Whole", "call_issues", "check_view", "plan_issues", "return_pairs"]


#: An argument handed to JAX whole: its parameter, its value, its flag entry.
Whole = tuple[Param, Any, Any]


def _whole_and_sorted(
    spec: Spec, pairs: Sequence[Pair], whole: Sequence[Whole], *, check: bool = True
) -> tuple[list[Issue], list[Pair]]:
    """The structure issues of the arguments handed over whole (none unless
    `check`), and every pair of the call (theirs too) in parameter order."""
    issues: list[Issue] = []
    every: list[Pair] = []
    for param, value, flag in whole:
        infos, found, _ = walk_value(
            value,
            param.node,
            path=param.name,
            argument=param.name,
            flags=flag,
            default="dynamic",
            check=check,
        )
        issues.extend(found)
        every.extend(pairs_of(infos, jax.tree_util.tree_leaves(value)))
    every.extend(pairs)
    order = _param_order(spec)
    every.sort(key=lambda pair: order(pair[0].argument))
    return issues, every


def _param_order(spec: Spec) -> Callable[[str], int]:
    """Sort key of an argument name (`cfg`, `rest[0]`): its parameter's position."""
    order = {p.name: i for i, p in enumerate(spec.params)}
    return lambda argument: order.get(argument.split("[")[0], len(order))


def call_issues(
    spec: Spec,
    pairs: Sequence[Pair],
    whole: Sequence[Whole] = (),
    structure: Sequence[Issue] = (),
    *,
    check: bool = True,
) -> list[Issue]:
    """Every problem of one call at once, grouped by argument in parameter order.

    `pairs` are the flattened leaves with their infos and kinds (as a route's
    `CallView.pairs`), `whole` the arguments handed to JAX whole with their
    flag entries (`CallView.whole`), `structure` the structure issues already
    found (`build_plan`'s). Adds the structure issues of `whole`, each leaf
    checked against its annotation (as `check_view` does while tracing), and
    the leaves JAX would refuse (an unhashable static leaf, a non-array traced
    one) that no other issue names. For a call that fails before it is traced
    (a route's `diagnose`), with the values the caller passed. With `check`
    False (validation off), only the leaves JAX would refuse.
    """
    found, every = _whole_and_sorted(spec, pairs, whole, check=check)
    return _every_issue(spec, [*structure, *found], every, check=check)


def _every_issue(
    spec: Spec, issues: list[Issue], every: Sequence[Pair], *, check: bool = True
) -> list[Issue]:
    # What JAX would refuse first: those issues say why, with a fix, and
    # replace the type check's at the same leaf. A leaf whose structure is
    # wrong (`issues`) is named once, for that alone.
    named = {issue.loc for issue in issues}
    refused: dict[str, Issue] = {}
    for info, kind, value in every:
        if kind is Kind.STATIC:
            issue = static_issue(info, value)
        elif not is_array_like(value):
            issue = traced_issue(info.argument, info.path, value, info.source)
        else:
            issue = deleted_issue(info, kind, value, spec.name)
        if issue is not None:
            refused.setdefault(issue.loc, issue)
    if check:
        issues.extend(i for i in check_call(every) if i.loc not in refused)
    issues.extend(i for loc, i in refused.items() if loc not in named)
    order = _param_order(spec)
    issues.sort(key=lambda issue: order(argument_of(issue.loc) or ""))
    return issues


def plan_issues(
    spec: Spec,
    flags: Flags,
    plan: Plan,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    skip: frozenset[int],
    structure: Sequence[Issue],
    *,
    check: bool = True,
) -> list[Issue]:
    """Every problem of the call a plan was just built for: nothing if
    `structure` (the issues `build_plan` found in the structure) is empty and
    the arguments in `skip` (handed to JAX whole) have the right structure;
    otherwise every problem of the call (`call_issues`).

    The plan's leaves are those of its walk, in its order: the positional
    arguments not in `skip`, then the keywords by name.
    """
    positional = spec.positional
    whole = [
        (positional[i], args[i], flags.by_name.get(positional[i].name))
        for i in sorted(skip)
        if i < len(args)
    ]
    found, whole_pairs = _whole_and_sorted(spec, (), whole)
    if not structure and not found:
        return []  # the usual case: the leaves are checked while tracing
    walked = [v for i, v in enumerate(args) if i not in skip]
    walked += [kwargs[k] for k in sorted(kwargs)]
    every = [*whole_pairs, *pairs_of(plan.infos, jax.tree_util.tree_leaves(walked))]
    order = _param_order(spec)
    every.sort(key=lambda pair: order(pair[0].argument))
    return _every_issue(spec, [*structure, *found], every, check=check)


def check_view(spec: Spec, view: CallView) -> list[Pair]:
    """Validate one call from its route's view; its pairs, for checking the return.

    Checks the structure of the arguments handed to JAX whole (their flag
    entry wins over the markers below, as in the split), every static leaf
    against its type (beartype), every traced leaf's shape and dtype
    (jaxtyping), with dimension names bound across all arguments. Raises
    `ValidationError` naming every problem found.
    """
    issues, pairs = _whole_and_sorted(spec, view.pairs, view.whole)
    issues.extend(check_call(pairs))
    # A static leaf that cannot be hashed (an array at `Static[object]`):
    # jit's key refuses it before tracing; vmap, grad and checkpoint never
    # hash theirs, and refuse it here alike. A tracer is judged by its type.
    named = {issue.loc for issue in issues}
    for info, kind, value in pairs:
        if kind is Kind.STATIC and not isinstance(value, jax.core.Tracer):
            issue = static_issue(info, value)
            if issue is not None and issue.loc not in named:
                issues.append(issue)
    if issues:
        raise ValidationError(issues, spec.name)
    return pairs


def return_pairs(value: Any, node: Node) -> tuple[list[Pair], list[Issue]]:
    """The return value's leaves against the return annotation, and its shape issues."""
    infos, issues, _ = walk_value(
        value, node, path=RETURN, argument=RETURN, default="infer", check=True
    )
    return pairs_of(infos, jax.tree_util.tree_leaves(value)), issues
