"""jaxtyping dimension names across one call: who bound what, and whom to blame.

jaxtyping checks leaves in order and the first leaf to name a dimension binds
it, so in `f(b)` with `b['ids']` of batch 5 checked before `b['x']`, `b['y']`,
`b['z']` of batch 4, the three right leaves would be blamed. When leaves
disagree on a dimension, every binding is grouped by size: the leaves outside
the largest group are blamed (the minority), or, when no group is largest,
those outside the group of the first binder; a leaf that agrees with most of
the others is never blamed. Leaves checked before (the arguments, when the
return value is checked) are never blamed: theirs is the size to match.

Only plain names bind here (`n`, `#n` when not 1, `*batch`); anything else
jaxtyping binds (expressions) is left to jaxtyping's own verdict.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection, Sequence
from typing import Any

__all__ = [
    "DIM_NAME",
    "Bindings",
    "Blame",
    "Binding",
    "blame",
    "bound_dims",
    "expression_axes",
    "names_bound",
    "names_read",
    "reading_order",
]

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
#: A name inside a dimension: `h` and `p` of `(h//p)*w`, `n` of `#n`.
DIM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

#: One leaf's binding of the dimensions of its annotation: `(name, size)`
#: pairs, a variadic `*name` binding the tuple of its sizes.
Dims = list[tuple[str, Any]]


def bound_dims(annotation: Any, shape: Sequence[int]) -> Dims:
    """The named dimensions an annotation that matched `shape` binds."""
    tokens = str(getattr(annotation, "dim_str", "")).split()
    variadic = [i for i, t in enumerate(tokens) if t == "..." or t.startswith("*")]
    sizes = [int(d) for d in shape]
    if variadic:
        cut = variadic[0]
        tail = tokens[cut + 1 :]
        end = len(sizes) - len(tail)
        pairs: list[tuple[str, Any]] = list(zip(tokens[:cut], sizes))
        if tokens[cut].startswith("*") and _NAME.match(tokens[cut][1:]):
            pairs.append((tokens[cut], tuple(sizes[cut:end])))
        pairs += list(zip(tail, sizes[end:]))
    else:
        pairs = list(zip(tokens, sizes))
    dims: Dims = []
    for token, size in pairs:
        name = token.lstrip("#*")
        if _NAME.match(name) and not (token.startswith("#") and size == 1):
            dims.append((name, size))
    return dims


def expression_axes(annotation: Any) -> list[str]:
    """The axes of a jaxtyping annotation that are expressions of names
    (`d//2`, `t+1`), which jaxtyping reads only once they are bound."""
    dims = getattr(annotation, "dim_str", "")
    if not isinstance(dims, str):
        return []
    return [dim for dim in dims.split() if _EXPRESSION.search(dim.lstrip("*#?"))]


#: An operator in an axis of a jaxtyping annotation (`d//2`, `t+1`, `(h*w)`).
_EXPRESSION = re.compile(r"[-+*/%()]")


def names_bound(annotation: Any) -> set[str]:
    """The names a jaxtyping annotation binds: its plain axes' (`n`, `*b`)."""
    tokens = str(getattr(annotation, "dim_str", "")).split()
    return {t.lstrip("#*") for t in tokens if _NAME.match(t.lstrip("#*"))}


def names_read(annotation: Any) -> set[str]:
    """The names a jaxtyping annotation's expressions read (`d` of `d//2`)."""
    return {n for axis in expression_axes(annotation) for n in DIM_NAME.findall(axis)}


def reading_order(annotations: Sequence[Any], bound: Collection[str]) -> list[int]:
    """The order to check leaves of these annotations in, by index: those
    with no axis of an expression first, as they come; then, each time, the
    first whose expressions read only names bound so far (`bound`, by the
    leaves before it, or by its own plain axes): a GLU's `"h 2*h"` before
    the `"d 2*h"` that comes before it. Those that never are come last, as
    they come (jaxtyping refuses them)."""
    order = [i for i, a in enumerate(annotations) if not expression_axes(a)]
    known = set(bound).union(*(names_bound(annotations[i]) for i in order))
    rest = [i for i, a in enumerate(annotations) if expression_axes(a)]
    while rest:
        ready = [
            i
            for i in rest
            if names_read(annotations[i]) <= known | names_bound(annotations[i])
        ]
        order.append(ready[0] if ready else rest[0])
        rest.remove(order[-1])
        known |= names_bound(annotations[order[-1]])
    return order


@dataclasses.dataclass
class Bindings:
    """Dimension sizes bound so far in one call, and the leaf that bound each
    first (for "with n=7 bound by x" in a message)."""

    sizes: dict[str, tuple[Any, str]] = dataclasses.field(default_factory=dict)

    def record(self, annotation: Any, shape: Sequence[int], path: str) -> None:
        """Remember the named dims of an annotation that just matched; the
        first binding of a name is kept."""
        for name, size in bound_dims(annotation, shape):
            self.sizes.setdefault(name, (size, path))

    def explain(self, annotation: Any) -> str:
        """`b=32 bound by x, n=7 bound by w`: the dims of `annotation` bound so far."""
        # The names in each dimension, those of an expression too (`h//2`).
        tokens = str(getattr(annotation, "dim_str", "")).split()
        names = [n for t in tokens for n in DIM_NAME.findall(t)]
        bound = [
            # A symbolic size named as the dimension says nothing more.
            f"{n}{'' if str(size) == n else f'={size}'} bound by {path}"
            for n in dict.fromkeys(names)
            if n in self.sizes
            for size, path in [self.sizes[n]]
        ]
        return ", ".join(bound)


@dataclasses.dataclass(frozen=True)
class Binding:
    """One leaf that matched its annotation alone: where, and what it binds.
    `fixed`: checked before (an argument, for the return value's check)."""

    path: str
    dims: Dims
    fixed: bool = False


@dataclasses.dataclass(frozen=True)
class Blame:
    """Why one leaf is blamed: the sizes it should have had, each with the
    leaves that bound it (`with ...` in the message), and every group of every
    dimension it disagrees on (the hint), when that says more."""

    expected: str
    groups: str


def blame(bindings: Sequence[Binding]) -> tuple[dict[str, Blame], set[str]]:
    """The leaves to blame for dimensions the leaves disagree on, by path; and
    every leaf that takes part in such a disagreement."""
    groups: dict[str, dict[Any, list[Binding]]] = {}
    for binding in bindings:
        for name, size in binding.dims:
            by_size = groups.setdefault(name, {})
            members = by_size.setdefault(size, [])
            if binding not in members:
                members.append(binding)
    wanted: dict[str, list[tuple[str, Any, list[str]]]] = {}
    hints: dict[str, list[str]] = {}
    involved: set[str] = set()
    for name, by_size in groups.items():
        if len(by_size) < 2:
            continue
        involved.update(b.path for members in by_size.values() for b in members)
        right = _right_size(by_size)
        listed = [  # the size to match first, then the others as bound
            f"{name}={size} from {', '.join(b.path for b in by_size[size])}"
            for size in dict.fromkeys([right, *by_size])
        ]
        leaves = sum(len(m) for m in by_size.values())
        for size, members in by_size.items():
            if size == right:
                continue
            for member in members:
                if member.fixed:
                    continue
                paths = [b.path for b in by_size[right]]
                wanted.setdefault(member.path, []).append((name, right, paths))
                if leaves > 2:  # a message with two leaves says it all
                    hints.setdefault(member.path, []).append("; ".join(listed))
    blamed = {
        path: Blame(
            ", ".join(
                f"{name}={size} bound by {', '.join(paths)}"
                for name, size, paths in found
            ),
            "; ".join(hints.get(path, [])),
        )
        for path, found in wanted.items()
    }
    return blamed, involved


def _right_size(by_size: dict[Any, list[Binding]]) -> Any:
    """The size the leaves should agree on: the one a leaf checked before
    bound, else the one most leaves have, else the first bound."""
    for size, members in by_size.items():
        if any(m.fixed for m in members):
            return size
    counts = [len(members) for members in by_size.values()]
    largest = max(counts)
    if counts.count(largest) == 1:
        return list(by_size)[counts.index(largest)]
    return next(iter(by_size))
