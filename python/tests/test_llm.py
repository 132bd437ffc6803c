"""rlx.LLM against the C CLI: `rlx generate` on the SmolLM2 GGUF file (which
scripts/deps.sh installs) prints the same text for the same prompt and
sampling settings; tokenize/detokenize, eval and chat."""
import subprocess

import numpy as np
import pytest

import rlx

PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def llm(smollm2):
    with rlx.LLM(smollm2, n_ctx=512, threads=2) as m:
        yield m


def _cli(rlx_cli, model, *args):
    r = subprocess.run([rlx_cli, "generate", "-m", model, "-t", "2", "-c", "512", *args], capture_output=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout.decode("utf-8", "replace")


@pytest.mark.parametrize("sampling", [("--temp", "0"), ("--temp", "0.8", "-s", "42", "--top-k", "20")])
def test_generate_matches_cli(llm, smollm2, rlx_cli, sampling):
    cli = _cli(rlx_cli, smollm2, "-p", PROMPT, "-n", "24", *sampling)
    kw = {"temperature": float(sampling[1])}
    if len(sampling) > 2:
        kw.update(seed=42, top_k=20)
    text = llm.generate(PROMPT, max_tokens=24, **kw)
    streamed = "".join(llm.generate(PROMPT, max_tokens=24, stream=True, **kw))
    assert text and streamed == text
    assert cli.startswith(PROMPT + text) and cli[len(PROMPT + text):].strip("\n") == ""


def test_chat_matches_cli(llm, smollm2, rlx_cli):
    cli = _cli(rlx_cli, smollm2, "--chat", "--system", "Be brief.", "-p", "What is 2+2?", "-n", "20", "--temp", "0")
    reply = llm.chat([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"}],
                     max_tokens=20, temperature=0)
    assert reply and cli.rstrip("\n").endswith(reply.rstrip("\n"))
    assert "<|im_start|>" in llm.apply_chat_template([{"role": "user", "content": "hi"}])


def test_tokens_and_logits(llm):
    ids = llm.tokenize(PROMPT)
    assert ids and all(isinstance(t, int) for t in ids)
    assert llm.detokenize(ids) == PROMPT
    assert b"".join(llm.token_to_piece(t) for t in ids).decode() == PROMPT
    llm.reset()
    last = llm.eval(ids)
    assert last.shape == (llm.n_vocab,) and last.dtype == np.float32 and llm.n_past == len(ids)
    llm.reset()
    every = llm.eval(ids, all_logits=True)
    assert every.shape == (len(ids), llm.n_vocab)
    np.testing.assert_allclose(every[-1], last, rtol=1e-4, atol=1e-4)
    greedy = llm.generate_tokens(PROMPT, max_tokens=3, temperature=0)
    assert greedy[0] == int(np.argmax(last))
    # one more step by eval gives the greedy second token
    llm.reset()
    llm.eval(ids)
    assert int(np.argmax(llm.eval([greedy[0]]))) == greedy[1]


def test_info_against_the_metadata(llm, smollm2):
    info = llm.info()
    with rlx.ModelFile(smollm2) as f:
        md = f.metadata
        arch = md["general.architecture"]
        assert info["arch"] == arch and info["n_ctx"] == 512 and info["kv_cache_type"] == "f32"
        assert info["n_layer"] == md[arch + ".block_count"]
        assert info["n_embd"] == md[arch + ".embedding_length"]
        assert info["n_head"] == md[arch + ".attention.head_count"]
        assert info["n_head_kv"] == md[arch + ".attention.head_count_kv"]
        assert info["n_vocab"] == len(md["tokenizer.ggml.tokens"]) == llm.n_vocab


def test_quantized_kv_cache(llm, smollm2):
    """A q8_0 cache: its size (34 bytes a block of 32), and logits near the
    f32 cache's (the keys and values rounded to 1/127 of each block's
    largest: a few percent of the largest logit at most)."""
    with rlx.LLM(smollm2, n_ctx=512, cache_type="q8_0") as q:
        info = q.info()
        assert info["kv_cache_type"] == "q8_0"
        assert info["kv_cache_bytes"] == 2 * info["n_layer"] * 512 * info["n_head_kv"] * info["head_dim"] // 32 * 34
        ids = q.tokenize(PROMPT * 4)
        llm.reset()
        exact, got = llm.eval(ids), q.eval(ids)
        assert 0 < np.abs(got - exact).max() <= 0.05 * np.abs(exact).max()


def test_llm_errors(llm):
    with pytest.raises(rlx.InvalidError):
        llm.eval([])
    with pytest.raises(rlx.Error):
        llm.eval([llm.n_vocab + 5])
    with pytest.raises(rlx.InvalidError):
        llm.reset(10 ** 6)
    with pytest.raises(rlx.InvalidError):
        llm.generate([1, -3, 2], max_tokens=2)
    with pytest.raises(rlx.InvalidError):
        llm.generate("", max_tokens=2, add_special=False)
    with pytest.raises(rlx.InvalidError):
        rlx.LLM("x.gguf", cache_type="f8")


def test_hf_folder():
    """A Hugging Face folder (tests/data/hf_decoders, with transformers'
    references from tests/ref/hf_decoder_folders.py) loads as a GGUF does:
    transformers' token ids and greedy tokens, and its chat template."""
    import os
    data = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "hf_decoders")
    ref = os.path.join(data, "qwen3_f16.ref")
    with rlx.LLM(os.path.join(data, "qwen3_f16"), threads=2) as m:
        assert m.arch == "qwen3"
        text = open(os.path.join(ref, "prompt0.txt"), encoding="utf-8").read()
        ids = m.tokenize(text)
        assert ids == np.fromfile(os.path.join(ref, "prompt0.tokens"), np.int32).tolist()
        greedy = np.fromfile(os.path.join(ref, "prompt0.greedy"), np.int32).tolist()
        assert m.generate_tokens(ids, max_tokens=len(greedy), temperature=0) == greedy
        chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2 + 2?"}]
        assert m.apply_chat_template(chat) == open(os.path.join(ref, "chat.txt"), encoding="utf-8").read()


def test_tensor_parallel_cpu():
    """tp=2 on the CPU (ranks as threads) decodes transformers' greedy tokens
    of the qwen3 folder as tp=1 does; heads that do not divide are refused."""
    import os
    data = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "hf_decoders")
    ref = os.path.join(data, "qwen3_f16.ref")
    with rlx.LLM(os.path.join(data, "qwen3_f16"), threads=1, tp=2) as m:
        ids = m.tokenize(open(os.path.join(ref, "prompt0.txt"), encoding="utf-8").read())
        greedy = np.fromfile(os.path.join(ref, "prompt0.greedy"), np.int32).tolist()
        assert m.generate_tokens(ids, max_tokens=len(greedy), temperature=0) == greedy
    with pytest.raises(rlx.UnsupportedError, match="divide by 3"):
        rlx.LLM(os.path.join(data, "qwen3_f16"), tp=3)
    with pytest.raises(rlx.InvalidError):
        rlx.LLM(os.path.join(data, "qwen3_f16"), tp=0)


def test_bf16_math():
    """bf16_math=True (RLX_FLAG_BF16_MATH) on the BF16 qwen2 folder: the
    prompt's logits (16 tokens: the prefill GEMM, where AVX-512 BF16 runs
    on activations rounded to BF16) stay within 2e-2 of the largest of
    transformers' logits, which the exact default matches to 1e-4."""
    import os
    data = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "hf_decoders")
    ref = os.path.join(data, "qwen2_bf16.ref")
    want = np.fromfile(os.path.join(ref, "prompt0.logits"), np.float32)
    scale = np.abs(want).max()
    for bf16_math, tol in ((False, 1e-4), (True, 2e-2)):
        with rlx.LLM(os.path.join(data, "qwen2_bf16"), threads=2, bf16_math=bf16_math) as m:
            ids = m.tokenize(open(os.path.join(ref, "prompt0.txt"), encoding="utf-8").read())
            got = m.eval(ids, all_logits=True).reshape(-1)
        assert got.shape == want.shape
        assert np.abs(got - want).max() <= tol * scale, (bf16_math, np.abs(got - want).max() / scale)
