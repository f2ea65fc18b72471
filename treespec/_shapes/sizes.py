"""The sizes of a shape check: those a value given binds, by dimension name
(not those its instances bind for themselves),
one JAX symbol per name, in one scope with the constraints given, and the
names' sizes at witnesses of the symbols the constraints leave."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax

from .._model.spec import Node, Param
from .._runtime.checking.dims import bound_dims
from .._runtime.checking.scopes import scopes_of
from .._runtime.planning.resolve import walk_value
from .._runtime.reading.typing_forms import is_jaxtyping_array
from .orders import witnesses

__all__ = [
    "constrained",
    "given_sizes",
    "holds",
    "satisfiable",
    "symbols_for",
]


def given_sizes(params: Sequence[Param], given: Mapping[str, Any]) -> dict[str, int]:
    """The dimension sizes the values `given` for `params` bind, by name, the
    first binding of a name kept (`_bound_by`)."""
    fixed: dict[str, int] = {}
    for param in params:
        if param.name in given:
            bound = _bound_by(given[param.name], param.node, param.name)
            fixed.update((k, v) for k, v in bound.items() if k not in fixed)
    return fixed


def _bound_by(value: Any, node: Node, name: str) -> dict[str, int]:
    """The dimension sizes a value given binds, by name: the concrete leaves
    that jaxtyping annotations describe (the first binding of a name kept),
    but those an instance binds in a scope of its own (`scopes_of`: a
    stack's layer). The arguments built around a given model use them, not
    symbols."""
    infos, _, _ = walk_value(value, node, path=name, argument=name, check=False)
    sizes: dict[str, int] = {}
    leaves = jax.tree_util.tree_leaves(value)
    for info, leaf, scope in zip(infos, leaves, scopes_of(infos)):
        annotation = getattr(info.node, "annotation", None)
        shape = getattr(leaf, "shape", None)
        if scope is not None or not is_jaxtyping_array(annotation) or shape is None:
            continue
        if not all(isinstance(d, int) for d in shape):
            continue
        try:
            dims = bound_dims(annotation, shape)
        except (TypeError, ValueError):  # a shape the annotation does not fit
            continue
        for dim, size in dims:
            if isinstance(size, int):
                sizes.setdefault(dim, size)
    return sizes


def symbols_for(names: Sequence[str], constraints: Sequence[str]) -> dict[str, Any]:
    """One JAX symbol per dimension name, all in one scope with `constraints`."""
    if not names:
        return {}
    symbols = jax.export.symbolic_shape(", ".join(names), constraints=constraints)
    return dict(zip(names, symbols))


def constrained(
    symbols: Mapping[str, Any], names: Sequence[str], constraints: Sequence[str] = ()
) -> tuple[list[str], Callable[[Mapping[str, int]], dict[str, int]]]:
    """Where constraints are given, the symbols they leave free (`d == 4*k`
    leaves `k`) and each name's size at values of those, so that witnesses
    satisfy the constraints; the names themselves where none relate them.
    The free names come in an order whose witnesses (`orders.witnesses`)
    satisfy every constraint, an ordering's too (`m <= floordiv(n, 2) + 1`
    gives `m` a smaller witness than `n`), where one tried does
    (`satisfiable`)."""
    free, at = _free(symbols, names)
    return _ordered(free, at, constraints) or free, at


def satisfiable(
    symbols: Mapping[str, Any], names: Sequence[str], constraints: Sequence[str]
) -> bool:
    """Whether witnesses of `names` that satisfy `constraints` are found."""
    return _ordered(*_free(symbols, names), constraints) is not None


def _ordered(
    free: list[str],
    at: Callable[[Mapping[str, int]], dict[str, int]],
    constraints: Sequence[str],
) -> list[str] | None:
    """An order of `free` whose witnesses satisfy every constraint, or None."""
    for order in (free, free[::-1], _by_sides(free, constraints)):
        if all(holds(constraints, {**w, **at(w)}) for w in witnesses(order)):
            return order
    return None


def _free(
    symbols: Mapping[str, Any], names: Sequence[str]
) -> tuple[list[str], Callable[[Mapping[str, int]], dict[str, int]]]:
    if not all(
        hasattr(symbols.get(n), "_evaluate") and hasattr(symbols.get(n), "get_vars")
        for n in names
    ):
        return list(names), dict  # no symbols, or a JAX that cannot evaluate
    free: dict[str, None] = {}
    for name in names:
        free.update(dict.fromkeys(sorted(symbols[name].get_vars())))

    def at(values: Mapping[str, int]) -> dict[str, int]:
        sizes = {}
        for name in names:
            sizes[name] = int(symbols[name]._evaluate(dict(values)))
        return sizes

    return list(free), at


#: What a constraint in JAX's syntax is read with at concrete sizes.
_OPERATORS: dict[type, Callable[[int, int], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.GtE: operator.ge,
    ast.LtE: operator.le,
    ast.Eq: operator.eq,
}
_CALLS: dict[str, Callable[..., int]] = {
    "floordiv": operator.floordiv,
    "mod": operator.mod,
    "max": max,
    "min": min,
    "non_negative": lambda v: max(v, 0),
}


def holds(constraints: Sequence[str], sizes: Mapping[str, int]) -> bool:
    """Whether every constraint (JAX's syntax: `a >= b`, `a <= b`, `a == b`
    of sums, products, `floordiv`, `mod`, `max`, `min`) holds at `sizes`;
    one that names a size not among them, or that cannot be read, does not."""

    def value(node: ast.AST) -> Any:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            return sizes[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        if isinstance(node, ast.BinOp):
            return _OPERATORS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            return _CALLS[node.func.id](*map(value, node.args))
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            return _OPERATORS[type(node.ops[0])](
                value(node.left), value(node.comparators[0])
            )
        raise KeyError(node)

    try:
        return all(
            value(ast.parse(c.strip(), mode="eval").body) is True for c in constraints
        )
    except (KeyError, SyntaxError, TypeError, ZeroDivisionError):
        return False


def _by_sides(names: Sequence[str], constraints: Sequence[str]) -> list[str]:
    """`names`, those on a smaller side of an ordering first (`m` of
    `m <= floordiv(n, 2) + 1`), those on a larger side last (`n`)."""
    score = dict.fromkeys(names, 0)
    for constraint in constraints:
        try:
            node = ast.parse(constraint.strip(), mode="eval").body
        except SyntaxError:
            continue
        if not isinstance(node, ast.Compare) or not isinstance(
            node.ops[0], (ast.LtE, ast.GtE)
        ):
            continue
        sides = [node.left, node.comparators[0]]
        small, large = sides if isinstance(node.ops[0], ast.LtE) else sides[::-1]
        for side, step in ((small, -1), (large, 1)):
            for name in {n.id for n in ast.walk(side) if isinstance(n, ast.Name)}:
                if name in score:
                    score[name] += step
    return sorted(names, key=score.__getitem__)
