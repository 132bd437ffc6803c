"""Every function of rlx.ops against NumPy: one case per op in CASES, and a
check that no op of rlx.ops is left without one."""
import math
import os
import sys

import numpy as np
import pytest

import rlx
from rlx import ops
from conftest import run_graph

R = np.random.default_rng(3)
A = R.standard_normal((3, 4)).astype(np.float32)
B = R.standard_normal((3, 4)).astype(np.float32)
P = (R.random((3, 4)) + 0.5).astype(np.float32)  # positive
ERF = np.vectorize(math.erf)


def _sig(x):
    return 1 / (1 + np.exp(-x))


ACT_REF = {
    "gelu": lambda x: 0.5 * x * (1 + ERF(x / np.sqrt(2))),
    "gelu_tanh": lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
    "silu": lambda x: x * _sig(x), "relu": lambda x: np.maximum(x, 0), "sigmoid": _sig, "tanh": np.tanh,
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "neg": np.negative,
    "abs": np.abs, "sin": np.sin, "cos": np.cos, "erf": ERF, "softplus": lambda x: np.log1p(np.exp(x)),
    "round": np.round, "sign": np.sign, "reciprocal": lambda x: 1 / x, "square": np.square,
}
POSITIVE = {"log", "sqrt", "rsqrt"}
CMP_REF = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
           "ge": np.greater_equal}
RED_REF = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod}
BIN_REF = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "pow": np.power,
           "max": np.maximum, "min": np.minimum, "mod": np.mod}


def two(g):
    return g.input("a", "f32", A.shape), g.input("b", "f32", B.shape)


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


CASES = {}


def case(name):
    def deco(fn):
        CASES[name] = fn
        return fn
    return deco


# Each case: build on g, return (output nodes, feeds, NumPy references[, tolerance]).
for _a, _ref in ACT_REF.items():
    def _act_case(g, a=_a, ref=_ref):
        x = P if a in POSITIVE else A
        n = g.input("x", "f32", x.shape)
        return [getattr(ops, a)(n), ops.activation(a, n)], {"x": x}, [ref(x), ref(x)], 2e-5
    CASES[_a] = _act_case
CASES["activation"] = CASES["relu"]
for _c, _ref in CMP_REF.items():
    def _cmp_case(g, c=_c, ref=_ref):
        a, b = two(g)
        bb = np.where(R.random(A.shape) < 0.3, A, B).astype(np.float32)
        return [getattr(ops, c)(a, b), ops.compare(c, a, b)], {"a": A, "b": bb}, [ref(A, bb), ref(A, bb)]
    CASES[_c] = _cmp_case
CASES["compare"] = CASES["lt"]
for _r, _ref in RED_REF.items():
    def _red_case(g, r=_r, ref=_ref):
        x = g.input("x", "f32", A.shape)
        return ([getattr(ops, "reduce_" + r)(x, [1]), ops.reduce(r, x, [0, 1], keep_dim=True)], {"x": A},
                [ref(A, axis=1), ref(A, axis=(0, 1), keepdims=True)], 1e-5)
    CASES["reduce_" + _r] = _red_case
CASES["reduce"] = CASES["reduce_sum"]
for _b, _ref in BIN_REF.items():
    def _bin_case(g, b=_b, ref=_ref):
        x, y = g.input("a", "f32", A.shape), g.input("b", "f32", (4,))
        lhs = P if b == "pow" else A
        rhs = B[0] if b != "mod" else P[0]
        return [getattr(ops, b)(x, y), ops.binary(b, x, y)], {"a": lhs, "b": rhs}, [ref(lhs, rhs)] * 2, 1e-5
    CASES[_b] = _bin_case
CASES["binary"] = CASES["add"]


@case("leaky_relu")
def _(g):
    x = g.input("x", "f32", A.shape)
    return [ops.leaky_relu(x, 0.2)], {"x": A}, [np.where(A > 0, A, 0.2 * A)]


@case("where")
def _(g):
    c, a, b = g.input("c", "bool", A.shape), *two(g)
    m = A > 0
    return [ops.where(c, a, b)], {"c": m, "a": A, "b": B}, [np.where(m, A, B)]


@case("cast")
def _(g):
    x = g.input("x", "f32", A.shape)
    return [ops.cast(x, "i32"), ops.cast(x, "f16")], {"x": A * 10}, [(A * 10).astype(np.int32),
                                                                    (A * 10).astype(np.float16)], 1e-3


@case("clamp")
def _(g):
    x = g.input("x", "f32", A.shape)
    return [ops.clamp(x, -0.5, 0.5)], {"x": A}, [np.clip(A, -0.5, 0.5)]


@case("reshape")
def _(g):
    x = g.input("x", "f32", A.shape)
    return [ops.reshape(x, (2, -1))], {"x": A}, [A.reshape(2, -1)]


@case("expand")
def _(g):
    x = g.input("x", "f32", (1, 4))
    return [ops.expand(x, (3, 4))], {"x": A[:1]}, [np.broadcast_to(A[:1], (3, 4))]


@case("transpose")
def _(g):
    x = g.input("x", "f32", A.shape)
    return [ops.transpose(x, (1, 0))], {"x": A}, [A.T]


@case("narrow")
def _(g):
    x = g.input("x", "f32", A.shape)
    return [ops.narrow(x, 1, 1, 2)], {"x": A}, [A[:, 1:3]]


@case("slice")
def _(g):
    x = g.input("x", "f32", A.shape)
    return [ops.slice(x, [0, -3], [3, 4], [2, 2])], {"x": A}, [A[0:3:2, -3:4:2]]


@case("concat")
def _(g):
    a, b = two(g)
    return [ops.concat([a, b], 1)], {"a": A, "b": B}, [np.concatenate([A, B], 1)]


@case("pad")
def _(g):
    x = g.input("x", "f32", A.shape)
    return [ops.pad(x, [1, 0], [0, 2], 9.0)], {"x": A}, [np.pad(A, [(1, 0), (0, 2)], constant_values=9)]


@case("gather")
def _(g):
    x, i = g.input("x", "f32", A.shape), g.input("i", "i64", (5,))
    idx = np.array([2, 0, 1, 2, 0])
    return [ops.gather(x, i, 0)], {"x": A, "i": idx}, [A[idx]]


@case("scatter_add")
def _(g):
    x, i, u = g.input("x", "f32", A.shape), g.input("i", "i64", (3,)), g.input("u", "f32", (3, 4))
    idx = np.array([2, 0, 2])
    ref = A.copy()
    np.add.at(ref, idx, B)
    return [ops.scatter_add(x, i, u, 0)], {"x": A, "i": idx, "u": B}, [ref]


@case("update_slice")
def _(g):
    x, u, s = g.input("x", "f32", A.shape), g.input("u", "f32", (3, 2)), g.input("s", "i64", ())
    ref = A.copy()
    ref[:, 1:3] = B[:, :2]
    return [ops.update_slice(x, u, s, 1)], {"x": A, "u": B[:, :2], "s": np.array(1)}, [ref]


@case("iota")
def _(g):
    return [ops.iota(g, "i64", (2, 3), 1)], {}, [np.broadcast_to(np.arange(3), (2, 3))]


@case("one_hot")
def _(g):
    i = g.input("i", "i64", (4,))
    idx = np.array([0, 3, 1, 1])
    return [ops.one_hot(i, 4)], {"i": idx}, [np.eye(4, dtype=np.float32)[idx]]


@case("tri")
def _(g):
    x = g.input("x", "f32", A.shape)
    return [ops.tri(x, upper=True, k=1), ops.tri(x)], {"x": A}, [np.triu(A, 1), np.tril(A)]


@case("stop_gradient")
def _(g):
    x = g.input("x", "f32", A.shape)
    return [ops.stop_gradient(x)], {"x": A}, [A]


@case("gradient_reversal")
def _(g):
    x = g.input("x", "f32", A.shape)
    return [ops.gradient_reversal(x, 0.5)], {"x": A}, [A]


@case("argmax")
def _(g):
    x = g.input("x", "f32", A.shape)
    return [ops.argmax(x, 1), ops.argmin(x, 0, keep_dim=True)], {"x": A}, [A.argmax(1), A.argmin(0)[None]]


CASES["argmin"] = CASES["argmax"]


@case("cumsum")
def _(g):
    x = g.input("x", "f32", A.shape)
    rev_excl = np.flip(np.cumsum(np.flip(A, 1), 1), 1) - A
    return [ops.cumsum(x, 1), ops.cumsum(x, 1, exclusive=True, reverse=True)], {"x": A}, \
        [np.cumsum(A, 1), rev_excl], 1e-5


@case("topk")
def _(g):
    x = g.input("x", "f32", A.shape)
    v, i = ops.topk(x, 2, -1)
    order = np.argsort(-A, 1)[:, :2]
    return [v, i], {"x": A}, [np.take_along_axis(A, order, 1), order]


@case("get_output")
def _(g):
    x = g.input("x", "f32", A.shape)
    v, _ = ops.topk(x, 1, -1)
    return [ops.get_output(v, 1)], {"x": A}, [A.argmax(1)[:, None]]


@case("softmax")
def _(g):
    x = g.input("x", "f32", A.shape)
    return [ops.softmax(x, 0), ops.log_softmax(x)], {"x": A}, [softmax(A, 0), np.log(softmax(A))], 1e-5


CASES["log_softmax"] = CASES["softmax"]


@case("all_reduce")
def _(g):
    # a session compiled without a communicator is a world of one rank
    x = g.input("x", "f32", A.shape)
    return [ops.all_reduce(ops.mul(x, x))], {"x": A}, [A * A]


def _ln(x, eps=1e-5):
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)


@case("layer_norm")
def _(g):
    x, gm, bt = g.input("x", "f32", A.shape), g.input("g", "f32", (4,)), g.input("b", "f32", (4,))
    return [ops.layer_norm(x, gm, bt, -1, 1e-5)], {"x": A, "g": P[0], "b": B[0]}, [_ln(A) * P[0] + B[0]], 1e-4


@case("rms_norm")
def _(g):
    x, gm, bt = g.input("x", "f32", A.shape), g.input("g", "f32", (4,)), g.input("b", "f32", (4,))
    ref = A / np.sqrt((A * A).mean(-1, keepdims=True) + 1e-6) * P[0] + B[0]
    return [ops.rms_norm(x, gm, bt)], {"x": A, "g": P[0], "b": B[0]}, [ref], 1e-4


@case("group_norm")
def _(g):
    X = R.standard_normal((2, 4, 3)).astype(np.float32)
    x, gm, bt = g.input("x", "f32", X.shape), g.input("g", "f32", (4,)), g.input("b", "f32", (4,))
    Xg = X.reshape(2, 2, -1)
    ref = ((Xg - Xg.mean(-1, keepdims=True)) / np.sqrt(Xg.var(-1, keepdims=True) + 1e-5)).reshape(X.shape)
    ref = ref * P[0][None, :, None] + B[0][None, :, None]
    return [ops.group_norm(x, gm, bt, 2)], {"x": X, "g": P[0], "b": B[0]}, [ref], 1e-4


@case("batch_norm")
def _(g):
    X = R.standard_normal((2, 4, 3)).astype(np.float32)
    x = g.input("x", "f32", X.shape)
    m, v, gm, bt = (g.input(n, "f32", (4,)) for n in "mvgb")
    c = (lambda a: a[None, :, None])
    ref = (X - c(B[0])) / np.sqrt(c(P[1]) + 1e-5) * c(P[0]) + c(A[0])
    return [ops.batch_norm(x, m, v, gm, bt)], {"x": X, "m": B[0], "v": P[1], "g": P[0], "b": A[0]}, [ref], 1e-4


@case("matmul")
def _(g):
    a, b = g.input("a", "f32", (2, 3, 4)), g.input("b", "f32", (4, 5))
    X, W = R.standard_normal((2, 3, 4)).astype(np.float32), R.standard_normal((4, 5)).astype(np.float32)
    return [ops.matmul(a, b)], {"a": X, "b": W}, [X @ W], 1e-4


@case("fused_matmul_bias_act")
def _(g):
    a, w, b = g.input("a", "f32", A.shape), g.input("w", "f32", (4, 5)), g.input("b", "f32", (5,))
    W, bias = R.standard_normal((4, 5)).astype(np.float32), R.standard_normal(5).astype(np.float32)
    return [ops.fused_matmul_bias_act(a, w, b, "relu")], {"a": A, "w": W, "b": bias}, \
        [np.maximum(A @ W + bias, 0)], 1e-4


@case("fused_residual_ln")
def _(g):
    x, r = two(g)
    gm, bt = g.input("g", "f32", (4,)), g.input("bt", "f32", (4,))
    return [ops.fused_residual_ln(x, r, None, gm, bt)], {"a": A, "b": B, "g": P[0], "bt": A[0]}, \
        [_ln(A + B) * P[0] + A[0]], 1e-4


@case("fused_residual_rms_norm")
def _(g):
    x, r = two(g)
    gm, bt = g.input("g", "f32", (4,)), g.input("bt", "f32", (4,))
    s = A + B
    ref = s / np.sqrt((s * s).mean(-1, keepdims=True) + 1e-6) * P[0] + A[0]
    return [ops.fused_residual_rms_norm(x, r, None, gm, bt)], {"a": A, "b": B, "g": P[0], "bt": A[0]}, [ref], 1e-4


@case("fused_swiglu")
def _(g):
    x = g.input("x", "f32", A.shape)
    return [ops.fused_swiglu(x)], {"x": A}, [A[:, :2] * _sig(A[:, :2]) * A[:, 2:]], 1e-5


@case("cross_entropy")
def _(g):
    x, t = g.input("x", "f32", A.shape), g.input("t", "i64", (3,))
    tgt = np.array([1, 3, 0])
    ref = -np.log(softmax(A))[np.arange(3), tgt].mean()
    return [ops.cross_entropy(x, t)], {"x": A, "t": tgt}, [ref], 1e-5


@case("mse_loss")
def _(g):
    a, b = two(g)
    return [ops.mse_loss(a, b)], {"a": A, "b": B}, [((A - B) ** 2).mean()], 1e-5


@case("resize_nearest2x")
def _(g):
    X = R.standard_normal((1, 2, 2, 3)).astype(np.float32)
    x = g.input("x", "f32", X.shape)
    ref = X.repeat(2, 2).repeat(2, 3)
    return [ops.resize_nearest2x(x), ops.resize(x, "nearest", 4, 6), ops.transform_region(x, ["resize_nearest_2x"])], \
        {"x": X}, [ref, ref, ref]


CASES["resize"] = CASES["transform_region"] = CASES["resize_nearest2x"]


@case("fft")
def _(g):
    X = R.standard_normal((2, 8)).astype(np.float32)
    x = g.input("x", "f32", X.shape)
    f = np.fft.rfft(X, axis=-1)
    return [ops.fft(x, real=True)], {"x": X}, [np.stack([f.real, f.imag], -1)], 1e-4


@case("conv")
def _(g):
    X, W = R.standard_normal((1, 2, 5, 5)).astype(np.float32), R.standard_normal((3, 2, 3, 3)).astype(np.float32)
    x, w = g.input("x", "f32", X.shape), g.input("w", "f32", W.shape)
    Xp = np.pad(X, [(0, 0), (0, 0), (1, 1), (1, 1)])
    ref = np.zeros((1, 3, 3, 3), np.float32)
    for i in range(3):
        for j in range(3):
            ref[0, :, i, j] = np.einsum("chw,ochw->o", Xp[0, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3], W)
    return [ops.conv(x, w, stride=2, padding=1)], {"x": X, "w": W}, [ref], 1e-4


@case("fused_conv")
def _(g):
    X, W = R.standard_normal((1, 2, 5, 5)).astype(np.float32), R.standard_normal((3, 2, 3, 3)).astype(np.float32)
    B, S = R.standard_normal(3).astype(np.float32), R.standard_normal((1, 3, 5, 5)).astype(np.float32)
    x, w = g.input("x", "f32", X.shape), g.input("w", "f32", W.shape)
    b, s = g.input("b", "f32", B.shape), g.input("s", "f32", S.shape)
    Xp = np.pad(X, [(0, 0), (0, 0), (1, 1), (1, 1)])
    ref = np.zeros((1, 3, 5, 5), np.float32)
    for i in range(5):
        for j in range(5):
            ref[0, :, i, j] = np.einsum("chw,ochw->o", Xp[0, :, i:i + 3, j:j + 3], W)
    ref = np.minimum(np.maximum(ref + B[:, None, None] + S, 0), 1.5)
    return [ops.fused_conv(x, w, b, s, act="relu", hi=1.5, padding=1)], {"x": X, "w": W, "b": B, "s": S}, [ref], 1e-4


@case("conv_transpose")
def _(g):
    X, W = R.standard_normal((1, 2, 3)).astype(np.float32), R.standard_normal((2, 1, 2)).astype(np.float32)
    x, w = g.input("x", "f32", X.shape), g.input("w", "f32", W.shape)
    ref = np.zeros((1, 1, 6), np.float32)  # stride 2, kernel 2: (3 - 1) * 2 + 2
    for i in range(3):
        for k in range(2):
            ref[0, 0, 2 * i + k] += (X[0, :, i] * W[:, 0, k]).sum()
    return [ops.conv_transpose(x, w, stride=2)], {"x": X, "w": W}, [ref], 1e-4


@case("pool")
def _(g):
    X = R.standard_normal((1, 1, 4, 4)).astype(np.float32)
    x = g.input("x", "f32", X.shape)
    blocks = X.reshape(1, 1, 2, 2, 2, 2).transpose(0, 1, 2, 4, 3, 5)
    return [ops.pool(x, "max", 2), ops.pool(x, "avg", 2)], {"x": X}, \
        [blocks.max((-1, -2)), blocks.mean((-1, -2))], 1e-5


@case("attention")
def _(g):
    S, H, D = 3, 2, 4
    Q, K, V = (R.standard_normal((1, S, H * D)).astype(np.float32) for _ in range(3))
    q, k, v = (g.input(n, "f32", Q.shape) for n in "qkv")
    def split(t):
        return t.reshape(S, H, D).transpose(1, 0, 2)
    s = split(Q) @ split(K).transpose(0, 2, 1) / np.sqrt(D)
    s = s + np.triu(np.full((S, S), -np.inf), 1)
    ref = (softmax(s) @ split(V)).transpose(1, 0, 2).reshape(1, S, H * D)
    return [ops.attention(q, k, v, num_heads=H, head_dim=D, mask_kind="causal")], {"q": Q, "k": K, "v": V}, [ref], 1e-4


def _rope_ref(X, pos, D, base=10000.0):
    half = D // 2
    inv = base ** (-np.arange(half) * 2.0 / D)
    ang = pos[:, None] * inv[None]
    c, s = np.cos(ang)[None, :, None], np.sin(ang)[None, :, None]
    x = X.reshape(1, len(pos), -1, D)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = x0 * c - x1 * s, x0 * s + x1 * c
    return out.reshape(X.shape), np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


@case("rope")
def _(g):
    X = R.standard_normal((1, 3, 8)).astype(np.float32)
    pos = np.array([0, 1, 5])
    ref, c, s = _rope_ref(X, pos, 4)
    x, p = g.input("x", "f32", X.shape), g.input("p", "i64", (3,))
    cn, sn = g.input("c", "f32", c.shape), g.input("s", "f32", s.shape)
    return [ops.rope(x, p, head_dim=4), ops.rope_cos_sin(x, cn, sn, head_dim=4)], \
        {"x": X, "p": pos, "c": c, "s": s}, [ref, ref], 1e-4


CASES["rope_cos_sin"] = CASES["rope"]


@case("quantize")
def _(g):
    X = R.standard_normal((2, 64)).astype(np.float32)
    x = g.input("x", "f32", X.shape)
    w = g.input("w", "f32", (3, 64))
    Wt = R.standard_normal((3, 64)).astype(np.float32)
    dq = ops.dequantize(ops.quantize(x, "q8_0"))
    ref = q8_0(X)
    return [dq, ops.dequantize(ops.quantize(w, "q8_0"))], {"x": X, "w": Wt}, [ref, q8_0(Wt)], 1e-6


def q8_0(W):
    """GGML's Q8_0 round trip: 32-element blocks scaled by their largest magnitude / 127."""
    blocks = W.reshape(W.shape[0], -1, 32)
    d = (np.abs(blocks).max(-1, keepdims=True) / np.float32(127)).astype(np.float32)
    q = np.round(blocks * (np.float32(1) / d))  # scaled by the f32 scale, stored with its f16
    return (q * d.astype(np.float16).astype(np.float32)).reshape(W.shape)


@case("dequant_matmul")
def _(g):
    X = R.standard_normal((2, 64)).astype(np.float32)
    Wt = R.standard_normal((3, 64)).astype(np.float32)
    x, w = g.input("x", "f32", X.shape), g.input("w", "f32", Wt.shape)
    # rlx rounds x to 8 bits too (as llama.cpp does): within 1% of the largest output.
    return [ops.dequant_matmul(x, ops.quantize(w, "q8_0"))], {"x": X, "w": Wt}, [X @ q8_0(Wt).T], 0.1


CASES["dequantize"] = CASES["quantize"]


@case("fake_quantize")
def _(g):
    x, sc, zp = g.input("x", "f32", A.shape), g.input("s", "f32", ()), g.input("z", "f32", ())
    ref = (np.clip(np.round(A / 0.1) + 0, -128, 127) - 0) * 0.1
    return [ops.fake_quantize(x, sc, zp, 8, symmetric=True)], {"x": A, "s": np.float32(0.1), "z": np.float32(0)}, \
        [ref], 1e-5


@case("elementwise_region")
def _(g):
    a, b = two(g)
    steps = [("bin", "mul", 0, 1), ("act", "relu", -1, 0)]
    return [ops.elementwise_region([a, b], steps)], {"a": A, "b": B}, [np.maximum(A * B, 0)], 1e-6


@case("sgd_step")
def _(g):
    p, gr, vel, lr = (g.input(n, "f32", s) for n, s in (("p", (4,)), ("g", (4,)), ("v", (4,)), ("lr", ())))
    new_p, new_v = ops.sgd_step(p, gr, vel, lr, momentum=0.9, weight_decay=0.1)
    gg = B[0] + 0.1 * A[0]
    v2 = 0.9 * P[0] + gg
    return [new_p, new_v], {"p": A[0], "g": B[0], "v": P[0], "lr": np.float32(0.5)}, [A[0] - 0.5 * v2, v2], 1e-5


@case("adamw_step")
def _(g):
    p, gr, m, lr, st = (g.input(n, "f32", s) for n, s in
                        (("p", (4,)), ("g", (4,)), ("m", (2, 4)), ("lr", ()), ("t", ())))
    new_p, new_m = ops.adamw_step(p, gr, m, lr, st, weight_decay=0.01)
    M = np.stack([B[1], P[1]])
    lrv, t = 0.1, 3.0
    m1 = 0.9 * M[0] + 0.1 * B[0]
    m2 = 0.999 * M[1] + 0.001 * B[0] ** 2
    pd = A[0] * (1 - lrv * 0.01)
    ref = pd - lrv * (m1 / (1 - 0.9 ** t)) / (np.sqrt(m2 / (1 - 0.999 ** t)) + 1e-8)
    return [new_p, new_m], {"p": A[0], "g": B[0], "m": M, "lr": np.float32(lrv), "t": np.float32(t)}, \
        [ref, np.stack([m1, m2])], 1e-5


@case("assign")
def _(g):
    p, x = g.param("p", "f32", (4,)), g.input("x", "f32", (4,))
    return [ops.assign(p, p + x), p * 1.0], {"x": B[0]}, [A[0] + B[0], A[0]]


@case("log_mel")
def _(g):
    # The reference of the C op-parity suite (librosa's Slaney filterbank written out in NumPy).
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "ref"))
    from cases_conv import ref_log_mel
    X = R.standard_normal((2, 400)).astype(np.float32)
    a = g.input("a", "f32", X.shape)
    ref = ref_log_mel(X.astype(np.float64), 64, 32, 10, 8000, 0.0, 4000.0)
    return [ops.log_mel(a, n_fft=64, hop=32, n_mels=10, sample_rate=8000, f_max=4000.0)], {"a": X}, [ref], 1e-3


@case("fused_attention_block")
def _(g):
    S, H, D = 3, 2, 4
    E = H * D
    X = R.standard_normal((1, S, E)).astype(np.float32)
    Ws = [(R.standard_normal((E, E)) * 0.3).astype(np.float32) for _ in range(4)]
    x = g.input("x", "f32", X.shape)
    ws = [g.input("w%d" % i, "f32", (E, E)) for i in range(4)]
    q, k, v = (X @ w for w in Ws[:3])
    def split(t):
        return t.reshape(S, H, D).transpose(1, 0, 2)
    s = split(q) @ split(k).transpose(0, 2, 1) / np.sqrt(D) + np.triu(np.full((S, S), -np.inf), 1)
    ref = (softmax(s) @ split(v)).transpose(1, 0, 2).reshape(1, S, E) @ Ws[3]
    feeds = {"x": X, **{"w%d" % i: w for i, w in enumerate(Ws)}}
    return [ops.fused_attention_block(x, *ws, num_heads=H, head_dim=D)], feeds, [ref], 1e-4


@pytest.mark.parametrize("name", sorted(CASES))
def test_op(name):
    g = rlx.Graph(name)
    built = CASES[name](g)
    outs, feeds, refs = built[:3]
    tol = built[3] if len(built) > 3 else 1e-6
    params = {"p": A[0]} if name == "assign" else None
    got = run_graph(g, outs, feeds, params)
    for out, y, ref in zip(outs, got, refs):
        ref = np.asarray(ref)
        assert y.shape == ref.shape, (name, out)
        if ref.dtype.kind in "biu":
            np.testing.assert_array_equal(y, ref)
        else:
            np.testing.assert_allclose(y.astype(np.float64), ref, rtol=tol, atol=tol, err_msg=name)


def test_every_builder_of_rlx_h_is_wrapped():
    import inspect
    import re
    header = os.path.join(os.path.dirname(__file__), "..", "..", "include", "rlx.h")
    with open(header) as f:
        builders = set(re.findall(r"^rlx_node\s+(rlx_\w+)\(rlx_graph \*g", f.read(), re.M))
    wrapped = {r[1] for r in ops.OPS} | set(re.findall(r'"(rlx_\w+)"', inspect.getsource(ops)))
    leaves = {"rlx_input", "rlx_param", "rlx_constant"}  # Graph.input, .param, .constant
    assert len(builders) > 60
    assert not builders - wrapped - leaves, sorted(builders - wrapped - leaves)


def test_every_op_has_a_case():
    missing = [n for n in ops.__all__ if n not in ("ENUMS", "enum") and n not in CASES]
    assert not missing, "rlx.ops without a NumPy case: %s" % missing
    for n in ops.__all__:
        assert getattr(ops, n).__doc__, n
