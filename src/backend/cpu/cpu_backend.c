/* cpu_backend.c — the CPU backend: a plan is a list of kernel calls over
 * one arena laid out by the memory planner (plan_memory.c). Views run no
 * kernel: their readers get the viewed bytes (in the arena, or in a leaf's
 * host buffer bound at each run); an in-place node's kernel gets the same
 * pointer for the input it overwrites and its output. It claims every op:
 * it is the reference and the fallback. Param and constant inputs carry a
 * GEMM prepack slot (gemm.h) while their data is unchanged, so weights are
 * packed once, not on every run; the plans of one session (one per shape
 * binding) share those slots through the session's store (cpu_store), so
 * a weight is packed once per session, not once per plan, and a run of a
 * plan for another length reads the same packed copy (in cache when the
 * lengths alternate). A 2-D Transpose of a param or constant
 * that only MatMuls (plain or fused with bias and activation) read as their
 * B (ONNX's Gemm with transB) runs no
 * kernel and gets no arena bytes: its readers take the weight's own bytes
 * as a transposed operand (cpu_tensor.transposed), packed once like any
 * weight. */
#include "../backend.h"
#include "../../pass/pass.h"
#include "cpu.h"
#include "gemm.h"
#include "huge_alloc.h"

#include <pthread.h>
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

/* The session's store: the packed copies its plans share, by leaf id and
 * offset (the plans of a session are specializations of one graph: a leaf
 * has the same id in each, and the same data version at any time). An
 * idle plan of the compile cache can be freed from another session's
 * thread: a mutex guards the list; the slots themselves are used only by
 * the runs of the session, one at a time. */
typedef struct cpu_store_entry {
  cpu_prepack pp;
  int users;                   /* plans that hold it */
  struct cpu_store_entry *next;
} cpu_store_entry;

typedef struct {
  pthread_mutex_t mu;
  cpu_store_entry *head;
} cpu_store;

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
  size_t arena_bytes;          /* what huge_alloc gave the arena */
  cpu_step *steps;             /* the nodes that compute: no leaves, no views */
  int n_steps;
  cpu_tensor *tensors;
  cpu_binding *bindings;
  const void *const *leaf_data; /* the bindings of the last run (cpu_read of an in-place Assign) */
  cpu_prepack **prepacks;       /* the plan's own, or entries of the store */
  int n_prepacks;
  cpu_store *store;             /* NULL: the plan owns its prepacks */
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

static void *cpu_store_new(int device_index) {
  (void)device_index;
  cpu_store *st = calloc(1, sizeof *st);
  if (st && pthread_mutex_init(&st->mu, NULL) != 0) {
    free(st);
    return NULL;
  }
  return st;
}

static void cpu_store_free(void *p) {
  cpu_store *st = p;
  if (!st) return;
  while (st->head) { /* none left when every plan gave its entries back; freed anyway */
    cpu_store_entry *e = st->head;
    st->head = e->next;
    gemm_prepack_free(e->pp.slot);
    free(e);
  }
  pthread_mutex_destroy(&st->mu);
  free(st);
}

/* The store's entry for (leaf, offset), made when missing, with one more
 * user; NULL: out of memory. */
static cpu_prepack *store_get(cpu_store *st, int leaf, size_t offset, int constant) {
  pthread_mutex_lock(&st->mu);
  cpu_store_entry *e = st->head;
  while (e && (e->pp.leaf != leaf || e->pp.offset != offset)) e = e->next;
  gemm_prepack *slot = e ? NULL : gemm_prepack_new();
  if (!e && slot && (e = calloc(1, sizeof *e))) {
    e->pp = (cpu_prepack){leaf, offset, constant, 0, slot};
    e->next = st->head;
    st->head = e;
  } else if (!e) {
    gemm_prepack_free(slot);
  }
  if (e) e->users++;
  pthread_mutex_unlock(&st->mu);
  return e ? &e->pp : NULL;
}

/* A plan gives an entry back; the last user frees it. */
static void store_put(cpu_store *st, cpu_prepack *pp) {
  pthread_mutex_lock(&st->mu);
  cpu_store_entry **at = &st->head;
  while (*at && &(*at)->pp != pp) at = &(*at)->next;
  cpu_store_entry *e = *at;
  if (e && --e->users == 0) {
    *at = e->next;
    gemm_prepack_free(e->pp.slot);
    free(e);
  }
  pthread_mutex_unlock(&st->mu);
}

static void cpu_free(void *p) {
  cpu_plan *pl = p;
  if (!pl) return;
  plan_memory_free(&pl->mem);
  cpu_ctx_free(pl->ctx);
  huge_free(pl->arena, pl->arena_bytes);
  free(pl->steps);
  free(pl->tensors);
  free(pl->bindings);
  for (int i = 0; i < pl->n_prepacks; i++) {
    if (pl->store) {
      store_put(pl->store, pl->prepacks[i]);
    } else {
      gemm_prepack_free(pl->prepacks[i]->slot);
      free(pl->prepacks[i]);
    }
  }
  free(pl->prepacks);
  free(pl);
}

/* The prepack slot of the bytes of `leaf` at `offset` (shared by all inputs
 * bound there, and through the store by the session's other plans), or -1
 * when it is no param/constant or memory is short (prepacking is an
 * optimization). */
static int prepack_of(cpu_plan *pl, int leaf, size_t offset) {
  int op = pl->g->nodes[leaf].op;
  if (op != RLX_OP_Param && op != RLX_OP_Constant) return -1;
  for (int i = 0; i < pl->n_prepacks; i++)
    if (pl->prepacks[i]->leaf == leaf && pl->prepacks[i]->offset == offset) return i;
  cpu_prepack *pp = NULL;
  if (pl->store) {
    pp = store_get(pl->store, leaf, offset, op == RLX_OP_Constant);
  } else if ((pp = malloc(sizeof *pp))) {
    *pp = (cpu_prepack){leaf, offset, op == RLX_OP_Constant, 0, gemm_prepack_new()};
    if (!pp->slot) {
      free(pp);
      pp = NULL;
    }
  }
  if (!pp) return -1;
  pl->prepacks[pl->n_prepacks] = pp;
  return pl->n_prepacks++;
}

/* read_through[i] = 1 for the 2-D F32/F16/BF16 Transposes of a param or
 * constant whose every use is as input 1 of a MatMul or FusedMatMulBiasAct
 * (whose kernels read cpu_tensor.transposed; not a graph output:
 * outputs count as uses). NULL: out of
 * memory (then none is read through: correct, only slower). */
static uint8_t *weight_transposes(const rlx_graph *g) {
  uint8_t *rt = calloc((size_t)g->n_nodes + 1, 1);
  int *uses = ir_use_counts(g), *mm_uses = calloc((size_t)g->n_nodes + 1, sizeof *mm_uses);
  if (!rt || !uses || !mm_uses) {
    free(rt);
    rt = NULL;
    goto done;
  }
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    if ((n->op == RLX_OP_MatMul || n->op == RLX_OP_FusedMatMulBiasAct) && n->n_in >= 2) mm_uses[n->in[1]]++;
  }
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    const rlx_dtype t = n->out[0].dtype;
    if (n->op != RLX_OP_Transpose || n->out[0].shape.rank != 2 || n->a.perm.v[0] != 1 ||
        (t != RLX_F32 && t != RLX_F16 && t != RLX_BF16)) /* the GEMM's dtypes (not F64's loop) */
      continue;
    const int src = g->nodes[n->in[0]].op;
    rt[i] = (src == RLX_OP_Param || src == RLX_OP_Constant) && uses[i] > 0 && mm_uses[i] == uses[i];
  }
done:
  free(uses);
  free(mm_uses);
  return rt;
}

static rlx_status cpu_compile(const rlx_backend *b, const rlx_graph *g, const rlx_options *opt, void *store,
                              void **out) {
  (void)b; /* the CPU reads params where the session holds them; the store holds their packed copies */
  *out = NULL;
  cpu_plan *pl = calloc(1, sizeof *pl);
  if (!pl || !(pl->ctx = cpu_ctx_new(opt ? opt->threads : 0))) {
    free(pl);
    return rlx_set_error(RLX_ERR_NOMEM, "cpu plan: out of memory");
  }
  pl->g = g;
  pl->store = store;
  cpu_ctx_set_comm(pl->ctx, opt ? opt->comm : NULL);
  cpu_ctx_set_flags(pl->ctx, opt ? opt->flags : 0);
  uint8_t *read_through = weight_transposes(g);
  rlx_status st = plan_arena_offsets(g, read_through, PLAN_FUSED_CONV_IN_PLACE, &pl->mem);
  if (st) {
    free(read_through);
    cpu_ctx_free(pl->ctx);
    free(pl);
    return st;
  }
  size_t arena = (pl->mem.arena_bytes + RLX_ARENA_ALIGN - 1) / RLX_ARENA_ALIGN * RLX_ARENA_ALIGN;
  if ((st = ir_memory_check(arena, "cpu plan: the arena of intermediate values"))) {
    free(read_through);
    cpu_free(pl);
    return st;
  }
  size_t n_tensors = 0;
  for (int i = 0; i < g->n_nodes; i++)
    if (ir_ops[g->nodes[i].op].category != RLX_CAT_LEAF) n_tensors += (size_t)(g->nodes[i].n_in + g->nodes[i].n_out);
  /* in huge pages: a convolution reads its im2col taps or its in-place
   * GEMM operand down the channels, a plane apart, a new small page every
   * row (a batch of 8 ResNet-50 images: 3 MiB planes of 256 channels) */
  pl->arena_bytes = arena ? arena : RLX_ARENA_ALIGN;
  pl->arena = huge_alloc(pl->arena_bytes);
  pl->steps = calloc((size_t)g->n_nodes + 1, sizeof *pl->steps);
  pl->tensors = calloc(n_tensors + 1, sizeof *pl->tensors);
  pl->bindings = calloc(n_tensors + 1, sizeof *pl->bindings);
  pl->prepacks = calloc(n_tensors + 1, sizeof *pl->prepacks);
  if (!pl->arena || !pl->steps || !pl->tensors || !pl->bindings || !pl->prepacks) {
    free(read_through);
    cpu_free(pl);
    return rlx_set_error(RLX_ERR_NOMEM, "cpu plan: out of memory (arena %zu bytes)", arena);
  }
  memset(pl->arena, 0, arena);
  size_t t = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    /* A view names its input's bytes: nothing to compute. */
    if (ir_ops[n->op].category == RLX_CAT_LEAF || pl->mem.view[i] || (read_through && read_through[i])) continue;
    cpu_step *s = &pl->steps[pl->n_steps++];
    s->node = n;
    s->in = &pl->tensors[t];
    s->in_bind = &pl->bindings[t];
    for (int k = 0; k < n->n_in; k++, t++) {
      size_t slot = plan_input_slot(n, k);
      const ir_node *src = &g->nodes[slot / IR_MAX_OUTPUTS];
      const int through = read_through && read_through[src->id];
      /* a weight transpose read through: the weight's bytes */
      const size_t at = through ? plan_input_slot(src, 0) : slot;
      cpu_binding *where = &pl->bindings[t];
      where->leaf = pl->mem.leaf[at];
      where->offset = pl->mem.offset[at];
      where->prepack = where->leaf < 0 ? -1 : prepack_of(pl, where->leaf, where->offset);
      tensor_of(&pl->tensors[t], &src->out[slot % IR_MAX_OUTPUTS],
                where->leaf < 0 ? pl->arena + where->offset : NULL);
      pl->tensors[t].transposed = through;
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
  free(read_through);
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
      cpu_prepack *pp = pl->prepacks[where->prepack];
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

/* The weights that g's DequantMatMul nodes read straight from a param,
 * packed now into the store's entries for those params (as the plans'
 * first runs would: cpu_dequant_prepack), valid for the params' current
 * versions. The store holds the entries made here until it is freed. */
static rlx_status cpu_prepare(void *store, const rlx_graph *g, const rlx_options *opt, const rlx_bindings *bind) {
  cpu_store *st = store;
  cpu_ctx *ctx = cpu_ctx_new(opt ? opt->threads : 0);
  if (!ctx) return rlx_set_error(RLX_ERR_NOMEM, "cpu prepare: out of memory");
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    if (n->op != RLX_OP_DequantMatMul) continue;
    const ir_node *w = &g->nodes[n->in[1]];
    const uint64_t v = bind->leaf_version ? bind->leaf_version[w->id] : 0;
    if (w->op != RLX_OP_Param || !bind->leaf_data[w->id] || v == 0 || ir_numel(&w->out[0].shape) < 0) continue;
    cpu_prepack *pp = store_get(st, w->id, 0, 0);
    if (!pp) continue; /* packing is an optimization: the first run packs it */
    if (pp->version != v) {
      gemm_prepack_reset(pp->slot);
      pp->version = v;
    }
    cpu_tensor t;
    tensor_of(&t, &w->out[0], (void *)bind->leaf_data[w->id]);
    cpu_dequant_prepack(ctx, pp->slot, &t);
  }
  cpu_ctx_free(ctx);
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
  const cpu_plan *pl = p;
  const plan_memory *m = &pl->mem;
  st->arena_bytes = m->arena_bytes;
  st->naive_bytes = m->naive_bytes;
  st->peak_live_bytes = m->peak_live_bytes;
  st->views = m->n_views;
  st->in_place = m->n_inplace;
  st->packed_bytes = 0;
  for (int i = 0; i < pl->n_prepacks; i++) st->packed_bytes += gemm_prepack_bytes(pl->prepacks[i]->slot);
}

/* No keep_assigned: an in-place Assign already updates the session's host
 * copy (the param's bytes), so reading it back copies nothing. */
const rlx_backend rlx_cpu_backend = {"cpu", cpu_claims, cpu_compile, cpu_run, cpu_read, cpu_memory_stats,
                                     cpu_free, NULL, NULL, cpu_store_new, cpu_store_free, NULL, cpu_prepare};
