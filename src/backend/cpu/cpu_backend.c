/* cpu_backend.c — the CPU backend: a plan is a list of kernel calls over
 * one arena laid out by the memory planner (plan_memory.c). Views run no
 * kernel: their readers get the viewed bytes (in the arena, or in a leaf's
 * host buffer bound at each run); an in-place node's kernel gets the same
 * pointer for the input it overwrites and its output. It claims every op:
 * it is the reference and the fallback. */
#include "../backend.h"
#include "../../pass/pass.h"
#include "cpu.h"

#include <stdlib.h>
#include <string.h>

/* Where an input's bytes are at run time: a leaf's host buffer (bound per
 * run) at an offset; inputs in the arena are bound once at compile. */
typedef struct {
  int leaf;        /* leaf node id, or -1: the arena */
  size_t offset;
} cpu_binding;

typedef struct {
  const ir_node *node;
  cpu_tensor *in, *out;        /* views into cpu_plan.tensors */
  cpu_binding *in_bind;        /* per input */
} cpu_step;

typedef struct {
  const rlx_graph *g;
  cpu_ctx *ctx;
  plan_memory mem;
  uint8_t *arena;
  cpu_step *steps;             /* the nodes that compute: no leaves, no views */
  int n_steps;
  cpu_tensor *tensors;
  cpu_binding *bindings;
} cpu_plan;

static int cpu_claims(const rlx_backend *b, const rlx_graph *g, rlx_node n, char *why, size_t cap) {
  (void)b, (void)g, (void)n, (void)why, (void)cap;
  return 1;
}

static void tensor_of(cpu_tensor *t, const ir_type *ty, void *data) {
  memset(t, 0, sizeof *t);
  t->data = data;
  t->dtype = ty->dtype;
  t->rank = ty->shape.rank;
  memcpy(t->d, ty->shape.d, sizeof t->d);
  t->numel = ir_numel(&ty->shape);
  t->nbytes = rlx_dtype_nbytes(ty->dtype, t->numel);
}

static void cpu_free(void *p) {
  cpu_plan *pl = p;
  if (!pl) return;
  plan_memory_free(&pl->mem);
  cpu_ctx_free(pl->ctx);
  free(pl->arena);
  free(pl->steps);
  free(pl->tensors);
  free(pl->bindings);
  free(pl);
}

static rlx_status cpu_compile(const rlx_backend *b, const rlx_graph *g, const rlx_options *opt, void **out) {
  (void)b;
  *out = NULL;
  cpu_plan *pl = calloc(1, sizeof *pl);
  if (!pl || !(pl->ctx = cpu_ctx_new(opt ? opt->threads : 0))) {
    free(pl);
    return rlx_set_error(RLX_ERR_NOMEM, "cpu plan: out of memory");
  }
  pl->g = g;
  rlx_status st = plan_arena_offsets(g, &pl->mem);
  if (st) {
    cpu_ctx_free(pl->ctx);
    free(pl);
    return st;
  }
  size_t arena = (pl->mem.arena_bytes + RLX_ARENA_ALIGN - 1) / RLX_ARENA_ALIGN * RLX_ARENA_ALIGN;
  size_t n_tensors = 0;
  for (int i = 0; i < g->n_nodes; i++)
    if (ir_ops[g->nodes[i].op].category != RLX_CAT_LEAF) n_tensors += (size_t)(g->nodes[i].n_in + g->nodes[i].n_out);
  pl->arena = aligned_alloc(RLX_ARENA_ALIGN, arena ? arena : RLX_ARENA_ALIGN);
  pl->steps = calloc((size_t)g->n_nodes + 1, sizeof *pl->steps);
  pl->tensors = calloc(n_tensors + 1, sizeof *pl->tensors);
  pl->bindings = calloc(n_tensors + 1, sizeof *pl->bindings);
  if (!pl->arena || !pl->steps || !pl->tensors || !pl->bindings) {
    cpu_free(pl);
    return rlx_set_error(RLX_ERR_NOMEM, "cpu plan: out of memory (arena %zu bytes)", arena);
  }
  memset(pl->arena, 0, arena);
  size_t t = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    /* A view names its input's bytes: nothing to compute. */
    if (ir_ops[n->op].category == RLX_CAT_LEAF || pl->mem.view[i]) continue;
    cpu_step *s = &pl->steps[pl->n_steps++];
    s->node = n;
    s->in = &pl->tensors[t];
    s->in_bind = &pl->bindings[t];
    for (int k = 0; k < n->n_in; k++, t++) {
      size_t slot = plan_input_slot(n, k);
      const ir_node *src = &g->nodes[slot / IR_MAX_OUTPUTS];
      cpu_binding *where = &pl->bindings[t];
      where->leaf = pl->mem.leaf[slot];
      where->offset = pl->mem.offset[slot];
      tensor_of(&pl->tensors[t], &src->out[slot % IR_MAX_OUTPUTS],
                where->leaf < 0 ? pl->arena + where->offset : NULL);
    }
    s->out = &pl->tensors[t];
    /* An in-place node's output offset is its input's: the kernel gets one pointer for both. */
    for (int o = 0; o < n->n_out; o++, t++) {
      size_t slot = (size_t)i * IR_MAX_OUTPUTS + (size_t)o;
      tensor_of(&pl->tensors[t], &n->out[o], pl->arena + pl->mem.offset[slot]);
      pl->bindings[t].leaf = -1;
    }
  }
  *out = pl;
  return RLX_OK;
}

static rlx_status cpu_run(void *p, const rlx_bindings *bind) {
  cpu_plan *pl = p;
  for (int i = 0; i < pl->n_steps; i++) {
    cpu_step *s = &pl->steps[i];
    for (int k = 0; k < s->node->n_in; k++) {
      const cpu_binding *where = &s->in_bind[k];
      if (where->leaf < 0) continue;
      const uint8_t *data = bind->leaf_data[where->leaf];
      s->in[k].data = (void *)(where->offset ? data + where->offset : data); /* no arithmetic on an empty leaf's NULL */
    }
    rlx_status st = cpu_kernels[s->node->op](pl->ctx, s->node, s->in, s->out);
    if (st) return st;
  }
  return RLX_OK;
}

static rlx_status cpu_read(void *p, rlx_node n, int index, void *dst, size_t nbytes) {
  cpu_plan *pl = p;
  size_t slot = (size_t)n * IR_MAX_OUTPUTS + (size_t)index;
  /* Graph outputs are in the arena: the planner copies a view of a leaf that is an output. */
  if (pl->mem.offset[slot] == SIZE_MAX || pl->mem.leaf[slot] >= 0 || pl->mem.nbytes[slot] != nbytes)
    return rlx_set_error(RLX_ERR_INTERNAL, "cpu plan: node %d output %d has no buffer of %zu bytes", (int)n,
                         index, nbytes);
  memcpy(dst, pl->arena + pl->mem.offset[slot], nbytes);
  return RLX_OK;
}

static void cpu_memory_stats(const void *p, rlx_session_stats *st) {
  const plan_memory *m = &((const cpu_plan *)p)->mem;
  st->arena_bytes = m->arena_bytes;
  st->naive_bytes = m->naive_bytes;
  st->peak_live_bytes = m->peak_live_bytes;
  st->views = m->n_views;
  st->in_place = m->n_inplace;
}

const rlx_backend rlx_cpu_backend = {"cpu", cpu_claims, cpu_compile, cpu_run, cpu_read, cpu_memory_stats,
                                     cpu_free};
