"""The distribution: its name, its one version, and the install lines naming it.

`treespec` on PyPI is an unrelated project; ours is `jax-treespec`, imported as
`treespec`. The version is written once, in treespec/__init__.py, and the
installed metadata is built from it.
"""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

import pytest

import treespec

ROOT = Path(__file__).resolve().parent.parent
DISTRIBUTION = "jax-treespec"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_version_is_the_installed_metadata() -> None:
    try:
        installed = importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        pytest.fail(f"{DISTRIBUTION} is not installed: python -m pip install -e .")
    assert treespec.__version__ == installed


def test_version_is_written_once() -> None:
    tomllib = pytest.importorskip("tomllib")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = pyproject["project"]
    assert project["name"] == DISTRIBUTION
    assert "version" not in project and "version" in project["dynamic"]
    # The build reads it from the package's source (hatchling's version source).
    assert pyproject["tool"]["hatch"]["version"] == {"path": "treespec/__init__.py"}


def test_every_pip_install_names_the_distribution() -> None:
    install = re.compile(r"pip install((?:\s+-\S+)*)\s+(\S+)")
    for page in PAGES:
        for flags, target in install.findall(page.read_text()):
            if "-e" in flags.split():
                continue  # from the checkout
            name = re.split(r"[\[<>=!~ ]", target.strip("'\""), maxsplit=1)[0]
            if name in (".", "jax"):
                continue  # from a source tree; JAX for an accelerator
            assert name == DISTRIBUTION, f"{page.name}: pip install {target}"


def test_readme_says_the_import_name() -> None:
    readme = (ROOT / "README.md").read_text()
    assert f"python -m pip install {DISTRIBUTION}" in readme
    assert "the import name is `treespec`" in readme


def test_docs_header_has_no_placeholder() -> None:
    assert "example.invalid" not in (ROOT / "mkdocs.yml").read_text()
