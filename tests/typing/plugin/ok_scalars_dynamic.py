import numpy as np

from treespec import Donate, Dynamic


def f(
    a: Dynamic[float], b: Dynamic[int], c: Donate[bool], d: Dynamic[np.float32]
) -> None: ...
