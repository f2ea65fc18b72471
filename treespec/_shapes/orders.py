"""The witnesses of a shape check: two assignments of distinct sizes to the
names, and the order the names take them in, where the first order builds
nothing (a constructor that refuses an ordering of two sizes) or checks
nothing (an output with an empty axis: a patch larger than its image)."""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

import jax

from .readings import by_names, shown
from .report import ShapeIssue, as_note

__all__ = [
    "MOST_SWAPS",
    "REFUSED",
    "WITNESS_PRIMES",
    "built_in_order",
    "empty",
    "not_empty",
    "other_order",
    "witnesses",
]

#: The sizes of the first witness, one per dimension name (odd, distinct,
#: and unlike the small numbers an axis or a literal size is written with);
#: the second witness doubles them.
WITNESS_PRIMES = (11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67)


def witnesses(names: Iterable[str], apart: bool = False) -> list[dict[str, int]]:
    """Two assignments of distinct sizes to the names: odd primes, then twice
    those (even sizes). Past the primes kept, more of the same kind. With
    `apart`, each of the first five names at least three times the one
    before (`_apart`), so that one divided by another is no 1, which
    broadcasts as a patch count of one does."""
    ordered = list(names)
    odd = _apart(len(ordered)) if apart else list(WITNESS_PRIMES)
    while len(odd) < len(ordered):  # many names: more odd sizes, distinct
        odd.append(odd[-1] + 2 * len(odd) + 1)
    first = dict(zip(ordered, odd))
    return [first, {name: 2 * size for name, size in first.items()}]


#: The size past which `_apart` grows no more: five names apart, the most
#: a body that loops over a size in Python can take in time.
_APART_MOST = 2_000


def _apart(count: int) -> list[int]:
    """`count` distinct primes from 11, the first five each the smallest at
    least three times the one before (11, 37, 113, 347, 1049), the rest the
    next (1051, 1061, ...): one divided by another of the first five is no
    1, and a product or a part of them reads one way only, as the primes of
    `witnesses` do."""
    found = [WITNESS_PRIMES[0]]
    while len(found) < count:
        size = 3 * found[-1] if 3 * found[-1] < _APART_MOST else found[-1] + 2
        while any(size % k == 0 for k in range(2, math.isqrt(size) + 1)):
            size += 1
        found.append(size)
    return found


#: How many swaps of two sizes an ordering is looked for in.
MOST_SWAPS = 6


#: Where a message says a constructor refused the sizes it was given
#: (`construct.Refused`: `SparseMoE(dim=11, ...) refused: ValueError: ...`).
REFUSED = ") refused: "


def built_in_order(
    trace_at: Callable[[dict[str, int]], Any],
    free: Sequence[str],
    results: list[tuple[dict[str, int], Any]],
) -> tuple[Sequence[str], list[tuple[dict[str, int], Any]]]:
    """The names and the runs at their witnesses; where a constructor refused
    the sizes of every witness for an ordering of two of them its message
    names (`num_experts_per_tok must be between 1 and num_experts` at 19 and
    17), the runs with those two the other way round, as an author builds
    it, where it is built there."""
    said = [
        found.message.split(REFUSED, 1)[1]
        for _, found in results
        if isinstance(found, ShapeIssue) and REFUSED in found.message
    ]
    if len(said) < len(results):
        return free, results
    named = [n for n in free if re.search(rf"\b{n}\b", said[0])]
    for one, two in list(itertools.combinations(named, 2))[:MOST_SWAPS]:
        order = [two if n == one else one if n == two else n for n in free]
        again = [(sizes, trace_at(sizes)) for sizes in witnesses(order)]
        refused = [f for _, f in again if isinstance(f, ShapeIssue)]
        if not any(REFUSED in f.message for f in refused):
            return order, again
    return free, results


def not_empty(
    trace_at: Callable[[dict[str, int]], Any],
    free: Sequence[str],
    results: list[tuple[dict[str, int], Any]],
) -> tuple[Sequence[str], list[tuple[dict[str, int], Any]]]:
    """The names and the runs at their witnesses; where every run held with
    an empty axis in its output (a patch or a kernel larger than the image
    it strides over: no patch at all, which any bug of theirs passes), the
    runs with the names in the other order, each well apart from the one
    before (`witnesses(apart=True)`: an image of one patch broadcasts as
    none does), where none is empty there."""
    if not all(empty(found) for _, found in results):
        return free, results
    order = list(reversed(free))
    again = [(sizes, trace_at(sizes)) for sizes in witnesses(order, apart=True)]
    return (free, results) if any(empty(f) for _, f in again) else (order, again)


def other_order(
    trace_at: Callable[[dict[str, int]], Any],
    free: Sequence[str],
    declared: Collection[str],
) -> ShapeIssue | None:
    """Where every run held (at the first witness) and a size of its own (no
    annotation declares it: a `hop_length: Static[int]`) took a larger
    witness than a size the annotations name, the run with the sizes of
    their own first (the smallest): where it fails with an error, a note
    that says both assignments. A size of its own larger than the others
    can make a size of the code's 1 (one frame of a hop longer than the
    signal), and a 1 broadcasts as any bug does. Else None."""
    own = [name for name in free if name not in declared]
    order = [*own, *(name for name in free if name in declared)]
    if not declared or not own or order == list(free):
        return None
    held, sizes = witnesses(free)[0], witnesses(order)[0]
    found = trace_at(sizes)
    if not isinstance(found, ShapeIssue) or found.severity != "error":
        return None
    if REFUSED in found.message:  # a constructor's refusal: nothing ran
        return None
    return as_note(
        found,
        f"holds only at some sizes: it runs at {shown(held)} and fails at "
        f"{shown(sizes)} ({by_names(found.message, sizes)}); if the annotations "
        "assume a relation between these sizes, state it with constraints= "
        "(JAX's syntax)",
    )


def empty(found: Any) -> bool:
    """Whether a run held with an axis of size 0 in its output."""
    return not isinstance(found, ShapeIssue) and any(
        0 in getattr(leaf, "shape", ()) for leaf in jax.tree_util.tree_leaves(found)
    )
