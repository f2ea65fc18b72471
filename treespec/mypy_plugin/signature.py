"""The name of a transformed function in mypy's messages about its calls.

A call of a `Jitted` (or any `Transformed`) is a call of its `__call__`, so
mypy would say `Argument 2 to "__call__" of "Jitted"`. The method signature
hook gives that signature the name the call is written with, so the message
reads as for the plain function: `Argument 2 to "step"`.
"""

from __future__ import annotations

from typing import Final

from mypy.nodes import CallExpr, MemberExpr, NameExpr
from mypy.plugin import MethodSigContext
from mypy.types import CallableType, FunctionLike

#: The `__call__` of each type a transformed function or method has, by the
#: full name mypy asks the hook with (the called object's class).
CALLS: Final = frozenset(
    {
        "treespec._transforms.jit.Jitted.__call__",
        "treespec._transforms.jit_stages.BoundJitted.__call__",
        "treespec._transforms.base.Transformed.__call__",
        "treespec._transforms.base.Counted.__call__",
        "treespec._transforms.base.BoundTransform.__call__",
    }
)


def named_call(ctx: MethodSigContext) -> FunctionLike:
    """`__call__`'s signature, named for the function the call names."""
    signature = ctx.default_signature
    try:
        context = ctx.context
        callee = context.callee if isinstance(context, CallExpr) else None
        if isinstance(callee, (NameExpr, MemberExpr)) and isinstance(
            signature, CallableType
        ):
            return signature.copy_modified(name=callee.name)
    except Exception:  # the plugin never breaks mypy
        pass
    return signature
