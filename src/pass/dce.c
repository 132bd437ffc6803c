/* dce.c — dead-code elimination: keep what the graph's outputs depend on.
 *
 * Inputs and params are kept even when nothing reads them: they are the
 * session's interface (rlx_set_input / rlx_set_param name them), so a
 * graph that ignores an input still accepts it. Everything else that no
 * output reaches — unused constants, computations whose results are never
 * read, the leftovers of other passes' rewrites — is dropped. *changed
 * counts the nodes removed. */
#include "pass.h"

#include <stdlib.h>

rlx_status pass_dce(const rlx_graph *in, const pass_options *opt, rlx_graph **out, int *changed) {
  (void)opt;
  *out = NULL;
  *changed = 0;
  unsigned char *live = calloc((size_t)in->n_nodes + 1, 1);
  if (!live) return rlx_set_error(RLX_ERR_NOMEM, "dce: out of memory");
  for (int k = 0; k < in->n_outputs; k++) live[in->outputs[k]] = 1;
  /* Inputs precede their readers, so one backward sweep marks everything. */
  for (int i = in->n_nodes - 1; i >= 0; i--) {
    const ir_node *n = &in->nodes[i];
    if (n->op == RLX_OP_Input || n->op == RLX_OP_Param) live[i] = 1;
    if (!live[i]) {
      (*changed)++;
      continue;
    }
    for (int k = 0; k < n->n_in; k++) live[n->in[k]] = 1;
  }
  if (*changed == 0) { /* nothing dead: a clone is cheaper than a rebuild */
    free(live);
    *out = ir_graph_clone(in);
    return *out ? RLX_OK : RLX_ERR_NOMEM;
  }
  rlx_node *map = malloc(((size_t)in->n_nodes + 1) * sizeof *map);
  rlx_graph *g = ir_graph_new_like(in);
  rlx_status st = RLX_OK;
  if (!map || !g) {
    st = rlx_set_error(RLX_ERR_NOMEM, "dce: out of memory");
  } else {
    for (int i = 0; i < in->n_nodes; i++) {
      map[i] = -1;
      if (live[i] && (map[i] = ir_copy_node_mapped(g, in, i, map)) < 0) break;
    }
    st = g->err ? rlx_graph_status(g) : ir_set_outputs_mapped(g, in, map);
  }
  free(live);
  free(map);
  if (st) {
    rlx_graph_free(g);
    return st;
  }
  *out = g;
  return RLX_OK;
}
