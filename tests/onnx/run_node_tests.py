#!/usr/bin/env python3
"""run_node_tests.py LIBRLX [--expect FILE] [--write-expect] [--doc FILE] [-k SUBSTR] [--const-inputs]

Runs every node test case of the installed onnx package
(onnx.backend.test.case.node.collect_testcases()) through the rlx_model C
API and compares each output with ONNX's stored reference at the case's
tolerances (rtol 1e-3, atol 1e-7 unless the case says otherwise). Ends with
"N passed, M failed".

Policy: cases rlx cannot run yet fail the count, not the test. The test
fails (exit 1) when a case listed in --expect (the committed list of cases
that pass) no longer passes. --write-expect rewrites that list; --doc writes
docs/ONNX.md, a table per op: opsets, cases passed/total, why failures fail.

--const-inputs runs the cases again with every input after the first made
an initializer (as exporters write shapes, axes and scales): the count of
ops rlx runs in real models, which keep those constant.

Each case runs in a worker process; a crash is recorded as a failure of that
case and the worker restarts after it.
"""
import argparse
import collections
import os
import subprocess
import sys
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def cases():
    warnings.simplefilter("ignore")
    from onnx.backend.test.case.node import collect_testcases
    return collect_testcases()


def op_of(case):
    nodes = case.model.graph.node
    if len(nodes) == 1:
        return nodes[0].op_type
    return "(multi-node: %s)" % case.name.replace("test_", "").split("_")[0]


def as_array(x):
    """An ndarray of a case's value; None for sequences and optionals."""
    import onnx
    from onnx import numpy_helper
    if isinstance(x, onnx.TensorProto):
        return numpy_helper.to_array(x)
    if isinstance(x, (np.ndarray, np.generic)):
        return np.asarray(x)
    return None


def with_constant_inputs(model, inputs):
    """The model with every graph input after the first made an initializer
    holding the case's value, as exporters write shapes, axes and scales."""
    from onnx import numpy_helper
    m = type(model)()
    m.CopyFrom(model)
    real = [i for i in m.graph.input if i.name not in {t.name for t in m.graph.initializer}]
    for vi, x in zip(real[1:], inputs[1:]):
        m.graph.initializer.append(numpy_helper.from_array(x, vi.name))
    return m.SerializeToString(), inputs[:1]


def run_case(rlx, case, const_inputs=False):
    """'PASS' or 'FAIL\\treason'."""
    from rlx_ctypes import RlxError, is_narrow
    model = case.model.SerializeToString()
    for inputs, outputs in case.data_sets:
        inputs, outputs = [as_array(x) for x in inputs], [as_array(x) for x in outputs]
        if any(x is None for x in inputs + outputs):
            return "FAIL\tsequence or optional values"
        if const_inputs:
            model, inputs = with_constant_inputs(case.model, inputs)
        try:
            got = rlx.run_model(model, inputs)
        except RlxError as e:
            msg = str(e).split(": ", 1)[-1]
            return "FAIL\t%s: %s" % (e.status, msg)
        if len(got) != len(outputs):
            return "FAIL\t%d outputs, %d expected" % (len(got), len(outputs))
        for y, ref in zip(got, outputs):
            if is_narrow(ref.dtype) and y.dtype == np.uint8:   # compared as values
                y, ref = y.view(ref.dtype).astype(np.float32), ref.astype(np.float32)
            if y.shape != ref.shape:
                return "FAIL\tshape %s, expected %s" % (y.shape, ref.shape)
            if ref.dtype != y.dtype:
                return "FAIL\tdtype %s, expected %s" % (y.dtype, ref.dtype)
            try:
                np.testing.assert_allclose(y, ref, rtol=case.rtol, atol=case.atol)
            except AssertionError:
                err = np.max(np.abs(y.astype(np.float64) - ref.astype(np.float64))) if y.size else 0
                return "FAIL\tmismatch: max abs error %.3g" % err
    return "PASS"


def worker(lib, start, filt, const_inputs):
    sys.path.insert(0, HERE)
    from rlx_ctypes import Rlx
    rlx = Rlx(lib)
    for i, c in enumerate(cases()):
        if i < start or (filt and filt not in c.name):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = run_case(rlx, c, const_inputs)
        print("%d\t%s\t%s" % (i, c.name, r.replace("\n", " ")), flush=True)
    print("DONE", flush=True)


def collect(lib, filt, const_inputs):
    results = {}
    start = 0
    while True:
        p = subprocess.Popen([sys.executable, __file__, lib, "--worker", str(start)] + (["-k", filt] if filt else []) +
                             (["--const-inputs"] if const_inputs else []),
                             stdout=subprocess.PIPE, text=True)
        last, done = start - 1, False
        for line in p.stdout:
            line = line.rstrip("\n")
            if line == "DONE":
                done = True
                break
            i, name, r = line.split("\t", 2)
            results[name] = r
            last = int(i)
        p.wait()
        if done:
            return results
        all_cases = cases()
        nxt = last + 1
        while nxt < len(all_cases) and filt and filt not in all_cases[nxt].name:
            nxt += 1
        if nxt >= len(all_cases):
            return results
        results[all_cases[nxt].name] = "FAIL\tcrashed (exit status %d)" % p.returncode
        start = nxt + 1


def write_doc(path, all_cases, results):
    import onnx
    by_op = collections.OrderedDict()
    for c in sorted(all_cases, key=lambda c: op_of(c)):
        by_op.setdefault(op_of(c), []).append(c)
    total = sum(1 for r in results.values() if r == "PASS")
    const_file = os.path.join(HERE, "node_tests_const_passing.txt")
    const_pass = set(open(const_file).read().split()) if os.path.exists(const_file) else set()
    lines = ["# ONNX conformance", "",
             "The node test cases of onnx %s (`onnx.backend.test.case.node`), run through" % onnx.__version__,
             "the rlx_model C API by `tests/onnx/run_node_tests.py` (which writes this file)",
             "and compared at rtol 1e-3, atol 1e-7: **%d of %d pass**." % (total, len(results)), "",
             "Inputs whose contents rlx needs to build the graph (shapes, axes, scales,",
             "pads given as graph inputs) are *value inputs*: the session imports the graph",
             "at its first run with their contents as constants, once per distinct set of",
             "them (see \"Value inputs\" below). With every input after the first made an",
             "initializer (`--const-inputs`, as exporters write them) **%d pass** (the" % len(const_pass),
             "column \"const\").", "",
             "| op | opsets | passed | const | why the others fail |", "|---|---|---|---|---|"]
    for op, cs in by_op.items():
        opsets = sorted({str(o.version) for c in cs for o in c.model.opset_import if o.domain in ("", "ai.onnx")})
        passed = sum(1 for c in cs if results.get(c.name) == "PASS")
        why = collections.Counter(results[c.name].split("\t", 1)[1].split("): ")[-1][:80] for c in cs
                                  if c.name in results and results[c.name] != "PASS")
        reason = "; ".join("%s (%d)" % (w.replace("|", "/"), k) for w, k in why.most_common(2))
        cpassed = sum(1 for c in cs if c.name in const_pass)
        lines.append("| %s | %s | %d/%d | %d | %s |" % (op, ",".join(opsets), passed, len(cs), cpassed, reason))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n" + DESIGN)


# The part of docs/ONNX.md that is not counted.
DESIGN = """
## Value inputs

rlx plans static shapes: a Reshape's target, a Slice's starts, the axes of
a reduction, Pad's pads, Resize's scales, Range's limits, TopK's k must be
known when the graph is built. Exporters write them as initializers or
compute them from shapes (Shape, Gather, Concat, Unsqueeze, Range,
ConstantOfShape, Expand ...), and the importer folds those computations
(on known dims, and on symbolic dims once bound at load). When such an
operand is a graph input instead, its contents decide the graph:

- The first import (`rlx_model_graph` / `rlx_model_compile`) notes the
  graph inputs that the operand the failing node needed is computed from
  (each importer value carries the set of inputs it depends on; `ox_in_known`,
  `ox_in_ints`): those are the model's value inputs
  (`rlx_model_input_is_value`). Such a model has no single graph, so
  `rlx_model_graph` refuses it and `rlx_model_compile` returns a session
  that defers the build (`src/runtime/deferred.c`).
- That session copies each input it is given. At `rlx_run` it looks for an
  inner session built for the same contents of the value inputs (bytes and
  dims); if none, the model imports the graph again with those contents as
  constants (a value used as data too becomes a Constant), compiles it and
  binds the weights. An import that needs the contents of another input
  makes it a value input too and runs again. The other inputs are handed to
  the inner session when they changed; dynamic `dim_param` dims stay
  symbolic dims of the inner graph, planned per binding as usual.
- Up to 8 inner sessions are kept per session (the least recently run one
  is dropped), as plans are kept per binding of symbolic dims; each set of
  values costs one import and one compile, a repeated set none.

Once known, an operand computed from value inputs folds only where the
importer folds the ops between them (integer shape arithmetic, Concat,
Gather, Slice, Cast, ConstantOfShape, Range ...); float arithmetic on
known values does not fold yet. A value input that is large data (an
image) makes each run with new data a new build: correct, but slow.

## Control flow and recurrent ops

An rlx graph is static dataflow: no op of it runs a subgraph. ONNX's
control flow is resolved when the graph is imported
(`src/onnx/ops_control.c`), where known values already fold:

- **If**: on a condition known at import (a constant, a value folded from
  shapes, a value input) only the branch taken is imported. On a run-time
  condition both branches are imported and each output is selected with
  Where; when the branches' outputs differ in shape the condition becomes a
  value input instead (one graph per value).
- **Loop** is unrolled: its trip count and conditions must be known at
  import (constants, folded values or value inputs). The body is imported
  once per iteration with the iteration number and condition bound as known
  values (so loops over shapes fold away), the loop-carried values bound to
  the previous iteration's, and each scan output concatenated once at the
  end. A condition computed from run-time data is followed in the graph
  when a trip count bounds the loop and it has no scan outputs: all
  iterations are unrolled and each update is kept (Where) only while the
  condition has held. Otherwise it is RLX_ERR_UNSUPPORTED: scan outputs of
  a run-time length need a loop op with a subgraph in the IR, which rlx
  does not have yet.
- **Scan** (opset 8 with its batch axis, and opset 9 on) is unrolled over
  its static length; each step's slice is a Narrow of the input. A length
  that is a symbolic dim is RLX_ERR_UNSUPPORTED.
- Bodies read outer values by name (ONNX forbids a subgraph to reuse an
  outer name). Unrolling stops at 2^20 body nodes per model and 2^20
  iterations per Loop with RLX_ERR_UNSUPPORTED, never a hang.

**RNN, GRU and LSTM** (`src/onnx/ops_rnn.c`) are unrolled over the sequence
too: per gate, one GEMM projects the inputs of all steps ([S·B, I]·Wᵀ plus
both biases), then each step adds the recurrent product [B, H]·Rᵀ and does
the gate arithmetic. That is the structure of ONNX Runtime's CPU kernels,
and with a static length nothing is dispatched per step beyond the planned
ops; initializer weights are transposed at import into Constants, whose
packed GEMM copy the CPU backend keeps across steps and runs. The cost is
about 20 graph nodes per step and direction, so the length must be known
at import (at most 100000 steps). With sequence_lens a row past its length
keeps its state and outputs zeros, which also starts a reverse pass at each
row's own last step. clip bounds the inputs of the gates' activations, not
the cell state that LSTM's h reads (as ONNX Runtime does).

## Transformer exports

`tests/onnx/hf` holds tiny randomly initialized Hugging Face models exported
by torch.onnx at opset 17 (BERT, GPT-2 with past key/values in and present
out, ViT, the Whisper encoder, a T5 encoder; also torch.nn.LSTM and GRU,
and a TorchScript loop with a branch on each row's data: a Loop holding an
If; made by `tests/ref/hf_onnx_exports.py`) with onnxruntime's outputs;
`tests/onnx/test_hf_exports.py` requires every rlx output within 1e-4 of
the output's largest magnitude. They are exported with static shapes.

## Narrow types

float8 (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz, e8m0), float4e2m1 and the 4- and
2-bit integers have no rlx dtype: rlx holds them as U8, one element a byte
with its bit pattern in the low bits (as ml_dtypes and `onnx.numpy_helper`
hold them), so a model input or output of such a type is U8 in the C API.
Tensor data packed two or four to a byte is unpacked at load. Each importer
value remembers the narrow type its bytes hold (data movement passes it
on); Cast, CastLike, QuantizeLinear and DequantizeLinear convert
(`src/onnx/narrow.c`): decoding is a Gather from a 256-entry table of every
byte's value; encoding counts the rounding thresholds |x| passes (the
magnitudes of a float format rise with their codes) by a binary search of
Gathers over the sorted thresholds, ties to the even code, saturating or
not as the cast says.

## Ops built from others

Ops with no rlx op of their own are built from rlx ops at import, exact
where the reference is: the inverse trigonometric ops in F64 (atan by range
reduction and a series within 3e-9); BitwiseAnd/Or/Xor a byte at a time
through a 256 x 256 table; 3-D, dilated and integer pools one spatial axis
at a time (a box window is separable); GridSample as one Gather per
combination of taps; Pad's edge/reflect/wrap and backward Slices as Gathers
of constant indices; Col2Im and MaxUnpool as ScatterAdds; ReverseSequence
and TensorScatter as Gathers of positions computed from their run-time
lengths and write indices; MaxPool's Indices from every tap of the window;
STFT through the DFT tables; RoiAlign (a fixed sampling_ratio) per axis like
GridSample; TfIdfVectorizer by Equal compares of shifted
slices per pool n-gram; the Scatter reductions mul/max/min one update after
the other; BitCast by arithmetic on the sign, exponent and mantissa; Det by
permutations (order <= 5); LinearAttention's
recurrence unrolled over its (static) sequence. An optional input is given
as its tensor (OptionalHasElement: whether it is given); sequences are not
supported.
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("--worker", type=int)
    ap.add_argument("-k", dest="filter")
    ap.add_argument("--expect")
    ap.add_argument("--write-expect", action="store_true")
    ap.add_argument("--doc")
    ap.add_argument("-v", action="store_true", help="print every failure")
    ap.add_argument("--const-inputs", action="store_true",
                    help="inputs after the first become initializers (shapes, axes, scales as exporters write them)")
    a = ap.parse_args()
    try:
        import onnx  # noqa: F401
    except ImportError:
        print("SKIP: the onnx package is not installed (scripts/deps.sh installs it)")
        return 77
    if a.worker is not None:
        return worker(a.lib, a.worker, a.filter, a.const_inputs)
    results = collect(a.lib, a.filter, a.const_inputs)
    passed = sorted(n for n, r in results.items() if r == "PASS")
    for n, r in sorted(results.items()):
        if a.v and r != "PASS":
            print("%s\t%s" % (n, r))
    status = 0
    if a.expect and a.write_expect:
        with open(a.expect, "w") as f:
            f.write("".join(n + "\n" for n in passed))
    elif a.expect:
        with open(a.expect) as f:
            want = [l.strip() for l in f if l.strip()]
        lost = [n for n in want if n in results and results[n] != "PASS"]
        for n in lost:
            print("REGRESSION %s\t%s" % (n, results[n]))
        status = 1 if lost else 0
    if a.doc:
        write_doc(a.doc, cases(), results)
    print("%d passed, %d failed" % (len(passed), len(results) - len(passed)))
    return status


if __name__ == "__main__":
    sys.exit(main())
