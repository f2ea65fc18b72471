"""A jaxtyping shape against symbolic dimensions (`jax.export.symbolic_shape`).

jaxtyping compares sizes as integers, so an argument of `jax.export` or of
`eval_shape` over symbolic shapes is matched here instead: fixed sizes are
checked, names are bound to the symbolic expressions that come (`b`, `n + m`)
and compared with JAX's symbolic equality (`==` on its dimension expressions,
which is structural: `n + m == m + n`, but `b == 1` is False, as `b` may be
any size), and expressions (`"n+1"`, `"2*k"`) are evaluated over the sizes
bound so far. The bindings are the call's `Bindings`, shared with the
concrete leaves that jaxtyping checks.

JAX-free: the sizes are whatever the shape holds.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

__all__ = ["is_dim_expr", "is_symbolic", "match_symbolic", "symbolic_conflicts"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_INT = re.compile(r"^[0-9]+$")


def is_symbolic(size: Any) -> bool:
    """Whether one size is symbolic (not a plain integer)."""
    return not isinstance(size, int)


def is_dim_expr(value: Any) -> bool:
    """Whether `value` is one of JAX's symbolic sizes (`jax.export`'s
    dimension expressions), told by its type's name so that this module
    stays JAX-free: it stands for an `int` (`x.shape[0]` passed on as a
    size)."""
    return type(value).__name__ == "_DimExpr"


def _tokens(dim_str: str) -> list[str]:
    return dim_str.replace(",", " ").split()


def _same(a: Any, b: Any) -> bool:
    """Symbolic equality: provably equal for every value of the symbols."""
    try:
        return bool(a == b)
    except Exception:  # a comparison JAX cannot decide is not proven equal
        return False


def _same_sizes(a: Any, b: Any) -> bool:
    if isinstance(a, tuple) or isinstance(b, tuple):
        return (
            isinstance(a, tuple)
            and isinstance(b, tuple)
            and len(a) == len(b)
            and all(_same(x, y) for x, y in zip(a, b))
        )
    return _same(a, b)


def _evaluate(token: str, bound: dict[str, Any]) -> tuple[bool, Any]:
    """(known, size) of an expression token (`n+1`) over the sizes bound."""
    names = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", token))
    if not names <= set(bound) or any(isinstance(bound[n], tuple) for n in names):
        return False, None
    try:
        return True, eval(token, {"__builtins__": {}}, {n: bound[n] for n in names})
    except Exception:  # not an expression of sizes: left unchecked
        return False, None


def match_symbolic(
    dim_str: str, shape: Sequence[Any], bound: dict[str, Any]
) -> tuple[bool, list[tuple[str, Any]]]:
    """Whether `shape` matches `dim_str` given the sizes `bound` so far, and
    the new `(name, size)` bindings it makes (`*name` binds a tuple).

    Two leaves of one call that bind the same new name are compared by the
    caller, which adds each leaf's bindings to `bound` before the next.
    """
    tokens = _tokens(dim_str)
    variadic = [i for i, t in enumerate(tokens) if t == "..." or t.startswith("*")]
    sizes = list(shape)
    pairs: list[tuple[str, Any]]
    if variadic:
        cut = variadic[0]
        head, tail = tokens[:cut], tokens[cut + 1 :]
        if len(sizes) < len(head) + len(tail):
            return False, []
        end = len(sizes) - len(tail)
        pairs = list(zip(head, sizes[:cut]))
        pairs.append((tokens[cut], tuple(sizes[cut:end])))
        pairs += list(zip(tail, sizes[end:]))
    else:
        if len(sizes) != len(tokens):
            return False, []
        pairs = list(zip(tokens, sizes))
    new: dict[str, Any] = {}
    for token, size in pairs:
        ok, binding = _match_one(token, size, {**bound, **new})
        if not ok:
            return False, []
        if binding is not None:
            new.setdefault(*binding)
    return True, list(new.items())


def _match_one(
    token: str, size: Any, bound: dict[str, Any]
) -> tuple[bool, tuple[str, Any] | None]:
    """(ok, new binding) for one token of a shape against one size."""
    if token == "...":
        return True, None
    broadcast = False
    name = token
    while name[:1] in ("*", "#", "?"):
        broadcast = broadcast or name[0] == "#"
        name = name[1:]
    if "=" in name:  # `name=...`: a documented name, the size given after it
        name = name.split("=", 1)[1]
    if isinstance(size, tuple):  # `*name`
        if not _NAME.match(name) or name.startswith("_"):
            return True, None
        if name in bound:
            return _same_sizes(bound[name], size), None
        return True, (name, size)
    if broadcast and _same(size, 1):
        return True, None
    if _INT.match(name):
        return _same(size, int(name)), None
    if name == "_" or name.startswith("_") or token.startswith("?"):
        return True, None
    if _NAME.match(name):
        if name in bound:
            return _same_sizes(bound[name], size), None
        return True, (name, size)
    known, expected = _evaluate(name, bound)
    return (not known or _same(expected, size)), None


def symbolic_conflicts(
    dims: Sequence[tuple[str, Any]], bound: dict[str, Any]
) -> list[str]:
    """The names a concrete leaf's bindings `dims` give another size than a
    symbolic binding made before (jaxtyping, which checked the leaf, knows
    only the concrete ones)."""
    return [
        name
        for name, size in dims
        if name in bound
        and _has_symbol(bound[name])
        and not _same_sizes(bound[name], size)
    ]


def _has_symbol(size: Any) -> bool:
    if isinstance(size, tuple):
        return any(is_symbolic(s) for s in size)
    return is_symbolic(size)
