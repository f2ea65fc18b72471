"""One run of a function on the rebuilt NNX objects of its call (while
tracing): what it changed, handed back beside its result (see `graph.py`).

The function may change a `Variable`'s value in place, and set an attribute
that holds plain data (an array); anything else it changes in the objects
(an attribute added, a static attribute set, a `Variable` replaced by one of
another type, a shared `Variable` split in two) cannot be written into the
caller's objects and is a `ValidationError` naming it, never lost.
"""

from __future__ import annotations

import re
from typing import Any

import jax

from ..._model.errors import Issue, ValidationError, describe_value
from .graph import INTERNAL, Graph, Updated
from .nnx_objects import (
    ArgNode,
    flatten_vars,
    graph_nodes,
    is_node,
    is_variable,
    read_at,
)

__all__ = ["Session"]


class Session:
    """One run of the function on the rebuilt objects (while tracing): what it
    changed, returned beside its result (`close`)."""

    def __init__(
        self,
        graph: Graph,
        root: Any,
        links: tuple[int, ...] | None,
        donated: frozenset[int],
    ) -> None:
        self.graph = graph
        self.root = root
        leaves, self.structure = flatten_vars(root)
        self.before = [leaves[p] for p in graph.positions]
        self.values = [_identity(v.get_raw_value()) for v in self.before]
        self.raw = [v.get_raw_value() for v in self.before]  # kept alive
        self.metadata = [dict(v.get_metadata()) for v in self.before]
        count = graph.count
        self.links = links[:count] if links else tuple(range(count))
        #: For each attribute's owner, the first place holding it (shared).
        owners = links[count:] if links else ()
        self.shared = {o for o, first in enumerate(owners) if first != o} | {
            first for o, first in enumerate(owners) if first != o
        }
        #: Which places hold a donated buffer: always handed back.
        self.donated = donated
        #: What each attribute place holds (see `_identity`), and the values
        #: themselves, kept alive so that no identity is taken by another.
        self.kept = self._held(graph.owners(root) if graph.slots else ())
        self.held = [_identity(v) for v in self.kept]
        #: Each graph node with its path, and a module's attributes (to name
        #: what a function changed there).
        self.nodes = graph_nodes(root)
        self.attributes = [
            (path, node, dict(vars(node)))
            for path, node in self.nodes
            if not is_variable(node) and hasattr(node, "__dict__")
        ]

    def close(self, result: Any, function: str, *, hand_back: bool = True) -> Any:
        """The function's result, with what it changed (`Updated`) when it
        changed a `Variable` or returned an argument's node (with
        `hand_back`); a change of the structure is a `ValidationError`."""
        leaves, structure = flatten_vars(self.root)
        if structure != self.structure:
            raise self._changed(function)
        graph = self.graph
        after = [leaves[p] for p in graph.positions]
        for j, (old, new) in enumerate(zip(self.before, after)):
            if type(new) is not type(old) or new.get_metadata() != self.metadata[j]:
                raise self._replaced(function, j, new)
            if after[self.links[j]] is not new:
                raise self._unshared(function, j)
        indices, values = [], []
        for j, variable in enumerate(after):
            if self.links[j] != j:
                continue  # written once, through the first place that holds it
            value = variable.get_raw_value()
            if _identity(value) != self.values[j] or j in self.donated:
                indices.append(j)
                values.append(value)
        owners = graph.owners(self.root) if graph.slots else ()
        for s, (now, before) in enumerate(zip(self._held(owners), self.held)):
            j = graph.count + s
            changed = _identity(now) != before
            if changed and graph.slots[s][0] in self.shared:
                raise self._shared_attribute(function, j)
            if changed or j in self.donated:
                indices.append(j)
                values.append(now)
        nodes = False
        if hand_back:
            result, nodes = self._hand_back(result)
        if not indices and not nodes:
            return result
        return Updated(result, tuple(indices), tuple(values), nodes)

    def _held(self, owners: Any) -> list[Any]:
        """What each attribute place of `owners` holds."""
        return [read_at(owners[owner], key) for owner, key in self.graph.slots]

    def _hand_back(self, result: Any) -> tuple[Any, bool]:
        """The result with each of the arguments' graph nodes it holds as an
        `ArgNode` (their values come back through the `Variable`s)."""
        index: dict[int, int] = {}
        for i, (_, node) in enumerate(self.nodes):
            index.setdefault(id(node), i)
        leaves, treedef = jax.tree_util.tree_flatten(
            result, is_leaf=lambda x: id(x) in index
        )
        if not any(id(leaf) in index for leaf in leaves):
            return result, False
        marked = [
            ArgNode(index[id(leaf)]) if id(leaf) in index else leaf for leaf in leaves
        ]
        return jax.tree_util.tree_unflatten(treedef, marked), True

    def _changed(self, function: str) -> ValidationError:
        """What the function changed in the structure of its arguments."""
        issues = []
        for path, node, attrs in self.attributes:
            now = {k: v for k, v in vars(node).items() if not k.startswith(INTERNAL)}
            before = {k: v for k, v in attrs.items() if not k.startswith(INTERNAL)}
            where = self.graph.namer(path)
            for name in sorted(now.keys() - before.keys()):
                issues.append(
                    _structure_issue(
                        f"{where}.{name}", "no such attribute", _added(now[name])
                    )
                )
            for name in sorted(before.keys() - now.keys()):
                issues.append(
                    _structure_issue(f"{where}.{name}", _said(before[name]), "deleted")
                )
            for name in sorted(before.keys() & now.keys()):
                old, new = before[name], now[name]
                if old is new or is_node(old) or _same(old, new):
                    continue
                issues.append(
                    _structure_issue(
                        f"{where}.{name}", _said(old), f"{_said(new)}, set"
                    )
                )
        if not issues:  # a container inside an attribute changed
            issues.append(
                _structure_issue(
                    self.graph.namer(()),
                    "the structure it had at the call",
                    "another structure, made",
                )
            )
        return ValidationError(issues[:8], function)

    def refuse_changes(self, result: Any, function: str, why: str) -> None:
        """A `ValidationError` if the function changed a `Variable` that
        cannot be written back (`why` says what it was handed as)."""
        out = self.close(result, function, hand_back=False)
        if type(out) is not Updated:
            return
        names = [self.graph.names[j] for j in out.indices]
        argument = re.split(r"[.\[]", names[0], maxsplit=1)[0]
        kinds = [type(n).__name__ for p, n in self.nodes if len(p) == 1]
        given = f"{argument}: {kinds[0]}" if kinds else f"{argument}: YourModule"
        issue = Issue(
            f"argument {argument}, at {', '.join(names[:4])}"
            + (" ..." if len(names) > 4 else ""),
            f"no change: {argument} is {why}, so what the function changes in "
            "its NNX Variables cannot be written back",
            "changed inside the function",
            f"annotate it with its class ({given}) or leave it unannotated: "
            "treespec then flattens it and writes back what the function "
            "changes",
        )
        raise ValidationError([issue], function)

    def _shared_attribute(self, function: str, j: int) -> ValidationError:
        issue = Issue(
            f"{self.graph.names[j]} (in an NNX object of the call)",
            "no change: its object is held at two places of the call and keeps "
            "this data in a plain attribute, which the two places do not share "
            "inside the function",
            "set inside the function",
            "keep the data in an nnx.Variable (nnx.Param, ...), which every "
            "place that holds the object shares, or pass the object once",
        )
        return ValidationError([issue], function)

    def _replaced(self, function: str, j: int, new: Any) -> ValidationError:
        old = self.before[j]
        issue = Issue(
            f"{self.graph.names[j]} (an NNX Variable of the call)",
            f"{type(old).__name__} with the metadata it had at the call",
            f"{type(new).__name__} with metadata {_short(new.get_metadata())}, "
            "set inside the function",
            "a function may change a Variable's value in place "
            "(variable[...] = value), never its type or metadata: set those "
            "before the call",
        )
        return ValidationError([issue], function)

    def _unshared(self, function: str, j: int) -> ValidationError:
        first = self.graph.names[self.links[j]]
        issue = Issue(
            f"{self.graph.names[j]} (an NNX Variable of the call)",
            f"the Variable {first} (one object at the call)",
            "another Variable, set inside the function",
            "change the Variable's value in place (variable[...] = value), so "
            "that every place that holds it sees the change",
        )
        return ValidationError([issue], function)


def _said(value: Any) -> str:
    """A value in a message: a graph node by its class, not its repr."""
    if is_variable(value):
        return f"{type(value).__name__} (an NNX Variable)"
    if is_node(value):
        return f"{type(value).__name__} (an NNX module)"
    return describe_value(value)


def _added(value: Any) -> str:
    return f"{_said(value)}, added"


def _identity(value: Any) -> tuple[int, ...]:
    """A value and its leaves by identity: a container changed in place (a
    dict in a `Variable`, a list attribute) is a change too."""
    return (id(value), *map(id, jax.tree_util.tree_leaves(value)))


def _same(old: Any, new: Any) -> bool:
    try:
        return type(old) is type(new) and bool(old == new)
    except Exception:
        return False


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _structure_issue(where: str, expected: str, got: str) -> Issue:
    return Issue(
        f"{where} (in an NNX object of the call)",
        expected if expected == "no such attribute" else f"{expected} (as at the call)",
        f"{got} inside the function",
        "a treespec transform writes back what a function changes in NNX "
        "Variables (variable[...] = value), not the structure of modules: "
        "create attributes and submodules before the call (in __init__), or "
        "return the new object",
    )
