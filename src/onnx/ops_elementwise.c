/* ops_elementwise.c — importers of ONNX's elementwise ops. Integer
 * arithmetic on known values (shape computations) folds at import. */
#include "onnx.h"

#include <math.h>
#include <string.h>

static int is(const ox_node *n, const char *op) { return !strcmp(n->op_type, op); }

/* A scalar constant of x's dtype. */
rlx_node ox_scalar_like(ox_importer *im, rlx_node x, double v) {
  rlx_dtype t = RLX_F32;
  if (rlx_node_type(im->g, x, &t, NULL) < 0) return -1;
  return ox_scalar(im, t, v);
}

rlx_node ox_scalar(ox_importer *im, rlx_dtype t, double v) {
  uint64_t buf[1];
  ox_store(t, buf, 0, v, ox_f2i(v));
  return rlx_constant(im->g, t, 0, NULL, buf);
}

/* Folds an elementwise op whose inputs are all known integer (or bool)
 * values of equal shape or single elements: the shape arithmetic of
 * exported models (Equal, Where, Mod, Div on Shape results). Returns 1 when
 * folded (output set, *st its status), 0 to build the op instead. */
static int fold_ints(ox_importer *im, const ox_node *n, rlx_status *st) {
  enum { ADD, SUB, MUL, DIV, MOD, MAX, MIN, EQ, LT, GT, LE, GE, AND, OR, XOR, NOT, WHERE, NEG, ABS };
  static const char *const names[] = {"Add", "Sub", "Mul", "Div", "Mod", "Max", "Min", "Equal", "Less", "Greater",
                                      "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Not", "Where", "Neg", "Abs"};
  int op = -1;
  for (int i = 0; i < (int)(sizeof names / sizeof *names); i++)
    if (is(n, names[i])) op = i;
  int k = n->n_inputs;
  if (op < 0 || k < 1 || k > 3 || (op == MOD && ox_attr_int(n, "fmod", 0))) return 0;
  const ox_value *v[3], *big = NULL;
  for (int i = 0; i < k; i++) {
    v[i] = ox_in_value(im, n, i);
    if (!v[i] || !v[i]->known || !v[i]->ints || v[i]->numel > 4096) return 0;
    if (!big || v[i]->numel > big->numel || (v[i]->numel == big->numel && v[i]->rank > big->rank)) big = v[i];
  }
  for (int i = 0; i < k; i++) {   /* one element, or big's very shape (no other broadcasting) */
    if (v[i]->numel == 1 && v[i]->rank <= big->rank) continue;
    if (v[i]->rank != big->rank || memcmp(v[i]->dims, big->dims, sizeof(int64_t) * (size_t)big->rank)) return 0;
  }
  int64_t out[4096];
  for (int64_t e = 0; e < big->numel; e++) {
    int64_t x[3];
    for (int i = 0; i < k; i++) {
      x[i] = v[i]->ints[v[i]->numel == 1 ? 0 : e];
      if (ir_dim_is_sym(x[i]) && op != WHERE) return 0;   /* Where may pass a symbolic dim through */
    }
    int64_t a = x[0], b = k > 1 ? x[1] : 0, r;
    switch (op) {
    case ADD: if (__builtin_add_overflow(a, b, &r)) return 0; break;
    case SUB: if (__builtin_sub_overflow(a, b, &r)) return 0; break;
    case MUL: if (__builtin_mul_overflow(a, b, &r)) return 0; break;
    case DIV: if (b == 0 || (a == INT64_MIN && b == -1)) return 0; r = a / b; break;   /* toward zero, as ONNX */
    case MOD: if (b == 0 || (a == INT64_MIN && b == -1)) return 0; r = a % b; if (r && (r < 0) != (b < 0)) r += b; break;
    case MAX: r = a > b ? a : b; break;
    case MIN: r = a < b ? a : b; break;
    case EQ: r = a == b; break;
    case LT: r = a < b; break;
    case GT: r = a > b; break;
    case LE: r = a <= b; break;
    case GE: r = a >= b; break;
    case AND: r = a && b; break;
    case OR: r = a || b; break;
    case XOR: r = !a != !b; break;
    case NOT: r = !a; break;
    case WHERE: r = a ? x[1] : x[2]; break;
    case NEG: if (a == INT64_MIN) return 0; r = -a; break;
    default: if (a == INT64_MIN) return 0; r = a < 0 ? -a : a; break;
    }
    out[e] = r;
  }
  rlx_dtype t = op >= EQ && op <= NOT ? RLX_BOOL : op == WHERE ? v[1]->dtype : v[0]->dtype;
  *st = ox_set_out_known(im, n, 0, t, big->rank, big->dims, out, NULL);
  return 1;
}

rlx_status ox_op_binary(ox_importer *im, const ox_node *n) {
  rlx_binop op = is(n, "Add") ? RLX_BIN_ADD : is(n, "Sub") ? RLX_BIN_SUB : is(n, "Mul") ? RLX_BIN_MUL
               : is(n, "Div") ? RLX_BIN_DIV : RLX_BIN_POW;
  if (im->opset < 7 && ox_attr_get(n, "axis"))
    return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "legacy broadcast with an axis");
  rlx_status st;
  if (fold_ints(im, n, &st)) return st;
  rlx_node a = IN(0);
  NEED(a);
  rlx_node b = IN(1);
  NEED(b);
  rlx_dtype ta;
  rlx_node_type(im->g, a, &ta, NULL);
  if (op == RLX_BIN_DIV && ir_is_int(ta)) {
    /* ONNX divides integers as C does (toward zero); rlx floors: add one
     * where the remainder is non-zero and the signs differ. */
    rlx_graph *g = im->g;
    rlx_node q = rlx_div(g, a, b), zero = ox_scalar(im, ta, 0);
    rlx_node inexact = rlx_compare(g, RLX_CMP_NE, rlx_mod(g, a, b), zero);
    rlx_node differ = rlx_compare(g, RLX_CMP_NE, rlx_compare(g, RLX_CMP_LT, a, zero), rlx_compare(g, RLX_CMP_LT, b, zero));
    rlx_node fix = rlx_where(g, inexact, differ, inexact);
    return ox_set_out(im, n, 0, rlx_where(g, fix, rlx_add(g, q, ox_scalar(im, ta, 1)), q));
  }
  if (op == RLX_BIN_POW) {   /* the exponent may have another type: use the base's */
    rlx_dtype tb;
    rlx_node_type(im->g, b, &tb, NULL);
    if (ta != tb) b = rlx_cast(im->g, b, ta);
  }
  return ox_set_out(im, n, 0, rlx_binary(im->g, op, a, b));
}

rlx_status ox_op_variadic(ox_importer *im, const ox_node *n) {
  rlx_status st;
  if (fold_ints(im, n, &st)) return st;
  rlx_binop op = is(n, "Max") ? RLX_BIN_MAX : is(n, "Min") ? RLX_BIN_MIN : RLX_BIN_ADD;
  if (n->n_inputs < 1) return ox_node_fail(im, n, RLX_ERR_INVALID, "no inputs");
  rlx_node acc = IN(0);
  NEED(acc);
  for (int i = 1; i < n->n_inputs; i++) {
    rlx_node b = IN(i);
    NEED(b);
    acc = rlx_binary(im->g, op, acc, b);
  }
  if (is(n, "Mean")) acc = rlx_div(im->g, acc, ox_scalar_like(im, acc, n->n_inputs));
  return ox_set_out(im, n, 0, acc);
}

rlx_status ox_op_mod(ox_importer *im, const ox_node *n) {
  rlx_status st;
  if (fold_ints(im, n, &st)) return st;
  rlx_node a = IN(0);
  NEED(a);
  rlx_node b = IN(1);
  NEED(b);
  rlx_dtype t;
  rlx_node_type(im->g, a, &t, NULL);
  /* fmod=1 (C's fmod, the sign of the dividend) vs Python's mod (the
   * divisor's sign): rlx's Mod is the latter; fmod = a - b*trunc(a/b) is
   * built for floats. */
  if (ox_attr_int(n, "fmod", 0) && ir_is_float(t)) {
    rlx_node q = rlx_div(im->g, a, b);
    /* trunc(q) = sign(q) * floor(|q|), with floor(|q|) = |q| - mod(|q|, 1) */
    rlx_node aq = rlx_activation(im->g, RLX_ACT_ABS, q);
    rlx_node fr = rlx_mod(im->g, aq, ox_scalar_like(im, aq, 1.0));
    rlx_node tr = rlx_mul(im->g, rlx_activation(im->g, RLX_ACT_SIGN, q), rlx_sub(im->g, aq, fr));
    return ox_set_out(im, n, 0, rlx_sub(im->g, a, rlx_mul(im->g, b, tr)));
  }
  if (ox_attr_int(n, "fmod", 0)) {   /* integers: the floor mod r, less b when r != 0 and a, b differ in sign */
    rlx_graph *g = im->g;
    rlx_node r = rlx_mod(g, a, b), zero = ox_scalar(im, t, 0);
    rlx_node differ = rlx_compare(g, RLX_CMP_NE, rlx_compare(g, RLX_CMP_LT, a, zero), rlx_compare(g, RLX_CMP_LT, b, zero));
    rlx_node fix = rlx_where(g, rlx_compare(g, RLX_CMP_NE, r, zero), differ, rlx_compare(g, RLX_CMP_NE, zero, zero));
    return ox_set_out(im, n, 0, rlx_where(g, fix, rlx_sub(g, r, b), r));
  }
  return ox_set_out(im, n, 0, rlx_mod(im->g, a, b));
}

rlx_status ox_op_compare(ox_importer *im, const ox_node *n) {
  rlx_status st;
  if (fold_ints(im, n, &st)) return st;
  rlx_cmpop op = is(n, "Equal") ? RLX_CMP_EQ : is(n, "Less") ? RLX_CMP_LT : is(n, "LessOrEqual") ? RLX_CMP_LE
               : is(n, "Greater") ? RLX_CMP_GT : RLX_CMP_GE;
  rlx_node a = IN(0);
  NEED(a);
  rlx_node b = IN(1);
  NEED(b);
  return ox_set_out(im, n, 0, rlx_compare(im->g, op, a, b));
}

rlx_status ox_op_logical(ox_importer *im, const ox_node *n) {
  rlx_status st;
  if (fold_ints(im, n, &st)) return st;
  rlx_node a = IN(0);
  NEED(a);
  if (is(n, "Not")) return ox_set_out(im, n, 0, rlx_compare(im->g, RLX_CMP_EQ, a, ox_scalar_like(im, a, 0)));
  rlx_node b = IN(1);
  NEED(b);
  rlx_node r = is(n, "And") ? rlx_where(im->g, a, b, a) : is(n, "Or") ? rlx_where(im->g, a, a, b)
             : rlx_compare(im->g, RLX_CMP_NE, a, b);
  return ox_set_out(im, n, 0, r);
}

/* BitShift: in int64, x * 2^y to the left (wrapped back to x's width by
 * the cast), the floor of x / 2^y to the right (an arithmetic shift for
 * signed x); a shift outside [0, width) gives 0, or -1 for a negative x
 * shifted right, as ONNX's reference. u64 above 2^63 shifts right as the
 * negative int64 of its bits (docs/OPS.md). */
rlx_status ox_op_bit_shift(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node x = IN(0);
  NEED(x);
  rlx_node y = IN(1);
  NEED(y);
  rlx_dtype t;
  rlx_node_type(g, x, &t, NULL);
  if (!ir_is_int(t)) return ox_node_fail(im, n, RLX_ERR_DTYPE, "BitShift of %s (integers only)", rlx_dtype_name(t));
  const char *dir = ox_attr_str(n, "direction", "");
  int left = !strcmp(dir, "LEFT");
  if (!left && strcmp(dir, "RIGHT")) return ox_node_fail(im, n, RLX_ERR_INVALID, "direction \"%s\" (LEFT or RIGHT)", dir);
  rlx_node xi = rlx_cast(g, x, RLX_I64), yi = rlx_cast(g, y, RLX_I64);
  rlx_node zero = ox_scalar(im, RLX_I64, 0);
  rlx_node valid = rlx_where(g, rlx_compare(g, RLX_CMP_GE, yi, zero),
                             rlx_compare(g, RLX_CMP_LT, yi, ox_scalar(im, RLX_I64, 8.0 * (double)rlx_dtype_nbytes(t, 1))),
                             rlx_compare(g, RLX_CMP_NE, zero, zero));
  rlx_node p = rlx_pow(g, ox_scalar(im, RLX_I64, 2), rlx_where(g, valid, yi, zero));
  rlx_node r = left ? rlx_mul(g, xi, p) : rlx_div(g, xi, p);
  rlx_node out_of_range = zero;
  int is_signed = t == RLX_I8 || t == RLX_I16 || t == RLX_I32 || t == RLX_I64;
  if (!left && is_signed) out_of_range = rlx_where(g, rlx_compare(g, RLX_CMP_LT, xi, zero), ox_scalar(im, RLX_I64, -1), zero);
  return ox_set_out(im, n, 0, rlx_cast(g, rlx_where(g, valid, r, out_of_range), t));
}

/* BitwiseNot: ~x = -1 - x in the wrapping integer arithmetic (all ones
 * minus x for the unsigned dtypes). */
/* BitwiseAnd, BitwiseOr, BitwiseXor a byte at a time: each byte pair
 * indexes a 256 x 256 table of the op. A signed value is split into its
 * sign and the rest (x - MIN when negative), so every byte is found by
 * division and remainder of non-negative numbers. */
rlx_status ox_op_bitwise(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node x = IN(0), y = IN(1);
  NEED(x);
  NEED(y);
  rlx_dtype t, ty;
  rlx_node_type(g, x, &t, NULL);
  rlx_node_type(g, y, &ty, NULL);
  if (!ir_is_int(t) || t != ty)
    return ox_node_fail(im, n, RLX_ERR_DTYPE, "%s of %s and %s (one integer type)", n->op_type, rlx_dtype_name(t), rlx_dtype_name(ty));
  char op = n->op_type[7];   /* 'A'nd, 'O'r, 'X'or */
  uint8_t *table = ox_alloc(im->arena, 65536);
  if (!table) return ox_node_fail(im, n, RLX_ERR_NOMEM, "out of memory");
  for (unsigned i = 0; i < 65536; i++) {
    unsigned a = i >> 8, b = i & 255;
    table[i] = (uint8_t)(op == 'A' ? a & b : op == 'O' ? a | b : a ^ b);
  }
  int bytes = (int)rlx_dtype_nbytes(t, 1), is_signed = t == RLX_I8 || t == RLX_I16 || t == RLX_I32 || t == RLX_I64;
  uint64_t min_bits[1];
  ox_store(t, min_bits, 0, 0, is_signed ? (int64_t)((uint64_t)1 << (8 * bytes - 1)) : 0);
  rlx_node zero = ox_scalar(im, t, 0), min = rlx_constant(g, t, 0, NULL, min_bits);
  rlx_node sx = rlx_compare(g, RLX_CMP_LT, x, zero), sy = rlx_compare(g, RLX_CMP_LT, y, zero);
  rlx_node lx = is_signed ? rlx_where(g, sx, rlx_sub(g, x, min), x) : x;
  rlx_node ly = is_signed ? rlx_where(g, sy, rlx_sub(g, y, min), y) : y;
  rlx_node tab = rlx_constant(g, RLX_U8, 1, (int64_t[]){65536}, table), acc = -1, b256 = ox_scalar(im, t, bytes > 1 ? 256 : 0);
  for (int b = 0; b < bytes; b++) {
    rlx_node bx = rlx_cast(g, bytes > 1 ? rlx_mod(g, lx, b256) : lx, RLX_I32);   /* (256 wraps in 8 bits) */
    rlx_node by = rlx_cast(g, bytes > 1 ? rlx_mod(g, ly, b256) : ly, RLX_I32);
    rlx_node r = rlx_cast(g, rlx_gather(g, tab, rlx_add(g, rlx_mul(g, bx, ox_scalar(im, RLX_I32, 256)), by), 0), t);
    if (b) r = rlx_mul(g, r, ox_scalar(im, t, ldexp(1, 8 * b)));
    acc = acc < 0 ? r : rlx_add(g, acc, r);
    if (b + 1 < bytes) {
      lx = rlx_div(g, lx, b256);
      ly = rlx_div(g, ly, b256);
    }
  }
  if (is_signed) {
    rlx_node no = rlx_compare(g, RLX_CMP_NE, zero, zero);
    rlx_node s = op == 'A' ? rlx_where(g, sx, sy, no) : op == 'O' ? rlx_where(g, sx, sx, sy) : rlx_compare(g, RLX_CMP_NE, sx, sy);
    acc = rlx_where(g, s, rlx_add(g, acc, min), acc);
  }
  return ox_set_out(im, n, 0, acc);
}

rlx_status ox_op_bitwise_not(ox_importer *im, const ox_node *n) {
  rlx_node x = IN(0);
  NEED(x);
  rlx_dtype t;
  rlx_node_type(im->g, x, &t, NULL);
  if (!ir_is_int(t)) return ox_node_fail(im, n, RLX_ERR_DTYPE, "BitwiseNot of %s (integers only)", rlx_dtype_name(t));
  uint64_t ones[1];
  ox_store(t, ones, 0, -1, -1);
  return ox_set_out(im, n, 0, rlx_sub(im->g, rlx_constant(im->g, t, 0, NULL, ones), x));
}

rlx_status ox_op_where(ox_importer *im, const ox_node *n) {
  rlx_status st;
  if (fold_ints(im, n, &st)) return st;
  rlx_node c = IN(0);
  NEED(c);
  rlx_node a = IN(1);
  NEED(a);
  rlx_node b = IN(2);
  NEED(b);
  return ox_set_out(im, n, 0, rlx_where(im->g, c, a, b));
}

/* A cast from or to a narrow type: through F32 (narrow.c). */
static rlx_status cast_narrow(ox_importer *im, const ox_node *n, int32_t from, int32_t to, rlx_dtype rlx_to) {
  rlx_node x = IN(0);
  NEED(x);
  if (ox_is_narrow(from)) x = ox_narrow_decode(im, x, from);
  rlx_node y = ox_is_narrow(to) ? ox_narrow_encode(im, x, to, (int)ox_attr_int(n, "saturate", 1), ox_attr_str(n, "round_mode", "up"))
                                : rlx_cast(im->g, x, rlx_to);
  return ox_set_out_typed(im, n, 0, y, to);
}

rlx_status ox_op_cast(ox_importer *im, const ox_node *n) {
  int to;
  int32_t ot;
  if (is(n, "CastLike")) {
    ox_value *like = ox_in_value(im, n, 1);
    rlx_dtype t;
    if (!like) return ox_node_fail(im, n, RLX_ERR_INVALID, "no target_type input");
    if (like->known) t = like->dtype;
    else rlx_node_type(im->g, like->node, &t, NULL);
    to = (int)t;
    ot = like->onnx_type ? like->onnx_type : 0;
  } else {
    ot = (int32_t)ox_attr_int(n, "to", 0);
    to = ox_rlx_dtype(ot);
    if (to < 0) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a cast to %s", ox_dtype_name(ot));
  }
  ox_value *v = ox_in_value(im, n, 0);
  if (v && (v->onnx_type || ox_is_narrow(ot))) return cast_narrow(im, n, ox_value_type(v), ox_is_narrow(ot) ? ot : 0, (rlx_dtype)to);
  if (v && v->known && v->ints && (ir_is_int(to) || to == RLX_BOOL)) {  /* shapes cast to int64/int32 */
    int64_t out[4096];
    if (v->numel <= 4096) {
      for (int64_t i = 0; i < v->numel; i++) out[i] = to == RLX_BOOL ? v->ints[i] != 0 : v->ints[i];
      return ox_set_out_known(im, n, 0, (rlx_dtype)to, v->rank, v->dims, out, NULL);
    }
  } else if (v && v->known && v->numel <= 64) {   /* small values to or from a float: stored as the cast stores them */
    uint64_t buf[64];
    int64_t oi[64];
    double orr[64];
    for (int64_t i = 0; i < v->numel; i++) {
      if (v->ints && ir_dim_is_sym(v->ints[i])) break;
      double r = v->reals ? v->reals[i] : (double)v->ints[i];
      int64_t k = v->ints ? v->ints[i] : ox_f2i(r);
      ox_store((rlx_dtype)to, buf, i, r, k);
      orr[i] = rlx_value_as_f64((rlx_dtype)to, buf, i);
      oi[i] = to == RLX_I64 || to == RLX_U64 ? k : to == RLX_BOOL ? r != 0 : (int64_t)orr[i];
      if (i == v->numel - 1)
        return ox_set_out_known(im, n, 0, (rlx_dtype)to, v->rank, v->dims, ir_is_float(to) ? NULL : oi,
                                ir_is_float(to) ? orr : NULL);
    }
  }
  rlx_node x = IN(0);
  NEED(x);
  return ox_set_out(im, n, 0, rlx_cast(im->g, x, (rlx_dtype)to));
}

/* A one-element known input as a double; 0 when absent (then *have = 0). */
static double known_scalar(ox_importer *im, const ox_node *n, int i, int *have) {
  ox_value *v = ox_in_known(im, n, i);
  *have = v && v->numel == 1;
  if (!*have) return 0;
  return v->reals ? v->reals[0] : (double)v->ints[0];
}

rlx_status ox_op_clip(ox_importer *im, const ox_node *n) {
  rlx_node x = IN(0);
  NEED(x);
  double lo = -INFINITY, hi = INFINITY;
  if (im->opset < 11) {
    lo = ox_attr_float(n, "min", -INFINITY);
    hi = ox_attr_float(n, "max", INFINITY);
    return ox_set_out(im, n, 0, rlx_clamp(im->g, x, lo, hi));
  }
  rlx_node r = x;
  for (int i = 1; i <= 2; i++) {
    if (!ox_has_in(n, i)) continue;
    int have;
    double v = known_scalar(im, n, i, &have);
    if (have) {
      if (i == 1) lo = v;
      else hi = v;
      continue;
    }
    rlx_node b = IN(i);
    NEED(b);
    r = rlx_binary(im->g, i == 1 ? RLX_BIN_MAX : RLX_BIN_MIN, r, b);
  }
  rlx_dtype t;
  rlx_node_type(im->g, x, &t, NULL);
  if (ir_is_int(t)) {   /* clamp takes doubles; integer bounds by max/min */
    if (lo != -INFINITY) r = rlx_max(im->g, r, ox_scalar_like(im, r, lo));
    if (hi != INFINITY) r = rlx_min(im->g, r, ox_scalar_like(im, r, hi));
    return ox_set_out(im, n, 0, r);
  }
  return ox_set_out(im, n, 0, lo == -INFINITY && hi == INFINITY ? r : rlx_clamp(im->g, r, lo, hi));
}

static const struct { const char *op; rlx_act act; } unary_acts[] = {
  {"Relu", RLX_ACT_RELU}, {"Sigmoid", RLX_ACT_SIGMOID}, {"Tanh", RLX_ACT_TANH}, {"Exp", RLX_ACT_EXP},
  {"Log", RLX_ACT_LOG}, {"Sqrt", RLX_ACT_SQRT}, {"Neg", RLX_ACT_NEG}, {"Abs", RLX_ACT_ABS},
  {"Sin", RLX_ACT_SIN}, {"Cos", RLX_ACT_COS}, {"Erf", RLX_ACT_ERF}, {"Softplus", RLX_ACT_SOFTPLUS},
  {"Sign", RLX_ACT_SIGN}, {"Round", RLX_ACT_ROUND}, {"Reciprocal", RLX_ACT_RECIPROCAL},
};

rlx_status ox_op_unary(ox_importer *im, const ox_node *n) {
  rlx_status st;
  if (fold_ints(im, n, &st)) return st;
  rlx_node x = IN(0);
  NEED(x);
  for (size_t i = 0; i < sizeof unary_acts / sizeof *unary_acts; i++)
    if (is(n, unary_acts[i].op)) return ox_set_out(im, n, 0, rlx_activation(im->g, unary_acts[i].act, x));
  return ox_node_fail(im, n, RLX_ERR_INTERNAL, "no activation for the op");
}

rlx_status ox_op_identity(ox_importer *im, const ox_node *n) {
  ox_value *v = ox_in_value(im, n, 0);
  if (!v) return ox_node_fail(im, n, RLX_ERR_INVALID, "no input");
  if (is(n, "Dropout") && ox_has_in(n, 2)) {
    int have;
    double training = known_scalar(im, n, 2, &have), ratio = 0.5;
    int have_ratio = 0;
    if (ox_has_in(n, 1)) ratio = known_scalar(im, n, 1, &have_ratio);
    /* training with a ratio of 0 keeps every element: the identity */
    if ((!have || training != 0) && !(have_ratio && ratio == 0))
      return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "Dropout in training mode");
  }
  if (is(n, "Dropout") && n->n_outputs > 1 && n->outputs[1][0]) {   /* inference: the mask is all true */
    rlx_node x = IN(0);
    NEED(x);
    int64_t dims[RLX_MAX_RANK], ones[RLX_MAX_RANK];
    int r = rlx_node_type(im->g, x, NULL, dims);
    for (int i = 0; i < r; i++) ones[i] = 1;
    rlx_node t = rlx_reshape(im->g, ox_scalar(im, RLX_BOOL, 1), r, ones);
    rlx_status st = ox_set_out(im, n, 1, rlx_expand(im->g, t, r, dims));
    if (st) return st;
    v = ox_in_value(im, n, 0);   /* the table may have moved */
  }
  if (n->n_outputs < 1 || !n->outputs[0][0]) return RLX_OK;
  ox_value copy = *v;
  rlx_status st = v->known ? ox_set_out_known(im, n, 0, v->dtype, v->rank, v->dims, v->ints, v->reals)
                           : ox_set_out(im, n, 0, v->node);
  if (!st) ox_lookup(im, n->outputs[0])->node = copy.node;
  return st;
}

rlx_status ox_op_activation(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node x = IN(0);
  NEED(x);
  rlx_dtype xt = RLX_F32;
  rlx_node_type(g, x, &xt, NULL);
  if (xt == RLX_F16 || xt == RLX_BF16) x = rlx_cast(g, x, RLX_F32);   /* one rounding at the end, as the reference */
#define K(v) ox_scalar_like(im, x, (v))
  double alpha = ox_attr_float(n, "alpha", NAN);
  rlx_node r;
  if (is(n, "LeakyRelu")) r = rlx_leaky_relu(g, x, isnan(alpha) ? 0.01 : alpha);
  else if (is(n, "Elu") || is(n, "Celu") || is(n, "Selu")) {
    double a = isnan(alpha) ? (is(n, "Selu") ? 1.67326319217681884765625 : 1.0) : alpha;
    /* Celu: max(0,x) + min(0, a*(exp(x/a)-1)); Elu: x>0 ? x : a*(exp(x)-1) */
    rlx_node xs = is(n, "Celu") ? rlx_div(g, x, K(a)) : x;
    rlx_node neg = rlx_mul(g, K(a), rlx_sub(g, rlx_activation(g, RLX_ACT_EXP, xs), K(1)));
    r = rlx_where(g, rlx_compare(g, RLX_CMP_GT, x, K(0)), x, neg);
    if (is(n, "Selu")) r = rlx_mul(g, r, K(ox_attr_float(n, "gamma", 1.05070102214813232421875)));
  } else if (is(n, "HardSigmoid")) {
    double a = isnan(alpha) ? 0.2 : alpha, b = ox_attr_float(n, "beta", 0.5);
    r = rlx_clamp(g, rlx_add(g, rlx_mul(g, x, K(a)), K(b)), 0, 1);
  } else if (is(n, "HardSwish")) {
    r = rlx_mul(g, x, rlx_clamp(g, rlx_add(g, rlx_mul(g, x, K(1.0 / 6)), K(0.5)), 0, 1));
  } else if (is(n, "Softsign")) {
    r = rlx_div(g, x, rlx_add(g, rlx_activation(g, RLX_ACT_ABS, x), K(1)));
  } else if (is(n, "ThresholdedRelu")) {
    r = rlx_where(g, rlx_compare(g, RLX_CMP_GT, x, K(isnan(alpha) ? 1.0 : alpha)), x, K(0));
  } else if (is(n, "Mish")) {
    r = rlx_mul(g, x, rlx_activation(g, RLX_ACT_TANH, rlx_activation(g, RLX_ACT_SOFTPLUS, x)));
  } else {  /* Gelu */
    const char *approx = ox_attr_str(n, "approximate", "none");
    r = rlx_activation(g, !strcmp(approx, "tanh") ? RLX_ACT_GELU_TANH : RLX_ACT_GELU, x);
  }
#undef K
  return ox_set_out(im, n, 0, xt == RLX_F16 || xt == RLX_BF16 ? rlx_cast(g, r, xt) : r);
}

rlx_status ox_op_prelu(ox_importer *im, const ox_node *n) {
  rlx_node x = IN(0);
  NEED(x);
  rlx_node s = IN(1);
  NEED(s);
  rlx_node neg = rlx_mul(im->g, x, s);
  rlx_node r = rlx_where(im->g, rlx_compare(im->g, RLX_CMP_LT, x, ox_scalar_like(im, x, 0)), neg, x);
  return ox_set_out(im, n, 0, r);
}

/* atan(x) in F64: |x| > 1 through pi/2 - atan(1/|x|), then the half
 * angle atan(t) = 2 atan(t / (1 + sqrt(1 + t^2))) leaves t <= tan(pi/8),
 * where the odd Taylor series to t^17 is within 3e-9 (relative). */
static rlx_node atan_f64(ox_importer *im, rlx_node x) {
  rlx_graph *g = im->g;
#define K(v) ox_scalar(im, RLX_F64, (v))
  rlx_node a = rlx_activation(g, RLX_ACT_ABS, x), big = rlx_compare(g, RLX_CMP_GT, a, K(1));
  rlx_node t = rlx_where(g, big, rlx_activation(g, RLX_ACT_RECIPROCAL, a), a);
  t = rlx_div(g, t, rlx_add(g, K(1), rlx_activation(g, RLX_ACT_SQRT, rlx_add(g, K(1), rlx_mul(g, t, t)))));
  rlx_node t2 = rlx_mul(g, t, t), p = K(1.0 / 17);
  for (int k = 15; k >= 1; k -= 2) p = rlx_add(g, rlx_mul(g, p, t2), K((k % 4 == 1 ? 1.0 : -1.0) / k));
  rlx_node r = rlx_mul(g, K(2), rlx_mul(g, p, t));
  r = rlx_where(g, big, rlx_sub(g, K(1.5707963267948966), r), r);
  return rlx_where(g, rlx_compare(g, RLX_CMP_LT, x, K(0)), rlx_activation(g, RLX_ACT_NEG, r), r);
}

/* Acos, Asin, Atan, Acosh, Asinh, Atanh from atan, log and sqrt, in F64. */
static rlx_node inverse_trig(ox_importer *im, const ox_node *n, rlx_node x) {
  rlx_graph *g = im->g;
  rlx_dtype t;
  rlx_node_type(g, x, &t, NULL);
  x = rlx_cast(g, x, RLX_F64);
  rlx_node one = K(1), r, sq = rlx_mul(g, x, x);
  if (is(n, "Atan")) r = atan_f64(im, x);
  else if (is(n, "Asin")) r = atan_f64(im, rlx_div(g, x, rlx_activation(g, RLX_ACT_SQRT, rlx_sub(g, one, sq))));
  else if (is(n, "Acos"))   /* 2 atan(sqrt((1 - x) / (1 + x))): no cancellation near 1 */
    r = rlx_mul(g, K(2), atan_f64(im, rlx_activation(g, RLX_ACT_SQRT, rlx_div(g, rlx_sub(g, one, x), rlx_add(g, one, x)))));
  else if (is(n, "Asinh")) {
    rlx_node a = rlx_activation(g, RLX_ACT_ABS, x);
    r = rlx_activation(g, RLX_ACT_LOG, rlx_add(g, a, rlx_activation(g, RLX_ACT_SQRT, rlx_add(g, sq, one))));
    r = rlx_where(g, rlx_compare(g, RLX_CMP_LT, x, K(0)), rlx_activation(g, RLX_ACT_NEG, r), r);
  } else if (is(n, "Acosh")) {
    r = rlx_activation(g, RLX_ACT_LOG, rlx_add(g, x, rlx_activation(g, RLX_ACT_SQRT, rlx_sub(g, sq, one))));
  } else {   /* Atanh */
    r = rlx_mul(g, K(0.5), rlx_activation(g, RLX_ACT_LOG, rlx_div(g, rlx_add(g, one, x), rlx_sub(g, one, x))));
  }
#undef K
  return rlx_cast(g, r, t);
}

/* Ops rlx has no activation for, built from others. */
rlx_status ox_op_composite(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node x = IN(0);
  NEED(x);
  rlx_node r;
  if (n->op_type[0] == 'A') r = inverse_trig(im, n, x);
  else if (is(n, "Floor")) r = rlx_sub(g, x, rlx_mod(g, x, ox_scalar_like(im, x, 1)));   /* mod has the divisor's sign */
  else if (is(n, "Ceil")) {
    rlx_node nx = rlx_activation(g, RLX_ACT_NEG, x);
    r = rlx_activation(g, RLX_ACT_NEG, rlx_sub(g, nx, rlx_mod(g, nx, ox_scalar_like(im, x, 1))));
  } else if (is(n, "Tan")) r = rlx_div(g, rlx_activation(g, RLX_ACT_SIN, x), rlx_activation(g, RLX_ACT_COS, x));
  else if (is(n, "IsNaN")) r = rlx_compare(g, RLX_CMP_NE, x, x);
  else {   /* Sinh, Cosh: (e^x -+ e^-x) / 2 */
    rlx_node e = rlx_activation(g, RLX_ACT_EXP, x), em = rlx_activation(g, RLX_ACT_EXP, rlx_activation(g, RLX_ACT_NEG, x));
    r = rlx_mul(g, is(n, "Sinh") ? rlx_sub(g, e, em) : rlx_add(g, e, em), ox_scalar_like(im, x, 0.5));
  }
  return ox_set_out(im, n, 0, r);
}

rlx_status ox_op_trilu(ox_importer *im, const ox_node *n) {
  rlx_node x = IN(0);
  NEED(x);
  int64_t k = 0, cnt;
  if (ox_has_in(n, 1)) {
    const int64_t *kv = ox_in_ints(im, n, 1, &cnt);
    if (!kv || cnt != 1) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "k not known at import");
    if (ox_ints_sym(im, kv, 1)) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "k " OX_SYM_HINT);
    k = kv[0];
  }
  return ox_set_out(im, n, 0, rlx_tri(im->g, x, (int)ox_attr_int(n, "upper", 1), k));
}
