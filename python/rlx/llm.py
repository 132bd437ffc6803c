"""rlx.LLM: a GGUF language model or a Hugging Face folder of one
(tokenizer, decoder with its KV cache, sampler) from Python, as
`rlx generate` runs it."""
import codecs
import ctypes
import os
import threading

import numpy as np

from . import _dtypes, _lib, errors
from ._lib import check, lib
from .graph import _options

_CACHE_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0")


class LLM(_lib.Owner):
    """A Llama-family model (llama / SmolLM2, qwen2, qwen3): a GGUF file or
    a Hugging Face folder (config.json, safetensors, tokenizer.json).

    ``n_ctx``: the KV cache length (0: the model's, at most 4096);
    ``device``: "cpu", "cuda" or "auto"; ``threads``: 0 for every core;
    ``cache_type``: "f32", "f16", "bf16", or "q8_0" / "q4_0" (quantized
    blocks of 32; head size a multiple of 32); ``tp``: ranks the
    model is split over (tensor parallelism: threads, rank r on GPU D + r
    of device "cuda:D"; on the CPU a check, not a speed-up); ``bf16_math``:
    BF16 weights' prefill may round the activations to BF16 (RLX_FLAG_BF16_MATH:
    faster where the CPU has AVX-512 BF16, not exact; off by default).

    >>> llm = rlx.LLM("SmolLM2-135M-Instruct.Q4_1.gguf", n_ctx=2048)
    >>> for piece in llm.generate("The capital of France is", max_tokens=16, stream=True):
    ...     print(piece, end="")
    """

    # the file (_f) belongs to the decoder (rlx_llm_open): closed with it
    _owned = (("_m", "rlx_llm_free"), ("_tok", "rlx_tokenizer_free"))

    def close(self):
        """Frees the model now (after an eval in another thread ends)."""
        with self._lock:
            _lib.Owner.close(self)

    def __init__(self, path, n_ctx=0, device="cpu", threads=0, cache_type="f32", tp=1, bf16_math=False):
        self._f = self._tok = self._m = None
        self._lock = threading.Lock()  # rlx_llm_eval releases the GIL: one call at a time
        if cache_type not in _CACHE_TYPES:
            raise errors.InvalidError("rlx: cache_type %r is not f32, f16, bf16, q8_0 or q4_0" % (cache_type,))
        if not isinstance(tp, int) or isinstance(tp, bool) or tp < 1:
            raise errors.InvalidError("rlx: tp %r is not a whole number >= 1" % (tp,))
        tok, m = _lib.c_vp(), _lib.c_vp()
        opts = _lib.LlmOptions(_options(device, threads, bf16_math=bf16_math), int(n_ctx), _lib.PROGRESS(), None,
                               _dtypes.code(cache_type), 0, tp)
        check(lib.rlx_llm_open(os.fsencode(path), ctypes.byref(opts), ctypes.byref(m)))
        self._m = m.value
        self._f = lib.rlx_llm_file(self._m)
        check(lib.rlx_tokenizer_load(self._f, ctypes.byref(tok)))
        self._tok = tok.value
        self.n_vocab = int(lib.rlx_llm_vocab_size(self._m))  # sizes the logits buffers
        info = self.info()
        self.n_ctx = info["n_ctx"]
        self.arch = info["arch"]

    def info(self):
        """rlx_llm_info as a dict: arch, n_vocab, n_embd, n_layer, n_head,
        n_head_kv, head_dim, n_ff, n_ctx_train, n_ctx, rope_base, norm_eps,
        weight_bytes, kv_cache_bytes, kv_cache_type (a dtype name), ..."""
        st = _lib.LlmInfo()
        with self._lock:
            check(lib.rlx_llm_get_info(self._ptr(), ctypes.byref(st)))
        d = _lib.struct_dict(st)
        for k in ("arch", "rope_scaling"):
            d[k] = d[k].decode("utf-8", "replace")
        d["kv_cache_type"] = _dtypes.name(d["kv_cache_type"])
        return d

    def _ptr(self):
        if not self._m:
            raise errors.InvalidError("rlx: the LLM was closed")
        return self._m

    # ---- tokens

    def tokenize(self, text, add_special=True, parse_special=False):
        """Token ids (a list of int) of ``text``; add_special adds the BOS/EOS
        the model asks for; parse_special reads control tokens written in the
        text ("<|im_start|>") as their ids."""
        self._ptr()
        if not isinstance(text, (str, bytes, bytearray)):
            raise TypeError("rlx: tokenize takes str or bytes, not %s" % type(text).__name__)
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        return _lib.with_room(lambda buf, cap, n: lib.rlx_tokenize(
            self._tok, data, len(data), int(add_special), int(parse_special), buf, cap, n), len(data) + 8, ids=True)

    def detokenize(self, tokens, render_special=False):
        """The text of ``tokens`` (invalid UTF-8 replaced)."""
        return self._bytes(lib.rlx_detokenize, tokens, render_special).decode("utf-8", "replace")

    def _bytes(self, fn, tokens, render_special):
        self._ptr()
        tokens = [int(t) for t in tokens]
        ids = (ctypes.c_int32 * max(len(tokens), 1))(*tokens)
        return _lib.with_room(lambda buf, cap, n: fn(self._tok, ids, len(tokens), int(render_special), buf, cap, n),
                              16 * len(tokens) + 16)

    def token_to_piece(self, token, render_special=False):
        """The bytes one token stands for (may be part of a UTF-8 sequence)."""
        self._ptr()
        return _lib.with_room(lambda buf, cap, n: lib.rlx_token_to_piece(
            self._tok, int(token), int(render_special), buf, cap, n), 64)

    @property
    def token_bos(self):
        return lib.rlx_token_bos(self._tok)

    @property
    def token_eos(self):
        return lib.rlx_token_eos(self._tok)

    def is_eog(self, token):
        """Whether ``token`` ends generation (EOS, EOT, <|im_end|>, ...)."""
        return bool(lib.rlx_token_is_eog(self._tok, int(token)))

    # ---- the decoder

    def eval(self, tokens, all_logits=False):
        """Runs ``tokens`` after those already in the KV cache and returns the
        logits of the last one (n_vocab floats), or of each ([n, n_vocab])."""
        tokens = np.ascontiguousarray(tokens, dtype=np.int32).reshape(-1)
        n = len(tokens)
        if n == 0:
            raise errors.InvalidError("rlx: LLM.eval of no tokens")
        out = np.empty((n, self.n_vocab) if all_logits else self.n_vocab, np.float32)
        with self._lock:
            check(lib.rlx_llm_eval(self._ptr(), tokens.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)), n,
                                   int(all_logits), out.ctypes.data))
        return out

    @property
    def n_past(self):
        """Tokens in the KV cache."""
        return lib.rlx_llm_n_past(self._ptr())

    def reset(self, n_past=0):
        """Forgets the KV cache after position ``n_past`` (0: start over)."""
        with self._lock:
            check(lib.rlx_llm_truncate(self._ptr(), int(n_past)))

    # ---- generation

    def generate(self, prompt, max_tokens=128, temperature=0.8, top_k=40, top_p=0.95, min_p=0.05,
                 repeat_penalty=1.0, repeat_last_n=64, seed=0, stream=False, stop_at_eog=True,
                 parse_special=False, add_special=True):
        """The continuation of ``prompt`` (text, or a list of token ids), as
        `rlx generate` samples it: temperature 0 is greedy; ``seed`` makes
        sampling repeatable. stream=True returns an iterator of text pieces
        (each a whole UTF-8 sequence); otherwise the text."""
        it = self._generate(prompt, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n,
                            seed, stop_at_eog, parse_special, add_special)
        return it if stream else "".join(it)

    def generate_tokens(self, prompt, max_tokens=128, **sampling):
        """The generated token ids (a list) for ``prompt``; arguments as generate."""
        out = []
        for _ in self._generate(prompt, max_tokens, *self._sampling(**sampling), tokens_out=out):
            pass
        return out

    @staticmethod
    def _sampling(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, repeat_penalty=1.0, repeat_last_n=64,
                  seed=0, stop_at_eog=True, parse_special=False, add_special=True):
        return (temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n, seed, stop_at_eog,
                parse_special, add_special)

    def _generate(self, prompt, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n,
                  seed, stop_at_eog, parse_special, add_special, tokens_out=None):
        ids = list(prompt) if not isinstance(prompt, (str, bytes)) else self.tokenize(prompt, add_special,
                                                                                       parse_special)
        if not ids:
            raise errors.InvalidError("rlx: an empty prompt")
        bad = [t for t in ids if not 0 <= t < self.n_vocab]
        if bad:  # the sampler indexes its penalties by token
            raise errors.InvalidError("rlx: prompt token %d is not in the vocabulary (0..%d)" % (bad[0], self.n_vocab - 1))
        sp = _lib.SamplerParams(temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n, seed)
        smp = _lib.c_vp()
        check(lib.rlx_sampler_new(ctypes.byref(sp), self.n_vocab, ctypes.byref(smp)))
        dec = codecs.getincrementaldecoder("utf-8")("replace")
        try:
            for t in ids:
                lib.rlx_sampler_accept(smp, t)
            # The whole prompt in one prefill, as `rlx generate` does: a cache
            # prefix kept from an earlier call would be decoded by other kernels
            # (one token at a time), which round differently.
            self.reset()
            logits = self.eval(ids)
            for _ in range(max_tokens):
                t = lib.rlx_sampler_sample(smp, logits.ctypes.data)
                if t < 0:
                    raise errors.InternalError("rlx: the sampler returned no token")
                if stop_at_eog and self.is_eog(t):
                    break
                if tokens_out is not None:
                    tokens_out.append(t)
                piece = dec.decode(self.token_to_piece(t))
                if piece:
                    yield piece
                if self.n_past >= self.n_ctx:
                    break
                logits = self.eval([t])
            tail = dec.decode(b"", final=True)
            if tail:
                yield tail
        finally:
            lib.rlx_sampler_free(smp)

    def apply_chat_template(self, messages, add_assistant=True):
        """The text of ``messages`` ([{"role": ..., "content": ...}]) in the
        model's chat template (tokenizer.chat_template)."""
        self._ptr()
        arr = (_lib.ChatMessage * max(len(messages), 1))()
        keep = []
        for i, msg in enumerate(messages):
            role, content = msg["role"].encode(), msg["content"].encode()
            keep += [role, content]
            arr[i] = _lib.ChatMessage(role, content)
        text = _lib.with_room(lambda buf, cap, n: lib.rlx_chat_apply_template(
            self._f, arr, len(messages), int(add_assistant), buf, cap, n), sum(len(k) for k in keep) + 1024)
        return text.decode("utf-8", "replace")

    def chat(self, messages, **kwargs):
        """The assistant's reply to ``messages`` in the model's chat template;
        keyword arguments as generate (stream=True yields pieces)."""
        text = self.apply_chat_template(messages)
        bos = self.token_bos
        starts_bos = bos >= 0 and text.encode().startswith(self.token_to_piece(bos, True))
        return self.generate(text, parse_special=True, add_special=not starts_bos, **kwargs)
