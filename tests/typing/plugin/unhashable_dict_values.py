import numpy as np

from treespec import Static


def f(x: Static[dict[str, np.ndarray]]) -> None: ...  # E: treespec-unhashable-static
