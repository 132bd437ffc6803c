#!/usr/bin/env python3
"""bench_cuda_onnx.py — ResNet-50, BERT-base and all-MiniLM-L6-v2 (ONNX,
F32) on the GPU: rlx's CUDA backend against PyTorch eager and
torch.compile on the same shapes, random weights (make_onnx_models.py
writes the ONNX files; the PyTorch models are the same architectures:
ResNet-50 as that file lays it out (convolutions with a bias, BatchNorm
folded) with the file's weights, BERT and MiniLM as transformers'
BertModel without its pooler, weights of its own).

Two sides, run as two steps so the PyTorch timings can wait for a build
to end (--go FILE: compile and warm up, then wait for FILE to exist):

  python3 bench/bench_cuda_onnx.py torch --out torch.json [--go FILE]
  python3 bench/bench_cuda_onnx.py rlx LIBRLX --torch torch.json

Precision, as PyTorch's defaults give each model: ResNet-50 in TF32
(cuDNN's allow_tf32, on by default for convolutions; rlx RLX_CUDA_TF32=1,
which also covers its one fully connected layer, so torch's matmul TF32
is on for that row too), BERT and MiniLM in F32 (torch's matmul TF32 off
by default; rlx's default). torch.compile runs in its default mode
(inductor, no CUDA graphs) and in "reduce-overhead" (CUDA graphs).

Timing: medians over --runs. PyTorch: CUDA events around each forward
(inputs on the device). rlx: wall clock around each rlx_run, which
returns with the output in host memory (its copy back included). The rlx
step also checks each model's output against onnxruntime (CPU) and that
the session runs every node on the device (rlx_session_stats.fallback_nodes
== 0), and prints a table: ms per batch and torch / rlx (above 1: rlx
faster).
"""
import argparse
import ctypes
import json
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "onnx"))

CASES = [("resnet50", 1), ("resnet50", 8), ("bert", 1), ("bert", 8), ("minilm", 1), ("minilm", 8)]
TF32 = {"resnet50": True, "bert": False, "minilm": False}
SEQ = 128


def feeds_of(name, batch, seed=0):
    rng = np.random.default_rng(seed)
    if name == "resnet50":
        return {"pixel_values": rng.standard_normal((batch, 3, 224, 224)).astype(np.float32)}
    return {"input_ids": rng.integers(0, 30522, (batch, SEQ)).astype(np.int64),
            "attention_mask": np.ones((batch, SEQ), np.int64),
            "token_type_ids": rng.integers(0, 2, (batch, SEQ)).astype(np.int64)}


def flops_of(name, batch):
    """2 per multiply-add of the convolutions and products (attention's included)."""
    if name == "resnet50":
        return 2 * 4.09e9 * batch
    h, f, layers = (768, 3072, 12) if name == "bert" else (384, 1536, 6)
    per_tok = layers * (4 * h * h + 2 * h * f + 2 * SEQ * h)
    return 2 * per_tok * SEQ * batch


# ---------------------------------------------------------------- PyTorch

def torch_resnet50(path):
    import onnx
    import torch
    from torch import nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self, cin, width, stride, down):
            super().__init__()
            self.c1 = nn.Conv2d(cin, width, 1)
            self.c2 = nn.Conv2d(width, width, 3, stride, 1)
            self.c3 = nn.Conv2d(width, width * 4, 1)
            self.down = nn.Conv2d(cin, width * 4, 1, stride) if down else None

        def forward(self, x):
            y = self.c3(F.relu(self.c2(F.relu(self.c1(x)))))
            return F.relu(y + (self.down(x) if self.down is not None else x))

    class ResNet50(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 64, 7, 2, 3)
            blocks, cin = [], 64
            for width, n, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
                for i in range(n):
                    blocks.append(Block(cin, width, stride if i == 0 else 1, i == 0))
                    cin = width * 4
            self.blocks = nn.Sequential(*blocks)
            self.fc = nn.Linear(2048, 1000)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.stem(x)), 3, 2, 1)
            x = self.blocks(x)
            return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))

    m = ResNet50()
    # the file's initializers in the order they were made: each conv's w, b, then fc's
    inits = [onnx.numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer]
    params = list(m.parameters())
    assert len(inits) == len(params), (len(inits), len(params))
    with torch.no_grad():
        for p, a in zip(params, inits):
            assert tuple(p.shape) == a.shape, (p.shape, a.shape)
            p.copy_(torch.from_numpy(a))
    return m


def torch_bert(name):
    from transformers import BertConfig, BertModel
    h, layers, f = (768, 12, 3072) if name == "bert" else (384, 6, 1536)
    cfg = BertConfig(hidden_size=h, num_hidden_layers=layers, num_attention_heads=12, intermediate_size=f,
                     hidden_act="gelu", layer_norm_eps=1e-12)
    return BertModel(cfg, add_pooling_layer=False)


def time_torch(fn, runs):
    import torch
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(runs)]
    for a, b in ev:
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in ev)


def torch_side(args):
    import torch
    import make_onnx_models
    torch.backends.cudnn.benchmark = False
    dev = torch.device("cuda")
    variants = [v for v in args.variants.split(",") if v]
    prepared = []
    for name, batch in CASES:
        tf32 = TF32[name]
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        if name == "resnet50":
            m = torch_resnet50(make_onnx_models.make(name, args.models_dir))
        else:
            m = torch_bert(name)
        m = m.to(dev).eval()
        feeds = {k: torch.from_numpy(v).to(dev) for k, v in feeds_of(name, batch).items()}
        if name == "resnet50":
            call = lambda mod, f=feeds: mod(f["pixel_values"])  # noqa: E731
        else:
            call = lambda mod, f=feeds: mod(**f).last_hidden_state  # noqa: E731
        with torch.no_grad():
            call(m)
        prepared.append((name, batch, tf32, {"eager": m}, call))
    # compiles in order of worth, each started only within --compile-budget:
    # the default mode everywhere, then CUDA graphs at batch 1
    order = [(i, v) for v in variants if v == "compile" for i in range(len(prepared))]
    order += [(i, v) for v in variants if v not in ("eager", "compile") for i in range(len(prepared))
              if prepared[i][1] == 1]
    t_start = time.perf_counter()
    for i, v in order:
        name, batch, tf32, fns, call = prepared[i]
        if time.perf_counter() - t_start > args.compile_budget:
            print("torch %s:%d %s: skipped (compile budget spent)" % (name, batch, v), flush=True)
            continue
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        t0 = time.perf_counter()
        try:
            mod = torch.compile(fns["eager"], mode=None if v == "compile" else v, dynamic=False)
            with torch.no_grad():
                for _ in range(3):
                    call(mod)
            torch.cuda.synchronize()
            fns[v] = mod
            print("torch %s:%d %s: compiled in %.1f s" % (name, batch, v, time.perf_counter() - t0), flush=True)
        except Exception as e:  # a mode that fails is reported and left out
            print("torch %s:%d %s: failed: %s" % (name, batch, v, str(e)[:300]), flush=True)
    if args.go:
        while not os.path.exists(args.go):
            time.sleep(0.5)
    res = {}
    with torch.no_grad():
        for name, batch, tf32, fns, call in prepared:
            torch.backends.cuda.matmul.allow_tf32 = tf32
            torch.backends.cudnn.allow_tf32 = tf32
            row = {}
            for v, mod in fns.items():
                row[v] = time_torch(lambda: call(mod), args.runs)
            res["%s:%d" % (name, batch)] = row
            print("torch %s:%d %s" % (name, batch, " ".join("%s %.3f ms" % kv for kv in row.items())), flush=True)
    res["_device"] = torch.cuda.get_device_name()
    res["_torch"] = torch.__version__
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)


# ---------------------------------------------------------------- rlx

def rlx_cuda_session(rlx, path, feeds):
    """A session of the model on CUDA with its inputs set."""
    from rlx_ctypes import CUDA
    lib = rlx.lib
    m, s = ctypes.c_void_p(), ctypes.c_void_p()
    rlx.check(lib.rlx_model_load(path.encode(), None, ctypes.byref(m)))
    rlx.check(lib.rlx_model_compile(m, ctypes.byref(CUDA), ctypes.byref(s)))
    rlx.set_inputs(m, s, feeds)
    return m, s


def rlx_side(args):
    import onnxruntime as ort
    import make_onnx_models
    from rlx_ctypes import Rlx
    rlx = Rlx(args.lib)
    lib = rlx.lib
    torch_res = {}
    if args.torch and os.path.exists(args.torch):
        with open(args.torch) as f:
            torch_res = json.load(f)
    rows, ok = [], True
    for name, batch in CASES:
        path = make_onnx_models.make(name, args.models_dir)
        feeds = feeds_of(name, batch)
        if TF32[name]:
            os.environ["RLX_CUDA_TF32"] = "1"
        else:
            os.environ.pop("RLX_CUDA_TF32", None)
        t0 = time.perf_counter()
        m, s = rlx_cuda_session(rlx, path, feeds)
        rlx.check(lib.rlx_run(s))
        compile_s = time.perf_counter() - t0
        st = rlx.stats(s)
        got = rlx.output(s, 0)
        want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
        err = float(np.max(np.abs(got - want)) / (np.max(np.abs(want)) + 1e-30))
        for _ in range(3):
            rlx.check(lib.rlx_run(s))
        times = []
        for _ in range(args.runs):
            t = time.perf_counter()
            rlx.check(lib.rlx_run(s))
            times.append((time.perf_counter() - t) * 1e3)
        ms = statistics.median(times)
        lib.rlx_session_free(s)
        lib.rlx_model_free(m)
        # the bound of the check: TF32 rounds each operand to 10 bits (2^-11 relative), F32 sums in another order
        bound = 2e-2 if TF32[name] else 2e-3
        good = st.fallback_nodes == 0 and err <= bound
        ok &= good
        key = "%s:%d" % (name, batch)
        rows.append((key, "tf32" if TF32[name] else "f32", ms, flops_of(name, batch) / ms / 1e9, st.fallback_nodes,
                     st.device_launches, err, compile_s, torch_res.get(key, {})))
        print("rlx %s: %.3f ms, fallback_nodes %d, launches %d, max err / max |ort| %.2e%s, first run %.1f s" % (
            key, ms, st.fallback_nodes, st.device_launches, err, "" if good else " FAIL", compile_s), flush=True)
    variants = ["eager", "compile", "reduce-overhead"]
    print("\n%s, torch %s" % (torch_res.get("_device", "?"), torch_res.get("_torch", "?")))
    print("| model | batch | precision | rlx ms | rlx TFLOP/s | " +
          " | ".join("torch %s ms | %s / rlx" % (v, v) for v in variants) + " |")
    print("|---" * (5 + 2 * len(variants)) + "|")
    for key, prec, ms, tflops, fb, launches, err, cs, tr in rows:
        name, batch = key.split(":")
        cells = []
        for v in variants:
            t = tr.get(v)
            cells += ["%.3f" % t, "%.2fx" % (t / ms)] if t else ["-", "-"]
        print("| %s | %s | %s | %.3f | %.1f | %s |" % (name, batch, prec, ms, tflops, " | ".join(cells)))
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("side", choices=["torch", "rlx"])
    ap.add_argument("lib", nargs="?")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--out", default="torch.json")
    ap.add_argument("--torch", default=None)
    ap.add_argument("--go", default=None)
    ap.add_argument("--variants", default="eager,compile,reduce-overhead")
    ap.add_argument("--models-dir", default=None)
    ap.add_argument("--compile-budget", type=float, default=240, help="seconds after which no compile starts")
    a = ap.parse_args()
    if a.side == "torch":
        torch_side(a)
        return 0
    return rlx_side(a)


if __name__ == "__main__":
    sys.exit(main())
