/* k_elementwise.c — CPU kernels of Activation, Binary, Compare, Where, Cast,
 * Clamp, and the scalar math they share with fused elementwise kernels
 * (elementwise_math.h).
 *
 * Activation, Binary and Compare on F32/F16/BF16 (and Binary / Compare on
 * BOOL) run as one-step chains of chain_eval.h: vectorized in f32, blocked,
 * threaded, broadcast operands read in place. Where is threaded over rows;
 * Cast among F32, F16 and BF16 runs through vec.h's load / store, threaded.
 * The rest (F64, integers, other Casts, Clamp) is the reference: floats
 * computed in double and rounded once on store; integers in int64 (wrapping
 * through uint64, never signed overflow) and wrapped to the dtype width on
 * store. Broadcast operands are read through stride-0 strides.
 */
#include "cpu.h"
#include "bcast_walk.h"
#include "chain_eval.h"
#include "elementwise_math.h"
#include "vec.h"

#include <math.h>
#include <string.h>

/* ---------------------------------------------------------------- scalar math */

static const double SQRT1_2 = 0.70710678118654752440;       /* 1/sqrt(2) */
static const double SQRT_2_OVER_PI = 0.79788456080286535588; /* sqrt(2/pi) */

/* Two's-complement reinterpretation of u without implementation-defined
 * conversion of out-of-range values. */
static int64_t wrap_i64(uint64_t u) {
  return u <= (uint64_t)INT64_MAX ? (int64_t)u : -(int64_t)(~u) - 1;
}

/* Stable in both tails: exp never overflows. */
static double sigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + exp(-x));
  double e = exp(x);
  return e / (1.0 + e);
}

double cpu_act_apply(rlx_act act, double x, double alpha) {
  switch (act) {
  /* x (1 + erf(x/sqrt2)) / 2 and x (1 + tanh u) / 2, written so that the
   * negative tail does not cancel: 1 + erf(-a) = erfc(a), 1 + tanh u =
   * 2 / (1 + e^{-2u}) */
  case RLX_ACT_GELU: return 0.5 * x * erfc(-x * SQRT1_2);
  case RLX_ACT_GELU_TANH: return x / (1.0 + exp(-2.0 * SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)));
  case RLX_ACT_SILU: return x * sigmoid(x);
  case RLX_ACT_RELU: return x < 0 ? 0.0 : x; /* NaN passes through */
  case RLX_ACT_LEAKY_RELU: return x < 0 ? alpha * x : x;
  case RLX_ACT_SIGMOID: return sigmoid(x);
  case RLX_ACT_TANH: return tanh(x);
  case RLX_ACT_EXP: return exp(x);
  case RLX_ACT_LOG: return log(x);
  case RLX_ACT_SQRT: return sqrt(x);
  case RLX_ACT_RSQRT: return 1.0 / sqrt(x);
  case RLX_ACT_NEG: return -x;
  case RLX_ACT_ABS: return fabs(x);
  case RLX_ACT_SIN: return sin(x);
  case RLX_ACT_COS: return cos(x);
  case RLX_ACT_ERF: return erf(x);
  case RLX_ACT_SOFTPLUS: return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
  case RLX_ACT_ROUND: return nearbyint(x); /* default rounding mode: half to even */
  case RLX_ACT_SIGN: return x > 0 ? 1.0 : x < 0 ? -1.0 : x; /* keeps 0, -0, NaN */
  case RLX_ACT_RECIPROCAL: return 1.0 / x;
  case RLX_ACT_SQUARE: return x * x;
  case RLX_ACT_NONE:
  case RLX_ACT_COUNT: break;
  }
  return x;
}

int64_t cpu_act_apply_i(rlx_act act, int64_t x) {
  uint64_t u = (uint64_t)x;
  switch (act) {
  case RLX_ACT_NEG: return wrap_i64(0 - u);
  case RLX_ACT_ABS: return x < 0 ? wrap_i64(0 - u) : x;
  case RLX_ACT_SIGN: return (x > 0) - (x < 0);
  case RLX_ACT_SQUARE: return wrap_i64(u * u);
  case RLX_ACT_RELU: return x < 0 ? 0 : x;
  default: return x;
  }
}

/* numpy.mod: the remainder takes the divisor's sign (zero too). */
static double mod_f(double a, double b) {
  double r = fmod(a, b);
  if (b == 0) return r; /* NaN */
  if (r == 0) return copysign(0.0, b);
  return (r < 0) != (b < 0) ? r + b : r;
}

double cpu_binop_apply_f(rlx_binop op, double a, double b) {
  switch (op) {
  case RLX_BIN_ADD: return a + b;
  case RLX_BIN_SUB: return a - b;
  case RLX_BIN_MUL: return a * b;
  case RLX_BIN_DIV: return a / b;
  case RLX_BIN_POW: return pow(a, b);
  case RLX_BIN_MAX: return isnan(a) || isnan(b) ? a + b : a > b ? a : b;
  case RLX_BIN_MIN: return isnan(a) || isnan(b) ? a + b : a < b ? a : b;
  case RLX_BIN_MOD: return mod_f(a, b);
  case RLX_BIN_COUNT: break;
  }
  return NAN;
}

/* Floor division (numpy //); 0 for a zero divisor; x / -1 wraps. */
static int64_t floor_div_i(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return wrap_i64(0 - (uint64_t)a); /* INT64_MIN / -1 overflows */
  int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* Remainder of floor division (numpy %): the divisor's sign; 0 for b = 0. */
static int64_t floor_mod_i(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0; /* INT64_MIN % -1 overflows */
  int64_t r = a % b;
  return (r != 0 && (r < 0) != (b < 0)) ? r + b : r;
}

static int64_t pow_i(int64_t base, int64_t e) {
  if (e < 0) return base == 1 ? 1 : base == -1 ? (e % 2 ? -1 : 1) : 0;
  uint64_t r = 1, x = (uint64_t)base;
  for (; e > 0; e /= 2) {
    if (e % 2) r *= x;
    x *= x;
  }
  return wrap_i64(r);
}

int64_t cpu_binop_apply_i(rlx_binop op, int64_t a, int64_t b) {
  switch (op) {
  case RLX_BIN_ADD: return wrap_i64((uint64_t)a + (uint64_t)b);
  case RLX_BIN_SUB: return wrap_i64((uint64_t)a - (uint64_t)b);
  case RLX_BIN_MUL: return wrap_i64((uint64_t)a * (uint64_t)b);
  case RLX_BIN_DIV: return floor_div_i(a, b);
  case RLX_BIN_POW: return pow_i(a, b);
  case RLX_BIN_MAX: return a > b ? a : b;
  case RLX_BIN_MIN: return a < b ? a : b;
  case RLX_BIN_MOD: return floor_mod_i(a, b);
  case RLX_BIN_COUNT: break;
  }
  return 0;
}

/* One comparison body for doubles and int64. */
#define CMP_APPLY(op, a, b)               \
  switch (op) {                           \
  case RLX_CMP_EQ: return (a) == (b);     \
  case RLX_CMP_NE: return (a) != (b);     \
  case RLX_CMP_LT: return (a) < (b);      \
  case RLX_CMP_LE: return (a) <= (b);     \
  case RLX_CMP_GT: return (a) > (b);      \
  case RLX_CMP_GE: return (a) >= (b);     \
  case RLX_CMP_COUNT: break;              \
  }                                       \
  return 0

int cpu_cmp_apply(rlx_cmpop op, double a, double b) { CMP_APPLY(op, a, b); }
int cpu_cmp_apply_i(rlx_cmpop op, int64_t a, int64_t b) { CMP_APPLY(op, a, b); }

/* ---------------------------------------------------------------- kernels */

/* Runs the op as the one-step chain `step` over in[0..n_in) when the chain
 * evaluator takes its dtypes; *done says whether it did. */
static rlx_status run_as_chain(cpu_ctx *ctx, rlx_region_step step, const cpu_tensor *in, int n_in,
                               cpu_tensor *out, int *done) {
  ir_chain chain = {1, &step};
  const cpu_tensor *ins[2] = {&in[0], &in[n_in - 1]};
  cpu_chain c = {&chain, n_in, ins, 0};
  *done = cpu_chain_supported(&c, out->dtype);
  return *done ? cpu_chain_run(ctx, &c, out) : RLX_OK;
}

rlx_status cpu_Activation(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in,
                          cpu_tensor *out) {
  rlx_act act = (rlx_act)n->a.act;
  const cpu_tensor *x = &in[0];
  int done;
  rlx_status st = run_as_chain(ctx, (rlx_region_step){RLX_STEP_ACT, (int)act, 0, 0, RLX_F32, n->a.alpha},
                               in, 1, out, &done);
  if (st != RLX_OK || done) return st;
  if (ir_is_float(x->dtype)) {
    for (int64_t i = 0; i < out->numel; i++)
      cpu_set(out, i, cpu_act_apply(act, cpu_get(x, i), n->a.alpha));
  } else {
    for (int64_t i = 0; i < out->numel; i++) cpu_set_i(out, i, cpu_act_apply_i(act, cpu_get_i(x, i)));
  }
  return RLX_OK;
}

/* Binary and Compare (step.kind RLX_STEP_BIN or RLX_STEP_CMP, step.op the
 * binop or cmpop): out[i] = f(a[bcast i], b[bcast i]). */
static rlx_status pairwise(cpu_ctx *ctx, rlx_region_step step, const cpu_tensor *in, cpu_tensor *out) {
  int done;
  rlx_status st = run_as_chain(ctx, step, in, 2, out, &done);
  if (st != RLX_OK || done) return st;
  int64_t sa[RLX_MAX_RANK], sb[RLX_MAX_RANK];
  cpu_bcast_strides(&in[0], out->rank, out->d, sa);
  cpu_bcast_strides(&in[1], out->rank, out->d, sb);
  const int is_float = ir_is_float(in[0].dtype), is_cmp = step.kind == RLX_STEP_CMP;
  for (int64_t i = 0; i < out->numel; i++) {
    int64_t ia = cpu_offset(i, out->rank, out->d, sa), ib = cpu_offset(i, out->rank, out->d, sb);
    if (is_cmp)
      cpu_set_i(out, i, is_float ? cpu_cmp_apply((rlx_cmpop)step.op, cpu_get(&in[0], ia), cpu_get(&in[1], ib))
                                 : cpu_cmp_apply_i((rlx_cmpop)step.op, cpu_get_i(&in[0], ia), cpu_get_i(&in[1], ib)));
    else if (is_float)
      cpu_set(out, i, cpu_binop_apply_f((rlx_binop)step.op, cpu_get(&in[0], ia), cpu_get(&in[1], ib)));
    else
      cpu_set_i(out, i, cpu_binop_apply_i((rlx_binop)step.op, cpu_get_i(&in[0], ia), cpu_get_i(&in[1], ib)));
  }
  return RLX_OK;
}

rlx_status cpu_Binary(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  return pairwise(ctx, (rlx_region_step){RLX_STEP_BIN, (int)n->a.binop, 0, 1, RLX_F32, 0.0}, in, out);
}

rlx_status cpu_Compare(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  return pairwise(ctx, (rlx_region_step){RLX_STEP_CMP, (int)n->a.cmpop, 0, 1, RLX_F32, 0.0}, in, out);
}

/* Where over rows of the collapsed broadcast (bcast_walk.h), threaded.
 * Elements are copied as bytes: exact for every dtype (NaN payloads too).
 * The common 1-, 2-, 4- and 8-byte elements select through a mask, not a
 * branch: relu masks and causal masks are unpredictable per element. */
typedef struct {
  bcast_walk w;
  const uint8_t *c;
  const char *a, *b;
  char *y;
  size_t es;
  int64_t pieces;
} where_job;

#define WHERE_ROW(T)                                                                              \
  do {                                                                                             \
    const T *a_ = (const T *)(const void *)a, *b_ = (const T *)(const void *)b;                    \
    T *y_ = (T *)(void *)y;                                                                        \
    for (int64_t i = 0; i < len; i++) {                                                            \
      const T m = (T)0 - (T)(c[i * sc] != 0);                                                      \
      y_[i] = (T)((a_[i * sa] & m) | (b_[i * sb] & (T)~m));                                        \
    }                                                                                              \
  } while (0)

/* One 4-byte row with a per-element condition; called with constant
 * strides so that each (sa, sb) pattern compiles to its own vector loop. */
static inline void where_row4(const uint8_t *c, const uint32_t *a, int64_t sa, const uint32_t *b, int64_t sb,
                              uint32_t *y, int64_t len) {
  for (int64_t i = 0; i < len; i++) {
    const uint32_t m = 0u - (uint32_t)(c[i] != 0);
    y[i] = (a[i * sa] & m) | (b[i * sb] & ~m);
  }
}

/* Elements [0, len) of a row span: c, a, b at their row offsets, with
 * inner strides sc, sa, sb (0 or 1). */
static void where_span(const uint8_t *c, int64_t sc, const char *a, int64_t sa, const char *b, int64_t sb, char *y,
                       int64_t len, size_t es) {
  if (sc == 0) { /* one condition for the span: a copy of one side */
    const char *src = c[0] ? a : b;
    const int64_t ss = c[0] ? sa : sb;
    if (ss) {
      memcpy(y, src, (size_t)len * es);
    } else {
      for (int64_t i = 0; i < len; i++) memcpy(y + (size_t)i * es, src, es);
    }
    return;
  }
  if (es == 4) {
    const uint32_t *a4 = (const uint32_t *)(const void *)a, *b4 = (const uint32_t *)(const void *)b;
    uint32_t *y4 = (uint32_t *)(void *)y;
    if (sa && sb) where_row4(c, a4, 1, b4, 1, y4, len);
    else if (sa) where_row4(c, a4, 1, b4, 0, y4, len);
    else if (sb) where_row4(c, a4, 0, b4, 1, y4, len);
    else where_row4(c, a4, 0, b4, 0, y4, len);
    return;
  }
  switch (es) {
  case 1: WHERE_ROW(uint8_t); break;
  case 2: WHERE_ROW(uint16_t); break;
  case 8: WHERE_ROW(uint64_t); break;
  default:
    for (int64_t i = 0; i < len; i++)
      memcpy(y + (size_t)i * es, c[i * sc] ? a + (size_t)(i * sa) * es : b + (size_t)(i * sb) * es, es);
  }
}

/* Items are pieces of rows (pieces per row: J->pieces), so that one long
 * row (every operand contiguous or a scalar) still spreads over threads. */
static void where_rows(void *arg, int64_t begin, int64_t end, int thread) {
  (void)thread;
  const where_job *J = arg;
  const bcast_walk *w = &J->w;
  const int64_t len = w->len, sc = bcast_walk_inner(w, 0), sa = bcast_walk_inner(w, 1), sb = bcast_walk_inner(w, 2);
  const int64_t plen = (len + J->pieces - 1) / J->pieces;
  const size_t es = J->es;
  int64_t idx[RLX_MAX_RANK], off[BCAST_MAX_OPS];
  bcast_walk_seek(w, begin / J->pieces, idx, off);
  for (int64_t it = begin; it < end; it++) {
    const int64_t r = it / J->pieces, c0 = it % J->pieces * plen, n = len - c0 < plen ? len - c0 : plen;
    if (n > 0)
      where_span(J->c + off[0] + c0 * sc, sc, J->a + (size_t)(off[1] + c0 * sa) * es, sa,
                 J->b + (size_t)(off[2] + c0 * sb) * es, sb, J->y + (size_t)(r * len + c0) * es, n, es);
    if (it % J->pieces == J->pieces - 1) bcast_walk_next(w, idx, off);
  }
}
#undef WHERE_ROW

rlx_status cpu_Where(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  (void)n;
  if (out->numel == 0) return RLX_OK;
  const cpu_tensor *ops[3] = {&in[0], &in[1], &in[2]};
  where_job J = {.c = in[0].data, .a = in[1].data, .b = in[2].data, .y = out->data,
                 .es = (size_t)ir_dtypes[out->dtype].size};
  bcast_walk_init(&J.w, out, 3, ops);
  const int threads = cpu_ctx_threads(ctx);
  J.pieces = J.w.rows < threads && J.w.len >= 2 * CPU_VEC_MIN_CHUNK ? threads : 1;
  cpu_parallel_for(ctx, J.w.rows * J.pieces, cpu_vec_grain(J.w.len / J.pieces), where_rows, &J);
  return RLX_OK;
}

/* Value range of an integer dtype (U64: the part int64 holds). */
static void int_dtype_range(rlx_dtype t, int64_t *lo, int64_t *hi) {
  switch (t) {
  case RLX_I8: *lo = INT8_MIN, *hi = INT8_MAX; break;
  case RLX_U8: *lo = 0, *hi = UINT8_MAX; break;
  case RLX_I16: *lo = INT16_MIN, *hi = INT16_MAX; break;
  case RLX_U16: *lo = 0, *hi = UINT16_MAX; break;
  case RLX_I32: *lo = INT32_MIN, *hi = INT32_MAX; break;
  case RLX_U32: *lo = 0, *hi = UINT32_MAX; break;
  case RLX_U64: *lo = 0, *hi = INT64_MAX; break;
  default: *lo = INT64_MIN, *hi = INT64_MAX; break;
  }
}

/* An integral double v (or +-inf) saturated into [lo, hi]. */
static int64_t saturate_i(double v, int64_t lo, int64_t hi) {
  if (v <= (double)lo) return lo;
  if (v >= (double)hi) return hi; /* (double)INT64_MAX is 2^63 */
  return (int64_t)v;
}

/* Casts among F32, F16 and BF16 (not F32 -> F32) through vec.h's load and
 * store: F16C or integer rounding where the CPU has them, the IR's scalar
 * helpers otherwise; threaded. The results are those of the reference loop
 * below bit for bit: narrowing rounds to nearest even and makes a NaN
 * quiet (in every table), and a widened signalling NaN comes out quiet, as
 * the reference's pass through double and F16C's vcvtph2ps make it (the
 * portable load and the BF16 shift keep it signalling: quiet_nans). */
typedef struct {
  const void *x;
  void *y;
  rlx_dtype from, to;
  const cpu_vec_ops *vo;
} cast_job;

/* Elements per step of a widening cast: its f32 block stays in L1 between
 * the load and quiet_nans. */
enum { CAST_BLOCK = 2048 };

static int is_half_float(rlx_dtype t) { return t == RLX_F16 || t == RLX_BF16; }

/* Sets the quiet bit of every NaN in v. */
static void quiet_nans(float *v, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &v[i], sizeof u);
    u |= (uint32_t)((u & 0x7fffffffu) > 0x7f800000u) << 22;
    memcpy(&v[i], &u, sizeof u);
  }
}

static void cast_float_range(void *arg, int64_t begin, int64_t end, int thread) {
  (void)thread;
  const cast_job *J = arg;
  if (J->from == RLX_F32) {
    J->vo->store((uint16_t *)J->y + begin, J->to, (const float *)J->x + begin, end - begin);
    return;
  }
  const uint16_t *x = (const uint16_t *)J->x;
  float block[CAST_BLOCK];
  for (int64_t b = begin; b < end; b += CAST_BLOCK) {
    const int64_t len = end - b < CAST_BLOCK ? end - b : CAST_BLOCK;
    float *f = J->to == RLX_F32 ? (float *)J->y + b : block;
    J->vo->load(f, x + b, J->from, len);
    if (J->to == RLX_F32) quiet_nans(f, len);
    else J->vo->store((uint16_t *)J->y + b, J->to, f, len); /* store quiets NaNs itself */
  }
}

rlx_status cpu_Cast(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  (void)n;
  const cpu_tensor *x = &in[0];
  if ((is_half_float(x->dtype) && (out->dtype == RLX_F32 || is_half_float(out->dtype))) ||
      (x->dtype == RLX_F32 && is_half_float(out->dtype))) {
    cast_job J = {.x = x->data, .y = out->data, .from = x->dtype, .to = out->dtype, .vo = cpu_vec()};
    cpu_parallel_for(ctx, out->numel, cpu_vec_grain(1), cast_float_range, &J);
    return RLX_OK;
  }
  int from_float = ir_is_float(x->dtype), to_float = ir_is_float(out->dtype);
  for (int64_t i = 0; i < out->numel; i++) {
    if (from_float || to_float)
      cpu_set(out, i, cpu_get(x, i)); /* truncates + saturates ints, rounds halves once */
    else /* integer/bool -> integer/bool: exact, wrapping to the width (BOOL: != 0) */
      cpu_set_i(out, i, cpu_get_i(x, i));
  }
  return RLX_OK;
}

typedef struct {
  const float *x;
  float *y, lo, hi;
} clamp_job;

static void clamp_f32_range(void *arg, int64_t begin, int64_t end, int thread) {
  (void)thread;
  const clamp_job *J = arg;
  for (int64_t i = begin; i < end; i++) { /* selects, not fmaxf: NaN stays */
    float v = J->x[i];
    v = v < J->lo ? J->lo : v;
    J->y[i] = v > J->hi ? J->hi : v;
  }
}

rlx_status cpu_Clamp(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  const cpu_tensor *x = &in[0];
  double lo = n->a.lo, hi = n->a.hi;
  /* F32 with bounds that are floats (ReLU6 and the like): vectorized,
   * threaded; the same results as the double loop below */
  if (x->dtype == RLX_F32 && (double)(float)lo == lo && (double)(float)hi == hi) {
    clamp_job J = {x->data, out->data, (float)lo, (float)hi};
    cpu_parallel_for(ctx, out->numel, cpu_vec_grain(1), clamp_f32_range, &J);
    return RLX_OK;
  }
  if (ir_is_float(x->dtype)) {
    for (int64_t i = 0; i < out->numel; i++) {
      double v = cpu_get(x, i); /* comparisons with NaN are false: NaN stays */
      v = v < lo ? lo : v;
      cpu_set(out, i, v > hi ? hi : v);
    }
    return RLX_OK;
  }
  int64_t tmin, tmax;
  int_dtype_range(x->dtype, &tmin, &tmax);
  int64_t lo_i = saturate_i(ceil(lo), tmin, tmax), hi_i = saturate_i(floor(hi), tmin, tmax);
  for (int64_t i = 0; i < out->numel; i++) {
    int64_t v = cpu_get_i(x, i);
    v = v < lo_i ? lo_i : v;
    cpu_set_i(out, i, v > hi_i ? hi_i : v);
  }
  return RLX_OK;
}
