"""The bound call: `f(x)`, `f(x, 2)`, `f(x, n=2)` and `f(x=x, n=2)` as one call.

A call is rewritten to its bound form through the signature: every positional
parameter passed positionally (defaults filled in), then the keyword-only ones
and `**kwargs` by name (keyword-only defaults filled in too). Equal bound calls
make equal keys, so the four calls above share one trace.

How a call's shape (the number of positional arguments and the keyword names)
maps to its bound form is worked out once per shape, with `Signature.bind`
raising the usual `TypeError` for a call that does not fit; each call then
only picks its values.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from typing import Any

from ..._model.spec import POSITIONAL_KINDS
from ..planning.build import check_fits

__all__ = ["Binder"]

#: `(args, kwargs) -> (args, kwargs)` for calls of one shape.
_Rebind = Callable[
    [tuple[Any, ...], dict[str, Any]], tuple[tuple[Any, ...], dict[str, Any]]
]

#: Call shapes a binder remembers (a function called with ever new keyword
#: names is rare; past this, shapes are worked out again each time).
MAX_SHAPES = 256


class Binder:
    """Rewrites calls of one function to their bound form."""

    def __init__(self, signature: inspect.Signature | None, name: str) -> None:
        #: The function's signature (None: calls are taken as written).
        self.signature = signature
        self._name = name
        params = list(signature.parameters.values()) if signature else []
        self._positional = [p for p in params if p.kind in POSITIONAL_KINDS]
        self._keyword_only = [p for p in params if p.kind is p.KEYWORD_ONLY]
        #: Positional-only names that a keyword of the same name does not
        #: reach: with a `**kwargs`, Python puts such a keyword there.
        self._to_var_keyword = (
            {p.name for p in params if p.kind is p.POSITIONAL_ONLY}
            if any(p.kind is p.VAR_KEYWORD for p in params)
            else set()
        )
        self.npos = len(self._positional)
        has_defaults = any(p.default is not p.empty for p in self._keyword_only)
        #: The number of positional arguments of a call that is already in its
        #: bound form when it passes no keyword (-1: none is, since keyword-only
        #: defaults are filled in).
        self.direct_npos = -1 if has_defaults and signature else self.npos
        self._shapes: dict[tuple[int, tuple[str, ...]], _Rebind] = {}
        self._lock = threading.Lock()

    def bind(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The bound form of one call (`TypeError` if it does not fit)."""
        if self.signature is None or (not kwargs and len(args) == self.direct_npos):
            return args, kwargs
        shape = (len(args), tuple(kwargs))
        rebind = self._shapes.get(shape)
        if rebind is None:
            rebind = self._rebind_for(args, kwargs)
            with self._lock:
                if len(self._shapes) >= MAX_SHAPES:
                    self._shapes.clear()
                self._shapes[shape] = rebind
        return rebind(args, kwargs)

    def _rebind_for(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Rebind:
        assert self.signature is not None
        check_fits(self.signature, self._name, args, kwargs)
        plain = {k: v for k, v in kwargs.items() if k not in self._to_var_keyword}
        n_args = len(args)
        # Each positional parameter not passed positionally: by name, or its
        # default. `bind` succeeded, so one of the two is there.
        fill: list[tuple[str, Any]] = []
        for param in self._positional[n_args:]:
            if param.name in plain and param.kind is not param.POSITIONAL_ONLY:
                fill.append((param.name, None))
            else:
                fill.append(("", param.default))
        consumed = {name for name, _ in fill if name}
        rest = [k for k in kwargs if k not in consumed]
        defaults = {
            p.name: p.default
            for p in self._keyword_only
            if p.name not in kwargs and p.default is not p.empty
        }

        def rebind(
            args: tuple[Any, ...], kwargs: dict[str, Any]
        ) -> tuple[tuple[Any, ...], dict[str, Any]]:
            bound = (
                *args,
                *(kwargs[name] if name else default for name, default in fill),
            )
            if not rest and not defaults:
                return bound, {}
            named = {**defaults, **{k: kwargs[k] for k in rest}}
            return bound, named

        return rebind
