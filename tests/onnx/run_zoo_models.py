#!/usr/bin/env python3
"""run_zoo_models.py RLX [-k SUBSTR] — the model-zoo models shipped in the onnx
wheel (onnx/backend/test/data/light/: AlexNet, DenseNet-121, Inception v1/v2,
ResNet-50, ShuffleNet, SqueezeNet, VGG-19, ZFNet-512) run by `rlx run` on
their stored input and compared with their stored output (rtol 1e-3,
atol 1e-7 as ONNX's backend runner; the weights of these "light" models are
ConstantOfShape fills). Prints each model's result and "N passed, M failed";
exit 1 if any fails."""
import argparse
import glob
import os
import subprocess
import sys
import tempfile

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rlx")
    ap.add_argument("-k", dest="filter")
    a = ap.parse_args()
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError:
        print("SKIP: the onnx package is not installed")
        return 77
    light = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    passed = failed = 0
    for path in sorted(glob.glob(os.path.join(light, "*.onnx"))):
        name = os.path.basename(path)[:-5]
        if a.filter and a.filter not in name:
            continue
        model = onnx.load(path, load_external_data=False)
        ref = onnx.TensorProto()
        with open(os.path.join(light, name + "_output_0.pb"), "rb") as f:
            ref.ParseFromString(f.read())
        ref = numpy_helper.to_array(ref)
        made = {o for n in model.graph.node for o in n.output} | {t.name for t in model.graph.initializer}
        inp = [i for i in model.graph.input if i.name not in made][0]
        shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
        # The stored output is of an all-ones input (how the light models' references were made).
        x = np.ones(shape, dtype=np.float32)
        with tempfile.TemporaryDirectory() as tmp:
            np.save(os.path.join(tmp, "x.npy"), x)
            r = subprocess.run([a.rlx, "run", path, "-i", "%s=%s" % (inp.name, os.path.join(tmp, "x.npy")), "-o", tmp],
                               capture_output=True, text=True)
            if r.returncode:
                print("FAIL %s: %s" % (name, r.stderr.strip()[-300:]))
                failed += 1
                continue
            out = model.graph.output[0].name
            safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in out)
            y = np.load(os.path.join(tmp, safe + ".npy"))
        try:
            np.testing.assert_allclose(y.reshape(ref.shape), ref, rtol=1e-3, atol=1e-7)
            print("PASS %s" % name)
            passed += 1
        except AssertionError:
            print("FAIL %s: max abs error %.3g" % (name, np.max(np.abs(y.reshape(ref.shape) - ref))))
            failed += 1
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
