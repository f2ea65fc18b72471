"""Check what the built sdist and wheel hold: python .ci/check_artifacts.py DIST.

The wheel holds only the `treespec` package (with `py.typed`) and its metadata.
The sdist holds what a downstream packager needs: the package, the license, the
README, the changelog, and the tests with the docs and examples they execute.
Exits non-zero, listing every problem, when either is wrong.
"""

from __future__ import annotations

import ast
import email
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NAME = "jax-treespec"
STEM = NAME.replace("-", "_")
CACHES = ("__pycache__/", ".pyc", ".pyo", ".mypy_cache", ".pytest_cache")


def _version() -> str:
    """treespec.__version__, read from the source without importing it."""
    tree = ast.parse((ROOT / "treespec" / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets
        ):
            return str(ast.literal_eval(node.value))
    raise SystemExit("no __version__ in treespec/__init__.py")


def _tracked(*folders: str) -> set[str]:
    """Files git tracks under `folders` (the checkout's real content)."""
    out = subprocess.run(
        ["git", "ls-files", "--", *folders],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return set(out.split())


def _one(dist: Path, pattern: str) -> Path:
    found = sorted(dist.glob(pattern))
    if len(found) != 1:
        raise SystemExit(f"expected one {pattern} in {dist}, found {found}")
    return found[0]


def check_wheel(path: Path, version: str) -> list[str]:
    problems = []
    info = f"{STEM}-{version}.dist-info/"
    with zipfile.ZipFile(path) as wheel:
        members = set(wheel.namelist())
        metadata = email.message_from_bytes(wheel.read(f"{info}METADATA"))
    package = _tracked("treespec")
    missing = sorted(package - members)
    if missing:
        problems.append(f"wheel lacks {missing}")
    if "treespec/py.typed" not in members:
        problems.append("wheel lacks treespec/py.typed")
    extra = sorted(m for m in members if m not in package and not m.startswith(info))
    if extra:
        problems.append(f"wheel holds more than the package: {extra}")
    if f"{info}licenses/LICENSE" not in members:
        problems.append("wheel metadata lacks the license file")
    problems += _metadata(metadata, version, "wheel")
    return problems


def check_sdist(path: Path, version: str) -> list[str]:
    problems = []
    top = f"{STEM}-{version}/"
    with tarfile.open(path) as sdist:
        names = [m.name for m in sdist.getmembers() if m.isfile()]
        pkg_info = sdist.extractfile(f"{top}PKG-INFO")
        assert pkg_info is not None
        metadata = email.message_from_bytes(pkg_info.read())
    outside = [n for n in names if not n.startswith(top)]
    if outside:
        problems.append(f"sdist members outside {top}: {outside}")
    members = {n[len(top) :] for n in names if n.startswith(top)}
    wanted = {"LICENSE", "README.md", "CHANGELOG.md", "CONTRIBUTING.md"}
    wanted |= {"pyproject.toml", "PKG-INFO"}
    wanted |= _tracked("treespec", "tests", "docs", "examples")
    missing = sorted(wanted - members)
    if missing:
        problems.append(f"sdist lacks {missing}")
    cached = sorted(m for m in members if any(c in m for c in CACHES))
    if cached:
        problems.append(f"sdist holds caches: {cached}")
    problems += _metadata(metadata, version, "sdist")
    return problems


def _metadata(metadata: email.message.Message, version: str, what: str) -> list[str]:
    problems = []
    if metadata["Name"] != NAME:
        problems.append(f"{what} Name is {metadata['Name']!r}, not {NAME!r}")
    if metadata["Version"] != version:
        problems.append(f"{what} Version {metadata['Version']} != {version}")
    if "Typing :: Typed" not in (metadata.get_all("Classifier") or []):
        problems.append(f"{what} lacks the 'Typing :: Typed' classifier")
    expression = metadata["License-Expression"]
    if expression != "Apache-2.0":
        problems.append(f"{what} License-Expression is {expression!r}, not Apache-2.0")
    return problems


def main() -> None:
    dist = Path(sys.argv[1])
    version = _version()
    wheel = _one(dist, f"{STEM}-{version}-py3-none-any.whl")
    sdist = _one(dist, f"{STEM}-{version}.tar.gz")
    problems = check_wheel(wheel, version) + check_sdist(sdist, version)
    for problem in problems:
        print(f"artifact check: {problem}", file=sys.stderr)
    if problems:
        raise SystemExit(1)
    print(f"artifacts OK: {wheel.name}, {sdist.name}")


if __name__ == "__main__":
    main()
