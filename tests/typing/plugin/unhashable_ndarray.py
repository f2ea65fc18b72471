import numpy as np

from treespec import Static


def f(x: Static[np.ndarray]) -> None: ...  # E: treespec-unhashable-static
