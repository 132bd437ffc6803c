/* cpu_backend.c — the CPU backend: a plan is a list of kernel calls over
 * one arena laid out by the memory planner (plan_memory.c). Views run no
 * kernel: their readers get the viewed bytes (in the arena, or in a leaf's
 * host buffer bound at each run); an in-place node's kernel gets the same
 * pointer for the input it overwrites and its output. It claims every op:
 * it is the reference and the fallback. Param and constant inputs carry a
 * GEMM prepack slot (gemm.h) while their data is unchanged, so weights are
 * packed once, not on every run. */
#include "../backend.h"
#include "../../pass/pass.h"
#include "cpu.h"
#include "gemm.h"

#include <stdlib.h>
#include <string.h>

/* Where an input's bytes are at run time: a leaf's host buffer (bound per
 * run) at an offset; inputs in the arena are bound once at compile. */
/* A param's or constant's packed GEMM copy, shared by the inputs bound to
 * the same leaf bytes; version: the leaf's data version it was valid for. */
typedef struct {
  int leaf;
  size_t offset;
  int constant;    /* a Constant: its bytes never change */
  uint64_t version;
  gemm_prepack *slot;
} cpu_prepack;

typedef struct {
  int leaf;        /* leaf node id, or -1: the arena */
  size_t offset;
  int prepack;     /* index into cpu_plan.prepacks, or -1 */
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
  const void *const *leaf_data; /* the bindings of the last run (cpu_read of an in-place Assign) */
  cpu_prepack *prepacks;
  int n_prepacks;
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
  for (int i = 0; i < pl->n_prepacks; i++) gemm_prepack_free(pl->prepacks[i].slot);
  free(pl->prepacks);
  free(pl);
}

/* The prepack slot of the bytes of `leaf` at `offset` (shared by all inputs
 * bound there), or -1 when it is no param/constant or memory is short
 * (prepacking is an optimization). */
static int prepack_of(cpu_plan *pl, int leaf, size_t offset) {
  int op = pl->g->nodes[leaf].op;
  if (op != RLX_OP_Param && op != RLX_OP_Constant) return -1;
  for (int i = 0; i < pl->n_prepacks; i++)
    if (pl->prepacks[i].leaf == leaf && pl->prepacks[i].offset == offset) return i;
  gemm_prepack *slot = gemm_prepack_new();
  if (!slot) return -1;
  pl->prepacks[pl->n_prepacks] = (cpu_prepack){leaf, offset, op == RLX_OP_Constant, 0, slot};
  return pl->n_prepacks++;
}

static rlx_status cpu_compile(const rlx_backend *b, const rlx_graph *g, const rlx_options *opt, void *store,
                              void **out) {
  (void)b, (void)store; /* the CPU reads params where the session holds them */
  *out = NULL;
  cpu_plan *pl = calloc(1, sizeof *pl);
  if (!pl || !(pl->ctx = cpu_ctx_new(opt ? opt->threads : 0))) {
    free(pl);
    return rlx_set_error(RLX_ERR_NOMEM, "cpu plan: out of memory");
  }
  pl->g = g;
  rlx_status st = plan_arena_offsets(g, NULL, &pl->mem);
  if (st) {
    cpu_ctx_free(pl->ctx);
    free(pl);
    return st;
  }
  size_t arena = (pl->mem.arena_bytes + RLX_ARENA_ALIGN - 1) / RLX_ARENA_ALIGN * RLX_ARENA_ALIGN;
  if ((st = ir_memory_check(arena, "cpu plan: the arena of intermediate values"))) {
    cpu_free(pl);
    return st;
  }
  size_t n_tensors = 0;
  for (int i = 0; i < g->n_nodes; i++)
    if (ir_ops[g->nodes[i].op].category != RLX_CAT_LEAF) n_tensors += (size_t)(g->nodes[i].n_in + g->nodes[i].n_out);
  pl->arena = aligned_alloc(RLX_ARENA_ALIGN, arena ? arena : RLX_ARENA_ALIGN);
  pl->steps = calloc((size_t)g->n_nodes + 1, sizeof *pl->steps);
  pl->tensors = calloc(n_tensors + 1, sizeof *pl->tensors);
  pl->bindings = calloc(n_tensors + 1, sizeof *pl->bindings);
  pl->prepacks = calloc(n_tensors + 1, sizeof *pl->prepacks);
  if (!pl->arena || !pl->steps || !pl->tensors || !pl->bindings || !pl->prepacks) {
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
      where->prepack = where->leaf < 0 ? -1 : prepack_of(pl, where->leaf, where->offset);
      tensor_of(&pl->tensors[t], &src->out[slot % IR_MAX_OUTPUTS],
                where->leaf < 0 ? pl->arena + where->offset : NULL);
    }
    s->out = &pl->tensors[t];
    /* An in-place node's output offset is its input's: the kernel gets one
     * pointer for both. An output in a leaf's bytes (an in-place Assign's
     * UpdateSlice, plan_memory.c) is bound at each run, as inputs are. */
    for (int o = 0; o < n->n_out; o++, t++) {
      size_t slot = (size_t)i * IR_MAX_OUTPUTS + (size_t)o;
      pl->bindings[t].leaf = pl->mem.leaf[slot];
      pl->bindings[t].offset = pl->mem.offset[slot];
      pl->bindings[t].prepack = -1; /* an output is never a packed weight */
      tensor_of(&pl->tensors[t], &n->out[o], pl->mem.leaf[slot] < 0 ? pl->arena + pl->mem.offset[slot] : NULL);
    }
  }
  *out = pl;
  return RLX_OK;
}

static rlx_status cpu_run(void *p, const rlx_bindings *bind) {
  cpu_plan *pl = p;
  pl->leaf_data = bind->leaf_data;
  for (int i = 0; i < pl->n_steps; i++) {
    cpu_step *s = &pl->steps[i];
    /* inputs, then outputs: both are consecutive in tensors and bindings */
    for (int k = 0; k < s->node->n_in + s->node->n_out; k++) {
      const cpu_binding *where = &s->in_bind[k];
      if (where->leaf < 0) continue;
      const uint8_t *data = bind->leaf_data[where->leaf];
      s->in[k].data = (void *)(where->offset ? data + where->offset : data); /* no arithmetic on an empty leaf's NULL */
      s->in[k].prepack = NULL;
      if (where->prepack < 0) continue;
      /* a param's packed copy holds while its data version does; version 0
       * (unknown) vouches for nothing */
      cpu_prepack *pp = &pl->prepacks[where->prepack];
      uint64_t v = bind->leaf_version ? bind->leaf_version[where->leaf] : 0;
      if (!pp->constant && v == 0) continue;
      if (v != pp->version) {
        gemm_prepack_reset(pp->slot);
        pp->version = v;
      }
      s->in[k].prepack = pp->slot;
    }
    rlx_status st = cpu_kernels[s->node->op](pl->ctx, s->node, s->in, s->out);
    if (st) return st;
  }
  return RLX_OK;
}

static rlx_status cpu_read(void *p, rlx_node n, int index, void *dst, size_t nbytes) {
  cpu_plan *pl = p;
  size_t slot = (size_t)n * IR_MAX_OUTPUTS + (size_t)index;
  if (pl->mem.offset[slot] == SIZE_MAX || pl->mem.nbytes[slot] != nbytes ||
      (pl->mem.leaf[slot] >= 0 && !pl->leaf_data))
    return rlx_set_error(RLX_ERR_INTERNAL, "cpu plan: node %d output %d has no buffer of %zu bytes", (int)n,
                         index, nbytes);
  /* Graph outputs are in the arena (the planner copies a view of a leaf that
   * is an output), but for an in-place Assign, which names its param's
   * bytes: the session reads those back into the param itself (nothing to do). */
  if (!nbytes) return RLX_OK;
  const uint8_t *src = pl->mem.leaf[slot] >= 0 ? (const uint8_t *)pl->leaf_data[pl->mem.leaf[slot]] + pl->mem.offset[slot]
                                               : pl->arena + pl->mem.offset[slot];
  if (src != dst) memcpy(dst, src, nbytes);
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

/* No keep_assigned: an in-place Assign already updates the session's host
 * copy (the param's bytes), so reading it back copies nothing. */
const rlx_backend rlx_cpu_backend = {"cpu", cpu_claims, cpu_compile, cpu_run, cpu_read, cpu_memory_stats,
                                     cpu_free, NULL, NULL, NULL, NULL, NULL};
