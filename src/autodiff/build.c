/* build.c — graph-building helpers of the derivative rules: constants,
 * fills, broadcasting and its inverse, boolean logic, axis moves. Each
 * returns a node of c->g, or -1 with a sticky error in c->g (so a chain of
 * helpers needs one check at the end, as the builders do). */
#include "autodiff.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

ir_type ad_type(const ad_ctx *c, rlx_node id) {
  ir_type t;
  memset(&t, 0, sizeof t);
  if (id >= 0 && id < c->g->n_nodes) t = c->g->nodes[id].out[0];
  return t;
}

rlx_status ad_status(const ad_ctx *c) { return c->g->err ? rlx_graph_status(c->g) : RLX_OK; }

/* Writes v into element i of a buffer of dtype t. Integers saturate
 * (derivative rules only make small indices and counts). */
static void store_elem(void *buf, rlx_dtype t, int64_t i, double v) {
  switch (t) {
  case RLX_F32: ((float *)buf)[i] = (float)v; break;
  case RLX_F64: ((double *)buf)[i] = v; break;
  case RLX_F16: ((uint16_t *)buf)[i] = ir_f32_to_f16((float)v); break;
  case RLX_BF16: ((uint16_t *)buf)[i] = ir_f32_to_bf16((float)v); break;
  case RLX_BOOL: ((uint8_t *)buf)[i] = v != 0; break;
  case RLX_I32: ((int32_t *)buf)[i] = (int32_t)fmax(fmin(v, 2147483647.0), -2147483648.0); break;
  case RLX_I64: ((int64_t *)buf)[i] = (int64_t)fmax(fmin(v, 9.2e18), -9.2e18); break;
  case RLX_I8: ((int8_t *)buf)[i] = (int8_t)fmax(fmin(v, 127.0), -128.0); break;
  case RLX_U8: ((uint8_t *)buf)[i] = (uint8_t)fmax(fmin(v, 255.0), 0.0); break;
  default: break;
  }
}

rlx_node ad_constant(ad_ctx *c, rlx_dtype t, int rank, const int64_t *dims, const double *v) {
  if (c->g->err) return -1;
  if (!ir_dtype_valid(t) || ir_is_block(t))
    return ir_fail(c->g, NULL, RLX_ERR_INTERNAL, "autodiff: constant of dtype %d", (int)t);
  int64_t numel = 1;
  for (int i = 0; i < rank; i++) numel *= dims[i];
  size_t nbytes = rlx_dtype_nbytes(t, numel);
  void *buf = malloc(nbytes ? nbytes : 1);
  if (!buf) return ir_fail(c->g, NULL, RLX_ERR_NOMEM, "autodiff: out of memory (constant of %zu bytes)", nbytes);
  for (int64_t i = 0; i < numel; i++) store_elem(buf, t, i, v[i]);
  rlx_node r = rlx_constant(c->g, t, rank, dims, buf);
  free(buf);
  return r;
}

rlx_node ad_scalar(ad_ctx *c, rlx_dtype t, double v) { return ad_constant(c, t, 0, NULL, &v); }

rlx_node ad_expand_to(ad_ctx *c, rlx_node v, const ir_shape *s) {
  if (v < 0) return -1;
  ir_type t = ad_type(c, v);
  if (ir_shape_eq(&t.shape, s)) return v;
  return rlx_expand(c->g, v, s->rank, s->d);
}

rlx_node ad_fill(ad_ctx *c, const ir_type *t, double v) {
  return ad_expand_to(c, ad_scalar(c, t->dtype, v), &t->shape);
}

rlx_node ad_reduce_to(ad_ctx *c, rlx_node v, const ir_shape *s) {
  if (v < 0) return -1;
  ir_type t = ad_type(c, v);
  if (ir_shape_eq(&t.shape, s)) return v;
  int r = t.shape.rank, lead = r - s->rank;
  if (lead < 0)
    return ir_fail(c->g, NULL, RLX_ERR_INTERNAL, "autodiff: cannot sum rank %d down to rank %d", r, s->rank);
  int64_t axes[RLX_MAX_RANK];
  int na = 0;
  for (int i = 0; i < r; i++)
    if (i < lead || (s->d[i - lead] == 1 && t.shape.d[i] != 1)) axes[na++] = i;
  rlx_node sum = na ? rlx_reduce(c->g, RLX_REDUCE_SUM, v, na, axes, 1) : v;
  return rlx_reshape(c->g, sum, s->rank, s->d);
}

rlx_node ad_add(ad_ctx *c, rlx_node a, rlx_node b) {
  if (a < 0) return b;
  if (b < 0) return a;
  return rlx_add(c->g, a, b);
}

rlx_node ad_scale(ad_ctx *c, rlx_node v, double k) {
  if (v < 0 || k == 1) return v;
  if (k == -1) return rlx_activation(c->g, RLX_ACT_NEG, v);
  return rlx_mul(c->g, v, ad_scalar(c, ad_type(c, v).dtype, k));
}

rlx_node ad_same_op(ad_ctx *c, const ir_node *n, const rlx_node *inputs) {
  if (c->g->err) return -1;
  return ir_copy_node(c->g, c->g, n->id, inputs);
}

rlx_node ad_not(ad_ctx *c, rlx_node b) {
  return rlx_compare(c->g, RLX_CMP_EQ, b, ad_scalar(c, RLX_BOOL, 0));
}

/* On bool, Binary max is logical or and min logical and. */
rlx_node ad_and(ad_ctx *c, rlx_node a, rlx_node b) { return rlx_min(c->g, a, b); }
rlx_node ad_or(ad_ctx *c, rlx_node a, rlx_node b) { return rlx_max(c->g, a, b); }

rlx_node ad_axis_last(ad_ctx *c, rlx_node v, int rank, int axis, int to) {
  if (axis == rank - 1) return v;
  int64_t perm[RLX_MAX_RANK];
  int k = 0;
  if (to) {
    for (int i = 0; i < rank; i++)
      if (i != axis) perm[k++] = i;
    perm[k] = axis;
  } else {
    for (int i = 0; i < rank; i++) perm[i] = i < axis ? i : i == axis ? rank - 1 : i - 1;
  }
  return rlx_transpose(c->g, v, rank, perm);
}

rlx_status ad_unsupported(ad_ctx *c, const ir_node *n, const char *what) {
  ir_fail(c->g, n, RLX_ERR_UNSUPPORTED, "no derivative: %s", what);
  return RLX_ERR_UNSUPPORTED;
}

rlx_node ad_flat_along_axis(ad_ctx *c, rlx_node idx, const ir_shape *x, int axis) {
  ir_type ti = ad_type(c, idx);
  int rank = x->rank;
  int64_t len = x->d[axis], k = ti.shape.d[axis], rows = 1;
  for (int i = 0; i < rank; i++) {
    if (ir_dim_is_sym(x->d[i]) || ir_dim_is_sym(ti.shape.d[i]))
      return ir_fail(c->g, NULL, RLX_ERR_UNSUPPORTED, "autodiff: take-along-axis needs static shapes");
    if (i != axis) rows *= x->d[i];
  }
  /* row r of the axis-last view starts at r * len */
  rlx_node last = rlx_cast(c->g, ad_axis_last(c, idx, rank, axis, 1), RLX_I64);
  int64_t rk[2] = {rows, k}, r1[2] = {rows, 1}, flat = rows * k;
  rlx_node rowi = rlx_iota(c->g, RLX_I64, 2, r1, 0);
  rlx_node base = rlx_mul(c->g, rowi, ad_scalar(c, RLX_I64, (double)len));
  rlx_node pos = rlx_add(c->g, rlx_reshape(c->g, last, 2, rk), base);
  return rlx_reshape(c->g, pos, 1, &flat);
}

rlx_conv_desc ad_conv_desc(const ir_node *n) {
  rlx_conv_desc d;
  memset(&d, 0, sizeof d);
  d.ndim = (int)n->a.ndim;
  for (int i = 0; i < d.ndim; i++) {
    d.stride[i] = n->a.stride.v[i];
    d.dilation[i] = n->a.dilation.v[i];
    d.output_pad[i] = n->a.output_pad.n ? n->a.output_pad.v[i] : 0;
    d.pad[i] = n->a.pad.v[i];
    d.pad[d.ndim + i] = n->a.pad.v[d.ndim + i];
  }
  d.groups = n->a.groups;
  return d;
}
