"""Issues for leaves that made a call fail: what each leaf should have been."""

from __future__ import annotations

from typing import Any

import jax

from ..._model.errors import Issue, describe_value, location
from ..._model.rules import non_array_fix, unhashable_fix
from ..planning.plan import Kind, LeafInfo
from ..planning.values import is_array, is_hashable

__all__ = [
    "aval",
    "comparison_issue",
    "deleted_issue",
    "static_issue",
    "traced_issue",
]


def aval(value: Any) -> str:
    dims = ",".join(str(d) for d in getattr(value, "shape", ()))
    return f"{getattr(value, 'dtype', type(value).__name__)}[{dims}]"


def traced_issue(argument: str, path: str, leaf: Any, source: str) -> Issue:
    return Issue(
        location(argument, path),
        f"an array or Python scalar, since it is traced ({source})",
        describe_value(leaf),
        non_array_fix(),
    )


def static_issue(info: LeafInfo, leaf: Any) -> Issue | None:
    """Why a leaf held static cannot be: a tracer, or not hashable."""
    loc = location(info.argument, info.path)
    if isinstance(leaf, jax.core.Tracer):
        return Issue(
            loc,
            f"a static (hashable) value ({info.source})",
            describe_value(leaf, tracer_note=True),
            "a traced value reached a static leaf (this call is inside "
            "jax.jit/vmap/grad of your code): mark it Dynamic[...] or pass "
            "static_flags=False for it.",
        )
    if is_hashable(leaf):
        return None
    fix = unhashable_fix(is_array(leaf))
    params = getattr(type(leaf), "__dataclass_params__", None)
    if params is not None and not params.frozen:
        fix = (
            f"{type(leaf).__name__} is a dataclass that is not frozen, so it "
            "cannot be hashed (static leaves are part of the compile-cache "
            "key): declare it @dataclasses.dataclass(frozen=True), or use "
            "treespec.dataclass"
        )
    return Issue(
        loc,
        f"a hashable value, since it is static ({info.source})",
        describe_value(leaf),
        fix,
    )


def deleted_issue(info: LeafInfo, kind: Kind, leaf: Any, function: str) -> Issue | None:
    """A traced leaf whose buffer is gone: donated by an earlier call, or
    deleted. XLA only says "Invalid buffer passed to Execute() as argument 1"."""
    if kind is Kind.STATIC or isinstance(leaf, jax.core.Tracer):
        return None
    is_deleted = getattr(leaf, "is_deleted", None)
    if not isinstance(leaf, jax.Array) or is_deleted is None or not is_deleted():
        return None
    if kind is Kind.DONATE:
        # Which computation gave it away is not known here (another
        # function's donation, `.delete()`): said as such, not blamed on f.
        why = (
            "its buffer was given away before this call: donated to a "
            f"computation (as {function} donates it, {info.source}) or "
            "deleted; pass what the donating call returned, or a live array"
        )
    else:
        why = (
            "it was donated to an earlier computation (a Donate leaf, "
            "donate_argnums) or deleted: pass a live array"
        )
    return Issue(
        location(info.argument, info.path),
        "a live array",
        f"{describe_value(leaf)}, whose buffer has been deleted",
        why,
    )


def comparison_issue(info: LeafInfo, value: Any, other: Any, error: Exception) -> Issue:
    """A static leaf whose `==` raised when compared with the same leaf of an
    earlier call (static leaves are compared by value, as `jax.jit` compares
    its static arguments)."""
    kind = type(value).__name__
    return Issue(
        location(info.argument, info.path),
        f"a static value that == can compare ({info.source})",
        describe_value(value),
        f"{type(other).__name__}.__eq__ raised {type(error).__name__} ({error}) "
        f"when comparing it with a {kind} of an earlier call (a static leaf is "
        "compared with the values of earlier calls, as jax.jit compares its "
        "static arguments): return False (or NotImplemented) from __eq__ for "
        "what it cannot compare, or mark the leaf Dynamic[...] to trace it",
    )
