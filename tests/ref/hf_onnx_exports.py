#!/usr/bin/env python3
"""hf_onnx_exports.py OUT_DIR [NAME...] — tiny randomly initialized Hugging
Face transformers (and torch.nn LSTM/GRU, a TorchScript loop with a branch)
exported to ONNX with torch.onnx, and their onnxruntime outputs, for
tests/onnx/test_hf_exports.py (which needs neither torch nor the network).

Each model NAME gives OUT_DIR/NAME.onnx and OUT_DIR/NAME.npz: the inputs
as in_<k> and onnxruntime's outputs as out_<k>, in the graph's order.
Shapes are static (batch 2). Needs torch and transformers (the venv of
tests/ref); run by hand or as the CTest label hf_export_ref, never in CI.
"""
import os
import sys
import warnings

import numpy as np

SEED = 20


def bert():
    from transformers import BertConfig, BertModel
    cfg = BertConfig(vocab_size=97, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=32, type_vocab_size=2)
    m = BertModel(cfg)
    rng = np.random.default_rng(SEED)
    ids = rng.integers(0, 97, (2, 9)).astype(np.int64)
    mask = np.ones((2, 9), np.int64)
    mask[1, 6:] = 0
    tt = np.zeros((2, 9), np.int64)
    tt[:, 5:] = 1

    class Wrap(__import__("torch").nn.Module):
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, token_type_ids):
            o = self.m(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return o.last_hidden_state, o.pooler_output
    return Wrap(), [("input_ids", ids), ("attention_mask", mask), ("token_type_ids", tt)], \
        ["last_hidden_state", "pooler_output"]


def gpt2():
    """One decode step of 3 tokens after 5 cached ones: past key/values in,
    present key/values out (the layout of optimum's decoder-with-past)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.cache_utils import DynamicCache
    layers, heads, hd = 2, 4, 8
    cfg = GPT2Config(vocab_size=101, n_positions=32, n_embd=heads * hd, n_layer=layers, n_head=heads,
                     bos_token_id=1, eos_token_id=2)
    m = GPT2LMHeadModel(cfg)
    rng = np.random.default_rng(SEED)
    past_len, new = 5, 3
    ids = rng.integers(0, 101, (2, new)).astype(np.int64)
    mask = np.ones((2, past_len + new), np.int64)
    past = [rng.standard_normal((2, heads, past_len, hd)).astype(np.float32) for _ in range(2 * layers)]

    class Wrap(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, *past):
            cache = DynamicCache()
            for i in range(layers):
                cache.update(past[2 * i], past[2 * i + 1], i)
            o = self.m(input_ids=input_ids, attention_mask=attention_mask, past_key_values=cache, use_cache=True)
            pkv = o.past_key_values
            outs = [o.logits]
            for i in range(layers):
                k, v = (pkv.layers[i].keys, pkv.layers[i].values) if hasattr(pkv, "layers") else pkv[i]
                outs += [k, v]
            return tuple(outs)
    names = []
    for i in range(layers):
        names += ["past_key_values.%d.key" % i, "past_key_values.%d.value" % i]
    onames = ["logits"] + [n.replace("past_key_values", "present") for n in names]
    return Wrap(), [("input_ids", ids), ("attention_mask", mask)] + list(zip(names, past)), onames


def vit():
    from transformers import ViTConfig, ViTModel
    cfg = ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=2,
                    num_attention_heads=4, intermediate_size=64)
    m = ViTModel(cfg)
    x = np.random.default_rng(SEED).standard_normal((2, 3, 32, 32)).astype(np.float32)

    class Wrap(__import__("torch").nn.Module):
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, pixel_values):
            o = self.m(pixel_values=pixel_values)
            return o.last_hidden_state, o.pooler_output
    return Wrap(), [("pixel_values", x)], ["last_hidden_state", "pooler_output"]


def whisper_encoder():
    from transformers import WhisperConfig
    from transformers.models.whisper.modeling_whisper import WhisperEncoder
    cfg = WhisperConfig(num_mel_bins=16, d_model=32, encoder_layers=2, encoder_attention_heads=4,
                        encoder_ffn_dim=64, max_source_positions=12, vocab_size=64,
                        pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)
    m = WhisperEncoder(cfg)
    x = np.random.default_rng(SEED).standard_normal((2, 16, 24)).astype(np.float32)

    class Wrap(__import__("torch").nn.Module):
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, input_features):
            return self.m(input_features=input_features).last_hidden_state
    return Wrap(), [("input_features", x)], ["last_hidden_state"]


def t5_encoder():
    from transformers import T5Config, T5EncoderModel
    cfg = T5Config(vocab_size=89, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                   relative_attention_num_buckets=8, relative_attention_max_distance=16)
    m = T5EncoderModel(cfg)
    rng = np.random.default_rng(SEED)
    ids = rng.integers(0, 89, (2, 7)).astype(np.int64)
    mask = np.ones((2, 7), np.int64)
    mask[0, 5:] = 0

    class Wrap(__import__("torch").nn.Module):
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask):
            return self.m(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    return Wrap(), [("input_ids", ids), ("attention_mask", mask)], ["last_hidden_state"]


def torch_rnn():
    """torch.nn.LSTM (two layers, bidirectional, batch first, given states)
    feeding torch.nn.GRU: the LSTM and GRU nodes torch writes."""
    import torch

    class Wrap(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(6, 8, num_layers=2, batch_first=True, bidirectional=True)
            self.gru = torch.nn.GRU(16, 5, batch_first=True)

        def forward(self, x, h0, c0):
            y, (h, c) = self.lstm(x, (h0, c0))
            z, hg = self.gru(y)
            return z, h, c, hg
    rng = np.random.default_rng(SEED)
    x, h0, c0 = (rng.standard_normal(s).astype(np.float32) for s in [(2, 7, 6), (4, 2, 8), (4, 2, 8)])
    return Wrap(), [("x", x), ("h0", h0), ("c0", c0)], ["z", "h", "c", "h_gru"]


def scripted_loop():
    """A TorchScript loop over the rows of x with a branch on each row's
    sum: a Loop whose body holds an If on run-time data."""
    import torch

    class Loop(torch.nn.Module):
        def forward(self, x):
            acc = torch.zeros_like(x[0])
            for i in range(x.size(0)):
                if bool(x[i].sum() > 0):
                    acc = acc + x[i]
                else:
                    acc = acc - 0.5 * x[i]
            return acc
    x = np.random.default_rng(SEED).standard_normal((6, 4)).astype(np.float32)
    return torch.jit.script(Loop()), [("x", x)], ["acc"]


MODELS = {"bert": bert, "gpt2_past": gpt2, "vit": vit, "whisper_encoder": whisper_encoder, "t5_encoder": t5_encoder,
          "torch_rnn": torch_rnn, "scripted_loop": scripted_loop}


def export(name, out_dir):
    import onnx
    import onnxruntime as ort
    import torch
    torch.manual_seed(SEED)
    module, inputs, out_names = MODELS[name]()
    module.eval()
    path = os.path.join(out_dir, name + ".onnx")
    args = tuple(torch.from_numpy(x) for _, x in inputs)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, path, input_names=[n for n, _ in inputs], output_names=out_names,
                          opset_version=17, dynamo=False, do_constant_folding=True)
    model = onnx.load(path)
    onnx.checker.check_model(model)
    onnx.save(model, path)   # one file, no external data
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    real = [i.name for i in sess.get_inputs()]
    feeds = {n: x for n, x in inputs if n in real}
    outs = sess.run(None, feeds)
    arrays = {"in_%d" % k: feeds[n] for k, n in enumerate(real)}
    arrays.update({"out_%d" % k: y for k, y in enumerate(outs)})
    np.savez_compressed(os.path.join(out_dir, name + ".npz"), **arrays)
    print("%s: %d inputs, %d outputs, %d bytes" % (name, len(real), len(outs), os.path.getsize(path)))


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        print("SKIP: torch and transformers are needed")
        return 77
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    for name in sys.argv[2:] or MODELS:
        export(name, out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
