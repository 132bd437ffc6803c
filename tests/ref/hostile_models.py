"""Hostile tiny GGUF models for tests/test_hostile_models.c and
tests/cli_hostile.sh: a Llama of llama_tiny.py with a SentencePiece
vocabulary whose tokens are longer than 256 bytes, one whose vocabulary
is shorter than the embedding, and one whose metadata key and tensor name
carry terminal control sequences.

usage: hostile_models.py --out DIR

Writes DIR/long_tokens.gguf, DIR/short_vocab.gguf, DIR/evil_names.gguf and
DIR/long_tokens.pieces (token i's bytes on line i: the reference for the
pieces rlx decodes, token 0 being "a").
"""
import argparse
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType as QT

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_tiny as lt  # noqa: E402

EVIL_KEY = "evil.\x1b]0;pwned\x07.key"
EVIL_TENSOR = "junk\x1b[2J\x1b[H"


def tokens(n):
    """Token 0 is "a" (a prompt of one token); the others are 300 bytes."""
    return ["a"] + [f"tok{i:03d}" + "x" * 294 for i in range(1, n)]


def tokenizer(toks):
    def add(wr):
        wr.add_tokenizer_model("llama")
        wr.add_token_list(toks)
        wr.add_token_scores([0.0] * len(toks))
        wr.add_token_types([1] * len(toks))
        wr.add_add_space_prefix(False)
        wr.add_add_bos_token(False)
    return add


def model(path, n_tokens, evil=False):
    rng = np.random.default_rng(19)
    w = lt.make_weights(rng, "llama", tied=False)
    w["output.weight"][0] = 0  # "a" is never the greedy choice: generated tokens are long
    tensors = {k: (v.astype(np.float32), QT.F32) for k, v in w.items()}
    add = tokenizer(tokens(n_tokens))
    if evil:
        tensors[EVIL_TENSOR] = (np.ones(4, np.float32), QT.F32)

        def add_evil(wr, add=add):
            add(wr)
            wr.add_string(EVIL_KEY, "value\x1b[31m")
        lt.write_gguf(path, "llama", tensors, extra=add_evil)
    else:
        lt.write_gguf(path, "llama", tensors, extra=add)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    out = ap.parse_args().out
    os.makedirs(out, exist_ok=True)
    model(os.path.join(out, "long_tokens.gguf"), lt.N_VOCAB)
    model(os.path.join(out, "short_vocab.gguf"), lt.N_VOCAB - 6)
    model(os.path.join(out, "evil_names.gguf"), lt.N_VOCAB, evil=True)
    with open(os.path.join(out, "long_tokens.pieces"), "w") as f:
        f.write("\n".join(tokens(lt.N_VOCAB)) + "\n")


if __name__ == "__main__":
    main()
