"""Explaining a retrace: which leaves changed between two traces, and how."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import jax
from jax.tree_util import keystr

from ._diagnose import aval
from ._plan import Kind

if TYPE_CHECKING:
    from ._routes import CallView

__all__ = ["describe_retrace", "describe_view"]

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


def describe_retrace(old: dict[str, str], new: dict[str, str]) -> list[str]:
    """What changed between two traces, one phrase per changed leaf."""
    changes = []
    if old.keys() != new.keys():
        moved = sorted(set(old) ^ set(new))
        changes.append(f"structure changed at {_common_prefix(moved)}")
    for path in new:
        if path in old and old[path] != new[path]:
            changes.append(f"{path}: {old[path]} -> {new[path]}")
    return changes or ["no leaf changed (a new jax.jit cache entry was needed)"]


def describe_view(view: CallView) -> dict[str, str]:
    """`{leaf path: value (type) or dtype[shape]}` of one trace, the fields that
    classes keep in their tree structure included."""
    described: dict[str, str] = {}
    for param, value, _ in view.whole:
        for path, leaf in jax.tree_util.tree_flatten_with_path(value)[0]:
            described[param.name + keystr(path)] = aval(leaf)
    for info, kind, leaf in view.pairs:
        if kind is Kind.STATIC:
            described[info.path] = _static(leaf)
        else:
            described[info.path] = aval(leaf)
    for held in view.held:  # a class's static field, named as a leaf is
        described[held.path] = _static(held.value)
    return described


def _static(value: object) -> str:
    return f"{value!r} ({type(value).__name__})"
