/* graph.c — graphs and nodes: creation, the generic node constructor every
 * builder goes through (sticky errors + shape inference), leaves, symbols,
 * outputs, cloning and specialization to concrete shapes. */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

typedef int (*ir_infer_fn)(rlx_graph *g, ir_node *n);
static const ir_infer_fn infer_fns[RLX_OP_COUNT] = {
#define RLX_OP(Id, min_in, max_in, n_out, cat, diff, attrs) ir_infer_##Id,
#include "ops.def"
#undef RLX_OP
};

static char *str_dup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

rlx_graph *rlx_graph_new(const char *name) {
  rlx_graph *g = calloc(1, sizeof *g);
  if (!g) {
    rlx_set_error(RLX_ERR_NOMEM, "rlx_graph_new: out of memory");
    return NULL;
  }
  g->name = str_dup(name ? name : "graph");
  if (!g->name) {
    free(g);
    rlx_set_error(RLX_ERR_NOMEM, "rlx_graph_new: out of memory");
    return NULL;
  }
  return g;
}

static void node_free(ir_node *n) {
  free(n->in);
  n->in = NULL;
  ir_attrs_free(&n->a);
}

void rlx_graph_free(rlx_graph *g) {
  if (!g) return;
  for (int i = 0; i < g->n_nodes; i++) node_free(&g->nodes[i]);
  for (int i = 0; i < g->n_syms; i++) free(g->syms[i].name);
  free(g->syms);
  free(g->nodes);
  free(g->outputs);
  free(g->name);
  ir_name_set_free(&g->leaf_names);
  free(g);
}

/* ---------------------------------------------------------------- errors */

static void record_error(rlx_graph *g, rlx_status st, const char *msg) {
  if (g && g->err == RLX_OK) {
    g->err = st;
    snprintf(g->errmsg, sizeof g->errmsg, "%s", msg);
  }
  rlx_set_error(st, "%s", msg);
}

int ir_fail(rlx_graph *g, const ir_node *n, rlx_status st, const char *fmt, ...) {
  char msg[512];
  int k = 0;
  if (n) k = snprintf(msg, sizeof msg, "%s (node %d): ", ir_ops[n->op].name, n->id);
  if (k < 0) k = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg + k, sizeof msg - (size_t)k, fmt, ap);
  va_end(ap);
  record_error(g, st, msg);
  return -1;
}

rlx_status rlx_graph_status(const rlx_graph *g) {
  if (!g) return rlx_set_error(RLX_ERR_INVALID, "rlx_graph_status: graph is NULL");
  if (g->err) rlx_set_error(g->err, "%s", g->errmsg);
  return g->err;
}

/* ---------------------------------------------------------------- symbols */

static int sym_new(rlx_graph *g, const char *name, size_t len) {
  if (g->n_syms == g->cap_syms) {
    int cap = g->cap_syms ? 2 * g->cap_syms : 8;
    ir_sym *s = realloc(g->syms, (size_t)cap * sizeof *s);
    if (!s) return -1;
    g->syms = s;
    g->cap_syms = cap;
  }
  char *copy = NULL;
  if (name) {
    if (!(copy = malloc(len + 1))) return -1;
    memcpy(copy, name, len);
    copy[len] = 0;
  }
  g->syms[g->n_syms].name = copy;
  return g->n_syms++;
}

int ir_sym_lookup(rlx_graph *g, const char *name, size_t len, int create) {
  for (int i = 0; i < g->n_syms; i++)
    if (g->syms[i].name && strlen(g->syms[i].name) == len && memcmp(g->syms[i].name, name, len) == 0)
      return i;
  return create ? sym_new(g, name, len) : -1;
}

static int valid_sym_name(const char *name) {
  if (!name || !*name) return 0;
  if (!((*name >= 'A' && *name <= 'Z') || (*name >= 'a' && *name <= 'z') || *name == '_')) return 0;
  for (const char *p = name; *p; p++)
    if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
      return 0;
  return strlen(name) <= 64;
}

int64_t rlx_dim_sym(rlx_graph *g, const char *name) {
  if (!g) {
    rlx_set_error(RLX_ERR_INVALID, "rlx_dim_sym: graph is NULL");
    return -1;
  }
  if (!valid_sym_name(name)) {
    ir_fail(g, NULL, RLX_ERR_INVALID, "rlx_dim_sym: bad symbol name \"%s\" (want [A-Za-z_][A-Za-z0-9_]*, at most 64 chars)",
            name ? name : "(null)");
    return -1;
  }
  int id = ir_sym_lookup(g, name, strlen(name), 1);
  if (id < 0) {
    ir_fail(g, NULL, RLX_ERR_NOMEM, "rlx_dim_sym: out of memory");
    return -1;
  }
  return ir_sym_dim(id);
}

int64_t ir_dim_anon(rlx_graph *g) {
  int id = sym_new(g, NULL, 0);
  if (id < 0) {
    ir_fail(g, NULL, RLX_ERR_NOMEM, "out of memory creating a symbolic dim");
    return 0;
  }
  return ir_sym_dim(id);
}

/* ---------------------------------------------------------------- nodes */

static int grow_nodes(rlx_graph *g) {
  if (g->n_nodes < g->cap_nodes) return 1;
  if (g->n_nodes >= (1 << 30)) return 0;
  int cap = g->cap_nodes ? 2 * g->cap_nodes : 64;
  ir_node *nodes = realloc(g->nodes, (size_t)cap * sizeof *nodes);
  if (!nodes) return 0;
  g->nodes = nodes;
  g->cap_nodes = cap;
  return 1;
}

/* "f32[2,3], i64[S]": the types of n's first inputs, for messages. */
static const char *input_types(const rlx_graph *g, const ir_node *n, char *buf, size_t cap) {
  size_t len = 0;
  buf[0] = 0;
  for (int i = 0; i < n->n_in && i < 4 && len < cap; i++) {
    const ir_type *t = ir_in(g, n, i);
    int k = snprintf(buf + len, cap - len, "%s%s%s", i ? ", " : "", rlx_dtype_name(t->dtype),
                     IR_SHAPE_S(g, &t->shape));
    len += k > 0 ? (size_t)k : 0;
  }
  if (n->n_in > 4 && len < cap) snprintf(buf + len, cap - len, ", ...");
  return n->n_in ? buf : "none";
}

/* Checks a freshly inferred type: valid dtype, rank, dims, and within the
 * largest tensor (RLX_MAX_TENSOR_BYTES), whatever the op's inference
 * computed: no later layer sizes a buffer from a type that overflowed. */
static int check_out_types(rlx_graph *g, ir_node *n) {
  for (int o = 0; o < n->n_out; o++) {
    const ir_type *t = &n->out[o];
    if (!ir_dtype_valid(t->dtype))
      return ir_fail(g, n, RLX_ERR_INTERNAL, "inference gave invalid dtype %d", (int)t->dtype);
    if (t->shape.rank < 0 || t->shape.rank > RLX_MAX_RANK)
      return ir_fail(g, n, RLX_ERR_SHAPE, "rank %d exceeds the limit %d", t->shape.rank, RLX_MAX_RANK);
    for (int i = 0; i < t->shape.rank; i++)
      if (t->shape.d[i] < 0 && !ir_dim_is_sym(t->shape.d[i]))
        return ir_fail(g, n, RLX_ERR_SHAPE, "negative dim %lld", (long long)t->shape.d[i]);
    char why[96], ins[4 * IR_SHAPE_STR_CAP];
    if (ir_type_check_size(t, why, sizeof why) < 0)
      return ir_fail(g, n, RLX_ERR_SHAPE, "output %d %s%s is larger than the largest tensor (RLX_MAX_TENSOR_BYTES, "
                     "2^40): %s; inputs: %s", o, rlx_dtype_name(t->dtype), IR_SHAPE_S(g, &t->shape), why,
                     input_types(g, n, ins, sizeof ins));
  }
  return 0;
}

static rlx_node add_node(rlx_graph *g, int op, int n_in, const rlx_node *in, ir_attrs *attrs,
                         const ir_type *leaf_type) {
  if (!g) {
    ir_attrs_free(attrs);
    rlx_set_error(RLX_ERR_INVALID, "%s: graph is NULL", ir_ops[op].name);
    return -1;
  }
  if (g->err) {  /* sticky: an earlier builder failed */
    ir_attrs_free(attrs);
    rlx_set_error(g->err, "%s", g->errmsg);
    return -1;
  }
  ir_node n;
  memset(&n, 0, sizeof n);
  n.op = op;
  n.id = g->n_nodes;
  n.n_out = ir_ops[op].n_outputs;
  n.a = *attrs;
  memset(attrs, 0, sizeof *attrs);  /* ownership moved into n */
  const ir_op_info *info = &ir_ops[op];
  if (n_in < info->min_inputs || (info->max_inputs >= 0 && n_in > info->max_inputs) || n_in < 0) {
    ir_fail(g, &n, RLX_ERR_INVALID, "takes %d%s inputs, got %d", info->min_inputs,
            info->max_inputs < 0 ? " or more" : info->max_inputs == info->min_inputs ? "" : " to max", n_in);
    node_free(&n);
    return -1;
  }
  if (n_in > 0) {
    if (!in) {
      ir_fail(g, &n, RLX_ERR_INVALID, "inputs array is NULL");
      node_free(&n);
      return -1;
    }
    n.in = malloc((size_t)n_in * sizeof *n.in);
    if (!n.in) {
      ir_fail(g, &n, RLX_ERR_NOMEM, "out of memory");
      node_free(&n);
      return -1;
    }
    for (int i = 0; i < n_in; i++) {
      if (in[i] < 0 || in[i] >= g->n_nodes) {
        ir_fail(g, &n, RLX_ERR_INVALID, "input %d is %d, not a node of this graph", i, (int)in[i]);
        node_free(&n);
        return -1;
      }
      n.in[i] = in[i];
    }
  }
  n.n_in = n_in;
  if (leaf_type) n.out[0] = *leaf_type;
  if (infer_fns[op](g, &n) < 0 || check_out_types(g, &n) < 0 || !grow_nodes(g)) {
    if (!g->err) ir_fail(g, &n, RLX_ERR_NOMEM, "out of memory");
    node_free(&n);
    return -1;
  }
  g->nodes[g->n_nodes] = n;
  return g->n_nodes++;
}

rlx_node ir_add_node(rlx_graph *g, int op, int n_in, const rlx_node *in, ir_attrs *attrs) {
  return add_node(g, op, n_in, in, attrs, NULL);
}

rlx_node ir_add_leaf(rlx_graph *g, int op, ir_attrs *attrs, const ir_type *t) {
  return add_node(g, op, 0, NULL, attrs, t);
}

/* ---------------------------------------------------------------- leaves */

static int is_named_leaf(const ir_node *n) {
  return (n->op == RLX_OP_Input || n->op == RLX_OP_Param) && n->a.name;
}

/* Whether an input or param of g is named `name` (-1: out of memory). The
 * index of names catches up with the nodes appended since the last call,
 * so building a graph checks its names in linear time. */
static int leaf_name_taken(rlx_graph *g, const char *name) {
  for (; g->n_leaves_indexed < g->n_nodes; g->n_leaves_indexed++) {
    const ir_node *m = &g->nodes[g->n_leaves_indexed];
    if (is_named_leaf(m) && ir_name_set_add(&g->leaf_names, g, g->n_leaves_indexed) < 0) return -1;
  }
  return ir_name_set_find(&g->leaf_names, g, name) >= 0;
}

/* Inference of a leaf: its declared type, with symbolic dims resolved
 * through the current binding. */
static int infer_leaf_type(rlx_graph *g, ir_node *n) {
  ir_type *t = &n->out[0];
  if (!ir_dtype_valid(t->dtype)) return ir_fail(g, n, RLX_ERR_DTYPE, "invalid dtype %d", (int)t->dtype);
  if (t->shape.rank < 0 || t->shape.rank > RLX_MAX_RANK)
    return ir_fail(g, n, RLX_ERR_SHAPE, "rank %d outside 0..%d", t->shape.rank, RLX_MAX_RANK);
  for (int i = 0; i < t->shape.rank; i++) {
    int64_t d = t->shape.d[i];
    if (ir_dim_is_sym(d)) {
      if (ir_dim_sym_id(d) >= g->n_syms) return ir_fail(g, n, RLX_ERR_SHAPE, "dim %d is an unknown symbol", i);
      t->shape.d[i] = ir_dim_resolve(g, d);
    } else if (d < 0) {
      return ir_fail(g, n, RLX_ERR_SHAPE, "dim %d is negative (%lld)", i, (long long)d);
    }
  }
  char why[96];
  if (ir_type_check_size(t, why, sizeof why) < 0)
    return ir_fail(g, n, RLX_ERR_SHAPE, "%s%s%s%s%s is larger than the largest tensor (RLX_MAX_TENSOR_BYTES, 2^40): %s",
                   n->a.name ? "\"" : "", n->a.name ? n->a.name : "", n->a.name ? "\" " : "",
                   rlx_dtype_name(t->dtype), IR_SHAPE_S(g, &t->shape), why);
  if (ir_is_block(t->dtype)) {
    int64_t last = t->shape.rank ? t->shape.d[t->shape.rank - 1] : 1;
    if (ir_dim_is_sym(last) || last % ir_dtypes[t->dtype].block)
      return ir_fail(g, n, RLX_ERR_SHAPE, "last dim of a %s tensor must be a multiple of %d",
                     ir_dtypes[t->dtype].name, ir_dtypes[t->dtype].block);
  }
  return 0;
}

static int infer_named_leaf(rlx_graph *g, ir_node *n) {
  if (!n->a.name || !*n->a.name) return ir_fail(g, n, RLX_ERR_INVALID, "needs a non-empty name");
  /* Names are unique across inputs and params. During specialization the
   * node is already in the graph (its id < n_nodes) and is not a duplicate. */
  if (n->id == g->n_nodes) {
    int taken = leaf_name_taken(g, n->a.name);
    if (taken < 0) return ir_fail(g, n, RLX_ERR_NOMEM, "out of memory indexing names");
    if (taken)
      return ir_fail(g, n, RLX_ERR_INVALID, "name \"%s\" is already used by another input or param", n->a.name);
  }
  if (n->op == RLX_OP_Input && ir_is_block(n->out[0].dtype))
    return ir_fail(g, n, RLX_ERR_DTYPE, "input \"%s\": block dtype %s is for params only", n->a.name,
                   ir_dtypes[n->out[0].dtype].name);
  return infer_leaf_type(g, n);
}

int ir_infer_Input(rlx_graph *g, ir_node *n) { return infer_named_leaf(g, n); }
int ir_infer_Param(rlx_graph *g, ir_node *n) { return infer_named_leaf(g, n); }

int ir_infer_Constant(rlx_graph *g, ir_node *n) {
  if (infer_leaf_type(g, n) < 0) return -1;
  int64_t numel = ir_numel(&n->out[0].shape);
  if (numel < 0) return ir_fail(g, n, RLX_ERR_SHAPE, "a constant cannot have symbolic dims");
  size_t want = rlx_dtype_nbytes(n->out[0].dtype, numel);
  if (want != n->a.data.n)
    return ir_fail(g, n, RLX_ERR_INVALID, "data has %zu bytes, the type %s%s needs %zu",
                   n->a.data.n, ir_dtypes[n->out[0].dtype].name,
                   ir_shape_str(g, &n->out[0].shape, (char[IR_SHAPE_STR_CAP]){0}, IR_SHAPE_STR_CAP), want);
  return 0;
}

static int fill_leaf_type(rlx_graph *g, const char *what, rlx_dtype t, int rank, const int64_t *dims,
                          ir_type *out) {
  if (rank < 0 || rank > RLX_MAX_RANK)
    return ir_fail(g, NULL, RLX_ERR_SHAPE, "%s: rank %d outside 0..%d", what, rank, RLX_MAX_RANK);
  if (rank > 0 && !dims) return ir_fail(g, NULL, RLX_ERR_INVALID, "%s: dims is NULL", what);
  if (!ir_dtype_valid(t)) return ir_fail(g, NULL, RLX_ERR_DTYPE, "%s: invalid dtype %d", what, (int)t);
  memset(out, 0, sizeof *out);
  out->dtype = t;
  out->shape.rank = rank;
  for (int i = 0; i < rank; i++) out->shape.d[i] = dims[i];
  char why[96];
  if (ir_type_check_size(out, why, sizeof why) < 0)
    return ir_fail(g, NULL, RLX_ERR_SHAPE, "%s: %s%s is larger than the largest tensor (RLX_MAX_TENSOR_BYTES, 2^40): %s",
                   what, rlx_dtype_name(t), IR_SHAPE_S(g, &out->shape), why);
  return 0;
}

static rlx_node named_leaf(rlx_graph *g, int op, const char *name, rlx_dtype t, int rank,
                           const int64_t *dims) {
  const char *what = op == RLX_OP_Input ? "rlx_input" : "rlx_param";
  if (!g) {
    rlx_set_error(RLX_ERR_INVALID, "%s: graph is NULL", what);
    return -1;
  }
  if (g->err) return rlx_graph_status(g), -1;
  if (!name) return ir_fail(g, NULL, RLX_ERR_INVALID, "%s: name is NULL", what);
  char what_name[96];
  snprintf(what_name, sizeof what_name, "%s \"%s\"", what, name);
  ir_type ty;
  if (fill_leaf_type(g, what_name, t, rank, dims, &ty) < 0) return -1;
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  if (!(a.name = str_dup(name))) return ir_fail(g, NULL, RLX_ERR_NOMEM, "%s: out of memory", what);
  return ir_add_leaf(g, op, &a, &ty);
}

rlx_node rlx_input(rlx_graph *g, const char *name, rlx_dtype t, int rank, const int64_t *dims) {
  return named_leaf(g, RLX_OP_Input, name, t, rank, dims);
}

rlx_node rlx_param(rlx_graph *g, const char *name, rlx_dtype t, int rank, const int64_t *dims) {
  return named_leaf(g, RLX_OP_Param, name, t, rank, dims);
}

rlx_node rlx_constant(rlx_graph *g, rlx_dtype t, int rank, const int64_t *dims, const void *data) {
  if (!g) {
    rlx_set_error(RLX_ERR_INVALID, "rlx_constant: graph is NULL");
    return -1;
  }
  if (g->err) return rlx_graph_status(g), -1;
  ir_type ty;
  if (fill_leaf_type(g, "rlx_constant", t, rank, dims, &ty) < 0) return -1;
  int64_t numel = ir_numel(&ty.shape);
  size_t nbytes = numel < 0 ? 0 : rlx_dtype_nbytes(t, numel);
  if (numel < 0 || (nbytes == 0 && numel != 0))
    return ir_fail(g, NULL, RLX_ERR_SHAPE, "rlx_constant: shape has symbolic dims or is not whole blocks");
  if (nbytes && !data) return ir_fail(g, NULL, RLX_ERR_INVALID, "rlx_constant: data is NULL");
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  if (nbytes) {
    if (!(a.data.p = malloc(nbytes))) return ir_fail(g, NULL, RLX_ERR_NOMEM, "rlx_constant: out of memory");
    memcpy(a.data.p, data, nbytes);
    a.data.n = nbytes;
  }
  return ir_add_leaf(g, RLX_OP_Constant, &a, &ty);
}

/* ---------------------------------------------------------------- outputs and queries */

rlx_status rlx_graph_set_outputs(rlx_graph *g, int n, const rlx_node *outs) {
  if (!g) return rlx_set_error(RLX_ERR_INVALID, "rlx_graph_set_outputs: graph is NULL");
  if (g->err) return rlx_graph_status(g);
  if (n < 0 || (n > 0 && !outs))
    return ir_fail(g, NULL, RLX_ERR_INVALID, "rlx_graph_set_outputs: bad count %d or NULL array", n), g->err;
  for (int i = 0; i < n; i++)
    if (outs[i] < 0 || outs[i] >= g->n_nodes)
      return ir_fail(g, NULL, RLX_ERR_INVALID, "rlx_graph_set_outputs: output %d is %d, not a node of this graph",
                     i, (int)outs[i]), g->err;
  rlx_node *o = n ? malloc((size_t)n * sizeof *o) : NULL;
  if (n && !o) return ir_fail(g, NULL, RLX_ERR_NOMEM, "rlx_graph_set_outputs: out of memory"), g->err;
  if (n) memcpy(o, outs, (size_t)n * sizeof *o);
  free(g->outputs);
  g->outputs = o;
  g->n_outputs = n;
  return RLX_OK;
}

int rlx_graph_num_nodes(const rlx_graph *g) { return g ? g->n_nodes : 0; }

int rlx_node_type(const rlx_graph *g, rlx_node id, rlx_dtype *dtype, int64_t *dims) {
  if (!g || id < 0 || id >= g->n_nodes) return -1;
  const ir_type *t = &g->nodes[id].out[0];
  if (dtype) *dtype = t->dtype;
  if (dims) memcpy(dims, t->shape.d, (size_t)t->shape.rank * sizeof *dims);
  return t->shape.rank;
}

/* ---------------------------------------------------------------- clone and specialize */

rlx_graph *ir_graph_clone(const rlx_graph *g) {
  rlx_graph *c = rlx_graph_new(g->name);
  if (!c) return NULL;
  c->err = g->err;
  memcpy(c->errmsg, g->errmsg, sizeof c->errmsg);
  if (g->n_nodes) {
    c->nodes = calloc((size_t)g->n_nodes, sizeof *c->nodes);
    if (!c->nodes) goto nomem;
    c->cap_nodes = g->n_nodes;
  }
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *s = &g->nodes[i];
    ir_node *d = &c->nodes[i];
    *d = *s;
    d->in = NULL;
    if (!ir_attrs_copy(&d->a, &s->a)) {
      memset(&d->a, 0, sizeof d->a);
      goto nomem;
    }
    c->n_nodes = i + 1;
    if (s->n_in) {
      if (!(d->in = malloc((size_t)s->n_in * sizeof *d->in))) goto nomem;
      memcpy(d->in, s->in, (size_t)s->n_in * sizeof *d->in);
    }
  }
  for (int i = 0; i < g->n_syms; i++) {
    const char *nm = g->syms[i].name;
    if (sym_new(c, nm, nm ? strlen(nm) : 0) < 0) goto nomem;
  }
  if (g->n_outputs && rlx_graph_set_outputs(c, g->n_outputs, g->outputs) != RLX_OK) goto nomem;
  return c;
nomem:
  rlx_graph_free(c);
  rlx_set_error(RLX_ERR_NOMEM, "out of memory cloning graph");
  return NULL;
}

rlx_status ir_graph_specialize(rlx_graph *g, const int64_t *binding) {
  if (g->err) return rlx_graph_status(g);
  g->sym_binding = binding;
  g->n_sym_binding = g->n_syms;
  for (int i = 0; i < g->n_nodes; i++) {
    ir_node *n = &g->nodes[i];
    if (ir_ops[n->op].category != RLX_CAT_LEAF) memset(n->out, 0, sizeof n->out);
    n->n_out = ir_ops[n->op].n_outputs;
    if (infer_fns[n->op](g, n) < 0 || check_out_types(g, n) < 0) break;
  }
  g->sym_binding = NULL;
  g->n_sym_binding = 0;
  return g->err ? rlx_graph_status(g) : RLX_OK;
}

const char *rlx_node_op_name(const rlx_graph *g, rlx_node n) {
  return g && n >= 0 && n < g->n_nodes ? ir_ops[g->nodes[n].op].name : NULL;
}

const char *rlx_node_name(const rlx_graph *g, rlx_node n) {
  if (!g || n < 0 || n >= g->n_nodes) return NULL;
  int op = g->nodes[n].op;
  return op == RLX_OP_Input || op == RLX_OP_Param ? g->nodes[n].a.name : NULL;
}

const char *rlx_dim_name(const rlx_graph *g, int64_t dim) {
  if (!ir_dim_is_sym(dim)) return NULL;
  int id = ir_dim_sym_id(dim);
  return g && id < g->n_syms && g->syms[id].name ? g->syms[id].name : "?";
}

/* The i-th node with op `op`, or -1. */
static rlx_node nth_of_op(const rlx_graph *g, int op, int i) {
  if (!g || i < 0) return -1;
  for (int k = 0; k < g->n_nodes; k++)
    if (g->nodes[k].op == op && i-- == 0) return k;
  return -1;
}

static int count_of_op(const rlx_graph *g, int op) {
  int c = 0;
  for (int k = 0; g && k < g->n_nodes; k++) c += g->nodes[k].op == op;
  return c;
}

int rlx_graph_num_inputs(const rlx_graph *g) { return count_of_op(g, RLX_OP_Input); }
rlx_node rlx_graph_input(const rlx_graph *g, int i) { return nth_of_op(g, RLX_OP_Input, i); }
int rlx_graph_num_params(const rlx_graph *g) { return count_of_op(g, RLX_OP_Param); }
rlx_node rlx_graph_param(const rlx_graph *g, int i) { return nth_of_op(g, RLX_OP_Param, i); }
int rlx_graph_num_outputs(const rlx_graph *g) { return g ? g->n_outputs : 0; }
rlx_node rlx_graph_output(const rlx_graph *g, int i) {
  return g && i >= 0 && i < g->n_outputs ? g->outputs[i] : -1;
}
