"""Op-parity cases of the elementwise group: Activation, Binary, Compare,
Where, Cast, Clamp. References are computed in float64 from the inputs as
rounded to their dtype (integers: NumPy on the dtype itself, which wraps)."""
import warnings

import numpy as np
from scipy import special

from rlxcase import FLOAT_DTYPES, RLX_TO_NP, Graph, T, bf16_bits, bf16_to_f32, round_to

INT_DTYPES = ["i8", "u8", "i32", "i64", "i16", "u16", "u32"]
UNSIGNED_DTYPES = ["u8", "u16", "u32"]
PLAIN_DTYPES = FLOAT_DTYPES + INT_DTYPES + ["bool"]

# Shapes for unary ops and operand pairs for broadcasting ops.
SHAPES = [(3, 5), (7,), (2, 1, 3), (), (1,), (4, 33), (1, 1, 1), (2, 3, 4, 5)]
PAIRS = [((3, 1, 5), (4, 1)), ((2, 3), (2, 3)), ((), (4,)), ((5,), ()),
         ((1,), (3, 1)), ((2, 1, 3), (1, 4, 1)), ((), ()), ((7,), (7,)),
         ((1, 6), (5, 1))]
# Cast is an exact rounding (or an exact integer operation): no tolerance.
EXACT = dict(atol=0.0, rtol=0.0)


def rounded(v, dt):
    """Values as stored in dt, as float64 (floats) or the dtype (others)."""
    if dt in FLOAT_DTYPES:  # (round_to makes rank 0 into rank 1 for bf16)
        return np.asarray(round_to(np.asarray(v, np.float64), dt), np.float64).reshape(np.shape(v))
    return np.asarray(v).astype(RLX_TO_NP[dt])


def rand_int(rng, dt, shape, lo=None, hi=None, edges=True):
    """Random integers of dt in [lo, hi] (default: the full range), with the
    extreme values mixed in."""
    info = np.iinfo(RLX_TO_NP[dt])
    lo = info.min if lo is None else max(lo, info.min)
    hi = info.max if hi is None else min(hi, info.max)
    v = rng.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64)
    if edges and v.size >= 4:
        flat = v.reshape(-1)
        flat[:4] = [lo, hi, 0 if lo <= 0 <= hi else lo, -1 if lo <= -1 else hi]
    return v.astype(RLX_TO_NP[dt])


def rand_plain(rng, dt, shape):
    """Small values with many ties (for Compare / Where / Binary on bool)."""
    if dt == "bool":
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if dt in UNSIGNED_DTYPES:
        return rng.integers(0, 7, size=shape).astype(RLX_TO_NP[dt])
    v = rng.integers(-3, 4, size=shape).astype(np.float64)
    if dt in FLOAT_DTYPES:
        v = v + np.where(rng.random(shape) < 0.3, 0.5, 0.0)
        return rounded(v, dt)
    return v.astype(RLX_TO_NP[dt])


def op_node(g, op_name, inputs, **attrs):
    """Graph.op, for attrs that include "op" (Binary, Compare): Graph.op's
    own first parameter is named op."""
    return g._emit(op_name, list(inputs), attrs)


def unary_graph(name, op_name, dt, shape, **attrs):
    g = Graph(name)
    x = g.input("x", dt, list(shape))
    g.outputs(g.op(op_name, [x], **attrs))
    return g


def binary_graph(name, op_name, dta, sa, dtb, sb, **attrs):
    g = Graph(name)
    a = g.input("a", dta, list(sa))
    b = g.input("b", dtb, list(sb))
    g.outputs(op_node(g, op_name, [a, b], **attrs))
    return g


# ---------------------------------------------------------------- Activation

SQRT_2_OVER_PI = np.sqrt(2.0 / np.pi)

ACT_REFS = {
    "gelu": lambda x, a: 0.5 * x * (1.0 + special.erf(x / np.sqrt(2.0))),
    "gelu_tanh": lambda x, a: 0.5 * x * (1.0 + np.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x ** 3))),
    "silu": lambda x, a: x * special.expit(x),
    "relu": lambda x, a: np.maximum(x, 0.0),
    "leaky_relu": lambda x, a: np.where(x < 0, a * x, x),
    "sigmoid": lambda x, a: special.expit(x),
    "tanh": lambda x, a: np.tanh(x),
    "exp": lambda x, a: np.exp(x),
    "log": lambda x, a: np.log(x),
    "sqrt": lambda x, a: np.sqrt(x),
    "rsqrt": lambda x, a: 1.0 / np.sqrt(x),
    "neg": lambda x, a: -x,
    "abs": lambda x, a: np.abs(x),
    "sin": lambda x, a: np.sin(x),
    "cos": lambda x, a: np.cos(x),
    "erf": lambda x, a: special.erf(x),
    "softplus": lambda x, a: np.logaddexp(0.0, x),
    "round": lambda x, a: np.round(x),
    "sign": lambda x, a: np.sign(x),
    "reciprocal": lambda x, a: 1.0 / x,
    "square": lambda x, a: x * x,
}


def act_input(rng, act, shape):
    if act in ("log", "sqrt", "rsqrt"):
        return rng.uniform(0.05, 5.0, shape)
    if act == "reciprocal":
        return rng.choice([-1.0, 1.0], shape) * rng.uniform(0.2, 4.0, shape)
    if act == "exp":
        return rng.uniform(-5.0, 5.0, shape)
    if act == "softplus":
        return rng.uniform(-20.0, 20.0, shape)
    if act == "round":  # exact halves (ties to even) mixed with other values
        halves = rng.integers(-12, 13, shape) / 2.0
        return np.where(rng.random(shape) < 0.5, halves, rng.uniform(-6.0, 6.0, shape))
    v = rng.standard_normal(shape) * 2.0
    if act in ("sign", "relu", "leaky_relu", "abs"):
        v = np.where(rng.random(shape) < 0.2, 0.0, v)
    return v


def activation_cases(suite, rng):
    for ai, act in enumerate(ACT_REFS):
        for di, dt in enumerate(FLOAT_DTYPES):
            shape = SHAPES[(ai + di) % len(SHAPES)]
            x = rounded(act_input(rng, act, shape), dt)
            attrs = {"act": act}
            alpha = 0.01  # attrs.def default
            if act == "leaky_relu" and di % 2 == 0:
                alpha = 0.2
                attrs["alpha"] = alpha
            name = "act_%s_%s" % (act, dt)
            suite.add(name, unary_graph(name, "Activation", dt, shape, **attrs),
                      inputs={"x": T(x, dt)}, expected=[T(ACT_REFS[act](x, alpha), dt)])

    # Integer activations: exact in int64, wrapped to the dtype (as NumPy).
    int_refs = {"neg": np.negative, "abs": np.abs, "sign": np.sign, "square": np.square,
                "relu": lambda x: np.maximum(x, x.dtype.type(0))}
    for ai, (act, ref) in enumerate(int_refs.items()):
        for di, dt in enumerate(INT_DTYPES):
            shape = [(4, 5), (9,), (2, 3, 2)][(ai + di) % 3]
            x = rand_int(rng, dt, shape, -1000 if act == "square" else None,
                         1000 if act == "square" else None)
            if act == "square" and dt != "u8":  # also wrapping products
                x.reshape(-1)[-1] = np.iinfo(RLX_TO_NP[dt]).max
            name = "act_%s_%s" % (act, dt)
            suite.add(name, unary_graph(name, "Activation", dt, shape, act=act),
                      inputs={"x": x}, expected=[ref(x)])

    # NaN and infinities pass through as in NumPy.
    special_x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0], np.float32)
    for act in ("relu", "sign", "abs", "neg", "exp", "round", "sigmoid", "tanh"):
        ref = ACT_REFS[act](special_x.astype(np.float64), 0.01)
        name = "act_%s_special_f32" % act
        suite.add(name, unary_graph(name, "Activation", "f32", [6], act=act),
                  inputs={"x": special_x}, expected=[T(ref, "f32")])

    x = np.ones((2, 3), np.float32)
    err_cases = [("act_exp_i32", "i32", {"act": "exp"}, "RLX_ERR_DTYPE"),
                 ("act_relu_bool", "bool", {"act": "relu"}, "RLX_ERR_DTYPE"),
                 ("act_none", "f32", {"act": "none"}, "RLX_ERR_INVALID"),
                 ("act_leaky_alpha_nan", "f32", {"act": "leaky_relu", "alpha": float("nan")},
                  "RLX_ERR_INVALID")]
    for name, dt, attrs, err in err_cases:
        suite.add("err_" + name, unary_graph(name, "Activation", dt, (2, 3), **attrs),
                  inputs={"x": T(x, dt)}, expect_error=err)
    g = Graph("act_block")
    w = g.param("w", "q8_0", [2, 32])
    g.outputs(g.op("Activation", [w], act="relu"))
    suite.add("err_act_block_dtype", g, expect_error="RLX_ERR_DTYPE")


# ---------------------------------------------------------------- Binary

BINOPS = ["add", "sub", "mul", "div", "pow", "max", "min", "mod"]
FLOAT_BIN_REFS = {"add": np.add, "sub": np.subtract, "mul": np.multiply,
                  "div": np.divide, "pow": np.power, "max": np.maximum,
                  "min": np.minimum, "mod": np.mod}


def float_bin_inputs(rng, op, sa, sb):
    if op == "div":
        return rng.standard_normal(sa) * 3, rng.choice([-1.0, 1.0], sb) * rng.uniform(0.5, 3.0, sb)
    if op == "pow":
        return rng.uniform(0.2, 3.0, sa), rng.uniform(-2.0, 2.0, sb)
    if op == "mod":
        return rng.uniform(-10, 10, sa), rng.choice([-1.0, 1.0], sb) * rng.uniform(0.5, 4.0, sb)
    return rng.standard_normal(sa) * 3, rng.standard_normal(sb) * 3


def int_pow_ref(a, b):
    """Integer pow with negative exponents: 0 unless the base is +-1."""
    a64, b64 = np.broadcast_arrays(a.astype(np.int64), b.astype(np.int64))
    out = np.power(a64, np.maximum(b64, 0))
    neg = b64 < 0
    out[neg] = np.where(a64[neg] == 1, 1, np.where(a64[neg] == -1, np.where(b64[neg] % 2, -1, 1), 0))
    return out.astype(a.dtype)


def int_bin_inputs(rng, op, dt, sa, sb):
    if op in ("div", "mod"):  # negative operands, zero divisors, min // -1
        a = rand_int(rng, dt, sa)
        b = rand_int(rng, dt, sb, -7, 7, edges=False)
        if b.size >= 2:
            b.reshape(-1)[:2] = [0, 1 if dt in UNSIGNED_DTYPES else -1]
        return a, b
    if op == "pow":
        base = rand_int(rng, dt, sa, -5, 5, edges=False)
        return base, rand_int(rng, dt, sb, 0, 40 if dt == "i64" else 9, edges=False)
    return rand_int(rng, dt, sa), rand_int(rng, dt, sb)


def binary_cases(suite, rng):
    for oi, op in enumerate(BINOPS):
        for di, dt in enumerate(FLOAT_DTYPES):
            sa, sb = PAIRS[(oi + di) % len(PAIRS)]
            a, b = float_bin_inputs(rng, op, sa, sb)
            a, b = rounded(a, dt), rounded(b, dt)
            name = "bin_%s_%s" % (op, dt)
            suite.add(name, binary_graph(name, "Binary", dt, sa, dt, sb, op=op),
                      inputs={"a": T(a, dt), "b": T(b, dt)},
                      expected=[T(FLOAT_BIN_REFS[op](a, b), dt)])
        for di, dt in enumerate(INT_DTYPES):
            sa, sb = PAIRS[(oi + di + 3) % len(PAIRS)]
            if op in ("div", "mod", "pow") and np.prod(sb) < 4:  # room for the edge cases
                sa, sb = (sb, sa) if np.prod(sa) >= 4 else ((2, 5), (5,))
            a, b = int_bin_inputs(rng, op, dt, sa, sb)
            if op == "div":  # NumPy // also gives 0 for a zero divisor
                ref = np.floor_divide(a, b)
            elif op == "mod":
                ref = np.mod(a, b)
            elif op == "pow":
                ref = np.power(a, b)
            else:
                ref = FLOAT_BIN_REFS[op](a, b)
            name = "bin_%s_%s" % (op, dt)
            suite.add(name, binary_graph(name, "Binary", dt, sa, dt, sb, op=op),
                      inputs={"a": a, "b": b}, expected=[ref.astype(a.dtype)])

    # Floor division / mod on every sign combination, exact.
    a = np.array([7, -7, 7, -7, 6, -6, 0, 1], np.int32)
    b = np.array([2, 2, -2, -2, 3, -3, 5, -5], np.int32)
    for op, ref in (("div", np.floor_divide(a, b)), ("mod", np.mod(a, b))):
        name = "bin_%s_signs_i32" % op
        suite.add(name, binary_graph(name, "Binary", "i32", [8], "i32", [8], op=op),
                  inputs={"a": a, "b": b}, expected=[ref])
    af, bf = a.astype(np.float64) + 0.5, b.astype(np.float64)
    for dt in ("f32", "f64"):
        name = "bin_mod_signs_%s" % dt
        suite.add(name, binary_graph(name, "Binary", dt, [8], dt, [8], op="mod"),
                  inputs={"a": T(af, dt), "b": T(bf, dt)}, expected=[T(np.mod(af, bf), dt)])

    # Negative exponents on integers (NumPy raises; rlx: 0 unless base is +-1).
    base = np.array([-2, -1, 0, 1, 2, 5, -1, 1], np.int64)
    expo = np.array([-1, -3, -2, -5, -2, -1, -2, 0], np.int64)
    for dt in ("i32", "i64", "i8"):
        name = "bin_pow_negexp_%s" % dt
        a, b = base.astype(RLX_TO_NP[dt]), expo.astype(RLX_TO_NP[dt])
        suite.add(name, binary_graph(name, "Binary", dt, [8], dt, [8], op="pow"),
                  inputs={"a": a, "b": b}, expected=[int_pow_ref(a, b)])

    # Float pow with negative bases and integral exponents (0**0 = 1).
    a = np.array([-2.0, -1.5, -3.0, 0.0, 2.0, -1.0], np.float64)
    b = np.array([[3.0], [2.0], [0.0], [1.0]], np.float64)
    for dt in ("f32", "f64", "f16"):
        name = "bin_pow_negbase_%s" % dt
        ar, br = rounded(a, dt), rounded(b, dt)
        suite.add(name, binary_graph(name, "Binary", dt, [6], dt, [4, 1], op="pow"),
                  inputs={"a": T(ar, dt), "b": T(br, dt)}, expected=[T(np.power(ar, br), dt)])

    # Special float values: NaN propagates through max/min, x/0 = +-inf, 0/0 = NaN.
    a = np.array([np.nan, 1.0, 2.0, -1.0, 0.0, np.inf, 3.0], np.float32)
    b = np.array([1.0, np.nan, 0.0, 0.0, 0.0, 1.0, np.inf], np.float32)
    for op in ("max", "min", "div", "add", "mod", "pow"):
        with np.errstate(all="ignore"):
            ref = FLOAT_BIN_REFS[op](a.astype(np.float64), b.astype(np.float64))
        name = "bin_%s_special_f32" % op
        suite.add(name, binary_graph(name, "Binary", "f32", [7], "f32", [7], op=op),
                  inputs={"a": a, "b": b}, expected=[T(ref, "f32")])

    # BOOL: max = or, min = and.
    for op, ref in (("max", np.logical_or), ("min", np.logical_and)):
        for k, (sa, sb) in enumerate((((2, 3), (2, 3)), ((3, 1), (1, 4)), ((), (5,)))):
            a, b = rand_plain(rng, "bool", sa), rand_plain(rng, "bool", sb)
            name = "bin_%s_bool_%d" % (op, k)
            suite.add(name, binary_graph(name, "Binary", "bool", sa, "bool", sb, op=op),
                      inputs={"a": a, "b": b}, expected=[ref(a, b)])

    # Symbolic dims broadcast against themselves and against 1.
    g = Graph("bin_sym")
    a = g.input("a", "f32", ["S", 3])
    b = g.input("b", "f32", [1, 3])
    g.outputs(op_node(g, "Binary", [a, b], op="mul"))
    av = rng.standard_normal((5, 3)).astype(np.float32)
    bv = rng.standard_normal((1, 3)).astype(np.float32)
    suite.add("bin_mul_symbolic", g, inputs={"a": av, "b": bv},
              expected=[T(av.astype(np.float64) * bv, "f32")])

    # A chain: (a + b) * a - b with broadcasting, rank 4.
    g = Graph("bin_chain")
    a = g.input("a", "f64", [2, 1, 3, 1])
    b = g.input("b", "f64", [4, 1, 5])
    s = op_node(g, "Binary", [a, b], op="add")
    m = op_node(g, "Binary", [s, a], op="mul")
    g.outputs(op_node(g, "Binary", [m, b], op="sub"))
    av, bv = rng.standard_normal((2, 1, 3, 1)), rng.standard_normal((4, 1, 5))
    suite.add("bin_chain_f64", g, inputs={"a": av, "b": bv}, expected=[(av + bv) * av - bv])

    errs = [("bin_add_bool", "add", "bool", (2, 3), "bool", (2, 3), "RLX_ERR_DTYPE"),
            ("bin_pow_bool", "pow", "bool", (2,), "bool", (2,), "RLX_ERR_DTYPE"),
            ("bin_mixed_f32_f16", "add", "f32", (2, 3), "f16", (2, 3), "RLX_ERR_DTYPE"),
            ("bin_mixed_i32_i64", "mul", "i32", (4,), "i64", (4,), "RLX_ERR_DTYPE"),
            ("bin_shape", "add", "f32", (3, 4), "f32", (5,), "RLX_ERR_SHAPE"),
            ("bin_shape_inner", "sub", "i32", (2, 3, 4), "i32", (3, 1, 4), "RLX_ERR_SHAPE")]
    for name, op, dta, sa, dtb, sb, err in errs:
        suite.add("err_" + name, binary_graph(name, "Binary", dta, sa, dtb, sb, op=op),
                  inputs={"a": T(np.ones(sa), dta), "b": T(np.ones(sb), dtb)}, expect_error=err)
    g = Graph("bin_block")
    w = g.param("w", "q4_0", [32])
    g.outputs(op_node(g, "Binary", [w, w], op="add"))
    suite.add("err_bin_block_dtype", g, expect_error="RLX_ERR_DTYPE")


# ---------------------------------------------------------------- Compare

CMPOPS = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
          "gt": np.greater, "ge": np.greater_equal}


def compare_cases(suite, rng):
    for oi, (op, ref) in enumerate(CMPOPS.items()):
        for di, dt in enumerate(PLAIN_DTYPES):
            sa, sb = PAIRS[(oi + di) % len(PAIRS)]
            a, b = rand_plain(rng, dt, sa), rand_plain(rng, dt, sb)
            if dt in FLOAT_DTYPES and a.size >= 2:  # NaN is unordered
                a.reshape(-1)[0] = np.nan
            name = "cmp_%s_%s" % (op, dt)
            suite.add(name, binary_graph(name, "Compare", dt, sa, dt, sb, op=op),
                      inputs={"a": T(a, dt), "b": T(b, dt)}, expected=[ref(a, b)])

    # i64 beyond 2^53 compares exactly (a double would tie them).
    big = np.int64(2) ** 53
    a = np.array([big, big + 1, big + 2, -big - 1], np.int64)
    b = np.array([big + 1, big + 1, big + 1, -big], np.int64)
    for op in ("eq", "lt", "ge"):
        name = "cmp_%s_i64_big" % op
        suite.add(name, binary_graph(name, "Compare", "i64", [4], "i64", [4], op=op),
                  inputs={"a": a, "b": b}, expected=[CMPOPS[op](a, b)])

    suite.add("err_cmp_mixed", binary_graph("cmp_mixed", "Compare", "f32", (3,), "i32", (3,), op="lt"),
              inputs={"a": np.ones(3, np.float32), "b": np.ones(3, np.int32)},
              expect_error="RLX_ERR_DTYPE")
    suite.add("err_cmp_shape", binary_graph("cmp_shape", "Compare", "f32", (2, 3), "f32", (2,), op="eq"),
              inputs={"a": np.ones((2, 3), np.float32), "b": np.ones(2, np.float32)},
              expect_error="RLX_ERR_SHAPE")


# ---------------------------------------------------------------- Where

WHERE_SHAPES = [((3, 1, 5), (4, 1), ()), ((), (2, 3), (2, 3)), ((2, 3), (2, 3), (2, 3)),
                ((1,), (), (4,)), ((4, 1), (1, 6), (4, 6)), ((2, 1, 1), (3, 1), (1, 5))]


def where_graph(name, dtc, sc, dta, sa, dtb, sb):
    g = Graph(name)
    c = g.input("c", dtc, list(sc))
    a = g.input("a", dta, list(sa))
    b = g.input("b", dtb, list(sb))
    g.outputs(g.op("Where", [c, a, b]))
    return g


def where_values(rng, dt, shape):
    if dt in INT_DTYPES:
        return rand_int(rng, dt, shape)
    if dt in FLOAT_DTYPES:
        return rounded(rng.standard_normal(shape), dt)
    return rand_plain(rng, dt, shape)


def where_cases(suite, rng):
    for di, dt in enumerate(PLAIN_DTYPES):
        for k in range(2):
            sc, sa, sb = WHERE_SHAPES[(di + 3 * k) % len(WHERE_SHAPES)]
            c = rng.random(sc) < 0.5
            a, b = where_values(rng, dt, sa), where_values(rng, dt, sb)
            name = "where_%s_%d" % (dt, k)
            suite.add(name, where_graph(name, "bool", sc, dt, sa, dt, sb),
                      inputs={"c": c, "a": T(a, dt), "b": T(b, dt)},
                      expected=[T(np.where(c, a, b), dt)], **EXACT)
    # NaN and infinities are copied as they are.
    c = np.array([True, False, True, False])
    a = np.array([np.nan, 1.0, -np.inf, 2.0], np.float32)
    b = np.array([0.0, np.inf, 3.0, np.nan], np.float32)
    suite.add("where_special_f32", where_graph("where_special", "bool", [4], "f32", [4], "f32", [4]),
              inputs={"c": c, "a": a, "b": b}, expected=[np.where(c, a, b)], **EXACT)

    errs = [("where_cond_f32", "f32", (2, 3), "f32", (2, 3), "f32", (2, 3), "RLX_ERR_DTYPE"),
            ("where_mixed", "bool", (2, 3), "f32", (2, 3), "f16", (2, 3), "RLX_ERR_DTYPE"),
            ("where_shape", "bool", (2, 3), "f32", (4,), "f32", (2, 3), "RLX_ERR_SHAPE"),
            ("where_cond_shape", "bool", (5,), "f32", (2, 3), "f32", (2, 3), "RLX_ERR_SHAPE")]
    for name, dtc, sc, dta, sa, dtb, sb, err in errs:
        suite.add("err_" + name, where_graph(name, dtc, sc, dta, sa, dtb, sb),
                  inputs={"c": T(np.ones(sc), dtc), "a": T(np.ones(sa), dta),
                          "b": T(np.ones(sb), dtb)}, expect_error=err)


# ---------------------------------------------------------------- Cast

def f64_to_bf16_exact(x):
    """float64 -> bf16 values with one round-to-nearest-even (rlxcase's
    bf16_bits goes through float32 first, which can round twice)."""
    x = np.asarray(x, np.float64)
    f = x.astype(np.float32)
    inexact = (f.astype(np.float64) != x) & np.isfinite(x)
    bits = f.view(np.uint32).copy()
    # Round to odd: an inexact float32 with an even mantissa moves one step
    # toward x, so the bf16 rounding below sees the true side of a tie.
    fix = inexact & (bits % 2 == 0)
    away = np.abs(x) > np.abs(f.astype(np.float64))
    bits[fix & away] += 1
    bits[fix & ~away] -= 1
    return bf16_to_f32(bf16_bits(bits.view(np.float32))).astype(np.float64).reshape(x.shape)


def cast_ref(x, src, dst):
    """Expected values of Cast(x: src) -> dst, for in-range inputs."""
    if dst == "bool":
        return x != 0
    if dst in FLOAT_DTYPES:
        xf = np.asarray(x, np.float64)
        if dst == "bf16":
            return f64_to_bf16_exact(xf)
        return xf.astype(RLX_TO_NP[dst])
    if src in FLOAT_DTYPES:
        return np.trunc(x).astype(RLX_TO_NP[dst])
    return np.asarray(x).astype(RLX_TO_NP[dst])  # integers wrap, as astype


INT_CAST_BOUND = {"i8": 120, "u8": 250, "i32": 1e6, "i64": 1e6, "i16": 3e4, "u16": 6e4, "u32": 4e9}


def cast_input(rng, src, dst, shape):
    """Source values that are in range for dst."""
    if src == "bool":
        return rng.random(shape) < 0.5
    if src in FLOAT_DTYPES:
        if dst in INT_DTYPES:
            bound = INT_CAST_BOUND[dst]
            if src == "f16":
                bound = min(bound, 60000)
            lo = 0.0 if dst in UNSIGNED_DTYPES else -bound
            v = rng.uniform(lo, bound, shape)
        else:
            v = rng.standard_normal(shape) * 50
            v.reshape(-1)[:3] = [0.0, -0.0, 1e-6][: v.size]  # zeros, an f16 subnormal
        return rounded(v, src)
    if dst == "f16":
        return rand_int(rng, src, shape, -3000, 3000)  # rounds above 2048
    if dst == "f32":
        return rand_int(rng, src, shape, -(2 ** 40), 2 ** 40)  # rounds above 2^24
    return rand_int(rng, src, shape)  # integers and bool wrap / compare exactly


def cast_cases(suite, rng):
    shapes = [(3, 5), (17,), (2, 1, 4), (), (1, 1)]
    ci = 0
    for src in PLAIN_DTYPES:
        for dst in PLAIN_DTYPES:
            shape = shapes[ci % len(shapes)]
            ci += 1
            x = cast_input(rng, src, dst, shape)
            name = "cast_%s_%s" % (src, dst)
            suite.add(name, unary_graph(name, "Cast", src, shape, to=dst),
                      inputs={"x": T(x, src)}, expected=[T(cast_ref(x, src, dst), dst)], **EXACT)

    # Out of range and NaN to integers: saturate, NaN -> 0 (documented choice).
    x = np.array([np.nan, np.inf, -np.inf, 1e10, -1e10, 3.9, -3.9, 2147483520.0], np.float32)
    expect = np.array([0, 2 ** 31 - 1, -2 ** 31, 2 ** 31 - 1, -2 ** 31, 3, -3, 2147483520], np.int32)
    suite.add("cast_saturate_f32_i32", unary_graph("c", "Cast", "f32", [8], to="i32"),
              inputs={"x": x}, expected=[expect])
    x = np.array([-5.5, 300.7, np.nan, 255.9, -0.9, 0.9])
    suite.add("cast_saturate_f64_u8", unary_graph("c", "Cast", "f64", [6], to="u8"),
              inputs={"x": x}, expected=[np.array([0, 255, 0, 255, 0, 0], np.uint8)])
    x = np.array([1e19, -1e19, 9.2e18, -9.2e18])
    suite.add("cast_saturate_f64_i64", unary_graph("c", "Cast", "f64", [4], to="i64"),
              inputs={"x": x},
              expected=[np.array([2 ** 63 - 1, -2 ** 63, 9200000000000000000,
                                  -9200000000000000000], np.int64)])
    x = np.array([np.nan, -0.0, 1e-30, -np.inf], np.float32)
    suite.add("cast_special_f32_bool", unary_graph("c", "Cast", "f32", [4], to="bool"),
              inputs={"x": x}, expected=[np.array([True, False, True, True])])
    # Values where rounding f64 -> f32 -> f16/bf16 would round twice: just
    # above a tie of the narrow type; the correct result rounds up.
    x = np.array([1 + 2.0 ** -11 + 2.0 ** -40, 1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11,
                  -(1 + 2.0 ** -11 + 2.0 ** -40), 65519.0, 2.0 ** -25 + 2.0 ** -50])
    suite.add("cast_f64_f16_one_rounding", unary_graph("c", "Cast", "f64", [6], to="f16"),
              inputs={"x": x}, expected=[x.astype(np.float16)], **EXACT)
    x = np.array([1 + 2.0 ** -8 + 2.0 ** -40, 1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8,
                  -(1 + 2.0 ** -8 + 2.0 ** -40), 3.0e38, 1e-40])
    suite.add("cast_f64_bf16_one_rounding", unary_graph("c", "Cast", "f64", [6], to="bf16"),
              inputs={"x": x}, expected=[T(f64_to_bf16_exact(x), "bf16")], **EXACT)

    suite.add("err_cast_to_block", unary_graph("c", "Cast", "f32", [32], to="q4_0"),
              inputs={"x": np.ones(32, np.float32)}, expect_error="RLX_ERR_DTYPE")
    g = Graph("cast_from_block")
    w = g.param("w", "q8_0", [32])
    g.outputs(g.op("Cast", [w], to="f32"))
    suite.add("err_cast_from_block", g, expect_error="RLX_ERR_DTYPE")


# ---------------------------------------------------------------- Clamp

def int_bounds(lo, hi, dt):
    info = np.iinfo(RLX_TO_NP[dt])
    lo_i = info.min if lo == -np.inf else int(np.clip(np.ceil(lo), info.min, info.max))
    hi_i = info.max if hi == np.inf else int(np.clip(np.floor(hi), info.min, info.max))
    return lo_i, hi_i


def clamp_cases(suite, rng):
    bounds = [(-0.5, 0.75), (-np.inf, 1.0), (0.0, np.inf), (-2.0, -2.0), (-1.25, 3.0)]
    for di, dt in enumerate(FLOAT_DTYPES):
        for k in range(2):
            lo, hi = bounds[(di + 2 * k) % len(bounds)]
            shape = SHAPES[(di + k) % len(SHAPES)]
            x = rounded(rng.standard_normal(shape) * 2, dt)
            attrs = {}
            if lo != -np.inf:
                attrs["lo"] = lo
            if hi != np.inf:
                attrs["hi"] = hi
            name = "clamp_%s_%d" % (dt, k)
            suite.add(name, unary_graph(name, "Clamp", dt, shape, **attrs),
                      inputs={"x": T(x, dt)}, expected=[T(np.clip(x, lo, hi), dt)])
    int_bounds_list = [(-2.5, 3.7), (-1000.0, 100.0), (-5.0, 300.0), (10.0, 10.0),
                       (-np.inf, 0.0), (7.2, 7.8)]
    for di, dt in enumerate(INT_DTYPES):
        for k in range(2):
            lo, hi = int_bounds_list[(di + 2 * k) % len(int_bounds_list)]
            shape = [(4, 6), (11,), (2, 1, 3), ()][(di + k) % 4]
            x = rand_int(rng, dt, shape, -400, 400)
            lo_i, hi_i = int_bounds(lo, hi, dt)
            ref = np.minimum(np.maximum(x.astype(np.int64), lo_i), hi_i).astype(x.dtype)
            attrs = {"lo": lo, "hi": hi} if lo != -np.inf else {"hi": hi}
            name = "clamp_%s_%d" % (dt, k)
            suite.add(name, unary_graph(name, "Clamp", dt, shape, **attrs),
                      inputs={"x": x}, expected=[ref])
    # NaN stays NaN; infinities clamp.
    x = np.array([np.nan, np.inf, -np.inf, 0.5], np.float32)
    suite.add("clamp_special_f32", unary_graph("c", "Clamp", "f32", [4], lo=-1.0, hi=1.0),
              inputs={"x": x}, expected=[np.array([np.nan, 1.0, -1.0, 0.5], np.float32)])

    x = np.ones(4, np.float32)
    suite.add("err_clamp_lo_gt_hi", unary_graph("c", "Clamp", "f32", [4], lo=2.0, hi=1.0),
              inputs={"x": x}, expect_error="RLX_ERR_INVALID")
    suite.add("err_clamp_lo_nan", unary_graph("c", "Clamp", "f32", [4], lo=float("nan"), hi=1.0),
              inputs={"x": x}, expect_error="RLX_ERR_INVALID")
    suite.add("err_clamp_bool", unary_graph("c", "Clamp", "bool", [4], lo=0.0, hi=1.0),
              inputs={"x": np.ones(4, np.bool_)}, expect_error="RLX_ERR_DTYPE")


# ---------------------------------------------------------------- big tensors

def big_cases(suite, rng):
    """Tensors of many blocks of the chain evaluator (several threads'
    shares, partial last blocks), broadcast along rows, columns and from a
    scalar, short rows taken several to a block, Where by rows, and the
    wide range of every vectorized activation."""
    for ai, act in enumerate(["gelu", "gelu_tanh", "silu", "sigmoid", "tanh", "exp", "log", "erf",
                              "rsqrt", "sign", "round", "relu", "softplus"]):
        dt = ["f32", "f16", "bf16"][ai % 3] if act not in ("exp", "log") else "f32"
        shape = (301, 1001) if dt == "f32" else (97, 515)
        if act in ("log", "rsqrt"):
            v = rng.uniform(1e-3, 50.0, shape)
        elif act == "exp":
            v = rng.uniform(-80.0, 80.0, shape)
        else:
            v = rng.standard_normal(shape) * 4.0
        x = rounded(v, dt)
        name = "act_big_%s_%s" % (act, dt)
        suite.add(name, unary_graph(name, "Activation", dt, shape, act=act),
                  inputs={"x": T(x, dt)}, expected=[T(ACT_REFS[act](x, 0.01), dt)])
    # tails where the vector approximations change branch: +-[0, 12]
    x = np.linspace(-12.0, 12.0, 24001).astype(np.float32)
    for act in ("gelu", "gelu_tanh", "erf", "tanh", "sigmoid", "silu"):
        name = "act_sweep_%s_f32" % act
        suite.add(name, unary_graph(name, "Activation", "f32", [x.size], act=act),
                  inputs={"x": x}, expected=[T(ACT_REFS[act](x.astype(np.float64), 0.01), "f32")])
    for op, dt, sa, sb in [("add", "f32", (512, 769), (769,)), ("mul", "f32", (1000, 300), (1000, 1)),
                           ("sub", "f16", (3, 40000), ()), ("div", "f32", (), (70, 1100)),
                           ("max", "bf16", (64, 1, 600), (1, 50, 600)), ("min", "f32", (1, 90000), (90000,)),
                           ("pow", "f32", (200, 300), (300,))]:
        a, b = float_bin_inputs(rng, op, sa, sb)
        a, b = rounded(a, dt), rounded(b, dt)
        name = "bin_big_%s_%s" % (op, dt)
        suite.add(name, binary_graph(name, "Binary", dt, sa, dt, sb, op=op),
                  inputs={"a": T(a, dt), "b": T(b, dt)}, expected=[T(FLOAT_BIN_REFS[op](a, b), dt)])
    # short rows: several rows per block of the chain evaluator, operands
    # gathered row by row (column broadcast, a middle broadcast, a scalar)
    for op, dt, sa, sb in [("mul", "f32", (7001, 4), (7001, 1)), ("add", "f16", (3000, 3), (1, 3)),
                           ("sub", "f32", (50, 37, 5), (50, 1, 5)), ("mul", "bf16", (999, 2), (1,)),
                           ("div", "f32", (3, 1, 7), (3, 400, 1))]:
        a, b = float_bin_inputs(rng, op, sa, sb)
        a, b = rounded(a, dt), rounded(b, dt)
        name = "bin_short_%s_%s_%s" % (op, dt, "x".join(map(str, sa)))
        suite.add(name, binary_graph(name, "Binary", dt, sa, dt, sb, op=op),
                  inputs={"a": T(a, dt), "b": T(b, dt)}, expected=[T(FLOAT_BIN_REFS[op](a, b), dt)])
    # Where by rows: a causal mask against heads, a per-row mask, a full
    # mask of many threads' shares, one long row cut in pieces; 1-, 2-, 4-
    # and 8-byte elements
    causal = np.tril(np.ones((64, 64), bool))
    for k, (dt, sc, sa, sb, c) in enumerate([("f32", (64, 64), (8, 4, 64, 64), (), causal),
                              ("f32", (8, 4, 64, 1), (8, 4, 64, 64), (), rng.random((8, 4, 64, 1)) < 0.5),
                              ("f16", (301, 257), (301, 257), (1, 257), rng.random((301, 257)) < 0.5),
                              ("f64", (5, 1, 33), (5, 7, 1), (5, 7, 33), rng.random((5, 1, 33)) < 0.5),
                              ("i8", (40, 3), (40, 3), (3,), rng.random((40, 3)) < 0.5),
                              ("bool", (2, 999), (), (2, 999), rng.random((2, 999)) < 0.5),
                              # one long row (split across threads): a relu mask
                              ("f32", (300, 257), (300, 257), (), rng.random((300, 257)) < 0.5)]):
        a, b = where_values(rng, dt, sa), where_values(rng, dt, sb)
        name = "where_big_%d_%s" % (k, dt)
        suite.add(name, where_graph(name, "bool", sc, dt, sa, dt, sb),
                  inputs={"c": c, "a": T(a, dt), "b": T(b, dt)}, expected=[T(np.where(c, a, b), dt)], **EXACT)
    for op, dt, sa, sb in [("lt", "f32", (700, 700), (700,)), ("ne", "bf16", (300, 1), (1, 900))]:
        a, b = rand_plain(rng, dt, sa), rand_plain(rng, dt, sb)
        name = "cmp_big_%s_%s" % (op, dt)
        suite.add(name, binary_graph(name, "Compare", dt, sa, dt, sb, op=op),
                  inputs={"a": T(a, dt), "b": T(b, dt)}, expected=[CMPOPS[op](a, b)])


def u64_cases(suite, rng):
    """u64 is held as int64 bits: add, sub and mul wrap exactly over the whole
    range, order and division hold below 2^63, casts convert the whole range."""
    big = np.array([2 ** 64 - 1, 2 ** 63, 2 ** 63 - 1, 12345678901234567890, 0, 1, 7, 2 ** 40 + 3], np.uint64)
    other = np.array([2, 2 ** 63 + 5, 1, 98765432109876543, 0, 2 ** 64 - 1, 3, 2 ** 33], np.uint64)
    for op in ("add", "sub", "mul"):
        ref = {"add": np.add, "sub": np.subtract, "mul": np.multiply}[op](big, other)
        suite.add("bin_%s_u64" % op, binary_graph("b", "Binary", "u64", [8], "u64", [8], op=op),
                  inputs={"a": big, "b": other}, expected=[ref])
    a = rng.integers(0, 2 ** 62, size=(3, 4), dtype=np.int64).astype(np.uint64)
    b = rng.integers(1, 2 ** 31, size=(4,), dtype=np.int64).astype(np.uint64)
    suite.add("bin_div_u64", binary_graph("b", "Binary", "u64", [3, 4], "u64", [4], op="div"),
              inputs={"a": a, "b": b}, expected=[a // b])
    suite.add("bin_max_u64", binary_graph("b", "Binary", "u64", [3, 4], "u64", [4], op="max"),
              inputs={"a": a, "b": b}, expected=[np.maximum(a, b)])
    x, y = rand_plain(rng, "u8", (5, 3)).astype(np.uint64), rand_plain(rng, "u8", (3,)).astype(np.uint64)
    suite.add("cmp_lt_u64", binary_graph("c", "Compare", "u64", [5, 3], "u64", [3], op="lt"),
              inputs={"a": x, "b": y}, expected=[x < y])
    for to, npt in (("f64", np.float64), ("f32", np.float32)):
        suite.add("cast_u64_%s" % to, unary_graph("c", "Cast", "u64", [8], to=to),
                  inputs={"x": big}, expected=[big.astype(npt)])
    f = np.array([0.0, 1.5, 2.0 ** 63, 1.5 * 2.0 ** 63, 2.0 ** 70, -3.0, 12345.0, 2.0 ** 53], np.float64)
    suite.add("cast_f64_u64_saturate", unary_graph("c", "Cast", "f64", [8], to="u64"),
              inputs={"x": f}, expected=[np.array([0, 1, 2 ** 63, 3 * 2 ** 62, 2 ** 64 - 1, 0, 12345, 2 ** 53],
                                                  np.uint64)])
    suite.add("cast_u64_u32_wraps", unary_graph("c", "Cast", "u64", [8], to="u32"),
              inputs={"x": big}, expected=[big.astype(np.uint32)])


def cases(suite, rng):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        activation_cases(suite, rng)
        binary_cases(suite, rng)
        compare_cases(suite, rng)
        where_cases(suite, rng)
        cast_cases(suite, rng)
        clamp_cases(suite, rng)
        big_cases(suite, rng)
        u64_cases(suite, rng)
