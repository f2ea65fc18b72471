"""Explicit flag trees (`static_flags`), shaped like `vmap`'s `in_axes`.

An entry is `True` (static), `False` (traced), `None` (no say: markers and the
default decide), a callable `leaf -> bool` (True = static), or a container of
entries that is a prefix of the argument: a dict by key or field name, a
list/tuple by position, or an object with one attribute per field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..._model.errors import SpecError, a_type, plural
from ..._model.spec import Spec
from .classes import is_class_backed

__all__ = [
    "FlagEntry",
    "Flags",
    "flag_child",
    "flag_kind",
    "normalize_flags",
    "prefix_child",
]

FlagEntry = Any


def flag_kind(entry: FlagEntry) -> str:
    """One of "none", "bool", "callable", "mapping", "sequence", "object"."""
    if entry is None:
        return "none"
    if isinstance(entry, (bool, np.bool_)):
        return "bool"
    if isinstance(entry, Mapping):
        return "mapping"
    if isinstance(entry, (list, tuple)) and not hasattr(entry, "_fields"):
        return "sequence"
    if callable(entry) and not isinstance(entry, type):
        # A module with `__call__` is a flag tree over its fields when its
        # class is one treespec follows (what `flag_tree` returns for an
        # Equinox or NNX model), not a predicate.
        return "object" if is_class_backed(type(entry)) else "callable"
    return "object"


def prefix_child(
    prefix: Any, index: int, names: list[Any], where: str, what: str
) -> Any:
    """The entry of a prefix tree (a container) for the `index`-th child.

    `names` are the children's names or indices (`key_name`); `prefix` is a
    mapping by name, a list/tuple by position, or an object (a NamedTuple
    too) with one attribute per named child. `what` names the tree in
    messages ("a flag tree", ...).
    """
    name = names[index]
    if isinstance(prefix, Mapping):
        unknown = [k for k in prefix if k not in names]
        if unknown:
            raise SpecError(
                f"{where} has keys {unknown!r} that the argument does not have "
                f"(it has {names!r}); {what} must be a prefix of the argument's "
                "structure."
            )
        return prefix.get(name)
    if isinstance(prefix, (list, tuple)) and not hasattr(prefix, "_fields"):
        if len(prefix) != len(names):
            raise SpecError(
                f"{where} has {len(prefix)} entries but the argument there has "
                f"{len(names)} children; {what} must be a prefix of the argument's "
                "structure."
            )
        return prefix[index]
    if isinstance(name, str) and hasattr(prefix, name):
        return getattr(prefix, name)
    raise SpecError(
        f"{where} is {a_type(prefix)}, which has no entry for {name!r}; "
        "give one entry for the whole subtree, or a dict/list/tuple shaped like "
        "the argument."
    )


def flag_child(
    entry: FlagEntry, index: int, sibling_names: list[Any], where: str
) -> FlagEntry:
    """The flag that applies to the `index`-th child of a node."""
    if flag_kind(entry) in ("none", "bool", "callable"):
        return entry
    return prefix_child(entry, index, sibling_names, where, "a flag tree")


@dataclass(frozen=True)
class Flags:
    """`static_flags` normalized against a signature, once per function."""

    by_name: Mapping[str, FlagEntry] = field(default_factory=dict)
    source: Mapping[str, str] = field(default_factory=dict)


def normalize_flags(static_flags: Any, spec: Spec) -> Flags:
    """Check `static_flags` against the signature and key it by parameter name."""
    if static_flags is None:
        return Flags()
    kind = flag_kind(static_flags)
    names = [p.name for p in spec.params]
    if kind in ("bool", "callable"):
        return Flags(
            by_name={n: static_flags for n in names},
            source={n: "static_flags" for n in names},
        )
    if kind == "sequence":
        # One entry per positional parameter, `*args` being one (its entry
        # covers every extra argument, as a dict entry by its name does).
        listed = list(spec.positional)
        if spec.var_positional is not None:
            listed.append(spec.var_positional)
        n = len(static_flags)
        if not len(spec.positional) <= n <= len(listed):
            raise SpecError(_sequence_length_message(n, spec, static_flags))
        by_name: dict[str, FlagEntry] = {}
        source: dict[str, str] = {}
        for i, entry in enumerate(static_flags):
            by_name[listed[i].name] = entry
            source[listed[i].name] = f"static_flags[{i}]"
        return Flags(by_name=by_name, source=source)
    if kind == "mapping":
        unknown = [k for k in static_flags if k not in names]
        if unknown:
            raise SpecError(
                f"static_flags names {unknown!r}, which {spec.name} does not take; "
                f"its parameters are {names!r}."
            )
        return Flags(
            by_name=dict(static_flags),
            source={k: f"static_flags[{k!r}]" for k in static_flags},
        )
    raise SpecError(
        f"static_flags must be True/False, a callable, a list/tuple with one entry "
        f"per positional parameter, or a dict keyed by parameter name; got "
        f"{type(static_flags).__name__}."
    )


def _sequence_length_message(n: int, spec: Spec, entries: Any) -> str:
    """Why a `static_flags` list does not line up with the positional parameters."""
    positional = spec.positional
    names = ", ".join(p.name for p in positional) or "none"
    var = spec.var_positional
    if var is not None and n > len(positional):
        # Entries for the extra arguments one by one: the spelling that works
        # nests them in the one entry `*args` has (the dict form's meaning).
        listed = ", ".join([*(p.name for p in positional), f"*{var.name}"])
        head = [repr(e) for e in entries[: len(positional)]]
        tail = list(entries[len(positional) :])
        nested = f"[{', '.join([*head, repr(tail)])}]"
        return (
            f"static_flags has {plural(n, 'entry')} but {spec.name} takes "
            f"{listed}: a list gives one entry per parameter, and the entry of "
            f"*{var.name} covers every extra argument (as "
            f"static_flags={{{var.name!r}: ...}} does). To flag the extra "
            f"arguments one by one, nest them: static_flags={nested}, or "
            f"static_flags={{{var.name!r}: {tail!r}}}."
        )
    takes = f"{spec.name} takes {plural(len(positional), 'positional parameter')}"
    if var is not None:
        takes += f" ({names}) before *{var.name}"
    else:
        takes += f" ({names})"
    text = f"static_flags has {plural(n, 'entry')} but {takes}. "
    if n < len(positional):
        missing = ", ".join(p.name for p in positional[n:])
        text += (
            f"A list gives one entry per positional parameter, and {missing} "
            "would have none: add an entry for each (None lets the hints "
            "decide), or, to leave some parameters to their hints, give a dict "
            f"by name, e.g. static_flags={{{positional[0].name!r}: ...}}."
        )
    else:
        text += "Give one entry per positional parameter, or a dict keyed by name."
    return text
