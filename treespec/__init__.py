"""treespec: say in type hints which leaves of a pytree are static, and jit by it.

The runtime is loaded on first use of a name, so that `treespec.mypy_plugin`
(and `treespec._rules`) can be imported at type-checking time without JAX.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._markers import Donate, Dynamic, Static

if TYPE_CHECKING:
    from ._api import explain, flag_tree, spec_of
    from ._checked import checked, validate
    from ._checkpoint import checkpoint, eval_shape
    from ._dataclass import dataclass
    from ._errors import SpecError, ValidationError
    from ._grad import grad, value_and_grad
    from ._jit import Jitted, jit
    from ._partition import combine, partition
    from ._shape_report import ShapeIssue, ShapeReport
    from ._shapes import check_shapes
    from ._shard_map import shard_map
    from ._spec import Spec
    from ._vmap import pmap, vmap

__all__ = [
    "Donate",
    "Dynamic",
    "Jitted",
    "ShapeIssue",
    "ShapeReport",
    "Spec",
    "SpecError",
    "Static",
    "ValidationError",
    "check_shapes",
    "checked",
    "checkpoint",
    "combine",
    "dataclass",
    "eval_shape",
    "explain",
    "flag_tree",
    "grad",
    "jit",
    "partition",
    "pmap",
    "shard_map",
    "spec_of",
    "validate",
    "value_and_grad",
    "vmap",
]

# The one place the version is written: pyproject.toml reads it from here
# (`[tool.setuptools.dynamic]`), so the installed metadata of jax-treespec
# agrees, and a source checkout without install still has it.
__version__ = "0.1.0"

_WHERE = {
    "explain": "_api",
    "flag_tree": "_api",
    "spec_of": "_api",
    "checked": "_checked",
    "validate": "_checked",
    "checkpoint": "_checkpoint",
    "eval_shape": "_checkpoint",
    "dataclass": "_dataclass",
    "SpecError": "_errors",
    "ValidationError": "_errors",
    "grad": "_grad",
    "value_and_grad": "_grad",
    "Jitted": "_jit",
    "jit": "_jit",
    "combine": "_partition",
    "partition": "_partition",
    "shard_map": "_shard_map",
    "ShapeIssue": "_shape_report",
    "ShapeReport": "_shape_report",
    "check_shapes": "_shapes",
    "Spec": "_spec",
    "pmap": "_vmap",
    "vmap": "_vmap",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'treespec' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
