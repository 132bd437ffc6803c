"""rlx.ModelFile: a GGUF or safetensors file, its tensors as read-only NumPy
arrays over the mapped file (no copy) and its metadata."""
import ctypes
import os

import numpy as np

from . import _dtypes, _lib, errors
from ._lib import check, lib

c_vp, i32, i64, u64, sz = _lib.c_vp, _lib.i32, _lib.i64, ctypes.c_uint64, _lib.sz


class FileTensor(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("supported", i32), ("dtype", i32), ("type_name", ctypes.c_char_p),
                ("type_code", i32), ("rank", i32), ("dims", i64 * 8), ("numel", i64), ("offset", u64),
                ("nbytes", sz), ("data", c_vp), ("_room", ctypes.c_char * 128)]


class MetaValue(ctypes.Structure):
    _fields_ = [("type", i32), ("elem_type", i32), ("count", u64), ("file_", c_vp), ("key_", c_vp),
                ("str_", c_vp), ("pos_", u64), ("aux_", u64), ("_room", ctypes.c_char * 128)]


P = ctypes.POINTER
for _name, (_res, _args) in {
    "rlx_model_file_format": (i32, [c_vp]),
    "rlx_file_format_name": (ctypes.c_char_p, [i32]),
    "rlx_model_file_version": (ctypes.c_uint32, [c_vp]),
    "rlx_model_file_num_tensors": (i64, [c_vp]),
    "rlx_model_file_tensor": (i32, [c_vp, i64, P(FileTensor)]),
    "rlx_model_file_find_tensor": (i32, [c_vp, ctypes.c_char_p, P(FileTensor)]),
    "rlx_meta_count": (i64, [c_vp]),
    "rlx_meta_key": (ctypes.c_char_p, [c_vp, i64, P(MetaValue)]),
    "rlx_meta_lookup": (i32, [c_vp, ctypes.c_char_p, P(MetaValue)]),
    "rlx_meta_elem": (i32, [P(MetaValue), u64, P(MetaValue)]),
    "rlx_meta_as_string": (i32, [P(MetaValue), P(c_vp), P(sz)]),
    "rlx_meta_as_bool": (i32, [P(MetaValue), P(ctypes.c_int)]),
    "rlx_meta_as_i64": (i32, [P(MetaValue), P(i64)]),
    "rlx_meta_as_u64": (i32, [P(MetaValue), P(u64)]),
    "rlx_meta_as_f64": (i32, [P(MetaValue), P(ctypes.c_double)]),
}.items():
    getattr(lib, _name).restype = _res
    getattr(lib, _name).argtypes = _args

# rlx_meta_type: u8 i8 u16 i16 u32 i32 f32 bool string array u64 i64 f64
_UNSIGNED, _FLOAT, _BOOL, _STRING, _ARRAY = {0, 2, 4, 10}, {6, 12}, 7, 8, 9


class _Mapping(_lib.Owner):
    """The open file itself: kept by the ModelFile and by every array over
    its bytes, so it is unmapped only when the last of them is gone."""
    _owned = (("h", "rlx_model_file_close"),)

    def __init__(self, h):
        self.h = h


class ModelFile(_lib.Owner):
    """A GGUF or safetensors file, memory-mapped and checked whole on open
    (rlx_model_file_open). ``tensor(name)`` is a read-only NumPy view of the
    mapped data (block dtypes: their raw bytes as uint8); the mapping stays
    until the file is closed and no such array is left. ``metadata[key]``
    reads a value (str, int, float, bool or list)."""

    def __init__(self, path):
        self._map = None
        f = c_vp()
        check(lib.rlx_model_file_open(os.fsencode(path), ctypes.byref(f)))
        self._map = _Mapping(f.value)
        self.format = lib.rlx_file_format_name(lib.rlx_model_file_format(self._f)).decode("utf-8", "replace")
        self.version = lib.rlx_model_file_version(self._f)
        self.metadata = _Metadata(self)

    @property
    def _f(self):
        if not self._map:
            raise errors.InvalidError("rlx: the model file was closed")
        return self._map.h

    def _ptr(self):
        return self._f

    def close(self):
        """Closes the file: the mapping goes once no array from tensor() is left."""
        self._map = None

    def _info(self, t):
        return {"name": t.name.decode("utf-8", "replace"), "dtype": _dtypes.name(t.dtype) if t.supported else None,
                "type": t.type_name.decode("utf-8", "replace"), "shape": tuple(t.dims[:t.rank]), "nbytes": t.nbytes,
                "offset": t.offset}

    def tensors(self):
        """Each tensor's name, dtype (None where rlx has none), file type, shape, bytes and offset."""
        out = []
        t = FileTensor()
        for i in range(lib.rlx_model_file_num_tensors(self._ptr())):
            check(lib.rlx_model_file_tensor(self._f, i, ctypes.byref(t)))
            out.append(self._info(t))
        return out

    def tensor(self, name):
        """The data of tensor ``name``: a read-only array over the mapped file."""
        t = FileTensor()
        check(lib.rlx_model_file_find_tensor(self._ptr(), name.encode(), ctypes.byref(t)))
        buf = b""
        if t.nbytes:
            buf = (ctypes.c_char * t.nbytes).from_address(t.data)
            buf.mapping = self._map  # the array's base keeps the file mapped
        if t.supported and t.dtype < len(_dtypes.NUMPY) and t.nbytes:
            a = np.frombuffer(buf, _dtypes.to_numpy(t.dtype)).reshape(tuple(t.dims[:t.rank]))
        else:
            a = np.frombuffer(buf, np.uint8)
        a.flags.writeable = False
        return a


class _Metadata:
    """The file's metadata, read value by value (a Mapping of key -> value)."""

    def __init__(self, mf):
        self._mf = mf

    def keys(self):
        f = self._mf._ptr()
        return [lib.rlx_meta_key(f, i, None).decode("utf-8", "replace") for i in range(lib.rlx_meta_count(f))]

    def __iter__(self):
        return iter(self.keys())

    def __len__(self):
        return lib.rlx_meta_count(self._mf._ptr())

    def __contains__(self, key):
        v = MetaValue()
        return lib.rlx_meta_lookup(self._mf._ptr(), key.encode(), ctypes.byref(v)) == 0

    def __getitem__(self, key):
        v = MetaValue()
        if lib.rlx_meta_lookup(self._mf._ptr(), key.encode(), ctypes.byref(v)):
            raise KeyError(key)
        return _value(v)

    def get(self, key, default=None):
        return self[key] if key in self else default

    def items(self):
        return [(k, self[k]) for k in self.keys()]


def _value(v):
    t = v.type
    if t == _STRING:
        s, n = c_vp(), sz()
        check(lib.rlx_meta_as_string(ctypes.byref(v), ctypes.byref(s), ctypes.byref(n)))
        return ctypes.string_at(s.value, n.value).decode("utf-8", "replace") if n.value else ""
    if t == _ARRAY:
        out, e = [], MetaValue()
        for i in range(v.count):
            check(lib.rlx_meta_elem(ctypes.byref(v), i, ctypes.byref(e)))
            out.append(_value(e))
        return out
    if t == _BOOL:
        b = ctypes.c_int()
        check(lib.rlx_meta_as_bool(ctypes.byref(v), ctypes.byref(b)))
        return bool(b.value)
    if t in _FLOAT:
        d = ctypes.c_double()
        check(lib.rlx_meta_as_f64(ctypes.byref(v), ctypes.byref(d)))
        return d.value
    if t in _UNSIGNED:
        u = u64()
        check(lib.rlx_meta_as_u64(ctypes.byref(v), ctypes.byref(u)))
        return u.value
    n = i64()
    check(lib.rlx_meta_as_i64(ctypes.byref(v), ctypes.byref(n)))
    return n.value
