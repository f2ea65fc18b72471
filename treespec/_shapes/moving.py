"""Where a function that fails at both witnesses runs after all: an unknown
size set against a number that moves with the sizes, or every size a
multiple of `MULTIPLE` (a divisibility).

At concrete witnesses a failure may set a size no annotation names (a
constructor's `pos_dim`) against a number no product of names reads (`177`
at `pos_freqs=29`: `6*pos_freqs + 3`, a positional encoding's width). A
number the body hard-codes stays put from one witness to the next (`10` of
`one_hot(y, 10)`: an error, DESIGN); one that moves with the sizes (177 at
the odd witness, 351 at twice those) is an expression of them, which the
unknown may be (DESIGN, "an error is certain"). Set to it at each witness,
a function that runs is a note saying what the unknown was taken as.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from .messages import unequal_sizes
from .readings import by_names, shown
from .report import ShapeIssue, as_note

__all__ = ["MULTIPLE", "below_number", "moving_number", "multiple_of", "multiples"]

#: Sizes this multiple of the odd ones (still distinct) pass an author's
#: check of a divisibility (`assert h % 4 == 0`) that stops every witness,
#: and run past two stride-2 layers.
MULTIPLE = 8
#: How many sizes are tried one by one for the divisibility a note names.
_MOST_NARROWED = 8

#: The largest multiple of one size an expression is read with (`6*f + 3`).
_LARGEST_FACTOR = 16


def _candidates(
    failures: tuple[ShapeIssue, ShapeIssue],
    witnesses: tuple[Mapping[str, int], Mapping[str, int]],
    unknown: Sequence[str],
) -> list[tuple[str, int, int]]:
    """The values an unknown may take at each witness to make the sizes a
    failure compares equal, where they move with the sizes (a number the
    body hard-codes stays put: never taken): an unknown set against a
    number (`got (pos_dim,) and (177,)`), that number; an unknown inside a
    sum (`(30,)`, `width + dir_dim`, against `(206,)`), itself moved by the
    difference, either way."""
    pairs = [
        unequal_sizes(by_names(issue.message, sizes), listed=True)[:1]
        for issue, sizes in zip(failures, witnesses)
    ]
    if not all(pairs):
        return []
    ((a, b),), ((c, d),) = pairs
    if a in unknown and b.isdigit() and a == c and d.isdigit():
        return [(a, int(b), int(d))] if b != d else []
    if not all(x.isdigit() for x in (a, b, c, d)):
        return []
    odd, even = (int(b) - int(a)), (int(d) - int(c))
    if odd == even:  # the same difference at twice the sizes: hard-coded
        return []
    return [
        (name, witnesses[0][name] + sign * odd, witnesses[1][name] + sign * even)
        for name in unknown
        for sign in (1, -1)
        if witnesses[0][name] + sign * odd > 0 and witnesses[1][name] + sign * even > 0
    ]


def _expression(first: int, second: int, sizes: Mapping[str, int]) -> str | None:
    """`6*pos_freqs + 3`: the one reading of `first` at `sizes` that is
    `second` at twice them (a multiple of one size, and a constant)."""
    constant, linear = 2 * first - second, second - first
    readings = [
        f"{linear // size}*{name}" if linear != size else name
        for name, size in sizes.items()
        if linear % size == 0 and linear // size <= _LARGEST_FACTOR
    ]
    if len(readings) != 1:
        return None
    sign = "+" if constant >= 0 else "-"
    return readings[0] + (f" {sign} {abs(constant)}" if constant else "")


def moving_number(
    trace_at: Callable[[dict[str, int]], Any],
    declared: Collection[str],
    failed: Sequence[tuple[dict[str, int], ShapeIssue]],
) -> ShapeIssue | None:
    """The note of a function that fails at both witnesses (`failed`, the
    second at twice the first's sizes) where an unknown meets a number that
    moves with the sizes, and runs at both with the unknowns so set (one
    after another, as each failure names the next: a positional encoding's
    width, then a direction encoding's); else None (the failure stands)."""
    if len(failed) < 2:
        return None
    (odd, issue), (even, other) = failed[:2]
    unknown = [name for name in odd if name not in declared]
    taken: dict[str, tuple[int, int]] = {}
    tries = 0
    while len(taken) < _MOST_TAKEN:
        step = None
        free = [name for name in unknown if name not in taken]
        for name, at_odd, at_even in _candidates((issue, other), (odd, even), free):
            tries += 1
            if tries > _MOST_TRIES:
                return None
            values = {**taken, name: (at_odd, at_even)}
            found = tuple(
                trace_at({**sizes, **{n: v[i] for n, v in values.items()}})
                for i, sizes in enumerate((odd, even))
            )
            failing = [isinstance(f, ShapeIssue) for f in found]
            if not any(failing):
                return _note(failed[0][1], odd, values)
            moved_on = found[0].message != issue.message if all(failing) else False
            if moved_on:  # past this failure, at the next one
                step = values, found
                break
        if step is None:
            return None
        taken, (issue, other) = step
    return None


#: How many unknowns one failure after another may set, in how many runs.
_MOST_TAKEN, _MOST_TRIES = 4, 16


def _floored(first: int, second: int, sizes: Mapping[str, int]) -> str | None:
    """`n//2 + 1`: the one reading of `first` at `sizes` as a size divided
    (floored) by a small number, plus a small constant, that is `second` at
    twice them (an rfft's bins); a multiple of one size first."""
    if read := _expression(first, second, sizes):
        return read
    readings = [
        f"{name}//{k}" + (f" {'+' if c > 0 else '-'} {abs(c)}" if c else "")
        for name, size in sizes.items()
        for k in range(2, _LARGEST_DIVISOR + 1)
        for c in range(-_LARGEST_DIVISOR, _LARGEST_DIVISOR + 1)
        if size // k + c == first and 2 * size // k + c == second
    ]
    return readings[0] if len(readings) == 1 else None


#: The largest divisor (and constant) a floored reading is tried with.
_LARGEST_DIVISOR = 4


def below_number(
    trace_at: Callable[[dict[str, int]], Any],
    failed: Sequence[tuple[dict[str, int], ShapeIssue]],
    concrete: Callable[[dict[str, int], ShapeIssue], ShapeIssue],
) -> ShapeIssue | None:
    """The note of a function that fails at both witnesses where a size the
    annotations name meets a smaller number that moves with the sizes (`m`
    against 7 at n=13, 14 at twice: a slice `[:m]` of an rfft's `n//2 + 1`
    bins), and runs at both with that size below the number: an ordering
    (`m <= n//2 + 1`). Past the ordering, an error on a later line is the
    error (`concrete` writes it). Else None: a number the body hard-codes
    stands."""
    if len(failed) < 2:
        return None
    (odd, issue), (even, other_issue) = failed[:2]
    first, second = (
        _size_against_number(issue, odd),
        _size_against_number(other_issue, even),
    )
    if first is None or second is None:
        return None
    (name, at_odd), (other, at_even) = first, second
    if other != name or at_odd == at_even:  # a number the body hard-codes
        return None
    tries = [
        {**sizes, name: value}
        for sizes, bound in ((odd, at_odd), (even, at_even))
        if (value := _below(bound, sizes.values()))
    ]
    found = [(held, trace_at(held)) for held in tries]
    failing = [(held, f) for held, f in found if isinstance(f, ShapeIssue)]
    later = [  # another failure: on a later line, or of other sizes
        (h, f)
        for h, f in failing
        if f.severity == "error"
        and (f.line != issue.line or _size_against_number(f, h) is None)
    ]
    if len(tries) < 2 or len(later) != len(failing):
        return None
    if len(later) == 2:  # past the ordering, a bug at both witnesses
        return concrete(*later[0])
    bound = _floored(at_odd, at_even, {n: v for n, v in odd.items() if n != name})
    said = f"{name} <= {bound or at_odd}"
    stated = _FLOORED.sub(r"floordiv(\1, \2)", said)  # JAX's syntax
    state = (
        f"if the annotations assume it, state it with constraints=({stated!r},) "
        "(JAX's syntax)"
        if bound
        else "if the annotations assume it, state the ordering with constraints=(...)"
    )
    if later:  # past the ordering, it runs at one witness only
        held = next(h for h, f in found if not isinstance(f, ShapeIssue))
        (at, past), still = later[0], "with it, "
    else:
        (held, _), (at, past), still = found[0], (odd, issue), ""
    return as_note(
        past,
        f"holds only at some sizes: with {said} it runs at {shown(held)}, and "
        f"{still}fails at {shown(at)} ({by_names(past.message, at)}); {state}",
    )


#: A floored reading (`n//2`), as JAX's syntax writes it: `floordiv(n, 2)`.
_FLOORED = re.compile(r"(\w+)//(\d+)")


def _size_against_number(
    issue: ShapeIssue, sizes: Mapping[str, int]
) -> tuple[str, int] | None:
    """The size a failure sets against a smaller number (`m` against 7)."""
    pair = unequal_sizes(by_names(issue.message, sizes), listed=True)[:1]
    name, number = (
        (pair[0] if pair[0][1].isdigit() else pair[0][::-1]) if pair else ("", "")
    )
    if name in sizes and number.isdigit() and int(number) < sizes[name]:
        return name, int(number)
    return None


def _below(bound: int, taken: Collection[int]) -> int | None:
    """A size below `bound` no other size is: a prime first (whose multiples
    a message is least likely to read as another size's)."""
    below = [v for v in range(bound - 1, 1, -1) if v not in taken]
    primes = [v for v in below if all(v % k for k in range(2, int(v**0.5) + 1))]
    return next(iter(primes or below), None)


def _note(
    issue: ShapeIssue, odd: Mapping[str, int], taken: Mapping[str, tuple[int, int]]
) -> ShapeIssue:
    said = []
    for name, (at_odd, at_even) in taken.items():
        read = _expression(at_odd, at_even, odd)
        said.append(f"{name} == {read}" if read else f"{name} at {at_odd}, {at_even}")
    return as_note(
        issue,
        "runs with sizes no annotation names taken as the code needs "
        f"them: {', '.join(said)} (at {shown(odd)} and at twice those; "
        f"{by_names(issue.message, odd)})",
    )


def multiples(sizes: Mapping[str, int]) -> dict[str, int]:
    """Each size times `MULTIPLE`: sizes that every stride and split of a
    model divides, where the code's own check of a divisibility passes."""
    return {name: MULTIPLE * size for name, size in sizes.items()}


def multiple_of(
    trace_at: Callable[[dict[str, int]], Any],
    free: Sequence[str],
    failure: tuple[dict[str, int], ShapeIssue],
    rounded: Collection[str],
) -> ShapeIssue | None:
    """The note of a failure at both witnesses that the function runs past
    at multiples of `MULTIPLE` (two stride-2 layers, whose output an odd or
    twice-odd `h` shrinks): a divisibility of the sizes it names. Else
    None, and where an annotation rounds one of them (`(h+3)//4` says what
    any `h` gives), the error stands."""
    sizes, issue = failure
    at_multiples = multiples(sizes)
    if isinstance(trace_at(at_multiples), ShapeIssue):
        return None
    message = by_names(issue.message, sizes)
    named = list(free)
    if len(named) > _MOST_NARROWED:  # past that, those the failure names
        named = [n for n in free if re.search(rf"\b{n}\b", message)] or named
    # Those that need it: with one of them odd again, it fails.
    named = [
        n
        for n in named[:_MOST_NARROWED]
        if isinstance(trace_at({**at_multiples, n: sizes[n]}), ShapeIssue)
    ] or named
    if set(named) & set(rounded):
        return None
    return as_note(
        issue,
        "holds only when sizes divide each other "
        f"({', '.join(named)}): it runs at "
        f"{shown({n: at_multiples[n] for n in named})} (multiples of "
        f"{MULTIPLE}) and fails at {shown({n: sizes[n] for n in named})} and "
        f"at twice those ({message}); if the annotations "
        "assume it, state it with constraints=(...) (JAX's syntax: "
        f"'{named[0]} == 4*k')",
    )
