#!/usr/bin/env python3
"""test_built_ops.py LIBRLX — the ONNX ops the importer builds from other rlx
ops, beyond the node tests' few cases: casts to float8/float4 over every
representable value, each rounding tie and its neighbours, infinities and
NaN (against onnx.reference); BitwiseAnd/Or/Xor over the full range of every
integer type (NumPy); the inverse trigonometric ops (NumPy); GridSample on
random grids past the borders for every mode, padding and align_corners
(onnx.reference); RoiAlign and the Scatter reductions (onnx.reference);
BitCast on random bit patterns (NumPy's view); TfIdfVectorizer on random pools
(onnx.reference); MaxPool's
Indices (a NumPy loop). Ends with "N failed"."""
import os
import sys
import warnings

import numpy as np

try:
    import ml_dtypes
    import onnx
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator
except ImportError:
    print("SKIP: onnx or ml_dtypes is not installed")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rlx_ctypes import Rlx  # noqa: E402

warnings.simplefilter("ignore")
rlx = Rlx(sys.argv[1])
rng = np.random.default_rng(0)
failures = 0


def model(node, inputs, out_type=TensorProto.FLOAT, opset=22):
    vi = [helper.make_tensor_value_info(name, t, x.shape) for name, t, x in inputs]
    outs = [helper.make_tensor_value_info(o, out_type, None) for o in node.output]
    return helper.make_model(helper.make_graph([node], "g", vi, outs), opset_imports=[helper.make_opsetid("", opset)])


def check(what, ok):
    global failures
    print("%s %s" % ("ok  " if ok else "FAIL", what))
    failures += not ok


# Casts to the narrow float types: every value, midpoint and neighbour.
for t, dt in [(17, ml_dtypes.float8_e4m3fn), (18, ml_dtypes.float8_e4m3fnuz), (19, ml_dtypes.float8_e5m2),
              (20, ml_dtypes.float8_e5m2fnuz), (23, ml_dtypes.float4_e2m1fn)]:
    codes = np.arange(16 if t == 23 else 256, dtype=np.uint8)
    vals = np.unique(codes.view(dt).astype(np.float64))
    vals = vals[np.isfinite(vals)]
    mids = ((vals[1:] + vals[:-1]) / 2).astype(np.float32)
    x = np.concatenate([vals, mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf),
                        rng.standard_normal(2000) * vals.max() / 3, [np.inf, -np.inf, np.nan, 1e9, -1e9]]).astype(np.float32)
    for sat in (0, 1) if t != 23 else (1,):
        m = model(helper.make_node("Cast", ["x"], ["y"], to=t, saturate=sat), [("x", TensorProto.FLOAT, x)], t, 21)
        ref = ReferenceEvaluator(m).run(None, {"x": x})[0].astype(np.float32)
        y = rlx.run_model(m.SerializeToString(), [x])[0].view(dt).astype(np.float32)
        check("Cast to %s, saturate %d" % (np.dtype(dt).name, sat), bool(np.all((y == ref) | (np.isnan(y) & np.isnan(ref)))))

# Bitwise ops over the full range of each integer type.
for dt, tp in [(np.int8, TensorProto.INT8), (np.uint8, TensorProto.UINT8), (np.int16, TensorProto.INT16),
               (np.uint16, TensorProto.UINT16), (np.int32, TensorProto.INT32), (np.uint32, TensorProto.UINT32),
               (np.int64, TensorProto.INT64), (np.uint64, TensorProto.UINT64)]:
    info = np.iinfo(dt)
    a = rng.integers(info.min, info.max, size=300, dtype=dt, endpoint=True)
    b = rng.integers(info.min, info.max, size=300, dtype=dt, endpoint=True)
    a[:3], b[:3] = [info.min, info.max, 0], [info.max, info.min, info.min]
    for op, f in [("BitwiseAnd", np.bitwise_and), ("BitwiseOr", np.bitwise_or), ("BitwiseXor", np.bitwise_xor)]:
        m = model(helper.make_node(op, ["a", "b"], ["y"]), [("a", tp, a), ("b", tp, b)], tp, 18)
        check("%s of %s" % (op, np.dtype(dt).name), np.array_equal(rlx.run_model(m.SerializeToString(), [a, b])[0], f(a, b)))

# Inverse trigonometric ops.
x = np.concatenate([np.linspace(-50, 50, 2001), np.logspace(-8, 8, 100), -np.logspace(-8, 8, 100)])
for op, f, d in [("Atan", np.arctan, x), ("Asin", np.arcsin, np.clip(x, -1, 1)), ("Acos", np.arccos, np.clip(x, -1, 1)),
                 ("Asinh", np.arcsinh, x), ("Acosh", np.arccosh, np.abs(x) + 1), ("Atanh", np.arctanh, np.clip(x, -0.999, 0.999))]:
    m = model(helper.make_node(op, ["x"], ["y"]), [("x", TensorProto.DOUBLE, d)], TensorProto.DOUBLE)
    y = rlx.run_model(m.SerializeToString(), [d])[0]
    check("%s within 1e-7 relative" % op, bool(np.all(np.abs(y - f(d)) <= 1e-7 * np.maximum(np.abs(f(d)), 1e-30))))

# GridSample: grids reaching past the borders.
for nd in (2, 3):
    for mode in ["nearest", "linear", "cubic"][: 3 if nd == 2 else 2]:
        for pm in ["zeros", "border", "reflection"]:
            for ac in (0, 1):
                xs, gs = [2, 3] + [4, 5, 3][:nd], [2] + [2, 3, 2][:nd] + [nd]
                X = rng.standard_normal(xs).astype(np.float32)
                G = rng.uniform(-1.6, 1.6, gs).astype(np.float32)
                m = model(helper.make_node("GridSample", ["X", "G"], ["Y"], mode=mode, padding_mode=pm, align_corners=ac),
                          [("X", TensorProto.FLOAT, X), ("G", TensorProto.FLOAT, G)])
                ref = ReferenceEvaluator(m).run(None, {"X": X, "G": G})[0]
                y = rlx.run_model(m.SerializeToString(), [X, G])[0]
                check("GridSample %dd %s %s align_corners %d" % (nd, mode, pm, ac),
                      y.shape == ref.shape and np.allclose(y, ref, rtol=1e-5, atol=1e-5))

# RoiAlign: rois partly outside the image, both modes and coordinate modes.
for mode in ("avg", "max"):
    for ctm in ("half_pixel", "output_half_pixel"):
        X = rng.standard_normal((2, 3, 8, 9)).astype(np.float32)
        rois = rng.uniform(-3, 11, (5, 4)).astype(np.float32)
        rois[:, 2:] = rois[:, :2] + rng.uniform(0.5, 6, (5, 2))
        bidx = rng.integers(0, 2, 5).astype(np.int64)
        node = helper.make_node("RoiAlign", ["X", "rois", "b"], ["Y"], mode=mode, coordinate_transformation_mode=ctm,
                                output_height=3, output_width=4, sampling_ratio=2, spatial_scale=0.8)
        m = model(node, [("X", TensorProto.FLOAT, X), ("rois", TensorProto.FLOAT, rois), ("b", TensorProto.INT64, bidx)])
        ref = ReferenceEvaluator(m).run(None, {"X": X, "rois": rois, "b": bidx})[0]
        y = rlx.run_model(m.SerializeToString(), [X, rois, bidx])[0]
        check("RoiAlign %s %s" % (mode, ctm), y.shape == ref.shape and np.allclose(y, ref, rtol=1e-4, atol=1e-5))

# ScatterElements and ScatterND reductions with repeated indices.
for red in ("add", "mul", "max", "min"):
    X = rng.standard_normal((4, 5)).astype(np.float32)
    I = rng.integers(-4, 4, (3, 5)).astype(np.int64)
    U = rng.standard_normal((3, 5)).astype(np.float32)
    node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=0, reduction=red)
    m = model(node, [("x", TensorProto.FLOAT, X), ("i", TensorProto.INT64, I), ("u", TensorProto.FLOAT, U)], opset=18)
    ref = ReferenceEvaluator(m).run(None, {"x": X, "i": I, "u": U})[0]
    check("ScatterElements reduction %s" % red, np.allclose(rlx.run_model(m.SerializeToString(), [X, I, U])[0], ref, rtol=1e-5))
    I = rng.integers(0, 4, (6, 1)).astype(np.int64)
    U = rng.standard_normal((6, 5)).astype(np.float32)
    node = helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction=red)
    m = model(node, [("x", TensorProto.FLOAT, X), ("i", TensorProto.INT64, I), ("u", TensorProto.FLOAT, U)], opset=18)
    ref = ReferenceEvaluator(m).run(None, {"x": X, "i": I, "u": U})[0]
    check("ScatterND reduction %s" % red, np.allclose(rlx.run_model(m.SerializeToString(), [X, I, U])[0], ref, rtol=1e-5))

# BitCast: random patterns (every exponent, subnormals, infinities; NaN
# only from integers: a float NaN's payload becomes the quiet NaN's).
for ft, it, ftp, itp in [(np.float32, np.int32, TensorProto.FLOAT, TensorProto.INT32),
                         (np.float64, np.int64, TensorProto.DOUBLE, TensorProto.INT64),
                         (np.float16, np.int16, TensorProto.FLOAT16, TensorProto.INT16)]:
    bits = rng.integers(np.iinfo(it).min, np.iinfo(it).max, 3000, dtype=it, endpoint=True)
    f = bits.view(ft)
    m = model(helper.make_node("BitCast", ["x"], ["y"], to=ftp), [("x", itp, bits)], ftp, 26)
    y = rlx.run_model(m.SerializeToString(), [bits])[0]
    check("BitCast %s to %s" % (np.dtype(it).name, np.dtype(ft).name), bool(np.all((y == f) | (np.isnan(y) & np.isnan(f)))))
    f = np.concatenate([f[~np.isnan(f)], np.array([0, -0.0, np.inf, -np.inf], ft)])
    m = model(helper.make_node("BitCast", ["x"], ["y"], to=itp), [("x", ftp, f)], itp, 26)
    check("BitCast %s to %s" % (np.dtype(ft).name, np.dtype(it).name), np.array_equal(rlx.run_model(m.SerializeToString(), [f])[0], f.view(it)))

# TfIdfVectorizer: random pools of distinct n-grams, shared output columns.
ran = bad = 0
for trial in range(60):
    mode = ["TF", "IDF", "TFIDF"][trial % 3]
    lo, sk = int(rng.integers(1, 3)), int(rng.integers(0, 3))
    hi = int(rng.integers(lo, 4))
    pool, counts = [], []
    for n in range(1, hi + 1):
        counts.append(len(pool))
        seen = set()
        for _ in range(int(rng.integers(0, 4))):
            g = tuple(rng.integers(0, 4, n).tolist())
            if g not in seen:
                seen.add(g)
                pool += list(g)
    npool = sum(((counts[i + 1] if i + 1 < len(counts) else len(pool)) - counts[i]) // (i + 1) for i in range(len(counts)))
    if npool == 0:
        continue
    idx = rng.integers(0, npool, npool).tolist()
    w = rng.uniform(0.5, 2, max(idx) + 1).astype(np.float32).tolist()
    x = rng.integers(0, 4, (3, 9)).astype(np.int64)
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], mode=mode, min_gram_length=lo, max_gram_length=hi,
                            max_skip_count=sk, ngram_counts=counts, ngram_indexes=idx, pool_int64s=pool, weights=w)
    m = model(node, [("x", TensorProto.INT64, x)], opset=9)
    try:
        ref = ReferenceEvaluator(m).run(None, {"x": x})[0]
    except Exception:   # the reference refuses some pools
        continue
    ran += 1
    y = rlx.run_model(m.SerializeToString(), [x])[0]
    bad += not (y.shape == ref.shape and np.allclose(y, ref, rtol=1e-6))
check("TfIdfVectorizer on %d random pools" % ran, ran > 30 and bad == 0)

# MaxPool's Indices against a NumPy loop.
for pads in ([0, 0, 0, 0], [1, 1, 1, 1], [0, 1, 1, 0]):
    for strides in ([1, 1], [2, 2], [2, 1]):
        X = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
        node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[3, 2], pads=pads, strides=strides)
        m = model(node, [("x", TensorProto.FLOAT, X)], opset=12)
        m.graph.output[1].type.tensor_type.elem_type = TensorProto.INT64
        y, ind = rlx.run_model(m.SerializeToString(), [X])
        N, C, H, W = X.shape
        Ho, Wo = (H + pads[0] + pads[2] - 3) // strides[0] + 1, (W + pads[1] + pads[3] - 2) // strides[1] + 1
        rv, ri = np.full((N, C, Ho, Wo), -np.inf, np.float32), np.zeros((N, C, Ho, Wo), np.int64)
        for n, c, a, b in np.ndindex(N, C, Ho, Wo):
            for i, j in np.ndindex(3, 2):
                h, w = a * strides[0] + i - pads[0], b * strides[1] + j - pads[1]
                if 0 <= h < H and 0 <= w < W and X[n, c, h, w] > rv[n, c, a, b]:
                    rv[n, c, a, b], ri[n, c, a, b] = X[n, c, h, w], ((n * C + c) * H + h) * W + w
        check("MaxPool Indices pads %s strides %s" % (pads, strides), np.array_equal(y, rv) and np.array_equal(ind, ri))

print("%d failed" % failures)
sys.exit(1 if failures else 0)
