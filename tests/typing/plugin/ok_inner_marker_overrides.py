import jax

from treespec import Dynamic, Static


def f(
    x: Static[dict[str, Dynamic[jax.Array]]], y: Dynamic[list[Static[str]]]
) -> None: ...
