/* jvp_elementwise.c — Jacobian-vector rules of the elementwise ops: the
 * sum over inputs of tangent times partial (partials.c, the same partials
 * the vector-Jacobian rules use). */
#include "autodiff.h"

static rlx_status jvp_partials(ad_ctx *c, const ir_node *n, rlx_node *tout) {
  ad_partial p[3];
  rlx_status st = ad_elementwise_partials(c, n, p);
  rlx_node t = -1;
  for (int k = 0; st == RLX_OK && k < n->n_in; k++)
    if (ad_active(c, n->in[k])) t = ad_add(c, t, ad_apply_partial(c, ad_deriv(c, n->in[k], 0), &p[k]));
  tout[0] = ad_expand_to(c, t, &n->out[0].shape);
  return st;
}

rlx_status ad_jvp_Activation(ad_ctx *c, const ir_node *n, rlx_node *tout) { return jvp_partials(c, n, tout); }
rlx_status ad_jvp_Binary(ad_ctx *c, const ir_node *n, rlx_node *tout) { return jvp_partials(c, n, tout); }
rlx_status ad_jvp_Where(ad_ctx *c, const ir_node *n, rlx_node *tout) { return jvp_partials(c, n, tout); }
rlx_status ad_jvp_Clamp(ad_ctx *c, const ir_node *n, rlx_node *tout) { return jvp_partials(c, n, tout); }
rlx_status ad_jvp_FakeQuantize(ad_ctx *c, const ir_node *n, rlx_node *tout) { return jvp_partials(c, n, tout); }

rlx_status ad_jvp_Cast(ad_ctx *c, const ir_node *n, rlx_node *tout) {
  tout[0] = rlx_cast(c->g, ad_deriv(c, n->in[0], 0), n->out[0].dtype);
  return ad_status(c);
}
