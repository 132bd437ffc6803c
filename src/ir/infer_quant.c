/* infer_quant.c — builders and shape inference of DequantMatMul, Quantize,
 * Dequantize and FakeQuantize. */
#include "ir.h"

static const char *dtype_s(int64_t t) { return ir_dtype_valid(t) ? ir_dtypes[t].name : "?"; }

/* A packed tensor's type: scheme must be t's dtype, a block dtype (or, with
 * sixteen_bit, F16 or BF16 too). The builders set it from the input; a text
 * graph may disagree, which is a dtype error (RLX_ERR_DTYPE), as is any
 * other input dtype. */
static int check_scheme(rlx_graph *g, ir_node *n, const ir_type *t, const char *what,
                        int sixteen_bit) {
  if (!ir_is_block(t->dtype) && !(sixteen_bit && (t->dtype == RLX_F16 || t->dtype == RLX_BF16)))
    return ir_fail(g, n, RLX_ERR_DTYPE, "%s must have a GGUF block dtype%s, got %s", what,
                   sixteen_bit ? ", F16 or BF16" : "", dtype_s(t->dtype));
  if (n->a.scheme != t->dtype)
    return ir_fail(g, n, RLX_ERR_DTYPE, "scheme %s differs from the dtype %s of %s",
                   dtype_s(n->a.scheme), dtype_s(t->dtype), what);
  return 0;
}

/* ---------------------------------------------------------------- DequantMatMul */

rlx_node rlx_dequant_matmul(rlx_graph *g, rlx_node x, rlx_node w) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  /* scheme = w's dtype; an invalid w is reported by ir_add_node */
  if (g && w >= 0 && w < g->n_nodes) a.scheme = g->nodes[w].out[0].dtype;
  rlx_node in[] = {x, w};
  return ir_add_node(g, RLX_OP_DequantMatMul, 2, in, &a);
}

/* x [..., K] (rank >= 1, any float dtype) @ dequant(w [N, K])^T -> [..., N]
 * in x's dtype. Decisions where OPS.md is silent: w is exactly rank 2 (no
 * batch of weights, no broadcasting); F16/BF16 x is not widened in the
 * output (it has x's dtype). w may also be F16 or BF16 (scheme = that
 * dtype), GGUF tensor types like the blocks whose dequantization is
 * widening to F32 (exact): the product of an F32 x with 16-bit weights
 * read in place, accumulated in F32, where MatMul would need both operands
 * in one dtype (rounding x, or a widened copy of w). Quantize and
 * Dequantize stay block-only (a Cast is their 16-bit counterpart). */
int ir_infer_DequantMatMul(rlx_graph *g, ir_node *n) {
  const ir_type *tx = ir_in(g, n, 0), *tw = ir_in(g, n, 1);
  if (check_scheme(g, n, tw, "w", 1) < 0) return -1;
  if (!ir_is_float(tx->dtype))
    return ir_fail(g, n, RLX_ERR_DTYPE, "x must be a float tensor, got %s", dtype_s(tx->dtype));
  const ir_shape *sx = &tx->shape, *sw = &tw->shape;
  if (sx->rank < 1 || sw->rank != 2)
    return ir_fail(g, n, RLX_ERR_SHAPE, "needs x [..., K] and w [N, K], got x %s and w %s",
                   IR_SHAPE_S(g, sx), IR_SHAPE_S(g, sw));
  if (!ir_dims_compatible(sx->d[sx->rank - 1], sw->d[1]))
    return ir_fail(g, n, RLX_ERR_SHAPE, "K differs: x %s, w %s", IR_SHAPE_S(g, sx), IR_SHAPE_S(g, sw));
  n->out[0].dtype = tx->dtype;
  n->out[0].shape = *sx;
  n->out[0].shape.d[sx->rank - 1] = sw->d[0];
  return 0;
}

/* ---------------------------------------------------------------- Quantize / Dequantize */

rlx_node rlx_quantize(rlx_graph *g, rlx_node x, rlx_dtype scheme) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.scheme = scheme;
  rlx_node in[] = {x};
  return ir_add_node(g, RLX_OP_Quantize, 1, in, &a);
}

/* x: a float tensor of rank >= 1 whose last dim is static and a multiple
 * of the scheme's block (as for every block tensor). Decisions where OPS.md
 * is silent: a scheme that is not a block dtype is RLX_ERR_INVALID; x is
 * quantized from its F32 values (F64 rounded to F32 first), since ggml's
 * reference quantizers take float rows. */
int ir_infer_Quantize(rlx_graph *g, ir_node *n) {
  const ir_type *tx = ir_in(g, n, 0);
  if (!ir_is_block(n->a.scheme))
    return ir_fail(g, n, RLX_ERR_INVALID, "scheme must be a GGUF block dtype, got %s",
                   dtype_s(n->a.scheme));
  if (!ir_is_float(tx->dtype))
    return ir_fail(g, n, RLX_ERR_DTYPE, "x must be a float tensor, got %s", dtype_s(tx->dtype));
  const ir_shape *s = &tx->shape;
  const int block = ir_dtypes[n->a.scheme].block;
  if (s->rank < 1)
    return ir_fail(g, n, RLX_ERR_SHAPE, "x must have rank >= 1, got %s", IR_SHAPE_S(g, s));
  if (ir_dim_is_sym(s->d[s->rank - 1]) || s->d[s->rank - 1] % block)
    return ir_fail(g, n, RLX_ERR_SHAPE, "last dim of x %s must be a static multiple of %d (%s)",
                   IR_SHAPE_S(g, s), block, dtype_s(n->a.scheme));
  n->out[0].dtype = (rlx_dtype)n->a.scheme;
  n->out[0].shape = *s;
  return 0;
}

rlx_node rlx_dequantize(rlx_graph *g, rlx_node x) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  if (g && x >= 0 && x < g->n_nodes) a.scheme = g->nodes[x].out[0].dtype;
  rlx_node in[] = {x};
  return ir_add_node(g, RLX_OP_Dequantize, 1, in, &a);
}

/* Always to F32: ggml's dequantizers produce float. */
int ir_infer_Dequantize(rlx_graph *g, ir_node *n) {
  const ir_type *tx = ir_in(g, n, 0);
  if (check_scheme(g, n, tx, "x", 0) < 0) return -1;
  n->out[0].dtype = RLX_F32;
  n->out[0].shape = tx->shape;
  return 0;
}

/* ---------------------------------------------------------------- FakeQuantize */

rlx_node rlx_fake_quantize(rlx_graph *g, rlx_node x, rlx_node scale, rlx_node zero_point,
                           int bits, int symmetric, int axis) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.bits = bits;
  a.symmetric = symmetric != 0;
  a.axis = axis;
  rlx_node in[] = {x, scale, zero_point};
  return ir_add_node(g, RLX_OP_FakeQuantize, 3, in, &a);
}

static int is_one_element(const ir_shape *s) {
  return s->rank == 0 || (s->rank == 1 && s->d[0] == 1);
}

/* PyTorch's fake_quantize_per_{tensor,channel}_affine:
 *   q = clamp(nearbyint(x / scale) + zero_point, qmin, qmax),
 *   out = (q - zero_point) * scale, in x's dtype,
 * with [qmin, qmax] = [0, 2^bits - 1], or [-2^(bits-1), 2^(bits-1) - 1] when
 * symmetric, bits 2..16.
 * Decisions where OPS.md is silent: scale and zero_point both of one element
 * (rank 0 or [1]) mean per-tensor, and axis is then ignored (not checked);
 * otherwise both are rank 1 of length x.shape[axis] (per-channel; axis is
 * normalized). scale has any float dtype; zero_point is I32, I64 or a float
 * dtype, a float zero point is rounded to the nearest integer (ties to even);
 * with symmetric the zero point is ignored (taken as 0). */
int ir_infer_FakeQuantize(rlx_graph *g, ir_node *n) {
  const ir_type *tx = ir_in(g, n, 0), *ts = ir_in(g, n, 1), *tz = ir_in(g, n, 2);
  ir_attrs *a = &n->a;
  if (!ir_is_float(tx->dtype) || !ir_is_float(ts->dtype))
    return ir_fail(g, n, RLX_ERR_DTYPE, "x and scale must be float tensors, got %s and %s",
                   dtype_s(tx->dtype), dtype_s(ts->dtype));
  if (!ir_is_float(tz->dtype) && tz->dtype != RLX_I32 && tz->dtype != RLX_I64)
    return ir_fail(g, n, RLX_ERR_DTYPE, "zero_point must be i32, i64 or float, got %s",
                   dtype_s(tz->dtype));
  if (a->bits < 2 || a->bits > 16)
    return ir_fail(g, n, RLX_ERR_INVALID, "bits %lld outside 2..16", (long long)a->bits);
  const ir_shape *x = &tx->shape, *s = &ts->shape, *z = &tz->shape;
  if (!(is_one_element(s) && is_one_element(z))) {
    int axis = ir_norm_axis(a->axis, x->rank);
    if (axis < 0)
      return ir_fail(g, n, RLX_ERR_SHAPE, "per-channel axis %lld out of range for x %s",
                     (long long)a->axis, IR_SHAPE_S(g, x));
    if (s->rank != 1 || z->rank != 1 || !ir_dims_compatible(s->d[0], x->d[axis]) ||
        !ir_dims_compatible(z->d[0], x->d[axis]))
      return ir_fail(g, n, RLX_ERR_SHAPE,
                     "scale %s and zero_point %s must both have one element (per tensor) or "
                     "both be rank 1 of length x.shape[%d] (per channel), x %s",
                     IR_SHAPE_S(g, s), IR_SHAPE_S(g, z), axis, IR_SHAPE_S(g, x));
    a->axis = axis;
  }
  n->out[0] = *tx;
  return 0;
}
