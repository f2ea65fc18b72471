"""The state of one function's shape check, and its runs at concrete sizes.

`Solving` holds what a check has learnt so far (the relations between sizes
the code needs, the constructor sizes still unknown, what the last trace
raised) and builds and traces a run under it: symbolically (`_trace`), or at
concrete witnesses (`_concrete`, `_witnessed`: `witness.py` decides), where
the sizes no failure relates are first set equal to named sizes
(`relations.solved_or_matched`). `check.py` plans the runs and reports.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from . import orders, outcomes, relations, witness
from .abstract import Builder, CannotBuild, MissingValue
from .arguments import Target, arguments_of
from .leaves import declared_names, own_names, rounded_names
from .readings import unsaid
from .report import ShapeIssue
from .runs import Findings, Run
from .scopes import InstanceScopes
from .sizes import constrained

__all__ = ["Solving"]


class Solving:
    """A check's state, and its runs built and traced under it."""

    def __init__(self, target: Target, constraints: tuple[str, ...]) -> None:
        self.t = target
        self.constraints = constraints
        self.findings = Findings()
        self._raised = ""  # what the last trace raised (for `symbolic_limit`)
        self._assumed: dict[str, Any] = {}  # a constructor's, said in a note
        spec = target.spec
        nodes = [*(p.node for p in spec.params), spec.returns]
        self.declared = declared_names(nodes)
        self.own = own_names(nodes)
        self.named = (rounded_names(nodes), self.declared)  # for `witness.decide`
        #: Classes binding per instance (`scopes.py`); the relations taken.
        self.several: frozenset[type] = frozenset()
        self.relations: dict[str, str] = {}
        self.guessed: set[str] = set()  # of those, one assignment of several
        #: Relations the code needs that the checker could not use (a size it
        #: cannot evaluate, `min(n, 3)`): the check stops there, in a note.
        self.unusable: dict[str, str] = {}
        #: A constructor's sizes to solve (`construct.Taken`), less those its
        #: instance's fields hold under the function's names (`fielded`).
        self.unknown, self.fielded = frozenset[str](), dict[str, str]()

    def _arguments(self, builder: Builder) -> tuple[list[Any], dict[str, Any]]:
        """The call `builder` builds; built again where an instance holds a
        constructor's size under a name of the function's (`fielded`)."""
        built = arguments_of(self.t, builder)
        unknown = self.unknown - self.relations.keys()
        if not (named := {u: n for u, n in builder.fielded.items() if u in unknown}):
            return built
        self.fielded.update(named)
        self.unknown -= named.keys()
        run = Run(builder.variant, dict(builder.chosen))
        return self._arguments(self._builder(run, dict(builder.sizes or {})))

    def _trace(self, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """The output of the function traced with `args` and `kwargs`, or
        the `ShapeIssue` of what it raised (its text in `_raised`)."""
        raise NotImplementedError  # the checker's: it knows the transform

    def _builder(self, run: Run, sizes: dict[str, Any] | None) -> Builder:
        if sizes is not None and (taken := {**self.fielded, **self.relations}):
            sizes = relations.with_relations(sizes, taken)
        at, scopes = (sizes, run.chosen, run.variant), InstanceScopes(self.several)
        return Builder(*at, declared=self.declared, own=self.own, scopes=scopes)

    def _witnessed(
        self,
        run: Run,
        free: list[str],
        fixed: dict[str, Any],
        symbolic: str,
        symbols: Mapping[str, Any] | None = None,
    ) -> Any:
        """The run at concrete witnesses (`witness.decide`), within `symbols`."""
        names, at = self._concrete(run, free, fixed, symbols)
        found = witness.decide(at, names, symbolic, self.t.inner, *self.named)
        if not isinstance(found, ShapeIssue):  # and sizes of their own first
            trial = self._concrete(run, free, fixed, symbols, trial=True)[1]
            if note := orders.other_order(trial, names, self.declared):
                self.findings.record(unsaid(note, self.relations | self.fielded), run)
        return unsaid(found, [*self.relations, *self.fielded])

    def _concrete(
        self,
        run: Run,
        free: list[str],
        fixed: dict[str, Any],
        symbols: Mapping[str, Any] | None = None,
        most: int = relations.MAX_MATCHES,
        *,
        trial: bool = False,
    ) -> tuple[list[str], Callable[[dict[str, int]], Any]]:
        """The names, and a trace of the run at concrete sizes of them (the
        unknowns no failure relates set equal to named sizes, `most` tries;
        a `trial` takes the relations so far and none new)."""
        names, at = constrained(symbols or {}, free, self.constraints)

        def trace_at(sizes: dict[str, int]) -> Any:
            every = {**at(sizes), **fixed}

            def needed(text: str) -> dict[str, str]:  # its sizes by their names
                return relations.needed_at(text, every, self.relations, self.unknown)

            raised = self._raised  # what the run found, not its last try
            if trial:
                found, self._raised = traced_at(every), raised
                return found
            found = relations.solved_or_matched(
                lambda: traced_at(every),
                self._failure,
                needed,
                (self.relations, self.unusable, self.guessed),
                (self.unknown, [n for n in names if n not in self.unknown]),
                most,
            )
            if self._failure(found) is not None:
                self._raised = raised
            error = isinstance(found, ShapeIssue) and found.severity == "error"
            return (
                outcomes.unusable_note(found, self.unusable)
                if error and self.unusable
                else found
            )

        def traced_at(every: dict[str, Any]) -> Any:
            builder = self._builder(run, every)
            try:
                args = self._arguments(builder)
            except CannotBuild as error:  # a constructor's refusal of sizes
                return self._at_def("note", f"{error.path} was not built: {error.why}")
            except MissingValue as error:
                return self._at_def("note", str(error))
            finally:  # a constructor first run at witnesses takes unknowns too
                self._assumed.update(builder.assumed)
                self.unknown |= builder.taken.unknown - self.fielded.keys()
            return self._trace(*args)

        return names, trace_at

    def _failure(self, found: Any) -> str | None:
        """What an error found says (JAX's message), for `solved`."""
        error = isinstance(found, ShapeIssue) and found.severity == "error"
        return self._raised if error else None

    def _at_def(self, severity: Literal["error", "note"], message: str) -> ShapeIssue:
        return ShapeIssue(severity, self.t.file, self.t.line, self.t.name, message)
