"""Run a script as an N-process `jax.distributed` job on localhost.

Each process gets `TREESPEC_TEST_PORT`, `TREESPEC_TEST_PROCESS_ID` and
`TREESPEC_TEST_PROCESSES` (read by `init` below) and 2 host CPU devices. Every
process is killed when the job ends, fails or runs out of time, and a failure
shows what each process wrote.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(
    script: Path,
    args: Sequence[str] = (),
    *,
    processes: int = 2,
    devices: int = 2,
    timeout: float = 60.0,
    env: Mapping[str, str] | None = None,
) -> list[str]:
    """Run `script` in `processes` processes; the output (stdout + stderr) of each.

    Fails, showing every process's output, when a process exits non-zero or
    the job takes longer than `timeout` seconds.
    """
    port = free_port()
    base = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
        ),
        "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
        # CPU devices and collectives, also beside an accelerator (which one
        # process at a time may hold).
        "JAX_PLATFORMS": "cpu",
        "TREESPEC_TEST_PORT": str(port),
        "TREESPEC_TEST_PROCESSES": str(processes),
        **(env or {}),
    }
    with tempfile.TemporaryDirectory() as tmp:
        logs = [Path(tmp) / f"process{i}.log" for i in range(processes)]
        procs: list[subprocess.Popen[bytes]] = []
        try:
            for i, log in enumerate(logs):
                with log.open("wb") as out:
                    procs.append(
                        subprocess.Popen(
                            [sys.executable, str(script), *args],
                            stdout=out,
                            stderr=subprocess.STDOUT,
                            env={**base, "TREESPEC_TEST_PROCESS_ID": str(i)},
                            start_new_session=True,
                        )
                    )
            deadline = time.monotonic() + timeout
            while any(p.poll() is None for p in procs):
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"{script.name}: timed out after {timeout:g} s\n"
                        + _outputs(logs, procs)
                    )
                time.sleep(0.05)
        finally:
            for p in procs:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
        codes = [p.returncode for p in procs]
        if any(codes):
            raise AssertionError(
                f"{script.name}: exit codes {codes}\n" + _outputs(logs, procs)
            )
        return [log.read_text(errors="replace") for log in logs]


def _outputs(logs: Sequence[Path], procs: Sequence[subprocess.Popen[bytes]]) -> str:
    parts = []
    for i, (log, p) in enumerate(zip(logs, procs)):
        text = log.read_text(errors="replace") if log.exists() else ""
        parts.append(f"--- process {i} (exit {p.poll()}):\n{text[-6000:]}")
    return "\n".join(parts)


def init() -> int:
    """In a process started by `run`: join the job; this process's index."""
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{os.environ['TREESPEC_TEST_PORT']}",
        num_processes=int(os.environ["TREESPEC_TEST_PROCESSES"]),
        process_id=int(os.environ["TREESPEC_TEST_PROCESS_ID"]),
    )
    return jax.process_index()
