"""The runs of one shape check: each traced call's variant (`#dim` at 1 and
`*dims` as two dimensions, or not) and its static values, one combination
of every mode; what the runs a finding failed in share; and the findings of
all the runs, one per line and message."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from .report import ShapeIssue

__all__ = ["MAX_COMBINATIONS", "Findings", "Run", "combinations", "common", "planned"]

#: At most this many combinations of static values (`bool`, `Literal`, `Enum`
#: leaves without a value) are checked per function; past it, a note says how
#: many were left out.
MAX_COMBINATIONS = 16


class Run:
    """One traced call: its variant and the static values chosen."""

    def __init__(self, variant: int, chosen: dict[str, Any]) -> None:
        self.variant = variant
        self.chosen = chosen

    def text(self, paths: Iterable[str] | None = None, variant: bool = True) -> str:
        """The run's static values (those at `paths`), and its variant."""
        shown = self.chosen if paths is None else {p: self.chosen[p] for p in paths}
        parts = [f"{path}={value!r}" for path, value in shown.items()]
        if self.variant and variant:
            parts.append("each #dim 1 and each *dims/... two dimensions")
        return ", ".join(parts)


def common(runs: Sequence[Run]) -> str:
    """What every run of `runs` shares: the static values (and the variant)
    a finding needs, leaving out those it was found with in every value."""
    first = runs[0]
    paths = [
        path
        for path, value in first.chosen.items()
        if all(run.chosen.get(path) == value for run in runs)
    ]
    return first.text(paths, variant=all(run.variant for run in runs))


def combinations(choices: Mapping[str, tuple[Any, ...]]) -> Iterator[dict[str, Any]]:
    paths = list(choices)
    for values in itertools.product(*(choices[p] for p in paths)):
        yield dict(zip(paths, values))


def planned(
    choices: Mapping[str, tuple[Any, ...]], variadic: bool
) -> tuple[list[Run], str]:
    """The runs of a check: each combination of the static values' `choices`
    (the first `MAX_COMBINATIONS`), in each variant; and what a note says
    of the combinations left out, else `""`."""
    combos = list(combinations(choices))
    left_out = ""
    if len(combos) > MAX_COMBINATIONS:
        left_out = (
            f"checked {MAX_COMBINATIONS} of {len(combos)} combinations of "
            "static values (MAX_COMBINATIONS); give values to check the others"
        )
    variants = (0, 1) if variadic else (0,)
    runs = [Run(v, chosen) for v in variants for chosen in combos[:MAX_COMBINATIONS]]
    return runs, left_out


class Findings:
    """What the runs of one check found: one finding per severity, line and
    message, in the order first found, with the runs it failed in."""

    def __init__(self) -> None:
        self._runs: dict[tuple[str, int, str], list[Run]] = {}
        self._order: list[ShapeIssue] = []

    def record(self, issue: ShapeIssue, run: Run) -> None:
        key = (issue.severity, issue.line, issue.message)
        if key not in self._runs:
            self._runs[key] = []
            self._order.append(issue)
        self._runs[key].append(run)

    def final(self, runs: int) -> Iterator[ShapeIssue]:
        """Each finding; one that some of the `runs` passed says the static
        values (and the variant) it needs."""
        for issue in self._order:
            failed = self._runs[(issue.severity, issue.line, issue.message)]
            text = common(failed) if len(failed) < runs else ""
            if text:
                issue = dataclasses.replace(
                    issue, message=f"{issue.message} (with {text})"
                )
            yield issue
