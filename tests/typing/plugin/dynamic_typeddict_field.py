from typing import TypedDict

from treespec import Dynamic


class State(TypedDict):
    step: Dynamic[int]
    name: Dynamic[str]  # E: treespec-non-array-dynamic
