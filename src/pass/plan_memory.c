/* plan_memory.c — the memory plan of a specialized graph (pass.h): which
 * nodes are views of their input, which elementwise nodes write in place,
 * and the arena offset of every other buffer from its live range. */
#include "pass.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bound of the sum of all buffer sizes (see plan_arena_offsets). */
#define PLAN_MAX_TOTAL ((size_t)1 << 60)

static size_t align_up(size_t x) { return (x + RLX_ARENA_ALIGN - 1) / RLX_ARENA_ALIGN * RLX_ARENA_ALIGN; }

/* ---------------------------------------------------------------- views */

/* 1 if node n can name its input 0's bytes instead of copying them: its
 * bytes are the input's from *byte_off on, in the same order. */
static int view_of_input(const rlx_graph *g, const ir_node *n, size_t *byte_off) {
  *byte_off = 0;
  switch (n->op) {
  case RLX_OP_Reshape:      /* the same elements in the same row-major order */
  case RLX_OP_StopGradient: /* the identity */
  case RLX_OP_GetOutput:    /* the producer's selected output itself */
    return 1;
  case RLX_OP_Cast:
    return n->out[0].dtype == ir_in(g, n, 0)->dtype;
  case RLX_OP_Narrow: {
    const ir_shape *x = &ir_in(g, n, 0)->shape;
    int axis = (int)n->a.axis;
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= x->d[i];
    for (int i = axis + 1; i < x->rank; i++) inner *= x->d[i];
    /* One run of bytes: no dim outside the axis repeats the slice, or the
     * whole axis is kept (then start is 0). */
    if (outer != 1 && n->a.len != x->d[axis]) return 0;
    *byte_off = rlx_dtype_nbytes(n->out[0].dtype, n->a.start * inner);
    return 1;
  }
  default:
    return 0;
  }
}

/* ---------------------------------------------------------------- in-place Assign */

/* Assign a = Assign(p, u) of u = UpdateSlice(p, upd, start), where the
 * Param p is read by nothing but u and a: u writes its rows straight into
 * p's bytes (the session's buffer of p, bound at each run) instead of
 * copying all of p into the arena, and a names those bytes (a view: no
 * kernel, and nothing left to copy back after the run). This is what makes
 * a KV cache cost the rows written per run, not its length. It keeps the
 * semantics: p's old value has no reader but u itself (whose kernel copies
 * nothing when its input and output are one buffer), every reader of u
 * runs after u and sees the new value, and after the run p holds u, as the
 * Assign says. Returns the slot of u, or SIZE_MAX when a does not match.
 * readers: per node, how many inputs of other nodes name it. */
static size_t assign_in_place(const rlx_graph *g, const ir_node *a, const int *readers) {
  if (a->op != RLX_OP_Assign) return SIZE_MAX;
  rlx_node p = a->in[0], u = a->in[1];
  const ir_node *un = &g->nodes[u];
  if (g->nodes[p].op != RLX_OP_Param || un->op != RLX_OP_UpdateSlice || un->in[0] != p || un->in[1] == p ||
      un->in[2] == p || readers[p] != 2)
    return SIZE_MAX;
  return (size_t)u * IR_MAX_OUTPUTS;
}

/* ---------------------------------------------------------------- in place */

/* Ops whose output may take the buffer of an input with the output's shape
 * and byte size. For each, the CPU kernel computes output element i from
 * element i of such an input (and elements of the other inputs), reads
 * every operand of element i before it stores element i, and reads no
 * element it has stored:
 *   Activation, Clamp  out[i] = f(x[i]): cpu_get(x, i), then cpu_set(out, i)
 *                      (k_elementwise.c);
 *   Binary, Compare    out[i] = f(a[ia], b[ib]), both loaded before the
 *                      store; an operand of the output's shape has ia == i;
 *                      Compare qualifies only for 1-byte operands (BOOL out);
 *   Cast               to a dtype of the same size (F32 <-> I32, F16 <->
 *                      BF16, ...): cpu_get(x, i), then cpu_set(out, i);
 *   ElementwiseRegion  region_run (k_fused.c) evaluates the whole chain of
 *                      element i from the inputs into per-step cells, and
 *                      only then copies the last cell into out[i]; with
 *                      the resize prologue, input 0 is a quarter of the
 *                      output and never qualifies;
 *   Rope               rotates pairs (x[i0], x[i1]) of a head: both loaded
 *                      before either is stored (cpu_rope_apply_f32/f64,
 *                      after rope_f32 loads all of x into out or a copy);
 *                      dims past n_rot are out[i] = x[i]; the cos and sin
 *                      tables never have x's shape.
 * Not here: Where (moves elements with memcpy, whose buffers must not
 * overlap), BatchElementwiseRegion (its results tile the output by rows,
 * so an output-sized input is read at other rows than are being written),
 * FusedSwiGLU and TransformRegion (output and input differ in size), and
 * every row-wise or reducing op. A faster kernel for an op of this list
 * must keep the same property (a SIMD loop that loads a vector of inputs
 * before storing the vector of outputs does). */
static int inplace_allowed(int op) {
  switch (op) {
  case RLX_OP_Activation:
  case RLX_OP_Clamp:
  case RLX_OP_Binary:
  case RLX_OP_Compare:
  case RLX_OP_Cast:
  case RLX_OP_ElementwiseRegion:
  case RLX_OP_Rope:
    return 1;
  default:
    return 0;
  }
}

/* ---------------------------------------------------------------- offsets */

typedef struct {
  size_t size;      /* aligned bytes */
  size_t bytes;     /* bytes of the tensors it holds (an in-place chain keeps the size) */
  size_t off;
  int first, last;  /* live range: defining node .. last reader (n_nodes: a graph output) */
} plan_buffer;

static int live_together(const plan_buffer *a, const plan_buffer *b) {
  return a->first <= b->last && b->first <= a->last;
}

/* Places the buffers in the given order: each goes into the tightest gap
 * that holds it between the already placed buffers live at the same time
 * as it, else above all of them. Sizes are aligned, so offsets are.
 * by_off: scratch for n ids (placed buffers by offset). Returns the arena
 * size. */
static size_t place_in_order(plan_buffer *buf, int n, const int *order, int *by_off) {
  size_t arena = 0;
  for (int q = 0; q < n; q++) {
    plan_buffer *b = &buf[order[q]];
    size_t prev_end = 0, best = SIZE_MAX, best_gap = SIZE_MAX;
    for (int p = 0; p < q; p++) {
      const plan_buffer *o = &buf[by_off[p]];
      if (!live_together(b, o)) continue;
      if (o->off >= prev_end && o->off - prev_end >= b->size && o->off - prev_end < best_gap) {
        best = prev_end;
        best_gap = o->off - prev_end;
      }
      if (o->off + o->size > prev_end) prev_end = o->off + o->size;
    }
    b->off = best != SIZE_MAX ? best : prev_end;
    if (b->off + b->size > arena) arena = b->off + b->size;
    int at = q;
    while (at > 0 && buf[by_off[at - 1]].off > b->off) {
      by_off[at] = by_off[at - 1];
      at--;
    }
    by_off[at] = order[q];
  }
  return arena;
}

typedef struct {
  size_t key1, key2;
  int id;
} order_key;

static int by_keys_desc(const void *pa, const void *pb) {
  const order_key *a = pa, *b = pb;
  if (a->key1 != b->key1) return a->key1 < b->key1 ? 1 : -1;
  if (a->key2 != b->key2) return a->key2 < b->key2 ? 1 : -1;
  return a->id < b->id ? -1 : a->id > b->id;
}

typedef struct {
  int *last;          /* per slot: last node reading it (n_nodes: a graph output) */
  int *root;          /* per slot: the slot whose bytes it names (itself unless a view) */
  size_t *view_off;   /* per slot: byte offset into the root's bytes */
  int *family_last;   /* per root slot: last read of it or of any view of it */
  int *buf_of;        /* per root slot: its arena buffer, -1 for leaves */
  int *readers;       /* per node: inputs of other nodes that name it */
  plan_buffer *buf;
  order_key *keys;    /* placement orders */
  int *order;
  int *by_off;
  size_t *best_off;
  int64_t *live;      /* per node: live bytes */
} plan_scratch;

/* live[t] = the sum of buffer sizes live at node t, t in [0, n_nodes]
 * (n_nodes: after the last node, where the graph outputs are read).
 * Returns the largest. */
static size_t live_bytes(const plan_buffer *buf, int n, int n_nodes, int64_t *live) {
  memset(live, 0, ((size_t)n_nodes + 2) * sizeof *live);
  for (int i = 0; i < n; i++) {
    live[buf[i].first] += (int64_t)buf[i].size;
    live[buf[i].last + 1] -= (int64_t)buf[i].size;
  }
  int64_t peak = 0;
  for (int t = 0; t <= n_nodes; t++) {
    if (t > 0) live[t] += live[t - 1];
    if (live[t] > peak) peak = live[t];
  }
  return (size_t)peak;
}

/* Offsets of every buffer: the smallest arena of three placement orders,
 * each packed by place_in_order —
 *   largest first (TFLite's "greedy by size"),
 *   busiest first (by the live bytes at the most crowded node of a
 *   buffer's range, then largest: "greedy by breadth"),
 *   in definition order (first fit along the program).
 * None wins on every graph; a plan is made once, so trying all three is
 * cheap. live: live_bytes' output. Returns the arena size. */
static size_t place_buffers(plan_buffer *buf, int n, const int64_t *live, plan_scratch *s) {
  size_t best = SIZE_MAX;
  for (int strategy = 0; strategy < 3; strategy++) {
    for (int i = 0; i < n; i++) {
      size_t busiest = 0;
      for (int t = buf[i].first; strategy == 1 && t <= buf[i].last; t++)
        if ((size_t)live[t] > busiest) busiest = (size_t)live[t];
      size_t later = SIZE_MAX - (size_t)buf[i].first; /* earlier definition first */
      order_key *k = &s->keys[i];
      k->id = i;
      k->key1 = strategy == 0 ? buf[i].size : strategy == 1 ? busiest : later;
      k->key2 = strategy == 2 ? buf[i].size : strategy == 1 ? buf[i].size : later;
    }
    qsort(s->keys, (size_t)n, sizeof *s->keys, by_keys_desc);
    for (int i = 0; i < n; i++) s->order[i] = s->keys[i].id;
    size_t arena = place_in_order(buf, n, s->order, s->by_off);
    if (arena < best) {
      best = arena;
      for (int i = 0; i < n; i++) s->best_off[i] = buf[i].off;
    }
  }
  for (int i = 0; i < n; i++) buf[i].off = s->best_off[i];
  return n ? best : 0;
}

/* ---------------------------------------------------------------- the plan */

static void scratch_free(plan_scratch *s) {
  free(s->last);
  free(s->root);
  free(s->view_off);
  free(s->family_last);
  free(s->buf_of);
  free(s->readers);
  free(s->buf);
  free(s->keys);
  free(s->order);
  free(s->by_off);
  free(s->best_off);
  free(s->live);
}

static const ir_type *slot_type(const rlx_graph *g, size_t slot) {
  return &g->nodes[slot / IR_MAX_OUTPUTS].out[slot % IR_MAX_OUTPUTS];
}

/* Can node n (its output slot `out_slot`) write into the buffer of input k? */
static int can_write_into(const rlx_graph *g, const ir_node *n, int k, size_t out_slot, const plan_memory *m,
                          const plan_scratch *s) {
  size_t in_slot = plan_input_slot(n, k);
  int root = s->root[in_slot];
  if (m->leaf[root] >= 0) return 0; /* leaves are the caller's: never written */
  if (s->buf_of[root] < 0) return 0; /* outside the arena: the backend's */
  const plan_buffer *b = &s->buf[s->buf_of[root]];
  /* The buffer dies here: no later reader, view or graph output. */
  if (b->last != n->id) return 0;
  /* The input is the whole buffer, element for element the output. */
  if (s->view_off[in_slot] != 0 || m->nbytes[in_slot] != b->bytes || m->nbytes[in_slot] != m->nbytes[out_slot] ||
      !ir_shape_eq(&slot_type(g, in_slot)->shape, &n->out[0].shape))
    return 0;
  /* Another operand in the same buffer must read element i at element i
   * too (x * x, or a same-shape reshape of x). */
  int64_t numel = ir_numel(&n->out[0].shape);
  for (int j = 0; j < n->n_in; j++) {
    size_t other = plan_input_slot(n, j);
    int r = s->root[other];
    if (j == k || m->leaf[r] >= 0 || s->buf_of[r] != s->buf_of[root]) continue;
    if (s->view_off[other] != 0 || m->nbytes[other] != m->nbytes[out_slot] ||
        ir_numel(&slot_type(g, other)->shape) != numel)
      return 0;
  }
  return 1;
}

/* Whether inputs j and k of n are in one arena buffer. */
static int same_buffer(const ir_node *n, int j, int k, const plan_memory *m, const plan_scratch *s) {
  const int rj = s->root[plan_input_slot(n, j)], rk = s->root[plan_input_slot(n, k)];
  return m->leaf[rj] < 0 && s->buf_of[rj] >= 0 && s->buf_of[rj] == s->buf_of[rk];
}

static rlx_status plan_fail(plan_memory *m, plan_scratch *s, rlx_status st) {
  scratch_free(s);
  plan_memory_free(m);
  return st;
}

rlx_status plan_arena_offsets(const rlx_graph *g, const uint8_t *outside, unsigned flags, plan_memory *m) {
  memset(m, 0, sizeof *m);
  const int no_reuse = ir_env_flag("RLX_PLAN_NO_REUSE", 0);
  const int N = g->n_nodes;
  const size_t n_slots = (size_t)N * IR_MAX_OUTPUTS + 1; /* + 1: never a zero-size malloc */
  plan_scratch s = {0};
  m->offset = malloc(n_slots * sizeof *m->offset);
  m->nbytes = calloc(n_slots, sizeof *m->nbytes);
  m->leaf = malloc(n_slots * sizeof *m->leaf);
  m->view = calloc((size_t)N + 1, sizeof *m->view);
  m->inplace_input = malloc(((size_t)N + 1) * sizeof *m->inplace_input);
  s.last = malloc(n_slots * sizeof *s.last);
  s.root = malloc(n_slots * sizeof *s.root);
  s.view_off = calloc(n_slots, sizeof *s.view_off);
  s.family_last = malloc(n_slots * sizeof *s.family_last);
  s.buf_of = malloc(n_slots * sizeof *s.buf_of);
  s.readers = calloc((size_t)N + 1, sizeof *s.readers);
  s.buf = malloc(n_slots * sizeof *s.buf);
  s.keys = malloc(n_slots * sizeof *s.keys);
  s.order = malloc(n_slots * sizeof *s.order);
  s.by_off = malloc(n_slots * sizeof *s.by_off);
  s.best_off = malloc(n_slots * sizeof *s.best_off);
  s.live = malloc(((size_t)N + 2) * sizeof *s.live);
  if (!m->offset || !m->nbytes || !m->leaf || !m->view || !m->inplace_input || !s.last || !s.root ||
      !s.view_off || !s.family_last || !s.buf_of || !s.readers || !s.buf || !s.keys || !s.order || !s.by_off || !s.best_off || !s.live)
    return plan_fail(m, &s, rlx_set_error(RLX_ERR_NOMEM, "memory planning: out of memory"));

  /* Sizes; leaves hold their own bytes; every slot is its own root. */
  for (int i = 0; i < N; i++) {
    const ir_node *n = &g->nodes[i];
    int is_leaf = ir_ops[n->op].category == RLX_CAT_LEAF;
    m->inplace_input[i] = -1;
    for (int o = 0; o < IR_MAX_OUTPUTS; o++) {
      size_t slot = (size_t)i * IR_MAX_OUTPUTS + (size_t)o;
      m->offset[slot] = SIZE_MAX;
      m->leaf[slot] = -1;
      s.root[slot] = (int)slot;
      s.last[slot] = i;
      s.family_last[slot] = -1;
      s.buf_of[slot] = -1;
      if (o >= n->n_out) continue;
      int64_t bytes = ir_type_nbytes(&n->out[o]);
      if (bytes < 0)
        return plan_fail(m, &s, rlx_set_error(RLX_ERR_INTERNAL, "memory planning: %s (node %d) has symbolic dims",
                                              ir_ops[n->op].name, i));
      /* graph.c keeps every type within the limit; a pass that broke that must not size a buffer */
      if (!ir_size_ok(bytes))
        return plan_fail(m, &s, rlx_set_error(RLX_ERR_INTERNAL, "memory planning: %s (node %d) output %d %s%s is "
                                              "larger than RLX_MAX_TENSOR_BYTES", ir_ops[n->op].name, i, o,
                                              rlx_dtype_name(n->out[o].dtype), IR_SHAPE_S(g, &n->out[o].shape)));
      m->nbytes[slot] = (size_t)bytes;
      if (is_leaf) {
        m->leaf[slot] = i;
        m->offset[slot] = 0;
      } else {
        /* The sum of all buffers bounds the arena, every offset and the live
         * bytes: kept far from overflowing (each term is at most 2^40). */
        m->naive_bytes += align_up(m->nbytes[slot] ? m->nbytes[slot] : 1);
        if (m->naive_bytes > PLAN_MAX_TOTAL)
          return plan_fail(m, &s, rlx_set_error(RLX_ERR_NOMEM, "memory planning: the intermediate values up to %s "
                                                "(node %d) take more than 2^60 bytes", ir_ops[n->op].name, i));
      }
    }
  }
  for (int i = 0; i < N; i++)
    for (int k = 0; k < g->nodes[i].n_in; k++) s.last[plan_input_slot(&g->nodes[i], k)] = i;
  for (int k = 0; k < g->n_outputs; k++) s.last[(size_t)g->outputs[k] * IR_MAX_OUTPUTS] = N;

  /* In-place Assigns (assign_in_place): the UpdateSlice's output is the
   * param's bytes, the Assign a view of them (so also when it is a graph
   * output: the param holds the run's result until it is set again). This
   * is not a reuse optimization that RLX_PLAN_NO_REUSE turns off: it is
   * what keeps a run from copying the whole param. */
  for (int i = 0; i < N; i++)
    for (int k = 0; k < g->nodes[i].n_in; k++) s.readers[g->nodes[i].in[k]]++;
  for (int i = 0; i < N; i++) {
    size_t u = assign_in_place(g, &g->nodes[i], s.readers);
    if (u == SIZE_MAX) continue;
    size_t p = (size_t)g->nodes[i].in[0] * IR_MAX_OUTPUTS;
    s.root[u] = (int)p;
    s.root[(size_t)i * IR_MAX_OUTPUTS] = (int)p;
    m->view[i] = 1;
    m->n_views++;
  }

  /* Views name their input's root. A graph output must not name a leaf's
   * bytes: those may change before the caller reads the output. */
  for (int i = 0; i < N && !no_reuse; i++) {
    const ir_node *n = &g->nodes[i];
    size_t off, slot = (size_t)i * IR_MAX_OUTPUTS;
    if (ir_ops[n->op].category == RLX_CAT_LEAF || m->view[i] || !view_of_input(g, n, &off)) continue;
    size_t src = plan_input_slot(n, 0);
    int root = s.root[src];
    if (m->leaf[root] >= 0 && s.last[slot] == N) continue;
    m->view[i] = 1;
    m->n_views++;
    s.root[slot] = root;
    s.view_off[slot] = s.view_off[src] + off;
  }
  for (int i = 0; i < N; i++)
    for (int o = 0; o < g->nodes[i].n_out; o++) {
      size_t slot = (size_t)i * IR_MAX_OUTPUTS + (size_t)o;
      int *fl = &s.family_last[s.root[slot]];
      if (s.last[slot] > *fl) *fl = s.last[slot];
    }

  /* Buffers in node order: an allowed elementwise node takes over the
   * buffer of an input that dies at it, anything else that is not a view
   * gets a buffer of its own. */
  int n_buf = 0;
  for (int i = 0; i < N; i++) {
    const ir_node *n = &g->nodes[i];
    if (ir_ops[n->op].category == RLX_CAT_LEAF || m->view[i] || (outside && outside[i])) continue;
    for (int o = 0; o < n->n_out; o++) {
      size_t slot = (size_t)i * IR_MAX_OUTPUTS + (size_t)o;
      if (s.root[slot] != (int)slot) continue; /* an in-place Assign's UpdateSlice: the param's bytes */
      /* a FusedConv: only into its residual (input 3), and not where x is
       * (a view of) the same buffer: a conv reads x all over */
      const int conv_res = (flags & PLAN_FUSED_CONV_IN_PLACE) && n->op == RLX_OP_FusedConv && n->n_in == 4 &&
                           !same_buffer(n, 0, 3, m, &s);
      if (!no_reuse && o == 0 && (inplace_allowed(n->op) || conv_res)) {
        int k = conv_res ? 3 : 0;
        while (k < n->n_in && !can_write_into(g, n, k, slot, m, &s)) k++;
        if (k < n->n_in) {
          int b = s.buf_of[s.root[plan_input_slot(n, k)]];
          s.buf_of[slot] = b;
          if (s.family_last[slot] > s.buf[b].last) s.buf[b].last = s.family_last[slot];
          m->inplace_input[i] = k;
          m->n_inplace++;
          continue;
        }
      }
      s.buf_of[slot] = n_buf;
      s.buf[n_buf++] = (plan_buffer){align_up(m->nbytes[slot] ? m->nbytes[slot] : 1), m->nbytes[slot], 0, i,
                                     s.family_last[slot]};
    }
  }

  m->peak_live_bytes = live_bytes(s.buf, n_buf, N, s.live);
  if (no_reuse) {
    for (int b = 0; b < n_buf; b++) {
      s.buf[b].off = m->arena_bytes;
      m->arena_bytes += s.buf[b].size;
    }
  } else {
    m->arena_bytes = place_buffers(s.buf, n_buf, s.live, &s);
  }

  for (int i = 0; i < N; i++) {
    if (ir_ops[g->nodes[i].op].category == RLX_CAT_LEAF) continue;
    for (int o = 0; o < g->nodes[i].n_out; o++) {
      size_t slot = (size_t)i * IR_MAX_OUTPUTS + (size_t)o;
      int root = s.root[slot];
      m->leaf[slot] = m->leaf[root];
      m->offset[slot] = (m->leaf[root] >= 0 || s.buf_of[root] < 0 ? 0 : s.buf[s.buf_of[root]].off) + s.view_off[slot];
    }
  }
  if (ir_env_flag("RLX_TRACE", 0))
    fprintf(stderr, "plan_memory: %d buffers in %zu arena bytes (naive %zu, peak live %zu), %d views, %d in place%s\n",
            n_buf, m->arena_bytes, m->naive_bytes, m->peak_live_bytes, m->n_views, m->n_inplace,
            no_reuse ? " (RLX_PLAN_NO_REUSE)" : "");
  scratch_free(&s);
  return RLX_OK;
}

void plan_memory_free(plan_memory *m) {
  free(m->offset);
  free(m->nbytes);
  free(m->leaf);
  free(m->view);
  free(m->inplace_input);
  m->offset = NULL;
  m->nbytes = NULL;
  m->leaf = NULL;
  m->view = NULL;
  m->inplace_input = NULL;
}
