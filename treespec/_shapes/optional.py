"""A check whose errors hold only with a value the checker chose, where its
author may mean another (DESIGN, "an error is certain"):

- an optional size taken as a size of its own (`out_dim: int | None =
  None`, which the author's `__init__` reads as "the input's width"): the
  function is checked again with each such size at its default, `None`;
- a sequence of sizes of each part taken with two parts (`cardinalities:
  tuple[int, ...]`, one embedding per categorical feature): checked again
  with as many parts as each size of the function's own annotations that
  its errors name, in turn (its length stands for `n_cat`).

Where a check again finds no error, the function runs as its author can
build it, and the errors are notes saying both; else the first check's
findings stand."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from contextvars import ContextVar

from .._runtime.checking.dims import DIM_NAME
from .report import ShapeReport, as_note

__all__ = ["MOST_PARTS", "OPTIONALS", "Optionals", "checked"]

#: The most parts a sequence of sizes is built with, its length standing for
#: a size: the witnesses' sizes, not the products some runs try.
MOST_PARTS = 64


class Optionals:
    """What one check took that its author may mean otherwise: the optional
    sizes left at their default `None` (`out_dim: int | None = None`, "the
    input's width") taken as sizes of their own (`taken`), or taken at that
    default (`at_default`: a second check, where the first found an error);
    the sequences of sizes taken with two parts (`parts`), or with as many
    as the size `length` names (a check again), which is none a parameter
    named like it took (`bound`)."""

    def __init__(self, at_default: bool = False, length: str | None = None) -> None:
        self.at_default = at_default
        self.length = length
        self.taken: list[str] = []
        self.parts: list[str] = []
        #: The sizes a parameter named like them took (`embed_dim`).
        self.bound: set[str] = set()


#: The check's `Optionals` (none outside a check).
OPTIONALS: ContextVar[Optionals | None] = ContextVar("optionals", default=None)


def checked(run: Callable[[], ShapeReport], names: Iterable[str] = ()) -> ShapeReport:
    """`run()`'s report, or, where its errors need an optional size to be a
    size of its own or a sequence of sizes to have two parts, the report of
    `run()` taken the other way (`names`: the sizes a sequence's length may
    stand for, those the errors name and no parameter took), with the
    errors as notes."""
    first = Optionals()
    report = _within(first, run)
    if report.ok:
        return report
    taken = list(dict.fromkeys(first.taken))
    parts = list(dict.fromkeys(first.parts))
    said = {n for error in report.errors for n in DIM_NAME.findall(error.message)}
    lengths = [n for n in names if n in said and n not in first.bound]
    # Each way the author may build it, in turn: the first that runs.
    agains = [(Optionals(at_default=True), _at_default(taken))] if taken else []
    agains += [(Optionals(length=n), _of_parts(parts, n)) for n in lengths if parts]
    for optionals, why in agains:
        again = _within(optionals, run)
        if again.ok:
            notes = [as_note(error, why + error.message) for error in report.errors]
            return dataclasses.replace(again, problems=(*again.problems, *notes))
    return report


def _at_default(taken: list[str]) -> str:
    """What a note says of optional sizes that run at their default."""
    one = len(taken) == 1
    return (
        f"holds with {', '.join(taken)} at {'its' if one else 'their'} "
        f"default None, which the constructor reads as another size; as "
        f"{'a size of its own' if one else 'sizes of their own'}: "
    )


def _of_parts(parts: list[str], name: str) -> str:
    """What a note says of sequences of sizes that run with `name` parts."""
    one = len(parts) == 1
    return (
        f"holds with {' and '.join(parts)} of {name} parts, "
        f"{'its length' if one else 'their lengths'} standing for "
        f"{name}; with two parts: "
    )


def _within(optionals: Optionals, run: Callable[[], ShapeReport]) -> ShapeReport:
    token = OPTIONALS.set(optionals)
    try:
        return run()
    finally:
        OPTIONALS.reset(token)
