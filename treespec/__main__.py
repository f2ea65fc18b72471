"""`python -m treespec check FILE_OR_PACKAGE...`: see `_shapes/command.py`."""

from __future__ import annotations

import sys

from ._shapes.command import main

if __name__ == "__main__":
    sys.exit(main())
