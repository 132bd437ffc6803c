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


def _x():
    g = rlx.Graph("b")
    return g, g.input("x", "f32", (2, 3))


def test_builder_errors():
    g, x = _x()
    with pytest.raises(rlx.ShapeError, match=r"\[2,3\]"):
        ops.matmul(x, g.input("y", "f32", (2, 3)))
    # the graph keeps its first error: no builder runs after it
    with pytest.raises(rlx.InvalidError, match="earlier builder .*inner dims"):
        ops.relu(x)
    with pytest.raises(rlx.DtypeError):
        _x()[0].input("z", "f99", (1,))
    with pytest.raises(rlx.InvalidError):
        ops.softmax(rlx.Graph("other").input("x", "f32", (1,)) + _x()[1])
    with pytest.raises(rlx.InvalidError):
        ops.activation("nope", _x()[1])
    with pytest.raises(rlx.ShapeError):
        ops.slice(_x()[1], [0, 0], [1], [1, 1])
    with pytest.raises(rlx.Error):
        ops.reduce_sum(_x()[1], [5])
    with pytest.raises(rlx.ShapeError):
        _x()[0].input("big", "f32", (1,) * 9)
    with pytest.raises(rlx.InvalidError, match="bad symbol name"):
        _x()[0].input("s", "f32", ("not a name",))
    with pytest.raises(TypeError):
        ops.softmax(_x()[1], axis=-1, nonsense=1)


def test_garbage_arguments_raise(rng):
    # Every op with arguments of every wrong kind: exceptions, never a crash.
    import inspect
    import random
    random.seed(5)
    junk = [None, -1, 0, 2 ** 40, -2 ** 62, 3.5, float("nan"), "relu", "zz", [], [1, 2], [-1] * 9, b"x",
            np.zeros(3), "f32", "q4_0"]
    calls = 0
    for name in ops.__all__:
        if name in ("ENUMS", "enum"):
            continue
        n = len(inspect.signature(getattr(ops, name)).parameters)
        for _ in range(40):
            g = rlx.Graph("junk")
            nodes = [g.input("a", "f32", (2, 3)), g.input("b", "i64", (4,)), g.input("c", "f16", ("S", 8)),
                     g.param("p", "f32", (3,))]
            args = [random.choice(junk + nodes + [nodes]) for _ in range(random.randint(1, n))]
            try:
                getattr(ops, name)(*args)
            except (rlx.Error, TypeError, ValueError, IndexError, AttributeError, OverflowError):
                pass
            calls += 1
    assert calls > 2000


def test_run_errors():
    g, s = _sess()
    s.set_param("w", np.ones(3, np.float32))
    with pytest.raises(rlx.InvalidError, match="no input 'y'"):
        s.run({"y": np.zeros((2, 3), np.float32)})
    with pytest.raises(rlx.ShapeError):
        s.run({"x": np.zeros((3, 3), np.float32)})
    with pytest.raises(rlx.DtypeError):
        s.run({"x": np.zeros((2, 3), np.complex64)})
    with pytest.raises(rlx.DtypeError, match="outside the range"):
        s.run({"x": np.full((2, 3), 1e300)})
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


def test_with_room_asks_again():
    # rlx_detokenize and friends report the size they need when the buffer is short.
    calls = []

    def fake(buf, cap, n):
        calls.append(cap)
        n._obj.value = 100
        if cap < 100:
            return 1  # RLX_ERR_INVALID, as rlx_tokenize does
        buf[:100] = b"y" * 100
        return 0

    assert _lib.with_room(fake, 10) == b"y" * 100 and calls == [10, 101]

    def failing(buf, cap, n):
        n._obj.value = 3
        return 2  # a real error, with room enough: raised
    with pytest.raises(rlx.ShapeError):
        _lib.with_room(failing, 10)
