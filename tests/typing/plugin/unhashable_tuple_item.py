from treespec import Static


def f(x: Static[tuple[int, bytearray]]) -> None: ...  # E: treespec-unhashable-static
