/* test_gemm.c — cpu_sgemm / cpu_gemm against a double-precision reference.
 *
 * Most cases use "exact" data: multiples of 1/16 in [-1/2, 1/2], so every
 * product is a multiple of 2^-8 and every partial sum of up to ~10^5 terms
 * is exact in F32. The product is then the same number in any summation
 * order: with no activation, kernels of every variant and blocking must
 * match the reference bit for bit. Activations are compared to the
 * reference math (cpu_act_apply in double) within a few F32 ulp. One case
 * with random normal data checks the error against the F32 bound.
 *
 * CTest runs this with the default kernels, with RLX_NO_AVX512=1, with
 * RLX_NO_AVX2=1 (scalar), and with RLX_THREADS=1 and 2; every case runs
 * both through a context (threaded) and with ctx NULL (serial). The
 * prepacked-B cases run again with RLX_PREPACK=0 (no copy may be kept).
 */
#include "backend/cpu/elementwise_math.h"
#include "backend/cpu/gemm.h"
#include "check.h"
#include "rng.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int64_t rng_int(int64_t lo, int64_t hi) { return lo + (int64_t)(rng_next() % (uint32_t)(hi - lo + 1)); }

/* a multiple of 1/16 in [-1/2, 1/2] */
static float exact_value(void) { return (float)((int)(rng_next() % 17) - 8) / 16.0f; }

/* A matrix stored rows x cols with row stride ld (>= cols), padding NaN so
 * that reading it would show. */
static float *make_matrix(int64_t rows, int64_t cols, int64_t ld, int exact) {
  size_t n = (size_t)(rows > 0 ? (rows - 1) * ld + cols : 0) + 1;
  float *m = malloc(n * sizeof *m);
  for (size_t i = 0; i < n; i++) m[i] = NAN;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++)
      m[r * ld + c] = exact ? exact_value() : (float)normal_value();
  return m;
}

typedef struct {
  int ta, tb;
  int64_t M, N, K, lda, ldb, ldc;
  int exact;
  int bias;
  rlx_act act;
  float alpha;
} gemm_case;

static const char *act_name(rlx_act a) {
  static const char *names[] = {"none", "gelu", "gelu_tanh", "silu", "relu", "leaky_relu",
                                "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "neg", "abs",
                                "sin", "cos", "erf", "softplus", "round", "sign", "reciprocal",
                                "square"};
  return (unsigned)a < sizeof names / sizeof *names ? names[a] : "?";
}

/* Same value, or both NaN, or within tolerance of the reference. */
static int close_to(float got, double want, double tol) {
  if (isnan(want)) return isnan(got);
  if (isinf(want) || fabs(want) > 3.4e38) return (double)got == (float)want;
  return fabs((double)got - want) <= tol;
}

/* Runs one case with ctx (and again serially) and checks every element of
 * C, and that the padding of C was not written. */
static void run_case(cpu_ctx *ctx, const gemm_case *c) {
  int64_t M = c->M, N = c->N, K = c->K;
  /* stored shapes: A [M,K] or [K,M]; B [K,N] or [N,K] */
  int64_t a_rows = c->ta ? K : M, a_cols = c->ta ? M : K;
  int64_t b_rows = c->tb ? N : K, b_cols = c->tb ? K : N;
  float *A = make_matrix(a_rows, a_cols, c->lda, c->exact);
  float *B = make_matrix(b_rows, b_cols, c->ldb, c->exact);
  float *bias = c->bias ? make_matrix(1, N, N, c->exact) : NULL;
  size_t c_size = (size_t)((M - 1) * c->ldc + N);
  float *C = malloc(c_size * sizeof *C);
  double *ref = malloc((size_t)(M * N) * sizeof *ref);
  double *mag = malloc((size_t)(M * N) * sizeof *mag);
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double s = 0.0, m = 0.0;
      for (int64_t k = 0; k < K; k++) {
        double a = c->ta ? A[k * c->lda + i] : A[i * c->lda + k];
        double b = c->tb ? B[j * c->ldb + k] : B[k * c->ldb + j];
        s += a * b;
        m += fabs(a * b);
      }
      if (bias) s += bias[j];
      ref[i * N + j] = s;
      mag[i * N + j] = m;
    }
  gemm_epilogue ep = {.bias = bias, .act = c->act, .alpha = c->alpha};
  for (int pass = 0; pass < 2; pass++) {
    for (size_t i = 0; i < c_size; i++) C[i] = -12345.0f; /* sentinel */
    cpu_sgemm(pass ? NULL : ctx, c->ta, c->tb, M, N, K, A, c->lda, B, c->ldb, C, c->ldc,
              c->bias || c->act != RLX_ACT_NONE || pass ? &ep : NULL);
    int64_t bad = 0, first_i = -1, first_j = -1;
    double first_want = 0.0;
    float first_got = 0.0f;
    for (int64_t i = 0; i < M; i++) {
      for (int64_t j = 0; j < N; j++) {
        double pre = ref[i * N + j];
        double want = c->act == RLX_ACT_NONE ? pre : cpu_act_apply(c->act, (float)pre, c->alpha);
        /* exact data: pre-activation exact; the act within a few ulp (its
         * slope near 0 makes an absolute floor for gelu-like curves) */
        double tol = c->exact ? (c->act == RLX_ACT_NONE ? 0.0 : 4e-7 * fabs(want) + 1e-7)
                              : 2.0 * (double)K * 5.96e-8 * (mag[i * N + j] + 1.0);
        float got = C[i * c->ldc + j];
        if (!close_to(got, want, tol)) {
          if (!bad++) first_i = i, first_j = j, first_want = want, first_got = got;
        }
      }
      for (int64_t j = N; i + 1 < M && j < c->ldc; j++)
        if (C[i * c->ldc + j] != -12345.0f) bad++;
    }
    CHECK(bad == 0,
          "%s M=%lld N=%lld K=%lld ta=%d tb=%d ld=%lld,%lld,%lld bias=%d act=%s %s: %lld bad, "
          "first C[%lld,%lld] = %.9g, want %.9g",
          cpu_gemm_variant(), (long long)M, (long long)N, (long long)K, c->ta, c->tb,
          (long long)c->lda, (long long)c->ldb, (long long)c->ldc, c->bias, act_name(c->act),
          pass ? "serial" : "ctx", (long long)bad, (long long)first_i, (long long)first_j,
          (double)first_got, first_want);
  }
  free(A);
  free(B);
  free(bias);
  free(C);
  free(ref);
  free(mag);
}

static gemm_case plain(int ta, int tb, int64_t M, int64_t N, int64_t K) {
  gemm_case c = {ta, tb, M, N, K, ta ? M : K, tb ? K : N, N, 1, 0, RLX_ACT_NONE, 0.0f};
  return c;
}

/* Every trans combination of one shape, with minimal and padded strides. */
static void all_layouts(cpu_ctx *ctx, int64_t M, int64_t N, int64_t K, int bias, rlx_act act) {
  for (int t = 0; t < 4; t++) {
    gemm_case c = plain(t & 1, t >> 1, M, N, K);
    c.bias = bias;
    c.act = act;
    c.alpha = 0.125f;
    run_case(ctx, &c);
    c.lda += 3;
    c.ldb += 5;
    c.ldc += 7;
    run_case(ctx, &c);
  }
}

static void test_shapes(cpu_ctx *ctx) {
  /* decode shapes (one row / one column: the GEMV paths), size 1, odd sizes
   * around the micro-tile edges, several K blocks, several M and N blocks */
  static const int64_t shapes[][3] = {
      {1, 1, 1},     {1, 577, 1},  {1, 1536, 576}, {1, 64, 4100}, {1, 70, 1},   {37, 1, 300},
      {200, 1, 75},  {1, 1, 70},   {2, 3, 4},      {13, 29, 17},  {14, 32, 64}, {15, 33, 65},
      {28, 64, 1},   {29, 65, 257}, {70, 70, 70},  {3, 4200, 9},  {400, 40, 300},
      {257, 129, 511},
      /* a last tile of a few columns under many rows (thin_body): ResNet's
       * 196 positions, with one and with two K blocks */
      {40, 196, 576}, {60, 196, 2100}, {29, 37, 33},
      /* big enough for two threads: one matrix cut into column tiles
       * sharing one packed A (few rows, B over 1 MiB), or row tiles sharing
       * one packed B (more rows, or a small B) */
      {128, 300, 200}, {130, 1100, 64}, {900, 70, 150}, {100, 1100, 300},
  };
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
    all_layouts(ctx, shapes[s][0], shapes[s][1], shapes[s][2], s % 2 == 0, RLX_ACT_NONE);
  /* a random sweep over 1..70 in every dimension */
  for (int i = 0; i < 150; i++) {
    gemm_case c = plain((int)rng_int(0, 1), (int)rng_int(0, 1), rng_int(1, 70), rng_int(1, 70),
                        rng_int(1, 70));
    c.lda += rng_int(0, 3);
    c.ldb += rng_int(0, 3);
    c.ldc += rng_int(0, 3);
    c.bias = (int)rng_int(0, 1);
    run_case(ctx, &c);
  }
}

static void test_k0(cpu_ctx *ctx) {
  for (int bias = 0; bias < 2; bias++) {
    gemm_case c = plain(0, 0, 5, 19, 0);
    c.lda = 1;
    c.bias = bias;
    c.act = bias ? RLX_ACT_EXP : RLX_ACT_NONE;
    run_case(ctx, &c);
  }
}

static void test_acts(cpu_ctx *ctx) {
  for (int a = 0; a < RLX_ACT_COUNT; a++) {
    /* packed path with two K blocks, and both GEMV paths */
    all_layouts(ctx, 23, 45, 300, 1, (rlx_act)a);
    all_layouts(ctx, 1, 100, 37, 1, (rlx_act)a);
    all_layouts(ctx, 67, 1, 37, 1, (rlx_act)a);
  }
  /* the epilogue on the tiles of a threaded split */
  all_layouts(ctx, 128, 300, 200, 1, RLX_ACT_GELU);
  all_layouts(ctx, 900, 70, 150, 1, RLX_ACT_SILU);
}

static void test_random_data(cpu_ctx *ctx) {
  gemm_case c = plain(0, 0, 96, 200, 1000);
  c.exact = 0;
  c.bias = 1;
  run_case(ctx, &c);
  c = plain(1, 1, 1, 300, 2000);
  c.exact = 0;
  run_case(ctx, &c);
}

/* ---- cpu_gemm: F16/BF16 operands, batches with strides, offsets and broadcast */

static uint16_t to_half(rlx_dtype dt, float v) {
  return dt == RLX_F16 ? rlx_f32_to_f16(v) : rlx_f32_to_bf16(v);
}

static void test_batched(cpu_ctx *ctx) {
  static const rlx_dtype dts[] = {RLX_F32, RLX_F16, RLX_BF16};
  static const int64_t shapes[][3] = {{1, 40, 33}, {7, 1, 19}, {9, 35, 300}, {30, 70, 21}};
  for (int di = 0; di < 3; di++)
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
      for (int t = 0; t < 4; t++) {
        rlx_dtype dt = dts[di];
        int ta = t & 1, tb = t >> 1;
        int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], batch = 3;
        int64_t a_size = M * K, b_size = K * N;
        /* A: batch stride; B: offsets in reverse order, batch 1 shared with 0 */
        float *af = malloc((size_t)(batch * a_size) * sizeof *af);
        float *bf = malloc((size_t)(2 * b_size) * sizeof *bf);
        for (int64_t i = 0; i < batch * a_size; i++) af[i] = exact_value();
        for (int64_t i = 0; i < 2 * b_size; i++) bf[i] = exact_value();
        void *ad = af, *bd = bf;
        uint16_t *ah = NULL, *bh = NULL;
        if (dt != RLX_F32) {
          ah = malloc((size_t)(batch * a_size) * 2);
          bh = malloc((size_t)(2 * b_size) * 2);
          for (int64_t i = 0; i < batch * a_size; i++) ah[i] = to_half(dt, af[i]);
          for (int64_t i = 0; i < 2 * b_size; i++) bh[i] = to_half(dt, bf[i]);
          ad = ah;
          bd = bh;
        }
        int64_t b_off[3] = {b_size, b_size, 0};
        gemm_operand a = {ad, dt, ta, ta ? M : K, a_size, NULL};
        gemm_operand b = {bd, dt, tb, tb ? K : N, 0, b_off};
        int64_t ldc = N + 2, c_stride = M * ldc + 1;
        float *C = malloc((size_t)(batch * c_stride) * sizeof *C);
        gemm_epilogue ep = {.act = RLX_ACT_RELU};
        cpu_gemm(ctx, batch, M, N, K, &a, &b, C, ldc, c_stride, &ep);
        int64_t bad = 0;
        for (int64_t bi = 0; bi < batch; bi++)
          for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
              const float *A = af + bi * a_size, *B = bf + b_off[bi];
              double sum = 0.0;
              for (int64_t k = 0; k < K; k++)
                sum += (double)(ta ? A[k * M + i] : A[i * K + k]) *
                       (double)(tb ? B[j * K + k] : B[k * N + j]);
              if ((double)C[bi * c_stride + i * ldc + j] != (sum < 0 ? 0.0 : sum)) bad++;
            }
        CHECK(bad == 0, "cpu_gemm %s dtype %d M=%lld N=%lld K=%lld ta=%d tb=%d: %lld bad",
              cpu_gemm_variant(), (int)dt, (long long)M, (long long)N, (long long)K, ta, tb,
              (long long)bad);
        free(af);
        free(bf);
        free(ah);
        free(bh);
        free(C);
      }
}

/* ---- cpu_gemm_prepacked: B kept packed in a slot between calls */

/* C = op(A) · op(B) (+ bias, relu) in double: exact data, so compared with ==. */
static int64_t count_bad(const float *C, int64_t batch, int64_t M, int64_t N, int64_t K, const float *A,
                         int ta, const float *B, int tb, int64_t ldb, const float *bias) {
  int64_t bad = 0;
  for (int64_t bi = 0; bi < batch; bi++)
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        const float *Ab = A + bi * M * K;
        double sum = bias ? bias[j] : 0.0;
        for (int64_t k = 0; k < K; k++)
          sum += (double)(ta ? Ab[k * M + i] : Ab[i * K + k]) * (double)(tb ? B[j * ldb + k] : B[k * ldb + j]);
        if ((double)C[(bi * M + i) * N + j] != (sum < 0 ? 0.0 : sum)) bad++;
      }
  return bad;
}

static void test_prepacked(cpu_ctx *ctx) {
  const char *env = getenv("RLX_PREPACK");
  const int on = !(env && strcmp(env, "0") == 0);
  static const rlx_dtype dts[] = {RLX_F32, RLX_F16, RLX_BF16};
  /* odd edges against every micro-tile; K past one and two K blocks; M on
   * the A-reuse path and past it; M = 1 and N = 1 take the GEMV path
   * (N 16400: past one y block of the row-streamed GEMV, 16384) */
  static const int64_t shapes[][3] = {{7, 33, 19}, {37, 129, 1100}, {300, 45, 700}, {2, 5, 3},
                                      {1, 70, 40}, {50, 1, 64}, {1, 16400, 9}};
  for (int di = 0; di < 3; di++)
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
      for (int t = 0; t < 4; t++) {
        rlx_dtype dt = dts[di];
        int ta = t & 1, tb = t >> 1;
        int64_t M = shapes[si][0], N = shapes[si][1], K = shapes[si][2], batch = si == 0 ? 3 : 1;
        int64_t ldb = (tb ? K : N) + 3, b_rows = tb ? N : K, b_n = b_rows * ldb;
        float *A = malloc((size_t)(batch * M * K) * sizeof *A), *bias = malloc((size_t)N * sizeof *bias);
        float *B0 = malloc((size_t)b_n * sizeof *B0), *B1 = malloc((size_t)b_n * sizeof *B1);
        uint16_t *Bh = malloc((size_t)b_n * 2);
        float *C = malloc((size_t)(batch * M * N) * sizeof *C);
        float *Bstore = dt == RLX_F32 ? malloc((size_t)b_n * sizeof *Bstore) : NULL;
        for (int64_t i = 0; i < batch * M * K; i++) A[i] = exact_value();
        for (int64_t i = 0; i < N; i++) bias[i] = exact_value();
        for (int64_t i = 0; i < b_n; i++) B0[i] = exact_value(), B1[i] = exact_value();
        /* the operand's bytes: B0, later overwritten in place with B1 */
        void *bd = dt == RLX_F32 ? (void *)Bstore : (void *)Bh;
        for (int64_t i = 0; i < b_n; i++) {
          if (dt == RLX_F32) Bstore[i] = B0[i];
          else Bh[i] = to_half(dt, B0[i]);
        }
        gemm_operand a = {A, RLX_F32, ta, ta ? M : K, M * K, NULL};
        gemm_operand b = {bd, dt, tb, ldb, 0, NULL};
        gemm_epilogue ep = {.bias = bias, .act = RLX_ACT_RELU};
        gemm_prepack *slot = gemm_prepack_new();
        const int packs = on && M > 1 && N > 1;
        size_t total0 = gemm_prepack_total_bytes();
        char what[160];
        snprintf(what, sizeof what, "%s dtype %d M=%lld N=%lld K=%lld batch=%lld ta=%d tb=%d", cpu_gemm_variant(),
                 (int)dt, (long long)M, (long long)N, (long long)K, (long long)batch, ta, tb);
        /* first call packs, second reads the packed copy: both exact */
        for (int call = 0; call < 2; call++) {
          cpu_gemm_prepacked(call ? NULL : ctx, batch, M, N, K, &a, &b, slot, C, N, M * N, &ep);
          CHECK(count_bad(C, batch, M, N, K, A, ta, B0, tb, ldb, bias) == 0, "prepacked %s call %d", what, call);
        }
        size_t held = gemm_prepack_bytes(slot);
        CHECK(packs ? held >= (size_t)(K * N) * sizeof(float) : held == 0, "prepacked %s holds %zu bytes", what,
              held);
        CHECK(gemm_prepack_total_bytes() == total0 + held, "prepacked %s: total bytes", what);
        /* new bytes behind the same pointer: the copy is stale until reset */
        for (int64_t i = 0; i < b_n; i++) {
          if (dt == RLX_F32) Bstore[i] = B1[i];
          else Bh[i] = to_half(dt, B1[i]);
        }
        cpu_gemm_prepacked(ctx, batch, M, N, K, &a, &b, slot, C, N, M * N, &ep);
        CHECK(count_bad(C, batch, M, N, K, A, ta, packs ? B0 : B1, tb, ldb, bias) == 0,
              "prepacked %s: %s before the reset", what, packs ? "the packed copy used" : "repacked");
        gemm_prepack_reset(slot);
        CHECK(gemm_prepack_bytes(slot) == 0 && gemm_prepack_total_bytes() == total0, "prepacked %s: reset", what);
        cpu_gemm_prepacked(ctx, batch, M, N, K, &a, &b, slot, C, N, M * N, &ep);
        CHECK(count_bad(C, batch, M, N, K, A, ta, B1, tb, ldb, bias) == 0, "prepacked %s after the reset", what);
        /* another operand through the same slot (a pointer or layout change) repacks */
        float *B2 = malloc((size_t)b_n * sizeof *B2);
        memcpy(B2, B0, (size_t)b_n * sizeof *B2);
        gemm_operand b2 = {B2, RLX_F32, tb, ldb, 0, NULL};
        cpu_gemm_prepacked(ctx, batch, M, N, K, &a, &b2, slot, C, N, M * N, &ep);
        CHECK(count_bad(C, batch, M, N, K, A, ta, B0, tb, ldb, bias) == 0, "prepacked %s, another B", what);
        gemm_prepack_free(slot);
        CHECK(gemm_prepack_total_bytes() == total0, "prepacked %s: freed", what);
        free(B2);
        free(A);
        free(bias);
        free(B0);
        free(B1);
        free(Bh);
        free(Bstore);
        free(C);
      }
}

/* One matrix over several threads with the operand that all its tiles
 * need packed by the tiles as they go (gemm_pack.c's shared_pack), in every
 * dtype and layout: A shared by column tiles (several K blocks), B shared
 * by row tiles, B shared by row tiles of more rows than one A block over
 * more than one block of columns (on the scalar variant's small blocks),
 * and A shared by column tiles of more rows than one A block where B is
 * widened from F16/BF16 (F32: B shared by row tiles). */
static void test_shared_operands(cpu_ctx *ctx) {
  static const rlx_dtype dts[] = {RLX_F32, RLX_F16, RLX_BF16};
  /* M, N, K, and whether every dtype and layout (else F32, plain and both
   * transposed: the large one is about the blocking, not the packing) */
  static const int64_t shapes[][4] = {{40, 300, 1100, 1}, {600, 130, 300, 1}, {300, 1300, 480, 0}, {240, 520, 600, 1}};
  for (int di = 0; di < 3; di++)
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
      for (int t = 0; t < 4; t++) {
        if (!shapes[si][3] && (di > 0 || t == 1 || t == 2)) continue;
        rlx_dtype dt = dts[di];
        int ta = t & 1, tb = t >> 1;
        int64_t M = shapes[si][0], N = shapes[si][1], K = shapes[si][2];
        int64_t lda = (ta ? M : K) + 1, ldb = (tb ? K : N) + 3;
        int64_t a_n = (ta ? K : M) * lda, b_n = (tb ? N : K) * ldb;
        float *A = malloc((size_t)(M * K) * sizeof *A), *Af = malloc((size_t)a_n * sizeof *Af);
        float *B = malloc((size_t)b_n * sizeof *B), *bias = malloc((size_t)N * sizeof *bias);
        uint16_t *Ah = malloc((size_t)a_n * 2), *Bh = malloc((size_t)b_n * 2);
        float *C = malloc((size_t)(M * N) * sizeof *C);
        for (int64_t i = 0; i < N; i++) bias[i] = exact_value();
        for (int64_t i = 0; i < b_n; i++) B[i] = exact_value(), Bh[i] = to_half(dt, B[i]);
        /* count_bad reads A densely; the operand has a padded stride */
        for (int64_t r = 0; r < (ta ? K : M); r++)
          for (int64_t c = 0; c < lda; c++) {
            float v = exact_value();
            Af[r * lda + c] = v;
            Ah[r * lda + c] = to_half(dt, v);
            if (c < (ta ? M : K)) A[r * (ta ? M : K) + c] = v;
          }
        gemm_operand a = {dt == RLX_F32 ? (void *)Af : (void *)Ah, dt, ta, lda, 0, NULL};
        gemm_operand b = {dt == RLX_F32 ? (void *)B : (void *)Bh, dt, tb, ldb, 0, NULL};
        gemm_epilogue ep = {.bias = bias, .act = RLX_ACT_RELU};
        for (int call = 0; call < 2; call++) { /* the second reuses the shared buffer */
          cpu_gemm(ctx, 1, M, N, K, &a, &b, C, N, 0, &ep);
          CHECK(count_bad(C, 1, M, N, K, A, ta, B, tb, ldb, bias) == 0,
                "shared operand %s dtype %d M=%lld N=%lld K=%lld ta=%d tb=%d call %d", cpu_gemm_variant(),
                (int)dt, (long long)M, (long long)N, (long long)K, ta, tb, call);
        }
        free(A);
        free(Af);
        free(B);
        free(bias);
        free(Ah);
        free(Bh);
        free(C);
      }
}

static void test_variant(void) {
  const char *v = cpu_gemm_variant();
  const char *no2 = getenv("RLX_NO_AVX2"), *no512 = getenv("RLX_NO_AVX512");
  if (no2 && *no2 && *no2 != '0') CHECK(strcmp(v, "scalar") == 0, "RLX_NO_AVX2 gave %s", v);
  if (no512 && *no512 && *no512 != '0') CHECK(strcmp(v, "avx512") != 0, "RLX_NO_AVX512 gave %s", v);
  printf("gemm variant: %s\n", v);
}

int main(void) {
  rng_seed(0x9E3779B97F4A7C15ull);
  cpu_ctx *ctx = cpu_ctx_new(0);
  printf("threads: %d\n", cpu_ctx_threads(ctx));
  test_variant();
  test_shapes(ctx);
  test_k0(ctx);
  test_acts(ctx);
  test_random_data(ctx);
  test_batched(ctx);
  test_prepacked(ctx);
  test_shared_operands(ctx);
  cpu_ctx_free(ctx);
  return check_report();
}
