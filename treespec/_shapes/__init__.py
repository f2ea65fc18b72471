"""The shape checker: `check_shapes` and `python -m treespec check`.

Its one job: check a decorated function's shapes for every size at once,
before any data exists. It builds abstract arguments from the spec nodes the
runtime derived (`abstract.py`, never re-reading annotations), traces the
call under `jax.eval_shape` with the splitter's checks (`check.py`), says
what each exception means (`outcomes.py`) and where in the user's code it
belongs (`user_code.py`), and reports it in mypy's format (`report.py`).
`command.py` is the command: it finds and imports the user's files
(`files.py`), finds their transforms and prints the report.

It may import `treespec._model`, `treespec._runtime` and, of the transforms,
only what they all share (`treespec._transforms.base`), never one
transform's module. Nothing imports `command.py` but `treespec.__main__`.
"""
