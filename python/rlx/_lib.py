"""Loading librlx and declaring the C functions the package calls.

The library is found, in order, at $RLX_LIBRARY (a path to librlx.so, for
a build tree), or next to this file (where `pip install .` puts it).

Two handles on it: calls through `lib` (ctypes.CDLL) release the GIL, so a
long rlx_run or rlx_llm_eval lets other Python threads run; graph building
and compiling go through `glib` (ctypes.PyDLL), which keeps the GIL, so two
threads never build on (or compile) one rlx_graph at once. Objects that
release it (Session, LLM) take a lock of their own around their calls.
"""
import ctypes
import glob
import os
import sys

from . import errors

c_graph = ctypes.c_void_p
c_node = ctypes.c_int32
c_status = ctypes.c_int
c_i64p = ctypes.POINTER(ctypes.c_int64)
c_nodep = ctypes.POINTER(c_node)
c_vp = ctypes.c_void_p
c_str = ctypes.c_char_p
i32, i64, dbl, sz, u16, f32 = (ctypes.c_int, ctypes.c_int64, ctypes.c_double, ctypes.c_size_t,
                               ctypes.c_uint16, ctypes.c_float)


class Options(ctypes.Structure):
    _fields_ = [("device", i32), ("threads", i32), ("flags", ctypes.c_uint), ("device_index", i32), ("comm", c_vp)]


class Optimizer(ctypes.Structure):
    _fields_ = [("kind", i32), ("weight_decay", dbl), ("momentum", dbl), ("nesterov", i32),
                ("beta1", dbl), ("beta2", dbl), ("eps", dbl)]


class AttentionDesc(ctypes.Structure):
    _fields_ = [("num_heads", i32), ("num_kv_heads", i32), ("head_dim", i32), ("mask_kind", i32),
                ("window", i32), ("score_scale", dbl), ("softcap", dbl), ("layout", i32)]


class RopeDesc(ctypes.Structure):
    _fields_ = [("head_dim", i32), ("n_rot", i32), ("mode", i32), ("base", dbl), ("scale", dbl)]


class ConvDesc(ctypes.Structure):
    _fields_ = [("ndim", i32), ("stride", i64 * 2), ("dilation", i64 * 2), ("output_pad", i64 * 2),
                ("pad", i64 * 4), ("groups", i64)]


class PoolDesc(ctypes.Structure):
    _fields_ = [("kind", i32), ("ndim", i32), ("kernel", i64 * 2), ("stride", i64 * 2),
                ("pad", i64 * 4), ("count_include_pad", i32)]


class LogMelDesc(ctypes.Structure):
    _fields_ = [("n_fft", i64), ("hop", i64), ("n_mels", i64), ("sample_rate", i64),
                ("f_min", dbl), ("f_max", dbl)]


class RegionStep(ctypes.Structure):
    _fields_ = [("kind", i32), ("op", i32), ("a", i32), ("b", i32), ("to", i32), ("alpha", dbl)]


class SessionStats(ctypes.Structure):
    _fields_ = [("plans_built", i64), ("plan_cache_hits", i64), ("runs", i64), ("arena_bytes", sz),
                ("naive_bytes", sz), ("peak_live_bytes", sz), ("views", i64), ("in_place", i64),
                ("compile_cache_hit", i32), ("plans_reused", i64), ("params_kept", i64),
                ("fallback_nodes", i64), ("device_launches", i64), ("plans_held", i64),
                ("param_device_bytes", sz), ("packed_bytes", sz), ("_room", ctypes.c_char * 256)]  # for fields rlx.h may add


class CompileCacheStats(ctypes.Structure):
    _fields_ = [("lookups", i64), ("hits", i64), ("plans_reused", i64), ("evictions", i64), ("entries", i32),
                ("capacity", i32), ("idle_plan_bytes", sz), ("graph_bytes", sz), ("_room", ctypes.c_char * 256)]


def struct_dict(s):
    """The public fields of a ctypes Structure as a dict."""
    return {name: getattr(s, name) for name, _ in s._fields_ if not name.startswith("_")}


class ModelOptions(ctypes.Structure):
    _fields_ = [("n_bind", i32), ("bind_names", ctypes.POINTER(c_str)), ("bind_values", c_i64p)]


PROGRESS = ctypes.CFUNCTYPE(None, dbl, c_vp)


class LlmOptions(ctypes.Structure):
    _fields_ = [("compile", Options), ("n_ctx", i64), ("progress", PROGRESS), ("progress_user", c_vp),
                ("cache_type", i32), ("n_seq", i32), ("tp", i32), ("rank", i32), ("world", i32),
                ("master", c_str)]


class LlmInfo(ctypes.Structure):
    _fields_ = [("arch", ctypes.c_char * 32), ("n_vocab", i64), ("n_embd", i64), ("n_layer", i64),
                ("n_head", i64), ("n_head_kv", i64), ("head_dim", i64), ("n_ff", i64),
                ("n_ctx_train", i64), ("n_ctx", i64), ("rope_base", f32), ("norm_eps", f32),
                ("weight_bytes", sz), ("kv_cache_bytes", sz), ("kv_cache_type", i32),
                ("rope_scaling", ctypes.c_char * 8), ("rope_freq_scale", f32),
                ("rope_freq_factors", i32), ("fallback_nodes", i64),
                ("_room", ctypes.c_char * 256)]  # for fields rlx.h may add at the end


class SamplerParams(ctypes.Structure):
    _fields_ = [("temperature", f32), ("top_k", ctypes.c_int32), ("top_p", f32), ("min_p", f32),
                ("repeat_penalty", f32), ("repeat_last_n", ctypes.c_int32), ("seed", ctypes.c_uint64),
                ("frequency_penalty", f32), ("presence_penalty", f32), ("n_logit_bias", ctypes.c_int32),
                ("logit_bias", c_vp)]


class ChatMessage(ctypes.Structure):
    _fields_ = [("role", c_str), ("content", c_str)]


P = ctypes.POINTER
# name: (return type, argument types). Builders (rlx_node results) are
# declared by rlx.ops from its own table.
FUNCTIONS = {
    "rlx_status_name": (c_str, [i32]),
    "rlx_last_error": (c_str, []),
    "rlx_version": (c_str, []),
    "rlx_system_info": (c_str, []),
    "rlx_dtype_name": (c_str, [i32]),
    "rlx_dtype_nbytes": (sz, [i32, i64]),
    "rlx_graph_new": (c_graph, [c_str]),
    "rlx_graph_free": (None, [c_graph]),
    "rlx_dim_sym": (i64, [c_graph, c_str]),
    "rlx_input": (c_node, [c_graph, c_str, i32, i32, c_i64p]),
    "rlx_param": (c_node, [c_graph, c_str, i32, i32, c_i64p]),
    "rlx_constant": (c_node, [c_graph, i32, i32, c_i64p, c_vp]),
    "rlx_graph_set_outputs": (c_status, [c_graph, i32, c_nodep]),
    "rlx_graph_status": (c_status, [c_graph]),
    "rlx_graph_verify": (c_status, [c_graph]),
    "rlx_graph_to_text": (c_vp, [c_graph]),
    "rlx_graph_from_text": (c_status, [c_str, P(c_graph)]),
    "rlx_graph_hash": (ctypes.c_uint64, [c_graph]),
    "rlx_graph_num_nodes": (i32, [c_graph]),
    "rlx_node_type": (i32, [c_graph, c_node, P(i32), c_i64p]),
    "rlx_node_op_name": (c_str, [c_graph, c_node]),
    "rlx_node_name": (c_str, [c_graph, c_node]),
    "rlx_dim_name": (c_str, [c_graph, i64]),
    "rlx_graph_num_inputs": (i32, [c_graph]),
    "rlx_graph_input": (c_node, [c_graph, i32]),
    "rlx_graph_num_params": (i32, [c_graph]),
    "rlx_graph_param": (c_node, [c_graph, i32]),
    "rlx_graph_num_outputs": (i32, [c_graph]),
    "rlx_graph_output": (c_node, [c_graph, i32]),
    "rlx_grad": (c_status, [c_graph, c_node, i32, c_nodep, P(c_graph)]),
    "rlx_jvp": (c_status, [c_graph, i32, c_nodep, P(c_graph)]),
    "rlx_train_graph": (c_status, [c_graph, c_node, i32, c_nodep, P(Optimizer), P(c_graph)]),
    "rlx_compile": (c_status, [c_graph, P(Options), P(c_vp)]),
    "rlx_device_parse": (c_status, [c_str, P(i32), P(i32)]),
    "rlx_set_param": (c_status, [c_vp, c_str, c_vp, sz]),
    "rlx_set_param_ref": (c_status, [c_vp, c_str, c_vp, sz]),
    "rlx_set_input": (c_status, [c_vp, c_str, c_vp, sz]),
    "rlx_set_input_shaped": (c_status, [c_vp, c_str, c_vp, sz, i32, c_i64p]),
    "rlx_run": (c_status, [c_vp]),
    "rlx_output": (c_status, [c_vp, i32, c_vp, sz]),
    "rlx_output_type": (i32, [c_vp, i32, P(i32), c_i64p]),
    "rlx_session_num_outputs": (i32, [c_vp]),
    "rlx_session_free": (None, [c_vp]),
    "rlx_session_get_stats": (c_status, [c_vp, P(SessionStats)]),
    "rlx_compile_cache_get_stats": (c_status, [P(CompileCacheStats)]),
    "rlx_compile_cache_clear": (None, []),
    "rlx_cpu_threads": (i32, [i32]),
    "rlx_model_load": (c_status, [c_str, P(ModelOptions), P(c_vp)]),
    "rlx_model_load_memory": (c_status, [c_vp, sz, P(ModelOptions), P(c_vp)]),
    "rlx_model_free": (None, [c_vp]),
    "rlx_model_graph": (c_status, [c_vp, P(c_graph)]),
    "rlx_model_compile": (c_status, [c_vp, P(Options), P(c_vp)]),
    "rlx_model_num_inputs": (i32, [c_vp]),
    "rlx_model_num_outputs": (i32, [c_vp]),
    "rlx_model_input_name": (c_str, [c_vp, i32]),
    "rlx_model_output_name": (c_str, [c_vp, i32]),
    "rlx_model_input_type": (i32, [c_vp, i32, P(i32), c_i64p]),
    "rlx_model_output_type": (i32, [c_vp, i32, P(i32), c_i64p]),
    "rlx_model_dim_name": (c_str, [c_vp, i64]),
    "rlx_model_summary": (c_vp, [c_vp]),
    "rlx_model_file_open": (c_status, [c_str, P(c_vp)]),
    "rlx_model_file_close": (None, [c_vp]),
    "rlx_tokenizer_load": (c_status, [c_vp, P(c_vp)]),
    "rlx_tokenizer_free": (None, [c_vp]),
    "rlx_tokenize": (c_status, [c_vp, c_vp, sz, i32, i32, P(ctypes.c_int32), i64, c_i64p]),
    "rlx_token_to_piece": (c_status, [c_vp, ctypes.c_int32, i32, c_vp, sz, P(sz)]),
    "rlx_detokenize": (c_status, [c_vp, P(ctypes.c_int32), i64, i32, c_vp, sz, P(sz)]),
    "rlx_token_bos": (ctypes.c_int32, [c_vp]),
    "rlx_token_eos": (ctypes.c_int32, [c_vp]),
    "rlx_token_is_eog": (i32, [c_vp, ctypes.c_int32]),
    "rlx_chat_apply_template": (c_status, [c_vp, P(ChatMessage), i32, i32, c_vp, sz, P(sz)]),
    "rlx_llm_load": (c_status, [c_vp, P(LlmOptions), P(c_vp)]),
    "rlx_llm_open": (c_status, [c_str, P(LlmOptions), P(c_vp)]),
    "rlx_llm_file": (c_vp, [c_vp]),
    "rlx_llm_free": (None, [c_vp]),
    "rlx_llm_get_info": (c_status, [c_vp, P(LlmInfo)]),
    "rlx_llm_vocab_size": (i64, [c_vp]),
    "rlx_llm_eval": (c_status, [c_vp, P(ctypes.c_int32), i64, i32, c_vp]),
    "rlx_llm_n_past": (i64, [c_vp]),
    "rlx_llm_truncate": (c_status, [c_vp, i64]),
    "rlx_sampler_new": (c_status, [P(SamplerParams), i64, P(c_vp)]),
    "rlx_sampler_free": (None, [c_vp]),
    "rlx_sampler_sample": (ctypes.c_int32, [c_vp, c_vp]),
    "rlx_sampler_accept": (None, [c_vp, ctypes.c_int32]),
}


def _library_path():
    path = os.environ.get("RLX_LIBRARY")
    if path:
        if not os.path.isfile(path):
            raise ImportError("rlx: RLX_LIBRARY=%s is not a file" % path)
        return path
    here = os.path.dirname(os.path.abspath(__file__))
    pattern = "librlx*.dylib" if sys.platform == "darwin" else "librlx.so*"
    found = sorted(glob.glob(os.path.join(here, pattern)))
    if not found:
        raise ImportError("rlx: no %s next to %s; install the package with `pip install .` "
                          "or set RLX_LIBRARY to a built librlx.so" % (pattern, here))
    return found[0]


path = _library_path()
lib = ctypes.CDLL(path)
glib = ctypes.PyDLL(path)
# The calls on graphs: made with the GIL held (glib).
GRAPH_CALLS = ("rlx_graph_", "rlx_node_", "rlx_dim_", "rlx_input", "rlx_param", "rlx_constant", "rlx_grad",
               "rlx_jvp", "rlx_train_graph", "rlx_compile")
libc = ctypes.CDLL(None)
libc.free.argtypes = [c_vp]
libc.free.restype = None

for _name, (_res, _args) in FUNCTIONS.items():
    _f = getattr(glib if _name.startswith(GRAPH_CALLS) else lib, _name)
    _f.restype = _res
    _f.argtypes = _args
    setattr(lib, _name, _f)


class Owner:
    """An object owning C handles: freed by close(), at the end of a `with`,
    or when collected. _owned lists (attribute, C function freeing it) in
    freeing order; an attribute holding an Owner is closed instead."""
    _owned = ()

    def close(self):
        """Frees what the object holds now; later calls on it raise rlx.InvalidError."""
        for attr, free in self._owned:
            h = getattr(self, attr, None)
            if h:
                setattr(self, attr, None)
                if isinstance(h, Owner):
                    h.close()
                else:
                    getattr(lib, free)(h)

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def last_error():
    msg = lib.rlx_last_error()
    return msg.decode("utf-8", "replace") if msg else ""


def check(status, what=None):
    """Raises the rlx.Error subclass of a failed status with rlx's message."""
    if status:
        raise errors.from_status(status, last_error() or what or "")


def with_room(call, cap, ids=False):
    """The output of an rlx call that fills a caller's buffer and reports
    the size it needs (rlx_tokenize, rlx_detokenize, ...): call(buf, cap,
    n_ref) with room for cap, then once more with the room asked for.
    Returns int32 ids (ids=True) or bytes."""
    n = (i64 if ids else sz)()
    for _ in range(2):
        buf = (ctypes.c_int32 * cap)() if ids else ctypes.create_string_buffer(cap)
        st = call(buf, cap, ctypes.byref(n))
        if st == 0 and n.value <= cap:
            return list(buf[:n.value]) if ids else buf.raw[:n.value]
        if n.value <= cap:
            check(st)
        cap = n.value + 1
    check(st)


def take_string(ptr):
    """A malloc'ed C string as str, freed."""
    if not ptr:
        raise errors.NoMemError("rlx: out of memory")
    try:
        return ctypes.string_at(ptr).decode("utf-8", "replace")
    finally:
        libc.free(ptr)


def i64_array(values):
    values = list(values)
    return (i64 * max(len(values), 1))(*values), len(values)
