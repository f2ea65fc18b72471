"""The unknowns of a function that fails, at sizes that divide each other:
a constructor's sizes (`num_mels` of a `Linear(channels * (num_mels // 4))`
after two stride-2 convolutions over `m`: `m` a multiple of 4), and the
counts of parts it took by assumption (`num_heads` of an attention with no
default: 1, `construct.py`), tried at other values.

A count is an unknown that exists too (DESIGN, "an error is certain"): an
attention built with `num_heads` heads whose rotary table is annotated
`"t r"` beside `x: "t d"` needs `d == 2*r*num_heads`, which fails at one
head for every `d` and `r` the annotations keep distinct, and holds at
sizes that divide each other with `num_heads = d // (2*r)`. So where the
function fails with the counts it was built with, it runs again at the
chain witnesses (`witness.chains`: sizes that divide each other), each
count in turn at the ratios of those sizes; one that passes makes the
failure a note that says the sizes and the count it ran with.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any, Literal

from .._runtime.checking.dims import DIM_NAME
from .messages import bound_against_value, unequal_sizes
from .orders import witnesses
from .readings import by_names, shown
from .report import ShapeIssue, as_note
from .witness import chains

__all__ = [
    "FEWER_MATCHES",
    "MAX_COUNT_TRIES",
    "counted_names",
    "other_counts",
    "sizes_unread",
]

#: At most this many runs try other counts, per failing function run, each
#: at most this large.
MAX_COUNT_TRIES = 12
_LARGEST = 64
#: At sizes that divide each other, at most this many assignments of the
#: unknowns no failure relates are tried (`relations.matched`), per run.
FEWER_MATCHES = 16
#: Counts are tried at chain witnesses of at most this many names (fewer
#: than `witness.chains`' own bound): with unknowns set from relations, the
#: ratios of more sizes, all products of 2, 3 and 5, coincide (an image
#: tower's bug ran where `w // patch_size == embed_dim // 4`, 64800/720 and
#: 360/4).
_CHAIN_NAMES = 8


#: A count of repetitions (`num_layers`, `depth`): it stacks parts of one
#: shape, so no ratio of sizes makes a shape fit (never varied at a chain);
#: only a failure that sets its value against a named size does (a stacked
#: GRU's states, `float32[1,dh]` against `h0: "nl dh"`: `num_layers=nl`).
_REPEATS = re.compile(r"(layers|blocks|stages|depth|steps|repeats|iterations)$", re.I)


def counted_names(assumed: Mapping[str, Any]) -> dict[str, int]:
    """The counts a constructor took by assumption (`num_heads`, `groups`,
    `num_layers`), by parameter name (the builder gives a parameter so
    named the size of a run of that name)."""
    return {
        where.rpartition(".")[2]: value
        for where, value in assumed.items()
        if type(value) is int
    }


def sizes_unread(message: str) -> bool:
    """Whether a failure sets a size against another where one is not a
    name (`(t, 1, 9)` against `(t, 1, r)`: a half of a head): other sizes
    may fit. Two names that differ (`(t, b)` against `(b, t)`) are an
    equality between named sizes, which no unknown changes; a failure whose
    sizes it cannot read is tried too."""
    pairs = unequal_sizes(message)
    return not pairs or not all(
        DIM_NAME.fullmatch(side) for pair in pairs for side in pair
    )


def _ratios(sizes: Mapping[str, int]) -> list[int]:
    """The ratios between sizes that divide each other, and their halves,
    smallest first (one head of `d == 2*r*heads` is `d // r // 2`)."""
    found = {
        big // small
        for big, small in itertools.permutations(sizes.values(), 2)
        if small and big > small and big % small == 0
    }
    found |= {ratio // 2 for ratio in found if ratio % 2 == 0}
    return sorted(r for r in found if 1 < r <= _LARGEST)


#: A try: the sizes, the counts, and what they assume that no annotation
#: states, for the note: a relation (`d == h*dh`, or ""), and the counts set
#: against named sizes (`num_heads=h`; "" for a chain's try).
_Try = tuple[dict[str, int], dict[str, int], str, str]


def _tries(
    names: Sequence[str], counts: Mapping[str, int], failed: str
) -> Iterator[_Try]:
    """The counts the failure sets against named sizes, at those sizes
    (`_paired`, `MAX_COUNT_TRIES` at odd sizes, then as many at even ones:
    two counts against three sizes are nine pairings, then as many at sizes
    that divide each other), then those of `_chained` (`MAX_COUNT_TRIES` at
    most)."""
    most = MAX_COUNT_TRIES
    for at in ("odd", "even", "chain"):
        yield from itertools.islice(_paired(names, counts, failed, at), most)
    yield from itertools.islice(_chained(names, counts), most)


def _chained(names: Sequence[str], counts: Mapping[str, int]) -> Iterator[_Try]:
    """Each chain witness with the counts as taken, then each count in turn
    at each ratio of a chain's sizes (the others as taken)."""
    every = chains(names, _CHAIN_NAMES)
    for chain in every:
        yield chain, dict(counts), "", ""
    varied = [name for name in counts if not _REPEATS.search(name)]
    for chain in every:
        for name, value in itertools.product(varied, _ratios(chain)):
            yield chain, {**counts, name: value}, "", ""


def _paired(
    names: Sequence[str],
    counts: Mapping[str, int],
    failed: str,
    at: Literal["odd", "even", "chain"] = "odd",
) -> Iterator[_Try]:
    """Where a failure sets a count's value against a named size (one head,
    `1`, against a cache's `h`): the counts of that value at that size, at
    distinct sizes, all of them first (a grouped-query attention's heads
    and key-value heads, as many of each), then each alone; with each, for
    each other pair of named sizes the failure sets against each other
    (`d` against `dh`), one the count's multiple of the other (`d == h*dh`:
    `d` split in `h` heads of `dh`, or `dh` the width of `h` heads of
    `d`); a nested call's refused argument sets its bound names against
    the value's sizes (`kv_heads` of a cache against `1`). `at` "even":
    the counts alone at the even witnesses (a part that needs even sizes, a
    rotary table's halves, is no reason to leave the counts as taken);
    "chain": at each chain witness (`num_heads` of a bias's `heads`, where
    the width splits in that many heads)."""
    pairs = unequal_sizes(failed) or list(itertools.chain(*bound_against_value(failed)))
    sizes, doubled = witnesses(names)
    named = [(x, y) for x, y in pairs if x in sizes and y in sizes]
    against = [
        (value, b if a == str(value) else a)
        for value in dict.fromkeys(counts.values())
        for a, b in pairs
        if str(value) in (a, b) and (b if a == str(value) else a) in sizes
    ]
    if 1 in counts.values():  # one head of `dh` against `h` of them: `h*dh`
        against += [(1, n) for n in [*_times(pairs), *_folded(failed)] if n in sizes]
    against = list(dict.fromkeys(against))
    groups = [[c for c, v in counts.items() if v == value] for value, _ in against]
    others = [doubled] if at == "even" else []  # the sizes other than odd
    if at == "chain":
        others = chains(names, _CHAIN_NAMES)
    for chosen, (_, n) in [*zip(groups, against), *_each(against, counts)]:
        said = ", ".join(f"{c}={n}" for c in chosen)
        # A count of repetitions builds and runs that many parts: never
        # more than `_LARGEST` (a chain's sizes reach thousands).
        most = _LARGEST if any(_REPEATS.search(c) for c in chosen) else math.inf
        if at != "odd":
            for other in others:
                if other[n] <= most:
                    yield other, {**counts, **dict.fromkeys(chosen, other[n])}, "", said
            continue
        if sizes[n] > most:
            continue
        set_to = {**counts, **dict.fromkeys(chosen, sizes[n])}
        yield sizes, set_to, "", said
        for x, y in [(x, y) for x, y in named if n not in (x, y)]:
            for big, small in ((x, y), (y, x)):
                product = {**sizes, big: sizes[n] * sizes[small]}
                yield product, set_to, f"{big} == {n}*{small}", said


def _times(pairs: Sequence[tuple[str, str]]) -> list[str]:
    """The names `n` of the pairs that set a size against `n` times it
    (`dh` against `h*dh`), as a count of one would make them differ."""
    found = []
    for a, b in pairs:
        for one, many in ((a, b), (b, a)):
            factor = re.fullmatch(
                rf"(\w+)\*{re.escape(one)}|{re.escape(one)}\*(\w+)", many
            )
            if factor:
                found.append(factor[1] or factor[2])
    return found


#: A reshape JAX refused: the shape it had, the shape it was asked for.
_RESHAPED = re.compile(
    r"reshape array of shape \(([^()]*)\).*? into shape \(([^()]*)\)"
)


def _folded(failed: str) -> list[str]:
    """The one name a refused reshape's shape has beyond those it was asked
    for (`(b, kvh, 1, dh)` into `(b, dh)`, or into `(b, dh, 1)`: `kvh`),
    heads a count of one folds as one."""
    found = _RESHAPED.search(failed)
    if found is None:
        return []
    had, asked = ([d.strip() for d in side.split(",")] for side in found.groups())
    extra = [d for d in had if d not in asked and DIM_NAME.fullmatch(d)]
    kept = all(d in had for d in asked if d != "1")  # an axis of one added
    return extra if len(extra) == 1 and kept else []


def _each(
    against: list[tuple[int, str]], counts: Mapping[str, int]
) -> list[tuple[list[str], tuple[int, str]]]:
    """Each count alone at each named size its value stands against, where
    several counts share that value (else the group tried it already)."""
    shared = {v for v in counts.values() if list(counts.values()).count(v) > 1}
    return [
        ([c], (value, n))
        for value, n in against
        if value in shared
        for c, v in counts.items()
        if v == value
    ]


def other_counts(
    failed: ShapeIssue,
    traces: tuple[Callable[[dict[str, int]], Any], Callable[[dict[str, int]], Any]],
    names: Sequence[str],
    counts: Mapping[str, int],
    solved: Collection[str] = (),
) -> ShapeIssue:
    """`failed` (an error found with the `counts` as taken), or a note where
    the function runs at sizes that divide each other with some counts
    (`traces`: each traces at concrete sizes, a count named like its
    parameter; the first sets unknowns equal to named sizes where no
    failure relates them, for the counts as taken, the second not, for
    other counts; the `solved` sizes, set by their relations, go unsaid):
    what fails at every try stays the error, or, where a count set as the
    failure needs it (`_paired`) gets past it to an error further on in the
    function, that one: the bug the count as taken hid."""
    further: ShapeIssue | None = None
    for chain, values, relation, count in _tries(names, counts, failed.message):
        trace_at = traces[values != counts]
        if isinstance(found := trace_at({**chain, **values}), ShapeIssue):
            # The furthest on: an odd try's stop at a part that needs even
            # sizes (a rotary split) is no bug the even try gets past.
            if count and not relation and _past(found, further or failed):
                further = _further(found, count, chain, solved)
            continue
        if count:
            return _paired_note(failed, (relation, count), chain, solved)
        changed = {k: v for k, v in values.items() if counts.get(k) != v}
        taken = f" and a constructor's count {shown(changed)}" if changed else ""
        return as_note(
            failed,
            f"holds only when sizes divide each other: it runs at "
            f"{shown({k: v for k, v in chain.items() if k not in solved})}"
            f"{taken}, and fails where they do not "
            f"({failed.message}); if the annotations assume it, state the "
            "relation with constraints=(...) (JAX's syntax: 'heads == 4*kv')",
        )
    return failed if further is None else further


def _past(found: ShapeIssue, failed: ShapeIssue) -> bool:
    """Whether `found` is an error further on in the file than `failed`."""
    return (
        found.severity == "error"
        and found.file == failed.file
        and found.line > failed.line
    )


def _further(
    found: ShapeIssue, count: str, sizes: Mapping[str, int], solved: Collection[str]
) -> ShapeIssue:
    """The error a count set as the code needs it (`count`) ran into, its
    sizes said by name."""
    at = {k: v for k, v in sizes.items() if k not in solved}
    return dataclasses.replace(
        found,
        message=f"with a constructor's count taken as the code needs it, {count} "
        f"(at {shown(at)}): {by_names(found.message, sizes)}",
    )


def _paired_note(
    failed: ShapeIssue,
    assumed: tuple[str, str],
    sizes: Mapping[str, int],
    solved: Collection[str],
) -> ShapeIssue:
    """`failed` as the note of a count set against a named size (`_paired`)
    that runs (`assumed`: the relation between named sizes it needs, if
    any, and the counts it set)."""
    relation, count = assumed
    at = shown({k: v for k, v in sizes.items() if k not in solved})
    if not relation:
        return as_note(
            failed,
            f"runs with a constructor's count taken as the code needs it, "
            f"{count} (at {at}); with the count it took: {failed.message}",
        )
    return as_note(
        failed,
        f"holds only when {relation}: it runs at {at} with a constructor's "
        f"count {count}, and fails where it does not ({failed.message}); if "
        f'the annotations assume it, state it with constraints=("{relation}",)',
    )
