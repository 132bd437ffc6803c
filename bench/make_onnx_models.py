#!/usr/bin/env python3
"""make_onnx_models.py [--out DIR] [--models a,b]

Writes the ONNX models bench_onnx.py times, with random weights, built
with onnx.helper (no torch): the graphs are laid out the way
torch.onnx.export writes these architectures (BatchNorm folded into the
convolutions' weights and biases, attention as MatMul / Softmax / MatMul
over heads, GELU through Erf, LayerNormalization of opset 17), so their
FLOPs and op mix are the real models'.

  resnet50     ResNet-50 v1.5 (torchvision), input [batch, 3, 224, 224]
  resnet50_stem  ResNet-50's first convolution alone (7x7, stride 2, 3 ->
                 64 channels, and its ReLU), input [batch, 3, 224, 224]
  mobilenetv2  MobileNetV2 1.0 (torchvision), input [batch, 3, 224, 224]
  bert         BERT-base (12 layers, hidden 768, 12 heads), inputs
               input_ids / attention_mask / token_type_ids [batch, 128]
  minilm       all-MiniLM-L6-v2's encoder (BERT of 6 layers, hidden 384,
               12 heads, FFN 1536), the same inputs
  vit          ViT-B/16 (12 layers, hidden 768), input [batch, 3, 224, 224]
  lstm         a two-layer LSTM encoder as torch.nn.LSTM writes it (the first
               layer bidirectional, hidden 256, input 128), input
               [64, batch, 128] (sequence first)

batch is a symbolic dim (dim_param). Default folder:
${XDG_CACHE_HOME:-~/.cache}/rlx/onnx-bench. A file that exists is kept.
"""
import argparse
import math
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "rlx", "onnx-bench")


class Builder:
    """Nodes, initializers and fresh names for one graph."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.count = [], [], 0

    def name(self, base):
        self.count += 1
        return "%s_%d" % (base, self.count)

    def init(self, base, a):
        n = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(a), n))
        return n

    def randn(self, base, shape, std):
        return self.init(base, (self.rng.standard_normal(shape) * std).astype(np.float32))

    def op(self, op_type, inputs, n_out=1, **attrs):
        outs = [self.name(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=self.name("n_" + op_type), **attrs))
        return outs[0] if n_out == 1 else outs

    def model(self, name, inputs, outputs):
        g = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="make_onnx_models")
        m.ir_version = 8
        return m


def image_input():
    return helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT, ["batch", 3, 224, 224])


# ---------------------------------------------------------------- convolution networks

def conv(b, x, cin, cout, k, stride=1, groups=1, act="relu"):
    """Conv with bias (a BatchNorm folded in), then ReLU, ReLU6 (Clip) or nothing."""
    fan_in = cin // groups * k * k
    w = b.randn("w", (cout, cin // groups, k, k), math.sqrt(2.0 / fan_in))
    bias = b.randn("b", (cout,), 0.05)
    y = b.op("Conv", [x, w, bias], kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4,
             group=groups)
    if act == "relu":
        return b.op("Relu", [y])
    if act == "relu6":
        return b.op("Clip", [y, b.init("lo", np.float32(0)), b.init("hi", np.float32(6))])
    return y


def classifier(b, x, c):
    y = b.op("Flatten", [b.op("GlobalAveragePool", [x])], axis=1)
    return b.op("Gemm", [y, b.randn("fc_w", (1000, c), 0.01), b.randn("fc_b", (1000,), 0.01)], transB=1)


def resnet50():
    b = Builder(50)
    x = conv(b, "pixel_values", 3, 64, 7, 2)
    x = b.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            s = stride if i == 0 else 1
            y = conv(b, x, cin, width, 1)
            y = conv(b, y, width, width, 3, s)
            y = conv(b, y, width, width * 4, 1, act=None)
            short = conv(b, x, cin, width * 4, 1, s, act=None) if i == 0 else x
            x = b.op("Relu", [b.op("Add", [y, short])])
            cin = width * 4
    out = classifier(b, x, cin)
    return b.model("resnet50", [image_input()], [helper.make_tensor_value_info(out, TensorProto.FLOAT, ["batch", 1000])])


def resnet50_stem():
    b = Builder(50)
    out = conv(b, "pixel_values", 3, 64, 7, 2)
    return b.model("resnet50_stem", [image_input()],
                   [helper.make_tensor_value_info(out, TensorProto.FLOAT, ["batch", 64, 112, 112])])


def mobilenetv2():
    b = Builder(2)
    x = conv(b, "pixel_values", 3, 32, 3, 2, act="relu6")
    cin = 32
    for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                       (6, 160, 3, 2), (6, 320, 1, 1)):
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = cin * t
            y = conv(b, x, cin, hidden, 1, act="relu6") if t != 1 else x
            y = conv(b, y, hidden, hidden, 3, stride, groups=hidden, act="relu6")
            y = conv(b, y, hidden, c, 1, act=None)
            x = b.op("Add", [x, y]) if stride == 1 and cin == c else y
            cin = c
    x = conv(b, x, cin, 1280, 1, act="relu6")
    out = classifier(b, x, 1280)
    return b.model("mobilenetv2", [image_input()], [helper.make_tensor_value_info(out, TensorProto.FLOAT, ["batch", 1000])])


# ---------------------------------------------------------------- transformer encoders

HIDDEN, HEADS, FFN, LAYERS = 768, 12, 3072, 12
# BERT's sequence length, static in the file: rlx's importer gives a Range
# or Slice whose bound comes from a symbolic dim (Shape -> Gather) no
# elements yet, so the position ids would be empty.
SEQ = 128


def linear(b, x, cin, cout):
    return b.op("Add", [b.op("MatMul", [x, b.randn("w", (cin, cout), 0.02)]), b.randn("b", (cout,), 0.02)])


def layer_norm(b, x, hidden=HIDDEN):
    return b.op("LayerNormalization", [x, b.init("g", np.ones(hidden, np.float32)), b.randn("beta", (hidden,), 0.02)],
                axis=-1, epsilon=1e-12)


def gelu(b, x):
    """x * 0.5 * (1 + erf(x / sqrt(2))), as torch exports nn.GELU."""
    e = b.op("Erf", [b.op("Div", [x, b.init("sqrt2", np.float32(math.sqrt(2)))])])
    one = b.op("Add", [e, b.init("one", np.float32(1))])
    return b.op("Mul", [b.op("Mul", [x, one]), b.init("half", np.float32(0.5))])


def attention(b, x, mask, hidden=HIDDEN, n_heads=HEADS):
    """Self-attention over [batch, seq, hidden]; mask: additive, [batch, 1, 1, seq] or None."""
    dh = hidden // n_heads
    shape = b.init("heads", np.array([0, -1, n_heads, dh], np.int64))

    def heads(perm):
        return b.op("Transpose", [b.op("Reshape", [linear(b, x, hidden, hidden), shape])], perm=perm)

    q, k, v = heads([0, 2, 1, 3]), heads([0, 2, 3, 1]), heads([0, 2, 1, 3])
    s = b.op("Div", [b.op("MatMul", [q, k]), b.init("scale", np.float32(math.sqrt(dh)))])
    if mask is not None:
        s = b.op("Add", [s, mask])
    p = b.op("Softmax", [s], axis=-1)
    ctx = b.op("Transpose", [b.op("MatMul", [p, v])], perm=[0, 2, 1, 3])
    ctx = b.op("Reshape", [ctx, b.init("merge", np.array([0, -1, hidden], np.int64))])
    return linear(b, ctx, hidden, hidden)


def bert():
    return encoder("bert", 768, HIDDEN, HEADS, FFN, LAYERS)


def minilm():
    return encoder("minilm", 384, 384, 12, 1536, 6)


def encoder(name, seed, hidden, n_heads, ffn, layers):
    """A BERT encoder (post-norm layers) of the given sizes."""
    b = Builder(seed)
    ids, tt, am = "input_ids", "token_type_ids", "attention_mask"
    seq = b.op("Gather", [b.op("Shape", [ids]), b.init("one_i", np.array(1, np.int64))], axis=0)
    pos = b.op("Unsqueeze", [b.op("Range", [b.init("zero_i", np.array(0, np.int64)), seq,
                                            b.init("step", np.array(1, np.int64))]), b.init("ax0", np.array([0], np.int64))])
    e = b.op("Add", [b.op("Gather", [b.randn("word", (30522, hidden), 0.02), ids]),
                     b.op("Gather", [b.randn("type", (2, hidden), 0.02), tt])])
    x = layer_norm(b, b.op("Add", [e, b.op("Gather", [b.randn("pos", (512, hidden), 0.02), pos])]), hidden)
    m = b.op("Cast", [b.op("Unsqueeze", [am, b.init("ax12", np.array([1, 2], np.int64))])], to=TensorProto.FLOAT)
    mask = b.op("Mul", [b.op("Sub", [b.init("one_f", np.float32(1)), m]),
                        b.init("neg", np.float32(np.finfo(np.float32).min))])
    for _ in range(layers):   # post-norm layers
        x = layer_norm(b, b.op("Add", [attention(b, x, mask, hidden, n_heads), x]), hidden)
        x = layer_norm(b, b.op("Add", [linear(b, gelu(b, linear(b, x, hidden, ffn)), ffn, hidden), x]), hidden)
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", SEQ]) for n in (ids, am, tt)]
    return b.model(name, inputs, [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["batch", SEQ, hidden])])


def vit():
    b = Builder(16)
    p = b.op("Conv", ["pixel_values", b.randn("patch_w", (HIDDEN, 3, 16, 16), 0.02), b.randn("patch_b", (HIDDEN,), 0.02)],
             kernel_shape=[16, 16], strides=[16, 16])
    p = b.op("Reshape", [p, b.init("tokens", np.array([0, HIDDEN, -1], np.int64))])
    p = b.op("Transpose", [p], perm=[0, 2, 1])
    batch = b.op("Gather", [b.op("Shape", [p]), b.init("zero_i", np.array([0], np.int64))], axis=0)
    cls_shape = b.op("Concat", [batch, b.init("cls_tail", np.array([1, HIDDEN], np.int64))], axis=0)
    cls = b.op("Expand", [b.randn("cls", (1, 1, HIDDEN), 0.02), cls_shape])
    x = b.op("Add", [b.op("Concat", [cls, p], axis=1), b.randn("pos", (1, 197, HIDDEN), 0.02)])
    for _ in range(LAYERS):   # pre-norm layers
        x = b.op("Add", [attention(b, layer_norm(b, x), None), x])
        x = b.op("Add", [linear(b, gelu(b, linear(b, layer_norm(b, x), HIDDEN, FFN)), FFN, HIDDEN), x])
    x = b.op("Gather", [layer_norm(b, x), b.init("first", np.array(0, np.int64))], axis=1)
    out = b.op("Gemm", [x, b.randn("head_w", (1000, HIDDEN), 0.02), b.randn("head_b", (1000,), 0.02)], transB=1)
    return b.model("vit", [image_input()], [helper.make_tensor_value_info(out, TensorProto.FLOAT, ["batch", 1000])])


def lstm():
    b = Builder(17)
    steps, inp, hid = 64, 128, 256

    def layer(x, cin, dirs):
        w, r = b.randn("lstm_w", (dirs, 4 * hid, cin), 0.05), b.randn("lstm_r", (dirs, 4 * hid, hid), 0.05)
        bias = b.randn("lstm_b", (dirs, 8 * hid), 0.05)
        return b.op("LSTM", [x, w, r, bias], 3, hidden_size=hid,
                    direction="bidirectional" if dirs == 2 else "forward")
    y = layer("x", inp, 2)[0]   # [steps, 2, batch, hid] -> [steps, batch, 2 * hid]
    y = b.op("Reshape", [b.op("Transpose", [y], perm=[0, 2, 1, 3]), b.init("seq_shape", np.array([0, 0, -1], np.int64))])
    h = layer(y, 2 * hid, 1)[1]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [steps, "batch", inp])
    return b.model("lstm", [x], [helper.make_tensor_value_info(h, TensorProto.FLOAT, [1, "batch", hid])])


MODELS = {"resnet50": resnet50, "resnet50_stem": resnet50_stem, "mobilenetv2": mobilenetv2, "bert": bert, "minilm": minilm,
          "vit": vit, "lstm": lstm}


def path_of(name, folder=None):
    return os.path.join(folder or cache_dir(), name + ".onnx")


def make(name, folder=None):
    """The model's file, written first when it is not there yet."""
    path = path_of(name, folder)
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        m = MODELS[name]()
        onnx.checker.check_model(m)
        tmp = path + ".tmp"
        onnx.save(m, tmp)
        os.replace(tmp, path)   # never a half-written model under the name
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--models", default=",".join(MODELS))
    a = ap.parse_args()
    for name in a.models.split(","):
        print(make(name, a.out))


if __name__ == "__main__":
    main()
