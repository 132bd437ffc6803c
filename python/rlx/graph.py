"""Graphs, nodes and sessions: the graph API of rlx.h in Python."""
import ctypes
import re
import threading

import numpy as np

from . import _dtypes, _lib, errors
from ._lib import lib, check

_FLAG_NO_FUSE, _FLAG_NO_OPTIMIZE, _FLAG_BF16_MATH = 1, 2, 4
_MAX_RANK = 8
_SYM_BASE = -(1 << 40)  # symbolic dim tokens are at most this (ir.h)


def as_array(value, dtype=None):
    """value as a C-contiguous NumPy array, without a copy when it already
    is one of the right dtype: NumPy arrays, objects with __array_interface__
    or __array__, __dlpack__ (np.from_dlpack), sequences and scalars. A
    different dtype is converted when NumPy's same_kind rule allows it
    (float64 -> float32) and the values fit, else rlx.DtypeError."""
    if isinstance(value, np.ndarray):
        a = value
    elif hasattr(value, "__array_interface__") or hasattr(value, "__array__"):
        a = np.asarray(value)
    elif hasattr(value, "__dlpack__"):
        a = np.from_dlpack(value)
    else:
        a = np.asarray(value)
    if dtype is not None and a.dtype != dtype:
        if not np.can_cast(a.dtype, dtype, "same_kind"):
            raise errors.DtypeError("rlx: an array of %s where %s is expected" % (a.dtype, dtype))
        if dtype.kind in "iu" and a.dtype.kind in "iu" and a.size:
            info = np.iinfo(dtype)
            if a.min() < info.min or a.max() > info.max:
                raise errors.DtypeError("rlx: values of %s outside the range of %s" % (a.dtype, dtype))
        with np.errstate(over="raise", invalid="raise"):
            try:
                a = a.astype(dtype)
            except FloatingPointError:
                raise errors.DtypeError("rlx: values of %s outside the range of %s" % (a.dtype, dtype)) from None
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    return a


class Node:
    """A node of a Graph (an rlx_node id). Arithmetic operators build ops:
    ``a + b``, ``a - b``, ``a * b``, ``a / b``, ``a @ b``, ``-a``, ``a ** b``;
    a Python number or array operand becomes a constant of the node's dtype."""
    __slots__ = ("graph", "id")

    def __init__(self, graph, node_id):
        self.graph = graph
        self.id = node_id

    def _type(self):
        t = ctypes.c_int()
        dims = (_lib.i64 * _MAX_RANK)()
        rank = lib.rlx_node_type(self.graph._ptr(), self.id, ctypes.byref(t), dims)
        if rank < 0:
            raise errors.InvalidError("rlx: node %d is not in graph %r" % (self.id, self.graph.name))
        return t.value, [self.graph._dim(d) for d in dims[:rank]]

    @property
    def dtype(self):
        """The dtype name ("f32")."""
        return _dtypes.name(self._type()[0])

    @property
    def shape(self):
        """The dims: ints, and names (str) for symbolic dims ("?" for derived ones)."""
        return tuple(self._type()[1])

    @property
    def op(self):
        """The op name ("MatMul")."""
        s = lib.rlx_node_op_name(self.graph._ptr(), self.id)
        return s.decode("utf-8", "replace") if s else None

    @property
    def name(self):
        """An input's or param's name, else None."""
        s = lib.rlx_node_name(self.graph._ptr(), self.id)
        return s.decode("utf-8", "replace") if s else None

    def __repr__(self):
        try:
            return "<rlx.Node %d %s %s%s>" % (self.id, self.op, self.dtype, list(self.shape))
        except errors.Error:
            return "<rlx.Node %d>" % self.id

    def __add__(self, o): return _ops().add(self, o)
    def __radd__(self, o): return _ops().add(o, self)
    def __sub__(self, o): return _ops().sub(self, o)
    def __rsub__(self, o): return _ops().sub(o, self)
    def __mul__(self, o): return _ops().mul(self, o)
    def __rmul__(self, o): return _ops().mul(o, self)
    def __truediv__(self, o): return _ops().div(self, o)
    def __rtruediv__(self, o): return _ops().div(o, self)
    def __pow__(self, o): return _ops().pow(self, o)
    def __matmul__(self, o): return _ops().matmul(self, o)
    def __rmatmul__(self, o): return _ops().matmul(o, self)
    def __neg__(self): return _ops().neg(self)


def _ops():
    from . import ops
    return ops


class Graph(_lib.Owner):
    """A typed dataflow graph (rlx_graph).

    >>> g = rlx.Graph("mlp")
    >>> x = g.input("x", "f32", ("batch", 4))      # "batch": a symbolic dim
    >>> w = g.param("w", "f32", (4, 3))
    >>> g.set_outputs(rlx.ops.softmax(x @ w, -1))
    >>> sess = g.compile(device="cpu")
    """
    _owned = (("_h", "rlx_graph_free"),)

    def __init__(self, name="graph", _handle=None):
        self._h = _handle if _handle is not None else lib.rlx_graph_new(name.encode())
        if not self._h:
            raise errors.NoMemError("rlx: out of memory for graph %r" % name)
        self.name = name
        self._failed = None

    def _ptr(self):
        if not self._h:
            raise errors.InvalidError("rlx: graph %r was freed" % self.name)
        return self._h

    def free(self):
        """Frees the graph now (sessions compiled from it stay valid)."""
        self.close()

    def _builder(self):
        """The handle, for a builder call. A graph keeps its first builder
        error (rlx_graph_status) and cannot compile after it, and a later
        failure's status is not kept: so no builder runs after one failed."""
        h = self._ptr()
        if self._failed:
            raise errors.InvalidError("rlx: graph %r failed at an earlier builder (%s); build it again"
                                      % (self.name, self._failed))
        return h

    def _node(self, r, what):
        if r < 0:
            self._failed = _lib.last_error() or "rlx: %s failed" % what
            raise errors.from_status(lib.rlx_graph_status(self._ptr()) or 1, self._failed)
        return Node(self, r)

    def _dim(self, d):
        if d >= 0:
            return d
        s = lib.rlx_dim_name(self._ptr(), d)
        return s.decode("utf-8", "replace") if s else d

    def dims(self, shape):
        """C dims of a shape of ints and symbolic dim names (str)."""
        shape = tuple(shape)
        if len(shape) > _MAX_RANK:
            raise errors.ShapeError("rlx: rank %d is more than %d" % (len(shape), _MAX_RANK))
        out = []
        for d in shape:
            if isinstance(d, str):
                tok = lib.rlx_dim_sym(self._builder(), d.encode())
                if tok > _SYM_BASE:  # -1: a bad name
                    self._node(-1, "rlx_dim_sym")
                out.append(tok)
            else:
                out.append(int(d))
        return _lib.i64_array(out)

    def _leaf(self, fn, name, dtype, shape):
        arr, rank = self.dims(shape)
        return self._node(fn(self._builder(), name.encode(), _dtypes.code(dtype), rank, arr), name)

    def input(self, name, dtype, shape):
        """An Input named ``name`` of ``dtype`` ("f32", np.float32, ...) and
        ``shape`` (ints; a str is a symbolic dim of that name)."""
        return self._leaf(lib.rlx_input, name, dtype, shape)

    def param(self, name, dtype, shape):
        """A Param (a weight bound to the session by Session.set_param)."""
        return self._leaf(lib.rlx_param, name, dtype, shape)

    def constant(self, value, dtype=None):
        """A constant holding ``value`` (an array, copied into the graph)."""
        if dtype is not None:
            a = as_array(value, _dtypes.to_numpy(_dtypes.code(dtype)))
        else:
            a = as_array(value)
            if a.dtype == np.float64 and not isinstance(value, np.ndarray):
                a = a.astype(np.float32)  # a Python float is f32, as most ops take
        code = _dtypes.code(a.dtype)
        dims, rank = _lib.i64_array(a.shape)
        return self._node(lib.rlx_constant(self._builder(), code, rank, dims, a.ctypes.data), "constant")

    def dim(self, name):
        """The token of the symbolic dim ``name`` (usable in shapes, e.g. reshape)."""
        return self.dims([name])[0][0]

    def set_outputs(self, *nodes):
        """Makes ``nodes`` the graph's outputs, in order."""
        if len(nodes) == 1 and isinstance(nodes[0], (list, tuple)):
            nodes = tuple(nodes[0])
        ids = (_lib.c_node * max(len(nodes), 1))(*[self._own(n).id for n in nodes])
        check(lib.rlx_graph_set_outputs(self._ptr(), len(nodes), ids))

    def _own(self, n):
        if isinstance(n, str):
            return self[n]
        if not isinstance(n, Node) or n.graph is not self:
            raise errors.InvalidError("rlx: %r is not a node of graph %r" % (n, self.name))
        return n

    def _list(self, count, get):
        return [Node(self, get(self._ptr(), i)) for i in range(count(self._ptr()))]

    @property
    def inputs(self):
        """The Input nodes, in node order."""
        return self._list(lib.rlx_graph_num_inputs, lib.rlx_graph_input)

    @property
    def params(self):
        """The Param nodes, in node order."""
        return self._list(lib.rlx_graph_num_params, lib.rlx_graph_param)

    @property
    def outputs(self):
        """The output nodes."""
        return self._list(lib.rlx_graph_num_outputs, lib.rlx_graph_output)

    def __getitem__(self, name):
        """The Input or Param named ``name``."""
        for n in self.inputs + self.params:
            if n.name == name:
                return n
        raise errors.InvalidError("rlx: graph %r has no input or param %r" % (self.name, name))

    def __len__(self):
        return lib.rlx_graph_num_nodes(self._ptr())

    def verify(self):
        """Checks every node's types again; raises on the first error."""
        check(lib.rlx_graph_status(self._ptr()))
        check(lib.rlx_graph_verify(self._ptr()))

    def hash(self):
        """A hash of the canonical text (the name left out), stable across runs."""
        return lib.rlx_graph_hash(self._ptr())

    def to_text(self):
        """The graph's text form (Graph.from_text reads it back)."""
        return _lib.take_string(lib.rlx_graph_to_text(self._ptr()))

    __str__ = to_text

    @classmethod
    def from_text(cls, text):
        """Parses the text form; rlx.FormatError (or another subclass) names the line."""
        h = _lib.c_graph()
        check(lib.rlx_graph_from_text(text.encode(), ctypes.byref(h)))
        name = re.match(r'\s*graph\s+"((?:[^"\\]|\\.)*)"', text)
        return cls(name.group(1) if name else "graph", _handle=h.value)

    def compile(self, device="cpu", threads=0, optimize=True, fuse=True):
        """Compiles the graph into a Session on ``device`` ("cpu", "cuda",
        "cuda:N" for the GPU of index N, or "auto"); ``threads`` 0 takes every core (or RLX_THREADS); optimize
        and fuse off run the graph op for op."""
        opts = _options(device, threads, optimize, fuse)
        h = _lib.c_vp()
        check(lib.rlx_compile(self._ptr(), ctypes.byref(opts), ctypes.byref(h)))
        return Session(h.value, {n.name: n._type() for n in self.inputs})


def _options(device, threads, optimize=True, fuse=True, bf16_math=False):
    if not isinstance(device, str):
        raise errors.InvalidError("rlx: device %r is not a string (auto, cpu, cuda or cuda:N)" % (device,))
    kind, index = ctypes.c_int32(), ctypes.c_int32()
    check(lib.rlx_device_parse(device.encode(), ctypes.byref(kind), ctypes.byref(index)))
    flags = ((0 if fuse else _FLAG_NO_FUSE) | (0 if optimize else _FLAG_NO_OPTIMIZE)
             | (_FLAG_BF16_MATH if bf16_math else 0))
    return _lib.Options(kind.value, int(threads), flags, index.value)


_c_char, _addressof = ctypes.c_char, ctypes.addressof


def _address(a):
    """The address of a C-contiguous array's data. ctypes' from_buffer takes
    a third of the time of a.ctypes.data, which counts in a tiny run; it
    needs a writable, non-empty buffer."""
    try:
        return _addressof(_c_char.from_buffer(a))
    except (TypeError, ValueError, BufferError):
        return a.ctypes.data


class Session(_lib.Owner):
    """A compiled graph (rlx_session): bind params, run with inputs, read outputs.
    ``run`` releases the GIL while rlx computes; calls on one session from
    several threads take turns (a lock), sessions of their own run at once."""
    _owned = (("_h", "rlx_session_free"),)

    def __init__(self, handle, inputs):
        """inputs: {name: (rlx dtype code, shape with str or None for symbolic dims)}."""
        self._h = handle
        self._lock = threading.Lock()
        self._refs = {}  # arrays bound by set_param(copy=False)
        self._inputs = {}
        static = True
        for name, (code, shape) in inputs.items():
            fixed = all(isinstance(d, int) and d >= 0 for d in shape)
            static = static and fixed
            self._inputs[name] = (name.encode(), _dtypes.to_numpy(code), tuple(shape) if fixed else None)
        self._n_out = lib.rlx_session_num_outputs(handle)
        # Outputs of a graph without symbolic input dims keep their types:
        # read once, not at every run.
        self._out_types = [None] * self._n_out if static else None
        self._dims = (_lib.i64 * _MAX_RANK)()
        self._dt = ctypes.c_int()

    def _ptr(self):
        if not self._h:
            raise errors.InvalidError("rlx: the session was closed")
        return self._h

    def set_param(self, name, value, copy=True):
        """Binds param ``name`` to ``value`` (an array of the param's type):
        copied, or with copy=False borrowed (rlx_set_param_ref: no copy; the
        session keeps a reference to the array, which must not change, such
        as a ModelFile's tensor; a plain dtype must be aligned to its size)."""
        a = as_array(value)
        with self._lock:
            if copy:
                check(lib.rlx_set_param(self._ptr(), name.encode(), a.ctypes.data, a.nbytes))
                self._refs.pop(name, None)
            else:
                check(lib.rlx_set_param_ref(self._ptr(), name.encode(), a.ctypes.data, a.nbytes))
                self._refs[name] = a

    def close(self):
        """Frees the session now (after a run in another thread ends)."""
        with self._lock:
            _lib.Owner.close(self)

    def set_params(self, params):
        """set_param for each name: array of a dict."""
        for name, value in params.items():
            self.set_param(name, value)

    @property
    def num_outputs(self):
        return self._n_out

    def stats(self):
        """rlx_session_stats as a dict: runs, plans_built, plan_cache_hits,
        arena_bytes, views, in_place, compile_cache_hit, fallback_nodes, ..."""
        st = _lib.SessionStats()
        with self._lock:
            check(lib.rlx_session_get_stats(self._ptr(), ctypes.byref(st)))
        return _lib.struct_dict(st)

    @property
    def input_names(self):
        return list(self._inputs)

    def run(self, feeds=None, outputs=None):
        """Runs with ``feeds`` {input name: array} (read in place when
        C-contiguous and of the input's dtype) and returns the outputs as a
        list of NumPy arrays (``outputs``: their indexes, default all).
        Symbolic dims are bound from the arrays' shapes."""
        with self._lock:
            return self._run(feeds, outputs)

    def _run(self, feeds, outputs):
        h = self._ptr()
        if feeds:
            keep = []  # arrays converted here live until rlx_run has read them
            for name, value in feeds.items():
                spec = self._inputs.get(name)
                if spec is None:
                    raise errors.InvalidError("rlx: the session has no input %r (inputs: %s)" % (
                        name, ", ".join(self._inputs)))
                key, want, shape = spec
                if type(value) is np.ndarray and value.dtype == want and value.flags.c_contiguous:
                    a = value
                else:
                    a = as_array(value, want)
                    keep.append(a)
                if shape is not None and a.shape == shape:
                    st = lib.rlx_set_input(h, key, _address(a), a.nbytes)
                else:
                    dims = a.shape
                    if len(dims) > _MAX_RANK:
                        raise errors.ShapeError("rlx: input %r has rank %d" % (name, len(dims)))
                    st = lib.rlx_set_input_shaped(h, key, _address(a), a.nbytes, len(dims), (_lib.i64 * 8)(*dims))
                if st:
                    check(st)
        st = lib.rlx_run(h)
        if st:
            check(st)
        if outputs is None:
            return [self._output(i) for i in range(self._n_out)]
        return [self._output(i) for i in outputs]

    def _out_type(self, h, i):
        dims, dt = self._dims, self._dt
        rank = lib.rlx_output_type(h, i, ctypes.byref(dt), dims)
        if rank < 0:
            raise errors.InvalidError("rlx: output %r out of range (%d outputs)" % (i, self._n_out))
        c = dt.value
        shape = tuple(dims[:rank])
        if c >= len(_dtypes.NUMPY):  # block dtype: its raw bytes
            return (lib.rlx_dtype_nbytes(c, int(np.prod(shape, dtype=np.int64))),), np.dtype(np.uint8)
        return shape, _dtypes.to_numpy(c)

    def output(self, i):
        """Output ``i`` of the last run as a new NumPy array."""
        with self._lock:
            return self._output(i)

    def _output(self, i):
        h = self._ptr()
        types = self._out_types
        t = types[i] if types is not None and 0 <= i < len(types) else None
        if t is None:
            t = self._out_type(h, i)
            if types is not None:
                types[i] = t
        out = np.empty(t[0], t[1])
        st = lib.rlx_output(h, i, _address(out), out.nbytes)
        if st:
            check(st)
        return out


def compile_cache_stats():
    """The process-wide compile cache (rlx_compile_cache_stats) as a dict:
    lookups, hits, plans_reused, evictions, entries, capacity, ..."""
    st = _lib.CompileCacheStats()
    check(lib.rlx_compile_cache_get_stats(ctypes.byref(st)))
    return _lib.struct_dict(st)


def compile_cache_clear():
    """Drops every compiled graph and idle plan the cache holds (live sessions keep theirs)."""
    lib.rlx_compile_cache_clear()


def cpu_threads(requested=0):
    """The CPU threads a session compiled with ``threads=requested`` runs on."""
    return lib.rlx_cpu_threads(int(requested))


def _nodes(g, nodes):
    ns = [g._own(n) for n in nodes]
    return (_lib.c_node * max(len(ns), 1))(*[n.id for n in ns]), len(ns)


def grad(graph, loss, wrt):
    """Reverse mode (rlx_grad): a new Graph whose outputs are the loss, then
    d loss / d w for each w of ``wrt`` (nodes or input/param names)."""
    ids, n = _nodes(graph, wrt)
    out = _lib.c_graph()
    check(lib.rlx_grad(graph._ptr(), graph._own(loss).id, n, ids, ctypes.byref(out)))
    return Graph(graph.name + ".grad", _handle=out.value)


def jvp(graph, primals):
    """Forward mode (rlx_jvp): a new Graph with an Input "<name>.tangent" per
    primal; its outputs are graph's outputs, then their tangents."""
    ids, n = _nodes(graph, primals)
    out = _lib.c_graph()
    check(lib.rlx_jvp(graph._ptr(), n, ids, ctypes.byref(out)))
    return Graph(graph.name + ".jvp", _handle=out.value)


def train_graph(graph, loss, params, optimizer="sgd", weight_decay=0.0, momentum=0.0, nesterov=False,
                beta1=0.9, beta2=0.999, eps=1e-8):
    """One optimizer step as a Graph (rlx_train_graph): ``optimizer`` "sgd" or
    "adamw" on ``params``. Bind the Input "lr" (f32 scalar) each run and set
    the state Params to zeros first ("<param>.velocity" for SGD with
    momentum; "<param>.moments" and "adamw.step" for AdamW). Outputs: the
    loss, each param's new value, then the new state; the session keeps the
    new params for the next run."""
    kinds = {"sgd": 0, "adamw": 1}
    if optimizer not in kinds:
        raise errors.InvalidError("rlx: optimizer %r is not sgd or adamw" % (optimizer,))
    opt = _lib.Optimizer(kinds[optimizer], weight_decay, momentum, int(nesterov), beta1, beta2, eps)
    ids, n = _nodes(graph, params)
    out = _lib.c_graph()
    check(lib.rlx_train_graph(graph._ptr(), graph._own(loss).id, n, ids, ctypes.byref(opt),
                              ctypes.byref(out)))
    return Graph(graph.name + ".train", _handle=out.value)
