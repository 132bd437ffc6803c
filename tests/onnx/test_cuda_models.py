#!/usr/bin/env python3
"""test_cuda_models.py LIBRLX [--models resnet50,bert,minilm]

ONNX models on the CUDA backend against onnxruntime (CPU), each with every
node on the device (rlx_session_stats.fallback_nodes == 0): a small
ResNet-like network written here (a 7x7 stride-2 stem, max pooling in ceil
mode, a residual block, a depthwise convolution with ReLU6, a 1x1
convolution without bias, InstanceNormalization, bilinear and nearest
Resize, ConvTranspose, average pooling with uncounted pads, a dilated
grouped convolution, global average pooling and Gemm), then ResNet-50,
BERT-base and all-MiniLM-L6-v2's encoder as make_onnx_models.py writes
them, at batch 2. F32 (RLX_CUDA_TF32 unset): convolutions and products
sum in another order than onnxruntime, so outputs agree to F32 rounding
grown by the depth: |rlx - ort| <= 1e-3 max |ort| (1e-4 + 1e-3 |ort| per
element for the small network). Exit 77 without onnx, onnxruntime or a
CUDA device."""
import argparse
import ctypes
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))

try:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except ImportError:
    print("SKIP: onnx or onnxruntime missing")
    sys.exit(77)

from rlx_ctypes import CUDA, Rlx  # noqa: E402


def small_resnet():
    rng = np.random.default_rng(7)
    inits, nodes = [], []

    def init(name, a):
        inits.append(numpy_helper.from_array(np.asarray(a), name))
        return name

    def w(name, shape):
        fan = int(np.prod(shape[1:]))
        return init(name, (rng.standard_normal(shape) / np.sqrt(fan)).astype(np.float32))

    def b(name, n):
        return init(name, (rng.standard_normal(n) * 0.1).astype(np.float32))

    def op(kind, ins, out, **attrs):
        nodes.append(helper.make_node(kind, ins, [out], **attrs))
        return out

    x = op("Conv", ["x", w("w0", (16, 3, 7, 7)), b("b0", 16)], "c0", kernel_shape=[7, 7], strides=[2, 2],
           pads=[3, 3, 3, 3])
    x = op("Relu", [x], "r0")
    x = op("MaxPool", [x], "p0", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)
    y = op("Relu", [op("Conv", [x, w("w1", (16, 16, 3, 3)), b("b1", 16)], "c1", kernel_shape=[3, 3],
                       pads=[1, 1, 1, 1])], "r1")
    y = op("Conv", [y, w("w2", (16, 16, 3, 3)), b("b2", 16)], "c2", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    x = op("Relu", [op("Add", [y, x], "a0")], "r2")
    x = op("Conv", [x, w("w3", (16, 1, 3, 3)), b("b3", 16)], "c3", kernel_shape=[3, 3], strides=[2, 2],
           pads=[1, 1, 1, 1], group=16)
    x = op("Clip", [x, init("lo", np.float32(0)), init("hi", np.float32(6))], "r3")
    x = op("Conv", [x, w("w4", (32, 16, 1, 1))], "c4", kernel_shape=[1, 1])
    x = op("InstanceNormalization", [x, b("g5", 32), b("b5", 32)], "n5", epsilon=1e-5)
    x = op("Resize", [x, "", init("s6", np.array([1, 1, 2, 2], np.float32))], "z6", mode="linear")
    x = op("ConvTranspose", [x, w("w7", (32, 8, 4, 4)), b("b7", 8)], "t7", kernel_shape=[4, 4], strides=[2, 2],
           pads=[1, 1, 1, 1])
    x = op("AveragePool", [x], "p8", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    x = op("Resize", [x, "", init("s9", np.array([1, 1, 2, 2], np.float32))], "z9", mode="nearest",
           coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    feat = op("Conv", [x, w("w10", (8, 4, 3, 3)), b("b10", 8)], "feat", kernel_shape=[3, 3], pads=[2, 2, 2, 2],
              dilations=[2, 2], group=2)
    x = op("Flatten", [op("GlobalAveragePool", [feat], "gap")], "flat", axis=1)
    op("Gemm", [x, w("fc", (10, 8)), b("fcb", 10)], "logits", transB=1)
    g = helper.make_graph(nodes, "small_resnet",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 64, 64])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [2, 10]),
                           helper.make_tensor_value_info("feat", TensorProto.FLOAT, [2, 8, 36, 36])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m.SerializeToString(), {"x": rng.standard_normal((2, 3, 64, 64)).astype(np.float32)}


def run_cuda(rlx, model_bytes, path, feeds):
    """Outputs of the model on CUDA and its fallback_nodes; None when no CUDA device."""
    lib = rlx.lib
    m, s = ctypes.c_void_p(), ctypes.c_void_p()
    if model_bytes is not None:
        rlx.check(lib.rlx_model_load_memory(model_bytes, len(model_bytes), None, ctypes.byref(m)))
    else:
        rlx.check(lib.rlx_model_load(path.encode(), None, ctypes.byref(m)))
    st = lib.rlx_model_compile(m, ctypes.byref(CUDA), ctypes.byref(s))
    if st != 0 and b"CUDA" in (lib.rlx_last_error() or b""):
        print("SKIP: %s" % lib.rlx_last_error().decode())
        lib.rlx_model_free(m)
        return None
    rlx.check(st)
    rlx.set_inputs(m, s, feeds)
    rlx.check(lib.rlx_run(s))
    outs = [rlx.output(s, k) for k in range(lib.rlx_session_num_outputs(s))]
    stats = rlx.stats(s)
    lib.rlx_session_free(s)
    lib.rlx_model_free(m)
    return outs, stats.fallback_nodes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("--models", default="")
    a = ap.parse_args()
    os.environ.pop("RLX_CUDA_TF32", None)
    rlx = Rlx(a.lib)
    failed = 0
    mb, feeds = small_resnet()
    got = run_cuda(rlx, mb, None, feeds)
    if got is None:
        return 77
    outs, fallback = got
    want = ort.InferenceSession(mb, providers=["CPUExecutionProvider"]).run(None, feeds)
    for name, o, w in zip(("logits", "feat"), outs, want):
        r = float(np.max(np.abs(o - w) / (1e-4 + 1e-3 * np.abs(w)))) if o.shape == w.shape else np.inf
        ok = r <= 1 and fallback == 0
        failed += not ok
        print("%s small_resnet %s: worst error %.3g of the bound, fallback_nodes %d" % (
            "ok  " if ok else "FAIL", name, r, fallback))
    import make_onnx_models
    for name in [n for n in a.models.split(",") if n]:
        path = make_onnx_models.make(name)
        rng = np.random.default_rng(1)
        if name in ("resnet50", "mobilenetv2", "vit"):
            feeds = {"pixel_values": rng.standard_normal((2, 3, 224, 224)).astype(np.float32)}
        else:
            feeds = {"input_ids": rng.integers(0, 30522, (2, 128)).astype(np.int64),
                     "attention_mask": np.concatenate([np.ones((2, 100), np.int64), np.zeros((2, 28), np.int64)], 1),
                     "token_type_ids": rng.integers(0, 2, (2, 128)).astype(np.int64)}
        outs, fallback = run_cuda(rlx, None, path, feeds)
        w = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
        o = outs[0]
        err = float(np.max(np.abs(o - w)) / np.max(np.abs(w))) if o.shape == w.shape else np.inf
        ok = err <= 1e-3 and fallback == 0
        failed += not ok
        print("%s %s batch 2: max |rlx - ort| / max |ort| %.3g, fallback_nodes %d" % (
            "ok  " if ok else "FAIL", name, err, fallback))
    print("%s" % ("all passed" if not failed else "%d failed" % failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
