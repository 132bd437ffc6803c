/* fold.c — constant folding: a node whose inputs are all constants becomes
 * a constant holding its value.
 *
 * The value comes from the evaluator in pass_options (the runtime backs it
 * with the CPU backend's kernels), so a folded node holds exactly what
 * running it would have produced, and passes carry no kernels of their own.
 * Folded: non-leaf nodes with static shapes whose outputs take at most
 * PASS_FOLD_MAX_BYTES together (folding a broadcast of a scalar to a large
 * shape would bloat the graph). Never folded: inputs and params (they are
 * not constants), nor an AllReduce. A node with no inputs (Iota) is constant too. A node
 * whose evaluation fails (a Gather index out of range) is left alone, so
 * the error surfaces when the graph runs, as it would have unfolded.
 * A multi-output node (TopK) becomes one constant per output, and the
 * GetOutput nodes that select them become those constants. Chains fold
 * in one sweep (inputs are folded before their readers). *changed counts
 * the nodes folded. */
#include "pass.h"

#include <stdlib.h>
#include <string.h>

/* Bytes of output o of n (static shapes only), or SIZE_MAX. */
static size_t output_bytes(const ir_node *n, int o) {
  int64_t numel = ir_numel(&n->out[o].shape);
  return numel < 0 ? SIZE_MAX : rlx_dtype_nbytes(n->out[o].dtype, numel);
}

/* Is n a candidate: a non-leaf of static type, small enough (bytes[o]:
 * the size of output o), every input (through map into dst; map NULL:
 * n's own graph) a constant? */
static int foldable(const rlx_graph *dst, const ir_node *n, const rlx_node *map, size_t *bytes) {
  /* an AllReduce of constants still sums over the ranks, which only a run sees */
  if (ir_ops[n->op].category == RLX_CAT_LEAF || n->op == RLX_OP_GetOutput || n->op == RLX_OP_AllReduce) return 0;
  size_t total = 0;
  for (int o = 0; o < n->n_out; o++) {
    size_t b = output_bytes(n, o);
    if (b > PASS_FOLD_MAX_BYTES - total) return 0;
    total += bytes[o] = b;
  }
  for (int k = 0; k < n->n_in; k++)
    if (dst->nodes[map ? map[n->in[k]] : n->in[k]].op != RLX_OP_Constant) return 0;
  return 1;
}

/* Whether anything will fold: a chain starts at a node of constants. */
static int any_foldable(const rlx_graph *g) {
  size_t bytes[IR_MAX_OUTPUTS];
  for (int i = 0; i < g->n_nodes; i++)
    if (foldable(g, &g->nodes[i], NULL, bytes)) return 1;
  return 0;
}

/* Evaluates src node i and appends its outputs to dst as constants
 * (consts[o]); returns 0 when the evaluator declines (nothing added). */
static int fold_node(rlx_graph *dst, const rlx_graph *src, int i, const rlx_node *map,
                     const pass_options *opt, const size_t *bytes, rlx_node *consts) {
  const ir_node *n = &src->nodes[i];
  const void *ins_small[8];
  const void **ins = n->n_in <= 8 ? ins_small : malloc((size_t)n->n_in * sizeof *ins);
  void *outs[IR_MAX_OUTPUTS] = {0};
  int ok = ins != NULL;
  for (int k = 0; ok && k < n->n_in; k++) ins[k] = dst->nodes[map[n->in[k]]].a.data.p;
  for (int o = 0; ok && o < n->n_out; o++) ok = (outs[o] = malloc(bytes[o] ? bytes[o] : 1)) != NULL;
  ok = ok && opt->eval(opt->eval_ctx, src, i, ins, outs) == RLX_OK;
  for (int o = 0; ok && o < n->n_out; o++) {
    ir_attrs a;
    ir_attrs_init_defaults(&a);
    a.data.n = bytes[o];
    a.data.p = a.data.n ? outs[o] : NULL;
    if (a.data.n == 0) free(outs[o]);
    outs[o] = NULL; /* owned by the attrs now, freed by ir_add_leaf on failure */
    consts[o] = ir_add_leaf(dst, RLX_OP_Constant, &a, &n->out[o]);
    ok = consts[o] >= 0;
  }
  for (int o = 0; o < n->n_out; o++) free(outs[o]);
  if (ins != ins_small) free(ins);
  return ok;
}

rlx_status pass_fold(const rlx_graph *in, const pass_options *opt, rlx_graph **out, int *changed) {
  *out = NULL;
  *changed = 0;
  if (!opt || !opt->eval || !any_foldable(in)) { /* a clone is cheaper than a rebuild */
    *out = ir_graph_clone(in);
    return *out ? RLX_OK : RLX_ERR_NOMEM;
  }
  size_t slots = (size_t)in->n_nodes * IR_MAX_OUTPUTS + 1;
  rlx_node *map = malloc(((size_t)in->n_nodes + 1) * sizeof *map);
  rlx_node *folded = malloc(slots * sizeof *folded); /* [i * IR_MAX_OUTPUTS + o]: constant, or -1 */
  rlx_graph *g = ir_graph_new_like(in);
  if (!map || !folded || !g) {
    free(map);
    free(folded);
    rlx_graph_free(g);
    return rlx_set_error(RLX_ERR_NOMEM, "fold: out of memory");
  }
  memset(folded, 0xff, slots * sizeof *folded);
  for (int i = 0; i < in->n_nodes && !g->err; i++) {
    const ir_node *n = &in->nodes[i];
    if (n->op == RLX_OP_GetOutput && folded[(size_t)n->in[0] * IR_MAX_OUTPUTS + (size_t)n->a.index] >= 0) {
      map[i] = folded[(size_t)n->in[0] * IR_MAX_OUTPUTS + (size_t)n->a.index];
      continue;
    }
    rlx_node consts[IR_MAX_OUTPUTS];
    size_t bytes[IR_MAX_OUTPUTS];
    if (foldable(g, n, map, bytes) && fold_node(g, in, i, map, opt, bytes, consts)) {
      for (int o = 0; o < n->n_out; o++) folded[(size_t)i * IR_MAX_OUTPUTS + (size_t)o] = consts[o];
      map[i] = consts[0];
      (*changed)++;
      continue;
    }
    if (g->err) break;
    map[i] = ir_copy_node_mapped(g, in, i, map);
  }
  rlx_status st = g->err ? rlx_graph_status(g) : ir_set_outputs_mapped(g, in, map);
  free(map);
  free(folded);
  if (st) {
    rlx_graph_free(g);
    return st;
  }
  *out = g;
  return RLX_OK;
}
