"""Whole-model gradients and training steps against PyTorch: torch_grad.py --out DIR.

Writes, in the op-parity manifest format (rlxcase.Suite), one case per
model and dtype: the model as an rlx graph whose output 0 is the loss, its
inputs and params (the params are what is differentiated, in manifest
order), and as expected outputs the loss and d loss / d param from
torch.autograd on the same weights. tests/test_grad_torch.c runs rlx_grad
on each and compares. Models: an MLP, a small CNN (conv, max and avg
pooling), a 2-layer pre-norm transformer (embedding, causal attention,
LayerNorm, GELU MLP). Then each model trained for a few steps with
torch.optim.SGD (momentum, Nesterov, weight decay) and AdamW ("train_*"
cases: the losses of every step and the final params). Exits 77 (a CTest
skip) when torch is not installed.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rlxcase import Graph, Suite, T  # noqa: E402

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("torch_grad: torch is not installed")
    sys.exit(77)

NP = {"f32": np.float32, "f64": np.float64}
TT = {"f32": torch.float32, "f64": torch.float64}


class Model:
    """Params as numpy arrays shared by the rlx graph and the torch function."""

    def __init__(self, g, dt, rng):
        self.g, self.dt, self.rng = g, dt, rng
        self.params = {}
        self.handles = {}

    def param(self, name, shape, scale):
        v = (self.rng.standard_normal(shape) * scale).astype(NP[self.dt])
        self.params[name] = v
        self.handles[name] = self.g.param(name, self.dt, list(shape))
        return self.handles[name]

    def torch_params(self):
        return {k: torch.tensor(v, dtype=TT[self.dt], requires_grad=True) for k, v in self.params.items()}


def linear(m, x, name, k, n):
    w = m.param(name + ".w", (k, n), 1 / np.sqrt(k))
    b = m.param(name + ".b", (n,), 0.1)
    return m.g.op("Binary", [m.g.op("MatMul", [x, w]), b], op="add")


# Training runs: TRAIN_STEPS steps of torch.optim on one batch, from the
# same weights; tests/test_grad_torch.c uses the same hyperparameters
# (the case name says the optimizer).
TRAIN_STEPS = 5
# The rates are the f32 values rlx binds to its "lr" input.
OPTIMIZERS = {
    "sgd": lambda ps: torch.optim.SGD(ps, lr=float(np.float32(0.1)), momentum=0.9, nesterov=True,
                                      weight_decay=0.01),
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=float(np.float32(0.01)), betas=(0.9, 0.999), eps=1e-8,
                                          weight_decay=0.01),
}


def add_train_case(suite, name, optim, m, inputs, loss_fn, tinputs):
    """expected: the loss of each step, then every param after the last."""
    tp = m.torch_params()
    opt = OPTIMIZERS[optim](list(tp.values()))
    losses = []
    for _ in range(TRAIN_STEPS):
        opt.zero_grad()
        loss = loss_fn(tp, tinputs)
        loss.backward()
        opt.step()
        losses.append(T(np.asarray(loss.detach().numpy()), m.dt))
    expected = losses + [T(tp[k].detach().numpy(), m.dt) for k in m.params]
    suite.add(name, m.g, inputs=inputs, params={k: T(v, m.dt) for k, v in m.params.items()},
              expected=expected)


def add_case(suite, name, m, inputs, loss_fn, tinputs):
    tp = m.torch_params()
    loss = loss_fn(tp, tinputs)
    loss.backward()
    expected = [T(np.asarray(loss.detach().numpy()), m.dt)]
    expected += [T(tp[k].grad.numpy(), m.dt) for k in m.params]
    suite.add(name, m.g, inputs=inputs, params={k: T(v, m.dt) for k, v in m.params.items()},
              expected=expected)


# ---------------------------------------------------------------- MLP

def mlp(suite, rng, dt):
    g = Graph("mlp")
    m = Model(g, dt, rng)
    B, D, H, C = 8, 10, 16, 4
    x = g.input("x", dt, [B, D])
    t = g.input("t", "i64", [B])
    h = g.op("Activation", [linear(m, x, "l1", D, H)], act="gelu")
    h = g.op("Activation", [linear(m, h, "l2", H, H)], act="tanh")
    logits = linear(m, h, "l3", H, C)
    g.outputs(g.op("CrossEntropy", [logits, t], axis=-1))
    xv = rng.standard_normal((B, D)).astype(NP[dt])
    tv = rng.integers(0, C, B).astype(np.int64)

    def loss_fn(p, ti):
        h = F.gelu(ti["x"] @ p["l1.w"] + p["l1.b"])
        h = torch.tanh(h @ p["l2.w"] + p["l2.b"])
        return F.cross_entropy(h @ p["l3.w"] + p["l3.b"], ti["t"])

    return m, {"x": xv, "t": tv}, loss_fn, {"x": torch.tensor(xv), "t": torch.tensor(tv)}


# ---------------------------------------------------------------- CNN

def cnn(suite, rng, dt):
    g = Graph("cnn")
    m = Model(g, dt, rng)
    B, C = 4, 5
    x = g.input("x", dt, [B, 1, 12, 12])
    t = g.input("t", "i64", [B])
    w1 = m.param("c1.w", (6, 1, 3, 3), 1 / 3)
    b1 = m.param("c1.b", (6,), 0.1)
    h = g.op("Conv", [x, w1, b1], ndim=2, stride=[1, 1], pad=[1, 1, 1, 1], dilation=[1, 1], groups=1)
    h = g.op("Activation", [h], act="relu")
    h = g.op("Pool", [h], kind="max", ndim=2, kernel=[2, 2], stride=[2, 2])       # [B, 6, 6, 6]
    w2 = m.param("c2.w", (8, 6, 3, 3), 1 / np.sqrt(54))
    b2 = m.param("c2.b", (8,), 0.1)
    h = g.op("Conv", [h, w2, b2], ndim=2, stride=[1, 1], pad=[0, 0, 0, 0], dilation=[1, 1], groups=1)
    h = g.op("Activation", [h], act="relu")                                      # [B, 8, 4, 4]
    h = g.op("Pool", [h], kind="avg", ndim=2, kernel=[2, 2], stride=[2, 2])      # [B, 8, 2, 2]
    h = g.op("Reshape", [h], dims=[B, 32])
    logits = linear(m, h, "fc", 32, C)
    g.outputs(g.op("CrossEntropy", [logits, t], axis=-1))
    xv = rng.standard_normal((B, 1, 12, 12)).astype(NP[dt])
    tv = rng.integers(0, C, B).astype(np.int64)

    def loss_fn(p, ti):
        h = F.max_pool2d(F.relu(F.conv2d(ti["x"], p["c1.w"], p["c1.b"], padding=1)), 2)
        h = F.avg_pool2d(F.relu(F.conv2d(h, p["c2.w"], p["c2.b"])), 2)
        return F.cross_entropy(h.reshape(B, 32) @ p["fc.w"] + p["fc.b"], ti["t"])

    return m, {"x": xv, "t": tv}, loss_fn, {"x": torch.tensor(xv), "t": torch.tensor(tv)}


# ---------------------------------------------------------------- transformer

def transformer(suite, rng, dt):
    g = Graph("transformer")
    m = Model(g, dt, rng)
    B, S, V, E, H, L = 2, 6, 11, 16, 4, 2
    D = E // H
    tok = g.input("tok", "i64", [B, S])
    tgt = g.input("tgt", "i64", [B, S])
    emb = m.param("emb", (V, E), 0.5)
    pos = m.param("pos", (S, E), 0.1)
    h = g.op("Binary", [g.op("Gather", [emb, tok], axis=0), pos], op="add")     # [B, S, E]

    def norm(x, name):
        gamma = m.param(name + ".g", (E,), 0.1)
        beta = m.param(name + ".b", (E,), 0.1)
        m.params[name + ".g"] += 1
        return g.op("LayerNorm", [x, gamma, beta], axis=-1, eps=1e-5)

    for layer in range(L):
        p = "h%d." % layer
        a = norm(h, p + "ln1")
        q, k, v = (linear(m, a, p + n, E, E) for n in ("q", "k", "v"))
        att = g.op("Attention", [q, k, v], num_heads=H, num_kv_heads=H, head_dim=D, mask="causal")
        h = g.op("Binary", [h, linear(m, att, p + "o", E, E)], op="add")
        f = g.op("Activation", [linear(m, norm(h, p + "ln2"), p + "up", E, 2 * E)], act="gelu")
        h = g.op("Binary", [h, linear(m, f, p + "down", 2 * E, E)], op="add")
    logits = g.op("MatMul", [norm(h, "lnf"), m.param("head", (E, V), 1 / 4)])
    g.outputs(g.op("CrossEntropy", [logits, tgt], axis=-1, label_smoothing=0.1))
    tv = rng.integers(0, V, (B, S)).astype(np.int64)
    yv = rng.integers(0, V, (B, S)).astype(np.int64)

    def loss_fn(p, ti):
        def lin(x, n):
            return x @ p[n + ".w"] + p[n + ".b"]

        def ln(x, n):
            return F.layer_norm(x, (E,), p[n + ".g"], p[n + ".b"], 1e-5)

        h = p["emb"][ti["tok"]] + p["pos"]
        for layer in range(L):
            pre = "h%d." % layer
            a = ln(h, pre + "ln1")
            q, k, v = ((lin(a, pre + n)).reshape(B, S, H, D).transpose(1, 2) for n in ("q", "k", "v"))
            att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            h = h + lin(att.transpose(1, 2).reshape(B, S, E), pre + "o")
            h = h + lin(F.gelu(lin(ln(h, pre + "ln2"), pre + "up")), pre + "down")
        logits = ln(h, "lnf") @ p["head"]
        return F.cross_entropy(logits.reshape(B * S, V), ti["tgt"].reshape(B * S), label_smoothing=0.1)

    return m, {"tok": tv, "tgt": yv}, loss_fn, {"tok": torch.tensor(tv), "tgt": torch.tensor(yv)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    seed = int(os.environ.get("RLX_TEST_SEED", "1234"))
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    suite = Suite("torch_grad")
    for dt in ("f64", "f32"):
        for name, build in (("mlp", mlp), ("cnn", cnn), ("transformer", transformer)):
            add_case(suite, "%s_%s" % (name, dt), *build(suite, rng, dt))
    for optim in OPTIMIZERS:
        for name, build in (("mlp", mlp), ("cnn", cnn), ("transformer", transformer)):
            add_train_case(suite, "train_%s_%s_f64" % (optim, name), optim, *build(suite, rng, "f64"))
    suite.write(args.out)
    print("torch_grad: %d cases (torch %s, seed %d)" % (len(suite.cases), torch.__version__, seed))


if __name__ == "__main__":
    main()
