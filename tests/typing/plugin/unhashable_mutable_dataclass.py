import dataclasses

from treespec import Static


@dataclasses.dataclass
class Settings:
    depth: int


def f(x: Static[Settings]) -> None: ...  # E: treespec-unhashable-static
