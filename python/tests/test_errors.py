"""Bad calls raise the rlx.Error subclass of their rlx_status, with rlx's
message, and never take the interpreter down."""
import numpy as np
import pytest

import rlx
from rlx import _lib, errors, ops


def test_one_class_per_status():
    for code, cls in enumerate(errors.BY_STATUS):
        if cls is not None:
            assert _lib.lib.rlx_status_name(code).decode() == cls.status
            assert issubclass(cls, rlx.Error)
    assert issubclass(rlx.ShapeError, ValueError) and issubclass(rlx.DtypeError, TypeError)


def _sess():
    g = rlx.Graph("e")
    x = g.input("x", "f32", (2, 3))
    w = g.param("w", "f32", (3,))
    g.set_outputs(x * w)
    return g, g.compile()


def test_builder_errors():
    g = rlx.Graph("b")
    x = g.input("x", "f32", (2, 3))
    with pytest.raises(rlx.ShapeError, match=r"\[2,3\]"):
        ops.matmul(x, g.input("y", "f32", (2, 3)))
    with pytest.raises(rlx.DtypeError):
        g.input("z", "f99", (1,))
    with pytest.raises(rlx.InvalidError):
        ops.softmax(rlx.Graph("other").input("x", "f32", (1,)) + x)
    with pytest.raises(rlx.InvalidError):
        ops.activation("nope", x)
    with pytest.raises(rlx.ShapeError):
        ops.slice(x, [0, 0], [1], [1, 1])
    with pytest.raises(rlx.Error):
        ops.reduce_sum(x, [5])
    with pytest.raises(rlx.ShapeError):
        g.input("big", "f32", (1,) * 9)
    with pytest.raises(TypeError):
        ops.softmax(x, axis=-1, nonsense=1)


def test_run_errors():
    g, s = _sess()
    s.set_param("w", np.ones(3, np.float32))
    with pytest.raises(rlx.InvalidError, match="no input 'y'"):
        s.run({"y": np.zeros((2, 3), np.float32)})
    with pytest.raises(rlx.ShapeError):
        s.run({"x": np.zeros((3, 3), np.float32)})
    with pytest.raises(rlx.DtypeError):
        s.run({"x": np.zeros((2, 3), np.complex64)})
    with pytest.raises(rlx.InvalidError):
        s.set_param("nope", np.ones(3, np.float32))
    with pytest.raises(rlx.Error):
        s.set_param("w", np.ones(5, np.float32))
    with pytest.raises(rlx.InvalidError):
        s.output(7)
    with pytest.raises(rlx.InvalidError):
        g.compile(device="tpu")
    s.close()
    with pytest.raises(rlx.InvalidError, match="closed"):
        s.run({"x": np.zeros((2, 3), np.float32)})
    g.free()
    with pytest.raises(rlx.InvalidError, match="freed"):
        g.to_text()


def test_autodiff_errors():
    g = rlx.Graph("a")
    x = g.input("x", "f32", (2,))
    i = g.input("i", "i64", (2,))
    g.set_outputs(ops.reduce_sum(x, [0]))
    with pytest.raises(rlx.Error):
        rlx.grad(g, x, [x])  # the loss must be one element
    with pytest.raises(rlx.InvalidError):
        rlx.train_graph(g, g.outputs[0], [x], optimizer="lbfgs")
    with pytest.raises(rlx.Error):
        rlx.jvp(g, [i])


def test_files_errors(tmp_path):
    with pytest.raises(rlx.IoError):
        rlx.LLM(str(tmp_path / "missing.gguf"))
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + (3).to_bytes(4, "little") + b"\xff" * 56)  # v3, absurd counts
    with pytest.raises(rlx.FormatError):
        rlx.LLM(str(bad))
    with pytest.raises(rlx.Error):
        rlx.InferenceSession(b"\x08\x07garbage that is no model")
    with pytest.raises(rlx.IoError):
        rlx.InferenceSession(str(tmp_path / "missing.onnx"))
    with pytest.raises(rlx.Error):
        rlx.Graph.from_text("graph {")
