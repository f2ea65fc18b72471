"""The floors pyproject.toml declares, as pins: the floor CI cell installs these.

`python .ci/floors.py pins` prints one `name==version` a line for every
runtime dependency and the `mypy` extra (the floor cell installs them first,
then the dev extra under them as constraints, so that pip does not backtrack);
`python .ci/floors.py python` prints the lowest Python `requires-python`
allows (`3.11`). Reading the floors from pyproject.toml keeps the declared floor
and the tested floor one number.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def floor_pins(project: dict[str, object]) -> list[str]:
    deps = list(project["dependencies"])  # type: ignore[call-overload]
    deps += project["optional-dependencies"]["mypy"]  # type: ignore[index]
    pins = []
    for dep in deps:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*>=\s*([0-9][0-9A-Za-z.]*)", dep)
        if match is None:
            raise SystemExit(f"{PYPROJECT.name}: {dep!r} has no plain >= floor")
        pins.append(f"{match[1]}=={match[2]}")
    return pins


def lowest_python(project: dict[str, object]) -> str:
    match = re.fullmatch(r">=\s*(3\.\d+)", str(project["requires-python"]))
    if match is None:
        raise SystemExit(f"{PYPROJECT.name}: requires-python is not '>=3.N'")
    return match[1]


def main(what: str) -> None:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    if what == "pins":
        print("\n".join(floor_pins(project)))
    elif what == "python":
        print(lowest_python(project))
    else:
        raise SystemExit("usage: floors.py pins|python")


if __name__ == "__main__":
    main(*sys.argv[1:])
