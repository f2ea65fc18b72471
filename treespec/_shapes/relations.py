"""What a shape check takes of the names that instances bind in their own
scopes (`scopes.py`): the relations a failure shows the code needs of them
(adopted, the run made again, said in a note), and the sizes a value given
binds, the call's apart from its instances'."""

from __future__ import annotations

import operator
import re
from collections.abc import Collection
from typing import Any

from jax.tree_util import tree_leaves

from .._model.spec import Node
from .._runtime.dims import bound_dims
from .._runtime.resolve import walk_value
from .._runtime.typing_forms import is_jaxtyping_array
from .._runtime.validate import scopes_of
from .outcomes import unequal_sizes
from .scopes import SCOPED, InstanceScopes

__all__ = ["Own", "given_sizes", "relations_needed", "relations_text", "with_relations"]

#: The sizes instances of a given value bind in their own scopes, each with
#: the first name and instance that bound it.
Own = dict[int, str]


def given_sizes(value: Any, node: Node, name: str) -> tuple[dict[str, int], Own]:
    """The dimension sizes a value given binds, by name: the concrete leaves
    that jaxtyping annotations describe (the first binding of a name kept).
    The arguments built around a given model use them, not symbols. Those an
    instance binds in its own scope (`scopes_of`) are not the call's: they
    come second, by size (`2`: `in of model.layers[0]`)."""
    infos, _, _ = walk_value(value, node, path=name, argument=name, check=False)
    sizes: dict[str, int] = {}
    own: Own = {}
    for info, leaf, scope in zip(infos, tree_leaves(value), scopes_of(infos)):
        annotation = getattr(info.node, "annotation", None)
        shape = getattr(leaf, "shape", None)
        if not is_jaxtyping_array(annotation) or shape is None:
            continue
        if not all(isinstance(d, int) for d in shape):
            continue
        try:
            dims = bound_dims(annotation, shape)
        except (TypeError, ValueError):  # a shape the annotation does not fit
            continue
        for dim, size in dims:
            if isinstance(size, int) and scope is None:
                sizes.setdefault(dim, size)
            elif isinstance(size, int):  # an instance's own (a stack's layer)
                own.setdefault(size, f"{dim} of {scope[1]}")
    return sizes, own


#: What a size JAX writes may use besides names and numbers.
_OPERATIONS = {"floordiv": operator.floordiv, "mod": operator.mod}


def relations_needed(
    text: str, free: Collection[str] = (), given: Own | None = None
) -> dict[str, str]:
    """What a failure says the code needs of an instance's own names: each
    one JAX found unequal to another size (`got (in__1,) and (d,)`: in__1
    must be d), by name; and of a `free` name of the call, the size an
    instance of a value `given` binds that it met (`(2,) and (d,)`)."""
    found: dict[str, str] = {}
    for a, b in [*unequal_sizes(text), *_annotation_against_shape(text)]:
        for name, other in ((a, b), (b, a)):
            if name in found:
                continue
            if SCOPED.fullmatch(name) or (
                name in free and other.isdigit() and int(other) in (given or {})
            ):
                found[name] = other
                break
    return found


#: A `ValidationError`'s `expected Float[Array, 'b n'] ..., got float32[b,m]`.
_EXPECTED_GOT = re.compile(
    r"expected \w+\[[\w.]+, '([^']*)'\][^\n]*?, got \w+\[([^\]]*)\]"
)


def _annotation_against_shape(text: str) -> list[tuple[str, str]]:
    """The dimensions a `ValidationError` says differ: each of the
    annotation's plain dimensions (a name, a number) against the value's."""
    pairs = []
    for written, shape in _EXPECTED_GOT.findall(text):
        tokens, sizes = written.split(), [d.strip() for d in shape.split(",")]
        if len(tokens) != len(sizes) or any(
            not t.isidentifier() and not t.isdigit() for t in tokens
        ):
            continue
        pairs += [(t, s) for t, s in zip(tokens, sizes) if t != s]
    return pairs


def with_relations(sizes: dict[str, Any], relations: dict[str, str]) -> dict[str, Any]:
    """`sizes` with each name a relation holds at the size it says (in the
    order they were found), those whose other side cannot be read left."""
    sizes = dict(sizes)
    for name, other in relations.items():
        scope = {**_OPERATIONS, **sizes}
        try:
            sizes[name] = eval(other, {"__builtins__": {}}, scope)
        except Exception:
            continue
    return sizes


def relations_text(
    relations: dict[str, str], scopes: InstanceScopes, given: Own
) -> str:
    """The note for the relations a check assumed of instances' own names."""
    shown = ", ".join(
        scopes.readable(f"{name} == {other}")
        + (f" ({given[int(other)]})" if other.isdigit() and int(other) in given else "")
        for name, other in relations.items()
    )
    return (
        "each instance of a class the call holds several times binds its own "
        f"dimension names, so the check took what the code needs of them: {shown}"
    )
