"""treespec: say in type hints which leaves of a pytree are static, and jit by it."""

from ._api import explain, flag_tree, spec_of
from ._checked import checked, validate
from ._dataclass import dataclass
from ._errors import SpecError, ValidationError
from ._jit import Jitted, jit
from ._markers import Donate, Dynamic, Static
from ._partition import combine, partition
from ._spec import Spec

__all__ = [
    "Donate",
    "Dynamic",
    "Jitted",
    "Spec",
    "SpecError",
    "Static",
    "ValidationError",
    "checked",
    "combine",
    "dataclass",
    "explain",
    "flag_tree",
    "jit",
    "partition",
    "spec_of",
    "validate",
]

__version__ = "0.1.0"
