"""rlx.grad, rlx.jvp and rlx.train_graph against NumPy: analytic
gradients, finite differences and the optimizers' update rules."""
import numpy as np
import pytest

import rlx
from rlx import ops


def _mlp(rng):
    g = rlx.Graph("net")
    x = g.input("x", "f32", (5, 3))
    t = g.input("t", "f32", (5, 2))
    w = g.param("w", "f32", (3, 2))
    loss = ops.mse_loss(ops.tanh(x @ w), t)
    g.set_outputs(loss)
    vals = {"x": rng.standard_normal((5, 3)).astype(np.float32),
            "t": rng.standard_normal((5, 2)).astype(np.float32),
            "w": rng.standard_normal((3, 2)).astype(np.float32)}
    return g, x, w, loss, vals


def _np_loss(vals, w=None):
    w = vals["w"] if w is None else w
    return np.mean((np.tanh(vals["x"].astype(np.float64) @ w) - vals["t"]) ** 2)


def test_grad_against_numpy(rng):
    g, x, w, loss, vals = _mlp(rng)
    gg = rlx.grad(g, loss, [w, "x"])
    assert len(gg.outputs) == 3
    s = gg.compile()
    s.set_param("w", vals["w"])
    l, dw, dx = s.run({"x": vals["x"], "t": vals["t"]})
    X, W, T = (vals[k].astype(np.float64) for k in "xwt")
    h = np.tanh(X @ W)
    dz = 2 * (h - T) / h.size * (1 - h * h)
    np.testing.assert_allclose(l, _np_loss(vals), rtol=1e-5)
    np.testing.assert_allclose(dw, X.T @ dz, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(dx, dz @ W.T, rtol=1e-4, atol=1e-6)
    # and by central finite differences of the NumPy loss
    eps = 1e-4
    for i, j in ((0, 0), (2, 1)):
        wp, wm = W.copy(), W.copy()
        wp[i, j] += eps
        wm[i, j] -= eps
        fd = (_np_loss(vals, wp) - _np_loss(vals, wm)) / (2 * eps)
        assert abs(dw[i, j] - fd) < 1e-3


def test_jvp_against_numpy(rng):
    g = rlx.Graph("f")
    x = g.input("x", "f32", (4,))
    g.set_outputs(ops.sin(x) * x)
    j = rlx.jvp(g, [x])
    assert [n.name for n in j.inputs] == ["x", "x.tangent"]
    X, V = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    y, dy = j.compile().run({"x": X, "x.tangent": V})
    np.testing.assert_allclose(y, np.sin(X) * X, rtol=1e-6)
    np.testing.assert_allclose(dy, (np.cos(X) * X + np.sin(X)) * V, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_train_graph_steps(rng, optimizer):
    g, x, w, loss, vals = _mlp(rng)
    kw = {"momentum": 0.9} if optimizer == "sgd" else {"weight_decay": 0.01}
    tg = rlx.train_graph(g, loss, [w], optimizer=optimizer, **kw)
    s = tg.compile()
    s.set_param("w", vals["w"])
    state = {"w.velocity": np.zeros((3, 2), np.float32)} if optimizer == "sgd" else \
        {"w.moments": np.zeros((2, 3, 2), np.float32), "adamw.step": np.zeros((), np.int64)}
    s.set_params(state)
    W = vals["w"].astype(np.float64)
    X, T = vals["x"].astype(np.float64), vals["t"].astype(np.float64)
    vel, m1, m2 = np.zeros_like(W), np.zeros_like(W), np.zeros_like(W)
    lr = 0.1
    losses = []
    for step in range(1, 6):
        out = s.run({"x": vals["x"], "t": vals["t"], "lr": np.float32(lr)})
        h = np.tanh(X @ W)
        losses.append(out[0])
        np.testing.assert_allclose(out[0], np.mean((h - T) ** 2), rtol=1e-4)
        grad = X.T @ (2 * (h - T) / h.size * (1 - h * h))
        if optimizer == "sgd":
            vel = 0.9 * vel + grad
            W = W - lr * vel
        else:
            m1 = 0.9 * m1 + 0.1 * grad
            m2 = 0.999 * m2 + 0.001 * grad * grad
            W = W * (1 - lr * 0.01) - lr * (m1 / (1 - 0.9 ** step)) / (np.sqrt(m2 / (1 - 0.999 ** step)) + 1e-8)
        np.testing.assert_allclose(out[1], W, rtol=1e-4, atol=1e-5)
    assert losses[-1] < losses[0]
