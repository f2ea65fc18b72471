"""Run the benchmarks once and write their tables into the pages that show them.

Run: python benchmarks/report.py [--quick] [--note TEXT]

Runs `dispatch.py`, `validation.py`, `plot_scaling.py` (which also draws
docs/images/scaling.png) and `long_life.py`, one after the other, each in its
own process, and
writes what they print, with the machine and its load, between the markers
`<!-- benchmarks:start -->` and `<!-- benchmarks:end -->` of
benchmarks/README.md and docs/performance.md: one run, the same tables on both
pages (tests/test_docs.py compares them), never numbers copied by hand.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PAGES = (HERE / "README.md", ROOT / "docs" / "performance.md")
START = "<!-- benchmarks:start -->"
END = "<!-- benchmarks:end -->"
SCRIPTS = ("dispatch.py", "validation.py", "plot_scaling.py", "long_life.py")


def _run(script: str, quick: bool) -> str:
    command = [sys.executable, str(HERE / script)]
    if quick and script != "plot_scaling.py":
        command.append("--quick")
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return done.stdout


def _tables(output: str) -> tuple[str, str]:
    """The machine line and the tables of one script's output, headings one
    level down (they sit under the script's own heading)."""
    machine = ""
    kept = []
    for line in output.splitlines():
        if line.startswith("machine: "):
            machine = line.removeprefix("machine: ")
        elif line.startswith("# "):
            continue  # the script's title: the page gives its own
        elif line.startswith("#"):
            kept.append("#" + line)
        else:
            kept.append(line)
    return machine, "\n".join(kept).strip()


#: The targets the ratios are held to: (ratio, "<=" or ">=", bound).
TARGETS = (
    ("S1 treespec.jit (hints) / jax.jit", "<=", 1.25),
    ("S1 treespec.jit (static_flags) / jax.jit", "<=", 1.25),
    ("S1 equinox.filter_jit / treespec.jit (hints)", ">=", 3.5),
    ("S2 (1000 leaves) treespec.jit / jax.jit", "<=", 1.1),
    ("S3 treespec.jit / jax.jit", "<=", 1.05),
    ("first call treespec.jit / jax.jit", "<=", 1.2),
    ("S4 treespec.jit / jax.jit", "<=", 1.3),
    ("S4 equinox.filter_jit / treespec.jit", ">=", 3.5),
    ("method treespec.jit / jax.jit", "<=", 1.5),
    ("dropped closures: memory treespec.jit / jax.jit", "<=", 1.25),
    ("dropped closures: traces treespec.jit / jax.jit", "==", 1.0),
    ("static churn: memory treespec.jit / jax.jit", "<=", 1.25),
    ("static churn: traces treespec.jit / jax.jit", "==", 1.0),
)
_RATIO = re.compile(r"^\| (.+?) \| ([\d.]+) \|$", flags=re.M)


def _targets(output: str) -> str:
    """The targets table: each ratio of the run (`dispatch.py`'s and
    `long_life.py`'s tables) against its bound."""
    ratios = {name: float(value) for name, value in _RATIO.findall(output)}
    rows = [
        "### Targets",
        "",
        "| ratio | target | this run | |",
        "| --- | --- | --- | --- |",
    ]
    for name, op, bound in TARGETS:
        if name not in ratios:
            continue
        value = ratios[name]
        if op == "==":
            met = value == bound
        else:
            met = value <= bound if op == "<=" else value >= bound
        verdict = "met" if met else "**not met**"
        rows.append(f"| {name} | {op} {bound} | {value:.2f} | {verdict} |")
    return "\n".join(rows)


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.2f} (1 min), {five:.2f} (5 min)"


def report(quick: bool, note: str) -> str:
    """The generated section: the machine, its load, every script's tables."""
    before = _load()
    parts, machine, measured = [], "", []
    for script in SCRIPTS:
        machine, tables = _tables(_run(script, quick))
        parts.append(f"### {script}\n\n{tables}")
        if script in ("dispatch.py", "long_life.py"):
            measured.append(tables)
    parts.insert(0, _targets("\n".join(measured)))
    after = _load()
    day = datetime.date.today().isoformat()
    head = (
        f"Run on {day} with `python benchmarks/report.py"
        f"{' --quick' if quick else ''}`, on {machine}; "
        f"{os.cpu_count()} CPU cores, load average {before} before the run and "
        f"{after} after it."
    )
    if note:
        head += f" {note}"
    body = "\n\n".join([head, *parts])
    return f"{START}\n\n{body}\n\n{END}"


def write(section: str, page: Path) -> None:
    text = page.read_text()
    pattern = re.compile(re.escape(START) + ".*?" + re.escape(END), flags=re.S)
    if not pattern.search(text):
        raise SystemExit(f"{page} has no {START} ... {END} section")
    page.write_text(pattern.sub(lambda _: section, text))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    parser.add_argument("--note", default="", help="said of the run (the load)")
    opts = parser.parse_args()
    section = report(opts.quick, opts.note)
    for page in PAGES:
        write(section, page)
    print(section)


if __name__ == "__main__":
    main()
