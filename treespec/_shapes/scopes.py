"""Where a dimension name binds in a shape check: the call's one scope, or an
instance's own, as at run time (`_runtime/checking/scopes.scopes_of`).

At run time a class the call holds several times (an MLP's list of `Linear`s,
two arguments of one class) binds its fields' names per instance. The check
builds its arguments from annotations, so it decides by the same rule from
what it builds: a class built as the item of a sequence of any length
(`list[Linear]`, `tuple[Block, ...]`, `*args`), which holds several at run
time, or built more than once in one call. Each such instance's names become
names of its own (`in__1`), unknowns the check solves from what the code
needs of them (`check.py`), never sizes that can make an error alone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections import Counter
from collections.abc import Iterator

__all__ = ["SCOPED", "InstanceScopes"]

#: A name of an instance's own scope: the field's name, `__`, the instance.
SCOPED = re.compile(r"\b([A-Za-z][A-Za-z0-9_]*?)__(\d+)\b")


@dataclasses.dataclass
class InstanceScopes:
    """The scopes of one build of a call's arguments.

    `several`: the classes that bind per instance (found by a first build,
    `counts`). While an instance of one is built, `rename` gives its names.
    """

    several: frozenset[type] = frozenset()
    counts: Counter[type] = dataclasses.field(default_factory=Counter)
    #: The path of each instance's scope, by its number (for messages).
    paths: dict[int, str] = dataclasses.field(default_factory=dict)
    _stack: list[int | None] = dataclasses.field(default_factory=list)
    _any_length: int = 0

    def enter(self, cls: type, path: str) -> None:
        """An instance of `cls` at `path` is built next."""
        self.counts[cls] += 2 if self._any_length else 1
        if cls in self.several:
            number = len(self.paths) + 1
            self.paths[number] = path
            self._stack.append(number)
        else:
            self._stack.append(None)

    def leave(self) -> None:
        self._stack.pop()

    @contextlib.contextmanager
    def any_length(self) -> Iterator[None]:
        """While the one item built for a sequence of any length (which holds
        several at run time) is built."""
        self._any_length += 1
        try:
            yield
        finally:
            self._any_length -= 1

    def rename(self, name: str) -> str:
        """`name` in the scope of the instance being built."""
        number = self._stack[-1] if self._stack else None
        if number is None or name.startswith("_"):
            return name
        return f"{name}__{number}"

    def found(self) -> frozenset[type]:
        """The classes a first build found held several times."""
        return frozenset(cls for cls, n in self.counts.items() if n > 1)

    def readable(self, text: str) -> str:
        """`text` with each instance's name written as the user reads it:
        `in__1` as `in of model.layers[0]`."""

        def one(match: re.Match[str]) -> str:
            path = self.paths.get(int(match.group(2)))
            return match.group(0) if path is None else f"{match.group(1)} of {path}"

        return SCOPED.sub(one, text)
