"""What a call of a `Compiled` differs in from the call it was compiled for:
each leaf, by key path, with both values (`stages.Compiled.__call__`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import jax

from .._model.errors import Issue, describe_value, location
from .._runtime.calling.routes import Key, key_static
from .._runtime.checking.diagnose import aval
from .._runtime.planning.plan import Kind, Split
from .._runtime.planning.values import is_array_like

__all__ = ["Mismatch", "mismatches"]


class Call(Protocol):
    """What is compared of a call: `stages.StagedCall`."""

    key: Key
    split: Split
    dynamic: tuple[Any, ...]

    def arguments(self) -> list[tuple[str, Any, Any]]: ...


class Mismatch(Issue):
    """A leaf of a call that differs from what a `Compiled` was compiled for."""

    def format(self) -> str:
        return f"{self.loc}: compiled for {self.expected}, called with {self.got}"


def _shown(value: Any, other: Any) -> str:
    """A static value as a message shows it: with its type where the two
    values' types differ (`1` and `1.0` are equal)."""
    text = repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    return (
        f"{text} ({type(value).__name__})" if type(value) is not type(other) else text
    )


def mismatches(compiled: Call, call: Call) -> list[Issue]:
    """Each place where `call` differs from the call `compiled` was made for."""
    issues: list[Issue] = []
    for (name, old, _), (_, new, _) in zip(compiled.arguments(), call.arguments()):
        before = jax.tree_util.tree_structure(old)
        after = jax.tree_util.tree_structure(new)
        if before != after:  # type: ignore[operator]
            issues.append(
                Mismatch(location(name, name), f"the structure {before}", f"{after}")
            )
    if issues:
        return issues
    old_split, new_split = compiled.split, call.split
    old_leaves = old_split.merge(key_static(compiled.key), compiled.dynamic)
    new_leaves = new_split.merge(key_static(call.key), call.dynamic)
    pairs: Sequence[tuple[Any, ...]] = list(
        zip(
            old_split.plan.infos,
            old_split.kinds,
            new_split.kinds,
            old_leaves,
            new_leaves,
        )
    )
    for info, old_kind, new_kind, old, new in pairs:
        loc = location(info.argument, info.path)
        static = old_kind is Kind.STATIC
        if static != (new_kind is Kind.STATIC):
            was = _shown(old, new) if static else aval(old)
            now = aval(new) if static else _shown(new, old)
            issues.append(
                Mismatch(
                    loc,
                    f"{was} ({'static' if static else 'traced'})",
                    f"{now} ({'traced' if static else 'static'})",
                )
            )
        elif static and (type(old) is not type(new) or old != new):
            issues.append(Mismatch(loc, _shown(old, new), _shown(new, old)))
        elif not static and aval(old) != aval(new):
            # A value that is no array (a str) is shown as one, as elsewhere.
            got = aval(new) if is_array_like(new) else describe_value(new)
            issues.append(Mismatch(loc, aval(old), got))
    return issues
