from treespec import Dynamic


def f(names: Dynamic[dict[str, str]]) -> None: ...  # E: treespec-non-array-dynamic
