#!/usr/bin/env python3
"""test_symbolic_shapes.py LIBRLX

Shape values computed from symbolic dims (ONNX dim_param): Range and Slice
bounds, Tile repeats and a Loop's trip count read through Shape -> Gather,
as exporters write position ids, causal masks and scripted loops. Each
model runs through rlx twice, with the dims left symbolic and with them
bound at load (rlx_model_options), and is compared with onnxruntime. A
model rlx cannot build with symbolic dims may refuse it with
RLX_ERR_UNSUPPORTED; any other answer but onnxruntime's is a failure (an
empty or mis-sized tensor most of all). Such a model is built per set of
the symbolic dims at run, whatever the inputs' contents. Exit 77 when onnx
or onnxruntime is missing."""
import ctypes
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def dim_of(name, axis):
    """Nodes computing the scalar int64 dim `axis` of input `name`."""
    from onnx import helper
    return [helper.make_node("Shape", [name], [name + "_shape"]),
            helper.make_node("Constant", [], ["axis%d" % axis], value=helper.make_tensor("", 7, [], [axis])),
            helper.make_node("Gather", [name + "_shape", "axis%d" % axis], ["dim%d" % axis], axis=0)]


def const(name, vals):
    from onnx import helper
    return helper.make_node("Constant", [], [name], value=helper.make_tensor("", 7, [len(vals)], vals))


def scalar(name, v):
    from onnx import helper
    return helper.make_node("Constant", [], [name], value=helper.make_tensor("", 7, [], [v]))


def models():
    """(name, model bytes, feeds of each binding) for each case."""
    from onnx import TensorProto, helper
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"])
    out = [helper.make_tensor_value_info("y", TensorProto.INT64, None)]
    cases = []

    def add(name, nodes, inputs, outputs, feeds, inits=()):
        g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        cases.append((name, m.SerializeToString(), feeds))

    rng = np.random.default_rng(0)
    ids_feeds = [{"ids": rng.integers(0, 100, size=(b, s), dtype=np.int64)} for b, s in ((1, 5), (2, 7), (3, 1))]
    # Position ids: Range(0, seq, 1), unsqueezed and added to the ids.
    add("range_of_seq", dim_of("ids", 1) + [
        scalar("zero", 0), scalar("one", 1),
        helper.make_node("Range", ["zero", "dim1", "one"], ["pos"]),
        helper.make_node("Add", ["ids", "pos"], ["y"])], [ids], out, ids_feeds)
    # The range alone as the output (its length is the symbolic dim).
    add("range_alone", dim_of("ids", 1) + [
        scalar("zero", 0), scalar("one", 1),
        helper.make_node("Range", ["zero", "dim1", "one"], ["y"])], [ids], out, ids_feeds)
    # A range starting at the dim: Range(seq, 12, 1) (a KV-cache offset).
    add("range_from_seq", dim_of("ids", 1) + [
        scalar("twelve", 12), scalar("one", 1),
        helper.make_node("Range", ["dim1", "twelve", "one"], ["y"])], [ids], out, ids_feeds)
    # A fixed table sliced to the sequence length: table[:, :seq] (a causal mask).
    table = helper.make_tensor("table", TensorProto.INT64, [4, 16], list(range(64)))
    add("slice_table_to_seq", dim_of("ids", 1) + [
        const("ax0", [0]), const("start", [0]), const("axes", [1]),
        helper.make_node("Unsqueeze", ["dim1", "ax0"], ["end"]),
        helper.make_node("Slice", ["table", "start", "end", "axes"], ["y"])], [ids], out, ids_feeds, [table])
    # Sliced from the sequence length on: table[:, seq:].
    add("slice_table_from_seq", dim_of("ids", 1) + [
        const("ax0", [0]), const("end", [16]), const("axes", [1]),
        helper.make_node("Unsqueeze", ["dim1", "ax0"], ["start"]),
        helper.make_node("Slice", ["table", "start", "end", "axes"], ["y"])], [ids], out, ids_feeds, [table])
    # ids[:, :seq] itself (the end is the input's own dim).
    add("slice_own_dim", dim_of("ids", 1) + [
        const("ax0", [0]), const("start", [0]), const("axes", [1]),
        helper.make_node("Unsqueeze", ["dim1", "ax0"], ["end"]),
        helper.make_node("Slice", ["ids", "start", "end", "axes"], ["y"])], [ids], out, ids_feeds)
    # A batch-sized slice of a second input along another symbolic dim: x[:batch].
    x = helper.make_tensor_value_info("x", TensorProto.INT64, ["n"])
    xfeeds = [{"ids": f["ids"], "x": np.arange(9, dtype=np.int64)} for f in ids_feeds]
    add("slice_other_sym", dim_of("ids", 0) + [
        const("ax0", [0]), const("start", [0]),
        helper.make_node("Unsqueeze", ["dim0", "ax0"], ["end"]),
        helper.make_node("Slice", ["x", "start", "end", "ax0"], ["y"])], [ids, x], out, xfeeds)
    # A row tiled once per batch entry: Tile(row, [batch, 1]).
    row = helper.make_tensor("row", TensorProto.INT64, [1, 3], [4, 5, 6])
    add("tile_by_batch", dim_of("ids", 0) + [
        const("ax0", [0]), const("one", [1]),
        helper.make_node("Unsqueeze", ["dim0", "ax0"], ["b1"]),
        helper.make_node("Concat", ["b1", "one"], ["reps"], axis=0),
        helper.make_node("Tile", ["row", "reps"], ["y"])], [ids], out, ids_feeds, [row])
    # A loop over the sequence (a scripted for i in range(seq)): sums i.
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["acc_in", "i"], ["acc_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_in", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", TensorProto.INT64, [])])
    add("loop_over_seq", dim_of("ids", 1) + [
        scalar("zero", 0),
        helper.make_node("Constant", [], ["true"], value=helper.make_tensor("", TensorProto.BOOL, [], [True])),
        helper.make_node("Loop", ["dim1", "true", "zero"], ["y"], body=body)], [ids], out, ids_feeds)
    return cases


class Options(ctypes.Structure):
    _fields_ = [("n_bind", ctypes.c_int), ("bind_names", ctypes.POINTER(ctypes.c_char_p)),
                ("bind_values", ctypes.POINTER(ctypes.c_int64))]


def run(rlx, data, feeds, bind):
    """rlx's outputs, or ("refused", status, message)."""
    from rlx_ctypes import MAX_RANK, RLX_TO_NP, RlxError
    lib = rlx.lib
    P = ctypes.c_void_p
    opt = None
    if bind:
        names = (ctypes.c_char_p * len(bind))(*[k.encode() for k in bind])
        vals = (ctypes.c_int64 * len(bind))(*bind.values())
        opt = ctypes.byref(Options(len(bind), names, vals))
    m, s = P(), P()
    try:
        rlx.check(lib.rlx_model_load_memory(data, len(data), opt, ctypes.byref(m)))
        rlx.check(lib.rlx_model_compile(m, None, ctypes.byref(s)))
        for name, v in feeds.items():
            dims = (ctypes.c_int64 * MAX_RANK)(*v.shape)
            rlx.check(lib.rlx_set_input_shaped(s, name.encode(), v.ctypes.data, v.nbytes, v.ndim, dims))
        rlx.check(lib.rlx_run(s))
        dt, dims = ctypes.c_int(), (ctypes.c_int64 * MAX_RANK)()
        rank = lib.rlx_output_type(s, 0, ctypes.byref(dt), dims)
        y = np.empty([dims[k] for k in range(rank)], dtype=RLX_TO_NP[dt.value])
        rlx.check(lib.rlx_output(s, 0, y.ctypes.data, y.nbytes))
        return [y]
    except RlxError as e:
        return ("refused", e.status, str(e))
    finally:
        if s:
            lib.rlx_session_free(s)
        if m:
            lib.rlx_model_free(m)


def main():
    try:
        import onnxruntime as ort
    except ImportError:
        print("SKIP: onnx or onnxruntime is not installed (scripts/deps.sh installs them)")
        return 77
    sys.path.insert(0, HERE)
    from rlx_ctypes import Rlx
    rlx = Rlx(sys.argv[1])
    fails = 0
    for name, data, all_feeds in models():
        ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
        for feeds in all_feeds:
            want = ref.run(None, feeds)[0]
            b, s = feeds["ids"].shape
            for bind in (None, {"batch": b, "seq": s, **({"n": len(feeds["x"])} if "x" in feeds else {})}):
                got = run(rlx, data, feeds, bind)
                how = "%s ids %dx%d %s" % (name, b, s, "bound" if bind else "symbolic")
                if isinstance(got, tuple):
                    ok = got[1] == "RLX_ERR_UNSUPPORTED" and not bind
                    print("%s %s: %s: %s" % ("ok  " if ok else "FAIL", how, got[1], got[2]))
                else:
                    ok = got[0].shape == want.shape and np.array_equal(got[0], want)
                    print("%s %s: shape %s (onnxruntime %s)" % ("ok  " if ok else "FAIL", how,
                                                                 got[0].shape, want.shape))
                fails += not ok
    fails += reuse(rlx, ort, models()[0][1])
    print("%d failed" % fails)
    return 1 if fails else 0


def reuse(rlx, ort, data):
    """One session of Range(0, seq, 1) + ids over new contents and new dims:
    the graph is built per set of dims (ids is no value input), a set of
    dims seen before reuses its session whatever the contents."""
    from rlx_ctypes import MAX_RANK
    lib = rlx.lib
    P = ctypes.c_void_p
    lib.rlx_model_input_is_value.argtypes = [P, ctypes.c_int]
    lib.rlx_model_graph.argtypes = [P, ctypes.POINTER(P)]
    lib.rlx_session_get_stats.argtypes = [P, P]
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    m, s, g = P(), P(), P()
    rlx.check(lib.rlx_model_load_memory(data, len(data), None, ctypes.byref(m)))
    rlx.check(lib.rlx_model_compile(m, None, ctypes.byref(s)))
    fails = 0
    st = lib.rlx_model_graph(m, ctypes.byref(g))
    msg = lib.rlx_last_error().decode()
    ok = st != 0 and "--bind" in msg and "ids" in msg
    print("%s rlx_model_graph refused: %s" % ("ok  " if ok else "FAIL", msg))
    fails += not ok
    ok = lib.rlx_model_input_is_value(m, 0) == 0
    print("%s ids is no value input" % ("ok  " if ok else "FAIL"))
    fails += not ok
    rng = np.random.default_rng(1)
    stats = (ctypes.c_int64 * 64)()   # rlx_session_stats: plans_built, plan_cache_hits, runs, ...
    inner_runs = []
    for shape in ((1, 5), (1, 5), (2, 7), (1, 5), (2, 7)):
        ids = rng.integers(0, 100, size=shape, dtype=np.int64)
        rlx.check(lib.rlx_set_input_shaped(s, b"ids", ids.ctypes.data, ids.nbytes, 2, (ctypes.c_int64 * MAX_RANK)(*shape)))
        rlx.check(lib.rlx_run(s))
        y = np.empty(shape, np.int64)
        rlx.check(lib.rlx_output(s, 0, y.ctypes.data, y.nbytes))
        ok = np.array_equal(y, ref.run(None, {"ids": ids})[0])
        print("%s one session, ids %dx%d: matches onnxruntime" % (("ok  " if ok else "FAIL",) + shape))
        fails += not ok
        rlx.check(lib.rlx_session_get_stats(s, stats))
        inner_runs.append(stats[2])
    ok = inner_runs == [1, 2, 1, 3, 2]
    print("%s a set of dims seen before reuses its session (runs of each: %s)" % ("ok  " if ok else "FAIL", inner_runs))
    fails += not ok
    lib.rlx_session_free(s)
    lib.rlx_model_free(m)
    return fails


if __name__ == "__main__":
    sys.exit(main())
