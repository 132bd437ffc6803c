#!/usr/bin/env python3
"""test_einsum.py LIBRLX

ONNX Einsum equations beyond the node tests (implicit outputs, ellipses,
diagonals, outer and inner products, sums, batch dims in any place),
each a one-node model run through rlx and compared with numpy.einsum;
an equation rlx does not take must fail with a status. Exit 77 when onnx
is missing."""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

CASES = [
    ("ij,jk", [(3, 4), (4, 5)]),
    ("ij,jk->ki", [(3, 4), (4, 5)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij->", [(3, 4)]),
    ("ii", [(4, 4)]),
    ("ii->i", [(4, 4)]),
    ("iij->ji", [(3, 3, 2)]),
    ("bij,bkj->bik", [(2, 3, 4), (2, 5, 4)]),
    ("ibj,jbk->bik", [(3, 2, 4), (4, 2, 5)]),
    ("...ij,...jk->...ik", [(2, 3, 3, 4), (2, 3, 4, 2)]),
    ("...ij,jk", [(2, 3, 4), (4, 5)]),
    ("abc,cd,->abd", None),   # three operands: refused
    ("ij,ij->ij", [(3, 4), (3, 4)]),
    ("ij,ij->", [(3, 4), (3, 4)]),
    ("ijk,ikl->jl", [(2, 3, 4), (2, 4, 5)]),
    ("ik,kj->", [(2, 3), (3, 4)]),
    ("i,i->i", [(5,), (5,)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]),
]


def main():
    try:
        from onnx import TensorProto, helper
    except ImportError:
        print("SKIP: onnx is not installed (scripts/deps.sh installs it)")
        return 77
    sys.path.insert(0, HERE)
    from rlx_ctypes import Rlx, RlxError
    rlx = Rlx(sys.argv[1])
    rng = np.random.default_rng(3)
    fails = 0
    for eq, shapes in CASES:
        refused = shapes is None
        shapes = shapes or [(2, 3, 4), (4, 5), ()]
        names = ["x%d" % i for i in range(len(shapes))]
        node = helper.make_node("Einsum", names, ["y"], equation=eq)
        g = helper.make_graph([node], "einsum",
                              [helper.make_tensor_value_info(nm, TensorProto.FLOAT, list(s)) for nm, s in zip(names, shapes)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 12)]).SerializeToString()
        xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        try:
            (y,) = rlx.run_model(model, xs)
            ok = not refused and np.allclose(y, np.einsum(eq, *xs), rtol=1e-5, atol=1e-5)
            what = "matches numpy.einsum" if not refused else "ran, but should be refused"
        except RlxError as e:
            ok, what = refused, "refused: %s" % e
        print("%s %-22s %s" % ("ok  " if ok else "FAIL", eq, what))
        fails += not ok
    print("%d failed" % fails)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
