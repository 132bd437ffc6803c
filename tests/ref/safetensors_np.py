"""A safetensors file read with NumPy alone (no safetensors package): the
reference reader of the GGUF converters in this folder, independent of
rlx's own. Float tensors (F32, F16, BF16) come back as float32, I64 as
int64; any other dtype stops the script."""
import json
import struct

import numpy as np


def read_safetensors(path):
    """{name: array} of the file at path."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        raw = data[a:b]
        if t["dtype"] == "F32":
            v = np.frombuffer(raw, np.float32)
        elif t["dtype"] == "F16":
            v = np.frombuffer(raw, np.float16).astype(np.float32)
        elif t["dtype"] == "BF16":
            v = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
        elif t["dtype"] == "I64":
            v = np.frombuffer(raw, np.int64)
        else:
            raise SystemExit(f"{path}: {name}: dtype {t['dtype']}")
        out[name] = v.reshape(t["shape"])
    return out
