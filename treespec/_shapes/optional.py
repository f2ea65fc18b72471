"""A check whose errors hold only with an optional size taken as a size of
its own (`out_dim: int | None = None`, which the author's `__init__` reads
as "the input's width"): the function is checked again with each such size
at its default, `None`. Where that check finds no error, the function runs
as its author builds it by default, and the errors are notes (DESIGN, "an
error is certain"); else the first check's findings stand."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from .construct import OPTIONALS, Optionals
from .report import ShapeReport, as_note

__all__ = ["checked"]


def checked(run: Callable[[], ShapeReport]) -> ShapeReport:
    """`run()`'s report, or, where its errors need an optional size to be a
    size of its own, the report of `run()` with those at their default,
    with the errors as notes."""
    first = Optionals()
    report = _within(first, run)
    taken = list(dict.fromkeys(first.taken))
    if report.ok or not taken:
        return report
    again = _within(Optionals(at_default=True), run)
    if not again.ok:
        return report
    one = len(taken) == 1
    said = (
        f"holds with {', '.join(taken)} at {'its' if one else 'their'} default "
        f"None, which the constructor reads as another size; as "
        f"{'a size of its own' if one else 'sizes of their own'}: "
    )
    notes = [as_note(error, said + error.message) for error in report.errors]
    return dataclasses.replace(again, problems=(*again.problems, *notes))


def _within(optionals: Optionals, run: Callable[[], ShapeReport]) -> ShapeReport:
    token = OPTIONALS.set(optionals)
    try:
        return run()
    finally:
        OPTIONALS.reset(token)
