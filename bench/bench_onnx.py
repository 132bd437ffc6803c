#!/usr/bin/env python3
"""bench_onnx.py LIBRLX [--threads 1,2] [--runs N] [--models a,b]

rlx against onnxruntime on the same ONNX files, side by side in one
process: each model loaded by both (rlx through its C API, ctypes), outputs
checked against each other, then N interleaved runs of each (rlx, ort, rlx,
ort, ...). Reports medians: 1-thread rows in process CPU time (robust to a
loaded machine), others in wall time; the ratio is ort / rlx (above 1: rlx
faster). FLOPs are counted from the graph (2 per multiply-add of Conv,
Gemm, MatMul) and given as a fraction of the FMA ceiling: threads x GHz x
flops per cycle (--flops-per-cycle, default 64: two 512-bit FMA units of
16 f32 lanes, 2 flops each).

Models: the model-zoo models shipped in the onnx wheel
(onnx/backend/test/data/light: their weights are ConstantOfShape fills, the
architecture and FLOPs are the real models'), batch 1, an all-ones input.
"""
import argparse
import ctypes
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "onnx"))
from rlx_ctypes import MAX_RANK, Rlx  # noqa: E402


class Options(ctypes.Structure):
    _fields_ = [("device", ctypes.c_int), ("threads", ctypes.c_int), ("flags", ctypes.c_uint)]


def count_flops(model):
    import onnx
    from onnx import shape_inference
    m = shape_inference.infer_shapes(model)
    shapes = {}
    for v in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output):
        shapes[v.name] = [d.dim_value for d in v.type.tensor_type.shape.dim]
    for t in m.graph.initializer:
        shapes[t.name] = list(t.dims)
    for n in m.graph.node:   # ConstantOfShape weights: their shape input is a constant
        if n.op_type == "ConstantOfShape":
            for c in m.graph.node:
                if c.op_type == "Constant" and c.output[0] == n.input[0]:
                    shapes[n.output[0]] = list(onnx.numpy_helper.to_array(c.attribute[0].t))
            for t in m.graph.initializer:
                if t.name == n.input[0]:
                    shapes[n.output[0]] = list(onnx.numpy_helper.to_array(t))
    flops = 0
    for n in m.graph.node:
        if n.op_type == "Conv" and n.output[0] in shapes and n.input[1] in shapes:
            out, w = shapes[n.output[0]], shapes[n.input[1]]
            flops += 2 * int(np.prod(out)) * int(np.prod(w[1:]))
        elif n.op_type in ("Gemm", "MatMul") and n.output[0] in shapes and n.input[0] in shapes:
            a = shapes[n.input[0]]
            flops += 2 * int(np.prod(shapes[n.output[0]])) * (a[-1] if not any(
                at.name == "transA" and at.i for at in n.attribute) else a[-2])
    return flops


def median_time(fn, clock):
    t0 = clock()
    fn()
    return clock() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--models", default="resnet50,squeezenet,inception_v2")
    ap.add_argument("--ghz", type=float, default=2.6)
    ap.add_argument("--flops-per-cycle", type=float, default=64)
    a = ap.parse_args()
    import onnx
    import onnxruntime as ort
    light = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    rlx = Rlx(a.lib)
    lib = rlx.lib
    print("| model | threads | GFLOP | rlx ms | ort ms | ratio | rlx % of FMA peak | clock |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for name in a.models.split(","):
        path = os.path.join(light, "light_%s.onnx" % name)
        model = onnx.load(path)
        flops = count_flops(model)
        made = {o for n in model.graph.node for o in n.output} | {t.name for t in model.graph.initializer}
        inp = [i for i in model.graph.input if i.name not in made][0]
        x = np.ones([d.dim_value for d in inp.type.tensor_type.shape.dim], dtype=np.float32)
        for threads in [int(t) for t in a.threads.split(",")]:
            so = ort.SessionOptions()
            so.intra_op_num_threads = threads
            so.inter_op_num_threads = 1
            so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
            m, s = ctypes.c_void_p(), ctypes.c_void_p()
            rlx.check(lib.rlx_model_load(path.encode(), None, ctypes.byref(m)))
            opt = Options(1, threads, 0)
            rlx.check(lib.rlx_model_compile(m, ctypes.byref(opt), ctypes.byref(s)))
            dims = (ctypes.c_int64 * MAX_RANK)(*x.shape)
            rlx.check(lib.rlx_set_input_shaped(s, lib.rlx_model_input_name(m, 0), x.ctypes.data, x.nbytes,
                                               x.ndim, dims))
            out = np.empty(sess.get_outputs()[0].shape, dtype=np.float32)

            def run_rlx():
                rlx.check(lib.rlx_run(s))

            def run_ort():
                sess.run(None, {inp.name: x})

            run_rlx()
            rlx.check(lib.rlx_output(s, 0, out.ctypes.data, out.nbytes))
            ref = sess.run(None, {inp.name: x})[0]
            assert np.allclose(out.reshape(ref.shape), ref, rtol=1e-3, atol=1e-5), "outputs differ"
            run_ort()
            clock = time.process_time if threads == 1 else time.perf_counter
            tr, to = [], []
            for _ in range(a.runs):
                tr.append(median_time(run_rlx, clock))
                to.append(median_time(run_ort, clock))
            mr, mo = statistics.median(tr), statistics.median(to)
            peak = threads * a.ghz * 1e9 * a.flops_per_cycle
            print("| %s | %d | %.2f | %.1f | %.1f | %.2f | %.1f%% | %s |" % (
                name, threads, flops / 1e9, mr * 1e3, mo * 1e3, mo / mr, 100 * flops / mr / peak,
                "cpu" if threads == 1 else "wall"), flush=True)
            lib.rlx_session_free(s)
            lib.rlx_model_free(m)


if __name__ == "__main__":
    main()
