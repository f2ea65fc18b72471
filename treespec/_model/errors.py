"""The two exception types and the formatting they share."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

__all__ = [
    "AT_THE_CALL",
    "from_body",
    "mark_from_body",
    "Issue",
    "SpecError",
    "ValidationError",
    "a_type",
    "argument_of",
    "describe_value",
    "location",
    "plural",
]

#: The `argument` name under which a function's return value is checked.
RETURN = "return"


def location(argument: str, path: str) -> str:
    """Where a leaf is: `argument cfg, at cfg['n']` or `the return value, at ...`."""
    if argument == RETURN:
        return f"the return value, at {path}"
    return f"argument {argument}, at {path}"


def plural(n: int, word: str) -> str:
    """`1 entry`, `2 entries`, `1 positional parameter`, `3 problems`."""
    if n == 1:
        return f"1 {word}"
    if word.endswith("y") and word[-2:-1] not in "aeiou":
        return f"{n} {word[:-1]}ies"
    return f"{n} {word}s"


def a_type(value: Any) -> str:
    """`a dict`, `an int`: the type of `value` with its article."""
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


class SpecError(TypeError):
    """The spec is wrong: an annotation, a `static_flags` tree or a policy.

    Raised at decoration time where possible, otherwise when a tree structure is
    first seen. The message names the parameter and the annotation path, and says
    how to fix it.

    !!! example

        ```python
        import treespec
        from treespec import Dynamic, Static

        def f(x: Static[Dynamic[int]]) -> int:
            return x

        try:
            treespec.jit(f)
        except treespec.SpecError as e:
            print(e)
        ```
    """


@dataclass(frozen=True)
class Issue:
    """One problem with one argument: where, what was expected, what came.

    [`ValidationError.issues`][treespec.ValidationError.issues] holds one for
    each problem found in a call; the error's message is their `format()`, one
    under the other.

    **Fields:**

    - `loc`: where: the argument and the key path of the leaf
      (`argument cfg, at cfg['n']`), or `the return value, at ...`.
    - `expected`: what the annotation asks for there (`Static[int]`,
      `Float[Array, 'n m'] with n=3 bound by x`).
    - `got`: what came (`str '3'`, `float32[4,4]`).
    - `hint`: how to fix it, where one applies; `""` otherwise.

    !!! example

        ```python
        import treespec
        from treespec import Static

        try:
            treespec.validate({"n": "3"}, dict[str, Static[int]])
        except treespec.ValidationError as e:
            (issue,) = e.issues
            assert issue.expected == "Static[int]"
            assert issue.got == "str '3'"
            print(issue.format())
        ```
    """

    loc: str
    expected: str
    got: str
    hint: str = ""

    def format(self) -> str:
        """The issue as the error's message shows it: `loc: expected ..., got
        ...`, and the hint on a line of its own."""
        text = f"{self.loc}: expected {self.expected}, got {self.got}"
        if self.hint:
            text += f"\n    hint: {self.hint}"
        return text


class ValidationError(TypeError):
    """An argument does not match its spec.

    Every problem found in one call is listed on its own line with three parts:
    where (argument and key path), what was expected, what came, and a hint where
    one applies. `issues` holds them as [`Issue`][treespec._model.errors.Issue]
    objects (`loc`, `expected`, `got`, `hint`). It is a `TypeError`.

    !!! example

        ```python
        import treespec
        from treespec import Static

        @treespec.jit
        def f(cfg: dict[str, Static[int]]) -> int:
            return cfg["n"]

        try:
            f({"n": "3"})
        except treespec.ValidationError as e:
            (issue,) = e.issues
            assert issue.loc == "argument cfg, at cfg['n']"
            print(e)
        ```
    """

    issues: tuple[Issue, ...]
    """Every problem found, in the order of the message's lines."""

    def __init__(self, issues: Sequence[Issue], context: str = "") -> None:
        self.issues = tuple(issues)
        self.context = context
        head = f"{context}: " if context else ""
        head += _count(self.issues)
        lines = [head] + ["  " + i.format().replace("\n", "\n  ") for i in self.issues]
        super().__init__("\n".join(lines))

    def __reduce__(self) -> tuple[Any, ...]:
        # Made again from its issues (an exception pickles its message by
        # default, which is not what `__init__` takes).
        return type(self), (self.issues, self.context), self.__dict__


#: Set on what the user's function raised while it traced.
_BODY = "__treespec_from_body__"


def mark_from_body(error: BaseException) -> None:
    """Note that the user's function raised `error` while it traced: the
    user's own error, never a refusal of an argument to be explained."""
    with contextlib.suppress(AttributeError):  # a class with slots: unmarked
        setattr(error, _BODY, True)


def from_body(error: BaseException) -> bool:
    """Whether the user's function raised `error` (see `mark_from_body`)."""
    return getattr(error, _BODY, False) is True


class AtTheCall:
    """`with AT_THE_CALL:` around what a call does before JAX runs (bind,
    split): a `ValidationError` raised there reaches the user as raised by
    their call, not under the frames of treespec's machinery that found it,
    as one found while JAX traces does (JAX hides treespec's frames there).
    A cause it was given stays; the exception it was raised while handling
    is not shown (as `raise ... from None`). One the user's own function
    raised (`from_body`: a nested treespec call's) keeps its traceback."""

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if isinstance(error, ValidationError) and not from_body(error):
            # The error goes on from the frame of the `with`, as re-raised
            # there: without the frames below, nor that one.
            error.__traceback__ = None
            error.__suppress_context__ = True


#: The one `AtTheCall` (it holds nothing).
AT_THE_CALL = AtTheCall()


# Shown as exported (`treespec.ValidationError: ...` as a traceback's last
# line, and pickled by that name), not by the private module they live in;
# the annotation resolved here, where `Issue` is (`typing.get_type_hints`
# would look for it in `treespec`).
SpecError.__module__ = ValidationError.__module__ = "treespec"
ValidationError.__annotations__ = {"issues": tuple[Issue, ...]}


def argument_of(loc: str) -> str | None:
    """The argument a `location` names (None for the return value or another)."""
    if loc.startswith("argument ") and ", at " in loc:
        return loc[len("argument ") : loc.index(", at ")]
    return None


def _count(issues: Sequence[Issue]) -> str:
    """`1 problem in argument cfg`, `3 problems in 2 arguments`, ..."""
    arguments = list(dict.fromkeys(filter(None, (argument_of(i.loc) for i in issues))))
    places = []
    if len(arguments) == 1:
        places.append(f"argument {arguments[0]}")
    elif arguments:
        places.append(plural(len(arguments), "argument"))
    if any(i.loc.startswith("the return value") for i in issues):
        places.append("the return value")
    text = plural(len(issues), "problem")
    return f"{text} in {' and '.join(places)}" if places else text


def describe_value(value: Any, limit: int = 40, *, tracer_note: bool = False) -> str:
    """A short description of a value for messages: `str '3'`, `float32[32,7]`.

    Arrays and tracers read alike (a traced call sees only tracers); with
    `tracer_note`, a tracer says so. A NumPy scalar says what it is
    (`numpy.int64 3`), and arrays inside a container read as arrays.
    """
    numpy = sys.modules.get("numpy")  # no NumPy scalar before NumPy is imported
    if numpy is not None and isinstance(value, numpy.generic):
        return f"numpy.{type(value).__name__} {str(value)[:limit]}"
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        dims = ",".join(str(d) for d in shape)
        kind = type(value).__name__
        suffix = " (tracer)" if tracer_note and "Tracer" in kind else ""
        return f"{dtype}[{dims}]{suffix}"
    return f"{type(value).__name__} {_brief(value, limit)}"


def _brief(value: Any, limit: int) -> str:
    """`repr`, but arrays (tracers too) inside lists, tuples and dicts read
    `int32[]`, and the whole is cut at `limit` characters."""
    parts: list[str] = []
    _write(value, parts, limit, 0)
    # A repr on several lines (an Equinox or NNX module's) on one line.
    text = " ".join("".join(parts).split())
    return text[: limit - 3] + "..." if len(text) > limit else text


def _write(value: Any, parts: list[str], limit: int, depth: int) -> None:
    if sum(map(len, parts)) > limit:
        return
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        items: list[tuple[str, Any]] = [("", v) for v in value]
        ends = "[]" if isinstance(value, list) else "()"
    elif type(value) is dict:
        items = [(f"{k!r}: ", v) for k, v in value.items()]
        ends = "{}"
    else:
        if hasattr(value, "shape") and hasattr(value, "dtype") and depth:
            dims = ",".join(str(d) for d in value.shape)
            parts.append(f"{value.dtype}[{dims}]")
        else:
            parts.append(repr(value)[: limit + 1])
        return
    parts.append(ends[0])
    for i, (label, item) in enumerate(items):
        parts.append((", " if i else "") + label)
        _write(item, parts, limit, depth + 1)
        if sum(map(len, parts)) > limit:
            break
    if len(items) == 1 and ends == "()":
        parts.append(",")
    parts.append(ends[1])
