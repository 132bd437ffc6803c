/* vjp_reduce.c — vector-Jacobian rules of the reductions and normalizers:
 * Reduce, Cumsum, TopK, Softmax, LogSoftmax, and (through their
 * expansions into primitives) LayerNorm, RmsNorm, GroupNorm, BatchNorm. */
#include "autodiff.h"

/* The gradient broadcast back over the reduced axes, times the reduction's
 * weight (partials.c). */
rlx_status ad_vjp_Reduce(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  ir_type tx = ad_type(c, n->in[0]);
  ir_shape keep = ad_reduce_keep_shape(c, n);
  rlx_node g = n->a.keep_dim ? gout[0] : rlx_reshape(c->g, gout[0], keep.rank, keep.d);
  rlx_node w = ad_reduce_weight(c, n);
  if (w >= 0) g = rlx_mul(c->g, g, w);
  return ad_accum(c, n->in[0], 0, ad_expand_to(c, g, &tx.shape));
}

/* The transpose of a running sum is the running sum the other way. */
rlx_status ad_vjp_Cumsum(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  return ad_accum(c, n->in[0], 0, rlx_cumsum(c->g, gout[0], (int)n->a.axis, (int)n->a.exclusive, !n->a.reverse));
}

/* The values' gradient goes back to the positions the indices name. */
rlx_status ad_vjp_TopK(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  if (gout[0] < 0) return RLX_OK;
  ir_type tx = ad_type(c, n->in[0]);
  const int rank = tx.shape.rank, axis = (int)n->a.axis;
  rlx_node flat = ad_flat_along_axis(c, rlx_get_output(c->g, n->id, 1), &tx.shape, axis);
  /* x's shape with the axis moved last */
  ir_shape last = {0, {0}};
  int64_t count = 1;
  for (int i = 0; i < rank; i++)
    if (i != axis) last.d[last.rank++] = tx.shape.d[i];
  last.d[last.rank++] = tx.shape.d[axis];
  for (int i = 0; i < rank; i++) count *= tx.shape.d[i];
  int64_t picked = ad_type(c, flat).shape.d[0];
  rlx_node g = rlx_reshape(c->g, ad_axis_last(c, gout[0], rank, axis, 1), 1, &picked);
  ir_type flat_x = {tx.dtype, {1, {count}}};
  rlx_node sc = rlx_scatter_add(c->g, ad_fill(c, &flat_x, 0.0), flat, g, 0);
  rlx_node gx = ad_axis_last(c, rlx_reshape(c->g, sc, last.rank, last.d), rank, axis, 0);
  return ad_accum(c, n->in[0], 0, gx);
}

rlx_status ad_vjp_Softmax(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  return ad_accum(c, n->in[0], 0, ad_softmax_jacobian(c, n, gout[0]));
}

/* g - softmax(x) * sum(g), softmax(x) = exp(y). */
rlx_status ad_vjp_LogSoftmax(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  int64_t axis = n->a.axis;
  rlx_node s = rlx_reduce(c->g, RLX_REDUCE_SUM, gout[0], 1, &axis, 1);
  rlx_node p = rlx_activation(c->g, RLX_ACT_EXP, n->id);
  return ad_accum(c, n->in[0], 0, rlx_sub(c->g, gout[0], rlx_mul(c->g, p, s)));
}

rlx_status ad_vjp_LayerNorm(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  return ad_vjp_expanded(c, n, gout, ad_expand_layer_norm);
}
rlx_status ad_vjp_RmsNorm(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  return ad_vjp_expanded(c, n, gout, ad_expand_rms_norm);
}
rlx_status ad_vjp_GroupNorm(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  return ad_vjp_expanded(c, n, gout, ad_expand_group_norm);
}
rlx_status ad_vjp_BatchNorm(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  return ad_vjp_expanded(c, n, gout, ad_expand_batch_norm);
}
