/* cse.c — common-subexpression elimination by hash-consing.
 *
 * Nodes are copied in order; before a node is added, the table of nodes
 * already in the new graph is asked for one with the same op, the same
 * (already merged) inputs and equal attributes (pass_attrs_equal), and if
 * there is one, every reader of the node reads that one instead. Constants
 * merge when their types and bytes are equal. Inputs and params never
 * merge: each is a distinct interface name. Every op is a pure function of
 * its inputs and attributes, so merging is always value-preserving.
 * *changed counts the nodes merged away. */
#include "pass.h"

#include <stdlib.h>
#include <string.h>

#define FNV_OFFSET 0xcbf29ce484222325ull

/* Open addressing over dst node ids (-1 empty); capacity a power of two. */
typedef struct {
  rlx_node *slot;
  uint64_t *hash;
  size_t cap;
} cse_table;

static uint64_t node_hash(const ir_node *n, const rlx_node *map) {
  uint64_t h = pass_hash_bytes(FNV_OFFSET, &n->op, sizeof n->op);
  for (int k = 0; k < n->n_in; k++) h = pass_hash_bytes(h, &map[n->in[k]], sizeof(rlx_node));
  if (n->op == RLX_OP_Constant) {
    h = pass_hash_bytes(h, &n->out[0].dtype, sizeof n->out[0].dtype);
    h = pass_hash_bytes(h, n->out[0].shape.d, (size_t)n->out[0].shape.rank * sizeof(int64_t));
  }
  return pass_attrs_hash(n->op, &n->a, h);
}

/* Does dst node d compute what src node n (inputs mapped) computes? */
static int same_node(const rlx_graph *dst, rlx_node d, const ir_node *n, const rlx_node *map) {
  const ir_node *m = &dst->nodes[d];
  if (m->op != n->op || m->n_in != n->n_in) return 0;
  for (int k = 0; k < n->n_in; k++)
    if (m->in[k] != map[n->in[k]]) return 0;
  /* A constant's bytes mean nothing without its type ([4] is not [2,2]);
   * the other ops' types follow from inputs and attributes. */
  if (n->op == RLX_OP_Constant && !ir_type_eq(&m->out[0], &n->out[0])) return 0;
  return pass_attrs_equal(n->op, &m->a, &n->a);
}

rlx_status pass_cse(const rlx_graph *in, const pass_options *opt, rlx_graph **out, int *changed) {
  (void)opt;
  *out = NULL;
  *changed = 0;
  cse_table t = {0};
  t.cap = 16;
  while (t.cap < 2 * (size_t)in->n_nodes) t.cap *= 2;
  t.slot = malloc(t.cap * sizeof *t.slot);
  t.hash = malloc(t.cap * sizeof *t.hash);
  rlx_node *map = malloc(((size_t)in->n_nodes + 1) * sizeof *map);
  rlx_graph *g = ir_graph_new_like(in);
  rlx_status st = RLX_OK;
  if (!t.slot || !t.hash || !map || !g) {
    st = rlx_set_error(RLX_ERR_NOMEM, "cse: out of memory");
    goto done;
  }
  memset(t.slot, 0xff, t.cap * sizeof *t.slot);
  for (int i = 0; i < in->n_nodes; i++) {
    const ir_node *n = &in->nodes[i];
    if (n->op == RLX_OP_Input || n->op == RLX_OP_Param) {
      if ((map[i] = ir_copy_node_mapped(g, in, i, map)) < 0) break;
      continue;
    }
    uint64_t h = node_hash(n, map);
    size_t at = (size_t)h & (t.cap - 1);
    while (t.slot[at] >= 0 && !(t.hash[at] == h && same_node(g, t.slot[at], n, map)))
      at = (at + 1) & (t.cap - 1);
    if (t.slot[at] >= 0) {
      map[i] = t.slot[at];
      (*changed)++;
      continue;
    }
    if ((map[i] = ir_copy_node_mapped(g, in, i, map)) < 0) break;
    t.slot[at] = map[i];
    t.hash[at] = h;
  }
  st = g->err ? rlx_graph_status(g) : ir_set_outputs_mapped(g, in, map);
done:
  free(t.slot);
  free(t.hash);
  free(map);
  if (st) {
    rlx_graph_free(g);
    return st;
  }
  *out = g;
  return RLX_OK;
}
