"""`python -m treespec check FILE_OR_PACKAGE...`: see `_shapes/command.py`.

Ctrl-C ends the command at once, with status 130 and one line, wherever it
comes. The command owns SIGINT from its first line (it is a process of its
own, not a library's import): a `KeyboardInterrupt` raised where Python
ignores exceptions, such as JAX's garbage-collection callback that runs all
through JAX's import, would be lost, and the check would go on as if no key
had been pressed.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType


def _interrupted(signum: int, frame: FrameType | None) -> None:
    """Exit 130 now: what was printed stays, nothing unwinds."""
    try:
        sys.stdout.flush()
    finally:
        os.write(2, b"interrupted\n")
        os._exit(130)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, _interrupted)
    from ._shapes.command import main

    sys.exit(main())
