/* fuse_matmul.c — act(a @ w + bias) -> FusedMatMulBiasAct{act}(a, w, bias),
 * and a @ w + bias without an activation -> FusedMatMulBiasAct{none}.
 *
 * Fires when:
 *  - the MatMul's w is rank 2 (the fused op shares one [K, N] weight over
 *    every row of a; a may be batched or rank 1);
 *  - the bias is the other operand of a Binary add (either side) whose
 *    result has the MatMul's shape, and the bias is [N] or [1, ..., 1, N]
 *    (reshaped to [N]) — a bias that broadcasts the product up, or runs
 *    along another axis, is not a bias;
 *  - the MatMul is read only by the add, and, to take the activation too,
 *    the add only by the Activation (otherwise the add is the root and the
 *    activation stays);
 *  - the activation may also be GELU written out with Erf, as exporters
 *    write it: x * 0.5 * (1 + erf(x / sqrt(2))) in the orders torch and
 *    Hugging Face models give (x / sqrt(2) or x * (1 / sqrt(2)); the 0.5
 *    on x or on the product), the add read only by the chain's two reads
 *    of x. The chain is then applied in the GEMM's registers, not in a
 *    pass over the product afterwards.
 * Dtypes need no check: MatMul, Binary and Activation already require one
 * float dtype for all of them. The fused kernel rounds once where the
 * unfused ops round after each op (within the dtype's tolerance). */
#include "fuse.h"

#include <math.h>

typedef struct {
  rlx_node a, w, bias;
  int64_t act;
  double alpha;
} matmul_match;

/* add = mm + bias with mm a MatMul over a rank-2 w read only by add. */
static int match_biased_matmul(const fuse_ctx *c, rlx_node add, matmul_match *m, fuse_group *grp) {
  if (!fuse_is_binop(c, add, RLX_BIN_ADD)) return 0;
  const ir_node *n = fuse_node(c, add);
  for (int side = 0; side < 2; side++) {
    rlx_node mm = n->in[side], bias = n->in[1 - side];
    if (!fuse_is(c, mm, RLX_OP_MatMul) || !fuse_takeable(c, mm)) continue;
    const ir_node *mn = fuse_node(c, mm);
    const ir_shape *out = &fuse_type(c, mm)->shape, *w = &fuse_type(c, mn->in[1])->shape;
    const ir_shape *b = &fuse_type(c, bias)->shape;
    if (w->rank != 2 || !fuse_shape_eq(&fuse_type(c, add)->shape, out)) continue;
    if (b->rank < 1 || b->d[b->rank - 1] != w->d[1] || !fuse_broadcasts_into(b, out)) continue;
    int ones = 1;
    for (int i = 0; i + 1 < b->rank; i++) ones = ones && b->d[i] == 1;
    if (!ones) continue;
    m->a = mn->in[0];
    m->w = mn->in[1];
    m->bias = bias;
    m->act = RLX_ACT_NONE;
    m->alpha = ir_attr_table[IR_ATTR_alpha].def; /* unused but by leaky_relu: the default, as built */
    fuse_group_add(grp, add);
    fuse_group_add(grp, mm);
    return 1;
  }
  return 0;
}

/* id is a scalar float Constant within a float's rounding of want. */
static int constant_near(const fuse_ctx *c, rlx_node id, double want) {
  double v;
  return fuse_scalar_constant(c, id, &v) && fabs(v - want) <= 1e-6 * fabs(want);
}

/* node = a * b or b * a with b a scalar Constant near k: *a. */
static int mul_by(const fuse_ctx *c, rlx_node node, double k, rlx_node *a) {
  if (!fuse_is_binop(c, node, RLX_BIN_MUL)) return 0;
  const ir_node *n = fuse_node(c, node);
  for (int side = 0; side < 2; side++)
    if (constant_near(c, n->in[1 - side], k)) {
      *a = n->in[side];
      return 1;
    }
  return 0;
}

/* node = 1 + erf(x / sqrt(2)) (either order, or x * (1 / sqrt(2))): its
 * nodes added to grp, *x set. */
static int one_plus_erf(const fuse_ctx *c, rlx_node node, rlx_node *x, fuse_group *grp) {
  if (!fuse_takeable(c, node) || !fuse_is_binop(c, node, RLX_BIN_ADD)) return 0;
  const ir_node *n = fuse_node(c, node);
  for (int side = 0; side < 2; side++) {
    rlx_node e = n->in[side];
    if (!constant_near(c, n->in[1 - side], 1.0) || !fuse_takeable(c, e)) continue;
    const ir_node *en = fuse_node(c, e);
    if (en->op != RLX_OP_Activation || en->a.act != RLX_ACT_ERF || !fuse_takeable(c, en->in[0])) continue;
    rlx_node s = en->in[0];
    const ir_node *sn = fuse_node(c, s);
    if (fuse_is_binop(c, s, RLX_BIN_DIV) && constant_near(c, sn->in[1], sqrt(2.0))) *x = sn->in[0];
    else if (!mul_by(c, s, sqrt(0.5), x)) continue;
    return fuse_group_add(grp, node) && fuse_group_add(grp, e) && fuse_group_add(grp, s);
  }
  return 0;
}

/* root = x * 0.5 * (1 + erf(x / sqrt(2))) as (x * t) * 0.5 or (x * 0.5) *
 * t, t = 1 + erf(...), each product in either order, no operand
 * broadcasting x's shape up: *x set, the chain's nodes added to grp. */
static int gelu_erf(const fuse_ctx *c, rlx_node root, rlx_node *x, fuse_group *grp) {
  if (!fuse_is_binop(c, root, RLX_BIN_MUL)) return 0;
  const ir_node *n = fuse_node(c, root);
  const ir_shape *out = &fuse_type(c, root)->shape;
  for (int side = 0; side < 2; side++) {
    rlx_node a = n->in[side], b = n->in[1 - side];
    if (!fuse_takeable(c, a) || !fuse_is_binop(c, a, RLX_BIN_MUL) || !fuse_shape_eq(&fuse_type(c, a)->shape, out))
      continue;
    const ir_node *an = fuse_node(c, a);
    for (int k = 0; k < 2; k++) {
      fuse_group trial = *grp;
      rlx_node xa, xt;
      if (constant_near(c, b, 0.5)) { /* (x * t) * 0.5 */
        xa = an->in[k];
        if (!one_plus_erf(c, an->in[1 - k], &xt, &trial)) continue;
      } else { /* (x * 0.5) * t */
        if (k == 1 || !mul_by(c, a, 0.5, &xa) || !one_plus_erf(c, b, &xt, &trial)) continue;
      }
      if (xa != xt || !fuse_shape_eq(&fuse_type(c, xa)->shape, out)) continue;
      *grp = trial;
      *x = xa;
      return fuse_group_add(grp, a) && fuse_group_add(grp, root);
    }
  }
  return 0;
}

static int match_matmul_bias_act(const fuse_ctx *c, rlx_node root, void *mv, fuse_group *grp) {
  matmul_match *m = mv;
  const ir_node *n = fuse_node(c, root);
  if (n->op == RLX_OP_Activation) {
    rlx_node add = n->in[0];
    if (!fuse_takeable(c, add) || !match_biased_matmul(c, add, m, grp)) return 0;
    m->act = n->a.act;
    if (m->act == RLX_ACT_LEAKY_RELU) m->alpha = n->a.alpha;
    return fuse_group_add(grp, root);
  }
  rlx_node x;
  if (gelu_erf(c, root, &x, grp)) { /* the add read twice, by the chain */
    if (c->uses[x] != 2 || c->taken[x] || !match_biased_matmul(c, x, m, grp)) return 0;
    m->act = RLX_ACT_GELU;
    return 1;
  }
  return match_biased_matmul(c, root, m, grp);
}

static rlx_node emit_matmul_bias_act(rlx_graph *dst, const fuse_ctx *c, const void *mv,
                                     const rlx_node *map) {
  const matmul_match *m = mv;
  rlx_node bias = fuse_as_vector(dst, c->g, m->bias, map[m->bias]);
  return rlx_fused_matmul_bias_act(dst, map[m->a], map[m->w], bias, (rlx_act)m->act, m->alpha);
}

const fuse_pattern fuse_matmul_bias_act_pattern = {
    "matmul_bias_act", sizeof(matmul_match), match_matmul_bias_act, emit_matmul_bias_act};
