"""What a class says about its fields, at run time.

Which classes treespec follows (TypedDicts, NamedTuples, dataclasses, Flax NNX
pytrees), the annotations of their fields, and which fields the class holds in
its tree structure, with the library switch that says so (see `_model/held.py` for
what a marker there means). Decided once per class from the class alone where
the class tells (`class_held`); what only an instance tells (an NNX attribute
that is not data, `meta_fields` given to `register_dataclass`) is read off the
value's children when a call first meets it (`held_in`).
"""

from __future__ import annotations

import dataclasses
import inspect
import threading
import typing
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from typing_extensions import is_typeddict

from ..._model.held import (
    EQX_MODULES,
    EQX_STATIC,
    FLAX_STATIC,
    JAX_META_FIELD,
    JAX_STATIC,
    NNX_ANNOTATION,
    NNX_PLAIN,
    NNX_PYTREES,
    NNX_STATIC,
    TREESPEC_STATIC,
    Switch,
)
from ..._model.markers import mentions_marker

__all__ = [
    "class_data",
    "class_held",
    "class_hints",
    "field_names",
    "held_in",
    "is_class_backed",
    "is_namedtuple",
    "is_nnx",
    "mro_names",
    "note_treespec_dataclass",
    "unfollowed_markers",
]

#: NNX's own bookkeeping attributes, never fields.
_NNX_INTERNAL = ("_pytree__", "_object__")

_lock = threading.Lock()
_held: weakref.WeakKeyDictionary[type, Mapping[str, Switch]] = (
    weakref.WeakKeyDictionary()
)
#: The static (metadata) fields of each class made by `treespec.dataclass`.
_treespec_static: weakref.WeakKeyDictionary[type, tuple[str, ...]] = (
    weakref.WeakKeyDictionary()
)


def mro_names(cls: type) -> set[str]:
    """The full names (`module.qualname`) of `cls` and its bases, as the
    tables of `_model/held.py` list classes."""
    return {f"{c.__module__}.{c.__qualname__}" for c in cls.__mro__}


def is_namedtuple(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, tuple) and hasattr(tp, "_fields")


def is_nnx(cls: Any) -> bool:
    """Whether `cls` is a Flax NNX pytree (`nnx.Module`, `nnx.Pytree`)."""
    return isinstance(cls, type) and not mro_names(cls).isdisjoint(NNX_PYTREES)


def is_class_backed(cls: type) -> bool:
    """Whether treespec follows the class's field annotations."""
    return (
        is_typeddict(cls)
        or is_namedtuple(cls)
        or dataclasses.is_dataclass(cls)
        or is_nnx(cls)
    )


def _is_classvar(annotation: Any) -> bool:
    if isinstance(annotation, str):
        return annotation.split("[")[0].strip() in ("ClassVar", "typing.ClassVar")
    return typing.get_origin(annotation) is typing.ClassVar


def class_hints(cls: type) -> dict[str, tuple[Any, str | None]]:
    """Raw annotations of a class and its bases, with the module each came
    from (NNX's bookkeeping left out)."""
    hints: dict[str, tuple[Any, str | None]] = {}
    for klass in reversed(cls.__mro__):
        for name, ann in inspect.get_annotations(klass).items():
            if not name.startswith(_NNX_INTERNAL):
                hints[name] = (ann, klass.__module__)
    return hints


def field_names(cls: type) -> list[str]:
    """The fields of a dataclass, NamedTuple or NNX pytree, in order (an NNX
    pytree's are its annotated attributes; others are followed unannotated)."""
    if dataclasses.is_dataclass(cls):
        return [f.name for f in dataclasses.fields(cls)]
    if is_nnx(cls):
        return [n for n, (a, _) in class_hints(cls).items() if not _is_classvar(a)]
    return list(getattr(cls, "_fields", ()))


def note_treespec_dataclass(cls: type, static: Sequence[str]) -> None:
    """`treespec.dataclass` made `cls`, with these fields as JAX metadata."""
    with _lock:
        _treespec_static[cls] = tuple(static)


def _registered(cls: type) -> bool:
    """Whether JAX's registry has `cls` as a pytree node (a node is flattened;
    an unregistered class is a leaf, whose fields hold nothing apart)."""
    import jax

    is_node = getattr(jax.tree_util.default_registry, "is_node", None)
    if is_node is not None:
        return bool(is_node(cls))
    # JAX before 0.9 has no `is_node`: its Python-side record of the same
    # registry (every `register_pytree_node`/`register_dataclass` class).
    from jax._src import tree_util

    return cls in getattr(tree_util, "_registry", ())


def _declared_in(cls: type, name: str) -> Any:
    """The class attribute `name` as declared (not through a descriptor)."""
    for klass in cls.__mro__:
        if name in vars(klass):
            return vars(klass)[name]
    return None


def _nnx_nodes(cls: type) -> Mapping[str, bool]:
    """NNX's class-level record: attribute -> is data (from `nnx.data()`,
    `nnx.static()`, `nnx.Data[...]`, `nnx.Static[...]`)."""
    nodes = getattr(cls, "_pytree__nodes", None) or {}
    return {
        str(n): bool(d)
        for n, d in nodes.items()
        if not str(n).startswith(_NNX_INTERNAL)
    }


def _nnx_switch(cls: type, name: str, data: bool) -> str:
    declared = _declared_in(cls, name)
    if isinstance(declared, dataclasses.Field):
        return "nnx.data()" if data else NNX_STATIC.text
    return "nnx.Data[...]" if data else NNX_ANNOTATION.text


def class_data(cls: type) -> dict[str, str]:
    """The attributes an NNX class declares data, each with how it says so."""
    if not is_nnx(cls):
        return {}
    return {
        name: _nnx_switch(cls, name, True)
        for name, data in _nnx_nodes(cls).items()
        if data
    }


def _find_held(cls: type) -> dict[str, Switch]:
    if is_nnx(cls):
        return {
            name: NNX_STATIC
            if _nnx_switch(cls, name, False) == NNX_STATIC.text
            else NNX_ANNOTATION
            for name, data in _nnx_nodes(cls).items()
            if not data
        }
    if not dataclasses.is_dataclass(cls) or not _registered(cls):
        return {}
    fields = dataclasses.fields(cls)
    if not mro_names(cls).isdisjoint(EQX_MODULES):
        return {f.name: EQX_STATIC for f in fields if f.metadata.get("static")}
    if getattr(cls, "_flax_dataclass", False):
        return {
            f.name: FLAX_STATIC
            for f in fields
            if f.metadata.get("pytree_node", True) is False
        }
    made = _treespec_static.get(cls)
    if made is not None:
        return dict.fromkeys(made, TREESPEC_STATIC)
    return {f.name: JAX_STATIC for f in fields if f.metadata.get("static") is True}


def class_held(cls: type) -> Mapping[str, Switch]:
    """The fields `cls` holds in its tree structure, as the class alone tells,
    each with the switch that holds it (cached per class)."""
    try:
        found = _held.get(cls)
    except TypeError:  # not weakly referenceable
        return _find_held(cls)
    if found is None:
        found = _find_held(cls)
        with _lock:
            _held[cls] = found
    return found


def held_in(value: Any, children: Sequence[str]) -> dict[str, tuple[Switch, bool]]:
    """The attributes of a class-backed `value` that are no children (the
    class keeps them in its tree structure), each with its switch and whether
    it is an annotated field.

    `children` are the names of the value's children (its `GetAttrKey`s).
    """
    cls = type(value)
    annotated = field_names(cls)
    by_class = class_held(cls)
    names = [n for n in annotated if n not in children and hasattr(value, n)]
    if is_nnx(cls):  # NNX decides per instance: its unannotated statics too
        own = getattr(value, "_pytree__nodes", None) or {}
        names += [
            str(n)
            for n, data in own.items()
            if not data
            and str(n) not in annotated
            and not str(n).startswith(_NNX_INTERNAL)
        ]
    fallback = NNX_PLAIN if is_nnx(cls) else JAX_META_FIELD
    return {n: (by_class.get(n, fallback), n in annotated) for n in names}


def unfollowed_markers(cls: Any) -> list[tuple[str, Any]]:
    """The marked field annotations (`(name, annotation)`) of a registered
    pytree class whose fields treespec does not follow, or []."""
    if not isinstance(cls, type) or is_class_backed(cls) or not _registered(cls):
        return []
    hints = class_hints(cls).items()
    return [(name, ann) for name, (ann, _) in hints if mentions_marker(ann)]
