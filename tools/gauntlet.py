"""The ecosystem's own programs, run as written and with treespec swapped in.

Run:

    python tools/gauntlet.py --equinox DIR --flax DIR [--only NAME] [--report FILE]

`DIR` is a local copy of the repository (github.com/patrick-kidger/equinox,
github.com/google/flax): a checkout, or a git directory without a work tree.
Nothing of theirs is copied into this project: each program is read from
there when the gauntlet runs, written to a scratch folder, and run twice, in
a process of its own:

- *theirs*: as written (Equinox's `filter_*`, Flax's `nnx.jit`);
- *treespec*: the transform swapped, nothing else (the migration pages'
  tables: `eqx.filter_jit` -> `treespec.jit`, `eqx.filter_grad` ->
  `treespec.grad`, ..., `nnx.jit` -> `treespec.jit`).

Both at the same reduced sizes (a table below: fewer steps, smaller data),
on the CPU, with the same seeds. Where a program downloads its data
(`torchvision`, Hugging Face `datasets`), both runs get the same synthetic
data from a stand-in of that loader, written to the scratch folder.

What is compared: every number each run prints (line by line, within a
relative 1e-4), every array left in the program's namespace at its end
(models, optimizer states, losses: within 1e-5), and how often each jitted
function traced (its body run, counted by a wrapper around the transform in
both runs). A program is `same` when all three agree, `DIFFERENT` with the
first difference otherwise, `fails` when the treespec run raised and
theirs did not, and `left out` with the reason when it cannot run here.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent

#: The swaps of the migration pages' tables (docs/migration/).
EQUINOX_SWAPS = (
    ("eqx.filter_value_and_grad", "treespec.value_and_grad"),
    ("eqx.filter_grad", "treespec.grad"),
    ("eqx.filter_jit", "treespec.jit"),
    ("eqx.filter_eval_shape", "treespec.eval_shape"),
    ("eqx.filter_checkpoint", "treespec.checkpoint"),
)
NNX_SWAPS = (("nnx.jit", "treespec.jit"),)


@dataclasses.dataclass(frozen=True)
class Program:
    """One program of a repository and how it is run here."""

    name: str
    repo: str  # "equinox" or "flax"
    path: str
    #: (pattern, replacement) applied to both runs: the reduced sizes.
    reduce: tuple[tuple[str, str], ...] = ()
    #: Stand-ins of data loaders it needs ("torchvision", "datasets").
    data: tuple[str, ...] = ()
    #: Printed lines that differ from run to run (timings): not compared.
    ignore: str = r"took|time|seconds|it/s|s/it"
    #: Why it is not run here (nothing run, reported as such).
    left_out: str = ""
    #: (pattern, replacement, why): a bug of the program's own, fixed in both
    #: runs so that the rest can be compared, and reported with the result.
    fixes: tuple[tuple[str, str, str], ...] = ()
    #: (what the treespec run raises, why): a difference DESIGN makes, or one
    #: left for an issue of its own; the run is still made, and a failure
    #: that says something else is reported as a failure.
    expect: tuple[str, str] = ("", "")

    @property
    def swaps(self) -> tuple[tuple[str, str], ...]:
        return EQUINOX_SWAPS if self.repo == "equinox" else NNX_SWAPS


#: What a program that uses `nnx.cached_partial` meets under treespec.jit.
_CACHED_PARTIAL = (
    "tmp_static_cache",
    "uses `nnx.cached_partial`, a cache of NNX's graph traversal that only NNX's "
    "own transforms consume (NNX raises when none did); treespec needs no such "
    "cache: consuming it is an issue of its own",
)

EQX = "docs/examples/"
NNX_TOY = "examples/nnx_toy_examples/"
PROGRAMS = (
    Program(
        "eqx/frozen_layer",
        "equinox",
        EQX + "frozen_layer.ipynb",
        ((r"steps=1000", "steps=30"), (r"dataset_size=10000", "dataset_size=1000")),
    ),
    Program("eqx/stateful", "equinox", EQX + "stateful.ipynb"),
    Program(
        "eqx/train_rnn",
        "equinox",
        EQX + "train_rnn.ipynb",
        ((r"steps=200", "steps=20"), (r"dataset_size=10000", "dataset_size=512")),
    ),
    Program(
        "eqx/mnist",
        "equinox",
        EQX + "mnist.ipynb",
        (
            (r"STEPS = \d+", "STEPS = 12"),
            (r"PRINT_EVERY = \d+", "PRINT_EVERY = 4"),
            (r"BATCH_SIZE = \d+", "BATCH_SIZE = 16"),
        ),
        ("torchvision",),
    ),
    Program(
        "eqx/vision_transformer",
        "equinox",
        EQX + "vision_transformer.ipynb",
        (
            (r"num_steps = \d+", "num_steps = 4"),
            (r"batch_size = \d+", "batch_size = 8"),
            (r"num_layers = \d+", "num_layers = 2"),
            (r"hidden_size = \d+", "hidden_size = 64"),
            (r"mlp_size = \d+", "mlp_size = 64"),
            (r"num_heads = \d+", "num_heads = 2"),
        ),
        ("torchvision",),
        fixes=(
            (
                r"linear: eqx\.nn\.Embedding",
                "linear: eqx.nn.Linear",
                "`PatchEmbedding.linear` is annotated `eqx.nn.Embedding` and holds an "
                "`eqx.nn.Linear`: treespec's validation names it, as jaxtyping's "
                "`jaxtyped` with beartype refuses it",
            ),
        ),
    ),
    Program(
        "eqx/parallelism",
        "equinox",
        EQX + "parallelism.ipynb",
        ((r"num_steps = \d+", "num_steps = 10"),),
        expect=(
            "does not take donate=",
            'uses `eqx.filter_jit(donate="all")`: treespec donates what the '
            "hints mark `Donate[...]` (DESIGN), and refuses `donate=` at "
            "decoration, naming that fix; Equinox's spelling is an issue of its own",
        ),
    ),
    Program("eqx/init_apply", "equinox", EQX + "init_apply.ipynb"),
    Program("eqx/serialisation", "equinox", EQX + "serialisation.ipynb"),
    Program(
        "eqx/unet",
        "equinox",
        EQX + "unet.ipynb",
        left_out="defines a model and no program that runs it (no transform to swap)",
    ),
    Program(
        "eqx/score_based_diffusion",
        "equinox",
        EQX + "score_based_diffusion.ipynb",
        left_out="needs diffrax, and downloads MNIST with urllib",
    ),
    Program(
        "eqx/deep_convolutional_gan",
        "equinox",
        EQX + "deep_convolutional_gan.ipynb",
        (
            (r"num_steps = \d+", "num_steps = 3"),
            (r"batch_size = \d+", "batch_size = 8"),
        ),
        ("torchvision",),
    ),
    Program(
        "eqx/bert",
        "equinox",
        EQX + "bert.ipynb",
        left_out="downloads a pretrained BERT and a data set (transformers, datasets)",
    ),
    Program(
        "nnx/01_functional_api",
        "flax",
        NNX_TOY + "01_functional_api.py",
        ((r"total_steps = \d+", "total_steps = 100"),),
    ),
    Program(
        "nnx/02_lifted_transforms",
        "flax",
        NNX_TOY + "02_lifted_transforms.py",
        ((r"total_steps = \d+", "total_steps = 100"),),
        expect=_CACHED_PARTIAL,
    ),
    Program(
        "nnx/03_train_state",
        "flax",
        NNX_TOY + "03_train_state.py",
        ((r"total_steps = \d+", "total_steps = 100"),),
    ),
    Program(
        "nnx/05_vae",
        "flax",
        NNX_TOY + "05_vae.py",
        (
            (r"epochs = \d+", "epochs = 1"),
            (r"steps_per_epoch = \d+", "steps_per_epoch = 5"),
            (r"batch_size = \d+", "batch_size = 16"),
        ),
        ("datasets",),
        expect=(
            "kl_loss",
            "its `forward` sows an attribute (`model.encoder.kl_loss`) "
            "inside the jitted function, which `nnx.jit` writes onto the caller's "
            "model; DESIGN makes a structure change inside an error naming it",
        ),
    ),
    Program("nnx/06_scan_over_layers", "flax", NNX_TOY + "06_scan_over_layers.py"),
    Program(
        "nnx/07_array_leaves",
        "flax",
        NNX_TOY + "07_array_leaves.py",
        ((r"total_steps = \d+", "total_steps = 100"),),
    ),
    Program("nnx/09_parameter_surgery", "flax", NNX_TOY + "09_parameter_surgery.py"),
    Program("nnx/basics", "flax", "docs_nnx/nnx_basics.md"),
    Program("nnx/randomness", "flax", "docs_nnx/guides/randomness.md"),
    Program("nnx/transforms", "flax", "docs_nnx/guides/transforms.md"),
    Program(
        "nnx/pytree",
        "flax",
        "docs_nnx/guides/pytree.md",
        expect=(
            "pytree=False",
            "passes an `nnx.Pytree` made with `pytree=False` (no "
            "pytree to JAX): refused, naming it, since held static its arrays "
            "would be constants of the program and its changes lost",
        ),
    ),
    Program(
        "nnx/surgery",
        "flax",
        "docs_nnx/guides/surgery.md",
        expect=(
            "donate_argnums",
            "uses `nnx.jit(donate_argnums=...)`: DESIGN refuses "
            "per-argument options (`Donate[...]` per leaf), naming the fix",
        ),
    ),
    Program(
        "nnx/performance",
        "flax",
        "docs_nnx/guides/performance.md",
        expect=_CACHED_PARTIAL,
    ),
    Program(
        "nnx/optimization_cookbook", "flax", "docs_nnx/guides/optimization_cookbook.md"
    ),
    Program(
        "nnx/extracting_intermediates",
        "flax",
        "docs_nnx/guides/extracting_intermediates.md",
    ),
    Program("nnx/view", "flax", "docs_nnx/guides/view.md"),
    Program(
        "nnx/minigpt",
        "flax",
        "docs_nnx/examples/minigpt.md",
        left_out="downloads a tokenizer and a text data set (tiktoken, grain)",
    ),
    Program(
        "nnx/mnist_tutorial",
        "flax",
        "docs_nnx/mnist_tutorial.md",
        left_out="loads MNIST through tensorflow_datasets",
    ),
)


# -- reading a program out of its repository -----------------------------------


def read(root: Path, path: str) -> str:
    """A file of a checkout, or of a git directory without a work tree."""
    if (root / path).is_file():
        return (root / path).read_text()
    git = root if (root / "HEAD").is_file() else root / ".git"
    done = subprocess.run(
        ["git", "--git-dir", str(git), "show", f"HEAD:{path}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def cells(path: str, text: str) -> list[tuple[str, bool]]:
    """The program's code, cell by cell: `(source, raises)` where `raises`
    says the document shows the cell raising (myst's `raises-exception`)."""
    if path.endswith(".py"):
        return [(text, False)]
    if path.endswith(".ipynb"):
        notebook = json.loads(text)
        found = []
        for cell in notebook["cells"]:
            if cell["cell_type"] == "code":
                tags = cell.get("metadata", {}).get("tags", [])
                # A cell whose saved output is an error shows one on purpose.
                shown = any(
                    o.get("output_type") == "error" for o in cell.get("outputs", [])
                )
                if "skip-execution" not in tags:
                    raises = "raises-exception" in tags or shown
                    found.append(("".join(cell["source"]), raises))
        return found
    found = []
    for match in re.finditer(r"```\{code-cell\}[^\n]*\n(.*?)```", text, re.S):
        body = match.group(1)
        options = re.findall(r"^:tags: \[(.*)\]$", body, re.M)
        tags = options[0] if options else ""
        body = re.sub(r"^:\w+:.*\n", "", body, flags=re.M)
        if "skip-execution" not in tags:
            found.append((body, "raises-exception" in tags))
    return found


def source_of(program: Program, root: Path, swapped: bool) -> str:
    """The program as one script: IPython's `!`/`%` lines dropped, cells the
    document shows raising wrapped so that the rest runs, sizes reduced,
    and (for the treespec run) the transform swapped."""
    parts = []
    for body, raises in cells(program.path, read(root, program.path)):
        body = "\n".join(
            line
            for line in body.splitlines()
            if not line.lstrip().startswith(("!", "%"))
        )
        if raises:
            body = (
                "try:\n"
                + textwrap.indent(body or "pass", "    ")
                + (
                    "\nexcept Exception as _raised:"
                    "\n    print('raised', type(_raised).__name__)"
                )
            )
        parts.append(body)
    text = "\n\n".join(parts)
    for pattern, replacement in program.reduce:
        text = re.sub(pattern, replacement, text)
    for pattern, replacement, _ in program.fixes:
        text, found = re.subn(pattern, replacement, text)
        assert found, f"{program.name}: the fix {pattern!r} finds nothing"
    if swapped:
        for old, new in program.swaps:
            text = re.sub(re.escape(old) + r"\b", new, text)
        text = "import treespec\n" + text
    return text


# -- the run: a prelude counting traces, an epilogue keeping the arrays ---------

PRELUDE = '''
import functools as _functools, json as _json, os as _os, sys as _sys, types as _types
_os.environ.setdefault("MPLBACKEND", "Agg")
_TRACES = {}


def _counting(transform):
    """`transform` with each function it is given counted when its body runs."""

    def apply(*args, **kwargs):
        if not args or not callable(args[0]):
            return lambda fun: apply(fun, *args, **kwargs)  # a decorator factory
        fun, rest = args[0], args[1:]
        name = getattr(fun, "__qualname__", None) or repr(fun)

        @_functools.wraps(fun)
        def counted(*a, **k):
            _TRACES[name] = _TRACES.get(name, 0) + 1
            return fun(*a, **k)

        return transform(counted, *rest, **kwargs)

    return apply


try:
    import equinox as _eqx
    _eqx.filter_jit = _counting(_eqx.filter_jit)
except ImportError:
    pass
try:
    from flax import nnx as _nnx
    _nnx.jit = _counting(_nnx.jit)
except ImportError:
    pass
try:
    import treespec as _treespec
    _treespec.jit = _counting(_treespec.jit)
except ImportError:
    pass
try:
    import torch as _torch
    _torch.manual_seed(0)
except ImportError:
    pass
# The global RNGs a program may draw from unseeded (a shuffling data
# loader): seeded alike in both runs.
import random as _random, numpy as _numpy
_random.seed(0)
_numpy.random.seed(0)
'''

EPILOGUE = """
def _kept(namespace):
    import jax, numpy
    kept = {}
    for name in sorted(namespace):
        value = namespace[name]
        if name.startswith("_") or isinstance(value, (_types.ModuleType, type)):
            continue
        try:
            leaves = jax.tree_util.tree_leaves(value)
        except Exception:
            continue
        arrays = []
        for leaf in leaves:
            if isinstance(leaf, (jax.Array, numpy.ndarray)) and leaf.size <= 10**6:
                if jax.numpy.issubdtype(leaf.dtype, jax.dtypes.prng_key):
                    leaf = jax.random.key_data(leaf)
                arrays.append(numpy.asarray(leaf))
        for i, array in enumerate(arrays):
            kept[f"{name}[{i}]"] = array
    return kept


numpy_module = __import__("numpy")
numpy_module.savez(_sys.argv[1] + ".npz", **_kept(dict(globals())))
with open(_sys.argv[1] + ".json", "w") as _file:
    _json.dump({"traces": _TRACES}, _file)
"""

TORCHVISION = '''
"""A stand-in of torchvision's data sets for the gauntlet: deterministic
synthetic images of the real shapes, through torchvision-like transforms."""
import numpy as np
import torch


class _Images(torch.utils.data.Dataset):
    shape = (28, 28)
    classes = 10

    def __init__(self, root=None, train=True, download=False, transform=None, **kw):
        rng = np.random.default_rng(0 if train else 1)
        n = 256 if train else 64
        self.images = rng.integers(0, 256, (n, *self.shape), dtype=np.uint8)
        self.targets = rng.integers(0, self.classes, n)
        self.transform = transform

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        image = self.images[i]
        if self.transform is not None:
            image = self.transform(image)
        return image, int(self.targets[i])


class MNIST(_Images):
    pass


class CIFAR10(_Images):
    shape = (32, 32, 3)
'''

TORCHVISION_TRANSFORMS = """
import numpy as np
import torch


class Compose:
    def __init__(self, steps):
        self.steps = steps

    def __call__(self, x):
        for step in self.steps:
            x = step(x)
        return x


class ToTensor:
    def __call__(self, x):
        x = torch.tensor(np.asarray(x), dtype=torch.float32) / 255.0
        return x[None] if x.ndim == 2 else x.permute(2, 0, 1)


class Normalize:
    def __init__(self, mean, std):
        self.mean, self.std = torch.tensor(mean), torch.tensor(std)

    def __call__(self, x):
        return (x - self.mean.view(-1, 1, 1)) / self.std.view(-1, 1, 1)


class Resize:
    def __init__(self, size, *args, **kwargs):
        self.size = (size, size) if isinstance(size, int) else tuple(size)

    def __call__(self, x):
        x = torch.as_tensor(np.asarray(x), dtype=torch.float32)
        chw = x[None] if x.ndim == 2 else x.permute(2, 0, 1)
        out = torch.nn.functional.interpolate(chw[None], size=self.size)[0]
        out = out[0] if x.ndim == 2 else out.permute(1, 2, 0)
        return out.numpy().astype(np.uint8)


class _Same:
    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, x):
        return x


RandomCrop = RandomHorizontalFlip = CenterCrop = _Same
"""

DATASETS = '''
"""A stand-in of Hugging Face `datasets.load_dataset` for the gauntlet."""
import numpy as np


def load_dataset(name, *args, **kwargs):
    rng = np.random.default_rng(0)
    split = lambda n: {"image": list(rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)),
                       "label": list(rng.integers(0, 10, n))}
    return {"train": split(256), "test": split(64)}
'''


def stand_ins(folder: Path, needs: tuple[str, ...]) -> None:
    if "torchvision" in needs:
        package = folder / "torchvision"
        package.mkdir(exist_ok=True)
        (package / "__init__.py").write_text("from . import datasets, transforms\n")
        (package / "datasets.py").write_text(TORCHVISION)
        (package / "transforms.py").write_text(TORCHVISION_TRANSFORMS)
    if "datasets" in needs:
        (folder / "datasets.py").write_text(DATASETS)


def run_one(
    program: Program, root: Path, folder: Path, swapped: bool, python: str
) -> dict[str, Any]:
    """One run of the program: its output, the arrays it left, its traces."""
    tag = "treespec" if swapped else "theirs"
    script = folder / f"run_{tag}.py"  # never `treespec.py`: it would shadow it
    script.write_text(
        PRELUDE + "\n" + source_of(program, root, swapped) + "\n" + EPILOGUE
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(folder), *filter(None, [os.environ.get("PYTHONPATH")])]
        ),
        "JAX_PLATFORMS": "cpu",
        "MPLBACKEND": "Agg",
        "PYTHONWARNINGS": "ignore",
    }
    out = folder / tag
    try:
        done = subprocess.run(
            [python, str(script), str(out)],
            capture_output=True,
            text=True,
            env=env,
            cwd=folder,
            timeout=900,
        )
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": "timed out after 900 s"}
    if done.returncode != 0:
        raised = [
            line
            for line in done.stderr.splitlines()
            if re.match(r"^[\w.]+(Error|Exception)\b", line)
        ]
        return {
            "ok": False,
            "error": raised[-1] if raised else f"exit {done.returncode}",
            "stderr": done.stderr,
        }
    arrays = dict(np.load(str(out) + ".npz"))
    meta = json.loads(Path(str(out) + ".json").read_text())
    return {
        "ok": True,
        "stdout": done.stdout,
        "arrays": arrays,
        "traces": meta["traces"],
    }


_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


def compare(program: Program, theirs: dict[str, Any], ours: dict[str, Any]) -> str:
    """The first difference between two runs, or "" when they agree."""
    ignore = re.compile(program.ignore, re.I)
    mine = [line for line in ours["stdout"].splitlines() if not ignore.search(line)]
    yours = [line for line in theirs["stdout"].splitlines() if not ignore.search(line)]
    if len(mine) != len(yours):
        return f"printed {len(mine)} lines, theirs {len(yours)}"
    for a, b in zip(mine, yours):
        # Object addresses (`<function relu at 0x7f...>`) differ from run to run.
        a, b = _ADDRESS.sub("", a), _ADDRESS.sub("", b)
        x, y = _NUMBER.findall(a), _NUMBER.findall(b)
        if len(x) != len(y) or not np.allclose(
            np.array(x, float), np.array(y, float), rtol=1e-4, atol=1e-6
        ):
            return f"printed {a.strip()[:80]!r}, theirs {b.strip()[:80]!r}"
    names = sorted(theirs["arrays"])
    if sorted(ours["arrays"]) != names:
        missing = sorted(set(names) ^ set(ours["arrays"]))[:3]
        return f"arrays left differ in name: {missing}"
    for name in names:
        a, b = ours["arrays"][name], theirs["arrays"][name]
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"{name}: {a.dtype}{list(a.shape)}, theirs {b.dtype}{list(b.shape)}"
        if a.dtype.kind in "biu" and not np.array_equal(a, b):
            return f"{name} differs"
        if a.dtype.kind in "fc" and not np.allclose(a, b, rtol=1e-5, atol=1e-6):
            worst = float(np.max(np.abs(a - b)))
            return f"{name} differs by up to {worst:.3g}"
    if ours["traces"] != theirs["traces"]:
        return f"traces {ours['traces']}, theirs {theirs['traces']}"
    return ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--equinox", type=Path, required=True)
    parser.add_argument("--flax", type=Path, required=True)
    parser.add_argument("--only", help="run the programs whose name contains this")
    parser.add_argument(
        "--python",
        default=sys.executable,
        help="the interpreter the programs run in (torch for torchvision)",
    )
    parser.add_argument("--report", type=Path, help="write the table here too")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    opts = parser.parse_args()
    roots = {"equinox": opts.equinox, "flax": opts.flax}
    scratch = Path(tempfile.mkdtemp(prefix="treespec-gauntlet-"))
    rows = []
    for program in PROGRAMS:
        if opts.only and opts.only not in program.name:
            continue
        if program.left_out:
            rows.append((program, "left out", program.left_out))
            continue
        folder = scratch / program.name.replace("/", "_")
        folder.mkdir(parents=True)
        stand_ins(folder, program.data)
        theirs = run_one(program, roots[program.repo], folder, False, opts.python)
        if not theirs["ok"]:
            rows.append(
                (program, "left out", f"theirs does not run here: {theirs['error']}")
            )
        else:
            ours = run_one(program, roots[program.repo], folder, True, opts.python)
            expected, reason = program.expect
            if not ours["ok"] and expected and expected in ours.get("stderr", ""):
                rows.append((program, "refused as expected", reason))
            elif not ours["ok"]:
                rows.append((program, "fails", ours["error"]))
            else:
                why = compare(program, theirs, ours)
                traces = sum(theirs["traces"].values())
                detail = why or (
                    f"{len(theirs['arrays'])} arrays, {traces} traces"
                    if traces
                    else "ran; no jitted function of it was called"
                )
                fixed = "; ".join(
                    f"with its bug fixed: {w}" for _, _, w in program.fixes
                )
                rows.append(
                    (
                        program,
                        "DIFFERENT" if why else "same",
                        detail + (f" ({fixed})" if fixed else ""),
                    )
                )
        print(f"{program.name}: {rows[-1][1]} ({rows[-1][2]})", flush=True)
    table = ["| program | result | detail |", "| --- | --- | --- |"]
    table += [
        f"| {p.repo}: `{p.path}` | {result} | {detail} |" for p, result, detail in rows
    ]
    text = "\n".join(table)
    print("\n" + text)
    if opts.report:
        opts.report.write_text(text + "\n")
    if not opts.keep:
        subprocess.run(["rm", "-rf", str(scratch)], check=False)
    else:
        print(f"scratch: {scratch}")


if __name__ == "__main__":
    main()
