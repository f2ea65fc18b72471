# The {HARNESS} block of your brief (the lead engineer forgot to paste it):
# copy this code verbatim to the end of cases.py (it needs `import ast`,
# `import difflib`, `import jax` and METHOD_CLASSES defined above it), then delete this file.
import ast
import difflib
import jax

def qualname(name):
    return f"{name}.__call__" if name in METHOD_CLASSES else name


# --------------------------------------------------------------------------
# Source check: one changed line, carrying "# BUG:"
# --------------------------------------------------------------------------


def _node_lines(path, name):
    tree = ast.parse(open(path).read())
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
            start = min(
                [node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]
            )
            lines = open(path).read().splitlines()
            return start, lines[start - 1 : node.end_lineno]
    raise LookupError(f"{name} not in {path}")


def twin_diff(mod, clean, twin):
    """Return (ok, bug_line, message)."""
    path = mod.__file__
    c_start, c_lines = _node_lines(path, clean)
    t_start, t_lines = _node_lines(path, twin)
    c_norm = [ln.replace(clean, "<NAME>") for ln in c_lines]
    t_norm = [ln.replace(twin, "<NAME>") for ln in t_lines]
    # compare code only: strip the trailing BUG comment
    t_code = [ln.split("  # BUG:")[0] for ln in t_norm]
    sm = difflib.SequenceMatcher(a=c_norm, b=t_code, autojunk=False)
    diffs = [op for op in sm.get_opcodes() if op[0] != "equal"]
    bug_lines = [t_start + k for k, ln in enumerate(t_lines) if "# BUG:" in ln]
    if len(bug_lines) != 1:
        return False, None, f"{len(bug_lines)} '# BUG:' comments"
    if len(diffs) != 1:
        return False, bug_lines[0], f"{len(diffs)} differing hunks"
    tag, i1, i2, j1, j2 = diffs[0]
    # one hunk: one line replaced, or (a dropped line, e.g. a forgotten
    # projection) several clean lines replaced by the one BUG line
    if tag != "replace" or j2 - j1 != 1:
        return False, bug_lines[0], f"diff is {tag} of {i2 - i1} -> {j2 - j1} lines"
    if t_start + j1 != bug_lines[0]:
        return False, bug_lines[0], "the changed line is not the BUG line"
    if i2 - i1 == 1:
        return True, bug_lines[0], "one line differs"
    return True, bug_lines[0], f"{i2 - i1} clean lines became the one BUG line"


# --------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------

SHAPE_ERRORS = (TypeError, ValueError)



def run(fn, build, s):
    """`fn` on fresh arrays of sizes `s`, its result ready."""
    return jax.block_until_ready(build(fn, s))
