from treespec import Static


def f(x: Static[set[int]]) -> None: ...  # type: ignore[treespec-unhashable-static]
