/* test_plan.c — the memory planner (src/pass/plan_memory.c) on an MLP, a
 * pre-LN transformer block, a 12-layer BERT-style encoder and small graphs
 * aimed at views and in-place.
 *
 * For each graph, against a reference computed here from the graph alone:
 *   - the arena is at most 1.05x the largest sum of simultaneously live
 *     tensors (first def to last use; a view is its input's tensor), and
 *     below the naive size (every tensor its own bytes); and at most 1.05x
 *     the plan's own peak of live buffers (with in-place outputs sharing);
 *   - every node the reference calls a view gets no bytes of its own (its
 *     offset is inside its input's, at the right place), and no other node
 *     is a view;
 *   - every in-place node writes into an input that dies at it, has the
 *     output's shape and bytes and is neither a leaf nor a graph output;
 *   - no two tensors that are live at once share a byte, except an in-place
 *     output with the input it overwrites;
 * and, through sessions on random data, every output is bit-identical to
 * the same graph planned with RLX_PLAN_NO_REUSE=1 (no reuse, no views, no
 * in-place). */
#include "rlx.h"
#include "ir/ir.h"
#include "pass/pass.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* ---------------------------------------------------------------- random data */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static double uniform(void) { /* [-1, 1) */
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) / (double)(1ull << 52) - 1.0;
}

/* ---------------------------------------------------------------- graph builders */

typedef struct {
  rlx_graph *g;
  int n_params;
} builder;

static rlx_node param(builder *b, int rank, const int64_t *dims) {
  char name[32];
  snprintf(name, sizeof name, "p%d", b->n_params++);
  return rlx_param(b->g, name, RLX_F32, rank, dims);
}

/* x [S, in] @ W [in, out] + bias [out] */
static rlx_node linear(builder *b, rlx_node x, int64_t in, int64_t out) {
  int64_t wd[] = {in, out}, bd[] = {out};
  rlx_node w = param(b, 2, wd); /* named before the bias: p<k> is W, p<k+1> its bias */
  return rlx_add(b->g, rlx_matmul(b->g, x, w), param(b, 1, bd));
}

static rlx_node layer_norm(builder *b, rlx_node x, int64_t d) {
  int64_t gd[] = {d};
  rlx_node gamma = param(b, 1, gd);
  return rlx_layer_norm(b->g, x, gamma, param(b, 1, gd), -1, 1e-5);
}

/* Multi-head self-attention of x [S, D] from primitives: projections,
 * heads by reshape + transpose, scaled scores, softmax, the weighted sum,
 * the output projection. */
static rlx_node attention(builder *b, rlx_node x, int64_t S, int64_t D, int64_t H) {
  rlx_graph *g = b->g;
  int64_t Dh = D / H, heads[] = {S, H, Dh}, flat[] = {S, D};
  int64_t to_hsd[] = {1, 0, 2}, to_hds[] = {1, 2, 0};
  rlx_node q = rlx_transpose(g, rlx_reshape(g, linear(b, x, D, D), 3, heads), 3, to_hsd);
  rlx_node k = rlx_transpose(g, rlx_reshape(g, linear(b, x, D, D), 3, heads), 3, to_hds);
  rlx_node v = rlx_transpose(g, rlx_reshape(g, linear(b, x, D, D), 3, heads), 3, to_hsd);
  float scale = (float)(1.0 / sqrt((double)Dh));
  rlx_node s = rlx_mul(g, rlx_matmul(g, q, k), rlx_constant(g, RLX_F32, 0, NULL, &scale));
  rlx_node att = rlx_matmul(g, rlx_softmax(g, s, -1), v);
  rlx_node merged = rlx_reshape(g, rlx_transpose(g, att, 3, to_hsd), 2, flat);
  return linear(b, merged, D, D);
}

static rlx_node ffn(builder *b, rlx_node x, int64_t D, int64_t F) {
  return linear(b, rlx_activation(b->g, RLX_ACT_GELU, linear(b, x, D, F)), F, D);
}

static rlx_graph *finish(builder *b, int n, const rlx_node *outs) {
  CHECK(rlx_graph_set_outputs(b->g, n, outs) == RLX_OK, "%s", rlx_last_error());
  CHECK(rlx_graph_status(b->g) == RLX_OK, "%s", rlx_last_error());
  return b->g;
}

/* relu(x W1 + b1) ... over `layers` hidden layers, then a linear head. */
static rlx_graph *build_mlp(void) {
  builder b = {rlx_graph_new("mlp"), 0};
  int64_t xd[] = {32, 64};
  rlx_node h = rlx_input(b.g, "x", RLX_F32, 2, xd);
  const int64_t widths[] = {64, 256, 128, 256, 64, 16};
  for (int l = 0; l + 1 < 6; l++) {
    h = linear(&b, h, widths[l], widths[l + 1]);
    if (l + 2 < 6) h = rlx_activation(b.g, RLX_ACT_RELU, h);
  }
  return finish(&b, 1, &h);
}

/* Pre-LN: x + attn(ln(x)), then + ffn(ln(.)). */
static rlx_graph *build_transformer_block(void) {
  builder b = {rlx_graph_new("block"), 0};
  const int64_t S = 64, D = 128, H = 4, F = 512;
  int64_t xd[] = {S, D};
  rlx_node x = rlx_input(b.g, "x", RLX_F32, 2, xd);
  x = rlx_add(b.g, x, attention(&b, layer_norm(&b, x, D), S, D, H));
  x = rlx_add(b.g, x, ffn(&b, layer_norm(&b, x, D), D, F));
  return finish(&b, 1, &x);
}

/* BERT-style post-LN encoder: x = ln(x + attn(x)); x = ln(x + ffn(x)). */
static rlx_graph *build_encoder(int layers, int64_t S, int64_t D, int64_t H) {
  builder b = {rlx_graph_new("encoder"), 0};
  int64_t xd[] = {S, D};
  rlx_node x = layer_norm(&b, rlx_input(b.g, "x", RLX_F32, 2, xd), D);
  for (int l = 0; l < layers; l++) {
    x = layer_norm(&b, rlx_add(b.g, x, attention(&b, x, S, D, H)), D);
    x = layer_norm(&b, rlx_add(b.g, x, ffn(&b, x, D, 4 * D)), D);
  }
  return finish(&b, 1, &x);
}

/* Outputs that are views of an input: a reshape, a contiguous narrow and a
 * stop_gradient of x; inside, a reshape of a param feeds a matmul and a
 * narrow of x feeds an add. */
static rlx_graph *build_input_views(void) {
  builder b = {rlx_graph_new("input_views"), 0};
  rlx_graph *g = b.g;
  int64_t xd[] = {6, 8}, flat[] = {48}, wd[] = {64}, w2[] = {8, 8};
  rlx_node x = rlx_input(g, "x", RLX_F32, 2, xd);
  rlx_node w = rlx_reshape(g, param(&b, 1, wd), 2, w2);
  rlx_node y = rlx_add(g, rlx_matmul(g, x, w), rlx_narrow(g, x, 0, 0, 6));
  rlx_node outs[] = {rlx_reshape(g, x, 1, flat), rlx_narrow(g, x, 0, 2, 3), rlx_stop_gradient(g, x), y};
  return finish(&b, 4, outs);
}

/* An output that is a reshape of an intermediate that also feeds other ops
 * (which must not overwrite it in place). */
static rlx_graph *build_intermediate_view(void) {
  builder b = {rlx_graph_new("intermediate_view"), 0};
  rlx_graph *g = b.g;
  int64_t xd[] = {16, 32}, rd[] = {4, 4, 32};
  rlx_node x = rlx_input(g, "x", RLX_F32, 2, xd);
  rlx_node h = rlx_activation(g, RLX_ACT_TANH, linear(&b, x, 32, 32));
  rlx_node r = rlx_reshape(g, h, 3, rd);
  rlx_node u = rlx_activation(g, RLX_ACT_EXP, rlx_mul(g, h, h));
  rlx_node outs[] = {r, rlx_add(g, u, x)};
  return finish(&b, 2, outs);
}

/* Chains where in-place is legal and where it is not, several dtypes,
 * narrows (contiguous or not), TopK's second output, a region. */
static rlx_graph *build_elementwise_mix(void) {
  builder b = {rlx_graph_new("mix"), 0};
  rlx_graph *g = b.g;
  int64_t xd[] = {1, 12, 16}, rowd[] = {1, 1, 16}, flat[] = {12, 16};
  rlx_node x = rlx_input(g, "x", RLX_F32, 3, xd);
  rlx_node row = param(&b, 3, rowd);
  rlx_node a = rlx_activation(g, RLX_ACT_SIN, rlx_add(g, x, x));        /* add: x is a leaf */
  rlx_node c = rlx_clamp(g, rlx_mul(g, a, a), 0.05, 0.8);               /* a * a in place */
  rlx_node d = rlx_sub(g, row, c);                                      /* c in place, row broadcast */
  rlx_node i = rlx_cast(g, rlx_mul(g, d, rlx_constant(g, RLX_F32, 0, NULL, &(float){100.0f})), RLX_I32);
  rlx_node f = rlx_cast(g, rlx_activation(g, RLX_ACT_ABS, i), RLX_F32); /* i32 <-> f32 in place */
  rlx_node n1 = rlx_narrow(g, f, 1, 3, 5);                              /* contiguous: view */
  rlx_node n2 = rlx_narrow(g, rlx_reshape(g, f, 2, flat), 1, 4, 8);     /* strided: copy */
  rlx_node idx;
  rlx_node top = rlx_topk(g, n2, 3, 1, &idx);
  rlx_node idx_f = rlx_cast(g, idx, RLX_F32);
  rlx_region_step steps[] = {
      {RLX_STEP_BIN, RLX_BIN_MUL, 0, 1, RLX_F32, 0},
      {RLX_STEP_ACT, RLX_ACT_SIGMOID, -1, 0, RLX_F32, 0},
      {RLX_STEP_BIN, RLX_BIN_ADD, -2, 0, RLX_F32, 0},
  };
  rlx_node region = rlx_elementwise_region(g, 2, (rlx_node[]){rlx_activation(g, RLX_ACT_NEG, n1), row}, 3, steps,
                                           RLX_PROLOGUE_NONE);
  rlx_node m = rlx_compare(g, RLX_CMP_GT, region, rlx_constant(g, RLX_F32, 0, NULL, &(float){0.0f}));
  rlx_node mb = rlx_compare(g, RLX_CMP_NE, m, rlx_constant(g, RLX_BOOL, 0, NULL, &(uint8_t){0})); /* 1-byte: in place */
  /* t - t[:, 1:2, :]: the row is a view into t's buffer, read for every
   * output row, so t must not be overwritten in place. */
  rlx_node t = rlx_activation(g, RLX_ACT_TANH, x);
  rlx_node centered = rlx_sub(g, t, rlx_narrow(g, t, 1, 1, 1));
  rlx_node outs[] = {rlx_add(g, top, idx_f), rlx_cast(g, mb, RLX_F32), region, centered};
  return finish(&b, 4, outs);
}

/* ---------------------------------------------------------------- the reference */

typedef struct {
  int n_slots;
  int *last;        /* per slot: last reading node (n_nodes: graph output) */
  int *owner;       /* per slot: the slot holding its bytes (a leaf's, or a non-view's) */
  size_t *view_at;  /* per slot: byte offset of a view in its owner */
  int *owner_last;  /* per owner slot: last read of it or of any view of it */
  int n_views;
  size_t bound;     /* largest sum of simultaneously live non-leaf tensors, each from a 64-byte boundary */
  size_t naive;     /* sum of every non-leaf tensor, 64-byte aligned */
} reference;

static int is_leaf(const ir_node *n) { return n->op == RLX_OP_Input || n->op == RLX_OP_Param || n->op == RLX_OP_Constant; }
static size_t slot_of(int node, int out) { return (size_t)node * IR_MAX_OUTPUTS + (size_t)out; }

/* What issue 3 calls a view: a reshape, a same-dtype cast, a stop_gradient,
 * a get_output, a narrow whose slice is one contiguous run of its input. */
static int ref_view(const rlx_graph *g, const ir_node *n, size_t *at) {
  *at = 0;
  const ir_type *x = &g->nodes[n->n_in > 0 ? n->in[0] : 0].out[0];
  switch (n->op) {
  case RLX_OP_Reshape: case RLX_OP_StopGradient: case RLX_OP_GetOutput: return 1;
  case RLX_OP_Cast: return x->dtype == n->out[0].dtype;
  case RLX_OP_Narrow: {
    int64_t before = 1, after = 1;
    for (int i = 0; i < x->shape.rank; i++) {
      if (i < n->a.axis) before *= x->shape.d[i];
      if (i > n->a.axis) after *= x->shape.d[i];
    }
    *at = (size_t)(n->a.start * after) * (size_t)ir_dtypes[x->dtype].size;
    return before == 1 || n->a.len == x->shape.d[n->a.axis];
  }
  default: return 0;
  }
}

static void reference_free(reference *r) {
  free(r->last);
  free(r->owner);
  free(r->view_at);
  free(r->owner_last);
}

static void reference_of(const rlx_graph *g, reference *r) {
  int N = g->n_nodes;
  r->n_slots = N * IR_MAX_OUTPUTS;
  r->last = malloc(sizeof(int) * (size_t)r->n_slots);
  r->owner = malloc(sizeof(int) * (size_t)r->n_slots);
  r->view_at = calloc((size_t)r->n_slots, sizeof(size_t));
  r->owner_last = malloc(sizeof(int) * (size_t)r->n_slots);
  r->n_views = 0;
  r->bound = r->naive = 0;
  for (int s = 0; s < r->n_slots; s++) {
    r->last[s] = s / IR_MAX_OUTPUTS;
    r->owner[s] = s;
    r->owner_last[s] = -1;
  }
  for (int i = 0; i < N; i++) {
    const ir_node *n = &g->nodes[i];
    for (int k = 0; k < n->n_in; k++) r->last[slot_of(n->in[k], n->op == RLX_OP_GetOutput ? (int)n->a.index : 0)] = i;
  }
  for (int k = 0; k < g->n_outputs; k++) r->last[slot_of(g->outputs[k], 0)] = N;
  for (int i = 0; i < N; i++) {
    const ir_node *n = &g->nodes[i];
    size_t at;
    if (is_leaf(n) || !ref_view(g, n, &at)) continue;
    size_t src = slot_of(n->in[0], n->op == RLX_OP_GetOutput ? (int)n->a.index : 0);
    int owner = r->owner[src];
    /* an output viewing a leaf gets its own bytes (rlx_output reads the run's result) */
    if (is_leaf(&g->nodes[owner / IR_MAX_OUTPUTS]) && r->last[slot_of(i, 0)] == N) continue;
    r->owner[slot_of(i, 0)] = owner;
    r->view_at[slot_of(i, 0)] = r->view_at[src] + at;
    r->n_views++;
  }
  for (int i = 0; i < N; i++)
    for (int o = 0; o < g->nodes[i].n_out; o++) {
      int s = (int)slot_of(i, o), ow = r->owner[s];
      if (r->last[s] > r->owner_last[ow]) r->owner_last[ow] = r->last[s];
      if (!is_leaf(&g->nodes[i]))
        r->naive += (rlx_dtype_nbytes(g->nodes[i].out[o].dtype, ir_numel(&g->nodes[i].out[o].shape)) + 63) / 64 * 64;
    }
  for (int t = 0; t <= N; t++) {
    size_t live = 0;
    for (int i = 0; i <= t && i < N; i++) {
      const ir_node *n = &g->nodes[i];
      if (is_leaf(n)) continue;
      for (int o = 0; o < n->n_out; o++) {
        int s = (int)slot_of(i, o);
        if (r->owner[s] == s && r->owner_last[s] >= t)
          live += (rlx_dtype_nbytes(n->out[o].dtype, ir_numel(&n->out[o].shape)) + 63) / 64 * 64;
      }
    }
    if (live > r->bound) r->bound = live;
  }
}

/* ---------------------------------------------------------------- plan checks */

typedef struct {
  size_t arena, naive, peak_live, bound;
  int views, in_place;
} plan_figures;

static int inplace_op(int op) {
  return op == RLX_OP_Activation || op == RLX_OP_Binary || op == RLX_OP_Compare || op == RLX_OP_Cast ||
         op == RLX_OP_Clamp || op == RLX_OP_ElementwiseRegion;
}

static plan_figures check_plan(const rlx_graph *g) {
  plan_figures f = {0};
  plan_memory m;
  CHECK(plan_arena_offsets(g, NULL, 0, &m) == RLX_OK, "%s: %s", g->name, rlx_last_error());
  reference r;
  reference_of(g, &r);
  const int N = g->n_nodes;
  f.arena = m.arena_bytes;
  f.naive = m.naive_bytes;
  f.peak_live = m.peak_live_bytes;
  f.bound = r.bound;
  f.views = m.n_views;
  f.in_place = m.n_inplace;

  CHECK(m.naive_bytes == r.naive, "%s: naive %zu, reference %zu", g->name, m.naive_bytes, r.naive);
  CHECK(m.arena_bytes < m.naive_bytes, "%s: arena %zu not below naive %zu", g->name, m.arena_bytes, m.naive_bytes);
  CHECK((double)m.arena_bytes <= 1.05 * (double)r.bound, "%s: arena %zu > 1.05 x live bound %zu", g->name,
        m.arena_bytes, r.bound);
  /* The plan's own lower bound counts an in-place output with the input
   * it overwrites once: the packing is within 5% of it too. */
  CHECK(m.peak_live_bytes <= r.bound && m.peak_live_bytes <= m.arena_bytes &&
        (double)m.arena_bytes <= 1.05 * (double)m.peak_live_bytes,
        "%s: peak live %zu, arena %zu, bound %zu", g->name, m.peak_live_bytes, m.arena_bytes, r.bound);
  CHECK(m.n_views == r.n_views, "%s: %d views, reference %d", g->name, m.n_views, r.n_views);

  /* Views: no bytes of their own, at their place in the owner's. */
  int viewed_right = 1, n_inplace = 0, inplace_right = 1;
  for (int i = 0; i < N; i++) {
    const ir_node *n = &g->nodes[i];
    if (is_leaf(n)) continue;
    size_t s = slot_of(i, 0);
    int ref_is_view = r.owner[s] != (int)s;
    if (m.view[i] != ref_is_view) viewed_right = 0;
    if (ref_is_view) {
      int ow = r.owner[s];
      int leaf_owner = is_leaf(&g->nodes[ow / IR_MAX_OUTPUTS]);
      if (m.leaf[s] != (leaf_owner ? ow / IR_MAX_OUTPUTS : -1) || m.offset[s] != m.offset[ow] + r.view_at[s])
        viewed_right = 0;
    }
    int k = m.inplace_input[i];
    if (k < 0) continue;
    n_inplace++;
    size_t in = slot_of(n->in[k], 0);
    const ir_type *xt = &g->nodes[n->in[k]].out[0];
    int ow = r.owner[in];
    if (!inplace_op(n->op) || m.leaf[s] != -1 || m.offset[s] != m.offset[in] || r.view_at[in] != 0 ||
        is_leaf(&g->nodes[ow / IR_MAX_OUTPUTS]) || r.owner_last[ow] != i || !ir_shape_eq(&xt->shape, &n->out[0].shape) ||
        rlx_dtype_nbytes(xt->dtype, 1) != rlx_dtype_nbytes(n->out[0].dtype, 1)) {
      inplace_right = 0;
      printf("  %s: bad in-place node %d (%s) into input %d\n", g->name, i, ir_ops[n->op].name, k);
    }
  }
  CHECK(viewed_right, "%s: a view has bytes of its own or the wrong ones", g->name);
  CHECK(inplace_right && n_inplace == m.n_inplace, "%s: in-place nodes (%d counted, plan says %d)", g->name,
        n_inplace, m.n_inplace);

  /* No two owners live at once share a byte, except an in-place output
   * and the input it overwrote (which dies where the output is made). */
  int disjoint = 1;
  for (int a = 0; a < r.n_slots && disjoint; a++) {
    const ir_node *na = &g->nodes[a / IR_MAX_OUTPUTS];
    if (is_leaf(na) || a % IR_MAX_OUTPUTS >= na->n_out || r.owner[a] != a) continue;
    for (int b = a + 1; b < r.n_slots && disjoint; b++) {
      const ir_node *nb = &g->nodes[b / IR_MAX_OUTPUTS];
      if (is_leaf(nb) || b % IR_MAX_OUTPUTS >= nb->n_out || r.owner[b] != b) continue;
      if (r.owner_last[a] < (int)nb->id) continue; /* a is dead before b is made */
      if (m.offset[a] + m.nbytes[a] <= m.offset[b] || m.offset[b] + m.nbytes[b] <= m.offset[a]) continue;
      if (m.nbytes[a] == 0 || m.nbytes[b] == 0) continue;
      int k = m.inplace_input[nb->id];
      int overwrites_a = k >= 0 && r.owner[slot_of(nb->in[k], 0)] == a && r.owner_last[a] == nb->id;
      if (!overwrites_a) {
        disjoint = 0;
        printf("  %s: slots %d and %d overlap while both live\n", g->name, a, b);
      }
    }
  }
  CHECK(disjoint, "%s: live tensors overlap", g->name);
  printf("%-18s %4d nodes: arena %8zu  live bound %8zu (%.3fx)  naive %9zu  peak live %8zu  views %3d  in place %3d\n",
         g->name, N, m.arena_bytes, r.bound, (double)m.arena_bytes / (double)r.bound, m.naive_bytes,
         m.peak_live_bytes, m.n_views, m.n_inplace);
  reference_free(&r);
  plan_memory_free(&m);
  return f;
}

/* ---------------------------------------------------------------- runs */

/* Fills every leaf of the session with data drawn from `seed`. */
static void bind_random(rlx_session *s, const rlx_graph *g, uint64_t seed) {
  rng = seed;
  for (int pass = 0; pass < 2; pass++) {
    int count = pass ? rlx_graph_num_inputs(g) : rlx_graph_num_params(g);
    for (int i = 0; i < count; i++) {
      rlx_node n = pass ? rlx_graph_input(g, i) : rlx_graph_param(g, i);
      int64_t dims[RLX_MAX_RANK], numel = 1;
      rlx_dtype t;
      int rank = rlx_node_type(g, n, &t, dims);
      for (int d = 0; d < rank; d++) numel *= dims[d];
      float *v = malloc(sizeof(float) * (size_t)(numel ? numel : 1));
      for (int64_t e = 0; e < numel; e++) v[e] = (float)(pass ? uniform() : 0.25 * uniform());
      rlx_status st = pass ? rlx_set_input(s, rlx_node_name(g, n), v, sizeof(float) * (size_t)numel)
                           : rlx_set_param(s, rlx_node_name(g, n), v, sizeof(float) * (size_t)numel);
      CHECK(st == RLX_OK, "bind %s: %s", rlx_node_name(g, n), rlx_last_error());
      free(v);
    }
  }
}

typedef struct {
  int n;
  void *data[8];
  size_t nbytes[8];
  rlx_session_stats stats;
} run_result;

static void result_free(run_result *r) {
  for (int i = 0; i < r->n; i++) free(r->data[i]);
}

static run_result run_graph(const rlx_graph *g, int no_reuse, uint64_t seed) {
  run_result res = {0};
  if (no_reuse) setenv("RLX_PLAN_NO_REUSE", "1", 1);
  rlx_session *s = NULL;
  rlx_status st = rlx_compile(g, NULL, &s);
  unsetenv("RLX_PLAN_NO_REUSE");
  CHECK(st == RLX_OK, "%s: compile: %s", g->name, rlx_last_error());
  if (st) return res;
  bind_random(s, g, seed);
  CHECK(rlx_run(s) == RLX_OK, "%s: run: %s", g->name, rlx_last_error());
  res.n = rlx_session_num_outputs(s);
  for (int i = 0; i < res.n && i < 8; i++) {
    int64_t dims[RLX_MAX_RANK], numel = 1;
    rlx_dtype t;
    int rank = rlx_output_type(s, i, &t, dims);
    for (int d = 0; d < rank; d++) numel *= dims[d];
    res.nbytes[i] = rlx_dtype_nbytes(t, numel);
    res.data[i] = malloc(res.nbytes[i] ? res.nbytes[i] : 1);
    CHECK(rlx_output(s, i, res.data[i], res.nbytes[i]) == RLX_OK, "%s: output %d: %s", g->name, i, rlx_last_error());
  }
  rlx_session_get_stats(s, &res.stats);
  rlx_session_free(s);
  return res;
}

/* The plan with reuse, views and in-place against RLX_PLAN_NO_REUSE. */
static void check_same_as_no_reuse(const rlx_graph *g) {
  run_result planned = run_graph(g, 0, 42), naive = run_graph(g, 1, 42);
  CHECK(planned.n == naive.n && planned.n > 0, "%s: %d vs %d outputs", g->name, planned.n, naive.n);
  for (int i = 0; i < planned.n && i < naive.n; i++)
    CHECK(planned.nbytes[i] == naive.nbytes[i] && !memcmp(planned.data[i], naive.data[i], planned.nbytes[i]),
          "%s: output %d differs from the plan without reuse", g->name, i);
  const rlx_session_stats *p = &planned.stats, *n = &naive.stats;
  CHECK(n->arena_bytes == n->naive_bytes && n->views == 0 && n->in_place == 0,
        "%s: RLX_PLAN_NO_REUSE: arena %zu naive %zu views %lld in place %lld", g->name, n->arena_bytes,
        n->naive_bytes, (long long)n->views, (long long)n->in_place);
  CHECK(p->arena_bytes < p->naive_bytes && p->peak_live_bytes <= p->arena_bytes && p->naive_bytes == n->naive_bytes,
        "%s: stats arena %zu naive %zu (no reuse: %zu) peak live %zu", g->name, p->arena_bytes, p->naive_bytes,
        n->naive_bytes, p->peak_live_bytes);
  result_free(&planned);
  result_free(&naive);
}

/* ---------------------------------------------------------------- tests */

static void test_models(void) {
  rlx_graph *graphs[] = {build_mlp(), build_transformer_block(), build_encoder(12, 128, 256, 4)};
  for (int i = 0; i < 3; i++) {
    plan_figures f = check_plan(graphs[i]);
    CHECK(f.in_place > 0, "%s: nothing in place", graphs[i]->name);
    if (i > 0) CHECK(f.views > 0, "%s: no views", graphs[i]->name);
    check_same_as_no_reuse(graphs[i]);
    rlx_graph_free(graphs[i]);
  }
}

static void test_input_views(void) {
  rlx_graph *g = build_input_views();
  plan_figures f = check_plan(g);
  /* the param reshape and the narrow of x inside; the three outputs get bytes */
  CHECK(f.views == 2, "views %d", f.views);
  plan_memory m;
  CHECK(plan_arena_offsets(g, NULL, 0, &m) == RLX_OK, "%s", rlx_last_error());
  rlx_node w_view = g->nodes[g->nodes[g->outputs[3]].in[0]].in[1];
  CHECK(m.view[w_view] && m.leaf[slot_of(w_view, 0)] == g->nodes[w_view].in[0] && m.offset[slot_of(w_view, 0)] == 0,
        "the reshape of the param names the param's host buffer");
  for (int k = 0; k < 3; k++)
    CHECK(!m.view[g->outputs[k]] && m.leaf[slot_of(g->outputs[k], 0)] == -1, "output %d is in the arena", k);
  plan_memory_free(&m);
  check_same_as_no_reuse(g);

  /* The outputs are x's bytes, and still the first run's after x changes. */
  rlx_session *s = NULL;
  CHECK(rlx_compile(g, NULL, &s) == RLX_OK, "%s", rlx_last_error());
  float x[48], x2[48], w[64] = {0}, got[48];
  for (int i = 0; i < 48; i++) x[i] = (float)i - 7.5f, x2[i] = -x[i];
  CHECK(rlx_set_param(s, "p0", w, sizeof w) == RLX_OK && rlx_set_input(s, "x", x, sizeof x) == RLX_OK &&
        rlx_run(s) == RLX_OK, "%s", rlx_last_error());
  CHECK(rlx_set_input(s, "x", x2, sizeof x2) == RLX_OK, "%s", rlx_last_error());
  CHECK(rlx_output(s, 0, got, sizeof(float) * 48) == RLX_OK && !memcmp(got, x, sizeof x), "reshape output");
  CHECK(rlx_output(s, 1, got, sizeof(float) * 24) == RLX_OK && !memcmp(got, x + 16, sizeof(float) * 24),
        "narrow output");
  CHECK(rlx_output(s, 2, got, sizeof(float) * 48) == RLX_OK && !memcmp(got, x, sizeof x), "stop_gradient output");
  CHECK(rlx_output(s, 3, got, sizeof(float) * 48) == RLX_OK && !memcmp(got, x, sizeof x), "x @ 0 + x");
  rlx_session_free(s);
  rlx_graph_free(g);
}

static void test_intermediate_view(void) {
  rlx_graph *g = build_intermediate_view();
  plan_figures f = check_plan(g);
  CHECK(f.views == 1, "views %d", f.views);
  plan_memory m;
  CHECK(plan_arena_offsets(g, NULL, 0, &m) == RLX_OK, "%s", rlx_last_error());
  rlx_node r = g->outputs[0], h = g->nodes[r].in[0];
  CHECK(m.view[r] && m.offset[slot_of(r, 0)] == m.offset[slot_of(h, 0)], "the reshape output names h's bytes");
  for (int i = 0; i < g->n_nodes; i++)
    for (int k = 0; k < g->nodes[i].n_in; k++)
      if (g->nodes[i].in[k] == h) CHECK(m.inplace_input[i] != k, "node %d overwrites h, a live view's bytes", i);
  plan_memory_free(&m);
  check_same_as_no_reuse(g);

  /* Against a direct computation: r = tanh(x W + b), second = exp(h*h) + x. */
  rlx_session *s = NULL;
  CHECK(rlx_compile(g, NULL, &s) == RLX_OK, "%s", rlx_last_error());
  static float x[16 * 32], w[32 * 32], bias[32], r_got[16 * 32], u_got[16 * 32];
  for (int i = 0; i < 16 * 32; i++) x[i] = (float)sin(0.37 * i);
  for (int i = 0; i < 32 * 32; i++) w[i] = (float)cos(0.11 * i) * 0.2f;
  for (int i = 0; i < 32; i++) bias[i] = 0.01f * (float)i;
  CHECK(rlx_set_input(s, "x", x, sizeof x) == RLX_OK && rlx_set_param(s, "p0", w, sizeof w) == RLX_OK &&
        rlx_set_param(s, "p1", bias, sizeof bias) == RLX_OK && rlx_run(s) == RLX_OK, "%s", rlx_last_error());
  CHECK(rlx_output(s, 0, r_got, sizeof r_got) == RLX_OK && rlx_output(s, 1, u_got, sizeof u_got) == RLX_OK, "%s",
        rlx_last_error());
  double worst = 0;
  for (int i = 0; i < 16; i++)
    for (int j = 0; j < 32; j++) {
      double acc = bias[j];
      for (int k = 0; k < 32; k++) acc += (double)x[i * 32 + k] * w[k * 32 + j];
      double hv = tanh(acc);
      worst = fmax(worst, fabs(hv - r_got[i * 32 + j]));
      worst = fmax(worst, fabs(exp(hv * hv) + x[i * 32 + j] - u_got[i * 32 + j]));
    }
  CHECK(worst < 1e-5, "max error %g", worst);
  rlx_session_free(s);
  rlx_graph_free(g);
}

static void test_elementwise_mix(void) {
  rlx_graph *g = build_elementwise_mix();
  plan_figures f = check_plan(g);
  /* views: n1 and t's row (contiguous narrows), the reshape before n2,
   * GetOutput of the indices */
  CHECK(f.views == 4, "views %d", f.views);
  /* In place: the casts f32 -> i32 -> f32 (same size), the compare of
   * 1-byte bools, the region over neg(n1); not x + x (x is an input). */
  plan_memory m;
  CHECK(plan_arena_offsets(g, NULL, 0, &m) == RLX_OK, "%s", rlx_last_error());
  int casts = 0, compares = 0, regions = 0, adds_of_x = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    if (m.inplace_input[i] < 0) continue;
    casts += n->op == RLX_OP_Cast;
    compares += n->op == RLX_OP_Compare;
    regions += n->op == RLX_OP_ElementwiseRegion;
    adds_of_x += n->op == RLX_OP_Binary && n->in[0] == n->in[1] && is_leaf(&g->nodes[n->in[0]]);
  }
  CHECK(m.inplace_input[g->outputs[3]] < 0, "t - t[:, 1:2, :] overwrites t while its row is read");
  CHECK(casts >= 2 && compares == 1 && regions == 1 && adds_of_x == 0,
        "in place: %d casts, %d compares, %d regions, %d adds of a leaf", casts, compares, regions, adds_of_x);
  plan_memory_free(&m);
  check_same_as_no_reuse(g);
  rlx_graph_free(g);
}

/* Run the same plan twice with new data: in-place nodes must not have
 * changed anything the next run reads. */
static void test_rerun(void) {
  rlx_graph *g = build_transformer_block();
  rlx_session *s = NULL;
  CHECK(rlx_compile(g, NULL, &s) == RLX_OK, "%s", rlx_last_error());
  size_t nbytes = sizeof(float) * 64 * 128;
  float *first = malloc(nbytes), *again = malloc(nbytes);
  bind_random(s, g, 7);
  CHECK(rlx_run(s) == RLX_OK && rlx_output(s, 0, first, nbytes) == RLX_OK, "%s", rlx_last_error());
  bind_random(s, g, 8);
  CHECK(rlx_run(s) == RLX_OK, "%s", rlx_last_error());
  bind_random(s, g, 7);
  CHECK(rlx_run(s) == RLX_OK && rlx_output(s, 0, again, nbytes) == RLX_OK, "%s", rlx_last_error());
  CHECK(!memcmp(first, again, nbytes), "a rerun with the same data differs");
  free(first);
  free(again);
  rlx_session_free(s);
  rlx_graph_free(g);
}

int main(void) {
  test_models();
  test_input_views();
  test_intermediate_view();
  test_elementwise_mix();
  test_rerun();
  return check_report();
}
