"""The names a function needs even, found at concrete witnesses
(`witness.decide`): each name in turn made odd again; and the two parity
failures that are errors (an annotation's rounding of an odd size set
against its floor, and a failure in the code's own branch for odd sizes)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .report import ShapeIssue
from .user_code import lines_run

__all__ = ["Parity", "even_names", "half_of", "only_there", "rounded_against_floor"]


#: At most this many names are tried one by one for a parity (a trace each).
_PARITY_NAMES = 12


def rounded_against_floor(
    issue: ShapeIssue,
    sizes: Mapping[str, int],
    even: Sequence[str],
    rounded: Mapping[str, tuple[str, int, int]],
) -> str:
    """Why a parity failure is an error where the annotations round a name
    that must be even (`rounded`: name to its text, shift and divisor), and
    the failure sets that rounding against the floor (`(h+1)//2`, 7 at
    h=13, against `h//2`, 6): the annotation says what an odd h gives, and
    a floor breaks it. Else `""`: a parity the code needs elsewhere (a x2
    upsample of the rounded size) stays a note."""
    numbers = set(re.findall(r"(?<![\w.])\d+(?![\w.])", issue.message))
    for name in even:
        if name not in rounded:
            continue
        text, shift, divisor = rounded[name]
        up, down = (sizes[name] + shift) // divisor, sizes[name] // divisor
        if up != down and {str(up), str(down)} <= numbers:
            return f"the annotation's {text} says what an odd {name} gives"
    return ""


@dataclasses.dataclass(frozen=True)
class Parity:
    """The names that must be even, and three witnesses that differ in those
    names only: `even` (it holds), `odd` and `larger` (odd, 3x: it fails)."""

    names: list[str]
    even: dict[str, int]
    odd: dict[str, int]
    larger: dict[str, int]


def even_names(
    trace_at: Callable[[dict[str, int]], Any], odd: dict[str, int]
) -> Parity | None:
    """The names that must be even for a function that fails at the odd
    witness and holds at the even one: each name in turn is made odd again
    (the others staying as found), and kept even only where the function
    then fails, and the function must fail again with them odd but larger
    (else the relation is one of size, `n > 12`). None when no such set is
    found within `_PARITY_NAMES`."""
    if len(odd) > _PARITY_NAMES:
        return None
    sizes = {name: 2 * size for name, size in odd.items()}
    for name in odd:
        tried = {**sizes, name: odd[name]}
        if not isinstance(trace_at(tried), ShapeIssue):
            sizes = tried
    even = [name for name in odd if sizes[name] != odd[name]]
    # Parity, not size: it fails again with those names odd and larger (3x).
    larger = {**sizes, **{name: 3 * odd[name] for name in even}}
    if not even or not isinstance(trace_at(larger), ShapeIssue):
        return None
    return Parity(even, sizes, {**sizes, **{n: odd[n] for n in even}}, larger)


def half_of(name: str, even: Sequence[str], free: Sequence[str]) -> str:
    """A new symbol for half of `name`: `k` when one name is even, else
    `k_NAME`; never a dimension name the function already uses."""
    half = "k" if len(even) == 1 else f"k_{name}"
    while half in free:
        half += "_"
    return half


def only_there(
    trace_at: Callable[[dict[str, int]], Any], fun: Any, parity: Parity
) -> bool:
    """Whether `fun` fails, at odd values of the names that must be even
    (and at larger odd ones), on a line of its body it does not run at even
    values, the other names as they were: a branch of its own for odd
    sizes (`if d % 2:`), so meant to work; not a branch on another name or
    on a size's magnitude (`if n <= 16`)."""
    runs = []
    for sizes in (parity.odd, parity.larger, parity.even):
        with lines_run(fun) as ran:
            trace_at(sizes)
        runs.append(ran)
    odd, larger, even = runs
    line = odd.failed_at()
    return (
        bool(even.lines)
        and line is not None
        and line == larger.failed_at()
        and line not in even.lines
    )
