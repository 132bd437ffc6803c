/* infer_layout.c — builders and shape inference of the layout and
 * data-movement ops (OPS.md rows 10-23) and of the meta op GetOutput.
 *
 * The data-movement ops take every plain dtype (they move elements by
 * size); Reshape also takes block dtypes when the last dim is unchanged.
 * Symbolic dims are unknown but fixed: a check that needs their value is
 * deferred to specialization, when inference runs again with them bound.
 */
#include "ir.h"

#include <string.h>

/* ---------------------------------------------------------------- helpers */

/* A builder goes on only with a graph and no sticky error (the error
 * detail is left in rlx_last_error()). */
static int builder_ok(rlx_graph *g, const char *who) {
  if (!g) {
    rlx_set_error(RLX_ERR_INVALID, "%s: graph is NULL", who);
    return 0;
  }
  if (g->err) {
    rlx_graph_status(g);
    return 0;
  }
  return 1;
}

/* Copies a builder's (count, values) list into an attribute list. */
static int ilist_from(rlx_graph *g, const char *who, ir_ilist *dst, int count,
                      const int64_t *v, const char *what) {
  if (count < 0 || count > RLX_MAX_RANK)
    return ir_fail(g, NULL, RLX_ERR_SHAPE, "%s: %s has %d entries, outside 0..%d", who, what,
                   count, RLX_MAX_RANK), 0;
  if (count > 0 && !v)
    return ir_fail(g, NULL, RLX_ERR_INVALID, "%s: %s is NULL", who, what), 0;
  dst->n = count;
  for (int i = 0; i < count; i++) dst->v[i] = v[i];
  return 1;
}

static int check_plain(rlx_graph *g, ir_node *n, const ir_type *t, const char *what) {
  if (!ir_dtype_valid(t->dtype) || ir_is_block(t->dtype))
    return ir_fail(g, n, RLX_ERR_DTYPE, "%s has dtype %s; expected a plain dtype", what,
                   rlx_dtype_name(t->dtype));
  return 0;
}

/* Plain, or a GGUF block dtype moved along an axis other than the last:
 * whole rows of blocks (a quantized KV cache written and read by rows). */
static int check_plain_or_rows(rlx_graph *g, ir_node *n, const ir_type *t, int axis, const char *what) {
  if (ir_dtype_valid(t->dtype) && ir_is_block(t->dtype) && axis >= 0 && axis < t->shape.rank - 1) return 0;
  if (ir_dtype_valid(t->dtype) && ir_is_block(t->dtype))
    return ir_fail(g, n, RLX_ERR_DTYPE, "%s has block dtype %s; it moves whole rows only (axis %d is its last)",
                   what, rlx_dtype_name(t->dtype), axis);
  return check_plain(g, n, t, what);
}

static int check_index_dtype(rlx_graph *g, ir_node *n, const ir_type *t) {
  if (t->dtype == RLX_I32 || t->dtype == RLX_I64 || ir_is_float(t->dtype)) return 0;
  return ir_fail(g, n, RLX_ERR_DTYPE, "index dtype %s; expected i32, i64 or a float type",
                 rlx_dtype_name(t->dtype));
}

static int check_ilist_len(rlx_graph *g, ir_node *n, const ir_ilist *l, int rank,
                           const char *what) {
  if (l->n != rank)
    return ir_fail(g, n, RLX_ERR_INVALID, "%s has %d entries; expected %d (the input rank)",
                   what, l->n, rank);
  return 0;
}

/* A dim attribute entry after resolving: static (>= 0) or a symbol of g. */
static int attr_dim_ok(const rlx_graph *g, int64_t d) {
  return d >= 0 || (ir_dim_is_sym(d) && IR_SYM_BASE - d < g->n_syms);
}

/* Two dims that must be equal: fine when equal or when a symbol is
 * involved (checked again once bound). */
static int dims_compatible(const rlx_graph *g, int64_t a, int64_t b) {
  a = ir_dim_resolve(g, a);
  b = ir_dim_resolve(g, b);
  return a == b || ir_dim_is_sym(a) || ir_dim_is_sym(b);
}

#define SHAPE_STR(g, s, buf) ir_shape_str((g), (s), (buf), sizeof(buf))

/* ---------------------------------------------------------------- Reshape */

rlx_node rlx_reshape(rlx_graph *g, rlx_node x, int rank, const int64_t *dims) {
  if (!builder_ok(g, "rlx_reshape")) return -1;
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  if (!ilist_from(g, "rlx_reshape", &a.dims, rank, dims, "dims")) return -1;
  rlx_node in[] = {x};
  return ir_add_node(g, RLX_OP_Reshape, 1, in, &a);
}

/* Element counts with symbolic dims: symbols on both sides cancel; the
 * static products are compared when nothing symbolic is left on either
 * side (else the check waits for specialization). -1 becomes the static
 * quotient times the input's leftover symbols, or an anonymous dim when
 * the output side has leftover symbols too. A -1 next to a zero-size dim
 * is ambiguous (as in NumPy): RLX_ERR_SHAPE. */
int ir_infer_Reshape(rlx_graph *g, ir_node *n) {
  const ir_type *x = ir_in(g, n, 0);
  const ir_ilist *dims = &n->a.dims;
  char b1[IR_SHAPE_STR_CAP], b2[IR_SHAPE_STR_CAP];
  if (dims->n < 0 || dims->n > RLX_MAX_RANK)
    return ir_fail(g, n, RLX_ERR_INVALID, "dims has %d entries", dims->n);

  ir_shape out = {.rank = dims->n};
  int infer = -1;
  for (int i = 0; i < dims->n; i++) {
    int64_t d = ir_dim_resolve(g, dims->v[i]);
    if (d == -1) {
      if (infer >= 0) return ir_fail(g, n, RLX_ERR_INVALID, "dims has more than one -1");
      infer = i;
    } else if (!attr_dim_ok(g, d)) {
      return ir_fail(g, n, RLX_ERR_INVALID, "dims[%d] = %lld is not a size, -1 or a symbol", i,
                     (long long)d);
    }
    out.d[i] = d;
  }

  /* Cancel symbols that appear on both sides, multiply what is left. */
  int used[RLX_MAX_RANK] = {0};
  int64_t pin = 1, pout = 1, in_syms[RLX_MAX_RANK];
  int n_in_syms = 0, n_out_syms = 0;
  for (int i = 0; i < x->shape.rank; i++) {
    int64_t d = ir_dim_resolve(g, x->shape.d[i]);
    if (!ir_dim_is_sym(d)) {
      if ((pin = ir_size_mul(pin, d)) == IR_SIZE_OVER)
        return ir_fail(g, n, RLX_ERR_SHAPE, "element count of %s exceeds the largest tensor "
                       "(RLX_MAX_TENSOR_BYTES, 2^40)", SHAPE_STR(g, &x->shape, b1));
      continue;
    }
    int j = 0;
    while (j < out.rank && (used[j] || out.d[j] != d)) j++;
    if (j < out.rank) used[j] = 1;
    else in_syms[n_in_syms++] = d;
  }
  for (int j = 0; j < out.rank; j++) {
    if (j == infer || used[j]) continue;
    if (ir_dim_is_sym(out.d[j])) n_out_syms++;
    else if ((pout = ir_size_mul(pout, out.d[j])) == IR_SIZE_OVER)
      return ir_fail(g, n, RLX_ERR_SHAPE, "element count of dims %s exceeds the largest tensor "
                     "(RLX_MAX_TENSOR_BYTES, 2^40)", SHAPE_STR(g, &out, b2));
  }
  int in_known = n_in_syms == 0 || pin == 0, out_known = n_out_syms == 0 || pout == 0;

  if (infer < 0) {
    if (in_known && out_known && pin != pout)
      return ir_fail(g, n, RLX_ERR_SHAPE, "cannot reshape %s into %s: element counts differ",
                     SHAPE_STR(g, &x->shape, b1), SHAPE_STR(g, &out, b2));
  } else {
    if (pout == 0)
      return ir_fail(g, n, RLX_ERR_SHAPE, "cannot infer -1 of %s from %s: other dims hold 0 "
                     "elements", SHAPE_STR(g, &out, b2), SHAPE_STR(g, &x->shape, b1));
    if (n_out_syms == 0 && pin % pout != 0)
      return ir_fail(g, n, RLX_ERR_SHAPE, "cannot reshape %s into %s with -1: %lld elements "
                     "are not a multiple of %lld", SHAPE_STR(g, &x->shape, b1),
                     SHAPE_STR(g, &out, b2), (long long)pin, (long long)pout);
    if (n_out_syms == 0) {
      int64_t d = pin / pout;
      for (int i = 0; i < n_in_syms; i++) d = ir_dim_mul(g, d, in_syms[i]);
      out.d[infer] = d;
    } else {
      out.d[infer] = ir_dim_anon(g);
    }
  }

  if (ir_is_block(x->dtype)) {
    int r = x->shape.rank;
    if (r == 0 || out.rank == 0 ||
        ir_dim_resolve(g, x->shape.d[r - 1]) != out.d[out.rank - 1])
      return ir_fail(g, n, RLX_ERR_SHAPE, "block dtype %s: reshape %s into %s must keep the "
                     "last dim", rlx_dtype_name(x->dtype), SHAPE_STR(g, &x->shape, b1),
                     SHAPE_STR(g, &out, b2));
  }

  int all_static = 1;
  for (int i = 0; i < out.rank; i++) all_static &= !ir_dim_is_sym(out.d[i]);
  if (all_static)
    for (int i = 0; i < out.rank; i++) n->a.dims.v[i] = out.d[i];
  n->out[0].dtype = x->dtype;
  n->out[0].shape = out;
  return 0;
}

/* ---------------------------------------------------------------- Expand */

rlx_node rlx_expand(rlx_graph *g, rlx_node x, int rank, const int64_t *dims) {
  if (!builder_ok(g, "rlx_expand")) return -1;
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  if (!ilist_from(g, "rlx_expand", &a.dims, rank, dims, "dims")) return -1;
  rlx_node in[] = {x};
  return ir_add_node(g, RLX_OP_Expand, 1, in, &a);
}

/* NumPy broadcast_to: no -1 entries (unlike torch's expand). */
int ir_infer_Expand(rlx_graph *g, ir_node *n) {
  const ir_type *x = ir_in(g, n, 0);
  const ir_ilist *dims = &n->a.dims;
  char b1[IR_SHAPE_STR_CAP], b2[IR_SHAPE_STR_CAP];
  if (check_plain(g, n, x, "input")) return -1;
  if (dims->n < x->shape.rank || dims->n > RLX_MAX_RANK)
    return ir_fail(g, n, RLX_ERR_SHAPE, "cannot expand rank %d to %d dims", x->shape.rank,
                   dims->n);
  ir_shape out = {.rank = dims->n};
  for (int i = 0; i < dims->n; i++) {
    out.d[i] = ir_dim_resolve(g, dims->v[i]);
    if (!attr_dim_ok(g, out.d[i]))
      return ir_fail(g, n, RLX_ERR_INVALID, "dims[%d] = %lld is not a size or a symbol", i,
                     (long long)out.d[i]);
  }
  int lead = out.rank - x->shape.rank;
  for (int i = 0; i < x->shape.rank; i++) {
    int64_t d = ir_dim_resolve(g, x->shape.d[i]);
    if (d != 1 && !dims_compatible(g, d, out.d[lead + i]))
      return ir_fail(g, n, RLX_ERR_SHAPE, "cannot broadcast %s to %s",
                     SHAPE_STR(g, &x->shape, b1), SHAPE_STR(g, &out, b2));
  }
  n->out[0].dtype = x->dtype;
  n->out[0].shape = out;
  return 0;
}

/* ---------------------------------------------------------------- Transpose */

rlx_node rlx_transpose(rlx_graph *g, rlx_node x, int rank, const int64_t *perm) {
  if (!builder_ok(g, "rlx_transpose")) return -1;
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  if (!ilist_from(g, "rlx_transpose", &a.perm, rank, perm, "perm")) return -1;
  rlx_node in[] = {x};
  return ir_add_node(g, RLX_OP_Transpose, 1, in, &a);
}

int ir_infer_Transpose(rlx_graph *g, ir_node *n) {
  const ir_type *x = ir_in(g, n, 0);
  ir_ilist *perm = &n->a.perm;
  int rank = x->shape.rank, seen[RLX_MAX_RANK] = {0};
  if (check_plain(g, n, x, "input")) return -1;
  if (check_ilist_len(g, n, perm, rank, "perm")) return -1;
  ir_type out = {.dtype = x->dtype, .shape = {.rank = rank}};
  for (int i = 0; i < rank; i++) {
    int p = ir_norm_axis(perm->v[i], rank);
    if (p < 0 || seen[p])
      return ir_fail(g, n, RLX_ERR_INVALID, "perm is not a permutation of 0..%d: entry %d is "
                     "%lld", rank - 1, i, (long long)perm->v[i]);
    seen[p] = 1;
    perm->v[i] = p;
    out.shape.d[i] = x->shape.d[p];
  }
  n->out[0] = out;
  return 0;
}

/* ---------------------------------------------------------------- Narrow */

rlx_node rlx_narrow(rlx_graph *g, rlx_node x, int axis, int64_t start, int64_t len) {
  if (!builder_ok(g, "rlx_narrow")) return -1;
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.axis = axis;
  a.start = start;
  a.len = len;
  rlx_node in[] = {x};
  return ir_add_node(g, RLX_OP_Narrow, 1, in, &a);
}

/* A negative start on a symbolic dim stays negative until specialization.
 * len may be a symbolic dim (rlx_dim_sym): the first len rows of a
 * preallocated buffer whose used length is bound at run time (a KV cache
 * read up to the current position); specialization stores its value. */
int ir_infer_Narrow(rlx_graph *g, ir_node *n) {
  const ir_type *x = ir_in(g, n, 0);
  char b1[IR_SHAPE_STR_CAP];
  int axis = ir_norm_axis(n->a.axis, x->shape.rank);
  if (axis < 0)
    return ir_fail(g, n, RLX_ERR_SHAPE, "axis %lld out of range for %s", (long long)n->a.axis,
                   SHAPE_STR(g, &x->shape, b1));
  if (check_plain_or_rows(g, n, x, axis, "input")) return -1;
  int64_t dim = ir_dim_resolve(g, x->shape.d[axis]), start = n->a.start;
  int64_t len = ir_dim_resolve(g, n->a.len);
  if (ir_dim_is_sym(len) && ir_dim_sym_id(len) >= g->n_syms)
    return ir_fail(g, n, RLX_ERR_SHAPE, "len %lld is not a symbolic dim of the graph", (long long)len);
  if (!ir_dim_is_sym(len) && len < 0) return ir_fail(g, n, RLX_ERR_SHAPE, "negative len %lld", (long long)len);
  n->a.len = len;
  if (ir_dim_is_sym(len)) {
    if (start < 0) return ir_fail(g, n, RLX_ERR_SHAPE, "a symbolic len needs a start >= 0, got %lld",
                                  (long long)start);
  } else if (!ir_dim_is_sym(dim)) {
    if (start < 0) start += dim;
    if (start < 0 || start > dim || len > dim - start)
      return ir_fail(g, n, RLX_ERR_SHAPE, "start %lld, len %lld out of range for dim %d of %s",
                     (long long)n->a.start, (long long)len, axis, SHAPE_STR(g, &x->shape, b1));
  }
  n->a.axis = axis;
  n->a.start = start;
  n->out[0] = *x;
  n->out[0].shape.d[axis] = len;
  return 0;
}

/* ---------------------------------------------------------------- Slice */

rlx_node rlx_slice(rlx_graph *g, rlx_node x, int rank, const int64_t *starts,
                   const int64_t *ends, const int64_t *steps) {
  if (!builder_ok(g, "rlx_slice")) return -1;
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  if (!ilist_from(g, "rlx_slice", &a.starts, rank, starts, "starts") ||
      !ilist_from(g, "rlx_slice", &a.ends, rank, ends, "ends") ||
      !ilist_from(g, "rlx_slice", &a.steps, rank, steps, "steps"))
    return -1;
  rlx_node in[] = {x};
  return ir_add_node(g, RLX_OP_Slice, 1, in, &a);
}

/* NumPy index: negative counts from the end, then clamped to [0, dim]. */
static int64_t slice_bound(int64_t v, int64_t dim) {
  if (v < 0) v += dim;
  return v < 0 ? 0 : v > dim ? dim : v;
}

/* Static dims get their starts/ends stored clamped. On a symbolic dim the
 * entries stay as given; the output is that dim for the full slice
 * (0, INT64_MAX, 1), else an anonymous dim. */
int ir_infer_Slice(rlx_graph *g, ir_node *n) {
  const ir_type *x = ir_in(g, n, 0);
  ir_attrs *a = &n->a;
  int rank = x->shape.rank;
  if (check_plain(g, n, x, "input")) return -1;
  if (check_ilist_len(g, n, &a->starts, rank, "starts") ||
      check_ilist_len(g, n, &a->ends, rank, "ends") ||
      check_ilist_len(g, n, &a->steps, rank, "steps"))
    return -1;
  ir_type out = *x;
  for (int i = 0; i < rank; i++) {
    int64_t dim = ir_dim_resolve(g, x->shape.d[i]), step = a->steps.v[i];
    if (step <= 0)
      return ir_fail(g, n, RLX_ERR_INVALID, "steps[%d] = %lld; steps must be > 0", i,
                     (long long)step);
    if (ir_dim_is_sym(dim)) {
      int full = a->starts.v[i] == 0 && a->ends.v[i] == INT64_MAX && step == 1;
      out.shape.d[i] = full ? dim : ir_dim_anon(g);
      continue;
    }
    int64_t s = slice_bound(a->starts.v[i], dim), e = slice_bound(a->ends.v[i], dim);
    a->starts.v[i] = s;
    a->ends.v[i] = e;
    out.shape.d[i] = e > s ? (e - s - 1) / step + 1 : 0;
  }
  n->out[0] = out;
  return 0;
}

/* ---------------------------------------------------------------- Concat */

rlx_node rlx_concat(rlx_graph *g, int n, const rlx_node *xs, int axis) {
  if (!builder_ok(g, "rlx_concat")) return -1;
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.axis = axis;
  return ir_add_node(g, RLX_OP_Concat, n, xs, &a);
}

int ir_infer_Concat(rlx_graph *g, ir_node *n) {
  const ir_type *x0 = ir_in(g, n, 0);
  char b1[IR_SHAPE_STR_CAP], b2[IR_SHAPE_STR_CAP];
  if (check_plain(g, n, x0, "input 0")) return -1;
  int axis = ir_norm_axis(n->a.axis, x0->shape.rank);
  if (axis < 0)
    return ir_fail(g, n, RLX_ERR_SHAPE, "axis %lld out of range for %s", (long long)n->a.axis,
                   SHAPE_STR(g, &x0->shape, b1));
  ir_type out = *x0;
  for (int k = 1; k < n->n_in; k++) {
    const ir_type *xk = ir_in(g, n, k);
    if (xk->dtype != x0->dtype)
      return ir_fail(g, n, RLX_ERR_DTYPE, "input %d has dtype %s, input 0 has %s", k,
                     rlx_dtype_name(xk->dtype), rlx_dtype_name(x0->dtype));
    int ok = xk->shape.rank == x0->shape.rank;
    for (int i = 0; ok && i < x0->shape.rank; i++) {
      if (i == axis) continue;
      ok = dims_compatible(g, out.shape.d[i], xk->shape.d[i]);
      if (ir_dim_is_sym(out.shape.d[i])) out.shape.d[i] = xk->shape.d[i];  /* prefer static */
    }
    if (!ok)
      return ir_fail(g, n, RLX_ERR_SHAPE, "input %d %s does not match input 0 %s off axis %d",
                     k, SHAPE_STR(g, &xk->shape, b1), SHAPE_STR(g, &x0->shape, b2), axis);
    out.shape.d[axis] = ir_dim_add(g, out.shape.d[axis], xk->shape.d[axis]);
  }
  n->a.axis = axis;
  n->out[0] = out;
  return 0;
}

/* ---------------------------------------------------------------- Pad */

rlx_node rlx_pad(rlx_graph *g, rlx_node x, int rank, const int64_t *before,
                 const int64_t *after, double value) {
  if (!builder_ok(g, "rlx_pad")) return -1;
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  if (!ilist_from(g, "rlx_pad", &a.before, rank, before, "before") ||
      !ilist_from(g, "rlx_pad", &a.after, rank, after, "after"))
    return -1;
  a.value = value;
  rlx_node in[] = {x};
  return ir_add_node(g, RLX_OP_Pad, 1, in, &a);
}

/* The value is stored converted to the dtype (integers truncate and
 * saturate, NaN gives 0; bool is value != 0). */
int ir_infer_Pad(rlx_graph *g, ir_node *n) {
  const ir_type *x = ir_in(g, n, 0);
  const ir_attrs *a = &n->a;
  int rank = x->shape.rank;
  if (check_plain(g, n, x, "input")) return -1;
  if (check_ilist_len(g, n, &a->before, rank, "before") ||
      check_ilist_len(g, n, &a->after, rank, "after"))
    return -1;
  ir_type out = *x;
  for (int i = 0; i < rank; i++) {
    int64_t b = a->before.v[i], e = a->after.v[i], d = ir_dim_resolve(g, x->shape.d[i]);
    if (b < 0 || e < 0)
      return ir_fail(g, n, RLX_ERR_INVALID, "padding of dim %d is %lld before, %lld after; "
                     "must be >= 0", i, (long long)b, (long long)e);
    out.shape.d[i] = ir_dim_add(g, ir_dim_add(g, d, b), e);
  }
  n->out[0] = out;
  return 0;
}

/* ---------------------------------------------------------------- Gather, ScatterAdd */

rlx_node rlx_gather(rlx_graph *g, rlx_node table, rlx_node idx, int axis) {
  if (!builder_ok(g, "rlx_gather")) return -1;
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.axis = axis;
  rlx_node in[] = {table, idx};
  return ir_add_node(g, RLX_OP_Gather, 2, in, &a);
}

/* table.shape[:axis] + idx.shape + table.shape[axis+1:] into *out; -1 on error. */
static int gather_shape(rlx_graph *g, ir_node *n, const ir_type *table, const ir_type *idx,
                        ir_shape *out) {
  char b1[IR_SHAPE_STR_CAP], b2[IR_SHAPE_STR_CAP];
  int axis = ir_norm_axis(n->a.axis, table->shape.rank);
  if (axis < 0)
    return ir_fail(g, n, RLX_ERR_SHAPE, "axis %lld out of range for %s", (long long)n->a.axis,
                   SHAPE_STR(g, &table->shape, b1));
  int rank = table->shape.rank - 1 + idx->shape.rank;
  if (rank > RLX_MAX_RANK)
    return ir_fail(g, n, RLX_ERR_SHAPE, "result of indexing %s by %s has rank %d > %d",
                   SHAPE_STR(g, &table->shape, b1), SHAPE_STR(g, &idx->shape, b2), rank,
                   RLX_MAX_RANK);
  out->rank = 0;
  for (int i = 0; i < axis; i++) out->d[out->rank++] = table->shape.d[i];
  for (int i = 0; i < idx->shape.rank; i++) out->d[out->rank++] = idx->shape.d[i];
  for (int i = axis + 1; i < table->shape.rank; i++) out->d[out->rank++] = table->shape.d[i];
  n->a.axis = axis;
  return 0;
}

/* Float indices truncate toward zero; an index outside [0, dim) is a
 * run-time error (no wrap-around of negative indices). */
/* A table of a GGUF block dtype (a quantized embedding) gathers whole rows:
 * the axis is not the last, which holds the blocks. */
int ir_infer_Gather(rlx_graph *g, ir_node *n) {
  const ir_type *table = ir_in(g, n, 0), *idx = ir_in(g, n, 1);
  char b1[IR_SHAPE_STR_CAP];
  if (ir_is_block(table->dtype)) {
    int axis = ir_norm_axis(n->a.axis, table->shape.rank);
    if (axis < 0 || axis == table->shape.rank - 1)
      return ir_fail(g, n, RLX_ERR_SHAPE, "a %s table %s gathers along an axis before the last, not %lld",
                     rlx_dtype_name(table->dtype), SHAPE_STR(g, &table->shape, b1), (long long)n->a.axis);
  } else if (check_plain(g, n, table, "table")) {
    return -1;
  }
  if (check_index_dtype(g, n, idx)) return -1;
  n->out[0].dtype = table->dtype;
  return gather_shape(g, n, table, idx, &n->out[0].shape);
}

rlx_node rlx_scatter_add(rlx_graph *g, rlx_node base, rlx_node idx, rlx_node upd, int axis) {
  if (!builder_ok(g, "rlx_scatter_add")) return -1;
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.axis = axis;
  rlx_node in[] = {base, idx, upd};
  return ir_add_node(g, RLX_OP_ScatterAdd, 3, in, &a);
}

/* Duplicate indices accumulate (np.add.at); integers wrap; bool adds as
 * logical or. */
int ir_infer_ScatterAdd(rlx_graph *g, ir_node *n) {
  const ir_type *base = ir_in(g, n, 0), *idx = ir_in(g, n, 1), *upd = ir_in(g, n, 2);
  char b1[IR_SHAPE_STR_CAP], b2[IR_SHAPE_STR_CAP];
  if (check_plain(g, n, base, "base") || check_index_dtype(g, n, idx)) return -1;
  if (upd->dtype != base->dtype)
    return ir_fail(g, n, RLX_ERR_DTYPE, "updates have dtype %s, base has %s",
                   rlx_dtype_name(upd->dtype), rlx_dtype_name(base->dtype));
  ir_shape want;
  if (gather_shape(g, n, base, idx, &want)) return -1;
  int ok = upd->shape.rank == want.rank;
  for (int i = 0; ok && i < want.rank; i++) ok = dims_compatible(g, upd->shape.d[i], want.d[i]);
  if (!ok)
    return ir_fail(g, n, RLX_ERR_SHAPE, "updates %s; expected %s",
                   SHAPE_STR(g, &upd->shape, b1), SHAPE_STR(g, &want, b2));
  n->out[0] = *base;
  return 0;
}

/* ---------------------------------------------------------------- UpdateSlice */

rlx_node rlx_update_slice(rlx_graph *g, rlx_node x, rlx_node upd, rlx_node start, int axis) {
  if (!builder_ok(g, "rlx_update_slice")) return -1;
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.axis = axis;
  rlx_node in[] = {x, upd, start};
  return ir_add_node(g, RLX_OP_UpdateSlice, 3, in, &a);
}

/* start is read at run time; start < 0 or start + len(upd) > dim is a
 * run-time error (no clamping, unlike XLA's dynamic_update_slice). */
int ir_infer_UpdateSlice(rlx_graph *g, ir_node *n) {
  const ir_type *x = ir_in(g, n, 0), *upd = ir_in(g, n, 1), *start = ir_in(g, n, 2);
  char b1[IR_SHAPE_STR_CAP], b2[IR_SHAPE_STR_CAP];
  if (check_plain_or_rows(g, n, x, ir_norm_axis(n->a.axis, x->shape.rank), "input")) return -1;
  if (upd->dtype != x->dtype)
    return ir_fail(g, n, RLX_ERR_DTYPE, "update has dtype %s, input has %s",
                   rlx_dtype_name(upd->dtype), rlx_dtype_name(x->dtype));
  if (start->dtype != RLX_I32 && start->dtype != RLX_I64)
    return ir_fail(g, n, RLX_ERR_DTYPE, "start has dtype %s; expected i32 or i64",
                   rlx_dtype_name(start->dtype));
  if (start->shape.rank > 1 ||
      (start->shape.rank == 1 && !dims_compatible(g, start->shape.d[0], 1)))
    return ir_fail(g, n, RLX_ERR_SHAPE, "start has shape %s; expected a scalar or [1]",
                   SHAPE_STR(g, &start->shape, b1));
  int axis = ir_norm_axis(n->a.axis, x->shape.rank);
  if (axis < 0)
    return ir_fail(g, n, RLX_ERR_SHAPE, "axis %lld out of range for %s", (long long)n->a.axis,
                   SHAPE_STR(g, &x->shape, b1));
  int ok = upd->shape.rank == x->shape.rank;
  for (int i = 0; ok && i < x->shape.rank; i++) {
    int64_t du = ir_dim_resolve(g, upd->shape.d[i]), dx = ir_dim_resolve(g, x->shape.d[i]);
    if (i != axis) ok = dims_compatible(g, du, dx);
    else ok = ir_dim_is_sym(du) || ir_dim_is_sym(dx) || du <= dx;
  }
  if (!ok)
    return ir_fail(g, n, RLX_ERR_SHAPE, "update %s does not fit in %s along axis %d",
                   SHAPE_STR(g, &upd->shape, b1), SHAPE_STR(g, &x->shape, b2), axis);
  n->a.axis = axis;
  n->out[0] = *x;
  return 0;
}

/* ---------------------------------------------------------------- Iota, OneHot, Tri */

rlx_node rlx_iota(rlx_graph *g, rlx_dtype t, int rank, const int64_t *dims, int axis) {
  if (!builder_ok(g, "rlx_iota")) return -1;
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  if (!ilist_from(g, "rlx_iota", &a.dims, rank, dims, "dims")) return -1;
  a.axis = axis;
  a.dtype = t;
  return ir_add_node(g, RLX_OP_Iota, 0, NULL, &a);
}

/* Numeric dtypes only (not bool); rank >= 1. Integer dtypes wrap values
 * that do not fit (as NumPy's arange(n).astype(dtype)). */
int ir_infer_Iota(rlx_graph *g, ir_node *n) {
  const ir_attrs *a = &n->a;
  char b1[IR_SHAPE_STR_CAP];
  if (!ir_is_float(a->dtype) && !ir_is_int(a->dtype))
    return ir_fail(g, n, RLX_ERR_DTYPE, "dtype %s; expected a numeric dtype",
                   ir_dtype_valid(a->dtype) ? rlx_dtype_name((rlx_dtype)a->dtype) : "?");
  if (a->dims.n < 0 || a->dims.n > RLX_MAX_RANK)
    return ir_fail(g, n, RLX_ERR_INVALID, "dims has %d entries", a->dims.n);
  ir_type out = {.dtype = (rlx_dtype)a->dtype, .shape = {.rank = a->dims.n}};
  for (int i = 0; i < a->dims.n; i++) {
    out.shape.d[i] = ir_dim_resolve(g, a->dims.v[i]);
    if (!attr_dim_ok(g, out.shape.d[i]))
      return ir_fail(g, n, RLX_ERR_INVALID, "dims[%d] = %lld is not a size or a symbol", i,
                     (long long)out.shape.d[i]);
  }
  int axis = ir_norm_axis(a->axis, out.shape.rank);
  if (axis < 0)
    return ir_fail(g, n, RLX_ERR_SHAPE, "axis %lld out of range for %s", (long long)a->axis,
                   SHAPE_STR(g, &out.shape, b1));
  n->a.axis = axis;
  n->out[0] = out;
  return 0;
}

rlx_node rlx_one_hot(rlx_graph *g, rlx_node idx, int64_t depth, rlx_dtype t) {
  if (!builder_ok(g, "rlx_one_hot")) return -1;
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.depth = depth;
  a.dtype = t;
  rlx_node in[] = {idx};
  return ir_add_node(g, RLX_OP_OneHot, 1, in, &a);
}

/* out = idx.shape + [depth]; an index outside [0, depth) (negative ones
 * included) gives an all-zero row, as tf.one_hot. */
int ir_infer_OneHot(rlx_graph *g, ir_node *n) {
  const ir_type *idx = ir_in(g, n, 0);
  const ir_attrs *a = &n->a;
  if (!ir_is_int(idx->dtype))
    return ir_fail(g, n, RLX_ERR_DTYPE, "index dtype %s; expected an integer dtype",
                   rlx_dtype_name(idx->dtype));
  if (!ir_dtype_valid(a->dtype) || ir_is_block(a->dtype))
    return ir_fail(g, n, RLX_ERR_DTYPE, "dtype %s; expected a plain dtype",
                   ir_dtype_valid(a->dtype) ? rlx_dtype_name((rlx_dtype)a->dtype) : "?");
  if (a->depth < 0)
    return ir_fail(g, n, RLX_ERR_INVALID, "depth %lld < 0", (long long)a->depth);
  if (idx->shape.rank >= RLX_MAX_RANK)
    return ir_fail(g, n, RLX_ERR_SHAPE, "index rank %d leaves no room for the depth dim",
                   idx->shape.rank);
  n->out[0].dtype = (rlx_dtype)a->dtype;
  n->out[0].shape = idx->shape;
  n->out[0].shape.d[n->out[0].shape.rank++] = a->depth;
  return 0;
}

rlx_node rlx_tri(rlx_graph *g, rlx_node x, int upper, int64_t k) {
  if (!builder_ok(g, "rlx_tri")) return -1;
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.upper = upper != 0;
  a.k = k;
  rlx_node in[] = {x};
  return ir_add_node(g, RLX_OP_Tri, 1, in, &a);
}

/* numpy tril(x, k) (upper false: keeps col - row <= k) or triu(x, k)
 * (upper true: keeps col - row >= k) on the last two dims. */
int ir_infer_Tri(rlx_graph *g, ir_node *n) {
  const ir_type *x = ir_in(g, n, 0);
  char b1[IR_SHAPE_STR_CAP];
  if (check_plain(g, n, x, "input")) return -1;
  if (x->shape.rank < 2)
    return ir_fail(g, n, RLX_ERR_SHAPE, "input %s has rank < 2", SHAPE_STR(g, &x->shape, b1));
  n->out[0] = *x;
  return 0;
}

/* ---------------------------------------------------------------- StopGradient, GetOutput */

rlx_node rlx_stop_gradient(rlx_graph *g, rlx_node x) {
  if (!builder_ok(g, "rlx_stop_gradient")) return -1;
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  rlx_node in[] = {x};
  return ir_add_node(g, RLX_OP_StopGradient, 1, in, &a);
}

int ir_infer_StopGradient(rlx_graph *g, ir_node *n) {
  const ir_type *x = ir_in(g, n, 0);
  if (check_plain(g, n, x, "input")) return -1;
  n->out[0] = *x;
  return 0;
}

rlx_node rlx_get_output(rlx_graph *g, rlx_node x, int index) {
  if (!builder_ok(g, "rlx_get_output")) return -1;
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.index = index;
  rlx_node in[] = {x};
  return ir_add_node(g, RLX_OP_GetOutput, 1, in, &a);
}

int ir_infer_GetOutput(rlx_graph *g, ir_node *n) {
  const ir_node *src = &g->nodes[n->in[0]];
  if (n->a.index < 0 || n->a.index >= src->n_out)
    return ir_fail(g, n, RLX_ERR_INVALID, "index %lld out of range: %s (node %d) has %d "
                   "output(s)", (long long)n->a.index, ir_ops[src->op].name, src->id,
                   src->n_out);
  n->out[0] = src->out[n->a.index];
  return 0;
}
