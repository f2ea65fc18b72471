"""Prove the blind2 corpus on real arrays: python tests/shapes/blind2/prove.py

For every pair: `tests/_blind.py`'s twin_diff is ok; the clean function runs at every distinct
and lucky size dict; the twin runs at every lucky one and raises TypeError or
ValueError in its body (not treespec's ValidationError of an argument or a
return) at every distinct one, whose sizes are all different. Every relation
function runs at each of its size dicts.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", ".."))  # the checkout: tests._blind

import cases
from tests._blind import SHAPE_ERRORS, run, twin_diff


def _first_line(e):
    return str(e).splitlines()[0] if str(e) else ""


def _runs(fn, build, s):
    try:
        run(fn, build, s)
    except Exception as e:
        return f"{type(e).__name__}: {_first_line(e)}"
    return None


def _shape_error(fn, build, s):
    try:
        run(fn, build, s)
    except SHAPE_ERRORS as e:
        if type(e).__name__ == "ValidationError":
            return False, f"treespec ValidationError: {_first_line(e)}"
        return True, f"{type(e).__name__}: {_first_line(e)}"
    except Exception as e:
        return False, f"{type(e).__name__} (not a shape error): {_first_line(e)}"
    return False, "ran"


def prove(verbose=False):
    bad = []
    for mod, clean, twin, build, distinct, lucky, _note in cases.PAIRS:
        tag = f"{mod.__name__}.{twin}"
        ok, line, msg = twin_diff(mod, clean, twin)
        if not ok:
            bad.append(f"{tag}: twin_diff: {msg}")
        for s in distinct:
            if len(set(s.values())) != len(s):
                bad.append(f"{tag}: distinct sizes repeat a value: {s}")
            if (o := _runs(getattr(mod, clean), build, s)) is not None:
                bad.append(f"{tag}: clean fails at distinct {s}: {o}")
            raised, why = _shape_error(getattr(mod, twin), build, s)
            if not raised:
                bad.append(f"{tag}: twin gives no shape error at distinct {s}: {why}")
            elif verbose:
                print(f"{tag}:{line}: {why[:140]}")
        for s in lucky:
            for name in (clean, twin):
                if (o := _runs(getattr(mod, name), build, s)) is not None:
                    bad.append(f"{tag}: {name} fails at lucky {s}: {o}")
    for mod, name, build, sizes_list, _note in cases.RELATIONS:
        for s in sizes_list:
            if (o := _runs(getattr(mod, name), build, s)) is not None:
                bad.append(f"{mod.__name__}.{name}: fails at {s}: {o}")
    return bad


if __name__ == "__main__":
    bad = prove(verbose="-v" in sys.argv)
    for line in bad:
        print("FAIL", line)
    n_pairs, n_rel = len(cases.PAIRS), len(cases.RELATIONS)
    print(f"{n_pairs} pairs, {n_rel} relations: " + ("all pass" if not bad else f"{len(bad)} failures"))
    sys.exit(1 if bad else 0)
