"""What a class body says that its symbol table does not: field specifiers
(`eqx.field(static=True)`, `nnx.data(...)`, ...), the decorators and the
registration calls that make the class a pytree, and what it does to
`__hash__`. Read while mypy still has the body (`class_facts.record_class`).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import Any, Final

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
)
from mypy.types import Type, UnboundType

from .spelling import lookup

_FROZEN_DECORATORS: Final = frozenset(
    {
        "treespec._runtime.dataclass.dataclass",
        "treespec.dataclass",
        "flax.struct.dataclass",
    }
)


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
        fullname = getattr(lookup(api, t.name, t), "fullname", "")
        return _NNX_ANNOTATIONS.get(str(fullname or ""), "")
    return ""


def field_facts(api: Any, defn: ClassDef) -> tuple[dict[str, str], dict[str, str]]:
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


def registered_by_call(api: Any, defn: ClassDef) -> tuple[set[str], list[str]]:
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


def read_decorator(api: Any, expr: Expression) -> tuple[str, list[str]]:
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


def hash_verdict(defn: ClassDef, decorators: list[tuple[str, Expression]]) -> str:
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
