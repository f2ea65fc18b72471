"""mypy's own errors on Union/Optional stay as they are with the plugin on
(the same file is in tests/typing/plain)."""

from typing import Optional, Union


def f(x: Optional) -> None: ...  # E: valid-type
def g(x: Optional[int, str]) -> None: ...  # E: valid-type
def h(x: Union[int]) -> None: ...
