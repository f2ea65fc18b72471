"""`functools.partial(treespec.jit, ...)`: the options checked as at a
transform's call, and the direct form of the overloaded transform handed to
mypy's own `partial` support.
"""

from __future__ import annotations

from mypy.nodes import RefExpr
from mypy.plugin import FunctionContext
from mypy.types import CallableType, Overloaded, Type, get_proper_type

from .options import TRANSFORMS, DecoratorIndex, check_options, decorated, options_note


def partial_call(ctx: FunctionContext, index: DecoratorIndex) -> Type:
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
    if not (isinstance(callee, RefExpr) and callee.fullname in TRANSFORMS):
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
            check_options(ctx, found, decorated(ctx, index))
    except Exception as error:  # the plugin never breaks mypy
        options_note(ctx, error)
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
