"""What the shape check reports: `ShapeIssue` (one finding, in the format
mypy prints) and `ShapeReport` (one function's findings and outputs)."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

__all__ = ["ShapeIssue", "ShapeReport", "as_note"]


@dataclasses.dataclass(frozen=True)
class ShapeIssue:
    """One finding of [`check_shapes`][treespec.check_shapes].

    **Fields:**

    - `severity`: `"error"` (a shape or dtype error, a return value that
      disagrees with its annotation) or `"note"` (an unstated relation
      between sizes, what tracing cannot see, a function skipped).
    - `file`, `line`: where: the innermost line of your code where JAX
      raised, the `return` for the return value, else the `def`.
    - `function`: the function checked (its qualified name).
    - `message`: what was found, dimensions by their names, with the static
      values of the run that found it.
    - `skipped`: True when the function could not be checked at all.

    !!! example

        ```python
        import treespec
        from jaxtyping import Array, Float

        @treespec.jit
        def pool(x: Float[Array, "b n"]) -> Float[Array, "n"]:
            return x.mean(axis=1)  # the wrong axis

        (issue,) = treespec.check_shapes(pool).problems
        assert issue.severity == "error" and issue.function == "pool"
        print(issue.message)
        ```
    """

    severity: Literal["error", "note"]
    file: str
    line: int
    function: str
    message: str
    skipped: bool = False

    def format(self) -> str:
        """`FILE:LINE: error: FUNCTION: MESSAGE`, the format mypy prints."""
        return (
            f"{self.file}:{self.line}: {self.severity}: {self.function}: {self.message}"
        )


@dataclasses.dataclass(frozen=True)
class ShapeReport:
    """What [`check_shapes`][treespec.check_shapes] found for one function.

    **Fields:**

    - `function`: the function's qualified name.
    - `problems`: the `ShapeIssue`s, errors and notes, in the order found.
    - `outputs`: for each run that traced, the static values it used (as
      text, `""` when there was one run) and the symbolic output
      (`jax.ShapeDtypeStruct`s, the non-array outputs as values).
    - `defaults`: the static leaves checked at their default only
      (`(("groups", 1),)`: other values were not tried; give them).

    `ok` is True when there is no error (notes allowed); `str(report)` is
    the mypy-style lines, or `FUNCTION: ok`.

    !!! example

        ```python
        import treespec
        from jaxtyping import Array, Float

        @treespec.jit
        def pool(x: Float[Array, "b n"]) -> Float[Array, "n"]:
            return x.mean(axis=0)

        report = treespec.check_shapes(pool)
        assert report.ok and str(report) == "pool: ok"
        print(report.outputs)
        ```
    """

    function: str
    problems: tuple[ShapeIssue, ...] = ()
    outputs: tuple[tuple[str, Any], ...] = ()
    defaults: tuple[tuple[str, Any], ...] = ()

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def errors(self) -> tuple[ShapeIssue, ...]:
        return tuple(p for p in self.problems if p.severity == "error")

    @property
    def notes(self) -> tuple[ShapeIssue, ...]:
        return tuple(p for p in self.problems if p.severity == "note")

    @property
    def skipped(self) -> bool:
        return any(p.skipped for p in self.problems)

    def __str__(self) -> str:
        if not self.problems:
            shown = ", ".join(f"{path}={value!r}" for path, value in self.defaults)
            only = f" ({shown}: checked at its default only)" if shown else ""
            return f"{self.function}: ok{only}"
        return "\n".join(p.format() for p in self.problems)


def as_note(issue: ShapeIssue, message: str) -> ShapeIssue:
    """`issue` (a finding), at its place, as a note saying `message`."""
    return dataclasses.replace(issue, severity="note", message=message)
