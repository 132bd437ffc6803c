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
    from rlx_ctypes import RlxError
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
             "and compared at rtol 1e-3, atol 1e-7: **%d of %d pass**. With every input" % (total, len(results)),
             "after the first made an initializer (`--const-inputs`: shapes, axes, scales and",
             "pads constant, as exporters write them; rlx needs them known when it imports a",
             "model) **%d pass** (the column \"const\")." % len(const_pass), "",
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
        f.write("\n".join(lines) + "\n")


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
