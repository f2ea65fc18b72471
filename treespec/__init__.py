"""treespec: say in type hints which leaves of a pytree are static, and jit by it."""

from ._api import explain, flag_tree, spec_of
from ._checked import checked, validate
from ._checkpoint import checkpoint, eval_shape
from ._dataclass import dataclass
from ._errors import SpecError, ValidationError
from ._grad import grad, value_and_grad
from ._jit import Jitted, jit
from ._markers import Donate, Dynamic, Static
from ._partition import combine, partition
from ._shard_map import shard_map
from ._spec import Spec
from ._vmap import pmap, vmap

__all__ = [
    "Donate",
    "Dynamic",
    "Jitted",
    "Spec",
    "SpecError",
    "Static",
    "ValidationError",
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

__version__ = "0.1.0"
