from treespec import Static


def f(x: Static[set[int]]) -> None: ...  # E: treespec-unhashable-static
