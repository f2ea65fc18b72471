"""What every treespec transform shares: the wrapper, the split, the traced body."""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable, Mapping
from typing import (
    TYPE_CHECKING,
    Any,
    Concatenate,
    Generic,
    Protocol,
    Self,
    TypeVar,
    cast,
    overload,
)

from typing_extensions import ParamSpec

from .._model.errors import SpecError
from .._model.spec import Spec
from .._runtime.api import in_class_body, method_spec, spec_for
from .._runtime.calling.cache import freeze, owner_of
from .._runtime.calling.routes import Key, key_split
from .._runtime.calling.splitter import Splitter
from .._runtime.checked import validation_enabled
from .._runtime.checking.retrace import (
    TraceHistory,
    checking_shapes,
    describe_retrace,
    describe_view,
    explain_enabled,
    log_retrace,
)
from .._runtime.planning.build import check_default
from .._runtime.planning.processes import log_prefix
from .._runtime.reading.classes import is_class_backed
from .._runtime.reading.flags import Flags, normalize_flags
from .._runtime.reading.wrappers import maps_arguments
from .graph_calls import finish, run, traced_output
from .methods import method_get

__all__ = ["BoundTransform", "Counted", "Transformed"]


#: What `Transformed._build` sets; reading one before it ran builds.
_BUILT = frozenset(
    {"__treespec_spec__", "_callers", "_flags", "_float_args", "_splitter", "_state"}
)
_BUILD_LOCK = threading.RLock()

_P = ParamSpec("_P")
_Q = ParamSpec("_Q")
_R = TypeVar("_R")
_R_co = TypeVar("_R_co", covariant=True)
_S = TypeVar("_S")


class BoundTransform(Protocol[_Q, _R_co]):
    """What a transformed method is on an instance, to a type checker: the
    method with `self` bound, and the transform's `.spec`."""

    def __call__(self, *args: _Q.args, **kwargs: _Q.kwargs) -> _R_co: ...

    @property
    def spec(self) -> Spec: ...


class Transformed(Generic[_P, _R]):
    """A function wrapped by a treespec transform; call it like the original.

    `.spec` is the `Spec` derived from its annotations. As a method decorator,
    `self` is resolved like any other argument.
    """

    __treespec_spec__: Spec
    _name = "transform"
    #: The JAX option given as a tree over the output ("out_axes", ...), if any:
    #: such a tree cannot describe non-array outputs.
    _output_tree: str | None = None
    #: Whether a leaf is a batch of what its annotation describes (vmap, pmap).
    _maps_arguments = False
    #: Whether what the function changes in NNX objects of its call can be
    #: written into the caller's (not `pmap`'s, `shard_map`'s: refused).
    _writes_back = True

    def __init__(
        self,
        fun: Callable[_P, Any],
        *,
        static_flags: Any,
        default: str,
        validate: bool,
        localns: Mapping[str, Any],
        allow_whole: bool = False,
        in_shardings: Any = None,
        float_args: frozenset[int] = frozenset(),
        bind_calls: bool = True,
    ) -> None:
        check_default(default)
        # The name, docstring and `__wrapped__`, not `fun.__dict__`: a transform
        # keeps its own state (a subclass may have set some before this).
        functools.update_wrapper(cast(Any, self), fun, updated=())
        self._fun = fun
        self._default = default
        self._raw_options = (static_flags, validate, allow_whole, in_shardings)
        #: The class whose method this is (see `__set_name__`), if any.
        self._self_class: type | None = None
        #: What `_build` derives the spec and splitter from.
        self._build_args = (
            static_flags,
            validate,
            localns,
            allow_whole,
            in_shardings,
            float_args,
            bind_calls,
        )
        self._pending: tuple[Any, ...] | None = self._build_args
        try:
            self._build()
        except SpecError:
            # In a class body, the class itself (or one defined after it) is
            # not there yet: a method returning its own class is common. Try
            # again at first use (see `__getattr__`), and raise then if need be.
            if not in_class_body(localns):
                raise

    def _build(self) -> None:
        """Derive the spec and make the splitter; once, at decoration or first use."""
        with _BUILD_LOCK:
            pending = self.__dict__.get("_pending")
            if pending is None:
                return
            (
                static_flags,
                validate,
                localns,
                allow_whole,
                in_shardings,
                floats,
                bind_calls,
            ) = pending
            spec = spec_for(self._fun, localns)
            owner = self._self_class
            if owner is not None and not is_class_backed(owner):
                owner = None  # a plain class: `self` is one leaf, as before
            if owner is not None:
                spec = method_spec(spec, owner)
            flags = normalize_flags(static_flags, spec)
            try:
                signature: inspect.Signature | None = inspect.signature(self._fun)
            except (TypeError, ValueError):
                signature = None
            self._flags: Flags = flags
            #: Positional parameters whose unannotated floats are traced (grad).
            self._float_args: frozenset[int] = floats
            self._splitter = Splitter(
                spec,
                flags,
                self._default,
                # Around another treespec transform, the inner one validates
                # what it is called with and returns: the outer one sees
                # batched or differentiated values the inner hints do not
                # describe; around a mapped function, they describe a slice.
                validate=validate
                and validation_enabled()
                and not isinstance(self._fun, Transformed)
                and not maps_arguments(self._fun),
                signature=signature,
                in_shardings=in_shardings,
                allow_whole=allow_whole,
                float_args=floats,
                bind_calls=bind_calls,
                mapped=self._maps_arguments,
                self_class=owner,
            )
            self.__treespec_spec__ = spec
            self._built()
            # Last: until then, reading a missing attribute builds, or waits
            # for the build under way.
            self._pending = None

    def _built(self) -> None:
        """What a transform sets up once its spec and splitter exist."""

    def _cache_identity(self) -> tuple[Any, Any]:
        """The function a compile cache of this transform belongs to (the
        innermost function through nested transforms), and a bound method's
        instance (see `_runtime/calling/cache.py`)."""
        return owner_of(self._fun)

    def _cache_chain(self) -> tuple[Any, ...]:
        """This transform and those inside it, with their options, as a key."""
        inner = getattr(self._fun, "_cache_chain", None)
        return (
            (type(self).__name__, freeze(self._cache_options())),
            *(inner() if inner is not None else ()),
        )

    def _cache_options(self) -> tuple[Any, ...]:
        """The options that make this transform what it is (for `_cache_chain`)."""
        return (self._raw_options, self._default, self._self_class)

    def __getattr__(self, name: str) -> Any:
        # Only called for attributes not set yet: those `_build` sets, when it
        # was deferred at decoration (see `__init__`).
        if name in _BUILT and self.__dict__.get("_pending") is not None:
            self._build()
            return getattr(self, name)
        raise AttributeError(
            f"{type(self).__name__!r} object has no attribute {name!r}"
        )

    if TYPE_CHECKING:  # each transform defines its call; this is its type

        def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R: ...

    @property
    def spec(self) -> Spec:
        """The [`Spec`][treespec.Spec] derived from the wrapped function's
        annotations."""
        return self.__treespec_spec__

    if TYPE_CHECKING:

        @overload
        def __get__(self, instance: None, owner: type | None = None) -> Self: ...

        @overload
        def __get__(
            self: Transformed[Concatenate[_S, _Q], _R],
            instance: _S,
            owner: type | None = None,
        ) -> BoundTransform[_Q, _R]: ...

        def __get__(self, instance: Any, owner: type | None = None) -> Any: ...

    else:
        __get__ = method_get  # `methods.py`: what a bound method is

    def __set_name__(self, owner: type, name: str) -> None:
        """A method of `owner`: an unannotated `self` is read as an instance of
        it (its field annotations followed, as for any annotated argument), so
        an instance whose traced fields are all arrays goes to JAX whole.

        Derived again at first use: the class is not finished yet (Equinox
        makes a Module a dataclass after this).
        """
        with _BUILD_LOCK:
            self._attribute = name
            self._self_class = owner
            for built in _BUILT:
                self.__dict__.pop(built, None)
            self._pending = self._build_args

    def __repr__(self) -> str:
        name = getattr(self._fun, "__qualname__", None) or repr(self._fun)
        return f"<treespec.{self._name} of {name}>"

    def __copy__(self) -> Self:
        """Another wrapper of the same function with the same options."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new._copied_from(self)
        return new

    def __deepcopy__(self, memo: dict[int, Any]) -> Self:
        # As `copy.deepcopy` treats functions: the function itself is shared,
        # and with it (for jit) the compile cache.
        return self.__copy__()

    def _copied_from(self, other: Transformed[Any, Any]) -> None:
        """Set up a copy (see `__copy__`)."""

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError(
            f"{self!r} cannot be pickled, as jax.jit's functions cannot: pickle "
            f"the function itself, and apply treespec.{self._name} again after "
            "loading it."
        )

    def _refuse(self, args: Any, kwargs: Any, raised: BaseException) -> None:
        """Raise the `ValidationError` naming the leaves of a call that JAX
        refused, if treespec finds them (else the caller re-raises JAX's)."""
        error = self._splitter.diagnose(args, kwargs, raised)
        if error is not None:  # JAX's error stays reachable as __context__
            raise error from None

    def _call_fun(self, key: Key, dynamic: tuple[Any, ...], checked: Any = None) -> Any:
        """Rebuild the call from (key, dynamic), validate it, and run the function.

        `checked`: what `validate_call` returned, when the caller validated
        the call already.
        """
        if checked is None:
            checked = self._splitter.validate_call(key, dynamic)
        args, kwargs = self._splitter.rebuild(key, dynamic)
        split = key_split(key)
        return run(self._fun, args, kwargs, split, self._splitter, checked)

    def _traced(self, key: Key, *dynamic: Any) -> Any:
        """The body JAX traces: the call, with non-array outputs set aside."""
        return self._body(key, dynamic, None)

    def _body(self, key: Key, dynamic: tuple[Any, ...], checked: Any) -> Any:
        """The traced call's output for JAX (`graph_calls.traced_output`)."""
        out = self._call_fun(key, dynamic, checked)
        where = (self._name, self.spec.name, self._writes_back, self._output_tree)
        return traced_output(out, key_split(key), *where)

    def _output(
        self, out: Any, key: Key, args: Any, kwargs: Any, write: bool = True
    ) -> Any:
        """What JAX returned, as the function's result (`graph_calls.finish`)."""
        return finish(out, key_split(key), self._splitter, args, kwargs, write=write)


class Counted(Transformed[_P, _R]):
    """A transform that compiles once per static key, as `jit` does (`pmap`,
    `shard_map`): `.trace_count`, and with `explain_recompiles`, a log line
    on logger `treespec` naming the leaves that changed at each retrace."""

    #: What a retrace log says when no leaf changed, if the transform knows.
    _unchanged = ""

    def __init__(
        self, fun: Callable[_P, Any], *, explain_recompiles: bool, **kw: Any
    ) -> None:
        self._explain = explain_enabled(explain_recompiles)
        self._traces = TraceHistory()
        self._traces_lock = threading.Lock()
        super().__init__(fun, **kw)

    @property
    def trace_count(self) -> int:
        """How often this function traced (a trace that raised is not counted)."""
        return self._traces.count

    def _traced(self, key: Key, *dynamic: Any) -> Any:
        view = self._splitter.view(key, dynamic)
        # Validated first: a call that fails validation is no retrace.
        checked = self._splitter.validate_view(view)
        now = describe_view(view)
        out = self._body(key, dynamic, checked)
        if checking_shapes():  # the shape check's trace: none of the user's
            return out
        # As jit's: only a trace that completed counts, and is what later
        # retraces are explained against.
        with self._traces_lock:
            before = self._traces.completed(now)
            count = self._traces.count
        if before is not None and self._explain:
            log_retrace(
                log_prefix(),
                self._name,
                self.spec.name,
                count,
                self._unchanged
                if before == now and self._unchanged
                else "; ".join(describe_retrace(before, now)),
            )
        return out
