"""Reading hints: once, when a function is decorated or a class is defined.

Its one job: typing objects -> spec nodes, the runtime front end of the one
meaning of a hint. What a class says about its fields (`classes.py`), how a
typing object reads (`typing_forms.py`), hints -> nodes (`hints.py`), a
function's `Spec` in the namespaces its annotations were written in
(`derive.py`), a plain decorator hiding a marked function's annotations
(`wrappers.py`), and `static_flags` normalised against the signature
(`flags.py`).

When it runs: at decoration (`treespec.jit(f)`, `treespec.dataclass`), and
when a forward reference is first resolved; never per call. A SpecError
raised here is a decoration-time error.

It may import `treespec._model` only: it is the first room of the runtime,
and no later room is known to it.
"""
