"""Op-parity cases of group "optim": SgdStep and AdamWStep (NumPy
transcriptions of torch.optim.SGD and torch.optim.AdamW's single-tensor
updates, in float64 from the values as stored in the dtype) and Assign
(its output is the value; the write-back into the param is tested by
tests/test_train.c)."""
import numpy as np

from rlxcase import Graph, T, round_to

FLOATS = ["f32", "f16", "bf16", "f64"]


def vals(rng, dt, shape, scale=1.0):
    return np.asarray(round_to((rng.standard_normal(shape) * scale).astype(np.float32), dt), np.float64)


def sgd_ref(p, g, v, lr, mu, wd, nesterov):
    g = g + wd * p
    if mu != 0:
        v = mu * v + g
        g = g + mu * v if nesterov else v
    return p - lr * g, v


def adamw_ref(p, g, m, v, lr, t, b1, b2, eps, wd):
    p = p * (1 - lr * wd)
    m = m + (1 - b1) * (g - m)
    v = b2 * v + (1 - b2) * g * g
    step_size = lr / (1 - b1 ** t)
    denom = np.sqrt(v) / np.sqrt(1 - b2 ** t) + eps
    return p - step_size * m / denom, np.stack([m, v])


def sgd_case(suite, rng, name, dt, shape, mu, wd, nesterov, lr_dt="f32"):
    g = Graph(name)
    hp = g.param("p", dt, shape)
    hg = g.input("g", dt, shape)
    hv = g.param("v", dt, shape)
    hl = g.input("lr", lr_dt, [])
    s = g.op("SgdStep", [hp, hg, hv, hl], momentum=mu, weight_decay=wd, nesterov=nesterov)
    g.outputs(g.get_output(s, 0), g.get_output(s, 1))
    p, gr, v = vals(rng, dt, shape), vals(rng, dt, shape), vals(rng, dt, shape, 0.3)
    lr = float(round_to(np.float32(0.05), lr_dt))
    np_, nv = sgd_ref(p, gr, v, lr, mu, wd, nesterov)
    suite.add(name, g, inputs={"g": T(gr, dt), "lr": T(np.float64(lr), lr_dt)},
              params={"p": T(p, dt), "v": T(v, dt)}, expected=[T(np_, dt), T(nv, dt)])


def adamw_case(suite, rng, name, dt, shape, t, b1=0.9, b2=0.999, eps=1e-8, wd=0.01, step_dt="i64"):
    g = Graph(name)
    hp = g.param("p", dt, shape)
    hg = g.input("g", dt, shape)
    hm = g.param("m", dt, [2] + list(shape))
    hl = g.input("lr", "f32", [1])
    hs = g.input("t", step_dt, [])
    s = g.op("AdamWStep", [hp, hg, hm, hl, hs], beta1=b1, beta2=b2, eps=eps, weight_decay=wd)
    g.outputs(g.get_output(s, 0), g.get_output(s, 1))
    p, gr = vals(rng, dt, shape), vals(rng, dt, shape)
    m = vals(rng, dt, shape, 0.1)
    v = np.abs(vals(rng, dt, shape, 0.1))
    mv = np.stack([m, v])
    lr = float(np.float32(1e-2))
    np_, nmv = adamw_ref(p, gr, m, v, lr, t, b1, b2, eps, wd)
    step = np.asarray(t, {"i64": np.int64, "i32": np.int32, "f32": np.float32}[step_dt])
    suite.add(name, g, inputs={"g": T(gr, dt), "lr": np.array([lr], np.float32), "t": step},
              params={"p": T(p, dt), "m": T(mv, dt)}, expected=[T(np_, dt), T(nmv, dt)])


def cases(suite, rng):
    for dt in FLOATS:
        for mu, wd, nest in ((0.0, 0.0, False), (0.9, 0.0, False), (0.9, 1e-2, True), (0.5, 0.1, False)):
            sgd_case(suite, rng, "sgd_%s_mu%g_wd%g%s" % (dt, mu, wd, "_nesterov" if nest else ""), dt, [3, 5],
                     mu, wd, nest)
        for t in (1, 2, 10):
            adamw_case(suite, rng, "adamw_%s_t%d" % (dt, t), dt, [4, 3], t)
    sgd_case(suite, rng, "sgd_scalar_f64_lr", "f64", [], 0.9, 0.0, False, lr_dt="f64")
    sgd_case(suite, rng, "sgd_odd_shape", "f32", [1, 7, 1, 3], 0.99, 5e-4, True)
    adamw_case(suite, rng, "adamw_scalar_float_step", "f64", [], 3, b1=0.5, b2=0.9, eps=1e-3, wd=0.0, step_dt="f32")
    adamw_case(suite, rng, "adamw_i32_step", "f32", [2, 1, 3], 7, step_dt="i32")

    # Assign: its output is the value (and the run reads the old param)
    for dt in FLOATS:
        g = Graph("assign")
        p = g.param("p", dt, [2, 3])
        x = g.input("x", dt, [2, 3])
        s = g.op("Binary", [p, x], op="add")
        a = g.op("Assign", [p, s])
        g.outputs(a, s)
        pv, xv = vals(rng, dt, (2, 3)), vals(rng, dt, (2, 3))
        want = T(round_to(pv + xv, dt), dt)
        suite.add("assign_%s" % dt, g, inputs={"x": T(xv, dt)}, params={"p": T(pv, dt)}, expected=[want, want])

    # errors
    def sgd_graph(pt="f32", gt="f32", gshape=(3,), lr_shape=(), **attrs):
        g = Graph("bad")
        hp = g.param("p", pt, [3])
        hg = g.input("g", gt, list(gshape))
        hv = g.param("v", pt, [3])
        hl = g.input("lr", "f32", list(lr_shape))
        g.outputs(g.get_output(g.op("SgdStep", [hp, hg, hv, hl], **attrs), 0))
        return g
    suite.add("sgd_error_int_param", sgd_graph(pt="i32", gt="i32"), expect_error="RLX_ERR_DTYPE")
    suite.add("sgd_error_grad_dtype", sgd_graph(gt="f64"), expect_error="RLX_ERR_DTYPE")
    suite.add("sgd_error_grad_shape", sgd_graph(gshape=(4,)), expect_error="RLX_ERR_SHAPE")
    suite.add("sgd_error_lr_shape", sgd_graph(lr_shape=(2,)), expect_error="RLX_ERR_SHAPE")
    suite.add("sgd_error_nesterov", sgd_graph(momentum=0.0, nesterov=True), expect_error="RLX_ERR_INVALID")
    suite.add("sgd_error_momentum", sgd_graph(momentum=-1.0), expect_error="RLX_ERR_INVALID")
    suite.add("sgd_error_weight_decay", sgd_graph(weight_decay=float("nan")), expect_error="RLX_ERR_INVALID")

    def adamw_graph(mshape=(2, 3), **attrs):
        g = Graph("bad")
        hp = g.param("p", "f32", [3])
        hg = g.input("g", "f32", [3])
        hm = g.param("m", "f32", list(mshape))
        hl = g.input("lr", "f32", [])
        hs = g.input("t", "i64", [])
        g.outputs(g.get_output(g.op("AdamWStep", [hp, hg, hm, hl, hs], **attrs), 0))
        return g
    suite.add("adamw_error_moments_shape", adamw_graph(mshape=(3,)), expect_error="RLX_ERR_SHAPE")
    suite.add("adamw_error_beta", adamw_graph(beta1=1.0), expect_error="RLX_ERR_INVALID")
    suite.add("adamw_error_eps", adamw_graph(eps=-1.0), expect_error="RLX_ERR_INVALID")
    g = adamw_graph()
    zeros = np.zeros(3, np.float32)
    suite.add("adamw_error_step_zero", g, inputs={"g": zeros, "lr": np.float32(0.1), "t": np.int64(0)},
              params={"p": zeros, "m": np.zeros((2, 3), np.float32)}, expect_error="RLX_ERR_INVALID")

    g = Graph("assign_input")
    x = g.input("x", "f32", [2])
    g.outputs(g.op("Assign", [x, x]))
    suite.add("assign_error_not_param", g, expect_error="RLX_ERR_INVALID")
    g = Graph("assign_type")
    p = g.param("p", "f32", [2])
    x = g.input("x", "f32", [3])
    g.outputs(g.op("Assign", [p, x]))
    suite.add("assign_error_shape", g, expect_error="RLX_ERR_SHAPE")
    g = Graph("assign_hidden")
    p = g.param("p", "f32", [2])
    x = g.input("x", "f32", [2])
    g.op("Assign", [p, x])
    g.outputs(x)
    suite.add("assign_error_not_output", g, expect_error="RLX_ERR_INVALID")
    g = Graph("assign_twice")
    p = g.param("p", "f32", [2])
    x = g.input("x", "f32", [2])
    g.outputs(g.op("Assign", [p, x]), g.op("Assign", [p, p]))
    suite.add("assign_error_twice", g, expect_error="RLX_ERR_INVALID")
