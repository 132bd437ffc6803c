/* jvp_conv.c — Jacobian-vector rules of the convolution, pooling,
 * resizing and signal ops. Conv and ConvTranspose are bilinear in (x, w)
 * and linear in the bias; the resizes and the FFT are linear; Pool and
 * LogMel go through their expansions. */
#include "autodiff.h"

/* op(tx, w) + op(x, tw) + tb over channels. */
static rlx_status jvp_conv_like(ad_ctx *c, const ir_node *n, rlx_node *tout,
                                rlx_node (*op)(rlx_graph *, rlx_node, rlx_node, rlx_node, const rlx_conv_desc *)) {
  rlx_conv_desc d = ad_conv_desc(n);
  rlx_node tx = ad_deriv(c, n->in[0], 0), tw = ad_deriv(c, n->in[1], 0);
  rlx_node tb = n->n_in == 3 ? ad_deriv(c, n->in[2], 0) : -1;
  rlx_node t = tx >= 0 ? op(c->g, tx, n->in[1], -1, &d) : -1;
  if (tw >= 0) t = ad_add(c, t, op(c->g, n->in[0], tw, -1, &d));
  if (tb >= 0) {
    int64_t ch[3] = {ad_type(c, tb).shape.d[0], 1, 1};
    t = ad_add(c, t, rlx_reshape(c->g, tb, 1 + (int)n->a.ndim, ch));
  }
  tout[0] = ad_expand_to(c, t, &n->out[0].shape);
  return ad_status(c);
}

rlx_status ad_jvp_Conv(ad_ctx *c, const ir_node *n, rlx_node *tout) { return jvp_conv_like(c, n, tout, rlx_conv); }
rlx_status ad_jvp_ConvTranspose(ad_ctx *c, const ir_node *n, rlx_node *tout) {
  return jvp_conv_like(c, n, tout, rlx_conv_transpose);
}

rlx_status ad_jvp_Pool(ad_ctx *c, const ir_node *n, rlx_node *tout) {
  return ad_jvp_expanded(c, n, tout, ad_expand_pool);
}

static rlx_status jvp_linear(ad_ctx *c, const ir_node *n, rlx_node *tout) {
  rlx_node t = ad_deriv(c, n->in[0], 0);
  tout[0] = ad_same_op(c, n, &t);
  return ad_status(c);
}

rlx_status ad_jvp_ResizeNearest2x(ad_ctx *c, const ir_node *n, rlx_node *tout) { return jvp_linear(c, n, tout); }
rlx_status ad_jvp_Resize(ad_ctx *c, const ir_node *n, rlx_node *tout) { return jvp_linear(c, n, tout); }
rlx_status ad_jvp_Fft(ad_ctx *c, const ir_node *n, rlx_node *tout) { return jvp_linear(c, n, tout); }

rlx_status ad_jvp_LogMel(ad_ctx *c, const ir_node *n, rlx_node *tout) {
  return ad_jvp_expanded(c, n, tout, ad_expand_log_mel);
}
