"""Seed corpus of tests/fuzz/fuzz_tokenizer_unigram.c: a small SentencePiece
precompiled charsmap (a few custom normalization rules: full-width letters,
a composition, a two-character key, a deletion, a ligature) followed by
texts, in the harness's layout [u16 n][n bytes of charsmap][text]; and a
small Unigram tokenizer.json with that charsmap for fuzz_tokenizer_json.

usage: unigram_fuzz_seeds.py --fuzz-dir tests/fuzz"""
import argparse
import base64
import io
import json
import os
import struct
import tempfile

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as pb

RULES = "FF21\t41\nFF41\t61\n41 301\tC1\nFF76\t30AB\nFF76 FF9E\t30AC\n3000\t20\n200B\t\nFB01\t66 69\n"
TEXTS = ["Ａａ ab  a\u0301 ｶﾞ ｶ\u3000x\u200by ﬁ", "<s>a <mask> ab\u00e9 A\u0301\u0301", "  a\r\n\U0001F44D\U0001F3FD \U0001F1EB\U0001F1F7",
         "\u1100\u1161\u11a8 \u0915\u094d\u0937\u0301 \udcff"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fuzz-dir", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rules = os.path.join(tmp, "rules.tsv")
        with open(rules, "w") as f:
            f.write(RULES)
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(sentence_iterator=iter(["hello world abc def"] * 50), model_writer=model,
                                       model_type="unigram", vocab_size=20, hard_vocab_limit=False,
                                       normalization_rule_tsv=rules, minloglevel=2)
    proto = pb.ModelProto()
    proto.ParseFromString(model.getvalue())
    charsmap = proto.normalizer_spec.precompiled_charsmap
    out = os.path.join(args.fuzz_dir, "corpus_tokenizer_unigram")
    os.makedirs(out, exist_ok=True)
    for i, t in enumerate(TEXTS):
        with open(os.path.join(out, "seed_%d.bin" % i), "wb") as f:
            f.write(struct.pack("<H", len(charsmap)) + charsmap + t.encode("utf-8", "surrogateescape"))
    doc = {"model": {"type": "Unigram", "unk_id": 0, "byte_fallback": True,
                     "vocab": [["<unk>", 0], ["<s>", 0], ["</s>", 0], ["\u2581a", -1], ["b", -2], ["<0xC3>", -3]]},
           "added_tokens": [{"id": 1, "content": "<s>", "special": True, "lstrip": True, "rstrip": False,
                             "single_word": False, "normalized": False}],
           "normalizer": {"type": "Sequence", "normalizers": [
               {"type": "Replace", "pattern": {"String": "``"}, "content": "\""},
               {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(charsmap).decode()},
               {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": "\u2581"}]},
           "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True},
           "post_processor": {"type": "TemplateProcessing",
                              "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                              "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                              "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}}
    with open(os.path.join(args.fuzz_dir, "corpus_tokenizer_json", "unigram.json"), "w") as f:
        json.dump(doc, f)


if __name__ == "__main__":
    main()
