"""What an exception raised while a shape check traced means: an error (a
shape or dtype error JAX, or a library the code calls, raised; a
`ValidationError`) or a note (a relation between sizes the annotations do
not state, a value tracing cannot see, anything else the user's own code
raised), and its message, on one line."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any, Literal

import jax

from .._model.errors import RETURN, ValidationError
from .._runtime.checking.dims import DIM_NAME
from .messages import bound_against_value, unequal_sizes
from .report import ShapeIssue, ShapeReport, as_note
from .reshapes import Unequal
from .user_code import raised_by_a_library

__all__ = [
    "first_lines",
    "outcome",
    "ordering_needed",
    "ordering_note",
    "relation_note",
    "undecided_note",
    "unusable_note",
    "skipped",
    "skipped_text",
    "suggestion",
    "unstated_relation",
    "validation_text",
]

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


#: What a library raises about a value the check built, not about a shape: a
#: call given no `**kwargs` (`MLP.__init__() missing 1 required positional
#: argument`), a class's bare base built where a subclass goes (`Expected a
#: callable value, got Module()`). Notes, as in the user's own code.
_NOT_A_SHAPE = re.compile(
    r"missing \d+ required (?:positional|keyword-only) arguments?"
    r"|Expected a callable value, got|object is not callable"
)


def outcome(error: Exception, own: str = "") -> tuple[Literal["error", "note"], str]:
    """The severity and message of what the body of a checked function
    raised (JAX's traceback unfiltered, so that who raised can be told): a
    shape error of JAX's or of a library the code calls is an error; what
    the user's own code (`own`, the checked function's file) raises a note."""
    text = first_lines(error)
    if isinstance(error, ValidationError):  # a nested call's arguments
        head = f"{error.context}: " if error.context else ""
        return "error", head + validation_text(error)
    if isinstance(error, Unequal):  # a reshape JAX let pass: JAX's error
        return "error", text
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
    if isinstance(error, MemoryError):  # host work on sizes: `np.triu_indices(n)`
        return "note", (
            f"not checked past this line: at these sizes it ran out of memory "
            f"({text or type(error).__name__}); the command bounds its memory "
            "with --memory GIB"
        )
    if (
        isinstance(error, (TypeError, ValueError, IndexError, AssertionError))
        and raised_by_a_library(error.__traceback__, own)
        and not _NOT_A_SHAPE.search(text)
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


def suggestion(
    text: str, name: str = "n", runs_at: Mapping[str, int] | None = None
) -> str:
    """A constraint for the relation an inconclusive operation needed (its
    comparison, else `NAME == 2*k`, an even size): the side of the
    comparison that holds at `runs_at`, sizes at which the code ran."""
    compared = re.search(r"comparison '(.+?)' (>=|>|<=|<|==|!=) '(.+?)'", text)
    if not compared or compared.group(2) == "!=":
        return f"{name} == 2*k"
    left, op, right = compared.groups()
    if op in (">", "<") and right.lstrip("-").isdigit():  # `n > 2` is n >= 3
        op, right = op + "=", str(int(right) + (1 if op == ">" else -1))
    elif op in (">", "<"):  # sizes are integers: `a > b` is `a >= b + 1`
        op, right = op + "=", f"{right} {'+' if op == '>' else '-'} 1"
    held = _holds(left, op, right, runs_at or {})
    if held is False and op != "==":  # the code ran on the other side
        if right.lstrip("-").isdigit():
            other = int(right) + (-1 if op == ">=" else 1)
            return f"{left} {'<=' if op == '>=' else '>='} {other}"
        return f"{right} >= {left} + 1" if op == ">=" else f"{left} >= {right} + 1"
    return f"{left} {op} {right}"


def _holds(left: str, op: str, right: str, sizes: Mapping[str, int]) -> bool | None:
    """Whether `left op right` holds at `sizes`; None when it cannot be read
    as arithmetic of those sizes (or there are none)."""
    unknown = False

    def size(match: re.Match[str]) -> str:
        nonlocal unknown
        if match.group(0) in _FUNCTIONS:  # JAX's `floordiv(n, 2)`, `max(a, b)`
            return match.group(0)
        unknown = unknown or match.group(0) not in sizes
        return str(sizes.get(match.group(0), 0))

    text = re.sub(r"[A-Za-z_]\w*", size, f"({left}) {op} ({right})")
    plain = re.sub(r"\b(?:floordiv|mod|max|min)\(", "(", text)
    if unknown or not sizes or not re.fullmatch(r"[\d\s+\-*/%()<>=,]+", plain):
        return None
    try:  # digits, operators and JAX's four functions only
        return bool(eval(text, {"__builtins__": {}, **_FUNCTIONS}))
    except Exception:
        return None


#: The functions JAX writes sizes with.
_FUNCTIONS: dict[str, Any] = {
    "floordiv": lambda a, b: a // b,
    "mod": lambda a, b: a % b,
    "max": max,
    "min": min,
}


def unstated_relation(text: str) -> list[str]:
    """The relations a shape error shows between a size of its own and an
    expression of other sizes (`(h*w, d), (n, d)`: `n == h*w`), none of
    which the annotations state: a relation to state, not a bug. Empty when
    the shapes differ otherwise (`(b, n), (b, m)`, `(h - 2,)` against
    `(h,)`): then it is the sizes, not a relation, that disagree."""
    relations = []
    # One argument's against a binding (a nested call's): never the return's.
    problems = [] if "the return value" in text else bound_against_value(text)
    for a, b in unequal_sizes(text) or (problems[0] if len(problems) == 1 else []):
        if "1" in (a, b):
            continue
        lone, other = (a, b) if DIM_NAME.fullmatch(a) else (b, a)
        derived = not DIM_NAME.fullmatch(other) and not other.lstrip("-").isdigit()
        if not (DIM_NAME.fullmatch(lone) and derived):
            return []  # two names, or a name against an expression of itself
        if lone in DIM_NAME.findall(other):
            return []
        part = re.fullmatch(r"(\w+) // (\d+)", other)  # JAX's syntax has no //
        relation = f"{part[1]} == {part[2]}*{lone}" if part else f"{lone} == {other}"
        relations.append(relation)
    return list(dict.fromkeys(relations))  # `(c, c)` against `(h*w, h*w)`: once


def relation_note(issue: ShapeIssue, relations: list[str]) -> ShapeIssue:
    """`issue` (an error at sizes no caller would pass) as the note of the
    relations it needs (`unstated_relation`)."""
    return as_note(
        issue,
        "needs a relation between sizes the annotations do not state: "
        f"{', '.join(relations)} ({issue.message}); if it holds, state it with "
        f"constraints={tuple(relations)!r} (JAX's syntax), and the check goes on "
        "past this line",
    )


#: JAX's refusal of an update larger than what it updates.
_LARGER = re.compile(
    r"update shape must be smaller than operand shape, got update shape "
    r"\(([^()]*)\) for operand shape \(([^()]*)\)"
)


def ordering_needed(text: str, named: Collection[str]) -> list[str]:
    """The orderings an error needs between sizes the annotations name (a
    cache written at `t` into `max_len`: `t <= max_len`): never an error
    (DESIGN: an ordering between named sizes is a note). Empty when a side
    is no size the annotations name, or when the error is another."""
    found = _LARGER.search(text)
    if not found:
        return []
    update, operand = (
        [size.strip() for size in side.split(",")] for side in found.groups()
    )
    if len(update) != len(operand):
        return []
    orderings = []
    for small, large in zip(update, operand):
        if small == large:
            continue
        if small not in named or large not in named:
            return []
        orderings.append(f"{small} <= {large}")
    return orderings


def ordering_note(issue: ShapeIssue, orderings: list[str]) -> ShapeIssue:
    """`issue` as the note of the orderings it needs (`ordering_needed`)."""
    return as_note(
        issue,
        f"holds only where {' and '.join(orderings)} ({issue.message}); "
        f"if the annotations assume it, state it with "
        f"constraints={tuple(orderings)!r} (JAX's syntax)",
    )


def undecided_note(issue: ShapeIssue) -> ShapeIssue:
    """`issue` (an error JAX's symbolic sizes cannot decide at the sizes the
    constraints given allow, where no witness sizes tried satisfy them) as a
    note: not a bug, nor checked past."""
    return as_note(
        issue,
        "not checked past this line: JAX's symbolic sizes cannot decide it "
        "under the constraints, and no witness sizes tried satisfy them "
        f"({issue.message}); state the relation it needs too",
    )


def unusable_note(issue: ShapeIssue, relations: dict[str, str]) -> ShapeIssue:
    """`issue` (an error the code meets past a relation it needs of sizes no
    annotation names, which the checker could not use: a size it cannot
    evaluate) as the note that the check stopped there, never an error."""
    needs = ", ".join(f"{name} == {size}" for name, size in relations.items())
    return as_note(
        issue,
        f"not checked past this line: the code needs {needs}, a size the "
        f"checker cannot evaluate ({issue.message})",
    )


def skipped(error: Exception, where: tuple[str, int, str]) -> ShapeReport:
    """The report of a function (`where`: its file, line and name) that could
    not be checked: why (`skipped_text`), at its `def`."""
    file, line, name = where
    why = skipped_text(error, name)
    return ShapeReport(name, (ShapeIssue("note", file, line, name, why, skipped=True),))


def skipped_text(error: Exception, function: str) -> str:
    """Why a function is skipped: a leaf with no value (`MissingValue`: its
    `path` and `text`), one that cannot be built (`CannotBuild`: its `path`
    and `why`), each with the keyword that gives it; else the error."""
    path = getattr(error, "path", None)
    if path is None:
        return f"skipped: {first_lines(error)}"
    top = re.split(r"[.\[]", path, maxsplit=1)[0]
    give = (
        f"check_shapes({function}, {top}=...), or say how to build it beside "
        f"the function: @treespec.check_with({top}=...)"
    )
    if hasattr(error, "why"):
        return f"skipped: {path} cannot be built: {error.why}; give a value: {give}"
    return (
        f"skipped: {path} ({getattr(error, 'text', '')}) has no value; give one: {give}"
    )
