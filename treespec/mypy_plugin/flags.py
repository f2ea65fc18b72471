"""A literal `static_flags=` read as entries (`read_entry`), and each entry
checked against the annotation it covers (`check_entry`): an entry that is
no flag, or `True` where the annotation is an array.
"""

from __future__ import annotations

from mypy.nodes import (
    CallExpr,
    Decorator,
    DictExpr,
    Expression,
    FuncDef,
    NameExpr,
    OverloadedFuncDef,
    RefExpr,
    StrExpr,
)
from mypy.plugin import FunctionContext

from treespec._model.rules import ARRAY_TYPES
from treespec._model.spec import ClassBacked, LeafNode, MappingNode, Node, SequenceNode

from .codes import BAD_FLAGS


class Entry:
    """A literal flag entry: its kind ("bool", "none", "callable", "mapping",
    "sequence", "bad", or "unknown" when not a literal) and its parts."""

    __slots__ = ("expr", "items", "kind", "value")

    def __init__(
        self,
        kind: str,
        expr: Expression,
        value: object = None,
        items: list[tuple[object, Entry]] | None = None,
    ) -> None:
        self.kind = kind
        self.expr = expr
        self.value = value
        self.items = items or []


def read_entry(expr: Expression) -> Entry:
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
        return Entry("bool", expr, expr.fullname == "builtins.True")
    if isinstance(expr, NameExpr) and expr.fullname == "builtins.None":
        return Entry("none", expr)
    if isinstance(expr, (StrExpr, BytesExpr, IntExpr, FloatExpr, ComplexExpr)):
        return Entry("bad", expr, getattr(expr, "value", None))
    if isinstance(expr, LambdaExpr):
        return Entry("callable", expr)
    if isinstance(expr, RefExpr) and isinstance(
        expr.node, (FuncDef, Decorator, OverloadedFuncDef)
    ):
        return Entry("callable", expr)
    if isinstance(expr, DictExpr):
        items: list[tuple[object, Entry]] = []
        for key, value in expr.items:
            if not isinstance(key, StrExpr):
                return Entry("unknown", expr)
            items.append((key.value, read_entry(value)))
        return Entry("mapping", expr, items=items)
    if (
        isinstance(expr, CallExpr)
        and isinstance(expr.callee, RefExpr)
        and expr.callee.fullname == "builtins.dict"
        and expr.arg_names
        and all(expr.arg_names)
    ):
        pairs = [(n, read_entry(a)) for n, a in zip(expr.arg_names, expr.args)]
        return Entry("mapping", expr, items=list(pairs))
    if isinstance(expr, (ListExpr, TupleExpr)):
        return Entry(
            "sequence",
            expr,
            items=[(i, read_entry(e)) for i, e in enumerate(expr.items)],
        )
    return Entry("unknown", expr)


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


def check_entry(
    ctx: FunctionContext, entry: Entry, node: Node | None, where: str
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
        check_entry(ctx, child, sub, f"{where}[{key!r}]")


def star_node(item: Node, entry: Entry) -> Node:
    """What the entry of `*args` covers: each extra argument (of the element
    type mypy gives) alike, or, for a list entry, one by one."""
    if entry.kind == "sequence":
        return SequenceNode(container="builtins.tuple", rest=item, text="tuple")
    return item
