"""Seed corpora of the harnesses behind the file reader (tests/fuzz):

  corpus_llm_load       tiny GGUF decoders (llama with a SentencePiece
                        vocabulary, qwen2 with a byte-level BPE one and
                        biases, qwen3 with q/k norms; F32 and F16 weights),
                        each under the harnesses' -max_len of 4096 bytes;
  corpus_tokenizer      vocabularies, merges and text in the layout of
                        fuzz_tokenizer.c (flags, then sections at 0x02);
  corpus_chat_template  a template of each family rlx knows and messages
                        in the layout of fuzz_chat_template.c.

usage: fuzz_seeds.py --fuzz-dir tests/fuzz
"""
import argparse
import os

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT

E, FF, V, HEADS, KV_HEADS = 8, 8, 8, 2, 1


def weights(rng, arch):
    hd = E // HEADS
    w = {"token_embd.weight": rng.normal(size=(V, E)), "output_norm.weight": np.ones(E)}
    p = "blk.0."
    w.update({p + "attn_norm.weight": np.ones(E), p + "ffn_norm.weight": np.ones(E),
              p + "attn_q.weight": rng.normal(size=(E, E)), p + "attn_k.weight": rng.normal(size=(KV_HEADS * hd, E)),
              p + "attn_v.weight": rng.normal(size=(KV_HEADS * hd, E)), p + "attn_output.weight": rng.normal(size=(E, E)),
              p + "ffn_gate.weight": rng.normal(size=(FF, E)), p + "ffn_up.weight": rng.normal(size=(FF, E)),
              p + "ffn_down.weight": rng.normal(size=(E, FF))})
    if arch == "qwen2":
        w.update({p + "attn_q.bias": np.zeros(E), p + "attn_k.bias": np.zeros(KV_HEADS * hd),
                  p + "attn_v.bias": np.zeros(KV_HEADS * hd)})
    if arch == "qwen3":
        w.update({p + "attn_q_norm.weight": np.ones(hd), p + "attn_k_norm.weight": np.ones(hd)})
    return w


def write(path, arch, qtype, tokenizer):
    rng = np.random.default_rng(len(path))
    wr = gguf.GGUFWriter(path, arch)
    for k, v in {"block_count": 1, "embedding_length": E, "feed_forward_length": FF, "attention.head_count": HEADS,
                 "attention.head_count_kv": KV_HEADS, "context_length": 32}.items():
        wr.add_uint32(f"{arch}.{k}", v)
    wr.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", 1e-5)
    wr.add_float32(f"{arch}.rope.freq_base", 10000.0)
    toks = ["<s>", "</s>", "a", "b", "ab", "\u2581", "\u2581a", "c"]
    if tokenizer == "llama":
        wr.add_tokenizer_model("llama")
        wr.add_token_list(toks)
        wr.add_token_scores([float(-i) for i in range(V)])
        wr.add_token_types([3, 3, 1, 1, 1, 1, 1, 1])
        wr.add_bos_token_id(0)
        wr.add_eos_token_id(1)
    else:
        wr.add_tokenizer_model("gpt2")
        wr.add_tokenizer_pre("qwen2")
        wr.add_token_list(["<|im_end|>", "H", "e", "l", "o", "He", "ll", "Hell"])
        wr.add_token_merges(["H e", "l l", "He ll"])
        wr.add_eos_token_id(0)
    for name, t in weights(rng, arch).items():
        t = t.astype(np.float32)
        if t.ndim == 2 and qtype == QT.F16:
            wr.add_tensor(name, t.astype(np.float16))
        else:
            wr.add_tensor(name, t)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


BYTES = "".join(chr(c) for c in range(0x21, 0x7f))  # printable ASCII, as byte-level BPE spells it

TOKENIZER = [
    # SentencePiece: byte tokens, a control token, add_space_prefix and add_bos
    (0x36 | 0x20, 0x01, ["<unk>", "<s>", "</s>", "<0x0A>", "<0xE2>", "\u2581", "\u2581a", "ab", "a", "b", "[x]"], [],
     "ab a\n\u00e9 <s>b"),
    # byte-level BPE, Qwen 2 pre-tokenizer, merges, special text
    (0x21 | 0x10, 0x0B, ["<|im_end|>"] + list(BYTES) + ["\u0120", "He", "ll", "Hell", "\u0120w"],
     ["H e", "l l", "He ll", "\u0120 w"], "Hello world<|im_end|> 123 \u00e9"),
    # byte-level BPE, llama-bpe pre-tokenizer
    (0x01, 0x03, list(BYTES) + ["ab"], ["a b"], "abab's  don't"),
]

TEMPLATES = [
    ("{% if messages[0]['role'] != 'system' %}<|im_start|>system\nYou are helpful.<|im_end|>\n{% endif %}"
     "<|im_start|>"),
    "<|start_header_id|>{{ role }}<|end_header_id|>",
    "<start_of_turn>user",
    "<|user|>{{ content }}<|end|>",
    "<|user|>",
    "[INST] <<SYS>> [/INST]",
    "[INST] {{ content }} [/INST]",
]
MESSAGES = [("system", "Be brief. "), ("user", "  Hi there  "), ("assistant", "Hello!"), ("user", "Name a color.")]


def sections(parts):
    return b"\x02".join(parts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fuzz-dir", required=True)
    d = ap.parse_args().fuzz_dir
    out = os.path.join(d, "corpus_llm_load")
    os.makedirs(out, exist_ok=True)
    write(os.path.join(out, "llama_f32.gguf"), "llama", QT.F32, "llama")
    write(os.path.join(out, "qwen2_f16.gguf"), "qwen2", QT.F16, "gpt2")
    write(os.path.join(out, "qwen3_f32.gguf"), "qwen3", QT.F32, "gpt2")
    out = os.path.join(d, "corpus_tokenizer")
    os.makedirs(out, exist_ok=True)
    for i, (flags, pick, toks, merges, text) in enumerate(TOKENIZER):
        body = sections([b"\x01".join(t.encode() for t in toks), b"\x01".join(m.encode() for m in merges),
                         text.encode()])
        open(os.path.join(out, f"seed_{i}"), "wb").write(bytes([flags, pick]) + body)
    out = os.path.join(d, "corpus_chat_template")
    os.makedirs(out, exist_ok=True)
    for i, tpl in enumerate(TEMPLATES):
        msgs = MESSAGES[i % 2:]
        body = sections([tpl.encode()] + [r.encode() + b"\x01" + c.encode() for r, c in msgs])
        open(os.path.join(out, f"seed_{i}"), "wb").write(bytes([1]) + body)
    for sub in ("corpus_llm_load", "corpus_tokenizer", "corpus_chat_template"):
        for f in os.listdir(os.path.join(d, sub)):
            assert os.path.getsize(os.path.join(d, sub, f)) <= 4096, f


if __name__ == "__main__":
    main()
