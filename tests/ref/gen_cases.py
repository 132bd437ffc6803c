"""Generate the op-parity cases of one group: gen_cases.py --group G --out DIR.

Imports cases_G.py (beside this file) and calls its cases(suite, rng).
The seed comes from RLX_TEST_SEED (default 1234) so a failure can be replayed.
"""
import argparse
import importlib
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rlxcase import Suite  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--group", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    seed = int(os.environ.get("RLX_TEST_SEED", "1234"))
    mod = importlib.import_module("cases_" + args.group)
    suite = Suite(args.group)
    mod.cases(suite, np.random.default_rng(seed))
    suite.write(args.out)
    print("gen_cases: %d cases for group %s (seed %d)" % (len(suite.cases), args.group, seed))


if __name__ == "__main__":
    main()
