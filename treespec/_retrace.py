"""Explaining a retrace: which leaves changed between two traces, and how."""

from __future__ import annotations

import re

__all__ = ["describe_retrace"]

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
