from treespec import Dynamic


def f(x: Dynamic[str]) -> None: ...  # E: treespec-non-array-dynamic
