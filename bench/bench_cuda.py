"""bench_cuda.py — rlx's CUDA backend against PyTorch on the same GPU.

usage: python3 bench/bench_cuda.py BENCH_CUDA_BINARY [--quick] [--no-compile] [--profile]
                                  [--only=gemm,gemv,attn,block,decode,decode8b,llm]
                                  [--kernels=BENCH_CUDA_KERNELS_BINARY [--kernels-only=gemv|quant]]
                                  [--no-variants] [--batches=1,2,4,8] [--llm-models=llama3-8b-bf16,...]

Measures, in one process run:
  ceilings  device-to-device copy bandwidth (bytes read + written) and a
            bf16 8192^3 matrix product through PyTorch (cuBLAS);
  gemm      rlx MatMul vs torch.matmul (cuBLAS) for f16/bf16 4096^3 and the
            projections of a Llama-3-8B layer at 4096 tokens;
  attn      one causal GQA attention of that block (bf16, S = 512, 32 / 8
            heads, D = 128, B = 1, 2, 4, 8) vs F.scaled_dot_product_attention,
            rlx also with each tile shape forced (RLX_CUDA_ATTN_TILE);
  block     a Llama-3-8B-shaped decoder block forward (bf16, S = 512,
            B = 1, 2, 4, 8; --quick: 1 and 8; --batches: these) vs PyTorch
            eager and torch.compile (each batch compiled on its own);
  gemv      M = 1 products (decode projections: Llama-3-8B and SmolLM2
            shapes) vs torch.matmul, and vs the copy bandwidth;
  decode    one decode step of a 30-layer SmolLM2-135M-shaped decoder
            (S = 1, KV cache of 512 rows) vs the HBM roofline: bytes a token
            must read (every weight, every cached K/V row) over the measured
            copy bandwidth; and vs the same step in PyTorch (eager, and its
            CUDA-graph replay), bf16 weights;
  decode8b  the same step at Llama-3-8B's shape (32 layers, E 4096, 32 / 8
            heads, F 14336, vocab 128256; random weights through the same
            builders), bf16, q8_0, q4_0 and q4_K weights, vs the roofline: there
            the products must stream GBs of weights at near copy bandwidth
            (q8_0 / q4_K also with RLX_QMATMUL_REF=1: the float kernel);
  llm       GGUF decoders through the public LLM API (rlx_llm_load, as
            `rlx generate --device cuda` runs it; context 4096): random-
            weight Llama files (made by bench/make_llama_gguf.py) of
            TinyLlama's dims (16 layers; q8_0, bf16) and of Llama-3-8B's
            (q8_0, bf16), ms per decode step against the roofline (the
            median step; beside it the mean, which also pays for the plans
            built as the keys pass each 128-key bucket), the q8_0 TinyLlama
            also with the KV cache read back to the host after every step
            (RLX_CUDA_KEEP_STATE=0) and in f16; --llm-models=NAME-WTYPE,...
            (e.g. llama3-8b-bf16) picks some; not in the default set;
  kernels   (--kernels=) bench_cuda_kernels: the decode products' kernels
            alone at the 8B shapes, TB/s against the copy bandwidth.
rlx numbers come from bench_cuda (C; each run is one rlx_run: a CUDA graph
replay and a stream synchronize); torch numbers are CUDA-event medians of
back-to-back calls. Every line gives the floor (the larger of FLOPs over
the measured matrix rate and bytes over the measured copy bandwidth).
"""
import json
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

BIN = sys.argv[1]
QUICK = "--quick" in sys.argv
NO_COMPILE = "--no-compile" in sys.argv
ONLY = next((a.split("=", 1)[1].split(",") for a in sys.argv if a.startswith("--only=")),
            ["gemm", "gemv", "attn", "block", "decode", "decode8b"])
BATCHES = next((tuple(int(b) for b in a.split("=", 1)[1].split(",")) for a in sys.argv if a.startswith("--batches=")),
               (1, 8) if QUICK else (1, 2, 4, 8))
dev = torch.device("cuda")
results = {}


def median_ms(fn, reps, trials=7):
    """Median over trials of the mean time of `reps` back-to-back calls (CUDA events)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(trials):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / reps)
    times.sort()
    return times[len(times) // 2]


def rlx(*args, env=None):
    out = subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, **(env or {})))
    if env and any(k in env for k in ("RLX_CUDA_PROFILE", "RLX_DISPATCH_REPORT")):
        print("\n".join(l for l in out.stderr.splitlines() if l.startswith(("rlx: cuda profile", "rlx: dispatch", "  "))))
    for line in out.stdout.splitlines():
        if line.startswith("RESULT"):
            fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
            return {k: float(v) for k, v in fields.items() if k not in ("B", "S", "T")}
    raise RuntimeError("bench_cuda %s failed: %s %s" % (" ".join(map(str, args)), out.stdout, out.stderr))


# ---------------------------------------------------------------- ceilings
x = torch.empty(1 << 30, dtype=torch.uint8, device=dev)
y = torch.empty_like(x)
copy_ms = median_ms(lambda: y.copy_(x), 20)
bw = 2 * x.numel() / (copy_ms * 1e-3)  # bytes/s, read + write
del x, y
a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
mm_ms = median_ms(lambda: a @ b, 10)
peak = 2 * 8192**3 / (mm_ms * 1e-3)  # FLOP/s
del a, b
print("ceilings: copy %.2f TB/s (read+write), bf16 matmul %.0f TFLOP/s" % (bw / 1e12, peak / 1e12))
results["ceilings"] = {"copy_TBps": bw / 1e12, "bf16_TFLOPs": peak / 1e12}


def floor_ms(flops, nbytes):
    return max(flops / peak, nbytes / bw) * 1e3


# ---------------------------------------------------------------- GEMM
print("\n== GEMM: rlx MatMul vs torch.matmul (cuBLAS); ratio = torch ms / rlx ms (goal >= 0.95)")
print("   tuned: RLX_CUDA_GEMM_TUNE=1 (the fastest of cuBLASLt's first 8 candidates, timed at compile)")
print("%-5s %-22s %9s %9s %9s %6s %9s" % ("dtype", "M x N x K", "rlx ms", "tuned", "torch ms", "ratio", "floor ms"))
# 4096^3, then the block's projections at B*S = 4096 and 512 rows
shapes = [(4096, 4096, 4096), (4096, 6144, 4096), (4096, 28672, 4096), (4096, 4096, 14336),
          (512, 6144, 4096), (512, 4096, 4096), (512, 28672, 4096), (512, 4096, 14336)]
if QUICK:
    shapes = shapes[:1] + shapes[4:]
results["gemm"] = []
for dt in ((("bf16",) if QUICK else ("bf16", "f16")) if "gemm" in ONLY else ()):
    tdt = torch.bfloat16 if dt == "bf16" else torch.float16
    for (M, N, K) in shapes:
        r = rlx("gemm", dt, M, N, K)
        ru = rlx("gemm", dt, M, N, K, env={"RLX_CUDA_GEMM_TUNE": "1"})
        a = torch.randn(M, K, device=dev, dtype=tdt)
        b = torch.randn(K, N, device=dev, dtype=tdt)
        t = median_ms(lambda: a @ b, 20)
        fl = floor_ms(2 * M * N * K, 2 * (M * K + K * N + M * N))
        print("%-5s %-22s %9.4f %9.4f %9.4f %6.3f %9.4f" % (dt, "%dx%dx%d" % (M, N, K), r["ms"], ru["ms"], t, t / r["ms"], fl))
        results["gemm"].append({"dtype": dt, "M": M, "N": N, "K": K, "rlx_ms": r["ms"], "tuned_ms": ru["ms"],
                                "torch_ms": t, "floor_ms": fl})
        del a, b

# ---------------------------------------------------------------- GEMV (M = 1)
print("\n== M = 1 products (decode): rlx (GEMV kernels; RLX_CUDA_GEMV=0: cuBLASLt) vs torch.matmul; ratio = torch / rlx")
print("   rlx times are whole rlx_run calls (graph launch + stream synchronize, ~10 us); torch's back-to-back events")
print("%-5s %-18s %9s %9s %9s %6s %9s %7s" % ("dtype", "N x K", "rlx ms", "cublasLt", "torch ms", "ratio", "floor ms", "rlx TB/s"))
results["gemv"] = []
gemv_shapes = [(4096, 4096), (28672, 4096), (4096, 14336), (49152, 576), (3072, 576)]
if QUICK:
    gemv_shapes = [(28672, 4096), (4096, 14336), (49152, 576)]
for (N, K) in (gemv_shapes if "gemv" in ONLY else ()):
    r = rlx("gemm", "bf16", 1, N, K)
    rb = rlx("gemm", "bf16", 1, N, K, env={"RLX_CUDA_GEMV": "0"})
    a = torch.randn(1, K, device=dev, dtype=torch.bfloat16)
    b = torch.randn(K, N, device=dev, dtype=torch.bfloat16)
    t = median_ms(lambda: a @ b, 50)
    nbytes = 2 * (K * N + K + N)
    fl = floor_ms(2 * N * K, nbytes)
    print("%-5s %-18s %9.4f %9.4f %9.4f %6.3f %9.4f %7.2f" % ("bf16", "%dx%d" % (N, K), r["ms"], rb["ms"], t, t / r["ms"], fl,
                                                            nbytes / (r["ms"] * 1e-3) / 1e12))
    results["gemv"].append({"N": N, "K": K, "rlx_ms": r["ms"], "cublaslt_ms": rb["ms"], "torch_ms": t, "floor_ms": fl})
    del a, b

# ---------------------------------------------------------------- decoder block
E, H, HKV, FF, D = 4096, 32, 8, 14336, 128


def make_block(B, S):
    g = lambda *s: (torch.rand(*s, device=dev, dtype=torch.bfloat16) - 0.5) * 0.04  # noqa: E731
    w = dict(wq=g(E, E), wk=g(E, HKV * D), wv=g(E, HKV * D), wo=g(E, E), wgu=g(E, 2 * FF), wd=g(FF, E),
             g1=torch.ones(E, device=dev, dtype=torch.bfloat16), g2=torch.ones(E, device=dev, dtype=torch.bfloat16))
    pos = torch.arange(S, device=dev, dtype=torch.float32)
    inv = 10000.0 ** (-torch.arange(0, D, 2, device=dev, dtype=torch.float32) / D)
    ang = pos[:, None] * inv[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], -1).to(torch.bfloat16)
    sin = torch.cat([ang.sin(), ang.sin()], -1).to(torch.bfloat16)

    def rope(t):  # t [B, S, h, D], neox halves
        t1, t2 = t[..., : D // 2], t[..., D // 2:]
        rot = torch.cat([-t2, t1], -1)
        return t * cos[None, :, None, :] + rot * sin[None, :, None, :]

    def block(x):
        h = F.rms_norm(x, (E,), w["g1"], eps=1e-5)
        q = rope((h @ w["wq"]).view(B, S, H, D)).transpose(1, 2)
        k = rope((h @ w["wk"]).view(B, S, HKV, D)).transpose(1, 2)
        v = (h @ w["wv"]).view(B, S, HKV, D).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x1 = x + a.transpose(1, 2).reshape(B, S, E) @ w["wo"]
        h2 = F.rms_norm(x1, (E,), w["g2"], eps=1e-5)
        gate, up = (h2 @ w["wgu"]).chunk(2, -1)
        return x1 + (F.silu(gate) * up) @ w["wd"]

    return block, torch.randn(B, S, E, device=dev, dtype=torch.bfloat16)


print("\n== causal GQA attention (32 / 8 heads, D 128, bf16): rlx vs F.scaled_dot_product_attention (flash)")
print("   rlx ms: the plan's tile shape; then RLX_CUDA_ATTN_TILE=64 / 128 (query rows a block: 16 / 32 a warp)")
print("%-3s %-5s %9s %9s %9s %8s %9s %8s %6s %9s" % ("B", "S", "rlx ms", "64", "128", "TFLOP/s", "torch ms",
                                                     "TFLOP/s", "ratio", "floor ms"))
results["attn"] = []
for B in ((1, 2, 4, 8) if "attn" in ONLY else ()):
    S = 512
    r = rlx("attn", "bf16", B, S, H, HKV, D)
    r1 = rlx("attn", "bf16", B, S, H, HKV, D, env={"RLX_CUDA_ATTN_TILE": "64"})
    r2 = rlx("attn", "bf16", B, S, H, HKV, D, env={"RLX_CUDA_ATTN_TILE": "128"})
    q = torch.randn(B, H, S, D, device=dev, dtype=torch.bfloat16)
    k = torch.randn(B, HKV, S, D, device=dev, dtype=torch.bfloat16)
    v = torch.randn(B, HKV, S, D, device=dev, dtype=torch.bfloat16)
    t = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True), 50)
    flops = 4 * B * H * S * S * D / 2
    fl = floor_ms(flops, 2 * (2 * B * S * H * D + 2 * B * S * HKV * D))
    print("%-3d %-5d %9.4f %9.4f %9.4f %8.1f %9.4f %8.1f %6.3f %9.4f" % (
        B, S, r["ms"], r1["ms"], r2["ms"], flops / r["ms"] / 1e9, t, flops / t / 1e9, t / r["ms"], fl))
    results["attn"].append({"B": B, "S": S, "rlx_ms": r["ms"], "tile64_ms": r1["ms"], "tile128_ms": r2["ms"],
                            "torch_ms": t, "floor_ms": fl})
    del q, k, v

print("\n== Llama-3-8B decoder block forward, bf16, S=512: ratio = peer ms / rlx ms (goals: eager >= 1.5, compile >= 1.0)")
print("   rlx add ms: the CUDA backend's fusions off (RLX_CUDA_FUSE=0): the residual adds as kernels of their own, not in the GEMMs")
print("%-3s %9s %10s %9s %7s %10s %7s %9s" % ("B", "rlx ms", "rlx add ms", "eager ms", "ratio", "compile ms", "ratio",
                                            "floor ms"))
results["block"] = []
for B in (BATCHES if "block" in ONLY else ()):
    S = 512
    r = rlx("block", "bf16", B, S)
    ru = rlx("block", "bf16", B, S, env={"RLX_CUDA_FUSE": "0"})
    block, xin = make_block(B, S)
    with torch.no_grad():
        te = median_ms(lambda: block(xin), 10)
        tc = float("nan")
        if not NO_COMPILE:
            try:
                cb = torch.compile(block)
                t0 = time.time()
                cb(xin)
                torch.cuda.synchronize()
                tc = median_ms(lambda: cb(xin), 10)
                print("   (torch.compile for B=%d took %.0f s)" % (B, time.time() - t0))
            except Exception as e:  # a peer that cannot run is reported, not fatal
                print("   torch.compile failed: %s" % str(e).splitlines()[0])
    M = B * S
    flops = 2 * M * (E * E * 2 + 2 * E * HKV * D + E * 2 * FF + FF * E) + 4 * B * H * S * S * D // 2
    wbytes = 2 * (E * E * 2 + 2 * E * HKV * D + E * 2 * FF + FF * E)
    fl = floor_ms(flops, wbytes + 2 * 2 * M * E)
    print("%-3d %9.3f %10.3f %9.3f %7.3f %10.3f %7.3f %9.3f" % (B, r["ms"], ru["ms"], te, te / r["ms"], tc, tc / r["ms"],
                                                              fl))
    results["block"].append({"B": B, "S": S, "rlx_ms": r["ms"], "rlx_add_kernels_ms": ru["ms"], "eager_ms": te,
                             "compile_ms": tc, "floor_ms": fl})
    del block, xin
    torch.cuda.empty_cache()

# ---------------------------------------------------------------- decode
print("\n== decode step, 30-layer SmolLM2-135M shape (E=576, 9 heads / 3 KV heads, F=1536, vocab 49152), KV cache 512")
print("%-5s %9s %9s %11s %9s %9s" % ("wfmt", "rlx ms", "tok/s", "MB / token", "roof ms", "of roof"))
results["decode"] = []
for wf in (("bf16", "q8_0", "q4_1") if "decode" in ONLY else ()):
    r = rlx("decode", wf, 512)
    nbytes = r["weight_bytes"] + r["kv_bytes"]
    roof = nbytes / bw * 1e3
    print("%-5s %9.4f %9.1f %11.1f %9.4f %8.1f%%" % (wf, r["ms"], r["tok_s"], nbytes / 1e6, roof, 100 * roof / r["ms"]))
    results["decode"].append({"wfmt": wf, "rlx_ms": r["ms"], "tok_s": r["tok_s"], "bytes": nbytes, "roof_ms": roof})
if "decode" in ONLY:
    r0 = rlx("decode", "bf16", 512, env={"RLX_CUDA_GEMV": "0"})
    print("bf16 with RLX_CUDA_GEMV=0 (cuBLASLt for the products): %.4f ms" % r0["ms"])
    results["decode_cublaslt_ms"] = r0["ms"]


def make_decode(T, L=30, E=576, H=9, HKV=3, FF=1536, V=49152):
    """The same 30-layer step in PyTorch: bf16, KV cache [1, HKV, T, D] per layer
    written in place at row T-1 (index_copy_), SDPA over all T keys (causal at S = 1)."""
    D = E // H
    g = lambda *s: (torch.rand(*s, device=dev, dtype=torch.bfloat16) - 0.5) * 0.1  # noqa: E731
    one = torch.ones(E, device=dev, dtype=torch.bfloat16)
    layers = [dict(wq=g(E, E), wk=g(E, HKV * D), wv=g(E, HKV * D), wo=g(E, E), wgu=g(E, 2 * FF), wd=g(FF, E),
                   kc=g(1, HKV, T, D), vc=g(1, HKV, T, D)) for _ in range(L)]
    embed, lm = g(V, E), g(E, V)
    pos = torch.tensor([T - 1], device=dev)
    inv = 10000.0 ** (-torch.arange(0, D, 2, device=dev, dtype=torch.float32) / D)
    ang = (T - 1) * inv
    cos = torch.cat([ang.cos(), ang.cos()]).to(torch.bfloat16)
    sin = torch.cat([ang.sin(), ang.sin()]).to(torch.bfloat16)

    def rope(t):
        t1, t2 = t[..., : D // 2], t[..., D // 2:]
        return t * cos + torch.cat([-t2, t1], -1) * sin

    def step(tok):
        x = embed[tok].view(1, 1, E)
        for w in layers:
            h = F.rms_norm(x, (E,), one, eps=1e-5)
            q = rope((h @ w["wq"]).view(1, 1, H, D)).transpose(1, 2)
            k = rope((h @ w["wk"]).view(1, 1, HKV, D)).transpose(1, 2)
            v = (h @ w["wv"]).view(1, 1, HKV, D).transpose(1, 2)
            w["kc"].index_copy_(2, pos, k)
            w["vc"].index_copy_(2, pos, v)
            a = F.scaled_dot_product_attention(q, w["kc"], w["vc"], enable_gqa=True)
            x = x + a.transpose(1, 2).reshape(1, 1, E) @ w["wo"]
            h2 = F.rms_norm(x, (E,), one, eps=1e-5)
            gate, up = (h2 @ w["wgu"]).chunk(2, -1)
            x = x + (F.silu(gate) * up) @ w["wd"]
        return F.rms_norm(x, (E,), one, eps=1e-5) @ lm

    return step


if "decode" in ONLY:
    try:
        step = make_decode(512)
        tok = torch.zeros(1, dtype=torch.long, device=dev)
        with torch.no_grad():
            te = median_ms(lambda: step(tok), 20)
            for _ in range(3):
                step(tok)
            torch.cuda.synchronize()
            cg = torch.cuda.CUDAGraph()
            with torch.cuda.graph(cg):
                step(tok)
            tg = median_ms(cg.replay, 50)
        rb = results["decode"][0]
        print("torch bf16: eager %.4f ms (rlx %.2fx faster), CUDA graph %.4f ms (rlx %.2fx faster)"
              % (te, te / rb["rlx_ms"], tg, tg / rb["rlx_ms"]))
        results["decode_torch"] = {"eager_ms": te, "graph_ms": tg}
        del step, cg
    except Exception as e:  # a peer that cannot run is reported, not fatal
        print("torch decode peer failed: %s" % str(e).splitlines()[0])
    torch.cuda.empty_cache()

# ---------------------------------------------------------------- decode at 8B
LLAMA8B = (32, 4096, 32, 8, 14336, 128256)  # L E H HKV F V
print("\n== decode step, Llama-3-8B shape (32 layers, E 4096, 32 / 8 heads, F 14336, vocab 128256), KV cache 512")
print("%-5s %9s %9s %11s %9s %9s" % ("wfmt", "rlx ms", "tok/s", "MB / token", "roof ms", "of roof"))
results["decode8b"] = []
# q8_0 / q4_k also with RLX_QMATMUL_REF=1: the float GEMV from x as given
# (the session-3 kernel) instead of the integer one over 8-bit x; q4_k also
# with RLX_CUDA_PDL=0 (the integer GEMV not launched while x is quantized)
DECODE8B_RUNS = (("bf16", None), ("q8_0", None), ("q8_0", "RLX_QMATMUL_REF=1"), ("q4_0", None), ("q4_k", None),
                 ("q4_k", "RLX_QMATMUL_REF=1"), ("q4_k", "RLX_CUDA_PDL=0"))
if "--no-variants" in sys.argv:  # the plain rows only
    DECODE8B_RUNS = tuple(r for r in DECODE8B_RUNS if r[1] is None)
for wf, var in (DECODE8B_RUNS if "decode8b" in ONLY else ()):
    r = rlx("decode", wf, 512, *LLAMA8B, env=dict([var.split("=")]) if var else None)
    nbytes = r["weight_bytes"] + r["kv_bytes"]
    roof = nbytes / bw * 1e3
    print("%-5s %9.4f %9.1f %11.1f %9.4f %8.1f%%%s" % (wf, r["ms"], r["tok_s"], nbytes / 1e6, roof, 100 * roof / r["ms"],
                                                       "  (%s)" % var if var else ""))
    results["decode8b"].append({"wfmt": wf, "env": var, "rlx_ms": r["ms"], "tok_s": r["tok_s"], "bytes": nbytes,
                                "roof_ms": roof})

# ---------------------------------------------------------------- the LLM API
# (label, make_llama_gguf.py arguments, weight type, KV cache runs): random-
# weight Llama files, made on the spot and removed after (the 8B ones are
# 8.5 and 16 GB)
TINYLLAMA = ()
LLAMA8B_DIMS = ("--layers", "32", "--embd", "4096", "--heads", "32", "--heads-kv", "8", "--ff", "14336",
                "--vocab", "128256")
LLM_MODELS = (("tinyllama-16L", TINYLLAMA, "q8_0", (("f32", None), ("f32", "RLX_CUDA_KEEP_STATE=0"), ("f16", None))),
              ("tinyllama-16L", TINYLLAMA, "bf16", (("f32", None),)),
              ("llama3-8b", LLAMA8B_DIMS, "q8_0", (("f32", None),)),
              ("llama3-8b", LLAMA8B_DIMS, "bf16", (("f32", None), ("bf16", None))))
LLM_ONLY = next((a.split("=", 1)[1].split(",") for a in sys.argv if a.startswith("--llm-models=")), None)
if "llm" in ONLY:
    print("\n== decode through the LLM API (rlx_llm_load on CUDA), random-weight Llama GGUFs "
          "(bench/make_llama_gguf.py); prefill 128, then 5 x 64 steps; roof: the bytes a step reads "
          "(every weight but the embedding table) over the copy bandwidth")
    print("%-34s %9s %9s %9s %9s %9s %6s %5s" % ("model, KV cache", "ms/token", "tok/s", "mean ms", "roof ms",
                                                "of roof", "plans", "cpu"))
    results["llm"] = []
    for label, dims, wf, runs in LLM_MODELS:
        if LLM_ONLY and "%s-%s" % (label, wf) not in LLM_ONLY:
            continue
        model = "/tmp/rlx-bench-%s-%s.gguf" % (label, wf)
        t0 = time.time()
        subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "make_llama_gguf.py"),
                        model, "--wtype", wf, *dims], check=True, stdout=subprocess.DEVNULL)
        print("(%s %s: %.1f GB, made in %.0f s)" % (label, wf, os.path.getsize(model) / 1e9, time.time() - t0))
        for cache, var in runs:
            r = rlx("llm", model, 128, 64, cache, env=dict([var.split("=")]) if var else None)
            roof = r["step_bytes"] / bw * 1e3
            what = "%s %s, %s%s" % (label, wf, cache, " (%s)" % var if var else "")
            print("%-34s %9.4f %9.1f %9.4f %9.4f %8.1f%% %6d %5d" % (what, r["ms"], r["tok_s"], r["mean_ms"], roof,
                                                                    100 * roof / r["ms"], r["plans"], r["fallback"]))
            results["llm"].append({"model": label, "wfmt": wf, "cache": cache, "env": var, "ms": r["ms"],
                                   "mean_ms": r["mean_ms"], "roof_ms": roof, "plans": r["plans"],
                                   "fallback": r["fallback"]})
        os.remove(model)

# ---------------------------------------------------------------- kernels alone
KERNELS = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--kernels=")), None)
if KERNELS:
    print("\n== decode products' kernels alone (bench_cuda_kernels), Llama-3-8B shapes, M = 1")
    what = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--kernels-only=")), "all")
    out = subprocess.run([KERNELS, what], capture_output=True, text=True, timeout=300)
    print(out.stdout + out.stderr)
    results["kernels"] = out.stdout.splitlines()

if "--profile" in sys.argv:
    print("\n== where the time goes (RLX_CUDA_PROFILE=1: op by op, an event around each launch)")
    if "block" in ONLY:
        rlx("block", "bf16", 8, 512, env={"RLX_CUDA_PROFILE": "1", "RLX_DISPATCH_REPORT": "1"})
        rlx("block", "bf16", 1, 512, env={"RLX_CUDA_PROFILE": "1"})
    if "decode" in ONLY:
        rlx("decode", "bf16", 512, env={"RLX_CUDA_PROFILE": "1", "RLX_DISPATCH_REPORT": "1"})
    if "decode8b" in ONLY:
        for wf in ("bf16", "q4_k"):
            rlx("decode", wf, 512, *LLAMA8B, env={"RLX_CUDA_PROFILE": "1"})

out = os.environ.get("OUT")
if out:
    with open(os.path.join(out, "bench_cuda.json"), "w") as f:
        json.dump(results, f, indent=1)
