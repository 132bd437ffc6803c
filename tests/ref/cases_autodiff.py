"""Op-parity cases of group "autodiff": GradientReversal, the identity in
the forward pass (its reversed gradient is tested by tests/test_grad.c
against finite differences)."""
import numpy as np

from rlxcase import Graph, T, round_to

FLOATS = ["f32", "f16", "bf16", "f64"]


def reversal_graph(name, dt, shape, **attrs):
    g = Graph(name)
    x = g.input("x", dt, shape)
    g.outputs(g.op("GradientReversal", [x], **attrs))
    return g


def cases(suite, rng):
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
