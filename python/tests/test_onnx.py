"""rlx.InferenceSession against onnxruntime on the same ONNX models: the
same inputs/outputs description and the same results."""
import numpy as np
import pytest

import rlx

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _mlp_model(rng):
    w1 = numpy_helper.from_array(rng.standard_normal((4, 8)).astype(np.float32), "w1")
    b1 = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b1")
    w2 = numpy_helper.from_array(rng.standard_normal((8, 3)).astype(np.float32), "w2")
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h0"]), helper.make_node("Add", ["h0", "b1"], ["h1"]),
             helper.make_node("Relu", ["h1"], ["h"]), helper.make_node("MatMul", ["h", "w2"], ["logits"]),
             helper.make_node("Softmax", ["logits"], ["probs"], axis=-1)]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                              [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 3]),
                               helper.make_tensor_value_info("h", TensorProto.FLOAT, ["batch", 8])],
                              [w1, b1, w2])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _conv_model(rng):
    w = numpy_helper.from_array((rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")
    nodes = [helper.make_node("Conv", ["img", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Sigmoid", ["c"], ["s"]),
             helper.make_node("MaxPool", ["s"], ["out"], kernel_shape=[2, 2], strides=[2, 2])]
    graph = helper.make_graph(nodes, "conv",
                              [helper.make_tensor_value_info("img", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 4, 2, 2])], [w, b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("make", [_mlp_model, _conv_model])
@pytest.mark.parametrize("from_file", [False, True])
def test_same_as_onnxruntime(rng, tmp_path, make, from_file):
    model = make(rng)
    data = model.SerializeToString()
    src = data
    if from_file:
        src = str(tmp_path / "model.onnx")
        onnx.save(model, src)
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    sess = rlx.InferenceSession(src, providers=["CPUExecutionProvider"])
    for mine, theirs in ((sess.get_inputs(), ref.get_inputs()), (sess.get_outputs(), ref.get_outputs())):
        assert [(a.name, a.shape, a.type) for a in mine] == [(a.name, a.shape, a.type) for a in theirs]
    assert sess.get_providers()[0] == "CPUExecutionProvider"
    for batch in (1, 3):
        feed = {}
        for a in ref.get_inputs():
            shape = [batch if isinstance(d, str) else d for d in a.shape]
            feed[a.name] = rng.standard_normal(shape).astype(np.float32)
        got, want = sess.run(None, feed), ref.run(None, feed)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
        last = ref.get_outputs()[-1].name
        np.testing.assert_allclose(sess.run([last], feed)[0], ref.run([last], feed)[0], rtol=1e-4, atol=1e-5)


def test_session_options_and_errors(rng):
    data = _mlp_model(rng).SerializeToString()
    so = rlx.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = 0
    sess = rlx.InferenceSession(data, sess_options=so)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(["probs"], {"x": x})[0]
    np.testing.assert_allclose(sess.run(["probs"], {"x": x})[0], ref, rtol=1e-5, atol=1e-6)
    assert "MatMul" in sess.get_modelmeta()
    with pytest.raises(rlx.InvalidError):
        sess.run(["nope"], {"x": x})
    with pytest.raises(rlx.InvalidError):
        sess.run(None, {"y": x})
    with pytest.raises(rlx.ShapeError):
        sess.run(None, {"x": np.zeros((2, 5), np.float32)})
    with pytest.raises(rlx.Error):
        rlx.InferenceSession(data[: len(data) // 2])


@pytest.mark.parametrize("name", ["squeezenet", "resnet50", "inception_v1"])
def test_zoo_models_against_onnxruntime(rng, name):
    # The "light" model-zoo models of the onnx wheel (weights are constant
    # fills), on a random image.
    import os
    path = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", "light_%s.onnx" % name)
    if not os.path.isfile(path):
        pytest.skip("this onnx wheel has no %s" % path)
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    sess = rlx.InferenceSession(path)
    (inp,) = ref.get_inputs()
    assert [(a.name, a.shape, a.type) for a in sess.get_inputs()] == [(inp.name, inp.shape, inp.type)]
    x = rng.random([d if isinstance(d, int) else 1 for d in inp.shape], dtype=np.float32)
    for g, w in zip(sess.run(None, {inp.name: x}), ref.run(None, {inp.name: x})):
        np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-6)


def test_integer_and_bool_tensors(rng):
    table = numpy_helper.from_array(rng.standard_normal((10, 4)).astype(np.float32), "table")
    nodes = [helper.make_node("Gather", ["table", "ids"], ["rows"], axis=0),
             helper.make_node("Relu", ["rows"], ["pos"]),
             helper.make_node("Greater", ["rows", "pos"], ["neg"]),
             helper.make_node("Cast", ["ids"], ["ids32"], to=TensorProto.INT32)]
    graph = helper.make_graph(nodes, "typed", [helper.make_tensor_value_info("ids", TensorProto.INT64, ["n"])],
                              [helper.make_tensor_value_info("pos", TensorProto.FLOAT, ["n", 4]),
                               helper.make_tensor_value_info("neg", TensorProto.BOOL, ["n", 4]),
                               helper.make_tensor_value_info("ids32", TensorProto.INT32, ["n"])], [table])
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    sess = rlx.InferenceSession(data)
    for mine, theirs in ((sess.get_inputs(), ref.get_inputs()), (sess.get_outputs(), ref.get_outputs())):
        assert [(a.name, a.shape, a.type) for a in mine] == [(a.name, a.shape, a.type) for a in theirs]
    ids = np.array([3, 0, 9, 3, 7], np.int64)
    for g, w in zip(sess.run(None, {"ids": ids}), ref.run(None, {"ids": ids})):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
