from treespec import Donate


def f(x: Donate[str]) -> None: ...  # E: treespec-non-array-dynamic
