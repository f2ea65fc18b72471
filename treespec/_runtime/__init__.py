"""The runtime: from a decorated function's hints to each call's split.

Its one job: the per-function and per-call machinery every transform asks
for. Typing objects become spec nodes (`hints.py`), a value is resolved
against them leaf by leaf (`resolve.py`) into a plan per tree structure
(`plan.py`), a call takes a route (`routes.py`, `positional.py`) that gives
its static key and its dynamic leaves (`splitter.py`), and leaves are
validated (`validate.py`). Beside them: the compile cache that belongs to the
function (`cache.py`), the retrace history (`retrace.py`), the multi-process
check of a trace's static key (`processes.py`), and the public tools built on
the same pieces (`api.py`, `checked.py`, `partition.py`, `dataclass.py`).

It may import `treespec._model` and itself; never a transform
(`treespec._transforms`), the shape checker (`treespec._shapes`) or the
mypy plugin. The transforms call into it, never the other way round.
"""
