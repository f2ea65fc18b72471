"""Abstract arguments from spec nodes, for checking shapes without data.

The third reader of the spec model (beside the runtime's split and the mypy
plugin): it walks the nodes `_runtime/reading/hints.py` derived, never the
annotations, and builds what a call would pass: `jax.ShapeDtypeStruct`s of
symbolic dimensions where arrays go, concrete values where static leaves go.

- One symbol per dimension name, for the whole call (the binding validation
  uses; an instance's own names, `scopes.py`); fixed sizes and expressions
  (`"n+1"`, `"2*k"`) as written.
- Two variants of the call: in the first, `#name` is at its bound size and
  `*name`/`...` are one dimension; in the second (made only when such a
  dimension is written), `#name` is 1 and `*name`/`...` are two dimensions.
  Every `...` of a call stands for the same dimensions.
- Each jaxtyping dtype category at one dtype (`Float` float32, `Int` int32).
- Static leaves: the value given; every value of a `bool`, `Literal[...]`
  or `Enum`, its default first; else the default; else `MissingValue`.
- Containers as the runtime follows them: `tuple[T, ...]`, `list[T]` and
  `*args` with one item, `dict[K, V]` and `**kwargs` empty, a `TypedDict`
  with every key, a class with every field (its `__init__` run where a field
  gives no shape, `construct.py`), `PyTree[T]` as one leaf, a union as its
  first member that can be built (an `Optional` whose default is `None` as
  its other member, so that branch is checked).
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import re
import typing
from collections.abc import Callable, Mapping
from typing import Any

import jax
import numpy as np

from .._model.markers import Marker
from .._model.spec import (
    AnyNode,
    ClassNode,
    LeafNode,
    MappingNode,
    Node,
    NoneNode,
    PyTreeNode,
    SequenceNode,
    UnionNode,
)
from .._runtime.checking.dims import DIM_NAME
from .._runtime.reading.classes import is_namedtuple, is_nnx
from .._runtime.reading.typing_forms import is_jaxtyping_array
from .construct import (
    NeedsConcrete,
    Refused,
    Taken,
    Unbuildable,
    by_init,
    field_defaults,
    has_own_init,
    unvalued,
)
from .containers import (
    CannotBuild,
    MissingValue,
    mapping_value,
    sequence_value,
    union_value,
)
from .leaves import dtype_of, finite_values, modes_of, named_by_fields
from .readings import OwnPath
from .scopes import InstanceScopes

__all__ = [
    "Builder",
    "CannotBuild",
    "MissingValue",
    "NO_DEFAULT",
    "abstract_value",
]

#: What a parameter or field without a default has (a signature's own mark).
NO_DEFAULT: Any = inspect.Parameter.empty


_SCALARS = {float: np.float32, int: np.int32, bool: np.bool_, complex: np.complex64}


class _FieldsInstead(Exception):
    """A class whose `__init__` could not make it: its fields stand."""


def abstract_value(value: Any) -> Any:
    """A value given, as it is, with its arrays abstract (their own shapes
    and dtypes)."""

    def one(leaf: Any) -> Any:
        if isinstance(leaf, (jax.Array, np.ndarray)):
            return _struct(leaf.shape, leaf.dtype)
        return leaf

    return jax.tree_util.tree_map(one, value)


def _struct(shape: Any, dtype: Any) -> Any:
    return jax.ShapeDtypeStruct(shape, dtype)  # type: ignore[no-untyped-call]


@dataclasses.dataclass
class Builder:
    """Builds one call's abstract arguments.

    `sizes`: the symbol of each dimension name; None on the first pass, which
    records the names (`names`), the choices of static leaves (`choices`) and
    whether the second variant is needed (`variadic`). `chosen`: the value of
    each choice, by path. `variant`: 0 or 1 (see the module docstring).
    """

    sizes: Mapping[str, Any] | None = None
    chosen: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    variant: int = 0
    names: dict[str, None] = dataclasses.field(default_factory=dict)
    choices: dict[str, tuple[Any, ...]] = dataclasses.field(default_factory=dict)
    variadic: bool = False
    _classes: list[type] = dataclasses.field(default_factory=list)
    #: Constructor arguments taken by assumption (`path.param` -> value).
    assumed: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: Static leaves built from their default, not every value.
    defaults: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: The checked function's dimension names (`leaves.declared_names`), and
    #: of those, its own annotations' (`leaves.own_names`; None: all).
    declared: frozenset[str] = frozenset()
    own: frozenset[str] | None = None
    #: Which instances bind their own names (`scopes.py`).
    scopes: InstanceScopes = dataclasses.field(default_factory=InstanceScopes)
    _anonymous: int = 0
    #: How many instances were made by their constructor so far.
    inits: int = 0
    #: The sizes constructors took that no annotation names (`Taken`).
    taken: Taken = dataclasses.field(default_factory=Taken)
    #: Of the sizes a constructor took, those its instance's fields hold
    #: under a name of the function's own (`leaves.named_by_fields`).
    fielded: dict[str, str] = dataclasses.field(default_factory=dict)

    def build(
        self,
        node: Node,
        path: str,
        default: Any = NO_DEFAULT,
        marker: Marker | None = None,
        *,
        given: bool = False,
    ) -> Any:
        """The abstract value of `node` at `path` (a key path, for messages);
        `default` is the parameter's or field's default, or with `given` the
        value the caller gave (which wins)."""
        marker = node.marker or marker
        if given:
            return abstract_value(default)
        if default is None and isinstance(node, UnionNode):
            return union_value(self, node, path, marker, prefer_value=True)
        if default is not NO_DEFAULT:
            modes = modes_of(node, marker, default)
            if modes is not None:  # every mode, the default first
                return self._choose(path, modes)
            if isinstance(node, LeafNode) and not node.is_array:
                self.defaults.setdefault(path, default)
            return abstract_value(default)
        builder = self._BUILDERS.get(type(node))
        if builder is None:
            raise CannotBuild(
                path, f"{node.text or type(node).__name__} is not followed"
            )
        return builder(self, node, path, marker)

    def _leaf(self, node: LeafNode, path: str, marker: Marker | None) -> Any:
        annotation = node.annotation
        if is_jaxtyping_array(annotation):
            return self._array(annotation, path)
        if marker in (Marker.DYNAMIC, Marker.DONATE) and annotation in _SCALARS:
            return _struct((), _SCALARS[annotation])
        if node.is_array:
            raise CannotBuild(
                path,
                f"{node.text} says no shape (annotate it with jaxtyping, such "
                "as Float[Array, 'b n'], or give a value)",
            )
        values = finite_values(node)
        name = re.search(r"([A-Za-z_]\w*)'?\]?$", path)
        # A count or a rate, not an array's: marked static, or an unmarked
        # `int` or `float` parameter (static as `default="infer"` holds it;
        # a class's unmarked field is its `__init__`'s to set).
        static = marker is Marker.STATIC or (marker is None and path.isidentifier())
        if values is None and annotation in (int, float) and name and static:
            return _unvalued_static(self, annotation, name[1], path)
        if values is None:
            raise MissingValue(path, node.text or "unannotated")
        return self._choose(path, values)

    def _any(self, node: AnyNode, path: str, marker: Marker | None) -> Any:
        raise MissingValue(path, node.text or "unannotated")

    def _none(self, node: NoneNode, path: str, marker: Marker | None) -> Any:
        return None

    def _choose(self, path: str, values: tuple[Any, ...]) -> Any:
        self.choices.setdefault(path, values)
        return self.chosen.get(path, values[0])

    def _array(self, annotation: Any, path: str) -> Any:
        shape = tuple(self._dims(str(getattr(annotation, "dim_str", "")), path))
        return _struct(shape, dtype_of(annotation))

    def _dims(self, dim_str: str, path: str) -> list[Any]:
        rank = 1 + self.variant
        sizes: list[Any] = []
        for token in dim_str.replace(",", " ").split():
            if token == "...":
                self.variadic = True
                sizes += [self._size(f"_dots{i}") for i in range(rank)]
                continue
            name = token
            while name[:1] in ("*", "#", "?"):
                name = name[1:]
            if token.startswith("*") or token.startswith("#*"):
                self.variadic = True
                names = [name] if rank == 1 else [f"{name}{i}" for i in range(rank)]
                sizes += [self._size(n) for n in names]
            elif token.startswith("#"):
                self.variadic = True
                sizes.append(1 if self.variant else self._token(name, path))
            else:
                sizes.append(self._token(name, path))
        return sizes

    def _token(self, name: str, path: str) -> Any:
        if name.isdigit():
            return int(name)
        if name == "_" or name.startswith("_"):
            self._anonymous += 1
            return self._size(f"_any{self._anonymous}")
        if DIM_NAME.fullmatch(name):
            return self._size(name)
        found = dict.fromkeys(DIM_NAME.findall(name))
        scope = {n: self._size(n) for n in found}
        try:
            return eval(name, {"__builtins__": {}}, scope)
        except Exception:
            why = f"the dimension {name!r} is not an expression of sizes"
            raise CannotBuild(path, why) from None

    def _size(self, name: str) -> Any:
        name = self.scopes.rename(name)
        self.names.setdefault(name)
        if self.sizes is None:
            return 2  # the first pass: a stand-in
        return self.sizes[name]

    def _pytree(self, node: PyTreeNode, path: str, marker: Marker | None) -> Any:
        return self.build(node.leaf, path, marker=marker)

    def _class(self, node: ClassNode, path: str, marker: Marker | None) -> Any:
        cls = node.cls
        unbuilt = CannotBuild(
            path, f"an instance of {node.text} cannot be built from its fields"
        )
        if not isinstance(cls, type):
            raise unbuilt
        if inspect.isabstract(cls):  # which subclass, no annotation says
            why = f"{node.text} is an abstract class, of a subclass no annotation names"
            raise CannotBuild(path, why)
        if is_nnx(cls):
            return self._constructed(node, path, unbuilt)
        if cls in self._classes:
            raise CannotBuild(path, f"{node.text} contains itself")
        defaults = field_defaults(cls)
        self._classes.append(cls)
        self.scopes.enter(cls, path)
        inits, before = self.inits, dict(self.assumed)
        try:
            values = {
                name: self.build(
                    child, f"{path}.{name}", defaults.get(name, NO_DEFAULT), marker
                )
                for name, child in node.fields.items()
            }
        except (CannotBuild, MissingValue) as error:  # no shape: its `__init__`
            return self._constructed(node, path, error)
        finally:
            self._classes.pop()
            self.scopes.leave()
        if self.inits > inits and has_own_init(cls):
            # A layer of it was made by its constructor on its own; the
            # class's `__init__` says how it makes its layers, sizes and
            # counts, so it makes the whole (else the fields stand).
            by_fields, self.assumed = self.assumed, before
            with contextlib.suppress(_FieldsInstead):
                return self._constructed(node, path, _FieldsInstead())
            self.assumed = by_fields
        if is_namedtuple(cls):
            return cls(**values)
        # The class's `__init__` may compute fields, draw weights or need a
        # key: the instance is made as its pytree unflattening makes one.
        instance: Any = object.__new__(cls)
        for name, value in values.items():
            object.__setattr__(instance, name, value)
        return instance

    def _constructed(self, node: ClassNode, path: str, error: Exception) -> Any:
        """An instance made by the class's own `__init__` (`construct.py`),
        else what its fields could not say (`error`); a refusal of the sizes
        of a run, a `CannotBuild` that names it."""
        self.inits += 1
        cls = node.cls
        try:
            made = by_init(cls, path, self.sizes, self._named, self.assumed)
            if self.sizes is not None and cls not in self.scopes.several:
                own = self.declared if self.own is None else self.own
                self.fielded.update(named_by_fields(node, made, self.sizes, own))
            return made
        except NeedsConcrete:
            raise
        except Refused as refused:
            if self.sizes is None:  # every stand-in of the first pass refused
                raise error from None
            raise CannotBuild(path, str(refused)) from None
        except Unbuildable as missing:  # what to give: that parameter's value
            if isinstance(error, _FieldsInstead):  # the fields stand
                raise error from None
            raise MissingValue(missing.where, missing.text) from None
        except Exception:
            raise error from None

    def _named(self, name: str, new: bool) -> bool:
        """Whether a constructor's `int` is a dimension (recorded): one the
        annotations give (seen so far, or declared by the function), or new."""
        known, declared = name in self.names, name in self.declared
        # A name only a layer's field uses (its `in_features`) stays unknown.
        own = declared and (self.own is None or name in self.own)
        self.taken.took(name, own, (new or declared) and not known)
        if not (new or known or declared):
            return False
        self.names.setdefault(name)
        return True

    _BUILDERS: typing.ClassVar[dict[type, Callable[..., Any]]] = {
        LeafNode: _leaf,
        AnyNode: _any,
        NoneNode: _none,
        PyTreeNode: _pytree,
        SequenceNode: sequence_value,
        MappingNode: mapping_value,
        ClassNode: _class,
        UnionNode: union_value,
    }


def _unvalued_static(builder: Builder, kind: type, name: str, path: str) -> Any:
    """A static size or rate no one gave, of the function, a dict it takes or
    a class's field, as a constructor's parameter (`construct.unvalued`, one
    rule); a size of its own is a symbol at symbolic sizes, as an array's
    are."""

    def size_of(name: str, new: bool) -> Any:
        if builder.sizes is not None:
            return builder.sizes.get(name)
        return 2 if builder._named(name, new) else None

    return unvalued(name, kind, size_of, builder.assumed, OwnPath(path))
