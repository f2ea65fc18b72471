from typing import Optional, Union

from treespec import Static


def f(
    a: Optional[Static[int]],
    b: Union[Static[int], Static[str]],
    c: Static[Union[int, str]],
    d: Static[int | str],
    e: Union[Static[int], None],
) -> None: ...
