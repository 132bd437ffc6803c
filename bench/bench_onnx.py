#!/usr/bin/env python3
"""bench_onnx.py LIBRLX [--threads 1,2] [--runs N] [--models a,b:8,...] [--rss]

rlx against onnxruntime on the same ONNX files, side by side in one
process: each model loaded by both (rlx through its C API, ctypes), outputs
checked against each other, then N interleaved runs of each (rlx, ort, rlx,
ort, ...). Reports medians: 1-thread rows in process CPU time (robust to a
loaded machine), others in wall time; the ratio is ort / rlx (above 1: rlx
faster). With several threads each side is timed in a child process of its
own (N rounds, rlx child then ort child, 5 runs each after a warm-up): in
one process onnxruntime's workers, spinning after its run, take the cores
from rlx's next run (MobileNetV2 at 2 threads on 2 vCPUs: rlx 4.6 ms alone,
8.6 ms between onnxruntime runs), and rlx's from onnxruntime. FLOPs are counted from the graph (2 per multiply-add of Conv,
Gemm, MatMul, and of every step's X·Wᵀ and H·Rᵀ in LSTM, GRU, RNN) and
given as a fraction of the FMA ceiling: threads x one core's f32 FMA rate,
measured on this machine by a probe (fma_probe: independent FMA chains of
the widest vectors the compiler targets natively, each thread's rate from
its own CPU time, so the clock the cores run at under load is the one
counted; --peak-gflops overrides it).

Models: NAME or NAME:BATCH (default batch 1). resnet50, resnet50_stem,
mobilenetv2, bert (sequence 128), vit and lstm are written by make_onnx_models.py (random
weights, the real architectures; made on first use in its cache folder);
zoo_<name> is a model-zoo model shipped in the onnx wheel
(onnx/backend/test/data/light: weights are ConstantOfShape fills; batch 1
only). Inputs: random floats; integer inputs (token ids, masks) random 0/1.
ONNX Runtime runs with all graph optimizations (its default).

--rss adds each side's peak resident memory: the model loaded and run
once in a child process of its own (VmHWM), per row.
"""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "onnx"))
sys.path.insert(0, HERE)
from rlx_ctypes import MAX_RANK, NP_TO_RLX, Options, Rlx  # noqa: E402

DEFAULT_MODELS = "resnet50,resnet50:8,mobilenetv2,mobilenetv2:8,bert,bert:8,vit"


FMA_PROBE_C = r"""
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifdef __AVX512F__
typedef __m512 vec;
#define SET1 _mm512_set1_ps
#define FMA _mm512_fmadd_ps
#define ADD _mm512_add_ps
#define STORE _mm512_storeu_ps
#define LANES 16
#else
typedef __m256 vec;
#define SET1 _mm256_set1_ps
#define FMA _mm256_fmadd_ps
#define ADD _mm256_add_ps
#define STORE _mm256_storeu_ps
#define LANES 8
#endif
static double cpu_now(void) { struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
typedef struct { long iters; double rate; float sink; } job;
static void *work(void *arg) {
  job *j = arg;
  vec v[12], m = SET1(0.999999f), x = SET1(1e-7f);
  for (int i = 0; i < 12; i++) v[i] = SET1((float)i);
  double t0 = cpu_now();
  for (long it = 0; it < j->iters; it++)
#pragma GCC unroll 12
    for (int i = 0; i < 12; i++) v[i] = FMA(v[i], m, x);
  j->rate = j->iters * 12.0 * LANES * 2 / (cpu_now() - t0);
  float s[LANES];
  for (int i = 1; i < 12; i++) v[0] = ADD(v[0], v[i]);
  STORE(s, v[0]);
  j->sink = s[0];
  return NULL;
}
int main(int argc, char **argv) {
  int nt = atoi(argv[1]);
  pthread_t th[256]; job jb[256]; double best = 0;
  for (int rep = 0; rep < 3; rep++) {
    double sum = 0;
    for (int i = 0; i < nt; i++) { jb[i] = (job){20000000, 0, 0}; pthread_create(&th[i], 0, work, &jb[i]); }
    for (int i = 0; i < nt; i++) { pthread_join(th[i], 0); sum += jb[i].rate; }
    if (sum / nt > best) best = sum / nt;
  }
  printf("%.1f\n", best / 1e9);
  return 0;
}
"""


def fma_probe(threads):
    """One core's f32 FMA GFLOP/s with threads cores busy (module doc), or None where the probe
    cannot be built (no C compiler, not x86)."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        src, exe = os.path.join(d, "fma_probe.c"), os.path.join(d, "fma_probe")
        with open(src, "w") as f:
            f.write(FMA_PROBE_C)
        try:
            subprocess.run(["cc", "-O2", "-march=native", "-pthread", src, "-o", exe], check=True,
                           capture_output=True)
            return float(subprocess.run([exe, str(threads)], check=True, capture_output=True,
                                        text=True).stdout)
        except (OSError, subprocess.CalledProcessError, ValueError):
            return None


def model_path(name):
    if name.startswith("zoo_"):
        import onnx
        return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light",
                            "light_%s.onnx" % name[4:])
    import make_onnx_models
    return make_onnx_models.make(name)


def graph_inputs(model):
    made = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in made]


def make_feeds(model, batch, seed=0):
    """Random inputs of the declared types: batch for symbolic dims."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in graph_inputs(model):
        tt = i.type.tensor_type
        shape = []
        for d in tt.shape.dim:
            shape.append(d.dim_value if d.dim_value else batch)
        if tt.elem_type == 1:
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
        else:
            feeds[i.name] = rng.integers(0, 2, shape).astype(np.int64)
    return feeds


def count_flops(model, feeds):
    import onnx
    from onnx import shape_inference
    m = onnx.ModelProto()
    m.CopyFrom(model)
    del m.graph.initializer[:]   # shapes only: keep the weights' dims as value_info
    for t in model.graph.initializer:
        m.graph.value_info.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    for i in m.graph.input:
        if i.name in feeds:
            for d, n in zip(i.type.tensor_type.shape.dim, feeds[i.name].shape):
                d.Clear()
                d.dim_value = n
    consts = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer
              if t.data_type == onnx.TensorProto.INT64}
    for n in m.graph.node:   # shape inputs of Reshape etc. as constants, so shapes propagate
        if n.op_type == "Constant":
            consts[n.output[0]] = onnx.numpy_helper.to_array(n.attribute[0].t)
    for name, a in consts.items():
        m.graph.initializer.append(onnx.numpy_helper.from_array(a, name))
    m = shape_inference.infer_shapes(m, data_prop=True)
    shapes = {}
    for v in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output):
        shapes[v.name] = [d.dim_value for d in v.type.tensor_type.shape.dim]
    for n in m.graph.node:   # ConstantOfShape weights (zoo models): their shape input is a constant
        if n.op_type == "ConstantOfShape" and n.input[0] in consts:
            shapes[n.output[0]] = list(consts[n.input[0]])
    flops = 0
    for n in m.graph.node:
        if n.op_type == "Conv" and n.output[0] in shapes and n.input[1] in shapes:
            out, w = shapes[n.output[0]], shapes[n.input[1]]
            flops += 2 * int(np.prod(out)) * int(np.prod(w[1:]))
        elif n.op_type in ("Gemm", "MatMul") and n.output[0] in shapes and n.input[0] in shapes:
            a = shapes[n.input[0]]
            flops += 2 * int(np.prod(shapes[n.output[0]])) * (a[-1] if not any(
                at.name == "transA" and at.i for at in n.attribute) else a[-2])
        elif n.op_type in ("LSTM", "GRU", "RNN") and n.input[0] in shapes and n.input[1] in shapes:
            x, w = shapes[n.input[0]], shapes[n.input[1]]   # [S, B, I] (layout 1: [B, S, I]), [D, G·H, I]
            hid = w[1] // {"LSTM": 4, "GRU": 3, "RNN": 1}[n.op_type]
            flops += 2 * x[0] * x[1] * w[0] * w[1] * (x[2] + hid)   # X·Wᵀ and H·Rᵀ of every step
    return flops


def rlx_session(rlx, path, threads, feeds):
    lib = rlx.lib
    m, s = ctypes.c_void_p(), ctypes.c_void_p()
    rlx.check(lib.rlx_model_load(path.encode(), None, ctypes.byref(m)))
    opt = Options(1, threads, 0)
    rlx.check(lib.rlx_model_compile(m, ctypes.byref(opt), ctypes.byref(s)))
    for i in range(lib.rlx_model_num_inputs(m)):
        name = lib.rlx_model_input_name(m, i)
        x = feeds[name.decode()]
        assert x.dtype in NP_TO_RLX
        dims = (ctypes.c_int64 * MAX_RANK)(*x.shape)
        rlx.check(lib.rlx_set_input_shaped(s, name, x.ctypes.data, x.nbytes, x.ndim, dims))
    return m, s


def ort_session(path, threads):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def peak_rss_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def run_child(side, lib, path, threads, batch, runs=0):
    """What a child that loads the model on one side, runs it once, then times runs runs reports."""
    cmd = [sys.executable, os.path.abspath(__file__), lib, "--child", side, "--child-path", path,
           "--threads", str(threads), "--child-batch", str(batch), "--child-runs", str(runs)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def child_rss(side, lib, path, threads, batch):
    """VmHWM (MiB) of a child that loads the model on one side and runs it once."""
    return run_child(side, lib, path, threads, batch)["rss_kb"] / 1024


def child_main(a):
    import onnx
    model = onnx.load(a.child_path, load_external_data=False)
    feeds = make_feeds(model, a.child_batch)
    del model
    threads = int(a.threads)
    if a.child == "rlx":
        rlx = Rlx(a.lib)
        m, s = rlx_session(rlx, a.child_path, threads, feeds)

        def run():
            rlx.check(rlx.lib.rlx_run(s))
    else:
        sess = ort_session(a.child_path, threads)

        def run():
            sess.run(None, feeds)
    run()
    times = []
    if a.child_runs:
        for _ in range(2):
            run()
        times = [clock_one(run, time.perf_counter) for _ in range(a.child_runs)]
    print(json.dumps({"rss_kb": peak_rss_kb(), "times": times}))


def clock_one(fn, clock):
    t0 = clock()
    fn()
    return clock() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--models", default=DEFAULT_MODELS)
    ap.add_argument("--peak-gflops", type=float, help="one core's f32 FMA GFLOP/s (default: fma_probe)")
    ap.add_argument("--rss", action="store_true")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--child-path", help=argparse.SUPPRESS)
    ap.add_argument("--child-batch", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--child-runs", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child_main(a)
    import onnx
    rlx = Rlx(a.lib)
    lib = rlx.lib
    lib.rlx_output.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
    thread_counts = [int(t) for t in a.threads.split(",")]
    core_gflops = {t: a.peak_gflops or fma_probe(t) for t in thread_counts}
    print("FMA ceiling, GFLOP/s a core: %s" % ", ".join(
        "%d thread%s %s" % (t, "" if t == 1 else "s", "%.1f" % g if g else "unknown")
        for t, g in core_gflops.items()))
    print("| model | batch | threads | GFLOP | rlx ms | ort ms | ratio | rlx %% of FMA peak | clock |%s"
          % (" rlx MiB | ort MiB |" if a.rss else ""))
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |%s" % (" ---: | ---: |" if a.rss else ""))
    for spec in a.models.split(","):
        name, _, b = spec.partition(":")
        batch = int(b or 1)
        path = model_path(name)
        model = onnx.load(path, load_external_data=False)
        feeds = make_feeds(model, batch)
        flops = count_flops(model, feeds)
        del model
        for threads in thread_counts:
            sess = ort_session(path, threads)
            m, s = rlx_session(rlx, path, threads, feeds)

            def run_rlx():
                rlx.check(lib.rlx_run(s))

            def run_ort():
                sess.run(None, feeds)

            run_rlx()
            ref = sess.run(None, feeds)[0]
            out = np.empty(ref.shape, dtype=np.float32)
            rlx.check(lib.rlx_output(s, 0, out.ctypes.data, out.nbytes))
            err = float(np.max(np.abs(out - ref)))
            assert err <= 1e-3 * float(np.max(np.abs(ref))) + 1e-5, "outputs differ by %g" % err
            tr, to = [], []
            if threads == 1:
                for _ in range(a.runs):
                    tr.append(clock_one(run_rlx, time.process_time))
                    to.append(clock_one(run_ort, time.process_time))
            lib.rlx_session_free(s)
            lib.rlx_model_free(m)
            del sess
            if threads > 1:
                for _ in range(a.runs):
                    tr += run_child("rlx", a.lib, path, threads, batch, 5)["times"]
                    to += run_child("ort", a.lib, path, threads, batch, 5)["times"]
            mr, mo = statistics.median(tr), statistics.median(to)
            peak = threads * (core_gflops[threads] or float("nan")) * 1e9
            rss = ""
            if a.rss:
                rss = " %.0f | %.0f |" % (child_rss("rlx", a.lib, path, threads, batch),
                                          child_rss("ort", a.lib, path, threads, batch))
            print("| %s | %d | %d | %.2f | %.1f | %.1f | %.2f | %.1f%% | %s |%s" % (
                name, batch, threads, flops / 1e9, mr * 1e3, mo * 1e3, mo / mr, 100 * flops / mr / peak,
                "cpu" if threads == 1 else "wall", rss), flush=True)


if __name__ == "__main__":
    main()
