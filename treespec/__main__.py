"""`python -m treespec check FILE_OR_PACKAGE...`: see `_shapes/command.py`."""

from __future__ import annotations

import sys

if __name__ == "__main__":
    try:
        from ._shapes.command import main

        status = main()
    except KeyboardInterrupt:  # Ctrl-C while JAX itself is imported
        print("interrupted", file=sys.stderr)
        status = 130
    sys.exit(status)
