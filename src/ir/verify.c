/* verify.c — the graph verifier: structure (arity, dangling inputs, cycles,
 * outputs, names) and types (every node's stored type must be what shape
 * inference gives for its inputs and attributes, which also checks rank
 * limits and attribute ranges). */
#include "ir.h"

/* Dims match when equal, or both symbolic and at least one anonymous
 * (re-inference makes fresh anonymous dims). */
static int dims_match(const rlx_graph *g, int64_t a, int64_t b) {
  if (a == b) return 1;
  if (!ir_dim_is_sym(a) || !ir_dim_is_sym(b)) return 0;
  int ia = ir_dim_sym_id(a), ib = ir_dim_sym_id(b);
  int anon_a = ia >= g->n_syms || !g->syms[ia].name;
  int anon_b = ib >= g->n_syms || !g->syms[ib].name;
  return anon_a || anon_b;
}

static int types_match(const rlx_graph *g, const ir_type *a, const ir_type *b) {
  if (a->dtype != b->dtype || a->shape.rank != b->shape.rank) return 0;
  for (int i = 0; i < a->shape.rank; i++)
    if (!dims_match(g, a->shape.d[i], b->shape.d[i])) return 0;
  return 1;
}

static rlx_status check_structure(const rlx_graph *g, ir_name_set *names) {
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    if (n->op < 0 || n->op >= RLX_OP_COUNT)
      return rlx_set_error(RLX_ERR_INVALID, "verify: node %d has unknown op %d", i, n->op);
    const ir_op_info *info = &ir_ops[n->op];
    if (n->id != i) return rlx_set_error(RLX_ERR_INTERNAL, "verify: node %d has id %d", i, n->id);
    if (n->n_out < 1 || n->n_out > IR_MAX_OUTPUTS)
      return rlx_set_error(RLX_ERR_INVALID, "verify: %s (node %d) has %d outputs", info->name, i, n->n_out);
    for (int o = 0; o < n->n_out; o++) {
      if (!ir_dtype_valid(n->out[o].dtype))
        return rlx_set_error(RLX_ERR_DTYPE, "verify: %s (node %d) output %d has invalid dtype %d", info->name, i, o,
                             (int)n->out[o].dtype);
      if (n->out[o].shape.rank < 0 || n->out[o].shape.rank > RLX_MAX_RANK)
        return rlx_set_error(RLX_ERR_SHAPE, "verify: %s (node %d) output %d has rank %d, outside 0..%d", info->name,
                             i, o, n->out[o].shape.rank, RLX_MAX_RANK);
    }
    if (n->n_in < info->min_inputs || (info->max_inputs >= 0 && n->n_in > info->max_inputs))
      return rlx_set_error(RLX_ERR_INVALID, "verify: %s (node %d) has %d inputs, the op takes %d..%d",
                           info->name, i, n->n_in, info->min_inputs, info->max_inputs);
    for (int k = 0; k < n->n_in; k++) {
      rlx_node in = n->in[k];
      if (in < 0 || in >= g->n_nodes)
        return rlx_set_error(RLX_ERR_INVALID, "verify: %s (node %d) input %d is %d: dangling (no such node)",
                             info->name, i, k, (int)in);
      if (in >= i)
        return rlx_set_error(RLX_ERR_INVALID,
                             "verify: %s (node %d) input %d is node %d, which does not come before it: "
                             "a cycle or a graph out of topological order", info->name, i, k, (int)in);
    }
    if ((n->op == RLX_OP_Input || n->op == RLX_OP_Param) && n->a.name) {
      int j = ir_name_set_find(names, g, n->a.name);
      if (j >= 0)
        return rlx_set_error(RLX_ERR_INVALID, "verify: %s (node %d) name \"%s\" is also node %d's",
                             info->name, i, n->a.name, j);
      if (ir_name_set_add(names, g, i) < 0) return rlx_set_error(RLX_ERR_NOMEM, "verify: out of memory");
    }
  }
  if (g->n_outputs <= 0) return rlx_set_error(RLX_ERR_INVALID, "verify: the graph has no outputs");
  for (int k = 0; k < g->n_outputs; k++)
    if (g->outputs[k] < 0 || g->outputs[k] >= g->n_nodes)
      return rlx_set_error(RLX_ERR_INVALID, "verify: output %d is %d: dangling (no such node)", k,
                           (int)g->outputs[k]);
  return RLX_OK;
}

rlx_status rlx_graph_verify(const rlx_graph *g) {
  if (!g) return rlx_set_error(RLX_ERR_INVALID, "rlx_graph_verify: graph is NULL");
  if (g->err) return rlx_graph_status(g);
  ir_name_set names = {0};
  rlx_status st = check_structure(g, &names);
  ir_name_set_free(&names);
  if (st) return st;
  rlx_graph *c = ir_graph_clone(g);
  if (!c) return RLX_ERR_NOMEM;
  st = ir_graph_specialize(c, NULL);
  if (st == RLX_OK) {
    for (int i = 0; i < g->n_nodes && st == RLX_OK; i++) {
      const ir_node *n = &g->nodes[i];
      for (int o = 0; o < n->n_out; o++) {
        if (types_match(g, &n->out[o], &c->nodes[i].out[o])) continue;
        char a[IR_SHAPE_STR_CAP], b[IR_SHAPE_STR_CAP];
        st = rlx_set_error(n->out[o].dtype != c->nodes[i].out[o].dtype ? RLX_ERR_DTYPE : RLX_ERR_SHAPE,
                           "verify: %s (node %d) output %d is recorded as %s%s but its inputs give %s%s",
                           ir_ops[n->op].name, i, o, rlx_dtype_name(n->out[o].dtype),
                           ir_shape_str(g, &n->out[o].shape, a, sizeof a),
                           rlx_dtype_name(c->nodes[i].out[o].dtype),
                           ir_shape_str(c, &c->nodes[i].out[o].shape, b, sizeof b));
        break;
      }
    }
  } else {
    char msg[600];
    snprintf(msg, sizeof msg, "verify: %s", rlx_last_error());
    rlx_set_error(st, "%s", msg);
  }
  rlx_graph_free(c);
  return st;
}
