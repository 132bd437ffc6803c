/* cpu_backend.c — the CPU backend: a plan is a list of kernel calls over
 * one arena laid out by the memory planner. It claims every op: it is the
 * reference and the fallback. */
#include "../backend.h"
#include "../../pass/pass.h"
#include "cpu.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  const ir_node *node;
  cpu_tensor *in, *out;        /* views into cpu_plan.tensors */
  int *in_leaf;                /* per input: leaf node id whose data to bind at run, or -1 */
} cpu_step;

typedef struct {
  const rlx_graph *g;
  cpu_ctx *ctx;
  plan_memory mem;
  uint8_t *arena;
  cpu_step *steps;
  int n_steps;
  cpu_tensor *tensors;
  int *leaf_ids;
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
  free(pl->leaf_ids);
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
  pl->leaf_ids = malloc((n_tensors + 1) * sizeof *pl->leaf_ids);
  if (!pl->arena || !pl->steps || !pl->tensors || !pl->leaf_ids) {
    cpu_free(pl);
    return rlx_set_error(RLX_ERR_NOMEM, "cpu plan: out of memory (arena %zu bytes)", arena);
  }
  memset(pl->arena, 0, arena);
  size_t t = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    if (ir_ops[n->op].category == RLX_CAT_LEAF) continue;
    cpu_step *s = &pl->steps[pl->n_steps++];
    s->node = n;
    s->in = &pl->tensors[t];
    s->in_leaf = &pl->leaf_ids[t];
    for (int k = 0; k < n->n_in; k++, t++) {
      const ir_node *src = &g->nodes[n->in[k]];
      int o = n->op == RLX_OP_GetOutput ? (int)n->a.index : 0;  /* GetOutput reads the selected output */
      tensor_of(&pl->tensors[t], &src->out[o], NULL);
      if (ir_ops[src->op].category == RLX_CAT_LEAF) {
        pl->leaf_ids[t] = src->id;
      } else {
        pl->leaf_ids[t] = -1;
        pl->tensors[t].data = pl->arena + pl->mem.offset[(size_t)src->id * IR_MAX_OUTPUTS + o];
      }
    }
    s->out = &pl->tensors[t];
    for (int o = 0; o < n->n_out; o++, t++) {
      tensor_of(&pl->tensors[t], &n->out[o], pl->arena + pl->mem.offset[(size_t)i * IR_MAX_OUTPUTS + o]);
      pl->leaf_ids[t] = -1;
    }
  }
  *out = pl;
  return RLX_OK;
}

static rlx_status cpu_run(void *p, const rlx_bindings *bind) {
  cpu_plan *pl = p;
  for (int i = 0; i < pl->n_steps; i++) {
    cpu_step *s = &pl->steps[i];
    for (int k = 0; k < s->node->n_in; k++)
      if (s->in_leaf[k] >= 0) s->in[k].data = (void *)bind->leaf_data[s->in_leaf[k]];
    rlx_status st = cpu_kernels[s->node->op](pl->ctx, s->node, s->in, s->out);
    if (st) return st;
  }
  return RLX_OK;
}

static rlx_status cpu_read(void *p, rlx_node n, int index, void *dst, size_t nbytes) {
  cpu_plan *pl = p;
  size_t slot = (size_t)n * IR_MAX_OUTPUTS + (size_t)index;
  if (pl->mem.offset[slot] == SIZE_MAX || pl->mem.nbytes[slot] != nbytes)
    return rlx_set_error(RLX_ERR_INTERNAL, "cpu plan: node %d output %d has no buffer of %zu bytes", (int)n,
                         index, nbytes);
  memcpy(dst, pl->arena + pl->mem.offset[slot], nbytes);
  return RLX_OK;
}

static size_t cpu_arena_bytes(const void *p) { return ((const cpu_plan *)p)->mem.arena_bytes; }

const rlx_backend rlx_cpu_backend = {"cpu", cpu_claims, cpu_compile, cpu_run, cpu_read, cpu_arena_bytes,
                                     cpu_free};
