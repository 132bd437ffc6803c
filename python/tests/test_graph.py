"""The graph API: building, operators, symbolic dims, the text form,
sessions and the arrays that cross into and out of them."""
import math
import threading
import time

import ml_dtypes
import numpy as np
import pytest

import rlx
from rlx import ops
from conftest import run_graph


def test_mlp_against_numpy(rng):
    g = rlx.Graph("mlp")
    x = g.input("x", "f32", ("batch", 4))
    w = g.param("w", "f32", (4, 3))
    b = g.param("b", "f32", (3,))
    y = ops.softmax(ops.relu(x @ w + b), -1)
    g.set_outputs(y)
    assert x.shape == ("batch", 4) and y.shape == ("batch", 3) and y.dtype == "f32"
    assert [n.name for n in g.inputs] == ["x"] and [n.name for n in g.params] == ["w", "b"]
    W, Bv = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    sess = g.compile(device="cpu")
    sess.set_params({"w": W, "b": Bv})
    for batch in (1, 5, 2):
        X = rng.standard_normal((batch, 4)).astype(np.float32)
        (out,) = sess.run({"x": X})
        z = np.maximum(X @ W + Bv, 0)
        e = np.exp(z - z.max(-1, keepdims=True))
        np.testing.assert_allclose(out, e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_python_operators(rng):
    g = rlx.Graph("arith")
    a, b = g.input("a", "f32", (2, 3)), g.input("b", "f32", (3, 2))
    A, B = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((3, 2)).astype(np.float32)
    outs = [a + 1.5, 2.0 - a, a * a, a / 4.0, 1.0 / (a * a + 1), -a, a @ b, (a * a) ** 0.5]
    refs = [A + 1.5, 2 - A, A * A, A / 4, 1 / (A * A + 1), -A, A @ B, np.abs(A)]
    for out, y, ref in zip(outs, run_graph(g, outs, {"a": A, "b": B}), refs):
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6, err_msg=out.op)


def test_symbolic_dims_by_name(rng):
    g = rlx.Graph("sym")
    x = g.input("x", "f32", ("B", "S", 4))
    y = g.input("y", "f32", ("B", "S", 4))
    out = ops.reduce_sum(x * y, [2])
    assert out.shape == ("B", "S")
    g.set_outputs(out)
    sess = g.compile()
    for shape in ((1, 1, 4), (3, 7, 4)):
        X, Y = rng.standard_normal(shape).astype(np.float32), rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(sess.run({"x": X, "y": Y})[0], (X * Y).sum(2), rtol=1e-5, atol=1e-6)
    with pytest.raises(rlx.ShapeError):
        sess.run({"x": np.zeros((2, 3, 4), np.float32), "y": np.zeros((2, 4, 4), np.float32)})


def test_text_round_trip(rng):
    g = rlx.Graph("t")
    x = g.input("x", "f32", ("n", 3))
    g.set_outputs(ops.tanh(x) * 2.0)
    text = g.to_text()
    assert "Input" in text and str(g) == text
    h = rlx.Graph.from_text(text)
    assert h.to_text() == text and h.hash() == g.hash() and len(h) == len(g) and h.name == "t"
    X = rng.standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_allclose(h.compile().run({"x": X})[0], np.tanh(X) * 2, rtol=1e-6)
    with pytest.raises(rlx.Error) as e:
        rlx.Graph.from_text("graph \"bad\" {\n  %0 = Nope() : f32[]\n}\n")
    assert "Nope" in str(e.value)


@pytest.mark.parametrize("optimize", [True, False])
def test_compile_options(rng, optimize):
    g = rlx.Graph("o")
    x = g.input("x", "f32", (8,))
    g.set_outputs(ops.exp(x) + ops.exp(x))
    X = rng.standard_normal(8).astype(np.float32)
    s = g.compile(device="cpu", threads=1, optimize=optimize, fuse=optimize)
    np.testing.assert_allclose(s.run({"x": X})[0], 2 * np.exp(X), rtol=1e-6)


@pytest.mark.parametrize("dtype,np_dtype", [("f16", np.float16), ("bf16", ml_dtypes.bfloat16),
                                            ("f64", np.float64), ("i32", np.int32), ("i64", np.int64)])
def test_dtypes_in_and_out(rng, dtype, np_dtype):
    g = rlx.Graph("d")
    x = g.input("x", dtype, (3, 5))
    g.set_outputs(x + x, ops.cast(x, "f32"))
    X = (rng.standard_normal((3, 5)) * 8).astype(np_dtype)
    twice, as_f32 = g.compile().run({"x": X})
    assert twice.dtype == np.dtype(np_dtype) and as_f32.dtype == np.float32
    np.testing.assert_array_equal(twice, (X + X).astype(np_dtype))
    np.testing.assert_array_equal(as_f32, X.astype(np.float32))


def test_array_protocols_and_no_copy(rng):
    X = rng.standard_normal((4, 4)).astype(np.float32)
    assert rlx.as_array(X, np.dtype(np.float32)) is X  # read in place

    class Iface:  # only __array_interface__
        def __init__(self, a):
            self.__array_interface__ = a.__array_interface__
            self.keep = a

    class DLPack:  # only __dlpack__
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    for wrapped in (Iface(X), DLPack(X)):
        a = rlx.as_array(wrapped, np.dtype(np.float32))
        assert np.shares_memory(a, X)
    strided = np.asfortranarray(X)  # a copy, in C order
    assert rlx.as_array(strided, np.dtype(np.float32)).flags.c_contiguous
    g = rlx.Graph("p")
    x = g.input("x", "f32", (4, 4))
    g.set_outputs(x * 3.0)
    s = g.compile()
    for feed in (X, Iface(X), DLPack(X), X.T.T, np.asfortranarray(X), X.astype(np.float64), X.tolist()):
        np.testing.assert_allclose(s.run({"x": feed})[0], X * 3, rtol=1e-6)


def test_run_releases_the_gil(rng):
    # While another thread is inside rlx_run, this one runs Python: with the
    # GIL held through the call, its loop would stall for the whole call.
    n = 512
    g = rlx.Graph("long")
    x = g.input("x", "f32", (n, n))
    y = x
    for _ in range(24):
        y = ops.tanh(y @ x)
    g.set_outputs(y)
    s = g.compile(threads=1)
    X = (rng.standard_normal((n, n)) / n).astype(np.float32)
    s.run({"x": X})
    window, out = [], []

    def work():
        window.append(time.perf_counter())
        out.append(s.run({"x": X})[0])
        window.append(time.perf_counter())

    t = threading.Thread(target=work)
    steps = []
    t.start()
    while t.is_alive():
        steps.append(time.perf_counter())
    t.join()
    inside = [window[0]] + [v for v in steps if window[0] < v < window[1]] + [window[1]]
    longest = max(b - a for a, b in zip(inside, inside[1:]))
    assert longest < 0.5 * (window[1] - window[0]), (longest, window[1] - window[0])
    ref = X
    for _ in range(24):
        ref = np.tanh(ref @ X)
    np.testing.assert_allclose(out[0], ref, rtol=1e-3, atol=1e-5)


def test_threads_with_own_sessions(rng):
    X = rng.standard_normal((64, 64)).astype(np.float32)
    results = [None] * 4

    def work(i):
        g = rlx.Graph("mt%d" % i)
        x = g.input("x", "f32", (64, 64))
        g.set_outputs(x @ x)
        s = g.compile(threads=1)
        for _ in range(20):
            results[i] = s.run({"x": X})[0]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        np.testing.assert_allclose(r, X @ X, rtol=1e-4, atol=1e-4)


def test_threads_sharing_a_session(rng):
    # Each run binds its input, runs and reads its output as one step (without
    # the session's lock, 300 runs a thread mix up inputs and outputs).
    g = rlx.Graph("shared")
    x = g.input("x", "f32", ("n", 32))
    g.set_outputs(ops.tanh(x @ ops.transpose(x, (1, 0))))
    s = g.compile(threads=1)
    Xs = [rng.standard_normal((8 + i, 32)).astype(np.float32) for i in range(4)]
    bad = []

    def work(i):
        for _ in range(300):
            try:
                y = s.run({"x": Xs[i]})[0]
            except rlx.Error as e:  # another thread's input bound in between
                bad.append(e)
                continue
            if y.shape != (8 + i, 8 + i) or not np.allclose(y, np.tanh(Xs[i] @ Xs[i].T), rtol=1e-4, atol=1e-5):
                bad.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad


def test_session_stats(rng):
    g = rlx.Graph("st")
    x = g.input("x", "f32", ("n", 4))
    g.set_outputs(ops.exp(x) * 2.0)
    s = g.compile()
    for n in (3, 3, 5, 3):
        s.run({"x": np.ones((n, 4), np.float32)})
    st = s.stats()
    assert st["runs"] == 4 and st["plans_built"] == 2 and st["plan_cache_hits"] == 2 and st["plans_held"] == 2
    assert st["arena_bytes"] >= 0 and st["fallback_nodes"] == 0


def test_compile_cache():
    def build():
        g = rlx.Graph("cached")
        x = g.input("x", "f32", (4,))
        g.set_outputs(ops.sin(x) + 1.25)
        return g

    rlx.compile_cache_clear()
    before = rlx.compile_cache_stats()
    assert before["entries"] == 0
    s1 = build().compile()
    s2 = build().compile()
    after = rlx.compile_cache_stats()
    assert after["lookups"] - before["lookups"] == 2 and after["hits"] - before["hits"] == 1
    assert s2.stats()["compile_cache_hit"] == 1 and s1.stats()["compile_cache_hit"] == 0
    assert rlx.cpu_threads(1) == 1 and 1 <= rlx.cpu_threads(0) == rlx.cpu_threads(10 ** 6)


def test_graph_queries():
    g = rlx.Graph("q")
    x = g.input("x", "f32", (2, 3))
    p = g.param("p", "f32", (3,))
    y = x + p
    g.set_outputs(y)
    g.verify()
    assert g["x"].id == x.id and g["p"].id == p.id
    assert y.op == "Binary" and x.name == "x" and y.name is None
    assert [o.id for o in g.outputs] == [y.id]
    assert g.constant(np.arange(3, dtype=np.int64)).dtype == "i64"
    assert g.constant(1.5).dtype == "f32"
    assert rlx.__version__ and "rlx" in rlx.system_info()


def test_cuda_matches_numpy(rng):
    g = rlx.Graph("gpu")
    x = g.input("x", "f32", ("batch", 64))
    w = g.param("w", "f32", (64, 32))
    g.set_outputs(ops.softmax(ops.gelu(x @ w), -1), ops.reduce_sum(x, [1]))
    try:
        s = g.compile(device="cuda")
    except (rlx.UnsupportedError, rlx.DeviceError) as e:  # a build without CUDA, a machine without a GPU
        pytest.skip(str(e))
    W = rng.standard_normal((64, 32)).astype(np.float32) * 0.1
    s.set_param("w", W)
    for batch in (3, 17):
        X = rng.standard_normal((batch, 64)).astype(np.float32)
        y, total = s.run({"x": X})
        z = X @ W
        z = 0.5 * z * (1 + np.vectorize(math.erf)(z / np.sqrt(2)))
        e = np.exp(z - z.max(-1, keepdims=True))
        np.testing.assert_allclose(y, e / e.sum(-1, keepdims=True), rtol=2e-3, atol=1e-5)
        np.testing.assert_allclose(total, X.sum(1), rtol=1e-4, atol=1e-4)


def test_device_names():
    g = rlx.Graph("where")
    x = g.input("x", "f32", (2,))
    g.set_outputs(x * 2.0)
    assert g.compile(device="auto").run({"x": np.ones(2, np.float32)})[0].tolist() == [2.0, 2.0]
    for bad in ("gpu", "cuda:", "cuda:-1", "cuda:one", "CUDA"):
        with pytest.raises(rlx.InvalidError, match="is not auto, cpu, cuda or cuda:N"):
            g.compile(device=bad)
    with pytest.raises(rlx.InvalidError):
        g.compile(device=0)
    # a GPU index past the machine's: refused whatever the build and machine
    with pytest.raises((rlx.UnsupportedError, rlx.DeviceError), match="CUDA"):
        g.compile(device="cuda:999")
