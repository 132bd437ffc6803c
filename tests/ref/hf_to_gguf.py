"""A Hugging Face llama / qwen2 / qwen3 folder converted to an F32 GGUF
file the way llama.cpp's convert_hf_to_gguf.py does it, for
tests/test_hf_decoder.c (rlx must give the same tokens on both).

usage: hf_to_gguf.py FOLDER OUT.gguf

numpy and the gguf package only (no torch): safetensors read here (F32,
F16, BF16), Llama's Q/K rows permuted for GGUF's adjacent-pair rotation,
llama3 rope scaling as rope_freqs.weight, yarn / linear as
rope.scaling.* keys, the tokens of tokenizer.json with padding rows, and
the special tokens, merges, add_bos and chat template through the gguf
package's own SpecialVocab (the converter's code). A SentencePiece-style
BPE tokenizer.json (byte_fallback) is model "llama" as the converter's
LlamaHfVocab writes it (<0xNN> tokens of type byte, every score -1000),
with the merges too, which the converter leaves out: with them rlx merges
by rank, as Hugging Face does, where those placeholder scores order
nothing.
"""
import json
import logging
import math
import os
import re
import sys

import numpy as np
import gguf
from safetensors_np import read_safetensors

PRE = {"llama": "llama-bpe", "qwen2": "qwen2", "qwen3": "qwen2"}
LAYER = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight", "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.weight": "attn_k.weight", "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.weight": "attn_v.weight", "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
TOP = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
       "lm_head.weight": "output.weight"}


def weights(folder):
    index = os.path.join(folder, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) \
        else ["model.safetensors"]
    w = {}
    for f in files:
        w.update(read_safetensors(os.path.join(folder, f)))
    return w


def permute(w, n_head):
    """convert_hf_to_gguf.py's LlamaModel.permute."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def main():
    logging.disable(logging.WARNING)  # SpecialVocab's notes on token types GGUF has no key for
    folder, out = sys.argv[1], sys.argv[2]
    cfg = json.load(open(os.path.join(folder, "config.json")))
    arch = cfg["model_type"]
    rope = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
    theta = cfg.get("rope_theta", rope.get("rope_theta", 10000.0))
    E, H = cfg["hidden_size"], cfg["num_attention_heads"]
    Hkv = cfg.get("num_key_value_heads", H)
    D = cfg.get("head_dim") or E // H
    V = cfg["vocab_size"]
    w = gguf.GGUFWriter(out, arch)
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(E)
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(H)
    w.add_head_count_kv(Hkv)
    w.add_key_length(D)
    w.add_value_length(D)
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_rope_freq_base(theta)
    w.add_vocab_size(V)
    tensors = {}
    kind = rope.get("rope_type", rope.get("type", "default"))
    if kind in ("linear", "yarn"):
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR if kind == "linear" else gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(rope["factor"])
        if kind == "yarn":
            w.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
    elif kind == "llama3":
        factor, lo, hi = rope["factor"], rope.get("low_freq_factor", 1.0), rope.get("high_freq_factor", 4.0)
        old = rope["original_max_position_embeddings"]
        freqs = 1.0 / (theta ** (np.arange(0, D, 2, dtype=np.float32) / D))
        factors = []
        for f in freqs:
            wavelen = 2 * math.pi / f
            if wavelen < old / hi:
                factors.append(1)
            elif wavelen > old / lo:
                factors.append(factor)
            else:
                smooth = (old / wavelen - lo) / (hi - lo)
                factors.append(1 / ((1 - smooth) / factor + smooth))
        tensors["rope_freqs.weight"] = np.array(factors, dtype=np.float32)

    tj = json.load(open(os.path.join(folder, "tokenizer.json"), encoding="utf-8"))
    spm = tj["model"].get("byte_fallback", False)
    toks = [f"[PAD{i}]" for i in range(V)]
    types = [gguf.TokenType.UNUSED] * V
    for t, i in tj["model"]["vocab"].items():
        toks[i] = t
        types[i] = gguf.TokenType.BYTE if spm and re.fullmatch(r"<0x[0-9A-Fa-f]{2}>", t) else gguf.TokenType.NORMAL
    for a in tj["added_tokens"]:
        toks[a["id"]] = a["content"]
        types[a["id"]] = gguf.TokenType.CONTROL if a["special"] else gguf.TokenType.USER_DEFINED
    w.add_tokenizer_model("llama" if spm else "gpt2")
    w.add_tokenizer_pre("default" if spm else PRE[arch])
    w.add_token_list(toks)
    if spm:
        w.add_token_scores([-1000.0] * V)
    w.add_token_types(types)
    gguf.SpecialVocab(folder, load_merges=True, n_vocab=V).add_to_gguf(w, quiet=True)
    gen_path = os.path.join(folder, "generation_config.json")
    gen = json.load(open(gen_path)) if os.path.exists(gen_path) else {}
    if "temperature" in gen:
        w.add_float32(gguf.Keys.General.SAMPLING_TEMP, gen["temperature"])
    if "top_p" in gen:
        w.add_float32(gguf.Keys.General.SAMPLING_TOP_P, gen["top_p"])
    if "top_k" in gen:
        w.add_int32(gguf.Keys.General.SAMPLING_TOP_K, gen["top_k"])

    for name, v in weights(folder).items():
        if name == "lm_head.weight" and cfg.get("tie_word_embeddings"):
            continue
        if name in TOP:
            tensors[TOP[name]] = v
            continue
        parts = name.split(".")
        n = LAYER[".".join(parts[3:])]
        if arch == "llama" and n in ("attn_q.weight", "attn_k.weight"):
            v = permute(v, H if n == "attn_q.weight" else Hkv)
        tensors[f"blk.{parts[2]}.{n}"] = v
    for name, v in tensors.items():
        w.add_tensor(name, np.ascontiguousarray(v, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
