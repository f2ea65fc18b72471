"""Prove the blind2 corpus on real arrays: python tests/shapes/blind2/prove.py"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cases  # noqa: E402

bad = cases.prove()
for line in bad:
    print("FAIL", line)
n_pairs, n_rel = len(cases.PAIRS), len(cases.RELATIONS)
print(f"{n_pairs} pairs, {n_rel} relations: {'all pass' if not bad else f'{len(bad)} failures'}")
sys.exit(1 if bad else 0)
