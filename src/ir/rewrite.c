/* rewrite.c — building one graph from another, for passes: an empty graph
 * with the same symbols, node copies with remapped inputs, use counts. */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

rlx_graph *ir_graph_new_like(const rlx_graph *g) {
  rlx_graph *d = rlx_graph_new(g->name);
  if (!d) return NULL;
  for (int i = 0; i < g->n_syms; i++) {
    const char *nm = g->syms[i].name;
    /* same ids, so dim tokens mean the same symbol in both graphs */
    int id = nm ? ir_sym_lookup(d, nm, strlen(nm), 1) : (int)(IR_SYM_BASE - ir_dim_anon(d));
    if (id != i) {
      rlx_graph_free(d);
      rlx_set_error(RLX_ERR_NOMEM, "out of memory copying symbols");
      return NULL;
    }
  }
  return d;
}

rlx_node ir_copy_node(rlx_graph *dst, const rlx_graph *src, rlx_node id, const rlx_node *inputs) {
  const ir_node *n = &src->nodes[id];
  ir_attrs a;
  if (!ir_attrs_copy(&a, &n->a)) return ir_fail(dst, NULL, RLX_ERR_NOMEM, "out of memory copying node %d", id);
  if (ir_ops[n->op].category == RLX_CAT_LEAF) return ir_add_leaf(dst, n->op, &a, &n->out[0]);
  return ir_add_node(dst, n->op, n->n_in, inputs, &a);
}

rlx_node ir_copy_node_mapped(rlx_graph *dst, const rlx_graph *src, rlx_node id, const rlx_node *map) {
  const ir_node *n = &src->nodes[id];
  rlx_node small[8] = {0}, *in = n->n_in <= 8 ? small : malloc((size_t)n->n_in * sizeof *in);
  if (!in) return ir_fail(dst, NULL, RLX_ERR_NOMEM, "out of memory copying node %d", id);
  for (int k = 0; k < n->n_in; k++) in[k] = map[n->in[k]];
  rlx_node r = ir_copy_node(dst, src, id, in);
  if (in != small) free(in);
  return r;
}

rlx_status ir_set_outputs_mapped(rlx_graph *dst, const rlx_graph *src, const rlx_node *map) {
  rlx_node small[16] = {0}, *outs = src->n_outputs <= 16 ? small : malloc((size_t)src->n_outputs * sizeof *outs);
  if (!outs) return rlx_set_error(RLX_ERR_NOMEM, "out of memory");
  for (int k = 0; k < src->n_outputs; k++) outs[k] = map[src->outputs[k]];
  rlx_status st = rlx_graph_set_outputs(dst, src->n_outputs, outs);
  if (outs != small) free(outs);
  return st;
}

int *ir_use_counts(const rlx_graph *g) {
  int *uses = calloc((size_t)g->n_nodes + 1, sizeof *uses);
  if (!uses) {
    rlx_set_error(RLX_ERR_NOMEM, "out of memory");
    return NULL;
  }
  for (int i = 0; i < g->n_nodes; i++)
    for (int k = 0; k < g->nodes[i].n_in; k++) uses[g->nodes[i].in[k]]++;
  for (int k = 0; k < g->n_outputs; k++) uses[g->outputs[k]]++;
  return uses;
}
