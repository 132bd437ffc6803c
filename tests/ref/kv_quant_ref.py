"""A decoder with a quantized KV cache (q8_0, q4_0), for tests/test_llm_kvq.c.

usage: kv_quant_ref.py --out DIR
       kv_quant_ref.py --rows STATE N_LAYER OUT

--out writes a tiny random Llama GGUF with a head size of 32 (a row of a
head is one block): DIR/kvq_f32.gguf (f32 weights), DIR/kvq_q8_0.gguf (the
same weights as Q8_0), DIR/kvq_head16.gguf (the f32 weights cut into heads
of 16), DIR/kvq.tokens (i32), and the logits at every
position of the f32 model, from llama_tiny.py's float64 forward pass with
the keys (after RoPE) and values as a cache of each type gives them back:
quantized to blocks by the gguf package (gguf.quants: ggml's reference
quantization) and decoded again. DIR/kvq.txt has one line per cache type:
  TYPE N_TOKENS N_VOCAB TOL      DIR/kvq.TYPE.logits (f32 [N, V])
TOL (relative to the largest logit) covers rlx's float32 against the
float64 reference, including a value of a key that lands on the other side
of a rounding step of the block (one step of the block's scale: 1/127 of
its largest magnitude for q8_0, 1/8 for q4_0). Each quantized reference
must differ from the f32 one by far more than TOL, so that a cache that
is not quantized as it should be fails.

--rows reads a state file of rlx_llm_seq_save (llm_seq_state.c's layout)
of an f32 cache and writes layer 0's K and V rows quantized by the gguf
package: OUT.q8_0 and OUT.q4_0, the bytes a quantized cache must hold.
"""
import argparse
import os
import struct

import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf.quants import quantize, dequantize

import llama_tiny as lt

# the tiny model of llama_tiny.py, with heads of 32
lt.N_EMBD, lt.N_HEAD, lt.N_HEAD_KV, lt.N_FF, lt.HEAD_DIM = 128, 4, 2, 192, 32
TYPES = {"q8_0": (QT.Q8_0, 2e-3), "q4_0": (QT.Q4_0, 2e-2)}


def round_trip(qtype):
    def store(x):
        rows = x.reshape(-1, x.shape[-1]).astype(np.float32)
        return dequantize(quantize(rows, qtype), qtype).astype(np.float64).reshape(x.shape)
    return store


def write_cases(out):
    rng = np.random.default_rng(2024)
    w = lt.make_weights(rng, "llama", True)
    freqs = lt.rope_freqs(10000.0, None, None, n_rot=lt.HEAD_DIM)
    stored = {k: (lt.store(t, QT.F32)[0], QT.F32) for k, t in w.items()}
    values = {k: lt.store(t, QT.F32)[1] for k, t in w.items()}
    lt.write_gguf(os.path.join(out, "kvq_f32.gguf"), "llama", stored)
    qstored = {k: (lt.store(t, QT.F32 if t.ndim == 1 else QT.Q8_0)[0], QT.F32 if t.ndim == 1 else QT.Q8_0)
               for k, t in w.items()}
    lt.write_gguf(os.path.join(out, "kvq_q8_0.gguf"), "llama", qstored)
    # heads of 16 (8 of them, 4 kv): not whole blocks of 32
    lt.write_gguf(os.path.join(out, "kvq_head16.gguf"), "llama", stored,
                  {"attention.head_count": 8, "attention.head_count_kv": 4, "rope.dimension_count": 16})
    tokens = rng.integers(0, lt.N_VOCAB, 48).astype(np.int32)
    tokens.tofile(os.path.join(out, "kvq.tokens"))
    exact = lt.forward(values, tokens, "llama", 1e-5, freqs)
    exact.astype(np.float32).tofile(os.path.join(out, "kvq.f32.logits"))
    top = np.abs(exact).max()
    lines = []
    for name, (qtype, tol) in TYPES.items():
        logits = lt.forward(values, tokens, "llama", 1e-5, freqs, kv_store=round_trip(qtype))
        off = np.abs(logits - exact).max() / top
        assert off > 5 * tol, (name, off, tol)
        logits.astype(np.float32).tofile(os.path.join(out, "kvq.%s.logits" % name))
        lines.append("%s %d %d %g" % (name, len(tokens), lt.N_VOCAB, tol))
        print("kv_quant_ref: %s cache moves the logits by %.3g of the largest (tolerance %g)" % (name, off, tol))
    with open(os.path.join(out, "kvq.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def write_rows(state, n_layer, out):
    with open(state, "rb") as f:
        b = f.read()
    assert b[:8] == b"RLXSEQ01", state
    row_bytes, = struct.unpack_from("<I", b, 20)
    n_past, = struct.unpack_from("<q", b, 24)
    assert n_layer >= 1 and len(b) == 32 + 4 * n_past + 2 * n_layer * n_past * row_bytes + 8, state
    at = 32 + 4 * n_past
    rows = np.frombuffer(b, np.float32, 2 * n_past * row_bytes // 4, at).reshape(2 * n_past, row_bytes // 4)
    for name, (qtype, _) in TYPES.items():
        quantize(rows, qtype).tofile("%s.%s" % (out, name))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--rows", nargs=3, metavar=("STATE", "N_LAYER", "OUT"))
    args = ap.parse_args()
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        write_cases(args.out)
    if args.rows:
        write_rows(args.rows[0], int(args.rows[1]), args.rows[2])


if __name__ == "__main__":
    main()
