/* test_vec.c — the vector tables of the fast CPU kernels (vec.h) against
 * independent references: the activations against double-precision
 * formulas written here (the tail-accurate forms: x Phi(x) through erfc,
 * x / (1 + e^{-2u})), within a few f32 ulp; F16 / BF16 conversion bit for
 * bit against the IR's scalar conversion over every half and many floats;
 * reductions, softmax pieces and attention tiles against double loops.
 *
 * Every table that can run here is checked: the portable one always, the
 * AVX2 one when the CPU has AVX2/FMA/F16C, the AVX-512 one (which must also
 * match the AVX2 one bit for bit) when it has AVX-512. cpu_vec() must pick
 * the widest the CPU has and RLX_NO_AVX512 / RLX_NO_AVX2 allow (CTest runs
 * this all three ways).
 */
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/elementwise_math.h"
#include "backend/cpu/quant_blocks.h"
#include "backend/cpu/vec.h"
#include "check.h"
#include "rng.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

static double uniform(double lo, double hi) { return lo + (hi - lo) * rng_uniform(); }

static float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Error of got in f32 ulps of want; results below the normal range count
 * in units of the smallest subnormal's neighbourhood (1.2e-38 absolute is
 * noise there). NaN must match NaN, infinities exactly. */
static double ulps(float got, double want) {
  if (isnan(want)) return isnan(got) ? 0.0 : INFINITY;
  if (isinf(want) || isinf(got)) return (double)got == want ? 0.0 : INFINITY;
  if (fabs(want) < 1.2e-38 && fabs(got) < 1.2e-38) return 0.0;
  float w = (float)want;
  double u = fabs((double)nextafterf(w, INFINITY) - (double)w);
  return fabs((double)got - want) / u;
}

/* ---------------------------------------------------------------- references */

static double ref_gelu(double x) { return 0.5 * x * erfc(-x / sqrt(2.0)); }
static double ref_gelu_tanh(double x) {
  double u = 0.79788456080286535588 /* sqrt(2/pi) */ * (x + 0.044715 * x * x * x);
  return x / (1.0 + exp(-2.0 * u));
}
static double ref_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double ref_silu(double x) { return x / (1.0 + exp(-x)); }
static double ref_exp(double x) { return exp(x); }
static double ref_log(double x) { return log(x); }
static double ref_tanh(double x) { return tanh(x); }
static double ref_erf(double x) { return erf(x); }
static double ref_rsqrt(double x) { return 1.0 / sqrt(x); }

typedef struct {
  rlx_act act;
  double (*ref)(double);
  double lo, hi;   /* sweep range */
  double max_ulp;  /* allowed error */
} act_case;

/* The bounds hold for both tables; the portable one is within ~1 ulp. */
static const act_case ACT_CASES[] = {
    {RLX_ACT_EXP, ref_exp, -104.0, 88.7, 2},      {RLX_ACT_LOG, ref_log, 1e-37, 1e4, 2},
    {RLX_ACT_TANH, ref_tanh, -12.0, 12.0, 3},     {RLX_ACT_SIGMOID, ref_sigmoid, -80.0, 80.0, 4},
    {RLX_ACT_SILU, ref_silu, -80.0, 80.0, 4},     {RLX_ACT_ERF, ref_erf, -6.0, 6.0, 4},
    {RLX_ACT_GELU, ref_gelu, -13.0, 13.0, 10},
    /* the tanh form in f32 loses ~|2u| ulp to the rounding of u in the
     * negative tail (where the value is ~x e^{2u}): 2u ~ -20 at x = -6 */
    {RLX_ACT_GELU_TANH, ref_gelu_tanh, -6.0, 12.0, 64},
    {RLX_ACT_RSQRT, ref_rsqrt, 1e-30, 1e30, 2},
};

static void check_acts(const cpu_vec_ops *vo) {
  enum { N = 20011 }; /* not a multiple of 8: the tails too */
  float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
  for (size_t c = 0; c < sizeof ACT_CASES / sizeof ACT_CASES[0]; c++) {
    const act_case *ac = &ACT_CASES[c];
    double worst = 0.0, at = 0.0;
    for (int rep = 0; rep < 8; rep++) {
      for (int i = 0; i < N; i++) {
        /* a linear sweep, then log-spaced magnitudes for the wide ranges */
        double t = (i + rep / 8.0) / N;
        x[i] = (float)(ac->lo + (ac->hi - ac->lo) * t);
        if (rep % 2 && ac->lo > 0) x[i] = (float)exp(log(ac->lo) + (log(ac->hi) - log(ac->lo)) * t);
      }
      vo->act(ac->act, 0.0f, x, y, N);
      for (int i = 0; i < N; i++) {
        double e = ulps(y[i], ac->ref(x[i]));
        if (e > worst) worst = e, at = x[i];
      }
    }
    CHECK(worst <= ac->max_ulp, "%s act %d: %.2f ulp at x = %.9g", vo->name, ac->act, worst, at);
  }
  /* special values, as libm / the reference */
  const float sp[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -1e-40f, 1.0f, -1.0f};
  enum { NS = sizeof sp / sizeof sp[0] };
  const rlx_act acts[] = {RLX_ACT_EXP, RLX_ACT_LOG, RLX_ACT_TANH, RLX_ACT_SIGMOID, RLX_ACT_ERF, RLX_ACT_GELU,
                          RLX_ACT_GELU_TANH, RLX_ACT_RELU, RLX_ACT_SIGN, RLX_ACT_ABS, RLX_ACT_NEG,
                          RLX_ACT_ROUND, RLX_ACT_SQRT, RLX_ACT_RECIPROCAL, RLX_ACT_SQUARE, RLX_ACT_SILU};
  for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++) {
    float out[NS];
    vo->act(acts[a], 0.0f, sp, out, NS);
    for (int i = 0; i < NS; i++) {
      double want = cpu_act_apply(acts[a], sp[i], 0.0);
      /* the reference's naive tails: gelu(-inf) is NaN there, and 0 * inf */
      int same = isnan(want) ? isnan(out[i]) : (out[i] == (float)want || ulps(out[i], want) <= 8);
      if (acts[a] == RLX_ACT_SIGN || acts[a] == RLX_ACT_RELU || acts[a] == RLX_ACT_NEG || acts[a] == RLX_ACT_ABS)
        same = same && signbit(out[i]) == signbit((float)want); /* -0 kept */
      CHECK(same, "%s act %d of %g: got %g want %g", vo->name, acts[a], sp[i], out[i], want);
    }
  }
  /* leaky_relu's slope, and round's ties to even */
  const float lx[] = {-2.0f, 3.0f, -0.5f, 2.5f, -2.5f, 0.5f, 1.5f};
  float ly[7];
  vo->act(RLX_ACT_LEAKY_RELU, 0.25f, lx, ly, 7);
  CHECK(ly[0] == -0.5f && ly[1] == 3.0f && ly[2] == -0.125f, "%s leaky_relu: %g %g %g", vo->name, ly[0], ly[1], ly[2]);
  vo->act(RLX_ACT_ROUND, 0.0f, lx, ly, 7);
  CHECK(ly[3] == 2.0f && ly[4] == -2.0f && ly[5] == 0.0f && ly[6] == 2.0f, "%s round: %g %g %g %g", vo->name,
        ly[3], ly[4], ly[5], ly[6]);
  free(x);
  free(y);
}

/* ---------------------------------------------------------------- conversion */

static void check_conversion(const cpu_vec_ops *vo) {
  enum { N = 65536 };
  uint16_t *h = malloc(N * sizeof *h), *h2 = malloc(N * sizeof *h2);
  float *f = malloc(N * sizeof *f), *g = malloc(N * sizeof *g);
  for (int t = 0; t < 2; t++) {
    rlx_dtype dt = t ? RLX_BF16 : RLX_F16;
    for (int i = 0; i < N; i++) h[i] = (uint16_t)i;
    vo->load(f, h, dt, N);
    int bad = 0;
    for (int i = 0; i < N && !bad; i++) {
      float want = t ? ir_bf16_to_f32(h[i]) : ir_f16_to_f32(h[i]);
      bad = isnan(want) ? !isnan(f[i]) : memcmp(&want, &f[i], sizeof want) != 0;
      if (bad) CHECK(0, "%s load %s of 0x%04x: got %g want %g", vo->name, t ? "bf16" : "f16", i, f[i], want);
    }
    /* store: every half read back, its neighbourhood (ties, carries into the
     * exponent, the subnormal edge, overflow), and random floats */
    for (int i = 0; i < N; i++) {
      uint32_t u;
      memcpy(&u, &f[i], sizeof u);
      switch (i % 4) {
      case 0: g[i] = f[i]; break;
      case 1: g[i] = bits_f32(u + (t ? 0x8000u : 0x1000u)); break; /* a tie */
      case 2: g[i] = bits_f32(u + (t ? 0x7fffu : 0x0fffu)); break;
      default: g[i] = bits_f32(rng_next() ^ (rng_next() << 16)); break;
      }
    }
    g[0] = 65519.0f, g[1] = 65520.0f, g[2] = 5.96e-8f, g[3] = 2.98e-8f, g[4] = 3.4e38f, g[5] = -1e-45f;
    vo->store(h2, dt, g, N);
    bad = 0;
    for (int i = 0; i < N && !bad; i++) {
      uint16_t want = t ? ir_f32_to_bf16(g[i]) : ir_f32_to_f16(g[i]);
      float wf = t ? ir_bf16_to_f32(want) : ir_f16_to_f32(want), gf = t ? ir_bf16_to_f32(h2[i]) : ir_f16_to_f32(h2[i]);
      bad = isnan(wf) ? !isnan(gf) : want != h2[i];
      if (bad) CHECK(0, "%s store %s of %.9g: got 0x%04x want 0x%04x", vo->name, t ? "bf16" : "f16", g[i], h2[i], want);
    }
    /* round = store + load */
    memcpy(f, g, N * sizeof *f);
    vo->round(f, dt, N);
    bad = 0;
    for (int i = 0; i < N && !bad; i++) {
      float want = t ? ir_bf16_to_f32(ir_f32_to_bf16(g[i])) : ir_f16_to_f32(ir_f32_to_f16(g[i]));
      bad = isnan(want) ? !isnan(f[i]) : want != f[i];
      if (bad) CHECK(0, "%s round %s of %.9g: got %g want %g", vo->name, t ? "bf16" : "f16", g[i], f[i], want);
    }
    CHECK(!bad, "%s %s conversions", vo->name, t ? "bf16" : "f16");
  }
  /* Q8_0 and Q4_0 rows (a quantized KV cache): random blocks, scales of
   * every kind (subnormal, inf, NaN), decoded as quant_blocks.c does */
  for (int t = 0; t < 2; t++) {
    const rlx_dtype dt = t ? RLX_Q4_0 : RLX_Q8_0;
    const int64_t n = 32 * 257;
    unsigned char *b = (unsigned char *)h;
    for (size_t i = 0; i < rlx_dtype_nbytes(dt, n); i++) b[i] = (unsigned char)rng_next();
    vo->load(f, b, dt, n);
    quant_dequantize_row(dt, b, g, n);
    int bad = 0;
    for (int64_t i = 0; i < n && !bad; i++) bad = isnan(g[i]) ? !isnan(f[i]) : memcmp(&g[i], &f[i], sizeof *f) != 0;
    CHECK(!bad, "%s load %s: a value differs from quant_dequantize_row's", vo->name, rlx_dtype_name(dt));
  }
  free(h);
  free(h2);
  free(f);
  free(g);
}

/* ---------------------------------------------------------------- rows */

static void check_rows(const cpu_vec_ops *vo) {
  enum { N = 1237 };
  float x[N], y[N], acc[N];
  double accd[N];
  for (int i = 0; i < N; i++) x[i] = (float)uniform(-3.0, 5.0);
  double s = 0, q = 0, mx = -INFINITY, mn = INFINITY;
  for (int i = 0; i < N; i++) {
    s += x[i];
    q += ((double)x[i] - 1.25) * ((double)x[i] - 1.25);
    mx = fmax(mx, x[i]);
    mn = fmin(mn, x[i]);
  }
  double abs_sum = 0;
  for (int i = 0; i < N; i++) abs_sum += fabs(x[i]);
  CHECK(fabs(vo->sum(x, N) - s) < 1e-6 * abs_sum, "%s sum", vo->name);
  /* a long row: a plain f32 running sum of 2^21 values near 1 is off by
   * ~1e-2 relative; blocked f32 lanes with a double total are not */
  enum { LONG = 1 << 21 };
  float *big = malloc(LONG * sizeof *big);
  double big_sum = 0;
  for (int i = 0; i < LONG; i++) big_sum += big[i] = 1.0f + (float)uniform(0.0, 1e-3);
  CHECK(fabs(vo->sum(big, LONG) - big_sum) < 1e-7 * big_sum, "%s long sum: %.17g vs %.17g", vo->name,
        vo->sum(big, LONG), big_sum);
  double big_sq = 0;
  for (int i = 0; i < LONG; i++) big_sq += ((double)big[i] - 1.0) * ((double)big[i] - 1.0);
  CHECK(fabs(vo->sum_sq_dev(big, 1.0f, LONG) - big_sq) < 1e-6 * big_sq, "%s long sum_sq_dev", vo->name);
  free(big);
  CHECK(fabs(vo->sum_sq_dev(x, 1.25f, N) - q) < 1e-6 * q, "%s sum_sq_dev", vo->name);
  CHECK(vo->max(x, N) == (float)mx && vo->min(x, N) == (float)mn, "%s max / min", vo->name);
  CHECK(vo->max(x, 0) == -INFINITY && vo->min(x, 0) == INFINITY, "%s empty max / min", vo->name);
  for (int n = 1; n <= 40; n++) { /* a NaN anywhere, in every tail position */
    float t[40];
    for (int i = 0; i < n; i++) t[i] = (float)i;
    t[n - 1] = NAN;
    CHECK(isnan(vo->max(t, n)) && isnan(vo->min(t, n)), "%s NaN at %d of %d", vo->name, n - 1, n);
  }
  double es = 0;
  for (int i = 0; i < N; i++) es += exp((double)x[i] - 5.0);
  double got = vo->exp_shift_sum(x, 5.0f, y, N);
  CHECK(fabs(got - es) < 1e-6 * es, "%s exp_shift_sum %g vs %g", vo->name, got, es);
  double worst = 0;
  for (int i = 0; i < N; i++) worst = fmax(worst, ulps(y[i], exp((double)(x[i] - 5.0f)))); /* x - c in f32 */
  CHECK(worst <= 2, "%s exp_shift_sum values: %.2f ulp", vo->name, worst);
  vo->norm_affine(x, 0.5f, 2.0f, x, NULL, y, N); /* gamma = x itself */
  worst = 0;
  for (int i = 0; i < N; i++) worst = fmax(worst, ulps(y[i], ((double)x[i] - 0.5) * 2.0 * x[i]));
  CHECK(worst <= 2, "%s norm_affine: %.2f ulp", vo->name, worst);
  for (int i = 0; i < N; i++) acc[i] = -INFINITY, accd[i] = 0.5;
  vo->acc_max(acc, x, N);
  vo->acc_sum(accd, x, N);
  acc[7] = NAN;
  vo->acc_max(acc, y, N);
  int ok = isnan(acc[7]);
  for (int i = 0; i < N; i++)
    if (i != 7) ok = ok && acc[i] == fmaxf(x[i], y[i]) && accd[i] == 0.5 + x[i];
  CHECK(ok, "%s acc_max / acc_sum", vo->name);
  /* binary with a broadcast operand, and max's NaN rule */
  float two = 2.0f, nanv = NAN;
  vo->binary(RLX_BIN_DIV, x, 1, &two, 0, y, N);
  ok = 1;
  for (int i = 0; i < N; i++) ok = ok && y[i] == x[i] / 2.0f;
  vo->binary(RLX_BIN_MAX, &nanv, 0, x, 1, y, 9);
  for (int i = 0; i < 9; i++) ok = ok && isnan(y[i]);
  vo->compare(RLX_CMP_NE, &nanv, 0, x, 1, y, 9);
  for (int i = 0; i < 9; i++) ok = ok && y[i] == 1.0f;
  CHECK(ok, "%s binary / compare broadcast", vo->name);
}

/* ---------------------------------------------------------------- tiles */

static void check_tiles(const cpu_vec_ops *vo) {
  const int64_t shapes[][3] = {{1, 1, 1}, {5, 13, 7}, {6, 16, 64}, {13, 64, 64}, {7, 70, 5}, {12, 9, 80}, {3, 33, 17}};
  for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
    const int64_t rows = shapes[c][0], cols = shapes[c][1], depth = shapes[c][2];
    const int64_t c8 = (cols + 7) / 8 * 8, ldq = depth + 3, ldv = depth + 5;
    float *q = malloc((size_t)(rows * ldq) * sizeof *q), *kt = malloc((size_t)(depth * c8) * sizeof *kt);
    float *s = malloc((size_t)(rows * c8) * sizeof *s), *v = malloc((size_t)(cols * ldv) * sizeof *v);
    float *o = malloc((size_t)(rows * depth) * sizeof *o);
    for (int64_t i = 0; i < rows * ldq; i++) q[i] = (float)uniform(-1, 1);
    for (int64_t i = 0; i < depth * c8; i++) kt[i] = (float)uniform(-1, 1);
    for (int64_t i = 0; i < cols * ldv; i++) v[i] = (float)uniform(-1, 1);
    for (int64_t i = 0; i < rows * depth; i++) o[i] = 0.25f;
    vo->qk_tile(q, ldq, kt, c8, s, c8, rows, cols, depth);
    double err = 0;
    for (int64_t r = 0; r < rows; r++)
      for (int64_t j = 0; j < cols; j++) {
        double want = 0;
        for (int64_t k = 0; k < depth; k++) want += (double)q[r * ldq + k] * kt[k * c8 + j];
        err = fmax(err, fabs(s[r * c8 + j] - want));
      }
    CHECK(err < 1e-5 * (double)depth, "%s qk_tile %lldx%lldx%lld: err %g", vo->name, (long long)rows,
          (long long)cols, (long long)depth, err);
    /* the same scores from keys as rows (kt's columns copied to rows of
     * exactly depth floats, the last one at the end of its buffer) */
    float *krows = malloc((size_t)(cols * depth) * sizeof *krows), *s2 = malloc((size_t)(rows * c8) * sizeof *s2);
    for (int64_t j = 0; j < cols; j++)
      for (int64_t k = 0; k < depth; k++) krows[j * depth + k] = kt[k * c8 + j];
    vo->qk_rows(q, ldq, krows, depth, s2, c8, rows, cols, depth);
    err = 0;
    for (int64_t r = 0; r < rows; r++)
      for (int64_t j = 0; j < cols; j++) err = fmax(err, fabs(s2[r * c8 + j] - s[r * c8 + j]));
    CHECK(err < 1e-5 * (double)depth, "%s qk_rows %lldx%lldx%lld: err %g", vo->name, (long long)rows,
          (long long)cols, (long long)depth, err);
    free(krows);
    free(s2);
    vo->pv_tile(s, c8, v, ldv, o, depth, rows, cols, depth);
    err = 0;
    for (int64_t r = 0; r < rows; r++)
      for (int64_t j = 0; j < depth; j++) {
        double want = 0.25;
        for (int64_t k = 0; k < cols; k++) want += (double)s[r * c8 + k] * v[k * ldv + j];
        err = fmax(err, fabs(o[r * depth + j] - want));
      }
    CHECK(err < 1e-4 * (double)(cols * depth), "%s pv_tile %lldx%lldx%lld: err %g", vo->name, (long long)rows,
          (long long)cols, (long long)depth, err);
    free(q);
    free(kt);
    free(s);
    free(v);
    free(o);
  }
}

static void check_table(const cpu_vec_ops *vo) {
  check_acts(vo);
  check_conversion(vo);
  check_rows(vo);
  check_tiles(vo);
}

/* The AVX-512 table's activations are the AVX2 table's math on 16 lanes
 * (one source, simd_math.h): bit for bit the same over random arguments of
 * every magnitude, specials included, and over lengths around 8 and 16 (the
 * masked tails). Binary ops and compares too. */
static void check_same_as(const cpu_vec_ops *vo, const cpu_vec_ops *ref) {
  enum { N = 4099 };
  float *x = malloc(N * sizeof *x), *b = malloc(N * sizeof *b), *y = malloc(N * sizeof *y),
        *want = malloc(N * sizeof *want);
  const float sp[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -1e-40f, 89.5f, -105.5f};
  for (int i = 0; i < N; i++) {
    /* magnitudes 2^-30 .. 2^30, either sign; every 97th a special */
    x[i] = (float)((rng_next() & 1 ? -1.0 : 1.0) * exp2(uniform(-30.0, 30.0)));
    if (i % 97 == 0) x[i] = sp[(i / 97) % (sizeof sp / sizeof sp[0])];
    b[i] = (float)uniform(-4.0, 4.0);
  }
  const rlx_act acts[] = {RLX_ACT_GELU, RLX_ACT_GELU_TANH, RLX_ACT_SILU, RLX_ACT_RELU, RLX_ACT_LEAKY_RELU,
                          RLX_ACT_SIGMOID, RLX_ACT_TANH, RLX_ACT_EXP, RLX_ACT_LOG, RLX_ACT_SQRT,
                          RLX_ACT_RSQRT, RLX_ACT_NEG, RLX_ACT_ABS, RLX_ACT_ERF, RLX_ACT_ROUND,
                          RLX_ACT_SIGN, RLX_ACT_RECIPROCAL, RLX_ACT_SQUARE, RLX_ACT_SOFTPLUS};
  const int64_t lens[] = {N, 1, 7, 8, 9, 15, 16, 17, 31, 33};
  for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++)
    for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
      const int64_t n = lens[l];
      ref->act(acts[a], 0.125f, x, want, n);
      vo->act(acts[a], 0.125f, x, y, n);
      int64_t bad = -1;
      for (int64_t i = 0; i < n && bad < 0; i++)
        if (memcmp(&y[i], &want[i], sizeof *y) != 0) bad = i;
      CHECK(bad < 0, "%s act %d n %lld: x = %.9g gives %.9g, %s gives %.9g", vo->name, acts[a], (long long)n,
            bad < 0 ? 0.0 : x[bad], bad < 0 ? 0.0 : y[bad], ref->name, bad < 0 ? 0.0 : want[bad]);
    }
  const rlx_binop ops[] = {RLX_BIN_ADD, RLX_BIN_SUB, RLX_BIN_MUL, RLX_BIN_DIV, RLX_BIN_MAX, RLX_BIN_MIN};
  for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
    for (int bcast = 0; bcast < 3; bcast++) {
      int sa = bcast != 1, sb = bcast != 2;
      ref->binary(ops[o], x, sa, b, sb, want, N);
      vo->binary(ops[o], x, sa, b, sb, y, N);
      CHECK(memcmp(y, want, N * sizeof *y) == 0, "%s binary %d (sa %d sb %d) differs from %s", vo->name, ops[o],
            sa, sb, ref->name);
    }
  for (int c = RLX_CMP_EQ; c <= RLX_CMP_GE; c++) {
    ref->compare((rlx_cmpop)c, x, 1, b, 1, want, N);
    vo->compare((rlx_cmpop)c, x, 1, b, 1, y, N);
    CHECK(memcmp(y, want, N * sizeof *y) == 0, "%s compare %d differs from %s", vo->name, c, ref->name);
  }
  /* attention tiles: the same FMA chain per output, so the same bits */
  const int64_t tile_shapes[][3] = {{1, 1, 1}, {5, 13, 7}, {8, 64, 64}, {13, 24, 128}, {9, 45, 80}, {3, 33, 17}};
  for (size_t t = 0; t < sizeof tile_shapes / sizeof tile_shapes[0]; t++) {
    const int64_t rows = tile_shapes[t][0], cols = tile_shapes[t][1], depth = tile_shapes[t][2];
    const int64_t c8 = (cols + 7) / 8 * 8;
    float *s0 = calloc((size_t)(rows * c8), sizeof *s0), *s1 = calloc((size_t)(rows * c8), sizeof *s1);
    float *o0 = malloc((size_t)(rows * depth) * sizeof *o0), *o1 = malloc((size_t)(rows * depth) * sizeof *o1);
    /* q: x's first rows x depth values; kt and v: b's (depth x c8 and cols x depth, both <= N) */
    ref->qk_tile(x, depth, b, c8, s0, c8, rows, cols, depth);
    vo->qk_tile(x, depth, b, c8, s1, c8, rows, cols, depth);
    int same = 1;
    for (int64_t r = 0; r < rows; r++) same = same && memcmp(s0 + r * c8, s1 + r * c8, (size_t)cols * 4) == 0;
    for (int64_t i = 0; i < rows * depth; i++) o0[i] = o1[i] = b[i];
    ref->pv_tile(s0, c8, b, depth, o0, depth, rows, cols, depth);
    vo->pv_tile(s0, c8, b, depth, o1, depth, rows, cols, depth);
    same = same && memcmp(o0, o1, (size_t)(rows * depth) * sizeof *o0) == 0;
    CHECK(same, "%s qk/pv tiles %lldx%lldx%lld differ from %s", vo->name, (long long)rows, (long long)cols,
          (long long)depth, ref->name);
    free(s0);
    free(s1);
    free(o0);
    free(o1);
  }
  free(x);
  free(b);
  free(y);
  free(want);
}

int main(void) {
  rng_seed(0x243F6A8885A308D3ull);
  const cpu_features *hw = cpu_get_hw_features();
  const char *no_avx2 = getenv("RLX_NO_AVX2"), *no_avx512 = getenv("RLX_NO_AVX512");
  int forced_off = no_avx2 && *no_avx2 && strcmp(no_avx2, "0") != 0;
  int avx512_off = forced_off || (no_avx512 && *no_avx512 && strcmp(no_avx512, "0") != 0);
  int have_avx2 = cpu_vec_avx2 && hw->avx2_fma && hw->f16c;
  int have_avx512 = have_avx2 && cpu_vec_avx512() && hw->avx512;
  const cpu_vec_ops *want = have_avx512 && !avx512_off ? cpu_vec_avx512()
                            : have_avx2 && !forced_off ? cpu_vec_avx2
                                                       : &cpu_vec_portable;
  CHECK(cpu_vec() == want, "cpu_vec() is %s, want %s", cpu_vec()->name, want->name);
  check_table(&cpu_vec_portable);
  if (have_avx2) check_table(cpu_vec_avx2);
  else printf("no AVX2/FMA/F16C here: portable table only\n");
  if (have_avx512) {
    check_table(cpu_vec_avx512());
    check_same_as(cpu_vec_avx512(), cpu_vec_avx2);
  } else {
    printf("no AVX-512 here: its table is not checked\n");
  }
  return check_report();
}
