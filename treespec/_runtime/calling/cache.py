"""The compile cache belongs to the wrapped function, as in `jax.jit` and Equinox.

`treespec.jit(f)` made twice, `treespec.jit(treespec.grad(f))` written inline in
a loop, or `treespec.jit(m.method)` made afresh for each call: every such
wrapper of the same function with the same options finds the same `JitState`
(its splitter, its compiled callables, its trace count) here, and traces once.

The registry holds functions weakly: no function is kept alive only because it
was once jitted. A state never refers to the function or to a wrapper
strongly (the traced body reaches the function through a live wrapper, see
`JitState.wrapper`), and nothing JAX keeps refers to the state: JAX's global
caches hold the compile-cache keys of the calls (as they hold `jax.jit`'s
static arguments, until `jax.clear_caches()`), and a key holds its split's
number, its static values and their types only (`routes.py`). So when the
last wrapper and the function go, the state goes with them, and with it
every program it compiled.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable
from typing import Any

from ..checking.retrace import ScalarWatch, TraceHistory

__all__ = [
    "JitState",
    "freeze",
    "owner_of",
    "shared_state",
]

#: Option sets kept per function (a function jitted with ever new options is
#: rare; past this the oldest is dropped, as a bounded cache would).
MAX_VARIANTS = 64


class JitState:
    """What every `Jitted` wrapper of one function with one set of options shares."""

    def __init__(self, splitter: Any) -> None:
        self.splitter = splitter
        self.lock = threading.RLock()
        #: The `jax.jit` of each split, by its `SplitId`.
        self.compiled: dict[Any, Callable[..., Any]] = {}
        #: The compiled callable of each split, by its `SplitId` (kept here,
        #: not on the split: plans and splits refer to each other, and are
        #: only freed by a collection; the state is freed when its last
        #: wrapper goes, and its programs with it).
        self.callers: dict[int, Callable[..., Any]] = {}
        #: The traces that completed: how many, and what the latest saw of
        #: each leaf (a retrace is explained against the nearest).
        self.traces = TraceHistory()
        #: The unmarked Python scalars that caused retraces (one warning).
        self.scalars = ScalarWatch()
        self._wrappers: weakref.WeakSet[Any] = weakref.WeakSet()
        #: Set for a bound method's state: the instance it was made for.
        self.instance: weakref.ref[Any] | None = None

    def clear(self) -> None:
        """Forget every program, plan, key and trace (`Jitted.clear_cache`)."""
        with self.lock:
            for compiled in self.compiled.values():
                clear = getattr(compiled, "clear_cache", None)
                if clear is not None:
                    clear()
            self.splitter.clear()
            self.compiled.clear()
            self.callers.clear()
            self.traces.clear()
            self.scalars.clear()

    def attach(self, wrapper: Any) -> None:
        with self.lock:
            self._wrappers.add(wrapper)

    def wrapper(self) -> Any:
        """A live wrapper of this state (the one being called is alive)."""
        with self.lock:
            for wrapper in self._wrappers:
                return wrapper
        raise RuntimeError("treespec: a compiled function outlived its wrappers")

    def traced(self, key: Any, *dynamic: Any) -> Any:
        """The body JAX traces, shared by every wrapper: any one of them will do,
        since they wrap the same function with the same options."""
        return self.wrapper()._traced(key, *dynamic)


def freeze(value: Any) -> Hashable:
    """A hashable stand-in for an option value (`TypeError` if there is none).

    Containers by content, in order (dict items sorted by key); everything else
    must hash itself (callables and shardings do, by identity or content).
    """
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, freeze(v)) for k, v in value.items())))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(freeze(v) for v in value))
    hash(value)
    return (type(value), value)


_registry: weakref.WeakKeyDictionary[Any, dict[Hashable, JitState]] = (
    weakref.WeakKeyDictionary()
)
_lock = threading.Lock()


def owner_of(fun: Any) -> tuple[Any, Any]:
    """The function a cache belongs to, and the instance of a bound method."""
    self = getattr(fun, "__self__", None)
    func = getattr(fun, "__func__", None)
    if self is not None and func is not None:
        # A bound method first: of a transform too, whose attributes (its
        # `_cache_identity`) the method object hands on without the instance.
        owner, inner = owner_of(func)
        return owner, self if inner is None else inner
    identity = getattr(fun, "_cache_identity", None)
    if identity is not None:  # a treespec transform: its innermost function
        return identity()  # type: ignore[no-any-return]
    return fun, None


def _forgetting(
    variants: dict[Hashable, JitState], key: Hashable
) -> Callable[[weakref.ref[Any]], None]:
    """What forgets a bound method's state when its instance goes: the
    programs it compiled for that instance go with it (as `jax.jit(m.method)`'s
    go with the method), not when the function's variants overflow. A new
    instance at the dead one's address may have taken the key: its state
    stays. (No lock: this runs during a collection, maybe inside `_lock`.)"""

    def forget(dead: weakref.ref[Any]) -> None:
        state = variants.get(key)
        if state is not None and state.instance is dead:
            variants.pop(key, None)

    return forget


def shared_state(fun: Any, options: Hashable, make: Callable[[], JitState]) -> JitState:
    """The state shared by wrappers of `fun` with these options.

    A fresh, unshared state when `fun` (or a bound method's instance) cannot
    be weakly referenced or the options cannot be hashed.
    """
    try:
        owner, instance = owner_of(fun)
        chain = getattr(fun, "_cache_chain", lambda: ())()
        key = (options, chain, id(instance) if instance is not None else None)
        hash(key)
        with _lock:
            variants = _registry.setdefault(owner, {})
        instance_ref = (
            weakref.ref(instance, _forgetting(variants, key))
            if instance is not None
            else None
        )
    except TypeError:  # not weakly referenceable, or unhashable options
        return make()
    with _lock:
        state = variants.get(key)
        if state is not None and (
            state.instance is None or state.instance() is instance
        ):
            return state
        state = make()
        state.instance = instance_ref
        if len(variants) >= MAX_VARIANTS:
            del variants[next(iter(variants))]
        variants[key] = state
        return state
