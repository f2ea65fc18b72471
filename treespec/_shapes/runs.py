"""The runs of one shape check: each traced call's variant (`#dim` at 1 and
`*dims` as two dimensions, or not) and its static values, one combination
of every mode; and what the runs a finding failed in share."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

__all__ = ["Run", "combinations", "common"]


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
