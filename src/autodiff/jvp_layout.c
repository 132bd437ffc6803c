/* jvp_layout.c — Jacobian-vector rules of the layout and data-movement
 * ops: they are linear in their data inputs, so the tangent is the op
 * applied to the inputs' tangents (zeros where an input is constant);
 * indices and starts stay as they are. */
#include "autodiff.h"

#include <stdlib.h>

/* The tangent of node in, or zeros of its type. */
static rlx_node tangent_or_zeros(ad_ctx *c, rlx_node in) {
  rlx_node t = ad_deriv(c, in, 0);
  if (t >= 0) return t;
  ir_type ty = ad_type(c, in);
  return ad_fill(c, &ty, 0.0);
}

/* The op on the tangent of input 0, other inputs as they are. */
static rlx_status same_on_first(ad_ctx *c, const ir_node *n, rlx_node *tout) {
  rlx_node in[3] = {ad_deriv(c, n->in[0], 0), n->n_in > 1 ? n->in[1] : -1, n->n_in > 2 ? n->in[2] : -1};
  tout[0] = ad_same_op(c, n, in);
  return ad_status(c);
}

rlx_status ad_jvp_Reshape(ad_ctx *c, const ir_node *n, rlx_node *tout) { return same_on_first(c, n, tout); }
rlx_status ad_jvp_Expand(ad_ctx *c, const ir_node *n, rlx_node *tout) { return same_on_first(c, n, tout); }
rlx_status ad_jvp_Transpose(ad_ctx *c, const ir_node *n, rlx_node *tout) { return same_on_first(c, n, tout); }
rlx_status ad_jvp_Narrow(ad_ctx *c, const ir_node *n, rlx_node *tout) { return same_on_first(c, n, tout); }
rlx_status ad_jvp_Slice(ad_ctx *c, const ir_node *n, rlx_node *tout) { return same_on_first(c, n, tout); }
rlx_status ad_jvp_Tri(ad_ctx *c, const ir_node *n, rlx_node *tout) { return same_on_first(c, n, tout); }
/* the gather indices stay (input 1) */
rlx_status ad_jvp_Gather(ad_ctx *c, const ir_node *n, rlx_node *tout) { return same_on_first(c, n, tout); }

/* The forward pass is the identity, so is its tangent (only gradients
 * are reversed). */
rlx_status ad_jvp_GradientReversal(ad_ctx *c, const ir_node *n, rlx_node *tout) {
  tout[0] = ad_deriv(c, n->in[0], 0);
  return ad_status(c);
}

/* Padding with the constant value: its tangent is zero. */
rlx_status ad_jvp_Pad(ad_ctx *c, const ir_node *n, rlx_node *tout) {
  ir_shape s = ad_type(c, n->in[0]).shape;
  tout[0] = rlx_pad(c->g, ad_deriv(c, n->in[0], 0), s.rank, n->a.before.v, n->a.after.v, 0.0);
  return ad_status(c);
}

rlx_status ad_jvp_Concat(ad_ctx *c, const ir_node *n, rlx_node *tout) {
  rlx_node small[8] = {0}, *in = n->n_in <= 8 ? small : malloc((size_t)n->n_in * sizeof *in);
  if (!in) return ir_fail(c->g, n, RLX_ERR_NOMEM, "autodiff: out of memory"), RLX_ERR_NOMEM;
  for (int k = 0; k < n->n_in; k++) in[k] = tangent_or_zeros(c, n->in[k]);
  tout[0] = ad_same_op(c, n, in);
  if (in != small) free(in);
  return ad_status(c);
}

rlx_status ad_jvp_ScatterAdd(ad_ctx *c, const ir_node *n, rlx_node *tout) {
  rlx_node in[3] = {tangent_or_zeros(c, n->in[0]), n->in[1], tangent_or_zeros(c, n->in[2])};
  tout[0] = ad_same_op(c, n, in);
  return ad_status(c);
}

rlx_status ad_jvp_UpdateSlice(ad_ctx *c, const ir_node *n, rlx_node *tout) {
  rlx_node in[3] = {tangent_or_zeros(c, n->in[0]), tangent_or_zeros(c, n->in[1]), n->in[2]};
  tout[0] = ad_same_op(c, n, in);
  return ad_status(c);
}

rlx_status ad_jvp_GetOutput(ad_ctx *c, const ir_node *n, rlx_node *tout) {
  tout[0] = ad_deriv(c, n->in[0], (int)n->a.index);
  return ad_status(c);
}
