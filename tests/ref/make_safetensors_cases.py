"""Write the safetensors test files of tests/test_safetensors.c and the fuzz seeds.

  make_safetensors_cases.py --out DIR       test files + DIR/manifest.txt
  make_safetensors_cases.py --corpus DIR    small seeds for tests/fuzz/corpus_safetensors

Valid files come from the PyPI `safetensors` package (safetensors.serialize:
every dtype it has, ranks 0 to 8, empty tensors, metadata with unicode
and characters JSON must escape) plus a few written here to use what its
writer never does (\\u escapes and surrogate pairs, whitespace everywhere,
members in another order, gaps between tensors). What rlx must see comes
from Python's json module reading the header. Bad files are written here:
each with the status and a piece of the message rlx must give.

Manifest lines (hex keeps names and bytes unambiguous):
  file NAME / n_meta N / n_tensors N / data_offset D / end
  meta KEYHEX string s:VALUEHEX
  tensor NAMEHEX DTYPE RLXDTYPE|- RANK DIMS|- OFFSET NBYTES RAWFILE F32FILE|-
      (F32FILE: the values of an F32, F16 or BF16 tensor as float32)
  bad NAME STATUS NEEDLE...
  truncate NAME VALID_FROM
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

from model_file_cases import tensor_line, write_bad_files, write_bytes, write_cuts, write_manifest

try:
    from safetensors import TensorSpec, serialize
except ImportError:
    sys.exit("make_safetensors_cases.py needs the PyPI package `safetensors` (pip install safetensors)")

# safetensors dtype -> (TensorSpec dtype, bits per element, rlx dtype or None)
DTYPES = {
    "BOOL": ("bool", 8, "bool"), "U8": ("uint8", 8, "u8"), "I8": ("int8", 8, "i8"),
    "I16": ("int16", 16, None), "U16": ("uint16", 16, None), "F16": ("float16", 16, "f16"),
    "BF16": ("bfloat16", 16, "bf16"), "I32": ("int32", 32, "i32"), "U32": ("uint32", 32, None),
    "F32": ("float32", 32, "f32"), "F64": ("float64", 64, "f64"), "I64": ("int64", 64, "i64"),
    "U64": ("uint64", 64, None), "C64": ("complex64", 64, None), "F8_E4M3": ("float8_e4m3fn", 8, None),
    "F8_E5M2": ("float8_e5m2", 8, None), "F8_E8M0": ("float8_e8m0fnu", 8, None),
    "F8_E4M3FNUZ": ("float8_e4m3fnuz", 8, None), "F8_E5M2FNUZ": ("float8_e5m2fnuz", 8, None),
    "F4": ("float4_e2m1fn_x2", 4, None),
}


def as_f32(dtype, raw):
    """The values of a float tensor as float32 (for the cast check), or None."""
    if dtype == "F32":
        return np.frombuffer(raw, np.float32)
    if dtype == "F16":
        return np.frombuffer(raw, np.float16).astype(np.float32)
    if dtype == "BF16":
        return (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
    return None


def random_payload(rng, dtype, shape):
    n = int(np.prod(shape)) if shape else 1
    _, bits, _ = DTYPES[dtype]
    nbytes = n * bits // 8
    if dtype == "BOOL":
        return rng.integers(0, 2, nbytes, dtype=np.uint8).tobytes()
    if dtype in ("F32", "F16", "BF16", "F64"):
        vals = rng.standard_normal(n)
        if dtype == "F32":
            return vals.astype(np.float32).tobytes()
        if dtype == "F16":
            return vals.astype(np.float16).tobytes()
        if dtype == "F64":
            return vals.tobytes()
        return (vals.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes()
    return rng.integers(0, 256, nbytes, dtype=np.uint8).tobytes()


def serialize_file(tensors, metadata=None):
    """tensors: [(name, dtype, shape, raw bytes)] -> file bytes, by the safetensors package."""
    keep = []
    specs = {}
    for name, dtype, shape, raw in tensors:
        buf = np.frombuffer(raw, np.uint8) if raw else np.zeros(1, np.uint8)
        keep.append(buf)
        spec_shape = list(shape)
        if dtype == "F4":  # the package counts float4_e2m1fn_x2 pairs in the last dim
            spec_shape[-1] //= 2
        specs[name] = TensorSpec(dtype=DTYPES[dtype][0], shape=spec_shape, data_ptr=buf.ctypes.data,
                                 data_len=len(raw))
    return bytes(serialize(specs, metadata=metadata))


def describe(out, name, data, man):
    """Manifest lines of a valid file, from json's reading of its header."""
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n].decode("utf-8"))
    base = 8 + n
    meta = header.pop("__metadata__", {})
    man.append("file " + name)
    man.append("n_meta %d" % len(meta))
    man.append("n_tensors %d" % len(header))
    man.append("data_offset %d" % base)
    for k, v in meta.items():
        man.append("meta %s string s:%s" % (k.encode().hex() or "-", v.encode().hex()))
    for i, (tname, info) in enumerate(header.items()):
        begin, end = info["data_offsets"]
        raw = data[base + begin:base + end]
        man.append(tensor_line(out, "%s.t%d" % (name, i), tname, info["dtype"], DTYPES[info["dtype"]][2],
                               info["shape"], base + begin, raw, as_f32(info["dtype"], raw)))
    man.append("end")


def handmade(header_text, payload, pad_to=8):
    """File bytes from a literal header (padded with spaces as the writer does)."""
    h = header_text.encode("utf-8") if isinstance(header_text, str) else header_text
    h += b" " * (-len(h) % pad_to)
    return struct.pack("<Q", len(h)) + h + payload


def valid_files(rng):
    """(name, bytes)."""
    files = []
    shapes = [(2, 3), (5,), (), (1, 2, 2), (2, 1, 1, 2)]
    tensors = []
    for i, dtype in enumerate(DTYPES):
        shape = shapes[i % len(shapes)]
        if dtype == "F4":
            shape = (4, 2)
        tensors.append(("t." + dtype.lower(), dtype, shape, random_payload(rng, dtype, shape)))
    tensors.append(("t.empty", "F32", (0, 3), b""))
    tensors.append(("t.rank8", "F32", (1, 2, 1, 2, 1, 2, 1, 2), random_payload(rng, "F32", (16,))))
    meta = {"format": "pt", "unicode": "h\u00e9llo \u2713 \U0001F600", "empty": "",
            'quote"key\\': 'line\nbreak\ttab\u0001', "": "empty key"}
    files.append(("all.safetensors", serialize_file(tensors, meta)))
    files.append(("plain.safetensors", serialize_file([
        ("model.embed_tokens.weight", "BF16", (8, 4), random_payload(rng, "BF16", (8, 4))),
        ("model.norm.weight", "F32", (4,), random_payload(rng, "F32", (4,))),
        ("lm_head.weight", "F16", (8, 4), random_payload(rng, "F16", (8, 4)))])))
    files.append(("empty.safetensors", serialize_file([])))
    a = np.arange(4, dtype=np.float32).tobytes()
    b = np.arange(2, dtype=np.float64).tobytes()
    # Escapes, surrogate pairs, whitespace, member order, a gap and reversed offsets.
    files.append(("escapes.safetensors", handmade(
        '\n{\t"__metadata__" : { "k\\u00e9y" : "v\\ud83d\\ude00\\"\\\\\\/\\b\\f\\n\\r\\t" } ,\r\n'
        ' "caf\\u00e9\\ud83d\\ude00" : { "shape" : [ 4 ] , "data_offsets" : [ 24 , 40 ] , "dtype" : "F32" } ,'
        ' "b" : {"data_offsets":[0,16],"dtype":"F64","shape":[2]} }\n', b + b"\xee" * 8 + a)))
    return files


def bad_files():
    """(name, bytes, status, needle)."""
    F, U = "RLX_ERR_FORMAT", "RLX_ERR_UNSUPPORTED"
    t = '"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}'
    d8 = b"\0" * 8

    def h(text, payload=d8):
        return handmade(text, payload)

    def tensor(dtype="F32", shape="[2]", offsets="[0,8]", extra=""):
        return '{"t":{"dtype":"%s","shape":%s,"data_offsets":%s%s}}' % (dtype, shape, offsets, extra)

    cases = [
        ("tiny", b"\x05\0\0\0", F, "not a GGUF or safetensors file"),
        ("length_past_end", struct.pack("<Q", 30) + b"{}", F, "header length 30 exceeds the 2 bytes after it"),
        ("length_huge", struct.pack("<Q", 2**64 - 1) + b"{}" + d8, F, "header length 18446744073709551615 exceeds"),
        ("trailing_bytes", h("{}x"), F, "bytes after the header object"),
        ("trailing_comma", h("{%s,}" % t), F, "expected a string"),
        ("unterminated_object", h("{%s" % t, b""), F, "expected '}'"),
        ("unterminated_string", h('{"t'), F, "unterminated string"),
        ("missing_colon", h('{"t" {}}'), F, "expected ':'"),
        ("not_object_member", h('{"t":5}'), F, "expected '{'"),
        ("unknown_dtype", h(tensor("F128")), F, 'unknown dtype "F128"'),
        ("missing_offsets", h('{"t":{"dtype":"F32","shape":[2]}}'), F, 'lacks "data_offsets"'),
        ("missing_dtype", h('{"t":{"shape":[2],"data_offsets":[0,8]}}'), F, 'lacks "dtype"'),
        ("unknown_member", h(tensor(extra=',"extra":1')), F, 'unknown member "extra"'),
        ("repeated_member", h(tensor(extra=',"dtype":"F32"')), F, 'repeated "dtype"'),
        ("negative_dim", h(tensor(shape="[-2]")), F, "negative number"),
        ("float_dim", h(tensor(shape="[2.0]")), F, "fraction or exponent"),
        ("exponent_dim", h(tensor(shape="[2e0]")), F, "fraction or exponent"),
        ("leading_zero", h(tensor(shape="[02]")), F, "leading zero"),
        ("string_dim", h(tensor(shape='["2"]')), F, "expected a non-negative integer"),
        ("nested_shape", h(tensor(shape="[[2]]")), F, "expected a non-negative integer"),
        ("dim_overflow", h(tensor(shape="[99999999999999999999]")), F, "integer overflows 64 bits"),
        ("numel_overflow", h(tensor(shape="[4294967296,4294967296]")), F, "element count overflows"),
        ("bytes_overflow", h(tensor("F64", shape="[4611686018427387904]")), F, "byte size overflows"),
        ("offsets_mismatch", h(tensor(offsets="[0,4]")), F, "data_offsets [0, 4] hold 4 bytes"),
        ("offsets_reversed", h(tensor(offsets="[8,0]")), F, "end before they begin"),
        ("offsets_one_value", h(tensor(offsets="[8]")), F, "expected ','"),
        ("offsets_past_end", h(tensor(offsets="[4,12]")), F, "ends past the end of the file"),
        ("offsets_huge", h(tensor(offsets="[18446744073709551608,18446744073709551615]", shape="[1]", dtype="I64")),
         F, "hold 7 bytes"),
        ("offsets_near_2_64", h(tensor(offsets="[18446744073709551600,18446744073709551608]")), F,
         "ends past the end of the file"),
        ("overlap", h('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                      '"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}', d8 * 2), F, "overlap"),
        ("duplicate_name", h("{%s,%s}" % (t, t)), F, "duplicate tensor name 't'"),
        ("duplicate_meta", h('{"__metadata__":{"k":"a","k":"b"}}'), F, "duplicate metadata key 'k'"),
        ("repeated_metadata", h('{"__metadata__":{},"__metadata__":{}}'), F, 'repeated "__metadata__"'),
        ("metadata_number", h('{"__metadata__":{"k":1}}'), F, "__metadata__ values must be strings"),
        ("metadata_object", h('{"__metadata__":{"k":{}}}'), F, "__metadata__ values must be strings"),
        ("metadata_array", h('{"__metadata__":[]}'), F, "expected '{'"),
        ("nul_name", h('{"a\\u0000b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'), F,
         "a tensor name contains a NUL byte"),
        ("nul_meta_key", h('{"__metadata__":{"a\\u0000":"b"}}'), F, "a metadata key contains a NUL byte"),
        ("invalid_utf8", h(b'{"\xff":{}}'), F, "invalid UTF-8"),
        ("overlong_utf8", h(b'{"\xc0\xaf":{}}'), F, "invalid UTF-8"),
        ("utf8_surrogate", h(b'{"\xed\xa0\x80":{}}'), F, "invalid UTF-8"),
        ("utf8_cut", h(b'{"\xe2\x82'), F, "invalid UTF-8"),
        ("lone_high_surrogate", h('{"\\ud800":{}}'), F, "unpaired high surrogate"),
        ("lone_low_surrogate", h('{"\\udc00":{}}'), F, "unpaired low surrogate"),
        ("bad_escape", h('{"\\x":{}}'), F, "invalid escape"),
        ("bad_u_escape", h('{"\\u12G4":{}}'), F, "invalid \\u escape"),
        ("control_byte", h('{"a\nb":{}}'), F, "control byte in a string"),
        ("rank9", h(tensor(shape="[1,1,1,1,1,1,1,1,2]")), U, "more than 8 dims"),
        ("f4_odd", h(tensor("F4", shape="[3]", offsets="[0,2]")), F, "not a whole number of bytes"),
        ("empty_member_object", h('{"t":{}}'), F, 'lacks "dtype"'),
    ]
    return cases


def write_corpus(d, rng):
    os.makedirs(d, exist_ok=True)
    for name, data in valid_files(rng):
        if len(data) <= 4096:
            write_bytes(os.path.join(d, name), data)
    data = dict(valid_files(rng))["plain.safetensors"]
    write_cuts(d, "plain", "safetensors", data, (8, 20, len(data) // 2, len(data) - 1))
    write_bad_files(d, bad_files(), "safetensors")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--corpus")
    args = ap.parse_args()
    seed = int(os.environ.get("RLX_TEST_SEED", "1234"))
    rng = np.random.default_rng(seed)
    if args.corpus:
        write_corpus(args.corpus, rng)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        man = []
        files = valid_files(rng)
        for name, data in files:
            write_bytes(os.path.join(args.out, name), data)
            describe(args.out, name, data, man)
        for name, data in files[:2]:
            n = struct.unpack("<Q", data[:8])[0]
            header = json.loads(data[8:8 + n])
            header.pop("__metadata__", None)
            end = max((8 + n + v["data_offsets"][1] for v in header.values()), default=8 + n)
            man.append("truncate %s %d" % (name, end))
        write_bad_files(args.out, bad_files(), "safetensors", man)
        write_manifest(args.out, man, "make_safetensors_cases", seed)


if __name__ == "__main__":
    main()
