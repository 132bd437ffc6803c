"""Op-parity cases of the fused group: FusedMatMulBiasAct, FusedConv,
FusedResidualLN, FusedResidualRmsNorm, FusedSwiGLU, ElementwiseRegion, BatchElementwiseRegion,
TransformRegion, FusedAttentionBlock.

References are NumPy in float64 from the inputs as rounded to their dtype,
rounded once to the output dtype, except in elementwise regions, where each
step is rounded to its own dtype (as the kernels store it, like the chain of
unfused ops would). The scalar and attention references are the elementwise
and linalg groups' (imported), so a fused op is checked against the same
definition as the ops it replaces."""
import re

import numpy as np

from cases_conv import ref_conv
from cases_elementwise import ACT_REFS
from cases_linalg import ref_attention, ref_rope, rope_tables
from rlxcase import FLOAT_DTYPES, RLX_TO_NP, Graph, T, round_to


def rounded(v, dt):
    """Values as the kernels store dt from a double (cpu_set: through f32
    for f16/bf16), as float64 for floats and the dtype for the others."""
    if dt in FLOAT_DTYPES:
        v = np.asarray(v, np.float64)
        if dt in ("f16", "bf16"):
            v = v.astype(np.float32)
        return np.asarray(round_to(v, dt), np.float64)
    return np.asarray(v).astype(RLX_TO_NP[dt])


def rand(rng, shape, dt, scale=1.0):
    """(T for the case input, float64 values as stored in dt)."""
    v = rounded(rng.standard_normal(shape) * scale, dt)
    return T(v, dt), v


def act_ref(act, x, alpha=0.01):
    return x if act == "none" else ACT_REFS[act](x, alpha)


# ---------------------------------------------------------------- FusedMatMulBiasAct

def matmul_bias_act_cases(suite, rng):
    shapes = [((5, 7), 3), ((2, 3, 4, 6), 5), ((1, 1), 1), ((4,), 3), ((3, 1, 8), 2), ((6, 16), 9)]
    acts = ["gelu", "silu", "relu", "none", "leaky_relu", "gelu_tanh", "tanh", "sigmoid"]
    ci = 0
    for dt in FLOAT_DTYPES:
        for ashape, N in shapes:
            act = acts[ci % len(acts)]
            ci += 1
            K = ashape[-1]
            attrs = {"act": act}
            alpha = 0.01
            if act == "leaky_relu":
                alpha = attrs["alpha"] = 0.2
            name = "mba_%s_%s_%s" % (act, dt, "x".join(map(str, ashape)))
            g = Graph(name)
            a = g.input("a", dt, list(ashape))
            w = g.param("w", dt, [K, N])
            b = g.param("bias", dt, [N])
            g.outputs(g.op("FusedMatMulBiasAct", [a, w, b], **attrs))
            ta, av = rand(rng, ashape, dt)
            tw, wv = rand(rng, (K, N), dt, 1.0 / np.sqrt(K))
            tb, bv = rand(rng, (N,), dt)
            ref = act_ref(act, av @ wv + bv, alpha)
            suite.add(name, g, inputs={"a": ta}, params={"w": tw, "bias": tb}, expected=[T(ref, dt)])

    errs = [("k_mismatch", "f32", (3, 4), (5, 2), (2,), "RLX_ERR_SHAPE"),
            ("bias_len", "f32", (3, 4), (4, 2), (3,), "RLX_ERR_SHAPE"),
            ("w_rank3", "f32", (3, 4), (1, 4, 2), (2,), "RLX_ERR_SHAPE"),
            ("int_dtype", "i32", (3, 4), (4, 2), (2,), "RLX_ERR_DTYPE")]
    for tag, dt, sa, sw, sb, err in errs:
        g = Graph("mba_" + tag)
        a, w, b = g.input("a", dt, list(sa)), g.input("w", dt, list(sw)), g.input("b", dt, list(sb))
        g.outputs(g.op("FusedMatMulBiasAct", [a, w, b], act="relu"))
        suite.add("err_mba_" + tag, g, expect_error=err)
    g = Graph("mba_alpha")
    a, w, b = g.input("a", "f32", [3, 4]), g.input("w", "f32", [4, 2]), g.input("b", "f32", [2])
    g.outputs(g.op("FusedMatMulBiasAct", [a, w, b], act="leaky_relu", alpha=float("inf")))
    suite.add("err_mba_alpha_inf", g, expect_error="RLX_ERR_INVALID")
    g = Graph("mba_mixed")
    a, w, b = g.input("a", "f32", [3, 4]), g.input("w", "f16", [4, 2]), g.input("b", "f32", [2])
    g.outputs(g.op("FusedMatMulBiasAct", [a, w, b], act="none"))
    suite.add("err_mba_mixed_dtypes", g, expect_error="RLX_ERR_DTYPE")


# ---------------------------------------------------------------- FusedConv

def fused_conv_cases(suite, rng):
    """Each path of the CPU's conv with its epilogue: packed weights (1x1
    direct, im2col, blocks of columns, the GEMV shapes of one output
    channel or one position), depthwise, grouped and the conv of an input
    weight (epilogue after the conv), other dtypes; against NumPy."""
    inf = float("inf")
    # name, dtype, x, w, stride, pad, groups, act, lo, hi, residual, weight a param
    configs = [
        ("1x1_relu_res", "f32", [2, 8, 5, 6], [16, 8, 1, 1], [1, 1], [0, 0, 0, 0], 1, "relu", -inf, inf, True, True),
        ("3x3_s2_relu6", "f32", [1, 3, 9, 9], [8, 3, 3, 3], [2, 2], [1, 1, 1, 1], 1, "none", 0, 6, False, True),
        ("3x3_silu_clamp_res", "f32", [2, 5, 7, 6], [33, 5, 3, 3], [1, 1], [1, 0, 1, 2], 1, "silu", -0.5, 1.5,
         True, True),
        ("many_rows_res", "f32", [1, 96, 7, 9], [700, 96, 1, 1], [1, 1], [0, 0, 0, 0], 1, "relu", -inf, inf, True,
         True),
        ("col_blocks_res", "f32", [1, 32, 128, 130], [4, 32, 3, 3], [1, 1], [1, 1, 1, 1], 1, "relu", -inf, inf,
         True, True),
        ("one_position", "f32", [2, 16, 1, 1], [24, 16, 1, 1], [1, 1], [0, 0, 0, 0], 1, "sigmoid", -inf, 0.7,
         True, True),
        ("one_channel", "f32", [1, 16, 6, 5], [1, 16, 3, 3], [1, 1], [1, 1, 1, 1], 1, "tanh", -inf, inf, True, True),
        ("dw_s2_relu6", "f32", [2, 6, 9, 8], [6, 1, 3, 3], [2, 2], [1, 1, 1, 1], 6, "none", 0, 6, False, True),
        ("dw_res_silu", "f32", [1, 7, 10, 11], [7, 1, 3, 3], [1, 1], [1, 1, 1, 1], 7, "silu", -inf, inf, True, True),
        ("groups2_res", "f32", [2, 4, 6, 5], [6, 2, 3, 3], [1, 2], [1, 0, 1, 2], 2, "gelu", -1, 1, True, True),
        ("input_w_leaky", "f32", [1, 3, 7, 7], [4, 3, 3, 3], [1, 1], [1, 1, 1, 1], 1, "leaky_relu", -inf, inf,
         True, False),
        ("f16_res", "f16", [1, 4, 5, 5], [6, 4, 3, 3], [1, 1], [1, 1, 1, 1], 1, "relu", -inf, inf, True, True),
        ("bf16_relu6", "bf16", [1, 4, 5, 5], [4, 1, 3, 3], [1, 1], [1, 1, 1, 1], 4, "none", 0, 6, False, True),
        ("f64_res", "f64", [2, 3, 6, 4], [5, 3, 2, 2], [2, 1], [0, 1, 1, 0], 1, "tanh", -0.3, inf, True, True),
        # small planes, multiplied turned (positions as the GEMM's rows)
        ("turned_relu6", "f32", [2, 24, 7, 7], [40, 24, 3, 3], [1, 1], [1, 1, 1, 1], 1, "none", 0, 6, False, True),
        ("turned_1x1_res", "f32", [2, 64, 5, 3], [96, 64, 1, 1], [1, 1], [0, 0, 0, 0], 1, "relu", -inf, inf, True,
         True),
        ("turned_groups_res", "f32", [7, 8, 10, 10], [40, 8, 1, 1], [1, 1], [0, 0, 0, 0], 1, "sigmoid", -inf, inf,
         True, True),
        # 196 positions: a last tile of 4 columns under more rows (thin
        # tiles), one image and a batch, K over one block
        ("thin_tile_res", "f32", [1, 16, 14, 14], [40, 16, 3, 3], [1, 1], [1, 1, 1, 1], 1, "relu", -inf, 6, True,
         True),
        ("thin_tile_batch", "f32", [2, 16, 14, 14], [40, 16, 1, 1], [1, 1], [0, 0, 0, 0], 1, "silu", -inf, inf,
         True, True),
        ("thin_tile_wide_k", "f32", [1, 130, 14, 14], [30, 130, 3, 3], [1, 1], [1, 1, 1, 1], 1, "gelu", -inf, inf,
         False, True),
        # a batch's images as one product (their columns side by side):
        # planes that end inside a micro-panel, K over one block
        ("batch_im2col_res", "f32", [3, 6, 13, 14], [20, 6, 3, 3], [1, 1], [1, 1, 1, 1], 1, "relu", -inf, inf, True,
         True),
        ("batch_1x1_res", "f32", [3, 16, 12, 15], [40, 16, 1, 1], [1, 1], [0, 0, 0, 0], 1, "silu", -inf, inf, True,
         True),
        ("batch_wide_k", "f32", [2, 116, 12, 13], [300, 116, 3, 3], [1, 1], [1, 1, 1, 1], 1, "none", 0, 6, False,
         True),
    ]
    for name, dt, xs, ws, stride, pad, groups, act, lo, hi, res, w_param in configs:
        g = Graph("fc_" + name)
        x = g.input("x", dt, xs)
        w = (g.param if w_param else g.input)("w", dt, ws)
        b = g.param("b", dt, [ws[0]])
        xt, xv = rand(rng, xs, dt)
        wt, wv = rand(rng, ws, dt, 1.0 / np.sqrt(ws[1] * ws[2] * ws[3]))
        bt, bv = rand(rng, [ws[0]], dt)
        conv = ref_conv(xv, wv, bv, stride, pad, [1, 1], groups)
        ins, inputs = [x, w, b], {"x": xt}
        if res:
            ins.append(g.input("r", dt, list(conv.shape)))
            rt, rv = rand(rng, conv.shape, dt)
            inputs["r"] = rt
            conv = conv + rv
        attrs = dict(ndim=2, stride=stride, pad=pad, groups=groups, act=act, lo=lo, hi=hi)
        alpha = 0.01
        if act == "leaky_relu":
            alpha = attrs["alpha"] = 0.2
        g.outputs(g.op("FusedConv", ins, **attrs))
        ref = np.clip(act_ref(act, conv, alpha), lo, hi)
        params = {"b": bt}
        (params if w_param else inputs)["w"] = wt
        suite.add("fc_" + name + "_" + dt, g, inputs=inputs, params=params, expected=[T(ref, dt)])

    def err(tag, status, rshape, rdt="f32", **attrs):
        g = Graph("fc_" + tag)
        ins = [g.input("x", "f32", [1, 2, 4, 4]), g.input("w", "f32", [3, 2, 3, 3]), g.input("b", "f32", [3])]
        if rshape:
            ins.append(g.input("r", rdt, rshape))
        g.outputs(g.op("FusedConv", ins, ndim=2, **attrs))
        suite.add("err_fc_" + tag, g, expect_error=status)

    # graphs the conv pattern (fuse_conv.c) rewrites, checked fused and,
    # in the _nofuse run, unfused against the same NumPy values: ResNet's
    # relu(conv + shortcut conv), MobileNetV2's Clip(conv, 0, 6) and its
    # add without an activation, a conv without a bias, and chains it
    # must leave alone (the conv read twice, an activation before the add)
    xs, ws = [1, 8, 6, 5], [8, 8, 3, 3]
    patterns = ["relu_add_convs", "clip_dw", "add_only", "no_bias_sigmoid", "read_twice", "act_then_add"]
    for pat in patterns:
        g = Graph("fcp_" + pat)
        x = g.input("x", "f32", xs)
        xt, xv = rand(rng, xs, "f32")
        params, pv = {}, {}
        for k, shape in (("w1", ws), ("w2", [8, 1, 3, 3]), ("b1", [8]), ("b2", [8])):
            params[k], pv[k] = rand(rng, shape, "f32", 0.3)
        w1, w2 = g.param("w1", "f32", ws), g.param("w2", "f32", [8, 1, 3, 3])
        b1, b2 = g.param("b1", "f32", [8]), g.param("b2", "f32", [8])
        c3 = dict(ndim=2, stride=[1, 1], pad=[1, 1, 1, 1], groups=1)
        cdw = dict(c3, groups=8)
        y1 = g.op("Conv", [x, w1, b1], **c3)
        r1 = ref_conv(xv, pv["w1"], pv["b1"], [1, 1], [1, 1, 1, 1], [1, 1], 1)
        if pat == "relu_add_convs":
            y2 = g.op("Conv", [x, w2, b2], **cdw)
            r2 = ref_conv(xv, pv["w2"], pv["b2"], [1, 1], [1, 1, 1, 1], [1, 1], 8)
            outs, refs = [g.op("Activation", [g.op("Binary", [y1, y2], op="add")], act="relu")], [np.maximum(r1 + r2, 0)]
        elif pat == "clip_dw":
            y2 = g.op("Conv", [y1, w2, b2], **cdw)
            r2 = ref_conv(r1, pv["w2"], pv["b2"], [1, 1], [1, 1, 1, 1], [1, 1], 8)
            outs, refs = [g.op("Clamp", [y2], lo=0.0, hi=6.0)], [np.clip(r2, 0, 6)]
        elif pat == "add_only":
            outs, refs = [g.op("Binary", [x, y1], op="add")], [xv + r1]
        elif pat == "no_bias_sigmoid":
            y0 = g.op("Conv", [x, w1], **c3)
            r0 = ref_conv(xv, pv["w1"], None, [1, 1], [1, 1, 1, 1], [1, 1], 1)
            outs, refs = [g.op("Activation", [y0], act="sigmoid")], [1 / (1 + np.exp(-r0))]
        elif pat == "read_twice":
            outs = [g.op("Activation", [y1], act="relu"), y1]
            refs = [np.maximum(r1, 0), r1]
        else:
            outs = [g.op("Binary", [g.op("Activation", [y1], act="tanh"), x], op="add")]
            refs = [np.tanh(r1) + xv]
        g.outputs(*outs)
        suite.add("fcp_" + pat, g, inputs={"x": xt}, params=params, expected=[T(r, "f32") for r in refs])

    err("residual_shape", "RLX_ERR_SHAPE", [1, 3, 4, 4])
    err("residual_dtype", "RLX_ERR_DTYPE", [1, 3, 2, 2], "f16")
    err("lo_above_hi", "RLX_ERR_INVALID", None, lo=2.0, hi=1.0)
    err("act_alpha_inf", "RLX_ERR_INVALID", None, act="leaky_relu", alpha=inf)


# ---------------------------------------------------------------- FusedResidualLN / RmsNorm

def ref_layer_norm(z, gamma, beta, eps):
    mean = z.mean(axis=-1, keepdims=True)
    var = ((z - mean) ** 2).mean(axis=-1, keepdims=True)
    return (z - mean) / np.sqrt(var + eps) * gamma + beta


def ref_rms_norm(z, gamma, beta, eps):
    return z / np.sqrt((z * z).mean(axis=-1, keepdims=True) + eps) * gamma + beta


def residual_norm_cases(suite, rng):
    ops = [("FusedResidualLN", "ln", ref_layer_norm), ("FusedResidualRmsNorm", "rms", ref_rms_norm)]
    shapes = [(3, 8), (2, 3, 5), (1, 1), (7,), (4, 33)]
    ci = 0
    for op, tag, ref in ops:
        for dt in FLOAT_DTYPES:
            for shape in shapes:
                has_bias = ci % 2 == 0
                eps = 1e-5 if ci % 3 else 1e-3
                ci += 1
                L = shape[-1]
                name = "%s_%s_%s_%s" % (tag, dt, "x".join(map(str, shape)), "bias" if has_bias else "nobias")
                g = Graph(name)
                x, r = g.input("x", dt, list(shape)), g.input("res", dt, list(shape))
                ins = [x, r]
                if has_bias:
                    ins.append(g.param("bias", dt, [L]))
                ins += [g.param("gamma", dt, [L]), g.param("beta", dt, [L])]
                g.outputs(g.op(op, ins, has_bias=has_bias, eps=eps))
                tx, xv = rand(rng, shape, dt)
                tr, rv = rand(rng, shape, dt)
                tbias, biasv = rand(rng, (L,), dt)
                tg, gv = rand(rng, (L,), dt)
                tbeta, betav = rand(rng, (L,), dt)
                z = xv + rv + (biasv if has_bias else 0.0)
                params = {"gamma": tg, "beta": tbeta}
                if has_bias:
                    params["bias"] = tbias
                suite.add(name, g, inputs={"x": tx, "res": tr}, params=params,
                          expected=[T(ref(z, gv, betav, eps), dt)])

    def err_graph(name, op, shapes, dts, **attrs):
        g = Graph(name)
        ins = [g.input("in%d" % i, dt, list(s)) for i, (s, dt) in enumerate(zip(shapes, dts))]
        g.outputs(g.op(op, ins, **attrs))
        return g

    for op, tag, _ in ops:
        f4 = ["f32"] * 4
        suite.add("err_%s_has_bias_without_bias" % tag,
                  err_graph("e", op, [(2, 4), (2, 4), (4,), (4,)], f4, has_bias=True),
                  expect_error="RLX_ERR_INVALID")
        suite.add("err_%s_bias_without_has_bias" % tag,
                  err_graph("e", op, [(2, 4), (2, 4), (4,), (4,), (4,)], f4 + ["f32"], has_bias=False),
                  expect_error="RLX_ERR_INVALID")
        suite.add("err_%s_res_shape" % tag,
                  err_graph("e", op, [(2, 4), (1, 4), (4,), (4,)], f4), expect_error="RLX_ERR_SHAPE")
        suite.add("err_%s_gamma_len" % tag,
                  err_graph("e", op, [(2, 4), (2, 4), (3,), (4,)], f4), expect_error="RLX_ERR_SHAPE")
        suite.add("err_%s_dtype" % tag,
                  err_graph("e", op, [(2, 4), (2, 4), (4,), (4,)], ["f32", "f16", "f32", "f32"]),
                  expect_error="RLX_ERR_DTYPE")
        suite.add("err_%s_eps" % tag,
                  err_graph("e", op, [(2, 4), (2, 4), (4,), (4,)], f4, eps=-1.0),
                  expect_error="RLX_ERR_INVALID")


# ---------------------------------------------------------------- FusedSwiGLU

def swiglu_cases(suite, rng):
    shapes = [(4, 6), (2, 3, 10), (2,), (1, 1, 2), (3, 66)]
    casts = ["none", "f32", "f16", "bf16", "f64"]
    ci = 0
    for dt in FLOAT_DTYPES:
        for shape in shapes:
            cast = casts[ci % len(casts)]
            ci += 1
            out_dt = dt if cast == "none" else cast
            name = "swiglu_%s_%s_to_%s" % (dt, "x".join(map(str, shape)), cast)
            g = Graph(name)
            x = g.input("x", dt, list(shape))
            g.outputs(g.op("FusedSwiGLU", [x], cast_to=cast))
            tx, xv = rand(rng, shape, dt, 2.0)
            h = shape[-1] // 2
            ref = ACT_REFS["silu"](xv[..., :h], 0) * xv[..., h:]
            suite.add(name, g, inputs={"x": tx}, expected=[T(ref, out_dt)])
    for tag, dt, shape, cast, err in [("odd", "f32", (3, 5), "none", "RLX_ERR_SHAPE"),
                                      ("rank0", "f32", (), "none", "RLX_ERR_SHAPE"),
                                      ("cast_int", "f32", (3, 4), "i32", "RLX_ERR_DTYPE"),
                                      ("int_x", "i32", (3, 4), "none", "RLX_ERR_DTYPE")]:
        g = Graph("swiglu_" + tag)
        x = g.input("x", dt, list(shape))
        g.outputs(g.op("FusedSwiGLU", [x], cast_to=cast))
        suite.add("err_swiglu_" + tag, g, expect_error=err)


# ---------------------------------------------------------------- elementwise chains

STEP_RE = re.compile(r"^(act|bin|cast|cmp)\.(\w+)\(([is]\d+)(?:,([is]\d+))?(?:; ([-+.\deE]+))?\)$")

INT_ACT_REFS = {"neg": np.negative, "abs": np.abs, "sign": np.sign, "square": np.square,
                "relu": lambda x: np.maximum(x, 0)}
BIN_F_REFS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
              "pow": np.power, "max": np.maximum, "min": np.minimum, "mod": np.mod}
BIN_I_REFS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum,
              "min": np.minimum}
CMP_REFS = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
            "gt": np.greater, "ge": np.greater_equal}


def ref_chain(steps, ins):
    """Evaluates a chain (text form steps) over ins, a list of (values, dtype):
    every step's value is stored in its dtype, as the kernel does."""
    vals = []

    def operand(s):
        return ins[int(s[1:])] if s[0] == "i" else vals[int(s[1:])]

    for st in steps:
        m = STEP_RE.match(st)
        assert m, st
        kind, op, a, b, alpha = m.groups()
        x, dt = operand(a)
        y = operand(b)[0] if b else None
        if kind == "act":
            if dt in FLOAT_DTYPES:
                r = rounded(ACT_REFS[op](x, float(alpha) if alpha else 0.01), dt)
            else:  # integer acts in int64, wrapped to the dtype
                r = INT_ACT_REFS[op](x.astype(np.int64)).astype(RLX_TO_NP[dt])
            out_dt = dt
        elif kind == "bin":
            if dt in FLOAT_DTYPES:
                r = rounded(BIN_F_REFS[op](x, y), dt)
            elif dt == "bool":
                r = (x | y) if op == "max" else (x & y)
            else:
                r = BIN_I_REFS[op](x.astype(np.int64), y.astype(np.int64)).astype(RLX_TO_NP[dt])
            out_dt = dt
        elif kind == "cmp":
            r, out_dt = CMP_REFS[op](x, y), "bool"
        else:
            out_dt = op
            if out_dt == "bool":
                r = x != 0
            elif out_dt in FLOAT_DTYPES:
                r = rounded(x.astype(np.float64), out_dt)
            elif dt in FLOAT_DTYPES:  # truncation toward zero (values kept in range)
                r = np.trunc(x).astype(np.int64).astype(RLX_TO_NP[out_dt])
            else:  # integer to integer wraps
                r = x.astype(np.int64).astype(RLX_TO_NP[out_dt])
        vals.append((np.asarray(r), out_dt))
    return vals[-1]


def upsample2x(v):
    return np.repeat(np.repeat(v, 2, axis=2), 2, axis=3)


def rand_any(rng, dt, shape, lo=-3, hi=3):
    """Values of any plain dtype: floats normal (scaled by hi/2), integers in
    [lo, hi], bools fair."""
    if dt == "bool":
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if dt in FLOAT_DTYPES:
        return rounded(rng.standard_normal(shape) * (hi / 2.0), dt)
    return rng.integers(lo, hi, size=shape, endpoint=True).astype(RLX_TO_NP[dt])


def tin(v, dt):
    return T(v, dt) if dt in FLOAT_DTYPES else np.asarray(v).astype(RLX_TO_NP[dt])


def chain_attr(steps):
    return list(steps)  # rlxcase prints a list of strings as [s0, s1, ...]


def region_cases(suite, rng):
    # (tag, dtypes, shapes, steps, prologue, value range per input)
    cases = []
    for dt in FLOAT_DTYPES:
        cases.append(("bcast_gelu_leaky_" + dt, [dt, dt], [(3, 1, 5), (4, 1)],
                      ["bin.add(i0,i1)", "act.gelu(s0)", "act.leaky_relu(s1; 0.2)", "bin.mul(s2,i1)"],
                      "none", None))
        cases.append(("three_inputs_" + dt, [dt, dt, dt], [(2, 1, 3), (1, 4, 1), (3,)],
                      ["bin.mul(i0,i1)", "act.sigmoid(s0)", "bin.sub(s1,i2)", "act.tanh(s2)",
                       "bin.max(s3,i0)"], "none", None))
        cases.append(("prologue_" + dt, [dt, dt], [(2, 3, 2, 3), (3, 1, 1)],
                      ["bin.add(i0,i1)", "act.relu(s0)"], "resize_nearest_2x", None))
    cases += [
        # The text form's example: the output is a compare of an input with s0;
        # the steps after s0 are dead.
        ("cmp_dead_steps_bool", ["f32", "f32"], [(2, 5), (5,)],
         ["bin.add(i0,i1)", "act.gelu(s0)", "act.leaky_relu(s1; 0.2)", "cast.f16(s2)", "cmp.lt(i0,s0)"],
         "none", None),
        ("cast_steps_cmp_bool", ["f32", "f32"], [(4, 3), (4, 1)],
         ["bin.sub(i0,i1)", "act.tanh(s0)", "cast.f16(s1)", "cast.f32(s2)", "cmp.lt(s3,i0)"],
         "none", None),
        ("cast_to_f16_out", ["f32", "f32"], [(3, 4), (1, 4)],
         ["bin.mul(i0,i1)", "act.sigmoid(s0)", "cast.f16(s1)"], "none", None),
        ("cast_to_bf16_out_from_f64", ["f64", "f64"], [(5,), (2, 5)],
         ["bin.add(i0,i1)", "act.exp(s0)", "cast.bf16(s1)"], "none", None),
        ("f16_to_f32_chain", ["f16", "f32"], [(2, 3), (3,)],
         ["cast.f32(i0)", "bin.mul(s0,i1)", "act.gelu_tanh(s1)"], "none", None),
        ("i32_mul_add_wrap", ["i32", "i32", "i32"], [(3, 4), (4,), (3, 1)],
         ["bin.mul(i0,i1)", "bin.add(s0,i2)", "bin.max(s1,i0)"], "none", (-100000, 100000)),
        ("i64_sub_abs_square", ["i64", "i64"], [(6,), (2, 1)],
         ["bin.sub(i0,i1)", "act.abs(s0)", "bin.mul(s1,s1)", "act.neg(s2)"], "none", (-1000, 1000)),
        ("i8_add_wrap", ["i8", "i8"], [(4, 4), (4, 4)], ["bin.add(i0,i1)", "act.relu(s0)"], "none",
         (-128, 127)),
        ("u8_sub_wrap_to_i32", ["u8", "u8"], [(7,), (7,)],
         ["bin.sub(i0,i1)", "cast.i32(s0)", "bin.min(s1,s1)"], "none", (0, 255)),
        ("i32_to_f32_div", ["i32", "f32"], [(3, 2), (2,)], ["cast.f32(i0)", "bin.div(s0,i1)"], "none",
         (-50, 50)),
        ("f32_to_i32_trunc", ["f32", "f32"], [(4, 3), (3,)],
         ["bin.mul(i0,i1)", "cast.i32(s0)", "bin.mul(s1,s1)"], "none", (-20, 20)),
        ("f32_to_bool_to_f32", ["f32", "f32"], [(5, 2), (2,)],
         ["act.relu(i0)", "cast.bool(s0)", "cast.f32(s1)", "bin.mul(s2,i1)"], "none", None),
        ("bool_or_and", ["f32", "f32", "f32"], [(3, 4), (4,), (3, 1)],
         ["cmp.gt(i0,i1)", "cmp.lt(i0,i2)", "bin.max(s0,s1)", "cmp.ge(i1,i2)", "bin.min(s2,s3)"],
         "none", None),
        ("i32_cmp_eq", ["i32", "i32"], [(5, 5), (5,)], ["cmp.eq(i0,i1)"], "none", (-2, 2)),
        ("same_input_twice", ["f64"], [(3, 3)], ["bin.mul(i0,i0)", "bin.sub(s0,i0)"], "none", None),
        ("rank0_scalar", ["f32", "f32"], [(), (2, 3)], ["bin.div(i1,i0)", "act.square(s0)"], "none",
         None),
        ("rank0_only", ["f32"], [()], ["act.silu(i0)"], "none", None),
        ("unused_input", ["f32", "i32", "f32"], [(2, 2), (9, 9), (2,)], ["bin.add(i0,i2)"], "none",
         None),
        ("zero_size", ["f32", "f32"], [(0, 3), (3,)], ["bin.add(i0,i1)", "act.exp(s0)"], "none", None),
        ("prologue_i32", ["i32", "i32"], [(1, 2, 3, 2), (2, 6, 1)],
         ["bin.mul(i0,i1)", "act.neg(s0)"], "resize_nearest_2x", (-9, 9)),
        ("prologue_bcast_other_way", ["f32", "f32"], [(1, 1, 2, 2), (2, 3, 4, 4)],
         ["bin.sub(i1,i0)", "act.abs(s0)"], "resize_nearest_2x", None),
        ("prologue_many_steps", ["bf16", "bf16", "bf16"], [(2, 2, 1, 3), (2, 2, 2, 6), (1,)],
         ["bin.mul(i0,i1)", "bin.add(s0,i2)", "act.silu(s1)", "cmp.gt(s2,i0)"],
         "resize_nearest_2x", None),
    ]
    for tag, dts, shapes, steps, prologue, vrange in cases:
        name = "region_" + tag
        g = Graph(name)
        nodes = [g.input("x%d" % i, dt, list(s)) for i, (dt, s) in enumerate(zip(dts, shapes))]
        g.outputs(g.op("ElementwiseRegion", nodes, chain=chain_attr(steps), prologue=prologue))
        lo, hi = vrange if vrange else (-3, 3)
        vals = [rand_any(rng, dt, s, lo, hi) for dt, s in zip(dts, shapes)]
        if tag == "rank0_scalar":  # a divisor away from zero
            vals[0] = rounded(np.float64(1.5), "f32")
        ins = [(upsample2x(v) if i == 0 and prologue != "none" else v, dt)
               for i, (v, dt) in enumerate(zip(vals, dts))]
        r, out_dt = ref_chain(steps, ins)
        suite.add(name, g, inputs={"x%d" % i: tin(v, dt) for i, (v, dt) in enumerate(zip(vals, dts))},
                  expected=[tin(r, out_dt)])

    # Errors: (tag, dtypes, shapes, steps, prologue, status)
    errs = [
        ("ref_out_of_range", ["f32", "f32"], [(2,), (2,)], ["bin.add(i0,i2)"], "none", "RLX_ERR_INVALID"),
        ("forward_ref", ["f32"], [(2,)], ["act.gelu(s0)"], "none", "RLX_ERR_INVALID"),
        ("later_ref", ["f32"], [(2,)], ["act.gelu(i0)", "bin.add(s0,s2)", "act.relu(s1)"], "none",
         "RLX_ERR_INVALID"),
        ("empty_chain", ["f32"], [(2,)], [], "none", "RLX_ERR_INVALID"),
        ("dtype_mismatch", ["f32", "f16"], [(2,), (2,)], ["bin.add(i0,i1)"], "none", "RLX_ERR_DTYPE"),
        ("step_dtype_mismatch", ["f32", "f32"], [(2,), (2,)], ["cast.f16(i0)", "bin.add(s0,i1)"], "none",
         "RLX_ERR_DTYPE"),
        ("gelu_on_int", ["i32"], [(2,)], ["act.gelu(i0)"], "none", "RLX_ERR_DTYPE"),
        ("add_on_bool", ["f32", "f32"], [(2,), (2,)], ["cmp.lt(i0,i1)", "bin.add(s0,s0)"], "none",
         "RLX_ERR_DTYPE"),
        ("no_broadcast", ["f32", "f32"], [(3,), (4,)], ["bin.mul(i0,i1)"], "none", "RLX_ERR_SHAPE"),
        ("act_none", ["f32"], [(2,)], ["act.none(i0)"], "none", "RLX_ERR_INVALID"),
        ("prologue_rank2", ["f32", "f32"], [(2, 3), (3,)], ["bin.add(i0,i1)"], "resize_nearest_2x",
         "RLX_ERR_SHAPE"),
        ("prologue_shape_mismatch", ["f32", "f32"], [(1, 1, 2, 3), (1, 1, 2, 3)], ["bin.add(i0,i1)"],
         "resize_nearest_2x", "RLX_ERR_SHAPE"),
    ]
    for tag, dts, shapes, steps, prologue, err in errs:
        g = Graph("region_" + tag)
        nodes = [g.input("x%d" % i, dt, list(s)) for i, (dt, s) in enumerate(zip(dts, shapes))]
        g.outputs(g.op("ElementwiseRegion", nodes, chain=chain_attr(steps), prologue=prologue))
        suite.add("err_region_" + tag, g, expect_error=err)


def batch_region_cases(suite, rng):
    # (tag, batch (dtype, shape) list, shared list, steps, prologue, value range)
    cases = [
        ("three_batch_one_shared_f32", [("f32", (2, 3)), ("f32", (1, 3)), ("f32", (4, 3))],
         [("f32", (3,))], ["bin.mul(i0,i1)", "act.tanh(s0)"], "none", None),
        ("two_batch_two_shared_f16", [("f16", (2, 2, 4)), ("f16", (3, 2, 4))],
         [("f16", (2, 1)), ("f16", (4,))], ["bin.add(i0,i1)", "bin.mul(s0,i2)", "act.gelu(s1)"],
         "none", None),
        ("bf16_cmp_bool", [("bf16", (1, 5)), ("bf16", (2, 5))], [("bf16", (5,))],
         ["act.silu(i0)", "cmp.gt(s0,i1)"], "none", None),
        ("f64_no_shared", [("f64", (2, 2)), ("f64", (1, 2)), ("f64", (3, 2))], [],
         ["act.neg(i0)", "act.exp(s0)"], "none", None),
        ("prologue_f32", [("f32", (1, 2, 2, 3)), ("f32", (2, 2, 2, 3))], [("f32", (6,))],
         ["bin.sub(i0,i1)", "act.relu(s0)"], "resize_nearest_2x", None),
        ("prologue_f16_three", [("f16", (1, 1, 1, 2)), ("f16", (2, 1, 1, 2)), ("f16", (1, 1, 1, 2))],
         [("f16", (1, 1, 2, 1))], ["bin.mul(i0,i1)", "act.sigmoid(s0)"], "resize_nearest_2x", None),
        ("i32_wrap", [("i32", (2, 3)), ("i32", (1, 3))], [("i32", (3,)), ("i32", (1,))],
         ["bin.mul(i0,i1)", "bin.sub(s0,i2)"], "none", (-100000, 100000)),
        ("rows_from_shared", [("f32", (1, 3)), ("f32", (1, 3))], [("f32", (2, 1))],
         ["bin.add(i0,i1)"], "none", None),
        ("mixed_batch_dtypes", [("f16", (2, 3)), ("f32", (1, 3))], [("f32", (3,))],
         ["cast.f32(i0)", "bin.add(s0,i1)"], "none", None),
    ]
    for tag, batch, shared, steps, prologue, vrange in cases:
        name = "batch_region_" + tag
        g = Graph(name)
        specs = batch + shared
        nodes = [g.input("x%d" % i, dt, list(s)) for i, (dt, s) in enumerate(specs)]
        g.outputs(g.op("BatchElementwiseRegion", nodes, chain=chain_attr(steps),
                       num_batch_inputs=len(batch), prologue=prologue))
        lo, hi = vrange if vrange else (-3, 3)
        vals = [rand_any(rng, dt, s, lo, hi) for dt, s in specs]
        shared_ins = [(vals[len(batch) + i], dt) for i, (dt, _) in enumerate(shared)]
        parts = []
        for b, (dt, _) in enumerate(batch):
            v = upsample2x(vals[b]) if prologue != "none" else vals[b]
            r, out_dt = ref_chain(steps, [(v, dt)] + shared_ins)
            parts.append(r)
        ref = np.concatenate(parts, axis=0)
        suite.add(name, g, inputs={"x%d" % i: tin(v, dt) for i, (v, (dt, _)) in enumerate(zip(vals, specs))},
                  expected=[tin(ref, out_dt)])

    errs = [
        ("nb_zero", [("f32", (2,)), ("f32", (2,))], 0, ["bin.add(i0,i1)"], "RLX_ERR_INVALID"),
        ("nb_too_many", [("f32", (2,)), ("f32", (2,))], 3, ["act.relu(i0)"], "RLX_ERR_INVALID"),
        ("trailing_dims_differ", [("f32", (2, 3)), ("f32", (2, 4))], 2, ["act.relu(i0)"], "RLX_ERR_SHAPE"),
        ("dtypes_differ", [("f32", (2, 3)), ("f16", (2, 3))], 2, ["act.relu(i0)"], "RLX_ERR_DTYPE"),
        ("rank0_result", [("f32", ()), ("f32", ())], 2, ["act.relu(i0)"], "RLX_ERR_SHAPE"),
        ("bad_ref", [("f32", (2,)), ("f32", (2,))], 2, ["bin.add(i0,i1)"], "RLX_ERR_INVALID"),
    ]
    for tag, specs, nb, steps, err in errs:
        g = Graph("batch_region_" + tag)
        nodes = [g.input("x%d" % i, dt, list(s)) for i, (dt, s) in enumerate(specs)]
        g.outputs(g.op("BatchElementwiseRegion", nodes, chain=chain_attr(steps), num_batch_inputs=nb))
        suite.add("err_batch_region_" + tag, g, expect_error=err)


# ---------------------------------------------------------------- TransformRegion

def transform_region_cases(suite, rng):
    cases = [("f32", (2, 3, 2, 3), 1), ("f16", (1, 2, 3, 1), 2), ("bf16", (1, 1, 1, 1), 3),
             ("f64", (2, 1, 2, 2), 1), ("i64", (1, 2, 2, 2), 2), ("u8", (1, 1, 3, 5), 1),
             ("bool", (2, 2, 1, 3), 1), ("f32", (0, 2, 2, 2), 1)]
    for dt, shape, k in cases:
        name = "transform_%s_%s_x%d" % (dt, "x".join(map(str, shape)), k)
        g = Graph(name)
        x = g.input("x", dt, list(shape))
        g.outputs(g.op("TransformRegion", [x], steps=["resize_nearest_2x"] * k))
        if dt == "i64":  # beyond 2^53: copied exactly
            v = rng.integers(-(1 << 62), 1 << 62, size=shape, dtype=np.int64)
        else:
            v = rand_any(rng, dt, shape, 0, 200)
        ref = v
        for _ in range(k):
            ref = upsample2x(ref)
        suite.add(name, g, inputs={"x": tin(v, dt)}, expected=[tin(ref, dt)])
    for tag, shape, steps, err in [("rank3", (2, 3, 4), ["resize_nearest_2x"], "RLX_ERR_SHAPE"),
                                   ("none_step", (1, 1, 2, 2), ["none"], "RLX_ERR_INVALID"),
                                   ("no_steps", (1, 1, 2, 2), [], "RLX_ERR_INVALID")]:
        g = Graph("transform_" + tag)
        x = g.input("x", "f32", list(shape))
        g.outputs(g.op("TransformRegion", [x], steps=steps))
        suite.add("err_transform_" + tag, g, expect_error=err)


# ---------------------------------------------------------------- FusedAttentionBlock

def ref_attention_block(x, wq, wk, wv, wo, H, KVH, D, mask, window, score_scale, softcap,
                        cos=None, sin=None, n_rot=0, mode="normal"):
    q, k, v = x @ wq, x @ wk, x @ wv
    if cos is not None:
        q = ref_rope(q, cos, sin, D, n_rot, mode)
        k = ref_rope(k, cos, sin, D, n_rot, mode)
    a = ref_attention(q, k, v, H, KVH, D, "bshd", mask, window, score_scale, softcap, None)
    return a @ wo


def attention_block_cases(suite, rng):
    # (tag, dt, B, S, hidden, H, KVH, D, E, mask, window, score_scale, softcap,
    #  rope: None or (n_rot, mode, table rank, table dtype or None for x's))
    cases = [
        ("mha_none_f32", "f32", 2, 5, 12, 3, 3, 4, 12, "none", 0, 0.0, 0.0, None),
        ("gqa_causal_rope_f32", "f32", 2, 6, 16, 4, 2, 4, 16, "causal", 0, 0.0, 0.0, (4, "normal", 2, None)),
        ("gqa_causal_f64", "f64", 1, 7, 8, 4, 1, 2, 8, "causal", 0, 0.0, 0.0, None),
        ("neox_partial_btables_f64", "f64", 2, 4, 8, 2, 1, 6, 10, "causal", 0, 0.0, 0.0,
         (4, "neox", 3, None)),
        ("sliding_softcap_f32", "f32", 1, 8, 8, 2, 2, 4, 8, "sliding_window", 3, 0.0, 5.0,
         (2, "normal", 2, None)),
        ("score_scale_f32", "f32", 3, 3, 6, 2, 2, 3, 5, "none", 0, 0.25, 0.0, None),
        ("single_token_f32", "f32", 2, 1, 8, 2, 2, 4, 8, "causal", 0, 0.0, 0.0, (4, "neox", 3, None)),
        ("gqa_causal_rope_f16", "f16", 2, 5, 16, 4, 2, 4, 16, "causal", 0, 0.0, 0.0, (4, "normal", 2, None)),
        ("rope_f32_tables_f16", "f16", 1, 4, 8, 2, 2, 4, 8, "causal", 0, 0.0, 0.0, (4, "neox", 3, "f32")),
        ("gqa_causal_rope_bf16", "bf16", 2, 4, 8, 4, 2, 2, 8, "causal", 0, 0.0, 0.0, (2, "normal", 2, None)),
        ("mha_none_bf16", "bf16", 1, 3, 8, 2, 2, 4, 6, "none", 0, 0.0, 0.0, None),
        ("mha_none_f16", "f16", 1, 3, 8, 2, 2, 4, 8, "none", 0, 0.0, 0.0, None),
    ]
    for tag, dt, B, S, hidden, H, KVH, D, E, mask, window, sc, cap, rope in cases:
        name = "attn_block_" + tag
        g = Graph(name)
        x = g.input("x", dt, [B, S, hidden])
        ws = [g.param("wq", dt, [hidden, H * D]), g.param("wk", dt, [hidden, KVH * D]),
              g.param("wv", dt, [hidden, KVH * D]), g.param("wo", dt, [H * D, E])]
        attrs = dict(num_heads=H, num_kv_heads=KVH, head_dim=D, mask=mask, window=window,
                     score_scale=sc, softcap=cap)
        tx, xv = rand(rng, (B, S, hidden), dt)
        tw = [rand(rng, s, dt, 1.0 / np.sqrt(s[0]))
              for s in [(hidden, H * D), (hidden, KVH * D), (hidden, KVH * D), (H * D, E)]]
        inputs = {"x": tx}
        cos = sin = None
        n_rot, mode = 0, "normal"
        if rope:
            n_rot, mode, trank, tdt = rope
            tdt = tdt or dt
            tshape = [S, n_rot // 2] if trank == 2 else [B, S, n_rot // 2]
            pos = np.arange(S) if trank == 2 else np.arange(S)[None, :] + 3 * np.arange(B)[:, None]
            c, s = rope_tables(pos, n_rot, 10000.0, 1.0)
            cos, sin = rounded(c, tdt), rounded(s, tdt)
            ws += [g.input("cos", tdt, tshape), g.input("sin", tdt, tshape)]
            inputs.update(cos=T(cos, tdt), sin=T(sin, tdt))
            attrs.update(n_rot=n_rot, mode=mode)
        g.outputs(g.op("FusedAttentionBlock", [x] + ws, **attrs))
        ref = ref_attention_block(xv, *[w[1] for w in tw], H, KVH, D, mask, window, sc, cap,
                                  cos, sin, n_rot, mode)
        suite.add(name, g, inputs=inputs,
                  params={k: w[0] for k, w in zip(["wq", "wk", "wv", "wo"], tw)},
                  expected=[T(ref, dt)])

    # Errors: (tag, x shape, wq/wk/wv/wo shapes, attrs, table shapes or None, status)
    base = dict(num_heads=2, num_kv_heads=2, head_dim=2)
    w4 = [(4, 4), (4, 4), (4, 4), (4, 4)]
    errs = [
        ("custom_mask", (1, 3, 4), w4, dict(base, mask="custom"), None, "RLX_ERR_INVALID"),
        ("heads_not_multiple", (1, 3, 4), [(4, 6), (4, 4), (4, 4), (6, 4)],
         dict(num_heads=3, num_kv_heads=2, head_dim=2), None, "RLX_ERR_INVALID"),
        ("wq_cols", (1, 3, 4), [(4, 6), (4, 4), (4, 4), (4, 4)], base, None, "RLX_ERR_SHAPE"),
        ("wk_rows", (1, 3, 4), [(4, 4), (5, 4), (4, 4), (4, 4)], base, None, "RLX_ERR_SHAPE"),
        ("wo_rows", (1, 3, 4), [(4, 4), (4, 4), (4, 4), (3, 4)], base, None, "RLX_ERR_SHAPE"),
        ("x_rank2", (3, 4), w4, base, None, "RLX_ERR_SHAPE"),
        ("window_zero", (1, 3, 4), w4, dict(base, mask="sliding_window", window=0), None,
         "RLX_ERR_INVALID"),
        ("n_rot_odd", (1, 3, 4), w4, dict(base, n_rot=1), [(3, 0), (3, 0)], "RLX_ERR_INVALID"),
        ("n_rot_too_big", (1, 3, 4), w4, dict(base, n_rot=4), [(3, 2), (3, 2)], "RLX_ERR_INVALID"),
        ("table_shape", (1, 3, 4), w4, dict(base, n_rot=2), [(4, 1), (4, 1)], "RLX_ERR_SHAPE"),
        ("only_cos", (1, 3, 4), w4, dict(base, n_rot=2), [(3, 1)], "RLX_ERR_INVALID"),
    ]
    for tag, xs, wshapes, attrs, tables, err in errs:
        g = Graph("attn_block_" + tag)
        ins = [g.input("x", "f32", list(xs))]
        ins += [g.input(nm, "f32", list(s)) for nm, s in zip(["wq", "wk", "wv", "wo"], wshapes)]
        for nm, s in zip(["cos", "sin"], tables or []):
            ins.append(g.input(nm, "f32", list(s)))
        g.outputs(g.op("FusedAttentionBlock", ins, **attrs))
        suite.add("err_attn_block_" + tag, g, expect_error=err)
    g = Graph("attn_block_dtype")
    ins = [g.input("x", "f32", [1, 2, 4])]
    ins += [g.input(nm, "f16" if nm == "wv" else "f32", [4, 4]) for nm in ["wq", "wk", "wv", "wo"]]
    g.outputs(g.op("FusedAttentionBlock", ins, **base))
    suite.add("err_attn_block_dtype", g, expect_error="RLX_ERR_DTYPE")


# ---------------------------------------------------------------- symbolic dims

def symbolic_cases(suite, rng):
    """Graphs with symbolic dims, specialized when the inputs are bound."""
    def add(name, g, inputs, ref, dt="f32", params=None):
        suite.add("sym_" + name, g, inputs=inputs, params=params or {}, expected=[tin(ref, dt)])

    g = Graph("sym_mba")
    a, w, b = g.input("a", "f32", ["S", 4]), g.param("w", "f32", [4, 3]), g.param("b", "f32", [3])
    g.outputs(g.op("FusedMatMulBiasAct", [a, w, b], act="gelu"))
    (ta, av), (tw, wv), (tb, bv) = rand(rng, (5, 4), "f32"), rand(rng, (4, 3), "f32"), rand(rng, (3,), "f32")
    add("mba", g, {"a": ta}, act_ref("gelu", av @ wv + bv), params={"w": tw, "b": tb})

    g = Graph("sym_ln")
    x, r = g.input("x", "f32", ["S", 6]), g.input("res", "f32", ["S", 6])
    ga, be = g.param("gamma", "f32", [6]), g.param("beta", "f32", [6])
    g.outputs(g.op("FusedResidualLN", [x, r, ga, be]))
    (tx, xv), (tr, rv), (tg, gv), (tbe, bev) = [rand(rng, s, "f32") for s in [(3, 6), (3, 6), (6,), (6,)]]
    add("ln", g, {"x": tx, "res": tr}, ref_layer_norm(xv + rv, gv, bev, 1e-5),
        params={"gamma": tg, "beta": tbe})

    g = Graph("sym_swiglu")
    x = g.input("x", "f32", [2, "H2"])
    g.outputs(g.op("FusedSwiGLU", [x]))
    tx, xv = rand(rng, (2, 8), "f32")
    add("swiglu", g, {"x": tx}, ACT_REFS["silu"](xv[:, :4], 0) * xv[:, 4:])

    g = Graph("sym_region")
    x0, x1 = g.input("x0", "f32", ["S", 3]), g.input("x1", "f32", [1, 3])
    steps = ["bin.add(i0,i1)", "act.gelu(s0)", "cmp.gt(s1,i1)"]
    g.outputs(g.op("ElementwiseRegion", [x0, x1], chain=steps))
    v0, v1 = rand_any(rng, "f32", (4, 3)), rand_any(rng, "f32", (1, 3))
    add("region", g, {"x0": tin(v0, "f32"), "x1": tin(v1, "f32")},
        ref_chain(steps, [(v0, "f32"), (v1, "f32")])[0], "bool")

    g = Graph("sym_region_prologue")
    x0, x1 = g.input("x0", "f16", [1, 2, "H", "W"]), g.input("x1", "f16", [2, 1, 1])
    steps = ["bin.mul(i0,i1)", "act.tanh(s0)"]
    g.outputs(g.op("ElementwiseRegion", [x0, x1], chain=steps, prologue="resize_nearest_2x"))
    v0, v1 = rand_any(rng, "f16", (1, 2, 3, 2)), rand_any(rng, "f16", (2, 1, 1))
    add("region_prologue", g, {"x0": tin(v0, "f16"), "x1": tin(v1, "f16")},
        ref_chain(steps, [(upsample2x(v0), "f16"), (v1, "f16")])[0], "f16")

    g = Graph("sym_batch_region")
    b0, b1, sh = g.input("b0", "f32", ["S", 3]), g.input("b1", "f32", ["T", 3]), g.input("sh", "f32", [3])
    steps = ["bin.sub(i0,i1)", "act.abs(s0)"]
    g.outputs(g.op("BatchElementwiseRegion", [b0, b1, sh], chain=steps, num_batch_inputs=2))
    v0, v1, vs = rand_any(rng, "f32", (2, 3)), rand_any(rng, "f32", (3, 3)), rand_any(rng, "f32", (3,))
    ref = np.concatenate([ref_chain(steps, [(v, "f32"), (vs, "f32")])[0] for v in (v0, v1)])
    add("batch_region", g, {"b0": tin(v0, "f32"), "b1": tin(v1, "f32"), "sh": tin(vs, "f32")}, ref)

    g = Graph("sym_transform")
    x = g.input("x", "i32", [1, 2, "H", "W"])
    g.outputs(g.op("TransformRegion", [x], steps=["resize_nearest_2x", "resize_nearest_2x"]))
    v = rand_any(rng, "i32", (1, 2, 3, 2), -50, 50)
    add("transform", g, {"x": v}, upsample2x(upsample2x(v)), "i32")

    g = Graph("sym_attn_block")
    x = g.input("x", "f32", [1, "S", 8])
    ws = [g.param(nm, "f32", s) for nm, s in [("wq", [8, 8]), ("wk", [8, 4]), ("wv", [8, 4]), ("wo", [8, 8])]]
    g.outputs(g.op("FusedAttentionBlock", [x] + ws, num_heads=4, num_kv_heads=2, head_dim=2, mask="causal"))
    tx, xv = rand(rng, (1, 5, 8), "f32")
    tw = [rand(rng, s, "f32", 0.35) for s in [(8, 8), (8, 4), (8, 4), (8, 8)]]
    ref = ref_attention_block(xv, *[w[1] for w in tw], 4, 2, 2, "causal", 0, 0.0, 0.0)
    add("attn_block", g, {"x": tx}, ref, params={k: w[0] for k, w in zip(["wq", "wk", "wv", "wo"], tw)})


# ---------------------------------------------------------------- big tensors

def big_cases(suite, rng):
    """Sizes of many blocks and threads' shares for the fast CPU paths:
    regions over broadcast inputs (one pass, blocked), residual norms and
    SwiGLU over transformer-sized rows."""
    regions = [
        ("big_bias_gelu_scale_f32", ["f32", "f32", "f32"], [(64, 3000), (3000,), (64, 1)],
         ["bin.add(i0,i1)", "act.gelu(s0)", "bin.mul(s1,i2)", "act.tanh(s2)"], "none"),
        ("big_f16_round_each_step", ["f16", "f16"], [(40, 2049), (40, 1)],
         ["bin.mul(i0,i1)", "act.silu(s0)", "bin.sub(s1,i0)", "act.exp(s2)"], "none"),
        ("big_bf16_cast_f32_cmp", ["bf16", "bf16"], [(3, 1, 9000), (2, 1)],
         ["cast.f32(i0)", "act.sigmoid(s0)", "cast.bf16(s1)", "cmp.gt(s2,i1)"], "none"),
        ("big_scalar_inputs_f32", ["f32", "f32", "f32"], [(), (1, 1), (500, 700)],
         ["bin.mul(i0,i1)", "act.exp(s0)", "bin.add(s1,i2)", "act.erf(s2)"], "none"),
        ("big_prologue_f32", ["f32", "f32"], [(2, 3, 40, 333), (3, 1, 1)],
         ["bin.add(i0,i1)", "act.gelu_tanh(s0)"], "resize_nearest_2x"),
        ("big_prologue_row_bcast_f16", ["f16", "f16"], [(1, 2, 30, 300), (600,)],
         ["bin.mul(i0,i1)", "act.relu(s0)"], "resize_nearest_2x"),
    ]
    for tag, dts, shapes, steps, prologue in regions:
        name = "region_" + tag
        g = Graph(name)
        nodes = [g.input("x%d" % i, dt, list(sh)) for i, (dt, sh) in enumerate(zip(dts, shapes))]
        g.outputs(g.op("ElementwiseRegion", nodes, chain=chain_attr(steps), prologue=prologue))
        vals = [rand_any(rng, dt, sh) for dt, sh in zip(dts, shapes)]
        ins = [(upsample2x(v) if i == 0 and prologue != "none" else v, dt)
               for i, (v, dt) in enumerate(zip(vals, dts))]
        r, out_dt = ref_chain(steps, ins)
        suite.add(name, g, inputs={"x%d" % i: tin(v, dt) for i, (v, dt) in enumerate(zip(vals, dts))},
                  expected=[tin(r, out_dt)])

    name = "batch_region_big_f32"
    g = Graph(name)
    specs = [("f32", (200, 700)), ("f32", (33, 700)), ("f32", (700,))]
    nodes = [g.input("x%d" % i, dt, list(sh)) for i, (dt, sh) in enumerate(specs)]
    steps = ["bin.mul(i0,i1)", "act.silu(s0)"]
    g.outputs(g.op("BatchElementwiseRegion", nodes, chain=chain_attr(steps), num_batch_inputs=2))
    vals = [rand_any(rng, dt, sh) for dt, sh in specs]
    ref = np.concatenate([ref_chain(steps, [(v, "f32"), (vals[2], "f32")])[0] for v in vals[:2]])
    suite.add(name, g, inputs={"x%d" % i: tin(v, "f32") for i, v in enumerate(vals)},
              expected=[tin(ref, "f32")])

    for op, tag, ref, dt, shape, has_bias in [
            ("FusedResidualLN", "ln", ref_layer_norm, "f32", (128, 768), True),
            ("FusedResidualLN", "ln", ref_layer_norm, "f16", (64, 1024), False),
            ("FusedResidualRmsNorm", "rms", ref_rms_norm, "bf16", (64, 2048), False),
            ("FusedResidualRmsNorm", "rms", ref_rms_norm, "f32", (3, 50, 4096), True)]:
        L = shape[-1]
        name = "%s_big_%s_%s" % (tag, dt, "x".join(map(str, shape)))
        g = Graph(name)
        ins = [g.input("x", dt, list(shape)), g.input("res", dt, list(shape))]
        if has_bias:
            ins.append(g.param("bias", dt, [L]))
        ins += [g.param("gamma", dt, [L]), g.param("beta", dt, [L])]
        g.outputs(g.op(op, ins, has_bias=has_bias, eps=1e-5))
        (tx, xv), (tr, rv), (tb, bv), (tg, gv), (tbe, bev) = [
            rand(rng, sh, dt) for sh in [shape, shape, (L,), (L,), (L,)]]
        params = {"gamma": tg, "beta": tbe}
        if has_bias:
            params["bias"] = tb
        z = xv + rv + (bv if has_bias else 0.0)
        suite.add(name, g, inputs={"x": tx, "res": tr}, params=params,
                  expected=[T(ref(z, gv, bev, 1e-5), dt)])

    for dt, shape, cast in [("f32", (128, 2 * 1409), "none"), ("bf16", (64, 2 * 700), "f32"),
                            ("f32", (2, 50, 2 * 1000), "f16")]:
        out_dt = dt if cast == "none" else cast
        name = "swiglu_big_%s_%s_to_%s" % (dt, "x".join(map(str, shape)), cast)
        g = Graph(name)
        x = g.input("x", dt, list(shape))
        g.outputs(g.op("FusedSwiGLU", [x], cast_to=cast))
        tx, xv = rand(rng, shape, dt, 2.0)
        h = shape[-1] // 2
        suite.add(name, g, inputs={"x": tx},
                  expected=[T(ACT_REFS["silu"](xv[..., :h], 0) * xv[..., h:], out_dt)])


def cases(suite, rng):
    matmul_bias_act_cases(suite, rng)
    fused_conv_cases(suite, rng)
    residual_norm_cases(suite, rng)
    swiglu_cases(suite, rng)
    region_cases(suite, rng)
    batch_region_cases(suite, rng)
    transform_region_cases(suite, rng)
    attention_block_cases(suite, rng)
    symbolic_cases(suite, rng)
    big_cases(suite, rng)
