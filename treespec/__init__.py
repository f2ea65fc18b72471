"""treespec: say in type hints which leaves of a pytree are static, and jit by it.

The runtime is loaded on first use of a name, so that `treespec.mypy_plugin`
(and `treespec._model.rules`) can be imported at type-checking time without JAX.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._model.markers import Donate, Dynamic, Static

if TYPE_CHECKING:
    from ._model.errors import SpecError, ValidationError
    from ._model.spec import Spec
    from ._runtime.api import explain, flag_tree, spec_of
    from ._runtime.checked import checked, validate
    from ._runtime.dataclass import dataclass
    from ._runtime.partition import combine, partition
    from ._shapes.check import check_shapes
    from ._shapes.declared import check_with
    from ._shapes.report import ShapeIssue, ShapeReport
    from ._transforms.checkpoint import checkpoint, eval_shape
    from ._transforms.grad import grad, value_and_grad
    from ._transforms.jit import Jitted, jit
    from ._transforms.shard_map import shard_map
    from ._transforms.vmap import pmap, vmap

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
    "check_with",
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
    "explain": "_runtime.api",
    "flag_tree": "_runtime.api",
    "spec_of": "_runtime.api",
    "checked": "_runtime.checked",
    "validate": "_runtime.checked",
    "checkpoint": "_transforms.checkpoint",
    "eval_shape": "_transforms.checkpoint",
    "dataclass": "_runtime.dataclass",
    "SpecError": "_model.errors",
    "ValidationError": "_model.errors",
    "grad": "_transforms.grad",
    "value_and_grad": "_transforms.grad",
    "Jitted": "_transforms.jit",
    "jit": "_transforms.jit",
    "combine": "_runtime.partition",
    "partition": "_runtime.partition",
    "shard_map": "_transforms.shard_map",
    "ShapeIssue": "_shapes.report",
    "ShapeReport": "_shapes.report",
    "check_shapes": "_shapes.check",
    "check_with": "_shapes.declared",
    "Spec": "_model.spec",
    "pmap": "_transforms.vmap",
    "vmap": "_transforms.vmap",
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
