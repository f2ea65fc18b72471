"""Checking values and explaining failures: once per trace, and when a call fails.

Its one job: what is wrong with a call's values, said in the user's words.
Dimension names across a call (`dims.py`), a jaxtyping shape against
symbolic sizes (`symbolic.py`), the leaf checks (`validate.py`: beartype for
static leaves, jaxtyping for arrays), what a leaf that made a call fail
should have been (`diagnose.py`), every problem of a call at once
(`call_checks.py`), and which leaves changed between two traces
(`retrace.py`: the retrace history and its warning).

When it runs: when a trace is made (validation costs nothing on a compile
cache hit), and when a call is refused or fails; never on a call that hits
the cache.

It may import `treespec._model` and the rooms that run before it: reading
(`reading/`) and planning (`planning/`).
"""
