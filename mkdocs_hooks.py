"""MkDocs hook: the site's footer shows the version of this checkout.

The version is written once, in treespec/__init__.py (the package build reads
it from there too), so the site cannot show another.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any


def version(root: Path) -> str:
    """`__version__` of treespec/__init__.py, read without importing it."""
    text = (root / "treespec" / "__init__.py").read_text()
    found = re.search(r'^__version__ = "([^"]+)"$', text, flags=re.M)
    if found is None:
        raise ValueError("treespec/__init__.py sets no __version__")
    return found.group(1)


def on_config(config: Any) -> Any:
    root = Path(config.config_file_path).parent
    config.copyright = f"treespec {version(root)} · Apache-2.0"
    return config
