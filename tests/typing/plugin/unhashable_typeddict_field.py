from typing import TypedDict

import numpy as np

from treespec import Static


class Config(TypedDict):
    table: Static[np.ndarray]  # E: treespec-unhashable-static
    depth: Static[int]
