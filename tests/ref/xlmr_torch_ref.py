"""A tiny XLM-RoBERTa sentence-embedding folder and its embeddings from
Hugging Face transformers on PyTorch (test_bert --data; label torch).

usage: xlmr_torch_ref.py OUT_DIR

Writes OUT_DIR/tiny_xlmr/: a randomly initialized XLMRobertaModel
(save_pretrained: config.json, model.safetensors in F16), the Unigram
tokenizer.json of unigram_ref.py's multilingual-e5 form (a SentencePiece
model trained with XLM-R's nmt_nfkc charsmap), sentence-transformers'
modules.json with mean pooling and normalization; and OUT_DIR/tiny_xlmr.ref
in bert_ref.py's layout: 200 texts, tokenizers' ids, and the mean-pooled,
normalized last hidden states transformers computes. Exit 77 without torch
or sentencepiece."""
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
try:
    import torch
    from transformers import XLMRobertaConfig, XLMRobertaModel
    from unigram_ref import corpus, tokenizer, train
except ImportError as err:
    print("xlmr_torch_ref: %s" % err)
    sys.exit(77)
import numpy as np  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402
from bert_ref import write_ref  # noqa: E402

P = 40  # max_position_embeddings: 38 tokens after the offset of pad_token_id + 1


def main():
    out = sys.argv[1]
    folder = os.path.join(out, "tiny_xlmr")
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(os.path.join(folder, "1_Pooling"))
    texts = corpus()
    tj = tokenizer(train(texts[:600], False), 1)
    with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False)
    torch.manual_seed(23)
    cfg = XLMRobertaConfig(vocab_size=len(tj["model"]["vocab"]), hidden_size=32, num_hidden_layers=2,
                           num_attention_heads=4, intermediate_size=64, max_position_embeddings=P, type_vocab_size=1,
                           pad_token_id=1, bos_token_id=0, eos_token_id=2, layer_norm_eps=1e-5, initializer_range=0.2)
    model = XLMRobertaModel(cfg, add_pooling_layer=False).eval()
    with torch.no_grad():  # LayerNorms away from the identity, then the F16 rounding the file keeps
        for name, p in model.named_parameters():
            if "LayerNorm" in name:
                p.add_(torch.randn_like(p) * 0.2)
            p.copy_(p.half().float())
    model.half().save_pretrained(folder, safe_serialization=True)
    model.float()
    json.dump([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
               {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}],
              open(os.path.join(folder, "modules.json"), "w"))
    json.dump({"word_embedding_dimension": 32, "pooling_mode_mean_tokens": True},
              open(os.path.join(folder, "1_Pooling", "config.json"), "w"))
    tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    tok.enable_truncation(P - 2)
    picked = [t for t in texts if t.strip() and "\x00" not in t]
    picked = picked[::max(1, len(picked) // 200)][:200]
    ids, rows = [], []
    with torch.no_grad():
        for t in picked:
            e = tok.encode(t)
            h = model(input_ids=torch.tensor([e.ids])).last_hidden_state[0].double().numpy()
            y = h.mean(0)
            ids.append(e.ids)
            rows.append(y / np.linalg.norm(y))
    write_ref(os.path.join(out, "tiny_xlmr.ref"), picked, ids, np.array(rows))
    print("xlmr_torch_ref: %d texts" % len(picked))


if __name__ == "__main__":
    main()
