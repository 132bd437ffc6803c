"""Op-parity cases of group "collective": AllReduce in a session without a
communicator, a world of one, where the sum over the ranks is x itself
(the sums over several ranks: tests/test_comm.c, with threads as ranks)."""
import numpy as np

from rlxcase import Graph, T, round_to

DTYPES = ["f32", "f16", "bf16", "f64"]


def cases(suite, rng):
    for dt in DTYPES:
        for shape in ([3, 5], [1], [], [2, 1, 7]):
            g = Graph("all_reduce")
            x = g.input("x", dt, shape)
            g.outputs(g.op("AllReduce", [x]))
            v = np.asarray(round_to(rng.standard_normal(shape).astype(np.float32), dt), np.float64)
            suite.add("all_reduce_%s_%s" % (dt, "x".join(map(str, shape)) or "scalar"), g,
                      inputs={"x": T(v, dt)}, expected=[T(v, dt)])
    for dt, npt in (("i32", np.int32), ("i64", np.int64)):
        g = Graph("all_reduce_int")
        x = g.input("x", dt, [4])
        g.outputs(g.op("AllReduce", [x]))
        v = rng.integers(-1000, 1000, 4).astype(npt)
        suite.add("all_reduce_%s" % dt, g, inputs={"x": v}, expected=[v])
    # a sum of what a product made: the op reads an intermediate, not only a leaf
    g = Graph("all_reduce_after_add")
    a = g.input("a", "f32", [2, 3])
    b = g.input("b", "f32", [2, 3])
    g.outputs(g.op("AllReduce", [g.op("Binary", [a, b], op="add")]))
    av, bv = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((2, 3)).astype(np.float32)
    suite.add("all_reduce_after_add", g, inputs={"a": av, "b": bv}, expected=[av + bv])

    for dt in ("i8", "bool", "u8"):
        g = Graph("all_reduce_bad")
        x = g.input("x", dt, [3])
        g.outputs(g.op("AllReduce", [x]))
        suite.add("all_reduce_error_%s" % dt, g, expect_error="RLX_ERR_DTYPE")
