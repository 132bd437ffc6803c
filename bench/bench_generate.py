"""bench_generate.py — rlx generate against llama.cpp's llama-bench on the
same GGUF files, with the machine's limits measured in the same run.

llama.cpp is built from a source folder (--llama-src: a checkout of
github.com/ggml-org/llama.cpp; its commit is read from git, or from a file
COMMIT in the folder) into its own build folder there, CPU only, native
instruction sets but no AMX unless --llama-amx (AMX instructions fault in
some virtual machines that advertise them), and only llama-bench and
llama-quantize. An existing build folder is used as it was configured.

For each file and thread count, --runs rounds, each round in turn: rlx's
prefill of --pp tokens, llama-bench pp, a read-bandwidth probe, rlx's --tg
decode steps, llama-bench tg, a probe again (interleaved, so background load
hits both alike and the bandwidth is read in the same load as the decode
runs); every run is a fresh process and records the 1-minute load average
before it. Reported: medians, rlx / llama.cpp, and each as a fraction of its
limit:
  decode   matmul weight bytes per token x tokens/s / DRAM read bandwidth (the
           median of the row's 2 x --runs probe readings)
  prefill  2 x matmul weights but the output matrix x tokens/s / int8 ceiling (VNNI), the
           FMA ceiling for F16/BF16 files
(attention and the rest are left out of both counts, so the fractions are
slight underestimates). The limits come from a small C probe compiled here:
the read bandwidth of the decode's access pattern (read_bandwidth: streaming
512-bit loads over a buffer of about the weights' size, split in contiguous
parts over the row's threads), and the FMA (F32) and vpdpbusd (int8) peak of
independent chains at each thread count, once at the start.

  python3 bench/bench_generate.py --rlx build/rlx --llama-src DIR [--llama-build DIR]
      [--models A.gguf,B.gguf] [--threads 1,2] [--runs 5] [--pp 512] [--tg 128]
      [--quantize SRC.gguf:TYPE,...]   make files with llama-quantize first
      [--bf16-math] [--json OUT.json]

Accuracy (--agree CHUNKS, default 5; 0 skips it): teacher-forced top-1
agreement of each file with its exact path, the same weights dequantized
to F32 (tests/ref/gguf_to_float.py, kept in --out-dir), for rlx and
llama.cpp alike, on --agree-text (default docs/ARCHITECTURE.md) cut as
llama-perplexity cuts it: CHUNKS chunks of --agree-ctx (128) tokens, each
starting with BOS, scored at the positions of their second half.
llama.cpp: llama-perplexity --kl-divergence ("Same top p") against the F32
file's logits; rlx: rlx.LLM.eval of each chunk (all logits) through the
librlx.so beside --rlx, argmax against argmax.

--bf16-math runs rlx with RLX_FLAG_BF16_MATH (`rlx generate --bf16-math`,
rlx.LLM(bf16_math=True)): BF16 weights' prefill on activations rounded to
BF16, as llama.cpp's BF16 path; the agreement is then the flag's, against
the same exact twin.

rlx runs the kernels its environment allows (cpu_features.h: RLX_NO_AVX512=1
before the script runs rlx on its AVX2 kernels), and a --llama-build folder
that is already configured is built as it is: configured with
-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF (and the rest of
BENCHMARKS.md's command Y) it runs llama.cpp on the same instruction sets.

--quantize writes SRC-TYPE.gguf into --out-dir (default /tmp) with
--allow-requantize (requantizing a Q4_1 file loses accuracy, not speed);
--shape llama-3.2-1b --tokenizer-from SMOLLM2.gguf --quantize
llama-3.2-1b:Q4_0,... makes the random-weight files of that shape first;
--shape llama-3-8b:q4_0 writes that shape in Q4_0 directly (make_llama_gguf.py
--wtype: no 16 GB F16 file first) and measures it.
"""
import argparse
import atexit
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

TEXT = ("The history of computing is a story of abstraction. Early machines were programmed by rewiring "
        "panels; then came stored programs, assemblers, and compilers that translated readable formulas "
        "into machine code. Each layer hid the details of the one below it, so that a programmer could "
        "think about the problem instead of the hardware. Today a compiler for machine learning does the "
        "same for tensors: it takes a graph of operations, plans where every intermediate value lives, "
        "fuses small steps into larger kernels, and emits code tuned for the processor at hand. ")

PROBE_C = r"""
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }
enum { BW, FMA, VNNI };
typedef struct { int kind, id, nt; const uint8_t *buf; size_t n; long iters; double sink; } job;
static void *work(void *arg) {
  job *j = arg;
  if (j->kind == BW) {
    size_t per = j->n / j->nt / 256 * 256; const __m512i *p = (const __m512i *)(j->buf + per * j->id);
    __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
    for (size_t i = 0; i < per / 64; i += 4) {
      a = _mm512_xor_si512(a, _mm512_load_si512(p + i)); b = _mm512_xor_si512(b, _mm512_load_si512(p + i + 1));
      c = _mm512_xor_si512(c, _mm512_load_si512(p + i + 2)); d = _mm512_xor_si512(d, _mm512_load_si512(p + i + 3));
    }
    j->sink = _mm512_reduce_add_epi64(_mm512_xor_si512(_mm512_xor_si512(a, b), _mm512_xor_si512(c, d)));
  } else if (j->kind == FMA) {
    __m512 v[12], m = _mm512_set1_ps(0.999999f), x = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++) v[i] = _mm512_set1_ps((float)i);
    for (long it = 0; it < j->iters; it++)
      for (int i = 0; i < 12; i++) v[i] = _mm512_fmadd_ps(v[i], m, x);
    float s = 0; for (int i = 0; i < 12; i++) s += _mm512_reduce_add_ps(v[i]); j->sink = s;
  } else {
    __m512i v[12], a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
    for (int i = 0; i < 12; i++) v[i] = _mm512_set1_epi32(i);
    for (long it = 0; it < j->iters; it++)
      for (int i = 0; i < 12; i++) v[i] = _mm512_dpbusd_epi32(v[i], a, b);
    long s = 0; for (int i = 0; i < 12; i++) s += _mm512_reduce_add_epi32(v[i]); j->sink = s;
  }
  return NULL;
}
/* seconds of each of reps passes of kind on nt threads, sorted */
static void run(int kind, int nt, const uint8_t *buf, size_t n, long iters, int reps, double *t) {
  pthread_t th[64]; job jb[64];
  for (int rep = 0; rep < reps; rep++) {
    double t0 = now();
    for (int i = 0; i < nt; i++) { jb[i] = (job){kind, i, nt, buf, n, iters, 0}; pthread_create(&th[i], 0, work, &jb[i]); }
    for (int i = 0; i < nt; i++) pthread_join(th[i], 0);
    t[rep] = now() - t0;
  }
  qsort(t, reps, sizeof *t, cmp);
}
/* probe peak T: the FMA and vpdpbusd peaks (best of 5) on T threads.
   probe bw T BYTES HUGE: read GB/s over BYTES on T threads, each a contiguous part, the median of
   5 passes; HUGE 1 maps the buffer in transparent huge pages (as rlx's packed weights are), 0 in
   small pages (as a mapped GGUF file is). */
int main(int argc, char **argv) {
  if (argc < 3) return 2;
  int nt = atoi(argv[2]); double t[5];
  if (argc == 3 && !strcmp(argv[1], "peak")) {
    long iters = 20000000;
    run(FMA, nt, 0, 0, iters, 5, t);
    double fma = nt * iters * 12.0 * 16 * 2 / t[0];
    run(VNNI, nt, 0, 0, iters, 5, t);
    double vnni = nt * iters * 12.0 * 64 * 2 / t[0];
    printf("{\"fma_GFLOPs\": %.1f, \"vnni_GOPs\": %.1f}\n", fma / 1e9, vnni / 1e9);
    return 0;
  }
  if (argc != 5 || strcmp(argv[1], "bw")) return 2;
  size_t n = (size_t)atoll(argv[3]);
  uint8_t *buf = mmap(0, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (buf == MAP_FAILED) return 1;
  if (atoi(argv[4])) madvise(buf, n, MADV_HUGEPAGE);
  memset(buf, 1, n);
  run(BW, nt, buf, n, 0, 5, t);
  printf("{\"read_GBps\": %.2f}\n", n / t[2] / 1e9);
  munmap(buf, n);
  return 0;
}
"""


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def build_llama(src, build, jobs, targets=("llama-bench", "llama-quantize", "llama-perplexity"), amx=False):
    """targets (llama-bench and llama-quantize) of the checkout at src, built in build, and its commit;
    amx: with llama.cpp's AMX kernels (for a machine whose kernel grants AMX tile data)."""
    try:
        commit = sh(["git", "-C", src, "rev-parse", "HEAD"]).strip()
    except (subprocess.CalledProcessError, FileNotFoundError):
        with open(os.path.join(src, "COMMIT")) as f:
            commit = f.read().strip()
    no_amx = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
    amx_flags = [] if amx else ["-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF",
                                f"-DCMAKE_C_FLAGS={no_amx}", f"-DCMAKE_CXX_FLAGS={no_amx}"]
    if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
        sh(["cmake", "-S", src, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=ON", "-DGGML_CUDA=OFF",
            *amx_flags, "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
            "-DLLAMA_BUILD_SERVER=" + ("ON" if "llama-server" in targets else "OFF"), "-DLLAMA_OPENSSL=OFF",
            f"-DLLAMA_BUILD_COMMIT={commit[:7]}"])
    print(f"building llama.cpp {commit[:12]} in {build} ...", flush=True)
    sh(["nice", "-n", "19", "cmake", "--build", build, f"-j{jobs}", "--target", *targets])
    return os.path.join(build, "bin"), commit


def build_probe():
    """The limits probe (PROBE_C) compiled in a temporary folder, or None where it cannot build."""
    d = tempfile.mkdtemp()
    atexit.register(shutil.rmtree, d, ignore_errors=True)
    src, exe = os.path.join(d, "probe.c"), os.path.join(d, "probe")
    with open(src, "w") as f:
        f.write(PROBE_C)
    try:
        sh(["cc", "-O2", "-mavx512f", "-mavx512bw", "-mavx512vnni", "-pthread", src, "-o", exe])
        return exe
    except subprocess.CalledProcessError as e:
        print(f"limits probe unavailable: {e.stderr.strip()[:200]}")
        return None


def probe_peaks(probe, threads):
    """{threads: {fma_GFLOPs, vnni_GOPs}} (None without the probe)."""
    return {t: json.loads(sh([probe, "peak", str(t)])) if probe else None for t in threads}


def read_bandwidth(probe, threads, nbytes, huge):
    """One reading of the read bandwidth in bytes/s on threads threads (the median of the probe's
    passes; None without the probe). A decode streams its weights once per token from beyond the
    caches: the probe streams a buffer of about their size, at least 1 GiB (over 3x this L3, so
    still the DRAM's figure for models that fit the caches), at most 2 GiB, in huge pages where
    the weights are rlx's packed copies and in small pages where they are the mapped file's."""
    if not probe:
        return None
    n = min(max(nbytes, 1 << 30), 2 << 30)
    return json.loads(sh([probe, "bw", str(threads), str(n), "1" if huge else "0"]))["read_GBps"] * 1e9


def matmul_weights(path):
    """(bytes, elements) of the 2-D weights a decode step multiplies by (the output matrix, or
    the tied embedding; not the embedding lookup), the elements without the output matrix
    (a prefill computes logits for its last token only), and whether most of those bytes are
    float (F16/BF16/F32: their prefill limit is the FMA peak, not the int8 one)."""
    from gguf import GGUFReader
    r = GGUFReader(path)
    ts = {t.name: t for t in r.tensors}
    nbytes = elems = out_elems = float_bytes = 0
    for name, t in ts.items():
        if len(t.shape) != 2 or (name == "token_embd.weight" and "output.weight" in ts):
            continue
        nbytes += int(t.n_bytes)
        float_bytes += int(t.n_bytes) if t.tensor_type.name in ("F16", "BF16", "F32") else 0
        elems += int(t.n_elements)
        if name in ("output.weight", "token_embd.weight"):
            out_elems = int(t.n_elements)
    return nbytes, elems, elems - out_elems, 2 * float_bytes > nbytes


def exact_file(model, out_dir):
    """The F32 twin of model (every quantized matrix dequantized), made once."""
    out = os.path.join(out_dir, re.sub(r"\.gguf$", "", os.path.basename(model)) + "-exactF32.gguf")
    if not os.path.exists(out):
        sh([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "ref",
                                         "gguf_to_float.py"), model, out, "f32"])
    return out


def agreement(rlx, bindir, model, exact, text, chunks, n_ctx, threads, bf16_math=False):
    """({rlx, llama}: (agreeing, scored)) top-1 of model against exact, teacher-forced (module doc)."""
    scored = chunks * (n_ctx - 1 - n_ctx // 2)
    kld = tempfile.NamedTemporaryFile(suffix=".kld", delete=False).name
    ppl = [os.path.join(bindir, "llama-perplexity"), "-f", text, "-c", str(n_ctx), "--chunks", str(chunks),
           "-t", str(threads), "--kl-divergence-base", kld]
    try:
        sh(ppl + ["-m", exact])
        out = subprocess.run(ppl + ["-m", model, "--kl-divergence"], capture_output=True, text=True, check=True)
        same = re.search(r"Same top p:\s*([0-9.]+)", out.stdout + out.stderr)
        llama = (round(float(same.group(1)) / 100 * scored), scored) if same else None
    finally:
        os.unlink(kld)
    os.environ.setdefault("RLX_LIBRARY", os.path.join(os.path.dirname(os.path.abspath(rlx)), "librlx.so"))
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import numpy as np
    import rlx as rx
    with open(text, encoding="utf-8") as f:
        body = f.read()
    picks = []
    for path in (model, exact):
        m = rx.LLM(path, n_ctx=n_ctx, threads=threads, bf16_math=bf16_math and path == model)
        toks = m.tokenize(body, add_special=False)
        top = []
        for c in range(chunks):
            chunk = [m.token_bos] + list(toks[c * n_ctx + 1:(c + 1) * n_ctx])
            m.reset()
            top.append(np.argmax(m.eval(chunk, all_logits=True)[n_ctx // 2:n_ctx - 1], axis=1))
        picks.append(np.concatenate(top))
        m.close()
    return {"rlx": (int((picks[0] == picks[1]).sum()), scored), "llama": llama}


def loadavg():
    return os.getloadavg()[0]


def rlx_run(rlx, model, threads, ctx, n, prompt_file=None, prompt=None, bf16_math=False):
    cmd = [rlx, "generate", "-m", model, "-n", str(n), "--temp", "0", "--ignore-eos", "--threads", str(threads),
           "--ctx", str(ctx), "--stats-json"] + (["-f", prompt_file] if prompt_file else ["-p", prompt])
    cmd += ["--bf16-math"] if bf16_math else []
    p = subprocess.run(cmd, capture_output=True, text=True, errors="replace")  # random weights: any bytes
    if p.returncode:
        sys.exit(f"rlx failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}")
    return json.loads([l for l in p.stderr.splitlines() if l.startswith("{")][-1])


def calibrate_prompt(rlx, model, pp, ctx):
    """A prompt file rlx tokenizes to pp tokens (within 1%), and its token count."""
    words = (TEXT * (2 + 3 * pp // 100)).split()
    n = int(pp * 0.7)
    for _ in range(6):
        f = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False)
        f.write(" ".join(words[:n]))
        f.close()
        got = rlx_run(rlx, model, 2, max(ctx, 4 * pp), 1, prompt_file=f.name)["prompt_tokens"]
        if abs(got - pp) <= max(1, pp // 100):
            return f.name, got
        os.unlink(f.name)
        n = max(1, int(n * pp / got))
    sys.exit(f"could not make a prompt of {pp} tokens for {model}")


def llama_bench(bindir, model, threads, pp, tg):
    cmd = [os.path.join(bindir, "llama-bench"), "-m", model, "-t", str(threads), "-r", "1", "-o", "json",
           "-p", str(pp), "-n", str(tg)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"llama-bench failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}")
    return json.loads(p.stdout)[0]["avg_ts"]


SHAPES = {  # make_llama_gguf.py arguments of the random-weight files
    "llama-3.2-1b": ["--layers", "16", "--embd", "2048", "--heads", "32", "--heads-kv", "8", "--ff", "8192",
                     "--vocab", "128256"],
    "llama-3-8b": ["--layers", "32", "--embd", "4096", "--heads", "32", "--heads-kv", "8", "--ff", "14336",
                   "--vocab", "128256"],
}


def make_shape(name, tokenizer_from, out_dir, wtype="f16"):
    """A random-weight file of a SHAPES entry (bench/make_llama_gguf.py; F16, or wtype written
    directly) that rlx generate can tokenize for: the tokenizer of tokenizer_from (a GGUF), its token
    list padded with control tokens to the shape's vocabulary."""
    out = os.path.join(out_dir, f"{name}-shape-{wtype.upper()}.gguf")
    if os.path.exists(out):
        return out
    from gguf import GGUFReader, GGUFValueType
    import make_llama_gguf as mk
    tok = {k: f for k, f in GGUFReader(tokenizer_from).fields.items() if k.startswith("tokenizer.")}
    vocab = int(SHAPES[name][SHAPES[name].index("--vocab") + 1])

    def add_tokenizer(wr):
        for k, f in tok.items():
            if f.types[0] == GGUFValueType.ARRAY:
                vals = [bytes(f.parts[i]).decode() if f.types[1] == GGUFValueType.STRING else int(f.parts[i][0])
                        for i in f.data]
                if k == "tokenizer.ggml.tokens":
                    vals += [f"<|pad_{i}|>" for i in range(vocab - len(vals))]
                elif k == "tokenizer.ggml.token_type":
                    vals += [3] * (vocab - len(vals))
                wr.add_array(k, vals)
            elif f.types[0] == GGUFValueType.STRING:
                wr.add_string(k, bytes(f.parts[f.data[0]]).decode())
            elif f.types[0] == GGUFValueType.BOOL:
                wr.add_bool(k, bool(f.parts[f.data[0]][0]))
            else:
                wr.add_uint32(k, int(f.parts[f.data[0]][0]))

    def write_gguf(path, arch, tensors, meta_overrides=None, **kw):
        kw["extra"] = add_tokenizer
        return base_write(path, arch, tensors, meta_overrides=meta_overrides, **kw)
    base_write = mk.write_gguf
    mk.write_gguf = write_gguf
    argv = sys.argv
    sys.argv = ["make_llama_gguf.py", out, "--wtype", wtype] + SHAPES[name]
    try:
        mk.main()
    finally:
        sys.argv = argv
        mk.write_gguf = base_write
    return out


def quantize(bindir, specs, out_dir):
    made = []
    for spec in specs:
        src, typ = spec.rsplit(":", 1)
        out = os.path.join(out_dir, re.sub(r"\.gguf$", "", os.path.basename(src)) + f"-{typ}.gguf")
        if not os.path.exists(out):
            sh(["nice", "-n", "10", os.path.join(bindir, "llama-quantize"), "--allow-requantize", src, out, typ])
        made.append(out)
    return made


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rlx", default=os.path.join(os.path.dirname(__file__), "..", "build", "rlx"))
    ap.add_argument("--llama-src", required=True)
    ap.add_argument("--llama-build", help="its build folder (default: LLAMA_SRC/build-rlx-bench, or "
                    "build-rlx-bench-amx with --llama-amx)")
    ap.add_argument("--llama-amx", action="store_true",
                    help="build llama.cpp with its AMX kernels (where the kernel grants AMX tile data: "
                    "rlx's test_amx_probe passes)")
    ap.add_argument("--models", default="")
    ap.add_argument("--quantize", default="")
    ap.add_argument("--shape", default="", help=f"make a random-weight F16 file of these shapes ({', '.join(SHAPES)}) "
                    "with the tokenizer of --tokenizer-from; SHAPE:TYPE in --quantize quantizes it; "
                    "SHAPE:q4_0 (q8_0, bf16) here writes that type directly and measures it (no F16 file: "
                    "the 8B shape's is 16 GB)")
    ap.add_argument("--tokenizer-from")
    ap.add_argument("--out-dir", default="/tmp")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--agree", type=int, default=5, help="chunks of the top-1 agreement (0: none)")
    ap.add_argument("--bf16-math", action="store_true", help="rlx with RLX_FLAG_BF16_MATH (module doc)")
    ap.add_argument("--agree-ctx", type=int, default=128)
    ap.add_argument("--agree-text", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs",
                                                           "ARCHITECTURE.md"))
    ap.add_argument("--json")
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    src = os.path.abspath(args.llama_src)
    models = [m for m in args.models.split(",") if m]
    for m in models + ([args.tokenizer_from] if args.tokenizer_from else []):
        if not os.path.isfile(m):
            sys.exit(f"bench_generate: no such file: {m}")
    default_build = "build-rlx-bench-amx" if args.llama_amx else "build-rlx-bench"
    bindir, commit = build_llama(src, os.path.abspath(args.llama_build or os.path.join(src, default_build)),
                                 args.jobs, amx=args.llama_amx)
    shapes = {n: make_shape(n, args.tokenizer_from, args.out_dir) for n in args.shape.split(",") if n and ":" not in n}
    models += [make_shape(n.split(":")[0], args.tokenizer_from, args.out_dir, n.split(":")[1])
               for n in args.shape.split(",") if ":" in n]
    if args.quantize:
        specs = [shapes.get(q.rsplit(":", 1)[0], q.rsplit(":", 1)[0]) + ":" + q.rsplit(":", 1)[1]
                 for q in args.quantize.split(",")]
        models += quantize(bindir, specs, args.out_dir)
    rlx_commit = sh([args.rlx, "--version"]).split("\n")[0].strip()
    probe = build_probe()
    peaks = probe_peaks(probe, threads)
    amx = " (AMX kernels)" if args.llama_amx else ""
    mode = " --bf16-math" if args.bf16_math else ""
    print(f"llama.cpp {commit[:12]}{amx}, rlx {rlx_commit}{mode}, {os.cpu_count()} CPUs, pp {args.pp}, tg {args.tg}, "
          f"median of {args.runs}; compute peaks {json.dumps({str(k): v for k, v in peaks.items()})}", flush=True)
    ctx = args.pp + args.tg + 16
    rows = []
    agree = {}
    for model in models:
        if args.agree > 0:
            a = agreement(args.rlx, bindir, model, exact_file(model, args.out_dir), args.agree_text, args.agree,
                          args.agree_ctx, max(threads), args.bf16_math)
            agree[os.path.basename(model)] = a
            print(f"{os.path.basename(model):32} top-1 agreement with its F32 twin: rlx {a['rlx'][0]}/{a['rlx'][1]}"
                  + (f", llama.cpp {a['llama'][0]}/{a['llama'][1]}" if a["llama"] else ", llama.cpp n/a"),
                  flush=True)
    for model in models:
        wbytes, welems, pp_elems, float_w = matmul_weights(model)
        prompt_file, ptoks = calibrate_prompt(args.rlx, model, args.pp, ctx)
        try:
            for t in threads:
                res = {k: [] for k in ("rlx_pp", "llama_pp", "rlx_tg", "llama_tg")}
                loads, bws = [], []
                for _ in range(args.runs):
                    loads.append(loadavg())
                    st = rlx_run(args.rlx, model, t, ctx, 1, prompt_file=prompt_file, bf16_math=args.bf16_math)
                    res["rlx_pp"].append(st["prompt_tokens"] / st["prefill_s"])
                    loads.append(loadavg())
                    res["llama_pp"].append(llama_bench(bindir, model, t, args.pp, 0))
                    bws.append(read_bandwidth(probe, t, wbytes, not float_w))
                    loads.append(loadavg())
                    st = rlx_run(args.rlx, model, t, ctx, args.tg + 1, prompt="Once", bf16_math=args.bf16_math)
                    res["rlx_tg"].append(st["decode_evals"] / st["decode_s"])
                    loads.append(loadavg())
                    res["llama_tg"].append(llama_bench(bindir, model, t, 0, args.tg))
                    bws.append(read_bandwidth(probe, t, wbytes, not float_w))
                med = {k: statistics.median(v) for k, v in res.items()}
                row = {"model": os.path.basename(model), "threads": t, "prompt_tokens": ptoks, **med,
                       "pp_ratio": med["rlx_pp"] / med["llama_pp"], "tg_ratio": med["rlx_tg"] / med["llama_tg"],
                       "load_min": min(loads), "load_max": max(loads), "runs": res,
                       "weight_bytes": wbytes, "weight_elems": welems, "prefill_elems": pp_elems}
                lim = peaks.get(t) and all(bws)
                if lim:
                    bw = statistics.median(bws)
                    row["read_GBps"] = [b / 1e9 for b in bws]
                    ops = peaks[t]["fma_GFLOPs" if float_w else "vnni_GOPs"] * 1e9
                    for who in ("rlx", "llama"):
                        row[f"{who}_tg_of_bw"] = wbytes * med[f"{who}_tg"] / bw
                        row[f"{who}_pp_of_peak"] = 2 * pp_elems * med[f"{who}_pp"] / ops
                rows.append(row)
                print(f"{row['model']:32} t{t} pp {med['rlx_pp']:8.1f} / {med['llama_pp']:8.1f} = "
                      f"{row['pp_ratio']:.2f}x  tg {med['rlx_tg']:7.1f} / {med['llama_tg']:7.1f} = "
                      f"{row['tg_ratio']:.2f}x  load {row['load_min']:.1f}-{row['load_max']:.1f}"
                      + (f"  tg {row['rlx_tg_of_bw']:.0%}/{row['llama_tg_of_bw']:.0%} of bw "
                         f"{bw / 1e9:.1f} GB/s ({min(bws) / 1e9:.1f}-{max(bws) / 1e9:.1f}), pp "
                         f"{row['rlx_pp_of_peak']:.0%}/{row['llama_pp_of_peak']:.0%} of "
                         + ("fma" if float_w else "vnni") if lim else ""),
                      flush=True)
        finally:
            os.unlink(prompt_file)
    print("\n| file | threads | rlx pp | llama.cpp pp | ratio | rlx tg | llama.cpp tg | ratio | "
          "tg of DRAM bw (rlx / llama.cpp) | read GB/s | pp of peak: int8, FMA for float files (rlx / llama.cpp) "
          "| load |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        lim = "rlx_tg_of_bw" in r
        print(f"| {r['model']} | {r['threads']} | {r['rlx_pp']:.1f} | {r['llama_pp']:.1f} | {r['pp_ratio']:.2f}x | "
              f"{r['rlx_tg']:.1f} | {r['llama_tg']:.1f} | {r['tg_ratio']:.2f}x | "
              + (f"{r['rlx_tg_of_bw']:.0%} / {r['llama_tg_of_bw']:.0%} | {statistics.median(r['read_GBps']):.1f} | "
                 f"{r['rlx_pp_of_peak']:.1%} / {r['llama_pp_of_peak']:.1%} | " if lim else "n/a | n/a | n/a | ")
              + f"{r['load_min']:.1f}-{r['load_max']:.1f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"llama_cpp_commit": commit, "rlx_commit": rlx_commit, "bf16_math": args.bf16_math,
                       "peaks": peaks, "rows": rows,
                       "top1_agreement": agree}, f, indent=1)


if __name__ == "__main__":
    main()
