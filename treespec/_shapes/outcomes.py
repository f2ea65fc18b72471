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
from .readings import as_note, by_labels
from .report import ShapeIssue
from .reshapes import Unequal
from .user_code import raised_by_a_library

__all__ = [
    "bound_against_value",
    "first_lines",
    "outcome",
    "ordering_needed",
    "ordering_note",
    "relation_note",
    "unusable_note",
    "skipped_text",
    "suggestion",
    "unequal_sizes",
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
    if isinstance(error, ValidationError) or (
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


#: Where a message of JAX's names two shapes it found unequal.
_SHAPES = re.compile(r"(?:shapes for broadcasting: |got )\(")
#: JAX's listing of the shapes of an operation of three (`x * r * scale`).
_LISTED = re.compile(r"shapes for broadcasting: shapes=\[\(")


#: A layer's check of its own that names both shapes: Equinox's
#: "Received `shape=(latent_dim,) and `x.shape=(d_lat,)`".
_RECEIVED = re.compile(r"\bshape=\(([^()]*)\)\W{1,8}and\W{1,8}x\.shape=\(([^()]*)\)")

#: A loop's carry, or a `cond`'s branch, that comes out another shape (`has
#: type float32[b,s,c] but the corresponding output carry component has type
#: float32[b,stoch,classes]`); never a size with a comma (`floordiv(n, 2)`).
_CARRIED = re.compile(
    r"has type \w+\[([^\]()]*)\] but the corresponding output"
    r"(?: carry component| of \w+) has type \w+\[([^\]()]*)\]"
)


#: The sizes of the axes a `vmap` maps that JAX found inconsistent (`most
#: axes (2 of them) had size n, e.g. axis 0 ...; * one axis had size m: ...`).
_MAPPED = re.compile(r"had size (.+?)(?:, e\.g\.|: axis)")

#: JAX's `..., but A != B.`, two sizes it needed equal.
_UNEQUAL = re.compile(r"\bbut ([^,;()]+?) != ([^,;()]+?)\.?(?= \(|$)")


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
    return relations


#: One problem of a `ValidationError`: its annotation, bindings and value
#: (`expected Float[Array, 'b i'] with b bound by x, i=dx bound by w_x, got
#: float32[b,h + e]`).
_PROBLEM = re.compile(
    r"expected \w+\[[\w.]+, '([^']*)'\] with (.*?), got \w+\[([^\]]*)\]"
)


def bound_against_value(text: str) -> list[list[tuple[str, str]]]:
    """For each problem of a `ValidationError`, the sizes its annotation's
    names were bound to (by another leaf: a nested call's `w_x`, an
    instance's field), or the names, against the value's, where they
    differ; where the ranks differ or a name is not plain (`*b`, `...`,
    `h//2`), each binding against the name it binds."""
    found = []
    for written, bindings, shape in _PROBLEM.findall(text):
        bound = dict(re.findall(r"(\w+)=(\w+) bound by", bindings))
        tokens, sizes = written.split(), [d.strip() for d in shape.split(",")]
        plain = all(t.isidentifier() or t.isdigit() for t in tokens)
        if len(tokens) != len(sizes) or not plain:  # `*b`, `...`, `h//2`
            found.append([(size, name) for name, size in bound.items()])
            continue
        pairs = [(bound.get(token, token), size) for token, size in zip(tokens, sizes)]
        found.append([(a, b) for a, b in pairs if a != b])
    return found


def unequal_sizes(text: str, listed: bool = False) -> list[tuple[str, str]]:
    """The sizes a shape error of JAX's says differ, in pairs: `but A != B`
    (`c // 1` read as `c`), or the two shapes it names (`got (a, b) and
    (a, c)`: `("b", "c")`), aligned from the last dimension, equal pairs
    left out; with `listed`, the first two of those it lists too
    (`shapes=[(b, 1, d), (d_model,)]`)."""
    if (labelled := by_labels(text)) is not None:  # an einsum's, label by label
        return labelled
    listing = _LISTED.search(text) if listed else None  # then the pair
    unequal = None if listing else _UNEQUAL.search(text)
    carried = None if listing else _CARRIED.search(text)
    received = None if listing else _RECEIVED.search(text) or carried
    if unequal:  # JAX's `but c // 4 != g`: one size each side (`c // 1` is c)
        groups = [[re.sub(r"\s*//\s*1$", "", side)] for side in unequal.groups()]
        grouped = re.fullmatch(r"(\w+) // (\w+)", groups[0][0])
        if grouped and groups[1] == ["1"]:  # `c // in_channels != 1`: c is it
            groups = [[grouped[1]], [grouped[2]]]
    elif received:  # a layer's own check (`shape == x.shape`), a loop's carry
        groups = [
            [size.strip() for size in side.split(",") if size.strip()]
            for side in received.groups()
        ]
    elif "vmap got inconsistent sizes" in text:  # the sizes of a vmap's axes
        groups = [[size] for size in dict.fromkeys(_MAPPED.findall(text))]
    elif found := (listing or _SHAPES.search(text)):
        groups = _groups(text[found.end() - 1 :], 2)
    else:
        return []
    if len(groups) != 2 or (carried and len(groups[0]) != len(groups[1])):
        return []  # a carry of another rank: no axis is another's
    pairs = zip(reversed(groups[0]), reversed(groups[1]))
    return [(a, b) for a, b in pairs if a != b]


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


def _groups(text: str, count: int) -> list[list[str]]:
    """The first `count` parenthesized shapes of `text`, split at their
    top-level commas: `(a, floordiv(h, 2))` -> `['a', 'floordiv(h, 2)']`."""
    groups: list[list[str]] = []
    depth, start = 0, 0
    items: list[str] = []
    for i, char in enumerate(text):
        if char == "(":
            depth += 1
            if depth == 1:
                start, items = i + 1, []
        elif char == ")":
            depth -= 1
            if depth == 0:
                items.append(text[start:i].strip())
                groups.append([item for item in items if item])
                if len(groups) == count:
                    break
        elif char == "," and depth == 1:
            items.append(text[start:i].strip())
            start = i + 1
    return groups


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
