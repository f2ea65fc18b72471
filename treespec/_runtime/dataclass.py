"""`treespec.dataclass`: a frozen pytree dataclass whose Static fields are metadata."""

from __future__ import annotations

import dataclasses
import re
import sys
import typing
from collections.abc import Callable
from typing import Any, TypeVar, overload

import jax
from typing_extensions import dataclass_transform

from .._model.errors import SpecError
from .._model.held import MUTABLE_CONTAINERS, mutable_static_problem
from .._model.markers import Marker, marker_of
from .reading.classes import note_treespec_dataclass

__all__ = ["dataclass"]

_C = TypeVar("_C", bound=type)
_STATIC_TEXT = re.compile(r"^\s*(?:[A-Za-z_]\w*\.)*Static\[")


#: A string annotation that names no class yet: its text decides (the
#: names of `MUTABLE_CONTAINERS`, and `typing`'s capitalised aliases).
_MUTABLE_TEXT = re.compile(
    r"^\s*(?:[A-Za-z_]\w*\.)*Static\[\s*(?:typing\.|collections\.)?("
    + "|".join(sorted({n.rpartition(".")[2] for n in MUTABLE_CONTAINERS}))
    + r"|List|Dict|Set|DefaultDict|OrderedDict|defaultdict)\b"
)


def _static_field(cls: type, name: str, annotation: Any) -> tuple[bool, Any]:
    """Whether the field's outermost marker is Static, and what it marks.

    A string annotation (`from __future__ import annotations`) is evaluated in
    the class's module; if it names something not defined yet, its text decides
    (and what it marks is that text).
    """
    if isinstance(annotation, str):
        module = sys.modules.get(cls.__module__)
        namespace = dict(vars(module)) if module else {}
        namespace.setdefault(cls.__name__, cls)
        try:
            annotation = eval(annotation, namespace)
        except Exception:
            return bool(_STATIC_TEXT.match(annotation)), annotation
    base, markers, _ = marker_of(annotation)
    return Marker.STATIC in markers, base


def _mutable_container(base: Any) -> str | None:
    """The name of the mutable container class `base` is, if it is one."""
    if isinstance(base, str):  # the whole annotation's text: `Static[list[int]]`
        match = _MUTABLE_TEXT.match(base)
        return match.group(1) if match else None
    origin = typing.get_origin(base) or base
    if not isinstance(origin, type):
        return None
    names = {f"{c.__module__}.{c.__qualname__}" for c in origin.__mro__}
    return origin.__name__ if names & MUTABLE_CONTAINERS else None


def _register(cls: _C, kwargs: dict[str, Any]) -> _C:
    kwargs.setdefault("frozen", True)
    made: Any = dataclasses.dataclass(**kwargs)(cls)
    meta, data = [], []
    for field in dataclasses.fields(made):
        if not field.init:
            raise TypeError(
                f"treespec.dataclass {made.__qualname__}.{field.name}: fields with "
                "init=False cannot be rebuilt from a pytree; give it init=True."
            )
        static, base = _static_field(made, field.name, field.type)
        container = _mutable_container(base) if static else None
        if container is not None:
            raise SpecError(
                mutable_static_problem(made.__qualname__, field.name, container)
            )
        if static:
            meta.append(field.name)
        else:
            data.append(field.name)
    jax.tree_util.register_dataclass(made, data_fields=data, meta_fields=meta)
    note_treespec_dataclass(made, meta)
    return made  # type: ignore[no-any-return]


@overload
def dataclass(cls: _C, /) -> _C: ...


@overload
def dataclass(
    *, frozen: bool = True, eq: bool = True, repr: bool = True, kw_only: bool = False
) -> Callable[[_C], _C]: ...


@dataclass_transform(frozen_default=True)
def dataclass(cls: Any = None, /, **kwargs: Any) -> Any:
    """A frozen dataclass registered as a JAX pytree.

    Fields annotated `Static[...]` become JAX metadata fields (part of the tree
    structure), so even plain `jax.jit` holds them static; all other fields are
    children. treespec transforms read the same annotations. A `Static` field
    of a mutable container type (`list`, `dict`, `set`, ...) is refused with a
    [`SpecError`][treespec.SpecError] when the class is defined: a container
    changed in place inside metadata is seen by no compile cache, so the
    compiled code would go stale. Use `tuple[...]`/`frozenset[...]` there.

    **Arguments:**

    - `cls`: the class (when used as a bare decorator).
    - `**kwargs`: passed to `dataclasses.dataclass` (`frozen` defaults to True).

    **Returns:**

    The dataclass, registered with `jax.tree_util.register_dataclass`.

    !!! example

        ```python
        import jax
        import jax.numpy as jnp
        import treespec
        from treespec import Static

        @treespec.dataclass
        class Layer:
            w: jax.Array
            activation: Static[str]

        layer = Layer(jnp.ones(3), "relu")
        assert jax.tree_util.tree_leaves(layer) == [layer.w]
        ```
    """
    if cls is None:
        return lambda c: _register(c, dict(kwargs))
    return _register(cls, dict(kwargs))
