from typing import TypedDict

from treespec import Static


class Config(TypedDict):
    depth: Static[Static[int]]  # E: treespec-nested-marker
