/* legalize.c — fit the graph to the target backend: a node the target does
 * not claim (pass_options.claims) is replaced by its decomposition into
 * primitive ops when it has one (decompose.c); otherwise it stays as it is
 * and the runtime runs it on the CPU (a fallback). With decompose_fused
 * (RLX_DECOMPOSE_FUSED=1) every fused op is decomposed, claimed or not,
 * which is how the decompositions are tested end to end.
 *
 * When opt->dispatch is given it receives, per op kind, how many nodes of
 * the result the target runs natively and how many fall back, and how many
 * nodes of the input were decomposed: the dispatch report. Leaves are not
 * counted (they are data, not work). *changed counts the nodes decomposed. */
#include "pass.h"

#include <stdlib.h>
#include <string.h>

static int claimed(const pass_options *opt, const rlx_graph *g, rlx_node n) {
  return !opt || !opt->claims || opt->claims(opt->claims_ctx, g, n);
}

/* Counts the nodes [from, g->n_nodes) a decomposition made as native or fallback. */
static void count_dispatch(const pass_options *opt, const rlx_graph *g, rlx_node from) {
  if (!opt || !opt->dispatch) return;
  for (rlx_node i = from; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    if (ir_ops[n->op].category == RLX_CAT_LEAF) continue;
    if (claimed(opt, g, i)) opt->dispatch[n->op].native++;
    else opt->dispatch[n->op].fallback++;
  }
}

/* decompose[i]: node i of g is to be decomposed; counts the nodes that
 * stay as native or fallback. Returns how many are decomposed. */
static int plan_nodes(const rlx_graph *g, const pass_options *opt, unsigned char *decompose) {
  int decompose_all = opt && opt->decompose_fused, n_decomposed = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    decompose[i] = 0;
    if (ir_ops[n->op].category == RLX_CAT_LEAF) continue;
    int native = claimed(opt, g, i);
    if (pass_can_decompose(g, i) && (!native || (decompose_all && ir_ops[n->op].category == RLX_CAT_FUSED))) {
      decompose[i] = 1;
      n_decomposed++;
    } else if (opt && opt->dispatch) {
      if (native) opt->dispatch[n->op].native++;
      else opt->dispatch[n->op].fallback++;
    }
  }
  return n_decomposed;
}

rlx_status pass_legalize(const rlx_graph *in, const pass_options *opt, rlx_graph **out, int *changed) {
  *out = NULL;
  *changed = 0;
  if (opt && opt->dispatch) memset(opt->dispatch, 0, RLX_OP_COUNT * sizeof *opt->dispatch);
  unsigned char *decompose = malloc((size_t)in->n_nodes + 1);
  rlx_node *map = malloc(((size_t)in->n_nodes + 1) * sizeof *map);
  rlx_graph *g = NULL;
  rlx_status st = RLX_OK;
  rlx_node small[8];
  if (!decompose || !map) {
    st = rlx_set_error(RLX_ERR_NOMEM, "legalize: out of memory");
  } else if ((*changed = plan_nodes(in, opt, decompose)) == 0) {
    /* the target takes the graph as it is: a clone is cheaper than a rebuild */
    if (!(g = ir_graph_clone(in))) st = RLX_ERR_NOMEM;
  } else if (!(g = ir_graph_new_like(in))) {
    st = RLX_ERR_NOMEM;
  } else {
    for (int i = 0; i < in->n_nodes && !g->err; i++) {
      const ir_node *n = &in->nodes[i];
      if (!decompose[i]) {
        map[i] = ir_copy_node_mapped(g, in, i, map);
        continue;
      }
      rlx_node *ins = n->n_in <= 8 ? small : malloc((size_t)n->n_in * sizeof *ins);
      if (!ins) {
        ir_fail(g, NULL, RLX_ERR_NOMEM, "legalize: out of memory");
        break;
      }
      for (int k = 0; k < n->n_in; k++) ins[k] = map[n->in[k]];
      rlx_node first = g->n_nodes;
      map[i] = pass_decompose(g, in, i, ins);
      if (ins != small) free(ins);
      if (opt && opt->dispatch) opt->dispatch[n->op].decomposed++;
      if (!g->err) count_dispatch(opt, g, first);
    }
    st = g->err ? rlx_graph_status(g) : ir_set_outputs_mapped(g, in, map);
  }
  free(decompose);
  free(map);
  if (st) {
    rlx_graph_free(g);
    return st;
  }
  *out = g;
  return RLX_OK;
}
