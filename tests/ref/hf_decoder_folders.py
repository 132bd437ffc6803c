"""Tiny random-weight Hugging Face decoder folders (llama, qwen2, qwen3)
and transformers' outputs on them, for tests/test_hf_decoder.c.

usage: hf_decoder_folders.py OUT_DIR [NAME...]   (only the cases named)

Per case OUT_DIR/NAME/ is a folder as transformers saves it
(config.json, model.safetensors or shards with their index,
generation_config.json) plus a BPE tokenizer.json trained here with the
`tokenizers` library (byte-level with the pre-tokenizer of the
architecture's family; for llama_spm_f16, Llama 2's SentencePiece-style
BPE: <unk> <s> </s> and the 256 <0xNN> byte tokens first, byte fallback,
the Prepend + Replace ▁ normalizer and the Replace / ByteFallback / Fuse /
Strip decoder of transformers' LlamaConverter) and a tokenizer_config.json
with a chat template (qwen3's in chat_template.jinja). The cases cover
F32, BF16 and F16 weights, tied and separate output matrices, a sharded
checkpoint, qwen2's q/k/v biases, qwen3's q/k norms, and llama3 / yarn
rope scaling. Next to each folder, in OUT_DIR/NAME.ref/:
  prompt<i>.txt      PROMPTS[i]
  prompt<i>.tokens   i32: AutoTokenizer's ids of it
  prompt<i>.logits   f32 [n, vocab]: logits at every position (the folder
                     loaded in float32: its F16/BF16 weights widened)
  prompt<i>.greedy   i32: N_GREEDY argmax tokens after the prompt
  prompt<i>.text     K, a newline, and the tokenizer's decoding of the
                     prompt's ids and the first K greedy ones (special
                     tokens left out; K the most that decode to whole
                     characters): what `rlx generate --temp 0 -n K
                     --ignore-eos` prints
  chat.txt           apply_chat_template of CHAT (generation prompt added)
and OUT_DIR/cases.txt lists "NAME N_PROMPTS VOCAB N_GREEDY" (every case,
also those not made this time).
Needs torch (exit 77 without it).
"""
import json
import os
import shutil
import sys

try:
    import numpy as np
    import torch
    from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors,
                            trainers)
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from tokenizer_ref import FAMILY_TEMPLATES  # noqa: E402

LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
             r"\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
            r"\s*[\r\n]+|\s+(?!\S)|\s+")

CORPUS = [
    "The quick brown fox jumps over the lazy dog. It's 12345 degrees outside!",
    "def add(a, b):\n    return a + b\n\nprint(add(2, 3))",
    "Héllo wörld — naïve café, 東京 and emoji 🙂 too.",
    "We'll see: they've gone, I'm here, you'd know.   Spaces   and\ttabs\n\nnewlines.",
] * 4

PROMPTS = [
    "The quick brown fox, it's 2024!",
    "def f(x):\n    return x * 12345  # café 🙂",
]
N_GREEDY = 12

LLAMA3_CHAT = (
    "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
    " + message['content'] | trim + '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}")
CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2 + 2?"}]

COMMON = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-5)
CASES = [
    # name, model_type, dtype, extra config, family, shard size
    ("llama_f32", "llama", torch.float32,
     dict(rope_theta=50000.0, tie_word_embeddings=False,
          rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                            original_max_position_embeddings=64)), "llama3", None),
    ("qwen2_bf16", "qwen2", torch.bfloat16, dict(rope_theta=1000000.0, tie_word_embeddings=True), "qwen2", "40KB"),
    ("qwen3_f16", "qwen3", torch.float16,
     dict(rope_theta=1000000.0, tie_word_embeddings=False, head_dim=16,
          rope_scaling=dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=64)), "qwen2", None),
    ("llama_spm_f16", "llama", torch.float16, dict(rope_theta=10000.0, tie_word_embeddings=True), "spm", None),
]
MARK = "\u2581"


def train_spm():
    """Llama 2's layout: BPE learned on whole ▁-joined lines (no
    pre-tokenizer) of CORPUS and the tokenizer test corpus, with a small
    alphabet, so that rarer characters (CJK, emoji) take the <0xNN>
    byte tokens."""
    with open(os.path.join(HERE, "..", "data", "tokenizer_corpus.jsonl"), encoding="utf-8") as f:
        texts = CORPUS + [json.loads(line) for line in f if line.strip()]
    norm = normalizers.Sequence([normalizers.Prepend(MARK), normalizers.Replace(" ", MARK)])
    learner = Tokenizer(models.BPE())
    learner.normalizer = norm
    learner.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=420, limit_alphabet=80, max_token_length=12,
                                                           show_progress=False))
    learned = json.loads(learner.to_str())["model"]
    specials = ["<unk>", "<s>", "</s>"]
    vocab = {t: i for i, t in enumerate(specials + ["<0x%02X>" % b for b in range(256)])}
    for t, _ in sorted(learned["vocab"].items(), key=lambda kv: kv[1]):
        vocab.setdefault(t, len(vocab))
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in learned["merges"]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = norm
    tok.decoder = decoders.Sequence([decoders.Replace(MARK, " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in specials])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", 1)])
    return tok


def train_tokenizer(family):
    if family == "spm":
        return train_spm()
    specials = (["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
                if family == "llama3" else ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    tok = Tokenizer(models.BPE())
    regex = LLAMA3_RE if family == "llama3" else QWEN2_RE
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[], show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    tok.add_special_tokens(specials)
    if family == "llama3":
        bos = tok.token_to_id("<|begin_of_text|>")
        tok.post_processor = processors.Sequence([  # as Llama 3's tokenizer.json
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                          pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                          special_tokens=[("<|begin_of_text|>", bos)])])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def randomize(model, seed):
    """Weights large enough that logits have clear argmaxes (the default
    0.02 init makes them nearly flat); norms around 1."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and "norm" in name:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.25 * torch.randn(p.shape, generator=g))


def make_case(out, name, model_type, dtype, extra, family, shard):
    folder = os.path.join(out, name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    tok = train_tokenizer(family)
    n_tok = tok.get_vocab_size()
    vocab = (n_tok + 7) // 8 * 8 + 8  # rows past the tokenizer's: padding tokens
    if family == "spm":
        bos, eos, template = FAMILY_TEMPLATES["llama-2"]
        gen = dict(bos_token_id=tok.token_to_id(bos), eos_token_id=tok.token_to_id(eos), temperature=0.6, top_p=0.9,
                   do_sample=True)
        tcfg = dict(bos_token=bos, eos_token=eos, unk_token="<unk>", add_bos_token=True, add_eos_token=False,
                    chat_template=template)
    elif family == "llama3":
        bos, eos, eot = "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"
        gen = dict(bos_token_id=tok.token_to_id(bos), eos_token_id=[tok.token_to_id(eos), tok.token_to_id(eot)],
                   temperature=0.6, top_p=0.9, do_sample=True)
        tcfg = dict(bos_token=bos, eos_token=eos, chat_template=LLAMA3_CHAT)
    else:
        eos = "<|im_end|>"
        gen = dict(eos_token_id=[tok.token_to_id(eos), tok.token_to_id("<|endoftext|>")], temperature=0.7,
                   top_k=20, top_p=0.8, do_sample=True)
        tcfg = dict(bos_token=None, eos_token=eos, pad_token="<|endoftext|>", add_bos_token=False,
                    chat_template=CHATML)
    tcfg.update(tokenizer_class="PreTrainedTokenizerFast", model_max_length=256)
    tok.save(os.path.join(folder, "tokenizer.json"))
    if model_type == "qwen3":  # where transformers saves it now
        with open(os.path.join(folder, "chat_template.jinja"), "w") as f:
            f.write(tcfg.pop("chat_template"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump(tcfg, f, indent=2)

    cfg = AutoConfig.for_model(model_type, vocab_size=vocab, **COMMON, **extra)
    if model_type == "qwen2":
        cfg.use_sliding_window = False
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.float32)
    randomize(model, len(name))
    model = model.to(dtype)
    model.generation_config.update(**gen)
    kw = {"max_shard_size": shard} if shard else {}
    model.save_pretrained(folder, safe_serialization=True, **kw)
    if shard:
        assert os.path.exists(os.path.join(folder, "model.safetensors.index.json")), "expected shards"

    ref = AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float32)
    ref.eval()
    hf_tok = AutoTokenizer.from_pretrained(folder)
    refdir = os.path.join(out, name + ".ref")
    shutil.rmtree(refdir, ignore_errors=True)
    os.makedirs(refdir)
    with torch.no_grad():
        for i, text in enumerate(PROMPTS):
            ids = torch.tensor([hf_tok(text).input_ids])
            logits = ref(ids).logits[0].float().numpy()
            greedy, cur = [], ids
            for _ in range(N_GREEDY):
                nxt = int(ref(cur).logits[0, -1].argmax())
                greedy.append(nxt)
                cur = torch.cat([cur, torch.tensor([[nxt]])], dim=1)
            stem = os.path.join(refdir, f"prompt{i}")
            with open(stem + ".txt", "w") as f:
                f.write(text)
            ids[0].numpy().astype(np.int32).tofile(stem + ".tokens")
            logits.astype(np.float32).tofile(stem + ".logits")
            np.array(greedy, dtype=np.int32).tofile(stem + ".greedy")
            # the most greedy tokens whose text is whole characters (no
            # U+FFFD for bytes of an unfinished one, which rlx writes as is)
            k = max(k for k in range(N_GREEDY + 1)
                    if "\ufffd" not in hf_tok.decode(ids[0].tolist() + greedy[:k], skip_special_tokens=True))
            with open(stem + ".text", "w", encoding="utf-8") as f:
                f.write(f"{k}\n" + hf_tok.decode(ids[0].tolist() + greedy[:k], skip_special_tokens=True))
    chat = hf_tok.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    with open(os.path.join(refdir, "chat.txt"), "w") as f:
        f.write(chat)
    return f"{name} {len(PROMPTS)} {vocab} {N_GREEDY}"


def main():
    out, only = sys.argv[1], sys.argv[2:]
    os.makedirs(out, exist_ok=True)
    listed = os.path.join(out, "cases.txt")
    lines = {}
    if only and os.path.exists(listed):
        lines = {line.split()[0]: line for line in open(listed).read().split("\n") if line.strip()}
    for c in CASES:
        if not only or c[0] in only:
            lines[c[0]] = make_case(out, *c)
    with open(listed, "w") as f:
        f.write("\n".join(lines[c[0]] for c in CASES if c[0] in lines) + "\n")


if __name__ == "__main__":
    main()
