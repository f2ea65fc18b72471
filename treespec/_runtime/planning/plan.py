"""Plans: the static/traced kind of every leaf of one tree structure.

A `Plan` is built once per tree structure (treedef) by `resolve.build_plan`.
Leaves whose kind depends on their value (the "infer" default, callable flags)
become probes; the per-call answer of the probes picks a `Split`, also built
once.
"""

from __future__ import annotations

import dataclasses
import itertools
import operator
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..._model.errors import SpecError, describe_value
from ..._model.markers import Marker
from ..._model.spec import Node, Param
from .values import is_array, is_array_like

__all__ = [
    "CallView",
    "Held",
    "Kind",
    "LeafInfo",
    "Plan",
    "Split",
    "SplitId",
    "ask_callable",
    "ask_probe",
    "getter",
    "not_array",
    "not_array_like",
    "static_in_grad",
]


#: The resolved kind of one leaf: the same three values as the markers.
Kind = Marker


def not_array(x: Any) -> bool:
    return not is_array(x)


def not_array_like(x: Any) -> bool:
    """The "infer" probe on the value of an NNX `Variable`: NNX makes it data,
    so a Python scalar there is traced too (as `nnx.jit` traces it)."""
    return not is_array_like(x)


def static_in_grad(x: Any) -> bool:
    """The "infer" probe inside a differentiated argument: floats are traced too
    (as `jax.grad` does), everything else as `not_array` says."""
    return not is_array(x) and not isinstance(x, (float, complex))


@dataclasses.dataclass(frozen=True)
class LeafInfo:
    """How one leaf was resolved. `probe` is set when the kind depends on the value."""

    path: str
    argument: str
    kind: Kind | None
    source: str
    node: Node
    traced_kind: Kind = Kind.DYNAMIC
    probe: Callable[[Any], bool] | None = None
    #: The class instance whose field annotations the leaf's node comes from
    #: (its class, its key path), if any: when the call holds several
    #: instances of that class, each binds its own dimension names.
    owner: tuple[type, str] | None = None

    def owned_by(self, owner: tuple[type, str]) -> LeafInfo:
        """This leaf, inside the instance `owner`."""
        return dataclasses.replace(self, owner=owner)

    def resolve(self, value: Any) -> Kind:
        if self.kind is not None:
            return self.kind
        return Kind.STATIC if ask_probe(self, value) else self.traced_kind


@dataclasses.dataclass(frozen=True)
class Held:
    """A field a class keeps in its tree structure, so no leaf: where it is,
    its value (the same for every call of one tree structure), the switch
    that holds it (`eqx.field(static=True)`), and whether it is an annotated
    field (`explain` lists those; a retrace description names any)."""

    path: str
    argument: str
    value: Any
    switch: str
    annotated: bool = True


def ask_probe(info: LeafInfo, value: Any) -> bool:
    """The probe's answer for one leaf; a `SpecError` if it raises or is no bool.

    The probes are treespec's own (the "infer" default) or a callable the user
    put in `static_flags`; `info.source` names its place there.
    """
    assert info.probe is not None
    return ask_callable(info.probe, value, info.source, info.path)


def ask_callable(fn: Callable[[Any], Any], value: Any, where: str, path: str) -> bool:
    """A user's callable entry (`static_flags`, `wrt`) asked about one leaf.

    `where` names the entry's place (`static_flags[1] (callable)`), `path` the
    leaf's key path. What it raises, or an answer that is not a bool, becomes
    a `SpecError` naming both.
    """
    try:
        answer = fn(value)
    except Exception as exc:
        raise SpecError(
            f"{where} raised {type(exc).__name__} on the leaf at {path} "
            f"({describe_value(value)}): {exc}. A callable entry is called with "
            "every leaf below its place and must return True or False for each."
        ) from exc
    if answer is True or answer is False:
        return answer
    if isinstance(answer, np.bool_) or (
        getattr(answer, "dtype", None) == np.bool_ and np.shape(answer) == ()
    ):
        return bool(answer)
    raise SpecError(
        f"{where} returned {describe_value(answer)} for the leaf at {path} "
        f"({describe_value(value)}); a callable entry must return True or False."
    )


#: Probes whose answer depends on the leaf's type only.
_BY_TYPE = (not_array, not_array_like, static_in_grad)


def getter(indices: Sequence[int]) -> Callable[[Sequence[Any]], Sequence[Any]]:
    """A fast `leaves -> [leaves[i] for i in indices]`, with no Python frame.

    A run of consecutive indices (the common case, and the empty one) is one
    slice; otherwise an `itemgetter`, which returns a tuple when given two or
    more indices.
    """
    if not indices or list(indices) == list(range(indices[0], indices[-1] + 1)):
        start = indices[0] if indices else 0
        return operator.itemgetter(slice(start, start + len(indices)))
    return operator.itemgetter(*indices)


class SplitId(int):
    """What a compile-cache key holds of its `Split` (see `routes.py`): the
    split's number within its function, and a weak reference to it.

    To JAX it is an `int`, hashed and compared by value in C: the key of a
    function made afresh (a sweep's step, a notebook cell run again) equals
    the key of the function it replaces, as `jax.jit`'s static arguments do,
    so JAX's global caches keep one of equal keys. It refers to nothing that
    leads back to the function or to what it compiled.
    """

    split: weakref.ref[Split]


#: Numbers for the splits of functions that give no counter of their own.
_numbers = itertools.count().__next__


class Split:
    """One final assignment of kinds to the leaves of one tree structure.

    A compile-cache key holds its `token` (a `SplitId`), never the split:
    JAX's caches keep keys, and a split leads to its function's plans.
    """

    __slots__ = (
        "__weakref__",
        "donate",
        "dynamic_idx",
        "get_dynamic",
        "get_static",
        "kinds",
        "last",
        "links",
        "plan",
        "static_idx",
        "token",
    )

    def __init__(self, plan: Plan, kinds: tuple[Kind, ...], number: int) -> None:
        self.plan = plan
        self.kinds = kinds
        #: The key's stand-in for this split (see `SplitId`).
        self.token = SplitId(number)
        self.token.split = weakref.ref(self)
        #: The static leaves of the last call and its interned key (set by the
        #: positional route, see `PositionalRoute._static_key`).
        self.last: tuple[tuple[Any, ...], Any] | None = None
        #: For each NNX `Variable` of the call, the first place that holds
        #: the same object, when the call holds one twice (see `graph.py`).
        self.links: tuple[int, ...] | None = None
        self.static_idx = tuple(i for i, k in enumerate(kinds) if k is Kind.STATIC)
        self.dynamic_idx = tuple(i for i, k in enumerate(kinds) if k is not Kind.STATIC)
        self.donate = tuple(
            pos for pos, i in enumerate(self.dynamic_idx) if kinds[i] is Kind.DONATE
        )
        self.get_static = getter(self.static_idx)
        self.get_dynamic = getter(self.dynamic_idx)

    def pairs(self, leaves: Sequence[Any]) -> list[tuple[LeafInfo, Kind, Any]]:
        """Each leaf with how it was resolved and its kind (for validation,
        retrace descriptions and diagnosis)."""
        return list(zip(self.plan.infos, self.kinds, leaves))

    def merge(self, static: Sequence[Any], dynamic: Sequence[Any]) -> list[Any]:
        """Put static and dynamic leaves back in flatten order."""
        leaves: list[Any] = [None] * len(self.kinds)
        for i, v in zip(self.static_idx, static):
            leaves[i] = v
        for i, v in zip(self.dynamic_idx, dynamic):
            leaves[i] = v
        return leaves


class Plan:
    """The resolution of every leaf of one tree structure."""

    def __init__(
        self,
        treedef: Any,
        infos: tuple[LeafInfo, ...],
        held: tuple[Held, ...] = (),
        numbers: Callable[[], int] | None = None,
    ) -> None:
        self.treedef = treedef
        #: Gives each new split its number: one counter per function, so no
        #: two splits of one function share a number (see `SplitId`).
        self._numbers = numbers or _numbers
        self.infos = infos
        #: The fields its classes keep in the structure (see `Held`).
        self.held = held
        #: The route whose calls have this structure (it reads keys of its
        #: splits back, and knows what `treedef` is the structure of).
        self.route: Any = None
        #: Per-leaf `in_shardings` entries (`prefix.Entry`), when the
        #: transform was given some.
        self.shardings: list[Any] | None = None
        #: Where the structure's NNX `Variable`s are (`graph.Graph`), if any.
        self.graph: Any = None
        self._variants: dict[tuple[Split, tuple[int, ...]], Split] = {}
        self.probe_idx = tuple(i for i, info in enumerate(infos) if info.kind is None)
        self.probes = tuple(infos[i].probe for i in self.probe_idx)
        self._splits: dict[tuple[bool, ...], Split] = {}
        #: Splits by the probed leaves' types, when every probe is in `_BY_TYPE`
        #: (`_split_for` keeps one `Split` per answer, so a race adds no key).
        self._by_type: dict[tuple[type, ...], Split] | None = None
        if self.probes and all(p in _BY_TYPE for p in self.probes):
            self._by_type = {}
        self._get_probed = getter(self.probe_idx)
        self._lock = threading.Lock()
        #: Whether the kinds of this structure's leaves follow from their
        #: types alone (no probe, or only the "infer" probes).
        self.kinds_by_type = not self.probes or self._by_type is not None
        self.fixed: Split | None = None
        if not self.probe_idx:
            kinds = tuple(info.kind for info in infos if info.kind is not None)
            self.fixed = Split(self, kinds, self._numbers())

    def split(self, leaves: Sequence[Any]) -> Split:
        """The `Split` for these leaves (the probes' answers pick it)."""
        if self.fixed is not None:
            return self.fixed
        if self._by_type is not None:
            # Every probe is the "infer" default, whose answer is a function of
            # the leaf's type: one dict lookup instead of a call per leaf.
            types = tuple(map(type, self._get_probed(leaves)))
            found = self._by_type.get(types)
            if found is None:
                found = self._by_type[types] = self._split_for(leaves)
            return found
        return self._split_for(leaves)

    def variant(self, split: Split, links: tuple[int, ...]) -> Split:
        """`split` for calls that hold some of its NNX `Variable`s twice, as
        `links` says (see `graph.py`): a split of its own, so a program
        traced with the objects shared serves only calls that share them."""
        key = (split, links)
        found = self._variants.get(key)
        if found is None:
            with self._lock:
                found = self._variants.get(key)
                if found is None:
                    found = Split(self, split.kinds, self._numbers())
                    found.links = links
                    self._variants[key] = found
        return found

    def _split_for(self, leaves: Sequence[Any]) -> Split:
        infos = self.infos
        bits = tuple(ask_probe(infos[i], leaves[i]) for i in self.probe_idx)
        found = self._splits.get(bits)
        if found is not None:
            return found
        with self._lock:
            found = self._splits.get(bits)
            if found is None:
                kinds = list(info.kind for info in self.infos)
                for i, b in zip(self.probe_idx, bits):
                    kinds[i] = Kind.STATIC if b else self.infos[i].traced_kind
                found = Split(
                    self, tuple(k for k in kinds if k is not None), self._numbers()
                )
                self._splits[bits] = found
        return found


@dataclasses.dataclass
class CallView:
    """What a route tells about one call, for validation and retrace messages.

    `whole` are the arguments handed to JAX whole, each with its flag entry;
    `pairs` are the flattened leaves, each with how it was resolved and its kind;
    `held` the fields that classes keep in the tree structure (no leaves).
    """

    whole: list[tuple[Param, Any, Any]]
    pairs: list[tuple[LeafInfo, Kind, Any]]
    #: The fields classes of the call keep in their tree structure.
    held: Sequence[Held] = ()
