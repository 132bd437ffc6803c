"""sampler_cases.py --out FILE: cases for tests/test_sampler.c.

The reference is llama.cpp's sampler chain written the plain way, in NumPy:
the logit biases added, then on each distinct token of the last
repeat_last_n accepted ones the repetition penalty and count *
frequency_penalty + presence_penalty subtracted (in float32, as the
logits are), a full sort of the
vocabulary, top-k, a softmax, top-p (the first prefix whose cumulative
probability reaches p), min-p (p >= min_p * p_max) and a softmax of
logit / T over what is left, in float64. Greedy (T <= 0) is the argmax.

Cases whose answer hangs on rounding (a top-k tie at the cut, a cumulative
sum or a min-p ratio too close to its bound) are drawn again.

File format (little endian): b"RLXSMP2\\0", u32 case count, then per case:
i64 n_vocab; f32 temperature, top_p, min_p, repeat_penalty; i32 top_k,
repeat_last_n; u64 seed; u8 statistical (draw many tokens and compare
frequencies: only where drawing does not change the distribution, i.e.
no penalty); i32 n_history, i32 history[n_history]; f32
frequency_penalty, presence_penalty; i32 n_bias, (i32 token, f32 bias)
[n_bias]; f32 logits[n_vocab]; i32 n_keep; i32 ids[n_keep] (ascending);
f64 probs[n_keep].
"""
import argparse
import struct

import numpy as np

MARGIN = 1e-4      # top-k gaps and min-p log-ratios (the C side compares float32 logits)
MARGIN_P = 1e-8    # cumulative probabilities (both sides sum in float64)


class Ambiguous(Exception):
    pass


def penalize(logits, history, penalty, last_n, freq=0.0, pres=0.0, bias=()):
    out = logits.astype(np.float32).copy()
    for t, b in bias:
        out[t] = np.float32(out[t] + np.float32(b))
    window = [int(t) for t in history[-last_n:]] if last_n > 0 else []
    pen, fq, pr = np.float32(penalty), np.float32(freq), np.float32(pres)
    for t in sorted(set(window)):
        x = out[t] / pen if out[t] > 0 else out[t] * pen
        out[t] = np.float32(np.float32(x - np.float32(window.count(t)) * fq) - pr)
    return out


def chain(logits, history, temp, top_k, top_p, min_p, penalty, last_n, freq=0.0, pres=0.0, bias=()):
    """(ids ascending, probs) of the kept candidates."""
    lg = penalize(logits, history, penalty, last_n, freq, pres, bias)
    n = lg.size
    if temp <= 0:
        return np.array([int(np.argmax(lg))]), np.array([1.0])
    order = np.lexsort((np.arange(n), -lg.astype(np.float64)))  # by logit descending, then id
    if 0 < top_k < n:
        if lg[order[top_k - 1]] - lg[order[top_k]] < MARGIN * max(1.0, abs(float(lg[order[top_k]]))):
            raise Ambiguous("top-k tie")
        order = order[:top_k]
    x = lg[order].astype(np.float64)
    p = np.exp(x - x.max())
    p /= p.sum()
    if top_p < 1:
        cum = np.cumsum(p)
        hit = np.nonzero(cum >= top_p)[0]
        if hit.size:
            i = int(hit[0])
            if cum[i] - top_p < MARGIN_P or (i > 0 and top_p - cum[i - 1] < MARGIN_P):
                raise Ambiguous("top-p bound")
            order, p = order[: i + 1], p[: i + 1]
    if min_p > 0:
        ratio = p / p[0]
        if np.any(np.abs(np.log(ratio) - np.log(min_p)) < MARGIN):
            raise Ambiguous("min-p bound")
        keep = ratio >= min_p
        order = order[keep]
    x = lg[order].astype(np.float64) / temp
    q = np.exp(x - x.max())
    q /= q.sum()
    srt = np.argsort(order)
    return order[srt], q[srt]


def make_logits(rng, n, kind):
    if kind == "normal":
        return rng.normal(0, 3, n)
    if kind == "flat":       # many similar tokens: top-p needs most of the vocabulary
        return rng.normal(0, 0.3, n)
    if kind == "peaked":     # one dominant token, a long tail
        x = rng.normal(-4, 2, n)
        x[rng.integers(n)] = 12
        return x
    # "llm": roughly the shape of real next-token logits (a Gumbel tail over a low floor)
    return rng.gumbel(0, 2.5, n) - 5


def build_cases(rng):
    specs = []
    # (n_vocab, kind, temp, top_k, top_p, min_p, penalty, last_n, n_history)
    for n in (7, 1000, 49152):
        for kind in ("normal", "llm", "peaked"):
            specs += [
                (n, kind, 0.0, 40, 0.95, 0.05, 1.0, 64, 0),     # greedy
                (n, kind, 0.0, 0, 1.0, 0.0, 1.5, 64, 40),       # greedy after a penalty
                (n, kind, 1.0, 0, 1.0, 0.0, 1.0, 64, 0),        # temperature only
                (n, kind, 0.7, 0, 1.0, 0.0, 1.0, 64, 0),
                (n, kind, 1.0, 5, 1.0, 0.0, 1.0, 64, 0),        # top-k only
                (n, kind, 1.3, 40, 1.0, 0.0, 1.0, 64, 0),
                (n, kind, 1.0, n + 3, 1.0, 0.0, 1.0, 64, 0),    # top-k past the vocabulary: off
                (n, kind, 1.0, 1, 1.0, 0.0, 1.0, 64, 0),
                (n, kind, 1.0, 0, 0.9, 0.0, 1.0, 64, 0),        # top-p only (growing selection)
                (n, kind, 0.8, 0, 0.5, 0.0, 1.0, 64, 0),
                (n, kind, 1.0, 0, 1.0, 0.05, 1.0, 64, 0),       # min-p only
                (n, kind, 0.6, 0, 1.0, 0.3, 1.0, 64, 0),
                (n, kind, 0.8, 40, 0.95, 0.05, 1.0, 64, 0),     # the defaults
                (n, kind, 0.8, 40, 0.95, 0.05, 1.3, 64, 100),   # with a penalty (history longer than the window)
                (n, kind, 1.0, 0, 0.9, 0.02, 0.7, 16, 30),      # a penalty < 1 raises the window's logits
                (n, kind, 1.0, 100, 0.8, 0.0, 1.2, 0, 30),      # last_n 0: no penalty
                (n, kind, 2.0, 0, 0.99, 0.0, 1.1, 64, 64),
            ]
    specs += [(49152, "flat", 1.0, 0, 0.9, 0.0, 1.0, 64, 0),   # top-p over ~80% of the vocabulary
              (151936, "llm", 0.8, 40, 0.95, 0.05, 1.1, 64, 64),  # a Qwen-sized vocabulary
              (151936, "llm", 1.0, 0, 0.95, 0.0, 1.0, 64, 0)]
    specs = [s + (0.0, 0.0, 0) for s in specs]
    # OpenAI's penalties and logit_bias: (..., frequency, presence, biases)
    for n in (7, 1000, 49152):
        specs += [
            (n, "llm", 0.0, 0, 1.0, 0.0, 1.0, 64, 40, 0.5, 0.0, 0),    # greedy after a frequency penalty
            (n, "normal", 0.0, 0, 1.0, 0.0, 1.0, 64, 40, 0.0, 2.0, 0),  # ... a presence penalty
            (n, "llm", 1.0, 0, 1.0, 0.0, 1.0, 64, 0, 0.0, 0.0, 5),      # biases, nothing else
            (n, "peaked", 0.0, 0, 1.0, 0.0, 1.0, 64, 0, 0.0, 0.0, 3),   # greedy moved by a bias
            (n, "llm", 0.8, 40, 0.95, 0.05, 1.1, 64, 64, 0.3, 0.4, 4),  # all of them
            (n, "normal", 1.0, 0, 0.9, 0.0, 1.0, 16, 30, -0.5, -1.0, 2),  # negative penalties raise
        ]
    cases = []
    for (n, kind, temp, top_k, top_p, min_p, pen, last_n, n_hist, freq, pres, n_bias) in specs:
        for _ in range(100):
            logits = make_logits(rng, n, kind).astype(np.float32)
            history = rng.integers(0, n, n_hist)
            if n_hist:  # repeats, and tokens the model likes, as real text has
                history[: n_hist // 2] = history[n_hist // 2: 2 * (n_hist // 2)]
                history[-1] = int(np.argmax(logits))
            # biases on the favourite (down) and on random tokens (either way)
            bias = [(int(rng.integers(n)), float(rng.normal(0, 4))) for _ in range(n_bias)]
            if n_bias:
                bias[0] = (int(np.argmax(logits)), -6.0)
            try:
                ids, probs = chain(logits, history, temp, top_k, top_p, min_p, pen, last_n, freq, pres, bias)
                break
            except Ambiguous:
                continue
        else:
            raise SystemExit(f"no unambiguous case for {n} {kind}")
        no_penalty = (pen == 1 and freq == 0 and pres == 0) or last_n == 0
        statistical = temp > 0 and no_penalty and 2 <= len(ids) <= 200 and n <= 1000
        seed = int(rng.integers(0, 2**63))
        cases.append((n, temp, top_p, min_p, pen, top_k, last_n, seed, statistical, history, freq, pres, bias, logits,
                      ids, probs))
    return cases


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    cases = build_cases(np.random.default_rng(20261202))
    with open(args.out, "wb") as f:
        f.write(b"RLXSMP2\0" + struct.pack("<I", len(cases)))
        for (n, temp, top_p, min_p, pen, top_k, last_n, seed, stat, history, freq, pres, bias, logits, ids,
             probs) in cases:
            f.write(struct.pack("<q4f2iQB", n, temp, top_p, min_p, pen, top_k, last_n, seed, int(stat)))
            f.write(struct.pack("<i", len(history)) + np.asarray(history, "<i4").tobytes())
            f.write(struct.pack("<2fi", freq, pres, len(bias)))
            for t, b in bias:
                f.write(struct.pack("<if", t, b))
            f.write(np.asarray(logits, "<f4").tobytes())
            f.write(struct.pack("<i", len(ids)) + np.asarray(ids, "<i4").tobytes())
            f.write(np.asarray(probs, "<f8").tobytes())
    print(f"{len(cases)} cases -> {args.out}")


if __name__ == "__main__":
    main()
