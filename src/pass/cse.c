/* cse.c — common-subexpression elimination by hash-consing.
 *
 * In node order, each node is looked up in a table of the nodes before it
 * by op, inputs (already merged) and attributes (pass_attrs_equal); if an
 * equal one is there, it represents the node and every reader of the node
 * reads it instead. The new graph has the representatives only. Constants
 * merge when their types and bytes are equal. Inputs and params never
 * merge: each is a distinct interface name. Every op is a pure function of
 * its inputs and attributes, so merging is always value-preserving.
 * *changed counts the nodes merged away. */
#include "pass.h"
#include "../ir/hash.h"

#include <stdlib.h>
#include <string.h>


/* Open addressing over node ids (-1 empty); capacity a power of two. */
typedef struct {
  rlx_node *slot;
  uint64_t *hash;
  size_t cap;
} cse_table;

/* Hash of node n with its inputs replaced by their representatives. */
static uint64_t node_hash(const ir_node *n, const rlx_node *rep) {
  uint64_t h = pass_hash_bytes(PASS_HASH_SEED, &n->op, sizeof n->op);
  for (int k = 0; k < n->n_in; k++) h = pass_hash_bytes(h, &rep[n->in[k]], sizeof(rlx_node));
  if (n->op == RLX_OP_Constant) h = pass_type_hash(h, &n->out[0]);
  return pass_attrs_hash(n->op, &n->a, h);
}

/* Do nodes m and n compute the same (inputs up to representatives)? */
static int same_node(const ir_node *m, const ir_node *n, const rlx_node *rep) {
  if (m->op != n->op || m->n_in != n->n_in) return 0;
  for (int k = 0; k < n->n_in; k++)
    if (rep[m->in[k]] != rep[n->in[k]]) return 0;
  /* A constant's bytes mean nothing without its type ([4] is not [2,2]);
   * the other ops' types follow from inputs and attributes. */
  if (n->op == RLX_OP_Constant && !ir_type_eq(&m->out[0], &n->out[0])) return 0;
  return pass_attrs_equal(n->op, &m->a, &n->a);
}

/* rep[i]: the first node equal to node i (i itself when none); returns
 * how many nodes have another representative. */
static int find_representatives(const rlx_graph *in, rlx_node *rep, cse_table *t) {
  int merged = 0;
  memset(t->slot, 0xff, t->cap * sizeof *t->slot);
  for (int i = 0; i < in->n_nodes; i++) {
    const ir_node *n = &in->nodes[i];
    rep[i] = i;
    if (n->op == RLX_OP_Input || n->op == RLX_OP_Param) continue;
    uint64_t h = node_hash(n, rep);
    /* the slot from a keyed remix: graph text chooses the constants and
     * attributes, and with them FNV's low bits */
    size_t at = (size_t)ir_hash_u64(h) & (t->cap - 1);
    while (t->slot[at] >= 0 && !(t->hash[at] == h && same_node(&in->nodes[t->slot[at]], n, rep)))
      at = (at + 1) & (t->cap - 1);
    if (t->slot[at] >= 0) {
      rep[i] = t->slot[at];
      merged++;
    } else {
      t->slot[at] = i;
      t->hash[at] = h;
    }
  }
  return merged;
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
  rlx_node *rep = malloc(((size_t)in->n_nodes + 1) * sizeof *rep);
  rlx_node *map = malloc(((size_t)in->n_nodes + 1) * sizeof *map);
  rlx_graph *g = NULL;
  rlx_status st = RLX_OK;
  if (!t.slot || !t.hash || !rep || !map) {
    st = rlx_set_error(RLX_ERR_NOMEM, "cse: out of memory");
  } else if ((*changed = find_representatives(in, rep, &t)) == 0) {
    /* nothing to merge: a clone is cheaper than a rebuild */
    if (!(g = ir_graph_clone(in))) st = RLX_ERR_NOMEM;
  } else if (!(g = ir_graph_new_like(in))) {
    st = RLX_ERR_NOMEM;
  } else {
    /* representatives come first (rep[i] <= i), so map[rep[i]] is set */
    for (int i = 0; i < in->n_nodes; i++)
      if ((map[i] = rep[i] == i ? ir_copy_node_mapped(g, in, i, map) : map[rep[i]]) < 0) break;
    st = g->err ? rlx_graph_status(g) : ir_set_outputs_mapped(g, in, map);
  }
  free(t.slot);
  free(t.hash);
  free(rep);
  free(map);
  if (st) {
    rlx_graph_free(g);
    return st;
  }
  *out = g;
  return RLX_OK;
}
