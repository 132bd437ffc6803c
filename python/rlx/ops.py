"""rlx.ops: one function per builder of rlx.h.

Each builder is a row of OPS below (its Python name, its C function, its
arguments in the C order after the graph, a docstring); the wrappers are
made from the rows. Argument kinds:
  n     a node; a Python number or array becomes a constant of the dtype of
        the call's first node argument
  n?    a node or None (-1 in C)
  nodes a list of nodes (count, pointer in C)
  dims  a list of ints (count, pointer in C; str entries are symbolic dims)
  arr   a list of ints of the preceding dims' length (pointer only)
  i, l, d, b  int, int64, double, bool
  t, t? a dtype ("f32", np.float32); t? may be None (-1)
  g     the graph, for builders with no node argument (iota)
  out   a second result node (returned as a tuple with the first)
  e:<enum>  a name of that enum's table below ("relu", "sum", ...) or its code
Builders that take a descriptor struct (attention, rope, conv, pool,
log_mel, regions) are written out by hand at the end.
"""
import builtins as _builtins  # rlx.ops.max, min, pow and slice shadow the builtins here
import ctypes
import inspect
import math


from . import _dtypes, _lib, errors
from .graph import Node

ENUMS = {
    "act": ["none", "gelu", "gelu_tanh", "silu", "relu", "leaky_relu", "sigmoid", "tanh", "exp", "log",
            "sqrt", "rsqrt", "neg", "abs", "sin", "cos", "erf", "softplus", "round", "sign", "reciprocal",
            "square"],
    "binop": ["add", "sub", "mul", "div", "pow", "max", "min", "mod"],
    "cmpop": ["eq", "ne", "lt", "le", "gt", "ge"],
    "reduce": ["sum", "mean", "max", "min", "prod"],
    "mask": ["none", "causal", "sliding_window", "custom"],
    "layout": ["bshd", "bhsd"],
    "rope": ["normal", "neox"],
    "pool": ["max", "avg"],
    "resize": ["nearest", "bilinear"],
    "prologue": ["none", "resize_nearest_2x"],
    "step": ["act", "bin", "cast", "cmp"],
}

OPS = [
    # name, C function, arguments, doc
    ("activation", "rlx_activation", "act:e:act, x:n", "Elementwise activation ``act`` (a name of ENUMS['act'])."),
    ("leaky_relu", "rlx_leaky_relu", "x:n, alpha:d=0.01", "x if x > 0 else alpha * x."),
    ("binary", "rlx_binary", "op:e:binop, a:n, b:n", "Broadcasting binary op ``op``."),
    ("add", "rlx_add", "a:n, b:n", "a + b (broadcasting)."),
    ("sub", "rlx_sub", "a:n, b:n", "a - b (broadcasting)."),
    ("mul", "rlx_mul", "a:n, b:n", "a * b (broadcasting)."),
    ("div", "rlx_div", "a:n, b:n", "a / b (broadcasting)."),
    ("pow", "rlx_pow", "a:n, b:n", "a ** b (broadcasting)."),
    ("max", "rlx_max", "a:n, b:n", "Elementwise maximum (broadcasting)."),
    ("min", "rlx_min", "a:n, b:n", "Elementwise minimum (broadcasting)."),
    ("mod", "rlx_mod", "a:n, b:n", "a mod b (broadcasting)."),
    ("compare", "rlx_compare", "op:e:cmpop, a:n, b:n", "Bool of a <op> b (broadcasting)."),
    ("where", "rlx_where", "cond:n, a:n, b:n", "a where cond, else b."),
    ("cast", "rlx_cast", "x:n, to:t", "x converted to dtype ``to``."),
    ("clamp", "rlx_clamp", "x:n, lo:d, hi:d", "x clipped to [lo, hi]."),
    ("reshape", "rlx_reshape", "x:n, shape:dims", "x with ``shape`` (one dim may be -1)."),
    ("expand", "rlx_expand", "x:n, shape:dims", "x broadcast to ``shape``."),
    ("transpose", "rlx_transpose", "x:n, perm:dims", "x with its axes permuted by ``perm``."),
    ("narrow", "rlx_narrow", "x:n, axis:i, start:l, length:l", "``length`` entries of ``axis`` from ``start``."),
    ("slice", "rlx_slice", "x:n, starts:dims, ends:arr, steps:arr",
     "x[starts:ends:steps] per axis (one entry per axis; negative counts from the end)."),
    ("concat", "rlx_concat", "xs:nodes, axis:i", "The nodes ``xs`` joined along ``axis``."),
    ("pad", "rlx_pad", "x:n, before:dims, after:arr, value:d=0.0", "x padded with ``value``."),
    ("gather", "rlx_gather", "table:n, idx:n, axis:i=0", "Entries ``idx`` of ``table`` along ``axis``."),
    ("scatter_add", "rlx_scatter_add", "base:n, idx:n, upd:n, axis:i=0", "base with upd added at idx."),
    ("update_slice", "rlx_update_slice", "x:n, upd:n, start:n, axis:i",
     "x with upd written at position ``start`` (a node) of ``axis``."),
    ("iota", "rlx_iota", "g:g, dtype:t, shape:dims, axis:i", "Counting 0, 1, ... along ``axis``."),
    ("one_hot", "rlx_one_hot", "idx:n, depth:l, dtype:t=f32", "One-hot rows of ``depth`` of idx."),
    ("tri", "rlx_tri", "x:n, upper:b=False, k:l=0", "Upper or lower triangle of x (diagonal offset k)."),
    ("stop_gradient", "rlx_stop_gradient", "x:n", "x, with no derivative passed through."),
    ("reduce", "rlx_reduce", "op:e:reduce, x:n, axes:dims, keep_dim:b=False", "Reduction over ``axes``."),
    ("argmax", "rlx_argmax", "x:n, axis:i=-1, keep_dim:b=False", "Index (i64) of the largest along ``axis``."),
    ("argmin", "rlx_argmin", "x:n, axis:i=-1, keep_dim:b=False", "Index (i64) of the smallest along ``axis``."),
    ("cumsum", "rlx_cumsum", "x:n, axis:i=-1, exclusive:b=False, reverse:b=False", "Running sum along ``axis``."),
    ("topk", "rlx_topk", "x:n, k:l, axis:i=-1, indices:out",
     "The k largest along ``axis``: (values, indices)."),
    ("softmax", "rlx_softmax", "x:n, axis:i=-1", "Softmax along ``axis``."),
    ("log_softmax", "rlx_log_softmax", "x:n, axis:i=-1", "Log-softmax along ``axis``."),
    ("layer_norm", "rlx_layer_norm", "x:n, gamma:n?=None, beta:n?=None, axis:i=-1, eps:d=1e-5",
     "Layer normalization over the axes from ``axis`` on."),
    ("rms_norm", "rlx_rms_norm", "x:n, gamma:n?=None, beta:n?=None, axis:i=-1, eps:d=1e-6",
     "RMS normalization over the axes from ``axis`` on."),
    ("group_norm", "rlx_group_norm", "x:n, gamma:n?=None, beta:n?=None, groups:l=1, eps:d=1e-5",
     "Group normalization of NC... x."),
    ("batch_norm", "rlx_batch_norm", "x:n, mean:n, var:n, gamma:n?=None, beta:n?=None, eps:d=1e-5",
     "Inference batch normalization of NC... x."),
    ("matmul", "rlx_matmul", "a:n, b:n", "Batched, broadcasting matrix product."),
    ("all_reduce", "rlx_all_reduce", "x:n",
     "Sum of x over the ranks of the session's communicator (x itself without one)."),
    ("resize_nearest2x", "rlx_resize_nearest2x", "x:n", "NCHW x upsampled 2x (nearest)."),
    ("resize", "rlx_resize", "x:n, mode:e:resize, out_h:l, out_w:l, align_corners:b=False",
     "NCHW x resized to out_h x out_w."),
    ("fft", "rlx_fft", "x:n, inverse:b=False, real:b=False, n:l=0, axis:i=-1", "FFT along ``axis``."),
    ("dequant_matmul", "rlx_dequant_matmul", "x:n, w:n", "x @ w.T with w of a GGUF block dtype."),
    ("quantize", "rlx_quantize", "x:n, scheme:t", "x in a GGUF block dtype ``scheme``."),
    ("dequantize", "rlx_dequantize", "x:n", "A block-dtype x as f32."),
    ("fake_quantize", "rlx_fake_quantize",
     "x:n, scale:n, zero_point:n, bits:i=8, symmetric:b=False, axis:i=-1", "Quantize-dequantize of x."),
    ("fused_matmul_bias_act", "rlx_fused_matmul_bias_act", "a:n, w:n, bias:n?=None, act:e:act=none, alpha:d=0.0",
     "act(a @ w + bias)."),
    ("fused_residual_ln", "rlx_fused_residual_ln",
     "x:n, res:n, bias:n?=None, gamma:n?=None, beta:n?=None, eps:d=1e-5", "layer_norm(x + res + bias)."),
    ("fused_residual_rms_norm", "rlx_fused_residual_rms_norm",
     "x:n, res:n, bias:n?=None, gamma:n?=None, beta:n?=None, eps:d=1e-6", "rms_norm(x + res + bias)."),
    ("fused_swiglu", "rlx_fused_swiglu", "x:n, cast_to:t?=None", "silu(first half) * second half of the last axis."),
    ("cross_entropy", "rlx_cross_entropy",
     "logits:n, target:n, axis:i=-1, ignore_index:l=-100, label_smoothing:d=0.0",
     "Mean cross-entropy of logits against class indices ``target``."),
    ("mse_loss", "rlx_mse_loss", "a:n, b:n", "Mean squared error."),
    ("get_output", "rlx_get_output", "x:n, index:i", "Output ``index`` of a multi-output node."),
    ("gradient_reversal", "rlx_gradient_reversal", "x:n, scale:d=1.0",
     "Identity forward; the gradient times -scale backward."),
    ("sgd_step", "rlx_sgd_step",
     "param:n, grad:n, velocity:n, lr:n, momentum:d=0.0, weight_decay:d=0.0, nesterov:b=False, new_velocity:out",
     "torch.optim.SGD's step on one param: (param', velocity')."),
    ("adamw_step", "rlx_adamw_step",
     "param:n, grad:n, moments:n, lr:n, step:n, beta1:d=0.9, beta2:d=0.999, eps:d=1e-8, "
     "weight_decay:d=0.01, new_moments:out", "torch.optim.AdamW's step on one param: (param', moments')."),
    ("assign", "rlx_assign", "param:n, value:n", "After each run the Param holds value (a graph output)."),
]

_CTYPE = {"n": _lib.c_node, "n?": _lib.c_node, "i": _lib.i32, "b": _lib.i32, "t": _lib.i32, "t?": _lib.i32,
          "l": _lib.i64, "d": _lib.dbl, "arr": _lib.c_i64p, "g": _lib.c_graph,
          "out": ctypes.POINTER(_lib.c_node)}


def _parse(spec):
    params = []
    for item in spec.split(","):
        name, _, rest = item.strip().partition(":")
        kind, _, default = rest.partition("=")
        params.append((name, kind, default))
    return params


def _default(kind, text):
    if text == "":
        return inspect.Parameter.empty
    if text == "None":
        return None
    if kind in ("b",):
        return text == "True"
    if kind in ("i", "l"):
        return int(text)
    if kind == "d":
        return float(text)
    return text


def enum(table, value):
    """The code of ``value`` (a name or an int) in ENUMS[table]."""
    names = ENUMS[table]
    if isinstance(value, str):
        if value not in names:
            raise errors.InvalidError("rlx: %r is not a %s (one of %s)" % (value, table, ", ".join(names)))
        return names.index(value)
    return int(value)


def _graph_of(values):
    for v in values:
        if isinstance(v, Node):
            return v.graph
        if isinstance(v, (list, tuple)):
            for x in v:
                if isinstance(x, Node):
                    return x.graph
    raise errors.InvalidError("rlx: no node among the arguments to tell the graph")


def _node(g, v, like):
    """A node of g: v itself, or a constant of v with like's dtype."""
    if isinstance(v, Node):
        if v.graph is not g:
            raise errors.InvalidError("rlx: %r is a node of another graph than %r" % (v, g.name))
        return v.id
    if v is None:
        raise errors.InvalidError("rlx: a node is required, got None")
    dt = _dtypes.NUMPY[like] if like is not None and like < len(_dtypes.NUMPY) else None
    return g.constant(v, None if dt is None else dt).id


def _ints(values):
    return [int(v) for v in values]


def _make(pyname, cname, spec, doc):
    params = _parse(spec)
    argtypes = [_lib.c_graph]
    for _, kind, _ in params:
        if kind == "g":
            continue
        if kind in ("dims", "nodes"):
            argtypes += [_lib.i32, _lib.c_i64p if kind == "dims" else ctypes.POINTER(_lib.c_node)]
        else:
            argtypes.append(_lib.i32 if kind.startswith("e:") else _CTYPE[kind])
    cfunc = getattr(_lib.glib, cname)  # builders keep the GIL (see _lib)
    cfunc.restype = _lib.c_node
    cfunc.argtypes = argtypes
    shown = [p for p in params if p[1] != "out"]
    sig = inspect.Signature([inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                               default=_default(k, d)) for n, k, d in shown])
    has_out = any(k == "out" for _, k, _ in params)

    def fn(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        vals = bound.arguments
        g = vals["g"] if "g" in vals else _graph_of(vals.values())
        like = None
        for v in vals.values():
            if isinstance(v, Node):
                like = _dtypes.code(v.dtype)
                break
        cargs = [g._builder()]
        out = _lib.c_node(-1)
        rank = 0
        for name, kind, _ in params:
            v = vals.get(name)
            if kind == "g":
                continue
            if kind == "n":
                cargs.append(_node(g, v, like))
            elif kind == "n?":
                cargs.append(-1 if v is None else _node(g, v, like))
            elif kind == "nodes":
                ids = [_node(g, x, like) for x in v]
                cargs += [len(ids), (_lib.c_node * _builtins.max(len(ids), 1))(*ids)]
            elif kind == "dims":
                arr, rank = g.dims(v)
                cargs += [rank, arr]
            elif kind == "arr":
                if len(v) != rank:
                    raise errors.ShapeError("rlx.ops.%s: %s has %d entries, not %d" % (pyname, name, len(v), rank))
                cargs.append(_lib.i64_array(_ints(v))[0])
            elif kind in ("t", "t?"):
                cargs.append(-1 if v is None else _dtypes.code(v))
            elif kind.startswith("e:"):
                cargs.append(enum(kind[2:], v))
            elif kind == "out":
                cargs.append(ctypes.byref(out))
            elif kind == "d":
                cargs.append(float(v))
            else:
                cargs.append(int(v))
        r = g._node(cfunc(*cargs), pyname)
        return (r, Node(g, out.value)) if has_out else r

    fn.__name__ = fn.__qualname__ = pyname
    fn.__signature__ = sig
    fn.__doc__ = "%s\n\nThe builder %s of rlx.h." % (doc, cname)
    return fn


for _row in OPS:
    globals()[_row[0]] = _make(*_row)


def _named(builder, table, code, pyname, what):
    def fn(*args, **kwargs):
        return builder(code, *args, **kwargs)
    fn.__name__ = fn.__qualname__ = pyname
    fn.__doc__ = "%s %s (%s with %r)." % (what, ENUMS[table][code], builder.__name__, ENUMS[table][code])
    params = list(inspect.signature(builder).parameters.values())[1:]  # the enum argument is fixed
    fn.__signature__ = inspect.Signature(params)
    return fn


# One function per activation, comparison and reduction (relu(x), lt(a, b), sum(x, axes)).
for _i, _a in enumerate(ENUMS["act"]):
    if _a not in ("none", "leaky_relu"):
        globals()[_a] = _named(activation, "act", _i, _a, "Elementwise")
for _i, _c in enumerate(ENUMS["cmpop"]):
    globals()[_c] = _named(compare, "cmpop", _i, _c, "Comparison")
for _i, _r in enumerate(ENUMS["reduce"]):
    globals()["reduce_" + _r] = _named(reduce, "reduce", _i, "reduce_" + _r, "Reduction")


_DECLARED = set()


def _desc_call(cname, argtypes, g, *args):
    f = getattr(_lib.glib, cname)
    if cname not in _DECLARED:
        f.restype = _lib.c_node
        f.argtypes = [_lib.c_graph] + argtypes
        _DECLARED.add(cname)
    return g._node(f(g._builder(), *args), cname)


def _pair(v):
    v = list(v) if isinstance(v, (list, tuple)) else [v, v]
    return (_lib.i64 * 2)(*(v + [0] * (2 - len(v))))


def _pads(v, ndim):
    v = list(v) if isinstance(v, (list, tuple)) else [v] * (2 * ndim)
    return (_lib.i64 * 4)(*(v + [0] * (4 - len(v))))


N, P = _lib.c_node, ctypes.POINTER


def attention(q, k, v, num_heads, head_dim, num_kv_heads=None, mask=None, mask_kind="none", window=0,
              score_scale=0.0, softcap=0.0, layout="bshd"):
    """Scaled dot-product attention of q, k, v ([B, S, H*D], or rank 4 in
    ``layout``); ``mask_kind`` none, causal, sliding_window (``window``) or
    custom (``mask``, a node). The builder rlx_attention of rlx.h."""
    g = _graph_of([q, k, v])
    d = _lib.AttentionDesc(num_heads, num_kv_heads or num_heads, head_dim, enum("mask", mask_kind), window,
                           score_scale, softcap, enum("layout", layout))
    m = -1 if mask is None else _node(g, mask, None)
    return _desc_call("rlx_attention", [N, N, N, N, P(_lib.AttentionDesc)], g, q.id, k.id, v.id, m,
                      ctypes.byref(d))


def _rope(head_dim, n_rot, mode, base, scale):
    return _lib.RopeDesc(head_dim, n_rot or head_dim, enum("rope", mode), base, scale)


def rope(x, pos, head_dim, n_rot=0, mode="normal", base=10000.0, scale=1.0):
    """Rotary position embedding of x at positions ``pos`` (i32/i64 node).
    The builder rlx_rope of rlx.h."""
    g = _graph_of([x])
    d = _rope(head_dim, n_rot, mode, base, scale)
    return _desc_call("rlx_rope", [N, N, P(_lib.RopeDesc)], g, x.id, _node(g, pos, None), ctypes.byref(d))


def rope_cos_sin(x, cos, sin, head_dim, n_rot=0, mode="normal", base=10000.0, scale=1.0):
    """Rotary embedding from precomputed cos/sin tables ([S, n_rot/2]).
    The builder rlx_rope_cos_sin of rlx.h."""
    g = _graph_of([x])
    d = _rope(head_dim, n_rot, mode, base, scale)
    return _desc_call("rlx_rope_cos_sin", [N, N, N, P(_lib.RopeDesc)], g, x.id, _node(g, cos, None),
                      _node(g, sin, None), ctypes.byref(d))


def _conv_desc(x, stride, padding, dilation, groups, output_padding, ndim):
    ndim = ndim or (len(x.shape) - 2)
    return _lib.ConvDesc(ndim, _pair(stride), _pair(dilation), _pair(output_padding), _pads(padding, ndim), groups)


def _conv(cname, x, w, bias, stride, padding, dilation, groups, output_padding, ndim):
    g = _graph_of([x, w])
    d = _conv_desc(x, stride, padding, dilation, groups, output_padding, ndim)
    b = -1 if bias is None else _node(g, bias, None)
    return _desc_call(cname, [N, N, N, P(_lib.ConvDesc)], g, x.id, _node(g, w, None), b, ctypes.byref(d))


def conv(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1, ndim=None):
    """1-D or 2-D convolution of NC... x with weight w (O, C/groups, k...);
    ``padding`` an int or [begin_0, begin_1, end_0, end_1]. The builder
    rlx_conv of rlx.h."""
    return _conv("rlx_conv", x, w, bias, stride, padding, dilation, groups, 0, ndim)


def conv_transpose(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1, output_padding=0, ndim=None):
    """Transposed convolution (w: C, O/groups, k...). The builder
    rlx_conv_transpose of rlx.h."""
    return _conv("rlx_conv_transpose", x, w, bias, stride, padding, dilation, groups, output_padding, ndim)


def fused_conv(x, w, bias=None, residual=None, act="none", alpha=0.0, lo=-math.inf, hi=math.inf, stride=1,
               padding=0, dilation=1, groups=1, ndim=None):
    """clamp(act(conv(x, w) + bias[c] + residual), lo, hi): a convolution
    with its epilogue, as the fusion pass makes it. The builder
    rlx_fused_conv of rlx.h."""
    g = _graph_of([x, w])
    d = _conv_desc(x, stride, padding, dilation, groups, 0, ndim)
    b = -1 if bias is None else _node(g, bias, None)
    r = -1 if residual is None else _node(g, residual, None)
    return _desc_call("rlx_fused_conv", [N, N, N, N, P(_lib.ConvDesc), ctypes.c_int, ctypes.c_double,
                                         ctypes.c_double, ctypes.c_double],
                      g, x.id, _node(g, w, None), b, r, ctypes.byref(d), enum("act", act), alpha, lo, hi)


def pool(x, kind, kernel, stride=None, padding=0, count_include_pad=False, ndim=None):
    """Max or average (``kind`` "max"/"avg") pooling of NC... x. The builder
    rlx_pool of rlx.h."""
    g = _graph_of([x])
    ndim = ndim or (len(x.shape) - 2)
    d = _lib.PoolDesc(enum("pool", kind), ndim, _pair(kernel), _pair(kernel if stride is None else stride),
                      _pads(padding, ndim), int(count_include_pad))
    return _desc_call("rlx_pool", [N, P(_lib.PoolDesc)], g, x.id, ctypes.byref(d))


def log_mel(audio, n_fft, hop, n_mels, sample_rate, f_min=0.0, f_max=0.0):
    """Log-mel spectrogram of audio samples. The builder rlx_log_mel of rlx.h."""
    g = _graph_of([audio])
    d = _lib.LogMelDesc(n_fft, hop, n_mels, sample_rate, f_min, f_max)
    return _desc_call("rlx_log_mel", [N, P(_lib.LogMelDesc)], g, audio.id, ctypes.byref(d))


def _steps(steps):
    """(kind, op, a, b[, to or alpha]) tuples -> an rlx_region_step array."""
    out = (_lib.RegionStep * _builtins.max(len(steps), 1))()
    for i, s in enumerate(steps):
        kind = enum("step", s[0])
        op = s[1]
        if isinstance(op, str):
            op = enum(("act", "binop", "cast", "cmpop")[kind], op) if kind != 2 else 0
        extra = s[4] if len(s) > 4 else None
        out[i] = _lib.RegionStep(kind, op, s[2], s[3] if len(s) > 3 else 0,
                                 _dtypes.code(extra) if kind == 2 else 0,
                                 float(extra) if kind != 2 and extra is not None else 0.0)
    return out


def elementwise_region(ins, steps, prologue="none", num_batch_inputs=None):
    """A fused elementwise region over the nodes ``ins``: ``steps`` are
    (kind, op, a, b[, to|alpha]) with kind act/bin/cast/cmp, operands k >= 0
    the region input k and k < 0 step -k-1's result. The builders
    rlx_elementwise_region / rlx_batch_elementwise_region of rlx.h."""
    g = _graph_of(ins)
    ids = (N * len(ins))(*[_node(g, x, None) for x in ins])
    st = _steps(steps)
    if num_batch_inputs is None:
        return _desc_call("rlx_elementwise_region", [_lib.i32, P(N), _lib.i32, P(_lib.RegionStep), _lib.i32],
                          g, len(ins), ids, len(steps), st, enum("prologue", prologue))
    return _desc_call("rlx_batch_elementwise_region",
                      [_lib.i32, P(N), _lib.i32, _lib.i32, P(_lib.RegionStep), _lib.i32],
                      g, len(ins), ids, num_batch_inputs, len(steps), st, enum("prologue", prologue))


def transform_region(x, transforms):
    """x through the prologue transforms (names of ENUMS['prologue']). The
    builder rlx_transform_region of rlx.h."""
    g = _graph_of([x])
    codes = [enum("prologue", t) for t in transforms]
    arr = (ctypes.c_int * _builtins.max(len(codes), 1))(*codes)
    return _desc_call("rlx_transform_region", [N, _lib.i32, P(ctypes.c_int)], g, x.id, len(codes), arr)


def fused_attention_block(x, wq, wk, wv, wo, num_heads, head_dim, num_kv_heads=None, cos=None, sin=None,
                          mask_kind="causal", rope_mode="normal", n_rot=0, rope_base=10000.0):
    """Projections, attention and output projection in one op (rope from
    cos/sin tables when given). The builder rlx_fused_attention_block of rlx.h."""
    g = _graph_of([x])
    att = _lib.AttentionDesc(num_heads, num_kv_heads or num_heads, head_dim, enum("mask", mask_kind), 0, 0.0,
                             0.0, 0)
    rp = _rope(head_dim, n_rot, rope_mode, rope_base, 1.0)
    ws = [_node(g, w, None) for w in (wq, wk, wv, wo)]
    c = -1 if cos is None else _node(g, cos, None)
    s = -1 if sin is None else _node(g, sin, None)
    return _desc_call("rlx_fused_attention_block", [N] * 7 + [P(_lib.AttentionDesc), P(_lib.RopeDesc)], g,
                      x.id, *ws, c, s, ctypes.byref(att), ctypes.byref(rp) if cos is not None else None)


__all__ = [r[0] for r in OPS] + [a for a in ENUMS["act"] if a not in ("none", "leaky_relu")] + \
    ENUMS["cmpop"] + ["reduce_" + r for r in ENUMS["reduce"]] + \
    ["attention", "rope", "rope_cos_sin", "conv", "conv_transpose", "fused_conv", "pool", "log_mel", "elementwise_region",
     "transform_region", "fused_attention_block", "ENUMS", "enum"]
