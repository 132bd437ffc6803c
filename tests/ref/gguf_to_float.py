"""Rewrites a GGUF file with every quantized tensor dequantized to F16 or
F32 (metadata, tokenizer and tensor names kept), for measuring rlx on float
weights with a real model.

usage: gguf_to_float.py IN.gguf OUT.gguf [f16|f32]
"""
import sys

import numpy as np
import gguf
from gguf.quants import dequantize


def main():
    src, dst = sys.argv[1], sys.argv[2]
    kind = sys.argv[3] if len(sys.argv) > 3 else "f16"
    ftype = np.float16 if kind == "f16" else np.float32
    r = gguf.GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(dst, arch)
    for name, field in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            w.add_key_value(name, field.contents(), vtype, sub_type=field.types[-1])
        else:
            w.add_key_value(name, field.contents(), vtype)
    for t in r.tensors:
        shape = tuple(int(d) for d in reversed(t.shape))
        data = dequantize(t.data, t.tensor_type).reshape(shape)
        # norms and other vectors stay F32, as llama.cpp's converter writes them
        w.add_tensor(t.name, data.astype(np.float32 if len(shape) == 1 else ftype))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
