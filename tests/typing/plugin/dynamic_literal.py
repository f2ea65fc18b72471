from typing import Literal

from treespec import Dynamic


def f(mode: Dynamic[Literal["train", "eval"]]) -> None: ...  # E: treespec-non-array-dynamic
