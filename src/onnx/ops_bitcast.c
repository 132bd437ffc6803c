/* ops_bitcast.c — BitCast between types of one size, by arithmetic on the
 * bit pattern: an integer's pattern is its value mod 2^w; a float's is its
 * sign, exponent and mantissa fields, found exactly in F64 (the exponent by
 * log2 corrected against exact powers of two) and assembled back the same
 * way (a NaN becomes the quiet NaN). 64-bit patterns are held as I64 (the
 * top bit as the sign). */
#include "onnx.h"

#include <math.h>
#include <string.h>

typedef struct { int bits, ebits, mbits, bias; } float_bits;

static int float_layout(rlx_dtype t, float_bits *f) {
  if (t == RLX_F32) *f = (float_bits){32, 8, 23, 127};
  else if (t == RLX_F64) *f = (float_bits){64, 11, 52, 1023};
  else if (t == RLX_F16) *f = (float_bits){16, 5, 10, 15};
  else if (t == RLX_BF16) *f = (float_bits){16, 8, 7, 127};
  else return 0;
  return 1;
}

#define KD(v) ox_scalar(im, RLX_F64, (v))
#define KI(v) ox_scalar(im, RLX_I64, (v))

/* 2^e for an integer-valued F64 e (exact). */
static rlx_node exp2_f64(ox_importer *im, rlx_node e) { return rlx_pow(im->g, KD(2), e); }

/* The fields of float x as I64: sign (0/1), exponent, mantissa. */
static void float_fields(ox_importer *im, rlx_node x, const float_bits *f, rlx_node *sign, rlx_node *ef, rlx_node *mf) {
  rlx_graph *g = im->g;
  rlx_node xd = rlx_cast(g, x, RLX_F64), a = rlx_activation(g, RLX_ACT_ABS, xd), zero = KD(0);
  rlx_node neg = rlx_where(g, rlx_compare(g, RLX_CMP_EQ, xd, zero),
                           rlx_compare(g, RLX_CMP_LT, rlx_activation(g, RLX_ACT_RECIPROCAL, xd), zero),   /* -0 */
                           rlx_compare(g, RLX_CMP_LT, xd, zero));
  double emin = 1 - f->bias, emax = (double)((1 << f->ebits) - 1), scale = (double)((int64_t)1 << f->mbits);
  rlx_node e = rlx_activation(g, RLX_ACT_ROUND, rlx_div(g, rlx_activation(g, RLX_ACT_LOG, a), KD(0.69314718055994530942)));
  e = rlx_where(g, rlx_compare(g, RLX_CMP_GT, exp2_f64(im, e), a), rlx_sub(g, e, KD(1)), e);
  e = rlx_where(g, rlx_compare(g, RLX_CMP_LE, exp2_f64(im, rlx_add(g, e, KD(1))), a), rlx_add(g, e, KD(1)), e);
  rlx_node sub = rlx_compare(g, RLX_CMP_LT, e, KD(emin));
  rlx_node es = rlx_where(g, sub, zero, rlx_add(g, e, KD((double)f->bias)));
  rlx_node ms = rlx_where(g, sub, rlx_div(g, a, exp2_f64(im, KD(emin - f->mbits))),
                          rlx_mul(g, rlx_sub(g, rlx_div(g, a, exp2_f64(im, rlx_where(g, sub, zero, e))), KD(1)), KD(scale)));
  rlx_node special = rlx_compare(g, RLX_CMP_NE, a, a), inf = rlx_compare(g, RLX_CMP_EQ, a, KD(1.0 / 0.0));
  es = rlx_where(g, rlx_compare(g, RLX_CMP_EQ, a, zero), zero, rlx_where(g, rlx_where(g, special, special, inf), KD(emax), es));
  ms = rlx_where(g, rlx_compare(g, RLX_CMP_EQ, a, zero), zero,
                 rlx_where(g, special, KD(scale / 2), rlx_where(g, inf, zero, ms)));   /* NaN: the quiet bit */
  *sign = rlx_cast(g, neg, RLX_I64);
  *ef = rlx_cast(g, es, RLX_I64);
  *mf = rlx_cast(g, ms, RLX_I64);
}

/* Float of dtype t from I64 fields. */
static rlx_node float_of_fields(ox_importer *im, rlx_node sign, rlx_node ef, rlx_node mf, const float_bits *f, rlx_dtype t) {
  rlx_graph *g = im->g;
  double emax = (double)((1 << f->ebits) - 1), scale = (double)((int64_t)1 << f->mbits);
  rlx_node e = rlx_cast(g, ef, RLX_F64), m = rlx_cast(g, mf, RLX_F64), zero = KD(0);
  rlx_node normal = rlx_mul(g, rlx_add(g, KD(1), rlx_div(g, m, KD(scale))), exp2_f64(im, rlx_sub(g, e, KD((double)f->bias))));
  rlx_node subn = rlx_mul(g, m, exp2_f64(im, KD((double)(1 - f->bias - f->mbits))));
  rlx_node top = rlx_where(g, rlx_compare(g, RLX_CMP_EQ, m, zero), KD(1.0 / 0.0), KD(0.0 / 0.0));
  rlx_node v = rlx_where(g, rlx_compare(g, RLX_CMP_EQ, e, zero), subn, rlx_where(g, rlx_compare(g, RLX_CMP_EQ, e, KD(emax)), top, normal));
  v = rlx_where(g, rlx_compare(g, RLX_CMP_NE, sign, KI(0)), rlx_activation(g, RLX_ACT_NEG, v), v);
  return rlx_cast(g, v, t);
}

rlx_status ox_op_bitcast(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node x = IN(0);
  NEED(x);
  rlx_dtype ti, to;
  rlx_node_type(g, x, &ti, NULL);
  int32_t ot = (int32_t)ox_attr_int(n, "to", 0);
  int tr = ox_rlx_dtype(ot);
  if (tr < 0 || ox_is_narrow(ot) || ox_in_value(im, n, 0)->onnx_type)
    return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a BitCast to or from %s", ox_dtype_name(tr < 0 || ox_is_narrow(ot) ? ot : ox_value_type(ox_in_value(im, n, 0))));
  to = (rlx_dtype)tr;
  int w = 8 * (int)rlx_dtype_nbytes(ti, 1);
  if (rlx_dtype_is_block(ti) || w != 8 * (int)rlx_dtype_nbytes(to, 1) || ti == RLX_U64 || to == RLX_U64)
    return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a BitCast from %s to %s", rlx_dtype_name(ti), rlx_dtype_name(to));
  if (ti == to) return ox_set_out(im, n, 0, x);
  float_bits fi, fo;
  int in_float = float_layout(ti, &fi), out_float = float_layout(to, &fo);
  /* the pattern p: as I64, mod 2^w (w < 64), or the I64 of the same bits (w = 64) */
  rlx_node p, half = w < 64 ? KI((double)((int64_t)1 << (w - 1))) : -1;
  if (in_float) {
    rlx_node s, e, m;
    float_fields(im, x, &fi, &s, &e, &m);
    rlx_node low = rlx_add(g, rlx_mul(g, e, KI((double)((int64_t)1 << fi.mbits))), m);
    p = w < 64 ? rlx_add(g, low, rlx_mul(g, s, half)) : rlx_where(g, rlx_compare(g, RLX_CMP_NE, s, KI(0)), rlx_add(g, low, KI(-9223372036854775808.0)), low);
  } else {
    p = rlx_cast(g, x, RLX_I64);
    if (w < 64) p = rlx_where(g, rlx_compare(g, RLX_CMP_LT, p, KI(0)), rlx_add(g, p, KI(ldexp(1, w))), p);
  }
  rlx_node y;
  if (out_float) {
    rlx_node s = w < 64 ? rlx_cast(g, rlx_compare(g, RLX_CMP_GE, p, half), RLX_I64) : rlx_cast(g, rlx_compare(g, RLX_CMP_LT, p, KI(0)), RLX_I64);
    rlx_node low = w < 64 ? rlx_sub(g, p, rlx_mul(g, s, half))
                          : rlx_where(g, rlx_compare(g, RLX_CMP_NE, s, KI(0)), rlx_sub(g, p, KI(-9223372036854775808.0)), p);
    rlx_node m1 = KI((double)((int64_t)1 << fo.mbits));
    y = float_of_fields(im, s, rlx_div(g, low, m1), rlx_mod(g, low, m1), &fo, to);
  } else {
    int is_signed = to == RLX_I8 || to == RLX_I16 || to == RLX_I32 || to == RLX_I64;
    if (is_signed && w < 64) p = rlx_where(g, rlx_compare(g, RLX_CMP_GE, p, half), rlx_sub(g, p, KI(ldexp(1, w))), p);
    y = to == RLX_BOOL ? rlx_compare(g, RLX_CMP_NE, p, KI(0)) : rlx_cast(g, p, to);
  }
  return ox_set_out(im, n, 0, y);
}
