"""The blind corpus (`tests/shapes/blind/`): eight model files written by a
session that had read neither the shape checker nor the other corpus, to a
brief (ResNet and U-Net blocks, an LSTM and state-space recurrences, cross
and relative-position attention, mixture-of-experts routing, contrastive
losses, graph message passing, normalisation layers, Equinox and Flax NNX
modules built in `__init__`): 42 clean functions, each with a twin that has
one planted bug, and 5 that are right only under a relation the
annotations do not state.

- The ground truth, on real arrays: each clean function runs at distinct
  sizes and at its twin's lucky ones; each twin runs at the lucky sizes and
  fails at the distinct ones; the twin differs from its clean function in
  the one line marked `# BUG:`.
- The checker, run once over the files: each twin has an error at its bug's
  line or at a later line of the twin, where the wrong size surfaces (its
  author marked the cause: `c = logits.shape[0]`, and the product fails two
  lines down); no clean or relation function has an error or is skipped.
  Where the checker does otherwise, the case is an `xfail(strict=True)`
  saying what it does.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ._blind import corpus_tests

BLIND = Path(__file__).parent / "shapes" / "blind"
sys.path.insert(0, str(BLIND))
import cases  # noqa: E402  (the model files import by their names from BLIND)

FILES = sorted(p.name for p in BLIND.glob("*.py") if p.name != "cases.py")

#: Twins the checker reports no error for, and what it does instead.
MISSED = {
    "FeedForwardDownOnInput": (
        "a note under DESIGN's 'an error is certain' (issue 56): hidden == "
        "d_model makes it run, and no annotation tells the two sizes apart, so "
        "the bug shows as the note's assumption 'hidden == d_model', not as an "
        "error"
    ),
    "switch_ffn_dispatch_axes": (
        "no finding: the capacity, int(capacity_factor * n / num_experts), is "
        "1 at both witnesses (n and e are primes of one size), and a capacity "
        "axis of 1 broadcasts against the expert axis the bug puts there"
    ),
}


globals().update(corpus_tests(cases, BLIND, FILES, MISSED))
