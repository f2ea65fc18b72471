"""The runtime: from a decorated function's hints to each call's split.

Its one job: the per-function and per-call machinery every transform asks
for, in four rooms by when their code runs, each importing only the rooms
that run before it:

1. `reading/`, at decoration: typing objects -> spec nodes, `static_flags`;
2. `planning/`, once per tree structure (and while tracing): the resolution
   rule, the `Plan`, NNX objects' places, the multi-process key;
3. `checking/`, once per trace and when a call fails: validation, what a
   failing leaf should have been, the retrace history;
4. `calling/`, on every call: the bound call, the routes, the static key and
   dynamic leaves, the compile cache.

Beside the rooms, the public tools built on them (`api.py`: the spec tools;
`checked.py`: validation without compiling; `partition.py`: partition and
combine; `dataclass.py`: `treespec.dataclass`) may import any room.

It may import `treespec._model` and itself; never a transform
(`treespec._transforms`), the shape checker (`treespec._shapes`) or the
mypy plugin. The transforms call into it, never the other way round.
"""
