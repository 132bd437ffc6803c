/* fuse_norm.c — Norm(x + res [+ bias]) over the last axis ->
 * FusedResidualLN / FusedResidualRmsNorm{has_bias, eps}(x, res, [bias,]
 * gamma, beta), for LayerNorm and RmsNorm.
 *
 * Fires when the norm's axis is the last one (the fused ops normalize the
 * last axis only; a norm over several trailing axes stays), its input is a
 * Binary add of two operands of the norm's shape (no broadcasting between
 * x and res), optionally with a bias — an [N] or [1, ..., 1, N] operand of
 * an add on either side of the residual add, (x + res) + bias or
 * (x + bias) + res in either operand order — and every add is read only by
 * the next one and the last only by the norm.
 *
 * The residual stream. In a pre-norm block (Llama: h = x + attn(norm(x));
 * out = h + mlp(norm(h))) the sum h feeds the norm *and* the next residual
 * add. The fused ops have one output, the norm, so the sum must stay: the
 * pattern then does not fire. Keeping the add beside a fused norm would
 * not help — the fused norm would re-read x and res where the plain norm
 * reads h once, while the add still writes h — and the fused norm's
 * unrounded sum would differ (in F16/BF16) from the rounded h the rest of
 * the block reads. So in pre-norm graphs only a norm whose residual sum is
 * read by nothing else (the model's final norm) fuses; in post-norm graphs
 * (BERT: h = LN(x + sublayer(x))) every residual norm does. A second output
 * carrying the sum (as vLLM's fused_add_rms_norm updates the residual in
 * place) would let the pre-norm case fuse too: that is a change to the op.
 *
 * Dtypes: Binary and the norms already require one dtype. The fused op
 * does not round the sum to the dtype before normalizing (the unfused add
 * does): identical in F32/F64 up to the last ulp, within tolerance in
 * F16/BF16. */
#include "fuse.h"

typedef struct {
  int op;          /* RLX_OP_FusedResidualLN or RLX_OP_FusedResidualRmsNorm */
  rlx_node x, res, bias, gamma, beta;
  double eps;
} norm_match;

/* A bias of a [..., N] tensor: [N] or [1, ..., 1, N], not the full shape
 * (unless that is [N] itself: then it is an operand, not a bias). */
static int is_bias_of(const ir_shape *b, const ir_shape *full) {
  if (b->rank < 1 || b->rank > full->rank || fuse_shape_eq(b, full)) return 0;
  for (int i = 0; i + 1 < b->rank; i++)
    if (b->d[i] != 1) return 0;
  return b->d[b->rank - 1] == full->d[full->rank - 1];
}

/* sum = add(p, q) with p, q both of shape full: x = p, res = q. */
static int full_add(const fuse_ctx *c, rlx_node sum, const ir_shape *full, rlx_node *x, rlx_node *res) {
  if (!fuse_is_binop(c, sum, RLX_BIN_ADD)) return 0;
  const ir_node *n = fuse_node(c, sum);
  if (!fuse_shape_eq(&fuse_type(c, n->in[0])->shape, full) ||
      !fuse_shape_eq(&fuse_type(c, n->in[1])->shape, full))
    return 0;
  *x = n->in[0];
  *res = n->in[1];
  return 1;
}

/* sum = add(p, bias) (either side) with p of shape full: *p, *bias. */
static int biased(const fuse_ctx *c, rlx_node sum, const ir_shape *full, rlx_node *p, rlx_node *bias) {
  if (!fuse_is_binop(c, sum, RLX_BIN_ADD)) return 0;
  const ir_node *n = fuse_node(c, sum);
  for (int side = 0; side < 2; side++) {
    rlx_node a = n->in[side], b = n->in[1 - side];
    if (fuse_shape_eq(&fuse_type(c, a)->shape, full) && is_bias_of(&fuse_type(c, b)->shape, full)) {
      *p = a;
      *bias = b;
      return 1;
    }
  }
  return 0;
}

/* The residual sum feeding the norm: fills x, res, bias (-1 if none) and
 * adds the adds to grp. */
static int match_residual(const fuse_ctx *c, rlx_node sum, const ir_shape *full, norm_match *m,
                          fuse_group *grp) {
  if (!fuse_takeable(c, sum)) return 0;
  rlx_node x, res, inner, bias;
  m->bias = -1;
  if (full_add(c, sum, full, &x, &res)) {
    /* (x + bias) + res or res + (x + bias) */
    for (int side = 0; side < 2; side++) {
      rlx_node a = side ? res : x, other = side ? x : res, p;
      if (fuse_takeable(c, a) && biased(c, a, full, &p, &bias)) {
        m->x = p;
        m->res = other;
        m->bias = bias;
        return fuse_group_add(grp, sum) && fuse_group_add(grp, a);
      }
    }
    m->x = x;
    m->res = res;
    return fuse_group_add(grp, sum);
  }
  /* (x + res) + bias */
  if (biased(c, sum, full, &inner, &bias) && fuse_takeable(c, inner) && full_add(c, inner, full, &x, &res)) {
    m->x = x;
    m->res = res;
    m->bias = bias;
    return fuse_group_add(grp, sum) && fuse_group_add(grp, inner);
  }
  return 0;
}

static int match_residual_norm(const fuse_ctx *c, rlx_node root, void *mv, fuse_group *grp) {
  norm_match *m = mv;
  const ir_node *n = fuse_node(c, root);
  if (n->op != RLX_OP_LayerNorm && n->op != RLX_OP_RmsNorm) return 0;
  const ir_shape *full = &fuse_type(c, root)->shape;
  if (n->a.axis != full->rank - 1) return 0;
  if (!match_residual(c, n->in[0], full, m, grp)) return 0;
  m->op = n->op == RLX_OP_LayerNorm ? RLX_OP_FusedResidualLN : RLX_OP_FusedResidualRmsNorm;
  m->gamma = n->in[1];
  m->beta = n->in[2];
  m->eps = n->a.eps;
  return fuse_group_add(grp, root);
}

static rlx_node emit_residual_norm(rlx_graph *dst, const fuse_ctx *c, const void *mv, const rlx_node *map) {
  const norm_match *m = mv;
  rlx_node bias = m->bias >= 0 ? fuse_as_vector(dst, c->g, m->bias, map[m->bias]) : -1;
  if (m->op == RLX_OP_FusedResidualLN)
    return rlx_fused_residual_ln(dst, map[m->x], map[m->res], bias, map[m->gamma], map[m->beta], m->eps);
  return rlx_fused_residual_rms_norm(dst, map[m->x], map[m->res], bias, map[m->gamma], map[m->beta], m->eps);
}

const fuse_pattern fuse_residual_norm_pattern = {
    "residual_norm", sizeof(norm_match), match_residual_norm, emit_residual_norm};
