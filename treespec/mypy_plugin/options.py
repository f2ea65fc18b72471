"""Literal `static_flags=` and `default=` at a transform's call (or in the
decorator that calls it), checked against the function's parameters as the
runtime checks them (`normalize_flags`, the default policies).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Final

from mypy.nodes import (
    ClassDef,
    Decorator,
    Expression,
    FuncDef,
    OverloadedFuncDef,
    StrExpr,
)
from mypy.plugin import FunctionContext
from mypy.types import CallableType, ProperType, Type, get_proper_type

from treespec._model.markers import Marker
from treespec._model.rules import DEFAULT_POLICIES, covered, type_problem
from treespec._model.spec import AnyNode, LeafNode, Node

from .codes import BAD_DEFAULT, BAD_FLAGS
from .flags import Entry, check_entry, read_entry, star_node
from .nodes import Builder

#: The transforms that take `static_flags=` and `default=`.
TRANSFORMS: Final = frozenset(
    {
        "treespec._transforms.jit.jit",
        "treespec._transforms.grad.grad",
        "treespec._transforms.grad.value_and_grad",
        "treespec._transforms.vmap.vmap",
        "treespec._transforms.vmap.pmap",
        "treespec._transforms.checkpoint.checkpoint",
        "treespec._transforms.shard_map.shard_map",
    }
)


def _check_transform_call(ctx: FunctionContext, index: DecoratorIndex) -> None:
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
        fun = decorated(ctx, index)  # @treespec.jit(static_flags=...) on a function
    check_options(ctx, found, fun)


def check_options(
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
    entry = read_entry(flags_expr) if flags_expr is not None else None
    signature = _Params(fun) if isinstance(fun, CallableType) else None
    if isinstance(default, StrExpr) and signature is not None:
        _check_policy(ctx, default, signature, entry)
    if entry is None:
        return
    if signature is not None and entry.kind == "mapping":
        _check_by_name(ctx, entry, signature)
    elif signature is not None and entry.kind == "sequence":
        _check_by_position(ctx, entry, signature)
    else:  # no parameters to hold it against, or one entry for every leaf
        check_entry(ctx, entry, None, "static_flags")


def _check_by_name(ctx: FunctionContext, entry: Entry, signature: _Params) -> None:
    """A dict of entries, keyed by parameter name."""
    names = signature.names
    params = [(name, t) for name, t in zip(names, signature.types) if name is not None]
    known = {name for name, _ in params}
    by_name = dict(params)
    unnamed = len(params) < len(names)  # names mypy does not keep: no verdict
    builder = Builder()
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
            node = star_node(node, child)
        check_entry(ctx, child, node, f"static_flags[{key!r}]")


def _check_by_position(ctx: FunctionContext, entry: Entry, signature: _Params) -> None:
    """A list or tuple of entries, one per positional parameter and one for
    `*args`."""
    types = signature.types
    positional = [(signature.label(i), types[i]) for i in signature.positional]
    n = len(entry.items)
    star = signature.star
    if star is not None and n > len(positional) + 1:
        _fail_star_entries(ctx, entry, signature)
        return
    if n < len(positional) or (n > len(positional) and star is None):
        _fail_entry_count(ctx, entry, [name for name, _ in positional])
        return
    builder = Builder()
    for index, child in entry.items:
        assert isinstance(index, int)
        at: Node | None = None
        if index < len(positional):
            at = builder.node(positional[index][1])
        elif star is not None:
            at = star_node(builder.node(types[star]), child)
        check_entry(ctx, child, at, f"static_flags[{index}]")


def _fail_entry_count(
    ctx: FunctionContext, entry: Entry, positional: list[str]
) -> None:
    """The runtime's rule (`normalize_flags`): one entry per positional
    parameter (a method's `self` included), and one for `*args`."""
    n = len(entry.items)
    missing = ", ".join(positional[n:])
    ctx.api.fail(
        f"static_flags has {n} entries but the function takes "
        f"{len(positional)} positional parameters "
        f"({', '.join(positional)}); "
        + (
            f"{missing} would have none: add an entry for each (None lets "
            "the hints decide), or give a dict keyed by name"
            if missing
            else "give one entry per positional parameter, or a dict keyed by name"
        ),
        entry.expr,
        code=BAD_FLAGS,
    )


def _fail_star_entries(ctx: FunctionContext, entry: Entry, signature: _Params) -> None:
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
        if self.names[i]:
            return str(self.names[i])
        if i in self.positional:
            return f"<positional {self.positional.index(i)}>"
        return "*args" if i == self.star else "**kwargs"  # `Callable[..., T]`


def _check_policy(
    ctx: FunctionContext, default: StrExpr, signature: _Params, flags: Entry | None
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
    flagged = _flagged(signature, flags)
    if flagged is None:
        return  # maybe an unnamed parameter's name: no verdict
    builder = Builder()
    for i, t in enumerate(signature.types):
        if i in flagged:
            continue
        name = signature.label(i)
        node = builder.node(t)
        if node.marker is not None:
            continue
        if policy == "error":
            _fail_uncovered(ctx, default, name, node)
        else:
            _fail_under_policy(ctx, default, name, node)


def _flagged(signature: _Params, flags: Entry | None) -> set[int] | None:
    """The parameters a flag entry speaks for, by index (a positional-only one
    may have no name to mypy); None when a key may be the name of a parameter
    mypy keeps no name for."""
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
            return None
    return flagged


def _fail_uncovered(
    ctx: FunctionContext, default: StrExpr, name: str, node: Node
) -> None:
    """default='error': a leaf of the parameter that nothing covers."""
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


def _fail_under_policy(
    ctx: FunctionContext, default: StrExpr, name: str, node: Node
) -> None:
    """default='static'/'dynamic': the first verdict of that marker around the
    parameter."""
    policy = default.value
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
            return


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


class DecoratorIndex:
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


def decorated(ctx: FunctionContext, index: DecoratorIndex) -> ProperType | None:
    """The signature of the function this call decorates, anywhere in the
    module (a method's includes `self`, as the flags of the function do)."""
    tree = getattr(ctx.api, "tree", None)
    stmt = index.find(tree, ctx.context) if tree is not None else None
    if stmt is None or stmt.func.type is None:
        return None
    return get_proper_type(stmt.func.type)


def options_note(ctx: FunctionContext, error: BaseException) -> None:
    """An internal failure while checking a call's options: a note, never a
    crash."""
    with contextlib.suppress(Exception):
        ctx.api.msg.note(
            f"treespec: this call's static_flags/default were not checked "
            f"(internal {type(error).__name__}); please report it",
            ctx.context,
        )


def transform_call(ctx: FunctionContext, index: DecoratorIndex) -> Type:
    try:
        _check_transform_call(ctx, index)
    except Exception as error:  # the plugin never breaks mypy
        options_note(ctx, error)
    return ctx.default_return_type
