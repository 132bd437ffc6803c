"""rlx.ModelFile against the gguf and safetensors packages' own readers and
writers; weights bound without a copy (Session.set_param(copy=False))."""
import numpy as np
import pytest

import rlx
from rlx import ops

gguf = pytest.importorskip("gguf")
st = pytest.importorskip("safetensors.numpy")


def test_gguf_against_the_gguf_reader(smollm2):
    ref = gguf.GGUFReader(smollm2)
    with rlx.ModelFile(smollm2) as f:
        assert f.format == "GGUF" and f.version == 3
        md = f.metadata
        assert md["general.architecture"] == "llama" and "nope" not in md
        for key in ("llama.block_count", "llama.rope.freq_base", "llama.context_length",
                    "tokenizer.ggml.bos_token_id", "tokenizer.ggml.add_bos_token"):
            field = ref.fields[key]
            want = field.parts[field.data[0]][0]
            assert md[key] == pytest.approx(want.item() if hasattr(want, "item") else want), key
        toks = md["tokenizer.ggml.tokens"]
        field = ref.fields["tokenizer.ggml.tokens"]
        assert len(toks) == len(field.data)
        for i in (0, 1, 100, len(toks) - 1):
            assert toks[i] == bytes(field.parts[field.data[i]]).decode()
        mine = {t["name"]: t for t in f.tensors()}
        assert set(mine) == {t.name for t in ref.tensors}
        for t in ref.tensors[:12]:
            a = f.tensor(t.name)
            assert not a.flags.writeable
            assert a.tobytes() == np.asarray(t.data).tobytes(), t.name
            assert mine[t.name]["shape"] == tuple(int(d) for d in reversed(t.shape)), t.name


def test_safetensors_weights_without_copy(tmp_path, rng):
    w = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float16)
    path = str(tmp_path / "w.safetensors")
    st.save_file({"w": w, "b": b}, path, metadata={"note": "test"})
    with rlx.ModelFile(path) as f:
        assert f.format == "safetensors" and f.metadata["note"] == "test"
        np.testing.assert_array_equal(f.tensor("w"), w)
        np.testing.assert_array_equal(f.tensor("b"), b)
        g = rlx.Graph("lin")
        x = g.input("x", "f32", (2, 4))
        wp, bp = g.param("w", "f32", (4, 3)), g.param("b", "f16", (3,))
        g.set_outputs(x @ wp + ops.cast(bp, "f32"))
        s = g.compile()
        s.set_param("w", f.tensor("w"), copy=False)
        s.set_param("b", f.tensor("b"))
        X = rng.standard_normal((2, 4)).astype(np.float32)
        np.testing.assert_allclose(s.run({"x": X})[0], X @ w + b.astype(np.float32), rtol=1e-5, atol=1e-6)
        s.close()
        with pytest.raises(rlx.InvalidError):
            f.tensor("nope")
        kept = f.tensor("w")
    with pytest.raises(rlx.InvalidError):
        f.tensor("w")
    np.testing.assert_array_equal(kept, w)  # an array keeps the closed file's mapping
