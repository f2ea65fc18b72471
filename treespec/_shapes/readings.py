"""A failure's message at concrete witness sizes, read back in the user's
dimension names (`143` at `b=11, n=13` is `b*n`); the sizes an einsum's
message pairs by label; an assignment of sizes shown for a message, less
the sizes a relation set; and the note of the values a check assumed."""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Collection, Mapping
from typing import Any

__all__ = [
    "assumptions_text",
    "by_names",
    "OwnPath",
    "shown",
    "unsaid",
]


#: An array's dtype just before its shape's `[`: `float32[`, `bool[`.
_DTYPE = re.compile(r"\b(?:bool|(?:b?float|u?int|complex)\d+)\[$")


#: What an index of a key path follows (`blocks[11]`, `x['a'][11]`), where a
#: shape written as a list does not (`shape=[11]`).
_INDEXED = re.compile(r"[\w\])'\"]\[$")


def by_names(text: str, sizes: Mapping[str, int]) -> str:
    """`text` with each witness size written as its dimension's name, and a
    product of two of them, twice or three times one, or a half, third or
    quarter of one (at least `_SMALLEST_PART`), as that expression of names
    (`143` at `b=11, n=13` is `b*n`; `22` is `2*b`; `18` at `g=72` is
    `g // 4`): distinct odd primes factor one way only; a number with two
    readings (at chain witnesses 36 is `3*d` and `b // 2`) stays a number,
    and a line number, a count of problems and a key path's index stay
    one."""
    names = {size: name for name, size in sizes.items()}
    readings: dict[int, set[str]] = {}
    pairs = itertools.combinations_with_replacement(sizes.items(), 2)
    for (first, one), (second, other) in pairs:
        readings.setdefault(one * other, set()).add(f"{first}*{second}")
    for name, size in sizes.items():
        for times in (2, 3):  # a fused projection's `3*d`
            readings.setdefault(times * size, set()).add(f"{times}*{name}")
        for part in (2, 3, 4):  # a part of one (`g // 4`: an LSTM's gate)
            if size % part == 0 and size // part >= _SMALLEST_PART:
                readings.setdefault(size // part, set()).add(f"{name} // {part}")
    for size, read in readings.items():  # one reading only (at a chain
        if len(read) == 1:  # witness 144 is both kv*kv and 2*h)
            names.setdefault(size, read.pop())

    def named(match: re.Match[str]) -> str:
        number, after = match.group(0), text[match.end() :]
        before = text[: match.start()]
        if after.startswith(" problem") or (
            after.startswith("]")
            and _INDEXED.search(before)
            and not _DTYPE.search(before)
        ):  # a count, or an index of a key path (`blocks[11]`): no size
            return number
        return names.get(int(number), number)

    # A size a leaf bound a name to (`with d=19 bound by w`) is one, and
    # the count `top_k` asks for.
    text = _BOUND_AT.sub(lambda m: m[1] + names.get(int(m[2]), m[2]), text)
    # A line number (`called at line 22`) is never a size.
    return re.sub(r"(?<![\w.=])(?<!\bline )\d+(?!\w|\.\d)", named, text)


#: The smallest part of a size read as one (below, a literal: an axis, a
#: kernel's width).
_SMALLEST_PART = 10
#: A `ValidationError`'s binding at a concrete size: `with d=19 bound by`.
#: And the count `top_k` asks for (`got k=19 with shape=[e, t]`).
_BOUND_AT = re.compile(r"(with \w+=|\bgot k=)(\d+)(?= bound by| with shape)")


def shown(sizes: Mapping[str, Any]) -> str:
    """`t=11, s=13`: an assignment, for a message."""
    return ", ".join(f"{name}={size}" for name, size in sizes.items())


def unsaid(found: Any, solved: Collection[str]) -> Any:
    """`found` (a finding, or a run's output) with the `solved` sizes left
    out of the assignments its message shows (`found at concrete sizes
    in_size=11, b=17`): the run set them as their relations say, so the
    witness sizes they were drawn at are not those it used."""
    message = getattr(found, "message", None)
    if not solved or not isinstance(message, str):
        return found
    for name in solved:
        at = rf"(?<![\w.'\[]){re.escape(name)}=-?\d+"
        message = re.sub(rf"{at}, |, {at}(?=[:;) ]|$)", "", message)
    return dataclasses.replace(found, message=message)


class OwnPath(str):
    """The key path of a static leaf of the checked function itself (`k`,
    `cfg['heads']`, `cfg.heads`) taken by assumption: said "checked with",
    where a constructor's argument (`model.num_heads`) is "built from its
    constructor with". A `str`, so it is the key of the values assumed."""

    __slots__ = ()


def assumptions_text(assumed: Mapping[str, Any], function: str) -> str:
    """The note for the values taken by assumption: a constructor's
    arguments (`model.num_heads`), the function's own static leaves (`k`,
    `cfg['heads']`: their paths are `OwnPath`s)."""
    why = {
        "counts": f"no dimension of {function} is named so",
        "rates": "a float, never a size",
        "switches": "a switch, its False side",
        "modes": "a mode, its first value",
    }
    own: dict[str, Any] = {w: v for w, v in assumed.items() if isinstance(w, OwnPath)}
    built = {w: v for w, v in assumed.items() if w not in own}
    said = [
        f"{how} with {_by_kind(values, why)}"
        for how, values in (("built from its constructor", built), ("checked", own))
        if values
    ]
    params = dict.fromkeys(re.split(r"[.\[]", where)[0] for where in assumed)
    give = ", ".join(f"{param}=..." for param in params)
    return f"{'; '.join(said)}; give another value: check_shapes({function}, {give})"


def _by_kind(assumed: Mapping[str, Any], why: Mapping[str, str]) -> str:
    """`heads=1 (no dimension ...), rate=1.0 (a float, never a size)`."""
    kinds = {int: "counts", tuple: "counts", float: "rates", bool: "switches"}
    by_kind: dict[str, list[str]] = {}
    for where, value in assumed.items():
        kind = kinds.get(type(value), "modes" if type(value) is str else "counts")
        by_kind.setdefault(kind, []).append(f"{where}={value!r}")
    return ", ".join(f"{', '.join(by_kind[k])} ({why[k]})" for k in why if k in by_kind)
