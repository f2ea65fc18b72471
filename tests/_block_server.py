"""Runs code blocks each in a fresh process: tests/test_docs.py's helper.

A new interpreter per block would import JAX each time (1-2 s): this one
imports JAX and the libraries the pages use once, before any computation
(so no JAX thread exists yet), and forks a child per block. The child runs
the block as `__main__` in an empty namespace, so a block that leans on
another block's names fails with `NameError`, as it would for a reader who
copies it alone.

Protocol: one JSON object a line on stdin, `{"name": ..., "code": ...,
"files": {name: content}}` (the files the page tells the reader to save,
written into an empty working folder that is put on the path); one JSON
object a line on stdout, `{"ok": bool, "printed": str, "error": str}`.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import re
import shutil
import sys
import tempfile
import traceback
import types

#: Imported before the first fork: what the pages' blocks import.
PRELOAD = (
    "numpy",
    "jax",
    "jax.numpy",
    "jaxtyping",
    "treespec",
    "equinox",
    "flax.nnx",
    "flax.struct",
    "optax",
)

_RAISES = re.compile(r"^(?:# file: \S+\n)?# raises: (\w+)")


def _preload() -> None:
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    # treespec's names load on first use: load those the pages use.
    treespec = sys.modules.get("treespec")
    if treespec is not None:
        for name in ("jit", "grad", "vmap", "dataclass", "explain"):
            getattr(treespec, name)


def _run(name: str, code: str, files: dict[str, str], where: str) -> dict[str, object]:
    """Run one block as a script's `__main__`, in the empty folder `where`
    holding `files`; what happened."""
    for file, content in files.items():
        with open(os.path.join(where, file), "w") as out:
            out.write(content)
    os.chdir(where)
    sys.path.insert(0, where)
    module = types.ModuleType("__main__")
    module.__file__ = name
    sys.modules["__main__"] = module
    expected = _RAISES.match(code)
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(code, name, "exec", dont_inherit=True), module.__dict__)
    except BaseException as error:  # reported to the test, which decides
        if expected is not None and _is(error, expected.group(1)):
            return {"ok": True, "printed": printed.getvalue(), "error": ""}
        text = "".join(traceback.format_exception(error))
        return {"ok": False, "printed": printed.getvalue(), "error": text}
    if expected is not None:
        error = f"raised nothing, but the block says `{expected.group(0)}`"
        return {"ok": False, "printed": printed.getvalue(), "error": error}
    return {"ok": True, "printed": printed.getvalue(), "error": ""}


def _is(error: BaseException, name: str) -> bool:
    import builtins

    import treespec

    kind = getattr(treespec, name, None) or getattr(builtins, name)
    return isinstance(error, kind)


def _serve_one(request: dict[str, str]) -> dict[str, object]:
    where = tempfile.mkdtemp(prefix="block-")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run, report, and leave without cleanup
        os.close(read)
        try:
            result = _run(request["name"], request["code"], request["files"], where)
        except BaseException as error:
            result = {"ok": False, "printed": "", "error": repr(error)}
        with os.fdopen(write, "w") as out:
            json.dump(result, out)
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as result_pipe:
        text = result_pipe.read()
    _, status = os.waitpid(pid, 0)
    shutil.rmtree(where, ignore_errors=True)
    if not text:
        return {"ok": False, "printed": "", "error": f"child died ({status})"}
    result: dict[str, object] = json.loads(text)
    return result


def main() -> None:
    _preload()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        print(json.dumps(_serve_one(json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
