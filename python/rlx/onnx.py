"""rlx.InferenceSession: ONNX models behind onnxruntime's interface, so code
written for onnxruntime runs by changing the import."""
import ctypes
import os

from . import _dtypes, _lib, errors
from ._lib import check, lib
from .graph import Session, _options

_PROVIDERS = {"CPUExecutionProvider": "cpu", "CUDAExecutionProvider": "cuda"}


def get_available_providers():
    """onnxruntime's provider names rlx takes ("CUDAExecutionProvider" runs on rlx's CUDA backend)."""
    return list(_PROVIDERS)


class SessionOptions:
    """The onnxruntime.SessionOptions fields rlx reads: intra_op_num_threads
    (0: every core) and graph_optimization_level (0, ORT_DISABLE_ALL, runs
    the graph op for op); the others are accepted and ignored."""

    def __init__(self):
        self.intra_op_num_threads = 0
        self.graph_optimization_level = 99


class NodeArg:
    """An input or output as onnxruntime describes it: ``name``, ``shape``
    (ints, names of symbolic dims, None for unknown) and ``type`` ("tensor(float)")."""

    def __init__(self, name, shape, type):
        self.name, self.shape, self.type = name, shape, type

    def __repr__(self):
        return "NodeArg(name=%r, type=%r, shape=%r)" % (self.name, self.type, self.shape)


class InferenceSession(_lib.Owner):
    """An ONNX model (a path, or the model's bytes) compiled by rlx.

    ``providers``: onnxruntime's provider names, the first rlx takes wins
    (CUDAExecutionProvider: the CUDA backend; default CPU).
    ``sess_options``: a SessionOptions (or onnxruntime's)."""
    _owned = (("_sess", None), ("_m", "rlx_model_free"))  # the session first: it reads the model's weights

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None, **kwargs):
        self._m = None
        m = _lib.c_vp()
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            self._bytes = bytes(path_or_bytes)  # rlx borrows them for the model's life
            buf = ctypes.c_char_p(self._bytes)
            check(lib.rlx_model_load_memory(buf, len(self._bytes), None, ctypes.byref(m)))
        else:
            check(lib.rlx_model_load(os.fsencode(path_or_bytes), None, ctypes.byref(m)))
        self._m = m.value
        device = "cpu"
        self._providers = ["CPUExecutionProvider"]
        for p in providers or []:
            name = p[0] if isinstance(p, tuple) else p
            if name in _PROVIDERS:
                device = _PROVIDERS[name]
                opts = p[1] if isinstance(p, tuple) and len(p) > 1 and isinstance(p[1], dict) else {}
                if device == "cuda" and "device_id" in opts:
                    device = "cuda:%d" % int(opts["device_id"])
                self._providers = [name] + (["CPUExecutionProvider"] if device != "cpu" else [])
                break
        threads = getattr(sess_options, "intra_op_num_threads", 0) or 0
        level = int(getattr(sess_options, "graph_optimization_level", 99))
        opts = _options(device, threads, optimize=level != 0)
        s = _lib.c_vp()
        check(lib.rlx_model_compile(self._m, ctypes.byref(opts), ctypes.byref(s)))
        self._inputs = self._args(lib.rlx_model_num_inputs, lib.rlx_model_input_name, lib.rlx_model_input_type)
        self._outputs = self._args(lib.rlx_model_num_outputs, lib.rlx_model_output_name,
                                   lib.rlx_model_output_type)
        self._sess = Session(s.value, {a.name: (c, a.shape) for a, c in self._inputs})
        self._out_index = {a.name: i for i, (a, _) in enumerate(self._outputs)}

    def _args(self, count, name, typ):
        out = []
        for i in range(count(self._m)):
            dt = ctypes.c_int()
            dims = (_lib.i64 * 8)()
            rank = typ(self._m, i, ctypes.byref(dt), dims)
            shape = []
            for d in dims[:max(rank, 0)]:
                if d >= 0:
                    shape.append(d)
                else:
                    n = lib.rlx_model_dim_name(self._m, d)
                    shape.append(n.decode("utf-8", "replace") if n else None)
            c = dt.value
            t = _dtypes.ONNX_TYPE[c] if c < len(_dtypes.ONNX_TYPE) else "tensor(unknown)"
            out.append((NodeArg(name(self._m, i).decode("utf-8", "replace"), shape, t), c))
        return out

    def get_inputs(self):
        """The model's inputs (those without a weight) as NodeArgs."""
        return [a for a, _ in self._inputs]

    def get_outputs(self):
        """The model's outputs as NodeArgs."""
        return [a for a, _ in self._outputs]

    def get_providers(self):
        return list(self._providers)

    def get_modelmeta(self):
        """The model's summary text (format, producer, opsets, ops) as rlx reads it."""
        return _lib.take_string(lib.rlx_model_summary(self._m))

    def run(self, output_names, input_feed, run_options=None):
        """Runs with ``input_feed`` {name: array}; returns the outputs named
        by ``output_names`` (None: all) as NumPy arrays."""
        if output_names is None:
            idx = None
        else:
            try:
                idx = [self._out_index[n] for n in output_names]
            except KeyError as e:
                raise errors.InvalidError("rlx: the model has no output %s (outputs: %s)" % (
                    e, ", ".join(self._out_index))) from None
        return self._sess.run(input_feed, idx)

