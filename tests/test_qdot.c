/* test_qdot.c — the quantized dot products of DequantMatMul (qdot.h) and
 * the kernel itself, for every GGUF block dtype.
 *
 * 1. Activation quantizers: the vector (AVX2, AVX-512 VNNI) and scalar
 *    tables write the same bytes (ties, zeros, tiny and huge blocks, NaN
 *    and inf included), and
 *    on finite rows the levels are ggml's, checked against the bit-exact
 *    codec of quant_blocks.c (q8_K byte for byte, q8_0 levels and fp16 d).
 * 2. Dot kernels: each table, for 1..QDOT_MAX_ROWS activation rows per pass,
 *    against dequantize (quant_blocks.c) + dot in double of the quantized
 *    activations, and each vector table against the scalar one; random blocks and
 *    blocks at the extremes of the levels (no s16 saturation).
 *    F16/BF16 weights (float dots against F32 rows): every table within
 *    the a-priori bound of F32 accumulation.
 * 3. cpu_DequantMatMul through a context (RLX_THREADS from CTest: 1 and 2),
 *    decode (M = 1) and prefill (M up to 70) shapes, F32/F16/BF16/F64 x,
 *    against the double reference on quantized x; and its error against
 *    the unquantized product within the a-priori bound of the activation
 *    quantization (printed: the typical relative error per type).
 *
 * Tolerance of the tight checks: 1e-6 x sum_k |xq_k| (|w_k| + max |w| of
 * w_k's block), as in tests/ref/cases_quant.py (the float32 rounding of the
 * block sums is ~3e-8 of that; one activation level off is far larger).
 * CTest also runs it with RLX_NO_AVX2=1 (the kernel then takes the scalar
 * table) and RLX_NO_AVX512=1 (the AVX2 one); parts 1 and 2 compare every
 * table the CPU runs, and the VNNI table bit for bit against the AVX2 one.
 */
#include "backend/cpu/cpu.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/qdot.h"
#include "backend/cpu/quant_blocks.h"
#include "check.h"
#include "cpu_matrix.h"
#include "rng.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

static const rlx_dtype TYPES[] = {RLX_Q4_0, RLX_Q4_1, RLX_Q5_0, RLX_Q5_1, RLX_Q8_0, RLX_Q2_K,
                                  RLX_Q3_K, RLX_Q4_K, RLX_Q5_K, RLX_Q6_K, RLX_Q8_K};
#define N_TYPES ((int)(sizeof TYPES / sizeof TYPES[0]))

#define TIGHT_RTOL 1e-6

/* ---------------------------------------------------------------- random data */

/* Offsets of each block's fp16 scale fields (ggml-common.h). */
static int f16_fields(rlx_dtype t, int *off) {
  switch (t) {
  case RLX_Q4_0: case RLX_Q5_0: case RLX_Q8_0: off[0] = 0; return 1;
  case RLX_Q4_1: case RLX_Q5_1: case RLX_Q4_K: case RLX_Q5_K: off[0] = 0, off[1] = 2; return 2;
  case RLX_Q2_K: off[0] = 80, off[1] = 82; return 2;
  case RLX_Q3_K: off[0] = 108; return 1;
  case RLX_Q6_K: off[0] = 208; return 1;
  default: return 0;
  }
}

/* nb blocks of t: random bytes (extreme: every level byte 0xFF, or 0x80
 * for the signed Q8 types), scales log-uniform in [1e-3, 1] * 0.05 with a
 * fifth negative. */
static uint8_t *make_blocks(rlx_dtype t, int64_t nb, int extreme) {
  const int bs = ir_dtypes[t].size;
  uint8_t *b = malloc((size_t)(nb * bs) + 1);
  const uint8_t fill = t == RLX_Q8_0 || t == RLX_Q8_K ? 0x80 : 0xFF;
  for (int64_t i = 0; i < nb * bs; i++) b[i] = extreme ? fill : (uint8_t)rng_next();
  for (int64_t i = 0; i < nb; i++) {
    int off[2], n = f16_fields(t, off);
    for (int f = 0; f < n; f++) {
      double mag = exp(log(1e-3) * rng_uniform()) * 0.05;
      quant_put_f16(b + i * bs + off[f], (float)(rng_uniform() < 0.2 ? -mag : mag));
    }
    if (t == RLX_Q8_K) {
      float d = (float)((rng_uniform() * 2 - 1) * 0.002);
      memcpy(b + i * bs, &d, sizeof d);
    }
  }
  return b;
}

/* Activation rows of a kind. */
enum { X_NORMAL, X_TIES, X_ZERO, X_CONST, X_TINY, X_HUGE, X_NAN, X_INF, X_EXTREME, X_KINDS };
static const char *x_kind_names[X_KINDS] = {"normal", "ties", "zero", "const", "tiny",
                                            "huge",   "nan",  "inf",  "extreme"};

static void fill_x(float *x, int64_t k, int kind) {
  for (int64_t i = 0; i < k; i++) {
    switch (kind) {
    case X_NORMAL: x[i] = (float)(normal_value() * 1.5); break;
    /* x / (amax / 127) lands exactly on .5: amax 127 (d = 1); for q8_K
     * max = -127 (iscale = 1) */
    case X_TIES: x[i] = i % 32 == 0 ? -127.0f : (float)((int)(rng_next() % 200) - 100) + 0.5f; break;
    case X_ZERO: x[i] = 0.0f; break;
    case X_CONST: x[i] = 0.375f; break;
    case X_TINY: x[i] = (float)(normal_value() * 1e-39); break; /* 1/d overflows */
    case X_HUGE: x[i] = (float)(normal_value() * 1e37); break;
    case X_NAN: x[i] = i == 37 ? NAN : (float)normal_value(); break;
    case X_INF: x[i] = i == 300 ? -INFINITY : (float)normal_value(); break;
    default: x[i] = i % 2 ? 3.0f : -3.0f; break; /* levels +-127 */
    }
  }
}

/* ---------------------------------------------------------------- 1. quantizers */

static void test_quantizers(const qdot_ops *vt) {
  const int64_t K = 4 * 256, nb0 = K / 32, nbk = K / 256;
  float *x = malloc(K * sizeof *x);
  qdot_q8_0 *a0 = malloc(nb0 * sizeof *a0), *s0 = malloc(nb0 * sizeof *s0);
  qdot_q8_k *ak = malloc(nbk * sizeof *ak), *sk = malloc(nbk * sizeof *sk);
  uint8_t *codec = malloc(nbk * 292 + nb0 * 34);
  for (int kind = 0; kind < X_KINDS; kind++) {
    for (int rep = 0; rep < 4; rep++) {
      fill_x(x, K, kind);
      qdot_scalar.quantize_q8_0(x, s0, nb0);
      qdot_scalar.quantize_q8_k(x, sk, nbk);
      if (vt) {
        vt->quantize_q8_0(x, a0, nb0);
        vt->quantize_q8_k(x, ak, nbk);
        CHECK(!memcmp(a0, s0, nb0 * sizeof *a0), "q8_0 %s: %s and scalar bytes differ",
              x_kind_names[kind], vt->name);
        CHECK(!memcmp(ak, sk, nbk * sizeof *ak), "q8_K %s: %s and scalar bytes differ",
              x_kind_names[kind], vt->name);
      }
      if (kind == X_NAN || kind == X_INF) {
        const int64_t bad = kind == X_NAN ? 37 : 300;
        CHECK(isnan(s0[bad / 32].d) && isnan(sk[bad / 256].d), "%s: block d not NaN",
              x_kind_names[kind]);
        CHECK(s0[0].d == s0[0].d && (bad / 256 == 0 || sk[0].d == sk[0].d),
              "%s: a finite block got d NaN", x_kind_names[kind]);
        continue;
      }
      if (kind == X_TINY) continue; /* the codec's levels are undefined there (ggml too) */
      /* ggml's levels: the bit-exact codec */
      quant_quantize_row(RLX_Q8_K, x, codec, K);
      CHECK(!memcmp(codec, sk, nbk * 292), "q8_K %s: bytes differ from ggml's", x_kind_names[kind]);
      quant_quantize_row(RLX_Q8_0, x, codec, K);
      int same = 1;
      for (int64_t b = 0; b < nb0; b++) {
        const uint16_t d16 = (uint16_t)(codec[b * 34] | codec[b * 34 + 1] << 8);
        same &= d16 == ir_f32_to_f16(s0[b].d) && !memcmp(codec + b * 34 + 2, s0[b].qs, 32);
        int sum = 0;
        for (int j = 0; j < 32; j++) sum += s0[b].qs[j];
        same &= s0[b].s == s0[b].d * (float)sum;
      }
      CHECK(same, "q8_0 %s: levels or scale differ from ggml's", x_kind_names[kind]);
    }
  }
  free(x);
  free(a0);
  free(s0);
  free(ak);
  free(sk);
  free(codec);
}

/* ---------------------------------------------------------------- references */

/* Activations as the quantizer leaves them, in double. */
static void act_values(rlx_dtype w, const void *act, int64_t k, double *xq) {
  if (qdot_uses_q8_k(w)) {
    const qdot_q8_k *y = act;
    for (int64_t i = 0; i < k; i++) xq[i] = (double)y[i / 256].d * y[i / 256].qs[i % 256];
  } else {
    const qdot_q8_0 *y = act;
    for (int64_t i = 0; i < k; i++) xq[i] = (double)y[i / 32].d * y[i / 32].qs[i % 32];
  }
}

/* sum_k wq[k] xq[k] and the tolerance magnitude sum_k |xq| (|w| + block max |w|). */
static void ref_dot(const float *wq, const double *xq, int64_t k, int be, double *dot, double *mag) {
  double s = 0, m = 0;
  for (int64_t b = 0; b < k / be; b++) {
    double bmax = 0;
    for (int i = 0; i < be; i++) bmax = fmax(bmax, fabs(wq[b * be + i]));
    for (int i = 0; i < be; i++) {
      s += (double)wq[b * be + i] * xq[b * be + i];
      m += fabs(xq[b * be + i]) * (fabs(wq[b * be + i]) + bmax);
    }
  }
  *dot = s;
  *mag = m;
}

/* ---------------------------------------------------------------- 2. dot kernels */

/* The vector table vt (or none) against the references and the scalar
 * table; same_as, another vector table, must give bit-identical results
 * (the VNNI and AVX2 kernels form the same integer sums). */
static void test_dots(const qdot_ops *vt, const qdot_ops *same_as) {
  static const int nbs_legacy[] = {1, 2, 3, 7, 16, 40}, nbs_k[] = {1, 2, 3, 5, 8};
  for (int ti = 0; ti < N_TYPES; ti++) {
    const rlx_dtype t = TYPES[ti];
    const int be = ir_dtypes[t].block, k_type = qdot_uses_q8_k(t);
    const int *nbs = k_type ? nbs_k : nbs_legacy;
    const int n_nbs = k_type ? 5 : 6;
    double worst = 0; /* largest error / tolerance magnitude seen */
    int bad = 0;
    for (int ni = 0; ni < n_nbs; ni++) {
      for (int extreme = 0; extreme < 2; extreme++) {
        const int64_t nb = nbs[ni], K = nb * be;
        const size_t arow = qdot_act_row_bytes(t, K);
        uint8_t *w = make_blocks(t, nb, extreme);
        float *wq = malloc(K * sizeof *wq), *x = malloc(K * sizeof *x);
        uint8_t *act = malloc(arow * QDOT_MAX_ROWS);
        double *xq = malloc(K * sizeof *xq);
        quant_dequantize_row(t, w, wq, K);
        double want[QDOT_MAX_ROWS], mag[QDOT_MAX_ROWS];
        for (int r = 0; r < QDOT_MAX_ROWS; r++) {
          fill_x(x, K, extreme ? X_EXTREME : r == 3 ? X_TIES : X_NORMAL);
          qdot_quantize_row(&qdot_scalar, t, x, act + r * arow, K);
          act_values(t, act + r * arow, K, xq);
          ref_dot(wq, xq, K, be, &want[r], &mag[r]);
        }
        for (int nr = 1; nr <= QDOT_MAX_ROWS; nr++) {
          /* outputs 3 apart, NaN between: a write out of place shows */
          float got_s[3 * QDOT_MAX_ROWS], got_a[3 * QDOT_MAX_ROWS], got_o[3 * QDOT_MAX_ROWS];
          for (int i = 0; i < 3 * QDOT_MAX_ROWS; i++) got_s[i] = got_a[i] = got_o[i] = NAN;
          qdot_scalar.dot[t](nb, w, act, arow, nr, got_s, 3);
          if (vt) vt->dot[t](nb, w, act, arow, nr, got_a, 3);
          if (same_as) {
            same_as->dot[t](nb, w, act, arow, nr, got_o, 3);
            bad += memcmp(got_a, got_o, sizeof got_a) != 0;
          }
          for (int r = 0; r < QDOT_MAX_ROWS; r++) {
            for (int table = 0; table < (vt ? 2 : 1); table++) {
              const float *got = table ? got_a : got_s;
              const double err = fabs(got[3 * r] - want[r]);
              if (r < nr) {
                worst = fmax(worst, mag[r] > 0 ? err / mag[r] : err);
                if (!(err <= TIGHT_RTOL * mag[r])) {
                  if (bad++ < 5)
                    printf("  %s %s nb %lld nr %d row %d%s: got %.9g want %.9g\n",
                           rlx_dtype_name(t), table ? vt->name : "scalar", (long long)nb, nr, r,
                           extreme ? " extreme" : "", got[3 * r], want[r]);
                }
              } else {
                bad += !isnan(got[3 * r]);
              }
              bad += !isnan(got[3 * r + 1]) || !isnan(got[3 * r + 2]);
            }
            if (vt && r < nr && !(fabs(got_a[3 * r] - got_s[3 * r]) <= 2 * TIGHT_RTOL * mag[r]))
              bad++;
          }
        }
        free(w);
        free(wq);
        free(x);
        free(act);
        free(xq);
      }
    }
    CHECK(bad == 0, "%s: %d dot results off", rlx_dtype_name(t), bad);
    printf("dot %-5s %s: largest error / magnitude %.2e (tolerance %.0e)\n", rlx_dtype_name(t),
           vt ? vt->name : "scalar", worst, TIGHT_RTOL);
  }
}

/* F16/BF16 weight rows (qdot_widens) against F32 rows, every table: within
 * the a-priori bound of F32 accumulation in any order, (K + 1) 2^-24
 * sum_k |w_k x_k| (one misread weight or a dropped tail of K is far more),
 * against the double dot of the values the library's scalar converters
 * give. K covers the vector kernels' 4-vector steps, single vectors and the
 * scalar tail. */
static void test_wide_dots(const qdot_ops *table) {
  static const int64_t ks[] = {1, 7, 8, 9, 31, 32, 33, 75, 203};
  static const rlx_dtype wts[] = {RLX_F16, RLX_BF16};
  for (int wi = 0; wi < 2; wi++) {
    const rlx_dtype t = wts[wi];
    int bad = 0;
    double worst = 0;
    for (int ki = 0; ki < (int)(sizeof ks / sizeof ks[0]); ki++) {
      const int64_t K = ks[ki];
      uint16_t *w = malloc((size_t)K * sizeof *w);
      float *x = malloc((size_t)(K * QDOT_MAX_ROWS) * sizeof *x);
      for (int64_t k = 0; k < K; k++) {
        const float v = (float)normal_value();
        w[k] = t == RLX_F16 ? rlx_f32_to_f16(v) : rlx_f32_to_bf16(v);
      }
      for (int64_t i = 0; i < K * QDOT_MAX_ROWS; i++) x[i] = (float)normal_value();
      double want[QDOT_MAX_ROWS], mag[QDOT_MAX_ROWS];
      for (int r = 0; r < QDOT_MAX_ROWS; r++) {
        want[r] = mag[r] = 0;
        for (int64_t k = 0; k < K; k++) {
          const double wv = t == RLX_F16 ? rlx_f16_to_f32(w[k]) : rlx_bf16_to_f32(w[k]);
          want[r] += wv * x[r * K + k];
          mag[r] += fabs(wv * x[r * K + k]);
        }
      }
      for (int nr = 1; nr <= QDOT_MAX_ROWS; nr++) {
        float got[3 * QDOT_MAX_ROWS];
        for (int i = 0; i < 3 * QDOT_MAX_ROWS; i++) got[i] = NAN;
        table->dot[t](K, w, x, (size_t)K * sizeof *x, nr, got, 3);
        for (int r = 0; r < QDOT_MAX_ROWS; r++) {
          const double err = fabs(got[3 * r] - want[r]);
          if (r < nr) {
            worst = fmax(worst, mag[r] > 0 ? err / mag[r] : err);
            if (!(err <= (double)(K + 1) * 0x1p-24 * mag[r]) && bad++ < 5)
              printf("  %s %s K %lld nr %d row %d: got %.9g want %.9g\n", rlx_dtype_name(t),
                     table->name, (long long)K, nr, r, got[3 * r], want[r]);
          } else {
            bad += !isnan(got[3 * r]);
          }
          bad += !isnan(got[3 * r + 1]) || !isnan(got[3 * r + 2]);
        }
      }
      free(w);
      free(x);
    }
    CHECK(bad == 0, "%s %s: %d dot results off", rlx_dtype_name(t), table->name, bad);
    printf("dot %-5s %s: largest error / magnitude %.2e\n", rlx_dtype_name(t), table->name, worst);
  }
}

/* ---------------------------------------------------------------- 3. the kernel */

/* x [M, K] as dtype xdt (values rounded to it, returned in xf as F32). */
static void *make_x(rlx_dtype xdt, int64_t n, float *xf) {
  void *x = malloc((size_t)n * 8 + 1);
  for (int64_t i = 0; i < n; i++) {
    const float v = (float)normal_value();
    if (xdt == RLX_F32) {
      ((float *)x)[i] = xf[i] = v;
    } else if (xdt == RLX_F64) {
      const double dv = normal_value();
      ((double *)x)[i] = dv;
      xf[i] = (float)dv;
    } else if (xdt == RLX_F16) {
      ((uint16_t *)x)[i] = ir_f32_to_f16(v);
      xf[i] = ir_f16_to_f32(((uint16_t *)x)[i]);
    } else {
      ((uint16_t *)x)[i] = ir_f32_to_bf16(v);
      xf[i] = ir_bf16_to_f32(((uint16_t *)x)[i]);
    }
  }
  return x;
}

static double out_value(const void *out, rlx_dtype dt, int64_t i) {
  switch (dt) {
  case RLX_F32: return ((const float *)out)[i];
  case RLX_F64: return ((const double *)out)[i];
  case RLX_F16: return ir_f16_to_f32(((const uint16_t *)out)[i]);
  default: return ir_bf16_to_f32(((const uint16_t *)out)[i]);
  }
}

typedef struct {
  double rel_sq, ref_sq; /* sums of squared error vs unquantized and of the products */
} error_stats;

static void run_matmul(cpu_ctx *ctx, rlx_dtype t, rlx_dtype xdt, int64_t M, int64_t N, int64_t K,
                       error_stats *es) {
  const int be = ir_dtypes[t].block;
  uint8_t *w = make_blocks(t, N * K / be, 0);
  float *xf = malloc((size_t)(M * K + 1) * sizeof *xf), *wq = malloc((size_t)(K + 1) * sizeof *wq);
  void *x = make_x(xdt, M * K, xf);
  void *out = malloc((size_t)(M * N) * 8 + 1);
  const size_t arow = qdot_act_row_bytes(t, K);
  uint8_t *act = malloc(arow * (size_t)M + 1);
  double *xq = malloc((size_t)(M * K + 1) * sizeof *xq);
  for (int64_t i = 0; i < M; i++) {
    qdot_quantize_row(&qdot_scalar, t, xf + i * K, act + i * arow, K);
    act_values(t, act + i * arow, K, xq + i * K);
  }
  cpu_tensor in[2], o;
  set_matrix(&in[0], x, xdt, M, K);
  set_matrix(&in[1], w, t, N, K);
  set_matrix(&o, out, xdt, M, N);
  ir_node node;
  memset(&node, 0, sizeof node);
  node.op = RLX_OP_DequantMatMul;
  rlx_status st = cpu_DequantMatMul(ctx, &node, in, &o);
  CHECK(st == RLX_OK, "%s M %lld N %lld K %lld: %s", rlx_dtype_name(t), (long long)M,
        (long long)N, (long long)K, rlx_last_error());
  /* output rounding to x's dtype */
  const double out_rtol = xdt == RLX_F16 ? 1e-3 : xdt == RLX_BF16 ? 8e-3 : 0;
  int bad = 0;
  for (int64_t j = 0; j < N && st == RLX_OK; j++) {
    quant_dequantize_row(t, w + (size_t)j * rlx_dtype_nbytes(t, K), wq, K);
    for (int64_t i = 0; i < M; i++) {
      double want, mag, exact = 0, bound = 0;
      ref_dot(wq, xq + i * K, K, be, &want, &mag);
      for (int64_t b = 0; b < K / be; b++) {
        double amax = 0;
        for (int e = 0; e < be; e++) amax = fmax(amax, fabs(xf[i * K + b * be + e]));
        for (int e = 0; e < be; e++) {
          exact += (double)wq[b * be + e] * xf[i * K + b * be + e];
          bound += fabs(wq[b * be + e]) * amax / 254;
        }
      }
      const double got = out_value(out, xdt, i * N + j);
      const double tol = TIGHT_RTOL * mag + out_rtol * fabs(want) + (xdt == RLX_F16 ? 3e-8 : 0);
      if (!(fabs(got - want) <= tol) || !(fabs(got - exact) <= bound + tol)) {
        if (bad++ < 3)
          printf("  %s x %s M %lld N %lld K %lld at [%lld, %lld]: got %.9g want %.9g (exact %.9g)\n",
                 rlx_dtype_name(t), rlx_dtype_name(xdt), (long long)M, (long long)N, (long long)K,
                 (long long)i, (long long)j, got, want, exact);
      }
      es->rel_sq += (got - exact) * (got - exact);
      es->ref_sq += exact * exact;
    }
  }
  CHECK(bad == 0, "%s x %s M %lld N %lld K %lld: %d outputs off", rlx_dtype_name(t),
        rlx_dtype_name(xdt), (long long)M, (long long)N, (long long)K, bad);
  free(w);
  free(xf);
  free(wq);
  free(x);
  free(out);
  free(act);
  free(xq);
}

static void test_matmul(void) {
  cpu_ctx *ctx = cpu_ctx_new(0);
  printf("DequantMatMul: %s table, %d threads\n", qdot_best()->name, cpu_ctx_threads(ctx));
  /* decode and prefill; N large enough to split over threads */
  static const int64_t shapes[][2] = {{1, 3}, {1, 300}, {2, 67}, {5, 300}, {13, 40}, {70, 129}};
  for (int ti = 0; ti < N_TYPES; ti++) {
    const rlx_dtype t = TYPES[ti];
    const int64_t K = qdot_uses_q8_k(t) ? 768 : 576;
    error_stats es = {0, 0};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
      run_matmul(ctx, t, RLX_F32, shapes[s][0], shapes[s][1], K, &es);
    printf("DequantMatMul %-5s: rms error vs unquantized x %.2e of rms output\n",
           rlx_dtype_name(t), sqrt(es.rel_sq / es.ref_sq));
  }
  error_stats es = {0, 0};
  static const rlx_dtype xdts[] = {RLX_F16, RLX_BF16, RLX_F64};
  for (int i = 0; i < 3; i++) {
    run_matmul(ctx, RLX_Q4_K, xdts[i], 5, 33, 512, &es);
    run_matmul(ctx, RLX_Q5_1, xdts[i], 1, 70, 96, &es);
  }
  run_matmul(NULL, RLX_Q6_K, RLX_F32, 6, 50, 256, &es); /* no context: serial */
  cpu_ctx_free(ctx);
}

int main(void) {
  rng_seed(0x2545F4914F6CDD1Dull);
  const cpu_features *hw = cpu_get_hw_features();
  const qdot_ops *avx2 = hw->avx2_fma && hw->f16c ? qdot_avx2 : NULL;
  const qdot_ops *vnni = hw->avx512_vnni ? qdot_avx512_vnni : NULL;
  printf("tables compared: scalar%s%s\n", avx2 ? ", avx2" : " (no AVX2 here)",
         vnni ? ", avx512vnni" : " (no AVX-512 VNNI here)");
  test_quantizers(avx2);
  test_dots(avx2, NULL);
  test_wide_dots(&qdot_scalar);
  if (avx2) test_wide_dots(avx2);
  if (vnni) {
    test_quantizers(vnni);
    test_dots(vnni, avx2);
    test_wide_dots(vnni);
  }
  test_matmul();
  return check_report();
}
