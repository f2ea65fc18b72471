from treespec import Dynamic, Static


def f(x: Dynamic[Static[int]]) -> None: ...  # E: treespec-nested-marker
