"""rlxcase — write op-parity cases for the C runner (tests/op_parity.c).

A case is a graph in rlx text form, its inputs/params as raw little-endian
files, and the expected outputs computed here with NumPy. The C test
`test_op_parity GROUP` runs `gen_cases.py --group GROUP --out DIR`, which
imports `cases_GROUP.py` and calls its `cases(suite, rng)`; then it reads
DIR/manifest.txt, runs every case through rlx and compares.

Example:
    g = Graph("gelu")
    x = g.input("x", "f32", [3, 5])
    g.outputs(g.op("Activation", [x], act="gelu"))
    a = rng.standard_normal((3, 5)).astype(np.float32)
    suite.add("gelu_f32", g, inputs={"x": a}, expected=[T(ref_gelu(a), "f32")])

Values: numpy arrays are typed by their numpy dtype (float32 -> f32, ...);
T(values, "bf16") (or any dtype name) converts explicitly; T.raw(bytes,
dtype, shape) passes packed block data (GGUF block dtypes) as is.
"""
import os
import numpy as np

NP_TO_RLX = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16",
             np.dtype(np.float64): "f64", np.dtype(np.int8): "i8",
             np.dtype(np.uint8): "u8", np.dtype(np.int32): "i32",
             np.dtype(np.int64): "i64", np.dtype(np.bool_): "bool",
             np.dtype(np.int16): "i16", np.dtype(np.uint16): "u16",
             np.dtype(np.uint32): "u32", np.dtype(np.uint64): "u64"}
RLX_TO_NP = {"f32": np.float32, "f16": np.float16, "f64": np.float64,
             "i8": np.int8, "u8": np.uint8, "i32": np.int32, "i64": np.int64,
             "bool": np.bool_, "i16": np.int16, "u16": np.uint16, "u32": np.uint32,
             "u64": np.uint64}
FLOAT_DTYPES = ["f32", "f16", "bf16", "f64"]
BLOCK_DTYPES = ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k",
                "q5_k", "q6_k", "q8_k"]


def bf16_bits(x):
    """float array -> uint16 bf16 bits, round to nearest even (NaN kept quiet)."""
    f = np.array(x, dtype=np.float32)  # a copy; keeps rank 0 (ascontiguousarray would not)
    u = f.view(np.uint32).astype(np.uint64)
    rounded = np.array((u + 0x7FFF + ((u >> 16) & 1)) >> 16, dtype=np.uint16)
    nan = np.isnan(f)
    rounded[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return rounded.reshape(f.shape)


def bf16_to_f32(bits):
    b = np.array(bits, dtype=np.uint16)
    return (b.astype(np.uint32) << 16).view(np.float32).reshape(b.shape)


def round_to(x, dtype):
    """Values of x as they are after storing in dtype (for computing references)."""
    if dtype == "bf16":
        return bf16_to_f32(bf16_bits(x))
    return np.asarray(x).astype(RLX_TO_NP[dtype])


class T:
    """A tensor with an explicit rlx dtype."""

    def __init__(self, values, dtype):
        self.dtype = dtype
        self.values = np.asarray(values)
        self.shape = tuple(self.values.shape)
        self._raw = None

    @staticmethod
    def raw(data, dtype, shape):
        t = T(np.zeros(0, np.uint8), dtype)
        t._raw = bytes(data)
        t.shape = tuple(shape)
        return t

    def tobytes(self):
        if self._raw is not None:
            return self._raw
        if self.dtype == "bf16":
            return bf16_bits(self.values).tobytes()
        return np.ascontiguousarray(self.values.astype(RLX_TO_NP[self.dtype])).tobytes()


def as_T(v):
    if isinstance(v, T):
        return v
    a = np.asarray(v)
    if a.dtype not in NP_TO_RLX:
        raise TypeError("no rlx dtype for numpy dtype %s" % a.dtype)
    return T(a, NP_TO_RLX[a.dtype])


def _dims(shape):
    return "[" + ",".join(str(d) for d in shape) + "]"


def _attr_value(key, v):
    if key == "name":
        return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        f = float(v)
        if np.isnan(f):
            return "nan"
        if np.isinf(f):
            return "inf" if f > 0 else "-inf"
        return repr(f)
    if isinstance(v, (bytes, bytearray)):
        return 'h"' + bytes(v).hex() + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(str(e) for e in v) + "]"
    return str(v)  # identifiers: enum names, dtype names, "none"


class Graph:
    """Builds rlx graph text. Node handles are strings like "%3"."""

    def __init__(self, name="case"):
        self.name = name
        self.lines = []
        self.n = 0
        self.outs = []

    def _emit(self, op, inputs, attrs, ty=None):
        h = "%%%d" % self.n
        self.n += 1
        a = ""
        if attrs:
            a = "{" + ", ".join("%s=%s" % (k, _attr_value(k, v)) for k, v in attrs.items()) + "}"
        ins = "(" + ", ".join(inputs) + ")" if inputs else ""
        t = " : " + ty if ty else ""
        self.lines.append("  %s = %s%s%s%s" % (h, op, a, ins, t))
        return h

    def input(self, name, dtype, shape):
        """shape entries: ints or symbol names (str)."""
        return self._emit("Input", [], {"name": name}, dtype + _dims(shape))

    def param(self, name, dtype, shape):
        return self._emit("Param", [], {"name": name}, dtype + _dims(shape))

    def constant(self, value):
        t = as_T(value)
        return self._emit("Constant", [], {"data": t.tobytes()}, t.dtype + _dims(t.shape))

    def op(self, op_name, inputs, /, **attrs):
        """attrs may include op=... (Binary, Compare, Reduce): the op name is positional-only."""
        return self._emit(op_name, list(inputs), attrs)

    def get_output(self, node, index):
        return self._emit("GetOutput", [node], {"index": index})

    def outputs(self, *nodes):
        self.outs = list(nodes)

    def text(self):
        body = "\n".join(self.lines)
        return 'graph "%s" {\n%s\n  outputs %s\n}\n' % (self.name, body, ", ".join(self.outs))


DEFAULT_TOL = {"f64": (1e-9, 1e-9), "f32": (1e-5, 1e-4), "f16": (2e-3, 2e-3),
               "bf16": (1e-2, 1.6e-2)}


class Suite:
    def __init__(self, group):
        self.group = group
        self.cases = []

    def add(self, name, graph, inputs=None, params=None, expected=None, atol=None,
            rtol=None, expect_error=None):
        """expected: list of outputs (arrays or T). expect_error: a status
        name such as "RLX_ERR_SHAPE" that compile or run must return."""
        if any(c[0] == name for c in self.cases):
            raise ValueError("duplicate case name " + name)
        self.cases.append((name, graph, inputs or {}, params or {}, expected or [], atol,
                           rtol, expect_error))

    def write(self, outdir):
        os.makedirs(outdir, exist_ok=True)
        man = []
        for ci, (name, g, inputs, params, expected, atol, rtol, err) in enumerate(self.cases):
            d = "c%04d" % ci
            os.makedirs(os.path.join(outdir, d), exist_ok=True)
            gf = os.path.join(d, "graph.rlx")
            with open(os.path.join(outdir, gf), "w") as f:
                f.write(g.text())
            man.append("case %s" % name)
            man.append("graph %s" % gf)
            for kind, table in (("input", inputs), ("param", params)):
                for k, v in table.items():
                    t = as_T(v)
                    fn = os.path.join(d, "%s_%s.bin" % (kind, k))
                    with open(os.path.join(outdir, fn), "wb") as f:
                        f.write(t.tobytes())
                    dims = ",".join(str(x) for x in t.shape) or "-"
                    man.append("%s %s %s %s %s" % (kind, k, t.dtype, dims, fn))
            for i, v in enumerate(expected):
                t = as_T(v)
                fn = os.path.join(d, "expect_%d.bin" % i)
                with open(os.path.join(outdir, fn), "wb") as f:
                    f.write(t.tobytes())
                dims = ",".join(str(x) for x in t.shape) or "-"
                a = "-" if atol is None else repr(float(atol))
                r = "-" if rtol is None else repr(float(rtol))
                man.append("expect %s %s %s %s %s" % (t.dtype, dims, fn, a, r))
            if err:
                man.append("error %s" % err)
            man.append("end")
        with open(os.path.join(outdir, "manifest.txt"), "w") as f:
            f.write("\n".join(man) + "\n")
