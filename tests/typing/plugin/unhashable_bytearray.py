from treespec import Static


def f(x: Static[bytearray]) -> None: ...  # E: treespec-unhashable-static
