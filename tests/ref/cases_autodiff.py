"""Op-parity cases of group "autodiff": GradientReversal, the identity in
the forward pass (its reversed gradient is tested by tests/test_grad.c
against finite differences), and the layout patterns that gradient graphs
run in bulk (the CPU kernels' fast paths for them): pool windows moved
last and back (short contiguous runs, 8-byte runs moved whole), 2-D and
per-head transposes (tiles, 4x4 blocks, ragged edges), wide Expands
(threaded), OneHot of ArgMax indices, ScatterAdd of embedding rows."""
import numpy as np

from rlxcase import Graph, T, round_to

FLOATS = ["f32", "f16", "bf16", "f64"]


def reversal_graph(name, dt, shape, **attrs):
    g = Graph(name)
    x = g.input("x", dt, shape)
    g.outputs(g.op("GradientReversal", [x], **attrs))
    return g


def unary(name, dt, shape, op, **attrs):
    g = Graph(name)
    x = g.input("x", dt, shape)
    g.outputs(g.op(op, [x], **attrs))
    return g


def layout_cases(suite, rng):
    window = [0, 1, 2, 4, 3, 5]  # [N, C, O0, K0, O1, K1] <-> [N, C, O0, O1, K0, K1]
    for dt, shape, perm in [("f32", [6, 3, 5, 2, 7, 2], window), ("f16", [4, 3, 5, 2, 6, 2], window),
                            ("f64", [3, 2, 4, 2, 5, 2], window), ("i32", [2, 3, 3, 3, 4, 3], window),
                            ("f32", [37, 129], [1, 0]), ("f32", [130, 515], [1, 0]), ("bf16", [19, 70], [1, 0]),
                            ("f64", [33, 17], [1, 0]), ("f32", [3, 10, 4, 6], [0, 2, 3, 1]),
                            ("f32", [3, 10, 4, 6], [0, 2, 1, 3]), ("i64", [5, 9, 7], [2, 0, 1]),
                            ("f32", [2, 3, 64, 64], [0, 1, 3, 2])]:
        v = rng.standard_normal(shape) * 4
        v = round_to(v.astype(np.float32), dt) if dt in FLOATS else v.astype(np.int64)
        want = np.transpose(v, perm)
        name = "layout_transpose_%s_%s_%s" % (dt, "x".join(map(str, shape)), "".join(map(str, perm)))
        suite.add(name, unary(name, dt, shape, "Transpose", perm=perm), inputs={"x": T(v, dt)},
                  expected=[T(want, dt)], atol=0.0, rtol=0.0)
    for dt, shape, dims in [("f32", [300, 1, 257], [300, 64, 257]), ("f16", [1, 513], [130, 513]),
                            ("f32", [64, 1], [64, 1000])]:
        v = round_to(rng.standard_normal(shape).astype(np.float32), dt)
        name = "layout_expand_%s_%s" % (dt, "x".join(map(str, dims)))
        suite.add(name, unary(name, dt, shape, "Expand", dims=dims), inputs={"x": T(v, dt)},
                  expected=[T(np.broadcast_to(v, dims), dt)], atol=0.0, rtol=0.0)
    # the pool gradient's mask: OneHot of ArgMax indices (ties, a NaN row)
    x = np.asarray(rng.integers(-1, 2, (301, 4)), np.float32)
    x[7, 2] = np.nan
    g = Graph("onehot_argmax")
    xi = g.input("x", "f32", [301, 4])
    g.outputs(g.op("OneHot", [g.op("ArgMax", [xi], axis=1, keep_dim=False)], depth=4, dtype="f32"))
    first = np.where(np.isnan(x).any(axis=1), np.argmax(np.isnan(x), axis=1), np.argmax(x, axis=1))
    suite.add("layout_onehot_argmax", g, inputs={"x": x}, expected=[np.eye(4, dtype=np.float32)[first]],
              atol=0.0, rtol=0.0)
    # an embedding's gradient: rows added at repeated indices
    idx = rng.integers(0, 50, 300).astype(np.int32)
    upd = rng.standard_normal((300, 33)).astype(np.float32)
    base = rng.standard_normal((50, 33)).astype(np.float32)
    g = Graph("scatter_rows")
    b, i, u = g.input("b", "f32", [50, 33]), g.input("i", "i32", [300]), g.input("u", "f32", [300, 33])
    g.outputs(g.op("ScatterAdd", [b, i, u], axis=0))
    want = base.copy()
    for r in range(300):  # in order, rounded per add (np.add.at)
        want[idx[r]] += upd[r]
    suite.add("layout_scatter_add_rows_f32", g, inputs={"b": base, "i": idx, "u": upd}, expected=[want],
              atol=0.0, rtol=0.0)


def cases(suite, rng):
    layout_cases(suite, rng)
    for dt in FLOATS:
        for shape in ([], [1], [3, 1, 5], [2, 7]):
            v = round_to(rng.standard_normal(shape).astype(np.float32) * 3, dt)
            name = "gradient_reversal_%s_%s" % (dt, "x".join(map(str, shape)) or "scalar")
            suite.add(name, reversal_graph(name, dt, shape, scale=0.5),
                      inputs={"x": T(v, dt)}, expected=[T(v, dt)])
    # the default scale, a negative scale, an empty tensor, symbolic dims
    v = rng.standard_normal((4, 3))
    suite.add("gradient_reversal_default_scale", reversal_graph("d", "f64", [4, 3]),
              inputs={"x": v}, expected=[v])
    suite.add("gradient_reversal_negative_scale", reversal_graph("n", "f64", [4, 3], scale=-2.0),
              inputs={"x": v}, expected=[v])
    e = np.zeros((0, 3), np.float32)
    suite.add("gradient_reversal_empty", reversal_graph("e", "f32", [0, 3]),
              inputs={"x": e}, expected=[e])
    g = Graph("sym")
    x = g.input("x", "f32", ["S", 3])
    g.outputs(g.op("GradientReversal", [x], scale=1.0))
    s = rng.standard_normal((5, 3)).astype(np.float32)
    suite.add("gradient_reversal_symbolic", g, inputs={"x": s}, expected=[s])

    # errors: integer and bool x, a non-finite scale
    for dt in ("i32", "i64", "u8", "bool"):
        suite.add("gradient_reversal_error_%s" % dt, reversal_graph("bad", dt, [2]),
                  expect_error="RLX_ERR_DTYPE")
    for bad in (float("inf"), float("-inf"), float("nan")):
        suite.add("gradient_reversal_error_scale_%s" % bad,
                  reversal_graph("bad", "f32", [2], scale=bad), expect_error="RLX_ERR_INVALID")
