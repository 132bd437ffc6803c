/* jvp_linalg.c — Jacobian-vector rules of MatMul, DequantMatMul,
 * Attention (expanded) and Rope. */
#include "autodiff.h"

/* d(a @ b) = da @ b + a @ db. */
rlx_status ad_jvp_MatMul(ad_ctx *c, const ir_node *n, rlx_node *tout) {
  rlx_node ta = ad_deriv(c, n->in[0], 0), tb = ad_deriv(c, n->in[1], 0);
  rlx_node t = ta >= 0 ? rlx_matmul(c->g, ta, n->in[1]) : -1;
  if (tb >= 0) t = ad_add(c, t, rlx_matmul(c->g, n->in[0], tb));
  tout[0] = t;
  return ad_status(c);
}

/* Linear in x; a packed weight is constant, an F16/BF16 one adds
 * x @ tw^T (its tangent widened to x's dtype). */
rlx_status ad_jvp_DequantMatMul(ad_ctx *c, const ir_node *n, rlx_node *tout) {
  rlx_node tx = ad_deriv(c, n->in[0], 0);
  rlx_node tw = ir_is_block(ad_type(c, n->in[1]).dtype) ? -1 : ad_deriv(c, n->in[1], 0);
  rlx_node in[2] = {tx, n->in[1]};
  rlx_node t = tx >= 0 ? ad_same_op(c, n, in) : -1;
  if (tw >= 0) {
    const int64_t perm[2] = {1, 0};
    rlx_node twx = rlx_cast(c->g, tw, ad_type(c, n->in[0]).dtype);
    t = ad_add(c, t, rlx_matmul(c->g, n->in[0], rlx_transpose(c->g, twx, 2, perm)));
  }
  tout[0] = t;
  return ad_status(c);
}

rlx_status ad_jvp_Attention(ad_ctx *c, const ir_node *n, rlx_node *tout) {
  return ad_jvp_expanded(c, n, tout, ad_expand_attention);
}

/* Linear in x (positions and constant tables stay); tangents of the
 * tables go through the expansion. */
rlx_status ad_jvp_Rope(ad_ctx *c, const ir_node *n, rlx_node *tout) {
  if (n->n_in == 3 && (ad_deriv(c, n->in[1], 0) >= 0 || ad_deriv(c, n->in[2], 0) >= 0))
    return ad_jvp_expanded(c, n, tout, ad_expand_rope);
  rlx_node in[3] = {ad_deriv(c, n->in[0], 0), n->in[1], n->n_in == 3 ? n->in[2] : -1};
  tout[0] = ad_same_op(c, n, in);
  return ad_status(c);
}
