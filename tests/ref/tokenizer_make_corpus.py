"""Writes tests/data/tokenizer_corpus.jsonl (one JSON string a line): the
strings test_tokenizer compares against Hugging Face. Deterministic: run
python3 tests/ref/tokenizer_make_corpus.py > tests/data/tokenizer_corpus.jsonl"""
import json
import random

BASE = [
    "Hello world", "Hello, world!", " Hello", "  Hello", "   leading spaces", "trailing spaces   ", "a  b   c    d",
    "\tTabbed\ttext\t", "line one\nline two\n", "\n\nblank lines\n\n\n", "\r\nwindows\r\nlines\r\n", " \n \n ",
    "mixed \t \n whitespace \u00a0 nbsp", "", " ", "  ", "\n", "\t", "a", "I'm", "you're", "they've", "we'll", "it's",
    "she'd", "I'M SHOUTING", "YOU'RE", "don't", "'s", "' s", "''", "can't won't shouldn't", "rock'n'roll",
    "12345", "1234567890", " 42", "3.14159", "1,000,000", "-17", "+3e-10", "0x1F", "v1.2.3", "2024-12-02",
    "12:30:45", "$100.00", "50%", "a1b2c3", "abc123def", "١٢٣٤", "Ⅳ Ⅻ", "½ ¾", "①②③",
    "def foo(x):\n    return x * 2\n", "int main(void) { return 0; }", "for (i = 0; i < n; i++) {\n\ta[i] = i;\n}",
    "if x == 1 and y != 2:\n        pass", "#include <stdio.h>", "console.log('hi');", "SELECT * FROM t WHERE a>=1;",
    "<div class=\"x\">text</div>", "{\"key\": [1, 2, 3], \"v\": null}", "path/to/file.txt", "C:\\Windows\\System32",
    "https://example.com/a?b=c&d=e#f", "user@example.com", "x += y; z -= w; a **= 2", "λx. x + 1", "a->b => c",
    "// comment\n/* block */", "    indented\n        more\n", "\t\tdouble tab", "!!!???...", "---===+++",
    "(parens) [brackets] {braces}", "«quotes» “curly” ‘single’", "…ellipsis…", "em—dash – en", "@#$%^&*",
    "Здравствуй, мир!", "Привет как дела", "Γειά σου Κόσμε", "שלום עולם", "مرحبا بالعالم", "नमस्ते दुनिया",
    "こんにちは世界", "你好，世界！", "안녕하세요 세계", "สวัสดีชาวโลก", "Xin chào thế giới", "Ελληνικά και English",
    "ქართული ენა", "Հայերեն", "தமிழ் மொழி", "ಕನ್ನಡ", "ᚠᛇᚻ᛫ᛒᛦᚦ", "ⴰⵣⵓⵍ", "Türkçe ğüşıöç", "Ærøskøbing", "straße",
    "naïve café résumé", "Ångström", "ﬁﬂ ligatures", "ｆｕｌｌｗｉｄｔｈ", "e\u0301 combining", "a\u0308\u0304",
    "😀", "🙂 smile", "👍🏽 thumbs", "👨‍👩‍👧‍👦 family", "🇫🇷🇯🇵 flags", "❤️ heart", "🤖🚀✨", "emoji😀in😀text",
    "1️⃣ keycap", "☃ snowman ☂", "∑∫∂√∞≠≤≥", "→←↑↓", "♠♥♦♣", "\u200b zero width", "\ufeffBOM", "\u2028sep\u2029",
    "<|im_start|>user\nHi<|im_end|>", "<|endoftext|>", "text<|endoftext|>more", "<|im_start|><|im_end|>",
    "<s>hello</s>", "<unk> unknown", "[INST] hi [/INST]", "<|im_start|", "|im_start|>", "<<|im_end|>>",
    "<|eot_id|>", "<|begin_of_text|>Hello", "<think>reasoning</think>", " <|im_start|> spaced ",
    "The quick brown fox jumps over the lazy dog.", "PACK MY BOX WITH FIVE DOZEN LIQUOR JUGS",
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit.", "CamelCaseIdentifier", "snake_case_name",
    "kebab-case-name", "SCREAMING_SNAKE", "__dunder__", "mIxEd CaSe", "ALLCAPS", "Title Case Words",
    "a.b.c", "...", "?!", "word.", "word,word", "  \t  ", "\u3000ideographic space", "x\u2003em space",
    "ctrl\x04\x06\x13\x1d chars\x7f", "\x00nul\x01",
]

ALPHABET = (list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") + list(" \t\n\r  ") +
            list("'.,;:!?-_()[]{}<>/\\|@#$%^&*+=~`\"") + list("éüñßøåçğıłšžœæ") + list("абвгдежзийклмн") +
            list("αβγδεζηθ") + list("日本語中文한국어") + list("١٢٣") + ["😀", "👍", "🏽", "\u200d", "\u0301"])
WORDS = ["the", "The", " of", "and", "tokenizer", "ÜBER", "naïve", "123", "4567", "'s", "'LL", "  ", "\n", "\t",
         "<|im_start|>", "<|im_end|>", "<s>", "</s>", "日本", "мир", "😀", "x=1", "foo()", "...", "\r\n", "—"]


def main():
    rng = random.Random(1234)
    out = list(BASE)
    for _ in range(200):
        out.append("".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 40))))
    for _ in range(200):
        sep = rng.choice(["", " ", "  ", "\n", "\t"])
        out.append(sep.join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))))
    for _ in range(40):
        out.append(" " * rng.randint(0, 5) + str(rng.randint(0, 10 ** rng.randint(1, 12))) + " " * rng.randint(0, 3))
    paragraph = ("In 2024, models such as SmolLM2-135M ran on laptops; they're small (135M params) "
                 "but capable.\n\n  - Item one\n  - Item two\n\n```python\nprint('done')\n```\n")
    out.append(paragraph)
    out.append(paragraph * 5)
    for s in out:
        print(json.dumps(s, ensure_ascii=False))


if __name__ == "__main__":
    main()
