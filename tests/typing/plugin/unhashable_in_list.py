from treespec import Static


def f(x: Static[list[set[str]]]) -> None: ...  # E: treespec-unhashable-static
