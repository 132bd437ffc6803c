"""Op-parity cases of group "quant": DequantMatMul, Quantize, Dequantize,
FakeQuantize, over the 11 GGUF block dtypes (and DequantMatMul of F16/BF16
weights); Attention over Q8_0 / Q4_0 keys and values (a quantized KV
cache).

The reference for the block formats is the PyPI `gguf` package (gguf.quants,
ggml's layouts in NumPy): its dequantizer for every type it has (all but
q8_k), its quantizer for the legacy types (q4_0 .. q8_0). For the K types,
which gguf cannot quantize, this file carries a NumPy port of ggml's
reference quantizers (quantize_row_q*_K_ref with make_qkx2_quants /
make_q3_quants / make_qx_quants), float32 operation for float32 operation,
so Quantize is checked bit for bit for every type; gguf then dequantizes
those blocks for the round-trip cases, and a per-type error bound checks the
round trip against the input itself. q8_k (no gguf support at all) is
decoded here too: d * qs.

Other references are computed in float64 from the values as stored in the
input dtype (rlxcase.round_to) and given in the output dtype.
"""
import numpy as np

from rlxcase import Graph, T, round_to

F = np.float32

# name -> (elements per block, bytes per block); ggml-common.h
BLOCKS = {"q4_0": (32, 18), "q4_1": (32, 20), "q5_0": (32, 22), "q5_1": (32, 24),
          "q8_0": (32, 34), "q2_k": (256, 84), "q3_k": (256, 110), "q4_k": (256, 144),
          "q5_k": (256, 176), "q6_k": (256, 210), "q8_k": (256, 292)}
LEGACY = ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0"]
K_TYPES = ["q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "q8_k"]

# Byte offsets of the fp16 scale fields of each block (ggml-common.h), set
# to sane values in random blocks so no NaN/inf scale appears.
F16_FIELDS = {"q4_0": [0], "q4_1": [0, 2], "q5_0": [0], "q5_1": [0, 2], "q8_0": [0],
              "q2_k": [80, 82], "q3_k": [108], "q4_k": [0, 2], "q5_k": [0, 2],
              "q6_k": [208], "q8_k": []}

# Round-trip bound: |dequant(quant(x)) - x| <= BOUND * max|x| of the row.
# Legacy types from the format (Q4_0: the level opposite the largest value
# clips, an error of d = amax/8; Q4_1: d/2 with d <= 2 amax/15; ...), plus
# fp16 rounding of d; K types: 1.3x the worst of 4000 standard-normal blocks.
BOUND = {"q4_0": 0.13, "q4_1": 0.07, "q5_0": 0.065, "q5_1": 0.035, "q8_0": 0.005,
         "q2_k": 0.49, "q3_k": 0.28, "q4_k": 0.12, "q5_k": 0.065, "q6_k": 0.021,
         "q8_k": 0.0041}


def _gguf():
    try:
        import gguf.quants
    except ImportError as e:
        raise RuntimeError("cases_quant.py needs the PyPI package `gguf` (pip install gguf): "
                           "it is the reference for the GGUF block formats") from e
    return gguf


def gguf_type(gguf, name):
    return getattr(gguf.GGMLQuantizationType, name.upper())


# ---------------------------------------------------------------- ggml's K-quant reference in NumPy
#
# Arrays are float32 and every expression keeps ggml's operand order, so the
# roundings are the C code's. Sums run sequentially (never np.sum, which is
# pairwise). Rows of a 2-D array are independent (sub)blocks.

def nearest_int(v):
    """ggml's nearest_int: round half to even through the float adder."""
    t = (np.asarray(v, F) + F(12582912.0)).astype(F)
    return (t.view(np.int32) & 0x007FFFFF) - 0x00400000


def to_int8(v):
    """An int stored into an int8_t (wraps)."""
    return ((np.asarray(v, np.int64) + 128) & 0xFF) - 128


def seq_sum(terms):
    """Sequential float32 sum over the last axis, starting from 0."""
    s = np.zeros(terms.shape[:-1], F)
    for i in range(terms.shape[-1]):
        s = s + terms[..., i]
    return s


def first_abs_max(x):
    """ggml's `if (ax > amax) { amax = ax; max = x[i]; }` from amax = max = 0."""
    amax = np.zeros(x.shape[:-1], F)
    mx = np.zeros(x.shape[:-1], F)
    for i in range(x.shape[-1]):
        ax = np.abs(x[..., i])
        up = ax > amax
        amax = np.where(up, ax, amax)
        mx = np.where(up, x[..., i], mx)
    return amax, mx


def running_max(v):
    """ggml's `if (v > m) m = v;` from m = 0 over the last axis."""
    m = np.zeros(v.shape[:-1], F)
    for i in range(v.shape[-1]):
        m = np.where(v[..., i] > m, v[..., i], m)
    return m


def make_qkx2_quants(x, w, nmax, rmin, rdelta, nstep, use_mad):
    """-> (scale, the_min, L) per row."""
    n = x.shape[1]
    mn, mx = x[:, 0].copy(), x[:, 0].copy()
    sum_w = w[:, 0].copy()
    sum_x = sum_w * x[:, 0]
    for i in range(1, n):
        mn = np.where(x[:, i] < mn, x[:, i], mn)
        mx = np.where(x[:, i] > mx, x[:, i], mx)
        sum_w = sum_w + w[:, i]
        sum_x = sum_x + w[:, i] * x[:, i]
    mn = np.where(mn > 0, F(0), mn)
    flat = mx == mn

    def error(scale, m, L):
        e = np.zeros(x.shape[0], F)
        for i in range(n):
            diff = scale * L[:, i].astype(F) + m - x[:, i]
            diff = np.abs(diff) if use_mad else diff * diff
            e = e + w[:, i] * diff
        return e

    with np.errstate(all="ignore"):
        iscale = F(nmax) / (mx - mn)
        scale = F(1) / iscale
        L = np.clip(nearest_int(iscale[:, None] * (x - mn[:, None])), 0, nmax)
        best = error(scale, mn, L)
        for s in range(nstep + 1):
            iscale = (F(rmin) + F(rdelta) * F(s) + F(nmax)) / (mx - mn)
            La = np.clip(nearest_int(iscale[:, None] * (x - mn[:, None])), 0, nmax)
            lf = La.astype(F)
            sum_l = seq_sum(w * lf)
            sum_l2 = seq_sum(w * lf * lf)
            sum_xl = seq_sum(w * lf * x)
            D = sum_w * sum_l2 - sum_l * sum_l
            this_scale = (sum_w * sum_xl - sum_x * sum_l) / D
            this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D
            pos = this_min > 0
            this_min = np.where(pos, F(0), this_min)
            this_scale = np.where(pos, sum_xl / sum_l2, this_scale)
            cur = error(this_scale, this_min, La)
            up = (D > 0) & (cur < best)
            L = np.where(up[:, None], La, L)
            best = np.where(up, cur, best)
            scale = np.where(up, this_scale, scale)
            mn = np.where(up, this_min, mn)
    L = np.where(flat[:, None], 0, L)
    return np.where(flat, F(0), scale), -mn, L


def make_q3_quants(x, nmax):
    """make_q3_quants(do_rmse=true) -> (scale, L + nmax) per row."""
    n = x.shape[1]
    amax, mx = first_abs_max(x)
    zero = amax < F(1e-15)
    with np.errstate(all="ignore"):
        iscale = F(-nmax) / mx
        L = np.clip(nearest_int(iscale[:, None] * x), -nmax, nmax - 1)
        w = x * x
        sumlx = seq_sum(w * x * L.astype(F))
        suml2 = seq_sum(w * L.astype(F) * L.astype(F))
        for _ in range(5):
            changed = np.zeros(x.shape[0], bool)
            for i in range(n):
                xi, wi, li = x[:, i], w[:, i], L[:, i].astype(F)
                slx = sumlx - wi * xi * li
                sl2 = suml2 - wi * li * li
                new_l = np.clip(nearest_int(xi * sl2 / slx), -nmax, nmax - 1)
                nf = new_l.astype(F)
                slx2 = slx + wi * xi * nf
                sl22 = sl2 + wi * nf * nf
                ok = ((slx > 0) & (new_l != L[:, i]) & (sl22 > 0) &
                      (slx2 * slx2 * suml2 > sumlx * sumlx * sl22))
                L[:, i] = np.where(ok, new_l, L[:, i])
                sumlx = np.where(ok, slx2, sumlx)
                suml2 = np.where(ok, sl22, suml2)
                changed |= ok
            # a pass that changes nothing leaves the state as it was, so the
            # rows ggml stops early on would not change in later passes either
            if not changed.any():
                break
        scale = np.where(suml2 > 0, sumlx / suml2, F(0))
    return np.where(zero, F(0), scale), np.where(zero[:, None], 0, L + nmax)


def make_qx_quants(x, nmax):
    """make_qx_quants(rmse_type=1, qw=NULL) -> (scale, L + nmax) per row."""
    amax, mx = first_abs_max(x)
    zero = amax < F(1e-15)
    w = x * x
    with np.errstate(all="ignore"):
        iscale = F(-nmax) / mx
        l = np.clip(nearest_int(iscale[:, None] * x), -nmax, nmax - 1)
        L = l + nmax
        sumlx = seq_sum(w * x * l.astype(F))
        suml2 = seq_sum(w * l.astype(F) * l.astype(F))
        scale = np.where(suml2 != 0, sumlx / suml2, F(0))
        best = scale * sumlx
        for s in range(-9, 10):
            if s == 0:
                continue
            iscale = -(F(nmax) + F(0.1) * F(s)) / mx
            l = np.clip(nearest_int(iscale[:, None] * x), -nmax, nmax - 1)
            sumlx = seq_sum(w * x * l.astype(F))
            suml2 = seq_sum(w * l.astype(F) * l.astype(F))
            up = (suml2 > 0) & (sumlx * sumlx > best * suml2)
            L = np.where(up[:, None], l + nmax, L)
            scale = np.where(up, sumlx / suml2, scale)
            best = np.where(up, scale * sumlx, best)
    return np.where(zero, F(0), scale), np.where(zero[:, None], 0, L)


def f16_bytes(v):
    return np.asarray(v, F).astype(np.float16).view(np.uint8).reshape(-1, 2)


def f16_val(v):
    return np.asarray(v, F).astype(np.float16).astype(F)


def pack_2bit(L):
    """[nb, 256] levels 0..3 -> ggml's qs[64]."""
    out = []
    for h in range(2):
        j = 128 * h
        out.append(L[:, j:j + 32] | L[:, j + 32:j + 64] << 2 | L[:, j + 64:j + 96] << 4 |
                   L[:, j + 96:j + 128] << 6)
    return np.concatenate(out, axis=1)


def requant(x, d, L, lo, hi, offset, m=None):
    """ggml's second pass: L = clamp(nearest_int((x [+ m]) / d), lo, hi) + offset
    for every sub-block whose d is nonzero. x, L: [nb, nsub, len]; d, m: [nb, nsub]."""
    with np.errstate(all="ignore"):
        v = x if m is None else x + m[..., None]
        Ln = np.clip(nearest_int(v / d[..., None]), lo, hi) + offset
    return np.where((d != 0)[..., None], Ln, L)


def quant_q2_k(x):
    nb = x.shape[0]
    xs = x.reshape(nb * 16, 16)
    sc, mins, L = make_qkx2_quants(xs, np.abs(xs), 3, -0.5, 0.1, 15, True)
    sc, mins = sc.reshape(nb, 16), mins.reshape(nb, 16)
    ms, mm = running_max(sc), running_max(mins)
    with np.errstate(all="ignore"):
        scales = np.where((ms > 0)[:, None], nearest_int((F(15) / ms)[:, None] * sc) & 0xFF, 0)
        scales = np.where((mm > 0)[:, None],
                          (scales | nearest_int((F(15) / mm)[:, None] * mins) << 4) & 0xFF, scales)
    d = np.where(ms > 0, ms / F(15), F(0))
    dmin = np.where(mm > 0, mm / F(15), F(0))
    dsub = f16_val(d)[:, None] * (scales & 0xF).astype(F)
    msub = f16_val(dmin)[:, None] * (scales >> 4).astype(F)
    L = requant(x.reshape(nb, 16, 16), dsub, L.reshape(nb, 16, 16), 0, 3, 0, msub)
    return np.concatenate([scales, pack_2bit(L.reshape(nb, 256)), f16_bytes(d), f16_bytes(dmin)],
                          axis=1)


def q3_k_scales(sc12, j):
    lo = sc12[:, j] & 0xF if j < 8 else sc12[:, j - 8] >> 4
    return (lo | ((sc12[:, 8 + j % 4] >> (2 * (j // 4))) & 3) << 4) - 32


def quant_q3_k(x):
    nb = x.shape[0]
    sc, L = make_q3_quants(x.reshape(nb * 16, 16), 4)
    sc, L = sc.reshape(nb, 16), L.reshape(nb, 256)
    amax = np.zeros(nb, F)
    max_scale = np.zeros(nb, F)
    for j in range(16):
        up = np.abs(sc[:, j]) > amax
        amax = np.where(up, np.abs(sc[:, j]), amax)
        max_scale = np.where(up, sc[:, j], max_scale)
    has = max_scale != 0
    sc12 = np.zeros((nb, 12), np.int64)
    with np.errstate(all="ignore"):
        iscale = F(-32) / max_scale
        l = np.clip(to_int8(nearest_int(iscale[:, None] * sc)), -32, 31) + 32
        d = np.where(has, F(1) / iscale, F(0))
    l = np.where(has[:, None], l, 0)
    for j in range(16):
        if j < 8:
            sc12[:, j] = l[:, j] & 0xF
        else:
            sc12[:, j - 8] |= (l[:, j] & 0xF) << 4
        sc12[:, 8 + j % 4] |= (l[:, j] >> 4) << (2 * (j // 4))
    dsub = f16_val(d)[:, None] * np.stack([q3_k_scales(sc12, j) for j in range(16)], 1).astype(F)
    L = requant(x.reshape(nb, 16, 16), dsub, L.reshape(nb, 16, 16), -4, 3, 4).reshape(nb, 256)
    hmask = np.zeros((nb, 32), np.int64)
    for k in range(8):
        hmask |= (L[:, 32 * k:32 * k + 32] > 3).astype(np.int64) << k
    return np.concatenate([hmask, pack_2bit(L & 3), sc12, f16_bytes(d)], axis=1)


def scale_min_k4(s12, j):
    if j < 4:
        return s12[:, j] & 63, s12[:, j + 4] & 63
    return ((s12[:, j + 4] & 0xF) | (s12[:, j - 4] >> 6) << 4,
            (s12[:, j + 4] >> 4) | (s12[:, j] >> 6) << 4)


def quant_k_scale_min(x, nmax, rmin, nstep):
    """Common part of quantize_row_q4_K_ref / q5_K_ref -> (d|dmin|scales bytes, L)."""
    nb = x.shape[0]
    xs = x.reshape(nb * 8, 32)
    av_x = np.sqrt(seq_sum(xs * xs) / F(32))
    sc, mins, L = make_qkx2_quants(xs, av_x[:, None] + np.abs(xs), nmax, rmin, 0.1, nstep, False)
    sc, mins = sc.reshape(nb, 8), mins.reshape(nb, 8)
    ms, mm = running_max(sc), running_max(mins)
    with np.errstate(all="ignore"):
        inv_scale = np.where(ms > 0, F(63) / ms, F(0))
        inv_min = np.where(mm > 0, F(63) / mm, F(0))
    ls = np.minimum(63, nearest_int(inv_scale[:, None] * sc) & 0xFF)
    lm = np.minimum(63, nearest_int(inv_min[:, None] * mins) & 0xFF)
    s12 = np.zeros((nb, 12), np.int64)
    for j in range(8):
        if j < 4:
            s12[:, j] = ls[:, j]
            s12[:, j + 4] = lm[:, j]
        else:
            s12[:, j + 4] = (ls[:, j] & 0xF) | (lm[:, j] & 0xF) << 4
            s12[:, j - 4] |= (ls[:, j] >> 4) << 6
            s12[:, j] |= (lm[:, j] >> 4) << 6
    d, dmin = ms / F(63), mm / F(63)
    sm = [scale_min_k4(s12, j) for j in range(8)]
    dsub = f16_val(d)[:, None] * np.stack([a for a, _ in sm], 1).astype(F)
    msub = f16_val(dmin)[:, None] * np.stack([b for _, b in sm], 1).astype(F)
    L = requant(x.reshape(nb, 8, 32), dsub, L.reshape(nb, 8, 32), 0, nmax, 0, msub)
    return np.concatenate([f16_bytes(d), f16_bytes(dmin), s12], axis=1), L.reshape(nb, 256)


def quant_q4_k(x):
    head, L = quant_k_scale_min(x, 15, -1.0, 20)
    qs = [L[:, j:j + 32] | L[:, j + 32:j + 64] << 4 for j in range(0, 256, 64)]
    return np.concatenate([head] + qs, axis=1)


def quant_q5_k(x):
    head, L = quant_k_scale_min(x, 31, -0.5, 15)
    qh = np.zeros((x.shape[0], 32), np.int64)
    ql = []
    for k, n in enumerate(range(0, 256, 64)):
        l1, l2 = L[:, n:n + 32], L[:, n + 32:n + 64]
        qh |= (l1 > 15).astype(np.int64) << (2 * k) | (l2 > 15).astype(np.int64) << (2 * k + 1)
        ql.append((l1 & 0xF) | (l2 & 0xF) << 4)
    return np.concatenate([head, qh] + ql, axis=1)


def quant_q6_k(x):
    nb = x.shape[0]
    sc, L = make_qx_quants(x.reshape(nb * 16, 16), 32)
    sc, L = sc.reshape(nb, 16), L.reshape(nb, 256)
    max_abs = np.zeros(nb, F)
    max_scale = np.zeros(nb, F)
    for j in range(16):
        up = np.abs(sc[:, j]) > max_abs
        max_abs = np.where(up, np.abs(sc[:, j]), max_abs)
        max_scale = np.where(up, sc[:, j], max_scale)
    zero = max_abs < F(1e-15)
    with np.errstate(all="ignore"):
        iscale = F(-128) / max_scale
        d = F(1) / iscale
        scq = to_int8(np.minimum(127, nearest_int(iscale[:, None] * sc)))
    dsub = f16_val(d)[:, None] * scq.astype(F)
    L = requant(x.reshape(nb, 16, 16), dsub, L.reshape(nb, 16, 16), -32, 31, 32).reshape(nb, 256)
    ql, qh = [], []
    for j in (0, 128):
        q = [L[:, j + 32 * k:j + 32 * k + 32] for k in range(4)]
        ql += [(q[0] & 0xF) | (q[2] & 0xF) << 4, (q[1] & 0xF) | (q[3] & 0xF) << 4]
        qh.append(q[0] >> 4 | (q[1] >> 4) << 2 | (q[2] >> 4) << 4 | (q[3] >> 4) << 6)
    out = np.concatenate(ql + qh + [scq & 0xFF, f16_bytes(d)], axis=1)
    return np.where(zero[:, None], 0, out)


def quant_q8_k(x):
    amax, mx = first_abs_max(x)
    zero = amax == 0
    with np.errstate(all="ignore"):
        iscale = F(-127) / mx
        qs = np.minimum(127, nearest_int(iscale[:, None] * x))
        d = F(1) / iscale
    bsums = qs.reshape(-1, 16, 16).sum(axis=2).astype(np.int16).view(np.uint8)
    out = np.concatenate([d.reshape(-1, 1).view(np.uint8), qs.astype(np.int8).view(np.uint8),
                          bsums.reshape(-1, 32)], axis=1)
    return np.where(zero[:, None], 0, out)


K_QUANT = {"q2_k": quant_q2_k, "q3_k": quant_q3_k, "q4_k": quant_q4_k, "q5_k": quant_q5_k,
           "q6_k": quant_q6_k, "q8_k": quant_q8_k}


def quantize(gguf, x, name):
    """float32 [..., K] -> packed bytes of dtype `name` (bytes object)."""
    x = np.ascontiguousarray(x, F)
    if name in LEGACY:
        return gguf.quants.quantize(x, gguf_type(gguf, name)).tobytes()
    be, _ = BLOCKS[name]
    return K_QUANT[name](x.reshape(-1, be)).astype(np.uint8).tobytes()


def dequantize(gguf, data, name, shape):
    """packed bytes -> float32 array of `shape` (gguf's dequantizer; q8_k here)."""
    be, bs = BLOCKS[name]
    raw = np.frombuffer(data, np.uint8).reshape(-1, bs)
    if name == "q8_k":
        d = raw[:, :4].copy().view(F)
        out = d * raw[:, 4:260].view(np.int8).astype(F)
    else:
        out = gguf.quants.dequantize(raw, gguf_type(gguf, name))
    return np.asarray(out, F).reshape(shape)


def random_blocks(rng, name, nblocks, scale=1.0):
    """Random block bytes with finite scales: fp16 fields log-uniform in
    [1e-6, 1] * scale (fp16 subnormals included), a fifth negative; q8_k's
    f32 d uniform in +-0.02 * scale."""
    _, bs = BLOCKS[name]
    raw = rng.integers(0, 256, (nblocks, bs), dtype=np.uint8)
    for off in F16_FIELDS[name]:
        mag = np.exp(rng.uniform(np.log(1e-6), 0.0, nblocks)) * scale
        sign = np.where(rng.random(nblocks) < 0.2, -1.0, 1.0)
        raw[:, off:off + 2] = f16_bytes(mag * sign)
    if name == "q8_k":
        d = (rng.uniform(-0.02, 0.02, nblocks) * scale).astype(F)
        raw[:, :4] = d.view(np.uint8).reshape(-1, 4)
    return raw.tobytes()


# ---------------------------------------------------------------- helpers

def name_shape(shape):
    return "x".join(str(d) for d in shape) or "scalar"


def floats(rng, shape, dt, scale=1.0):
    """Random normal values stored in dt: (input tensor, float64 values as stored)."""
    a = rng.standard_normal(shape) * scale
    r = np.asarray(round_to(np.asarray(a, np.float32 if dt != "f64" else np.float64), dt),
                   np.float64)
    return T(r, dt), r


def row_shape(name, rows_shape, nblk):
    be, _ = BLOCKS[name]
    return list(rows_shape) + [be * nblk]


# ---------------------------------------------------------------- Dequantize

def dequantize_cases(suite, rng, gguf):
    for name in BLOCKS:
        for rows, nblk in (((), 1), ((3,), 2), ((2, 1), 3)):
            shape = row_shape(name, rows, nblk)
            nb = int(np.prod(shape)) // BLOCKS[name][0]
            data = random_blocks(rng, name, nb)
            g = Graph("dequantize")
            w = g.param("w", name, shape)
            g.outputs(g.op("Dequantize", [w], scheme=name))
            # bit-exact: both sides do ggml's float32 operations
            suite.add("dequantize_%s_%s" % (name, name_shape(shape)), g,
                      params={"w": T.raw(data, name, shape)},
                      expected=[dequantize(gguf, data, name, shape)], atol=0, rtol=0)


# ---------------------------------------------------------------- Quantize

def quant_input(rng, shape, kind):
    """float64 rows of several kinds: normal, uniform, one-signed, with zero
    and constant sub-blocks, heavy-tailed."""
    n = int(np.prod(shape))
    if kind == "normal":
        a = rng.standard_normal(n)
    elif kind == "uniform":
        a = rng.uniform(-1, 1, n)
    elif kind == "positive":
        a = rng.uniform(0, 2, n) + 0.01
    elif kind == "negative":
        a = -rng.uniform(0, 2, n)
    elif kind == "sparse":
        a = np.where((np.arange(n) // 16) % 3 == 0, 0.0, rng.standard_normal(n))
        a[(np.arange(n) // 32) % 5 == 1] = 0.5
    else:  # heavy tails
        a = rng.standard_normal(n) * np.exp(rng.standard_normal(n) * 1.5)
    return a.reshape(shape)


def quantize_cases(suite, rng, gguf):
    g = Graph("quantize_empty")
    g.outputs(g.op("Dequantize", [g.op("Quantize", [g.input("x", "f32", [0, 64])], scheme="q5_1")],
                   scheme="q5_1"))
    suite.add("roundtrip_q5_1_empty_0x64", g, inputs={"x": np.zeros((0, 64), np.float32)},
              expected=[np.zeros((0, 64), np.float32)])
    for name in BLOCKS:
        be, _ = BLOCKS[name]
        layouts = [("f32", (), 1, "normal"), ("f32", (3,), 2, "uniform"),
                   ("f32", (2, 1), 1, "sparse"), ("f16", (2,), 1, "positive"),
                   ("bf16", (1,), 2, "negative"), ("f64", (2,), 1, "heavy")]
        for dt, rows, nblk, kind in layouts:
            shape = row_shape(name, rows, nblk)
            a = quant_input(rng, shape, kind) * (0.05 if kind == "heavy" else 1.0)
            if kind == "sparse":
                a[..., :be] = 0.0  # an all-zero block
            x = np.asarray(round_to(np.asarray(a, np.float32 if dt != "f64" else np.float64), dt),
                           np.float64)
            x32 = x.astype(np.float32)  # the kernel quantizes the F32 values of x
            data = quantize(gguf, x32, name)
            tag = "%s_%s_%s_%s" % (name, dt, name_shape(shape), kind)

            g = Graph("quantize")
            xi = g.input("x", dt, shape)
            g.outputs(g.op("Quantize", [xi], scheme=name))
            suite.add("quantize_" + tag, g, inputs={"x": T(x, dt)},
                      expected=[T.raw(data, name, shape)])

            # round trip through gguf's dequantizer: exact
            g = Graph("quantize_roundtrip")
            xi = g.input("x", dt, shape)
            q = g.op("Quantize", [xi], scheme=name)
            g.outputs(g.op("Dequantize", [q], scheme=name))
            suite.add("roundtrip_" + tag, g, inputs={"x": T(x, dt)},
                      expected=[dequantize(gguf, data, name, shape)], atol=0, rtol=0)

        # a symbolic batch dim
        shape = row_shape(name, (3,), 1)
        x = rng.standard_normal(shape).astype(np.float32)
        g = Graph("quantize_sym")
        xi = g.input("x", "f32", ["S", shape[1]])
        g.outputs(g.op("Quantize", [xi], scheme=name))
        suite.add("quantize_%s_f32_Sx%d" % (name, shape[1]), g, inputs={"x": x},
                  expected=[T.raw(quantize(gguf, x, name), name, shape)])

        # round-trip error bound against the input itself
        shape = row_shape(name, (4,), 2)
        x = rng.standard_normal(shape).astype(np.float32)
        g = Graph("quantize_bound")
        xi = g.input("x", "f32", shape)
        g.outputs(g.op("Dequantize", [g.op("Quantize", [xi], scheme=name)], scheme=name))
        # the bound is per row; one atol for the tensor uses the largest row max
        suite.add("roundtrip_bound_" + name, g, inputs={"x": x}, expected=[x],
                  atol=BOUND[name] * float(np.abs(x).max()), rtol=0)


# ---------------------------------------------------------------- DequantMatMul
#
# The CPU kernel quantizes x on the fly to 8-bit blocks, as llama.cpp does
# (src/backend/cpu/qdot.h): ggml's q8_0 levels for the legacy types (gguf's
# quantizer makes them; the kernel keeps the scale amax/127 in float32 where
# ggml rounds it to fp16) and ggml's q8_K for the K types (quant_q8_k above,
# bit-exact). Each product is checked twice:
#   tight: against float64 xq @ W.T, xq the activations as quantized;
#     tolerance ACC_RTOL x max over outputs of sum_k |xq_k| (|W_k| + the
#     largest |W| of W_k's block), the magnitude of the float32 block sums
#     the kernel adds (its unsigned levels, offsets and mins are applied per
#     block): 35x the largest error seen over these cases (2.8e-8), and far
#     below the effect of one activation level one step off (asserted
#     while the cases are made).
#   bound: against the exact float64 x @ W.T, tolerance the a-priori bound
#     of the activation quantization: |x_k - xq_k| <= amax(x_k's block)/254.
# With RLX_QMATMUL_REF=1 (the CTest parity_quant_ref) the kernel is the
# unquantized float64 reference, and the tight check is against x @ W.T
# with the dtype's default tolerance.

ACC_RTOL = 1e-6
# F32 accumulation over K <= 203 products of F16/BF16 weights: the worst
# relative error seen over these cases times 10 or more
ACC_RTOL_16 = 2e-6
# rounding of the output to its dtype (f16: half an ulp of its subnormals too)
OUT_RTOL = {"f32": 0.0, "f64": 0.0, "f16": 1e-3, "bf16": 8e-3}
OUT_ATOL = {"f32": 0.0, "f64": 0.0, "f16": 2.0 ** -25, "bf16": 0.0}


def qmatmul_ref_mode():
    import os
    v = os.environ.get("RLX_QMATMUL_REF", "")
    return v not in ("", "0")


def act_quantize(gguf, x32, name):
    """float32 [..., K] -> float64 [..., K]: x as the kernel quantizes it."""
    be = BLOCKS[name][0]
    blocks = np.ascontiguousarray(x32, F).reshape(-1, be)
    finite = np.isfinite(blocks).all(axis=1)
    blocks = np.where(finite[:, None], blocks, F(0))
    if name in LEGACY:
        raw = np.frombuffer(gguf.quants.quantize(blocks, gguf_type(gguf, "q8_0")).tobytes(),
                            np.uint8).reshape(-1, 34)
        qs = raw[:, 2:].view(np.int8).astype(np.float64)
        d = (np.abs(blocks).max(axis=1, initial=0) / F(127)).astype(F).astype(np.float64)
    else:
        raw = quant_q8_k(blocks).astype(np.uint8)
        qs = raw[:, 4:260].view(np.int8).astype(np.float64)
        d = raw[:, :4].copy().view(F).reshape(-1).astype(np.float64)
    d = np.where(finite, d, np.nan)  # a block with a NaN or inf: NaN outputs
    return (d[:, None] * qs).reshape(x32.shape)


def block_abs_max(a, be):
    """[..., K] -> [..., K]: the largest |a| of each element's block."""
    m = np.abs(a).reshape(a.shape[:-1] + (-1, be)).max(axis=-1)
    return np.repeat(m, be, axis=-1)


def add_dequant_matmul(suite, gguf, tag, name, xt, xr, dt, data, n_out, K, xshape):
    """The tight and the bound case of one product (see above)."""
    be = BLOCKS[name][0]
    W = dequantize(gguf, data, name, (n_out, K)).astype(np.float64)
    X = np.asarray(xr, np.float64).reshape(-1, K)  # x as stored
    exact = X @ W.T
    # the kernel quantizes the F32 values of x (F64 rounded)
    xq = act_quantize(gguf, np.asarray(xr, F), name).reshape(-1, K)
    wmag = np.abs(W) + block_abs_max(W, be)
    with np.errstate(invalid="ignore"):
        acc_tol = ACC_RTOL * float(np.nanmax(np.abs(xq) @ wmag.T, initial=0.0))
        # per element: half a level, plus the rounding of F64 x to F32
        bound = float(np.nanmax((block_abs_max(X, be) * (1 / 254 + 2.0 ** -23)) @ np.abs(W).T,
                                initial=0.0))
    oshape = list(xshape[:-1]) + [n_out]
    g = Graph("dequant_matmul")
    xi = g.input("x", dt, ["S"] + list(xshape[1:]) if tag.startswith("S") else xshape)
    w = g.param("w", name, [n_out, K])
    g.outputs(g.op("DequantMatMul", [xi, w], scheme=name))
    params = {"w": T.raw(data, name, [n_out, K])}
    if qmatmul_ref_mode():
        suite.add("dequant_matmul_%s_%s_%s_n%d" % (name, dt, tag, n_out), g, inputs={"x": xt},
                  params=params, expected=[T(exact.reshape(oshape), dt)])
    else:
        # one activation level off anywhere must show
        step = np.abs(W).max() * np.abs(X).max() / 127 if X.size and W.size else 0.0
        assert acc_tol < 0.5 * step or step == 0.0 or np.isnan(step), (name, acc_tol, step)
        suite.add("dequant_matmul_%s_%s_%s_n%d" % (name, dt, tag, n_out), g, inputs={"x": xt},
                  params=params, expected=[T((xq @ W.T).reshape(oshape), dt)],
                  atol=acc_tol + OUT_ATOL[dt], rtol=OUT_RTOL[dt])
    suite.add("dequant_matmul_bound_%s_%s_%s_n%d" % (name, dt, tag, n_out), g, inputs={"x": xt},
              params=params, expected=[T(exact.reshape(oshape), dt)],
              atol=bound + acc_tol + OUT_ATOL[dt], rtol=OUT_RTOL[dt])


def dequant_matmul_cases(suite, rng, gguf):
    for name in BLOCKS:
        be, _ = BLOCKS[name]
        K = 2 * be
        for n_out in (5, 1):
            data = random_blocks(rng, name, n_out * 2, scale=0.1)
            for xshape in ([K], [3, K], [2, 3, K]):
                dts = ["f32"] if n_out == 1 else ["f32", "f16", "bf16", "f64"]
                for dt in dts:
                    if dt != "f32" and len(xshape) != 2:
                        continue
                    xt, xr = floats(rng, xshape, dt)
                    add_dequant_matmul(suite, gguf, name_shape(xshape), name, xt, xr, dt, data,
                                       n_out, K, xshape)
        # more blocks per row, and row counts around the kernel's tile of 4
        # activation rows (decode 1, prefill 5 and 9: full tiles + a rest)
        K = (16 if name in LEGACY else 3) * be
        n_out = 7
        data = random_blocks(rng, name, n_out * K // be, scale=0.1)
        for m in (1, 4, 5, 9):
            xt, xr = floats(rng, [m, K], "f32", scale=2.0)
            add_dequant_matmul(suite, gguf, "%dx%d" % (m, K), name, xt, xr, "f32", data, n_out, K,
                               [m, K])

    # a symbolic batch dim
    name, K = "q4_k", 256
    data = random_blocks(rng, name, 3, scale=0.1)
    xt, xr = floats(rng, [4, K], "f32")
    add_dequant_matmul(suite, gguf, "Sx256", name, xt, xr, "f32", data, 3, K, [4, K])

    # activation rows of zeros, of one value, with a NaN (its row is NaN)
    for name in ("q4_0", "q6_k"):
        be = BLOCKS[name][0]
        K = 2 * be
        data = random_blocks(rng, name, 3 * 2, scale=0.1)
        x = rng.standard_normal((4, K)).astype(np.float32)
        x[0] = 0.0
        x[1] = 0.75
        x[2, 5] = np.nan
        add_dequant_matmul(suite, gguf, "special_4x%d" % K, name, x, x.astype(np.float64), "f32",
                           data, 3, K, [4, K])

    # empty tensors (M = 0, N = 0, K = 0)
    for xshape, n_out, k in (([0, 32], 4, 32), ([2, 32], 0, 32), ([2, 0], 3, 0)):
        g = Graph("dequant_matmul_empty")
        xi = g.input("x", "f32", xshape)
        w = g.param("w", "q8_0", [n_out, k])
        g.outputs(g.op("DequantMatMul", [xi, w], scheme="q8_0"))
        suite.add("dequant_matmul_q8_0_empty_%s_n%d" % (name_shape(xshape), n_out), g,
                  inputs={"x": np.zeros(xshape, np.float32)},
                  params={"w": T.raw(bytes(n_out * k // 32 * 34), "q8_0", [n_out, k])},
                  expected=[np.zeros(xshape[:-1] + [n_out], np.float32)])


def sixteen_bit_dequant_matmul_cases(suite, rng):
    """DequantMatMul of F16/BF16 weights (dequantization is widening): the
    float64 product of x and w as stored. The kernels accumulate in float32
    (per weight row for up to 8 rows of x, the SGEMM beyond): tolerance
    ACC_RTOL_16 x max of |x| @ |w|^T, far below what one misread weight
    element (or a dropped tail of K) moves. K odd: full vectors, the single
    vectors and the scalar tail of the streamed kernel; N odd; M = 1, 3, 8
    (the streamed kernel's largest tile), 9 and 37 (the SGEMM), a batch."""
    for wt in ("f16", "bf16"):
        for K, n_out in ((75, 19), (203, 131), (5, 1)):
            W = np.asarray(round_to(rng.standard_normal((n_out, K)).astype(F) * 0.2, wt),
                           np.float64)
            for xshape, dt in (([1, K], "f32"), ([3, K], "f32"), ([8, K], "f32"),
                               ([9, K], "f32"), ([37, K], "f32"), ([2, 3, K], "f32"),
                               ([2, 19, K], "f32"), ([3, K], "f16"), ([37, K], "bf16"),
                               ([2, K], "f64"), ([37, K], "f64")):
                if K == 5 and xshape not in ([1, K], [37, K]):
                    continue
                xt, xr = floats(rng, xshape, dt)
                X = xr.reshape(-1, K)
                # the kernels read F64 x as F32
                Xk = np.asarray(X, F).astype(np.float64) if dt == "f64" else X
                tol = ACC_RTOL_16 * float((np.abs(Xk) @ np.abs(W).T).max())
                bound = 2.0 ** -24 * float((np.abs(X) @ np.abs(W).T).max()) if dt == "f64" else 0.0
                g = Graph("dequant_matmul_16")
                xi = g.input("x", dt, xshape)
                w = g.param("w", wt, [n_out, K])
                g.outputs(g.op("DequantMatMul", [xi, w], scheme=wt))
                suite.add("dequant_matmul_%s_%s_%s_n%d" % (wt, dt, name_shape(xshape), n_out), g,
                          inputs={"x": xt}, params={"w": T(W, wt)},
                          expected=[T((X @ W.T).reshape(xshape[:-1] + [n_out]), dt)],
                          atol=tol + bound + OUT_ATOL[dt], rtol=OUT_RTOL[dt])
        # K = 0 (x without data): zeros, on both paths (M = 2 and 9)
        for m in (2, 9):
            g = Graph("dequant_matmul_16_empty")
            xi = g.input("x", "f32", [m, 0])
            w = g.param("w", wt, [3, 0])
            g.outputs(g.op("DequantMatMul", [xi, w], scheme=wt))
            suite.add("dequant_matmul_%s_empty_%dx0_n3" % (wt, m), g,
                      inputs={"x": np.zeros((m, 0), F)}, params={"w": T(np.zeros((3, 0)), wt)},
                      expected=[np.zeros((m, 3), F)])


# ---------------------------------------------------------------- FakeQuantize

def ref_fake_quantize(x, s, z, bits, symmetric):
    """float64 reference: s, z broadcast against x (z integer-valued)."""
    if symmetric:
        qmin, qmax, z = -2.0 ** (bits - 1), 2.0 ** (bits - 1) - 1, 0.0 * z
    else:
        qmin, qmax = 0.0, 2.0 ** bits - 1
    q = np.clip(np.rint(x / s) + z, qmin, qmax)
    return (q - z) * s


def fake_quantize_cases(suite, rng):
    configs = [
        # x dtype, x shape, per-channel axis (None: per tensor), qparam shape, bits, symmetric,
        # scale dtype, zero-point dtype
        ("f32", [4, 5], None, [], 8, False, "f32", "i32"),
        ("f32", [7], None, [1], 4, True, "f32", "i64"),
        ("f32", [2, 3, 4], None, [], 2, False, "f32", "f32"),
        ("f32", [], None, [], 8, True, "f32", "i32"),
        ("f16", [3, 6], None, [1], 8, False, "f16", "i32"),
        ("bf16", [3, 6], None, [], 4, False, "f32", "i64"),
        ("f64", [5, 3], None, [], 16, False, "f64", "i64"),
        ("f32", [4, 5], 0, [4], 8, False, "f32", "i32"),
        ("f32", [4, 5], -1, [5], 4, True, "f32", "i32"),
        ("f32", [2, 3, 4], 1, [3], 3, False, "f32", "i64"),
        ("f16", [3, 1, 5], 2, [5], 8, True, "f16", "f16"),
        ("bf16", [2, 6], 1, [6], 6, False, "bf16", "i32"),
        ("f64", [6, 2], 0, [6], 16, True, "f64", "i64"),
        ("f32", [1, 4], 0, [1], 5, False, "f32", "f32"),
        ("f32", [3, 4], -2, [3], 2, True, "f32", "i64"),
    ]
    for xdt, xshape, axis, qshape, bits, sym, sdt, zdt in configs:
        xt, x = floats(rng, xshape, xdt, scale=3.0)
        levels = 2 ** bits - 1
        # scale: the range over ~80% of the levels, so some values clip
        s = rng.uniform(0.7, 1.0, qshape) * 6.0 / (0.8 * levels)
        s = np.asarray(round_to(np.asarray(s, np.float32 if sdt != "f64" else np.float64), sdt),
                       np.float64)
        if sym:  # ignored: the output must not depend on it
            z = rng.integers(-3, 4, qshape).astype(np.float64)
        else:
            z = rng.integers(0, levels + 1, qshape).astype(np.float64)
        if zdt in ("f32", "f16") and not sym:
            z = z + rng.uniform(-0.4, 0.4, qshape)  # a float zero point rounds to nearest
        zt = T(z, zdt) if zdt in ("f32", "f16") else T(z.astype(np.int64), zdt)
        zr = np.rint(np.asarray(round_to(np.asarray(z, np.float32), zdt), np.float64)) \
            if zdt in ("f32", "f16") else z
        if axis is None:
            sb, zb = s.reshape(()), zr.reshape(())
        else:
            ax = axis % len(xshape)
            bshape = [1] * len(xshape)
            bshape[ax] = xshape[ax]
            sb, zb = s.reshape(bshape), zr.reshape(bshape)
        g = Graph("fake_quantize")
        # a symbolic leading dim where the qparams do not depend on it
        symbolic = len(xshape) == 2 and axis in (None, -1) and xdt == "f32"
        xi = g.input("x", xdt, ["S"] + xshape[1:] if symbolic else xshape)
        si = g.input("scale", sdt, qshape)
        zi = g.input("zero_point", zdt, qshape)
        attrs = {"bits": bits, "symmetric": sym}
        if axis is not None:
            attrs["axis"] = axis
        g.outputs(g.op("FakeQuantize", [xi, si, zi], **attrs))
        mode = "tensor" if axis is None else "axis%d" % axis
        name = "fake_quantize_%s_%s%s_%s_b%d_%s_%s_%s" % (
            xdt, "S" if symbolic else "", name_shape(xshape), mode, bits,
            "sym" if sym else "asym", sdt, zdt)
        suite.add(name, g, inputs={"x": xt, "scale": T(s, sdt), "zero_point": zt},
                  expected=[T(ref_fake_quantize(x, sb, zb, bits, sym), xdt)])


# ---------------------------------------------------------------- errors

def error_cases(suite, rng):
    def add(name, build, err, inputs=None, params=None):
        g = Graph(name)
        g.outputs(build(g))
        suite.add("error_" + name, g, inputs=inputs, params=params, expect_error=err)

    zeros = np.zeros
    add("quantize_k_not_block_multiple",
        lambda g: g.op("Quantize", [g.input("x", "f32", [3, 48])], scheme="q4_0"),
        "RLX_ERR_SHAPE", {"x": zeros((3, 48), np.float32)})
    add("quantize_k_not_superblock_multiple",
        lambda g: g.op("Quantize", [g.input("x", "f32", [2, 128])], scheme="q4_k"),
        "RLX_ERR_SHAPE", {"x": zeros((2, 128), np.float32)})
    add("quantize_rank0",
        lambda g: g.op("Quantize", [g.input("x", "f32", [])], scheme="q8_0"),
        "RLX_ERR_SHAPE", {"x": zeros((), np.float32)})
    add("quantize_plain_scheme",
        lambda g: g.op("Quantize", [g.input("x", "f32", [32])], scheme="f16"),
        "RLX_ERR_INVALID", {"x": zeros(32, np.float32)})
    add("quantize_int_input",
        lambda g: g.op("Quantize", [g.input("x", "i32", [32])], scheme="q8_0"),
        "RLX_ERR_DTYPE", {"x": zeros(32, np.int32)})
    add("dequantize_plain_input",
        lambda g: g.op("Dequantize", [g.input("x", "f32", [32])], scheme="q8_0"),
        "RLX_ERR_DTYPE", {"x": zeros(32, np.float32)})
    add("dequantize_wrong_scheme",
        lambda g: g.op("Dequantize", [g.param("w", "q4_0", [2, 32])], scheme="q8_0"),
        "RLX_ERR_DTYPE", params={"w": T.raw(bytes(36), "q4_0", [2, 32])})
    add("dequant_matmul_w_not_block_multiple",
        lambda g: g.op("DequantMatMul", [g.input("x", "f32", [2, 48]),
                                          g.param("w", "q4_0", [5, 48])], scheme="q4_0"),
        "RLX_ERR_SHAPE", {"x": zeros((2, 48), np.float32)})
    add("dequant_matmul_k_mismatch",
        lambda g: g.op("DequantMatMul", [g.input("x", "f32", [2, 32]),
                                          g.param("w", "q8_0", [5, 64])], scheme="q8_0"),
        "RLX_ERR_SHAPE", {"x": zeros((2, 32), np.float32)},
        {"w": T.raw(bytes(5 * 68), "q8_0", [5, 64])})
    add("dequant_matmul_wrong_scheme",
        lambda g: g.op("DequantMatMul", [g.input("x", "f32", [2, 32]),
                                          g.param("w", "q8_0", [5, 32])], scheme="q4_0"),
        "RLX_ERR_DTYPE", {"x": zeros((2, 32), np.float32)},
        {"w": T.raw(bytes(5 * 34), "q8_0", [5, 32])})
    add("dequant_matmul_plain_w",
        lambda g: g.op("DequantMatMul", [g.input("x", "f32", [2, 32]),
                                          g.param("w", "f32", [5, 32])], scheme="f32"),
        "RLX_ERR_DTYPE", {"x": zeros((2, 32), np.float32)}, {"w": zeros((5, 32), np.float32)})
    add("dequant_matmul_int_x",
        lambda g: g.op("DequantMatMul", [g.input("x", "i32", [2, 32]),
                                          g.param("w", "q8_0", [5, 32])], scheme="q8_0"),
        "RLX_ERR_DTYPE", {"x": zeros((2, 32), np.int32)},
        {"w": T.raw(bytes(5 * 34), "q8_0", [5, 32])})
    add("dequant_matmul_w_rank3",
        lambda g: g.op("DequantMatMul", [g.input("x", "f32", [2, 32]),
                                          g.param("w", "q8_0", [1, 5, 32])], scheme="q8_0"),
        "RLX_ERR_SHAPE", {"x": zeros((2, 32), np.float32)},
        {"w": T.raw(bytes(5 * 34), "q8_0", [1, 5, 32])})
    add("dequant_matmul_x_rank0",
        lambda g: g.op("DequantMatMul", [g.input("x", "f32", []),
                                          g.param("w", "q8_0", [5, 32])], scheme="q8_0"),
        "RLX_ERR_SHAPE", {"x": zeros((), np.float32)},
        {"w": T.raw(bytes(5 * 34), "q8_0", [5, 32])})

    np_dt = {"f32": np.float32, "i32": np.int32, "bool": np.bool_, "u8": np.uint8}

    def fq(name, xshape, qshape, err, zdt="i32", xdt="f32", **attrs):
        add("fake_quantize_" + name,
            lambda g: g.op("FakeQuantize", [g.input("x", xdt, xshape), g.input("s", "f32", qshape),
                                            g.input("z", zdt, qshape)], **attrs),
            err, {"x": zeros(xshape, np_dt[xdt]), "s": np.ones(qshape, np.float32),
                  "z": zeros(qshape, np_dt[zdt])})

    fq("bits_1", [4], [], "RLX_ERR_INVALID", bits=1)
    fq("bits_17", [4], [], "RLX_ERR_INVALID", bits=17)
    fq("channel_length", [4, 5], [4], "RLX_ERR_SHAPE", axis=1)
    fq("axis_out_of_range", [4, 5], [4], "RLX_ERR_SHAPE", axis=2)
    fq("qparam_rank2", [4, 5], [4, 5], "RLX_ERR_SHAPE", axis=0)
    fq("per_channel_rank0_x", [], [3], "RLX_ERR_SHAPE", axis=0)
    fq("bool_zero_point", [4], [], "RLX_ERR_DTYPE", zdt="bool")
    fq("u8_zero_point", [4], [], "RLX_ERR_DTYPE", zdt="u8")
    fq("int_x", [4], [], "RLX_ERR_DTYPE", xdt="i32")


# ---------------------------------------------------------------- Attention over block K, V

def attention_kv_cases(suite, rng, gguf):
    """Attention with k and v of a block dtype (a quantized KV cache) under
    an f32 q: against the float64 attention over gguf's decoding of the same
    blocks. Shapes reach each path of the CPU kernel: queries against the
    transposed keys (prefill), key rows (decode, S = 1), and a custom mask
    (a KV pool: keys converted a block at a time); on CUDA the exact
    kernel (S = 9), the split-key one (S = 1, 4) and its form of a block
    per query (S = 12 under a custom mask: a batch over a KV pool)."""
    from cases_linalg import custom_mask, qkv_shapes, ref_attention
    B, H, Hkv, D, Tk = 2, 4, 2, 32, 70
    for name in ("q8_0", "q4_0"):
        for form, S, mask in (("rank3", 9, "causal"), ("bhsd", 1, "none"), ("bshd", 4, "custom"),
                              ("rank3", 1, "custom"), ("bshd", 12, "custom")):
            sq, sk = qkv_shapes(form, B, S, Tk, H, Hkv, D)
            layout = "bhsd" if form == "bhsd" else "bshd"
            g = Graph("attention_kv")
            ins = [g.input("q", "f32", sq), g.param("k", name, sk), g.param("v", name, sk)]
            inputs, cm = {"q": rng.standard_normal(sq).astype(F)}, None
            if mask == "custom":
                cm = custom_mask(rng, (B, 1, S, Tk), dead_rows=(0,) if S > 1 else ())
                ins.append(g.input("mask", "f32", cm.shape))
                inputs["mask"] = cm.astype(F)
            g.outputs(g.op("Attention", ins, num_heads=H, num_kv_heads=Hkv, head_dim=D, mask=mask, layout=layout))
            params, kv = {}, []
            for t in ("k", "v"):
                x = rng.standard_normal(sk).astype(F)
                data = gguf.quants.quantize(x.reshape(-1, D), gguf_type(gguf, name)).tobytes()
                params[t] = T.raw(data, name, sk)
                kv.append(dequantize(gguf, data, name, sk).astype(np.float64))
            ref = ref_attention(inputs["q"].astype(np.float64), kv[0], kv[1], H, Hkv, D, layout, mask, 0, 0.0, 0.0,
                                None if cm is None else cm.astype(np.float64))
            suite.add("attention_kv_%s_%s_%s_s%d" % (name, form, mask, S), g, inputs=inputs, params=params,
                      expected=[T(ref, "f32")])


def cases(suite, rng):
    gguf = _gguf()
    dequantize_cases(suite, rng, gguf)
    quantize_cases(suite, rng, gguf)
    dequant_matmul_cases(suite, rng, gguf)
    sixteen_bit_dequant_matmul_cases(suite, rng)
    fake_quantize_cases(suite, rng)
    error_cases(suite, rng)
    attention_kv_cases(suite, rng, gguf)
