"""The hooks on a marker: `Static[...]`/`Dynamic[...]`/`Donate[...]`,
`Annotated[T, Marker.STATIC]`, and a user's alias of a marked type. Each
checks the marked type (`_check_marked`, with the runtime's verdicts) and the
unions of the statement's raw annotations, and returns the marker's own alias
type, so that the marker stays in the type (mypy expands it wherever it
checks, and keeps it through copies, generics, aliases and the cache).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from mypy.nodes import TypeAlias
from mypy.plugin import AnalyzeTypeContext, Plugin
from mypy.types import AnyType, Type, TypeAliasType, TypeOfAny, UnboundType

from treespec._model.markers import Marker
from treespec._model.rules import (
    covered_places,
    marked_union_conflict,
    type_problem,
    union_conflict,
    union_fix,
)
from treespec._model.spec import AnyNode, Node, NoneNode, UnionNode

from .class_facts import EXPOSED
from .codes import (
    BARE_MARKER,
    CONFLICTING_UNION,
    NESTED_MARKER,
    NON_ARRAY_DYNAMIC,
    UNHASHABLE_STATIC,
)
from .nodes import Builder
from .spelling import (
    MARKER_ALIASES,
    is_none,
    lookup,
    metadata_markers,
    raw_children,
    raw_marker,
    raw_types,
    union_members,
)

_MARKERS_MODULE: Final = "treespec._model.markers"
_CANONICAL: Final = {m: f"{_MARKERS_MODULE}.{m.title}" for m in Marker}


def _check_unions(ctx: AnalyzeTypeContext) -> None:
    """Unions reach no hook of their own (`A | B`), and mypy's own analysis of
    `Union[...]` is left alone: when a marker is analysed, the statement's raw
    annotations are searched for unions whose members disagree. (Each union
    may be reported from several markers; mypy shows a message once a line.)
    """
    analyzer = ctx.api
    semantic = getattr(analyzer, "api", None)
    stack = raw_types(getattr(semantic, "statement", None), analyzer)
    seen = 0
    while stack and seen < 10_000:
        seen += 1
        t = stack.pop()
        stack.extend(raw_children(t))
        members = union_members(analyzer, t)
        if members is None:
            continue
        nodes: list[Node] = []
        for member in members:
            if is_none(analyzer, member):
                nodes.append(NoneNode())
                continue
            marker = raw_marker(analyzer, member)
            text = (
                str(member.args[0])
                if marker is not None
                and isinstance(member, UnboundType)
                and len(member.args) == 1
                and (
                    getattr(lookup(analyzer, member.name, member), "fullname", "")
                    in MARKER_ALIASES
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


def _depend_on(ctx: AnalyzeTypeContext, classes: set[str]) -> None:
    """Recheck this place when one of these classes changes (`dmypy`)."""
    semantic = getattr(ctx.api, "api", None)
    add = getattr(semantic, "add_plugin_dependency", None)
    if add is None:
        return
    for fullname in classes:
        if not fullname.startswith("builtins."):
            # A changed class attribute triggers its own name, not the class.
            add(f"<{fullname}.{EXPOSED}>")


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
    builder = Builder()
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
    # One error per problem, naming the places below the annotation that
    # have it (`['name']` of a dict), as the runtime names them. Around a
    # class, `Dynamic`/`Donate` cover the fields that can be traced only (an
    # `eqx.nn.MLP`'s activation stays static), as at run time.
    problems: dict[str, list[str]] = {}
    places = covered_places(
        node.with_marker(marker, node.text), into_classes=marker is Marker.STATIC
    )
    for path, place in places:
        problem = type_problem(place, marker)
        if problem is not None:
            paths = problems.setdefault(problem, [])
            if path and path not in paths:
                paths.append(path)
    for problem, paths in problems.items():
        where = f", at {' and '.join(paths)}" if paths else ""
        fail(f"{marker.title}[...]{where}: {problem}", ctx.context, code=code)


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


def analyze_marker(marker: Marker) -> Callable[[AnalyzeTypeContext], Type]:
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


def analyze_annotated(fullname: str) -> Callable[[AnalyzeTypeContext], Type]:
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
            markers = metadata_markers(analyzer, list(t.args[1:]))
            if not markers:
                return
            _check_marked(ctx, markers[0], default, markers[1:])
            _check_unions(ctx)
            result[0] = _alias_type(ctx, _CANONICAL[markers[0]], default)

        _guarded(ctx, check)
        return result[0]

    return hook


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


def analyze_marked_alias(fullname: str) -> Callable[[AnalyzeTypeContext], Type]:
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


def can_delegate() -> bool:
    from mypy.typeanal import TypeAnalyser

    return hasattr(TypeAnalyser, "visit_unbound_type_nonoptional")
