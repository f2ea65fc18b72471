"""A mypy plugin that reports bad specs in the editor.

Enable it with one line of config::

    [mypy]
    plugins = treespec.mypy_plugin

Error codes (each can be silenced alone, e.g. ``# type: ignore[treespec-nested-marker]``
or ``disable_error_code = treespec-unhashable-static``):

- ``treespec-unhashable-static``: a leaf type under ``Static[...]`` cannot be hashed.
- ``treespec-non-array-dynamic``: a leaf type under ``Dynamic[...]``/``Donate[...]``
  cannot be traced.
- ``treespec-nested-marker``: a marker directly inside another.
- ``treespec-conflicting-union``: a union (``Union``/``Optional`` or ``A | B``)
  whose members disagree on markers.

The plugin builds the runtime's spec nodes (``treespec._spec``) from mypy's types
and asks ``treespec._rules`` for the same verdicts the runtime reads: one
container table, one union rule, one judgement of leaf types. This module never
imports JAX: ``treespec``'s ``__init__`` loads the runtime lazily.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from mypy.errorcodes import ErrorCode
from mypy.nodes import (
    AssignmentStmt,
    CallExpr,
    ClassDef,
    DictExpr,
    FuncDef,
    NameExpr,
    RefExpr,
    StrExpr,
    TypeInfo,
    Var,
)
from mypy.plugin import AnalyzeTypeContext, Plugin
from mypy.types import (
    AnyType,
    CallableType,
    Instance,
    LiteralType,
    NoneType,
    ProperType,
    TupleType,
    Type,
    TypeAliasType,
    TypedDictType,
    TypeOfAny,
    UnboundType,
    UnionType,
    get_proper_type,
)

from treespec._markers import Marker
from treespec._rules import (
    MAPPING_TYPES,
    SEQUENCE_TYPES,
    covered,
    type_problem,
    union_conflict,
    union_fix,
)
from treespec._spec import (
    AnyNode,
    ClassNode,
    LeafNode,
    MappingNode,
    Node,
    NoneNode,
    SequenceNode,
    UnionNode,
    _ClassBacked,
)

__all__ = ["plugin"]

UNHASHABLE_STATIC: Final = ErrorCode(
    "treespec-unhashable-static", "A Static leaf type is not hashable", "treespec"
)
NON_ARRAY_DYNAMIC: Final = ErrorCode(
    "treespec-non-array-dynamic", "A Dynamic leaf type cannot be traced", "treespec"
)
NESTED_MARKER: Final = ErrorCode(
    "treespec-nested-marker", "A marker directly inside another", "treespec"
)
CONFLICTING_UNION: Final = ErrorCode(
    "treespec-conflicting-union", "Union members disagree on markers", "treespec"
)

_MARKERS: Final = ("Static", "Dynamic", "Donate")
_MARKER_FULLNAMES: Final = {
    f"treespec{module}.{name}": name
    for name in _MARKERS
    for module in ("", "._markers")
}
_UNIONS: Final = {
    "typing.Union",
    "typing.Optional",
    "typing_extensions.Union",
    "typing_extensions.Optional",
}
#: Types a marker hook returned: an outer marker leaves what they cover alone
#: (the nearest marker wins). Kept alive here so their ids stay unique.
_marked: dict[int, tuple[ProperType, str]] = {}


def _marker_name(t: Type) -> str | None:
    if isinstance(t, UnboundType):
        last = t.name.rsplit(".", 1)[-1]
        return last if last in _MARKERS else None
    return None


def _mro_names(info: TypeInfo) -> list[str]:
    return [base.fullname for base in info.mro]


def _is_dataclass(info: TypeInfo) -> bool:
    # "dataclass_tag" is set as soon as mypy sees the decorator or the
    # dataclass_transform base; "dataclass" only once the class is finished.
    return any(
        "dataclass_tag" in b.metadata or "dataclass" in b.metadata for b in info.mro
    )


def _is_true(expr: object, value: bool) -> bool:
    return isinstance(expr, NameExpr) and expr.fullname == f"builtins.{value}"


def _says_static(name: str | None, arg: object) -> bool:
    """A keyword of a field specifier that makes the field pytree metadata."""
    if name == "static":  # equinox.field(static=True)
        return _is_true(arg, True)
    if name == "pytree_node":  # flax.struct.field(pytree_node=False)
        return _is_true(arg, False)
    if name == "metadata":  # dataclasses.field(metadata={"static": True})
        if isinstance(arg, DictExpr):
            return any(
                isinstance(k, StrExpr) and k.value == "static" and _is_true(v, True)
                for k, v in arg.items
            )
        if isinstance(arg, CallExpr) and isinstance(arg.callee, RefExpr):
            return arg.callee.fullname == "builtins.dict" and any(
                n == "static" and _is_true(a, True)
                for n, a in zip(arg.arg_names, arg.args)
            )
    return False


def _metadata_fields(info: TypeInfo) -> set[str]:
    """Fields whose specifier makes them pytree metadata: static, never leaves."""
    names: set[str] = set()
    for stmt in info.defn.defs.body:
        if not isinstance(stmt, AssignmentStmt) or not isinstance(
            stmt.rvalue, CallExpr
        ):
            continue
        call = stmt.rvalue
        if any(_says_static(n, a) for n, a in zip(call.arg_names, call.args)):
            names.update(lv.name for lv in stmt.lvalues if isinstance(lv, NameExpr))
    return names


def _fields(t: Instance) -> dict[str, tuple[Type, bool]]:
    """`{name: (type, is pytree metadata)}` of a dataclass-like Instance's fields.

    Generics are expanded. Metadata fields (`equinox.field(static=True)`,
    `flax.struct.field(pytree_node=False)`, `metadata={"static": True}`) are
    never leaves at runtime, whatever the marker around the class.
    """
    # Imported here: importing it before mypy.types is a circular import.
    from mypy.expandtype import expand_type_by_instance

    if not _is_dataclass(t.type):
        return {}
    out = {}
    for base in reversed(t.type.mro[:-1]):
        metadata = _metadata_fields(base)
        for name, node in base.names.items():
            var = node.node
            if (
                isinstance(var, Var)
                and var.type is not None
                and not var.is_classvar
                and not name.startswith("__")
            ):
                out[name] = (expand_type_by_instance(var.type, t), name in metadata)
    return out


_FROZEN_DECORATORS: Final = {
    "treespec._dataclass.dataclass",
    "treespec.dataclass",
    "flax.struct.dataclass",
}


def _decorator_says(info: TypeInfo) -> bool | None:
    """True/False when a decorator on the class settles whether it is hashable."""
    for decorator in info.defn.decorators:
        call = decorator if isinstance(decorator, CallExpr) else None
        target = call.callee if call is not None else decorator
        name = target.fullname if isinstance(target, RefExpr) else ""
        if name in _FROZEN_DECORATORS:
            return True
        if name != "dataclasses.dataclass":
            continue
        flags = {"eq": True, "frozen": False, "unsafe_hash": False}
        if call is not None:
            for arg_name, arg in zip(call.arg_names, call.args):
                if arg_name in flags and isinstance(arg, NameExpr):
                    flags[arg_name] = arg.fullname == "builtins.True"
        return flags["frozen"] or flags["unsafe_hash"] or not flags["eq"]
    return None


def _hash_set_to_none(info: TypeInfo) -> bool:
    """`__hash__ = None` in the class body (its type is not inferred yet)."""
    for stmt in info.defn.defs.body:
        if (
            isinstance(stmt, AssignmentStmt)
            and any(
                isinstance(t, NameExpr) and t.name == "__hash__" for t in stmt.lvalues
            )
            and isinstance(stmt.rvalue, NameExpr)
            and stmt.rvalue.fullname == "builtins.None"
        ):
            return True
    node = info.names["__hash__"].node
    return isinstance(get_proper_type(getattr(node, "type", None)), NoneType)


def _unhashable_class(info: TypeInfo) -> bool:
    """A class whose instances cannot be hashed (`__hash__` is None)."""
    for base in info.mro[:-1]:
        if "__hash__" in base.names:
            return _hash_set_to_none(base)
        if "dataclass_tag" in base.metadata or "dataclass" in base.metadata:
            settled = _decorator_says(base)
            if settled is not None:
                return not settled
            meta = base.metadata.get("dataclass")
            if meta is not None:
                return not meta.get("frozen", False)
    return False


#: How deep a type is followed before the rest is taken as `Any` (a recursive
#: alias expands anew at every level).
_MAX_DEPTH: Final = 40


class _Builder:
    """Builds the shared spec nodes (`treespec._spec`) from mypy's types.

    One per marker hook call: class nodes are cached by full name and type
    arguments (mypy makes new type objects on every expansion), so a
    recursive class is one node that refers to itself; a recursive alias is
    cut at its second expansion, and anything deeper than `_MAX_DEPTH` is
    `Any`.
    """

    def __init__(self) -> None:
        self.classes: dict[tuple[str, str], _ClassBacked] = {}
        self.aliases: set[str] = set()

    def node(self, t: Type, depth: int = 0, top: bool = True) -> Node:
        if depth > _MAX_DEPTH:
            return AnyNode()
        if isinstance(t, TypeAliasType) and t.alias is not None:
            name = f"{t.alias.fullname}[{', '.join(map(str, t.args))}]"
            if name in self.aliases:
                return AnyNode(text=t.alias.name)
            self.aliases.add(name)
            try:
                return self.node(get_proper_type(t), depth + 1, top)
            finally:
                self.aliases.discard(name)
        proper = get_proper_type(t)
        inner = None if top else _marked.get(id(proper))
        node = self._unmarked(proper, depth)
        if inner is not None:
            return node.with_marker(Marker(inner[1].lower()), node.text)
        return node

    def _unmarked(self, proper: ProperType, depth: int) -> Node:
        deeper = depth + 1
        if isinstance(proper, NoneType):
            return NoneNode(text="None")
        if isinstance(proper, UnionType):
            members = tuple(self.node(i, deeper, top=False) for i in proper.items)
            return UnionNode(members=members)
        if isinstance(proper, TupleType):
            items = tuple(self.node(i, deeper, top=False) for i in proper.items)
            return SequenceNode(container="builtins.tuple", items=items)
        if isinstance(proper, TypedDictType):
            typed = MappingNode(cls=proper.fallback.type.fullname, text="TypedDict")
            for key, item in proper.items.items():
                typed.body.fields[key] = self.node(item, deeper, top=False)
            return typed
        if isinstance(proper, CallableType):
            return LeafNode(text="a callable", category="callable")
        if isinstance(proper, LiteralType):
            return LeafNode(text="a Literal", category="literal")
        if isinstance(proper, Instance):
            return self._instance(proper, deeper)
        return AnyNode()

    def _instance(self, t: Instance, depth: int) -> Node:
        info = t.type
        fullname = info.fullname
        if fullname in SEQUENCE_TYPES or fullname in MAPPING_TYPES:
            mapping = fullname in MAPPING_TYPES
            args = t.args[1:] if mapping else t.args
            child = self.node(args[-1], depth, top=False) if args else AnyNode()
            if mapping:
                return MappingNode(cls=fullname, values=child, text=info.name)
            return SequenceNode(container=fullname, rest=child, text=info.name)
        hashable = not _unhashable_class(info)
        fields = _fields(t)
        if not fields:
            names = tuple(_mro_names(info))
            return LeafNode(text=info.name, type_names=names, hashable=hashable)
        key = (fullname, ", ".join(map(str, t.args)))
        cached = self.classes.get(key)
        if cached is not None:
            return cached
        node = ClassNode(cls=fullname, text=info.name, hashable=hashable)
        self.classes[key] = node
        for name, (field, metadata) in fields.items():
            # Metadata fields live in the tree structure, never as leaves
            # (static whatever the marker; JAX compares them by ==).
            if not metadata:
                node.body.fields[name] = self.node(field, depth, top=False)
        return node


def _analyze_marker(marker: str) -> Callable[[AnalyzeTypeContext], Type]:
    code = UNHASHABLE_STATIC if marker == "Static" else NON_ARRAY_DYNAMIC

    def hook(ctx: AnalyzeTypeContext) -> Type:
        args = ctx.type.args
        if len(args) != 1:
            ctx.api.fail(f"{marker}[...] takes exactly one type", ctx.context)
            return AnyType(TypeOfAny.from_error)
        inner = _marker_name(args[0])
        if inner is not None:
            fix = (
                f"write {marker}[...] once"
                if inner == marker
                else f"keep one of {inner}[...] and {marker}[...]"
            )
            ctx.api.fail(
                f"{marker}[{inner}[...]]: a marker directly inside another; {fix}. "
                "(A marker further down, inside a container, is fine: the nearest "
                "one wins.)",
                ctx.context,
                code=NESTED_MARKER,
            )
        _check_pep604_unions(ctx)
        analyzed = ctx.api.analyze_type(args[0])

        reported: set[str] = set()

        def report(message: str) -> None:
            if message not in reported:
                reported.add(message)
                ctx.api.fail(f"{marker}[...]: {message}", ctx.context, code=code)

        node = _Builder().node(analyzed)
        for place in covered(node):
            problem = type_problem(place, Marker(marker.lower()))
            if problem is not None:
                report(problem)
        proper = get_proper_type(analyzed)
        _marked[id(proper)] = (proper, marker)
        return analyzed

    return hook


def _disagreement(items: list[Type]) -> str | None:
    """The markers of a union's members, when they disagree (None aside)."""
    members: list[Node] = []
    for item in items:
        if (
            isinstance(item, UnboundType) and item.name.rsplit(".", 1)[-1] == "None"
        ) or isinstance(get_proper_type(item), NoneType):
            members.append(NoneNode())
        else:
            name = _marker_name(item)
            marker = Marker(name.lower()) if name else None
            text = (
                str(item.args[0])
                if name and isinstance(item, UnboundType) and item.args
                else str(item)
            )
            members.append(AnyNode(marker=marker, text=text))
    if union_conflict(members) is None:
        return None
    return ", ".join(
        (m.marker.title if m.marker else "no marker")
        for m in members
        if not isinstance(m, NoneNode)
    )


def _union_message(shown: str) -> str:
    return f"Union members disagree on markers ({shown}). {union_fix()}"


def _raw_types(statement: object) -> list[Type]:
    """The annotations of the statement being analysed, before analysis."""
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
    if isinstance(statement, AssignmentStmt) and statement.unanalyzed_type:
        return [statement.unanalyzed_type]
    return []


_checked_unions: set[tuple[str, int, int]] = set()


def _check_pep604_unions(ctx: AnalyzeTypeContext) -> None:
    """`A | B` unions reach no plugin hook: look for them when a marker is seen.

    The statement being analysed (a function, a class body) still holds its
    unanalysed annotations; their `|` unions are checked once each.
    """
    semantic = getattr(ctx.api, "api", None)
    module = str(getattr(semantic, "cur_mod_id", ""))
    stack = _raw_types(getattr(semantic, "statement", None))
    while stack:
        t = stack.pop()
        if isinstance(t, UnionType):
            stack.extend(t.items)
            place = (module, t.line, t.column)
            if t.uses_pep604_syntax and place not in _checked_unions:
                _checked_unions.add(place)
                shown = _disagreement(list(t.items))
                if shown is not None:
                    ctx.api.fail(_union_message(shown), t, code=CONFLICTING_UNION)
        elif isinstance(t, UnboundType):
            stack.extend(t.args)
        elif isinstance(t, CallableType):
            stack.extend([*t.arg_types, t.ret_type])
        elif isinstance(t, TupleType):
            stack.extend(t.items)


def _analyze_union(ctx: AnalyzeTypeContext) -> Type:
    args = list(ctx.type.args)
    if ctx.type.name.rsplit(".", 1)[-1] == "Optional" and len(args) == 1:
        args.append(NoneType())
    shown = _disagreement(args)
    if shown is not None:
        ctx.api.fail(_union_message(shown), ctx.context, code=CONFLICTING_UNION)
    return UnionType.make_union([ctx.api.analyze_type(a) for a in args])


class TreespecPlugin(Plugin):
    """Checks `Static`/`Dynamic`/`Donate` specs while mypy analyses types."""

    def get_type_analyze_hook(
        self, fullname: str
    ) -> Callable[[AnalyzeTypeContext], Type] | None:
        if fullname in _MARKER_FULLNAMES:
            return _analyze_marker(_MARKER_FULLNAMES[fullname])
        if fullname in _UNIONS:
            return _analyze_union
        return None


def plugin(version: str) -> type[Plugin]:
    """The entry point mypy calls."""
    return TreespecPlugin
