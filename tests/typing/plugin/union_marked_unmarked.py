from typing import Union

from treespec import Static


def f(x: Union[Static[int], str]) -> None: ...  # E: treespec-conflicting-union
