"""Tiny random-weight Llama-family GGUF files and their NumPy reference
logits, for tests/test_llama.c.

usage: llama_tiny.py --out DIR [--hf-check]

Writes DIR/cases.txt, one line per case:
  good NAME N_TOKENS N_VOCAB TOL      DIR/NAME.gguf, NAME.tokens (i32), NAME.logits (f32 [N, V]),
                                      NAME.exact (f32 [N, V]: activations not quantized)
  bad  NAME STATUS                    DIR/NAME.gguf must fail to load with STATUS

The reference is an independent float64 forward pass over the weights as
the file stores them (quantized ones dequantized by the gguf package):
RMSNorm, RoPE as llama.cpp applies it (normal = adjacent pairs for llama,
neox = the two halves for qwen2/qwen3; rope_freqs.weight factors, linear
and YaRN scaling from the metadata), grouped-query causal attention,
SwiGLU, tied or separate output, logits at every position: NAME.logits
with the activations of quantized matmuls rounded to Q8_0 as the fast
kernels do (TOL, relative to the largest logit, covers the remaining
rounding differences), NAME.exact without (for rlx's reference kernel).
The RoPE frequencies of the reference are checked against transformers'
own linear and YaRN initializations with --hf-check (where torch is
installed).
"""
import argparse
import math
import os

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT
from gguf.quants import quantize, dequantize

N_EMBD, N_HEAD, N_HEAD_KV, N_FF, N_LAYER, N_VOCAB, N_CTX = 64, 4, 2, 96, 2, 96, 320
HEAD_DIM = N_EMBD // N_HEAD


def store(t, qtype):
    """t as the file stores it under qtype, and the values a reader gets back."""
    t = t.astype(np.float32)
    if qtype == QT.F32:
        return t, t.astype(np.float64)
    if qtype == QT.F16:
        h = t.astype(np.float16)
        return h, h.astype(np.float64)
    q = quantize(t, qtype)
    return q, dequantize(q, qtype).astype(np.float64).reshape(t.shape)


def make_weights(rng, arch, tied):
    kvd = N_HEAD_KV * HEAD_DIM
    w = {"token_embd.weight": rng.normal(0, 0.5, (N_VOCAB, N_EMBD)),
         "output_norm.weight": 1 + 0.1 * rng.normal(size=N_EMBD)}
    if not tied:
        w["output.weight"] = rng.normal(0, 0.3, (N_VOCAB, N_EMBD))
    for l in range(N_LAYER):
        p = f"blk.{l}."
        w[p + "attn_norm.weight"] = 1 + 0.1 * rng.normal(size=N_EMBD)
        w[p + "ffn_norm.weight"] = 1 + 0.1 * rng.normal(size=N_EMBD)
        w[p + "attn_q.weight"] = rng.normal(0, 0.15, (N_EMBD, N_EMBD))
        w[p + "attn_k.weight"] = rng.normal(0, 0.15, (kvd, N_EMBD))
        w[p + "attn_v.weight"] = rng.normal(0, 0.15, (kvd, N_EMBD))
        w[p + "attn_output.weight"] = rng.normal(0, 0.1, (N_EMBD, N_EMBD))
        w[p + "ffn_gate.weight"] = rng.normal(0, 0.12, (N_FF, N_EMBD))
        w[p + "ffn_up.weight"] = rng.normal(0, 0.12, (N_FF, N_EMBD))
        w[p + "ffn_down.weight"] = rng.normal(0, 0.1, (N_EMBD, N_FF))
        if arch == "qwen2":
            w[p + "attn_q.bias"] = rng.normal(0, 0.2, N_EMBD)
            w[p + "attn_k.bias"] = rng.normal(0, 0.2, kvd)
            w[p + "attn_v.bias"] = rng.normal(0, 0.2, kvd)
        if arch == "qwen3":
            w[p + "attn_q_norm.weight"] = 1 + 0.1 * rng.normal(size=HEAD_DIM)
            w[p + "attn_k_norm.weight"] = 1 + 0.1 * rng.normal(size=HEAD_DIM)
    return w


def rms_norm(x, g, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * g


def rope_freqs(base, factors=None, scaling=None, n_rot=HEAD_DIM):
    """(angle per position of each rotation [n_rot/2], cos/sin scale), written
    from Hugging Face transformers' rope initializations (default, linear,
    yarn), with llama.cpp's per-rotation frequency factors dividing the
    unscaled frequencies. scaling: None, ("linear", factor) or ("yarn",
    factor, original_context_length)."""
    inv = 1.0 / base ** (np.arange(0, n_rot, 2) / n_rot)
    if factors is not None:
        inv = inv / factors
    if scaling is None:
        return inv, 1.0
    if scaling[0] == "linear":
        return inv / scaling[1], 1.0
    _, factor, orig = scaling
    def corr_dim(n_turns):
        return n_rot * math.log(orig / (n_turns * 2 * math.pi)) / (2 * math.log(base))
    low, high = max(math.floor(corr_dim(32)), 0), min(math.ceil(corr_dim(1)), n_rot - 1)
    if low == high:
        high += 0.001
    extrapolate = 1 - np.clip((np.arange(n_rot // 2) - low) / (high - low), 0, 1)
    return inv / factor * (1 - extrapolate) + inv * extrapolate, 0.1 * math.log(factor) + 1.0


def check_against_transformers():
    """rope_freqs against transformers' own linear and YaRN initializations,
    where torch is installed (silently skipped otherwise: the NumPy formulas
    stay the reference)."""
    try:
        import torch  # noqa: F401 (transformers 5 imports these without torch, then needs it to run them)
        from transformers import LlamaConfig
        from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    except Exception:  # noqa: BLE001 (no torch, or a transformers without them)
        return
    for scaling, hf in ((("linear", 2.0), {"rope_type": "linear", "factor": 2.0}),
                        (("yarn", 4.0, 64), {"rope_type": "yarn", "factor": 4.0,
                                             "original_max_position_embeddings": 64})):
        cfg = LlamaConfig(hidden_size=N_EMBD, num_attention_heads=N_HEAD, max_position_embeddings=4 * 64,
                          rope_theta=10000.0, rope_scaling=hf)
        inv, scale = ROPE_INIT_FUNCTIONS[hf["rope_type"]](cfg, "cpu")
        mine, mscale = rope_freqs(10000.0, None, scaling)
        assert np.allclose(inv.double().numpy(), mine, rtol=1e-6, atol=0) and abs(scale - mscale) < 1e-6, scaling


def rope(x, pos, freqs, neox):
    """x [S, H, D]; rotates the first n_rot dims of each head (freqs = rope_freqs(...))."""
    inv, mscale = freqs
    half = len(inv)
    theta = pos[:, None] * inv[None, :]  # [S, half]
    c, s = mscale * np.cos(theta)[:, None, :], mscale * np.sin(theta)[:, None, :]
    y = x.copy()
    if neox:
        i0, i1 = np.arange(half), np.arange(half) + half
    else:
        i0, i1 = 2 * np.arange(half), 2 * np.arange(half) + 1
    x0, x1 = x[..., i0], x[..., i1]
    y[..., i0] = x0 * c - x1 * s
    y[..., i1] = x0 * s + x1 * c
    return y


def forward(w, tokens, arch, eps, freqs, quantized=(), kv_store=None):
    """Logits [S, V] at every position of tokens (float64). A matmul with a
    weight named in quantized first rounds its activation rows to Q8_0
    blocks, as llama.cpp (and rlx) do before the integer dot products.
    kv_store(x [S, heads, head_dim]): the keys (after RoPE) and values as a
    KV cache gives them back (a quantized cache's round trip)."""
    S = len(tokens)

    def mm(x, name):
        if name in quantized:
            x32 = x.astype(np.float32)
            x = dequantize(quantize(x32, QT.Q8_0), QT.Q8_0).astype(np.float64).reshape(x.shape)
        return x @ w[name].T

    neox = arch != "llama"
    x = w["token_embd.weight"][tokens]
    pos = np.arange(S, dtype=np.float64)
    group = N_HEAD // N_HEAD_KV
    causal = np.tril(np.ones((S, S), dtype=bool))
    for l in range(N_LAYER):
        p = f"blk.{l}."
        h = rms_norm(x, w[p + "attn_norm.weight"], eps)
        q = mm(h, p + "attn_q.weight")
        k = mm(h, p + "attn_k.weight")
        v = mm(h, p + "attn_v.weight")
        if arch == "qwen2":
            q, k, v = q + w[p + "attn_q.bias"], k + w[p + "attn_k.bias"], v + w[p + "attn_v.bias"]
        q = q.reshape(S, N_HEAD, HEAD_DIM)
        k = k.reshape(S, N_HEAD_KV, HEAD_DIM)
        v = v.reshape(S, N_HEAD_KV, HEAD_DIM)
        if arch == "qwen3":
            q = rms_norm(q, w[p + "attn_q_norm.weight"], eps)
            k = rms_norm(k, w[p + "attn_k_norm.weight"], eps)
        q, k = rope(q, pos, freqs, neox), rope(k, pos, freqs, neox)
        if kv_store:
            k, v = kv_store(k), kv_store(v)
        out = np.zeros((S, N_HEAD, HEAD_DIM))
        for hh in range(N_HEAD):
            kv = hh // group
            sc = q[:, hh, :] @ k[:, kv, :].T / np.sqrt(HEAD_DIM)
            sc = np.where(causal, sc, -np.inf)
            sc = np.exp(sc - sc.max(axis=1, keepdims=True))
            sc /= sc.sum(axis=1, keepdims=True)
            out[:, hh, :] = sc @ v[:, kv, :]
        x = x + mm(out.reshape(S, N_EMBD), p + "attn_output.weight")
        h = rms_norm(x, w[p + "ffn_norm.weight"], eps)
        g = mm(h, p + "ffn_gate.weight")
        u = mm(h, p + "ffn_up.weight")
        x = x + mm(g / (1 + np.exp(-g)) * u, p + "ffn_down.weight")
    x = rms_norm(x, w["output_norm.weight"], eps)
    return mm(x, "output.weight" if "output.weight" in w else "token_embd.weight")


def write_gguf(path, arch, tensors, meta_overrides=None, drop=(), reshape=None, extra=None):
    """tensors: name -> (stored array, qtype). meta_overrides: key suffix -> value (None drops it).
    extra(writer): adds more keys (a tokenizer) before the tensors."""
    wr = gguf.GGUFWriter(path, arch)
    if extra:
        extra(wr)
    meta = {"block_count": N_LAYER, "embedding_length": N_EMBD, "feed_forward_length": N_FF,
            "attention.head_count": N_HEAD, "attention.head_count_kv": N_HEAD_KV,
            "context_length": N_CTX, "rope.freq_base": 10000.0,
            "attention.layer_norm_rms_epsilon": 1e-5, "rope.dimension_count": HEAD_DIM}
    meta.update(meta_overrides or {})
    for k, v in meta.items():
        if v is None:
            continue
        if isinstance(v, str):
            wr.add_string(f"{arch}.{k}", v)
        elif isinstance(v, float):
            wr.add_float32(f"{arch}.{k}", v)
        else:
            wr.add_uint32(f"{arch}.{k}", v)
    for name, (data, qtype) in tensors.items():
        if name in drop:
            continue
        if reshape and name in reshape:
            data = data[: reshape[name]]
        if qtype in (QT.F32, QT.F16):
            wr.add_tensor(name, data)
        else:
            wr.add_tensor(name, data, raw_shape=data.shape, raw_dtype=qtype)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


# name, arch, tied, qtype of the 2-D weights, of the embedding, of the output, tolerance
CASES = [
    ("llama_f32", "llama", True, QT.F32, QT.F32, None, 2e-4),
    ("llama_q8_0", "llama", False, QT.Q8_0, QT.Q8_0, QT.Q8_0, 0.08),
    ("llama_q4_0", "llama", True, QT.Q4_0, QT.F16, None, 0.08),
    ("qwen2_f16", "qwen2", False, QT.F16, QT.F16, QT.F16, 2e-3),
    ("qwen3_q8_0", "qwen3", True, QT.Q8_0, QT.Q8_0, None, 0.08),
    ("llama_rope_freqs", "llama", True, QT.F32, QT.F32, None, 2e-4),
    ("qwen2_yarn", "qwen2", False, QT.F32, QT.F32, QT.F32, 2e-4),
    ("llama_bf16", "llama", True, QT.BF16, QT.BF16, None, 2e-3),
]

# RoPE of the cases that are not plain: metadata, rope_freqs.weight (the
# per-rotation factors of Llama 3.1, larger for the slow rotations), scaling
ROPE = {
    "llama_rope_freqs": ({"rope.scaling.type": "linear", "rope.scaling.factor": 2.0},
                         np.array([1.0, 1.0, 1.0, 1.7, 3.1, 5.4, 8.0, 8.0]), ("linear", 2.0)),
    "qwen2_yarn": ({"rope.scaling.type": "yarn", "rope.scaling.factor": 4.0,
                    "rope.scaling.original_context_length": 64}, None, ("yarn", 4.0, 64)),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--hf-check", action="store_true", help="also check rope_freqs against transformers")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.hf_check:
        check_against_transformers()
    lines = []
    rng = np.random.default_rng(1234)
    for name, arch, tied, wq, eq, oq, tol in CASES:
        w = make_weights(rng, arch, tied)
        meta, factors, scaling = ROPE.get(name, ({}, None, None))
        if factors is not None:
            w["rope_freqs.weight"] = factors
        freqs = rope_freqs(10000.0, factors, scaling)
        stored, values, quantized = {}, {}, set()
        for k, t in w.items():
            qt = QT.F32 if t.ndim == 1 else eq if k == "token_embd.weight" else oq if k == "output.weight" else wq
            stored[k] = (store(t, qt)[0], qt)
            values[k] = store(t, qt)[1]
            if qt not in (QT.F32, QT.F16, QT.BF16):  # 16-bit products take x as it is
                quantized.add(k)
        tokens = rng.integers(0, N_VOCAB, 40).astype(np.int32)
        logits = forward(values, tokens, arch, 1e-5, freqs, quantized)
        exact = forward(values, tokens, arch, 1e-5, freqs)
        if name in ROPE:
            # the case must fail if rlx ignored the factors or the scaling
            wrongs = [rope_freqs(10000.0, factors, None)]
            if factors is not None:
                wrongs.append(rope_freqs(10000.0, None, scaling))
            for wrong in wrongs:
                off = np.abs(forward(values, tokens, arch, 1e-5, wrong) - exact).max()
                assert off > 50 * tol * np.abs(exact).max(), (name, off)
        write_gguf(os.path.join(args.out, name + ".gguf"), arch, stored, meta)
        tokens.tofile(os.path.join(args.out, name + ".tokens"))
        logits.astype(np.float32).tofile(os.path.join(args.out, name + ".logits"))
        exact.astype(np.float32).tofile(os.path.join(args.out, name + ".exact"))
        lines.append(f"good {name} {len(tokens)} {N_VOCAB} {tol}")
        if name == "llama_f32":
            bad = [("bad_missing_tensor", {}, ("blk.1.ffn_up.weight",), None, "RLX_ERR_FORMAT"),
                   ("bad_shape", {}, (), {"blk.0.attn_k.weight": 16}, "RLX_ERR_FORMAT"),
                   ("bad_heads", {"attention.head_count_kv": 3}, (), None, "RLX_ERR_FORMAT"),
                   ("bad_no_block_count", {"block_count": None}, (), None, "RLX_ERR_FORMAT"),
                   ("bad_rope_dims", {"rope.dimension_count": 17}, (), None, "RLX_ERR_FORMAT")]
            for bname, bmeta, drop, reshape, status in bad:
                write_gguf(os.path.join(args.out, bname + ".gguf"), arch, stored, bmeta, drop, reshape)
                lines.append(f"bad {bname} {status}")
        if name == "llama_rope_freqs":
            bad = [("bad_rope_scaling", {"rope.scaling.type": "longrope"}, None, "RLX_ERR_UNSUPPORTED"),
                   ("bad_rope_freqs", meta, {"rope_freqs.weight": 7}, "RLX_ERR_FORMAT"),
                   ("bad_rope_factor", {"rope.scaling.factor": -2.0}, None, "RLX_ERR_FORMAT")]
            for bname, bmeta, reshape, status in bad:
                write_gguf(os.path.join(args.out, bname + ".gguf"), arch, stored, bmeta, (), reshape)
                lines.append(f"bad {bname} {status}")
    w = make_weights(rng, "llama", True)
    write_gguf(os.path.join(args.out, "bad_arch.gguf"), "gpt2",
               {k: (store(t, QT.F32)[0], QT.F32) for k, t in w.items()})
    lines.append("bad bad_arch RLX_ERR_UNSUPPORTED")
    with open(os.path.join(args.out, "cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
