/* fuse_conv.c — a Conv and the elementwise steps after it that its output
 * tiles can take: [Clamp](act(Conv(x, w, bias) [+ residual])) ->
 * FusedConv{act, lo, hi}(x, w, bias, [residual]).
 *
 * The chain, each step optional but at least one: an add of a residual
 * (either side of a Binary add; the residual has the conv's shape exactly,
 * so nothing broadcasts), then an Activation (any: all are pointwise),
 * then a Clamp (ReLU6, or ONNX's Clip). The chain is what ResNet (relu
 * after the shortcut's add) and MobileNetV2 (ReLU6; an add without an
 * activation) write. An activation before the add (relu(conv) + x) is not
 * this chain: the activation's group fuses and the add stays. Every
 * interior node is read only by the next step. A Conv without a bias gets
 * a zero bias (the fused op always adds one). When both operands of the
 * add are Convs, the later one is fused and the other is its residual.
 * The fused kernel rounds once where the unfused ops round after each
 * step (within the dtype's tolerance). */
#include "fuse.h"

#include <math.h>
#include <stdlib.h>

typedef struct {
  rlx_node conv, residual; /* residual -1: none */
  int64_t act;
  double alpha, lo, hi;
} conv_match;

/* id is a Conv only the chain reads. */
static int fusable_conv(const fuse_ctx *c, rlx_node id) {
  return fuse_is(c, id, RLX_OP_Conv) && fuse_takeable(c, id);
}

/* add = conv + residual (either side), the conv's shape; the later conv
 * when both are. */
static int match_add(const fuse_ctx *c, rlx_node add, conv_match *m, fuse_group *grp) {
  if (!fuse_is_binop(c, add, RLX_BIN_ADD)) return 0;
  const ir_node *n = fuse_node(c, add);
  int side = -1;
  for (int s = 0; s < 2; s++)
    if (fusable_conv(c, n->in[s]) && (side < 0 || n->in[s] > n->in[side])) side = s;
  if (side < 0 || n->in[0] == n->in[1]) return 0;
  const ir_type *cv = fuse_type(c, n->in[side]), *res = fuse_type(c, n->in[1 - side]);
  if (!fuse_shape_eq(&cv->shape, &res->shape) || !fuse_shape_eq(&cv->shape, &fuse_type(c, add)->shape) ||
      cv->dtype != res->dtype)
    return 0;
  m->conv = n->in[side];
  m->residual = n->in[1 - side];
  return fuse_group_add(grp, add) && fuse_group_add(grp, m->conv);
}

/* x is the conv, or conv + residual, read only by the next step. */
static int match_base(const fuse_ctx *c, rlx_node x, conv_match *m, fuse_group *grp) {
  if (fusable_conv(c, x)) {
    m->conv = x;
    return fuse_group_add(grp, x);
  }
  return fuse_takeable(c, x) && match_add(c, x, m, grp);
}

/* x is act(base) or base, read only by the Clamp. */
static int match_act(const fuse_ctx *c, rlx_node x, conv_match *m, fuse_group *grp) {
  if (fuse_is(c, x, RLX_OP_Activation) && fuse_takeable(c, x)) {
    const ir_node *n = fuse_node(c, x);
    if (!match_base(c, n->in[0], m, grp)) return 0;
    m->act = n->a.act;
    if (m->act == RLX_ACT_LEAKY_RELU) m->alpha = n->a.alpha;
    return fuse_group_add(grp, x);
  }
  return match_base(c, x, m, grp);
}

static int match_conv(const fuse_ctx *c, rlx_node root, void *mv, fuse_group *grp) {
  conv_match *m = mv;
  const ir_node *n = fuse_node(c, root);
  m->residual = -1;
  m->act = RLX_ACT_NONE;
  m->alpha = ir_attr_table[IR_ATTR_alpha].def; /* unused but by leaky_relu: the default, as built */
  m->lo = -INFINITY;
  m->hi = INFINITY;
  if (n->op == RLX_OP_Clamp) {
    if (!match_act(c, n->in[0], m, grp)) return 0;
    m->lo = n->a.lo;
    m->hi = n->a.hi;
    return fuse_group_add(grp, root);
  }
  if (n->op == RLX_OP_Activation) {
    if (!match_base(c, n->in[0], m, grp)) return 0;
    m->act = n->a.act;
    if (m->act == RLX_ACT_LEAKY_RELU) m->alpha = n->a.alpha;
    return fuse_group_add(grp, root);
  }
  return match_add(c, root, m, grp);
}

static rlx_node emit_conv(rlx_graph *dst, const fuse_ctx *c, const void *mv, const rlx_node *map) {
  const conv_match *m = mv;
  const ir_node *cv = fuse_node(c, m->conv);
  rlx_conv_desc d = {.ndim = (int)cv->a.ndim, .groups = cv->a.groups};
  for (int i = 0; i < d.ndim; i++) {
    d.stride[i] = cv->a.stride.v[i];
    d.dilation[i] = cv->a.dilation.v[i];
  }
  for (int i = 0; i < 2 * d.ndim; i++) d.pad[i] = cv->a.pad.v[i];
  rlx_node bias;
  if (cv->n_in == 3) {
    bias = map[cv->in[2]];
  } else { /* zeros of the output channels */
    const ir_type *y = fuse_type(c, m->conv);
    int64_t oc = y->shape.d[1];
    void *zeros = calloc((size_t)oc * (size_t)ir_dtypes[y->dtype].size + 1, 1);
    if (!zeros) return ir_fail(dst, cv, RLX_ERR_NOMEM, "out of memory for a zero bias");
    bias = rlx_constant(dst, y->dtype, 1, &oc, zeros);
    free(zeros);
  }
  return rlx_fused_conv(dst, map[cv->in[0]], map[cv->in[1]], bias, m->residual < 0 ? -1 : map[m->residual], &d,
                        (rlx_act)m->act, m->alpha, m->lo, m->hi);
}

const fuse_pattern fuse_conv_pattern = {"conv", sizeof(conv_match), match_conv, emit_conv};
