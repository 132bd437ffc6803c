#!/usr/bin/env python3
"""The fast non-GEMM CPU kernels one op at a time, rlx vs PyTorch CPU eager
on the same data and threads: Attention (vs F.scaled_dot_product_attention)
at BERT size and at long causal GQA sequences, Softmax, LayerNorm, RmsNorm,
activations, a broadcast Binary, and an ElementwiseRegion vs the same chain
in torch ops. Each op is a one-node rlx graph run through librlx.so.

Timed like bench_blocks.py (interleaved rounds after warm-up, median);
reported: ms per op and the ratio torch / rlx (> 1: rlx faster).

  python3 bench/bench_kernels.py [--lib build/librlx.so] [--threads 1]
                                 [--rounds 15] [--clock wall|cpu]
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_blocks import Rlx, ensure_torch, median  # noqa: E402


def graph(inputs, params, body):
    """inputs / params: [(name, shape)]; body: the op over %0, %1, ... ."""
    lines = ['graph "k" {']
    for i, (kind, (name, shape)) in enumerate([("Input", x) for x in inputs] + [("Param", p) for p in params]):
        lines.append('  %%%d = %s{name="%s"} : f32[%s]' % (i, kind, name, ",".join(map(str, shape))))
    n = len(inputs) + len(params)
    lines += ["  %%%d = %s" % (n, body), "  outputs %%%d" % n, "}"]
    return "\n".join(lines) + "\n"


def cases(torch, rng):
    F = torch.nn.functional
    out = []

    def arr(*shape, lo=None, hi=None):
        if lo is None:
            return rng.standard_normal(shape).astype(np.float32)
        return rng.uniform(lo, hi, shape).astype(np.float32)

    for S, H, KV, D, mask in [(128, 12, 12, 64, "none"), (1024, 32, 8, 64, "causal"),
                              (2048, 8, 8, 64, "causal"), (1, 32, 8, 64, "causal")]:
        T = 2048 if S == 1 else S
        q, k, v = arr(1, S, H * D), arr(1, T, KV * D), arr(1, T, KV * D)
        text = graph([("q", q.shape), ("k", k.shape), ("v", v.shape)], [],
                     "Attention{num_heads=%d, num_kv_heads=%d, head_dim=%d, mask=%s}(%%0, %%1, %%2)"
                     % (H, KV, D, mask))
        tq = torch.from_numpy(q).view(1, S, H, D).transpose(1, 2)
        tk = torch.from_numpy(k).view(1, T, KV, D).transpose(1, 2)
        tv = torch.from_numpy(v).view(1, T, KV, D).transpose(1, 2)
        # torch's is_causal is top-left aligned: for decode (S = 1) every key is visible anyway
        causal = mask == "causal" and S == T

        def fn(tq=tq, tk=tk, tv=tv, causal=causal):
            return F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal, enable_gqa=True)
        out.append(("attention S=%d T=%d H=%d/%d %s" % (S, T, H, KV, mask), text,
                    {"q": q, "k": k, "v": v}, {}, fn))
    for shape in [(12 * 128, 128), (128, 32000)]:
        x = arr(*shape)
        tx = torch.from_numpy(x)
        out.append(("softmax %dx%d" % shape, graph([("x", shape)], [], "Softmax{axis=-1}(%0)"), {"x": x}, {},
                    lambda tx=tx: torch.softmax(tx, -1)))
    for n, d in [(128, 768), (128, 2048)]:
        x, g, b = arr(n, d), 1 + 0.1 * arr(d), arr(d)
        tx, tg, tb = (torch.from_numpy(a) for a in (x, g, b))
        out.append(("layernorm %dx%d" % (n, d),
                    graph([("x", (n, d))], [("g", (d,)), ("b", (d,))], "LayerNorm{axis=-1, eps=1e-5}(%0, %1, %2)"),
                    {"x": x}, {"g": g, "b": b}, lambda tx=tx, tg=tg, tb=tb, d=d: F.layer_norm(tx, (d,), tg, tb)))
        z = np.zeros(d, np.float32)
        out.append(("rmsnorm %dx%d" % (n, d),
                    graph([("x", (n, d))], [("g", (d,)), ("b", (d,))], "RmsNorm{axis=-1, eps=1e-6}(%0, %1, %2)"),
                    {"x": x}, {"g": g, "b": z}, lambda tx=tx, tg=tg, d=d: F.rms_norm(tx, (d,), tg, 1e-6)))
    x = arr(128, 3072)
    tx = torch.from_numpy(x)
    for act, fn in [("gelu", F.gelu), ("silu", F.silu), ("tanh", torch.tanh), ("exp", torch.exp)]:
        out.append(("%s 128x3072" % act, graph([("x", x.shape)], [], "Activation{act=%s}(%%0)" % act), {"x": x}, {},
                    lambda fn=fn, tx=tx: fn(tx)))
    a, b = arr(128, 3072), arr(3072)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    out.append(("add 128x3072 + 3072", graph([("a", a.shape), ("b", b.shape)], [], "Binary{op=add}(%0, %1)"),
                {"a": a, "b": b}, {}, lambda: ta + tb))
    chain = "[bin.add(i0,i1), act.gelu(s0), bin.mul(s1,i2)]"
    c = arr(128, 1)
    tc = torch.from_numpy(c)
    out.append(("region (a+b).gelu*c 128x3072", graph([("a", a.shape), ("b", b.shape), ("c", c.shape)], [],
                                                     "ElementwiseRegion{chain=%s}(%%0, %%1, %%2)" % chain),
                {"a": a, "b": b, "c": c}, {}, lambda: F.gelu(ta + tb) * tc))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", default="build/librlx.so")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    args = ap.parse_args()
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    torch = ensure_torch()
    rlx = Rlx(os.path.abspath(args.lib))
    print("torch %s; rlx %s; %s time, median of %d interleaved rounds"
          % (torch.__version__, args.lib, args.clock, args.rounds))
    print("%-34s %3s %10s %10s %8s" % ("op", "thr", "torch ms", "rlx ms", "torch/rlx"))
    for threads in (int(t) for t in args.threads.split(",")):
        torch.set_num_threads(threads)
        for name, text, inputs, params, fn in cases(torch, np.random.default_rng(0)):
            s = rlx.session(text, threads, True, params, inputs)
            times = {"torch": [], "rlx": []}
            with torch.no_grad():
                for r in range(args.warmup + args.rounds):
                    t0 = clock()
                    fn()
                    t1 = clock()
                    rlx.run(s)
                    t2 = clock()
                    if r >= args.warmup:
                        times["torch"].append(t1 - t0)
                        times["rlx"].append(t2 - t1)
            rlx.free(s)
            tt, tr = median(times["torch"]), median(times["rlx"])
            print("%-34s %3d %10.3f %10.3f %8.2f" % (name, threads, 1e3 * tt, 1e3 * tr, tt / tr), flush=True)


if __name__ == "__main__":
    main()
