#!/usr/bin/env python3
"""Training step time, F32, rlx vs PyTorch CPU on the same threads, side by
side in one process:

  cnn          the CNN of `rlx train mnist`: conv 5x5 1->8, relu, max pool 2,
               conv 5x5 8->16, relu, max pool 2, linear 256->10,
               cross-entropy; batch 64 of 28x28
  transformer  a 2-layer pre-norm decoder: vocab 512, seq 64, hidden 128,
               4 heads, GELU MLP 512, causal attention, cross-entropy;
               batch 8

One step = forward, backward and an AdamW update of every param. rlx: the
graph of rlx_train_graph (one rlx_run per step, params written back in
place) through librlx.so (ctypes), rlx_options.threads = threads. torch:
eager, zero_grad + loss.backward() + AdamW.step(), torch.set_num_threads.
Both start from the same weights and batch; their first-step losses are
checked to agree. Timed in interleaved rounds (one step of each per
round, after warm-up, each after an idle gap of --gap-ms so that neither
is timed while the other's worker threads still spin); reported: the
median step time of each and the ratio torch / rlx (> 1: rlx is faster).

  python3 bench/bench_train.py [--lib build/librlx.so] [--threads 1,2]
                               [--rounds 15] [--models cnn,transformer] [--gap-ms 20]
                               [--clock wall|cpu]
"""
import argparse
import ctypes
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "ref"))
sys.path.insert(0, HERE)
from bench_blocks import RlxOptions, ensure_torch  # noqa: E402
from rlxcase import Graph  # noqa: E402


class RlxOptimizer(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("weight_decay", ctypes.c_double), ("momentum", ctypes.c_double),
                ("nesterov", ctypes.c_int), ("beta1", ctypes.c_double), ("beta2", ctypes.c_double),
                ("eps", ctypes.c_double)]


RLX_OPTIM_ADAMW = 1
LR, WD = 1e-3, 0.01


class RlxTrainer:
    """One session of rlx_train_graph(graph text, output 0, its params)."""

    def __init__(self, lib, text, threads, params, inputs):
        L = self.lib = lib
        vp = ctypes.c_void_p
        L.rlx_graph_from_text.argtypes = [ctypes.c_char_p, ctypes.POINTER(vp)]
        L.rlx_graph_output.argtypes = [vp, ctypes.c_int]
        L.rlx_graph_num_params.argtypes = [vp]
        L.rlx_graph_param.argtypes = [vp, ctypes.c_int]
        L.rlx_node_name.argtypes = [vp, ctypes.c_int]
        L.rlx_node_name.restype = ctypes.c_char_p
        L.rlx_node_type.argtypes = [vp, ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int64)]
        L.rlx_train_graph.argtypes = [vp, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int32),
                                      ctypes.POINTER(RlxOptimizer), ctypes.POINTER(vp)]
        L.rlx_compile.argtypes = [vp, ctypes.POINTER(RlxOptions), ctypes.POINTER(vp)]
        for fn in ("rlx_set_param", "rlx_set_input"):
            getattr(L, fn).argtypes = [vp, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
        L.rlx_run.argtypes = [vp]
        L.rlx_output.argtypes = [vp, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
        L.rlx_last_error.restype = ctypes.c_char_p
        g, tg, s = vp(), vp(), vp()
        self.check(L.rlx_graph_from_text(text.encode(), ctypes.byref(g)), "parse")
        n = L.rlx_graph_num_params(g)
        ids = (ctypes.c_int32 * n)(*[L.rlx_graph_param(g, i) for i in range(n)])
        opt = RlxOptimizer(RLX_OPTIM_ADAMW, WD, 0.0, 0, 0.9, 0.999, 1e-8)
        self.check(L.rlx_train_graph(g, L.rlx_graph_output(g, 0), n, ids, ctypes.byref(opt), ctypes.byref(tg)),
                   "rlx_train_graph")
        self.check(L.rlx_compile(tg, ctypes.byref(RlxOptions(1, threads, 0)), ctypes.byref(s)), "compile")
        self.s, self.keep = s, []
        for name, v in params.items():
            self.set(L.rlx_set_param, name, v)
        for i in range(L.rlx_graph_num_params(tg)):  # optimizer state: zeros
            nid = L.rlx_graph_param(tg, i)
            name = L.rlx_node_name(tg, nid).decode()
            if name in params:
                continue
            dt, dims = ctypes.c_int(), (ctypes.c_int64 * 8)()
            rank = L.rlx_node_type(tg, nid, ctypes.byref(dt), dims)
            self.set(L.rlx_set_param, name, np.zeros(dims[:rank], np.int64 if name == "adamw.step" else np.float32))
        for name, v in inputs.items():
            self.set(L.rlx_set_input, name, v)
        self.set(L.rlx_set_input, "lr", np.float32(LR))

    def check(self, st, what):
        if st != 0:
            raise RuntimeError("%s: status %d: %s" % (what, st, self.lib.rlx_last_error().decode()))

    def set(self, fn, name, v):
        a = np.ascontiguousarray(v)
        self.keep.append(a)
        self.check(fn(self.s, name.encode(), a.ctypes.data, a.nbytes), "set " + name)

    def step(self):
        self.check(self.lib.rlx_run(self.s), "run")

    def loss(self):
        out = np.zeros((), np.float32)
        self.check(self.lib.rlx_output(self.s, 0, out.ctypes.data, 4), "output")
        return float(out)


def uniform(rng, shape, fan_in):
    return (rng.uniform(-1, 1, shape) / np.sqrt(fan_in)).astype(np.float32)


# ---------------------------------------------------------------- models: rlx text, torch function, weights

def cnn(rng, torch, F):
    B = 64
    g = Graph("cnn")
    x, t = g.input("x", "f32", [B, 1, 28, 28]), g.input("t", "i32", [B])
    p = {"c1.w": uniform(rng, (8, 1, 5, 5), 25), "c1.b": uniform(rng, (8,), 25),
         "c2.w": uniform(rng, (16, 8, 5, 5), 200), "c2.b": uniform(rng, (16,), 200),
         "fc.w": uniform(rng, (256, 10), 256), "fc.b": uniform(rng, (10,), 256)}
    h_ = {k: g.param(k, "f32", list(v.shape)) for k, v in p.items()}
    conv = dict(ndim=2, stride=[1, 1], pad=[0, 0, 0, 0], dilation=[1, 1], groups=1)
    pool = dict(kind="max", ndim=2, kernel=[2, 2], stride=[2, 2])
    h = g.op("Pool", [g.op("Activation", [g.op("Conv", [x, h_["c1.w"], h_["c1.b"]], **conv)], act="relu")], **pool)
    h = g.op("Pool", [g.op("Activation", [g.op("Conv", [h, h_["c2.w"], h_["c2.b"]], **conv)], act="relu")], **pool)
    h = g.op("Binary", [g.op("MatMul", [g.op("Reshape", [h], dims=[B, 256]), h_["fc.w"]]), h_["fc.b"]], op="add")
    g.outputs(g.op("CrossEntropy", [h, t], axis=-1))
    inputs = {"x": rng.standard_normal((B, 1, 28, 28)).astype(np.float32),
              "t": rng.integers(0, 10, B).astype(np.int32)}

    def loss_fn(tp, ti):
        h = F.max_pool2d(F.relu(F.conv2d(ti["x"], tp["c1.w"], tp["c1.b"])), 2)
        h = F.max_pool2d(F.relu(F.conv2d(h, tp["c2.w"], tp["c2.b"])), 2)
        return F.cross_entropy(h.reshape(B, 256) @ tp["fc.w"] + tp["fc.b"], ti["t"].long())
    return g.text(), p, inputs, loss_fn


def transformer(rng, torch, F):
    B, S, V, E, H, FF, L = 8, 64, 512, 128, 4, 512, 2
    D = E // H
    g = Graph("transformer")
    tok, tgt = g.input("tok", "i32", [B, S]), g.input("tgt", "i32", [B, S])
    p, hp = {}, {}

    def param(name, shape, fan_in, value=None):
        p[name] = uniform(rng, shape, fan_in) if value is None else value
        hp[name] = g.param(name, "f32", list(shape))
        return hp[name]

    def lin(x, name, k, n):
        return g.op("Binary", [g.op("MatMul", [x, param(name + ".w", (k, n), k)]), param(name + ".b", (n,), k)],
                    op="add")

    def ln(x, name):
        return g.op("LayerNorm", [x, param(name + ".g", (E,), 1, np.ones(E, np.float32)),
                                  param(name + ".b", (E,), 1, np.zeros(E, np.float32))], axis=-1, eps=1e-5)

    h = g.op("Binary", [g.op("Gather", [param("emb", (V, E), 1), tok], axis=0), param("pos", (S, E), 1)], op="add")
    for i in range(L):
        pre = "h%d." % i
        a = ln(h, pre + "ln1")
        q, k, v = (lin(a, pre + n, E, E) for n in "qkv")
        att = g.op("Attention", [q, k, v], num_heads=H, num_kv_heads=H, head_dim=D, mask="causal")
        h = g.op("Binary", [h, lin(att, pre + "o", E, E)], op="add")
        f = g.op("Activation", [lin(ln(h, pre + "ln2"), pre + "up", E, FF)], act="gelu")
        h = g.op("Binary", [h, lin(f, pre + "down", FF, E)], op="add")
    logits = g.op("MatMul", [ln(h, "lnf"), param("head", (E, V), E)])
    g.outputs(g.op("CrossEntropy", [logits, tgt], axis=-1))
    inputs = {"tok": rng.integers(0, V, (B, S)).astype(np.int32), "tgt": rng.integers(0, V, (B, S)).astype(np.int32)}

    def loss_fn(tp, ti):
        def lin_(x, n):
            return x @ tp[n + ".w"] + tp[n + ".b"]

        def ln_(x, n):
            return F.layer_norm(x, (E,), tp[n + ".g"], tp[n + ".b"], 1e-5)
        h = tp["emb"][ti["tok"].long()] + tp["pos"]
        for i in range(L):
            pre = "h%d." % i
            a = ln_(h, pre + "ln1")
            q, k, v = (lin_(a, pre + n).reshape(B, S, H, D).transpose(1, 2) for n in "qkv")
            att = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, S, E)
            h = h + lin_(att, pre + "o")
            h = h + lin_(F.gelu(lin_(ln_(h, pre + "ln2"), pre + "up")), pre + "down")
        return F.cross_entropy((ln_(h, "lnf") @ tp["head"]).reshape(B * S, V), ti["tgt"].long().reshape(B * S))
    return g.text(), p, inputs, loss_fn


MODELS = {"cnn": cnn, "transformer": transformer}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default="build/librlx.so")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--models", default="cnn,transformer")
    ap.add_argument("--gap-ms", type=float, default=20.0, help="idle time before each timed step")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="cpu: process CPU time (all threads), the kernel-quality measure on a loaded machine "
                         "at 1 thread")
    args = ap.parse_args()
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    torch = ensure_torch()
    import torch.nn.functional as F
    lib = ctypes.CDLL(args.lib)
    print("training step (forward + backward + AdamW), f32; median of %d interleaved rounds; %s time; torch %s"
          % (args.rounds, args.clock, torch.__version__))
    print("%-12s %7s %12s %12s %14s" % ("model", "threads", "rlx ms", "torch ms", "torch / rlx"))
    for name in args.models.split(","):
        for threads in (int(t) for t in args.threads.split(",")):
            rng = np.random.default_rng(1)
            text, params, inputs, loss_fn = MODELS[name](rng, torch, F)
            rlx = RlxTrainer(lib, text, threads, params, inputs)
            torch.set_num_threads(threads)
            tp = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
            ti = {k: torch.tensor(v) for k, v in inputs.items()}
            opt = torch.optim.AdamW(list(tp.values()), lr=float(np.float32(LR)), weight_decay=WD)

            def torch_step():
                opt.zero_grad()
                loss = loss_fn(tp, ti)
                loss.backward()
                opt.step()
                return float(loss.detach())
            rlx.step()
            l_rlx, l_torch = rlx.loss(), torch_step()
            if abs(l_rlx - l_torch) > 1e-3 * max(1.0, abs(l_torch)):
                raise SystemExit("%s: first-step losses differ: rlx %.6f, torch %.6f" % (name, l_rlx, l_torch))
            times = {"rlx": [], "torch": []}
            for r in range(args.warmup + args.rounds):
                for who, fn in (("rlx", rlx.step), ("torch", torch_step)):
                    # an idle gap first: the other side's worker threads spin
                    # a while after their last task (torch's OpenMP, rlx's
                    # pool), and on a machine with few cores that spinning
                    # would be charged to whoever runs next
                    time.sleep(args.gap_ms / 1e3)
                    t0 = clock()
                    fn()
                    if r >= args.warmup:
                        times[who].append(clock() - t0)
            mr, mt = (1e3 * float(np.median(times[w])) for w in ("rlx", "torch"))
            print("%-12s %7d %12.2f %12.2f %13.2fx" % (name, threads, mr, mt, mt / mr), flush=True)


if __name__ == "__main__":
    main()
