#!/usr/bin/env python3
"""test_conv_geometry.py LIBRLX

Conv with its weight an initializer (the packed-weight GEMM path, whose
im2col columns are written straight into the GEMM's panels: with AVX-512
by conv_im2col_avx512.c; a 1x1 conv's x read in place by the AVX-512
micro-kernel) over the geometries that path cuts differently: strides
1, 2 and 3 along W (3: the portable im2col), asymmetric pads, dilation,
planes narrower than a panel (segments over several output rows), a 7x7
stride-2 stem, 1xN kernels, 1x1 kernels over planes that end in part of
a panel, a residual Add and Relu fused after it; each against
onnxruntime. A residual made by another Conv ("conv") dies at the Add,
so the plan puts the fused conv's output in its buffer: those cases take
each path of the packed-weight convs with y in place of its residual (1x1
x in place, a batch or one image; K over two GEMM blocks; planes turned;
im2col panels; the direct kernel) and the copy that the other kernels
get (depthwise, grouped). A residual that is the conv's own input ("x",
a Relu's output) must not be written over. Exit 77 when onnx or onnxruntime is
missing."""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

# C, H, W, OC, (kh, kw), (sh, sw), pads (top, left, bottom, right), dilation, residual
# [, batch (2), groups (1)]
CASES = [
    (16, 56, 56, 64, (3, 3), (1, 1), (1, 1, 1, 1), 1, False),
    (8, 14, 14, 40, (3, 3), (1, 1), (1, 1, 1, 1), 1, True),
    (8, 20, 23, 40, (3, 3), (2, 2), (1, 1, 1, 1), 1, False),
    (3, 64, 64, 64, (7, 7), (2, 2), (3, 3, 3, 3), 1, False),
    (5, 30, 31, 33, (5, 5), (1, 1), (4, 4, 4, 4), 2, False),
    (5, 30, 31, 33, (3, 3), (2, 1), (0, 2, 1, 0), 1, True),
    (5, 30, 31, 33, (3, 3), (1, 2), (2, 0, 0, 1), 1, False),
    (4, 40, 5, 40, (3, 3), (1, 1), (1, 1, 1, 1), 1, False),
    (4, 40, 9, 40, (1, 3), (1, 1), (0, 1, 0, 1), 1, False),
    (6, 33, 70, 48, (3, 3), (2, 2), (0, 0, 0, 0), 1, True),
    (6, 33, 70, 48, (2, 2), (2, 2), (0, 0, 0, 0), 1, False),
    (6, 17, 19, 48, (3, 3), (3, 3), (1, 1, 1, 1), 1, False),
    (7, 24, 24, 36, (3, 3), (1, 1), (1, 1, 1, 1), 3, False),
    (24, 20, 20, 40, (1, 1), (1, 1), (0, 0, 0, 0), 1, True),
    (37, 13, 13, 70, (1, 1), (1, 1), (0, 0, 0, 0), 1, False),
    (64, 9, 33, 20, (1, 1), (1, 1), (0, 0, 0, 0), 1, True),
    (64, 14, 14, 96, (1, 1), (1, 1), (0, 0, 0, 0), 1, "conv"),
    (64, 14, 14, 96, (1, 1), (1, 1), (0, 0, 0, 0), 1, "conv", 1),
    (1100, 12, 12, 40, (1, 1), (1, 1), (0, 0, 0, 0), 1, "conv"),
    (1100, 12, 12, 40, (1, 1), (1, 1), (0, 0, 0, 0), 1, "conv", 1),
    (32, 7, 7, 64, (1, 1), (1, 1), (0, 0, 0, 0), 1, "conv"),
    (16, 7, 7, 48, (3, 3), (1, 1), (1, 1, 1, 1), 1, "conv"),
    (8, 40, 6, 40, (3, 3), (1, 1), (1, 1, 1, 1), 1, "conv"),
    (16, 20, 20, 64, (3, 3), (1, 1), (1, 1, 1, 1), 1, "conv"),
    (8, 10, 10, 8, (3, 3), (1, 1), (1, 1, 1, 1), 1, "conv", 2, 8),
    (8, 10, 10, 12, (3, 3), (1, 1), (1, 1, 1, 1), 1, "conv", 1, 2),
    (16, 12, 12, 16, (3, 3), (1, 1), (1, 1, 1, 1), 1, "x"),
    (16, 14, 14, 16, (1, 1), (1, 1), (0, 0, 0, 0), 1, "x"),
    (24, 29, 30, 40, (1, 1), (2, 2), (0, 0, 0, 0), 1, True),
    (24, 29, 30, 40, (1, 1), (2, 2), (0, 0, 0, 0), 1, "conv", 1),
    (40, 13, 14, 64, (1, 1), (2, 2), (0, 0, 0, 0), 1, "conv"),
    (16, 57, 55, 32, (1, 1), (2, 2), (0, 0, 0, 0), 1, True, 3),
    (8, 64, 66, 24, (1, 1), (2, 2), (0, 0, 0, 0), 1, "conv", 1),
    (8, 31, 32, 16, (1, 1), (2, 2), (0, 0, 0, 0), 1, False),
    (8, 9, 15, 32, (1, 1), (2, 2), (0, 0, 0, 0), 1, False, 3),
    (16, 20, 21, 48, (1, 1), (2, 1), (0, 0, 0, 0), 1, False),
    (16, 25, 23, 32, (1, 1), (3, 3), (0, 0, 0, 0), 1, False, 3),
]


def model(case, rng):
    from onnx import TensorProto, helper, numpy_helper
    C, H, W, OC, k, s, pads, dil, residual, batch, group = case + (2, 1)[len(case) - 9:]
    w = rng.standard_normal((OC, C // group) + k).astype(np.float32)
    b = rng.standard_normal(OC).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=list(k), strides=list(s),
                              pads=[pads[0], pads[1], pads[2], pads[3]], dilations=[dil, dil], group=group)]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, C, H, W])]
    if residual:
        OH = (H + pads[0] + pads[2] - dil * (k[0] - 1) - 1) // s[0] + 1
        OW = (W + pads[1] + pads[3] - dil * (k[1] - 1) - 1) // s[1] + 1
        nodes += [helper.make_node("Add", ["c", "r"], ["a"]), helper.make_node("Relu", ["a"], ["y"])]
        if residual == "conv":  # first, so that the fused conv is the other
            nodes.insert(0, helper.make_node("Conv", ["z", "w2", "b2"], ["r"], kernel_shape=[1, 1]))
            inputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, [batch, 5, OH, OW]))
            inits += [numpy_helper.from_array(rng.standard_normal((OC, 5, 1, 1)).astype(np.float32), "w2"),
                      numpy_helper.from_array(rng.standard_normal(OC).astype(np.float32), "b2")]
        elif residual == "x":
            nodes.insert(0, helper.make_node("Relu", ["x"], ["r"]))
            nodes[1].input[0] = "r"
        else:
            inputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, [batch, OC, OH, OW]))
    else:
        nodes[0].output[0] = "y"
    g = helper.make_graph(nodes, "conv", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    feeds = [rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
             for i in inputs]
    return m.SerializeToString(), feeds


def main():
    try:
        import onnxruntime as ort
    except ImportError:
        print("SKIP: onnx or onnxruntime is not installed (scripts/deps.sh installs them)")
        return 77
    sys.path.insert(0, HERE)
    from rlx_ctypes import Rlx
    rlx = Rlx(sys.argv[1])
    rng = np.random.default_rng(0)
    fails = 0
    for case in CASES:
        data, feeds = model(case, rng)
        ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
        want = ref.run(None, {i.name: x for i, x in zip(ref.get_inputs(), feeds)})[0]
        got = rlx.run_model(data, feeds)[0]
        err = float(np.max(np.abs(got - want))) if got.shape == want.shape else float("inf")
        ok = err <= 1e-5 * float(np.max(np.abs(want))) + 1e-6
        fails += not ok
        print("%s %s: max error %.3g" % ("ok  " if ok else "FAIL", case, err))
    print("%d failed" % fails)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
