/* jvp_reduce.c — Jacobian-vector rules of the reductions and normalizers:
 * Reduce, Cumsum, TopK, Softmax, LogSoftmax, and (through their
 * expansions) LayerNorm, RmsNorm, GroupNorm, BatchNorm. */
#include "autodiff.h"

/* sum over the reduced axes of the tangent times the reduction's weight. */
rlx_status ad_jvp_Reduce(ad_ctx *c, const ir_node *n, rlx_node *tout) {
  rlx_node t = ad_deriv(c, n->in[0], 0), w = ad_reduce_weight(c, n);
  if (w >= 0) t = rlx_mul(c->g, t, w);
  tout[0] = n->a.axes.n ? rlx_reduce(c->g, RLX_REDUCE_SUM, t, n->a.axes.n, n->a.axes.v, (int)n->a.keep_dim) : t;
  return ad_status(c);
}

rlx_status ad_jvp_Cumsum(ad_ctx *c, const ir_node *n, rlx_node *tout) {
  rlx_node t = ad_deriv(c, n->in[0], 0);
  tout[0] = ad_same_op(c, n, &t);
  return ad_status(c);
}

/* The values' tangent is the tangent taken at the chosen indices. */
rlx_status ad_jvp_TopK(ad_ctx *c, const ir_node *n, rlx_node *tout) {
  ir_type tx = ad_type(c, n->in[0]);
  const int rank = tx.shape.rank, axis = (int)n->a.axis;
  rlx_node flat = ad_flat_along_axis(c, rlx_get_output(c->g, n->id, 1), &tx.shape, axis);
  ir_shape last = {0, {0}};
  int64_t count = 1;
  for (int i = 0; i < rank; i++) {
    count *= tx.shape.d[i];
    if (i != axis) last.d[last.rank++] = tx.shape.d[i];
  }
  last.d[last.rank++] = n->a.k;
  rlx_node t = rlx_reshape(c->g, ad_axis_last(c, ad_deriv(c, n->in[0], 0), rank, axis, 1), 1, &count);
  rlx_node picked = rlx_reshape(c->g, rlx_gather(c->g, t, flat, 0), last.rank, last.d);
  tout[0] = ad_axis_last(c, picked, rank, axis, 0);
  return ad_status(c);
}

rlx_status ad_jvp_Softmax(ad_ctx *c, const ir_node *n, rlx_node *tout) {
  tout[0] = ad_softmax_jacobian(c, n, ad_deriv(c, n->in[0], 0));
  return ad_status(c);
}

/* t - sum(softmax(x) * t), softmax(x) = exp(y). */
rlx_status ad_jvp_LogSoftmax(ad_ctx *c, const ir_node *n, rlx_node *tout) {
  int64_t axis = n->a.axis;
  rlx_node t = ad_deriv(c, n->in[0], 0);
  rlx_node p = rlx_activation(c->g, RLX_ACT_EXP, n->id);
  tout[0] = rlx_sub(c->g, t, rlx_reduce(c->g, RLX_REDUCE_SUM, rlx_mul(c->g, p, t), 1, &axis, 1));
  return ad_status(c);
}

rlx_status ad_jvp_LayerNorm(ad_ctx *c, const ir_node *n, rlx_node *tout) {
  return ad_jvp_expanded(c, n, tout, ad_expand_layer_norm);
}
rlx_status ad_jvp_RmsNorm(ad_ctx *c, const ir_node *n, rlx_node *tout) {
  return ad_jvp_expanded(c, n, tout, ad_expand_rms_norm);
}
rlx_status ad_jvp_GroupNorm(ad_ctx *c, const ir_node *n, rlx_node *tout) {
  return ad_jvp_expanded(c, n, tout, ad_expand_group_norm);
}
rlx_status ad_jvp_BatchNorm(ad_ctx *c, const ir_node *n, rlx_node *tout) {
  return ad_jvp_expanded(c, n, tout, ad_expand_batch_norm);
}
