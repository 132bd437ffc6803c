"""rlx dtypes <-> NumPy dtypes (float16 is NumPy's, bfloat16 ml_dtypes')."""
import numpy as np

from . import errors

try:
    import ml_dtypes
    _BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # bfloat16 tensors then cross as raw uint16
    _BF16 = None

# rlx_dtype order of rlx.h; the GGUF block types follow the plain ones.
NAMES = ["f32", "f16", "bf16", "f64", "i8", "u8", "i32", "i64", "bool", "q4_0", "q4_1", "q5_0",
         "q5_1", "q8_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "q8_k"]
CODE = {n: i for i, n in enumerate(NAMES)}
NUMPY = [np.dtype(np.float32), np.dtype(np.float16), _BF16, np.dtype(np.float64), np.dtype(np.int8),
         np.dtype(np.uint8), np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.bool_)]
_FROM_NUMPY = {d: i for i, d in enumerate(NUMPY) if d is not None}
# onnxruntime's NodeArg.type strings.
ONNX_TYPE = ["tensor(float)", "tensor(float16)", "tensor(bfloat16)", "tensor(double)", "tensor(int8)",
             "tensor(uint8)", "tensor(int32)", "tensor(int64)", "tensor(bool)"]


def code(dtype):
    """The rlx_dtype code of a name ("f32"), a NumPy dtype or a type (np.float32)."""
    if isinstance(dtype, int) and 0 <= dtype < len(NAMES):
        return dtype
    if isinstance(dtype, str) and dtype in CODE:
        return CODE[dtype]
    try:
        d = np.dtype(dtype)
    except TypeError:
        d = None
    if d is not None and d in _FROM_NUMPY:
        return _FROM_NUMPY[d]
    raise errors.DtypeError("rlx: unknown dtype %r (one of %s, or a NumPy dtype)" % (dtype, ", ".join(NAMES)))


def to_numpy(c):
    """The NumPy dtype of rlx dtype code c; raw bytes (uint8) for block dtypes."""
    if c < len(NUMPY):
        d = NUMPY[c]
        return d if d is not None else np.dtype(np.uint16)
    return np.dtype(np.uint8)


def name(c):
    return NAMES[c] if 0 <= c < len(NAMES) else "unknown"
