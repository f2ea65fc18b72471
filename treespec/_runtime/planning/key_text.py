"""A trace's static key as every process can compare it.

Each leaf of the key described by text that is the same in every process for
equal values (`stable_repr`: no memory addresses, sets sorted, functions and
classes by their full names), sorted by key path, and a digest of the whole.
`processes.py` publishes and compares them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import types
from collections.abc import Sequence
from typing import Any

from .plan import CallView, Kind

__all__ = ["Leaf", "describe_key", "digest", "full_name", "leaf_hash", "stable_repr"]


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def full_name(obj: Any) -> str:
    module = getattr(obj, "__module__", None) or "?"
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", "?")
    return f"{module}.{name}"


def stable_repr(value: Any, depth: int = 0) -> str:
    """Text for `value` that is the same in every process for equal values.

    Functions, classes and modules by `module.qualname`; containers item by
    item (sets sorted: their order follows the per-process string hash); any
    other value by its `repr` without memory addresses (`<X object>`).
    """
    if depth > 20:
        return "..."
    kind = type(value)
    if kind is tuple or kind is list:
        items = ", ".join(stable_repr(v, depth + 1) for v in value)
        if kind is tuple:
            return f"({items},)" if len(value) == 1 else f"({items})"
        return f"[{items}]"
    if kind is dict:
        return (
            "{"
            + ", ".join(
                f"{stable_repr(k, depth + 1)}: {stable_repr(v, depth + 1)}"
                for k, v in value.items()
            )
            + "}"
        )
    if kind is set or kind is frozenset:
        items = ", ".join(sorted(stable_repr(v, depth + 1) for v in value))
        return f"{kind.__name__}({{{items}}})"
    if isinstance(
        value,
        (
            type,
            types.FunctionType,
            types.BuiltinFunctionType,
            types.MethodDescriptorType,
        ),
    ):
        return full_name(value)
    if isinstance(value, types.ModuleType):
        return value.__name__
    if isinstance(value, types.MethodType):
        return (
            f"{full_name(value.__func__)} of {stable_repr(value.__self__, depth + 1)}"
        )
    try:
        text = repr(value)
    except Exception:  # a broken __repr__ says nothing the type does not
        return f"<{full_name(kind)}>"
    return _ADDRESS.sub("", text)


@dataclasses.dataclass(frozen=True)
class Leaf:
    """One leaf of a trace's key, as every process describes it."""

    path: str
    argument: str
    kind: str  # "static", "dynamic" or "donate"
    type: str  # a static leaf's type (module.qualname); "" for a traced one
    text: str  # a static leaf's stable repr; dtype[shape] for a traced one


def _aval(value: Any) -> str:
    dims = ",".join(str(d) for d in getattr(value, "shape", ()))
    return f"{getattr(value, 'dtype', type(value).__name__)}[{dims}]"


def describe_key(view: CallView) -> list[Leaf]:
    """Every leaf of one trace, sorted by path: the structure is the paths."""
    import jax
    from jax.tree_util import keystr

    leaves = []
    for param, value, _ in view.whole:
        for path, leaf in jax.tree_util.tree_flatten_with_path(value)[0]:
            leaves.append(
                Leaf(param.name + keystr(path), param.name, "dynamic", "", _aval(leaf))
            )
    for info, kind, leaf in view.pairs:
        if kind is Kind.STATIC:
            leaves.append(
                Leaf(
                    info.path,
                    info.argument,
                    "static",
                    full_name(type(leaf)),
                    stable_repr(leaf),
                )
            )
        else:
            leaves.append(Leaf(info.path, info.argument, kind.value, "", _aval(leaf)))
    return sorted(leaves, key=lambda leaf: leaf.path)


def leaf_hash(leaf: Leaf) -> str:
    text = json.dumps([leaf.kind, leaf.type, leaf.text])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def digest(leaves: Sequence[Leaf]) -> str:
    """The sha256 of a sorted key description: equal in every process for equal keys."""
    text = json.dumps([[x.path, x.kind, x.type, x.text] for x in leaves])
    return hashlib.sha256(text.encode()).hexdigest()
