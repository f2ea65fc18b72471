"""An instance of a class for a shape check: its fields' defaults, or, when
its fields' annotations give no shape (a field that is an `eqx.nn.Linear`, a
plain `Array`, an `int` set in `__init__`), the class's own `__init__`, run
abstractly (`jax.eval_shape`, `nnx.eval_shape` for a Flax NNX module,
`eqx.filter_eval_shape` for an Equinox one).

Its arguments: an `int` named like a dimension of the checked function (its
return annotation included) takes that dimension's size; one with a default
takes it, and a count with none (`num_heads`) 1, said in a note; any other
`int` (`hidden_size`) is a dimension of its own; a key a key, `rngs` an
`nnx.Rngs`; anything else its default. A constructor that uses a symbolic
size as a number (`eqx.nn.Linear`'s `math.sqrt`) needs concrete sizes:
`NeedsConcrete`, and the run goes to the witnesses; one that refuses the
concrete sizes it is given raises `Refused`, naming them and its error.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import typing
from collections.abc import Callable, Mapping
from typing import Any

import jax

from .._runtime.checking.symbolic import is_dim_expr
from .._runtime.reading.classes import is_namedtuple
from .optional import MOST_PARTS, OPTIONALS
from .orders import REFUSED
from .origins import unwritten_origins
from .witness import symbolic_limit

__all__ = [
    "by_init",
    "construct",
    "field_defaults",
    "has_own_init",
    "NeedsConcrete",
    "Refused",
    "STAND_INS",
    "Taken",
    "Unbuildable",
    "unvalued",
]


class NeedsConcrete(Exception):
    """A constructor that cannot run at symbolic sizes (its message is JAX's
    or the constructor's)."""


class Unbuildable(TypeError):
    """A constructor's parameter the check has no value for."""

    def __init__(self, where: str, text: str) -> None:
        super().__init__(f"{where} has no value to build it with")
        self.where = where
        self.text = text


def _of_ints(annotation: Any) -> bool:
    """Whether an annotation is a tuple or list of `int`s."""
    text = annotation if isinstance(annotation, str) else repr(annotation)
    return (
        re.fullmatch(
            r"(typing\.|collections\.abc\.)?([Tt]uple|[Ll]ist|Sequence)"
            r"\[int(, \.\.\.)?\]",
            text,
        )
        is not None
    )


#: An optional `int` (`Optional[int]`, `int | None`), as written or shown.
_OPTIONAL_INT = re.compile(
    r"(typing\.)?Optional\[int\]|int \| None|None \| int"
    r"|(typing\.)?Union\[int, (None|NoneType)\]"
)


def _modes(annotation: Any) -> tuple[Any, ...]:
    """The values of a `Literal[...]` annotation (written as text too)."""
    if typing.get_origin(annotation) is typing.Literal:
        return typing.get_args(annotation)
    found = re.fullmatch(r"(?:typing\.)?Literal\[(.+)\]", _text(annotation))
    try:
        values = ast.literal_eval(f"({found[1]},)") if found else ()
    except (ValueError, SyntaxError):
        return ()
    return values if isinstance(values, tuple) else ()


def _text(annotation: Any) -> str:
    """An annotation as a user wrote it (`tuple[int, ...]`, `int`)."""
    if annotation is inspect.Parameter.empty:
        return "no annotation"
    if isinstance(annotation, str):
        return annotation
    return annotation.__name__ if isinstance(annotation, type) else repr(annotation)


#: A constructor's refusal of sizes that do not divide each other.
_DIVIDES = re.compile(r"does not divide|not a multiple of")


class Refused(Exception):
    """A constructor that refused the concrete sizes it was given: the
    call (its sizes) and its own error, as one line."""


#: The stand-in sizes of a first pass, which only records the names: a
#: constructor that refuses one (4 groups of 2 channels) is given the next,
#: which more counts divide.
STAND_INS = (2, 12, 60, 840)

_KEY_NAMES = ("key", "rng", "prng_key", "prngkey")
#: An `int` parameter that counts a model's parts or sets a layer's geometry
#: (`num_heads`, `n_layers`, `depth`, `stride`): its default, else 1; any
#: other `int` is a size, an unknown to solve, never guessed (`num_classes`
#: and `num_actions` are output widths, not counts of parts).
_COUNT = re.compile(
    r"_?(heads|layers|blocks|stages|groups|depth|count|steps|stride|"
    r"kernel_size|padding|dilation|axis)$|^(depth|stride|groups|axis)",
    re.I,
)
#: Stands for an `nnx.Rngs(0)`, made inside the abstract trace.
_RNGS = object()


def _made(value: Any) -> Any:
    if value is _RNGS:
        from flax import nnx

        return nnx.Rngs(0)
    return value


def construct(
    cls: type,
    size_of: Callable[[str, bool], Any | None],
    assumed: dict[str, Any],
    path: str,
) -> Any:
    """An abstract instance of `cls` made by its `__init__`; `size_of(name,
    new)` is a dimension's size, or None (with `new`, a dimension of its own
    for a size no annotation names); what is assumed goes in `assumed`
    (`path.param` -> value). Raises `TypeError` when a parameter cannot be
    given, `NeedsConcrete` at symbolic sizes the constructor cannot take."""
    signature = inspect.signature(cls)
    if all(
        p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        for p in signature.parameters.values()
    ):
        # A metaclass's `__call__` (Flax NNX) hides the `__init__` it runs.
        init: Any = cls.__init__  # type: ignore[misc]
        own = list(inspect.signature(init).parameters.values())[1:]
        signature = signature.replace(parameters=own)
    mine: dict[str, Any] = {}  # said only of an instance made
    kwargs = {
        name: _argument(param, size_of, mine, f"{path}.{name}")
        for name, param in signature.parameters.items()
        if param.kind not in (param.VAR_POSITIONAL, param.VAR_KEYWORD)
    }
    positional = [
        kwargs.pop(name)
        for name, param in signature.parameters.items()
        if param.kind is param.POSITIONAL_ONLY
    ]
    make = _eval_shape(cls)

    def made() -> Any:  # NNX's `Rngs` are made inside the trace
        given = {k: _made(v) for k, v in kwargs.items()}
        return cls(*map(_made, positional), **given)

    try:
        with unwritten_origins():  # nobody reads them: quadratic in parameters
            instance = make(made)
    except Exception as error:
        # Symbolic sizes handed to a constructor (a library's, which may use
        # a size as a number or branch on it): concrete sizes decide.
        symbolic = any(
            type(v) is not int for v in _sizes([*positional, *kwargs.values()])
        )
        text = f"{type(error).__name__}: {error}"
        # At concrete sizes, a library's "does not divide" (NNX's `GroupNorm`)
        # is its refusal of them, not a limit of symbolic sizes.
        if symbolic or (symbolic_limit(text) and not _DIVIDES.search(text)):
            raise NeedsConcrete(text) from None
        sizes = [*_shown(positional), *_shown(kwargs.values(), kwargs)]
        said = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise Refused(
            f"{cls.__qualname__}({', '.join(sizes)}{REFUSED}"
            f"{type(error).__name__}: {said}"
        ) from None
    assumed.update(mine)
    return instance


def _shown(values: Any, names: Mapping[str, Any] | None = None) -> list[str]:
    """The size arguments of a call, as written (`d=11`, or `11`)."""
    keys = list(names) if names is not None else [None] * len(list(values))
    return [
        f"{key}={value}" if key else str(value)
        for key, value in zip(keys, values)
        if type(value) is int
    ]


def by_init(
    cls: type,
    path: str,
    sizes: Mapping[str, Any] | None,
    named: Callable[[str, bool], bool],
    assumed: dict[str, Any],
) -> Any:
    """An instance made by `cls`'s own `__init__` (`construct`) at the sizes
    of a run, or in a first pass (`sizes` None) at each of `STAND_INS` in
    turn until one is taken; `named(name, new)` says whether an `int` is a
    dimension (and records it). Raises `Refused` when the run's sizes, or
    every stand-in, are refused."""
    tried: tuple[int | None, ...] = (None,) if sizes is not None else STAND_INS
    for i, stand_in in enumerate(tried):

        def size_of(name: str, new: bool, stand_in: int | None = stand_in) -> Any:
            if sizes is not None:
                return sizes.get(name)
            return stand_in if named(name, new) else None

        try:
            return construct(cls, size_of, assumed, path)
        except Refused:
            if i == len(tried) - 1:
                raise
    raise AssertionError("unreachable: the last refusal is raised")


def has_own_init(cls: type) -> bool:
    """Whether `cls` makes its instances with an `__init__` written for it
    (its own or a base's), not one a dataclass generated from its fields."""
    code = getattr(getattr(cls, "__init__", None), "__code__", None)
    return code is not None and not code.co_filename.startswith("<")


def _sizes(values: list[Any]) -> list[Any]:
    """The arguments that are sizes: ints, or symbolic sizes (JAX's)."""
    return [v for v in values if is_dim_expr(v) or type(v) is int]


def _argument(
    param: inspect.Parameter,
    size_of: Callable[[str, bool], Any | None],
    assumed: dict[str, Any],
    where: str,
) -> Any:
    name, annotation = param.name, param.annotation
    if name.lower() in _KEY_NAMES or "PRNGKey" in str(annotation):
        return jax.random.key(0)
    if name == "rngs":
        return _RNGS
    counts = (
        annotation in (int, "int")
        or (annotation is inspect.Parameter.empty and type(param.default) is int)
        or _OPTIONAL_INT.fullmatch(_text(annotation)) is not None
    )
    if counts:
        return unvalued(name, int, size_of, assumed, where, param.default)
    if param.default is not inspect.Parameter.empty:
        return param.default
    if annotation in (bool, "bool"):
        # A switch (`flip`, `use_bias`): its False side, said in the note.
        assumed[where] = False
        return False
    if modes := _modes(annotation):
        # A mode (`act: Literal["relu", "gelu"]`): its first value, said.
        assumed[where] = modes[0]
        return modes[0]
    if (
        name.rstrip("s") != name
        and _COUNT.search(name.rstrip("s"))
        and _of_ints(annotation)
    ):
        # Counts of each part (`dilations`, `strides`): one part, said.
        assumed[where] = (1,)
        return (1,)
    if _of_ints(annotation):
        return _parts(name, size_of, where)
    if annotation in (float, "float"):
        return unvalued(name, float, size_of, assumed, where)
    raise Unbuildable(where, f"{_text(annotation)}, a parameter of its constructor")


def _parts(name: str, size_of: Callable[[str, bool], Any | None], where: str) -> Any:
    """Sizes of each part (`widths`, `cardinalities`): two parts, each a size
    of its own, so that a layer sized for the first where the last belongs
    shows; or, in a check again (`Optionals.length`), as many parts as a
    size of the checked function (its length stands for `n_cat`), each one
    of those two sizes in turn."""
    optionals = OPTIONALS.get()
    follow = optionals.length if optionals is not None else None
    count: Any = 2
    if optionals is not None and follow is None:
        optionals.parts.append(where)
    elif follow is not None:
        count = size_of(follow, False)
        if type(count) is not int:  # a tuple's length is a number
            raise NeedsConcrete(f"the length of {where} stands for {follow}")
        if count > MOST_PARTS:  # a layer each: sizes a model is built at
            raise Refused(f"{where}({follow}={count} parts{REFUSED}too many")
    return tuple(size_of(f"{name}{i % 2}", True) for i in range(count))


def unvalued(
    name: str,
    kind: type,
    size_of: Callable[[str, bool], Any | None],
    assumed: dict[str, Any],
    where: str,
    default: Any = inspect.Parameter.empty,
) -> Any:
    """An `int` or `float` no one gave, of a constructor or the checked
    function alike (one rule): an `int` named like a dimension takes its
    size; else its default; a count (`num_heads`) 1, said in `assumed`; any
    other a dimension of its own, an unknown (`size_of(name, True)`). A
    `float` (a rate) is never a size: 1.0 (`int(ratio * d)` is d), said."""
    if kind is float:
        assumed[where] = 1.0
        return 1.0
    size = size_of(name, False)
    optionals = OPTIONALS.get()
    if size is not None:
        if optionals is not None:
            optionals.bound.add(name)
        return size
    if default is None and optionals is not None and optionals.at_default:
        return None  # its default: the size the author derives from others
    if default is None and optionals is not None:
        optionals.taken.append(where)
    if type(default) is not int and not _COUNT.search(name):
        # A size no annotation names (`hidden_size`): a dimension of its
        # own, never 1, at which a bug that broadcasts would pass.
        return size_of(name, True)
    value = default if type(default) is int else 1
    assumed[where] = value
    return value


def _eval_shape(cls: type) -> Callable[[Callable[[], Any]], Any]:
    """`jax.eval_shape`, or Flax NNX's for an NNX module, or Equinox's for an
    `eqx.Module` (whose fields may be functions: an activation, a pool's
    reduction, which `jax.eval_shape` cannot return)."""
    module = type(cls).__module__ + " " + " ".join(c.__module__ for c in cls.__mro__)
    if "flax.nnx" in module:
        from flax import nnx

        return nnx.eval_shape
    if "equinox" in module:
        import equinox as eqx

        return eqx.filter_eval_shape
    return jax.eval_shape


def field_defaults(cls: type) -> dict[str, Any]:
    if is_namedtuple(cls):
        return dict(getattr(cls, "_field_defaults", {}))
    found: dict[str, Any] = {}
    if dataclasses.is_dataclass(cls):
        for field in dataclasses.fields(cls):
            if field.default is not dataclasses.MISSING:
                found[field.name] = field.default
            elif field.default_factory is not dataclasses.MISSING:
                found[field.name] = field.default_factory()
    return found


@dataclasses.dataclass
class Taken:
    """The sizes the constructors of one build took that no annotation of
    the checked function names: unknowns to solve (DESIGN, "an error is
    certain"), beside a size the annotations name in the same call too
    (`FeedForward(d, hidden)` beside `"t d"`: `hidden`, solved where the
    code needs it, said in a note)."""

    unnamed: set[str] = dataclasses.field(default_factory=set)

    def took(self, name: str, declared: bool, new: bool) -> None:
        """A constructor took `name`: one the annotations name (`declared`),
        or not, and then a size first seen here (`new`) or not."""
        if new and not declared:
            self.unnamed.add(name)

    @property
    def unknown(self) -> frozenset[str]:
        return frozenset(self.unnamed)
