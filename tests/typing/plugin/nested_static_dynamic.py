from treespec import Dynamic, Static


def f(x: Static[Dynamic[int]]) -> None: ...  # E: treespec-nested-marker
