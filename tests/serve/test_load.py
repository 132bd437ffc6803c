"""rlx serve under load: many clients at once (each greedy answer equal to the
same request run alone), clients that leave mid-answer (their slots come
back), a bounded soak of random and bad requests (the server ends healthy,
its memory flat), and a stop while answers stream."""
import json
import os
import random
import signal
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import QUICK, Server
from test_api import raw

TOPICS = ["the sea", "a red bicycle", "winter mornings", "the moon", "bread", "old maps", "a lighthouse", "rain",
          "chess", "coffee", "a quiet library", "mountains", "the first computer", "owls", "a train journey", "tea"]


def metric(server, name):
    text = raw(server, "GET", "/metrics")[1]
    return float(next(l.split()[1] for l in text.splitlines() if l.startswith(name + " ")))


def wait_idle(server, timeout=30):
    deadline = time.time() + timeout
    while metric(server, "rlx_slots_busy") or metric(server, "rlx_queue_length"):
        assert time.time() < deadline, "slots still busy"
        time.sleep(0.1)


def test_concurrent_greedy_equals_alone(client, model_id):
    clients, per_client = (4, 2) if QUICK else (16, 8)

    def ask(i):
        return client.chat.completions.create(
            model=model_id, messages=[{"role": "user", "content": "Write one sentence about %s." % TOPICS[i]}],
            temperature=0, max_tokens=10)

    alone = {i: ask(i) for i in range(len(TOPICS))}

    def one_client(c):
        return [(k, ask(k)) for k in ((c * per_client + j) % len(TOPICS) for j in range(per_client))]

    with ThreadPoolExecutor(clients) as pool:
        results = [r for rs in pool.map(one_client, range(clients)) for r in rs]
    assert len(results) == clients * per_client
    for k, r in results:
        want = alone[k].choices[0]
        assert r.choices[0].finish_reason in ("stop", "length")
        assert (r.choices[0].message.content, r.choices[0].finish_reason) == (want.message.content, want.finish_reason)
        assert r.usage.completion_tokens == alone[k].usage.completion_tokens


def together_equals_alone(server_args, n_alone, order, workers):
    """Starts rlx serve with server_args, asks about each of the first n_alone
    topics alone, then about the topics of order from workers threads at once:
    each answer must be the one its topic got alone, and the server must stop
    cleanly on SIGTERM."""
    s = Server(*server_args)
    try:
        client = s.client()
        model = client.models.list().data[0].id

        def ask(i):
            return client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": "Write one sentence about %s." % TOPICS[i]}],
                temperature=0, max_tokens=12)

        alone = [ask(i) for i in range(n_alone)]
        with ThreadPoolExecutor(workers) as pool:
            together = list(pool.map(ask, order))
        for k, r in zip(order, together):
            want = alone[k].choices[0]
            assert (r.choices[0].message.content, r.choices[0].finish_reason) == (want.message.content,
                                                                                 want.finish_reason)
    finally:
        rc = s.stop()
    assert rc == 0, "rlx serve exited with %d on SIGTERM: %s" % (rc, "".join(s.log[-20:]))


def test_quantized_cache_concurrent_equals_alone():
    """--cache-type q8_0: requests decoded side by side give each the greedy
    answer it gets alone (quantized weights and cache rows: the same bits)."""
    together_equals_alone(("--parallel", "4", "--ctx", "2048", "--cache-type", "q8_0"), 4, [3, 2, 1, 0, 1, 3], 4)


def cuda_device():
    """Whether rlx was built with CUDA and sees a device (rlx --version)."""
    out = subprocess.run([os.environ["RLX_CLI"], "--version"], capture_output=True, text=True).stdout
    return "a device is present" in out


@pytest.mark.parametrize("cache", ["f16", "q8_0"])
def test_cuda_concurrent_equals_alone(cache):
    """--device cuda --parallel 8 (skipped without a CUDA device): 16 clients
    at once get the greedy answer each request gets alone. On the GPU a row's
    bits may depend on the batch beside it (tests/test_cuda_batch.c bounds
    the logits): the test takes these 12-token answers to hold no near tie
    within that bound."""
    if not cuda_device():
        pytest.skip("no CUDA device")
    together_equals_alone(("--device", "cuda", "--parallel", "8", "--ctx", "4096", "--cache-type", cache), 8,
                          [(3 * j) % 8 for j in range(16)], 16)


def test_disconnect_frees_the_slot(server, client, model_id):
    wait_idle(server)
    served = metric(server, "rlx_completion_tokens_total")
    # a stream left after a few chunks
    stream = client.chat.completions.create(model=model_id, messages=[{"role": "user", "content": "Tell a story."}],
                                            max_tokens=1000, stream=True, temperature=1.0)
    for i, _ in zip(range(3), stream):
        pass
    stream.close()
    # a whole answer left while it is computed
    body = json.dumps({"prompt": "Count to a thousand:", "max_tokens": 1000, "temperature": 1.0}).encode()
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        time.sleep(1.0)
    wait_idle(server)
    assert metric(server, "rlx_completion_tokens_total") - served < 1000  # neither ran to its end
    r = client.completions.create(model=model_id, prompt="Hello", max_tokens=3)
    assert r.usage.completion_tokens >= 1


def random_request(rng, model_id):
    """(path, body bytes): mostly valid requests with random settings, some bad."""
    kind = rng.random()
    if kind < 0.15:
        return "/v1/chat/completions", bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 200)))
    if kind < 0.25:
        good = json.dumps({"messages": [{"role": "user", "content": "hi"}]})
        return "/v1/chat/completions", good[:rng.randint(0, len(good) - 1)].encode()
    if kind < 0.35:
        field = rng.choice(["temperature", "n", "max_tokens", "stop", "messages", "seed", "top_p", "logit_bias"])
        value = rng.choice(["x", -5, 1e30, [], {}, None, True, [1], 99])
        return "/v1/chat/completions", json.dumps({"messages": [{"role": "user", "content": "hi"}],
                                                   field: value}).encode()
    req = {"model": model_id, "max_tokens": rng.randint(1, 12), "temperature": rng.choice([0, 0.7, 1.5]),
           "top_p": rng.choice([1, 0.9, 0.5]), "seed": rng.randint(0, 1000), "n": rng.choice([1, 1, 2]),
           "stream": rng.random() < 0.4}
    if rng.random() < 0.3:
        req["stop"] = rng.choice(["\n", ".", [" the", ","]])
    if rng.random() < 0.5:
        req["messages"] = [{"role": "user", "content": "Say something about %s." % rng.choice(TOPICS)}]
        return "/v1/chat/completions", json.dumps(req).encode()
    req["prompt"] = "A few words on %s:" % rng.choice(TOPICS)
    return "/v1/completions", json.dumps(req).encode()


def send(server, path, body, leave_early):
    with socket.create_connection(("127.0.0.1", server.port), timeout=120) as sock:
        sock.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %d\r\n\r\n"
                     % (path.encode(), len(body)) + body)
        if leave_early:
            return
        data = b""
        while True:
            got = sock.recv(65536)
            if not got:
                break
            data += got
    status = int(data.split(b" ", 2)[1])
    assert status in (200, 400, 404), data[:300]


def test_soak(server, model_id):
    seconds = 10 if QUICK else 60
    rng = random.Random(7)
    wait_idle(server)
    stop_at = time.time() + seconds
    rss = []
    errors = []

    def worker(seed):
        r = random.Random(seed)
        while time.time() < stop_at:
            try:
                path, body = random_request(r, model_id)
                send(server, path, body, leave_early=r.random() < 0.1)
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(rng.random(),)) for _ in range(6)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        rss.append(server.rss_kb())
        time.sleep(1)
    for t in threads:
        t.join()
    assert not errors, errors[:5]
    wait_idle(server)
    assert raw(server, "GET", "/health") == (200, {"status": "ok"})
    # flat memory: the second half of the soak grows less than 16 MiB over the first half's peak
    half = len(rss) // 2
    assert max(rss[half:]) - max(rss[:half]) < 16 * 1024, rss


def test_stop_while_streaming(model_id):
    s = Server("--parallel", "2", "--ctx", "2048")
    c = s.client()
    got = []

    def reader():
        try:
            for chunk in c.chat.completions.create(model=model_id, messages=[{"role": "user", "content": "Tell a story."}],
                                                   max_tokens=2000, stream=True):
                got.append(chunk)
        except Exception as e:  # noqa: BLE001 (the stream may end with an error event)
            got.append(e)

    t = threading.Thread(target=reader)
    t.start()
    while len(got) < 3:
        time.sleep(0.05)
    start = time.time()
    assert s.stop(signal.SIGINT, timeout=30) == 0
    t.join(30)
    assert not t.is_alive() and time.time() - start < 30
    assert "stopped" in "".join(s.log)
