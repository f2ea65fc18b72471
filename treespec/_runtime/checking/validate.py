"""Leaf checks: static leaves with beartype, array leaves with jaxtyping.

The verdicts are beartype's and jaxtyping's; this module only decides which one
applies to a leaf, judges tracers by what they stand for, binds jaxtyping
dimension names across every argument of one call and its return value, and
turns a failure into an `Issue` (where, expected, got, hint). Every problem of
one call at once, with what JAX would refuse, is `call_checks.py`'s.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Sequence
from typing import Any

import jax
import numpy as np
from beartype import BeartypeConf
from beartype.door import is_bearable

from ..._model.errors import (
    Issue,
    SpecError,
    describe_value,
    location,
)
from ..._model.spec import AnyNode, LeafNode, Node, NoneNode, UnionNode
from ..planning.plan import Kind, LeafInfo
from ..planning.values import is_array
from ..reading.typing_forms import is_jaxtyping_array
from .dims import (
    Binding,
    Bindings,
    blame,
    bound_dims,
    expression_axes,
    names_bound,
    names_read,
    reading_order,
)
from .scopes import scopes_of
from .symbolic import is_dim_expr, match_symbolic, symbolic_conflicts

__all__ = [
    "Pair",
    "check_call",
    "check_leaves",
    "jaxtyping_context",
    "pairs_of",
]

#: A static leaf's check: an `int` where a `float` is annotated (an `int` or
#: `float` where a `complex` is), as PEP 484, mypy and pyright take it.
_PEP484 = BeartypeConf(is_pep484_tower=True)
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


def _for_value(annotation: Any, value: Any) -> tuple[Any, Any]:
    """The jaxtyping type to check `value` against, and the value to check:
    over `jax.Array` when the value is one (a tracer stands for whatever
    array the annotation names), over `np.ndarray` when it is NumPy's (JAX
    takes NumPy arrays and scalars wherever it takes its own: a data
    loader's batch at `Float[Array, "b n"]`)."""
    array_type = getattr(annotation, "array_type", None)
    if isinstance(value, jax.Array):
        if array_type not in (None, jax.Array, Any):
            return _over(annotation, jax.Array), value
    elif isinstance(value, (np.ndarray, np.generic)) and array_type is jax.Array:
        value = np.asarray(value)
        dtype = jax.dtypes.canonicalize_dtype(value.dtype)
        if dtype != value.dtype:  # float64 without x64: JAX takes it as float32
            value = np.broadcast_to(np.zeros((), dtype), value.shape)
        return _over(annotation, np.ndarray), value
    return annotation, value


@functools.lru_cache(maxsize=256)
def _over(annotation: Any, array_type: type) -> Any:
    """`annotation` (a jaxtyping array type) over another array type: its
    dtype category (`Float`) with the same dimensions. Older jaxtyping keeps
    no category on the array type, only its dtypes: made again from them."""
    import jaxtyping

    category: Any = getattr(annotation, "dtype", None)
    if not (
        isinstance(category, type) and issubclass(category, jaxtyping.AbstractDtype)
    ):
        category = type(
            annotation.__name__,
            (jaxtyping.AbstractDtype,),
            {"dtypes": annotation.dtypes},
        )
    return category[array_type, annotation.dim_str]


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
        against, value = _for_value(annotation, value)
        if isinstance(value, against):
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
        if annotation is int and is_dim_expr(value):
            # A symbolic size stands for an int (`x.shape[0]` under
            # `jax.export`, a static size of a shape check).
            return True, _text(node, kind)
        try:
            return is_bearable(value, annotation, conf=_PEP484), _text(node, kind)
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
    issues = _check_indexed(pairs, bindings or Bindings(), checked)
    return [issues[i] for i in sorted(issues)]


def _check_indexed(
    pairs: Sequence[Pair], bindings: Bindings, checked: Sequence[Pair]
) -> dict[int, Issue]:
    """`check_leaves`'s problems, by the index of the leaf in `pairs`."""
    issues: dict[int, Issue] = {}
    failed: list[int] = []
    # A leaf whose annotation has an axis of an expression (a rotary table's
    # `"max_len d//2"`) after the leaves that bind its names (`x: "t d"`).
    annotations = [getattr(info.node, "annotation", None) for info, _, _ in pairs]
    for i in reading_order(annotations, bindings.sizes):
        info, kind, value = pairs[i]
        try:
            ok, expected = _leaf_ok(info.node, kind, value, info.path, bindings)
        except Exception as error:
            import jaxtyping

            if not isinstance(error, jaxtyping.AnnotationError):
                raise
            refused = {n for j in issues for n in names_bound(annotations[j])}
            if names_read(annotations[i]) & refused:
                continue  # its names' binder is refused: that one is said
            raise _unreadable(info, error) from None
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
    return issues


def _unreadable(info: LeafInfo, error: Exception) -> SpecError:
    """A `SpecError` naming the leaf for jaxtyping's refusal of its annotation
    (an axis of an expression of names no leaf of the call binds:
    `"max_len k//2"`)."""
    text = getattr(info.node, "text", "") or repr(info.node)
    annotation = getattr(info.node, "annotation", None)
    axes = ", ".join(f"'{axis}'" for axis in expression_axes(annotation)) or "an axis"
    return SpecError(
        f"{location(info.argument, info.path)}: {text} cannot be checked: "
        f"{axes} names a size no other leaf of the call binds, which jaxtyping "
        "needs to read it. Name that size in the signature, or annotate the "
        "leaf without the expression"
    )


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
    return _for_value(node.annotation, value)


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
            try:
                if not isinstance(array, hint):
                    continue
            except jaxtyping.AnnotationError:  # `h//2`: needs the others
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


def pairs_of(infos: Sequence[LeafInfo], leaves: Sequence[Any]) -> list[Pair]:
    """Each leaf with its info and its resolved kind."""
    return [(info, info.resolve(leaf), leaf) for info, leaf in zip(infos, leaves)]


def check_call(arguments: Sequence[Pair], returned: Sequence[Pair] = ()) -> list[Issue]:
    """Check a call's leaves, then its return's, with dimension names shared
    in each scope (`scopes_of`).

    When `returned` is given, the arguments are checked again first (silently:
    they passed already) so that their dimension sizes are bound for the return.
    """
    infos = [info for info, _, _ in [*arguments, *returned]]
    scopes = scopes_of(infos, len(arguments))
    found: dict[int, Issue] = {}
    for scope in dict.fromkeys(scopes):
        mine = [i for i, s in enumerate(scopes) if s == scope]
        args = [i for i in mine if i < len(arguments)]
        rets = [i - len(arguments) for i in mine if i >= len(arguments)]
        before = [arguments[i] for i in args]
        bindings = Bindings()
        with jaxtyping_context():
            issues = _check_indexed(before, bindings, ())
            if returned:
                issues = _check_indexed([returned[i] for i in rets], bindings, before)
        for i, issue in issues.items():
            found[(rets if returned else args)[i]] = issue
    return [found[i] for i in sorted(found)]
