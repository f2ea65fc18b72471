from treespec import Dynamic


def f(x: Dynamic[bytes]) -> None: ...  # E: treespec-non-array-dynamic
