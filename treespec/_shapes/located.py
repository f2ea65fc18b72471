"""Where a finding of a shape check belongs: what a traced call raised, as a
`ShapeIssue` at the innermost line of the user's code (`user_code.py`), an
error or a note as `outcomes.py` says."""

from __future__ import annotations

from typing import Any

from .._model.errors import ValidationError
from .._runtime.calling.splitter import Splitter
from .arguments import Target
from .outcomes import outcome, validation_text
from .report import ShapeIssue
from .tracing import trace
from .user_code import called_at, code_file, frames_of, lines_run, user_line

__all__ = ["issue_of"]


def issue_of(
    t: Target,
    splitter: Splitter,
    error: Exception,
    stage: str,
    call: tuple[list[Any], dict[str, Any]],
) -> ShapeIssue:
    """What the traced call `call` of `t` raised at `stage` (its arguments'
    check, the body, its return's check), as a finding at its line."""
    if isinstance(error, ValidationError) and stage == "arguments":
        return ShapeIssue("error", t.file, t.line, t.name, validation_text(error))
    if isinstance(error, ValidationError) and stage == "return":
        with lines_run(t.inner) as ran:  # traced again: where it returned
            trace(t.inner, splitter, *call, returns=False)
        line = ran.returned or t.line
        return ShapeIssue("error", t.file, line, t.name, validation_text(error))
    frames = frames_of(error)
    file, line = user_line(frames, code_file(t.inner), (t.file, t.line))
    severity, message = outcome(error, code_file(t.inner))
    caller = called_at(frames, t.inner, line)
    if caller is not None and severity == "error":
        message = f"{message} (called at line {caller})"
    return ShapeIssue(severity, file, line, t.name, message)
