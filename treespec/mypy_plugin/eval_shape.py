"""The type of `treespec.eval_shape(fun, ...)`: `fun`'s result type with
`jax.ShapeDtypeStruct` for its arrays.
"""

from __future__ import annotations

import contextlib
from typing import Final

from mypy.plugin import FunctionContext
from mypy.types import (
    AnyType,
    CallableType,
    Instance,
    TupleType,
    Type,
    TypedDictType,
    TypeOfAny,
    UnionType,
    get_proper_type,
)

from treespec._model.rules import ARRAY_TYPES, MAPPING_TYPES, SEQUENCE_TYPES

from .spelling import MAX_DEPTH

EVAL_SHAPE: Final = "treespec._transforms.checkpoint.eval_shape"
_SHAPE_DTYPE_STRUCT: Final = ("jax.ShapeDtypeStruct", "jax._src.core.ShapeDtypeStruct")


def _shaped(typ: Type, sds: Instance, depth: int = 0) -> Type:
    """`typ` with `jax.ShapeDtypeStruct` for each array type in it: the type of
    what `eval_shape` returns for a function that returns `typ`. A pytree class
    stays itself: the result is an instance of it."""
    if depth > MAX_DEPTH:
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


def eval_shape_call(ctx: FunctionContext) -> Type:
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
