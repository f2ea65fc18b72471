from typing import Literal

from treespec import Dynamic


def f(mode: Dynamic[Literal["train", "eval"]]) -> None: ...  # E: treespec-non-array-dynamic


def g(step: Dynamic[Literal[0, 1, 2]]) -> None: ...  # numbers: traced, as at run time
