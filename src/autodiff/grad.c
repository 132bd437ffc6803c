/* grad.c — reverse mode: rlx_grad builds the gradient graph of a scalar
 * loss by one reverse sweep over a copy of the forward graph.
 *
 * The sweep visits nodes from the loss down; a node whose output has a
 * gradient (the sum of what its consumers sent, so a value used several
 * times gets the total) hands it to its rule, which adds gradients to the
 * node's inputs. Only active nodes (those depending on a wrt node through
 * differentiable ops) take part, so no derivative is built for indices,
 * masks or constants. */
#include "autodiff.h"

#include <stdlib.h>
#include <string.h>

#define AD_VJP_0(Id) NULL,
#define AD_VJP_1(Id) ad_vjp_##Id,
const ad_vjp_fn ad_vjp_rules[RLX_OP_COUNT] = {
#define RLX_OP(Id, min_in, max_in, n_out, cat, diff, attrs) AD_VJP_##diff(Id)
#include "../ir/ops.def"
#undef RLX_OP
};

rlx_status ad_sweep_reverse(ad_ctx *c, rlx_node lo, rlx_node hi) {
  for (rlx_node id = hi - 1; id >= lo; id--) {
    if (!ad_active(c, id)) continue;
    ir_node n = c->g->nodes[id];
    rlx_node gout[IR_MAX_OUTPUTS];
    int any = 0;
    for (int o = 0; o < n.n_out; o++) any |= (gout[o] = ad_deriv(c, id, o)) >= 0;
    if (!any) continue;
    rlx_status st = ad_vjp_rules[n.op](c, &n, gout);
    if (st == RLX_OK) st = ad_status(c);
    if (st) return st;
  }
  return ad_status(c);
}

rlx_status ad_vjp_expanded(ad_ctx *c, const ir_node *n, const rlx_node *gout, ad_expand_fn expand) {
  rlx_node lo = c->g->n_nodes, r = expand(c, n);
  if (r < 0) return ad_status(c) ? ad_status(c) : ad_unsupported(c, n, "expansion failed");
  rlx_status st = ad_accum(c, r, 0, gout[0]);
  return st ? st : ad_sweep_reverse(c, lo, c->g->n_nodes);
}

/* Checks the arguments of rlx_grad. */
static rlx_status check_args(const rlx_graph *g, rlx_node loss, int n_wrt, const rlx_node *wrt) {
  if (!g) return rlx_set_error(RLX_ERR_INVALID, "rlx_grad: graph is NULL");
  rlx_status st = rlx_graph_verify(g);
  if (st) return st;
  if (loss < 0 || loss >= g->n_nodes)
    return rlx_set_error(RLX_ERR_INVALID, "rlx_grad: loss %d is not a node of the graph", (int)loss);
  const ir_node *l = &g->nodes[loss];
  char b[IR_SHAPE_STR_CAP];
  if (!ir_is_float(l->out[0].dtype) || ir_numel(&l->out[0].shape) != 1)
    return rlx_set_error(ir_is_float(l->out[0].dtype) ? RLX_ERR_SHAPE : RLX_ERR_DTYPE,
                         "rlx_grad: the loss %s (node %d) is %s%s; it must be a float scalar (one element)",
                         ir_ops[l->op].name, (int)loss, rlx_dtype_name(l->out[0].dtype),
                         ir_shape_str(g, &l->out[0].shape, b, sizeof b));
  if (n_wrt < 0 || (n_wrt > 0 && !wrt))
    return rlx_set_error(RLX_ERR_INVALID, "rlx_grad: %d wrt nodes with a %s array", n_wrt, wrt ? "non-NULL" : "NULL");
  for (int k = 0; k < n_wrt; k++) {
    if (wrt[k] < 0 || wrt[k] >= g->n_nodes)
      return rlx_set_error(RLX_ERR_INVALID, "rlx_grad: wrt[%d] = %d is not a node of the graph", k, (int)wrt[k]);
    const ir_node *w = &g->nodes[wrt[k]];
    if (!ir_is_float(w->out[0].dtype))
      return rlx_set_error(RLX_ERR_DTYPE, "rlx_grad: wrt[%d] %s (node %d) is %s; gradients are of float nodes", k,
                           ir_ops[w->op].name, (int)wrt[k], rlx_dtype_name(w->out[0].dtype));
  }
  return RLX_OK;
}

/* Copies into dst every Input and Param of g (so the gradient graph binds
 * like the forward one) and every node the loss depends on; map[g id] =
 * dst id (-1: not copied), orig[dst id] = g id. */
static rlx_status copy_forward(const rlx_graph *g, rlx_node loss, rlx_graph *dst, rlx_node *map, rlx_node *orig) {
  char *needed = calloc((size_t)g->n_nodes, 1);
  if (!needed) return rlx_set_error(RLX_ERR_NOMEM, "rlx_grad: out of memory");
  needed[loss] = 1;
  for (int i = loss; i >= 0; i--)
    if (needed[i])
      for (int k = 0; k < g->nodes[i].n_in; k++) needed[g->nodes[i].in[k]] = 1;
  for (int i = 0; i < g->n_nodes; i++) {
    map[i] = -1;
    int op = g->nodes[i].op;
    if (!needed[i] && op != RLX_OP_Input && op != RLX_OP_Param) continue;
    map[i] = ir_copy_node_mapped(dst, g, i, map);
    if (map[i] < 0) break;
    orig[map[i]] = i;
  }
  free(needed);
  return dst->err ? rlx_graph_status(dst) : RLX_OK;
}

rlx_status rlx_grad(const rlx_graph *g, rlx_node loss, int n_wrt, const rlx_node *wrt, rlx_graph **grad_graph) {
  if (!grad_graph) return rlx_set_error(RLX_ERR_INVALID, "rlx_grad: grad_graph is NULL");
  *grad_graph = NULL;
  rlx_status st = check_args(g, loss, n_wrt, wrt);
  if (st) return st;
  rlx_graph *dst = ir_graph_new_like(g);
  rlx_node *map = malloc(((size_t)g->n_nodes + 1) * sizeof *map);
  rlx_node *orig = malloc(((size_t)g->n_nodes + 1) * sizeof *orig);
  rlx_node *outs = malloc(((size_t)n_wrt + 1) * sizeof *outs);
  ad_ctx c = {0};
  if (!dst || !map || !orig || !outs) {
    st = rlx_set_error(RLX_ERR_NOMEM, "rlx_grad: out of memory");
    goto done;
  }
  if ((st = copy_forward(g, loss, dst, map, orig))) goto done;
  c.g = dst;
  c.reverse = 1;
  c.src = g;
  c.orig = orig;
  c.n_fwd = dst->n_nodes;
  if ((st = ad_reserve(&c))) goto done;
  for (int k = 0; k < n_wrt; k++)
    if (map[wrt[k]] >= 0) c.active[map[wrt[k]]] = 1;

  ir_type lt = ad_type(&c, map[loss]);
  if ((st = ad_accum(&c, map[loss], 0, ad_fill(&c, &lt, 1.0)))) goto done;
  if ((st = ad_sweep_reverse(&c, 0, c.n_fwd))) goto done;

  outs[0] = map[loss];
  for (int k = 0; k < n_wrt; k++) {
    rlx_node gr = map[wrt[k]] >= 0 ? ad_deriv(&c, map[wrt[k]], 0) : -1;
    outs[k + 1] = gr >= 0 ? gr : ad_fill(&c, &g->nodes[wrt[k]].out[0], 0.0);
  }
  if ((st = ad_status(&c)) || (st = rlx_graph_set_outputs(dst, n_wrt + 1, outs))) goto done;
  *grad_graph = dst;
  dst = NULL;
done:
  free(c.deriv);
  free(c.active);
  free(map);
  free(orig);
  free(outs);
  rlx_graph_free(dst);
  return st;
}
