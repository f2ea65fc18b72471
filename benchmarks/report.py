"""Run the benchmarks once and write their tables into the pages that show them.

Run: python benchmarks/report.py [--quick] [--note TEXT]
     python benchmarks/report.py --render   (the recorded run again, no timing)

Runs `dispatch.py`, `validation.py` and `plot_scaling.py`, one after the other,
each in its own process, and records what they print, with the machine and
its load, in benchmarks/latest-run.json. From that record it writes the
section between the markers `<!-- benchmarks:start -->` and
`<!-- benchmarks:end -->` of benchmarks/README.md and docs/performance.md
(one run, the same tables on both pages, which tests/test_docs.py compares;
never numbers copied by hand) and draws docs/images/scaling.png and its dark
variant, scaling-dark.png. `--render` rewrites the pages and the plots from
the record: for a change of layout or wording, not of numbers.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PAGES = (HERE / "README.md", ROOT / "docs" / "performance.md")
RECORD = HERE / "latest-run.json"
IMAGES = ROOT / "docs" / "images"
START = "<!-- benchmarks:start -->"
END = "<!-- benchmarks:end -->"


@dataclass(frozen=True)
class Part:
    """One script's part of the page: the heading a reader sees, and a line
    that says what its tables measure."""

    script: str
    heading: str
    intro: str


PARTS = (
    Part(
        "dispatch.py",
        "A call on a cache hit",
        "Each table times one call shape (the scenarios S1-S4 above) with "
        "every contender; the last column is the time over the first row's.",
    ),
    Part(
        "validation.py",
        "What validation costs on a cache hit",
        "The same call with treespec's validation on and off, and the usual "
        "jaxtyping + beartype wrapper around `jax.jit`, which checks every "
        "call.",
    ),
    Part(
        "plot_scaling.py",
        "Time against the number of leaves",
        "The numbers behind the plot above.",
    ),
)

#: Where the long-life figures go (`benchmarks/long_life.py`: memory and
#: per-call time over a long run); the section says so until that script
#: records its part.
LONG_LIFE = Part(
    "long_life.py",
    "Over a long run",
    "Memory growth and traces over a long run, for functions made and dropped "
    "(a sweep, a notebook) and for ever new static values past the key bound. "
    "Each contender runs each scenario 3 times, each time in a fresh process: "
    "the memory shown is the growth of resident memory after gc, the median "
    "of the 3 (one run varies by about half a MB), the counts the largest.",
)


#: What each long-run scenario does and how to read its row, by the words its
#: table's heading holds (`long_life.py`'s docstring has the details).
SCENARIOS = (
    (
        "dropped closures",
        "Each function is a closure over an array of its own (256 KB: a "
        "sweep's step per trial, a notebook cell run again), jitted, called "
        "once with a static config (a frozen dataclass, 7 distinct values "
        "among them) and dropped. The counts are what is still reachable "
        "after gc. `jax.jit` and `treespec.jit` release each function with "
        "its array; the configs alive are the first of each equal value, "
        "which JAX's own caches keep: 6 of the 7, because the seventh value's "
        "first object is the one of the warm-up call before the count, which "
        "is not counted. `equinox.filter_jit` still holds every "
        "function it jitted, and with each its array and its compiled "
        "program: its row grows with the number of functions.",
    ),
    (
        "static churn",
        "One function called with ever new static values: each distinct "
        "`Static[int]` value, cycled through 4 times, with treespec's bound "
        "on static keys set below their number. Each value is a program of "
        "its own, compiled once and kept by JAX's cache under every "
        "contender: the memory, about the same in every row, is those "
        "programs. Past its bound treespec still calls what is compiled: no "
        "value is traced twice, as with `jax.jit`.",
    ),
    (
        "bound methods",
        "Each model holds 256 KB of its own; its method is jitted as it is "
        "(`jit(model.apply)`, a model per trial), called once and dropped "
        "with the model. The count is the models still reachable after gc.",
    ),
)


def _scenarios(tables: str) -> str:
    """The long-run tables with each scenario's sentence under its heading."""
    for words, text in SCENARIOS:
        tables = re.sub(
            rf"^(#### [^\n]*{re.escape(words)}[^\n]*\n)",
            lambda found: f"{found.group(1)}\n{text}\n",  # noqa: B023
            tables,
            flags=re.M,
        )
    return tables


@dataclass(frozen=True)
class Target:
    """A ratio the run is held to, and what a reader is told if it is missed:
    why, and which two rows of which table give its cost in µs."""

    ratio: str
    op: str
    bound: float
    table: str
    slow: str
    fast: str
    why: str


#: Targets of `long_life.py`'s ratios (no µs cost: they are memory and counts).
_LONG_LIFE_WHY = (
    "treespec keeps more alive than `jax.jit` over a long run: see the tables "
    "below and Troubleshooting's 'Memory grows in a long sweep or service'."
)

TARGETS = (
    Target(
        "S1 treespec.jit (hints) / jax.jit",
        "<=",
        1.25,
        "S1: config + params",
        "treespec.jit (hints)",
        "jax.jit",
        "the split of a small config and the key it makes are a few µs of "
        "Python that `jax.jit` does not do; within run-to-run noise of the "
        "target (about ±0.05 on this machine).",
    ),
    Target(
        "S1 treespec.jit (static_flags) / jax.jit",
        "<=",
        1.25,
        "S1: config + params",
        "treespec.jit (static_flags)",
        "jax.jit",
        "as for the hints: the same split, read from a flag tree.",
    ),
    Target(
        "S1 equinox.filter_jit / treespec.jit (hints)",
        ">=",
        3.5,
        "S1: config + params",
        "equinox.filter_jit",
        "treespec.jit (hints)",
        "Equinox's per-call work is measured, not ours: a missed target here "
        "is a faster filter_jit or a slower treespec.jit.",
    ),
    Target(
        "S2 (1000 leaves) treespec.jit / jax.jit",
        "<=",
        1.1,
        "S2: 1000 dynamic leaves + 100 static",
        "treespec.jit (hints)",
        "jax.jit",
        "with many leaves the split costs per leaf, as JAX's own flatten does.",
    ),
    Target(
        "S3 treespec.jit / jax.jit",
        "<=",
        1.05,
        "S3: chain of 200 matmul steps (per step)",
        "treespec.jit",
        "jax.jit",
        "each of the 200 steps pays a call's overhead; the chain's samples "
        "vary by about ±15% on this machine, so one run says little.",
    ),
    Target(
        "first call treespec.jit / jax.jit",
        "<=",
        1.2,
        "First call (trace + compile)",
        "treespec.jit",
        "jax.jit",
        "the first call resolves the spec and validates the arguments once.",
    ),
    Target(
        "S4 treespec.jit / jax.jit",
        "<=",
        1.3,
        "S4: 12 register_dataclass layers + TypedDict config",
        "treespec.jit (hints)",
        "jax.jit",
        "a model of 48 leaves, 30 of them static, is flattened, its plan "
        "looked up by tree structure and a 61-item key built on every call; "
        "reaching 1.3 needs that split in C, or JAX taking a per-leaf static "
        "mask.",
    ),
    Target(
        "S4 equinox.filter_jit / treespec.jit",
        ">=",
        3.5,
        "S4: 12 register_dataclass layers + TypedDict config",
        "equinox.filter_jit",
        "treespec.jit (hints)",
        "the same cause as S4's first line: treespec's split of this model, "
        "not a faster filter_jit.",
    ),
    Target(
        "method treespec.jit / jax.jit",
        "<=",
        1.5,
        "method: a jitted method of an equinox.Module",
        "treespec.jit",
        "jax.jit",
        "a Module with a field that is not an array is planned per call.",
    ),
    *(
        Target(
            f"{scenario}: {what} treespec.jit / jax.jit",
            op,
            bound,
            "",
            "",
            "",
            _LONG_LIFE_WHY,
        )
        for scenario in ("dropped closures", "static churn")
        for what, op, bound in (("memory", "<=", 1.25), ("traces", "==", 1.0))
    ),
)

_RATIO = re.compile(r"^\| (.+?) \| ([\d.]+) \|$", flags=re.M)
_TIME = re.compile(r"^\| (.+?) \| ([\d.]+) (?:us|µs) \| [\d.]+ \|", flags=re.M)


def _run(script: str, quick: bool) -> str:
    command = [sys.executable, str(HERE / script)]
    if quick and script != "plot_scaling.py":
        command.append("--quick")
    if script == "plot_scaling.py":
        # The plots are drawn from the record, below: none from the script.
        command.append("--no-plot")
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        # The script's own error, not report.py's traceback around it.
        sys.exit(
            f"report.py: {script} exited with status {done.returncode}; "
            f"nothing was written. Its error output:\n{done.stderr}"
        )
    return done.stdout


def _sections(output: str) -> dict[str, str]:
    """A script's output by table: the `###` heading -> the table's text."""
    found: dict[str, str] = {}
    for chunk in re.split(r"^### ", output, flags=re.M)[1:]:
        title, _, body = chunk.partition("\n")
        found[title.strip()] = body.strip()
    return found


def _machine(output: str) -> str:
    found = re.search(r"^machine: (.*)$", output, flags=re.M)
    return found.group(1) if found else "an unnamed machine"


def _tables(output: str) -> str:
    """The tables of one script's output, for the page: headings one level
    down (they sit under the part's heading), times in µs, without the
    script's title, its machine line, its list of ratios (the targets table
    shows those that matter) and any line naming a file it wrote."""
    kept = []
    for title, body in _sections(output).items():
        if title == "Ratios":
            continue
        body = re.sub(r" us \|", " µs |", body)
        kept.append(f"#### {title}\n\n{body}")
    lead = output.split("### ", 1)[0]
    loose = [
        line
        for line in lead.splitlines()
        if line
        and not line.startswith(("# ", "machine: ", "wrote "))
        and not line.startswith("|")
    ]
    table = [line for line in lead.splitlines() if line.startswith("|")]
    if table:  # plot_scaling.py prints one table with no heading
        kept.insert(0, "\n".join([*loose, "", *table]).strip())
    return "\n\n".join(kept)


def _times(output: str, title: str) -> dict[str, float]:
    """µs per call by contender, in the table `title` of an output."""
    body = _sections(output).get(title, "")
    return {name: float(value) for name, value in _TIME.findall(body)}


def _targets(dispatch: str) -> str:
    """The targets: each ratio of the run against its bound, and for a missed
    one, why and what it costs a call in µs."""
    ratios = {name: float(v) for name, v in _RATIO.findall(dispatch)}
    rows = [
        "| ratio | target | this run | verdict |",
        "| --- | --- | --- | --- |",
    ]
    missed = []
    for target in TARGETS:
        if target.ratio not in ratios:
            continue
        value = ratios[target.ratio]
        ok = {
            "<=": value <= target.bound,
            ">=": value >= target.bound,
            "==": abs(value - target.bound) < 0.005,
        }[target.op]
        op = {"<=": "≤", ">=": "≥", "==": "="}[target.op]
        verdict = "met" if ok else "**missed**"
        bound = f"{op} {target.bound}"
        rows.append(f"| {target.ratio} | {bound} | {value:.2f} | {verdict} |")
        if not ok:
            missed.append(_missed(target, dispatch, value))
    text = "\n".join(rows)
    if missed:
        text += "\n\nWhy a target is missed, and what it costs:\n\n" + "\n".join(missed)
    return text


def _missed(target: Target, dispatch: str, ratio: float) -> str:
    times = _times(dispatch, target.table)
    slow, fast = times.get(target.slow), times.get(target.fast)
    cost = ""
    if slow is not None and fast is not None and target.fast == "jax.jit":
        cost = (
            f" A call took {slow:.1f} µs against `jax.jit`'s {fast:.1f} µs: "
            f"{slow - fast:.1f} µs more."
        )
    elif slow is not None and fast is not None:  # a lead over a contender
        name = target.fast.split(" (")[0]
        cost = (
            f" A call with `{target.slow}` took {slow:.1f} µs, with `{name}` "
            f"{fast:.1f} µs: {ratio:.2f}x where {target.bound}x is the "
            "target."
        )
    return f"- **{target.ratio}**: {target.why}{cost}"


def _load() -> list[float]:
    one, five, _ = os.getloadavg()
    return [one, five]


def record(quick: bool, note: str) -> dict[str, object]:
    """Run every script once; what they printed, the machine and its load."""
    before = _load()
    outputs = {part.script: _run(part.script, quick) for part in PARTS}
    if (HERE / LONG_LIFE.script).exists():
        outputs[LONG_LIFE.script] = _run(LONG_LIFE.script, quick)
    return {
        "date": datetime.date.today().isoformat(),
        "quick": quick,
        "note": note,
        "cores": os.cpu_count(),
        "load_before": before,
        "load_after": _load(),
        "outputs": outputs,
    }


def _loads(pair: list[float]) -> str:
    return f"{pair[0]:.2f} (1 min), {pair[1]:.2f} (5 min)"


def _idle(before: list[float], cores: int) -> str:
    """What the load before the run says of the machine, in words: a 1-minute
    load under a quarter of the cores is idle; more is that many cores busy
    with other work."""
    if before[0] < 0.25 * cores:
        return "The machine was idle before the run."
    busy = max(1, round(before[0]))
    return (
        f"The machine was not idle: a load of {before[0]:.2f} on {cores} cores "
        f"is about {busy} core{'s' if busy > 1 else ''} busy with other work, "
        "so the ratios carry more noise than on an idle machine (the "
        "benchmark itself keeps one core busy, which the load after the run "
        "includes)."
    )


def render(run: dict[str, object]) -> str:
    """The generated section, from a recorded run."""
    outputs: dict[str, str] = run["outputs"]  # type: ignore[assignment]
    dispatch = outputs["dispatch.py"]
    quick = " --quick" if run["quick"] else ""
    head = (
        f"Run on {run['date']} with `python benchmarks/report.py{quick}`, on "
        f"{_machine(dispatch)}; {run['cores']} CPU cores, load average "
        f"{_loads(run['load_before'])} before the run and "  # type: ignore[arg-type]
        f"{_loads(run['load_after'])} after it."  # type: ignore[arg-type]
    )
    head += " " + _idle(run["load_before"], run["cores"])  # type: ignore[arg-type]
    if run["note"]:
        head += f" {run['note']}"
    long_life = outputs.get(LONG_LIFE.script)
    held = dispatch + "\n" + (long_life or "")
    parts = [head, f"### Targets\n\n{_targets(held)}"]
    for part in PARTS:
        tables = _tables(outputs[part.script])
        parts.append(f"### {part.heading}\n\n{part.intro}\n\n{tables}")
    body = (
        _scenarios(_tables(long_life))
        if long_life
        else "No figures yet: the next run of `report.py` with "
        "`benchmarks/long_life.py` in place fills this part."
    )
    parts.append(
        f"<!-- long-life:start -->\n\n### {LONG_LIFE.heading}\n\n"
        f"{LONG_LIFE.intro}\n\n{body}\n\n<!-- long-life:end -->"
    )
    return f"{START}\n\n" + "\n\n".join(parts) + f"\n\n{END}"


def plots(run: dict[str, object]) -> None:
    """docs/images/scaling.png and scaling-dark.png, from the recorded table."""
    sys.path.insert(0, str(HERE))
    import plot_scaling

    outputs: dict[str, str] = run["outputs"]  # type: ignore[assignment]
    results = plot_scaling.parse(outputs["plot_scaling.py"])
    plot_scaling.plot(results, IMAGES / "scaling.png", dark=False)
    plot_scaling.plot(results, IMAGES / "scaling-dark.png", dark=True)


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
    parser.add_argument(
        "--render", action="store_true", help="rewrite from the recorded run"
    )
    opts = parser.parse_args()
    if opts.render:
        run = json.loads(RECORD.read_text())
    else:
        run = record(opts.quick, opts.note)
        RECORD.write_text(json.dumps(run, indent=1, ensure_ascii=False) + "\n")
    section = render(run)
    for page in PAGES:
        write(section, page)
    plots(run)
    print(section)


if __name__ == "__main__":
    main()
