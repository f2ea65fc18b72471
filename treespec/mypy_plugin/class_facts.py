"""The per-class record: what a class body says (`class_body`), written to
`info.metadata` when mypy first analyses the class (so the cache carries it
to modules checked later), shown to `dmypy` in the symbol table, and read
back by the spec nodes and the held-field check.

The customize-MRO hook `record_class` also reports markers on the fields of
a class that flattens itself (nothing can follow them).
"""

from __future__ import annotations

from typing import Any, Final

from mypy.nodes import AssignmentStmt, ClassDef, NameExpr, TypeInfo, Var
from mypy.plugin import ClassDefContext
from mypy.types import LiteralType

from treespec._model.held import unfollowed_problem

from .class_body import field_facts, hash_verdict, read_decorator, registered_by_call
from .codes import UNFOLLOWED_CLASS
from .spelling import raw_marked

#: The per-class record the plugin keeps in `TypeInfo.metadata` (the cache
#: carries it): `decorators` (full names), `static` (fields a specifier makes
#: pytree metadata), `held` (those fields, each with the kind of switch that
#: holds it), `data` (the attributes NNX is told are data, with how),
#: `hash` ("none": the class makes its instances unhashable, "set": it makes
#: them hashable, absent: inherited).
_META: Final = "treespec"

#: Decorators that register a dataclass as a pytree whose fields are children.
DATACLASS_PYTREES: Final = frozenset(
    {
        "treespec._runtime.dataclass.dataclass",
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
OPAQUE_PYTREES: Final = frozenset(
    {
        "jax.tree_util.register_pytree_node_class",
        "jax._src.tree_util.register_pytree_node_class",
        "jax.tree_util.register_pytree_with_keys_class",
        "jax._src.tree_util.register_pytree_with_keys_class",
        "jax.tree_util.register_static",
        "jax._src.tree_util.register_static",
    }
)

#: The class attribute that shows the record to mypy's fine-grained daemon.
EXPOSED: Final = "__treespec__"


def record_class(ctx: ClassDefContext) -> None:
    """Keep what the class body says in the class's metadata (cached by mypy)."""
    try:
        defn = ctx.cls
        api = ctx.api
        if getattr(api, "is_stub_file", False):
            # A stub registers no pytree and has no field specifiers; what it
            # says of __hash__ is in its symbol table.
            return
        named = [(read_decorator(api, d), d) for d in defn.decorators]
        decorators = [(name, d) for (name, _), d in named]
        held, data = field_facts(api, defn)
        registered, meta_fields = registered_by_call(api, defn)
        meta_fields += [f for (_, fields), _ in named for f in fields]
        held.update(dict.fromkeys(meta_fields, "jax-meta"))
        record: dict[str, Any] = {
            "decorators": sorted({name for name, _ in decorators if name} | registered),
            "static": sorted(held),
            "held": held,
            "data": data,
        }
        verdict = hash_verdict(defn, decorators)
        if verdict:
            record["hash"] = verdict
        defn.info.metadata[_META] = record
        _expose(api, defn, record)
        if set(record["decorators"]) & OPAQUE_PYTREES:
            _check_unfollowed(api, defn)
    except Exception:
        pass


def _expose(api: Any, defn: ClassDef, record: dict[str, Any]) -> None:
    """Show a pytree class's record in its symbol table, as a plugin-generated
    ClassVar whose type is the record as a Literal string: `dmypy` compares
    symbol tables (not metadata) to know what changed, so an edited field
    specifier then rechecks the modules that use the class. Only for pytree
    classes of source files (never a protocol: a member there is structural).
    """
    registered = set(record["decorators"]) & (
        DATACLASS_PYTREES | OPAQUE_PYTREES | {"dataclasses.dataclass"}
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
    var = Var(EXPOSED, LiteralType(text, api.named_type("builtins.str")))
    var.info = info
    var._fullname = f"{info.fullname}.{EXPOSED}"
    var.is_classvar = True
    var.is_ready = True
    info.names[EXPOSED] = SymbolTableNode(MDEF, var, plugin_generated=True)


def record_of(info: TypeInfo) -> dict[str, Any] | None:
    record = info.metadata.get(_META)
    return record if isinstance(record, dict) else None


def static_fields(info: TypeInfo) -> set[str]:
    names: set[str] = set()
    for base in info.mro:
        record = record_of(base)
        if record is not None:
            names.update(record.get("static", ()))
    return names


def told_data(info: TypeInfo) -> dict[str, str]:
    """The attributes an NNX class (or a base) tells NNX are data."""
    found: dict[str, str] = {}
    for base in reversed(info.mro):
        record = record_of(base)
        if record is not None:
            found.update(record.get("data", {}))
    return found


def _check_unfollowed(api: Any, defn: ClassDef) -> None:
    """Markers on the fields of a class that flattens itself: the runtime
    cannot follow them (`unfollowed_problem` of `_model/held.py`), so they are
    reported."""
    marked = [
        stmt
        for stmt in defn.defs.body
        if isinstance(stmt, AssignmentStmt) and raw_marked(api, stmt.unanalyzed_type)
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
