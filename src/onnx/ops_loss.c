/* ops_loss.c — NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss,
 * built from rlx ops: the target's one-hot picks each sample's class. */
#include "onnx.h"

#include <string.h>

/* The loss of log-probabilities lp [N, C, d...] at targets [N, d...]. */
static rlx_status nll(ox_importer *im, const ox_node *n, rlx_node lp) {
  rlx_graph *g = im->g;
  rlx_node target = ox_in(im, n, 1);
  NEED(target);
  int64_t xd[RLX_MAX_RANK];
  rlx_dtype t;
  int r = rlx_node_type(g, lp, &t, xd);
  if (r < 2 || ir_dim_is_sym(xd[1])) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "an input of rank %d or symbolic classes", r);
  const ox_attr *ii = ox_attr_get(n, "ignore_index");
  rlx_node keep = -1;   /* BOOL: the targets that count */
  if (ii) {
    keep = rlx_compare(g, RLX_CMP_NE, target, ox_scalar_like(im, target, (double)ii->i));
    target = rlx_where(g, keep, target, ox_scalar_like(im, target, 0));
  }
  rlx_node oh = rlx_one_hot(g, target, xd[1], t);
  int64_t perm[RLX_MAX_RANK];   /* the one-hot axis (last) to axis 1 */
  perm[0] = 0;
  perm[1] = r - 1;
  for (int i = 2; i < r; i++) perm[i] = i - 1;
  if (r > 2) oh = rlx_transpose(g, oh, r, perm);
  int64_t ax1 = 1;
  rlx_node loss = rlx_activation(g, RLX_ACT_NEG, rlx_reduce(g, RLX_REDUCE_SUM, rlx_mul(g, lp, oh), 1, &ax1, 0));
  rlx_node w = -1;
  if (ox_has_in(n, 2)) {
    rlx_node weight = ox_in(im, n, 2);
    NEED(weight);
    w = rlx_gather(g, weight, target, 0);
  }
  if (keep >= 0) {
    rlx_node kf = rlx_cast(g, keep, t);
    w = w >= 0 ? rlx_mul(g, w, kf) : kf;
  }
  if (w >= 0) loss = rlx_mul(g, loss, w);
  const char *red = ox_attr_str(n, "reduction", "mean");
  int ro = r - 1;
  int64_t all[RLX_MAX_RANK];
  for (int i = 0; i < ro; i++) all[i] = i;
  if (!strcmp(red, "none")) return ox_set_out(im, n, 0, loss);
  if (!strcmp(red, "sum")) return ox_set_out(im, n, 0, rlx_reduce(g, RLX_REDUCE_SUM, loss, ro, all, 0));
  if (strcmp(red, "mean")) return ox_node_fail(im, n, RLX_ERR_INVALID, "reduction %s", red);
  if (w < 0) return ox_set_out(im, n, 0, rlx_reduce(g, RLX_REDUCE_MEAN, loss, ro, all, 0));
  /* weighted mean: sum of losses over the sum of the weights used */
  return ox_set_out(im, n, 0, rlx_div(g, rlx_reduce(g, RLX_REDUCE_SUM, loss, ro, all, 0),
                                      rlx_reduce(g, RLX_REDUCE_SUM, w, ro, all, 0)));
}

rlx_status ox_op_nll_loss(ox_importer *im, const ox_node *n) {
  rlx_node x = ox_in(im, n, 0);
  NEED(x);
  return nll(im, n, x);
}

rlx_status ox_op_softmax_ce_loss(ox_importer *im, const ox_node *n) {
  rlx_node x = ox_in(im, n, 0);
  NEED(x);
  rlx_node lp = rlx_log_softmax(im->g, x, 1);
  rlx_status st = ox_set_out(im, n, 1, lp);
  return st ? st : nll(im, n, lp);
}
