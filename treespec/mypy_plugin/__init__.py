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
- ``treespec-mutable-static``: a ``treespec.dataclass`` field ``Static[...]`` of
  a mutable container (``list``, ``dict``, ``set``, ...), which the runtime
  refuses when the class is defined (as JAX metadata it would go stale).

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
  ``treespec._model.spec`` from mypy's types and asks ``treespec._model.rules``
  (``covered``, ``type_problem``, ``union_conflict``, ``marked_union_conflict``).

The plugin never raises: an internal failure becomes a note and mypy goes on.
This package never imports JAX: ``treespec``'s ``__init__`` loads the runtime
lazily. Which hook lives in which module: ``README.md`` beside this file.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from mypy.nodes import TypeAlias
from mypy.plugin import (
    AnalyzeTypeContext,
    ClassDefContext,
    FunctionContext,
    MethodSigContext,
    Plugin,
)
from mypy.types import FunctionLike, Type, TypeAliasType

from .class_facts import DATACLASS_PYTREES, record_class
from .eval_shape import EVAL_SHAPE, eval_shape_call
from .held import check_decorated, check_fields, mypys_plugin
from .markers import (
    analyze_annotated,
    analyze_marked_alias,
    analyze_marker,
    can_delegate,
)
from .options import TRANSFORMS, DecoratorIndex, transform_call
from .partial import partial_call
from .signature import CALLS, named_call
from .spelling import ANNOTATED, MARKER_ALIASES, analysed_marker

__all__ = ["plugin"]


#: The JAX-free spec model, whose nodes, rules and messages the plugin reads.
_MODEL = "_model"


def _digest() -> str:
    """A digest of this package's modules and of the rules it reads. mypy keys
    its cache on a plugin module's `__version__` and on the bytes of its
    `__file__`, which for a package is this file alone: an edit to any other
    of its modules, or to a rule, must invalidate the cache too."""
    here = Path(__file__).parent
    digest = hashlib.sha256()
    paths = [*sorted(here.glob("*.py")), *sorted((here.parent / _MODEL).glob("*.py"))]
    for path in paths:
        digest.update(f"{path.parent.name}/{path.name}".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


#: Read by mypy, not a release number (see `_digest`).
__version__: Final = _digest()

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
        self._decorators = DecoratorIndex()
        self._mypys = mypys_plugin(options)

    def get_type_analyze_hook(
        self, fullname: str
    ) -> Callable[[AnalyzeTypeContext], Type] | None:
        marker = MARKER_ALIASES.get(fullname)
        if marker is not None:
            return analyze_marker(marker)
        if fullname in ANNOTATED:
            return analyze_annotated(fullname)
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
            and analysed_marker(node.target) is not None
            and can_delegate()
        ):
            return analyze_marked_alias(fullname)
        return None

    def get_function_hook(
        self, fullname: str
    ) -> Callable[[FunctionContext], Type] | None:
        if fullname == EVAL_SHAPE:
            return eval_shape_call
        if fullname == "functools.partial":
            return functools.partial(partial_call, index=self._decorators)
        if fullname in TRANSFORMS:
            return functools.partial(transform_call, index=self._decorators)
        return None

    def get_method_signature_hook(
        self, fullname: str
    ) -> Callable[[MethodSigContext], FunctionLike] | None:
        # A call of a transformed function: named for it in mypy's messages.
        return named_call if fullname in CALLS else None

    def get_customize_class_mro_hook(
        self, fullname: str
    ) -> Callable[[ClassDefContext], None] | None:
        # Called once per class definition, with its body still at hand.
        return record_class

    def get_base_class_hook(
        self, fullname: str
    ) -> Callable[[ClassDefContext], None] | None:
        # Called once the class body is analysed (its fields' types known).
        return check_fields

    def get_class_decorator_hook_2(
        self, fullname: str
    ) -> Callable[[ClassDefContext], bool] | None:
        if fullname not in DATACLASS_PYTREES and fullname != "dataclasses.dataclass":
            return None
        if self._mypys is None:
            return None
        return functools.partial(check_decorated, mypys=self._mypys, fullname=fullname)


def plugin(version: str) -> type[Plugin]:
    """The entry point mypy calls."""
    return TreespecPlugin
