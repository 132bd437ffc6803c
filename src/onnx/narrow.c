/* narrow.c — ONNX's narrow types (float8 e4m3fn/e4m3fnuz/e5m2/e5m2fnuz/
 * e8m0, float4 e2m1, int4/uint4/int2/uint2), which rlx holds as U8, one
 * element a byte with its bit pattern in the low bits.
 *
 * Decoding is a Gather from a 256-entry F32 table of every byte's value.
 * Encoding a real value counts the rounding thresholds it reaches: the
 * magnitudes of a float format rise with their codes, so the code of |x|
 * is the number of thresholds t_k (between the values of codes k and k+1)
 * that |x| passes, found by a binary search of Gathers over the sorted
 * thresholds (8 steps, no temporary larger than x). Ties go to the even
 * code: t_k itself passes when k is odd. The last threshold leads past the
 * largest finite value: to the overflow code (NaN or infinity) unless the
 * cast saturates. */
#include "onnx.h"

#include <math.h>
#include <string.h>

/* A float format: exponent and mantissa bits, bias, and how it spells
 * what is not finite. */
enum { NAN_IEEE, NAN_FN, NAN_FNUZ, NAN_NONE, NAN_E8M0 };
typedef struct { int32_t type; int ebits, mbits, bias, nan; } float_format;

static const float_format formats[] = {
  {17, 4, 3, 7, NAN_FN},    /* float8e4m3fn: S.1111.111 is NaN, no infinity */
  {18, 4, 3, 8, NAN_FNUZ},  /* float8e4m3fnuz: 0x80 is NaN, no -0 */
  {19, 5, 2, 15, NAN_IEEE}, /* float8e5m2: IEEE infinities and NaNs */
  {20, 5, 2, 16, NAN_FNUZ}, /* float8e5m2fnuz */
  {23, 2, 1, 1, NAN_NONE},  /* float4e2m1: every code finite */
  {24, 8, 0, 127, NAN_E8M0},/* float8e8m0: 2^(code-127), 0xFF NaN, no sign */
};

static const float_format *format_of(int32_t type) {
  for (size_t i = 0; i < sizeof formats / sizeof *formats; i++)
    if (formats[i].type == type) return &formats[i];
  return NULL;
}

int ox_narrow_int_range(int32_t type, double *lo, double *hi) {
  switch (type) {
  case 21: *lo = 0; *hi = 15; return 4;   /* uint4 */
  case 22: *lo = -8; *hi = 7; return 4;   /* int4 */
  case 25: *lo = 0; *hi = 3; return 2;    /* uint2 */
  case 26: *lo = -2; *hi = 1; return 2;   /* int2 */
  default: return 0;
  }
}

static int sign_shift(const float_format *f) { return f->nan == NAN_E8M0 ? -1 : f->ebits + f->mbits; }

/* The value of a code (sign included). */
static double decode(const float_format *f, unsigned code) {
  if (f->nan == NAN_E8M0) return code == 0xFF ? NAN : ldexp(1.0, (int)code - 127);
  unsigned bits = (unsigned)(f->ebits + f->mbits), mag = code & ((1u << bits) - 1);
  unsigned e = mag >> f->mbits, m = mag & ((1u << f->mbits) - 1), emax = (1u << f->ebits) - 1;
  int neg = code >> bits & 1;
  if (f->nan == NAN_FNUZ && neg && mag == 0) return NAN;
  if (f->nan == NAN_FN && mag == (1u << bits) - 1) return NAN;
  if (f->nan == NAN_IEEE && e == emax) return m ? NAN : neg ? -INFINITY : INFINITY;
  double v = e ? ldexp(1.0 + ldexp(m, -f->mbits), (int)e - f->bias) : ldexp(m, 1 - f->bias - f->mbits);
  return neg ? -v : v;
}

/* The largest finite magnitude code. */
static unsigned max_code(const float_format *f) {
  unsigned all = (1u << (f->ebits + f->mbits)) - 1;
  switch (f->nan) {
  case NAN_IEEE: return (((1u << f->ebits) - 1) << f->mbits) - 1;
  case NAN_FN: return all - 1;
  case NAN_E8M0: return 254;
  default: return all;
  }
}

/* The value of each of the 256 bytes for type, as F32; -1 when the type
 * is not narrow. */
static int decode_table(int32_t type, float *tab) {
  const float_format *f = format_of(type);
  double lo, hi;
  int bits = ox_narrow_int_range(type, &lo, &hi);
  if (!f && !bits) return -1;
  for (unsigned b = 0; b < 256; b++) {
    if (f) {
      tab[b] = (float)decode(f, f->nan == NAN_E8M0 ? b : b & ((2u << sign_shift(f)) - 1));
    } else {
      unsigned v = b & ((1u << bits) - 1);
      tab[b] = (float)(lo < 0 && v >> (bits - 1) ? (double)v - (double)(1u << bits) : (double)v);
    }
  }
  return 0;
}

rlx_node ox_narrow_decode(ox_importer *im, rlx_node x, int32_t type) {
  float tab[256];
  if (decode_table(type, tab)) return -1;
  rlx_node t = rlx_constant(im->g, RLX_F32, 1, (int64_t[]){256}, tab);
  return rlx_gather(im->g, t, rlx_cast(im->g, x, RLX_I32), 0);
}

rlx_node ox_narrow_int_bytes(ox_importer *im, rlx_node q, int32_t type) {
  double lo, hi;
  int bits = ox_narrow_int_range(type, &lo, &hi);
  rlx_graph *g = im->g;
  q = rlx_cast(g, q, RLX_I32);
  rlx_node neg = rlx_compare(g, RLX_CMP_LT, q, ox_scalar(im, RLX_I32, 0));
  return rlx_cast(g, rlx_where(g, neg, rlx_add(g, q, ox_scalar(im, RLX_I32, (double)(1 << bits))), q), RLX_U8);
}

/* An integer type: truncated toward zero, out of range to 0 (as onnx's
 * reference casts do). */
static rlx_node encode_int(ox_importer *im, rlx_node x, int32_t type) {
  double lo, hi;
  ox_narrow_int_range(type, &lo, &hi);
  rlx_graph *g = im->g;
  rlx_node q = rlx_cast(g, rlx_cast(g, x, RLX_F64), RLX_I32), zero = ox_scalar(im, RLX_I32, 0);
  q = rlx_where(g, rlx_compare(g, RLX_CMP_LT, q, ox_scalar(im, RLX_I32, lo)), zero, q);
  q = rlx_where(g, rlx_compare(g, RLX_CMP_GT, q, ox_scalar(im, RLX_I32, hi)), zero, q);
  return ox_narrow_int_bytes(im, q, type);
}

/* The thresholds of a float format: |x| >= u[k] takes the code past k.
 * Returns their count (max code + 1); the rest up to 256 are NaN, which
 * nothing passes. */
static int thresholds(const float_format *f, const char *round_mode, float *u) {
  unsigned kmax = max_code(f);
  for (unsigned k = 0; k < 256; k++) u[k] = NAN;
  for (unsigned k = 0; k <= kmax; k++) {
    double v = decode(f, k);
    double next = k < kmax ? decode(f, k + 1) : f->nan == NAN_E8M0 ? 2 * v : 2 * v - decode(f, k - 1);
    if (f->nan == NAN_E8M0 && !strcmp(round_mode, "up")) u[k] = nextafterf((float)v, INFINITY);
    else if (f->nan == NAN_E8M0 && !strcmp(round_mode, "down")) u[k] = (float)next;
    else if (f->nan == NAN_E8M0) u[k] = (float)(1.5 * v);
    else u[k] = k & 1 ? (float)((v + next) / 2) : nextafterf((float)((v + next) / 2), INFINITY);
  }
  return (int)kmax + 1;
}

static rlx_node encode_float(ox_importer *im, rlx_node x, const float_format *f, int saturate, const char *round_mode) {
  rlx_graph *g = im->g;
  float u[256];
  int n = thresholds(f, round_mode, u);
  rlx_node xf = rlx_cast(g, x, RLX_F32), a = rlx_activation(g, RLX_ACT_ABS, xf);
  rlx_node table = rlx_constant(g, RLX_F32, 1, (int64_t[]){256}, u);
  /* binary search over the 256 entries: code = the number of thresholds a passes */
  rlx_node code = ox_scalar(im, RLX_I32, 0);
  for (int s = 128; s >= 1; s /= 2) {
    rlx_node probe = rlx_add(g, code, ox_scalar(im, RLX_I32, s - 1));
    rlx_node pass = rlx_compare(g, RLX_CMP_GE, a, rlx_gather(g, table, probe, 0));
    code = rlx_add(g, code, rlx_mul(g, rlx_cast(g, pass, RLX_I32), ox_scalar(im, RLX_I32, s)));
  }
  unsigned kmax = (unsigned)n - 1, nan_code = f->nan == NAN_FNUZ ? 0x80 : f->nan == NAN_E8M0 ? 0xFF : 0x7F;
  rlx_node zero = ox_scalar(im, RLX_I32, 0);
  if (saturate || f->nan == NAN_NONE) code = rlx_min(g, code, ox_scalar(im, RLX_I32, kmax));
  if (sign_shift(f) > 0) {
    /* the sign bit on negative nonzero codes (no -0: it compares equal to
     * 0, and is NaN in the fnuz formats, whose overflow 0x80 has no sign) */
    rlx_node sign = rlx_where(g, rlx_compare(g, RLX_CMP_LT, xf, ox_scalar(im, RLX_F32, 0)),
                              ox_scalar(im, RLX_I32, (double)(1u << sign_shift(f))), zero);
    sign = rlx_where(g, rlx_compare(g, RLX_CMP_EQ, code, zero), zero, sign);
    if (f->nan == NAN_FNUZ) sign = rlx_where(g, rlx_compare(g, RLX_CMP_GT, code, ox_scalar(im, RLX_I32, kmax)), zero, sign);
    code = rlx_add(g, code, sign);
  }
  if (f->nan != NAN_NONE)
    code = rlx_where(g, rlx_compare(g, RLX_CMP_NE, xf, xf), ox_scalar(im, RLX_I32, nan_code), code);
  return rlx_cast(g, code, RLX_U8);
}

rlx_node ox_narrow_encode(ox_importer *im, rlx_node x, int32_t type, int saturate, const char *round_mode) {
  const float_format *f = format_of(type);
  if (f) return encode_float(im, x, f, saturate, round_mode ? round_mode : "up");
  double lo, hi;
  return ox_narrow_int_range(type, &lo, &hi) ? encode_int(im, x, type) : -1;
}
