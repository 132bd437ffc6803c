"""Hugging Face tokenizers' ids for the Unigram (SentencePiece) tokenizer
test (test_wordpiece run on this generator's output).

usage: unigram_ref.py WORK_DIR

Trains two small SentencePiece unigram models on the test corpus with the
nmt_nfkc normalization XLM-RoBERTa uses (its precompiled charsmap), one of
them with byte fallback, and writes them as tokenizer.json files in the
forms published checkpoints use: tok_0.json as xlm-roberta-base (the
Precompiled normalizer alone, the legacy Metaspace add_prefix_space, <mask>
with lstrip), tok_1.json as multilingual-e5 (Precompiled then Replace of
space runs, RobertaProcessing), tok_2.json the byte-fallback model with
SpmConverter's Strip / Replace(" {2,}", "▁") normalizers, "``" replaced
and Metaspace prepend_scheme "first"; then WORK_DIR/cases.bin in
wordpiece_ref.py's layout: texts of tests/data/tokenizer_corpus.jsonl and
more (decomposed accents, full- and half-width forms, Hangul jamo, emoji
sequences, whitespace runs, special tokens written in the text, texts of
more than 512 tokens, random strings of combining marks, jamo, emoji and
spaces), single and paired, with and without truncation. Exit 77 without
sentencepiece."""
import io
import json
import os
import random
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

try:
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb
except ImportError:
    print("sentencepiece is not installed (scripts/deps.sh installs it)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from wordpiece_ref import write_cases  # noqa: E402


def corpus():
    with open(os.path.join(HERE, "..", "data", "tokenizer_corpus.jsonl"), encoding="utf-8") as f:
        texts = [json.loads(line) for line in f if line.strip()]
    rng = random.Random(23)
    extra = ["Crème brûlée à la façon de Zoë", "Cre\u0300me bru\u0302le\u0301e", "e\u0301\u0301 a\u0308\u0304 o\u0303\u0323",
             "Ａ\u0301 ｶ\u3099 ｶﾞ ﾊﾟ ﾊ\u309a", "ＡＢＣ　ｘｙｚ　１２３", "ᄀ\u1161 ᄒ\u1161\u11ab 한국어 각 글자 \u1100\u1161\u11a8",
             "👍🏽 👨‍👩‍👧 🇫🇷🇩🇪 ❤️ ©\u200d® #\ufe0f\u20e3", "a\r\nb\n\rc", "\u0915\u094d\u0937\u0301 नमस्ते दुनिया",
             "``quoted'' text ``", "  leading and trailing  ", "many     spaces\t\ttabs\n\nnewlines",
             "<s> already </s> here <mask> and <pad> x<mask>y  <mask>", "<unk> <S> </s>", "ﬃ ﬄ ﬅ ℕ 𝐀𝐁 ㊀ ㋐ ⓐ",
             "Ω Å K ǅ ǈ", "\u00ad soft \u200b zero \u200d zwj \ufeff bom", "x\u0300\u0301\u0302\u0303\u0304 y",
             "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ⅷ ¼ ½ ² ³", "ا\u064b\u0650 مرحبا بالعالم", "Ελληνικά κείμενα ΐ", "русский текст ё й",
             "日本語のテキストと English mixed ｶﾀｶﾅ", "\u0e01\u0e33 ภาษาไทย", "a" * 300, "x y " * 400]
    words = ("the of and a to in is that retrieval embedding sentence model transformer café naïve 東京 "
             "北京 😀 ... , ; ( ) def return {} [] résumé Ünïcödé ｶﾀｶﾅ 한국 <mask>").split()
    for _ in range(40):
        extra.append(" ".join(rng.choice(words) for _ in range(rng.randint(300, 700))))
    # random strings of the characters where grapheme clusters, the charsmap and Metaspace meet
    pool = list("aeoAZ09 .,'`\t\n\r") + ["  ", "\u0301", "\u0308", "\u0323", "\u3099", "\u309a", "ｶ", "ﾊ", "Ａ", "ｘ",
            "\u1100", "\u1161", "\u11a8", "가", "각", "\U0001F1EB", "\U0001F1F7", "\U0001F468", "\u200d", "\ufe0f",
            "\u00a9", "\u0915", "\u094d", "\u093f", "\u0e33", "\u00ad", "\u200b", "\x00", "\x01", "\u3000", "\u00a0",
            "ﬁ", "²", "Ⅻ", "``", "''", "<mask>", " <mask>", "<s>", "▁", "\u2028", "é", "日", "\U0001F44D", "\U0001F3FD"]
    for _ in range(400):
        extra.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 24))))
    return texts + extra


def train(texts, byte_fallback):
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(texts * 3), model_writer=model, model_type="unigram",
                                   vocab_size=1500, hard_vocab_limit=False, character_coverage=0.995,
                                   normalization_rule_name="nmt_nfkc", byte_fallback=byte_fallback,
                                   max_sentence_length=100000, minloglevel=2, num_threads=1, seed_sentencepiece_size=50000)
    proto = pb.ModelProto()
    proto.ParseFromString(model.getvalue())
    return proto


def xlmr_vocab(proto):
    vocab = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
    vocab += [(p.piece, p.score) for p in proto.pieces[3:]]
    return vocab + [("<mask>", 0.0)]


def tokenizer(proto, variant):
    vocab = xlmr_vocab(proto)
    t = Tokenizer(models.Unigram(vocab, 3, byte_fallback=variant == 2))
    charsmap = proto.normalizer_spec.precompiled_charsmap
    if variant == 0:
        t.normalizer = normalizers.Precompiled(charsmap)
    elif variant == 1:
        t.normalizer = normalizers.Sequence([normalizers.Precompiled(charsmap), normalizers.Replace(Regex(" {2,}"), " ")])
    else:
        t.normalizer = normalizers.Sequence([normalizers.Replace("``", '"'), normalizers.Precompiled(charsmap),
                                             normalizers.Strip(left=False, right=True),
                                             normalizers.Replace(Regex(" {2,}"), "▁")])
    t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first" if variant == 2 else "always")
    t.decoder = decoders.Metaspace()
    s, e = vocab.index(("<s>", 0.0)), vocab.index(("</s>", 0.0))
    if variant == 1:
        t.post_processor = processors.RobertaProcessing(("</s>", e), ("<s>", s))
    else:
        t.post_processor = processors.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
                                                         special_tokens=[("<s>", s), ("</s>", e)])
    t.add_special_tokens([AddedToken("<s>", normalized=False), AddedToken("<pad>", normalized=False),
                          AddedToken("</s>", normalized=False), AddedToken("<unk>", normalized=False),
                          AddedToken("<mask>", lstrip=True, normalized=False)])
    d = json.loads(t.to_str())
    if variant == 0:  # xlm-roberta-base's tokenizer.json: the legacy Metaspace fields
        d["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "add_prefix_space": True}
    return d


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    texts = corpus()
    protos = [train(texts[:600], False), train(texts[:600], True)]
    toks = []
    for v in range(3):
        path = os.path.join(work, "tok_%d.json" % v)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(tokenizer(protos[v == 2], v), f, ensure_ascii=False)
        toks.append(Tokenizer.from_file(path))
    n = write_cases(os.path.join(work, "cases.bin"), toks, texts, list(range(len(toks))))
    print("unigram_ref: %d variants, %d texts, %d cases" % (len(toks), len(texts), n))


if __name__ == "__main__":
    main()
