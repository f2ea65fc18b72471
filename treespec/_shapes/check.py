"""Shapes checked without data: `check_shapes`.

A function's body is traced (`tracing.py`: to a program, its reshapes
checked) with the abstract arguments `abstract.py` builds from its spec
(symbolic dimensions, one per name), validated on the way in and out as a
call of a transform is (the splitter's checks), once per variant and
combination of static values; at concrete witnesses where symbolic sizes
cannot decide (`witness.py`, run by `solving.py`, which holds what a check
has learnt). What JAX raises becomes a `ShapeIssue` (`report.py`):
`outcomes.py` says whether it is an error or a note, `user_code.py` at which
line of the user's code.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._model.errors import SpecError
from .._runtime.api import spec_for
from .._runtime.checking.retrace import retraces_unsaid
from .._runtime.reading.flags import Flags
from .._transforms.base import Transformed
from . import optional, outcomes, relations, witness
from .abstract import Builder, CannotBuild, MissingValue
from .arguments import Target
from .construct import NeedsConcrete
from .counts import FEWER_MATCHES, counted_names, other_counts, sizes_unread
from .declared import constraints_of, declared_of, values_declared
from .leaves import own_names
from .located import in_user_words, issue_of
from .readings import assumptions_text
from .report import ShapeIssue, ShapeReport
from .returned import returned_issue
from .runs import MAX_COMBINATIONS, Run, planned
from .sizes import given_sizes, satisfiable, symbols_for
from .solving import Solving
from .tracing import splitter_for, trace
from .user_code import def_line, shown

__all__ = ["MAX_COMBINATIONS", "ShapeIssue", "ShapeReport", "check_shapes"]


def check_shapes(
    fun: Callable[..., Any],
    /,
    *,
    constraints: Sequence[str] = (),
    **statics: Any,
) -> ShapeReport:
    """Check a function's shapes for every size at once, without data.

    The body is traced to a program (`jax.make_jaxpr`, as `jax.eval_shape`
    does) with arguments built from the annotations: one symbolic dimension
    per name (`jax.export.symbolic_shape`), shared by every argument and the
    return annotation; its reshapes are checked too, which JAX does not do
    at symbolic sizes. Nothing is computed, allocated or compiled. JAX's
    traceback filtering is turned off while it traces (who raised is read
    from the innermost frame), in the calling thread only: other threads
    running JAX meanwhile are unaffected.

    **Arguments:**

    - `fun`: a function a treespec transform wraps (a method too: a class's
      `self` is built from its field annotations; a bound method keeps its
      instance), or any annotated function.
    - `constraints`: relations between sizes the annotations do not state,
      in JAX's syntax (`"n == 2*k"`, `"b >= 2"`).
    - `**statics`: values for parameters, named like them, used as they
      are: their arrays become abstract with their own shapes and dtypes,
      their static leaves stay (a model of `eqx.nn` layers, a config).

    Static leaves of the parameters not given take their default, else each
    value of a `bool`, `Literal[...]` or `Enum` annotation (their product, up
    to `MAX_COMBINATIONS` = 16 runs).

    **Returns:**

    A `ShapeReport`: `ok`, `problems` (each a `ShapeIssue` at the line it
    concerns), `outputs`; `str(report)` reads as mypy's output.

    **Raises:**

    `TypeError` for a keyword that names no parameter.

    !!! example

        ```python
        import jax.numpy as jnp
        import treespec
        from jaxtyping import Array, Float

        @treespec.jit
        def center(x: Float[Array, "b n"]) -> Float[Array, "b n"]:
            return x - x.mean(axis=1)  # right only when b == n

        report = treespec.check_shapes(center)
        assert not report.ok
        print(report.problems[0].message)
        ```
    """
    target = _target(fun, statics)
    unknown = sorted(set(statics) - {p.name for p in target.spec.params})
    if unknown:
        raise TypeError(
            f"check_shapes got {', '.join(map(repr, unknown))}, which "
            f"{target.name} has no parameter of"
        )
    stated = constraints_of(target.inner)  # check_with(constraints=...)
    every = tuple(dict.fromkeys([*constraints, *stated]))
    spec = target.spec
    names = own_names([*(p.node for p in spec.params), spec.returns])
    with retraces_unsaid():  # its traces, constructors' too, are not the user's
        return optional.checked(lambda: _Checker(target, every).run(), sorted(names))


def _target(fun: Any, statics: Mapping[str, Any]) -> Target:
    given = dict(statics)
    transform = fun
    instance = getattr(fun, "__self__", None)
    func = getattr(fun, "__func__", None)
    if instance is not None and isinstance(func, Transformed):
        transform = func  # a bound method: its instance is a value given
    if isinstance(transform, Transformed):
        spec = transform.spec
        flags: Flags = getattr(transform, "_flags", Flags())
        default: str = getattr(transform, "_default", "infer")
        if transform is not fun and spec.params:
            given.setdefault(spec.params[0].name, instance)
    else:
        spec = spec_for(fun, {})
        flags, default = Flags(), "infer"
    inner: Any = transform
    while isinstance(inner, Transformed):
        inner = inner.__wrapped__
    code = getattr(inspect.unwrap(inner), "__code__", None)
    file = code.co_filename if code else "<unknown>"
    line = def_line(inner, code.co_firstlineno if code else 0)
    name = getattr(inner, "__qualname__", spec.name)
    declared = declared_of(inner, spec.params)
    given = {**values_declared(declared), **given}  # a value given still wins
    return Target(inner, spec, flags, default, given, declared, shown(file), line, name)


class _Checker(Solving):
    """One function's check: its runs, each solved (`Solving`), and its report."""

    def __init__(self, target: Target, constraints: tuple[str, ...]) -> None:
        super().__init__(target, constraints)
        t = target
        self.splitter = splitter_for(t.inner, t.spec, t.flags, t.default)

    def _trace(self, args: list[Any], kwargs: dict[str, Any]) -> Any:
        traced = trace(self.t.inner, self.splitter, args, kwargs)
        if (error := traced.error) is None:
            return traced.output
        self._raised = f"{type(error).__name__}: {outcomes.first_lines(error)}"
        return issue_of(self.t, self.splitter, error, traced.stage, (args, kwargs))

    def run(self) -> ShapeReport:
        t = self.t
        try:
            first = self._first_pass()
        except (CannotBuild, MissingValue, SpecError) as error:
            return outcomes.skipped(error, (t.file, t.line, t.name))
        if first.variadic:  # the second variant's names (`batch0`, `batch1`)
            second = self._builder(Run(1, {}), None)
            self._arguments(second)
            first.names.update(second.names)
        fixed: dict[str, Any] = given_sizes(t.spec.params, t.given)
        try:
            free = [name for name in first.names if name not in fixed]
            sizes = {**symbols_for(free, self.constraints), **fixed}
        except Exception as error:  # JAX refuses the constraints: a usage error
            raise ValueError(f"check_shapes: bad constraints: {error}") from None
        runs, left_out = planned(first.choices, first.variadic)
        notes = [self._at_def("note", left_out)] if left_out else []
        outputs: list[tuple[str, Any]] = []
        for run in runs:
            found = self._one(run, sizes, free, fixed)
            if isinstance(found, ShapeIssue):
                self.findings.record(found, run)
            else:
                outputs.append((run.text() if len(runs) > 1 else "", found))
        if self._assumed:
            notes.append(self._at_def("note", assumptions_text(self._assumed, t.name)))
        if taken := {k: v for k, v in self.relations.items() if k not in self.unusable}:
            said = relations.relations_text(taken, first.scopes)
            notes.append(self._at_def("note", said))
        # As the user reads them (`out of layers[0]`, `c // 1` as `c`, `...[0]`).
        readable = first.scopes.readable
        problems = [
            dataclasses.replace(p, message=in_user_words(readable(p.message)))
            for p in [*notes, *self.findings.final(len(runs))]
        ]
        defaults = tuple(first.defaults.items())
        return ShapeReport(t.name, tuple(problems), tuple(outputs), defaults)

    def _first_pass(self) -> Builder:
        """A build that records the names, the choices and the variants. The
        classes held several times bind their names per instance
        (`scopes.py`): once a build found them, the names are those of a
        build that knows them."""
        first = self._builder(Run(0, {}), None)
        self._arguments(first)
        self.several = first.scopes.found()
        if self.several:
            first = self._builder(Run(0, {}), None)
            self._arguments(first)
        # A constructor's sizes that no annotation names: those to solve.
        self.unknown = first.taken.unknown
        return first

    def _one(
        self, run: Run, sizes: dict[str, Any], free: list[str], fixed: dict[str, Any]
    ) -> Any:
        found = self._one_run(run, sizes, free, fixed)
        if not isinstance(found, ShapeIssue):
            return self._returned(found, run, sizes, (free, fixed))
        error = found.severity == "error"
        if error and (
            orderings := outcomes.ordering_needed(found.message, self.declared)
        ):
            return outcomes.ordering_note(found, orderings)
        counts = counted_names(self._assumed) if error else {}
        if error and sizes_unread(found.message) and (self.unknown or counts):
            names, matching = self._concrete(run, free, fixed, most=FEWER_MATCHES)
            plain = self._concrete(run, free, fixed, most=0)[1]
            return other_counts(found, (matching, plain), names, counts, self.relations)
        return found

    def _one_run(
        self, run: Run, sizes: dict[str, Any], free: list[str], fixed: dict[str, Any]
    ) -> Any:
        """One run: symbolic first, at concrete witnesses where JAX's
        symbolic sizes cannot decide (or a constructor cannot take them)."""
        builder = self._builder(run, sizes)
        try:
            args, kwargs = self._arguments(builder)
        except NeedsConcrete as error:  # the witnesses satisfy the constraints
            given = sizes if self.constraints else None
            return self._witnessed(run, free, fixed, str(error), given)
        finally:
            self._assumed.update(builder.assumed)
        # Sizes no annotation names, as the code needs them (`relations.py`).
        calls = [(args, kwargs)]  # the first trace's, then built anew
        found = relations.solved(
            lambda: self._trace(
                *(calls.pop() if calls else self._arguments(self._builder(run, sizes)))
            ),
            self._failure,
            lambda text: relations.relations_needed(text, self.unknown),
            self.relations,
            self.unusable,
        )
        if not isinstance(found, ShapeIssue):
            return found
        if found.severity == "error" and self.unusable:
            return outcomes.unusable_note(found, self.unusable)
        if found.severity == "error" and (
            rel := outcomes.unstated_relation(self._raised)
        ):
            return outcomes.relation_note(found, rel)
        # The author's own check (`assert h % 4 == 0`) fails at symbolic sizes.
        checked = found.severity == "note" and self._raised.startswith("Assert")
        if not (witness.symbolic_limit(self._raised) or checked):
            return found
        if self.constraints and found.severity == "note":  # it says what it needs
            return found
        if satisfiable(sizes, free, self.constraints):  # witnesses that satisfy them
            return self._witnessed(run, free, fixed, self._raised, sizes)
        return outcomes.undecided_note(found)

    def _returned(self, output: Any, run: Run, sizes: Any, names: Any) -> Any:
        """`output`, or the error `returned.py` finds in it."""
        call = lambda at: self._arguments(self._builder(run, at or sizes))  # noqa: E731
        runs = (self._concrete(run, *names)[1], call)
        at = None if self.constraints else names  # no witness runs there
        taken = (self.relations, self.guessed)
        issue = returned_issue(output, self.t, self.splitter, taken, runs, at)
        return output if issue is None else issue
