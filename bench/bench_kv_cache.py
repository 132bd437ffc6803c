"""bench_kv_cache.py — rlx generate with KV caches of several types (f32,
f16, bf16, q8_0, q4_0) on one GGUF: prefill and decode speed from process
CPU time (the machine may be loaded) and peak RSS, medians of interleaved
rounds.

With --llama-bin (llama.cpp's bin folder) and --model, llama-bench runs
the same decode beside each rlx run: --tg tokens after a context of the
prompt's length (-d), its K and V cache of the same type (-ctk, -ctv;
flash attention on, which llama.cpp needs for a quantized V cache), the
same threads. llama-bench reports wall time, so both sides' decode are
then compared in wall tokens/s (rlx's decode_s); run it on a quiet
machine or under a lock.

  python3 bench/bench_kv_cache.py [--rlx build/rlx] [--model FILE] [--types f32,f16,q8_0]
                                  [--runs 5] [--pp 512] [--tg 128] [--threads 1] [--llama-bin DIR]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

WORDS = ("the history of computing is a story of abstraction where each layer hides the details of "
         "the one below so that a programmer can think about the problem instead of the hardware ").split()


def run(args, cache_type, prompt_file):
    cmd = [args.rlx, "generate", "-f", prompt_file, "-n", str(args.tg), "--temp", "0", "--ignore-eos",
           "--threads", str(args.threads), "--cache-type", cache_type, "--ctx", str(args.ctx), "--stats-json"]
    if args.model:
        cmd += ["-m", args.model]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    line = [l for l in out.stderr.splitlines() if l.startswith("{")][-1]
    return json.loads(line)


def llama_decode(args, cache_type, depth):
    """llama-bench's decode tokens/s (wall) of --tg tokens after depth positions."""
    cmd = [os.path.join(args.llama_bin, "llama-bench"), "-m", args.model, "-t", str(args.threads), "-r", "1",
           "-o", "json", "-p", "0", "-n", str(args.tg), "-d", str(depth), "-ctk", cache_type, "-ctv", cache_type,
           "-fa", "1"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)[0]["avg_ts"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rlx", default=os.path.join(os.path.dirname(__file__), "..", "build", "rlx"))
    ap.add_argument("--model")
    ap.add_argument("--types", default="f32,f16")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--pp", type=int, default=512, help="prompt words (about as many tokens)")
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--llama-bin", help="llama.cpp's bin folder: llama-bench's decode beside rlx's (needs --model)")
    args = ap.parse_args()
    if args.llama_bin and not args.model:
        ap.error("--llama-bin needs --model (the GGUF both sides read)")
    types = args.types.split(",")
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(" ".join(WORDS[i % len(WORDS)] for i in range(args.pp)))
        prompt_file = f.name
    res = {t: [] for t in types}
    peer = {t: [] for t in types}
    try:
        for _ in range(args.runs):
            for t in types:
                res[t].append(run(args, t, prompt_file))
                if args.llama_bin:
                    peer[t].append(llama_decode(args, t, res[t][-1]["prompt_tokens"]))
    finally:
        os.unlink(prompt_file)
    print(f"threads {args.threads}, ctx {args.ctx}, {res[types[0]][0]['prompt_tokens']} prompt tokens, "
          f"{args.tg} generated, median of {args.runs} interleaved runs, speeds from process CPU time")
    print(f"{'cache':6} {'KV MiB':>8} {'prefill tok/cpu-s':>18} {'decode tok/cpu-s':>17} {'peak RSS MiB':>13}")
    for t in types:
        r = res[t]
        pp = statistics.median(x["prompt_tokens"] / x["prefill_cpu_s"] for x in r)
        tg = statistics.median((x["generated_tokens"] - 1) / x["decode_cpu_s"] for x in r)
        rss = statistics.median(x["peak_rss_kb"] for x in r) / 1024
        print(f"{t:6} {r[0]['kv_cache_bytes'] / 2**20:8.1f} {pp:18.1f} {tg:17.1f} {rss:13.1f}")
    if args.llama_bin:
        print(f"\ndecode, wall tokens/s (llama-bench -d {res[types[0]][0]['prompt_tokens']} -n {args.tg} -fa 1)")
        print(f"{'cache':6} {'rlx':>8} {'llama.cpp':>10} {'ratio':>6}")
        for t in types:
            tg = statistics.median((x["generated_tokens"] - 1) / x["decode_s"] for x in res[t])
            lt = statistics.median(peer[t])
            print(f"{t:6} {tg:8.1f} {lt:10.1f} {tg / lt:6.2f}")


if __name__ == "__main__":
    main()
