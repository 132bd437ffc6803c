/* fuse_swiglu.c — silu(gate) * up -> FusedSwiGLU{cast_to}(x), where
 * FusedSwiGLU(x [..., 2n]) = silu(x[..., :n]) * x[..., n:].
 *
 * Two forms:
 *  - halves: gate and up are the first and second half of the last axis
 *    of one tensor x (a [gate||up] projection): Narrow{axis=-1} or a Slice
 *    that is full on every other axis with step 1 — the fused op reads x;
 *  - two projections of one x by constant weights: gate = x @ wg,
 *    up = x @ wu with wg, wu Constants of one shape [K, n]; the weights
 *    are concatenated here into one Constant [K, 2n] (exactly the columns
 *    of both: every output element is the same dot product) and the fused
 *    op reads x @ [wg||wu]. With Param weights the concatenation would be
 *    a copy of both weights on every run, costlier than what fusion saves,
 *    so the pattern leaves them (the elementwise pattern still makes one
 *    region of silu and the product); fusing them needs the concatenated
 *    weight to be computed once when the params are set.
 * silu is Activation{silu}(g) or g * sigmoid(g) (either operand order). A
 * Cast to a float dtype reading only the product becomes cast_to. The
 * product must not broadcast (gate, up and the product of one shape); the
 * other dtypes are already one float dtype (MatMul, Binary, Activation).
 * The fused kernel rounds once where the unfused ops round after silu and
 * after the product (within tolerance). */
#include "fuse.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  rlx_node x;          /* the [..., 2n] input of the fused op (halves form) */
  rlx_node wg, wu;     /* constant weights (projections form), else -1 */
  int64_t cast_to;     /* -1: none */
} swiglu_match;

/* The operand s = silu(g): Activation{silu}(g) or g * sigmoid(g). Adds the
 * silu nodes to grp; *reads is how many group members read g. */
static int silu_of(const fuse_ctx *c, rlx_node s, rlx_node *g, int *reads, fuse_group *grp) {
  if (!fuse_takeable(c, s)) return 0;
  const ir_node *n = fuse_node(c, s);
  if (n->op == RLX_OP_Activation && n->a.act == RLX_ACT_SILU) {
    *g = n->in[0];
    *reads = 1;
    return fuse_group_add(grp, s);
  }
  if (!fuse_is_binop(c, s, RLX_BIN_MUL)) return 0;
  for (int side = 0; side < 2; side++) {
    rlx_node sig = n->in[side], other = n->in[1 - side];
    const ir_node *sn = fuse_node(c, sig);
    if (sn->op == RLX_OP_Activation && sn->a.act == RLX_ACT_SIGMOID && sn->in[0] == other &&
        fuse_takeable(c, sig) && fuse_shape_eq(&fuse_type(c, s)->shape, &fuse_type(c, other)->shape)) {
      *g = other;
      *reads = 2;
      return fuse_group_add(grp, s) && fuse_group_add(grp, sig);
    }
  }
  return 0;
}

/* node = x[..., start : start + len] along the last axis: *x, *start, *len. */
static int last_axis_range(const fuse_ctx *c, rlx_node node, rlx_node *x, int64_t *start, int64_t *len) {
  const ir_node *n = fuse_node(c, node);
  if (n->op != RLX_OP_Narrow && n->op != RLX_OP_Slice) return 0;
  const ir_shape *xs = &fuse_type(c, n->in[0])->shape;
  int last = xs->rank - 1;
  if (last < 0 || ir_dim_is_sym(xs->d[last])) return 0;
  *x = n->in[0];
  if (n->op == RLX_OP_Narrow) {
    if (n->a.axis != last || n->a.start < 0) return 0;
    *start = n->a.start;
    *len = n->a.len;
    return 1;
  }
  /* Slice: inference normalized the bounds of static dims to [0, dim]. */
  const ir_shape *out = &fuse_type(c, node)->shape;
  for (int i = 0; i < last; i++)
    if (n->a.steps.v[i] != 1 || n->a.starts.v[i] != 0 || out->d[i] != xs->d[i]) return 0;
  if (n->a.steps.v[last] != 1) return 0;
  *start = n->a.starts.v[last];
  *len = out->d[last];
  return 1;
}

/* Halves form: gate = x[..., :n], up = x[..., n:] with x's last dim 2n. */
static int match_halves(const fuse_ctx *c, rlx_node gate, rlx_node up, swiglu_match *m, fuse_group *grp) {
  rlx_node xg, xu;
  int64_t sg, lg, su, lu;
  if (!last_axis_range(c, gate, &xg, &sg, &lg) || !last_axis_range(c, up, &xu, &su, &lu)) return 0;
  const ir_shape *xs = &fuse_type(c, xg)->shape;
  if (xg != xu || sg != 0 || lg < 1 || su != lg || lu != lg || xs->d[xs->rank - 1] != 2 * lg) return 0;
  m->x = xg;
  m->wg = m->wu = -1;
  return fuse_group_add(grp, gate) && fuse_group_add(grp, up);
}

/* Projections form: gate = x @ wg, up = x @ wu, wg and wu Constants [K, n]. */
static int match_projections(const fuse_ctx *c, rlx_node gate, rlx_node up, swiglu_match *m,
                             fuse_group *grp) {
  if (!fuse_is(c, gate, RLX_OP_MatMul) || !fuse_is(c, up, RLX_OP_MatMul)) return 0;
  const ir_node *gn = fuse_node(c, gate), *un = fuse_node(c, up);
  rlx_node wg = gn->in[1], wu = un->in[1];
  const ir_type *tg = fuse_type(c, wg), *tu = fuse_type(c, wu);
  if (gn->in[0] != un->in[0] || !fuse_is(c, wg, RLX_OP_Constant) || !fuse_is(c, wu, RLX_OP_Constant) ||
      tg->shape.rank != 2 || !ir_type_eq(tg, tu))
    return 0;
  m->x = gn->in[0];
  m->wg = wg;
  m->wu = wu;
  if (!fuse_group_add(grp, gate) || !fuse_group_add(grp, up)) return 0;
  /* the separate weights are dead after the rewrite unless read elsewhere */
  if (fuse_takeable(c, wg) && !fuse_group_add(grp, wg)) return 0;
  if (wu != wg && fuse_takeable(c, wu) && !fuse_group_add(grp, wu)) return 0;
  return 1;
}

/* prod = silu(gate) * up (either order). */
static int match_product(const fuse_ctx *c, rlx_node prod, swiglu_match *m, fuse_group *grp) {
  if (!fuse_is_binop(c, prod, RLX_BIN_MUL)) return 0;
  const ir_node *n = fuse_node(c, prod);
  const ir_shape *out = &fuse_type(c, prod)->shape;
  if (!fuse_shape_eq(&fuse_type(c, n->in[0])->shape, out) || !fuse_shape_eq(&fuse_type(c, n->in[1])->shape, out))
    return 0;
  for (int side = 0; side < 2; side++) {
    fuse_group trial = *grp;
    rlx_node gate, up = n->in[1 - side];
    int reads;
    if (!silu_of(c, n->in[side], &gate, &reads, &trial)) continue;
    if (c->uses[gate] != reads || c->taken[gate] || !fuse_takeable(c, up) || gate == up) continue;
    if (!match_halves(c, gate, up, m, &trial) && !match_projections(c, gate, up, m, &trial)) continue;
    if (!fuse_group_add(&trial, prod)) return 0;
    *grp = trial;
    return 1;
  }
  return 0;
}

static int match_swiglu(const fuse_ctx *c, rlx_node root, void *mv, fuse_group *grp) {
  swiglu_match *m = mv;
  const ir_node *n = fuse_node(c, root);
  m->cast_to = -1;
  if (n->op == RLX_OP_Cast) {
    if (!ir_is_float(n->a.to) || !fuse_takeable(c, n->in[0]) || !match_product(c, n->in[0], m, grp)) return 0;
    m->cast_to = n->a.to;
    return fuse_group_add(grp, root);
  }
  return match_product(c, root, m, grp);
}

/* [wg || wu] along axis 1 of two [K, n] constants, as one Constant. */
static rlx_node concat_constants(rlx_graph *dst, const fuse_ctx *c, rlx_node wg, rlx_node wu) {
  const ir_node *g = fuse_node(c, wg), *u = fuse_node(c, wu);
  const ir_type *t = &g->out[0];
  int64_t K = t->shape.d[0], n = t->shape.d[1];
  size_t row = (size_t)n * (size_t)ir_dtypes[t->dtype].size;
  uint8_t *data = malloc(2 * row * (size_t)(K > 0 ? K : 1));
  if (!data) return ir_fail(dst, NULL, RLX_ERR_NOMEM, "fuse swiglu: out of memory");
  for (int64_t k = 0; k < K; k++) {
    memcpy(data + (size_t)k * 2 * row, g->a.data.p + (size_t)k * row, row);
    memcpy(data + (size_t)k * 2 * row + row, u->a.data.p + (size_t)k * row, row);
  }
  int64_t dims[] = {K, 2 * n};
  rlx_node w = rlx_constant(dst, t->dtype, 2, dims, data);
  free(data);
  return w;
}

static rlx_node emit_swiglu(rlx_graph *dst, const fuse_ctx *c, const void *mv, const rlx_node *map) {
  const swiglu_match *m = mv;
  rlx_node x = map[m->x];
  if (m->wg >= 0) x = rlx_matmul(dst, x, concat_constants(dst, c, m->wg, m->wu));
  return rlx_fused_swiglu(dst, x, (int)m->cast_to);
}

const fuse_pattern fuse_swiglu_pattern = {"swiglu", sizeof(swiglu_match), match_swiglu, emit_swiglu};
