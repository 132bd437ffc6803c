#!/usr/bin/env python3
"""test_value_inputs.py LIBRLX

Value inputs (docs/ONNX.md): a model whose Reshape target and ReduceSum
axes are graph inputs runs through one rlx session with several sets of
those contents, each compared with onnxruntime; a set seen before reuses
its inner session; the value inputs are reported as such; the graph of
such a model is refused with a message; a value input never set is an
error naming it. Exit 77 when onnx or onnxruntime is missing."""
import ctypes
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def model_bytes():
    from onnx import TensorProto, helper
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"]),
             helper.make_node("ReduceSum", ["r", "axes"], ["y"], keepdims=0),
             helper.make_node("Mul", ["r", "s"], ["z"])]
    g = helper.make_graph(nodes, "value_inputs",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
                           helper.make_tensor_value_info("shape", TensorProto.INT64, [None]),
                           helper.make_tensor_value_info("axes", TensorProto.INT64, [1]),
                           helper.make_tensor_value_info("s", TensorProto.FLOAT, [])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    return m.SerializeToString()


def main():
    try:
        import onnxruntime as ort
    except ImportError:
        print("SKIP: onnx or onnxruntime is not installed (scripts/deps.sh installs them)")
        return 77
    sys.path.insert(0, HERE)
    from rlx_ctypes import Rlx, RlxError
    rlx = Rlx(sys.argv[1])
    lib = rlx.lib
    P = ctypes.c_void_p
    lib.rlx_model_input_is_value.argtypes = [P, ctypes.c_int]
    lib.rlx_model_graph.argtypes = [P, ctypes.POINTER(P)]
    lib.rlx_session_get_stats.argtypes = [P, P]
    data = model_bytes()
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    fails = 0

    def expect(cond, what):
        nonlocal fails
        print("%s %s" % ("ok  " if cond else "FAIL", what))
        fails += 0 if cond else 1

    m = P()
    rlx.check(lib.rlx_model_load_memory(data, len(data), None, ctypes.byref(m)))
    s = P()
    rlx.check(lib.rlx_model_compile(m, None, ctypes.byref(s)))
    g = P()
    st = lib.rlx_model_graph(m, ctypes.byref(g))
    expect(st != 0 and b"value" in lib.rlx_last_error(), "rlx_model_graph refused: %s" % lib.rlx_last_error().decode())
    rng = np.random.default_rng(0)
    runs = [([6, 4], [1]), ([4, 6], [0]), ([2, 12], [-1]), ([6, 4], [1]), ([3, 2, 4], [2]), ([4, 6], [0])]
    stats = (ctypes.c_int64 * 64)()   # rlx_session_stats: plans_built, plan_cache_hits, runs, ...
    inner_runs = []
    for shape, axes in runs:
        x = rng.standard_normal((2, 3, 4)).astype(np.float32)
        sc = np.array(rng.standard_normal(), dtype=np.float32)
        feeds = {"x": x, "shape": np.array(shape, np.int64), "axes": np.array(axes, np.int64), "s": sc}
        want = ref.run(None, feeds)
        for name, v in feeds.items():
            dims = (ctypes.c_int64 * 8)(*v.shape)
            rlx.check(lib.rlx_set_input_shaped(s, name.encode(), v.ctypes.data, v.nbytes, v.ndim, dims))
        rlx.check(lib.rlx_run(s))
        got = []
        for i in range(2):
            dt = ctypes.c_int()
            dims = (ctypes.c_int64 * 8)()
            rank = lib.rlx_output_type(s, i, ctypes.byref(dt), dims)
            y = np.empty([dims[k] for k in range(rank)], np.float32)
            rlx.check(lib.rlx_output(s, i, y.ctypes.data, y.nbytes))
            got.append(y)
        ok = all(a.shape == b.shape and np.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(got, want))
        expect(ok, "shape %s axes %s: outputs %s match onnxruntime" % (shape, axes, [y.shape for y in got]))
        rlx.check(lib.rlx_session_get_stats(s, stats))
        inner_runs.append(stats[2])
    expect(inner_runs == [1, 1, 1, 2, 1, 2], "a set of values seen before reuses its session (runs of each: %s)"
           % inner_runs)
    expect([lib.rlx_model_input_is_value(m, i) for i in range(4)] == [0, 1, 1, 0],
           "shape and axes are value inputs, x and s are not")
    lib.rlx_session_free(s)
    # a value input never set
    s = P()
    rlx.check(lib.rlx_model_compile(m, None, ctypes.byref(s)))
    x = np.zeros((2, 3, 4), np.float32)
    rlx.check(lib.rlx_set_input_shaped(s, b"x", x.ctypes.data, x.nbytes, 3, (ctypes.c_int64 * 8)(2, 3, 4)))
    try:
        rlx.check(lib.rlx_run(s))
        expect(False, "a run without the value input fails")
    except RlxError as e:
        expect("shape" in str(e) and "never set" in str(e), "a run without the value input fails: %s" % e)
    # contents that do not fit: a reshape to the wrong size
    bad, axes = np.array([5, 5], np.int64), np.array([0], np.int64)
    rlx.check(lib.rlx_set_input_shaped(s, b"shape", bad.ctypes.data, bad.nbytes, 1, (ctypes.c_int64 * 8)(2)))
    rlx.check(lib.rlx_set_input_shaped(s, b"axes", axes.ctypes.data, axes.nbytes, 1, (ctypes.c_int64 * 8)(1)))
    try:
        rlx.check(lib.rlx_run(s))
        expect(False, "a reshape of 24 elements to [5, 5] fails")
    except RlxError as e:
        expect(True, "a reshape of 24 elements to [5, 5] fails: %s" % e)
    lib.rlx_session_free(s)
    lib.rlx_model_free(m)
    print("%d failed" % fails)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
