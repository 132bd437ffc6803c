"""bench_python.py — what the Python package adds to a run.

1. Per-call overhead: rlx.Session.run on a tiny graph (y = relu(x * 2 + 1),
   x f32[1, 16]: 64 bytes in and out, a few dozen FLOPs, so the time is the
   call path) against onnxruntime's InferenceSession.run on the same graph
   as an ONNX model, and rlx.InferenceSession.run on that model.
2. A 100 MiB input (x f32[26214400], y = reduce_sum(x), one float out)
   through Session.run against the same session driven by the C API
   directly (rlx_set_input_shaped, rlx_run, rlx_output through ctypes):
   equal times mean the package adds no copy of the input. The traffic is
   300 MiB either way: rlx_set_input copies the input into the session (a
   read and a write), the reduction reads it again.

Everything runs on one thread (rlx threads=1, onnxruntime
intra_op_num_threads=1), timed by process CPU time by default, which the
load of a shared machine does not inflate (--clock wall for wall time).
Interleaved rounds, median of the rounds; each round times many calls.

  RLX_LIBRARY=build/librlx.so PYTHONPATH=python python3 bench/bench_python.py [--rounds 9] [--clock cpu|wall]
"""
import argparse
import statistics
import time

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

import rlx
from rlx import _lib


CLOCK = time.process_time


def per_call(fn, n):
    t = CLOCK()
    for _ in range(n):
        fn()
    return (CLOCK() - t) / n


def tiny(rounds):
    g = rlx.Graph("tiny")
    x = g.input("x", "f32", (1, 16))
    g.set_outputs(rlx.ops.relu(x * 2.0 + 1.0))
    sess = g.compile(threads=1)
    nodes = [helper.make_node("Mul", ["x", "two"], ["a"]), helper.make_node("Add", ["a", "one"], ["b"]),
             helper.make_node("Relu", ["b"], ["y"])]
    consts = [helper.make_tensor("two", TensorProto.FLOAT, [], [2.0]),
              helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])]
    model = helper.make_model(helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])], consts),
        opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    ref = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    rso = rlx.SessionOptions()
    rso.intra_op_num_threads = 1
    onnx_sess = rlx.InferenceSession(model, rso)
    X = np.random.default_rng(0).standard_normal((1, 16)).astype(np.float32)
    want = ref.run(None, {"x": X})[0]
    assert np.allclose(sess.run({"x": X})[0], want) and np.allclose(onnx_sess.run(None, {"x": X})[0], want)
    fns = {"rlx Session.run": lambda: sess.run({"x": X}),
           "rlx InferenceSession.run": lambda: onnx_sess.run(None, {"x": X}),
           "onnxruntime InferenceSession.run": lambda: ref.run(None, {"x": X})}
    times = {k: [] for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            times[k].append(per_call(f, 20000))
    return {k: statistics.median(v) for k, v in times.items()}


def big(rounds):
    n = 100 * 1024 * 1024 // 4
    g = rlx.Graph("big")
    x = g.input("x", "f32", (n,))
    g.set_outputs(rlx.ops.reduce_sum(x, [0]))
    sess = g.compile(threads=1)
    X = np.random.default_rng(1).random(n, dtype=np.float32)
    h, lib = sess._h, _lib.lib
    dims = (_lib.i64 * 1)(n)
    out = np.empty((), np.float32)

    def c_api():
        lib.rlx_set_input_shaped(h, b"x", X.ctypes.data, X.nbytes, 1, dims)
        lib.rlx_run(h)
        lib.rlx_output(h, 0, out.ctypes.data, 4)

    c_api()
    assert abs(float(out) - float(sess.run({"x": X})[0])) <= 1e-3 * abs(float(out))
    fns = {"rlx Session.run": lambda: sess.run({"x": X}), "C API (ctypes, no package)": c_api}
    times = {k: [] for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            times[k].append(per_call(f, 10))
    return {k: statistics.median(v) for k, v in times.items()}, X.nbytes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    a = ap.parse_args()
    global CLOCK
    CLOCK = time.process_time if a.clock == "cpu" else time.perf_counter
    t = tiny(a.rounds)
    ref = t["onnxruntime InferenceSession.run"]
    print("tiny graph, per call, %s time (median of %d rounds of 20000 calls):" % (a.clock, a.rounds))
    for k, v in t.items():
        print("  %-36s %7.2f us   %.2fx onnxruntime" % (k, v * 1e6, v / ref))
    b, nbytes = big(a.rounds)
    c = b["C API (ctypes, no package)"]
    print("100 MiB input, reduce_sum, per run, %s time (median of %d rounds of 10 runs):" % (a.clock, a.rounds))
    for k, v in b.items():
        print("  %-36s %7.2f ms   %.3fx the C API   %.1f GB/s of 300 MiB traffic" % (
            k, v * 1e3, v / c, 3 * nbytes / v / 1e9))


if __name__ == "__main__":
    main()
