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
from jax.tree_util import DictKey, FlattenedIndexKey, GetAttrKey, SequenceKey

from ._errors import SpecError
from ._spec import Spec

__all__ = ["FlagEntry", "Flags", "flag_child", "flag_kind", "normalize_flags"]

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
        return "callable"
    return "object"


def key_name(key: Any) -> Any:
    """The name or index a JAX key path entry stands for."""
    if isinstance(key, DictKey):
        return key.key
    if isinstance(key, GetAttrKey):
        return key.name
    if isinstance(key, SequenceKey):
        return key.idx
    if isinstance(key, FlattenedIndexKey):
        return key.key
    return key


def flag_child(
    entry: FlagEntry,
    key: Any,
    index: int,
    sibling_names: list[Any],
    where: str,
) -> FlagEntry:
    """The entry that applies to the child at `key` (the `index`-th child)."""
    kind = flag_kind(entry)
    if kind in ("none", "bool", "callable"):
        return entry
    name = key_name(key)
    if kind == "mapping":
        unknown = [k for k in entry if k not in sibling_names]
        if unknown:
            raise SpecError(
                f"{where} has keys {unknown!r} that the argument does not have "
                f"(it has {sibling_names!r}); a flag tree must be a prefix of the "
                "argument's structure."
            )
        return entry.get(name)
    if kind == "sequence":
        if len(entry) != len(sibling_names):
            raise SpecError(
                f"{where} has {len(entry)} entries but the argument has "
                f"{len(sibling_names)} children; a flag tree must be a prefix of the "
                "argument's structure."
            )
        return entry[index]
    if isinstance(name, str) and hasattr(entry, name):
        return getattr(entry, name)
    raise SpecError(
        f"{where} is a {type(entry).__name__}, which has no entry for {name!r}; "
        "use True/False/None, a callable, or a dict/list/tuple shaped like the "
        "argument."
    )


@dataclass(frozen=True)
class Flags:
    """`static_flags` normalized against a signature, once per function."""

    by_name: Mapping[str, FlagEntry] = field(default_factory=dict)
    extra_positional: tuple[FlagEntry, ...] = ()
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
        positional = spec.positional
        by_name: dict[str, FlagEntry] = {}
        source: dict[str, str] = {}
        extra: list[FlagEntry] = []
        for i, entry in enumerate(static_flags):
            if i < len(positional):
                by_name[positional[i].name] = entry
                source[positional[i].name] = f"static_flags[{i}]"
            elif spec.var_positional is not None:
                extra.append(entry)
            else:
                raise SpecError(
                    f"static_flags has {len(static_flags)} entries but {spec.name} "
                    f"takes {len(positional)} positional parameters "
                    f"({', '.join(p.name for p in positional) or 'none'}). Give one "
                    "entry per positional parameter, or a dict keyed by name."
                )
        return Flags(by_name=by_name, extra_positional=tuple(extra), source=source)
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
