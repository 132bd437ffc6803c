/* partials.c — derivative pieces that reverse and forward mode share: the
 * partials of the elementwise ops, the weights of the reductions,
 * softmax's Jacobian, Rope's inverse. A vjp multiplies a gradient by
 * them, a jvp a tangent, so both modes differentiate with one formula. */
#include "autodiff.h"

#include <math.h>

static const double INV_SQRT2 = 0.70710678118654752440;    /* 1/sqrt(2) */
static const double INV_SQRT_2PI = 0.39894228040143267794; /* 1/sqrt(2 pi) */
static const double SQRT_2_OVER_PI = 0.79788456080286535588;
static const double TWO_OVER_SQRT_PI = 1.12837916709551257390;
static const double GELU_TANH_C = 0.044715;

static const ad_partial ZERO_PARTIAL = {-1, 0.0, -1};

/* A constant in the dtype t of the function using it. */
#define K(v) ad_scalar(c, t, (v))

rlx_node ad_apply_partial(ad_ctx *c, rlx_node v, const ad_partial *p) {
  if (v < 0 || (p->f < 0 && p->k == 0)) return -1;
  rlx_node r = p->f >= 0 ? rlx_mul(c->g, v, p->f) : v;
  r = ad_scale(c, r, p->k);
  if (p->mask >= 0) r = rlx_where(c->g, p->mask, r, ad_scalar(c, ad_type(c, v).dtype, 0));
  return r;
}

/* d act(x) / dx as a partial; y is the activation's output. */
static void activation_partial(ad_ctx *c, const ir_node *n, ad_partial *p) {
  rlx_graph *g = c->g;
  rlx_node x = n->in[0], y = n->id;
  rlx_dtype t = ad_type(c, x).dtype;
  *p = (ad_partial){-1, 1.0, -1};
  switch ((rlx_act)n->a.act) {
  case RLX_ACT_GELU: { /* Phi(x) + x phi(x) */
    rlx_node cdf = rlx_mul(g, K(0.5), rlx_add(g, K(1), rlx_activation(g, RLX_ACT_ERF, rlx_mul(g, x, K(INV_SQRT2)))));
    rlx_node pdf = rlx_mul(g, rlx_activation(g, RLX_ACT_EXP, rlx_mul(g, rlx_activation(g, RLX_ACT_SQUARE, x), K(-0.5))),
                           K(INV_SQRT_2PI));
    p->f = rlx_add(g, cdf, rlx_mul(g, x, pdf));
    break;
  }
  case RLX_ACT_GELU_TANH: { /* 0.5 (1 + th) + 0.5 x (1 - th^2) sqrt(2/pi) (1 + 3 c x^2) */
    rlx_node x2 = rlx_activation(g, RLX_ACT_SQUARE, x);
    rlx_node u = rlx_mul(g, K(SQRT_2_OVER_PI), rlx_mul(g, x, rlx_add(g, K(1), rlx_mul(g, K(GELU_TANH_C), x2))));
    rlx_node th = rlx_activation(g, RLX_ACT_TANH, u);
    rlx_node du = rlx_mul(g, K(SQRT_2_OVER_PI), rlx_add(g, K(1), rlx_mul(g, K(3 * GELU_TANH_C), x2)));
    rlx_node sech2 = rlx_sub(g, K(1), rlx_activation(g, RLX_ACT_SQUARE, th));
    p->f = rlx_add(g, rlx_mul(g, K(0.5), rlx_add(g, K(1), th)), rlx_mul(g, rlx_mul(g, K(0.5), x), rlx_mul(g, sech2, du)));
    break;
  }
  case RLX_ACT_SILU: { /* s (1 + x (1 - s)) */
    rlx_node s = rlx_activation(g, RLX_ACT_SIGMOID, x);
    p->f = rlx_mul(g, s, rlx_add(g, K(1), rlx_mul(g, x, rlx_sub(g, K(1), s))));
    break;
  }
  case RLX_ACT_RELU: p->mask = rlx_compare(g, RLX_CMP_GT, x, K(0)); break; /* 0 at x = 0, as torch */
  case RLX_ACT_LEAKY_RELU: p->f = rlx_where(g, rlx_compare(g, RLX_CMP_GT, x, K(0)), K(1), K(n->a.alpha)); break;
  case RLX_ACT_SIGMOID: p->f = rlx_mul(g, y, rlx_sub(g, K(1), y)); break;
  case RLX_ACT_TANH: p->f = rlx_sub(g, K(1), rlx_activation(g, RLX_ACT_SQUARE, y)); break;
  case RLX_ACT_EXP: p->f = y; break;
  case RLX_ACT_LOG: p->f = rlx_activation(g, RLX_ACT_RECIPROCAL, x); break;
  case RLX_ACT_SQRT: p->f = rlx_activation(g, RLX_ACT_RECIPROCAL, y), p->k = 0.5; break;
  case RLX_ACT_RSQRT: p->f = rlx_mul(g, rlx_activation(g, RLX_ACT_SQUARE, y), y), p->k = -0.5; break;
  case RLX_ACT_NEG: p->k = -1; break;
  case RLX_ACT_ABS: p->f = rlx_activation(g, RLX_ACT_SIGN, x); break;
  case RLX_ACT_SIN: p->f = rlx_activation(g, RLX_ACT_COS, x); break;
  case RLX_ACT_COS: p->f = rlx_activation(g, RLX_ACT_SIN, x), p->k = -1; break;
  case RLX_ACT_ERF:
    p->f = rlx_activation(g, RLX_ACT_EXP, rlx_activation(g, RLX_ACT_NEG, rlx_activation(g, RLX_ACT_SQUARE, x)));
    p->k = TWO_OVER_SQRT_PI;
    break;
  case RLX_ACT_SOFTPLUS: p->f = rlx_activation(g, RLX_ACT_SIGMOID, x); break;
  case RLX_ACT_RECIPROCAL: p->f = rlx_activation(g, RLX_ACT_SQUARE, y), p->k = -1; break;
  case RLX_ACT_SQUARE: p->f = x, p->k = 2; break;
  default: *p = ZERO_PARTIAL; break; /* round, sign: piecewise constant */
  }
}

/* d (a op b) / da and / db; y is the output. max / min split a tie
 * evenly (as torch.maximum); mod = a - floor(a/b) b, so d/db = (y - a)/b. */
static void binary_partials(ad_ctx *c, const ir_node *n, ad_partial *pa, ad_partial *pb) {
  rlx_graph *g = c->g;
  rlx_node a = n->in[0], b = n->in[1], y = n->id;
  rlx_dtype t = ad_type(c, y).dtype;
  int wa = ad_active(c, a), wb = ad_active(c, b);
  *pa = *pb = (ad_partial){-1, 1.0, -1};
  switch ((rlx_binop)n->a.binop) {
  case RLX_BIN_ADD: break;
  case RLX_BIN_SUB: pb->k = -1; break;
  case RLX_BIN_MUL: pa->f = b, pb->f = a; break;
  case RLX_BIN_DIV:
    if (wa) pa->f = rlx_activation(g, RLX_ACT_RECIPROCAL, b);
    if (wb) pb->f = rlx_div(g, y, b), pb->k = -1;
    break;
  case RLX_BIN_POW:
    if (wa) pa->f = rlx_mul(g, b, rlx_pow(g, a, rlx_sub(g, b, K(1))));
    if (wb) pb->f = rlx_mul(g, y, rlx_activation(g, RLX_ACT_LOG, a));
    break;
  case RLX_BIN_MAX:
  case RLX_BIN_MIN: {
    rlx_node tie = rlx_where(g, rlx_compare(g, RLX_CMP_EQ, a, b), K(0.5), K(0));
    rlx_cmpop a_wins = n->a.binop == RLX_BIN_MAX ? RLX_CMP_GT : RLX_CMP_LT;
    rlx_cmpop b_wins = n->a.binop == RLX_BIN_MAX ? RLX_CMP_LT : RLX_CMP_GT;
    if (wa) pa->f = rlx_where(g, rlx_compare(g, a_wins, a, b), K(1), tie);
    if (wb) pb->f = rlx_where(g, rlx_compare(g, b_wins, a, b), K(1), tie);
    break;
  }
  case RLX_BIN_MOD:
    if (wb) pb->f = rlx_div(g, rlx_sub(g, y, a), b);
    break;
  default: *pa = *pb = ZERO_PARTIAL; break;
  }
}

/* FakeQuantize's straight-through estimator: 1 where round(x / scale) +
 * zero_point lies inside [qmin, qmax] (before clamping), as torch's
 * fake_quantize backward; scale and zero point get none (the learnable
 * variants are separate ops elsewhere). */
static rlx_node fake_quant_mask(ad_ctx *c, const ir_node *n) {
  rlx_graph *g = c->g;
  ir_type tx = ad_type(c, n->in[0]), ts = ad_type(c, n->in[1]);
  rlx_dtype t = tx.dtype;
  const int bits = (int)n->a.bits;
  const double qmin = n->a.symmetric ? -ldexp(1.0, bits - 1) : 0.0;
  const double qmax = n->a.symmetric ? ldexp(1.0, bits - 1) - 1.0 : ldexp(1.0, bits) - 1.0;
  int per_channel = !(ts.shape.rank == 0 || (ts.shape.rank == 1 && ts.shape.d[0] == 1));
  rlx_node scale = n->in[1], zp = n->in[2];
  int64_t cdims[RLX_MAX_RANK];
  int crank = 0;
  if (per_channel) { /* [C] -> [C, 1, ...] against x's axis */
    cdims[crank++] = tx.shape.d[n->a.axis];
    for (int i = (int)n->a.axis + 1; i < tx.shape.rank; i++) cdims[crank++] = 1;
  }
  scale = rlx_reshape(g, scale, crank, cdims);
  if (ts.dtype != t) scale = rlx_cast(g, scale, t);
  rlx_node q = rlx_activation(g, RLX_ACT_ROUND, rlx_div(g, n->in[0], scale));
  if (!n->a.symmetric) {
    rlx_node z = rlx_reshape(g, zp, crank, cdims);
    if (ad_type(c, zp).dtype != t) z = rlx_cast(g, z, t);
    if (ir_is_float(ad_type(c, zp).dtype)) z = rlx_activation(g, RLX_ACT_ROUND, z);
    q = rlx_add(g, q, z);
  }
  return ad_and(c, rlx_compare(g, RLX_CMP_GE, q, K(qmin)), rlx_compare(g, RLX_CMP_LE, q, K(qmax)));
}

rlx_status ad_elementwise_partials(ad_ctx *c, const ir_node *n, ad_partial *p) {
  rlx_graph *g = c->g;
  for (int k = 0; k < n->n_in; k++) p[k] = ZERO_PARTIAL;
  rlx_dtype t = n->out[0].dtype;
  switch (n->op) {
  case RLX_OP_Activation: activation_partial(c, n, &p[0]); break;
  case RLX_OP_Binary: binary_partials(c, n, &p[0], &p[1]); break;
  case RLX_OP_Where:
    p[1] = (ad_partial){-1, 1.0, n->in[0]};
    if (ad_active(c, n->in[2])) p[2] = (ad_partial){-1, 1.0, ad_not(c, n->in[0])};
    break;
  case RLX_OP_Clamp: /* 1 inside [lo, hi], bounds included (as torch.clamp) */
    p[0] = (ad_partial){-1, 1.0, ad_and(c, rlx_compare(g, RLX_CMP_GE, n->in[0], K(n->a.lo)),
                                        rlx_compare(g, RLX_CMP_LE, n->in[0], K(n->a.hi)))};
    break;
  case RLX_OP_FakeQuantize: p[0] = (ad_partial){-1, 1.0, fake_quant_mask(c, n)}; break;
  default: return ad_unsupported(c, n, "not an elementwise op");
  }
  return ad_status(c);
}

/* ---------------------------------------------------------------- reductions, softmax, rope */

ir_shape ad_reduce_keep_shape(const ad_ctx *c, const ir_node *n) {
  ir_shape s = ad_type(c, n->in[0]).shape;
  for (int i = 0; i < n->a.axes.n; i++) s.d[n->a.axes.v[i]] = 1;
  return s;
}

rlx_node ad_reduce_weight(ad_ctx *c, const ir_node *n) {
  rlx_graph *g = c->g;
  rlx_node x = n->in[0];
  ir_type tx = ad_type(c, x);
  rlx_dtype t = tx.dtype;
  const int na = n->a.axes.n;
  const int64_t *axes = n->a.axes.v;
  ir_shape keep = ad_reduce_keep_shape(c, n);
  rlx_node y = n->a.keep_dim ? n->id : rlx_reshape(g, n->id, keep.rank, keep.d);
  switch ((rlx_reduce_op)n->a.reduce) {
  case RLX_REDUCE_SUM: return -1;
  case RLX_REDUCE_MEAN: {
    int64_t count = 1;
    for (int i = 0; i < na; i++) count = ir_dim_is_sym(tx.shape.d[axes[i]]) || count < 0 ? -1 : count * tx.shape.d[axes[i]];
    if (count >= 0) return K(1.0 / (double)count);
    rlx_node counts = rlx_reduce(g, RLX_REDUCE_SUM, ad_fill(c, &tx, 1.0), na, axes, 1);
    return rlx_activation(g, RLX_ACT_RECIPROCAL, counts);
  }
  case RLX_REDUCE_MAX:
  case RLX_REDUCE_MIN: { /* ties share the gradient evenly (as torch.amax) */
    rlx_node hit = rlx_cast(g, rlx_compare(g, RLX_CMP_EQ, x, y), t);
    return rlx_div(g, hit, rlx_reduce(g, RLX_REDUCE_SUM, hit, na, axes, 1));
  }
  case RLX_REDUCE_PROD: {
    /* the product of the others: y / x, or with exactly one zero in the
     * group the product of the nonzero ones at that zero (0 elsewhere) */
    rlx_node zero = rlx_compare(g, RLX_CMP_EQ, x, K(0));
    rlx_node nonzero = rlx_where(g, zero, K(1), x);
    rlx_node prod_nz = rlx_reduce(g, RLX_REDUCE_PROD, nonzero, na, axes, 1);
    rlx_node zeros = rlx_reduce(g, RLX_REDUCE_SUM, rlx_cast(g, zero, t), na, axes, 1);
    rlx_node at_zero = rlx_where(g, rlx_compare(g, RLX_CMP_EQ, zeros, K(1)), prod_nz, K(0));
    return rlx_where(g, zero, at_zero, rlx_div(g, y, nonzero));
  }
  default: return ad_unsupported(c, n, "unknown reduce op"), -1;
  }
}

rlx_node ad_softmax_jacobian(ad_ctx *c, const ir_node *n, rlx_node v) {
  rlx_node y = n->id;
  int64_t axis = n->a.axis;
  rlx_node s = rlx_reduce(c->g, RLX_REDUCE_SUM, rlx_mul(c->g, v, y), 1, &axis, 1);
  return rlx_mul(c->g, y, rlx_sub(c->g, v, s));
}

rlx_node ad_rope_inverse(ad_ctx *c, const ir_node *n, rlx_node v) {
  rlx_node in[3] = {v, n->in[1], -1};
  if (n->n_in == 2) {
    in[1] = rlx_activation(c->g, RLX_ACT_NEG, n->in[1]); /* rotation by -theta */
  } else {
    in[2] = rlx_activation(c->g, RLX_ACT_NEG, n->in[2]);
  }
  return ad_same_op(c, n, in);
}
#undef K
