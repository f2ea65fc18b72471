"""The per-call hot path: every call of a decorated function.

Its one job: a call in, its static key and dynamic leaves out, as fast as
`jax.jit` allows. The bound call (`bind.py`), what the positional route
decides once per function and the interned key types (`layout.py`), what
every route shares (`routes.py`: the key, the context of one function, the
plan of a structure), the two routes (`positional.py`, `call_route.py`), the
route of a call picked and validation through its view (`splitter.py`), and
the compile cache that belongs to the function (`cache.py`).

When it runs: on every call. Besides what planning built for the call's
structure (`Plan.split`, a `Split`'s getters, `Graph.split_for`), it
reaches the other rooms only on a miss (a new structure: planning; a new
trace: checking) or a failure (checking).

It may import `treespec._model` and every room that runs less often than
itself: reading, planning, checking. Nothing in those rooms imports it.
"""
