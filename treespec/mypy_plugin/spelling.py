"""How a marker is written: the names mypy resolves to a marker, and the
marker at the top of a raw (unanalysed) annotation or of an analysed alias.

Read by the hooks (`markers`), by what a class body says (`nnx.Static[...]`,
a marker on a field of a class that flattens itself) and by the spec nodes
(a marker alias in a type).
"""

from __future__ import annotations

import contextlib
from typing import Any, Final

from mypy.nodes import AssignmentStmt, ClassDef, Decorator, FuncDef, TypeAlias, Var
from mypy.types import (
    CallableType,
    NoneType,
    TupleType,
    Type,
    TypeAliasType,
    UnboundType,
    UnionType,
)

from treespec._model.markers import Marker

#: The class of the marker objects (`Annotated` metadata), as mypy names it
#: (an enum member's full name follows the name it was reached through).
_MARKER_CLASSES: Final = frozenset(
    {"treespec._model.markers.Marker", "treespec.Marker"}
)
#: The marker aliases, by the full name mypy resolves them to (an import under
#: another name, `from treespec import Static as S`, resolves to the same).
MARKER_ALIASES: Final = {
    f"treespec{module}.{m.title}": m
    for m in Marker
    for module in ("", "._model.markers")
}
ANNOTATED: Final = frozenset({"typing.Annotated", "typing_extensions.Annotated"})
_UNIONS: Final = frozenset(
    {
        "typing.Union",
        "typing.Optional",
        "typing_extensions.Union",
        "typing_extensions.Optional",
    }
)

#: How deep a type is followed before the rest is taken as `Any`.
MAX_DEPTH: Final = 40


def lookup(api: Any, name: str, context: Any) -> Any:
    try:
        sym = api.lookup_qualified(name, context, suppress_errors=True)
    except Exception:
        return None
    return getattr(sym, "node", None)


def metadata_markers(api: Any, args: list[Type]) -> list[Marker]:
    """Markers among `Annotated` metadata, known by their class's full name."""
    found = []
    for arg in args:
        name = None
        if isinstance(arg, UnboundType):
            name = arg.name
        if not name:
            continue
        node = lookup(api, name, arg)
        fullname = str(getattr(node, "fullname", "") or "")
        if (
            isinstance(node, Var)
            and fullname.rpartition(".")[0] in _MARKER_CLASSES
            and node.name in Marker.__members__
        ):
            found.append(Marker[node.name])
    return found


def marker_of_alias(t: TypeAliasType) -> Marker | None:
    return MARKER_ALIASES.get(t.alias.fullname) if t.alias is not None else None


def analysed_marker(t: Type | None) -> Marker | None:
    """The marker at the top of an analysed type (through aliases)."""
    for _ in range(MAX_DEPTH):
        if not isinstance(t, TypeAliasType) or t.alias is None:
            return None
        marker = marker_of_alias(t)
        if marker is not None:
            return marker
        t = t.alias.target
    return None


def raw_marker(api: Any, t: Type) -> Marker | None:
    """The marker at the top of an unanalysed annotation, resolving names."""
    for _ in range(MAX_DEPTH):
        if not isinstance(t, UnboundType):
            return None
        node = lookup(api, t.name, t)
        fullname = getattr(node, "fullname", "")
        if fullname in MARKER_ALIASES:
            return MARKER_ALIASES[fullname]
        if fullname in ANNOTATED and t.args:
            markers = metadata_markers(api, list(t.args[1:]))
            if markers:
                return markers[0]
            t = t.args[0]
            continue
        if isinstance(node, TypeAlias):
            return analysed_marker(node.target)
        return None
    return None


def is_none(api: Any, t: Type) -> bool:
    if isinstance(t, NoneType):
        return True
    return isinstance(t, UnboundType) and t.name in ("None", "builtins.None")


def union_members(api: Any, t: Type) -> list[Type] | None:
    """The members of a raw union (`A | B`, `Union[...]`, `Optional[...]`)."""
    if isinstance(t, UnionType):
        return list(t.items)
    if isinstance(t, UnboundType) and t.args:
        fullname = getattr(lookup(api, t.name, t), "fullname", "")
        if fullname in _UNIONS:
            members = list(t.args)
            if fullname.endswith("Optional"):
                members.append(NoneType())
            return members
    return None


def raw_children(t: Type) -> list[Type]:
    if isinstance(t, UnionType):
        return list(t.items)
    if isinstance(t, UnboundType):
        return list(t.args)
    if isinstance(t, CallableType):
        return [*t.arg_types, t.ret_type]
    if isinstance(t, TupleType):
        return list(t.items)
    return []


def raw_types(statement: object, api: Any) -> list[Type]:
    """The annotations of the statement being analysed, before analysis."""
    if isinstance(statement, Decorator):
        statement = statement.func
    if isinstance(statement, FuncDef) and isinstance(
        statement.unanalyzed_type, CallableType
    ):
        raw = statement.unanalyzed_type
        return [*raw.arg_types, raw.ret_type]
    if isinstance(statement, ClassDef):
        return [
            s.unanalyzed_type
            for s in statement.defs.body
            if isinstance(s, AssignmentStmt) and s.unanalyzed_type is not None
        ]
    if isinstance(statement, AssignmentStmt):
        found = []
        if statement.unanalyzed_type is not None:
            found.append(statement.unanalyzed_type)
        # A type alias (`X = ...`, `X: TypeAlias = ...`): its value, as a type.
        from mypy.exprtotype import TypeTranslationError, expr_to_unanalyzed_type

        options = getattr(api, "options", None)
        if options is not None:
            with contextlib.suppress(TypeTranslationError, Exception):
                found.append(expr_to_unanalyzed_type(statement.rvalue, options))
        return found
    return []


def raw_marked(api: Any, t: Type | None) -> bool:
    """Whether a marker is written anywhere in a raw annotation."""
    stack = [t] if t is not None else []
    while stack:
        current = stack.pop()
        if raw_marker(api, current) is not None:
            return True
        stack.extend(raw_children(current))
    return False
