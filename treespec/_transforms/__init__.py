"""The transforms: `jit`, `grad`, `vmap`, `pmap`, `shard_map`, `checkpoint`.

Its one job: hand JAX's transforms the split the runtime gives. Every
transform is thin: it asks the splitter for the static key and the dynamic
leaves, calls the JAX transform over the dynamic part with the key held
static, and joins the non-array outputs back (`outputs.py`). What they share
is `base.py` (the wrapper, the traced body, methods through `methods.py`, the
trace count); `jit.py` adds the fast path and its stages (`stages.py`:
`trace`, `lower`, `compile`, `jax.export`).

It may import `treespec._model`, `treespec._runtime` and itself; never the
shape checker or the mypy plugin. A transform module imports `base.py` and
the runtime, never another transform's module (`vmap.py` holds `pmap`,
which shares its axes).
"""
