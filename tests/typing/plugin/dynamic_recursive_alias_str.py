"""A bad leaf inside a recursive alias is still found."""

from typing import Union

from treespec import Dynamic

StrTree = Union[str, list["StrTree"]]


def f(t: Dynamic[StrTree]) -> None: ...  # E: treespec-non-array-dynamic
