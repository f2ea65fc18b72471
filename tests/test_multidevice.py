"""Multi-device runs on 8 host CPU devices, each in its own process."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from .conftest import child_env

ROOT = Path(__file__).resolve().parent.parent


def _run(script: Path) -> str:
    env = child_env(
        XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu"
    )
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    return done.stdout


def test_jit_shard_map_and_pmap_match_one_device() -> None:
    assert _run(ROOT / "tests" / "multidevice" / "check.py").strip().endswith("OK")


def test_data_parallel_example() -> None:
    out = _run(ROOT / "examples" / "data_parallel.py")
    assert "devices: 8 (cpu)" in out
    # JAX before 0.9 spells a PartitionSpec out in its repr.
    assert re.search(r"x sharding: (P|PartitionSpec)\('data',\), on 8 devices", out)
    assert "traces of train_step: 1" in out
    losses = [float(line.split()[-1]) for line in out.splitlines() if "loss" in line]
    assert losses[-1] < losses[0]


def test_shardings_match_jax_jit() -> None:
    out = _run(ROOT / "tests" / "multidevice" / "shardings.py")
    assert out.strip().endswith("OK")
