"""rlx_ctypes.py — the rlx_model C API through ctypes, for the ONNX tests."""
import ctypes

import numpy as np

# rlx_dtype codes (include/rlx.h) of the NumPy dtypes the tests use.
NP_TO_RLX = {np.dtype(np.float32): 0, np.dtype(np.float16): 1, np.dtype(np.float64): 3,
             np.dtype(np.int8): 4, np.dtype(np.uint8): 5, np.dtype(np.int32): 6,
             np.dtype(np.int64): 7, np.dtype(np.bool_): 8, np.dtype(np.int16): 20,
             np.dtype(np.uint16): 21, np.dtype(np.uint32): 22, np.dtype(np.uint64): 23}
try:
    import ml_dtypes   # NumPy has no bfloat16 of its own; onnx uses this one
    NP_TO_RLX[np.dtype(ml_dtypes.bfloat16)] = 2
except ImportError:
    pass
RLX_TO_NP = {v: k for k, v in NP_TO_RLX.items()}


def is_narrow(dtype):
    """An ml_dtypes float8/float4/int4/int2 type: rlx holds one a byte (U8),
    its bit pattern in the low bits, as ml_dtypes does."""
    return dtype.itemsize == 1 and dtype not in NP_TO_RLX
MAX_RANK = 8


class Options(ctypes.Structure):   # rlx_options
    _fields_ = [("device", ctypes.c_int), ("threads", ctypes.c_int), ("flags", ctypes.c_uint),
                ("device_index", ctypes.c_int), ("comm", ctypes.c_void_p)]


CUDA = Options(2, 0, 0, 0, None)   # RLX_DEVICE_CUDA, its first GPU


class Stats(ctypes.Structure):   # rlx_session_stats
    _fields_ = [("plans_built", ctypes.c_int64), ("plan_cache_hits", ctypes.c_int64), ("runs", ctypes.c_int64),
                ("arena_bytes", ctypes.c_size_t), ("naive_bytes", ctypes.c_size_t),
                ("peak_live_bytes", ctypes.c_size_t), ("views", ctypes.c_int64), ("in_place", ctypes.c_int64),
                ("compile_cache_hit", ctypes.c_int), ("plans_reused", ctypes.c_int64),
                ("params_kept", ctypes.c_int64), ("fallback_nodes", ctypes.c_int64),
                ("device_launches", ctypes.c_int64), ("plans_held", ctypes.c_int64),
                ("param_device_bytes", ctypes.c_size_t), ("packed_bytes", ctypes.c_size_t)]


class RlxError(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class Rlx:
    def __init__(self, lib_path):
        lib = ctypes.CDLL(lib_path)
        P, I, S, L = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_int64
        lib.rlx_last_error.restype = ctypes.c_char_p
        lib.rlx_status_name.restype = ctypes.c_char_p
        lib.rlx_status_name.argtypes = [I]
        lib.rlx_model_load_memory.argtypes = [ctypes.c_char_p, S, P, ctypes.POINTER(P)]
        lib.rlx_model_load.argtypes = [ctypes.c_char_p, P, ctypes.POINTER(P)]
        lib.rlx_model_free.argtypes = [P]
        lib.rlx_model_compile.argtypes = [P, P, ctypes.POINTER(P)]
        lib.rlx_model_num_inputs.argtypes = [P]
        lib.rlx_model_input_name.argtypes = [P, I]
        lib.rlx_model_input_name.restype = ctypes.c_char_p
        lib.rlx_set_input_shaped.argtypes = [P, ctypes.c_char_p, P, S, I, ctypes.POINTER(L)]
        lib.rlx_run.argtypes = [P]
        lib.rlx_session_num_outputs.argtypes = [P]
        lib.rlx_output_type.argtypes = [P, I, ctypes.POINTER(I), ctypes.POINTER(L)]
        lib.rlx_output.argtypes = [P, I, P, S]
        lib.rlx_session_free.argtypes = [P]
        lib.rlx_session_get_stats.argtypes = [P, ctypes.POINTER(Stats)]
        self.lib = lib

    def check(self, status):
        if status:
            raise RlxError(self.lib.rlx_status_name(status).decode(),
                           self.lib.rlx_last_error().decode(errors="replace"))

    def set_inputs(self, m, s, feeds):
        """Sets session s's inputs from feeds, a dict by model m's input names."""
        lib = self.lib
        for i in range(lib.rlx_model_num_inputs(m)):
            name = lib.rlx_model_input_name(m, i)
            x = np.ascontiguousarray(feeds[name.decode()])
            dims = (ctypes.c_int64 * MAX_RANK)(*x.shape)
            self.check(lib.rlx_set_input_shaped(s, name, x.ctypes.data, x.nbytes, x.ndim, dims))

    def output(self, s, k):
        """Output k of session s's last run as an array."""
        t, dims = ctypes.c_int(), (ctypes.c_int64 * MAX_RANK)()
        r = self.lib.rlx_output_type(s, k, ctypes.byref(t), dims)
        out = np.empty([dims[i] for i in range(r)], RLX_TO_NP[t.value])
        self.check(self.lib.rlx_output(s, k, out.ctypes.data, out.nbytes))
        return out

    def stats(self, s):
        st = Stats()
        self.check(self.lib.rlx_session_get_stats(s, ctypes.byref(st)))
        return st

    def run_model(self, model_bytes, feeds):
        """Loads a serialized model, runs it once on feeds (list of arrays in
        the order of the model's inputs) and returns its outputs."""
        lib = self.lib
        m = ctypes.c_void_p()
        self.check(lib.rlx_model_load_memory(model_bytes, len(model_bytes), None, ctypes.byref(m)))
        s = ctypes.c_void_p()
        try:
            self.check(lib.rlx_model_compile(m, None, ctypes.byref(s)))
            if lib.rlx_model_num_inputs(m) != len(feeds):
                raise RlxError("RLX_ERR_INVALID", "%d inputs given, %d declared"
                               % (len(feeds), lib.rlx_model_num_inputs(m)))
            keep = []
            for i, x in enumerate(feeds):
                x = np.asarray(x, order="C")   # (ascontiguousarray would make a 0-d array 1-d)
                if is_narrow(x.dtype):
                    x = x.view(np.uint8)   # rlx holds ONNX's narrow types as their bytes
                if x.dtype not in NP_TO_RLX:
                    raise RlxError("RLX_ERR_UNSUPPORTED", "input dtype %s" % x.dtype)
                keep.append(x)
                dims = (ctypes.c_int64 * MAX_RANK)(*x.shape)
                self.check(lib.rlx_set_input_shaped(s, lib.rlx_model_input_name(m, i),
                                                    x.ctypes.data, x.nbytes, x.ndim, dims))
            self.check(lib.rlx_run(s))
            outs = []
            for i in range(lib.rlx_session_num_outputs(s)):
                dt = ctypes.c_int()
                dims = (ctypes.c_int64 * MAX_RANK)()
                rank = lib.rlx_output_type(s, i, ctypes.byref(dt), dims)
                y = np.empty([dims[k] for k in range(rank)], dtype=RLX_TO_NP.get(dt.value, np.float32))
                if dt.value not in RLX_TO_NP:
                    raise RlxError("RLX_ERR_UNSUPPORTED", "output dtype %d" % dt.value)
                self.check(lib.rlx_output(s, i, y.ctypes.data, y.nbytes))
                outs.append(y)
            return outs
        finally:
            if s:
                lib.rlx_session_free(s)
            lib.rlx_model_free(m)
