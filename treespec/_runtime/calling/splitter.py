"""From a call's `(args, kwargs)` to a static key and the dynamic arguments, and back.

Every transform uses one `Splitter` per decorated function. It picks the route
of a call (see `routes.py`) and hands everything else to the route that made
the key: rebuilding the call, the view that validation and retrace
descriptions read, donation, shardings and diagnosis.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from ..._model.errors import ValidationError, from_body
from ..._model.spec import AnyNode, Spec
from ..checking.call_checks import check_view, return_pairs
from ..checking.validate import Pair, check_call
from ..planning.plan import CallView
from ..reading.flags import Flags
from .bind import Binder
from .call_route import CallRoute
from .layout import whole_kind
from .positional import PositionalRoute
from .routes import Key, Route, RouteContext, key_split

__all__ = ["Key", "Splitter", "route_of"]


def route_of(key: Key) -> Route:
    """The route that made `key`."""
    return key_split(key).plan.route  # type: ignore[no-any-return]


class Splitter:
    """Splits calls of one function into (static key, dynamic arguments).

    `allow_whole`: arguments dynamic as a whole go to JAX unflattened (jit);
    the other transforms see every leaf of the call. `float_args`: positional
    parameters whose unannotated Python floats are traced (what `grad`
    differentiates). `bind_calls`: calls are rewritten to their bound form
    first (not for transforms whose prefix trees follow the call as written,
    such as `vmap`'s `in_axes`). `self_class`: the class of a method's
    unannotated `self` (see `Transformed.__set_name__`).
    """

    def __init__(
        self,
        spec: Spec,
        flags: Flags,
        default: str,
        *,
        validate: bool,
        signature: inspect.Signature | None,
        in_shardings: Any = None,
        allow_whole: bool = True,
        float_args: frozenset[int] = frozenset(),
        bind_calls: bool = True,
        self_class: type | None = None,
        mapped: bool = False,
    ) -> None:
        self.spec = spec
        self.validate = validate
        #: Rewrites a call to its bound form (`bind.py`), when `bind_calls`.
        self.binder = Binder(signature if bind_calls else None, spec.name)
        ctx = RouteContext(
            spec,
            flags,
            default,
            validate,
            signature,
            in_shardings,
            float_args,
            mapped,
        )
        whole = []
        if allow_whole:
            for i, param in enumerate(spec.positional):
                kind = whole_kind(param, flags.by_name.get(param.name), default)
                if kind is not None:
                    whole.append((i, kind))
        #: The route of every other call.
        self.general = CallRoute(ctx)
        # A method's `self` read from its class goes to JAX whole only while
        # it is an instance of that very class (a subclass may add fields).
        guard = self_class if whole and whole[0][0] == 0 else None
        #: The route of a call that passes exactly the positional parameters.
        self.positional = PositionalRoute(
            ctx, whole, probing=allow_whole, guard=guard, fallback=self.general
        )

    def clear(self) -> None:
        self.positional.clear()
        self.general.clear()

    def route_for(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Route:
        """The route that splits this call."""
        if not kwargs and len(args) == self.positional.npos:
            return self.positional
        return self.general

    def bind(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The call in its bound form: one key for `f(x)`, `f(x, 2)`, `f(x, n=2)`."""
        return self.binder.bind(args, kwargs)

    def split_call(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[Key, Sequence[Any]]:
        """The static key and the dynamic arguments of one call."""
        return self.split_bound(*self.binder.bind(args, kwargs))

    def split_bound(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[Key, Sequence[Any]]:
        """`split_call` of a call already in its bound form (see `bind`)."""
        return self.route_for(args, kwargs).split(args, kwargs)

    def rebuild(
        self, key: Key, dynamic: Sequence[Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The call's `(args, kwargs)` from its key and (traced) dynamic arguments."""
        return route_of(key).rebuild(key, dynamic)

    def view(self, key: Key, dynamic: Sequence[Any]) -> CallView:
        return route_of(key).view(key, dynamic)

    def validate_call(self, key: Key, dynamic: Sequence[Any]) -> list[Pair]:
        """Validate one call; its leaves and kinds, for checking the return.

        The transforms run this while tracing, so once per compile-cache miss;
        `checked` on every call. See `validate.check_view`.
        """
        return self.validate_view(self.view(key, dynamic))

    def validate_view(self, view: CallView) -> list[Pair]:
        """`validate_call` from the call's view, when the caller has it already."""
        if not self.validate:
            return []
        return check_view(self.spec, view)

    def validate_return(self, result: Any, arguments: Sequence[Pair]) -> None:
        """Check the return value against the return annotation.

        `arguments` (what `validate_call` returned) are checked again first, so
        that dimension names they bound apply to the return value too.
        """
        returns = self.spec.returns
        if not self.validate or isinstance(returns, AnyNode):
            return
        returned, issues = return_pairs(result, returns)
        issues += check_call(arguments, returned)
        if issues:
            raise ValidationError(issues, self.spec.name)

    def diagnose(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        raised: BaseException | None = None,
    ) -> ValidationError | None:
        """Find the leaves that made a call fail; `None` if they all look fine,
        or if the function itself raised `raised` (the user's error stays)."""
        if raised is not None and from_body(raised):
            return None
        args, kwargs = self.binder.bind(args, kwargs)
        issues = self.route_for(args, kwargs).diagnose(args, kwargs)
        return ValidationError(issues, self.spec.name) if issues else None
