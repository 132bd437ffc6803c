/* fuse_region.c — the region patterns that run after fuse_elementwise.c
 * (OPS.md 53-55; semantics at their inference in src/ir/infer_fused.c):
 *
 *  prologue   an ElementwiseRegion (or one elementwise op) reading a
 *             ResizeNearest2x(x) that nothing else reads -> the region with
 *             prologue resize_nearest_2x over x as its input 0: the
 *             upsampled tensor is never stored. The region's other inputs
 *             keep their order behind it.
 *  batch      Concat{axis=0} of regions (or single elementwise ops) that
 *             run one chain with one prologue over inputs that differ in
 *             one position only (the batch input; the others are shared)
 *             -> BatchElementwiseRegion{num_batch_inputs} over the batch
 *             inputs then the shared ones. Each part is read only by the
 *             Concat. With a prologue the batch input must be input 0 (the
 *             prologue applies to it, never to a shared input).
 *  transform  a chain of two or more ResizeNearest2x, each read only by
 *             the next -> TransformRegion{steps} (at most RLX_MAX_RANK).
 *
 * All three move no arithmetic: each region step is the same step over the
 * same values, so results are bit-identical. */
#include "fuse.h"

#include <string.h>

#define REGION_MAX_STEPS FUSE_MAX_GROUP
#define REGION_MAX_IN (4 * FUSE_MAX_GROUP)

/* An ElementwiseRegion node, or a single elementwise op seen as a region
 * of one step (its operands deduplicated). Not copyable: steps and in may
 * point into the view itself. */
typedef struct {
  int n_steps, n_in;
  int64_t prologue;
  const rlx_region_step *steps;
  const rlx_node *in;
  rlx_region_step single;
  rlx_node single_in[2];
} region_view;

static int view_region(const fuse_ctx *c, rlx_node id, region_view *v) {
  const ir_node *n = fuse_node(c, id);
  memset(v, 0, sizeof *v);
  if (n->op == RLX_OP_ElementwiseRegion) {
    v->n_steps = n->a.chain.n;
    v->steps = n->a.chain.s;
    v->n_in = n->n_in;
    v->in = n->in;
    v->prologue = n->a.prologue;
    return v->n_steps <= REGION_MAX_STEPS && v->n_in <= REGION_MAX_IN;
  }
  if (!fuse_step_of(n, &v->single)) return 0;
  for (int k = 0; k < n->n_in; k++)
    if (ir_is_block(fuse_type(c, n->in[k])->dtype)) return 0;
  v->single_in[0] = n->in[0];
  v->n_in = 1;
  if (n->n_in == 2) {
    if (n->in[1] == n->in[0]) {
      v->single.b = 0;
    } else {
      v->single_in[1] = n->in[1];
      v->single.b = 1;
      v->n_in = 2;
    }
  }
  v->n_steps = 1;
  v->steps = &v->single;
  v->in = v->single_in;
  v->prologue = RLX_PROLOGUE_NONE;
  return 1;
}

static int steps_equal(const rlx_region_step *x, const rlx_region_step *y) {
  return x->kind == y->kind && x->op == y->op && x->a == y->a && x->b == y->b && x->to == y->to &&
         x->alpha == y->alpha;
}

static int is_binary_step(const rlx_region_step *s) {
  return s->kind == RLX_STEP_BIN || s->kind == RLX_STEP_CMP;
}

/* Reads of id in the input list of node `by`. */
static int reads_of(const fuse_ctx *c, rlx_node by, rlx_node id) {
  const ir_node *n = fuse_node(c, by);
  int refs = 0;
  for (int k = 0; k < n->n_in; k++) refs += n->in[k] == id;
  return refs;
}

/* A region to build: its chain, prologue and inputs (batch inputs first). */
typedef struct {
  int n_steps, n_in, n_batch;
  int64_t prologue;
  rlx_region_step steps[REGION_MAX_STEPS];
  rlx_node in[REGION_MAX_IN];
} region_build;

/* Copies v's chain with region input `moved` renumbered to 0 and the
 * inputs before it shifted up by one (the inputs after it keep theirs). */
static void chain_moving_to_front(const region_view *v, int moved, region_build *b) {
  b->n_steps = v->n_steps;
  for (int i = 0; i < v->n_steps; i++) {
    rlx_region_step s = v->steps[i];
    int *ops[2] = {&s.a, &s.b};
    for (int o = 0; o < 1 + is_binary_step(&s); o++) {
      int k = *ops[o];
      if (k >= 0) *ops[o] = k == moved ? 0 : k < moved ? k + 1 : k;
    }
    b->steps[i] = s;
  }
}

/* ---------------------------------------------------------------- prologue */

static int match_prologue(const fuse_ctx *c, rlx_node root, void *mv, fuse_group *grp) {
  region_build *b = mv;
  region_view v;
  if (!view_region(c, root, &v) || v.prologue != RLX_PROLOGUE_NONE) return 0;
  for (int k = 0; k < v.n_in; k++) {
    rlx_node r = v.in[k];
    if (!fuse_is(c, r, RLX_OP_ResizeNearest2x) || c->taken[r] || c->uses[r] != reads_of(c, root, r)) continue;
    chain_moving_to_front(&v, k, b);
    b->in[0] = fuse_node(c, r)->in[0];
    b->n_in = 1;
    for (int j = 0; j < v.n_in; j++)
      if (j != k) b->in[b->n_in++] = v.in[j];
    b->prologue = RLX_PROLOGUE_RESIZE_NEAREST_2X;
    return fuse_group_add(grp, root) && fuse_group_add(grp, r);
  }
  return 0;
}

static rlx_node emit_prologue(rlx_graph *dst, const fuse_ctx *c, const void *mv, const rlx_node *map) {
  (void)c;
  const region_build *b = mv;
  rlx_node ins[REGION_MAX_IN];
  for (int i = 0; i < b->n_in; i++) ins[i] = map[b->in[i]];
  return rlx_elementwise_region(dst, b->n_in, ins, b->n_steps, b->steps, (rlx_prologue)b->prologue);
}

const fuse_pattern fuse_prologue_pattern = {"region_prologue", sizeof(region_build), match_prologue,
                                            emit_prologue};

/* ---------------------------------------------------------------- batch */

#define BATCH_MAX_PARTS (FUSE_MAX_GROUP - 1)

static int match_batch(const fuse_ctx *c, rlx_node root, void *mv, fuse_group *grp) {
  region_build *b = mv;
  const ir_node *n = fuse_node(c, root);
  if (n->op != RLX_OP_Concat || n->a.axis != 0 || n->n_in < 2 || n->n_in > BATCH_MAX_PARTS) return 0;
  region_view parts[BATCH_MAX_PARTS];
  const region_view *v0 = &parts[0];
  int batch_at = -1;
  for (int i = 0; i < n->n_in; i++) {
    rlx_node p = n->in[i];
    region_view *v = &parts[i];
    if (c->taken[p] || c->uses[p] != reads_of(c, root, p) || !view_region(c, p, v)) return 0;
    if (v->n_steps != v0->n_steps || v->n_in != v0->n_in || v->prologue != v0->prologue) return 0;
    for (int s = 0; s < v->n_steps; s++)
      if (!steps_equal(&v->steps[s], &v0->steps[s])) return 0;
    for (int k = 0; k < v->n_in; k++) {
      if (v->in[k] == v0->in[k]) continue;
      if (batch_at >= 0 && batch_at != k) return 0; /* parts differ in two inputs */
      batch_at = k;
    }
    if (!fuse_group_add(grp, p)) return 0;
  }
  if (batch_at < 0) batch_at = 0; /* identical parts: any input is the batch input */
  if (batch_at != 0 && v0->prologue != RLX_PROLOGUE_NONE) return 0;
  if (n->n_in + v0->n_in - 1 > REGION_MAX_IN) return 0;
  chain_moving_to_front(v0, batch_at, b);
  b->prologue = v0->prologue;
  b->n_batch = n->n_in;
  b->n_in = 0;
  for (int i = 0; i < n->n_in; i++) b->in[b->n_in++] = parts[i].in[batch_at];
  for (int k = 0; k < v0->n_in; k++)
    if (k != batch_at) b->in[b->n_in++] = v0->in[k];
  return fuse_group_add(grp, root);
}

static rlx_node emit_batch(rlx_graph *dst, const fuse_ctx *c, const void *mv, const rlx_node *map) {
  (void)c;
  const region_build *b = mv;
  rlx_node ins[REGION_MAX_IN];
  for (int i = 0; i < b->n_in; i++) ins[i] = map[b->in[i]];
  return rlx_batch_elementwise_region(dst, b->n_in, ins, b->n_batch, b->n_steps, b->steps,
                                      (rlx_prologue)b->prologue);
}

const fuse_pattern fuse_batch_region_pattern = {"batch_region", sizeof(region_build), match_batch,
                                                emit_batch};

/* ---------------------------------------------------------------- transform */

typedef struct {
  rlx_node x;
  int n;
} transform_match;

static int match_transform(const fuse_ctx *c, rlx_node root, void *mv, fuse_group *grp) {
  transform_match *m = mv;
  if (!fuse_is(c, root, RLX_OP_ResizeNearest2x)) return 0;
  fuse_group_add(grp, root);
  rlx_node x = fuse_node(c, root)->in[0];
  int n = 1;
  while (n < RLX_MAX_RANK && fuse_is(c, x, RLX_OP_ResizeNearest2x) && fuse_takeable(c, x)) {
    fuse_group_add(grp, x);
    x = fuse_node(c, x)->in[0];
    n++;
  }
  m->x = x;
  m->n = n;
  return n >= 2;
}

static rlx_node emit_transform(rlx_graph *dst, const fuse_ctx *c, const void *mv, const rlx_node *map) {
  (void)c;
  const transform_match *m = mv;
  int steps[RLX_MAX_RANK];
  for (int i = 0; i < m->n; i++) steps[i] = RLX_PROLOGUE_RESIZE_NEAREST_2X;
  return rlx_transform_region(dst, map[m->x], m->n, steps);
}

const fuse_pattern fuse_transform_pattern = {"transform_region", sizeof(transform_match),
                                             match_transform, emit_transform};
