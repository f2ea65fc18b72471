"""Markers on fields a class holds in its tree structure: the base-class and
class-decorator hooks that report a `Dynamic`/`Donate` marker on a field the
class holds static (or `Static` on one NNX is told is data), once the class
body is analysed. The rules and messages are the runtime's (`treespec._model.held`).
"""

from __future__ import annotations

from typing import Any, Final

from mypy.nodes import AssignmentStmt, NameExpr, TypeInfo
from mypy.plugin import ClassDefContext
from mypy.types import Instance, Type, get_proper_type

from treespec._model.held import (
    EQX_MODULES,
    EQX_STATIC,
    FLAX_STATIC,
    FLAX_STRUCT_BASES,
    JAX_META_FIELD,
    JAX_STATIC,
    MUTABLE_CONTAINERS,
    NNX_ANNOTATION,
    NNX_PLAIN,
    NNX_PYTREES,
    NNX_STATIC,
    TREESPEC_STATIC,
    Switch,
    data_conflict,
    held_conflict,
    mutable_static_problem,
)
from treespec._model.markers import Marker
from treespec._model.spec import Node

from .class_facts import DATACLASS_PYTREES, record_of, told_data
from .codes import HELD_FIELD, MUTABLE_STATIC
from .nodes import Builder, nnx_data


def _family(info: TypeInfo) -> str:
    """Which library's rules say what the class holds static: "eqx", "nnx",
    "flax", "treespec", "jax", or "" (no pytree of fields)."""
    names = {base.fullname for base in info.mro}
    record = record_of(info) or {}
    decorators = set(record.get("decorators", ()))
    if names & EQX_MODULES:
        return "eqx"
    if names & NNX_PYTREES:
        return "nnx"
    if names & FLAX_STRUCT_BASES or "flax.struct.dataclass" in decorators:
        return "flax"
    if decorators & {"treespec._runtime.dataclass.dataclass", "treespec.dataclass"}:
        return "treespec"
    if decorators & DATACLASS_PYTREES:
        return "jax"
    return ""


#: The switch a field specifier stands for, by kind (`field_facts`).
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
    if family == "nnx" and not data and not nnx_data(t):
        return NNX_PLAIN
    return None


def _mutable_container(t: Type) -> str | None:
    """The name of the mutable container class `t` is (`MUTABLE_CONTAINERS`
    of `_model/held.py` among its bases), if it is one."""
    proper = get_proper_type(t)
    if not isinstance(proper, Instance):
        return None
    names = {base.fullname for base in proper.type.mro}
    return proper.type.name if names & MUTABLE_CONTAINERS else None


def check_fields(ctx: ClassDefContext) -> None:
    """Markers on the fields a pytree class holds in its tree structure (or
    tells NNX are data) that the runtime refuses (`_model/held.py`), reported on the
    field once the class body is analysed."""
    try:
        info = ctx.cls.info
        family = _family(info)
        record = record_of(info)
        if not family or record is None:
            return
        kinds = record.get("held", {})
        data = told_data(info)
        for stmt in ctx.cls.defs.body:
            if (
                not isinstance(stmt, AssignmentStmt)
                or stmt.type is None
                or not isinstance(stmt.lvalues[0], NameExpr)
            ):
                continue
            name = stmt.lvalues[0].name
            node = Builder().node(stmt.type)
            switch = _switch(family, kinds.get(name, ""), node, stmt.type, name in data)
            problem = held_conflict(info.name, name, node, switch) if switch else None
            if problem is None and name in data:
                problem = data_conflict(info.name, name, node, data[name])
            if problem is not None:
                ctx.api.fail(problem, stmt, code=HELD_FIELD)
            container = None
            if family == "treespec" and node.marker is Marker.STATIC:
                container = _mutable_container(stmt.type)
            if container is not None:
                message = mutable_static_problem(info.name, name, container)
                ctx.api.fail(message, stmt, code=MUTABLE_STATIC)
    except Exception:  # the plugin never breaks mypy
        pass


def check_decorated(ctx: ClassDefContext, mypys: Any, fullname: str) -> bool:
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
        check_fields(ctx)
    return done


def mypys_plugin(options: Any) -> Any:
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
