"""Leaf checks: static leaves with beartype, array leaves with jaxtyping.

The verdicts are beartype's and jaxtyping's; this module only decides which one
applies to a leaf, judges tracers by what they stand for, binds jaxtyping
dimension names across every argument of one call and its return value, and
turns a failure into an `Issue` (where, expected, got, hint).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import jax
import numpy as np
from beartype.door import is_bearable

from .._model.errors import (
    RETURN,
    Issue,
    ValidationError,
    argument_of,
    describe_value,
    location,
)
from .._model.spec import AnyNode, LeafNode, Node, NoneNode, Param, Spec, UnionNode
from .diagnose import deleted_issue, static_issue, traced_issue
from .dims import Binding, Bindings, blame, bound_dims
from .flags import Flags
from .hints import is_jaxtyping_array
from .plan import CallView, Kind, LeafInfo, Plan
from .resolve import walk_value
from .symbolic import match_symbolic, symbolic_conflicts
from .values import is_array, is_array_like

__all__ = [
    "Whole",
    "call_issues",
    "check_call",
    "check_leaves",
    "check_view",
    "plan_issues",
    "jaxtyping_context",
    "pairs_of",
    "return_pairs",
]

#: For a Python scalar annotation on a traced leaf: the dtype kinds it stands for
#: (the numeric tower: an int is a fine float, a bool a fine int).
_SCALAR_KINDS = {bool: "b", int: "biu", float: "biuf", complex: "biufc"}
_PY_KIND = {bool: "b", int: "i", float: "f", complex: "c"}


@contextlib.contextmanager
def jaxtyping_context() -> Iterator[None]:
    """One jaxtyping memo for all the array checks of one call."""
    import jaxtyping

    with jaxtyping.jaxtyped("context"):
        yield


def _jaxtyping_disabled() -> bool:
    import jaxtyping

    return bool(getattr(jaxtyping.config, "jaxtyping_disable", False))


def _for_value(annotation: Any, value: Any) -> Any:
    """A jaxtyping type over `jax.Array` when the value is one (e.g. a tracer)."""
    array_type = getattr(annotation, "array_type", None)
    if isinstance(value, jax.Array) and array_type not in (None, jax.Array, Any):
        return annotation.dtype[jax.Array, annotation.dim_str]
    return annotation


def _text(node: Node, kind: Kind) -> str:
    text = node.text or "Any"
    if node.marker is None or not text.startswith(node.marker.title):
        text += f" ({kind.value})"
    return text


def _shaped(value: Any) -> tuple[Any, bool]:
    """`value` with a shape (a Python scalar as a NumPy one), and whether its
    shape is symbolic (a `jax.export` trace), which jaxtyping cannot check."""
    if not hasattr(value, "shape"):
        value = np.asarray(value)
    return value, not all(isinstance(d, int) for d in value.shape)


def _check_array(
    node: LeafNode, value: Any, path: str, bindings: Bindings
) -> tuple[bool, str]:
    """(ok, expected) for a dynamic leaf against an array or scalar annotation."""
    annotation = node.annotation
    if is_jaxtyping_array(annotation):
        if _jaxtyping_disabled():
            return True, ""
        value, symbolic = _shaped(value)
        expected = node.text
        already = bindings.explain(annotation)
        if already:
            expected += f" with {already}"
        bound = {name: size for name, (size, _) in bindings.sizes.items()}
        if symbolic:
            # Symbolic dimensions (`jax.export`, `eval_shape`): jaxtyping
            # compares integers only, so `symbolic` matches the shape.
            dtypes = getattr(annotation, "dtypes", None)
            ok, new = match_symbolic(annotation.dim_str, value.shape, bound)
            if ok and (
                not isinstance(dtypes, (tuple, list))  # `Shaped`: any dtype
                or str(value.dtype) in dtypes
            ):
                for name, size in new:
                    bindings.sizes.setdefault(name, (size, path))
                return True, expected
            return False, expected
        if isinstance(value, _for_value(annotation, value)):
            # jaxtyping's memo holds the concrete sizes only.
            dims = bound_dims(annotation, value.shape)
            if symbolic_conflicts(dims, bound):
                return False, expected
            bindings.record(annotation, value.shape, path)
            return True, expected
        return False, expected
    if node.is_array:
        return is_array(value), node.text
    if annotation in _SCALAR_KINDS:
        allowed = _SCALAR_KINDS[annotation]
        expected = f"{node.text} (a Python scalar or 0-d array of that kind)"
        if type(value) in _PY_KIND:
            return _PY_KIND[type(value)] in allowed, expected
        dtype = getattr(value, "dtype", None)
        if dtype is None or getattr(value, "shape", None) != ():
            return False, expected
        return np.dtype(dtype).kind in allowed, expected
    if is_array(value):
        return isinstance(value, annotation) if isinstance(
            annotation, type
        ) else True, node.text
    return is_bearable(value, annotation), node.text


def _leaf_ok(
    node: Node, kind: Kind, value: Any, path: str, bindings: Bindings
) -> tuple[bool, str]:
    if isinstance(node, UnionNode):
        texts = []
        for member in node.members:
            if isinstance(member, NoneNode):
                continue
            ok, text = _leaf_ok(member, kind, value, path, bindings)
            if ok:
                return True, text
            texts.append(text)
        return False, node.text or " | ".join(texts)
    if isinstance(node, AnyNode) or not isinstance(node, LeafNode):
        return True, ""
    if kind is Kind.STATIC:
        annotation = node.annotation
        try:
            return is_bearable(value, annotation), _text(node, kind)
        except Exception:  # beartype cannot check this hint: nothing to say
            return True, ""
    return _check_array(node, value, path, bindings)


def check_leaves(
    pairs: Sequence[Pair],
    bindings: Bindings | None = None,
    checked: Sequence[Pair] = (),
) -> list[Issue]:
    """Check each (leaf info, resolved kind, value); all problems, in order.

    `checked` are the leaves checked before these, with the same `bindings`
    (the arguments, when `pairs` is the return value): when leaves disagree
    on a dimension, they are never the ones blamed (see `dims.py`).
    """
    bindings = bindings if bindings is not None else Bindings()
    issues: dict[int, Issue] = {}
    failed: list[int] = []
    for i, (info, kind, value) in enumerate(pairs):
        ok, expected = _leaf_ok(info.node, kind, value, info.path, bindings)
        if ok:
            continue
        if _dims_of(info, kind, value) is not None:
            failed.append(i)
        issues[i] = Issue(
            location(info.argument, info.path),
            expected,
            describe_value(value),
            _numpy_scalar_fix(info.node, kind, value),
        )
    if failed:  # the first binder may be the odd one out
        _reblame(pairs, checked, failed, issues)
    return [issues[i] for i in sorted(issues)]


def _dims_of(info: LeafInfo, kind: Kind, value: Any) -> Any:
    """`(hint, shape)` of a traced leaf checked by a jaxtyping annotation, or None."""
    node = info.node
    if (
        kind is Kind.STATIC
        or not isinstance(node, LeafNode)
        or not is_jaxtyping_array(node.annotation)
        or _jaxtyping_disabled()
    ):
        return None
    value, symbolic = _shaped(value)
    if symbolic:
        return None  # symbolic dimensions (`jax.export`): not bound here
    return _for_value(node.annotation, value), value


def _reblame(
    pairs: Sequence[Pair],
    checked: Sequence[Pair],
    failed: Sequence[int],
    issues: dict[int, Issue],
) -> None:
    """Blame the leaves that disagree with the others on a dimension, not
    those that met a binding made first (see `dims.py`): rewrites `issues`."""
    import jaxtyping

    bound: list[Binding] = []
    alone: set[int] = set()
    for index, (info, kind, value) in enumerate([*checked, *pairs]):
        found = _dims_of(info, kind, value)
        if found is None:
            continue
        hint, array = found
        with jaxtyping.jaxtyped("context"):  # a memo of its own: alone
            if not isinstance(array, hint):
                continue
        alone.add(index - len(checked))
        dims = bound_dims(hint, array.shape)
        bound.append(Binding(info.path, dims, fixed=index < len(checked)))
    blamed, involved = blame(bound)
    for i, (info, _, value) in enumerate(pairs):
        why = blamed.get(info.path)
        if why is not None:
            issues[i] = Issue(
                location(info.argument, info.path),
                f"{info.node.text} with {why.expected}",
                describe_value(value),
                why.groups,
            )
        elif i in failed and i in alone and info.path in involved:
            del issues[i]  # it agrees with the size the others settle on


def _numpy_scalar_fix(node: Node, kind: Kind, value: Any) -> str:
    """The fix for a NumPy scalar at a static Python scalar annotation."""
    annotation = getattr(node, "annotation", None)
    if kind is not Kind.STATIC or not isinstance(value, np.generic):
        return ""
    if annotation not in _SCALAR_KINDS:
        return ""
    name = annotation.__name__
    return (
        f"a NumPy scalar is not a Python {name}: pass {name}(...) to hold it "
        "static, or mark the leaf Dynamic[...] to trace it"
    )


Pair = tuple[LeafInfo, Kind, Any]
#: An argument handed to JAX whole: its parameter, its value, its flag entry.
Whole = tuple[Param, Any, Any]


def pairs_of(infos: Sequence[LeafInfo], leaves: Sequence[Any]) -> list[Pair]:
    """Each leaf with its info and its resolved kind."""
    return [(info, info.resolve(leaf), leaf) for info, leaf in zip(infos, leaves)]


def check_call(arguments: Sequence[Pair], returned: Sequence[Pair] = ()) -> list[Issue]:
    """Check a call's leaves, then its return's, with dimension names shared.

    When `returned` is given, the arguments are checked again first (silently:
    they passed already) so that their dimension sizes are bound for the return.
    """
    bindings = Bindings()
    with jaxtyping_context():
        issues = check_leaves(arguments, bindings)
        if returned:
            issues = check_leaves(returned, bindings, arguments)
    return issues


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
    # replace the type check's at the same leaf.
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
    issues.extend(refused.values())
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
    return _every_issue(spec, [*structure, *found], every)


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
