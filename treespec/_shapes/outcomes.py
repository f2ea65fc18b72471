"""What an exception raised while a shape check traced means: an error (a
shape or dtype error JAX raised, a `ValidationError`) or a note (a relation
between sizes the annotations do not state, a value tracing cannot see,
anything else the body raised), and its message, on one line."""

from __future__ import annotations

import re
from typing import Any, Literal

import jax

from .._model.errors import RETURN, ValidationError
from .user_code import raised_by_a_library

__all__ = ["first_lines", "outcome", "suggestion", "validation_text"]

#: JAX's errors that mean "this needs a value, not a shape": what tracing
#: cannot see (Python control flow on traced values, `int(x)`).
_VALUE_ERRORS = tuple(
    getattr(jax.errors, name)
    for name in (
        "ConcretizationTypeError",
        "TracerBoolConversionError",
        "TracerIntegerConversionError",
        "TracerArrayConversionError",
        "NonConcreteBooleanIndexError",
    )
    if hasattr(jax.errors, name)
)


def _inconclusive() -> Any:
    """JAX's error for a relation of symbolic sizes it cannot decide: public
    in `jax.errors` from JAX 0.9 on, only in `jax._src.core` before."""
    found = getattr(jax.errors, "InconclusiveDimensionOperation", None)
    if found is None:
        from jax._src import core

        found = getattr(core, "InconclusiveDimensionOperation", ())
    return found


_INCONCLUSIVE: Any = _inconclusive()


def outcome(error: Exception, own: str = "") -> tuple[Literal["error", "note"], str]:
    """The severity and message of what the body of a checked function
    raised (JAX's traceback unfiltered, so that who raised can be told): a
    shape error of JAX's or of a library the code calls is an error; what
    the user's own code (`own`, the checked function's file) raises a note."""
    text = first_lines(error)
    if _INCONCLUSIVE and isinstance(error, _INCONCLUSIVE):
        return "note", (
            f"needs a relation between sizes the annotations do not state: "
            f"{text}; if it holds, state it with constraints="
            f"({suggestion(text)!r},) (JAX's syntax)"
        )
    if isinstance(error, _VALUE_ERRORS):
        return "note", (
            "not checked past this line: it needs the values of traced "
            f"arrays, which a shape check does not have ({type(error).__name__})"
        )
    if isinstance(error, ValidationError) or (
        isinstance(error, (TypeError, ValueError, IndexError, AssertionError))
        and raised_by_a_library(error.__traceback__, own)
    ):
        return "error", text
    return "note", (
        f"not checked past this line: {type(error).__name__}: {text} (the "
        "annotations may not say enough to run it; give values through "
        "check_shapes)"
    )


def first_lines(error: BaseException) -> str:
    """JAX's message without the traceback-filtering trailer, on one line."""
    paragraphs = str(error).split("\n--------------------")[0].split("\n\n")
    text = paragraphs[0]
    for more in paragraphs[1:]:  # a paragraph ending in ':' goes on below
        if not text.rstrip().endswith(":"):
            break
        text += " " + more
    return " ".join(text.split())


def validation_text(error: ValidationError) -> str:
    """A `ValidationError`'s problems on one line: where, expected, got."""
    parts = []
    for issue in error.issues:
        loc = issue.loc
        if loc == f"the return value, at {RETURN}":
            loc = "the return value"
        parts.append(f"{loc}: expected {issue.expected}, got {issue.got}")
    return "; ".join(parts)


def suggestion(text: str, name: str = "n") -> str:
    """A constraint for the relation an inconclusive operation needed (its
    comparison, else `NAME == 2*k`, an even size)."""
    compared = re.search(r"comparison '(.+?)' (>=|>|<=|<|==|!=) '(.+?)'", text)
    if compared:
        left, op, right = compared.groups()
        if op == ">" and right.lstrip("-").isdigit():
            return f"{left} >= {int(right) + 1}"
        if op == "<" and right.lstrip("-").isdigit():
            return f"{left} <= {int(right) - 1}"
        if op in (">=", "<=", "=="):
            return f"{left} {op} {right}"
    return f"{name} == 2*k"
