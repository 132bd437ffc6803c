"""rlx serve's command line: --help lists every option; bad options and
models give a message and a non-zero exit (2 for usage, 1 otherwise)."""
import os
import re
import subprocess

import pytest

OPTIONS = ["-m", "--model", "--host", "--port", "-np", "--parallel", "-c", "--ctx", "--ctx-size", "--api-key",
           "-t", "--threads", "--device", "--tp", "--cache-type", "--embedding-model", "--max-body", "-h", "--help"]


def rlx(*args):
    p = subprocess.run([os.environ["RLX_CLI"], *args], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


def test_help_lists_every_option():
    rc, out = rlx("serve", "--help")
    assert rc == 0
    for opt in OPTIONS:
        assert re.search(r"(^|[ ,])%s([ ,]|$)" % re.escape(opt), out, re.M), opt
    assert "serve" in rlx("--help")[1]


@pytest.mark.parametrize("args,words", [
    (["--port", "70000"], "--port"),
    (["--parallel", "0"], "--parallel"),
    (["--tp", "0"], "--tp"),
    (["--ctx", "x"], "--ctx"),
    (["--device", "tpu"], "--device"),
    (["--cache-type", "q3"], "--cache-type"),
    (["--bogus", "1"], "unknown option"),
    (["--port"], "missing value"),
    (["--ctx", "64", "--parallel", "8"], "16"),
])
def test_usage_errors(args, words):
    rc, out = rlx("serve", "-m", "x.gguf", *args)
    assert rc == 2 and words in out


def test_bad_models(tmp_path):
    rc, out = rlx("serve", "-m", str(tmp_path / "missing.gguf"), "--port", "0")
    assert rc == 1 and "missing.gguf" in out
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(os.urandom(4096))
    rc, out = rlx("serve", "-m", str(junk), "--port", "0")
    assert rc == 1 and "RLX_ERR_FORMAT" in out
    rc, out = rlx("serve", "-m", os.environ["RLX_SERVE_MODEL"], "--host", "no such host.invalid", "--port", "0")
    assert rc == 1 and "--host" in out
