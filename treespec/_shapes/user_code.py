"""Where in the user's code a finding of the shape check belongs.

The `def` line of a function, the innermost frame of the user's code in a
traceback (not the standard library's, a library's or treespec's own, told
by module: `owners.py`), whether JAX itself raised, and the lines a
function ran and the `return` it left by. JAX's
traceback filtering is turned off while the shape check traces, in the
checking thread only where JAX allows it, so the innermost frame is JAX's
when JAX raised.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterator
from types import FrameType, TracebackType
from typing import Any

import jax

from .owners import is_library, library_raised

__all__ = [
    "called_at",
    "code_file",
    "def_line",
    "frames_of",
    "is_abstract",
    "lines_run",
    "Ran",
    "raised_by_a_library",
    "shown",
    "unfiltered_tracebacks",
    "user_line",
]


def _thread_local_filtering() -> Callable[[str], Any] | None:
    """JAX's `traceback_filtering` option as a context manager that sets it
    for the calling thread only (a `State` of `jax._src.config`, on JAX 0.10
    to 0.12), or None where this JAX has no such thing."""
    try:
        from jax._src import config as jax_config
    except ImportError:  # pragma: no cover - a JAX without the private module
        return None
    state = getattr(jax_config, "traceback_filtering", None)
    if state is None or not callable(state) or not hasattr(state, "value"):
        return None
    return state  # type: ignore[no-any-return]


_FILTERING = _thread_local_filtering()


@contextlib.contextmanager
def unfiltered_tracebacks() -> Iterator[None]:
    """JAX's frames kept in tracebacks: whether JAX raised an error is read
    from its innermost frame (JAX's filtering would leave the user's).

    In the calling thread only: another thread running JAX meanwhile keeps
    its filtered tracebacks. On a JAX without a thread-local form of the
    option, it is set process-wide for the duration."""
    if _FILTERING is not None:
        with _FILTERING("off"):
            yield
        return
    config: Any = jax.config
    before = config.jax_traceback_filtering
    config.update("jax_traceback_filtering", "off")
    try:
        yield
    finally:
        config.update("jax_traceback_filtering", before)


def def_line(fun: Any, first: int) -> int:
    """The line of the `def` (the code's first line is its first decorator's)."""
    try:
        lines, start = inspect.getsourcelines(fun)
    except (OSError, TypeError):
        return first
    for offset, text in enumerate(lines):
        if re.match(r"\s*(async\s+)?def\s", text):
            return start + offset
    return start


def shown(file: str) -> str:
    """A file as mypy shows it: relative to the working directory if under it."""
    try:
        return os.path.relpath(file)
    except ValueError:  # another drive (Windows)
        return file


def code_file(fun: Any) -> str:
    """The file a function's code was compiled from, or `""`."""
    code = getattr(inspect.unwrap(fun), "__code__", None)
    return code.co_filename if code else ""


#: A frame of the user's code or a library's: file, qualified name, line.
Frame = tuple[str, str, int]


def frames_of(error: BaseException) -> list[Frame]:
    """Where an error was raised, outermost frame first: the frames it
    carries (a reshape read from the traced program, `reshapes.py`), else
    its traceback's."""
    carried = getattr(error, "frames", None)
    if isinstance(carried, list):
        return carried
    return [
        (frame.f_code.co_filename, frame.f_code.co_qualname, line)
        for frame, line in traceback.walk_tb(error.__traceback__)
    ]


def user_line(
    frames: list[Frame], own: str, fallback: tuple[str, int]
) -> tuple[str, int]:
    """The innermost frame of the user's code (`own`, the checked function's
    file, always counts as the user's), as `(file shown, line)`; `fallback`
    when there is none."""
    found = fallback
    for file, _, line in frames:
        if not is_library(file, own):
            found = (shown(file), line)
    return found


def called_at(frames: list[Frame], fun: Any, line: int) -> int | None:
    """The line of `fun`'s own body (the checked function) that led to an
    error found at `line` elsewhere (inside a helper or a module it calls);
    None when the error is in its body or `fun` is not among the frames."""
    code = getattr(inspect.unwrap(fun), "__code__", None)
    if code is None:
        return None
    found = None
    for file, name, at in frames:
        if file == code.co_filename and name == code.co_qualname:
            found = at
    return None if found in (None, line) else found


@dataclasses.dataclass
class Ran:
    """What of a function's own body ran: its `lines`, the `last`, the
    `return` it left by (`returned`), and the line an error that left it was
    raised at (or came in through: a call of a helper)."""

    lines: set[int] = dataclasses.field(default_factory=set)
    last: int | None = None
    returned: int | None = None
    raised: int | None = None

    def failed_at(self) -> int | None:
        """The line of the body that led to a failure."""
        return self.raised if self.raised is not None else self.last


@contextlib.contextmanager
def lines_run(fun: Any) -> Iterator[Ran]:
    """What of `fun`'s own body runs inside the block, in the calling
    thread: a tracer that follows `fun`'s frames only, whatever a nested
    `jit` caches (a debugger's or coverage's tracer is set back after)."""
    code = getattr(inspect.unwrap(fun), "__code__", None)
    ran = Ran()
    raised: list[tuple[int, int]] = []  # (line, the error's id), in order

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            ran.lines.add(frame.f_lineno)
            ran.last = frame.f_lineno
        elif event == "exception":  # again at a `with` line as it leaves
            raised.append((frame.f_lineno, id(arg[1])))
        elif event == "return":
            ran.returned = frame.f_lineno
        return local

    def calls(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code is code else None

    before = sys.gettrace()
    sys.settrace(calls)
    try:
        yield ran
    finally:
        sys.settrace(before)
        if raised:  # where the error that left it came in first
            ran.raised = next(line for line, e in raised if e == raised[-1][1])


def raised_by_a_library(tb: TracebackType | None, own: str = "") -> bool:
    """Whether the innermost frame of a traceback is JAX's (or jaxlib's), or
    an installed library's (a check of Equinox's, opt_einsum's) that the
    user's code called: a refusal of the shapes it was given, as JAX's own.
    The checked function's own file (`own`) is the user's wherever it lies."""
    last = None
    for frame, _ in traceback.walk_tb(tb):
        last = frame.f_code.co_filename
    return last is not None and library_raised(last, own)


def is_abstract(leaf: Any) -> bool:
    """Whether a leaf of the arguments built is an abstract array (traced)."""
    return isinstance(leaf, jax.ShapeDtypeStruct)
