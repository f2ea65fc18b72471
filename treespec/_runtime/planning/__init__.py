"""Planning a call's split: once per tree structure of a function's calls.

Its one job: from a value's tree structure and the function's `Spec` to the
`Plan` every later call of that structure reuses. What a value is
(`values.py`) and a pytree node's children (`tree.py`); the resolution rule,
leaf by leaf (`resolve.py`), with what is wrong with a value's containers
(`structure.py`); each argument at its place (`build.py`, which also checks
that a call fits the signature); the plan itself (`plan.py`); prefix trees
over a call (`prefix.py`). Beside them, what belongs to one structure or one
trace: Flax NNX objects and their places (`nnx_objects.py`, `graph.py`),
what a traced function changed (`graph_session.py`), and a trace's static key
as every process can compare it (`key_text.py`, `processes.py`).

When it runs: the first time a call of a new tree structure arrives (a
cache miss of the routes), and while tracing. What it builds there is then
read by every call of that structure, and those few methods are on the hot
path: `Plan.split` (a `Split` picked by the leaves' types, one lookup), a
`Split`'s getters (compiled once from key paths) and `Graph.split_for` (an
NNX call's shared objects). Change them as `calling/`'s code, with the
dispatch benchmark; nothing else here runs on a call whose structure is
known.

It may import `treespec._model` and the reading room (`reading/`): the
nodes it walks were read there.
"""
