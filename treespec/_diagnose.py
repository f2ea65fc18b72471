"""Issues for leaves that made a call fail: what each leaf should have been."""

from __future__ import annotations

from typing import Any

import jax

from ._errors import Issue, describe_value, location
from ._plan import LeafInfo
from ._rules import is_array, is_hashable, non_array_fix, unhashable_fix

__all__ = ["aval", "static_issue", "traced_issue"]


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
