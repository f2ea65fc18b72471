"""A mypy plugin that reports bad specs in the editor.

Enable it with one line of config::

    [mypy]
    plugins = treespec.mypy_plugin

Error codes (each can be silenced alone, e.g. ``# type: ignore[treespec-nested-marker]``
or ``disable_error_code = treespec-unhashable-static``):

- ``treespec-unhashable-static``: a leaf type under ``Static[...]`` cannot be hashed.
- ``treespec-non-array-dynamic``: a leaf type under ``Dynamic[...]``/``Donate[...]``
  cannot be traced.
- ``treespec-nested-marker``: a marker directly inside another (also a union
  member marked otherwise inside a marked union).
- ``treespec-conflicting-union``: a union (``Union``/``Optional`` or ``A | B``)
  whose members disagree on markers.
- ``treespec-bare-marker``: a marker without its one type argument.
- ``treespec-bad-flags``: a literal ``static_flags=`` at a transform's call that
  the function cannot take (unknown parameter, too many entries, an entry that
  is not a flag, ``True`` at an array-annotated parameter).
- ``treespec-bad-default``: a literal ``default=`` that is not a policy.
- ``treespec-held-field``: a ``Dynamic``/``Donate`` marker on a field the class
  holds in its tree structure (``eqx.field(static=True)``, ``pytree_node=False``,
  ``jax.tree.static()``, ``meta_fields``, an NNX attribute that is not data,
  ``Static`` around a ``treespec.dataclass`` field), or ``Static`` on a field
  NNX is told is data.
- ``treespec-unfollowed-class``: a marker on a field of a pytree class that
  flattens itself (``register_pytree_node_class``): nothing can follow it.

How it works, in three parts that keep to what mypy keeps (so a clean run, a
warm-cache run and ``dmypy`` see the same):

- Markers stay in the types. ``Static[int]`` is analysed to mypy's own
  ``TypeAliasType`` of the ``Static`` alias, which mypy expands to ``int``
  wherever it checks, and keeps through copies, generics, aliases and the
  cache. ``Annotated[T, Marker.STATIC]`` (a marker recognised by its metadata
  object's class) becomes the same. Nothing is remembered outside the types.
- What a class body says that its symbol table does not (field specifiers
  such as ``eqx.field(static=True)``, decorators, ``__hash__ = None``) is
  written to ``info.metadata["treespec"]`` when mypy first analyses the class,
  so the cache carries it to modules checked later.
- Verdicts are the runtime's: the plugin builds the spec nodes of
  ``treespec._spec`` from mypy's types and asks ``treespec._rules``
  (``covered``, ``type_problem``, ``union_conflict``, ``marked_union_conflict``).

The plugin never raises: an internal failure becomes a note and mypy goes on.
This module never imports JAX: ``treespec``'s ``__init__`` loads the runtime
lazily.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any, Final

from mypy.errorcodes import ErrorCode
from mypy.nodes import (
    AssignmentStmt,
    CallExpr,
    ClassDef,
    Decorator,
    DictExpr,
    Expression,
    FuncDef,
    MemberExpr,
    NameExpr,
    OverloadedFuncDef,
    RefExpr,
    StrExpr,
    TypeAlias,
    TypeInfo,
    Var,
)
from mypy.plugin import AnalyzeTypeContext, ClassDefContext, FunctionContext, Plugin
from mypy.types import (
    AnyType,
    CallableType,
    Instance,
    LiteralType,
    NoneType,
    Overloaded,
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

from treespec._held import (
    EQX_MODULES,
    EQX_STATIC,
    FLAX_STATIC,
    FLAX_STRUCT_BASES,
    JAX_META_FIELD,
    JAX_STATIC,
    NNX_ANNOTATION,
    NNX_PLAIN,
    NNX_PYTREES,
    NNX_STATIC,
    TREESPEC_STATIC,
    Switch,
    data_conflict,
    held_conflict,
    unfollowed_problem,
)
from treespec._markers import Marker
from treespec._rules import (
    ARRAY_TYPES,
    DEFAULT_POLICIES,
    MAPPING_TYPES,
    SEQUENCE_TYPES,
    covered,
    marked_union_conflict,
    type_problem,
    union_conflict,
    union_fix,
)
from treespec._spec import (
    AnyNode,
    ClassBacked,
    ClassNode,
    LeafNode,
    MappingNode,
    Node,
    NoneNode,
    SequenceNode,
    UnionNode,
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
BARE_MARKER: Final = ErrorCode(
    "treespec-bare-marker", "A marker without its type argument", "treespec"
)
BAD_FLAGS: Final = ErrorCode(
    "treespec-bad-flags", "static_flags that the function cannot take", "treespec"
)
BAD_DEFAULT: Final = ErrorCode(
    "treespec-bad-default", "An unknown default= policy", "treespec"
)
HELD_FIELD: Final = ErrorCode(
    "treespec-held-field",
    "A marker on a field the class holds static (or tells NNX is data)",
    "treespec",
)
UNFOLLOWED_CLASS: Final = ErrorCode(
    "treespec-unfollowed-class",
    "A marker on a field of a class that flattens itself",
    "treespec",
)

_MARKERS_MODULE: Final = "treespec._markers"
#: The class of the marker objects (`Annotated` metadata), as mypy names it
#: (an enum member's full name follows the name it was reached through).
_MARKER_CLASSES: Final = frozenset({"treespec._markers.Marker", "treespec.Marker"})
#: The marker aliases, by the full name mypy resolves them to (an import under
#: another name, `from treespec import Static as S`, resolves to the same).
_MARKER_ALIASES: Final = {
    f"treespec{module}.{m.title}": m for m in Marker for module in ("", "._markers")
}
_CANONICAL: Final = {m: f"{_MARKERS_MODULE}.{m.title}" for m in Marker}
_ANNOTATED: Final = frozenset({"typing.Annotated", "typing_extensions.Annotated"})
_UNIONS: Final = frozenset(
    {
        "typing.Union",
        "typing.Optional",
        "typing_extensions.Union",
        "typing_extensions.Optional",
    }
)

#: The per-class record the plugin keeps in `TypeInfo.metadata` (the cache
#: carries it): `decorators` (full names), `static` (fields a specifier makes
#: pytree metadata), `hash` ("none": the class makes its instances unhashable,
#: "set": it makes them hashable, absent: inherited).
_META: Final = "treespec"

#: Decorators that register a dataclass as a pytree whose fields are children.
_DATACLASS_PYTREES: Final = frozenset(
    {
        "treespec._dataclass.dataclass",
        "treespec.dataclass",
        "flax.struct.dataclass",
        "jax.tree_util.register_dataclass",
        "jax._src.tree_util.register_dataclass",
        "chex._src.dataclass.dataclass",
        "chex.dataclass",
    }
)
#: Decorators that register a class as a pytree whose children the type does
#: not show (its `tree_flatten` decides).
_OPAQUE_PYTREES: Final = frozenset(
    {
        "jax.tree_util.register_pytree_node_class",
        "jax._src.tree_util.register_pytree_node_class",
        "jax.tree_util.register_pytree_with_keys_class",
        "jax._src.tree_util.register_pytree_with_keys_class",
        "jax.tree_util.register_static",
        "jax._src.tree_util.register_static",
    }
)
#: Bases whose subclasses are registered pytrees of their fields.
_PYTREE_BASES: Final = EQX_MODULES | FLAX_STRUCT_BASES | NNX_PYTREES
#: Bases whose subclasses are pytrees of children the type does not show.
_OPAQUE_BASES: Final = frozenset(
    {"flax.nnx.variablelib.Variable", "flax.nnx.variables.Variable"}
)
_FROZEN_DECORATORS: Final = frozenset(
    {
        "treespec._dataclass.dataclass",
        "treespec.dataclass",
        "flax.struct.dataclass",
    }
)

#: How deep a type is followed before the rest is taken as `Any`.
_MAX_DEPTH: Final = 40


# -- what a class body says, recorded while mypy still has the body ----------


def _dotted(expr: Expression) -> str | None:
    if isinstance(expr, NameExpr):
        return expr.name
    if isinstance(expr, MemberExpr):
        prefix = _dotted(expr.expr)
        return f"{prefix}.{expr.name}" if prefix else None
    return None


def _resolve(api: Any, expr: Expression) -> str:
    """The full name an expression refers to (resolved now, or by lookup)."""
    if isinstance(expr, CallExpr):
        expr = expr.callee
    if isinstance(expr, RefExpr) and expr.fullname:
        return expr.fullname
    name = _dotted(expr)
    if name is None:
        return ""
    sym = api.lookup_qualified(name, expr, suppress_errors=True)
    node = getattr(sym, "node", None)
    return str(getattr(node, "fullname", "") or "")


def _is_literal(expr: object, value: bool) -> bool:
    return isinstance(expr, NameExpr) and expr.name == str(value)


def _says_static(name: str | None, arg: object) -> bool:
    """A keyword of a field specifier that makes the field pytree metadata."""
    if name == "static":  # equinox.field(static=True)
        return _is_literal(arg, True)
    if name == "pytree_node":  # flax.struct.field(pytree_node=False)
        return _is_literal(arg, False)
    if name == "metadata":  # dataclasses.field(metadata={"static": True})
        if isinstance(arg, DictExpr):
            return any(
                isinstance(k, StrExpr) and k.value == "static" and _is_literal(v, True)
                for k, v in arg.items
            )
        if isinstance(arg, CallExpr) and isinstance(arg.callee, NameExpr):
            return arg.callee.name == "dict" and any(
                n == "static" and _is_literal(a, True)
                for n, a in zip(arg.arg_names, arg.args)
            )
    return False


#: Calls whose result, assigned to a field, says what the field is: the kind
#: of switch ("jax-static", ...), or NNX data.
_FIELD_CALLS: Final = {
    "jax._src.tree.static": "jax-static",
    "jax.tree.static": "jax-static",
    "flax.nnx.pytreelib.static": "nnx-static",
    "flax.nnx.static": "nnx-static",
    "flax.nnx.pytreelib.data": "nnx-data",
    "flax.nnx.data": "nnx-data",
}
#: NNX's deprecated annotations, by the full name of their alias.
_NNX_ANNOTATIONS: Final = {
    "flax.nnx.pytreelib.Static": "nnx-annotation",
    "flax.nnx.Static": "nnx-annotation",
    "flax.nnx.pytreelib.Data": "nnx-data-annotation",
    "flax.nnx.Data": "nnx-data-annotation",
}


def _specifier(api: Any, call: CallExpr) -> str:
    """What a field specifier call says of its field ("" for nothing)."""
    kind = _FIELD_CALLS.get(_resolve(api, call.callee), "")
    if kind:
        return kind
    for name, arg in zip(call.arg_names, call.args):
        if _says_static(name, arg):
            return "pytree_node" if name == "pytree_node" else "static"
    return ""


def _annotation_says(api: Any, t: Type | None) -> str:
    """`nnx.Static[...]`/`nnx.Data[...]` at the top of a raw annotation."""
    if isinstance(t, UnboundType):
        fullname = getattr(_lookup(api, t.name, t), "fullname", "")
        return _NNX_ANNOTATIONS.get(str(fullname or ""), "")
    return ""


def _field_facts(api: Any, defn: ClassDef) -> tuple[dict[str, str], dict[str, str]]:
    """What the class body says of each field: the fields a specifier holds
    static (name -> the kind of switch), and those NNX is told are data (name
    -> how it is told). Methods count for NNX (`self.x = nnx.data(...)`)."""
    held: dict[str, str] = {}
    data: dict[str, str] = {}

    def note(name: str, kind: str) -> None:
        if kind == "nnx-data":
            data[name] = "nnx.data()"
        elif kind == "nnx-data-annotation":
            data[name] = "nnx.Data[...]"
        elif kind:
            held[name] = kind

    for stmt in defn.defs.body:
        if not isinstance(stmt, AssignmentStmt):
            continue
        names = [lv.name for lv in stmt.lvalues if isinstance(lv, NameExpr)]
        kinds = [_annotation_says(api, stmt.unanalyzed_type)]
        if isinstance(stmt.rvalue, CallExpr):
            kinds.append(_specifier(api, stmt.rvalue))
        for name in names:
            for kind in kinds:
                note(name, kind)
    for method in defn.defs.body:
        func = method.func if isinstance(method, Decorator) else method
        if not isinstance(func, FuncDef):
            continue
        for stmt in _statements(func.body.body):
            lvalue = stmt.lvalues[0] if len(stmt.lvalues) == 1 else None
            if (
                isinstance(lvalue, MemberExpr)
                and isinstance(lvalue.expr, NameExpr)
                and lvalue.expr.name == "self"
                and isinstance(stmt.rvalue, CallExpr)
            ):
                kind = _FIELD_CALLS.get(_resolve(api, stmt.rvalue.callee), "")
                if kind.startswith("nnx"):
                    note(lvalue.name, kind)
    return held, data


def _statements(body: list[Any]) -> Iterator[AssignmentStmt]:
    """The assignments of a function body, in its blocks too (not nested
    functions)."""
    from mypy.nodes import Block

    stack = list(body)
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, AssignmentStmt):
            yield stmt
        elif not isinstance(stmt, (FuncDef, Decorator, ClassDef)):
            for attr in ("body", "else_body", "finally_body", "handlers"):
                part = getattr(stmt, attr, None)
                for block in part if isinstance(part, list) else [part]:
                    if isinstance(block, Block):
                        stack.extend(block.body)


def _raw_marked(api: Any, t: Type | None) -> bool:
    """Whether a marker is written anywhere in a raw annotation."""
    stack = [t] if t is not None else []
    while stack:
        current = stack.pop()
        if _raw_marker(api, current) is not None:
            return True
        stack.extend(_raw_children(current))
    return False


def _check_unfollowed(api: Any, defn: ClassDef) -> None:
    """Markers on the fields of a class that flattens itself: the runtime
    cannot follow them (`_held.unfollowed_problem`), so they are reported."""
    marked = [
        stmt
        for stmt in defn.defs.body
        if isinstance(stmt, AssignmentStmt) and _raw_marked(api, stmt.unanalyzed_type)
    ]
    if not marked:
        return
    fields = [
        f"{stmt.lvalues[0].name}: {stmt.unanalyzed_type}"
        for stmt in marked
        if isinstance(stmt.lvalues[0], NameExpr)
    ]
    message = unfollowed_problem(defn.name, fields).replace("?", "")
    for stmt in marked:
        api.fail(message, stmt, code=UNFOLLOWED_CLASS)


#: Registration functions, called on the class at the top of its module.
_REGISTER_CALLS: Final = {
    **{
        f"jax{m}.tree_util.{name}": kind
        for m in ("", "._src")
        for name, kind in (
            ("register_pytree_node", "jax.tree_util.register_pytree_node_class"),
            ("register_pytree_with_keys", "jax.tree_util.register_pytree_node_class"),
            ("register_static", "jax.tree_util.register_static"),
            ("register_dataclass", "jax.tree_util.register_dataclass"),
        )
    },
}


def _registered_by_call(api: Any, defn: ClassDef) -> tuple[set[str], list[str]]:
    """`jax.tree_util.register_pytree_node(Cls, ...)` (and its kin) at the top of
    the class's module: as if the class were decorated; `meta_fields=` of
    `register_dataclass` are static fields."""
    from mypy.nodes import ExpressionStmt

    module = getattr(api, "cur_mod_node", None)
    if module is None or getattr(api, "is_stub_file", True):
        return set(), []
    found: set[str] = set()
    meta: list[str] = []
    # The call comes after the class: start there (the statements are in order).
    start = bisect.bisect_left(module.defs, defn.line, key=lambda stmt: stmt.line)
    for stmt in module.defs[start:]:
        if not isinstance(stmt, ExpressionStmt) or not isinstance(stmt.expr, CallExpr):
            continue
        call = stmt.expr
        if not call.args or not (
            isinstance(call.args[0], NameExpr) and call.args[0].name == defn.name
        ):
            continue
        kind = _REGISTER_CALLS.get(_resolve(api, call.callee))
        if kind is None:
            continue
        found.add(kind)
        meta.extend(_meta_fields(call))
    return found, meta


def _meta_fields(call: CallExpr) -> list[str]:
    """The literal `meta_fields=` of a `register_dataclass` call."""
    from mypy.nodes import ListExpr, TupleExpr

    return [
        e.value
        for name, arg in zip(call.arg_names, call.args)
        if name == "meta_fields" and isinstance(arg, (ListExpr, TupleExpr))
        for e in arg.items
        if isinstance(e, StrExpr)
    ]


def _decorator(api: Any, expr: Expression) -> tuple[str, list[str]]:
    """A class decorator's full name, and its `meta_fields=`, looking through
    `functools.partial(jax.tree_util.register_dataclass, meta_fields=...)`."""
    name = _resolve(api, expr)
    if (
        name == "functools.partial"
        and isinstance(expr, CallExpr)
        and expr.args
        and isinstance(expr.args[0], RefExpr)
    ):
        return _resolve(api, expr.args[0]), _meta_fields(expr)
    return name, []


def _hash_verdict(defn: ClassDef, decorators: list[tuple[str, Expression]]) -> str:
    """What the class itself does to `__hash__`: "none", "set" or "" (inherits)."""
    defines_eq = False
    for stmt in defn.defs.body:
        if isinstance(stmt, AssignmentStmt) and any(
            isinstance(t, NameExpr) and t.name == "__hash__" for t in stmt.lvalues
        ):
            rvalue = stmt.rvalue
            return (
                "none"
                if isinstance(rvalue, NameExpr) and rvalue.name == "None"
                else "set"
            )
        name = getattr(stmt, "name", None)
        if isinstance(stmt, (FuncDef, Decorator, OverloadedFuncDef)):
            if name == "__hash__":
                return "set"
            defines_eq = defines_eq or name == "__eq__"
    for fullname, expr in decorators:
        if fullname in _FROZEN_DECORATORS:
            return "set"
        if fullname == "dataclasses.dataclass":
            flags = {"eq": True, "frozen": False, "unsafe_hash": False}
            if isinstance(expr, CallExpr):
                for arg_name, arg in zip(expr.arg_names, expr.args):
                    if arg_name in flags:
                        flags[arg_name] = _is_literal(arg, True)
            if flags["unsafe_hash"] or (flags["eq"] and flags["frozen"]):
                return "set"
            return "none" if flags["eq"] else ""
    return "none" if defines_eq else ""


def _record_class(ctx: ClassDefContext) -> None:
    """Keep what the class body says in the class's metadata (cached by mypy)."""
    try:
        defn = ctx.cls
        api = ctx.api
        if getattr(api, "is_stub_file", False):
            # A stub registers no pytree and has no field specifiers; what it
            # says of __hash__ is in its symbol table.
            return
        named = [(_decorator(api, d), d) for d in defn.decorators]
        decorators = [(name, d) for (name, _), d in named]
        held, data = _field_facts(api, defn)
        registered, meta_fields = _registered_by_call(api, defn)
        meta_fields += [f for (_, fields), _ in named for f in fields]
        held.update(dict.fromkeys(meta_fields, "jax-meta"))
        record: dict[str, Any] = {
            "decorators": sorted({name for name, _ in decorators if name} | registered),
            "static": sorted(held),
            "held": held,
            "data": data,
        }
        verdict = _hash_verdict(defn, decorators)
        if verdict:
            record["hash"] = verdict
        defn.info.metadata[_META] = record
        _expose(api, defn, record)
        if set(record["decorators"]) & _OPAQUE_PYTREES:
            _check_unfollowed(api, defn)
    except Exception:
        pass


#: The class attribute that shows the record to mypy's fine-grained daemon.
_EXPOSED: Final = "__treespec__"


def _expose(api: Any, defn: ClassDef, record: dict[str, Any]) -> None:
    """Show a pytree class's record in its symbol table, as a plugin-generated
    ClassVar whose type is the record as a Literal string: `dmypy` compares
    symbol tables (not metadata) to know what changed, so an edited field
    specifier then rechecks the modules that use the class. Only for pytree
    classes of source files (never a protocol: a member there is structural).
    """
    registered = set(record["decorators"]) & (
        _DATACLASS_PYTREES | _OPAQUE_PYTREES | {"dataclasses.dataclass"}
    )
    info = defn.info
    if (
        not (record["static"] or registered)
        or getattr(api, "is_stub_file", True)
        or info.is_protocol
        or any(
            b.fullname in ("typing.Protocol", "typing_extensions.Protocol")
            for b in info.mro
        )
    ):
        return
    import json

    from mypy.nodes import MDEF, SymbolTableNode

    text = json.dumps(record, sort_keys=True)
    var = Var(_EXPOSED, LiteralType(text, api.named_type("builtins.str")))
    var.info = info
    var._fullname = f"{info.fullname}.{_EXPOSED}"
    var.is_classvar = True
    var.is_ready = True
    info.names[_EXPOSED] = SymbolTableNode(MDEF, var, plugin_generated=True)


def _meta(info: TypeInfo) -> dict[str, Any] | None:
    record = info.metadata.get(_META)
    return record if isinstance(record, dict) else None


def _class_hashable(info: TypeInfo) -> bool:
    """Whether instances of the class can be hashed, as far as mypy can tell."""
    for base in info.mro[:-1]:
        record = _meta(base)
        node = base.names.get("__hash__")
        if node is not None:
            if record is not None and record.get("hash") == "none":
                return False
            return not isinstance(
                get_proper_type(getattr(node.node, "type", None)), NoneType
            )
        if record is not None:
            if record.get("hash") in ("none", "set"):
                return bool(record["hash"] == "set")
        elif "dataclass" in base.metadata:
            return bool(base.metadata["dataclass"].get("frozen", False))
    return True


def _is_dataclass(info: TypeInfo) -> bool:
    # "dataclass_tag" is set as soon as mypy sees the decorator or the
    # dataclass_transform base; "dataclass" only once the class is finished.
    return any(
        "dataclass_tag" in b.metadata or "dataclass" in b.metadata for b in info.mro
    )


def _pytree_kind(info: TypeInfo) -> str:
    """Either "fields" (a registered dataclass-like pytree), "opaque" (a registered
    pytree of unknown children), "unknown" (no record) or "" (not a pytree)."""
    if any(base.fullname in _OPAQUE_BASES for base in info.mro):
        return "opaque"
    record = _meta(info)
    if record is None:
        return "unknown"
    decorators = set(record.get("decorators", ()))
    if decorators & _OPAQUE_PYTREES:
        return "opaque"
    if decorators & _DATACLASS_PYTREES:
        return "fields"
    if any(base.fullname in _PYTREE_BASES for base in info.mro):
        return "fields"
    return ""


def _static_fields(info: TypeInfo) -> set[str]:
    names: set[str] = set()
    for base in info.mro:
        record = _meta(base)
        if record is not None:
            names.update(record.get("static", ()))
    return names


def _fields(t: Instance) -> dict[str, Type]:
    """`{name: type}` of a dataclass-like Instance's fields, generics expanded,
    pytree metadata fields left out (never leaves, whatever the marker)."""
    # Imported here: importing it before mypy.types is a circular import.
    from mypy.expandtype import expand_type_by_instance

    static = _static_fields(t.type)
    nnx = _is_nnx(t.type)
    out: dict[str, Type] = {}
    for base in reversed(t.type.mro[:-1]):
        attributes = base.metadata.get("dataclass", {}).get("attributes")
        wanted = (
            {a.get("name") for a in attributes}
            if isinstance(attributes, list)
            else None
        )
        for name, sym in base.names.items():
            var = sym.node
            if (
                isinstance(var, Var)
                and var.type is not None
                and not var.is_classvar
                and not name.startswith("__")
                and (wanted is None or name in wanted)
                and not (nnx and name.startswith(_NNX_INTERNAL))
            ):
                out[name] = expand_type_by_instance(var.type, t)
    for name in static:
        out.pop(name, None)
    if nnx:  # NNX keeps what is not data static: no leaves there
        data = _told_data(t.type)
        for name in [n for n, ft in out.items() if n not in data and not _nnx_data(ft)]:
            del out[name]
    return out


#: NNX's own bookkeeping attributes, never fields.
_NNX_INTERNAL: Final = ("_pytree__", "_object__")


def _is_nnx(info: TypeInfo) -> bool:
    return any(base.fullname in NNX_PYTREES for base in info.mro)


def _told_data(info: TypeInfo) -> dict[str, str]:
    """The attributes an NNX class (or a base) tells NNX are data."""
    found: dict[str, str] = {}
    for base in reversed(info.mro):
        record = _meta(base)
        if record is not None:
            found.update(record.get("data", {}))
    return found


def _nnx_data(t: Type) -> bool:
    """Whether NNX makes a value of this type data by itself: an array, an
    nnx.Variable, an NNX pytree; a union if a member surely is one (flax's
    `Dtype` is `DTypeLike | Any`: static). `Any` alone is unknown: kept."""
    proper = get_proper_type(t)
    if isinstance(proper, UnionType):
        return any(_nnx_instance(get_proper_type(item)) for item in proper.items)
    return _nnx_instance(proper) or isinstance(proper, AnyType)


def _nnx_instance(proper: ProperType) -> bool:
    if not isinstance(proper, Instance):
        return False
    names = {base.fullname for base in proper.type.mro}
    return bool(names & (ARRAY_TYPES | NNX_PYTREES | _OPAQUE_BASES))


# -- markers on fields the class holds static -----------------------------------


def _family(info: TypeInfo) -> str:
    """Which library's rules say what the class holds static: "eqx", "nnx",
    "flax", "treespec", "jax", or "" (no pytree of fields)."""
    names = {base.fullname for base in info.mro}
    record = _meta(info) or {}
    decorators = set(record.get("decorators", ()))
    if names & EQX_MODULES:
        return "eqx"
    if names & NNX_PYTREES:
        return "nnx"
    if names & FLAX_STRUCT_BASES or "flax.struct.dataclass" in decorators:
        return "flax"
    if decorators & {"treespec._dataclass.dataclass", "treespec.dataclass"}:
        return "treespec"
    if decorators & _DATACLASS_PYTREES:
        return "jax"
    return ""


#: The switch a field specifier stands for, by kind (`_field_facts`).
_SWITCHES: Final = {
    "jax-meta": JAX_META_FIELD,
    "jax-static": JAX_STATIC,
    "nnx-static": NNX_STATIC,
    "nnx-annotation": NNX_ANNOTATION,
}


def _switch(family: str, kind: str, node: Node, t: Type, data: bool) -> Switch | None:
    """What holds a field static in a class of this family, if anything:
    `kind` is what its specifier says, `data` whether NNX is told it is data."""
    if kind in _SWITCHES:
        return _SWITCHES[kind]
    if kind == "pytree_node":
        return FLAX_STATIC if family == "flax" else None
    if kind == "static":
        return {"eqx": EQX_STATIC, "jax": JAX_STATIC}.get(family)
    if family == "treespec" and node.marker is Marker.STATIC:
        return TREESPEC_STATIC
    if family == "nnx" and not data and not _nnx_data(t):
        return NNX_PLAIN
    return None


def _check_fields(ctx: ClassDefContext) -> None:
    """Markers on the fields a pytree class holds in its tree structure (or
    tells NNX are data) that the runtime refuses (`_held.py`), reported on the
    field once the class body is analysed."""
    try:
        info = ctx.cls.info
        family = _family(info)
        record = _meta(info)
        if not family or record is None:
            return
        kinds = record.get("held", {})
        data = _told_data(info)
        for stmt in ctx.cls.defs.body:
            if (
                not isinstance(stmt, AssignmentStmt)
                or stmt.type is None
                or not isinstance(stmt.lvalues[0], NameExpr)
            ):
                continue
            name = stmt.lvalues[0].name
            node = _Builder().node(stmt.type)
            switch = _switch(family, kinds.get(name, ""), node, stmt.type, name in data)
            problem = held_conflict(info.name, name, node, switch) if switch else None
            if problem is None and name in data:
                problem = data_conflict(info.name, name, node, data[name])
            if problem is not None:
                ctx.api.fail(problem, stmt, code=HELD_FIELD)
    except Exception:  # the plugin never breaks mypy
        pass


def _check_decorated(ctx: ClassDefContext, mypys: Any, fullname: str) -> bool:
    """The class decorator hook: mypy's own first (that of its dataclasses
    plugin, which this hook stands in front of), then the fields' check once
    that is done."""
    hook = mypys.get_class_decorator_hook_2(fullname)
    if hook is None:
        from mypy.plugins import dataclasses as mypy_dataclasses
        from mypy.semanal_shared import find_dataclass_transform_spec

        if find_dataclass_transform_spec(ctx.reason) is not None:
            # As mypy does for a `dataclass_transform` decorator (semanal_main).
            hook = mypy_dataclasses.dataclass_class_maker_callback
    done = bool(hook(ctx)) if hook is not None else True
    if done:
        _check_fields(ctx)
    return done


def _mypys_plugin(options: Any) -> Any:
    """mypy's own plugin (with its dataclasses hooks), or None when it cannot
    be reached (then no class decorator hook of ours stands in front)."""
    try:  # mypy's own plugins, whose helpers are not a public API
        from mypy.plugins import dataclasses as mypy_dataclasses
        from mypy.plugins.default import DefaultPlugin
        from mypy.semanal_shared import find_dataclass_transform_spec

        assert callable(find_dataclass_transform_spec)
        assert callable(mypy_dataclasses.dataclass_class_maker_callback)
        return DefaultPlugin(options)
    except Exception:
        return None


# -- spec nodes from mypy's types ---------------------------------------------


def _expand_once(t: TypeAliasType) -> Type:
    expand = getattr(t, "_expand_once", None)
    return expand() if expand is not None else get_proper_type(t)


def _marker_of_alias(t: TypeAliasType) -> Marker | None:
    return _MARKER_ALIASES.get(t.alias.fullname) if t.alias is not None else None


#: Containers whose instances cannot be hashed (a pytree of them can be static,
#: but an object holding one cannot be hashed).
_UNHASHABLE_CONTAINERS: Final = frozenset(
    {
        "builtins.list",
        "builtins.dict",
        "collections.OrderedDict",
        "collections.defaultdict",
    }
)


def _hashes(node: Node, seen: set[int]) -> bool:
    """Whether a value of the node's type can be hashed as one object (a field
    of a class that is a leaf to JAX): no list or dict anywhere inside."""
    if isinstance(node, SequenceNode):
        if node.container in _UNHASHABLE_CONTAINERS:
            return False
        return all(_hashes(child, seen) for _, child in node.children())
    if isinstance(node, MappingNode):
        if node.is_typeddict or node.cls in _UNHASHABLE_CONTAINERS:
            return False
        return node.values is None or _hashes(node.values, seen)
    if isinstance(node, ClassBacked):
        if node.hashable is False:
            return False
        if id(node.body) in seen:
            return True
        seen.add(id(node.body))
        return all(_hashes(child, seen) for _, child in node.children())
    if isinstance(node, UnionNode):
        return all(_hashes(member, seen) for member in node.members)
    return type_problem(node, Marker.STATIC) is None


class _Builder:
    """Builds the shared spec nodes (`treespec._spec`) from mypy's types.

    One per check: class nodes are cached by full name and type arguments
    (mypy makes new type objects on every expansion), so a recursive class is
    one node that refers to itself; a recursive alias is cut at its second
    expansion, and anything deeper than `_MAX_DEPTH` is `Any`.
    """

    def __init__(self) -> None:
        self.classes: dict[tuple[str, str], ClassBacked] = {}
        self.aliases: set[str] = set()
        self.hashing: set[tuple[str, str]] = set()
        #: The classes looked into: the check depends on them (`dmypy`).
        self.visited: set[str] = set()

    def node(self, t: Type, depth: int = 0) -> Node:
        if depth > _MAX_DEPTH:
            return AnyNode()
        if isinstance(t, TypeAliasType):
            if t.alias is None:
                return AnyNode()
            marker = _marker_of_alias(t)
            if marker is not None:
                inner = self.node(t.args[0], depth + 1) if t.args else AnyNode()
                if inner.marker is not None:
                    return inner  # reported where it was written
                text = f"{marker.title}[{inner.text or 'Any'}]"
                return inner.with_marker(marker, text)
            name = f"{t.alias.fullname}[{', '.join(map(str, t.args))}]"
            if name in self.aliases:
                return AnyNode(text=t.alias.name)
            self.aliases.add(name)
            try:
                return self.node(_expand_once(t), depth + 1)
            finally:
                self.aliases.discard(name)
        return self._proper(get_proper_type(t), depth + 1)

    def _proper(self, proper: ProperType, depth: int) -> Node:
        if isinstance(proper, NoneType):
            return NoneNode(text="None")
        if isinstance(proper, UnionType):
            members = tuple(self.node(i, depth) for i in proper.items)
            return UnionNode(members=members, text=" | ".join(m.text for m in members))
        if isinstance(proper, TupleType):
            items = tuple(self.node(i, depth) for i in proper.items)
            return SequenceNode(container="builtins.tuple", items=items, text="tuple")
        if isinstance(proper, TypedDictType):
            typed = MappingNode(cls=proper.fallback.type.fullname, text="TypedDict")
            for key, item in proper.items.items():
                typed.body.fields[key] = self.node(item, depth)
            return typed
        if isinstance(proper, CallableType):
            return LeafNode(text="a callable", category="callable")
        if isinstance(proper, LiteralType):
            # The values' class (int, str, an Enum): a number can be traced.
            names = tuple(base.fullname for base in proper.fallback.type.mro)
            return LeafNode(text="a Literal", category="literal", type_names=names)
        if isinstance(proper, Instance):
            return self._instance(proper, depth)
        return AnyNode()

    def _instance(self, t: Instance, depth: int) -> Node:
        # Imported here: importing it before mypy.types is a circular import.
        from mypy.maptype import map_instance_to_supertype

        info = t.type
        fullname = info.fullname
        self.visited.add(fullname)
        if fullname == "builtins.object":
            return AnyNode(text="object")  # the runtime takes it as Any
        if fullname in SEQUENCE_TYPES or fullname in MAPPING_TYPES:
            mapping = fullname in MAPPING_TYPES
            args = t.args[1:] if mapping else t.args
            child = self.node(args[-1], depth) if args else AnyNode()
            if mapping:
                return MappingNode(cls=fullname, values=child, text=info.name)
            return SequenceNode(container=fullname, rest=child, text=info.name)
        if _is_dataclass(info):
            kind = _pytree_kind(info)
            if kind == "opaque":
                return AnyNode(text=info.name)
            if kind in ("fields", "unknown"):
                return self._class(t, depth)
            return self._leaf(t, depth, _fields(t))
        kind = _pytree_kind(info)
        if kind == "opaque":
            return AnyNode(text=info.name)
        if kind == "fields":  # an NNX pytree: its annotated attributes
            return self._class(t, depth)
        if info.is_protocol:
            return AnyNode(text=info.name)  # abstract: its values may be pytrees
        mapping_base = next((b for b in info.mro if b.fullname in MAPPING_TYPES), None)
        if mapping_base is not None:  # a Mapping class (flax's FrozenDict)
            args = map_instance_to_supertype(t, mapping_base).args
            child = self.node(args[-1], depth) if args else AnyNode()
            return MappingNode(cls=fullname, values=child, text=info.name)
        return self._leaf(t, depth, {})

    def _leaf(self, t: Instance, depth: int, fields: dict[str, Type]) -> LeafNode:
        """A class the runtime keeps a leaf; hashable if it and its fields are."""
        info = t.type
        hashable = _class_hashable(info)
        key = (info.fullname, ", ".join(map(str, t.args)))
        if hashable and fields and key not in self.hashing:
            self.hashing.add(key)
            try:
                hashable = all(
                    _hashes(self.node(field, depth), set()) for field in fields.values()
                )
            finally:
                self.hashing.discard(key)
        names = tuple(base.fullname for base in info.mro)
        return LeafNode(text=info.name, type_names=names, hashable=hashable)

    def _class(self, t: Instance, depth: int) -> Node:
        info = t.type
        key = (info.fullname, ", ".join(map(str, t.args)))
        cached = self.classes.get(key)
        if cached is not None:
            return cached
        # A registered pytree is flattened, never hashed whole: under Static
        # its leaves are judged, not the class (as at run time).
        node = ClassNode(cls=info.fullname, text=info.name)
        self.classes[key] = node
        for name, field in _fields(t).items():
            node.body.fields[name] = self.node(field, depth)
        return node


# -- markers in raw (unanalysed) annotations ----------------------------------


def _lookup(api: Any, name: str, context: Any) -> Any:
    try:
        sym = api.lookup_qualified(name, context, suppress_errors=True)
    except Exception:
        return None
    return getattr(sym, "node", None)


def _metadata_markers(api: Any, args: list[Type]) -> list[Marker]:
    """Markers among `Annotated` metadata, known by their class's full name."""
    found = []
    for arg in args:
        name = None
        if isinstance(arg, UnboundType):
            name = arg.name
        if not name:
            continue
        node = _lookup(api, name, arg)
        fullname = str(getattr(node, "fullname", "") or "")
        if (
            isinstance(node, Var)
            and fullname.rpartition(".")[0] in _MARKER_CLASSES
            and node.name in Marker.__members__
        ):
            found.append(Marker[node.name])
    return found


def _analysed_marker(t: Type | None) -> Marker | None:
    """The marker at the top of an analysed type (through aliases)."""
    for _ in range(_MAX_DEPTH):
        if not isinstance(t, TypeAliasType) or t.alias is None:
            return None
        marker = _marker_of_alias(t)
        if marker is not None:
            return marker
        t = t.alias.target
    return None


def _raw_marker(api: Any, t: Type) -> Marker | None:
    """The marker at the top of an unanalysed annotation, resolving names."""
    for _ in range(_MAX_DEPTH):
        if not isinstance(t, UnboundType):
            return None
        node = _lookup(api, t.name, t)
        fullname = getattr(node, "fullname", "")
        if fullname in _MARKER_ALIASES:
            return _MARKER_ALIASES[fullname]
        if fullname in _ANNOTATED and t.args:
            markers = _metadata_markers(api, list(t.args[1:]))
            if markers:
                return markers[0]
            t = t.args[0]
            continue
        if isinstance(node, TypeAlias):
            return _analysed_marker(node.target)
        return None
    return None


def _is_none(api: Any, t: Type) -> bool:
    if isinstance(t, NoneType):
        return True
    return isinstance(t, UnboundType) and t.name in ("None", "builtins.None")


def _union_members(api: Any, t: Type) -> list[Type] | None:
    """The members of a raw union (`A | B`, `Union[...]`, `Optional[...]`)."""
    if isinstance(t, UnionType):
        return list(t.items)
    if isinstance(t, UnboundType) and t.args:
        fullname = getattr(_lookup(api, t.name, t), "fullname", "")
        if fullname in _UNIONS:
            members = list(t.args)
            if fullname.endswith("Optional"):
                members.append(NoneType())
            return members
    return None


def _raw_children(t: Type) -> list[Type]:
    if isinstance(t, UnionType):
        return list(t.items)
    if isinstance(t, UnboundType):
        return list(t.args)
    if isinstance(t, CallableType):
        return [*t.arg_types, t.ret_type]
    if isinstance(t, TupleType):
        return list(t.items)
    return []


def _raw_types(statement: object, api: Any) -> list[Type]:
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


def _check_unions(ctx: AnalyzeTypeContext) -> None:
    """Unions reach no hook of their own (`A | B`), and mypy's own analysis of
    `Union[...]` is left alone: when a marker is analysed, the statement's raw
    annotations are searched for unions whose members disagree. (Each union
    may be reported from several markers; mypy shows a message once a line.)
    """
    analyzer = ctx.api
    semantic = getattr(analyzer, "api", None)
    stack = _raw_types(getattr(semantic, "statement", None), analyzer)
    seen = 0
    while stack and seen < 10_000:
        seen += 1
        t = stack.pop()
        stack.extend(_raw_children(t))
        members = _union_members(analyzer, t)
        if members is None:
            continue
        nodes: list[Node] = []
        for member in members:
            if _is_none(analyzer, member):
                nodes.append(NoneNode())
                continue
            marker = _raw_marker(analyzer, member)
            text = (
                str(member.args[0])
                if marker is not None
                and isinstance(member, UnboundType)
                and len(member.args) == 1
                and (
                    getattr(_lookup(analyzer, member.name, member), "fullname", "")
                    in _MARKER_ALIASES
                )
                else str(member)
            )
            nodes.append(AnyNode(marker=marker, text=text))
        if union_conflict(nodes) is None:
            continue
        shown = ", ".join(
            (m.marker.title if m.marker else "no marker")
            for m in nodes
            if not isinstance(m, NoneNode)
        )
        context = t if t.line >= 0 else getattr(semantic, "statement", ctx.context)
        analyzer.fail(_union_message(shown), context, code=CONFLICTING_UNION)


def _union_message(shown: str) -> str:
    return f"Union members disagree on markers ({shown}). {union_fix()}"


# -- the checks under a marker --------------------------------------------------


def _depend_on(ctx: AnalyzeTypeContext, classes: set[str]) -> None:
    """Recheck this place when one of these classes changes (`dmypy`)."""
    semantic = getattr(ctx.api, "api", None)
    add = getattr(semantic, "add_plugin_dependency", None)
    if add is None:
        return
    for fullname in classes:
        if not fullname.startswith("builtins."):
            # A changed class attribute triggers its own name, not the class.
            add(f"<{fullname}.{_EXPOSED}>")


def _nested_message(outer: Marker, inner: Marker) -> str:
    fix = (
        f"write {outer.title}[...] once"
        if inner is outer
        else f"keep one of {inner.title}[...] and {outer.title}[...]"
    )
    return (
        f"{outer.title}[{inner.title}[...]]: a marker directly inside another; "
        f"{fix}. (A marker further down, inside a container, is fine: the "
        "nearest one wins.)"
    )


def _check_marked(
    ctx: AnalyzeTypeContext, marker: Marker, analyzed: Type, extra: list[Marker]
) -> None:
    """The verdicts on `marker[analyzed]`, reported on the marker."""
    fail = ctx.api.fail
    for other in extra:  # Annotated[T, Marker.STATIC, Marker.DYNAMIC]
        fail(_nested_message(marker, other), ctx.context, code=NESTED_MARKER)
    builder = _Builder()
    node = builder.node(analyzed)
    _depend_on(ctx, builder.visited)
    if node.marker is not None:
        fail(_nested_message(marker, node.marker), ctx.context, code=NESTED_MARKER)
        return
    if isinstance(node, UnionNode) and union_conflict(node.members) is None:
        member = marked_union_conflict(node, marker)
        if member is not None and member.marker is not None:
            fail(
                f"{marker.title}[...]: the union member {member.text} has its own "
                f"marker inside {marker.title}[...], a marker directly inside "
                f"another. {union_fix()}",
                ctx.context,
                code=NESTED_MARKER,
            )
    code = UNHASHABLE_STATIC if marker is Marker.STATIC else NON_ARRAY_DYNAMIC
    reported: set[str] = set()
    for place in covered(node.with_marker(marker, node.text)):
        problem = type_problem(place, marker)
        if problem is not None and problem not in reported:
            reported.add(problem)
            fail(f"{marker.title}[...]: {problem}", ctx.context, code=code)


def _internal_note(ctx: AnalyzeTypeContext, error: BaseException) -> None:
    try:
        note = getattr(ctx.api, "note", None)
        if note is not None:
            note(
                f"treespec: this annotation was not checked (internal "
                f"{type(error).__name__}); please report it",
                ctx.context,
            )
    except Exception:
        pass


def _guarded(ctx: AnalyzeTypeContext, check: Callable[[], None]) -> None:
    try:
        check()
    except Exception as error:
        _internal_note(ctx, error)


def _alias_type(ctx: AnalyzeTypeContext, fullname: str, inner: Type) -> Type:
    """`inner` wrapped in the marker alias, as mypy itself would build it."""
    try:
        semantic = getattr(ctx.api, "api", None)
        sym = semantic.lookup_fully_qualified_or_none(fullname) if semantic else None
        node = getattr(sym, "node", None)
        if isinstance(node, TypeAlias) and len(node.alias_tvars) == 1:
            t = ctx.type
            return TypeAliasType(node, [inner], line=t.line, column=t.column)
    except Exception:
        pass
    return inner


def _analyze_marker(marker: Marker) -> Callable[[AnalyzeTypeContext], Type]:
    def hook(ctx: AnalyzeTypeContext) -> Type:
        args = ctx.type.args
        if len(args) != 1:
            ctx.api.fail(
                f"{marker.title}[...] takes exactly one type, e.g. "
                f"{marker.title}[int]; a bare {marker.title} says nothing",
                ctx.context,
                code=BARE_MARKER,
            )
            return AnyType(TypeOfAny.from_error)
        analyzed = ctx.api.analyze_type(args[0])
        _guarded(ctx, lambda: _check_marked(ctx, marker, analyzed, []))
        _guarded(ctx, lambda: _check_unions(ctx))
        return _alias_type(ctx, _CANONICAL[marker], analyzed)

    return hook


def _analyze_annotated(fullname: str) -> Callable[[AnalyzeTypeContext], Type]:
    def hook(ctx: AnalyzeTypeContext) -> Type:
        analyzer: Any = ctx.api
        t = ctx.type
        special = getattr(analyzer, "try_analyze_special_unbound_type", None)
        default = special(t, fullname) if special is not None else None
        if default is None:  # not this mypy: what it does without the plugin
            if not t.args:
                return AnyType(TypeOfAny.from_error)
            default = analyzer.analyze_type(t.args[0])
        result: list[Type] = [default]

        def check() -> None:
            semantic = getattr(analyzer, "api", None)
            if (
                len(t.args) < 2
                or getattr(semantic, "cur_mod_id", "") == _MARKERS_MODULE
            ):
                return
            markers = _metadata_markers(analyzer, list(t.args[1:]))
            if not markers:
                return
            _check_marked(ctx, markers[0], default, markers[1:])
            _check_unions(ctx)
            result[0] = _alias_type(ctx, _CANONICAL[markers[0]], default)

        _guarded(ctx, check)
        return result[0]

    return hook


# -- literal static_flags= and default= at a transform's call -----------------

#: The transforms that take `static_flags=` and `default=`.
_TRANSFORMS: Final = frozenset(
    {
        "treespec._jit.jit",
        "treespec._grad.grad",
        "treespec._grad.value_and_grad",
        "treespec._vmap.vmap",
        "treespec._vmap.pmap",
        "treespec._checkpoint.checkpoint",
        "treespec._shard_map.shard_map",
    }
)


class _Entry:
    """A literal flag entry: its kind ("bool", "none", "callable", "mapping",
    "sequence", "bad", or "unknown" when not a literal) and its parts."""

    __slots__ = ("expr", "items", "kind", "value")

    def __init__(
        self,
        kind: str,
        expr: Expression,
        value: object = None,
        items: list[tuple[object, _Entry]] | None = None,
    ) -> None:
        self.kind = kind
        self.expr = expr
        self.value = value
        self.items = items or []


def _entry(expr: Expression) -> _Entry:
    from mypy.nodes import (
        BytesExpr,
        ComplexExpr,
        FloatExpr,
        IntExpr,
        LambdaExpr,
        ListExpr,
        TupleExpr,
    )

    if isinstance(expr, NameExpr) and expr.fullname in (
        "builtins.True",
        "builtins.False",
    ):
        return _Entry("bool", expr, expr.fullname == "builtins.True")
    if isinstance(expr, NameExpr) and expr.fullname == "builtins.None":
        return _Entry("none", expr)
    if isinstance(expr, (StrExpr, BytesExpr, IntExpr, FloatExpr, ComplexExpr)):
        return _Entry("bad", expr, getattr(expr, "value", None))
    if isinstance(expr, LambdaExpr):
        return _Entry("callable", expr)
    if isinstance(expr, RefExpr) and isinstance(
        expr.node, (FuncDef, Decorator, OverloadedFuncDef)
    ):
        return _Entry("callable", expr)
    if isinstance(expr, DictExpr):
        items: list[tuple[object, _Entry]] = []
        for key, value in expr.items:
            if not isinstance(key, StrExpr):
                return _Entry("unknown", expr)
            items.append((key.value, _entry(value)))
        return _Entry("mapping", expr, items=items)
    if (
        isinstance(expr, CallExpr)
        and isinstance(expr.callee, RefExpr)
        and expr.callee.fullname == "builtins.dict"
        and expr.arg_names
        and all(expr.arg_names)
    ):
        pairs = [(n, _entry(a)) for n, a in zip(expr.arg_names, expr.args)]
        return _Entry("mapping", expr, items=list(pairs))
    if isinstance(expr, (ListExpr, TupleExpr)):
        return _Entry(
            "sequence", expr, items=[(i, _entry(e)) for i, e in enumerate(expr.items)]
        )
    return _Entry("unknown", expr)


def _is_array_node(node: Node) -> bool:
    return isinstance(node, LeafNode) and any(n in ARRAY_TYPES for n in node.type_names)


def _flag_child(node: Node, key: object) -> Node | None:
    """The annotation node a prefix entry's key leads to, if known."""
    if isinstance(node, ClassBacked):
        return node.fields.get(str(key)) if isinstance(key, str) else None
    if isinstance(node, SequenceNode) and isinstance(key, int):
        return node.child_at(key)
    if isinstance(node, MappingNode) and node.values is not None:
        return node.values
    return None


def _check_entry(
    ctx: FunctionContext, entry: _Entry, node: Node | None, where: str
) -> None:
    if entry.kind == "bad":
        ctx.api.fail(
            f"static_flags: {where} is {entry.value!r}; an entry is True/False, "
            "None, a callable leaf -> bool, or a dict/list/tuple shaped like the "
            "argument",
            entry.expr,
            code=BAD_FLAGS,
        )
        return
    if entry.kind == "bool" and entry.value is True and node is not None:
        if node.marker is None and _is_array_node(node):
            ctx.api.fail(
                f"static_flags: {where} is True, but it is annotated as an array "
                f'("{node.text}"): an array cannot be static (not hashable); '
                "use False, or leave the entry out",
                entry.expr,
                code=BAD_FLAGS,
            )
        return
    for key, child in entry.items:
        sub = _flag_child(node, key) if node is not None else None
        _check_entry(ctx, child, sub, f"{where}[{key!r}]")


def _check_transform_call(ctx: FunctionContext, index: _DecoratorIndex) -> None:
    names = ctx.callee_arg_names
    found: dict[str, Expression] = {}
    for formal, name in enumerate(names):
        if name in ("static_flags", "default") and ctx.args[formal]:
            found[name] = ctx.args[formal][0]
    if not found:
        return
    fun: ProperType | None = None
    if names and ctx.arg_types and ctx.arg_types[0]:
        fun = get_proper_type(ctx.arg_types[0][0])
    elif names and ctx.arg_types:
        fun = _decorated(ctx, index)  # @treespec.jit(static_flags=...) on a function
    _check_options(ctx, found, fun)


def _check_options(
    ctx: FunctionContext, found: dict[str, Expression], fun: ProperType | None
) -> None:
    """Check literal `static_flags=`/`default=` expressions against `fun`'s
    parameters (only the entries' own form when `fun` is not known)."""
    default = found.get("default")
    if isinstance(default, StrExpr) and default.value not in DEFAULT_POLICIES:
        ctx.api.fail(
            f"default={default.value!r} is not a policy; use one of "
            f"{', '.join(map(repr, DEFAULT_POLICIES))}",
            default,
            code=BAD_DEFAULT,
        )
    flags_expr = found.get("static_flags")
    entry = _entry(flags_expr) if flags_expr is not None else None
    signature = _Params(fun) if isinstance(fun, CallableType) else None
    if isinstance(default, StrExpr) and signature is not None:
        _check_policy(ctx, default, signature, entry)
    if entry is None:
        return
    if signature is None:
        _check_entry(ctx, entry, None, "static_flags")
        return
    names, types = signature.names, signature.types
    params = [(name, t) for name, t in zip(names, types) if name is not None]
    positional = [(signature.label(i), types[i]) for i in signature.positional]
    builder = _Builder()
    if entry.kind == "mapping":
        known = {name for name, _ in params}
        by_name = dict(params)
        unnamed = len(params) < len(names)  # names mypy does not keep: no verdict
        for key, child in entry.items:
            if key not in known and unnamed:
                continue
            if key not in known:
                ctx.api.fail(
                    f"static_flags names {key!r}, which the function does not "
                    f"take; its parameters are {[name for name, _ in params]!r}",
                    child.expr,
                    code=BAD_FLAGS,
                )
                continue
            node = builder.node(by_name[str(key)])
            if names.index(str(key)) == signature.star:
                node = _star_node(node, child)
            _check_entry(ctx, child, node, f"static_flags[{key!r}]")
        return
    if entry.kind == "sequence":
        n = len(entry.items)
        star = signature.star
        if star is not None and n > len(positional) + 1:
            _fail_star_entries(ctx, entry, signature)
            return
        if n < len(positional) or (n > len(positional) and star is None):
            # The runtime's rule (`normalize_flags`): one entry per positional
            # parameter (a method's `self` included), and one for `*args`.
            missing = ", ".join(name for name, _ in positional[n:])
            ctx.api.fail(
                f"static_flags has {n} entries but the function takes "
                f"{len(positional)} positional parameters "
                f"({', '.join(name for name, _ in positional)}); "
                + (
                    f"{missing} would have none: add an entry for each (None lets "
                    "the hints decide), or give a dict keyed by name"
                    if missing
                    else "give one entry per positional parameter, or a dict "
                    "keyed by name"
                ),
                entry.expr,
                code=BAD_FLAGS,
            )
            return
        for index, child in entry.items:
            assert isinstance(index, int)
            at: Node | None = None
            if index < len(positional):
                at = builder.node(positional[index][1])
            elif star is not None:
                at = _star_node(builder.node(types[star]), child)
            _check_entry(ctx, child, at, f"static_flags[{index}]")
        return
    _check_entry(ctx, entry, None, "static_flags")


def _star_node(item: Node, entry: _Entry) -> Node:
    """What the entry of `*args` covers: each extra argument (of the element
    type mypy gives) alike, or, for a list entry, one by one."""
    if entry.kind == "sequence":
        return SequenceNode(container="builtins.tuple", rest=item, text="tuple")
    return item


def _fail_star_entries(ctx: FunctionContext, entry: _Entry, signature: _Params) -> None:
    """A list with an entry per extra argument: the runtime refuses it and
    shows the nested spelling (`normalize_flags`), and so does this."""
    star = signature.star
    assert star is not None
    name = signature.label(star)
    listed = ", ".join(
        [*(signature.label(i) for i in signature.positional), f"*{name}"]
    )
    ctx.api.fail(
        f"static_flags has {len(entry.items)} entries but the function takes "
        f"{listed}: a list gives one entry per parameter, and the entry of "
        f"*{name} covers every extra argument; to flag the extra arguments one "
        f"by one, nest them in the entry of *{name} (a list), or give "
        f"static_flags={{{name!r}: [...]}}",
        entry.expr,
        code=BAD_FLAGS,
    )


class _Params:
    """A function's parameters as the flag rules count them: their names (a
    positional-only one's when mypy kept the definition, whose callable type
    drops it; None where unknown), types, and the positional ones by index."""

    def __init__(self, fun: CallableType) -> None:
        from mypy.nodes import ARG_OPT, ARG_POS, ARG_STAR

        names: list[str | None] = list(fun.arg_names)
        written = getattr(fun.definition, "arg_names", None)
        if isinstance(written, list) and len(written) == len(names):
            names = [name or given for name, given in zip(names, written)]
        self.names = names
        self.types = fun.arg_types
        self.positional = [
            i for i, kind in enumerate(fun.arg_kinds) if kind in (ARG_POS, ARG_OPT)
        ]
        #: The index of `*args`, if the function has it.
        self.star = fun.arg_kinds.index(ARG_STAR) if ARG_STAR in fun.arg_kinds else None

    def label(self, i: int) -> str:
        """How parameter `i` is named in a message."""
        return self.names[i] or f"<positional {self.positional.index(i)}>"


def _check_policy(
    ctx: FunctionContext, default: StrExpr, signature: _Params, flags: _Entry | None
) -> None:
    """What `default=` makes of the parameters that no marker or flag entry
    speaks for, judged as the runtime judges them: under "static" or "dynamic"
    the verdicts of that marker around them, under "error" any leaf left
    uncovered (which the runtime refuses at the call)."""
    policy = default.value
    if policy not in ("static", "dynamic", "error"):
        return
    if flags is not None and flags.kind not in ("mapping", "sequence"):
        return  # a bool or a callable speaks for every leaf; or not a literal
    # Parameters by index (a positional-only one may have no name to mypy).
    names, positional = signature.names, signature.positional
    flagged: set[int] = set()
    for key, child in flags.items if flags is not None else ():
        if child.kind == "none":
            continue  # None: the hints (and so the default) decide
        if isinstance(key, int):
            if key < len(positional):
                flagged.add(positional[key])
            elif signature.star is not None:
                flagged.add(signature.star)
        elif str(key) in names:
            flagged.add(names.index(str(key)))
        elif None in names:
            return  # maybe an unnamed parameter's name: no verdict
    builder = _Builder()
    for i, t in enumerate(signature.types):
        if i in flagged:
            continue
        name = signature.label(i)
        node = builder.node(t)
        if node.marker is not None:
            continue
        if policy == "error":
            bare = [
                place
                for place in covered(node)
                if isinstance(place, LeafNode) and not isinstance(place, AnyNode)
            ]
            if bare:
                ctx.api.fail(
                    f"default='error' and no marker or flag covers {name} "
                    f'("{bare[0].text}"): the call would be refused; mark it '
                    "Static[...]/Dynamic[...], give it a static_flags entry, or "
                    "choose another default",
                    default,
                    code=BAD_DEFAULT,
                )
            continue
        marker = Marker.STATIC if policy == "static" else Marker.DYNAMIC
        for place in covered(node.with_marker(marker, node.text)):
            problem = type_problem(place, marker)
            if problem is not None:
                ctx.api.fail(
                    f"default={policy!r} makes {name} "
                    f"{'static' if marker is Marker.STATIC else 'traced'}, as "
                    f"{marker.title}[...] would: {problem}",
                    default,
                    code=BAD_DEFAULT,
                )
                break


def _decorators(statements: list[Any]) -> Iterator[Decorator]:
    """Every decorated function among `statements`, at any depth (class and
    function bodies, if/for/while/with/try blocks). A walk of our own:
    compiled mypy's visitor classes cannot be subclassed from a plugin."""
    from mypy.nodes import Block

    stack = list(reversed(statements))
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, Decorator):
            yield stmt
            blocks: list[Any] = [stmt.func.body]
        elif isinstance(stmt, OverloadedFuncDef):
            stack.extend(reversed(stmt.items))
            continue
        elif isinstance(stmt, ClassDef):
            blocks = [stmt.defs]
        elif isinstance(stmt, FuncDef):
            blocks = [stmt.body]
        else:  # if/for/while/with/try: their blocks
            blocks = []
            for attr in ("body", "handlers", "else_body", "finally_body"):
                part = getattr(stmt, attr, None)
                blocks.extend(part if isinstance(part, list) else [part])
        for block in reversed(blocks):
            if isinstance(block, Block):
                stack.extend(reversed(block.body))


class _DecoratorIndex:
    """The decorated functions of the module being checked, by the identity of
    each decorator expression: one walk per module, not one per call that has
    options. Owned by the plugin instance; a module checked again (a new tree)
    is walked again."""

    def __init__(self) -> None:
        self._tree: object = None
        self._by_id: dict[int, Decorator] = {}

    def find(self, tree: Any, expr: object) -> Decorator | None:
        """The decorated function whose decorators include `expr`, if any."""
        if self._tree is not tree:
            self._by_id = {
                id(d): stmt
                for stmt in _decorators(list(getattr(tree, "defs", ())))
                for d in stmt.original_decorators
            }
            self._tree = tree
        # The index holds every expression it names, so no id is reused while
        # it is kept: an expression not in it is no decorator of this tree.
        stmt = self._by_id.get(id(expr))
        if stmt is not None and any(d is expr for d in stmt.original_decorators):
            return stmt
        return None


def _decorated(ctx: FunctionContext, index: _DecoratorIndex) -> ProperType | None:
    """The signature of the function this call decorates, anywhere in the
    module (a method's includes `self`, as the flags of the function do)."""
    tree = getattr(ctx.api, "tree", None)
    stmt = index.find(tree, ctx.context) if tree is not None else None
    if stmt is None or stmt.func.type is None:
        return None
    return get_proper_type(stmt.func.type)


def _options_note(ctx: FunctionContext, error: BaseException) -> None:
    """An internal failure while checking a call's options: a note, never a
    crash."""
    with contextlib.suppress(Exception):
        ctx.api.msg.note(
            f"treespec: this call's static_flags/default were not checked "
            f"(internal {type(error).__name__}); please report it",
            ctx.context,
        )


def _transform_call(ctx: FunctionContext, index: _DecoratorIndex) -> Type:
    try:
        _check_transform_call(ctx, index)
    except Exception as error:  # the plugin never breaks mypy
        _options_note(ctx, error)
    return ctx.default_return_type


# -- eval_shape's result -------------------------------------------------------

_EVAL_SHAPE: Final = "treespec._checkpoint.eval_shape"
_SHAPE_DTYPE_STRUCT: Final = ("jax.ShapeDtypeStruct", "jax._src.core.ShapeDtypeStruct")


def _shaped(typ: Type, sds: Instance, depth: int = 0) -> Type:
    """`typ` with `jax.ShapeDtypeStruct` for each array type in it: the type of
    what `eval_shape` returns for a function that returns `typ`. A pytree class
    stays itself: the result is an instance of it."""
    if depth > 40:
        return AnyType(TypeOfAny.special_form)
    proper = get_proper_type(typ)
    if isinstance(proper, Instance):
        if any(base.fullname in ARRAY_TYPES for base in proper.type.mro):
            return sds
        name = proper.type.fullname
        if proper.args and (name in SEQUENCE_TYPES or name in MAPPING_TYPES):
            *keys, values = proper.args
            return proper.copy_modified(args=[*keys, _shaped(values, sds, depth + 1)])
        return typ
    if isinstance(proper, TupleType):
        # A NamedTuple keeps its class (attributes keep their declared types,
        # which no annotation of the class could change); its items map.
        return proper.copy_modified(
            items=[_shaped(item, sds, depth + 1) for item in proper.items]
        )
    if isinstance(proper, TypedDictType):
        return proper.copy_modified(
            item_types=[_shaped(t, sds, depth + 1) for t in proper.items.values()]
        )
    if isinstance(proper, UnionType):
        return UnionType.make_union(
            [_shaped(item, sds, depth + 1) for item in proper.items], proper.line
        )
    return typ


def _eval_shape_call(ctx: FunctionContext) -> Type:
    """The type of `treespec.eval_shape(fun, ...)`: `fun`'s result type with
    `jax.ShapeDtypeStruct` for its arrays (the inline overloads spell only the
    common shapes)."""
    try:
        fun = get_proper_type(ctx.arg_types[0][0])
        if not isinstance(fun, CallableType) or fun.variables:
            # A generic `fun`'s declared result has its type variables unsolved
            # here: the overloads' answer is mypy's, from the call.
            return ctx.default_return_type
        sds: Instance | None = None
        for name in _SHAPE_DTYPE_STRUCT:
            with contextlib.suppress(Exception):
                sds = ctx.api.named_generic_type(name, [])
                break
        if sds is None:
            return ctx.default_return_type
        return _shaped(fun.ret_type, sds)
    except Exception:  # the plugin never breaks mypy: keep the inline type
        return ctx.default_return_type


# -- functools.partial(treespec.jit, ...) ----------------------------------------


def _partial_call(ctx: FunctionContext, index: _DecoratorIndex) -> Type:
    """`functools.partial(treespec.jit, static_flags=...)`: mypy's own partial
    support gives up on an overloaded function, and `jit` is one (the direct
    and the decorator-factory forms). Hand it the direct form, whose result
    keeps the decorated function's signature; anything else is mypy's."""
    try:  # mypy's partial support, whose helpers are not a public API
        from mypy.plugins import functools as mypy_functools

        mypys = mypy_functools.partial_new_callback
    except Exception:
        return ctx.default_return_type
    callee = ctx.args[0][0] if ctx.args and ctx.args[0] else None
    if not (isinstance(callee, RefExpr) and callee.fullname in _TRANSFORMS):
        return mypys(ctx)
    try:
        # The options given here, checked against the function this partial
        # decorates when it is a decorator (`@functools.partial(jit, ...)`).
        found = {
            name: arg
            for names, args in zip(ctx.arg_names[1:], ctx.args[1:])
            for name, arg in zip(names, args)
            if name in ("static_flags", "default")
        }
        if found:
            _check_options(ctx, found, _decorated(ctx, index))
    except Exception as error:  # the plugin never breaks mypy
        _options_note(ctx, error)
    try:
        fun = get_proper_type(ctx.arg_types[0][0])
        if isinstance(fun, Overloaded) and not any(ctx.args[1:2]):
            # Only options given (`partial(jit, static_flags=...)`): the
            # function comes at the partial's call, as in the direct form.
            direct = [
                item
                for item in fun.items
                if item.arg_types
                and isinstance(get_proper_type(item.arg_types[0]), CallableType)
            ]
            if len(direct) == 1:
                return mypy_functools.handle_partial_with_callee(ctx, callee=direct[0])
    except Exception:  # the plugin never breaks mypy: mypy's own answer
        pass
    return mypys(ctx)


class _WithoutHook(Plugin):
    """mypy's plugin without our hook for one name (to let mypy analyse that
    name its own way, from inside the hook)."""

    def __init__(self, plugin: Plugin, fullname: str) -> None:
        super().__init__(plugin.options)
        self._plugin = plugin
        self._fullname = fullname

    def get_type_analyze_hook(
        self, fullname: str
    ) -> Callable[[AnalyzeTypeContext], Type] | None:
        if fullname == self._fullname:
            return None
        return self._plugin.get_type_analyze_hook(fullname)


def _analyze_marked_alias(fullname: str) -> Callable[[AnalyzeTypeContext], Type]:
    """A user alias of a marked type (`SInt = Static[int]`): mypy analyses it
    as usual; the unions it is a member of are checked (`SInt | DArr`)."""

    def hook(ctx: AnalyzeTypeContext) -> Type:
        analyzer: Any = ctx.api
        saved = analyzer.plugin
        try:
            analyzer.plugin = _WithoutHook(saved, fullname)
        except Exception as error:
            _internal_note(ctx, error)
            return AnyType(TypeOfAny.special_form)
        try:
            result: Type = analyzer.visit_unbound_type_nonoptional(ctx.type, False)
        finally:
            analyzer.plugin = saved
        _guarded(ctx, lambda: _check_unions(ctx))
        return result

    return hook


def _can_delegate() -> bool:
    from mypy.typeanal import TypeAnalyser

    return hasattr(TypeAnalyser, "visit_unbound_type_nonoptional")


#: Modules that define no alias of a marked type (a fast path: mypy asks the
#: plugin about every name in every annotation).
_NO_MARKED_ALIASES: Final = (
    "builtins.",
    "typing.",
    "typing_extensions.",
    "collections.",
    "_typeshed.",
    "types.",
    "numpy.",
    "jax.",
    "jaxlib.",
    "jaxtyping.",
    "equinox.",
    "flax.",
    "optax.",
    "treespec.",
)


class TreespecPlugin(Plugin):
    """Checks `Static`/`Dynamic`/`Donate` specs while mypy analyses types."""

    def __init__(self, options: Any) -> None:
        super().__init__(options)
        self._decorators = _DecoratorIndex()
        self._mypys = _mypys_plugin(options)

    def get_type_analyze_hook(
        self, fullname: str
    ) -> Callable[[AnalyzeTypeContext], Type] | None:
        marker = _MARKER_ALIASES.get(fullname)
        if marker is not None:
            return _analyze_marker(marker)
        if fullname in _ANNOTATED:
            return _analyze_annotated(fullname)
        if fullname.startswith(_NO_MARKED_ALIASES):
            return None  # the common names, looked at for every annotation
        try:
            sym = self.lookup_fully_qualified(fullname)
        except Exception:
            return None
        node = getattr(sym, "node", None)
        if (
            isinstance(node, TypeAlias)
            and isinstance(node.target, TypeAliasType)
            and _analysed_marker(node.target) is not None
            and _can_delegate()
        ):
            return _analyze_marked_alias(fullname)
        return None

    def get_function_hook(
        self, fullname: str
    ) -> Callable[[FunctionContext], Type] | None:
        if fullname == _EVAL_SHAPE:
            return _eval_shape_call
        if fullname == "functools.partial":
            return functools.partial(_partial_call, index=self._decorators)
        if fullname in _TRANSFORMS:
            return functools.partial(_transform_call, index=self._decorators)
        return None

    def get_customize_class_mro_hook(
        self, fullname: str
    ) -> Callable[[ClassDefContext], None] | None:
        # Called once per class definition, with its body still at hand.
        return _record_class

    def get_base_class_hook(
        self, fullname: str
    ) -> Callable[[ClassDefContext], None] | None:
        # Called once the class body is analysed (its fields' types known).
        return _check_fields

    def get_class_decorator_hook_2(
        self, fullname: str
    ) -> Callable[[ClassDefContext], bool] | None:
        if fullname not in _DATACLASS_PYTREES and fullname != "dataclasses.dataclass":
            return None
        if self._mypys is None:
            return None
        return functools.partial(_check_decorated, mypys=self._mypys, fullname=fullname)


def plugin(version: str) -> type[Plugin]:
    """The entry point mypy calls."""
    return TreespecPlugin
