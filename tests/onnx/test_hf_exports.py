#!/usr/bin/env python3
"""test_hf_exports.py LIBRLX [--dir DIR] [NAME...] — the transformer exports
of tests/onnx/hf, or DIR (tiny randomly initialized Hugging Face models exported by
torch.onnx; made by tests/ref/hf_onnx_exports.py) run through the
rlx_model C API and compared with the onnxruntime outputs stored beside
them: every output within 1e-4 relative to its largest magnitude
(max |rlx - ort| <= 1e-4 * max |ort|), shapes and dtypes equal.

Needs NumPy only (no torch, no onnxruntime, no network).
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
RTOL = 1e-4


def check(rlx, hf, name):
    with open(os.path.join(hf, name + ".onnx"), "rb") as f:
        model = f.read()
    data = np.load(os.path.join(hf, name + ".npz"))
    n_in = sum(1 for k in data.files if k.startswith("in_"))
    n_out = sum(1 for k in data.files if k.startswith("out_"))
    got = rlx.run_model(model, [data["in_%d" % k] for k in range(n_in)])
    if len(got) != n_out:
        return "%d outputs, %d expected" % (len(got), n_out)
    for k, y in enumerate(got):
        ref = data["out_%d" % k]
        if y.shape != ref.shape or y.dtype != ref.dtype:
            return "output %d: %s %s, expected %s %s" % (k, y.dtype, y.shape, ref.dtype, ref.shape)
        scale = float(np.max(np.abs(ref))) if ref.size else 0.0
        err = float(np.max(np.abs(y.astype(np.float64) - ref))) if ref.size else 0.0
        if not err <= RTOL * scale:
            return "output %d: max abs error %.3g, %.3g allowed" % (k, err, RTOL * scale)
    return None


def main():
    sys.path.insert(0, HERE)
    from rlx_ctypes import Rlx, RlxError
    args = sys.argv[2:]
    hf = os.path.join(HERE, "hf")
    if args[:1] == ["--dir"]:
        hf, args = args[1], args[2:]
    rlx = Rlx(sys.argv[1])
    names = args or sorted(f[:-5] for f in os.listdir(hf) if f.endswith(".onnx"))
    failed = 0
    for name in names:
        try:
            why = check(rlx, hf, name)
        except RlxError as e:
            why = "%s: %s" % (e.status, e)
        print("%-16s %s" % (name, "PASS" if why is None else "FAIL " + why))
        failed += why is not None
    print("%d passed, %d failed" % (len(names) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
