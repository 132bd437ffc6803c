"""rlx serve's endpoints through the openai package: answers checked against
rlx generate (the same greedy text), a NumPy BERT forward pass (the
embeddings), and the API's own rules (streams equal whole answers, stop
strings end the text before them, seeds repeat, errors in OpenAI's shape)."""
import base64
import http.client
import json
import os
import socket
import subprocess

import numpy as np
import openai
import pytest

from conftest import Server

QUESTION = "What is the capital of France?"


def generate(*args):
    """rlx generate's text (greedy), the reference of the server's."""
    out = subprocess.run([os.environ["RLX_CLI"], "generate", "-m", os.environ["RLX_SERVE_MODEL"], "--temp", "0",
                          *args], capture_output=True, check=True)
    return out.stdout.decode("utf-8")[:-1]  # its final newline


def raw(server, method, path, body=None, headers=None):
    """(status, parsed JSON or text) of a request sent as is."""
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    try:
        return r.status, json.loads(data)
    except ValueError:
        return r.status, data.decode("utf-8", "replace")


def chat(client, model_id, content=QUESTION, **kw):
    return client.chat.completions.create(model=model_id, messages=[{"role": "user", "content": content}], **kw)


def test_models_health_metrics(server, client, minilm):
    ids = [m.id for m in client.models.list().data]
    assert ids == ["SmolLM2-135M-Instruct.Q4_1.gguf", os.path.basename(minilm)]
    assert raw(server, "GET", "/health") == (200, {"status": "ok"})
    status, text = raw(server, "GET", "/metrics")
    assert status == 200
    for name in ("rlx_requests_total", "rlx_queue_length", "rlx_slots_busy", "rlx_slots_total 4",
                 "rlx_completion_tokens_total", "rlx_tokens_per_second"):
        assert "\n" + name in text


def test_chat_greedy_is_rlx_generate(client, model_id):
    r = chat(client, model_id, temperature=0, max_tokens=24)
    assert r.choices[0].message.content == generate("--chat", "-p", QUESTION, "-n", "24")
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 24
    assert r.usage.total_tokens == r.usage.prompt_tokens + 24
    assert r.object == "chat.completion" and r.choices[0].message.role == "assistant"


def test_completion_greedy_is_rlx_generate(client, model_id):
    prompt = "The three primary colors are"
    r = client.completions.create(model=model_id, prompt=prompt, temperature=0, max_tokens=20)
    assert prompt + r.choices[0].text == generate("-p", prompt, "-n", "20")
    assert r.usage.completion_tokens == 20 and r.object == "text_completion"


def test_tensor_parallel_is_rlx_generate_tp():
    """--tp 3 (SmolLM2's 9 heads and 3 kv heads over 3 ranks, threads on the
    CPU): the greedy answer of rlx generate --tp 3, twice (the second request
    reuses the first's cached prefix)."""
    s = Server("--parallel", "2", "--ctx", "1024", "--tp", "3", "--threads", "1")
    try:
        c = s.client()
        model = c.models.list().data[0].id
        want = generate("--chat", "-p", QUESTION, "-n", "12", "--tp", "3", "--threads", "1")
        for _ in range(2):
            assert chat(c, model, temperature=0, max_tokens=12).choices[0].message.content == want
    finally:
        assert s.stop() == 0, "".join(s.log[-20:])


def test_stream_is_the_whole_answer(client, model_id):
    whole = chat(client, model_id, temperature=0, max_tokens=20).choices[0].message.content
    chunks = list(chat(client, model_id, temperature=0, max_tokens=20, stream=True,
                       stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == whole
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["length"]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 20
    text = client.completions.create(model=model_id, prompt="Once upon a time", temperature=0, max_tokens=16)
    parts = list(client.completions.create(model=model_id, prompt="Once upon a time", temperature=0, max_tokens=16,
                                           stream=True))
    assert "".join(p.choices[0].text for p in parts) == text.choices[0].text


def test_stop_strings(client, model_id):
    # A stop string made of the end of one streamed token and the start of the next.
    chunks = [c.choices[0].delta.content for c in chat(client, model_id, temperature=0, max_tokens=40, stream=True)
              if c.choices and c.choices[0].delta.content]
    full = "".join(chunks)
    k = next(i for i in range(2, len(chunks) - 1) if len(chunks[i]) >= 1 and len(chunks[i + 1]) >= 2)
    stop = chunks[k][-1:] + chunks[k + 1][:2]
    expect = full[:full.index(stop)]
    r = chat(client, model_id, temperature=0, max_tokens=40, stop=[stop, "never appears ~~"])
    assert r.choices[0].message.content == expect and r.choices[0].finish_reason == "stop"
    streamed = [c for c in chat(client, model_id, temperature=0, max_tokens=40, stream=True, stop=stop)]
    assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == expect
    assert streamed[-1].choices[0].finish_reason == "stop"


def test_seed_repeats(client, model_id):
    def run(seed, n=1):
        return client.completions.create(model=model_id, prompt="My favourite animal is", temperature=1.0,
                                         max_tokens=24, seed=seed, n=n)
    a = run(1234)
    assert run(1234).choices[0].text == a.choices[0].text
    assert any(run(s).choices[0].text != a.choices[0].text for s in (1, 2, 3))
    # choice i of n draws with seed + i
    r = run(1233, n=2)
    assert [c.index for c in r.choices] == [0, 1]
    assert r.choices[1].text == a.choices[0].text
    assert r.usage.completion_tokens == run(1233).usage.completion_tokens + a.usage.completion_tokens


def test_logit_bias_and_penalties(client, model_id):
    r = client.completions.create(model=model_id, prompt="Hello", temperature=0, max_tokens=4,
                                  logit_bias={"42": 100})
    t = r.choices[0].text
    assert t and t == t[:len(t) // 4] * 4
    r = client.completions.create(model=model_id, prompt="one one one one", temperature=0, max_tokens=8,
                                  presence_penalty=2.0, frequency_penalty=2.0)
    assert r.usage.completion_tokens >= 1


PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "languages": {"type": "array", "items": {"type": "string", "enum": ["en", "fr", "de"]}, "maxItems": 3},
        "member": {"type": "boolean"},
    },
    "required": ["name", "age", "languages", "member"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_json_schema_output(client, model_id, seed):
    import jsonschema
    r = chat(client, model_id, content="Describe a person as JSON.", temperature=0.8, seed=seed, max_tokens=200,
             response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}})
    assert r.choices[0].finish_reason == "stop", r.choices[0].message.content
    jsonschema.validate(json.loads(r.choices[0].message.content), PERSON)
    if seed == 1:  # free-form JSON: greedy, as sampled objects of a small model may nest on and on
        r = chat(client, model_id, content="Give me a JSON object with a name and an age.", temperature=0,
                 max_tokens=200, response_format={"type": "json_object"})
        assert r.choices[0].finish_reason == "stop", r.choices[0].message.content
        assert isinstance(json.loads(r.choices[0].message.content), dict)


def test_grammar(client, model_id):
    r = client.completions.create(model=model_id, prompt="Is the sky blue?", max_tokens=8, temperature=1.0, seed=5,
                                  extra_body={"grammar": 'root ::= ("yes" | "no") "!"'})
    assert r.choices[0].text in ("yes!", "no!") and r.choices[0].finish_reason == "stop"


def test_multi_turn_reuses_the_prompt_cache(client, model_id):
    system = "You are a terse assistant. " * 20
    msgs = [{"role": "system", "content": system}, {"role": "user", "content": "Name a fruit."}]
    first = client.chat.completions.create(model=model_id, messages=msgs, temperature=0, max_tokens=8)
    msgs += [{"role": "assistant", "content": first.choices[0].message.content},
             {"role": "user", "content": "Another one."}]
    second = client.chat.completions.create(model=model_id, messages=msgs, temperature=0, max_tokens=8)
    assert second.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens - 8
    assert second.choices[0].message.content


def test_embeddings_match_numpy(server, client, minilm):
    import bert_ref
    from tokenizers import Tokenizer
    texts = ["The cat sleeps on the warm windowsill.", "crème brûlée and espresso ☕", "東京の会社は発表した"]
    name = os.path.basename(minilm)
    r = client.embeddings.create(model=name, input=texts)  # the client asks for base64
    got = np.array([d.embedding for d in r.data], np.float32)
    cfg = json.load(open(os.path.join(minilm, "config.json")))
    tok = Tokenizer.from_file(os.path.join(minilm, "tokenizer.json"))
    tok.no_padding()
    W = bert_ref.load_weights(minilm)
    ref = []
    n_tokens = 0
    for t in texts:
        e = tok.encode(t)
        n_tokens += len(e.ids)
        x = bert_ref.forward(W, cfg, "", [e.ids], [e.type_ids]).mean(1)[0]
        ref.append(x / np.linalg.norm(x))
    assert np.abs(got - np.array(ref)).max() < 1e-4
    assert r.usage.prompt_tokens == n_tokens
    status, body = raw(server, "POST", "/v1/embeddings", json.dumps({"model": name, "input": texts[0],
                                                                      "encoding_format": "float"}))
    assert status == 200 and np.abs(np.array(body["data"][0]["embedding"]) - ref[0]).max() < 1e-4
    status, body = raw(server, "POST", "/v1/embeddings", json.dumps({"model": name, "input": texts[1],
                                                                      "encoding_format": "base64"}))
    b64 = np.frombuffer(base64.b64decode(body["data"][0]["embedding"]), "<f4")
    assert np.abs(b64 - ref[1]).max() < 1e-4


def hi(**fields):
    """A chat request body of one user message and fields."""
    return json.dumps({"messages": [{"role": "user", "content": "hi"}], **fields}).encode()


BAD = [
    # (path, body, status, words in the message)
    ("/v1/chat/completions", b"{not json", 400, "not valid JSON"),
    ("/v1/chat/completions", hi() + b" trailing", 400, "not valid JSON"),
    ("/v1/chat/completions", hi() + b"\x00", 400, "NUL"),
    ("/v1/chat/completions", b'["an", "array"]', 400, "JSON object"),
    ("/v1/chat/completions", b'{"messages": []}', 400, "messages"),
    ("/v1/chat/completions", b'{"messages": "hi"}', 400, "messages"),
    ("/v1/chat/completions", b'{"messages": [{"role": "wizard", "content": "hi"}]}', 400, "role"),
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}', 400, "text"),
    ("/v1/chat/completions", hi(temperature="hot"), 400, "temperature"),
    ("/v1/chat/completions", hi(max_tokens=1.5), 400, "max_tokens"),
    ("/v1/chat/completions", hi(n=17), 400, "'n'"),
    ("/v1/chat/completions", hi(stream="yes"), 400, "stream"),
    ("/v1/chat/completions", hi(stop=[1, 2]), 400, "stop"),
    ("/v1/chat/completions", hi(logit_bias={"x": 1}), 400, "logit_bias"),
    ("/v1/chat/completions", hi(tools=[{"type": "function"}]), 400, "tools"),
    ("/v1/chat/completions", hi(seed="1"), 400, "seed"),
    ("/v1/chat/completions", hi(model="gpt-4"), 404, "gpt-4"),
    ("/v1/chat/completions", hi(response_format={"type": "xml"}), 400, "response_format"),
    ("/v1/chat/completions", hi(response_format={"type": "json_schema"}), 400, "schema"),
    ("/v1/completions", b'{"prompt": [1, 2, 99999999]}', 400, "prompt"),
    ("/v1/completions", b'{"prompt": ["a", "b"]}', 400, "prompt"),
    ("/v1/completions", b'{"prompt": ""}', 400, "empty"),
    ("/v1/completions", b'{"prompt": "hi", "echo": true}', 400, "echo"),
    ("/v1/embeddings", b'{"input": [1, 2]}', 400, "input"),
    ("/v1/embeddings", b'{"input": "x", "model": "nope"}', 404, "nope"),
    ("/v1/embeddings", b'{"input": "x", "encoding_format": "hex"}', 400, "encoding_format"),
    ("/v1/nothing", b"{}", 404, "no endpoint"),
]


@pytest.mark.parametrize("path,body,status,words", BAD)
def test_bad_requests(server, path, body, status, words):
    got, err = raw(server, "POST", path, body, {"Content-Type": "application/json"})
    assert got == status
    assert set(err["error"]) == {"message", "type", "param", "code"}
    assert words in err["error"]["message"]
    assert raw(server, "GET", "/health")[0] == 200


def test_errors_through_the_client(server, client, model_id):
    with pytest.raises(openai.NotFoundError) as e:
        chat(client, "no-such-model")
    assert e.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as e:
        chat(client, model_id, content="word " * 1200)  # past a slot's 1024 positions
    assert e.value.code == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError, match="grammar"):
        chat(client, model_id, extra_body={"grammar": "root ::= \"unterminated"})
    assert raw(server, "GET", "/v1/chat/completions")[0] == 405
    # a declared length over the limit: 413 on the headers, the body never read
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (5 << 20))
        assert sock.recv(65536).decode().startswith("HTTP/1.1 413")
    # a chunked body that grows past it: read to its end, then 413
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(5):
            sock.sendall(b"100000\r\n" + b"x" * (1 << 20) + b"\r\n")
        sock.sendall(b"0\r\n\r\n")
        answer = sock.recv(65536).decode()
        assert answer.startswith("HTTP/1.1 413") and "limit" in answer
    assert chat(client, model_id, temperature=0, max_tokens=2).usage.completion_tokens == 2


def test_api_key():
    s = Server("--parallel", "1", "--ctx", "512", "--api-key", "sekrit")
    try:
        with pytest.raises(openai.AuthenticationError):
            s.client(api_key="wrong").models.list()
        with pytest.raises(openai.AuthenticationError):
            s.client(api_key="sekri").models.list()
        assert raw(s, "GET", "/v1/models")[0] == 401
        assert raw(s, "GET", "/health")[0] == 200
        c = s.client(api_key="sekrit")
        assert c.completions.create(model=c.models.list().data[0].id, prompt="Hi", max_tokens=2).choices[0].text
    finally:
        assert s.stop() == 0
