"""rlx.Embedder: a BERT-family sentence encoder (MiniLM, BGE, E5, GTE) or a
cross-encoder reranker from a Hugging Face folder."""
import ctypes
import os
import threading

import numpy as np

from . import _lib, errors
from ._lib import check, lib
from .graph import _options

_POOLING = {None: 0, "model": 0, "mean": 1, "cls": 2, "last": 3}


class EmbedderOptions(ctypes.Structure):
    _fields_ = [("compile", _lib.Options), ("pooling", _lib.i32), ("normalize", _lib.i32), ("max_tokens", _lib.i64),
                ("batch", _lib.i32), ("_room", ctypes.c_char * 256)]  # zeros (defaults) for fields rlx.h may add


P = ctypes.POINTER
for _name, (_res, _args) in {
    "rlx_embedder_load": (_lib.c_status, [_lib.c_str, P(EmbedderOptions), P(_lib.c_vp)]),
    "rlx_embedder_free": (None, [_lib.c_vp]),
    "rlx_embedder_dim": (_lib.i64, [_lib.c_vp]),
    "rlx_embed": (_lib.c_status, [_lib.c_vp, P(_lib.c_str), _lib.i64, _lib.c_vp]),
    "rlx_rerank": (_lib.c_status, [_lib.c_vp, _lib.c_str, P(_lib.c_str), _lib.i64, _lib.c_vp]),
    "rlx_embedder_tokenize": (_lib.c_status, [_lib.c_vp, _lib.c_str, P(ctypes.c_int32), _lib.i64, P(_lib.i64)]),
}.items():
    getattr(lib, _name).restype = _res
    getattr(lib, _name).argtypes = _args


def _texts(texts):
    if isinstance(texts, (str, bytes)):
        texts = [texts]
    enc = [t.encode("utf-8") if isinstance(t, str) else bytes(t) for t in texts]
    if any(b"\0" in b for b in enc):
        raise errors.InvalidError("rlx: a text with a NUL character")
    return (_lib.c_str * max(len(enc), 1))(*enc), len(enc)


class Embedder(_lib.Owner):
    """A sentence encoder or reranker (rlx_embedder_load) from a Hugging
    Face folder. ``pooling``: None (as the folder's 1_Pooling/config.json
    says), "mean", "cls" or "last"; ``normalize``: None (as modules.json
    says), True or False; ``max_tokens``: truncation (0: the model's);
    ``batch``: texts per graph run (0: 32).

    >>> e = rlx.Embedder("all-MiniLM-L6-v2")
    >>> e.embed(["a cat", "a dog"]).shape
    (2, 384)
    """
    _owned = (("_e", "rlx_embedder_free"),)

    def __init__(self, path, pooling=None, normalize=None, max_tokens=0, batch=0, device="cpu", threads=0):
        self._e = None
        self._lock = threading.Lock()
        if pooling not in _POOLING:
            raise errors.InvalidError("rlx: pooling %r is not one of mean, cls, last" % (pooling,))
        opts = EmbedderOptions(_options(device, threads), _POOLING[pooling],
                               0 if normalize is None else (1 if normalize else -1), int(max_tokens), int(batch))
        e = _lib.c_vp()
        check(lib.rlx_embedder_load(os.fsencode(path), ctypes.byref(opts), ctypes.byref(e)))
        self._e = e.value
        self.dim = int(lib.rlx_embedder_dim(self._e))

    def close(self):
        """Frees the model now (after a call in another thread ends)."""
        with self._lock:
            _lib.Owner.close(self)

    def _ptr(self):
        if not self._e:
            raise errors.InvalidError("rlx: the embedder was closed")
        return self._e

    def embed(self, texts):
        """The embeddings of ``texts`` (a list of str, or one str): a float32
        array [n, dim] (or [dim] for one str)."""
        arr, n = _texts(texts)
        out = np.empty((n, self.dim), np.float32)
        if n:
            with self._lock:
                check(lib.rlx_embed(self._ptr(), arr, n, out.ctypes.data))
        return out[0] if isinstance(texts, (str, bytes)) else out

    def rerank(self, query, docs):
        """The cross-encoder's score of each (query, doc) pair: float32 [n]."""
        arr, n = _texts(docs)
        q, _ = _texts(query)
        out = np.empty(n, np.float32)
        if n:
            with self._lock:
                check(lib.rlx_rerank(self._ptr(), q[0], arr, n, out.ctypes.data))
        return out

    def tokenize(self, text):
        """The token ids embed runs for ``text`` (special tokens, truncation)."""
        arr, _ = _texts(text)
        e = self._ptr()
        return _lib.with_room(lambda buf, cap, n: lib.rlx_embedder_tokenize(e, arr[0], buf, cap, n),
                              len(arr[0]) + 8, ids=True)
