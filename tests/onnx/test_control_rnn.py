#!/usr/bin/env python3
"""test_control_rnn.py LIBRLX — ONNX control flow (If, Loop, Scan) and
recurrent ops (RNN, GRU, LSTM) beyond the node test cases, through the
rlx_model C API against onnxruntime: every direction, layout 1, uneven
sequence_lens, initial states, peepholes, clip, activation lists,
linear_before_reset; a Loop with an If per iteration reading outer-scope
values, an If and a Loop on run-time conditions, a Scan over axis 1 in
reverse; and bodies that would unroll without end get a status, not a
hang.
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
RNG = np.random.default_rng(7)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def make(nodes, inputs, outputs, inits=(), opset=17):
    from onnx import helper
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def vi(name, dtype, shape):
    from onnx import helper
    return helper.make_tensor_value_info(name, dtype, shape)


def recurrent_case(op, hidden, direction, layout, lens, extra_attrs, with_init, peep=False):
    """A recurrent node with every optional input: (model, feeds, reference
    model, its feeds, the transposes of its outputs). onnxruntime has no
    layout 1, so its reference is the layout-0 node on transposed data."""
    from onnx import TensorProto as T, helper, numpy_helper
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    d = 2 if direction == "bidirectional" else 1
    S, B, I = 5, 3, 4
    x = f32(S, B, I)
    w, r = f32(d, gates * hidden, I) * 0.5, f32(d, gates * hidden, hidden) * 0.5
    b = f32(d, 2 * gates * hidden) * 0.3
    states = [f32(d, B, hidden) for _ in range(2 if op == "LSTM" else 1)] if with_init else []
    p = f32(d, 3 * hidden)

    def build(lay):
        sw = (lambda a: a) if not lay else (lambda a: np.ascontiguousarray(np.swapaxes(a, 0, 1)))
        names = ["X", "W", "R", "B", "sequence_lens", "initial_h" if with_init else ""]
        inits = [numpy_helper.from_array(w, "W"), numpy_helper.from_array(r, "R"), numpy_helper.from_array(b, "B"),
                 numpy_helper.from_array(np.array(lens, np.int32), "sequence_lens")]
        feeds = [sw(x)] + [sw(h) for h in states]
        ins = [vi("X", T.FLOAT, list(feeds[0].shape))]
        ins += [vi(nm, T.FLOAT, list(h.shape)) for nm, h in zip(["initial_h", "initial_c"], feeds[1:])]
        if op == "LSTM":
            names.append("initial_c" if with_init else "")
            if peep:
                names.append("P")
                inits.append(numpy_helper.from_array(p, "P"))
        outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
        attrs = dict(hidden_size=hidden, direction=direction, **extra_attrs)
        if lay:
            attrs["layout"] = 1
        node = helper.make_node(op, names, outs, **attrs)
        yshape = [B, S, d, hidden] if lay else [S, d, B, hidden]
        hshape = [B, d, hidden] if lay else [d, B, hidden]
        outputs = [vi("Y", T.FLOAT, yshape)] + [vi(o, T.FLOAT, hshape) for o in outs[1:]]
        return make([node], ins, outputs, inits), feeds
    model, feeds = build(layout)
    ref_model, ref_feeds = build(0)
    perms = [(2, 0, 1, 3), (1, 0, 2), (1, 0, 2)] if layout else None
    return model, feeds, ref_model, ref_feeds, perms


def recurrent_cases():
    cases = []
    for op in ("RNN", "GRU", "LSTM"):
        for direction in ("forward", "reverse", "bidirectional"):
            for layout in (0, 1):
                cases.append(("%s_%s_layout%d" % (op, direction, layout),
                              recurrent_case(op, 6, direction, layout, [5, 2, 4], {}, direction != "forward" or layout == 1,
                                             peep=op == "LSTM")))
    cases.append(("GRU_linear_before_reset_clip", recurrent_case(
        "GRU", 5, "bidirectional", 0, [3, 5, 1], {"linear_before_reset": 1, "clip": 0.7}, True)))
    cases.append(("RNN_activations", recurrent_case(
        "RNN", 4, "bidirectional", 0, [5, 5, 5], {"activations": ["Relu", "Sigmoid"]}, True)))
    cases.append(("GRU_activations", recurrent_case(
        "GRU", 4, "forward", 0, [5, 4, 3], {"activations": ["HardSigmoid", "Softsign"],
                                            "activation_alpha": [0.3], "activation_beta": [0.4]}, True)))
    cases.append(("LSTM_activations_clip", recurrent_case(
        "LSTM", 4, "reverse", 0, [2, 5, 4], {"activations": ["Sigmoid", "Tanh", "Softsign"], "clip": 1.5}, True,
        peep=True)))
    return cases


def loop_with_if():
    """Loop of 6: state s += (i even ? x·2 : x − c), where c is an outer
    value; the scan output stacks s. The If's condition is known per
    iteration, so each iteration imports one branch."""
    from onnx import TensorProto as T, helper, numpy_helper
    two = numpy_helper.from_array(np.array(2, np.int64), "two")
    zero = numpy_helper.from_array(np.array(0, np.int64), "zero")
    then_g = helper.make_graph([helper.make_node("Add", ["x", "x"], ["t_out"])], "then", [],
                               [vi("t_out", T.FLOAT, [3])])
    else_g = helper.make_graph([helper.make_node("Sub", ["x", "c"], ["e_out"])], "else", [],
                               [vi("e_out", T.FLOAT, [3])])
    body = helper.make_graph([
        helper.make_node("Mod", ["i", "two"], ["m"]),
        helper.make_node("Equal", ["m", "zero"], ["even"]),
        helper.make_node("If", ["even"], ["delta"], then_branch=then_g, else_branch=else_g),
        helper.make_node("Add", ["s_in", "delta"], ["s_out"]),
        helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        helper.make_node("Identity", ["s_out"], ["scan_out"]),
    ], "body", [vi("i", T.INT64, []), vi("cond_in", T.BOOL, []), vi("s_in", T.FLOAT, [3])],
        [vi("cond_out", T.BOOL, []), vi("s_out", T.FLOAT, [3]), vi("scan_out", T.FLOAT, [3])], [two, zero])
    trip = numpy_helper.from_array(np.array(6, np.int64), "trip")
    c = numpy_helper.from_array(np.array([0.5, -1, 2], np.float32), "c")
    node = helper.make_node("Loop", ["trip", "", "s0"], ["s_final", "stacked"], body=body)
    m = make([node], [vi("x", T.FLOAT, [3]), vi("s0", T.FLOAT, [3])],
             [vi("s_final", T.FLOAT, [3]), vi("stacked", T.FLOAT, [6, 3])], [trip, c])
    return m, [f32(3), f32(3)]


def loop_runtime_cond():
    """while i < 10 and sum(x) < limit: x = x * 1.5 + 0.25 — a condition
    on run-time data (limit an input), followed in the graph."""
    from onnx import TensorProto as T, helper, numpy_helper
    k = numpy_helper.from_array(np.array(1.5, np.float32), "k")
    b = numpy_helper.from_array(np.array(0.25, np.float32), "b")
    body = helper.make_graph([
        helper.make_node("Mul", ["x_in", "k"], ["xk"]),
        helper.make_node("Add", ["xk", "b"], ["x_out"]),
        helper.make_node("ReduceSum", ["x_out"], ["total"], keepdims=0),
        helper.make_node("Less", ["total", "limit"], ["c_out"]),
    ], "body", [vi("i", T.INT64, []), vi("c_in", T.BOOL, []), vi("x_in", T.FLOAT, [4])],
        [vi("c_out", T.BOOL, []), vi("x_out", T.FLOAT, [4])], [k, b])
    trip = numpy_helper.from_array(np.array(10, np.int64), "trip")
    go = helper.make_node("Less", ["s0", "limit"], ["c0"])
    s0 = helper.make_node("ReduceSum", ["x"], ["s0"], keepdims=0)
    node = helper.make_node("Loop", ["trip", "c0", "x"], ["x_final"], body=body)
    m = make([s0, go, node], [vi("x", T.FLOAT, [4]), vi("limit", T.FLOAT, [])], [vi("x_final", T.FLOAT, [4])],
             [trip])
    return m, [np.abs(f32(4)), np.array(40, np.float32)]


def if_runtime(cond):
    from onnx import TensorProto as T, helper
    then_g = helper.make_graph([helper.make_node("Mul", ["a", "b"], ["t"])], "then", [], [vi("t", T.FLOAT, [2, 3])])
    else_g = helper.make_graph([helper.make_node("Sub", ["a", "b"], ["e"])], "else", [], [vi("e", T.FLOAT, [2, 3])])
    node = helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)
    m = make([node], [vi("c", T.BOOL, []), vi("a", T.FLOAT, [2, 3]), vi("b", T.FLOAT, [2, 3])],
             [vi("y", T.FLOAT, [2, 3])])
    return m, [np.array(cond), f32(2, 3), f32(2, 3)]


def scan_axis1():
    """Scan over axis 1 of x [2, 5, 3], reverse, running sum and product
    state, the scan output stacked on axis 1 in reverse."""
    from onnx import TensorProto as T, helper
    body = helper.make_graph([
        helper.make_node("Add", ["sum_in", "xt"], ["sum_out"]),
        helper.make_node("Mul", ["sum_out", "xt"], ["y"]),
    ], "body", [vi("sum_in", T.FLOAT, [2, 3]), vi("xt", T.FLOAT, [2, 3])],
        [vi("sum_out", T.FLOAT, [2, 3]), vi("y", T.FLOAT, [2, 3])])
    node = helper.make_node("Scan", ["s0", "x"], ["s", "ys"], body=body, num_scan_inputs=1, scan_input_axes=[1],
                            scan_input_directions=[1], scan_output_axes=[-1], scan_output_directions=[1])
    m = make([node], [vi("s0", T.FLOAT, [2, 3]), vi("x", T.FLOAT, [2, 5, 3])],
             [vi("s", T.FLOAT, [2, 3]), vi("ys", T.FLOAT, [2, 3, 5])])
    return m, [f32(2, 3), f32(2, 5, 3)]


def endless_loop():
    """Loop with a trip count of 10^15 and a condition that stays true."""
    from onnx import TensorProto as T, helper, numpy_helper
    body = helper.make_graph([helper.make_node("Identity", ["c_in"], ["c_out"]),
                              helper.make_node("Identity", ["v_in"], ["v_out"])], "body",
                             [vi("i", T.INT64, []), vi("c_in", T.BOOL, []), vi("v_in", T.FLOAT, [1])],
                             [vi("c_out", T.BOOL, []), vi("v_out", T.FLOAT, [1])])
    trip = numpy_helper.from_array(np.array(10 ** 15, np.int64), "trip")
    node = helper.make_node("Loop", ["trip", "", "v"], ["out"], body=body)
    return make([node], [vi("v", T.FLOAT, [1])], [vi("out", T.FLOAT, [1])], [trip]), [f32(1)]


def symbolic_scan():
    """Scan over a dim_param length: no static unrolling."""
    from onnx import TensorProto as T, helper
    body = helper.make_graph([helper.make_node("Add", ["a", "xt"], ["b"])], "body",
                             [vi("a", T.FLOAT, [2]), vi("xt", T.FLOAT, [2])], [vi("b", T.FLOAT, [2])])
    node = helper.make_node("Scan", ["s0", "x"], ["s"], body=body, num_scan_inputs=1)
    return make([node], [vi("s0", T.FLOAT, [2]), vi("x", T.FLOAT, ["T", 2])], [vi("s", T.FLOAT, [2])]), None


def main():
    try:
        import onnx  # noqa: F401
        import onnxruntime as ort
    except ImportError:
        print("SKIP: onnx and onnxruntime are needed (scripts/deps.sh installs them)")
        return 77
    sys.path.insert(0, HERE)
    from rlx_ctypes import Rlx, RlxError
    rlx = Rlx(sys.argv[1])
    cases = recurrent_cases() + [("Loop_with_If", loop_with_if()), ("If_runtime_true", if_runtime(True)),
                                 ("If_runtime_false", if_runtime(False)), ("Scan_axis1_reverse", scan_axis1()),
                                 ("Loop_runtime_condition", loop_runtime_cond())]
    failed = 0
    for name, case in cases:
        model, feeds = case[:2]
        ref_model, ref_feeds, perms = case[2:] if len(case) > 2 else (model, feeds, None)
        data = model.SerializeToString()
        sess = ort.InferenceSession(ref_model.SerializeToString(), providers=["CPUExecutionProvider"])
        ref = sess.run(None, {i.name: x for i, x in zip(sess.get_inputs(), ref_feeds)})
        if perms:
            ref = [np.transpose(y, pm) for y, pm in zip(ref, perms)]
        why = None
        try:
            got = rlx.run_model(data, feeds)
            for k, (y, r) in enumerate(zip(got, ref)):
                if y.shape != r.shape:
                    why = "output %d: shape %s, expected %s" % (k, y.shape, r.shape)
                elif not np.allclose(y, r, rtol=1e-4, atol=1e-5):
                    why = "output %d: max abs error %.3g" % (k, np.max(np.abs(y - r)))
                if why:
                    break
            if not why and len(got) != len(ref):
                why = "%d outputs, %d expected" % (len(got), len(ref))
        except RlxError as e:
            why = "%s: %s" % (e.status, e)
        print("%-32s %s" % (name, "PASS" if why is None else "FAIL " + why))
        failed += why is not None
    for name, (model, feeds), want in [("endless_loop", endless_loop(), "unrolling"),
                                       ("symbolic_scan", symbolic_scan(), "sequence length")]:
        try:
            rlx.run_model(model.SerializeToString(), feeds or [f32(2), f32(4, 2)])
            why = "ran"
        except RlxError as e:
            why = None if e.status == "RLX_ERR_UNSUPPORTED" and want in str(e) else "%s: %s" % (e.status, e)
        print("%-32s %s" % (name, "PASS (refused)" if why is None else "FAIL " + why))
        failed += why is not None
    print("%d passed, %d failed" % (len(cases) + 2 - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
