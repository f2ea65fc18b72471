"""The spec model: the one meaning of a hint, JAX-free.

Its one job: say what an annotation means (the spec nodes) and what is wrong
with it (the rules), once, for all three front ends: the runtime
(`treespec._runtime` builds the nodes from typing objects), the mypy plugin
(`treespec.mypy_plugin` builds the same nodes from mypy's types) and the shape
checker (`treespec._shapes` reads the nodes to build abstract values). Because
they share it, a bad spec is the same finding at decoration time, in the
editor and in `python -m treespec check`.

It may import the standard library and itself, nothing else: no JAX, no
NumPy, nothing above it in treespec (the plugin imports it inside mypy).
`tests/test_imports.py` holds it to that. Its modules, bottom-up:

- `markers.py`: the three markers as `Annotated` aliases, and reading them back;
- `errors.py`: `SpecError`, `ValidationError`, `Issue` and their message format;
- `spec.py`: the spec nodes (container, class with fields, union, leaf, ...)
  and `Spec`;
- `rules.py`: the verdicts on nodes (what may be traced or held static, the
  container table, the fix texts);
- `held.py`: fields another library holds static (`eqx.field(static=True)`,
  ...), their fixes, the verdict on a marker there.
"""
