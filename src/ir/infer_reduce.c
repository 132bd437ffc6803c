/* infer_reduce.c — builders and shape inference of the reductions
 * (Reduce, ArgMax, ArgMin, Cumsum, TopK) and the normalizers (Softmax,
 * LogSoftmax, LayerNorm, RmsNorm, GroupNorm, BatchNorm). */
#include "ir.h"

#include <string.h>

/* ---------------------------------------------------------------- helpers */

/* Plain (non-block) numeric dtype; BOOL allowed only when allow_bool. */
static int is_plain_numeric(rlx_dtype t, int allow_bool) {
  return ir_is_float(t) || ir_is_int(t) || (allow_bool && t == RLX_BOOL);
}

/* Normalizes n->a.axis against rank in place; fails with RLX_ERR_SHAPE. */
static int norm_axis_attr(rlx_graph *g, ir_node *n, int rank) {
  int ax = ir_norm_axis(n->a.axis, rank);
  if (ax < 0)
    return ir_fail(g, n, RLX_ERR_SHAPE, "axis %lld out of range for rank %d",
                   (long long)n->a.axis, rank);
  n->a.axis = ax;
  return 0;
}

/* Type of x with dim `axis` removed (or set to 1 with keep_dim). */
static void drop_axis(const ir_type *x, int axis, int keep_dim, rlx_dtype dtype, ir_type *out) {
  out->dtype = dtype;
  out->shape.rank = 0;
  for (int i = 0; i < x->shape.rank; i++) {
    if (i == axis && !keep_dim) continue;
    out->shape.d[out->shape.rank++] = i == axis ? 1 : x->shape.d[i];
  }
}

static int check_eps(rlx_graph *g, ir_node *n) {
  if (!(n->a.eps >= 0) || isinf(n->a.eps))
    return ir_fail(g, n, RLX_ERR_INVALID, "eps %g must be finite and >= 0", n->a.eps);
  return 0;
}

/* ---------------------------------------------------------------- Reduce */

rlx_node rlx_reduce(rlx_graph *g, rlx_reduce_op op, rlx_node x, int naxes,
                    const int64_t *axes, int keep_dim) {
  if (!g) return -1;
  if (naxes < 0 || naxes > RLX_MAX_RANK || (naxes > 0 && !axes)) {
    /* Cannot be stored in the attrs; report against the node it would be. */
    ir_node tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.op = RLX_OP_Reduce;
    tmp.id = g->n_nodes;
    return ir_fail(g, &tmp, RLX_ERR_INVALID, "%d axes given (at most %d, axes not NULL)",
                   naxes, RLX_MAX_RANK);
  }
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.reduce = op;
  a.axes.n = naxes;
  for (int i = 0; i < naxes; i++) a.axes.v[i] = axes[i];
  a.keep_dim = keep_dim != 0;
  rlx_node in[] = {x};
  return ir_add_node(g, RLX_OP_Reduce, 1, in, &a);
}

/* Axes are normalized, checked for repeats (RLX_ERR_INVALID) and sorted;
 * an empty list is replaced by every axis (so later stages always see the
 * explicit list; a rank-0 x keeps an empty list and reduces nothing).
 * Integer dtypes take sum/prod (wrapping in int64), max, min; mean on an
 * integer dtype is RLX_ERR_DTYPE. max/min over a zero-size axis is
 * RLX_ERR_SHAPE (no identity); sum gives 0, prod 1, mean NaN (0/0). */
int ir_infer_Reduce(rlx_graph *g, ir_node *n) {
  const ir_type *x = ir_in(g, n, 0);
  int rank = x->shape.rank;
  int64_t op = n->a.reduce;
  if (op < 0 || op >= RLX_REDUCE_COUNT)
    return ir_fail(g, n, RLX_ERR_INVALID, "reduce op %lld unknown", (long long)op);
  if (ir_is_int(x->dtype)) {
    if (op == RLX_REDUCE_MEAN)
      return ir_fail(g, n, RLX_ERR_DTYPE, "mean of integer dtype %s", rlx_dtype_name(x->dtype));
  } else if (!ir_is_float(x->dtype)) {
    return ir_fail(g, n, RLX_ERR_DTYPE, "dtype %s not reducible", rlx_dtype_name(x->dtype));
  }

  ir_ilist *ax = &n->a.axes;
  if (ax->n < 0 || ax->n > RLX_MAX_RANK)
    return ir_fail(g, n, RLX_ERR_INVALID, "%d axes (at most %d)", ax->n, RLX_MAX_RANK);
  if (ax->n == 0) {
    for (int i = 0; i < rank; i++) ax->v[i] = i;
    ax->n = rank;
  }
  int reduced[RLX_MAX_RANK] = {0};
  char buf[IR_SHAPE_STR_CAP];
  for (int i = 0; i < ax->n; i++) {
    int a = ir_norm_axis(ax->v[i], rank);
    if (a < 0)
      return ir_fail(g, n, RLX_ERR_SHAPE, "axis %lld out of range for x %s",
                     (long long)ax->v[i], ir_shape_str(g, &x->shape, buf, sizeof buf));
    if (reduced[a])
      return ir_fail(g, n, RLX_ERR_INVALID, "axis %lld repeated (axis %d)",
                     (long long)ax->v[i], a);
    reduced[a] = 1;
  }
  ax->n = 0;
  for (int i = 0; i < rank; i++) {
    if (!reduced[i]) continue;
    ax->v[ax->n++] = i;
    if (x->shape.d[i] == 0 && (op == RLX_REDUCE_MAX || op == RLX_REDUCE_MIN))
      return ir_fail(g, n, RLX_ERR_SHAPE, "%s over zero-size axis %d of x %s",
                     ir_reduce_names[op], i, ir_shape_str(g, &x->shape, buf, sizeof buf));
  }

  ir_type *out = &n->out[0];
  out->dtype = x->dtype;
  out->shape.rank = 0;
  for (int i = 0; i < rank; i++) {
    if (reduced[i] && !n->a.keep_dim) continue;
    out->shape.d[out->shape.rank++] = reduced[i] ? 1 : x->shape.d[i];
  }
  return 0;
}

/* ---------------------------------------------------------------- ArgMax / ArgMin */

rlx_node rlx_argmax(rlx_graph *g, rlx_node x, int axis, int keep_dim) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.axis = axis;
  a.keep_dim = keep_dim != 0;
  rlx_node in[] = {x};
  return ir_add_node(g, RLX_OP_ArgMax, 1, in, &a);
}

rlx_node rlx_argmin(rlx_graph *g, rlx_node x, int axis, int keep_dim) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.axis = axis;
  a.keep_dim = keep_dim != 0;
  rlx_node in[] = {x};
  return ir_add_node(g, RLX_OP_ArgMin, 1, in, &a);
}

/* ArgMax/ArgMin: any plain dtype including BOOL (as NumPy); output I64.
 * Ties give the first index. NaN as NumPy: the first NaN wins for both
 * ArgMax and ArgMin. A zero-size axis is RLX_ERR_SHAPE (no index). */
static int infer_arg(rlx_graph *g, ir_node *n) {
  const ir_type *x = ir_in(g, n, 0);
  if (!is_plain_numeric(x->dtype, 1))
    return ir_fail(g, n, RLX_ERR_DTYPE, "dtype %s not supported", rlx_dtype_name(x->dtype));
  if (norm_axis_attr(g, n, x->shape.rank) < 0) return -1;
  int axis = (int)n->a.axis;
  if (x->shape.d[axis] == 0) {
    char buf[IR_SHAPE_STR_CAP];
    return ir_fail(g, n, RLX_ERR_SHAPE, "zero-size axis %d of x %s", axis,
                   ir_shape_str(g, &x->shape, buf, sizeof buf));
  }
  drop_axis(x, axis, (int)n->a.keep_dim, RLX_I64, &n->out[0]);
  return 0;
}

int ir_infer_ArgMax(rlx_graph *g, ir_node *n) { return infer_arg(g, n); }
int ir_infer_ArgMin(rlx_graph *g, ir_node *n) { return infer_arg(g, n); }

/* ---------------------------------------------------------------- Cumsum */

rlx_node rlx_cumsum(rlx_graph *g, rlx_node x, int axis, int exclusive, int reverse) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.axis = axis;
  a.exclusive = exclusive != 0;
  a.reverse = reverse != 0;
  rlx_node in[] = {x};
  return ir_add_node(g, RLX_OP_Cumsum, 1, in, &a);
}

/* Floats (summed in double) and integers (wrapping in int64, then stored in
 * the dtype); BOOL is RLX_ERR_DTYPE. exclusive: out[i] sums the elements
 * before i (out[first] = 0); reverse: sums run from the end. */
int ir_infer_Cumsum(rlx_graph *g, ir_node *n) {
  const ir_type *x = ir_in(g, n, 0);
  if (!is_plain_numeric(x->dtype, 0))
    return ir_fail(g, n, RLX_ERR_DTYPE, "dtype %s not supported", rlx_dtype_name(x->dtype));
  if (norm_axis_attr(g, n, x->shape.rank) < 0) return -1;
  n->out[0] = *x;
  return 0;
}

/* ---------------------------------------------------------------- TopK */

rlx_node rlx_topk(rlx_graph *g, rlx_node x, int64_t k, int axis, rlx_node *indices) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.k = k;
  a.axis = axis;
  rlx_node in[] = {x};
  rlx_node topk = ir_add_node(g, RLX_OP_TopK, 1, in, &a);
  if (indices) *indices = topk < 0 ? -1 : rlx_get_output(g, topk, 1);
  return topk;
}

/* Output 0: values (x dtype), output 1: I64 indices; both x.shape with
 * dim axis = k. Largest first, ties by lower index. NaN counts as larger
 * than every number (as torch.topk), so NaNs come first. Floats and
 * integers; 1 <= k <= dim else RLX_ERR_SHAPE. */
int ir_infer_TopK(rlx_graph *g, ir_node *n) {
  const ir_type *x = ir_in(g, n, 0);
  if (!is_plain_numeric(x->dtype, 0))
    return ir_fail(g, n, RLX_ERR_DTYPE, "dtype %s not supported", rlx_dtype_name(x->dtype));
  if (norm_axis_attr(g, n, x->shape.rank) < 0) return -1;
  int axis = (int)n->a.axis;
  int64_t dim = x->shape.d[axis];
  if (n->a.k < 1 || (!ir_dim_is_sym(dim) && n->a.k > dim)) {
    char buf[IR_SHAPE_STR_CAP];
    return ir_fail(g, n, RLX_ERR_SHAPE, "k %lld out of range for axis %d of x %s",
                   (long long)n->a.k, axis, ir_shape_str(g, &x->shape, buf, sizeof buf));
  }
  n->out[0] = *x;
  n->out[0].shape.d[axis] = n->a.k;
  n->out[1] = n->out[0];
  n->out[1].dtype = RLX_I64;
  return 0;
}

/* ---------------------------------------------------------------- Softmax / LogSoftmax */

rlx_node rlx_softmax(rlx_graph *g, rlx_node x, int axis) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.axis = axis;
  rlx_node in[] = {x};
  return ir_add_node(g, RLX_OP_Softmax, 1, in, &a);
}

rlx_node rlx_log_softmax(rlx_graph *g, rlx_node x, int axis) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.axis = axis;
  rlx_node in[] = {x};
  return ir_add_node(g, RLX_OP_LogSoftmax, 1, in, &a);
}

/* Floats only, rank >= 1. Max-subtracted, in double. A row whose entries
 * are all -inf gives NaN (as NumPy, PyTorch, JAX: the max-subtracted
 * -inf - -inf is NaN); a NaN anywhere in a row makes the row NaN. */
static int infer_softmax(rlx_graph *g, ir_node *n) {
  if (ir_require_float_inputs(g, n, n->n_in) < 0) return -1;
  const ir_type *x = ir_in(g, n, 0);
  if (norm_axis_attr(g, n, x->shape.rank) < 0) return -1;
  n->out[0] = *x;
  return 0;
}

int ir_infer_Softmax(rlx_graph *g, ir_node *n) { return infer_softmax(g, n); }
int ir_infer_LogSoftmax(rlx_graph *g, ir_node *n) { return infer_softmax(g, n); }

/* ---------------------------------------------------------------- LayerNorm / RmsNorm */

rlx_node rlx_layer_norm(rlx_graph *g, rlx_node x, rlx_node gamma, rlx_node beta, int axis,
                        double eps) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.axis = axis;
  a.eps = eps;
  rlx_node in[] = {x, gamma, beta};
  return ir_add_node(g, RLX_OP_LayerNorm, 3, in, &a);
}

rlx_node rlx_rms_norm(rlx_graph *g, rlx_node x, rlx_node gamma, rlx_node beta, int axis,
                      double eps) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.axis = axis;
  a.eps = eps;
  rlx_node in[] = {x, gamma, beta};
  return ir_add_node(g, RLX_OP_RmsNorm, 3, in, &a);
}

/* Normalizes over axes [axis, rank) of x (rank >= 1); gamma and beta have
 * shape x.shape[axis:] exactly (no broadcasting: RLX_ERR_SHAPE otherwise).
 * eps must be finite and >= 0 (RLX_ERR_INVALID). */
static int infer_last_axes_norm(rlx_graph *g, ir_node *n) {
  if (ir_require_float_inputs(g, n, n->n_in) < 0 || check_eps(g, n) < 0) return -1;
  const ir_type *x = ir_in(g, n, 0);
  if (norm_axis_attr(g, n, x->shape.rank) < 0) return -1;
  ir_shape tail;
  tail.rank = x->shape.rank - (int)n->a.axis;
  for (int i = 0; i < tail.rank; i++) tail.d[i] = x->shape.d[n->a.axis + i];
  for (int i = 1; i <= 2; i++) {
    const ir_shape *s = &ir_in(g, n, i)->shape;
    if (!ir_shapes_compatible(s, &tail)) {
      char bs[IR_SHAPE_STR_CAP], bx[IR_SHAPE_STR_CAP];
      return ir_fail(g, n, RLX_ERR_SHAPE, "%s %s must equal x.shape[%lld:] of x %s",
                     i == 1 ? "gamma" : "beta", ir_shape_str(g, s, bs, sizeof bs),
                     (long long)n->a.axis, ir_shape_str(g, &x->shape, bx, sizeof bx));
    }
  }
  n->out[0] = *x;
  return 0;
}

int ir_infer_LayerNorm(rlx_graph *g, ir_node *n) { return infer_last_axes_norm(g, n); }
int ir_infer_RmsNorm(rlx_graph *g, ir_node *n) { return infer_last_axes_norm(g, n); }

/* ---------------------------------------------------------------- GroupNorm / BatchNorm */

rlx_node rlx_group_norm(rlx_graph *g, rlx_node x, rlx_node gamma, rlx_node beta,
                        int64_t groups, double eps) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.groups = groups;
  a.eps = eps;
  rlx_node in[] = {x, gamma, beta};
  return ir_add_node(g, RLX_OP_GroupNorm, 3, in, &a);
}

rlx_node rlx_batch_norm(rlx_graph *g, rlx_node x, rlx_node mean, rlx_node var, rlx_node gamma,
                        rlx_node beta, double eps) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.eps = eps;
  rlx_node in[] = {x, mean, var, gamma, beta};
  return ir_add_node(g, RLX_OP_BatchNorm, 5, in, &a);
}

/* x is [N, C, ...] (rank >= 2); every other input (named in `names`) is [C]. */
static int check_channel_inputs(rlx_graph *g, ir_node *n, const char *const *names) {
  const ir_type *x = ir_in(g, n, 0);
  char bx[IR_SHAPE_STR_CAP], bs[IR_SHAPE_STR_CAP];
  if (x->shape.rank < 2)
    return ir_fail(g, n, RLX_ERR_SHAPE, "x %s must be [N, C, ...] (rank >= 2)",
                   ir_shape_str(g, &x->shape, bx, sizeof bx));
  for (int i = 1; i < n->n_in; i++) {
    const ir_shape *s = &ir_in(g, n, i)->shape;
    if (s->rank != 1 || !ir_dims_compatible(s->d[0], x->shape.d[1]))
      return ir_fail(g, n, RLX_ERR_SHAPE, "%s %s must be [C] for x %s", names[i - 1],
                     ir_shape_str(g, s, bs, sizeof bs),
                     ir_shape_str(g, &x->shape, bx, sizeof bx));
  }
  return 0;
}

/* groups >= 1 (RLX_ERR_INVALID); C % groups == 0 (RLX_ERR_SHAPE). Mean and
 * biased variance over each (n, group): C/groups channels x spatial. */
int ir_infer_GroupNorm(rlx_graph *g, ir_node *n) {
  static const char *const names[] = {"gamma", "beta"};
  if (ir_require_float_inputs(g, n, n->n_in) < 0 || check_eps(g, n) < 0 ||
      check_channel_inputs(g, n, names) < 0)
    return -1;
  const ir_type *x = ir_in(g, n, 0);
  if (n->a.groups < 1)
    return ir_fail(g, n, RLX_ERR_INVALID, "groups %lld must be >= 1", (long long)n->a.groups);
  int64_t c = x->shape.d[1];
  if (!ir_dim_is_sym(c) && c % n->a.groups != 0) {
    char bx[IR_SHAPE_STR_CAP];
    return ir_fail(g, n, RLX_ERR_SHAPE, "C of x %s not divisible by groups %lld",
                   ir_shape_str(g, &x->shape, bx, sizeof bx), (long long)n->a.groups);
  }
  n->out[0] = *x;
  return 0;
}

/* Inference form: (x - mean[c]) / sqrt(var[c] + eps) * gamma[c] + beta[c]. */
int ir_infer_BatchNorm(rlx_graph *g, ir_node *n) {
  static const char *const names[] = {"mean", "var", "gamma", "beta"};
  if (ir_require_float_inputs(g, n, n->n_in) < 0 || check_eps(g, n) < 0 ||
      check_channel_inputs(g, n, names) < 0)
    return -1;
  n->out[0] = *ir_in(g, n, 0);
  return 0;
}
