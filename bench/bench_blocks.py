#!/usr/bin/env python3
"""Transformer blocks, F32, batch 1, side by side in one process:

  bert   a BERT-base encoder layer: seq 128, hidden 768, 12 heads, FFN 3072
         (post-LN, GELU, biases everywhere)
  llama  a Llama-style decoder block: seq 128, hidden 2048, 32 heads, 8 kv
         heads, FFN 5632 (RmsNorm, neox rope, causal GQA attention, SwiGLU)

Variants:
  torch    PyTorch CPU eager (F.linear, F.scaled_dot_product_attention,
           F.layer_norm / F.rms_norm), torch.set_num_threads(threads)
  unfused  rlx, the block in primitive ops (MatMul, Binary, Reshape,
           Transpose, Softmax, LayerNorm, ...) compiled with RLX_FLAG_NO_FUSE
  fused    rlx, the same block written with the fused ops (FusedMatMulBiasAct,
           Attention / FusedAttentionBlock, FusedResidualLN, FusedSwiGLU) —
           what the fusion pass is to produce from the unfused graph
  pipeline rlx, the unfused graph compiled with fusion on (the pass pipeline
           as it is in this build)

rlx runs through librlx.so (ctypes) with rlx_options.threads = threads. The
variants are timed in interleaved rounds (one run of each per round, after
warm-up runs), so a noisy machine slows all alike; reported: the median over
the rounds, and the ratios torch / rlx (> 1: rlx faster) and unfused /
fused. Every variant's output is checked against torch's first. The CPU
backend keeps the GEMM weights packed between runs (the extra memory is
printed per session); RLX_PREPACK=0 in the environment measures without.

PyTorch is installed from PyPI (pip install torch) if it is missing; the
tests never need it.

  python3 bench/bench_blocks.py [--lib build/librlx.so] [--threads 1,2]
                                [--rounds 15] [--blocks bert,llama] [--clock wall|cpu]
                                [--seq 128]

--seq sets both blocks' sequence length: at 128 the products are ~95% of
a block, so fusion has little to save; at 1024 and beyond the unfused
attention's S x S scores (scaled, masked, softmaxed, each a pass over
memory) are what the fused Attention kernel never materializes.
"""
import argparse
import ctypes
import os
import struct
import subprocess
import sys
import time

import numpy as np


def ensure_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        print("installing torch from PyPI (large)", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torch"], check=True)
    import torch
    return torch


# ---------------------------------------------------------------- rlx through ctypes

class RlxOptions(ctypes.Structure):   # rlx_options, every field: rlx_compile reads them all
    _fields_ = [("device", ctypes.c_int), ("threads", ctypes.c_int), ("flags", ctypes.c_uint),
                ("device_index", ctypes.c_int), ("comm", ctypes.c_void_p)]


RLX_FLAG_NO_FUSE = 1


class Rlx:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        L = self.lib
        L.rlx_graph_from_text.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
        L.rlx_compile.argtypes = [ctypes.c_void_p, ctypes.POINTER(RlxOptions), ctypes.POINTER(ctypes.c_void_p)]
        for fn in ("rlx_set_param", "rlx_set_input"):
            getattr(L, fn).argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
        L.rlx_run.argtypes = [ctypes.c_void_p]
        L.rlx_output.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
        L.rlx_session_free.argtypes = [ctypes.c_void_p]
        L.rlx_graph_free.argtypes = [ctypes.c_void_p]
        L.rlx_last_error.restype = ctypes.c_char_p
        # the CPU backend's prepacked GEMM weights (an internal symbol of the
        # CPU backend, absent in builds without it): bytes held process-wide
        self.prepacked = getattr(L, "gemm_prepack_total_bytes", None)
        if self.prepacked:
            self.prepacked.restype = ctypes.c_size_t

    def prepacked_bytes(self):
        return self.prepacked() if self.prepacked else 0

    def check(self, st, what):
        if st != 0:
            raise RuntimeError("%s: status %d: %s" % (what, st, self.lib.rlx_last_error().decode()))

    def session(self, text, threads, no_fuse, params, inputs):
        g = ctypes.c_void_p()
        self.check(self.lib.rlx_graph_from_text(text.encode(), ctypes.byref(g)), "parse")
        opt = RlxOptions(0, threads, RLX_FLAG_NO_FUSE if no_fuse else 0)
        s = ctypes.c_void_p()
        st = self.lib.rlx_compile(g, ctypes.byref(opt), ctypes.byref(s))
        self.lib.rlx_graph_free(g)
        self.check(st, "compile")
        for name, a in params.items():
            self.check(self.lib.rlx_set_param(s, name.encode(), a.ctypes.data, a.nbytes), "param " + name)
        for name, a in inputs.items():
            self.check(self.lib.rlx_set_input(s, name.encode(), a.ctypes.data, a.nbytes), "input " + name)
        return s

    def run(self, s):
        self.check(self.lib.rlx_run(s), "run")

    def output(self, s, shape):
        out = np.empty(shape, np.float32)
        self.check(self.lib.rlx_output(s, 0, out.ctypes.data, out.nbytes), "output")
        return out

    def free(self, s):
        self.lib.rlx_session_free(s)


class Text:
    """rlx graph text, one node per call."""

    def __init__(self, name):
        self.lines = ['graph "%s" {' % name]
        self.n = 0

    def node(self, expr, ty=""):
        h = "%%%d" % self.n
        self.n += 1
        self.lines.append("  %s = %s%s" % (h, expr, " : " + ty if ty else ""))
        return h

    def leaf(self, kind, name, shape):
        return self.node('%s{name="%s"}' % (kind, name), "f32[%s]" % ",".join(map(str, shape)))

    def scalar(self, v):
        return self.node('Constant{data=h"%s"}' % struct.pack("<f", v).hex(), "f32[]")

    def done(self, out):
        return "\n".join(self.lines + ["  outputs %s" % out, "}"]) + "\n"


def dims(shape):
    return "[" + ", ".join(map(str, shape)) + "]"


# ---------------------------------------------------------------- BERT layer

BERT = dict(S=128, D=768, H=12, F=3072, eps=1e-12)


def bert_weights(rng):
    S, D, F = BERT["S"], BERT["D"], BERT["F"]
    w = lambda *s: (rng.standard_normal(s) * 0.02).astype(np.float32)  # noqa: E731
    p = {n: w(D, D) for n in ("wq", "wk", "wv", "wo")}
    p.update({n: w(D) for n in ("bq", "bk", "bv", "bo", "b2", "be1", "be2")})
    p.update(w1=w(D, F), b1=w(F), w2=w(F, D), g1=1 + w(D), g2=1 + w(D))
    x = rng.standard_normal((1, S, D)).astype(np.float32)
    return p, {"x": x}


def bert_text(fused):
    S, D, H, F, eps = BERT["S"], BERT["D"], BERT["H"], BERT["F"], BERT["eps"]
    hd = D // H
    t = Text("bert_layer_" + ("fused" if fused else "unfused"))
    x = t.leaf("Input", "x", [1, S, D])
    P = {n: t.leaf("Param", n, s) for n, s in [
        ("wq", [D, D]), ("wk", [D, D]), ("wv", [D, D]), ("wo", [D, D]), ("w1", [D, F]), ("w2", [F, D]),
        ("bq", [D]), ("bk", [D]), ("bv", [D]), ("bo", [D]), ("b1", [F]), ("b2", [D]),
        ("g1", [D]), ("be1", [D]), ("g2", [D]), ("be2", [D])]}
    if fused:
        q, k, v = (t.node("FusedMatMulBiasAct{act=none}(%s, %s, %s)" % (x, P["w" + c], P["b" + c]))
                   for c in "qkv")
        a = t.node("Attention{num_heads=%d, num_kv_heads=%d, head_dim=%d, mask=none}(%s, %s, %s)"
                   % (H, H, hd, q, k, v))
        o = t.node("MatMul(%s, %s)" % (a, P["wo"]))
        h = t.node("FusedResidualLN{has_bias=true, eps=%g}(%s, %s, %s, %s, %s)"
                   % (eps, o, x, P["bo"], P["g1"], P["be1"]))
        f = t.node("FusedMatMulBiasAct{act=gelu}(%s, %s, %s)" % (h, P["w1"], P["b1"]))
        f2 = t.node("MatMul(%s, %s)" % (f, P["w2"]))
        y = t.node("FusedResidualLN{has_bias=true, eps=%g}(%s, %s, %s, %s, %s)"
                   % (eps, f2, h, P["b2"], P["g2"], P["be2"]))
        return t.done(y)

    def linear(h, w, b):
        return t.node("Binary{op=add}(%s, %s)" % (t.node("MatMul(%s, %s)" % (h, w)), b))

    def heads(v):
        r = t.node("Reshape{dims=%s}(%s)" % (dims([1, S, H, hd]), v))
        return t.node("Transpose{perm=[0, 2, 1, 3]}(%s)" % r)

    q, k, v = (heads(linear(x, P["w" + c], P["b" + c])) for c in "qkv")
    kt = t.node("Transpose{perm=[0, 1, 3, 2]}(%s)" % k)
    scale = t.scalar(1.0 / np.sqrt(hd))
    s = t.node("Binary{op=mul}(%s, %s)" % (t.node("MatMul(%s, %s)" % (q, kt)), scale))
    p = t.node("Softmax{axis=-1}(%s)" % s)
    a = t.node("Transpose{perm=[0, 2, 1, 3]}(%s)" % t.node("MatMul(%s, %s)" % (p, v)))
    a = t.node("Reshape{dims=%s}(%s)" % (dims([1, S, D]), a))
    o = linear(a, P["wo"], P["bo"])
    h = t.node("LayerNorm{axis=-1, eps=%g}(%s, %s, %s)"
               % (eps, t.node("Binary{op=add}(%s, %s)" % (x, o)), P["g1"], P["be1"]))
    f = t.node("Activation{act=gelu}(%s)" % linear(h, P["w1"], P["b1"]))
    f2 = linear(f, P["w2"], P["b2"])
    y = t.node("LayerNorm{axis=-1, eps=%g}(%s, %s, %s)"
               % (eps, t.node("Binary{op=add}(%s, %s)" % (h, f2)), P["g2"], P["be2"]))
    return t.done(y)


def bert_torch(torch, p, inputs):
    F = torch.nn.functional
    S, D, H, eps = BERT["S"], BERT["D"], BERT["H"], BERT["eps"]
    T = {n: torch.from_numpy(v) for n, v in p.items()}
    W = {n: T[n].t().contiguous() for n in ("wq", "wk", "wv", "wo", "w1", "w2")}  # nn.Linear layout
    x = torch.from_numpy(inputs["x"])

    def fn():
        q, k, v = (F.linear(x, W["w" + c], T["b" + c]).view(1, S, H, D // H).transpose(1, 2) for c in "qkv")
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(1, S, D)
        h = F.layer_norm(x + F.linear(a, W["wo"], T["bo"]), (D,), T["g1"], T["be1"], eps)
        f = F.gelu(F.linear(h, W["w1"], T["b1"]))
        return F.layer_norm(h + F.linear(f, W["w2"], T["b2"]), (D,), T["g2"], T["be2"], eps)
    return fn


# ---------------------------------------------------------------- Llama block

LLAMA = dict(S=128, D=2048, H=32, KV=8, F=5632, eps=1e-6, base=10000.0)


def llama_weights(rng):
    S, D, H, KV, F = LLAMA["S"], LLAMA["D"], LLAMA["H"], LLAMA["KV"], LLAMA["F"]
    hd = D // H
    w = lambda *s: (rng.standard_normal(s) * 0.02).astype(np.float32)  # noqa: E731
    p = dict(wq=w(D, D), wk=w(D, KV * hd), wv=w(D, KV * hd), wo=w(D, D), w_gu=w(D, 2 * F), wd=w(F, D),
             g_attn=1 + w(D), g_ffn=1 + w(D), zeros=np.zeros(D, np.float32))
    half = hd // 2
    theta = np.arange(S)[:, None] * LLAMA["base"] ** (-2.0 * np.arange(half) / hd)
    inputs = {"x": rng.standard_normal((1, S, D)).astype(np.float32),
              "cos": np.cos(theta).astype(np.float32), "sin": np.sin(theta).astype(np.float32)}
    mask = np.where(np.arange(S)[None, :] <= np.arange(S)[:, None], 0.0, -np.inf).astype(np.float32)
    return p, inputs, mask


def llama_text(fused):
    S, D, H, KV, F, eps = (LLAMA[k] for k in ("S", "D", "H", "KV", "F", "eps"))
    hd = D // H
    t = Text("llama_block_" + ("fused" if fused else "unfused"))
    x = t.leaf("Input", "x", [1, S, D])
    cos, sin = t.leaf("Input", "cos", [S, hd // 2]), t.leaf("Input", "sin", [S, hd // 2])
    P = {n: t.leaf("Param", n, s) for n, s in [
        ("wq", [D, D]), ("wk", [D, KV * hd]), ("wv", [D, KV * hd]), ("wo", [D, D]), ("w_gu", [D, 2 * F]),
        ("wd", [F, D]), ("g_attn", [D]), ("g_ffn", [D]), ("zeros", [D])]}
    h = t.node("RmsNorm{axis=-1, eps=%g}(%s, %s, %s)" % (eps, x, P["g_attn"], P["zeros"]))
    if fused:
        att = t.node("FusedAttentionBlock{num_heads=%d, num_kv_heads=%d, head_dim=%d, mask=causal, "
                     "n_rot=%d, mode=neox}(%s, %s, %s, %s, %s, %s, %s)"
                     % (H, KV, hd, hd, h, P["wq"], P["wk"], P["wv"], P["wo"], cos, sin))
    else:
        mask = t.leaf("Param", "mask", [S, S])
        def rope(v):
            return t.node("Rope{head_dim=%d, n_rot=%d, mode=neox}(%s, %s, %s)" % (hd, hd, v, cos, sin))

        q = rope(t.node("MatMul(%s, %s)" % (h, P["wq"])))
        k = rope(t.node("MatMul(%s, %s)" % (h, P["wk"])))
        v = t.node("MatMul(%s, %s)" % (h, P["wv"]))

        def heads(v, n):
            r = t.node("Reshape{dims=%s}(%s)" % (dims([1, S, n, hd]), v))
            return t.node("Transpose{perm=[0, 2, 1, 3]}(%s)" % r)

        def repeat_kv(v):  # [1, KV, S, hd] -> [1, H, S, hd]: kv head h // (H/KV) serves query head h
            r = t.node("Reshape{dims=%s}(%s)" % (dims([1, KV, 1, S, hd]), v))
            e = t.node("Expand{dims=%s}(%s)" % (dims([1, KV, H // KV, S, hd]), r))
            return t.node("Reshape{dims=%s}(%s)" % (dims([1, H, S, hd]), e))

        qh, kh, vh = heads(q, H), repeat_kv(heads(k, KV)), repeat_kv(heads(v, KV))
        kt = t.node("Transpose{perm=[0, 1, 3, 2]}(%s)" % kh)
        s = t.node("Binary{op=mul}(%s, %s)" % (t.node("MatMul(%s, %s)" % (qh, kt)), t.scalar(1.0 / np.sqrt(hd))))
        p = t.node("Softmax{axis=-1}(%s)" % t.node("Binary{op=add}(%s, %s)" % (s, mask)))
        a = t.node("Transpose{perm=[0, 2, 1, 3]}(%s)" % t.node("MatMul(%s, %s)" % (p, vh)))
        a = t.node("Reshape{dims=%s}(%s)" % (dims([1, S, D]), a))
        att = t.node("MatMul(%s, %s)" % (a, P["wo"]))
    x2 = t.node("Binary{op=add}(%s, %s)" % (x, att))
    h2 = t.node("RmsNorm{axis=-1, eps=%g}(%s, %s, %s)" % (eps, x2, P["g_ffn"], P["zeros"]))
    gu = t.node("MatMul(%s, %s)" % (h2, P["w_gu"]))
    if fused:
        m = t.node("FusedSwiGLU(%s)" % gu)
    else:
        g = t.node("Narrow{axis=2, start=0, len=%d}(%s)" % (F, gu))
        u = t.node("Narrow{axis=2, start=%d, len=%d}(%s)" % (F, F, gu))
        m = t.node("Binary{op=mul}(%s, %s)" % (t.node("Activation{act=silu}(%s)" % g), u))
    y = t.node("Binary{op=add}(%s, %s)" % (x2, t.node("MatMul(%s, %s)" % (m, P["wd"]))))
    return t.done(y)


def llama_torch(torch, p, inputs):
    F = torch.nn.functional
    S, D, H, KV, FF, eps = (LLAMA[k] for k in ("S", "D", "H", "KV", "F", "eps"))
    hd = D // H
    T = {n: torch.from_numpy(v) for n, v in p.items()}
    W = {n: T[n].t().contiguous() for n in ("wq", "wk", "wv", "wo", "w_gu", "wd")}
    x = torch.from_numpy(inputs["x"])
    cos = torch.from_numpy(np.concatenate([inputs["cos"]] * 2, axis=1))  # neox: both halves
    sin = torch.from_numpy(np.concatenate([inputs["sin"]] * 2, axis=1))

    def rope(t):
        t1, t2 = t[..., : hd // 2], t[..., hd // 2:]
        return t * cos + torch.cat((-t2, t1), dim=-1) * sin

    def fn():
        h = F.rms_norm(x, (D,), T["g_attn"], eps)
        q = rope(F.linear(h, W["wq"]).view(1, S, H, hd).transpose(1, 2))
        k = rope(F.linear(h, W["wk"]).view(1, S, KV, hd).transpose(1, 2))
        v = F.linear(h, W["wv"]).view(1, S, KV, hd).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x2 = x + F.linear(a.transpose(1, 2).reshape(1, S, D), W["wo"])
        h2 = F.rms_norm(x2, (D,), T["g_ffn"], eps)
        g, u = F.linear(h2, W["w_gu"]).split(FF, dim=-1)
        return x2 + F.linear(F.silu(g) * u, W["wd"])
    return fn


# ---------------------------------------------------------------- timing

def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def bench_block(torch, rlx, block, threads, rounds, warmup, clock):
    rng = np.random.default_rng(0)
    if block == "bert":
        params, inputs = bert_weights(rng)
        text, tfn, shape = bert_text, bert_torch, (1, BERT["S"], BERT["D"])
        rlx_params = params
    else:
        params, inputs, mask = llama_weights(rng)
        text, tfn, shape = llama_text, llama_torch, (1, LLAMA["S"], LLAMA["D"])
        rlx_params = dict(params, mask=mask)
    torch.set_num_threads(threads)
    ref_fn = tfn(torch, params, inputs)
    with torch.no_grad():
        want = ref_fn().numpy()

    def unfused_params():
        return rlx_params

    def fused_params():
        return {k: v for k, v in rlx_params.items() if k != "mask"}

    sessions = {
        "unfused": rlx.session(text(False), threads, True, unfused_params(), inputs),
        "fused": rlx.session(text(True), threads, False, fused_params(), inputs),
        "pipeline": rlx.session(text(False), threads, False, unfused_params(), inputs),
    }
    runners = {"torch": None}
    runners.update({k: s for k, s in sessions.items()})
    errors, packed = {}, {}
    for name, s in sessions.items():
        before = rlx.prepacked_bytes()
        rlx.run(s)
        packed[name] = rlx.prepacked_bytes() - before
        got = rlx.output(s, shape)
        errors[name] = float(np.max(np.abs(got - want)))
    times = {k: [] for k in runners}
    with torch.no_grad():
        for r in range(warmup + rounds):
            for name, s in runners.items():
                t0 = clock()
                if s is None:
                    ref_fn()
                else:
                    rlx.run(s)
                dt = clock() - t0
                if r >= warmup:
                    times[name].append(dt)
    for s in sessions.values():
        rlx.free(s)
    return {k: median(v) for k, v in times.items()}, errors, packed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", default="build/librlx.so")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--blocks", default="bert,llama")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="cpu: process CPU time (all threads summed) instead of wall time; "
                         "for 1 thread on a loaded machine")
    ap.add_argument("--seq", type=int, default=128, help="sequence length of both blocks")
    args = ap.parse_args()
    BERT["S"] = LLAMA["S"] = args.seq
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    torch = ensure_torch()
    rlx = Rlx(os.path.abspath(args.lib))
    print("torch %s; rlx %s; seq %d; %s time, median of %d interleaved rounds (after %d warm-up)"
          % (torch.__version__, args.lib, args.seq, args.clock, args.rounds, args.warmup))
    print("%-6s %3s %9s %9s %9s %9s  %11s %11s %11s  %s" % (
        "block", "thr", "torch ms", "unfused", "fused", "pipeline", "torch/fused", "torch/pipe",
        "unf/fused", "max |rlx - torch| (unfused fused pipeline); prepacked MiB (same)"))
    for block in args.blocks.split(","):
        for threads in (int(t) for t in args.threads.split(",")):
            t, err, packed = bench_block(torch, rlx, block, threads, args.rounds, args.warmup, clock)
            print("%-6s %3d %9.2f %9.2f %9.2f %9.2f  %11.2f %11.2f %11.2f  %.1e %.1e %.1e; %.1f %.1f %.1f" % (
                block, threads, 1e3 * t["torch"], 1e3 * t["unfused"], 1e3 * t["fused"], 1e3 * t["pipeline"],
                t["torch"] / t["fused"], t["torch"] / t["pipeline"], t["unfused"] / t["fused"],
                err["unfused"], err["fused"], err["pipeline"],
                packed["unfused"] / 2**20, packed["fused"] / 2**20, packed["pipeline"] / 2**20), flush=True)


if __name__ == "__main__":
    main()
