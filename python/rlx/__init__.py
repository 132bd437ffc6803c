"""rlx: a small ML compiler and runtime, from Python.

    import numpy as np, rlx
    g = rlx.Graph("mlp")
    x = g.input("x", "f32", ("batch", 4))
    w = g.param("w", "f32", (4, 3))
    g.set_outputs(rlx.ops.softmax(x @ w, -1))
    sess = g.compile(device="cpu")
    sess.set_param("w", np.ones((4, 3), np.float32))
    (y,) = sess.run({"x": np.ones((2, 4), np.float32)})

rlx.LLM runs GGUF language models, rlx.Embedder sentence encoders and
rerankers, rlx.InferenceSession ONNX models with onnxruntime's interface;
rlx.ModelFile reads GGUF and safetensors files. Errors raise rlx.Error
subclasses carrying rlx's message. The C library is librlx (ctypes);
RLX_LIBRARY overrides its path.
"""
from . import _lib, ops
from .errors import (DeviceError, DtypeError, Error, FormatError, InternalError, InvalidError, IoError,
                     NoMemError, ShapeError, UnsupportedError)
from .graph import (Graph, Node, Session, as_array, compile_cache_clear, compile_cache_stats, cpu_threads, grad,
                    jvp, train_graph)
from .embed import Embedder
from .llm import LLM
from .modelfile import ModelFile
from .onnx import InferenceSession, NodeArg, SessionOptions, get_available_providers

__version__ = _lib.lib.rlx_version().decode()


def system_info():
    """The build and the machine (version, commit, CUDA, CPU features), as `rlx --version` prints."""
    return _lib.lib.rlx_system_info().decode()


__all__ = ["Graph", "Node", "Session", "as_array", "grad", "jvp", "train_graph", "compile_cache_stats",
           "compile_cache_clear", "cpu_threads", "ops", "LLM", "Embedder", "ModelFile",
           "InferenceSession", "NodeArg", "SessionOptions", "get_available_providers", "system_info",
           "Error", "InvalidError", "ShapeError", "DtypeError", "UnsupportedError", "NoMemError", "IoError",
           "FormatError", "DeviceError", "InternalError"]
