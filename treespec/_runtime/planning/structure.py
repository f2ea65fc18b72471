"""What is wrong with a value's containers against its annotation nodes: a
container of another type, a `TypedDict`'s missing and unexpected keys, a
fixed-length tuple's length. The walk (`resolve.py`) asks at each node."""

from __future__ import annotations

from typing import Any

from jax.tree_util import DictKey, GetAttrKey, SequenceKey

from ..._model.errors import Issue, location
from ..._model.spec import (
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
from .tree import child_items

__all__ = ["child_node", "children_issues", "pick", "structure_issue"]


def structure_issue(node: Node, value: Any) -> str | None:
    """What is wrong with the value's container type for this node, if anything."""
    if isinstance(node, (AnyNode, PyTreeNode)):
        return None
    if isinstance(node, NoneNode):
        return None if value is None else "None"
    if isinstance(node, UnionNode):
        if any(structure_issue(m, value) is None for m in node.members):
            return None
        return node.text
    if isinstance(node, MappingNode):
        kind = dict if node.is_typeddict else node.cls
        return None if isinstance(value, kind) else node.text or "dict"
    if isinstance(node, SequenceNode):
        ok = isinstance(value, node.container) and not (
            node.container is tuple and hasattr(value, "_fields")
        )
        return None if ok else node.text or node.container.__name__
    if isinstance(node, ClassNode):
        return None if isinstance(value, node.cls) else node.text
    if isinstance(node, LeafNode):
        ann = node.annotation
        container = value is None or isinstance(value, (dict, list, tuple))
        if node.is_array:
            return node.text if container else None
        if isinstance(ann, type) and container and not isinstance(value, ann):
            return node.text
    return None


def children_issues(
    node: Node, value: Any, names: list[Any], path: str, argument: str
) -> list[Issue]:
    """What is wrong with a container's children: a `TypedDict`'s missing and
    unexpected keys, a fixed-length tuple's length."""
    issues = []
    if isinstance(node, MappingNode) and node.is_typeddict:
        name = node.cls.__qualname__
        for missing in sorted(node.body.required - set(names)):
            issues.append(
                Issue(
                    location(argument, f"{path}[{missing!r}]"),
                    f"required key {missing!r} of {name}",
                    "nothing (the key is missing)",
                )
            )
        for extra in names:
            if extra not in node.fields:
                issues.append(
                    Issue(
                        location(argument, f"{path}[{extra!r}]"),
                        f"one of the keys of {name} "
                        f"({', '.join(map(repr, node.fields))})",
                        f"an unexpected key {extra!r}",
                    )
                )
    if (
        isinstance(node, SequenceNode)
        and node.items is not None
        and len(names) != len(node.items)
    ):
        issues.append(
            Issue(
                location(argument, path),
                f"{node.text} (length {len(node.items)})",
                f"{type(value).__name__} of length {len(names)}",
            )
        )
    return issues


def pick(node: UnionNode, value: Any) -> Node:
    """The union member that fits the value best (markers agree anyway): of
    those whose container fits, the one most of whose items fit too
    (`tuple[A, ...] | tuple[B, ...]` holding `B`s), the first of equals."""
    fallback: Node | None = None
    fitting: list[tuple[int, int, Node]] = []
    for index, member in enumerate(node.members):
        if isinstance(member, NoneNode):
            if value is None:
                return member
            continue
        if not structure_issue(member, value):
            fitting.append((_misfits(member, value), index, member))
        fallback = fallback or member
    return min(fitting, key=lambda f: f[:2])[2] if fitting else fallback or AnyNode()


def _misfits(node: Node, value: Any) -> int:
    """How many items of a container do not fit their part of `node`."""
    return sum(
        structure_issue(child_node(node, key, index), child) is not None
        for index, (key, child) in enumerate(child_items(value) or [])
    )


def child_node(node: Node, key: Any, index: int) -> Node:
    """The part of `node` that describes the child at `key` (`index`)."""
    if isinstance(node, PyTreeNode):
        return node
    if isinstance(node, MappingNode) and isinstance(key, DictKey):
        found = node.fields.get(key.key)
        if found is not None:
            return found
        return node.values if node.values is not None else AnyNode()
    if isinstance(node, SequenceNode) and isinstance(key, SequenceKey):
        return node.child_at(key.idx) or AnyNode()
    if isinstance(node, ClassNode):
        if isinstance(key, GetAttrKey):
            return node.fields.get(key.name) or AnyNode()
        if isinstance(key, SequenceKey):
            fields = list(node.fields.values())
            return fields[key.idx] if key.idx < len(fields) else AnyNode()
    return AnyNode()
