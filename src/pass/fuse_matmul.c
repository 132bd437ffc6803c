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
 *    activation stays).
 * Dtypes need no check: MatMul, Binary and Activation already require one
 * float dtype for all of them. The fused kernel rounds once where the
 * unfused ops round after each op (within the dtype's tolerance). */
#include "fuse.h"

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
