"""Where a call's leaves bind their dimension names (DESIGN, "Where a
dimension name binds"): the call's one scope, or an instance's own for a
class the call holds several times, as jaxtyping checks each instance at its
`__init__`. `validate.py` checks each scope's leaves together; the shape
checker builds its arguments by the same rule (`_shapes/scopes.py`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

__all__ = ["scopes_of"]


class _Owned(Protocol):
    """A leaf's info (`planning.plan.LeafInfo`): the instance it is a field
    of, `(its class, its key path)`, if any."""

    @property
    def owner(self) -> tuple[type, str] | None: ...


def scopes_of(infos: Sequence[_Owned], arguments: int | None = None) -> list[Any]:
    """Where each leaf binds its dimension names: in the call's one scope
    (None), or, for a leaf of an instance of a class the call holds several
    times (an MLP's list of `Linear`s, two arguments of one class), in that
    instance's own (its `LeafInfo.owner`), as jaxtyping checks each instance
    at its `__init__`.

    The first `arguments` of `infos` are the arguments' leaves (all of them
    when None), the others the return's: how the arguments bind never
    depends on what the function returns. An argument's instance binds
    apart where the arguments hold its class several times; a returned
    instance, where the arguments and the return together do (a graph given
    and a graph returned: the given one's names are the call's, the
    returned one's its own)."""
    given = len(infos) if arguments is None else arguments
    apart, returned_apart = _held_several(infos[:given]), _held_several(infos)
    return [
        info.owner
        if info.owner is not None
        and info.owner[0] in (apart if i < given else returned_apart)
        else None
        for i, info in enumerate(infos)
    ]


def _held_several(infos: Sequence[_Owned]) -> set[type]:
    """The classes of which `infos` hold several instances (distinct paths)."""
    held: dict[type, set[str]] = {}
    for info in infos:
        if info.owner is not None:
            held.setdefault(info.owner[0], set()).add(info.owner[1])
    return {cls for cls, paths in held.items() if len(paths) > 1}
