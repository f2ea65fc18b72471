"""`vmap` of a call that holds Flax NNX objects: what the function changes in
their `Variable`s comes back along the axis it came in on.

JAX needs the output axes before the output exists; which `Variable`s a
function changes is known only once it traced. So each `Variable` of the
call is given, before tracing, the axis its value was mapped over (`None`
for one broadcast to every element, as `in_axes=None` gives a model); the
traced body returns the new values in one group per such axis, and the
caller's `Variable`s get them back on the axis they came in on. A value
broadcast in, set to one that differs along the mapped axis, is a
`ValidationError` naming it (as `nnx.vmap` refuses it), never a batch written
into the caller's model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .._model.errors import Issue, SpecError, ValidationError
from .._runtime.planning.graph import Graph, Updated
from .._runtime.planning.plan import Split
from .outputs import WithStatic

__all__ = ["MappedGraph"]

#: A `Variable` whose leaves are mapped over different axes.
_MIXED = "mixed"


class MappedGraph:
    """The axes of one call's NNX `Variable`s under `vmap`, and the groups
    its traced body returns their new values in (see the module docstring)."""

    def __init__(self, graph: Graph, split: Split, axes: Sequence[Any]) -> None:
        self.graph = graph
        position = {leaf: p for p, leaf in enumerate(split.dynamic_idx)}
        self.axes: list[Any] = []
        for span in graph.spans:
            found = {axes[position[i]] for i in span if i in position}
            if len(found) > 1:
                self.axes.append(_MIXED)
            else:
                self.axes.append(found.pop() if found else None)
        self.groups = tuple(
            sorted({a for a in self.axes if a is not _MIXED}, key=_order)
        )
        #: What the trace changed: `(indices, (group, place) of each, nodes)`.
        self.changed: tuple[tuple[int, ...], list[tuple[int, int]], bool] | None = None

    def out_axes(self, result_axes: Any) -> tuple[Any, tuple[Any, ...]]:
        """`out_axes` for the body's `(result, groups)`."""
        return result_axes, self.groups

    def body(
        self, traced: Callable[..., Any], result: Callable[[Any], Any]
    ) -> Callable[..., Any]:
        """The function `vmap` maps: `traced`'s result (through `result`),
        and the changed `Variable`s' new values by group."""

        def grouped(*leaves: Any) -> Any:
            out = traced(*leaves)
            if type(out) is not Updated:
                self.changed = None
                return result(out), tuple(() for _ in self.groups)
            values: Any = out.values
            if type(values) is WithStatic:
                raise SpecError(
                    "under treespec.vmap, an NNX Variable of the call was set "
                    "to a value that is not an array; set arrays only."
                )
            by_group: list[list[Any]] = [[] for _ in self.groups]
            placed = []
            for j, value in zip(out.indices, values):
                axis = self.axes[j]
                if axis is _MIXED:
                    raise SpecError(
                        f"{self.graph.names[j]} is mapped over different axes "
                        "and changed inside treespec.vmap: map its leaves over "
                        "one axis."
                    )
                group = self.groups.index(axis)
                placed.append((group, len(by_group[group])))
                by_group[group].append(value)
            self.changed = (out.indices, placed, out.nodes)
            return result(out.result), tuple(map(tuple, by_group))

        return grouped

    def refused(self, error: ValueError, function: str) -> ValidationError | None:
        """JAX's refusal of a batched value at an unmapped place, as the
        `Variable`s broadcast in that the function may have set."""
        if "out_axes[1]" not in str(error) or None not in self.groups:
            return None
        names = [n for n, a in zip(self.graph.names, self.axes) if a is None]
        issue = Issue(
            "the NNX Variables broadcast into the map (in_axes None)",
            "new values that are the same for every element, if any is set",
            f"a value that differs along the mapped axis, set in one of "
            f"{', '.join(names[:6])}" + (" ..." if len(names) > 6 else ""),
            "map the module over the axis too (in_axes=0 for it), or compute "
            "the update outside treespec.vmap",
        )
        return ValidationError([issue], function)

    def updated(self, result: Any, groups: Sequence[Sequence[Any]]) -> Any:
        """The mapped call's result, as `Updated` when the trace changed a
        `Variable` (for `Transformed._output`), else as it is."""
        if self.changed is None:
            return result
        indices, placed, nodes = self.changed
        values = tuple(groups[g][k] for g, k in placed)
        return Updated(result, indices, values, nodes)


def _order(axis: Any) -> int:
    return -1 if axis is None else int(axis)
