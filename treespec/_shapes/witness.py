"""Concrete witnesses: sizes to check a function at where JAX's symbolic
dimensions cannot decide.

A symbolic trace stops where a size is used as a number (`math.sqrt(d)`,
`d ** -0.5`, `range(n)`), or where JAX cannot decide an equality or a
division of sizes (`floordiv(h - 2, 2) + 1` against `h//2`, a split of `h`
in two). The function is then traced again at two assignments of concrete
sizes to the dimension names: distinct odd primes, and twice those (even
sizes), so that a bug that passes only when two sizes are equal, or only at
even sizes, fails at one of them. What fails at both is an error; what holds
at both is no finding; what holds at one only needs a relation between
sizes that the annotations do not state: a note. Where both fail because
sizes do not divide (a split in halves, grouped-query attention), two chain
witnesses whose sizes divide each other decide (`chains`); where the code's
own check stops both (`assert h % 4 == 0`), sizes 8 times the odd ones.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from .moving import MULTIPLE, below_number, moving_number, multiple_of, multiples
from .orders import MOST_SWAPS, built_in_order, empty, not_empty, witnesses
from .outcomes import ordering_needed, relation_note, suggestion, unstated_relation
from .parity import even_names, half_of, only_there, rounded_against_floor
from .readings import by_names, shown
from .relations import ORDERING
from .report import ShapeIssue, as_note

__all__ = [
    "by_names",
    "decide",
    "shown",
    "symbolic_limit",
    "undecided_division",
]

#: A size used as a number (`math.sqrt`, `** -0.5`, `range()`), a comparison
#: or a division JAX cannot decide (`4 does not divide c`), a size made a
#: traced number (`int(1.25 * n)`) or a value the code needs: the witnesses
#: tell which.
_LIMITS = (
    *("_DimExpr", "Symbolic dimension", "inconclusive", "Inconclusive"),
    *("does not divide", "not a multiple of", "ConcretizationTypeError"),
    *("TracerBoolConversionError", "TracerIntegerConversionError"),
    # `jnp.pad(mode="reflect")`, `squeeze()`, `jax.random.permutation`,
    # `jax.lax.associative_scan`, `jnp.repeat` and `jnp.arange` of sizes
    *("hape polymorphism", "polymorphic shapes", "non-constant"),
    "JaxprTracer'",  # `[True] * x.shape[0]`: a size JAX made a tracer of
    # NumPy given a symbolic size (`np.ones(x.shape[0])`, made on the host)
    "expected a sequence of integers or a single integer",
)
#: A size JAX could not simplify (`floordiv(h - 2, 2) + 1`, `mod(h, 2)`).
_UNDECIDED = re.compile(r"\b(?:floordiv|mod|max|min|non_negative)\(")


def symbolic_limit(text: str) -> bool:
    """Whether an error's message shows a limit of symbolic sizes, not a bug
    the sizes show: then concrete witnesses decide."""
    return any(mark in text for mark in _LIMITS) or bool(_UNDECIDED.search(text))


def undecided_division(text: str) -> bool:
    """Whether an error's message is a division of sizes JAX could not
    decide (`4 does not divide c`, a split, a reshape with `floordiv`), not
    one it found wrong."""
    return symbolic_limit(text) and bool(_DIVISION.search(text))


def decide(
    trace_at: Callable[[dict[str, int]], Any],
    free: Sequence[str],
    symbolic: str,
    fun: Any = None,
    rounded: Mapping[str, tuple[str, int, int]] | None = None,
    declared: Collection[str] = (),
) -> Any:
    """What a run of `fun` whose symbolic trace stopped at `symbolic` (a
    limit of symbolic sizes) finds at the witnesses: `trace_at(sizes)` gives
    a `ShapeIssue` or the output.

    - Holds at every witness: the output.
    - Fails at every one: the error, its sizes written as names; a failure
      that is no division first; where all are divisions, the chain
      witnesses decide (`_divided`).
    - Holds at some: a note naming the relation, in the body and against
      the return annotation alike: the names that must be even, or the
      comparison JAX could not decide. Two parity failures are errors:
      one that sets an annotation's rounding of a name that must be even
      against its floor (`rounded`: `(h+1)//2` at h=13 is 7, against 6),
      and one on a line the function runs only at odd values of those
      names (its own branch for them, `if d % 2:`): odd sizes are meant to
      work there.
    - Fails at every one, and holds with an unknown set to a number that
      moves with the sizes (`moving.py`), with two sizes the other way
      round (an ordering), or at multiples of 8 (a divisibility): a note.
    """
    results = [(sizes, trace_at(sizes)) for sizes in witnesses(free)]
    free, results = built_in_order(trace_at, free, results)
    free, results = not_empty(trace_at, free, results)
    failed = [(s, found) for s, found in results if isinstance(found, ShapeIssue)]
    if not failed:
        return results[0][1]
    sizes, issue = failed[0]
    message = by_names(issue.message, sizes)
    if len(failed) == len(results):
        if issue.severity == "note" and not _division(issue):
            past = _multiples(trace_at, results[0][0])
            return dataclasses.replace(issue, message=message) if past is None else past
        plain = [(s, found) for s, found in failed if not _division(found)]
        lines = {found.line for _, found in plain}
        if len(plain) == len(lines) == 2 and _past_parity(trace_at, plain[0]):
            return _concrete(*plain[1])  # the even witness's, further on
        if not plain:
            return _divided(trace_at, free, sizes, issue, message)
        # A failure that is no division (the first): the error, unless an
        # unknown, an ordering or a divisibility lets the function run.
        ordering = (
            moving_number(trace_at, declared, failed)
            or _ordering(trace_at, free, declared, plain[0])
            or below_number(trace_at, failed, _concrete)
            or multiple_of(trace_at, free, plain[0], rounded or {})
        )
        return ordering or _concrete(*plain[0])
    held = next(s for s, found in results if not isinstance(found, ShapeIssue))
    # A return that breaks its annotation at some sizes only (SAME padding's
    # ceil(h/2) against `h//2` at an odd h) is a divisibility against the
    # return annotation: a note (DESIGN, "an error is certain"), as in the
    # body.
    parity = even_names(trace_at, results[0][0]) if held is results[1][0] else None
    if parity:
        even = parity.names
        names = " and ".join([", ".join(even[:-1]), even[-1]] if even[1:] else even)
        said = rounded_against_floor(issue, sizes, even, rounded or {})
        if issue.severity == "error" and said:
            return _concrete(sizes, issue, said)
        if issue.severity == "error" and only_there(trace_at, fun, parity):
            return _concrete(sizes, issue, f"in the code's branch for an odd {names}")
        verb = "is" if len(even) == 1 else "are"
        halves = [f"{n} == 2*{half_of(n, even, free)}" for n in even]
        return as_note(
            issue,
            f"holds only when {names} {verb} even: at {shown(sizes)}, {message}; "
            f"if the annotations assume it, state it with "
            f"constraints={tuple(halves)!r} (JAX's syntax)",
        )
    name = next((n for n in free if re.search(rf"\b{n}\b", symbolic)), free[0])
    return _some_sizes(issue, held, sizes, suggestion(symbolic, name, held))


def _some_sizes(
    issue: ShapeIssue, held: dict[str, int], failed: dict[str, int], said: str
) -> ShapeIssue:
    """The note of a failure (at `failed`) the function runs past at `held`,
    with the relation `said` to state."""
    return as_note(
        issue,
        f"holds only at some sizes: it runs at {shown(held)} and fails at "
        f"{shown(failed)} ({by_names(issue.message, failed)}); if the "
        f"annotations assume it, state the relation with constraints=({said!r},) "
        "(JAX's syntax)",
    )


def _ordering(
    trace_at: Callable[[dict[str, int]], Any],
    free: Sequence[str],
    declared: Collection[str],
    failure: tuple[dict[str, int], ShapeIssue],
) -> ShapeIssue | None:
    """The note of a failure (at every witness) that sets sizes the
    annotations name (`declared`, else any of `free`) against each other,
    where the function runs with two of them the other way round: it needs
    an ordering (`n >= k`: a "same" convolution's `max(n, k)` against the
    return, `top_k`'s `k` against its axis). Else None."""
    sizes, issue = failure
    text = by_names(issue.message, sizes)
    # An unknown too (a `k: Static[int]`) where JAX's words say an ordering.
    ordered = ORDERING.search(text) is not None
    named = [n for n in free if n in declared or not declared or ordered]
    pair = [n for n in named if re.search(rf"\b{n}\b", text)]
    if ordering_needed(text, named):  # JAX's own words say which (a cache)
        return None
    if _RETURN in text and len(pair) == 2:
        other = witnesses(list(reversed(free)))[0]
        tries = [{name: other[name] for name in free}]
    else:  # two sizes the failure names swapped: next to each other
        # first, where one comparison changes (`k` and `n` of `b=11, n=13,
        # k=17`), then any two (`q` and `b` of a queue `q=11, d=13, b=17`)
        order = sorted(pair, key=lambda n: sizes[n])
        near = list(itertools.pairwise(order))
        swaps = near + [p for p in itertools.combinations(order, 2) if p not in near]
        tries = [
            {**sizes, one: sizes[two], two: sizes[one]}
            for one, two in swaps[:MOST_SWAPS]
        ]
    past = None  # a failure further on, with the sizes the other way round
    for held in tries:
        found = trace_at(held)
        if empty(found):  # no patch at all: it holds for any code
            continue
        if not isinstance(found, ShapeIssue):
            # The two sizes moved, those the failure names first (a misread
            # `2*q` at q=11 may name one only: the other moved too).
            moved = dict.fromkeys(n for n in [*pair, *free] if held[n] != sizes[n])
            large, small = sorted(list(moved)[:2], key=held.__getitem__)[::-1]
            return _some_sizes(issue, held, sizes, f"{large} >= {small}")
        further = found.line != issue.line or (
            _RETURN in found.message and _RETURN not in issue.message
        )
        if found.severity == "error" and further:
            past = past or (held, found)
    # Past the ordering the first failure needs, the bug further on.
    return None if past is None else _concrete(*past)


_RETURN = "the return value"


def _past_parity(
    trace_at: Callable[[dict[str, int]], Any], odd: tuple[dict[str, int], Any]
) -> bool:
    """Whether the odd witness's failure (`odd`) is one of parity, where the
    even witness failed on another line: a rotary table that needs an
    even head size, before a mask wrong at every size. The failure further
    on is the error; the first, a note on its own."""
    sizes, first = odd

    def at_first(tried: dict[str, int]) -> Any:  # that failure, or not it
        found = trace_at(tried)
        same = isinstance(found, ShapeIssue) and found.line == first.line
        return found if same else None

    return even_names(at_first, sizes) is not None


#: A failure that says sizes do not divide (a split, a reshape, a `-1`):
#: the sign of a relation the annotations may not state.
_DIVISION = re.compile(
    r"equal division|evenly divid|not divisible|divisible by|remainder|"
    r"cannot reshape|Cannot divide|does not divide|must divide|not a multiple of|"
    r"[(,] ?0[,)]",  # an axis of size 0: `h // kv` where kv > h
    re.I,
)
#: The ratios between neighbours of a chain witness, in turn, and its
#: smallest sizes: every size a multiple of 12 (even, and of 3 and 4), then
#: of 20160 (of 32, 64, 7, 9 and 10 too), no ratio between two sizes equal
#: to a size; at most `_CHAIN_NAMES` names: 11 (a 3-D convolution's video,
#: kernel and output channels are 9), where the largest size from 20160,
#: 20160 * 2**4 * 3**3 * 5**3, is still an `int32` (an `arange` of it).
_CHAIN_RATIOS = (2, 3, 5)
_CHAIN_BASES = (12, 20160)
_CHAIN_NAMES = 11


def _division(issue: ShapeIssue) -> bool:
    return bool(_DIVISION.search(issue.message))


def _multiples(trace_at: Callable[[dict[str, int]], Any], odd: dict[str, int]) -> Any:
    """The run at multiples of `MULTIPLE`: its output, an error found past
    the author's check, or None where it stops there too."""
    sizes = multiples(odd)
    found = trace_at(sizes)
    if not isinstance(found, ShapeIssue):
        return found
    why = f"sizes that are multiples of {MULTIPLE}, which the code's check allows"
    return _concrete(sizes, found, why) if found.severity == "error" else None


def _concrete(
    sizes: dict[str, int],
    issue: ShapeIssue,
    why: str = "JAX's symbolic sizes could not decide",
) -> ShapeIssue:
    """An error found at concrete sizes, its sizes written as names."""
    return dataclasses.replace(
        issue,
        message=f"{by_names(issue.message, sizes)} (found at concrete sizes "
        f"{shown(sizes)}: {why})",
    )


def chains(names: Sequence[str], most: int = 0) -> list[dict[str, int]]:
    """Witnesses whose sizes divide each other: each name's size a multiple
    of every later one's (`heads` of `kv_heads`, in the order the
    annotations name them), then of every earlier one's; from 12, then from
    a size that a constant of the code divides too (32 groups of a group
    norm, 64 heads). For functions that need a divisibility the annotations
    do not state (grouped-query attention, a split in halves): distinct
    sizes still, so that a bug past it fails. None past `most` names
    (`_CHAIN_NAMES` unless given)."""
    if len(names) > (most or _CHAIN_NAMES):
        return []
    found = []
    for base in _CHAIN_BASES:
        sizes, size = [], base
        for i in range(len(names)):
            sizes.append(size)
            size *= _CHAIN_RATIOS[i % len(_CHAIN_RATIOS)]
        found += [dict(zip(names, reversed(sizes))), dict(zip(names, sizes))]
    return found


def _divided(
    trace_at: Callable[[dict[str, int]], Any],
    free: Sequence[str],
    sizes: dict[str, int],
    issue: ShapeIssue,
    message: str,
) -> ShapeIssue:
    """A function that fails at both witnesses where sizes do not divide:
    run at the chain witnesses. One that holds needs sizes that divide (a
    note); one that fails otherwise is the bug (an error, at its line); one
    that fails to divide even where every size divides the others (a reshape
    that mixes up sizes) is an error too. Past `_CHAIN_NAMES` names there is
    no chain: a note, never an error for an unstated divisibility."""
    tried = chains(free)
    failures = []
    for chain in tried:
        found = trace_at(chain)
        if not isinstance(found, ShapeIssue):
            return as_note(
                issue,
                f"holds only when sizes divide each other: it runs at "
                f"{shown(chain)} and fails at {shown(sizes)} ({message}); if "
                "the annotations assume it, state the relation with "
                "constraints=(...) (JAX's syntax: 'heads == 4*kv')",
            )
        named = by_names(found.message, chain)
        if found.severity == "error" and (relations := unstated_relation(named)):
            return relation_note(dataclasses.replace(found, message=named), relations)
        if found.severity == "error" and not _division(found):
            return _concrete(chain, found)
        failures.append((chain, found))
    if failures:  # past the divisions the chain passed, the line that fails
        return _concrete(*failures[0])
    return as_note(
        issue,
        f"needs a relation between sizes the annotations do not state: at "
        f"{shown(sizes)}, {message}; if it holds, state it with "
        "constraints=(...) (JAX's syntax)",
    )
