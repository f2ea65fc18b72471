"""Multi-process jobs: every process must trace the same program.

Under `jax.distributed`, each process traces and compiles its own copy of a
program, and JAX runs them together without checking that they are the same.
A static leaf that differs between processes makes each process compile a
different program, and the mix runs without a word (wrong numbers, or a hang).

`ProcessCheck.check` runs once per trace (a compile-cache miss, from
`Jitted._traced`), so a cache hit costs nothing. Under more than one process it
publishes a digest of the trace's key through the distributed client's
key-value store and reads every other process's digest for the same trace:

- the digests differ: every process raises a `ValidationError` naming the leaf
  paths that differ and each process's value;
- a process does not publish within the timeout (its call hit its compile
  cache, so it did not trace; or it is elsewhere): the waiting process raises,
  naming the processes missing and its own static leaf values, and leaves a
  note in the store that every later trace on any process reports.

The key of one trace is described without anything that changes between
processes (no `hash()`, no memory addresses): each leaf path with its kind, a
static leaf's type (`module.qualname`) and stable text, a traced leaf's dtype
and shape. The digest is the sha256 of that sorted description.

With one process (no distributed client), `check` returns at once: no check.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar

from ..._model.errors import Issue, ValidationError, location
from .key_text import Leaf, describe_key, digest, full_name, leaf_hash
from .plan import CallView

__all__ = [
    "CHECK_ENV",
    "DEFAULT_TIMEOUT",
    "TIMEOUT_ENV",
    "ProcessCheck",
    "check_enabled",
    "log_prefix",
    "process_timeout",
]

#: `TREESPEC_CHECK_PROCESSES=0` turns the check off where `jit` is not told.
CHECK_ENV = "TREESPEC_CHECK_PROCESSES"
#: Seconds a tracing process waits for the others (overrides `timeout`).
TIMEOUT_ENV = "TREESPEC_PROCESS_TIMEOUT"
DEFAULT_TIMEOUT = 60.0

#: The module-level default wait, in seconds; `TREESPEC_PROCESS_TIMEOUT` wins
#: over it (tests set it; users set the environment variable).
timeout: float = DEFAULT_TIMEOUT

#: Where a process that waited in vain leaves its message.
_MISSED = "treespec/missed/"
#: Text of a leaf kept in a published description (the digest covers it all).
_SHOWN = 200
_OFF = ("0", "false", "no", "off")


def check_enabled(option: bool | None) -> bool:
    """`jit`'s `check_processes`: given, or on unless `TREESPEC_CHECK_PROCESSES=0`."""
    if option is not None:
        return option
    return os.environ.get(CHECK_ENV, "1").strip().lower() not in _OFF


def process_timeout() -> float:
    """Seconds to wait for the other processes: the environment, else `timeout`."""
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    if text:
        try:
            return max(0.0, float(text))
        except ValueError:
            raise ValueError(
                f"{TIMEOUT_ENV}={text!r}: expected a number of seconds"
            ) from None
    return timeout


def _client() -> tuple[Any, int, int] | None:
    """`(client, process index, process count)` under several processes, else None."""
    try:
        from jax._src import distributed
    except ImportError:  # pragma: no cover - a JAX without it has no client
        return None
    state = distributed.global_state
    client = state.client
    count = state.num_processes or 1
    if client is None or count <= 1:
        return None
    return client, int(state.process_id), int(count)


def log_prefix() -> str:
    """`process 1: ` in a multi-process job (for log lines), else nothing."""
    found = _client()
    return "" if found is None else f"process {found[1]}: "


def _payload(leaves: Sequence[Leaf]) -> str:
    """What one process publishes for one trace: the digest, and for messages
    each leaf's (shortened) description and a hash of the whole of it."""
    return json.dumps(
        {
            "digest": digest(leaves),
            "leaves": [
                [x.path, x.argument, x.kind, x.type, x.text[:_SHOWN], leaf_hash(x)]
                for x in leaves
            ],
        }
    )


def _processes(indices: Iterable[int]) -> str:
    ordered = sorted(indices)
    if len(ordered) == 1:
        return f"process {ordered[0]}"
    return "processes " + ", ".join(map(str, ordered))


def _shown(entry: list[Any], with_type: bool) -> str:
    _, _, kind, type_name, text, _ = entry
    if kind != "static":
        return f"{kind} {text}"
    if with_type:
        return f"{text} ({type_name.rsplit('.', 1)[-1]})"
    return str(text)


def differences(published: dict[int, str]) -> list[Issue]:
    """The leaves whose descriptions differ between the processes' payloads."""
    tables = {
        p: {e[0]: e for e in json.loads(text)["leaves"]}
        for p, text in published.items()
    }
    paths = sorted({path for table in tables.values() for path in table})
    issues = []
    for path in paths:
        seen: dict[str, list[int]] = {}  # leaf hash -> processes
        entries: dict[str, list[Any]] = {}
        absent = []
        for p, table in sorted(tables.items()):
            entry = table.get(path)
            if entry is None:
                absent.append(p)
                continue
            seen.setdefault(entry[5], []).append(p)
            entries.setdefault(entry[5], entry)
        if len(seen) <= 1 and not absent:
            continue
        some = next(iter(entries.values()))
        with_type = len({e[4] for e in entries.values()}) < len(entries)
        parts = [
            f"{_shown(entries[h], with_type)} on {_processes(ps)}"
            for h, ps in seen.items()
        ]
        if absent:
            parts.append(f"no such leaf on {_processes(absent)}")
        static = any(e[2] == "static" for e in entries.values())
        issues.append(
            Issue(
                location(some[1], path),
                "the same "
                + ("static value" if static else "leaf")
                + " on every process (each process traces its own program)",
                ", ".join(parts),
                "make the value agree between processes, or hold it "
                "Dynamic[...] (traced) if it may differ"
                if static
                else "make every process pass the same tree structure, kinds, "
                "shapes and dtypes",
            )
        )
    return issues


class ProcessCheck:
    """The cross-process check of one jitted function (see the module docstring)."""

    _counts: ClassVar[dict[str, int]] = {}
    _counts_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, fun: Callable[..., Any]) -> None:
        #: Names the keys in the store; with the trace number, unique per trace.
        self.name = full_name(fun)

    def _next_trace(self) -> int:
        # Counted per name, not per wrapper: two wrappers of one function (or
        # two lambdas) never publish under the same key.
        with self._counts_lock:
            count = self._counts.get(self.name, 0) + 1
            self._counts[self.name] = count
            return count

    def check(self, view: CallView) -> None:
        """Compare this trace's key with every other process's; raise if they differ."""
        found = _client()
        if found is None:
            return
        client, me, count = found
        k = self._next_trace()
        what = f"{self.name} (trace #{k} on each process)"
        self._earlier_misses(client, me, what)
        leaves = describe_key(view)
        mine = _payload(leaves)
        prefix = f"treespec/{self.name}/{k}/"
        client.key_value_set(prefix + str(me), mine, allow_overwrite=True)
        wait = process_timeout()
        deadline = time.monotonic() + wait
        published = {me: mine}
        missing = []
        for other in range(count):
            if other == me:
                continue
            left_ms = max(1, int((deadline - time.monotonic()) * 1000))
            try:
                published[other] = client.blocking_key_value_get(
                    prefix + str(other), left_ms
                )
            except Exception as error:  # JaxRuntimeError, by its status text
                if "DEADLINE_EXCEEDED" not in str(error):
                    raise
                missing.append(other)
        if missing:
            failure = self._missing(what, me, missing, wait, leaves)
            note = f"{what}: {failure.issues[0].got}"
            client.key_value_set(_MISSED + str(me), note, allow_overwrite=True)
            raise failure
        digests = {json.loads(text)["digest"] for text in published.values()}
        if len(digests) > 1:
            raise ValidationError(
                differences(published),
                f"{what}: the processes traced different programs",
            )

    def _missing(
        self,
        what: str,
        me: int,
        missing: list[int],
        wait: float,
        leaves: Sequence[Leaf],
    ) -> ValidationError:
        static = [x for x in leaves if x.kind == "static"]
        values = "; ".join(f"{x.path}={x.text[:_SHOWN]}" for x in static) or "none"
        return ValidationError(
            [
                Issue(
                    "the other processes",
                    f"{_processes(missing)} to trace the same call within "
                    f"{wait:g} s ({TIMEOUT_ENV})",
                    f"no answer from {_processes(missing)} (this is process {me}; "
                    f"its static leaves: {values})",
                    "a process whose call hit its compile cache does not trace: its "
                    "static values are those of an earlier trace, not these. Make "
                    "the static values agree between processes, or hold the one "
                    "that differs Dynamic[...]",
                )
            ],
            f"{what}: not every process traced it",
        )

    def _earlier_misses(self, client: Any, me: int, what: str) -> None:
        """Raise if a process waited in vain before: the traces no longer line up."""
        try:
            notes = client.key_value_dir_get(_MISSED)
        except Exception:  # pragma: no cover - nothing to report
            return
        for key, text in notes:
            other = key.rsplit("/", 1)[-1]
            who = "this process" if other == str(me) else f"process {other}"
            raise ValidationError(
                [
                    Issue(
                        "the other processes",
                        "every process to have traced the same calls so far",
                        f"{who} waited in vain for the others at {text}",
                        f"the processes' static values differed at an earlier call "
                        f"(see {who}'s error), so their traces no longer line up: "
                        "fix that and restart the job",
                    )
                ],
                f"{what}: an earlier check failed",
            )
