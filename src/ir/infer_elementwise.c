/* infer_elementwise.c — builders and shape inference of the elementwise ops
 * (OPS.md 4-9): Activation, Binary, Compare, Where, Cast, Clamp.
 *
 * Operands of Binary, Compare and Where must have the same dtype: there is
 * no implicit promotion (insert a Cast). Shapes broadcast by NumPy rules.
 */
#include "ir.h"

/* Integer dtypes of integer arithmetic: I8 U8 I32 I64 (not BOOL). */
static int is_int_dtype(rlx_dtype t) { return ir_is_int(t) && t != RLX_BOOL; }

/* The activations that are exact integer functions (computed in int64,
 * wrapped to the dtype: neg/abs of the minimum value wrap, as in NumPy). */
static int act_takes_int(int64_t act) {
  return act == RLX_ACT_NEG || act == RLX_ACT_ABS || act == RLX_ACT_SIGN ||
         act == RLX_ACT_SQUARE || act == RLX_ACT_RELU;
}

/* a and b: one plain dtype (no implicit promotion). */
static int same_plain_dtype(rlx_graph *g, ir_node *n, const char *what_a, const ir_type *a,
                            const char *what_b, const ir_type *b) {
  if (a->dtype != b->dtype)
    return ir_fail(g, n, RLX_ERR_DTYPE,
                   "%s is %s but %s is %s (no implicit promotion: Cast one of them)", what_a,
                   rlx_dtype_name(a->dtype), what_b, rlx_dtype_name(b->dtype));
  if (ir_is_block(a->dtype))
    return ir_fail(g, n, RLX_ERR_DTYPE, "block dtype %s is not elementwise (Dequantize first)",
                   rlx_dtype_name(a->dtype));
  return 0;
}

static int broadcast2(rlx_graph *g, ir_node *n, const ir_type *a, const ir_type *b,
                      ir_shape *out) {
  if (ir_broadcast(g, &a->shape, &b->shape, out)) return 0;
  char sa[IR_SHAPE_STR_CAP], sb[IR_SHAPE_STR_CAP];
  return ir_fail(g, n, RLX_ERR_SHAPE, "cannot broadcast %s with %s",
                 ir_shape_str(g, &a->shape, sa, sizeof sa),
                 ir_shape_str(g, &b->shape, sb, sizeof sb));
}

/* ---------------------------------------------------------------- Activation */

rlx_node rlx_activation(rlx_graph *g, rlx_act act, rlx_node x) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.act = act;
  rlx_node in[] = {x};
  return ir_add_node(g, RLX_OP_Activation, 1, in, &a);
}

rlx_node rlx_leaky_relu(rlx_graph *g, rlx_node x, double alpha) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.act = RLX_ACT_LEAKY_RELU;
  a.alpha = alpha;
  rlx_node in[] = {x};
  return ir_add_node(g, RLX_OP_Activation, 1, in, &a);
}

/* act none is not an activation here (it is only meaningful in fused ops).
 * Floats take every act; I8/U8/I32/I64 take neg, abs, sign, square, relu.
 * round is half to even (numpy.round); sign(0) = 0, sign(NaN) = NaN;
 * leaky_relu(x) = x < 0 ? alpha*x : x with a finite alpha. */
int ir_infer_Activation(rlx_graph *g, ir_node *n) {
  const ir_type *x = ir_in(g, n, 0);
  int64_t act = n->a.act;
  if (act <= RLX_ACT_NONE || act >= RLX_ACT_COUNT)
    return ir_fail(g, n, RLX_ERR_INVALID, "act %s is not an activation",
                   act == RLX_ACT_NONE ? "none" : "(out of range)");
  if (act == RLX_ACT_LEAKY_RELU && !isfinite(n->a.alpha))
    return ir_fail(g, n, RLX_ERR_INVALID, "leaky_relu alpha must be finite, got %g", n->a.alpha);
  if (!ir_is_float(x->dtype) && !(is_int_dtype(x->dtype) && act_takes_int(act)))
    return ir_fail(g, n, RLX_ERR_DTYPE, "act %s does not take %s (%s)", ir_act_names[act],
                   rlx_dtype_name(x->dtype),
                   act_takes_int(act) ? "floats and i8/u8/i32/i64 only" : "floats only");
  n->out[0] = *x;
  return 0;
}

/* ---------------------------------------------------------------- Binary */

rlx_node rlx_binary(rlx_graph *g, rlx_binop op, rlx_node a, rlx_node b) {
  ir_attrs at;
  ir_attrs_init_defaults(&at);
  at.binop = op;
  rlx_node in[] = {a, b};
  return ir_add_node(g, RLX_OP_Binary, 2, in, &at);
}

rlx_node rlx_add(rlx_graph *g, rlx_node a, rlx_node b) { return rlx_binary(g, RLX_BIN_ADD, a, b); }
rlx_node rlx_sub(rlx_graph *g, rlx_node a, rlx_node b) { return rlx_binary(g, RLX_BIN_SUB, a, b); }
rlx_node rlx_mul(rlx_graph *g, rlx_node a, rlx_node b) { return rlx_binary(g, RLX_BIN_MUL, a, b); }
rlx_node rlx_div(rlx_graph *g, rlx_node a, rlx_node b) { return rlx_binary(g, RLX_BIN_DIV, a, b); }
rlx_node rlx_pow(rlx_graph *g, rlx_node a, rlx_node b) { return rlx_binary(g, RLX_BIN_POW, a, b); }
rlx_node rlx_max(rlx_graph *g, rlx_node a, rlx_node b) { return rlx_binary(g, RLX_BIN_MAX, a, b); }
rlx_node rlx_min(rlx_graph *g, rlx_node a, rlx_node b) { return rlx_binary(g, RLX_BIN_MIN, a, b); }
rlx_node rlx_mod(rlx_graph *g, rlx_node a, rlx_node b) { return rlx_binary(g, RLX_BIN_MOD, a, b); }

/* Floats: IEEE arithmetic, pow = C pow (numpy.power), max/min propagate NaN
 * (numpy.maximum), mod = numpy.mod (result has the divisor's sign).
 * I8/U8/I32/I64: add/sub/mul wrap; div is floor division and mod its
 * remainder (numpy // and %), both 0 for a zero divisor; pow with a negative
 * exponent is 0 except for base 1 (1) and -1 (+-1) — NumPy raises there.
 * BOOL: max = logical or, min = logical and; other ops are dtype errors. */
int ir_infer_Binary(rlx_graph *g, ir_node *n) {
  int64_t op = n->a.binop;
  if (op < 0 || op >= RLX_BIN_COUNT)
    return ir_fail(g, n, RLX_ERR_INVALID, "binop %lld out of range", (long long)op);
  const ir_type *a = ir_in(g, n, 0), *b = ir_in(g, n, 1);
  if (same_plain_dtype(g, n, "a", a, "b", b) < 0) return -1;
  if (a->dtype == RLX_BOOL && op != RLX_BIN_MAX && op != RLX_BIN_MIN)
    return ir_fail(g, n, RLX_ERR_DTYPE, "op %s does not take bool (only max, min)",
                   ir_binop_names[op]);
  n->out[0].dtype = a->dtype;
  return broadcast2(g, n, a, b, &n->out[0].shape);
}

/* ---------------------------------------------------------------- Compare */

rlx_node rlx_compare(rlx_graph *g, rlx_cmpop op, rlx_node a, rlx_node b) {
  ir_attrs at;
  ir_attrs_init_defaults(&at);
  at.cmpop = op;
  rlx_node in[] = {a, b};
  return ir_add_node(g, RLX_OP_Compare, 2, in, &at);
}

/* Any plain dtype (both the same), output BOOL; NaN compares as in IEEE
 * (unequal to everything, ne true). Integers compare exactly. */
int ir_infer_Compare(rlx_graph *g, ir_node *n) {
  int64_t op = n->a.cmpop;
  if (op < 0 || op >= RLX_CMP_COUNT)
    return ir_fail(g, n, RLX_ERR_INVALID, "cmpop %lld out of range", (long long)op);
  const ir_type *a = ir_in(g, n, 0), *b = ir_in(g, n, 1);
  if (same_plain_dtype(g, n, "a", a, "b", b) < 0) return -1;
  n->out[0].dtype = RLX_BOOL;
  return broadcast2(g, n, a, b, &n->out[0].shape);
}

/* ---------------------------------------------------------------- Where */

rlx_node rlx_where(rlx_graph *g, rlx_node cond, rlx_node a, rlx_node b) {
  ir_attrs at;
  ir_attrs_init_defaults(&at);
  rlx_node in[] = {cond, a, b};
  return ir_add_node(g, RLX_OP_Where, 3, in, &at);
}

/* cond BOOL; a, b one plain dtype (copied bit-exactly). */
int ir_infer_Where(rlx_graph *g, ir_node *n) {
  const ir_type *c = ir_in(g, n, 0), *a = ir_in(g, n, 1), *b = ir_in(g, n, 2);
  if (c->dtype != RLX_BOOL)
    return ir_fail(g, n, RLX_ERR_DTYPE, "cond must be bool, got %s", rlx_dtype_name(c->dtype));
  if (same_plain_dtype(g, n, "a", a, "b", b) < 0) return -1;
  ir_shape ab;
  if (!ir_broadcast(g, &a->shape, &b->shape, &ab) ||
      !ir_broadcast(g, &c->shape, &ab, &n->out[0].shape)) {
    char sc[IR_SHAPE_STR_CAP], sa[IR_SHAPE_STR_CAP], sb[IR_SHAPE_STR_CAP];
    return ir_fail(g, n, RLX_ERR_SHAPE, "cannot broadcast cond %s, a %s, b %s",
                   ir_shape_str(g, &c->shape, sc, sizeof sc),
                   ir_shape_str(g, &a->shape, sa, sizeof sa),
                   ir_shape_str(g, &b->shape, sb, sizeof sb));
  }
  n->out[0].dtype = a->dtype;
  return 0;
}

/* ---------------------------------------------------------------- Cast */

rlx_node rlx_cast(rlx_graph *g, rlx_node x, rlx_dtype to) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.to = to;
  rlx_node in[] = {x};
  return ir_add_node(g, RLX_OP_Cast, 1, in, &a);
}

/* Plain dtype to plain dtype (block dtypes: Quantize / Dequantize).
 * float -> int truncates toward zero and saturates to the target range,
 * NaN -> 0; int -> int wraps (two's complement, as numpy astype);
 * anything -> BOOL is x != 0 (NaN -> true); to F16/BF16/F32 rounds to
 * nearest even (one rounding, also from F64). */
int ir_infer_Cast(rlx_graph *g, ir_node *n) {
  const ir_type *x = ir_in(g, n, 0);
  int64_t to = n->a.to;
  if (!ir_dtype_valid(to))
    return ir_fail(g, n, RLX_ERR_INVALID, "to: dtype %lld out of range", (long long)to);
  if (ir_is_block(x->dtype) || ir_is_block(to))
    return ir_fail(g, n, RLX_ERR_DTYPE,
                   "cast %s -> %s: block dtypes go through Quantize / Dequantize",
                   rlx_dtype_name(x->dtype), rlx_dtype_name((rlx_dtype)to));
  n->out[0] = *x;
  n->out[0].dtype = (rlx_dtype)to;
  return 0;
}

/* ---------------------------------------------------------------- Clamp */

rlx_node rlx_clamp(rlx_graph *g, rlx_node x, double lo, double hi) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.lo = lo;
  a.hi = hi;
  rlx_node in[] = {x};
  return ir_add_node(g, RLX_OP_Clamp, 1, in, &a);
}

/* min(max(x, lo), hi) on floats and I8/U8/I32/I64; lo <= hi, neither NaN
 * (+-inf: unbounded). Floats: NaN input stays NaN. Integers: the bounds
 * are ceil(lo) and floor(hi), saturated to the dtype's range. */
int ir_infer_Clamp(rlx_graph *g, ir_node *n) {
  const ir_type *x = ir_in(g, n, 0);
  double lo = n->a.lo, hi = n->a.hi;
  if (isnan(lo) || isnan(hi) || lo > hi)
    return ir_fail(g, n, RLX_ERR_INVALID, "need lo <= hi, got lo %g, hi %g", lo, hi);
  if (!ir_is_float(x->dtype) && !is_int_dtype(x->dtype))
    return ir_fail(g, n, RLX_ERR_DTYPE, "takes floats and i8/u8/i32/i64, got %s",
                   rlx_dtype_name(x->dtype));
  n->out[0] = *x;
  return 0;
}
