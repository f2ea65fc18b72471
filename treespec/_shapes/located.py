"""Where a finding of a shape check belongs: what a traced call raised, as a
`ShapeIssue` at the innermost line of the user's code (`user_code.py`), an
error or a note as `outcomes.py` says; and its message in the user's words."""

from __future__ import annotations

import re
from typing import Any

from .._model.errors import ValidationError
from .._runtime.calling.splitter import Splitter
from .arguments import Target
from .outcomes import outcome, validation_text
from .report import ShapeIssue
from .tracing import returned_line
from .user_code import called_at, code_file, frames_of, user_line

__all__ = ["in_user_words", "issue_of"]


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
        line = returned_line(t.inner, splitter, *call) or t.line
        return ShapeIssue("error", t.file, line, t.name, validation_text(error))
    frames = frames_of(error)
    file, line = user_line(frames, code_file(t.inner), (t.file, t.line))
    severity, message = outcome(error, code_file(t.inner))
    caller = called_at(frames, t.inner, line)
    if caller is not None and severity == "error":
        message = f"{message} (called at line {caller})"
    return ShapeIssue(severity, file, line, t.name, message)


#: A size divided by 1, as JAX writes a convolution's feature group count.
_ONE_GROUP = re.compile(r"\b(\w+) // 1\b(?!\d)")


def in_user_words(text: str) -> str:
    """`text` as the user reads it: JAX's `c // 1` (one feature group)
    written `c`, and the axes the check gave a `...` or a `_` of an
    annotation as written (`...[0]`, `_`), never their internal names."""
    text = _ONE_GROUP.sub(r"\1", text)
    return _ANONYMOUS.sub(lambda m: "_" if m[1] == "any" else f"...[{m[2]}]", text)


#: The names `abstract.py` gives the axes of a `...` and of a `_`.
_ANONYMOUS = re.compile(r"\b_(dots|any)(\d+)\b")
