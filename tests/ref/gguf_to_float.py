"""Rewrites a GGUF file with every quantized tensor dequantized to F16, BF16
or F32 (metadata, tokenizer and tensor names kept), for measuring rlx on
float weights with a real model.

usage: gguf_to_float.py IN.gguf OUT.gguf [f16|bf16|f32]
"""
import sys

import numpy as np
import gguf
from gguf.quants import dequantize, quantize


def main():
    src, dst = sys.argv[1], sys.argv[2]
    kind = sys.argv[3] if len(sys.argv) > 3 else "f16"
    if kind not in ("f16", "bf16", "f32"):
        sys.exit("gguf_to_float.py: the type is f16, bf16 or f32, not " + kind)
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
        if len(shape) == 1 or kind == "f32":
            w.add_tensor(t.name, data.astype(np.float32))
        elif kind == "f16":
            w.add_tensor(t.name, data.astype(np.float16))
        else:  # bf16 bytes (round to nearest even) from the gguf package
            raw = quantize(data.astype(np.float32), gguf.GGMLQuantizationType.BF16)
            w.add_tensor(t.name, raw, raw_shape=raw.shape, raw_dtype=gguf.GGMLQuantizationType.BF16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
