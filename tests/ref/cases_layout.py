"""Op-parity cases of group "layout": Reshape, Expand, Transpose, Narrow,
Slice, Concat, Pad, Gather, ScatterAdd, UpdateSlice, Iota, OneHot, Tri,
StopGradient and GetOutput.

Data movement is exact, so most references are NumPy's own op applied to
the values as stored in the dtype (rlxcase.round_to); ScatterAdd rounds to
the dtype after every add, as np.add.at does."""
import numpy as np

from rlxcase import RLX_TO_NP, Graph, T, round_to

ALL_DTYPES = ["f32", "f16", "bf16", "f64", "i8", "u8", "i32", "i64", "bool"]
NUMERIC_DTYPES = ["f32", "f16", "bf16", "f64", "i8", "u8", "i32", "i64"]
FLOATS = ["f32", "f16", "bf16", "f64"]
INT_RANGE = {"i8": (-128, 128), "u8": (0, 256), "i32": (-2**31, 2**31),
             "i64": (-2**62, 2**62)}
I64_MAX = 2**63 - 1


def values(rng, dt, shape):
    """Random values exactly representable in dt (float64 / int64 / bool array)."""
    if dt == "bool":
        return rng.integers(0, 2, shape).astype(np.bool_)
    if dt in INT_RANGE:
        lo, hi = INT_RANGE[dt]
        return rng.integers(lo, hi, shape, dtype=np.int64)
    a = rng.standard_normal(shape) * 4
    return np.asarray(round_to(a.astype(np.float64 if dt == "f64" else np.float32), dt),
                      np.float64)


def tensor(v, dt):
    return T(np.asarray(v), dt)


def sname(shape):
    return "x".join(str(d) for d in shape) or "scalar"


def unary_graph(name, dt, shape, op, **attrs):
    g = Graph(name)
    x = g.input("x", dt, shape)
    g.outputs(g.op(op, [x], **attrs))
    return g


def add_unary(suite, rng, name, dt, shape, op, ref, **attrs):
    """One case of a one-input op whose reference is ref(values)."""
    v = values(rng, dt, shape)
    g = unary_graph(name, dt, shape, op, **attrs)
    suite.add(name, g, inputs={"x": tensor(v, dt)}, expected=[tensor(ref(v), dt)])


def add_error(suite, name, g, status, inputs=None):
    suite.add(name, g, inputs=inputs or {}, expect_error=status)


# ---------------------------------------------------------------- Reshape

def reshape_cases(suite, rng):
    for dt in ALL_DTYPES:
        add_unary(suite, rng, "reshape_%s_2x3x4_to_4x-1" % dt, dt, [2, 3, 4], "Reshape",
                  lambda v: v.reshape(4, -1), dims=[4, -1])
    plain = [([], [1, 1]), ([1], []), ([7], [-1]), ([5, 1], [1, 5]), ([0, 3], [3, 0]),
             ([0, 3], [-1, 3]), ([2, 1, 3, 1, 2, 1, 1, 2], [-1, 2, 3]),
             ([24], [1, 2, 1, 3, 1, 2, 1, 2]), ([3, 5, 7], [7, -1, 1])]
    for shape, dims in plain:
        name = "reshape_f32_%s_to_%s" % (sname(shape), sname(dims))
        add_unary(suite, rng, name, "f32", shape, "Reshape",
                  lambda v, dims=dims: v.reshape(dims), dims=dims)

    # Symbolic dims: S cancels against S; a -1 next to S is derived from it
    # (an anonymous dim until S is bound).
    for xshape, concrete, dims in (([4, "S"], (4, 3), [2, "S", 2]),
                                   (["S", 4], (3, 4), ["S", 2, 2]),
                                   (["S", 4], (5, 4), [-1, 2]),
                                   (["S", 4], (3, 4), ["S", -1])):
        g = Graph("reshape_sym")
        x = g.input("x", "f32", xshape)
        g.outputs(g.op("Reshape", [x], dims=dims))
        v = values(rng, "f32", concrete)
        bound = [concrete[xshape.index("S")] if d == "S" else d for d in dims]
        suite.add("reshape_sym_%s_to_%s" % (sname(xshape), sname(dims)), g,
                  inputs={"x": tensor(v, "f32")}, expected=[tensor(v.reshape(bound), "f32")])

    # Block dtypes (GGUF params) reshape as bytes when the last dim is kept.
    for dt, block, nbytes in (("q4_0", 32, 18), ("q6_k", 256, 210)):
        for dims in ([2, 2, block], [-1, block]):
            g = Graph("reshape_block")
            w = g.param("w", dt, [4, block])
            g.outputs(g.op("Reshape", [w], dims=dims))
            raw = rng.integers(0, 256, 4 * nbytes, dtype=np.uint8).tobytes()
            out_shape = [2, 2, block] if len(dims) == 3 else [4, block]
            suite.add("reshape_%s_to_%s" % (dt, sname(dims)), g,
                      params={"w": T.raw(raw, dt, [4, block])},
                      expected=[T.raw(raw, dt, out_shape)])

    add_error(suite, "reshape_err_count", unary_graph("e", "f32", [2, 3], "Reshape", dims=[4, 2]),
              "RLX_ERR_SHAPE")
    add_error(suite, "reshape_err_count_sym",
              unary_graph("e", "f32", ["S", 4], "Reshape", dims=["S", 5]), "RLX_ERR_SHAPE")
    add_error(suite, "reshape_err_two_infer",
              unary_graph("e", "f32", [2, 3], "Reshape", dims=[-1, -1]), "RLX_ERR_INVALID")
    add_error(suite, "reshape_err_infer_indivisible",
              unary_graph("e", "f32", [2, 3], "Reshape", dims=[4, -1]), "RLX_ERR_SHAPE")
    add_error(suite, "reshape_err_infer_zero",
              unary_graph("e", "f32", [0, 3], "Reshape", dims=[0, -1]), "RLX_ERR_SHAPE")
    add_error(suite, "reshape_err_negative_dim",
              unary_graph("e", "f32", [2, 3], "Reshape", dims=[-2, -3]), "RLX_ERR_INVALID")
    g = Graph("e")
    w = g.param("w", "q4_0", [4, 32])
    g.outputs(g.op("Reshape", [w], dims=[128]))
    add_error(suite, "reshape_err_block_last_dim", g, "RLX_ERR_SHAPE")


# ---------------------------------------------------------------- Expand, Transpose

def expand_cases(suite, rng):
    for dt in ALL_DTYPES:
        add_unary(suite, rng, "expand_%s_3x1_to_2x3x4" % dt, dt, [3, 1], "Expand",
                  lambda v: np.broadcast_to(v, (2, 3, 4)), dims=[2, 3, 4])
    for shape, dims in (([], [2, 3]), ([1], [5]), ([2, 1, 3], [2, 0, 3]), ([4], [4]),
                        ([1, 1, 1], [1, 7, 1, 3]), ([3, 1, 5], [2, 1, 3, 6, 5])):
        add_unary(suite, rng, "expand_f64_%s_to_%s" % (sname(shape), sname(dims)), "f64", shape,
                  "Expand", lambda v, dims=dims: np.broadcast_to(v, dims), dims=dims)
    add_error(suite, "expand_err_incompatible",
              unary_graph("e", "f32", [3], "Expand", dims=[4]), "RLX_ERR_SHAPE")
    add_error(suite, "expand_err_lower_rank",
              unary_graph("e", "f32", [2, 3], "Expand", dims=[3]), "RLX_ERR_SHAPE")


def transpose_cases(suite, rng):
    for dt in ALL_DTYPES:
        add_unary(suite, rng, "transpose_%s_2x3x5" % dt, dt, [2, 3, 5], "Transpose",
                  lambda v: np.transpose(v, (2, 0, 1)), perm=[2, 0, 1])
    shape8 = [2, 1, 3, 2, 1, 2, 3, 2]
    for i in range(3):
        perm = [int(p) for p in rng.permutation(8)]
        add_unary(suite, rng, "transpose_i32_rank8_%d" % i, "i32", shape8, "Transpose",
                  lambda v, perm=perm: np.transpose(v, perm), perm=perm)
    for shape, perm in (([], []), ([7], [0]), ([4, 1], [-1, -2]), ([3, 4], [1, 0]),
                        ([2, 3, 1, 5], [3, -2, 0, 1])):
        ref_perm = [p % len(shape) for p in perm]
        add_unary(suite, rng, "transpose_f32_%s_%s" % (sname(shape), "_".join(map(str, perm))),
                  "f32", shape, "Transpose",
                  lambda v, rp=ref_perm: np.transpose(v, rp), perm=perm)
    add_error(suite, "transpose_err_repeat",
              unary_graph("e", "f32", [2, 3], "Transpose", perm=[0, 0]), "RLX_ERR_INVALID")
    add_error(suite, "transpose_err_range",
              unary_graph("e", "f32", [2, 3], "Transpose", perm=[0, 2]), "RLX_ERR_INVALID")
    add_error(suite, "transpose_err_length",
              unary_graph("e", "f32", [2, 3], "Transpose", perm=[1, 0, 2]), "RLX_ERR_INVALID")


# ---------------------------------------------------------------- Narrow, Slice

def narrow_cases(suite, rng):
    for dt in ALL_DTYPES:
        add_unary(suite, rng, "narrow_%s_axis1" % dt, dt, [3, 7, 2], "Narrow",
                  lambda v: v[:, 2:6], axis=1, start=2, len=4)
    for shape, axis, start, ln in (([9], 0, 0, 9), ([9], 0, -3, 3), ([4, 5], -1, 4, 1),
                                   ([4, 5], 0, 1, 0), ([2, 3, 1, 5], -2, 0, 1),
                                   ([2, 3, 4], -3, -2, 2)):
        def ref(v, axis=axis, start=start, ln=ln):
            s = start % v.shape[axis] if start < 0 else start
            return np.take(v, range(s, s + ln), axis=axis)
        add_unary(suite, rng, "narrow_f32_%s_a%d_s%d_l%d" % (sname(shape), axis, start, ln), "f32",
                  shape, "Narrow", ref, axis=axis, start=start, len=ln)
    # negative start on a symbolic dim: normalized when S is bound
    g = Graph("narrow_sym")
    x = g.input("x", "f32", [2, "S"])
    g.outputs(g.op("Narrow", [x], axis=1, start=-2, len=2))
    v = values(rng, "f32", (2, 5))
    suite.add("narrow_sym_negative_start", g, inputs={"x": tensor(v, "f32")},
              expected=[tensor(v[:, 3:5], "f32")])
    add_error(suite, "narrow_err_past_end",
              unary_graph("e", "f32", [4, 5], "Narrow", axis=1, start=3, len=3), "RLX_ERR_SHAPE")
    add_error(suite, "narrow_err_start",
              unary_graph("e", "f32", [4, 5], "Narrow", axis=0, start=-5, len=1), "RLX_ERR_SHAPE")
    add_error(suite, "narrow_err_axis",
              unary_graph("e", "f32", [4, 5], "Narrow", axis=2, start=0, len=1), "RLX_ERR_SHAPE")
    add_error(suite, "narrow_err_len",
              unary_graph("e", "f32", [4, 5], "Narrow", axis=0, start=0, len=-1), "RLX_ERR_SHAPE")


def slice_cases(suite, rng):
    for dt in ALL_DTYPES:
        add_unary(suite, rng, "slice_%s_steps" % dt, dt, [5, 7], "Slice",
                  lambda v: v[1:5:2, 0:7:3], starts=[1, 0], ends=[5, 7], steps=[2, 3])
    for shape, st, en, sp in (([], [], [], []),
                              ([9], [-4], [100], [1]),
                              ([9], [-100], [-2], [4]),
                              ([9], [7], [3], [1]),
                              ([9], [0], [I64_MAX], [I64_MAX]),
                              ([6, 1, 5], [0, 0, -1], [6, 1, 0], [5, 1, 1]),
                              ([4, 5, 6], [1, -3, 0], [-1, I64_MAX, 6], [1, 1, 5]),
                              ([2, 3, 2, 3, 2], [0, 1, 0, 2, 1], [2, 3, 1, 3, 2], [1, 1, 1, 1, 1])):
        def ref(v, st=st, en=en, sp=sp):
            return v[tuple(slice(a, b, c) for a, b, c in zip(st, en, sp))]
        add_unary(suite, rng, "slice_i64_%s_%s" % (sname(shape), "_".join(map(str, st + sp))),
                  "i64", shape, "Slice", ref, starts=st, ends=en, steps=sp)
    g = Graph("slice_sym")
    x = g.input("x", "f32", ["S", 3])
    g.outputs(g.op("Slice", [x], starts=[-3, 0], ends=[I64_MAX, 3], steps=[2, 2]))
    v = values(rng, "f32", (7, 3))
    suite.add("slice_sym", g, inputs={"x": tensor(v, "f32")},
              expected=[tensor(v[-3::2, 0:3:2], "f32")])
    add_error(suite, "slice_err_step0",
              unary_graph("e", "f32", [4], "Slice", starts=[0], ends=[4], steps=[0]),
              "RLX_ERR_INVALID")
    add_error(suite, "slice_err_step_negative",
              unary_graph("e", "f32", [4], "Slice", starts=[3], ends=[0], steps=[-1]),
              "RLX_ERR_INVALID")
    add_error(suite, "slice_err_length",
              unary_graph("e", "f32", [4, 2], "Slice", starts=[0], ends=[4], steps=[1]),
              "RLX_ERR_INVALID")


# ---------------------------------------------------------------- Concat, Pad

def concat_graph(name, dts, shapes, axis):
    g = Graph(name)
    xs = [g.input("x%d" % i, dt, s) for i, (dt, s) in enumerate(zip(dts, shapes))]
    g.outputs(g.op("Concat", xs, axis=axis))
    return g


def add_concat(suite, rng, name, dt, shapes, axis):
    vs = [values(rng, dt, s) for s in shapes]
    g = concat_graph(name, [dt] * len(shapes), shapes, axis)
    suite.add(name, g, inputs={"x%d" % i: tensor(v, dt) for i, v in enumerate(vs)},
              expected=[tensor(np.concatenate(vs, axis=axis), dt)])


def concat_cases(suite, rng):
    for dt in ALL_DTYPES:
        add_concat(suite, rng, "concat_%s_axis1" % dt, dt, [[2, 3, 4], [2, 1, 4], [2, 5, 4]], 1)
    for shapes, axis in (([[3]], 0), ([[3], [4]], 0), ([[2, 3], [2, 0], [2, 5]], -1),
                         ([[1, 2, 3], [4, 2, 3]], 0), ([[2, 1, 1, 3], [2, 1, 2, 3]], -2)):
        add_concat(suite, rng, "concat_f16_%s_a%d" % ("_".join(map(sname, shapes)), axis), "f16",
                   shapes, axis)
    add_error(suite, "concat_err_dtype",
              concat_graph("e", ["f32", "f16"], [[2, 3], [2, 3]], 0), "RLX_ERR_DTYPE")
    add_error(suite, "concat_err_shape",
              concat_graph("e", ["f32", "f32"], [[2, 3], [3, 3]], 1), "RLX_ERR_SHAPE")
    add_error(suite, "concat_err_rank",
              concat_graph("e", ["f32", "f32"], [[2, 3], [2, 3, 1]], 0), "RLX_ERR_SHAPE")
    add_error(suite, "concat_err_axis",
              concat_graph("e", ["f32", "f32"], [[2, 3], [2, 3]], 2), "RLX_ERR_SHAPE")


def pad_fill(value, dt):
    """The pad value as stored in dt: integers truncate and saturate, bool is != 0."""
    if dt == "bool":
        return value != 0
    if dt in INT_RANGE:
        lo, hi = INT_RANGE[dt]
        return int(min(max(np.trunc(value), lo), hi - 1))
    return value


def pad_ref(v, before, after, fill):
    if not before:  # rank 0: nothing to pad (np.pad rejects an empty pad_width)
        return v.copy()
    return np.pad(v, list(zip(before, after)), constant_values=fill)


def pad_cases(suite, rng):
    for dt in ALL_DTYPES:
        for value in (0.0, -3.75, 300.0):
            before, after = [1, 0], [2, 3]
            add_unary(suite, rng, "pad_%s_%g" % (dt, value), dt, [3, 2], "Pad",
                      lambda v, fill=pad_fill(value, dt): pad_ref(v, [1, 0], [2, 3], fill),
                      before=before, after=after, value=value)
    for shape, before, after in (([], [], []), ([5], [0], [0]), ([1, 1], [2, 0], [0, 2]),
                                 ([0, 3], [1, 1], [1, 0]),
                                 ([2, 3, 1, 2], [1, 0, 2, 0], [0, 1, 0, 1])):
        add_unary(suite, rng, "pad_f32_%s_%s_%s" % (sname(shape), sname(before), sname(after)),
                  "f32", shape, "Pad",
                  lambda v, b=before, a=after: pad_ref(v, b, a, 1.5),
                  before=before, after=after, value=1.5)
    add_error(suite, "pad_err_negative",
              unary_graph("e", "f32", [3], "Pad", before=[-1], after=[0], value=0.0),
              "RLX_ERR_INVALID")
    add_error(suite, "pad_err_length",
              unary_graph("e", "f32", [3, 2], "Pad", before=[1], after=[1], value=0.0),
              "RLX_ERR_INVALID")


# ---------------------------------------------------------------- Gather, ScatterAdd

def index_tensor(idx, dt):
    return T(np.asarray(idx, np.float64 if dt in FLOATS else np.int64), dt)


def gather_graph(name, dt, tshape, idt, ishape, axis):
    g = Graph(name)
    t = g.input("table", dt, tshape)
    i = g.input("idx", idt, ishape)
    g.outputs(g.op("Gather", [t, i], axis=axis))
    return g


def add_gather(suite, rng, name, dt, tshape, idt, idx, axis):
    idx = np.asarray(idx)
    v = values(rng, dt, tshape)
    g = gather_graph(name, dt, tshape, idt, list(idx.shape), axis)
    ref = np.take(v, np.trunc(idx).astype(np.int64), axis=axis)
    suite.add(name, g, inputs={"table": tensor(v, dt), "idx": index_tensor(idx, idt)},
              expected=[tensor(ref, dt)])


def gather_cases(suite, rng):
    for dt in ALL_DTYPES:
        add_gather(suite, rng, "gather_%s_rows" % dt, dt, [6, 3], "i32", [5, 0, 5, 2], 0)
    for idt in ("i32", "i64"):
        add_gather(suite, rng, "gather_f32_idx_%s_axis1" % idt, "f32", [2, 7, 3], idt,
                   [[6, 0, 1], [3, 3, 2]], 1)
    for idt in FLOATS:
        # fractional float indices truncate toward zero (-0.5 -> 0)
        add_gather(suite, rng, "gather_f32_idx_%s" % idt, "f32", [4, 5], idt,
                   [3.75, -0.5, 1.0, 4.5], -1)
    add_gather(suite, rng, "gather_i64_scalar_idx", "i64", [4, 5], "i32", 2, 0)
    add_gather(suite, rng, "gather_bf16_rank1", "bf16", [9], "i64", [[8, 1], [0, 0], [4, 4]], 0)
    add_gather(suite, rng, "gather_f64_empty_idx", "f64", [3, 2], "i32", np.zeros(0, np.int64), 1)
    add_gather(suite, rng, "gather_u8_high_rank", "u8", [2, 3, 4], "i64",
               rng.integers(0, 3, (2, 1, 3, 2)), 1)

    for name, idt, idx in (("past_end", "i32", [0, 6]), ("negative", "i64", [-1, 0]),
                           ("float_nan", "f32", [0.0, np.nan]),
                           ("float_past_end", "f64", [6.0, 0.0])):
        g = gather_graph("e", "f32", [6, 3], idt, [2], 0)
        add_error(suite, "gather_err_run_%s" % name, g, "RLX_ERR_INVALID",
                  inputs={"table": values(rng, "f32", (6, 3)).astype(np.float32),
                          "idx": index_tensor(idx, idt)})
    add_error(suite, "gather_err_idx_dtype",
              gather_graph("e", "f32", [6, 3], "bool", [2], 0), "RLX_ERR_DTYPE")
    add_error(suite, "gather_err_axis", gather_graph("e", "f32", [6, 3], "i32", [2], 2),
              "RLX_ERR_SHAPE")


def scatter_graph(name, dt, bshape, idt, ishape, ushape, axis, udt=None):
    g = Graph(name)
    b = g.input("base", dt, bshape)
    i = g.input("idx", idt, ishape)
    u = g.input("upd", udt or dt, ushape)
    g.outputs(g.op("ScatterAdd", [b, i, u], axis=axis))
    return g


def scatter_ref(base, idx, upd, axis, dt):
    """np.add.at along axis (>= 0), rounding to dt after each add (floats),
    wrapping (ints), or-ing (bool)."""
    if dt not in FLOATS:
        out = base.copy()
        np.add.at(out, (slice(None),) * axis + (idx,), upd)
        return out
    out = base.copy()
    b = np.moveaxis(out, axis, 0)
    u = np.moveaxis(upd.reshape(base.shape[:axis] + (idx.size,) + base.shape[axis + 1:]), axis, 0)
    for j, k in enumerate(idx.reshape(-1)):
        b[k] = round_to(b[k] + u[j], dt)
    return out


def add_scatter(suite, rng, name, dt, bshape, idt, idx, axis):
    idx = np.asarray(idx, np.int64)
    ax = axis % len(bshape)
    ushape = bshape[:ax] + list(idx.shape) + bshape[ax + 1:]
    base, upd = values(rng, dt, bshape), values(rng, dt, ushape)
    if dt in INT_RANGE:
        np_dt = RLX_TO_NP[dt]
        base, upd = base.astype(np_dt), upd.astype(np_dt)
    g = scatter_graph(name, dt, bshape, idt, list(idx.shape), ushape, axis)
    suite.add(name, g, inputs={"base": tensor(base, dt), "idx": index_tensor(idx, idt),
                               "upd": tensor(upd, dt)},
              expected=[tensor(scatter_ref(base, idx, upd, ax, dt), dt)])


def scatter_cases(suite, rng):
    for dt in ALL_DTYPES:
        # duplicates accumulate; integers wrap
        add_scatter(suite, rng, "scatter_add_%s_dups" % dt, dt, [5, 3], "i32", [4, 0, 4, 4, 2], 0)
    add_scatter(suite, rng, "scatter_add_f32_axis1_i64", "f32", [2, 4, 3], "i64",
                [[3, 1], [1, 1]], 1)
    add_scatter(suite, rng, "scatter_add_f64_last_axis", "f64", [3, 6], "f32", [5, 5, 0], -1)
    add_scatter(suite, rng, "scatter_add_i64_scalar_idx", "i64", [4, 2], "i32", 3, 0)
    add_scatter(suite, rng, "scatter_add_f32_rank1", "f32", [7], "i64", [6, 0, 6, 3, 6], 0)
    g = scatter_graph("e", "f32", [5, 3], "i32", [2], [2, 3], 0)
    add_error(suite, "scatter_add_err_run_index", g, "RLX_ERR_INVALID",
              inputs={"base": np.zeros((5, 3), np.float32), "idx": np.array([1, 5], np.int32),
                      "upd": np.ones((2, 3), np.float32)})
    add_error(suite, "scatter_add_err_upd_shape",
              scatter_graph("e", "f32", [5, 3], "i32", [2], [2, 4], 0), "RLX_ERR_SHAPE")
    add_error(suite, "scatter_add_err_upd_dtype",
              scatter_graph("e", "f32", [5, 3], "i32", [2], [2, 3], 0, udt="f16"), "RLX_ERR_DTYPE")


# ---------------------------------------------------------------- UpdateSlice

def update_graph(name, dt, xshape, ushape, sdt, sshape, axis):
    g = Graph(name)
    x = g.input("x", dt, xshape)
    u = g.input("upd", dt, ushape)
    s = g.input("start", sdt, sshape)
    g.outputs(g.op("UpdateSlice", [x, u, s], axis=axis))
    return g


def start_tensor(start, sdt, sshape):
    return T(np.asarray(start, np.int64).reshape(sshape), sdt)


def add_update(suite, rng, name, dt, xshape, ulen, start, axis, sdt="i32", sshape=()):
    ushape = list(xshape)
    ushape[axis] = ulen
    x, u = values(rng, dt, xshape), values(rng, dt, ushape)
    ref = x.copy()
    ax = axis % len(xshape)
    ref[(slice(None),) * ax + (slice(start, start + ulen),)] = u
    g = update_graph(name, dt, xshape, ushape, sdt, list(sshape), axis)
    suite.add(name, g, inputs={"x": tensor(x, dt), "upd": tensor(u, dt),
                               "start": start_tensor(start, sdt, sshape)},
              expected=[tensor(ref, dt)])


def update_cases(suite, rng):
    for dt in ALL_DTYPES:
        add_update(suite, rng, "update_slice_%s" % dt, dt, [2, 6, 3], 2, 3, 1)
    add_update(suite, rng, "update_slice_f32_axis0_i64_shape1", "f32", [5, 4], 1, 4, 0,
               sdt="i64", sshape=(1,))
    add_update(suite, rng, "update_slice_f16_last_axis", "f16", [3, 7], 7, 0, -1)
    add_update(suite, rng, "update_slice_i32_empty_upd", "i32", [3, 4], 0, 4, 1)
    add_update(suite, rng, "update_slice_bf16_kv_cache", "bf16", [1, 8, 2, 4], 3, 5, 1,
               sdt="i64")
    for name, start in (("past_end", 5), ("negative", -1)):
        g = update_graph("e", "f32", [2, 6], [2, 2], "i32", [], 1)
        add_error(suite, "update_slice_err_run_%s" % name, g, "RLX_ERR_INVALID",
                  inputs={"x": np.zeros((2, 6), np.float32), "upd": np.ones((2, 2), np.float32),
                          "start": np.array(start, np.int32)})
    add_error(suite, "update_slice_err_too_long",
              update_graph("e", "f32", [2, 6], [2, 7], "i32", [], 1), "RLX_ERR_SHAPE")
    add_error(suite, "update_slice_err_other_dim",
              update_graph("e", "f32", [2, 6], [3, 2], "i32", [], 1), "RLX_ERR_SHAPE")
    add_error(suite, "update_slice_err_start_dtype",
              update_graph("e", "f32", [2, 6], [2, 2], "f32", [], 1), "RLX_ERR_DTYPE")
    add_error(suite, "update_slice_err_start_shape",
              update_graph("e", "f32", [2, 6], [2, 2], "i32", [2], 1), "RLX_ERR_SHAPE")


# ---------------------------------------------------------------- Iota, OneHot, Tri

def iota_graph(name, dt, dims, axis):
    g = Graph(name)
    g.outputs(g.op("Iota", [], dims=dims, axis=axis, dtype=dt))
    return g


def iota_ref(dims, axis, dt):
    shape = [1] * len(dims)
    shape[axis] = dims[axis]
    v = np.broadcast_to(np.arange(dims[axis], dtype=np.int64).reshape(shape), dims)
    if dt in INT_RANGE:
        return v.astype(RLX_TO_NP[dt])  # wraps, as the kernel
    return v.astype(np.float64)


def iota_cases(suite):
    for dt in NUMERIC_DTYPES:
        for dims, axis in (([7], 0), ([2, 5, 3], 1), ([2, 5, 3], -1), ([4, 1, 2, 3], -4)):
            name = "iota_%s_%s_a%d" % (dt, sname(dims), axis)
            suite.add(name, iota_graph(name, dt, dims, axis),
                      expected=[tensor(iota_ref(dims, axis, dt), dt)])
    suite.add("iota_u8_wraps", iota_graph("w", "u8", [300], 0),
              expected=[tensor(iota_ref([300], 0, "u8"), "u8")])
    suite.add("iota_f32_empty", iota_graph("z", "f32", [3, 0], 0),
              expected=[tensor(np.zeros((3, 0)), "f32")])
    add_error(suite, "iota_err_bool", iota_graph("e", "bool", [3], 0), "RLX_ERR_DTYPE")
    add_error(suite, "iota_err_rank0", iota_graph("e", "f32", [], 0), "RLX_ERR_SHAPE")
    add_error(suite, "iota_err_axis", iota_graph("e", "f32", [3], 1), "RLX_ERR_SHAPE")


def onehot_graph(name, idt, ishape, depth, dt):
    g = Graph(name)
    i = g.input("idx", idt, ishape)
    g.outputs(g.op("OneHot", [i], depth=depth, dtype=dt))
    return g


def onehot_cases(suite, rng):
    def add(name, idt, idx, depth, dt):
        idx = np.asarray(idx, np.int64)
        ref = (idx[..., None] == np.arange(depth)).astype(np.float64 if dt in FLOATS else
                                                         RLX_TO_NP[dt])
        suite.add(name, onehot_graph(name, idt, list(idx.shape), depth, dt),
                  inputs={"idx": T(idx, idt)}, expected=[tensor(ref, dt)])

    for dt in ALL_DTYPES:
        # out-of-range and negative indices give all-zero rows (tf.one_hot)
        add("one_hot_%s" % dt, "i32", [[0, 3, 4], [-1, 2, 5]], 5, dt)
    for idt in ("i8", "u8", "i64"):
        add("one_hot_idx_%s" % idt, idt, rng.integers(0, 7, (4,)), 6, "f32")
    add("one_hot_scalar_idx", "i64", 2, 4, "f32")
    add("one_hot_depth1", "i32", [0, 1, 0], 1, "i64")
    add("one_hot_depth0", "i32", [0, 1], 0, "f32")
    add("one_hot_high_rank", "i32", rng.integers(-1, 4, (2, 1, 3, 2)), 3, "bf16")
    add_error(suite, "one_hot_err_float_idx", onehot_graph("e", "f32", [3], 4, "f32"),
              "RLX_ERR_DTYPE")
    add_error(suite, "one_hot_err_depth", onehot_graph("e", "i32", [3], -1, "f32"),
              "RLX_ERR_INVALID")


def tri_cases(suite, rng):
    for dt in ALL_DTYPES:
        for upper in (False, True):
            f = np.triu if upper else np.tril
            add_unary(suite, rng, "tri_%s_%s" % (dt, "upper" if upper else "lower"), dt, [4, 5],
                      "Tri", lambda v, f=f: f(v, 0), upper=upper, k=0)
    for shape, upper, k in (([3, 3], False, 1), ([3, 3], True, -1), ([2, 4, 3], False, -2),
                            ([2, 4, 3], True, 2), ([3, 4], False, 10), ([3, 4], True, -10),
                            ([3, 4], False, -10), ([3, 4], True, 10), ([2, 1, 1, 5], True, 3),
                            ([1, 6], False, -1), ([0, 3], True, 0)):
        f = np.triu if upper else np.tril
        add_unary(suite, rng, "tri_f64_%s_%s_k%d" % (sname(shape), "u" if upper else "l", k),
                  "f64", shape, "Tri", lambda v, f=f, k=k: f(v, k), upper=upper, k=k)
    add_error(suite, "tri_err_rank1", unary_graph("e", "f32", [4], "Tri", upper=False, k=0),
              "RLX_ERR_SHAPE")


# ---------------------------------------------------------------- StopGradient, GetOutput

def identity_cases(suite, rng):
    for dt in ALL_DTYPES:
        add_unary(suite, rng, "stop_gradient_%s" % dt, dt, [3, 1, 4], "StopGradient",
                  lambda v: v)
    add_unary(suite, rng, "stop_gradient_scalar", "f32", [], "StopGradient", lambda v: v)

    # GetOutput{index=0} of a one-output node is a copy of it
    for dt in ("f32", "bf16", "i8", "bool"):
        g = Graph("get_output0")
        x = g.input("x", dt, [2, 3])
        t = g.op("Transpose", [x], perm=[1, 0])
        g.outputs(g.get_output(t, 0))
        v = values(rng, dt, (2, 3))
        suite.add("get_output_index0_%s" % dt, g, inputs={"x": tensor(v, dt)},
                  expected=[tensor(v.T, dt)])
    # both outputs of TopK (values; I64 indices), largest first
    g = Graph("get_output_topk")
    x = g.input("x", "f32", [3, 6])
    tk = g.op("TopK", [x], k=2, axis=-1)
    g.outputs(g.get_output(tk, 0), g.get_output(tk, 1))
    v = rng.permutation(18).reshape(3, 6).astype(np.float32)
    order = np.argsort(-v, axis=-1, kind="stable")[:, :2]
    suite.add("get_output_topk", g, inputs={"x": v},
              expected=[np.take_along_axis(v, order, -1), order.astype(np.int64)])

    g = Graph("e")
    x = g.input("x", "f32", [2, 3])
    g.outputs(g.get_output(g.op("Transpose", [x], perm=[1, 0]), 1))
    add_error(suite, "get_output_err_single_output", g, "RLX_ERR_INVALID")
    g = Graph("e")
    x = g.input("x", "f32", [3, 6])
    g.outputs(g.get_output(g.op("TopK", [x], k=2, axis=-1), 2))
    add_error(suite, "get_output_err_index", g, "RLX_ERR_INVALID")


# ---------------------------------------------------------------- symbolic dims

def sym_cases(suite, rng):
    """Graphs over an input [S, 3] (S bound to 5 at run time)."""
    def add(name, build, ref):
        g = Graph(name)
        x = g.input("x", "f32", ["S", 3])
        g.outputs(build(g, x))
        v = values(rng, "f32", (5, 3))
        suite.add(name, g, inputs={"x": tensor(v, "f32")}, expected=[tensor(ref(v), "f32")])

    add("sym_expand", lambda g, x: g.op("Expand", [x], dims=[2, "S", 3]),
        lambda v: np.broadcast_to(v, (2, 5, 3)))
    add("sym_transpose", lambda g, x: g.op("Transpose", [x], perm=[1, 0]), lambda v: v.T)
    add("sym_concat_axis0", lambda g, x: g.op("Concat", [x, x], axis=0),
        lambda v: np.concatenate([v, v], 0))
    add("sym_concat_axis1", lambda g, x: g.op("Concat", [x, x], axis=-1),
        lambda v: np.concatenate([v, v], 1))
    add("sym_pad", lambda g, x: g.op("Pad", [x], before=[1, 0], after=[2, 1], value=-1.0),
        lambda v: np.pad(v, [(1, 2), (0, 1)], constant_values=-1.0))
    add("sym_tri", lambda g, x: g.op("Tri", [x], upper=False, k=-1), lambda v: np.tril(v, -1))
    add("sym_slice_full", lambda g, x: g.op("Slice", [x], starts=[0, 1], ends=[I64_MAX, 3],
                                            steps=[1, 1]), lambda v: v[:, 1:])
    add("sym_reshape_transpose_reshape",
        lambda g, x: g.op("Reshape", [g.op("Transpose", [g.op("Reshape", [x], dims=[-1])],
                                                        perm=[0])], dims=["S", 3]),
        lambda v: v)


def cases(suite, rng):
    reshape_cases(suite, rng)
    expand_cases(suite, rng)
    transpose_cases(suite, rng)
    narrow_cases(suite, rng)
    slice_cases(suite, rng)
    concat_cases(suite, rng)
    pad_cases(suite, rng)
    gather_cases(suite, rng)
    scatter_cases(suite, rng)
    update_cases(suite, rng)
    iota_cases(suite)
    onehot_cases(suite, rng)
    tri_cases(suite, rng)
    identity_cases(suite, rng)
    sym_cases(suite, rng)
