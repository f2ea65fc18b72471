"""Spec nodes from mypy's types: the shared nodes of `treespec._model.spec`, built
from mypy's types (`Builder`), so that the runtime's rules
(`treespec._model.rules`) give the verdicts. A class's fields, whether it is a
pytree and of what kind, and whether its instances hash come from its record
(`class_facts`) and mypy's own dataclass metadata.
"""

from __future__ import annotations

from typing import Final

from mypy.nodes import TypeInfo, Var
from mypy.types import (
    AnyType,
    CallableType,
    Instance,
    LiteralType,
    NoneType,
    ProperType,
    TupleType,
    Type,
    TypeAliasType,
    TypedDictType,
    UnionType,
    get_proper_type,
)

from treespec._model.held import EQX_MODULES, FLAX_STRUCT_BASES, NNX_PYTREES
from treespec._model.markers import Marker
from treespec._model.rules import (
    ARRAY_TYPES,
    MAPPING_TYPES,
    SEQUENCE_TYPES,
    type_problem,
)
from treespec._model.spec import (
    AnyNode,
    ClassBacked,
    ClassNode,
    LeafNode,
    MappingNode,
    Node,
    NoneNode,
    SequenceNode,
    UnionNode,
)

from .class_facts import (
    DATACLASS_PYTREES,
    OPAQUE_PYTREES,
    record_of,
    static_fields,
    told_data,
)
from .spelling import MAX_DEPTH, marker_of_alias

#: Bases whose subclasses are registered pytrees of their fields.
_PYTREE_BASES: Final = EQX_MODULES | FLAX_STRUCT_BASES | NNX_PYTREES
#: Bases whose subclasses are pytrees of children the type does not show.
_OPAQUE_BASES: Final = frozenset(
    {"flax.nnx.variablelib.Variable", "flax.nnx.variables.Variable"}
)

#: Containers whose instances cannot be hashed (a pytree of them can be static,
#: but an object holding one cannot be hashed).
_UNHASHABLE_CONTAINERS: Final = frozenset(
    {
        "builtins.list",
        "builtins.dict",
        "collections.OrderedDict",
        "collections.defaultdict",
    }
)


def _class_hashable(info: TypeInfo) -> bool:
    """Whether instances of the class can be hashed, as far as mypy can tell."""
    for base in info.mro[:-1]:
        record = record_of(base)
        node = base.names.get("__hash__")
        if node is not None:
            if record is not None and record.get("hash") == "none":
                return False
            return not isinstance(
                get_proper_type(getattr(node.node, "type", None)), NoneType
            )
        if record is not None:
            if record.get("hash") in ("none", "set"):
                return bool(record["hash"] == "set")
        elif "dataclass" in base.metadata:
            return bool(base.metadata["dataclass"].get("frozen", False))
    return True


def _is_dataclass(info: TypeInfo) -> bool:
    # "dataclass_tag" is set as soon as mypy sees the decorator or the
    # dataclass_transform base; "dataclass" only once the class is finished.
    return any(
        "dataclass_tag" in b.metadata or "dataclass" in b.metadata for b in info.mro
    )


def _pytree_kind(info: TypeInfo) -> str:
    """Either "fields" (a registered dataclass-like pytree), "opaque" (a registered
    pytree of unknown children), "unknown" (no record) or "" (not a pytree)."""
    if any(base.fullname in _OPAQUE_BASES for base in info.mro):
        return "opaque"
    record = record_of(info)
    if record is None:
        return "unknown"
    decorators = set(record.get("decorators", ()))
    if decorators & OPAQUE_PYTREES:
        return "opaque"
    if decorators & DATACLASS_PYTREES:
        return "fields"
    if any(base.fullname in _PYTREE_BASES for base in info.mro):
        return "fields"
    return ""


def _fields(t: Instance) -> dict[str, Type]:
    """`{name: type}` of a dataclass-like Instance's fields, generics expanded,
    pytree metadata fields left out (never leaves, whatever the marker)."""
    # Imported here: importing it before mypy.types is a circular import.
    from mypy.expandtype import expand_type_by_instance

    static = static_fields(t.type)
    nnx = _is_nnx(t.type)
    out: dict[str, Type] = {}
    for base in reversed(t.type.mro[:-1]):
        attributes = base.metadata.get("dataclass", {}).get("attributes")
        wanted = (
            {a.get("name") for a in attributes}
            if isinstance(attributes, list)
            else None
        )
        for name, sym in base.names.items():
            var = sym.node
            if (
                isinstance(var, Var)
                and var.type is not None
                and not var.is_classvar
                and not name.startswith("__")
                and (wanted is None or name in wanted)
                and not (nnx and name.startswith(_NNX_INTERNAL))
            ):
                out[name] = expand_type_by_instance(var.type, t)
    for name in static:
        out.pop(name, None)
    if nnx:  # NNX keeps what is not data static: no leaves there
        data = told_data(t.type)
        for name in [n for n, ft in out.items() if n not in data and not nnx_data(ft)]:
            del out[name]
    return out


#: NNX's own bookkeeping attributes, never fields.
_NNX_INTERNAL: Final = ("_pytree__", "_object__")


def _is_nnx(info: TypeInfo) -> bool:
    return any(base.fullname in NNX_PYTREES for base in info.mro)


def nnx_data(t: Type) -> bool:
    """Whether NNX makes a value of this type data by itself: an array, an
    nnx.Variable, an NNX pytree; a union if a member surely is one (flax's
    `Dtype` is `DTypeLike | Any`: static). `Any` alone is unknown: kept."""
    proper = get_proper_type(t)
    if isinstance(proper, UnionType):
        return any(_nnx_instance(get_proper_type(item)) for item in proper.items)
    return _nnx_instance(proper) or isinstance(proper, AnyType)


def _nnx_instance(proper: ProperType) -> bool:
    if not isinstance(proper, Instance):
        return False
    names = {base.fullname for base in proper.type.mro}
    return bool(names & (ARRAY_TYPES | NNX_PYTREES | _OPAQUE_BASES))


def _expand_once(t: TypeAliasType) -> Type:
    expand = getattr(t, "_expand_once", None)
    return expand() if expand is not None else get_proper_type(t)


def _hashes(node: Node, seen: set[int]) -> bool:
    """Whether a value of the node's type can be hashed as one object (a field
    of a class that is a leaf to JAX): no list or dict anywhere inside."""
    if isinstance(node, SequenceNode):
        if node.container in _UNHASHABLE_CONTAINERS:
            return False
        return all(_hashes(child, seen) for _, child in node.children())
    if isinstance(node, MappingNode):
        if node.is_typeddict or node.cls in _UNHASHABLE_CONTAINERS:
            return False
        return node.values is None or _hashes(node.values, seen)
    if isinstance(node, ClassBacked):
        if node.hashable is False:
            return False
        if id(node.body) in seen:
            return True
        seen.add(id(node.body))
        return all(_hashes(child, seen) for _, child in node.children())
    if isinstance(node, UnionNode):
        return all(_hashes(member, seen) for member in node.members)
    return type_problem(node, Marker.STATIC) is None


class Builder:
    """Builds the shared spec nodes (`treespec._model.spec`) from mypy's types.

    One per check: class nodes are cached by full name and type arguments
    (mypy makes new type objects on every expansion), so a recursive class is
    one node that refers to itself; a recursive alias is cut at its second
    expansion, and anything deeper than `MAX_DEPTH` is `Any`.
    """

    def __init__(self) -> None:
        self.classes: dict[tuple[str, str], ClassBacked] = {}
        self.aliases: set[str] = set()
        self.hashing: set[tuple[str, str]] = set()
        #: The classes looked into: the check depends on them (`dmypy`).
        self.visited: set[str] = set()

    def node(self, t: Type, depth: int = 0) -> Node:
        if depth > MAX_DEPTH:
            return AnyNode()
        if isinstance(t, TypeAliasType):
            if t.alias is None:
                return AnyNode()
            marker = marker_of_alias(t)
            if marker is not None:
                inner = self.node(t.args[0], depth + 1) if t.args else AnyNode()
                if inner.marker is not None:
                    return inner  # reported where it was written
                text = f"{marker.title}[{inner.text or 'Any'}]"
                return inner.with_marker(marker, text)
            name = f"{t.alias.fullname}[{', '.join(map(str, t.args))}]"
            if name in self.aliases:
                return AnyNode(text=t.alias.name)
            self.aliases.add(name)
            try:
                return self.node(_expand_once(t), depth + 1)
            finally:
                self.aliases.discard(name)
        return self._proper(get_proper_type(t), depth + 1)

    def _proper(self, proper: ProperType, depth: int) -> Node:
        if isinstance(proper, NoneType):
            return NoneNode(text="None")
        if isinstance(proper, UnionType):
            members = tuple(self.node(i, depth) for i in proper.items)
            return UnionNode(members=members, text=" | ".join(m.text for m in members))
        if isinstance(proper, TupleType):
            named = proper.partial_fallback.type
            if named.is_named_tuple:  # a class with fields, as at run time
                node = ClassNode(cls=named.fullname, text=named.name)
                fields = named.metadata.get("namedtuple", {}).get("fields", [])
                for name, item in zip(fields, proper.items):
                    node.body.fields[name] = self.node(item, depth)
                if len(fields) == len(proper.items):
                    return node
            items = tuple(self.node(i, depth) for i in proper.items)
            return SequenceNode(container="builtins.tuple", items=items, text="tuple")
        if isinstance(proper, TypedDictType):
            typed = MappingNode(cls=proper.fallback.type.fullname, text="TypedDict")
            for key, item in proper.items.items():
                typed.body.fields[key] = self.node(item, depth)
            return typed
        if isinstance(proper, CallableType):
            return LeafNode(text="a callable", category="callable")
        if isinstance(proper, LiteralType):
            # The values' class (int, str, an Enum): a number can be traced.
            names = tuple(base.fullname for base in proper.fallback.type.mro)
            return LeafNode(text="a Literal", category="literal", type_names=names)
        if isinstance(proper, Instance):
            return self._instance(proper, depth)
        return AnyNode()

    def _instance(self, t: Instance, depth: int) -> Node:
        # Imported here: importing it before mypy.types is a circular import.
        from mypy.maptype import map_instance_to_supertype

        info = t.type
        fullname = info.fullname
        self.visited.add(fullname)
        if fullname == "builtins.object":
            return AnyNode(text="object")  # the runtime takes it as Any
        if fullname in SEQUENCE_TYPES or fullname in MAPPING_TYPES:
            mapping = fullname in MAPPING_TYPES
            args = t.args[1:] if mapping else t.args
            child = self.node(args[-1], depth) if args else AnyNode()
            if mapping:
                return MappingNode(cls=fullname, values=child, text=info.name)
            return SequenceNode(container=fullname, rest=child, text=info.name)
        if _is_dataclass(info):
            kind = _pytree_kind(info)
            if kind == "opaque":
                return AnyNode(text=info.name)
            if kind in ("fields", "unknown"):
                return self._class(t, depth)
            return self._leaf(t, depth, _fields(t))
        kind = _pytree_kind(info)
        if kind == "opaque":
            return AnyNode(text=info.name)
        if kind == "fields":  # an NNX pytree: its annotated attributes
            return self._class(t, depth)
        if info.is_protocol:
            return AnyNode(text=info.name)  # abstract: its values may be pytrees
        mapping_base = next((b for b in info.mro if b.fullname in MAPPING_TYPES), None)
        if mapping_base is not None:  # a Mapping class (flax's FrozenDict)
            args = map_instance_to_supertype(t, mapping_base).args
            child = self.node(args[-1], depth) if args else AnyNode()
            return MappingNode(cls=fullname, values=child, text=info.name)
        return self._leaf(t, depth, {})

    def _leaf(self, t: Instance, depth: int, fields: dict[str, Type]) -> LeafNode:
        """A class the runtime keeps a leaf; hashable if it and its fields are."""
        info = t.type
        hashable = _class_hashable(info)
        key = (info.fullname, ", ".join(map(str, t.args)))
        if hashable and fields and key not in self.hashing:
            self.hashing.add(key)
            try:
                hashable = all(
                    _hashes(self.node(field, depth), set()) for field in fields.values()
                )
            finally:
                self.hashing.discard(key)
        names = tuple(base.fullname for base in info.mro)
        return LeafNode(text=info.name, type_names=names, hashable=hashable)

    def _class(self, t: Instance, depth: int) -> Node:
        info = t.type
        key = (info.fullname, ", ".join(map(str, t.args)))
        cached = self.classes.get(key)
        if cached is not None:
            return cached
        # A registered pytree is flattened, never hashed whole: under Static
        # its leaves are judged, not the class (as at run time).
        node = ClassNode(cls=info.fullname, text=info.name)
        self.classes[key] = node
        for name, field in _fields(t).items():
            node.body.fields[name] = self.node(field, depth)
        return node
