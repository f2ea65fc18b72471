from treespec import Static


class Key:
    __hash__ = None  # type: ignore[assignment]


def f(k: Static[Key]) -> None: ...  # E: treespec-unhashable-static
