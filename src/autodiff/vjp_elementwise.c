/* vjp_elementwise.c — vector-Jacobian rules of the elementwise ops:
 * Activation, Binary, Where, Cast, Clamp, FakeQuantize. Each input gets
 * the output gradient times its partial (partials.c), summed back over the
 * axes it was broadcast along. */
#include "autodiff.h"

static rlx_status vjp_partials(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  ad_partial p[3];
  rlx_status st = ad_elementwise_partials(c, n, p);
  for (int k = 0; st == RLX_OK && k < n->n_in; k++) {
    if (!ad_active(c, n->in[k])) continue;
    ir_shape s = ad_type(c, n->in[k]).shape;
    st = ad_accum(c, n->in[k], 0, ad_reduce_to(c, ad_apply_partial(c, gout[0], &p[k]), &s));
  }
  return st;
}

rlx_status ad_vjp_Activation(ad_ctx *c, const ir_node *n, const rlx_node *gout) { return vjp_partials(c, n, gout); }
rlx_status ad_vjp_Binary(ad_ctx *c, const ir_node *n, const rlx_node *gout) { return vjp_partials(c, n, gout); }
rlx_status ad_vjp_Where(ad_ctx *c, const ir_node *n, const rlx_node *gout) { return vjp_partials(c, n, gout); }
rlx_status ad_vjp_Clamp(ad_ctx *c, const ir_node *n, const rlx_node *gout) { return vjp_partials(c, n, gout); }
rlx_status ad_vjp_FakeQuantize(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  return vjp_partials(c, n, gout);
}

/* Between float types the gradient is cast back; an integer or bool
 * source is never active. */
rlx_status ad_vjp_Cast(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  if (!ad_active(c, n->in[0])) return RLX_OK;
  return ad_accum(c, n->in[0], 0, rlx_cast(c->g, gout[0], ad_type(c, n->in[0]).dtype));
}
