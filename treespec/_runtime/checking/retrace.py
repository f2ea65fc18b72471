"""Explaining a retrace: which leaves changed between two traces, and how."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import re
from collections.abc import Iterator, Sequence
from contextvars import ContextVar

import jax
from jax.tree_util import keystr

from ..._model.errors import location
from ..planning.plan import CallView, Kind
from ..planning.processes import log_prefix
from .diagnose import aval

__all__ = [
    "MAX_TRACES_KEPT",
    "RETRACE_WARNING_AFTER",
    "ScalarWatch",
    "Seen",
    "TraceHistory",
    "describe_retrace",
    "describe_view",
    "explain_enabled",
    "log_retrace",
    "nearest",
    "checking_shapes",
    "retraces_unsaid",
]

logger = logging.getLogger("treespec")

#: Traces whose leaves a function keeps to explain the next retrace against.
MAX_TRACES_KEPT = 256

_TOKEN = re.compile(r"\[[^\]]*\]|\.\w+|^[^\[.]+")


def _common_prefix(paths: list[str]) -> str:
    """The deepest key path that every one of `paths` starts with."""
    split = [_TOKEN.findall(p) for p in paths]
    common: list[str] = []
    for tokens in zip(*split):
        if any(t != tokens[0] for t in tokens):
            break
        common.append(tokens[0])
    return "".join(common) or "the top level"


@dataclasses.dataclass(frozen=True)
class Seen:
    """One leaf of one trace: its value (and type) or dtype[shape] (and weak
    type), and, for a traced leaf, its sharding as the trace sees it."""

    text: str
    sharding: str = ""


def describe_retrace(old: dict[str, Seen], new: dict[str, Seen]) -> list[str]:
    """What changed between two traces, one phrase per changed leaf."""
    changes = []
    if old.keys() != new.keys():
        moved = sorted(set(old) ^ set(new))
        changes.append(f"structure changed at {_common_prefix(moved)}")
    for path in new:
        if path not in old or old[path] == new[path]:
            continue
        before, now = old[path], new[path]
        if before.text != now.text:
            changes.append(f"{path}: {before.text} -> {now.text}")
        else:
            changes.append(f"{path}: sharding {before.sharding} -> {now.sharding}")
    return changes or [
        "no leaf changed that a trace can see: not a new value, but JAX needed "
        "a new cache entry (the device placement of an argument, a JAX "
        "setting, or JAX's caches emptied by jax.clear_caches())"
    ]


def _differing(old: dict[str, Seen], new: dict[str, Seen]) -> int:
    """How many leaves differ between two traces (one only in either counts)."""
    return len(old.keys() ^ new.keys()) + sum(
        1 for path, seen in new.items() if path in old and old[path] != seen
    )


def nearest(
    traces: Sequence[dict[str, Seen]], new: dict[str, Seen]
) -> dict[str, Seen] | None:
    """The trace closest to `new` (fewest differing leaves; the latest of
    equally close ones), or `None` when there is none."""
    best: dict[str, Seen] | None = None
    fewest = -1
    for old in reversed(traces):
        n = _differing(old, new)
        if best is None or n < fewest:
            best, fewest = old, n
            if n == 0:
                break  # the same leaves: JAX's own reason to trace again
    return best


def describe_view(view: CallView) -> dict[str, Seen]:
    """`{leaf path: what the trace saw of it}` of one trace, the fields that
    classes keep in their tree structure included."""
    described: dict[str, Seen] = {}
    for param, value, _ in view.whole:
        for path, leaf in jax.tree_util.tree_flatten_with_path(value)[0]:
            described[param.name + keystr(path)] = _traced(leaf)
    for info, kind, leaf in view.pairs:
        if kind is Kind.STATIC:
            described[info.path] = _static(leaf)
        else:
            described[info.path] = _traced(leaf)
    for held in view.held:  # a class's static field, named as a leaf is
        described[held.path] = _static(held.value)
    return described


def _static(value: object) -> Seen:
    return Seen(f"{value!r} ({type(value).__name__})")


def _traced(leaf: object) -> Seen:
    """A traced leaf as the trace sees it: its aval (a tracer's), weak type and
    sharding included, for those change the program too."""
    shaped = getattr(leaf, "aval", leaf)
    text = aval(leaf)
    if getattr(shaped, "weak_type", False):
        text += " (weak type)"
    return Seen(text, _sharding(getattr(shaped, "sharding", None)))


def _sharding(sharding: object) -> str:
    """`NamedSharding(P('data'), mesh data=4 model=2)`: a sharding, short."""
    if sharding is None:
        return ""
    spec = getattr(sharding, "spec", None)
    mesh = getattr(sharding, "mesh", None)
    names = tuple(getattr(mesh, "axis_names", ()) or ())
    sizes = tuple(getattr(mesh, "axis_sizes", ()) or ())
    if spec is None:
        return repr(sharding)
    where = " ".join(f"{n}={s}" for n, s in zip(names, sizes)) or "none"
    # `P(...)` whatever JAX's own repr (`PartitionSpec(...)` before 0.9).
    try:
        shown = f"P{tuple(spec)!r}"
    except TypeError:  # not a PartitionSpec
        shown = repr(spec)
    return f"{type(sharding).__name__}({shown}, mesh {where})"


class TraceHistory:
    """The traces of one function that completed: how many, and what the latest
    `MAX_TRACES_KEPT` of them saw, to explain a retrace against the nearest.

    Not locked: the owner holds its own lock around `completed` and `clear`.
    """

    def __init__(self) -> None:
        #: Traces that completed (a trace that raised is never recorded).
        self.count = 0
        self._kept: list[dict[str, Seen]] = []

    def completed(self, now: dict[str, Seen]) -> dict[str, Seen] | None:
        """Record a trace that completed; return the kept trace nearest to it
        (`None` for the first), which explains why it traced."""
        self.count += 1
        before = nearest(self._kept, now)
        self._kept.append(now)
        if len(self._kept) > MAX_TRACES_KEPT:
            del self._kept[0]
        return before

    def clear(self) -> None:
        """Forget what past traces saw (the count stays: it counts them all)."""
        self._kept.clear()


def explain_enabled(explain_recompiles: bool) -> bool:
    """Whether a transform logs its retraces: asked for, or
    `TREESPEC_EXPLAIN_RECOMPILES` set (to anything but `0` or empty)."""
    env = os.environ.get("TREESPEC_EXPLAIN_RECOMPILES", "0") not in ("", "0")
    return explain_recompiles or env


def log_retrace(prefix: str, transform: str, name: str, count: int, why: str) -> None:
    """The retrace line on logger `treespec`: which transform of which function
    traced again, its trace number, and why."""
    logger.warning(
        "%streespec.%s: retracing %s (trace #%d): %s",
        prefix,
        transform,
        name,
        count,
        why,
    )


#: Retraces caused by one unmarked Python scalar before the warning comes.
RETRACE_WARNING_AFTER = 5


def retrace_warnings_enabled() -> bool:
    """Whether the retrace-storm warning is on (`TREESPEC_RETRACE_WARNING=0`: off)."""
    return os.environ.get("TREESPEC_RETRACE_WARNING", "1") not in ("", "0")


#: Whether this thread traces for the shape check (`retraces_unsaid`).
_UNSAID: ContextVar[bool] = ContextVar("retraces_unsaid", default=False)


def checking_shapes() -> bool:
    """Whether this thread traces for the shape check (`retraces_unsaid`)."""
    return _UNSAID.get()


@contextlib.contextmanager
def retraces_unsaid() -> Iterator[None]:
    """While the shape check runs (in this thread only): its own traces of a
    nested function, one per witness size, in the body or in a constructor,
    are no retrace of the user's program and compile nothing, so they are
    neither counted (`trace_count`), nor kept to explain a later retrace
    against, nor warned or logged of."""
    token = _UNSAID.set(True)
    try:
        yield
    finally:
        _UNSAID.reset(token)


class ScalarWatch:
    """Warns once per function when unmarked Python scalars, held static by
    the 'infer' default, keep forcing new traces."""

    def __init__(self) -> None:
        #: Retraces each unmarked Python scalar caused, by leaf path.
        self.changes: dict[str, int] = {}
        #: Whether the warning came (once per function).
        self.warned = False

    def clear(self) -> None:
        self.changes.clear()
        self.warned = False

    def seen(
        self,
        name: str,
        count: int,
        view: CallView,
        before: dict[str, Seen],
        now: dict[str, Seen],
    ) -> None:
        """A retrace of function `name` (its `count`-th trace) from `before`
        to `now`: count the unmarked scalars that changed, warn past the
        threshold."""
        if self.warned:
            return
        for info, kind, leaf in view.pairs:
            if (
                kind is not Kind.STATIC
                or not info.source.startswith("default 'infer'")
                or type(leaf) not in (int, float, complex)
                or before.get(info.path, now[info.path]) == now[info.path]
            ):
                continue
            changes = self.changes.get(info.path, 0) + 1
            self.changes[info.path] = changes
            if changes >= RETRACE_WARNING_AFTER and retrace_warnings_enabled():
                self.warned = True
                logger.warning(
                    "%streespec.jit: %s traced %d times, each time for a new value "
                    "of the unmarked Python %s at %s (now %r), which the 'infer' "
                    "default holds static: every new value compiles anew. Mark "
                    "it Dynamic[%s] (or give it static_flags=False) to trace it "
                    "instead. (This warning comes once per function; silence it "
                    "with TREESPEC_RETRACE_WARNING=0 or the 'treespec' logger.)",
                    log_prefix(),
                    name,
                    count,
                    type(leaf).__name__,
                    location(info.argument, info.path),
                    leaf,
                    type(leaf).__name__,
                )
                return
