"""Flax NNX's reference semantics: what a function changes on the NNX objects
of its call is on the caller's objects after the call, as `nnx.jit` makes it.

NNX modules, optimizers and `Rngs` are pytrees: a call flattens them like any
argument (their `Variable`s' values and their plain array attributes are the
leaves), and JAX traces a copy rebuilt from the leaves. What the function
writes into that copy (`optimizer.update`, BatchNorm statistics, an RNG
stream's count, `self.count += 1` on an array attribute) would be lost; so,
as `nnx.jit` does, it is returned from the trace and written into the
caller's objects. Each step at its own time:

- per tree structure, `Graph` (a `Plan`'s): its *places*, each a `Variable`
  or an attribute of an NNX object holding data that is no NNX object (a
  plain array), and getters of them compiled once;
- per call, `Graph.split_for`: which `Variable`s are one object held twice (a
  module passed twice, a shared submodule or RNG stream) picks a `Split` of
  its own for each such pattern, whose rebuild shares them again
  (`Graph.link`);
- per trace, `Session` (`graph_session.py`): the function runs on the
  rebuilt objects; what it changed comes back beside its result (`Updated`),
  and a change of the structure (an attribute added, a static attribute
  set) is a `ValidationError` naming it;
- per call, `settle`: the new values written into the caller's places, and
  the argument nodes the function returned handed back as the caller's own
  objects.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import jax

from .nnx_objects import (
    ArgNode,
    Namer,
    Path,
    flatten_vars,
    graph_nodes,
    is_variable,
    nnx_classes,
    path_getter,
    set_value,
    sets_directly,
    write_at,
)
from .tree import child_items

__all__ = ["INTERNAL", "Graph", "Updated", "graph_of", "settle"]

#: NNX's own bookkeeping attributes of an object, never the user's data.
INTERNAL = ("_pytree__", "_object__")


class Updated:
    """A traced function's result with the new values of the places it
    changed (`indices` among its call's places: `Variable`s first, then
    attributes), and whether the result holds argument nodes (`ArgNode`) to
    hand back.

    A pytree (the result and the values are its children) whose aux data is
    numbers only: JAX keeps it with the compiled program.
    """

    __slots__ = ("indices", "nodes", "result", "values")

    def __init__(
        self,
        result: Any,
        indices: tuple[int, ...],
        values: tuple[Any, ...],
        nodes: bool,
    ) -> None:
        self.result = result
        self.indices = indices
        self.values = values
        self.nodes = nodes


jax.tree_util.register_pytree_node(
    Updated,
    lambda u: ((u.result, u.values), (u.indices, u.nodes)),
    lambda aux, children: Updated(children[0], aux[0], children[1], aux[1]),
)


def settle(out: Updated, graph: Graph, root: Any, *, write: bool = True) -> Any:
    """Write `out`'s new values into the caller's places below `root` (the
    route's root of the call; not when `write` is false), and hand back the
    argument nodes the result holds as the caller's objects; returns the
    result."""
    if write and out.indices:
        graph.write(root, out.indices, out.values)
    result = out.result
    if out.nodes:
        nodes = [node for _, node in graph_nodes(root)]
        result = jax.tree_util.tree_map(
            lambda x: nodes[x.index] if type(x) is ArgNode else x, result
        )
    return result


class Graph:
    """The places of one tree structure (see the module docstring): its
    `Variable`s (their positions among the leaves flattened down to
    `Variable`s) and its attributes holding plain data (`slots`: an owner
    and a key), the leaves each place's value spans, and getters of the
    objects from the route's root."""

    __slots__ = (
        "count",
        "firsts",
        "namer",
        "names",
        "owner_count",
        "owners",
        "plain",
        "positions",
        "slots",
        "spans",
        "variables",
    )

    def __init__(
        self,
        positions: tuple[int, ...],
        slots: tuple[tuple[int, Any], ...],
        spans: tuple[range, ...],
        namer: Namer,
        names: tuple[str, ...],
        getters: tuple[Callable[[Any], tuple[Any, ...]], ...],
        plain: bool,
        owner_count: int = 0,
    ) -> None:
        self.positions = positions
        #: `(owner, key)` of each attribute place, after the `Variable`s.
        self.slots = slots
        #: The leaves of the plan's flatten that each place's value is.
        self.spans = spans
        #: Names a path below the route's root in the user's words.
        self.namer = namer
        #: Each place, in the user's words (`model.lin.kernel`).
        self.names = names
        #: How many places are `Variable`s.
        self.count = len(positions)
        #: `root -> the Variables`, and `root -> the attributes' owners`.
        self.variables, self.owners = getters
        #: How many NNX objects own attribute places.
        self.owner_count = owner_count
        #: `leaves -> the first leaf of each Variable`; None when one has no
        #: leaf (an empty value), or when there is one Variable only.
        self.firsts: Callable[[Sequence[Any]], Sequence[Any]] | None = None
        starts = [span.start for span in spans[: self.count]]
        if self.count > 1 and all(spans[: self.count]):
            self.firsts = operator.itemgetter(*starts)
        #: Whether every Variable keeps its value in itself (no `ref=True`,
        #: no `hijax=True`: the treedef holds that metadata, so it is known
        #: per structure), which `write` may then set directly.
        self.plain = plain

    def split_for(self, split: Any, leaves: Sequence[Any], root: Any) -> Any:
        """`split`, or its variant for this call's objects held twice: its
        `links` give, for each `Variable` and then each attribute's owner,
        the first place that holds the same object.

        One `Variable` held twice gives the same value object at both
        places: when every `Variable`'s first leaf is a distinct object, none
        is held twice, and the objects themselves need not be read."""
        owners = _links(self.owners(root)) if self.slots else None
        if self.count <= 1 or (
            self.firsts is not None
            and len(set(map(id, self.firsts(leaves)))) == self.count
        ):
            variables = None
        else:
            variables = _links(self.variables(root))
        if variables is None and owners is None:
            return split
        links = (
            *(variables or range(self.count)),
            *(owners or range(self.owner_count)),
        )
        return split.plan.variant(split, tuple(links))

    def link(self, root: Any, links: tuple[int, ...]) -> Any:
        """`root` rebuilt (while tracing) with the `Variable`s the call held
        twice shared again, as the caller's objects are."""
        leaves, treedef = flatten_vars(root)
        found = [leaves[p] for p in self.positions]
        for j, p in enumerate(self.positions):  # `links` of the Variables first
            leaves[p] = found[links[j]]
        return jax.tree_util.tree_unflatten(treedef, leaves)

    def donated(self, kinds: Sequence[Any], donate: Any) -> frozenset[int]:
        """The places with a donated leaf, for a split's `kinds`."""
        return frozenset(
            j
            for j, span in enumerate(self.spans)
            if any(kinds[i] is donate for i in span)
        )

    def read(self, root: Any) -> tuple[list[Any], list[Any]]:
        """The `Variable`s below `root`, and the attributes' owners."""
        return list(self.variables(root)), list(self.owners(root)) if self.slots else []

    def write(self, root: Any, indices: Sequence[int], values: Sequence[Any]) -> None:
        """Set the new values of the caller's places at `indices`.

        NNX checks, on every set, that the object was made at the trace level
        it is set at (its `TraceContextError`). A value that is no tracer is
        set outside any trace, where that check has nothing to refuse: a
        plain `Variable` is set directly then (through its public setter it
        costs about 2 µs, 38 of them most of a small model's step).
        """
        variables, owners = self.read(root)
        direct = self.plain and not any(isinstance(v, jax.core.Tracer) for v in values)
        for index, value in zip(indices, values):
            if index < self.count:
                if direct:
                    set_value(variables[index], value)
                else:
                    variables[index].set_raw_value(value)
            else:
                owner, key = self.slots[index - self.count]
                write_at(owners[owner], key, value)


def _links(objects: Sequence[Any]) -> tuple[int, ...] | None:
    """For each object, the first place holding the same one; None when
    every object is held once."""
    ids = list(map(id, objects))
    if len(set(ids)) == len(ids):
        return None
    first: dict[int, int] = {}
    return tuple(first.setdefault(i, j) for j, i in enumerate(ids))


def _slots(root: Any) -> tuple[list[Path], list[tuple[int, Any]], list[Path]]:
    """The NNX objects below `root` that hold plain data in attributes (their
    paths), each such attribute `(owner, key)`, and its path."""
    owners: list[Path] = []
    slots: list[tuple[int, Any]] = []
    paths: list[Path] = []
    for path, node in graph_nodes(root):
        if is_variable(node):
            continue
        held = [  # data no NNX object holds: its own places are theirs
            (key, child)
            for key, child in child_items(node) or []
            if not str(getattr(key, "name", "")).startswith(INTERNAL)
            and not graph_nodes(child)
            and jax.tree_util.tree_leaves(child)
        ]
        if held:
            owners.append(path)
            for key, _ in held:
                slots.append((len(owners) - 1, key))
                paths.append((*path, key))
    return owners, slots, paths


def _getter(
    root: Any, paths: Sequence[Path], found: Sequence[Any]
) -> Callable[[Any], tuple[Any, ...]]:
    """A compiled getter of the objects at `paths`, checked on `root`; the
    slow way (a walk), always right, where a path cannot be read back."""
    getter = path_getter(paths)
    if getter is not None and all(a is b for a, b in zip(getter(root), found)):
        return getter
    wanted = list(map(tuple, paths))

    def walked(r: Any) -> tuple[Any, ...]:
        by_path = dict(graph_nodes(r))
        return tuple(by_path[p] for p in wanted)

    return walked


def graph_of(root: Any, treedef: Any, namer: Namer) -> Graph | None:
    """The `Graph` of a call's root (the route's flattened arguments), or None
    when it holds no NNX object with data."""
    classes = nnx_classes()
    if classes is None:
        return None
    variable = classes[0]
    pairs, _ = jax.tree_util.tree_flatten_with_path(
        root, is_leaf=lambda x: isinstance(x, variable)
    )
    positions = tuple(i for i, (_, x) in enumerate(pairs) if isinstance(x, variable))
    owner_paths, slots, slot_paths = _slots(root)
    if not positions and not slots:
        return None
    spans, start = [], 0
    for _, x in pairs:
        size = len(jax.tree_util.tree_leaves(x)) if isinstance(x, variable) else 1
        spans.append(range(start, start + size))
        start += size
    assert start == treedef.num_leaves, "a Variable's leaves out of order"
    found = tuple(pairs[p][1] for p in positions)
    paths = [pairs[p][0] for p in positions]
    variables = _getter(root, paths, found)
    nodes = dict(graph_nodes(root))
    owners = _getter(root, owner_paths, [nodes[tuple(p)] for p in owner_paths])
    plain = sets_directly() and all(
        not v.get_metadata().get("ref") and not v.get_metadata().get("hijax")
        for v in found
    )
    return Graph(
        positions,
        tuple(slots),
        (*(spans[p] for p in positions), *_slot_spans(root, slot_paths)),
        namer,
        tuple(namer(path) for path in (*paths, *slot_paths)),
        (variables, owners),
        plain,
        len(owner_paths),
    )


def _slot_spans(root: Any, paths: Sequence[Path]) -> list[range]:
    """The leaves of the full flatten below each attribute place."""
    leaves = [path for path, _ in jax.tree_util.tree_flatten_with_path(root)[0]]
    spans = []
    for path in paths:
        inside = [
            i for i, p in enumerate(leaves) if tuple(p[: len(path)]) == tuple(path)
        ]
        spans.append(range(inside[0], inside[-1] + 1) if inside else range(0))
    return spans
