/* jvp.c — forward mode: rlx_jvp pushes tangents through a copy of the
 * forward graph in node order. Each primal (a float Input or Param) gets a
 * tangent Input "<name>.tangent"; an active node's rule combines its
 * inputs' tangents into its own. */
#include "autodiff.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AD_JVP_0(Id) NULL,
#define AD_JVP_1(Id) ad_jvp_##Id,
const ad_jvp_fn ad_jvp_rules[RLX_OP_COUNT] = {
#define RLX_OP(Id, min_in, max_in, n_out, cat, diff, attrs) AD_JVP_##diff(Id)
#include "../ir/ops.def"
#undef RLX_OP
};

rlx_status ad_sweep_forward(ad_ctx *c, rlx_node lo, rlx_node hi) {
  for (rlx_node id = lo; id < hi; id++) {
    if (!ad_active(c, id) || ad_deriv(c, id, 0) >= 0) continue; /* a primal has its tangent */
    ir_node n = c->g->nodes[id];
    /* a rule is linear in the tangents: none in, none out */
    int any = 0;
    for (int k = 0; k < n.n_in; k++) any |= ad_deriv(c, n.in[k], 0) >= 0 || ad_deriv(c, n.in[k], 1) >= 0;
    if (!any) continue;
    rlx_node tout[IR_MAX_OUTPUTS] = {-1, -1};
    rlx_status st = ad_jvp_rules[n.op](c, &n, tout);
    for (int o = 0; st == RLX_OK && o < n.n_out; o++) st = ad_accum(c, id, o, tout[o]);
    if (st == RLX_OK) st = ad_status(c);
    if (st) return st;
  }
  return ad_status(c);
}

rlx_status ad_jvp_expanded(ad_ctx *c, const ir_node *n, rlx_node *tout, ad_expand_fn expand) {
  rlx_node lo = c->g->n_nodes, r = expand(c, n);
  if (r < 0) return ad_status(c) ? ad_status(c) : ad_unsupported(c, n, "expansion failed");
  rlx_status st = ad_sweep_forward(c, lo, c->g->n_nodes);
  tout[0] = ad_deriv(c, r, 0);
  return st;
}

static rlx_status check_args(const rlx_graph *g, int n_primals, const rlx_node *primals) {
  if (!g) return rlx_set_error(RLX_ERR_INVALID, "rlx_jvp: graph is NULL");
  rlx_status st = rlx_graph_verify(g);
  if (st) return st;
  if (n_primals < 0 || (n_primals > 0 && !primals))
    return rlx_set_error(RLX_ERR_INVALID, "rlx_jvp: %d primals with a %s array", n_primals,
                         primals ? "non-NULL" : "NULL");
  for (int k = 0; k < n_primals; k++) {
    rlx_node p = primals[k];
    if (p < 0 || p >= g->n_nodes)
      return rlx_set_error(RLX_ERR_INVALID, "rlx_jvp: primals[%d] = %d is not a node of the graph", k, (int)p);
    const ir_node *n = &g->nodes[p];
    if (n->op != RLX_OP_Input && n->op != RLX_OP_Param)
      return rlx_set_error(RLX_ERR_INVALID, "rlx_jvp: primals[%d] is %s (node %d), not an Input or Param", k,
                           ir_ops[n->op].name, (int)p);
    if (!ir_is_float(n->out[0].dtype))
      return rlx_set_error(RLX_ERR_DTYPE, "rlx_jvp: primal \"%s\" is %s; tangents are of float leaves", n->a.name,
                           rlx_dtype_name(n->out[0].dtype));
    for (int j = 0; j < k; j++)
      if (primals[j] == p) return rlx_set_error(RLX_ERR_INVALID, "rlx_jvp: primal \"%s\" is given twice", n->a.name);
  }
  return RLX_OK;
}

/* The tangent input of primal p: "<name>.tangent", a name g must not use. */
static rlx_node tangent_input(const rlx_graph *g, rlx_graph *dst, rlx_node p) {
  const ir_node *n = &g->nodes[p];
  size_t len = strlen(n->a.name) + sizeof ".tangent";
  char *name = malloc(len);
  if (!name) return ir_fail(dst, NULL, RLX_ERR_NOMEM, "rlx_jvp: out of memory");
  snprintf(name, len, "%s.tangent", n->a.name);
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *m = &g->nodes[i];
    if ((m->op == RLX_OP_Input || m->op == RLX_OP_Param) && !strcmp(m->a.name, name)) {
      ir_fail(dst, NULL, RLX_ERR_INVALID, "rlx_jvp: the graph already has a leaf named \"%s\"", name);
      free(name);
      return -1;
    }
  }
  rlx_node t = rlx_input(dst, name, n->out[0].dtype, n->out[0].shape.rank, n->out[0].shape.d);
  free(name);
  return t;
}

rlx_status rlx_jvp(const rlx_graph *g, int n_primals, const rlx_node *primals, rlx_graph **jvp_graph) {
  if (!jvp_graph) return rlx_set_error(RLX_ERR_INVALID, "rlx_jvp: jvp_graph is NULL");
  *jvp_graph = NULL;
  rlx_status st = check_args(g, n_primals, primals);
  if (st) return st;
  rlx_graph *dst = ir_graph_new_like(g);
  rlx_node *map = malloc(((size_t)g->n_nodes + 1) * sizeof *map);
  rlx_node *outs = malloc(((size_t)g->n_outputs * 2 + 1) * sizeof *outs);
  ad_ctx c = {0};
  if (!dst || !map || !outs) {
    st = rlx_set_error(RLX_ERR_NOMEM, "rlx_jvp: out of memory");
    goto done;
  }
  for (int i = 0; i < g->n_nodes && !dst->err; i++) map[i] = ir_copy_node_mapped(dst, g, i, map);
  c.g = dst;
  c.src = g;
  c.orig = map; /* every node is copied in order: dst id == g id */
  c.n_fwd = dst->n_nodes;
  if ((st = ad_status(&c)) || (st = ad_reserve(&c))) goto done;
  for (int k = 0; k < n_primals; k++) {
    rlx_node p = map[primals[k]];
    c.active[p] = 1;
    if ((st = ad_accum(&c, p, 0, tangent_input(g, dst, primals[k])))) goto done;
  }
  if ((st = ad_sweep_forward(&c, 0, c.n_fwd))) goto done;
  for (int k = 0; k < g->n_outputs; k++) {
    rlx_node o = map[g->outputs[k]], t = ad_deriv(&c, o, 0);
    outs[k] = o;
    outs[g->n_outputs + k] = t >= 0 ? t : ad_fill(&c, &g->nodes[g->outputs[k]].out[0], 0.0);
  }
  if ((st = ad_status(&c)) || (st = rlx_graph_set_outputs(dst, 2 * g->n_outputs, outs))) goto done;
  *jvp_graph = dst;
  dst = NULL;
done:
  free(c.deriv);
  free(c.active);
  free(map);
  free(outs);
  rlx_graph_free(dst);
  return st;
}
