"""What treespec hands a JAX transform to trace: the body of a transform.

A body reaches the transform (or `jit`'s state) through a weak reference
(`weak_method`), so that nothing JAX keeps holds the function; and it is
named for JAX as the user's function (`as_users`): the name in the compile
log and the profiler, the file and line and the arguments' names
(`CallNames`) in JAX's own errors.
"""

from __future__ import annotations

import functools
import inspect
import os
import weakref
from collections.abc import Callable, Sequence
from typing import Any, cast

__all__ = ["CallNames", "as_users", "weak_method"]


def _hide_treespecs_frames() -> None:
    """Have JAX hide treespec's frames as it hides its own, as Equinox does:
    from a user's traceback (`JAX_TRACEBACK_FILTERING`), so that below a JAX
    transform an error of the user's function shows the user's frames; and
    from the source information of what it traces, so that the locations a
    lowered module and a compiled program carry (MLIR `loc`, HLO metadata:
    what dumps and profilers show) are the user's lines, as under `jax.jit`."""
    folder = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        from jax._src import source_info_util, traceback_util
    except ImportError:  # pragma: no cover - a JAX without the private modules
        return
    register = getattr(traceback_util, "register_exclusion", None)
    if callable(register):
        register(folder)
    register = getattr(source_info_util, "register_exclusion", None)
    if callable(register):
        # A prefix of file names: the separator keeps `treespec_extra/` out.
        register(folder + os.sep)


_hide_treespecs_frames()


def weak_method(method: Callable[..., Any]) -> Callable[..., Any]:
    """`method` (bound), reaching its instance through a weak reference: what
    a treespec transform hands a JAX transform as the function to trace.

    Some JAX transforms keep, in a cache keyed weakly on the function they
    are given, a value that holds that function (`jax.checkpoint` with
    static arguments, `jax.pmap`): the entry keeps its own key alive. They
    then keep this small function, not the instance (a transform with the
    function it wraps and its closure, or `jit`'s state with its programs);
    and for `jax.jit`, whose compiled function the instance holds, no cycle
    delays freeing them to the next collection.
    """
    owner = weakref.ref(method.__self__)  # type: ignore[attr-defined]
    func = method.__func__  # type: ignore[attr-defined]

    def body(*args: Any) -> Any:
        live = owner()
        assert live is not None, "a traced body outlived its transform"
        return func(live, *args)

    body.__name__ = body.__qualname__ = func.__name__
    return body


class CallNames(inspect.Signature):
    """The signature a traced body shows JAX, so that JAX names its arguments
    as the user's function does.

    JAX names a traced function's arguments (in its tracer errors, its
    cache-miss explanations, a lowered program's argument info) by binding
    the call to the function's signature. The body treespec hands JAX takes
    `(key, *dynamic)`; this binds them to the names of what they stand for: a
    parameter handed over whole (`params`, whose leaves JAX names
    `params['w']`) or a leaf's key path (`cfg['scale']`). The key is static:
    JAX leaves it out.
    """

    __slots__ = ("_names",)

    def __init__(self, names: Sequence[str], *, keyed: bool = True) -> None:
        kind = inspect.Parameter
        params = [kind("key", kind.POSITIONAL_ONLY)] if keyed else []
        super().__init__([*params, kind("dynamic", kind.VAR_POSITIONAL)])
        self._names = (*(("key",) if keyed else ()), *names)

    def bind(self, *args: Any, **kwargs: Any) -> inspect.BoundArguments:
        names = self._names
        if kwargs or len(args) != len(names) or len(set(names)) != len(names):
            return super().bind(*args, **kwargs)
        # Bound to a signature of the names themselves: JAX reads a name by
        # position from `bound.signature.parameters` too (`vmap`'s sizes).
        named = cast(inspect.Signature, _Named(names))
        return inspect.BoundArguments(named, dict(zip(names, args)))


class _Named:
    """What JAX reads of a signature bound by `CallNames`: its parameters'
    names (a key path is no identifier, so no `inspect.Parameter` has it)."""

    def __init__(self, names: Sequence[str]) -> None:
        self.parameters = dict.fromkeys(names)


class _Source:
    """Where a function was written, for JAX (`inspect.unwrap` of a traced
    body reaches it): its name and code, never the function itself, which a
    compiled program must not keep alive."""

    def __init__(self, name: str, code: Any) -> None:
        self.__name__ = name
        self.__code__ = code


def as_users(
    body: Callable[..., Any], fun: Any, names: Sequence[str], *, keyed: bool = True
) -> Callable[..., Any]:
    """`body` named for JAX as the user's `fun`: its name (the compile log,
    `jit(train_step)`, the lowered module, the profiler), its file and line
    (JAX's errors), and its arguments' names (`CallNames`). Returns `body`."""
    inner = fun
    for _ in range(100):  # through decorators and partials, as JAX looks
        if isinstance(inner, functools.partial):
            inner = inner.func
        elif inspect.ismethod(inner):
            inner = inner.__func__
        elif getattr(inner, "__wrapped__", None) is not None:
            inner = inner.__wrapped__
        else:
            break
    name = getattr(inner, "__name__", None) or type(inner).__name__
    target: Any = body
    target.__name__ = name
    target.__qualname__ = getattr(inner, "__qualname__", name)
    code = getattr(inner, "__code__", None)
    if code is not None:
        target.__wrapped__ = _Source(name, code)
    target.__signature__ = CallNames(names, keyed=keyed)
    return body
