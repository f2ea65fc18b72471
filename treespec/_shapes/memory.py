"""The command's memory bound (`--memory`).

A shape check allocates almost nothing: its arrays are abstract. What the
checked code computes on the host from sizes is not: `np.triu_indices(n)`
at a witness of tens of thousands asks for gigabytes, and where the machine
has them on paper only (Linux's overcommit), the system kills the process
when they are touched, every finding of the file lost with it. Bounded,
the allocation fails at once with a `MemoryError`, which the check reports
as a note at the line that made it, and goes on. The bound is the data
limit of the process (`RLIMIT_DATA`, which Linux applies to every private
allocation), set for the command's run and given back after it; where the
system has no such limit (Windows) there is none.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

__all__ = ["memory_bound"]


@contextlib.contextmanager
def memory_bound(gib: float | None) -> Iterator[None]:
    """Within it, the process may allocate at most `gib` GiB (None: half
    the machine's memory; 0: no bound). A lower bound already set (`ulimit
    -d`) stays; the one before is back afterwards."""
    try:
        import resource
    except ImportError:  # Windows: no such limit
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    wanted = _half_the_machine() if gib is None else int(gib * 2**30)
    if hard != resource.RLIM_INFINITY:
        wanted = min(wanted, hard)
    lower = wanted > 0 and (soft == resource.RLIM_INFINITY or wanted < soft)
    if lower:
        resource.setrlimit(resource.RLIMIT_DATA, (wanted, hard))
    try:
        yield
    finally:
        if lower:
            resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))


def _half_the_machine() -> int:
    """Half the machine's memory in bytes, or 0 (no bound) where it cannot
    be read."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (AttributeError, ValueError, OSError):
        return 0
