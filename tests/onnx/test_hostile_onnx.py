#!/usr/bin/env python3
"""test_hostile_onnx.py RLX — ONNX files that rlx must refuse with a status
and a message (exit 1, never a crash), external data that must work
inside the model's folder and be refused outside it, and a symbolic batch
dim (dim_param) run at two sizes and bound at load, and a model-local
function (FunctionProto, with an attribute reference) expanded at import;
control flow that would unroll without end and malformed subgraphs and
recurrent weights refused. Run by CTest in every
build, so under ASan+UBSan too. References: NumPy."""
import os
import subprocess
import sys
import tempfile

import numpy as np

try:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError:
    print("SKIP: the onnx package is not installed")
    sys.exit(77)

RLX = sys.argv[1]
failures = 0


def run(model_path, *args):
    return subprocess.run([RLX, "run", model_path, *args], capture_output=True, text=True)


def expect_refused(what, path, needle):
    global failures
    r = run(path)
    ok = r.returncode == 1 and "rlx: error:" in r.stderr and needle in r.stderr
    print("%s %s: exit %d %s" % ("ok  " if ok else "FAIL", what, r.returncode, r.stderr.strip()[-160:]))
    failures += not ok


def add_model(w_name="w", n=1000, extra_nodes=(), inputs=None):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])
    nodes = [helper.make_node("Add", ["x", w_name], ["y"], name="add")] + list(extra_nodes)
    g = helper.make_graph(nodes, "g", inputs or [x], [y])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


with tempfile.TemporaryDirectory() as tmp:
    d = os.path.join(tmp, "model")
    os.makedirs(d)
    w = np.arange(1000, dtype=np.float32) / 7
    x = np.linspace(-1, 1, 1000, dtype=np.float32)
    np.save(os.path.join(tmp, "x.npy"), x)

    # External data inside the folder: runs and matches NumPy.
    m = add_model()
    m.graph.initializer.append(numpy_helper.from_array(w, "w"))
    path = os.path.join(d, "ext.onnx")
    onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True, location="weights.bin",
                    size_threshold=0)
    r = run(path, "-i", "x=" + os.path.join(tmp, "x.npy"), "-o", tmp)
    ok = r.returncode == 0 and np.allclose(np.load(os.path.join(tmp, "y.npy")), x + w, rtol=1e-6, atol=0)
    print("%s external data in the folder: exit %d %s" % ("ok  " if ok else "FAIL", r.returncode, r.stderr.strip()[-200:]))
    failures += not ok

    def with_location(loc, name):
        m2 = onnx.load(path, load_external_data=False)
        for e in m2.graph.initializer[0].external_data:
            if e.key == "location":
                e.value = loc
        p = os.path.join(d, name)
        with open(p, "wb") as f:
            f.write(m2.SerializeToString())
        return p

    with open(os.path.join(tmp, "outside.bin"), "wb") as f:
        f.write(w.tobytes())
    expect_refused("location with ..", with_location("../outside.bin", "dotdot.onnx"), "leaves the model's folder")
    expect_refused("absolute location", with_location(os.path.join(tmp, "outside.bin"), "abs.onnx"),
                   "is not a relative path")
    os.symlink(os.path.join(tmp, "outside.bin"), os.path.join(d, "link.bin"))
    expect_refused("symlink out of the folder", with_location("link.bin", "link.onnx"), "outside the model's folder")
    expect_refused("missing external file", with_location("nothere.bin", "missing.onnx"), "external data")

    # Malformed models.
    def save(m, name):
        p = os.path.join(d, name)
        with open(p, "wb") as f:
            f.write(m.SerializeToString() if hasattr(m, "SerializeToString") else m)
        return p

    good = add_model()
    good.graph.initializer.append(numpy_helper.from_array(w, "w"))
    blob = good.SerializeToString()
    refused = 0
    for cut in range(1, len(blob), max(1, len(blob) // 300)):
        p = save(blob[:cut], "cut.onnx")
        r = run(p)
        if r.returncode not in (0, 1) or (r.returncode == 1 and "rlx: error:" not in r.stderr):
            print("FAIL truncated at %d: exit %d %s" % (cut, r.returncode, r.stderr[-200:]))
            failures += 1
        refused += r.returncode == 1
    print("ok   truncations: %d of them refused with a message, none crashed" % refused)

    m = add_model()
    t = numpy_helper.from_array(w, "w")
    t.dims[0] = 1 << 40
    m.graph.initializer.append(t)
    expect_refused("huge dims", save(m, "huge.onnx"), "raw_data")
    m = add_model()
    t = numpy_helper.from_array(w, "w")
    t.dims[0] = -5
    m.graph.initializer.append(t)
    expect_refused("negative dim", save(m, "neg.onnx"), "negative")
    expect_refused("missing initializer", save(add_model(), "undef.onnx"), "is not defined before the node")
    m = add_model()
    m.graph.initializer.extend([numpy_helper.from_array(w, "w"), numpy_helper.from_array(w, "w")])
    expect_refused("duplicate initializer", save(m, "dup.onnx"), "a second initializer")
    m = add_model(w_name="z", extra_nodes=[helper.make_node("Relu", ["y"], ["z"], name="cycle")])
    expect_refused("cycle", save(m, "cycle.onnx"), "not defined before the node")
    m = add_model()
    t = numpy_helper.from_array(w, "w")
    t.data_type = 99
    m.graph.initializer.append(t)
    expect_refused("unknown dtype", save(m, "dtype.onnx"), "data type")
    # int4 weights, packed two to a byte: dequantized they match NumPy; a
    # raw_data of the wrong packed length or too many typed values is refused.
    q = (np.arange(1000) % 16 - 8).astype(np.int64)
    def int4_model(t):
        m = add_model(w_name="wf", extra_nodes=[helper.make_node("DequantizeLinear", ["w4", "s"], ["wf"], name="dq")])
        m.graph.node.insert(0, m.graph.node.pop())
        m.graph.initializer.extend([t, numpy_helper.from_array(np.array(0.5, np.float32), "s")])
        return m
    t = helper.make_tensor("w4", TensorProto.INT4, [1000], q.tolist())
    r = run(save(int4_model(t), "int4.onnx"), "-i", "x=" + os.path.join(tmp, "x.npy"), "-o", tmp)
    ok = r.returncode == 0 and np.allclose(np.load(os.path.join(tmp, "y.npy")), x + q * 0.5, rtol=1e-6, atol=0)
    print("%s int4 initializer: exit %d %s" % ("ok  " if ok else "FAIL", r.returncode, r.stderr.strip()[-200:]))
    failures += not ok
    t = helper.make_tensor("w4", TensorProto.INT4, [1000], q.tolist())
    t.raw_data = bytes(1000)
    del t.int32_data[:]
    expect_refused("int4 raw_data unpacked", save(int4_model(t), "int4raw.onnx"), "raw_data")
    t = helper.make_tensor("w4", TensorProto.INT4, [1000], q.tolist())
    t.int32_data.extend([1, 2])
    expect_refused("int4 with extra values", save(int4_model(t), "int4typed.onnx"), "more values")

    m = add_model()
    m.graph.initializer.append(numpy_helper.from_array(w, "w"))
    m.graph.node[0].op_type = "NoSuchOp"
    expect_refused("unknown op", save(m, "op.onnx"), "cannot import op NoSuchOp")

# A symbolic batch dim: Shape -> Reshape folds to a symbolic reshape.
with tempfile.TemporaryDirectory() as tmp:
    xi = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])
    yo = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
    wv = np.random.default_rng(0).random((8, 4), dtype=np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Shape", ["r"], ["s"]), helper.make_node("Reshape", ["r", "s"], ["y"])]
    m = helper.make_model(helper.make_graph(nodes, "dyn", [xi], [yo], [numpy_helper.from_array(wv, "w")]),
                          opset_imports=[helper.make_opsetid("", 17)])
    path = os.path.join(tmp, "dyn.onnx")
    onnx.save(m, path)
    for b in (1, 3):
        xv = np.random.default_rng(b).random((b, 8), dtype=np.float32)
        np.save(os.path.join(tmp, "x.npy"), xv)
        r = run(path, "-i", "x=" + os.path.join(tmp, "x.npy"), "-o", os.path.join(tmp, "out"))
        ok = r.returncode == 0 and np.allclose(np.load(os.path.join(tmp, "out", "y.npy")), np.maximum(xv @ wv, 0),
                                               rtol=1e-5, atol=1e-6)
        print("%s symbolic batch %d: exit %d %s" % ("ok  " if ok else "FAIL", b, r.returncode, r.stderr.strip()[-200:]))
        failures += not ok
    r = run(path, "--bind", "batch=5")
    ok = r.returncode == 0 and "f32[5,4]" in r.stdout
    print("%s --bind batch=5: exit %d %s" % ("ok  " if ok else "FAIL", r.returncode, r.stdout.strip()[-100:]))
    failures += not ok

# A model-local function called twice; its LeakyRelu alpha refers to the caller's attribute.
with tempfile.TemporaryDirectory() as tmp:
    alpha = helper.make_attribute_ref("alpha", onnx.AttributeProto.FLOAT)
    leaky = helper.make_node("LeakyRelu", ["m"], ["r"])
    leaky.attribute.append(alpha)
    fn = helper.make_function("local", "ScaledLeaky", ["X"], ["Y"],
                              [helper.make_node("Constant", [], ["a"], value_float=2.0),
                               helper.make_node("Mul", ["X", "a"], ["m"]), leaky,
                               helper.make_node("Add", ["r", "X"], ["Y"])],
                              [helper.make_opsetid("", 17)], attributes=["alpha"])
    xi = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    yo = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    g = helper.make_graph([helper.make_node("ScaledLeaky", ["x"], ["h"], domain="local", name="c1", alpha=0.5),
                           helper.make_node("ScaledLeaky", ["h"], ["y"], domain="local", name="c2", alpha=0.1)],
                          "fn", [xi], [yo])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)],
                          functions=[fn])
    path = os.path.join(tmp, "fn.onnx")
    onnx.save(m, path)
    xv = np.array([[-1, 0.5, 2], [3, -4, 0.25]], np.float32)
    np.save(os.path.join(tmp, "x.npy"), xv)
    def scaled_leaky(v, a):   # NumPy reference (onnx's evaluator fails on attribute references here)
        return np.where(2 * v > 0, 2 * v, a * 2 * v) + v
    ref = scaled_leaky(scaled_leaky(xv, 0.5), 0.1)
    r = run(path, "-i", "x=" + os.path.join(tmp, "x.npy"), "-o", tmp)
    ok = r.returncode == 0 and np.allclose(np.load(os.path.join(tmp, "y.npy")), ref, rtol=1e-6, atol=1e-7)
    print("%s model-local function: exit %d %s" % ("ok  " if ok else "FAIL", r.returncode, r.stderr.strip()[-200:]))
    failures += not ok

    # Control flow and recurrent ops: bodies that would unroll without end,
    # malformed subgraphs and weights.
    def vi(name, shape, t=TensorProto.FLOAT):
        return helper.make_tensor_value_info(name, t, shape)

    def loop(trip, body, carried="v"):
        return helper.make_node("Loop", [trip, "", carried], ["out"], body=body)

    def copy_body(extra=()):
        return helper.make_graph([helper.make_node("Identity", ["c_in"], ["c_out"]),
                                  helper.make_node("Identity", ["v_in"], ["v_out"])] + list(extra), "body",
                                 [vi("i", [], TensorProto.INT64), vi("c_in", [], TensorProto.BOOL), vi("v_in", [1])],
                                 [vi("c_out", [], TensorProto.BOOL), vi("v_out", [1])])

    def ctrl_model(nodes, inits, name, inputs=None):
        g = helper.make_graph(nodes, "g", inputs or [vi("v", [1])], [vi("out", [1])], inits)
        p = os.path.join(tmp, name)
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
        return p

    big = numpy_helper.from_array(np.array(10 ** 15, np.int64), "trip")
    expect_refused("endless Loop", ctrl_model([loop("trip", copy_body())], [big], "endless.onnx"), "unrolling it")
    inner = helper.make_graph([helper.make_node("Identity", ["c2"], ["c2o"]), helper.make_node("Add", ["w_in", "v_in"], ["w_out"])],
                              "inner", [vi("j", [], TensorProto.INT64), vi("c2", [], TensorProto.BOOL), vi("w_in", [1])],
                              [vi("c2o", [], TensorProto.BOOL), vi("w_out", [1])])
    outer = copy_body([helper.make_node("Loop", ["trip_in", "", "v_in"], ["unused"], body=inner)])
    n1100 = numpy_helper.from_array(np.array(1100, np.int64), "trip")
    n1000 = numpy_helper.from_array(np.array(1000, np.int64), "trip_in")
    expect_refused("nested Loops of 1.1 million steps", ctrl_model([loop("trip", outer)], [n1100, n1000], "nested.onnx"),
                   "body nodes")
    short = helper.make_graph([helper.make_node("Identity", ["v_in"], ["v_out"])], "body", [vi("v_in", [1])],
                              [vi("v_out", [1])])
    expect_refused("Loop body of the wrong arity", ctrl_model([loop("trip", short)], [n1100], "arity.onnx"), "a body of")
    br = helper.make_graph([helper.make_node("Identity", ["v"], ["o"])], "then", [], [vi("o", [1])])
    cond = numpy_helper.from_array(np.array(True), "cond")
    expect_refused("If without else_branch",
                   ctrl_model([helper.make_node("If", ["cond"], ["out"], then_branch=br)], [cond], "if.onnx"),
                   "not a graph")
    sb = helper.make_graph([helper.make_node("Add", ["s", "a"], ["s2"]), helper.make_node("Add", ["s2", "b"], ["s3"])],
                           "body", [vi("s", [1]), vi("a", [1]), vi("b", [1])], [vi("s3", [1])])
    scan = helper.make_node("Scan", ["v", "xa", "xb"], ["out"], body=sb, num_scan_inputs=2)
    expect_refused("Scan inputs of two lengths",
                   ctrl_model([scan], [], "scan.onnx", [vi("v", [1]), vi("xa", [4, 1]), vi("xb", [5, 1])]), "lengths")
    lw = numpy_helper.from_array(np.zeros((1, 12, 3), np.float32), "W")
    lr = numpy_helper.from_array(np.zeros((1, 16, 4), np.float32), "R")
    lstm = helper.make_node("LSTM", ["x", "W", "R"], ["", "out"], hidden_size=4)
    expect_refused("LSTM with W of 3 gates", ctrl_model([lstm], [lw, lr], "lstm.onnx", [vi("x", [2, 1, 3])]),
                   "W of shape")

print("%d failed" % failures)
sys.exit(1 if failures else 0)
