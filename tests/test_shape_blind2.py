"""The second blind corpus (`tests/shapes/blind2/`): eight model files written
by a session that had read neither the shape checker nor the other corpora,
to a brief (ViT patchify and Swin window attention, audio 1-D convolutions,
a Perceiver, einops, BatchNorm with Equinox state, beam search, CTC,
diffusion and a mixture-density head): 40 clean functions, each with a twin
that has one planted bug, and 6 that are right only under a relation the
annotations do not state. `tests/shapes/blind2/prove.py` is its author's
proof on real arrays; the same ground truth runs here, then the checker, as
for the first blind corpus (`tests/test_shape_blind.py`).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import pytest

from ._blind import _on_the_cpu, corpus_tests

BLIND = Path(__file__).parent / "shapes" / "blind2"


def _load_cases() -> Any:
    """The corpus's `cases.py`, under a name of its own (the first blind
    corpus has a `cases` module too); it imports the model files by their
    names from its folder."""
    spec = importlib.util.spec_from_file_location("blind2_cases", BLIND / "cases.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["blind2_cases"] = module
    spec.loader.exec_module(module)
    return module


cases = _load_cases()

FILES = sorted(p.name for p in BLIND.glob("b2_*.py"))

#: Twins the checker reports no error for, and what it does instead.
MISSED = {
    "ConvEncoderBug": (
        "a note under DESIGN's 'an error is certain' (issue 56): h == t makes "
        "it run, and no annotation tells the two sizes apart, so the bug shows "
        "as the note's assumption 'h == t', not as an error"
    ),
    "ctc_forward_bug": (
        "a relation note, not an error: the bug adds a (b, 2l+1) array to a "
        "(t-1, 2l+1) one, which the checker reads as the relation b == t - 1 "
        "the annotations do not state"
    ),
}


#: Twins whose program at the lucky sizes crashes an accelerator's compiler.
CRASHES = {
    "cross_attend_values_bug": (
        "at n == m, einsum('bnm,bnk->bnk', attn, v) (the bug: m summed out of "
        "attn alone) kills the process with a segmentation fault in XLA's "
        "TPU compiler (TPU v5e, JAX 0.10.2)"
    ),
}


globals().update(corpus_tests(cases, BLIND, FILES, MISSED, CRASHES))


def test_a_twin_that_crashes_a_device_compiler_runs_on_the_cpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cpu = jax.devices("cpu")[0]
    monkeypatch.setattr(jax, "default_backend", lambda: "tpu")
    with _on_the_cpu("cross_attend_values_bug", CRASHES):
        assert jnp.zeros(2).devices() == {cpu}
        assert jax.config.jax_default_device == cpu
    with _on_the_cpu("cross_attend_bug", CRASHES):
        assert jax.config.jax_default_device is None
