/* vjp_linalg.c — vector-Jacobian rules of MatMul, DequantMatMul,
 * Attention (through its expansion) and Rope. */
#include "autodiff.h"

/* v with its last two dims swapped. */
static rlx_node swap_last2(ad_ctx *c, rlx_node v) {
  int r = ad_type(c, v).shape.rank;
  int64_t perm[RLX_MAX_RANK];
  for (int i = 0; i < r; i++) perm[i] = i;
  perm[r - 2] = r - 1;
  perm[r - 1] = r - 2;
  return rlx_transpose(c->g, v, r, perm);
}

/* v reshaped to s when its shape differs. */
static rlx_node reshape_to(ad_ctx *c, rlx_node v, const ir_shape *s) {
  ir_type t = ad_type(c, v);
  if (v < 0 || ir_shape_eq(&t.shape, s)) return v;
  return rlx_reshape(c->g, v, s->rank, s->d);
}

/* y = a @ b: da = g @ b^T, db = a^T @ g, each summed over the batch dims
 * it was broadcast along. Rank-1 operands are promoted as NumPy does ([K]
 * is [1, K] on the left, [K, 1] on the right) and the gradient reshaped
 * back. A weight b [K, N] against a batched a gets one flat product. */
rlx_status ad_vjp_MatMul(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  rlx_graph *g = c->g;
  rlx_node a = n->in[0], b = n->in[1];
  ir_shape sa = ad_type(c, a).shape, sb = ad_type(c, b).shape, sg = ad_type(c, gout[0]).shape;
  ir_shape sa2 = sa, sb2 = sb, sg2 = {0, {0}};
  if (sa.rank == 1) sa2 = (ir_shape){2, {1, sa.d[0]}};
  if (sb.rank == 1) sb2 = (ir_shape){2, {sb.d[0], 1}};
  int batch = sg.rank - (sa.rank >= 2) - (sb.rank >= 2);
  for (int i = 0; i < batch; i++) sg2.d[sg2.rank++] = sg.d[i];
  sg2.d[sg2.rank++] = sa2.d[sa2.rank - 2];
  sg2.d[sg2.rank++] = sb2.d[sb2.rank - 1];
  rlx_node a2 = reshape_to(c, a, &sa2), b2 = reshape_to(c, b, &sb2), g2 = reshape_to(c, gout[0], &sg2);
  rlx_status st = RLX_OK;
  if (ad_active(c, a)) {
    rlx_node ga = ad_reduce_to(c, rlx_matmul(g, g2, swap_last2(c, b2)), &sa2);
    st = ad_accum(c, a, 0, reshape_to(c, ga, &sa));
  }
  if (st == RLX_OK && ad_active(c, b)) {
    rlx_node gb;
    if (sb2.rank == 2 && sa2.rank == sg2.rank && sg2.rank > 2) {
      int64_t ak[2] = {-1, sa2.d[sa2.rank - 1]}, gn[2] = {-1, sg2.d[sg2.rank - 1]};
      rlx_node af = rlx_reshape(g, a2, 2, ak), gf = rlx_reshape(g, g2, 2, gn);
      /* a^T g moves a [M, K] through a transpose; (g^T a)^T moves g [M, N]
       * and the result [K, N]: the fewer elements (a wide hidden layer
       * against a narrow output, as an MLP's down projection) */
      int64_t M = 1, K = sa2.d[sa2.rank - 1], N = sg2.d[sg2.rank - 1];
      for (int i = 0; i < sa2.rank - 1; i++) M = ir_dim_is_sym(sa2.d[i]) || M < 0 ? -1 : M * sa2.d[i];
      if (M > 0 && !ir_dim_is_sym(K) && !ir_dim_is_sym(N) && M * N + K * N < M * K)
        gb = swap_last2(c, rlx_matmul(g, swap_last2(c, gf), af));
      else
        gb = rlx_matmul(g, swap_last2(c, af), gf);
    } else {
      gb = ad_reduce_to(c, rlx_matmul(g, swap_last2(c, a2), g2), &sb2);
    }
    st = ad_accum(c, b, 0, reshape_to(c, gb, &sb));
  }
  return st;
}

/* y = x @ dequant(w)^T: dx = g @ dequant(w) (for F16/BF16 w, dequant is
 * widening: a Cast); an F16/BF16 w also gets dw = g^T x over all rows of x,
 * in w's dtype. A packed (block) weight has no gradient (it is not a float
 * tensor). */
rlx_status ad_vjp_DequantMatMul(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  rlx_node x = n->in[0], w = n->in[1];
  const rlx_dtype t = ad_type(c, x).dtype;
  const ir_type tw = ad_type(c, w);
  const int packed = ir_is_block(tw.dtype);
  rlx_node wf = packed ? rlx_dequantize(c->g, w) : rlx_cast(c->g, w, RLX_F32);
  if (t != RLX_F32) wf = rlx_cast(c->g, wf, t);
  rlx_status st = ad_accum(c, x, 0, rlx_matmul(c->g, gout[0], wf));
  if (st == RLX_OK && !packed && ad_active(c, w)) {
    const int64_t xk[2] = {-1, tw.shape.d[1]}, gn[2] = {-1, tw.shape.d[0]};
    rlx_node gw = rlx_matmul(c->g, swap_last2(c, rlx_reshape(c->g, gout[0], 2, gn)),
                             rlx_reshape(c->g, x, 2, xk));
    st = ad_accum(c, w, 0, rlx_cast(c->g, gw, tw.dtype));
  }
  return st;
}

rlx_status ad_vjp_Attention(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  return ad_vjp_expanded(c, n, gout, ad_expand_attention);
}

/* Rope is a rotation of x: its transpose rotates back. Gradients of
 * differentiable cos / sin tables come from the expansion. */
rlx_status ad_vjp_Rope(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  if (n->n_in == 3 && (ad_active(c, n->in[1]) || ad_active(c, n->in[2])))
    return ad_vjp_expanded(c, n, gout, ad_expand_rope);
  return ad_accum(c, n->in[0], 0, ad_rope_inverse(c, n, gout[0]));
}
