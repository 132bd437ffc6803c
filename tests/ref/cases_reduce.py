"""Op-parity cases of group "reduce": Reduce, ArgMax, ArgMin, Cumsum, TopK,
Softmax, LogSoftmax, LayerNorm, RmsNorm, GroupNorm, BatchNorm.

References are computed here in float64 (int64 for integers) from the values
as stored in the input dtype (rlxcase.round_to), then given in the output
dtype."""
import numpy as np

from rlxcase import FLOAT_DTYPES, RLX_TO_NP, Graph, T, round_to

INT_DTYPES = ["i8", "u8", "i32", "i64"]
INT_RANGE = {"i8": (-128, 128), "u8": (0, 256), "i32": (-2**31, 2**31),
             "i64": (-2**62, 2**62)}
REDUCE_OPS = ["sum", "mean", "max", "min", "prod"]


def floats(rng, shape, dt, lo=None, hi=None):
    """Random values of a float dtype: (input tensor, float64 reference values)."""
    if lo is None:
        a = rng.standard_normal(shape)
    else:
        a = rng.uniform(lo, hi, shape)
    r = np.asarray(round_to(np.asarray(a, np.float32 if dt != "f64" else np.float64), dt),
                   np.float64)
    return T(r, dt), r


def ints(rng, shape, dt, lo=None, hi=None):
    """Random values of an integer dtype (full range unless lo/hi): (tensor, int64 values)."""
    if lo is None:
        lo, hi = INT_RANGE[dt]
    r = rng.integers(lo, hi, shape, dtype=np.int64)
    return T(r, dt), r


def wrap(v, dt):
    """int64 values wrapped into an integer dtype (as C stores them)."""
    return np.asarray(v, np.int64).astype(RLX_TO_NP[dt])


def name_shape(shape):
    return "x".join(str(d) for d in shape) or "scalar"


# ---------------------------------------------------------------- Reduce

def ref_reduce(r, op, axes, keep):
    ax = tuple(axes) if axes else None
    if op == "sum":
        return np.sum(r, axis=ax, keepdims=keep)
    if op == "mean":
        return np.mean(r, axis=ax, keepdims=keep)
    if op == "max":
        return np.max(r, axis=ax, keepdims=keep)
    if op == "min":
        return np.min(r, axis=ax, keepdims=keep)
    return np.prod(r, axis=ax, keepdims=keep)


def reduce_graph(dt, shape, op, axes, keep):
    g = Graph("reduce")
    x = g.input("x", dt, shape)
    # Graph.op's own first parameter is named op, so the "op" attr goes through _emit
    g.outputs(g._emit("Reduce", [x], {"op": op, "axes": list(axes), "keep_dim": keep}))
    return g


REDUCE_SHAPES = [  # (shape, axes, keep_dim)
    ((3, 5), [1], False),
    ((3, 5), [0], True),
    ((2, 3, 4), [0, 2], False),
    ((2, 3, 4), [-1], True),
    ((4, 1, 3), [-1, 0], False),   # unsorted, negative
    ((1, 7, 1), [0, 2], True),
    ((7,), [], False),              # empty list: every axis
    ((2, 3, 5), [], True),
    ((), [], False),                # rank 0: reduces nothing
    ((2, 3, 2, 3), [1, 3], False),
]


def reduce_cases(suite, rng):
    for dt in FLOAT_DTYPES:
        for op in REDUCE_OPS:
            for si, (shape, axes, keep) in enumerate(REDUCE_SHAPES):
                if op == "prod":  # near 1 so products stay in range
                    xt, r = floats(rng, shape, dt, 0.5, 1.5)
                else:
                    xt, r = floats(rng, shape, dt)
                exp = T(ref_reduce(r, op, axes, keep), dt)
                suite.add("reduce_%s_%s_%d_%s" % (op, dt, si, name_shape(shape)),
                          reduce_graph(dt, shape, op, axes, keep), inputs={"x": xt},
                          expected=[exp])
    for dt in INT_DTYPES:
        for op in ["sum", "max", "min", "prod"]:
            for si, (shape, axes, keep) in enumerate(REDUCE_SHAPES):
                # full-range values: sums and products wrap (in int64, then in dt)
                xt, r = ints(rng, shape, dt)
                with np.errstate(over="ignore"):
                    v = ref_reduce(r, op, axes, keep)
                suite.add("reduce_%s_%s_%d_%s" % (op, dt, si, name_shape(shape)),
                          reduce_graph(dt, shape, op, axes, keep), inputs={"x": xt},
                          expected=[T(wrap(v, dt), dt)])
    # int64 sum that wraps past INT64_MAX
    big = np.array([2**62, 2**62, 2**62], np.int64)
    suite.add("reduce_sum_i64_wrap", reduce_graph("i64", [3], "sum", [0], False),
              inputs={"x": big}, expected=[np.array(-(2**62), np.int64)])
    # NaN propagates through max/min and sum
    a = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, -np.inf]], np.float32)
    for op in ["max", "min", "sum"]:
        suite.add("reduce_%s_f32_nan" % op, reduce_graph("f32", [2, 3], op, [1], False),
                  inputs={"x": a}, expected=[ref_reduce(a.astype(np.float64), op, [1],
                                                        False).astype(np.float32)])
    # zero-size reduced axis: sum 0, prod 1, mean NaN (0/0)
    z = np.zeros((2, 0, 3), np.float32)
    for op, v in (("sum", 0.0), ("prod", 1.0), ("mean", np.nan)):
        suite.add("reduce_%s_f32_zero_axis" % op, reduce_graph("f32", [2, 0, 3], op, [1], False),
                  inputs={"x": z}, expected=[np.full((2, 3), v, np.float32)])
    suite.add("reduce_sum_i32_zero_axis", reduce_graph("i32", [0, 4], "sum", [0], True),
              inputs={"x": np.zeros((0, 4), np.int32)}, expected=[np.zeros((1, 4), np.int32)])
    # zero-size kept axis: empty output
    suite.add("reduce_max_f32_zero_kept", reduce_graph("f32", [0, 4], "max", [1], False),
              inputs={"x": np.zeros((0, 4), np.float32)}, expected=[np.zeros((0,), np.float32)])

    errs = [
        ("repeated_axis", "f32", [2, 3], "sum", [1, -1], "RLX_ERR_INVALID"),
        ("repeated_axis_same", "f32", [2, 3], "sum", [0, 0], "RLX_ERR_INVALID"),
        ("axis_out_of_range", "f32", [2, 3], "sum", [2], "RLX_ERR_SHAPE"),
        ("axis_neg_out_of_range", "f32", [2, 3], "max", [-3], "RLX_ERR_SHAPE"),
        ("scalar_axis", "f32", [], "sum", [0], "RLX_ERR_SHAPE"),
        ("mean_int", "i32", [2, 3], "mean", [1], "RLX_ERR_DTYPE"),
        ("bool", "bool", [2, 3], "sum", [1], "RLX_ERR_DTYPE"),
        ("max_zero_axis", "f32", [2, 0], "max", [1], "RLX_ERR_SHAPE"),
        ("min_zero_axis_all", "i32", [0, 3], "min", [], "RLX_ERR_SHAPE"),
    ]
    for name, dt, shape, op, axes, err in errs:
        suite.add("reduce_err_" + name, reduce_graph(dt, shape, op, axes, False),
                  inputs={"x": np.zeros(shape, RLX_TO_NP[dt])}, expect_error=err)


# ---------------------------------------------------------------- ArgMax / ArgMin

def arg_graph(op, dt, shape, axis, keep):
    g = Graph(op.lower())
    x = g.input("x", dt, shape)
    g.outputs(g.op(op, [x], axis=axis, keep_dim=keep))
    return g


def ref_arg(op, r, axis, keep):
    f = np.argmax if op == "ArgMax" else np.argmin
    v = f(r, axis=axis)  # first index on ties; the first NaN wins for both
    if keep:
        v = np.expand_dims(v, axis)
    return np.asarray(v, np.int64)


ARG_SHAPES = [((3, 5), -1, False), ((3, 5), 0, True), ((2, 3, 4), 1, False),
              ((2, 3, 4), -3, True), ((7,), 0, False), ((1, 6, 1), 1, True),
              ((4, 1), 1, False)]


def arg_cases(suite, rng):
    for op in ["ArgMax", "ArgMin"]:
        for dt in FLOAT_DTYPES + INT_DTYPES + ["bool"]:
            for si, (shape, axis, keep) in enumerate(ARG_SHAPES):
                if dt in FLOAT_DTYPES:
                    xt, r = floats(rng, shape, dt)
                    if si == 0:  # ties: few distinct values
                        r = np.asarray(rng.integers(-2, 3, shape), np.float64)
                        xt = T(r, dt)
                elif dt == "bool":
                    r = rng.integers(0, 2, shape).astype(bool)
                    xt = r
                else:
                    lo, hi = (0, 4) if si % 2 == 0 else INT_RANGE[dt]  # ties / full range
                    if dt == "i64" and si % 2:
                        lo, hi = -2**63, 2**63 - 1  # exact compare beyond 2^53
                    xt, r = ints(rng, shape, dt, lo, hi)
                suite.add("%s_%s_%d_%s" % (op.lower(), dt, si, name_shape(shape)),
                          arg_graph(op, dt, shape, axis, keep), inputs={"x": xt},
                          expected=[ref_arg(op, r, axis, keep)])
        # NaN: first NaN wins (NumPy)
        a = np.array([[1.0, np.nan, 5.0, np.nan], [np.inf, -np.inf, 2.0, 0.0],
                      [3.0, 3.0, np.nan, -1.0]], np.float32)
        suite.add("%s_f32_nan" % op.lower(), arg_graph(op, "f32", [3, 4], 1, False),
                  inputs={"x": a}, expected=[ref_arg(op, a, 1, False)])
        # the F32 row loop: many short rows (pool windows) full of ties, a
        # NaN in some, the axis innermost and not
        for shape, axis in [((5001, 4), 1), ((300, 4, 7), 1)]:
            r = np.asarray(rng.integers(-1, 2, shape), np.float32)
            r.reshape(-1)[rng.integers(0, r.size, 40)] = np.nan
            suite.add("%s_f32_rows_%s" % (op.lower(), name_shape(shape)), arg_graph(op, "f32", list(shape), axis, False),
                      inputs={"x": r}, expected=[ref_arg(op, r, axis, False)])
        # i64 values that differ only below double precision
        b = np.array([2**60 + 1, 2**60 + 3, 2**60 + 2, 2**60], np.int64)
        suite.add("%s_i64_exact" % op.lower(), arg_graph(op, "i64", [4], 0, True),
                  inputs={"x": b}, expected=[ref_arg(op, b, 0, True)])
        for name, dt, shape, axis, err in [
                ("scalar", "f32", [], 0, "RLX_ERR_SHAPE"),
                ("axis_out_of_range", "f32", [2, 3], 2, "RLX_ERR_SHAPE"),
                ("axis_neg_out_of_range", "i32", [2, 3], -3, "RLX_ERR_SHAPE"),
                ("zero_axis", "f32", [3, 0], 1, "RLX_ERR_SHAPE")]:
            suite.add("%s_err_%s" % (op.lower(), name), arg_graph(op, dt, shape, axis, False),
                      inputs={"x": np.zeros(shape, RLX_TO_NP[dt])}, expect_error=err)


# ---------------------------------------------------------------- Cumsum

def ref_cumsum(r, axis, exclusive, reverse):
    x = np.moveaxis(r, axis, -1)
    if reverse:
        x = x[..., ::-1]
    c = np.cumsum(x, axis=-1)
    if exclusive:
        c = np.concatenate([np.zeros_like(c[..., :1]), c[..., :-1]], axis=-1)
    if reverse:
        c = c[..., ::-1]
    return np.moveaxis(c, -1, axis)


def cumsum_graph(dt, shape, axis, exclusive, reverse):
    g = Graph("cumsum")
    x = g.input("x", dt, shape)
    g.outputs(g.op("Cumsum", [x], axis=axis, exclusive=exclusive, reverse=reverse))
    return g


CUMSUM_SHAPES = [((3, 5), -1), ((3, 5), 0), ((2, 3, 4), 1), ((7,), 0), ((1, 4, 1), -2),
                 ((2, 1), 1)]


def cumsum_cases(suite, rng):
    for dt in FLOAT_DTYPES + INT_DTYPES:
        for si, (shape, axis) in enumerate(CUMSUM_SHAPES):
            for exclusive in (False, True):
                for reverse in (False, True):
                    if dt in FLOAT_DTYPES:
                        xt, r = floats(rng, shape, dt)
                        exp = T(ref_cumsum(r, axis, exclusive, reverse), dt)
                    else:
                        xt, r = ints(rng, shape, dt)  # full range: running sums wrap
                        with np.errstate(over="ignore"):
                            exp = T(wrap(ref_cumsum(r, axis, exclusive, reverse), dt), dt)
                    suite.add("cumsum_%s_%d_%s%s%s" % (dt, si, name_shape(shape),
                                                       "_excl" if exclusive else "",
                                                       "_rev" if reverse else ""),
                              cumsum_graph(dt, shape, axis, exclusive, reverse),
                              inputs={"x": xt}, expected=[exp])
    suite.add("cumsum_f32_zero_axis", cumsum_graph("f32", [2, 0], 1, False, False),
              inputs={"x": np.zeros((2, 0), np.float32)}, expected=[np.zeros((2, 0), np.float32)])
    for name, dt, shape, axis, err in [("scalar", "f32", [], 0, "RLX_ERR_SHAPE"),
                                       ("axis_out_of_range", "f32", [2, 3], -3, "RLX_ERR_SHAPE"),
                                       ("bool", "bool", [2, 3], 0, "RLX_ERR_DTYPE")]:
        suite.add("cumsum_err_" + name, cumsum_graph(dt, shape, axis, False, False),
                  inputs={"x": np.zeros(shape, RLX_TO_NP[dt])}, expect_error=err)


# ---------------------------------------------------------------- TopK

def ref_topk(r, k, axis):
    """Largest first, NaN above every number, ties by lower index."""
    x = np.moveaxis(np.asarray(r), axis, -1)
    flat = x.reshape(-1, x.shape[-1])
    vals = np.empty((flat.shape[0], k), x.dtype)
    idx = np.empty((flat.shape[0], k), np.int64)
    for i, row in enumerate(flat):
        if row.dtype.kind == "f":
            key = [(0 if np.isnan(v) else 1, 0.0 if np.isnan(v) else -float(v), j)
                   for j, v in enumerate(row)]
        else:  # Python ints: exact for int64
            key = [(1, -int(v), j) for j, v in enumerate(row)]
        order = np.array([t[2] for t in sorted(key)[:k]], np.int64)
        vals[i] = row[order]
        idx[i] = order
    shape = x.shape[:-1] + (k,)
    return (np.moveaxis(vals.reshape(shape), -1, axis),
            np.moveaxis(idx.reshape(shape), -1, axis))


def topk_graph(dt, shape, k, axis):
    g = Graph("topk")
    x = g.input("x", dt, shape)
    t = g.op("TopK", [x], k=k, axis=axis)
    g.outputs(g.get_output(t, 0), g.get_output(t, 1))
    return g


TOPK_SHAPES = [((3, 7), 3, -1), ((3, 7), 1, 1), ((5, 4), 5, 0), ((2, 6, 3), 2, 1),
               ((9,), 9, 0), ((2, 1, 4), 1, -2), ((1, 5), 4, -1)]


def topk_cases(suite, rng):
    for dt in FLOAT_DTYPES + INT_DTYPES:
        for si, (shape, k, axis) in enumerate(TOPK_SHAPES):
            ties = si % 2 == 1
            if dt in FLOAT_DTYPES:
                xt, r = floats(rng, shape, dt)
                if ties:
                    r = np.asarray(rng.integers(-2, 3, shape), np.float64)
                    xt = T(r, dt)
            else:
                lo, hi = (0, 3) if ties else INT_RANGE[dt]
                xt, r = ints(rng, shape, dt, lo, hi)
            vals, idx = ref_topk(r, k, axis)
            if dt in FLOAT_DTYPES:
                vals = T(vals, dt)
            else:
                vals = T(vals.astype(RLX_TO_NP[dt]), dt)
            suite.add("topk_%s_%d_%s_k%d" % (dt, si, name_shape(shape), k),
                      topk_graph(dt, shape, k, axis), inputs={"x": xt},
                      expected=[vals, idx])
    a = np.array([[1.0, np.nan, 5.0, -np.inf, np.nan, 5.0]], np.float32)
    vals, idx = ref_topk(a, 4, 1)
    suite.add("topk_f32_nan_first", topk_graph("f32", [1, 6], 4, 1), inputs={"x": a},
              expected=[vals, idx])
    b = np.array([2**60 + 1, 2**60 + 3, 2**60 + 2, 2**60, 2**60 + 3], np.int64)
    vals, idx = ref_topk(b, 3, 0)
    suite.add("topk_i64_exact", topk_graph("i64", [5], 3, 0), inputs={"x": b},
              expected=[vals, idx])
    for name, dt, shape, k, axis, err in [
            ("k0", "f32", [2, 3], 0, 1, "RLX_ERR_SHAPE"),
            ("k_gt_dim", "f32", [2, 3], 4, 1, "RLX_ERR_SHAPE"),
            ("k_neg", "i32", [2, 3], -1, 1, "RLX_ERR_SHAPE"),
            ("axis_out_of_range", "f32", [2, 3], 1, 2, "RLX_ERR_SHAPE"),
            ("scalar", "f32", [], 1, 0, "RLX_ERR_SHAPE"),
            ("bool", "bool", [2, 3], 1, 1, "RLX_ERR_DTYPE")]:
        suite.add("topk_err_" + name, topk_graph(dt, shape, k, axis),
                  inputs={"x": np.zeros(shape, RLX_TO_NP[dt])}, expect_error=err)


# ---------------------------------------------------------------- Softmax / LogSoftmax

def ref_softmax(r, axis, log):
    with np.errstate(invalid="ignore"):
        m = np.max(r, axis=axis, keepdims=True)
        e = r - m
        s = np.sum(np.exp(e), axis=axis, keepdims=True)
        return e - np.log(s) if log else np.exp(e) / s


def softmax_graph(op, dt, shape, axis):
    g = Graph(op.lower())
    x = g.input("x", dt, shape)
    g.outputs(g.op(op, [x], axis=axis))
    return g


SOFTMAX_SHAPES = [((3, 5), -1), ((3, 5), 0), ((2, 3, 4), 1), ((2, 3, 4), -3), ((7,), 0),
                  ((1,), 0), ((4, 1), -1), ((2, 1, 9), 2)]


def softmax_cases(suite, rng):
    for op in ["Softmax", "LogSoftmax"]:
        log = op == "LogSoftmax"
        for dt in FLOAT_DTYPES:
            for si, (shape, axis) in enumerate(SOFTMAX_SHAPES):
                xt, r = floats(rng, shape, dt)
                suite.add("%s_%s_%d_%s" % (op.lower(), dt, si, name_shape(shape)),
                          softmax_graph(op, dt, shape, axis), inputs={"x": xt},
                          expected=[T(ref_softmax(r, axis, log), dt)])
            # large logits: needs the max subtraction
            xt, r = floats(rng, (3, 6), dt, 500.0, 1000.0)
            suite.add("%s_%s_large" % (op.lower(), dt), softmax_graph(op, dt, [3, 6], 1),
                      inputs={"x": xt}, expected=[T(ref_softmax(r, 1, log), dt)])
        # a row of all -inf gives NaN (NumPy); -inf among finite entries gives 0 / -inf;
        # a NaN makes its row NaN
        a = np.array([[-np.inf, -np.inf, -np.inf], [0.0, -np.inf, 1.0], [np.nan, 1.0, 2.0]],
                     np.float32)
        suite.add("%s_f32_inf_rows" % op.lower(), softmax_graph(op, "f32", [3, 3], -1),
                  inputs={"x": a},
                  expected=[ref_softmax(a.astype(np.float64), -1, log).astype(np.float32)])
        for name, dt, shape, axis, err in [("int", "i32", [2, 3], 1, "RLX_ERR_DTYPE"),
                                           ("scalar", "f32", [], 0, "RLX_ERR_SHAPE"),
                                           ("axis_out_of_range", "f32", [2, 3], 2,
                                            "RLX_ERR_SHAPE")]:
            suite.add("%s_err_%s" % (op.lower(), name), softmax_graph(op, dt, shape, axis),
                      inputs={"x": np.zeros(shape, RLX_TO_NP[dt])}, expect_error=err)


# ---------------------------------------------------------------- LayerNorm / RmsNorm

def ref_layer_norm(r, gm, bt, axis, eps, rms):
    ax = tuple(range(axis % r.ndim, r.ndim))
    if rms:
        return r / np.sqrt(np.mean(r * r, axis=ax, keepdims=True) + eps) * gm + bt
    m = np.mean(r, axis=ax, keepdims=True)
    v = np.mean((r - m) ** 2, axis=ax, keepdims=True)
    return (r - m) / np.sqrt(v + eps) * gm + bt


def norm_graph(op, dts, shapes, **attrs):
    """x is an input; the other inputs are params (both kinds of leaf)."""
    g = Graph(op.lower())
    ins = [g.input("x", dts[0], shapes[0])]
    for i, (dt, s) in enumerate(zip(dts[1:], shapes[1:])):
        ins.append(g.param("p%d" % (i + 1), dt, s))
    g.outputs(g.op(op, ins, **attrs))
    return g


LN_SHAPES = [((3, 8), -1), ((2, 3, 4), 1), ((2, 3, 4), -1), ((5,), 0), ((2, 1, 7), -1),
             ((4, 1), -1), ((2, 3, 4), 0), ((1, 2, 3, 5), -2)]


def layer_norm_cases(suite, rng):
    for op in ["LayerNorm", "RmsNorm"]:
        rms = op == "RmsNorm"
        for dt in FLOAT_DTYPES:
            for si, (shape, axis) in enumerate(LN_SHAPES):
                tail = shape[axis % len(shape):]
                eps = 1e-5 if si % 2 == 0 else 1e-3
                if si == 2:  # a clearly non-zero mean
                    xt, r = floats(rng, shape, dt, -0.5, 1.5)
                else:
                    xt, r = floats(rng, shape, dt)
                gt, gm = floats(rng, tail, dt, 0.5, 1.5)
                bt, bv = floats(rng, tail, dt)
                exp = T(ref_layer_norm(r, gm, bv, axis, eps, rms), dt)
                suite.add("%s_%s_%d_%s" % (op.lower(), dt, si, name_shape(shape)),
                          norm_graph(op, [dt] * 3, [shape, tail, tail], axis=axis, eps=eps),
                          inputs={"x": xt}, params={"p1": gt, "p2": bt}, expected=[exp])
        for name, dts, shapes, axis, eps, err in [
                ("gamma_shape", ["f32"] * 3, [[2, 3], [2], [3]], -1, 1e-5, "RLX_ERR_SHAPE"),
                ("beta_shape", ["f32"] * 3, [[2, 3], [3], [1, 3]], -1, 1e-5, "RLX_ERR_SHAPE"),
                ("gamma_broadcast", ["f32"] * 3, [[2, 3], [3], [3]], 0, 1e-5, "RLX_ERR_SHAPE"),
                ("dtype_mismatch", ["f32", "f16", "f32"], [[2, 3], [3], [3]], -1, 1e-5,
                 "RLX_ERR_DTYPE"),
                ("int", ["i32"] * 3, [[2, 3], [3], [3]], -1, 1e-5, "RLX_ERR_DTYPE"),
                ("axis_out_of_range", ["f32"] * 3, [[2, 3], [3], [3]], 2, 1e-5,
                 "RLX_ERR_SHAPE"),
                ("scalar", ["f32"] * 3, [[], [], []], 0, 1e-5, "RLX_ERR_SHAPE"),
                ("eps_negative", ["f32"] * 3, [[2, 3], [3], [3]], -1, -1.0, "RLX_ERR_INVALID")]:
            params = {"p%d" % (i + 1): np.zeros(s, RLX_TO_NP[d])
                      for i, (d, s) in enumerate(zip(dts[1:], shapes[1:]))}
            suite.add("%s_err_%s" % (op.lower(), name),
                      norm_graph(op, dts, shapes, axis=axis, eps=eps),
                      inputs={"x": np.zeros(shapes[0], RLX_TO_NP[dts[0]])}, params=params,
                      expect_error=err)


# ---------------------------------------------------------------- GroupNorm / BatchNorm

def ref_group_norm(r, gm, bt, groups, eps):
    n, c = r.shape[:2]
    x = r.reshape(n, groups, -1)
    m = x.mean(axis=-1, keepdims=True)
    v = ((x - m) ** 2).mean(axis=-1, keepdims=True)
    y = ((x - m) / np.sqrt(v + eps)).reshape(r.shape)
    cs = (1, c) + (1,) * (r.ndim - 2)
    return y * gm.reshape(cs) + bt.reshape(cs)


def ref_batch_norm(r, mean, var, gm, bt, eps):
    cs = (1, r.shape[1]) + (1,) * (r.ndim - 2)
    return (r - mean.reshape(cs)) / np.sqrt(var.reshape(cs) + eps) * gm.reshape(cs) + \
        bt.reshape(cs)


GN_SHAPES = [((2, 6, 5), 3), ((1, 4, 2, 3), 2), ((3, 4), 4), ((2, 5, 3), 1), ((1, 1, 7), 1),
             ((2, 8, 1, 1), 8)]
BN_SHAPES = [(4, 3), (2, 3, 5), (2, 3, 2, 2), (1, 1, 4), (3, 5, 1)]


def channel_norm_cases(suite, rng):
    for dt in FLOAT_DTYPES:
        for si, (shape, groups) in enumerate(GN_SHAPES):
            c = shape[1]
            eps = 1e-5 if si % 2 == 0 else 1e-2
            xt, r = floats(rng, shape, dt)
            gt, gm = floats(rng, (c,), dt, 0.5, 1.5)
            bt, bv = floats(rng, (c,), dt)
            suite.add("groupnorm_%s_%d_%s_g%d" % (dt, si, name_shape(shape), groups),
                      norm_graph("GroupNorm", [dt] * 3, [shape, [c], [c]], groups=groups,
                                 eps=eps),
                      inputs={"x": xt}, params={"p1": gt, "p2": bt},
                      expected=[T(ref_group_norm(r, gm, bv, groups, eps), dt)])
        for si, shape in enumerate(BN_SHAPES):
            c = shape[1]
            eps = 1e-5 if si % 2 == 0 else 1e-3
            xt, r = floats(rng, shape, dt)
            mt, mv = floats(rng, (c,), dt)
            vt, vv = floats(rng, (c,), dt, 0.5, 2.0)
            gt, gm = floats(rng, (c,), dt, 0.5, 1.5)
            bt, bv = floats(rng, (c,), dt)
            suite.add("batchnorm_%s_%d_%s" % (dt, si, name_shape(shape)),
                      norm_graph("BatchNorm", [dt] * 5, [shape] + [[c]] * 4, eps=eps),
                      inputs={"x": xt}, params={"p1": mt, "p2": vt, "p3": gt, "p4": bt},
                      expected=[T(ref_batch_norm(r, mv, vv, gm, bv, eps), dt)])
    for name, dts, shapes, groups, eps, err in [
            ("indivisible", ["f32"] * 3, [[2, 6, 4], [6], [6]], 4, 1e-5, "RLX_ERR_SHAPE"),
            ("groups0", ["f32"] * 3, [[2, 6, 4], [6], [6]], 0, 1e-5, "RLX_ERR_INVALID"),
            ("gamma_shape", ["f32"] * 3, [[2, 6, 4], [4], [6]], 2, 1e-5, "RLX_ERR_SHAPE"),
            ("rank1", ["f32"] * 3, [[6], [6], [6]], 2, 1e-5, "RLX_ERR_SHAPE"),
            ("dtype_mismatch", ["f16", "f16", "f32"], [[2, 6, 4], [6], [6]], 2, 1e-5,
             "RLX_ERR_DTYPE"),
            ("int", ["i8"] * 3, [[2, 6, 4], [6], [6]], 2, 1e-5, "RLX_ERR_DTYPE"),
            ("eps_nan", ["f32"] * 3, [[2, 6, 4], [6], [6]], 2, float("nan"),
             "RLX_ERR_INVALID")]:
        params = {"p%d" % (i + 1): np.zeros(s, RLX_TO_NP[d])
                  for i, (d, s) in enumerate(zip(dts[1:], shapes[1:]))}
        suite.add("groupnorm_err_" + name,
                  norm_graph("GroupNorm", dts, shapes, groups=groups, eps=eps),
                  inputs={"x": np.zeros(shapes[0], RLX_TO_NP[dts[0]])}, params=params,
                  expect_error=err)
    for name, dts, shapes, eps, err in [
            ("mean_shape", ["f32"] * 5, [[2, 3, 4], [4], [3], [3], [3]], 1e-5, "RLX_ERR_SHAPE"),
            ("var_rank", ["f32"] * 5, [[2, 3, 4], [3], [1, 3], [3], [3]], 1e-5, "RLX_ERR_SHAPE"),
            ("rank1", ["f32"] * 5, [[3], [3], [3], [3], [3]], 1e-5, "RLX_ERR_SHAPE"),
            ("dtype_mismatch", ["f32"] * 4 + ["f64"], [[2, 3], [3], [3], [3], [3]], 1e-5,
             "RLX_ERR_DTYPE"),
            ("int", ["i32"] * 5, [[2, 3], [3], [3], [3], [3]], 1e-5, "RLX_ERR_DTYPE"),
            ("eps_inf", ["f32"] * 5, [[2, 3], [3], [3], [3], [3]], float("inf"),
             "RLX_ERR_INVALID")]:
        params = {"p%d" % (i + 1): np.zeros(s, RLX_TO_NP[d])
                  for i, (d, s) in enumerate(zip(dts[1:], shapes[1:]))}
        suite.add("batchnorm_err_" + name, norm_graph("BatchNorm", dts, shapes, eps=eps),
                  inputs={"x": np.zeros(shapes[0], RLX_TO_NP[dts[0]])}, params=params,
                  expect_error=err)


# ---------------------------------------------------------------- symbolic dims

def symbolic_cases(suite, rng):
    """Graphs with a symbolic dim S, bound to concrete sizes when run."""
    for s_val in (1, 5):
        a = rng.standard_normal((2, s_val)).astype(np.float32)
        g = Graph("sym_reduce")
        x = g.input("x", "f32", [2, "S"])
        g.outputs(g._emit("Reduce", [x], {"op": "sum", "axes": [-1], "keep_dim": True}),
                  g._emit("Reduce", [x], {"op": "max", "axes": [0], "keep_dim": False}))
        suite.add("sym_reduce_S%d" % s_val, g, inputs={"x": a},
                  expected=[a.astype(np.float64).sum(-1, keepdims=True).astype(np.float32),
                            a.max(0)])
        g = Graph("sym_softmax")
        x = g.input("x", "f32", [2, "S"])
        g.outputs(g.op("Softmax", [x], axis=-1), g.op("ArgMax", [x], axis=1, keep_dim=False),
                  g.op("Cumsum", [x], axis=1, exclusive=False, reverse=True))
        suite.add("sym_softmax_argmax_cumsum_S%d" % s_val, g, inputs={"x": a},
                  expected=[ref_softmax(a.astype(np.float64), -1, False).astype(np.float32),
                            np.argmax(a, 1).astype(np.int64),
                            ref_cumsum(a.astype(np.float64), 1, False, True).astype(np.float32)])
        b = rng.standard_normal((s_val, 4)).astype(np.float32)
        gm = rng.uniform(0.5, 1.5, 4).astype(np.float32)
        bt = rng.standard_normal(4).astype(np.float32)
        g = Graph("sym_layer_norm")
        x = g.input("x", "f32", ["S", 4])
        pg, pb = g.param("p1", "f32", [4]), g.param("p2", "f32", [4])
        t = g.op("TopK", [x], k=2, axis=-1)
        g.outputs(g.op("LayerNorm", [x, pg, pb], axis=-1, eps=1e-5), g.get_output(t, 1))
        suite.add("sym_layer_norm_topk_S%d" % s_val, g, inputs={"x": b},
                  params={"p1": gm, "p2": bt},
                  expected=[ref_layer_norm(b.astype(np.float64), gm, bt, -1, 1e-5,
                                           False).astype(np.float32),
                            ref_topk(b, 2, -1)[1]])
    # errors found only once S is bound
    g = Graph("sym_topk_err")
    x = g.input("x", "f32", [2, "S"])
    g.outputs(g.get_output(g.op("TopK", [x], k=4, axis=1), 0))
    suite.add("sym_err_topk_k_gt_S", g, inputs={"x": np.zeros((2, 3), np.float32)},
              expect_error="RLX_ERR_SHAPE")
    g = Graph("sym_max_err")
    x = g.input("x", "f32", [2, "S"])
    g.outputs(g._emit("Reduce", [x], {"op": "max", "axes": [1], "keep_dim": False}))
    suite.add("sym_err_max_S0", g, inputs={"x": np.zeros((2, 0), np.float32)},
              expect_error="RLX_ERR_SHAPE")
    g = Graph("sym_ln_err")
    x = g.input("x", "f32", [2, "S"])
    pg, pb = g.param("p1", "f32", [4]), g.param("p2", "f32", [4])
    g.outputs(g.op("LayerNorm", [x, pg, pb], axis=-1, eps=1e-5))
    suite.add("sym_err_layer_norm_S3", g, inputs={"x": np.zeros((2, 3), np.float32)},
              params={"p1": np.ones(4, np.float32), "p2": np.zeros(4, np.float32)},
              expect_error="RLX_ERR_SHAPE")


# ---------------------------------------------------------------- big rows

def big_cases(suite, rng):
    """Rows long enough for the threaded, chunked and column-blocked paths
    of the vectorized kernels (rows split into chunks, column blocks of a
    slab, several threads' shares)."""
    for dt, shape, axes, op in [
            ("f32", (8, 70000), [1], "sum"), ("f32", (3, 70001), [-1], "mean"),
            ("f32", (5, 66000), [1], "max"), ("f16", (4, 40000), [1], "min"),
            ("bf16", (6, 9000), [1], "mean"), ("f32", (3000, 300), [0], "sum"),
            ("f32", (2999, 301), [0], "max"), ("f16", (1000, 260), [0], "mean"),
            ("f32", (4, 50, 60, 7), [1, 2], "sum"), ("bf16", (4, 50, 60, 7), [2, 1], "min"),
            ("f32", (6, 1, 5000), [0, 2], "mean"), ("f32", (1, 200000), [], "sum")]:
        xt, r = floats(rng, shape, dt)
        suite.add("reduce_big_%s_%s_%s" % (op, dt, name_shape(shape)),
                  reduce_graph(dt, shape, op, axes, False), inputs={"x": xt},
                  expected=[T(ref_reduce(r, op, axes, False), dt)])
    # a NaN in one column / one row chunk propagates only there
    a = rng.standard_normal((500, 300)).astype(np.float32)
    a[123, 77] = np.nan
    b = rng.standard_normal((2, 70000)).astype(np.float32)
    b[1, 40000] = np.nan
    for op in ("max", "min", "sum"):
        suite.add("reduce_big_%s_nan_col" % op, reduce_graph("f32", [500, 300], op, [0], False),
                  inputs={"x": a}, expected=[ref_reduce(a.astype(np.float64), op, [0], False)
                                             .astype(np.float32)])
        suite.add("reduce_big_%s_nan_row" % op, reduce_graph("f32", [2, 70000], op, [1], False),
                  inputs={"x": b}, expected=[ref_reduce(b.astype(np.float64), op, [1], False)
                                             .astype(np.float32)])
    for op in ("Softmax", "LogSoftmax"):
        log = op == "LogSoftmax"
        for dt, shape, axis, lo, hi in [("f32", (16, 5000), -1, None, None),
                                        ("f16", (8, 3000), 1, None, None),
                                        ("f32", (2, 300, 100), 1, None, None),
                                        ("bf16", (3, 200, 70), 1, None, None),
                                        ("f32", (40, 2000), 1, 500.0, 1000.0),
                                        ("f32", (700, 3), 0, None, None)]:
            xt, r = floats(rng, shape, dt, lo, hi)
            suite.add("%s_big_%s_%s_%d" % (op.lower(), dt, name_shape(shape), axis),
                      softmax_graph(op, dt, list(shape), axis), inputs={"x": xt},
                      expected=[T(ref_softmax(r, axis, log), dt)])
    for op, dt, shape, axis, lo, hi in [("LayerNorm", "f32", (64, 4096), -1, 5.0, 7.0),
                                        ("LayerNorm", "f16", (16, 3000), -1, None, None),
                                        ("LayerNorm", "f32", (4, 30, 700), -2, -1.0, 3.0),
                                        ("RmsNorm", "bf16", (32, 3000), -1, None, None),
                                        ("RmsNorm", "f32", (48, 4097), -1, None, None)]:
        rms = op == "RmsNorm"
        tail = shape[axis % len(shape):]
        xt, r = floats(rng, shape, dt, lo, hi)
        gt, gm = floats(rng, tail, dt, 0.5, 1.5)
        bt, bv = floats(rng, tail, dt)
        suite.add("%s_big_%s_%s" % (op.lower(), dt, name_shape(shape)),
                  norm_graph(op, [dt] * 3, [list(shape), list(tail), list(tail)], axis=axis, eps=1e-5),
                  inputs={"x": xt}, params={"p1": gt, "p2": bt},
                  expected=[T(ref_layer_norm(r, gm, bv, axis, 1e-5, rms), dt)])


def cases(suite, rng):
    reduce_cases(suite, rng)
    big_cases(suite, rng)
    arg_cases(suite, rng)
    cumsum_cases(suite, rng)
    topk_cases(suite, rng)
    softmax_cases(suite, rng)
    layer_norm_cases(suite, rng)
    channel_norm_cases(suite, rng)
    symbolic_cases(suite, rng)
