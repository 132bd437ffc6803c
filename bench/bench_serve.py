"""bench_serve.py — rlx serve against llama.cpp's llama-server on the same
GGUF file, the same threads, --parallel and context, the same prompts.

llama-server is built from a llama.cpp source folder (--llama-src) like
bench_generate.py builds llama-bench (CPU only, native, no AMX); a source
export without the web UI's folder (tools/ui) gets a stub that serves no UI.

  aggregate decode   C clients at once (C in --concurrency), each a greedy
                     /v1/completions of --tokens tokens (ignore_eos) after a
                     short distinct prompt; the server runs --parallel C.
                     Reported: all clients' generated tokens over the wall
                     time from the first request sent to the last answer,
                     and the same per client. Each concurrency runs --runs
                     rounds, rlx and llama-server in turn, each a fresh
                     server process (one warm-up request first).
  time to first token
                     a chat request with a ~1,000-token system prompt
                     (streamed; the first content chunk), then the same
                     system prompt with another question: the second finds
                     the prompt in the cache (rlx's prompt cache,
                     llama-server's cache_prompt), the first cannot (each
                     round's system prompt is new).

Medians; the 1-minute load average is recorded before each run. Without
--llama-src only rlx runs (its columns, and the scaling over 1 client).

  python3 bench/bench_serve.py --rlx build/rlx [--llama-src DIR] [--model FILE.gguf]
      [--threads 2] [--concurrency 1,4,8,16] [--runs 3] [--tokens 64] [--json OUT.json]
"""
import argparse
import http.client
import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_generate import build_llama, loadavg, sh  # noqa: E402

UI_STUB_H = """#pragma once
// No web UI: this llama.cpp source came without tools/ui (bench_serve.py).
#include <cstddef>
#include <string>
#include <vector>
struct llama_ui_asset { std::string name; const unsigned char * data; size_t size; std::string etag; };
const std::vector<llama_ui_asset> & llama_ui_get_assets();
const llama_ui_asset * llama_ui_find_asset(const std::string & name);
bool llama_ui_use_gzip();
"""
UI_STUB_CPP = """#include "ui.h"
const std::vector<llama_ui_asset> & llama_ui_get_assets() { static std::vector<llama_ui_asset> none; return none; }
const llama_ui_asset * llama_ui_find_asset(const std::string &) { return nullptr; }
bool llama_ui_use_gzip() { return false; }
"""
UI_STUB_CMAKE = """add_library(llama-ui STATIC ui.cpp)
target_include_directories(llama-ui PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
add_custom_target(llama-ui-assets)
"""

TOPICS = ["the sea", "a red bicycle", "winter mornings", "the moon", "bread", "old maps", "a lighthouse", "rain",
          "chess", "coffee", "a quiet library", "mountains", "the first computer", "owls", "a train journey", "tea"]
SYSTEM_WORDS = ("You are a helpful assistant for a public library. Answer questions about opening hours, loans, "
                "renewals, fines, rooms, printers, the catalogue and events, politely and briefly. ").split()


def ensure_ui_stub(src):
    ui = os.path.join(src, "tools", "ui")
    if os.path.exists(ui):
        return
    os.makedirs(ui)
    for name, text in (("ui.h", UI_STUB_H), ("ui.cpp", UI_STUB_CPP), ("CMakeLists.txt", UI_STUB_CMAKE)):
        with open(os.path.join(ui, name), "w") as f:
            f.write(text)


class Server:
    def __init__(self, cmd, ready):
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     errors="replace")
        self.log = []
        self.port = None
        deadline = time.time() + 300
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                sys.exit("server exited: %s\n%s" % (" ".join(cmd), "".join(self.log[-30:])))
            self.log.append(line)
            m = ready(line)
            if m:
                self.port = m
                break
        threading.Thread(target=lambda: [self.log.append(l) for l in self.proc.stderr], daemon=True).start()
        while time.time() < deadline:  # llama-server prints its port before the model is loaded
            try:
                if request(self.port, "GET", "/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        sys.exit("server not healthy: %s" % " ".join(cmd))

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def request(port, method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request(method, path, body=json.dumps(body) if body is not None else None,
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def start(kind, args, parallel, ctx, port):
    if kind == "rlx":
        cmd = [args.rlx, "serve", "-m", args.model, "--port", "0", "--parallel", str(parallel), "--ctx", str(ctx),
               "--threads", str(args.threads)]
        ready = lambda l: (m := re.search(r"listening on http://[^ ]*:(\d+)", l)) and int(m.group(1))  # noqa: E731
    else:
        cmd = [os.path.join(args.bindir, "llama-server"), "-m", args.model, "--host", "127.0.0.1", "--port",
               str(port), "-np", str(parallel), "-c", str(ctx), "-t", str(args.threads), "-tb", str(args.threads),
               "--no-warmup"]
        ready = lambda l: ("listening" in l or "HTTP server is listening" in l) and port  # noqa: E731
    return Server(cmd, ready)


def completion(port, prompt, tokens):
    t0 = time.time()
    status, data = request(port, "POST", "/v1/completions", {
        "prompt": prompt, "max_tokens": tokens, "temperature": 0, "ignore_eos": True, "cache_prompt": True})
    if status != 200:
        sys.exit("completion failed: %d %s" % (status, data[:300]))
    return json.loads(data)["usage"]["completion_tokens"], time.time() - t0


def aggregate(kind, args, n, port):
    """(aggregate tokens/s, per-client tokens/s) of n clients at once."""
    s = start(kind, args, n, 512 * n, port)
    try:
        completion(s.port, "Hello", 4)  # warm-up
        out = [None] * n

        def client(i):
            out[i] = completion(s.port, "Write a short story about %s." % TOPICS[i % len(TOPICS)], args.tokens)

        t0 = time.time()
        threads = [threading.Thread(target=client, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.time() - t0
        toks = sum(o[0] for o in out)
        return toks / wall, statistics.median(o[0] / o[1] for o in out)
    finally:
        s.stop()


def first_token(port, system, question):
    """Seconds to the first streamed content chunk of a chat request."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    body = {"messages": [{"role": "system", "content": system}, {"role": "user", "content": question}],
            "max_tokens": 8, "temperature": 0, "stream": True, "cache_prompt": True}
    t0 = time.time()
    c.request("POST", "/v1/chat/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    got = None
    for line in r:
        if line.startswith(b"data: {") and got is None:
            d = json.loads(line[6:])
            if d.get("choices") and (d["choices"][0].get("delta") or {}).get("content"):
                got = time.time() - t0
    c.close()
    return got


def ttft(kind, args, rnd, port):
    """(uncached, cached) time to first token with a ~1,000-token system prompt."""
    s = start(kind, args, 1, 2048, port)
    try:
        words = ["Round %d %s." % (rnd, kind)] + (SYSTEM_WORDS * 60)[:700]
        system = " ".join(words)
        cold = first_token(s.port, system, "When does the library open on Sundays?")
        warm = first_token(s.port, system, "Can I renew a book online?")
        return cold, warm
    finally:
        s.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rlx", default=os.path.join(os.path.dirname(__file__), "..", "build", "rlx"))
    ap.add_argument("--llama-src", help="llama.cpp's source (the peer); without it rlx's rows only")
    ap.add_argument("--llama-build", help="its build folder (default: LLAMA_SRC/build-rlx-serve)")
    ap.add_argument("--model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--concurrency", default="1,4,8,16")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--port", type=int, default=18181, help="llama-server's port")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--json")
    args = ap.parse_args()
    if not args.model:
        args.model = sh(["bash", os.path.join(os.path.dirname(__file__), "..", "scripts", "fetch_model.sh")]).strip()
    kinds, commit = ("rlx", "llama") if args.llama_src else ("rlx",), "none"
    if args.llama_src:
        src = os.path.abspath(args.llama_src)
        ensure_ui_stub(src)
        args.bindir, commit = build_llama(src, os.path.abspath(args.llama_build or os.path.join(src, "build-rlx-serve")),
                                          args.jobs, targets=("llama-server",))
    rlx_commit = sh([args.rlx, "--version"]).split("\n")[0].strip()
    print(f"llama.cpp {commit[:12]}, rlx {rlx_commit}, {os.path.basename(args.model)}, {args.threads} threads, "
          f"{args.tokens} tokens a client, median of {args.runs}", flush=True)
    rows = []
    for n in [int(c) for c in args.concurrency.split(",")]:
        res = {"rlx": [], "llama": [], "load": []}
        for _ in range(args.runs):
            for kind in kinds:
                res["load"].append(loadavg())
                res[kind].append(aggregate(kind, args, n, args.port))
        med = {k: (statistics.median(r[0] for r in res[k]), statistics.median(r[1] for r in res[k]))
               if res[k] else (math.nan, math.nan) for k in ("rlx", "llama")}
        rows.append({"concurrency": n, "rlx_tps": med["rlx"][0], "llama_tps": med["llama"][0],
                     "rlx_client_tps": med["rlx"][1], "llama_client_tps": med["llama"][1],
                     "load": statistics.median(res["load"]), "runs": res})
        print(f"concurrency {n}: rlx {med['rlx'][0]:.1f} tok/s, llama-server {med['llama'][0]:.1f} tok/s, "
              f"ratio {med['rlx'][0] / med['llama'][0]:.2f}", flush=True)
    t = {"rlx": [], "llama": []}
    for rnd in range(args.runs):
        for kind in kinds:
            t[kind].append(ttft(kind, args, rnd, args.port))
    ttft_med = {k: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) if v else (math.nan,) * 2
                for k, v in t.items()}
    base = next((r["rlx_tps"] for r in rows if r["concurrency"] == 1), None)
    print("\n| concurrency | rlx tok/s | llama-server tok/s | ratio | rlx per client | llama-server per client "
          "| rlx vs 1 client | load |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        scale = f"{r['rlx_tps'] / base:.2f}x" if base else "-"
        print(f"| {r['concurrency']} | {r['rlx_tps']:.1f} | {r['llama_tps']:.1f} | "
              f"{r['rlx_tps'] / r['llama_tps']:.2f} | {r['rlx_client_tps']:.1f} | {r['llama_client_tps']:.1f} | "
              f"{scale} | {r['load']:.1f} |")
    print("\n| time to first token, ~1,000-token system prompt | rlx s | llama-server s | ratio |")
    print("| --- | --- | --- | --- |")
    for i, name in enumerate(("not cached", "cached")):
        print(f"| {name} | {ttft_med['rlx'][i]:.3f} | {ttft_med['llama'][i]:.3f} | "
              f"{ttft_med['llama'][i] / ttft_med['rlx'][i]:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"llama_cpp_commit": commit, "rlx_commit": rlx_commit, "rows": rows, "ttft": t}, f, indent=1)


if __name__ == "__main__":
    main()
