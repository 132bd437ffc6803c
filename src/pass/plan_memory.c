/* plan_memory.c — liveness-based arena offsets with first-fit reuse. */
#include "pass.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct { size_t off, size; int last_use; } live_block;

static size_t align_up(size_t x) { return (x + RLX_ARENA_ALIGN - 1) / RLX_ARENA_ALIGN * RLX_ARENA_ALIGN; }

/* Lowest offset where `size` fits between the live blocks (sorted by offset). */
static size_t first_fit(const live_block *live, int n_live, size_t size) {
  size_t at = 0;
  for (int i = 0; i < n_live; i++) {
    if (live[i].off >= at + size) break;
    if (live[i].off + live[i].size > at) at = align_up(live[i].off + live[i].size);
  }
  return at;
}

static void insert_sorted(live_block *live, int *n_live, live_block b) {
  int i = *n_live;
  while (i > 0 && live[i - 1].off > b.off) {
    live[i] = live[i - 1];
    i--;
  }
  live[i] = b;
  (*n_live)++;
}

rlx_status plan_arena_offsets(const rlx_graph *g, plan_memory *out) {
  memset(out, 0, sizeof *out);
  size_t slots = (size_t)g->n_nodes * IR_MAX_OUTPUTS;
  int *last_use = malloc((g->n_nodes ? (size_t)g->n_nodes : 1) * sizeof *last_use);
  live_block *live = malloc((slots ? slots : 1) * sizeof *live);
  out->offset = malloc((slots ? slots : 1) * sizeof *out->offset);
  out->nbytes = calloc(slots ? slots : 1, sizeof *out->nbytes);
  if (!last_use || !live || !out->offset || !out->nbytes) {
    free(last_use);
    free(live);
    plan_memory_free(out);
    return rlx_set_error(RLX_ERR_NOMEM, "memory planning: out of memory");
  }
  for (int i = 0; i < g->n_nodes; i++) last_use[i] = i;
  for (int i = 0; i < g->n_nodes; i++)
    for (int k = 0; k < g->nodes[i].n_in; k++) last_use[g->nodes[i].in[k]] = i;
  for (int k = 0; k < g->n_outputs; k++) last_use[g->outputs[k]] = g->n_nodes;

  int n_live = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    for (int o = 0; o < IR_MAX_OUTPUTS; o++) out->offset[(size_t)i * IR_MAX_OUTPUTS + o] = SIZE_MAX;
    if (ir_ops[n->op].category == RLX_CAT_LEAF) continue;
    for (int o = 0; o < n->n_out; o++) {
      int64_t numel = ir_numel(&n->out[o].shape);
      if (numel < 0) {
        free(last_use);
        free(live);
        plan_memory_free(out);
        return rlx_set_error(RLX_ERR_INTERNAL, "memory planning: node %d has symbolic dims", i);
      }
      size_t nb = rlx_dtype_nbytes(n->out[o].dtype, numel);
      size_t sz = align_up(nb ? nb : 1);
      size_t off = first_fit(live, n_live, sz);
      insert_sorted(live, &n_live, (live_block){off, sz, last_use[i]});
      out->offset[(size_t)i * IR_MAX_OUTPUTS + o] = off;
      out->nbytes[(size_t)i * IR_MAX_OUTPUTS + o] = nb;
      out->naive_bytes += sz;
      if (off + sz > out->arena_bytes) out->arena_bytes = off + sz;
    }
    /* Free what dies here, after this node's outputs were placed (a kernel
     * may read its inputs while writing its outputs). */
    int w = 0;
    for (int r = 0; r < n_live; r++)
      if (live[r].last_use > i) live[w++] = live[r];
    n_live = w;
  }
  free(last_use);
  free(live);
  return RLX_OK;
}

void plan_memory_free(plan_memory *m) {
  free(m->offset);
  free(m->nbytes);
  m->offset = NULL;
  m->nbytes = NULL;
}
