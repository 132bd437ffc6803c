/* const_eval.c — the evaluator constant folding calls: runs one node on
 * constant data through a backend (the CPU one), so a folded constant is
 * bit for bit what running the node would give, and passes stay free of
 * kernels. The node is copied into a graph of its own whose inputs are
 * Inputs bound to the constants' data; that graph is planned, run once and
 * read. */
#include "runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

rlx_status rt_const_eval(void *backend, const rlx_graph *g, rlx_node id, const void *const *inputs,
                         void *const *outputs) {
  const rlx_backend *b = backend;
  const ir_node *n = &g->nodes[id];
  rlx_graph *m = ir_graph_new_like(g);
  rlx_node *ins = malloc(((size_t)n->n_in + 1) * sizeof *ins);
  const void **leaf_data = calloc((size_t)n->n_in + 1, sizeof *leaf_data);
  void *plan = NULL;
  rlx_status st = RLX_OK;
  if (!m || !ins || !leaf_data) {
    st = rlx_set_error(RLX_ERR_NOMEM, "constant folding: out of memory");
    goto done;
  }
  for (int k = 0; k < n->n_in; k++) {
    const ir_type *t = &g->nodes[n->in[k]].out[0];
    char name[24];
    snprintf(name, sizeof name, "in%d", k);
    ins[k] = rlx_input(m, name, t->dtype, t->shape.rank, t->shape.d);
    if (ins[k] >= 0) leaf_data[ins[k]] = inputs[k];
  }
  rlx_node y = ir_copy_node(m, g, id, ins);
  if ((st = rlx_graph_set_outputs(m, 1, &y)) != RLX_OK) goto done;
  rlx_options opt = {RLX_DEVICE_CPU, 1, 0, 0, NULL};
  if ((st = b->compile(b, m, &opt, NULL, &plan)) != RLX_OK) goto done;
  rlx_bindings bind = {.leaf_data = leaf_data};
  if ((st = b->run(plan, &bind)) != RLX_OK) goto done;
  for (int o = 0; o < n->n_out && st == RLX_OK; o++) {
    const ir_type *t = &m->nodes[y].out[o];
    st = b->read(plan, y, o, outputs[o], rlx_dtype_nbytes(t->dtype, ir_numel(&t->shape)));
  }
done:
  if (plan) b->free(plan);
  rlx_graph_free(m);
  free(ins);
  free((void *)leaf_data);
  return st;
}
