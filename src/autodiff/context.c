/* context.c — the state both modes share: per-node derivatives, which
 * nodes are active (depend on a seed), gradient accumulation. */
#include "autodiff.h"

#include <stdlib.h>
#include <string.h>

rlx_status ad_reserve(ad_ctx *c) {
  int need = c->g->n_nodes;
  if (need <= c->cap) return RLX_OK;
  int cap = c->cap ? c->cap : 64;
  while (cap < need) cap *= 2;
  rlx_node *d = realloc(c->deriv, (size_t)cap * IR_MAX_OUTPUTS * sizeof *d);
  if (d) c->deriv = d;
  unsigned char *a = d ? realloc(c->active, (size_t)cap) : NULL;
  if (!a) {
    ir_fail(c->g, NULL, RLX_ERR_NOMEM, "autodiff: out of memory (%d nodes)", cap);
    return RLX_ERR_NOMEM;
  }
  c->active = a;
  for (size_t i = (size_t)c->cap * IR_MAX_OUTPUTS; i < (size_t)cap * IR_MAX_OUTPUTS; i++) c->deriv[i] = -1;
  memset(c->active + c->cap, 0, (size_t)(cap - c->cap));
  c->cap = cap;
  return RLX_OK;
}

/* A node is active when it is a seed, or a differentiable op with a float
 * result reading an active node. */
static void classify(ad_ctx *c, int i) {
  const ir_node *n = &c->g->nodes[i];
  if (c->active[i] || !ir_ops[n->op].differentiable || !ir_is_float(n->out[0].dtype)) return;
  for (int k = 0; k < n->n_in; k++)
    if (c->active[n->in[k]]) {
      c->active[i] = 1;
      return;
    }
}

int ad_active(ad_ctx *c, rlx_node id) {
  if (id < 0 || id >= c->g->n_nodes || ad_reserve(c)) return 0;
  while (c->n_known <= id) classify(c, c->n_known++);
  return c->active[id];
}

rlx_node ad_deriv(ad_ctx *c, rlx_node id, int slot) {
  if (id < 0 || id >= c->cap) return -1;
  return c->deriv[(size_t)id * IR_MAX_OUTPUTS + (size_t)slot];
}

/* Same dtype and rank, and dims equal where both are static. */
static int types_agree(const ir_type *a, const ir_type *b) {
  if (a->dtype != b->dtype || a->shape.rank != b->shape.rank) return 0;
  for (int i = 0; i < a->shape.rank; i++)
    if (a->shape.d[i] != b->shape.d[i] && !ir_dim_is_sym(a->shape.d[i]) && !ir_dim_is_sym(b->shape.d[i]))
      return 0;
  return 1;
}

rlx_status ad_accum(ad_ctx *c, rlx_node id, int slot, rlx_node gr) {
  if (gr < 0 || c->g->err || ad_reserve(c)) return ad_status(c);
  const ir_node *n = &c->g->nodes[id];
  ir_type got = ad_type(c, gr);
  if (!types_agree(&n->out[slot], &got)) {
    char a[IR_SHAPE_STR_CAP], b[IR_SHAPE_STR_CAP];
    ir_fail(c->g, n, RLX_ERR_INTERNAL, "autodiff: derivative of output %d is %s%s, the output is %s%s", slot,
            rlx_dtype_name(got.dtype), ir_shape_str(c->g, &got.shape, a, sizeof a),
            rlx_dtype_name(n->out[slot].dtype), ir_shape_str(c->g, &n->out[slot].shape, b, sizeof b));
    return RLX_ERR_INTERNAL;
  }
  rlx_node *d = &c->deriv[(size_t)id * IR_MAX_OUTPUTS + (size_t)slot];
  *d = *d < 0 ? gr : rlx_add(c->g, *d, gr);
  return ad_status(c);
}
