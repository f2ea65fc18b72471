"""The plugin's error codes, each of which a user can silence alone.

They are listed, with what each reports, in the package's docstring
(`treespec/mypy_plugin/__init__.py`).
"""

from __future__ import annotations

from typing import Final

from mypy.errorcodes import ErrorCode

UNHASHABLE_STATIC: Final = ErrorCode(
    "treespec-unhashable-static", "A Static leaf type is not hashable", "treespec"
)
NON_ARRAY_DYNAMIC: Final = ErrorCode(
    "treespec-non-array-dynamic", "A Dynamic leaf type cannot be traced", "treespec"
)
NESTED_MARKER: Final = ErrorCode(
    "treespec-nested-marker", "A marker directly inside another", "treespec"
)
CONFLICTING_UNION: Final = ErrorCode(
    "treespec-conflicting-union", "Union members disagree on markers", "treespec"
)
BARE_MARKER: Final = ErrorCode(
    "treespec-bare-marker", "A marker without its type argument", "treespec"
)
BAD_FLAGS: Final = ErrorCode(
    "treespec-bad-flags", "static_flags that the function cannot take", "treespec"
)
BAD_DEFAULT: Final = ErrorCode(
    "treespec-bad-default", "An unknown default= policy", "treespec"
)
HELD_FIELD: Final = ErrorCode(
    "treespec-held-field",
    "A marker on a field the class holds static (or tells NNX is data)",
    "treespec",
)
UNFOLLOWED_CLASS: Final = ErrorCode(
    "treespec-unfollowed-class",
    "A marker on a field of a class that flattens itself",
    "treespec",
)
MUTABLE_STATIC: Final = ErrorCode(
    "treespec-mutable-static",
    "A treespec.dataclass field Static[...] of a mutable container",
    "treespec",
)
