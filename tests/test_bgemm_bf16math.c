/* test_bgemm_bf16math.c — RLX_FLAG_BF16_MATH: the vdpbf16ps GEMM of BF16
 * weights (bgemm_avx512, bgemm.h) against dot products in double, and
 * which path DequantMatMul takes with and without the flag.
 *
 * 1. bgemm_avx512 on normal x and BF16 w, each output against sum_k
 *    bf16(x_k) w_k in double (x rounded here by rlx_f32_to_bf16, nearest
 *    even): products of BF16 values are exact in F32, and each pair of k
 *    and each K block's sum adds at most two roundings, so |error| <= (K +
 *    8) 2^-24 sum_k |bf16(x_k) w_k|; and against sum_k x_k w_k within 2^-8
 *    of the magnitude (rounding x moves a term by at most 2^-9 of itself).
 *    Shapes: K odd and even, within one 32-value transpose and past one
 *    512-pair panel block (1100, 2049); N below, at and past a 32-row panel
 *    and past a group of 8 panels (300: a ragged group, its last panel
 *    ragged); M from 9 (the first row count past the dot kernels) to 40
 *    (12-row tiles, a ragged last). Skipped where the kernel does not run.
 * 2. cpu_DequantMatMul (M 20 > QDOT_MAX_ROWS) of F32 and F64 x, and 3. a
 *    compiled session (the flag through rlx_options.flags to the CPU plan;
 *    sessions with and without it in turn, so an idle plan is never taken
 *    by the other mode), on x = b (1 + 2^-10) for positive BF16 values b
 *    and positive w: x rounds to b, so the rounded product is 2^-10 below
 *    the exact one, far past either bound. Without the flag, with RLX_NO_
 *    AVX512=1 (CTest's _noavx512 run) and where AMX BF16 tiles take the
 *    product, it must be the exact one (F32 SGEMM or the tiles' three
 *    parts: within (3K + 8) 2^-24 of the magnitude); with the flag where
 *    bgemm_avx512 runs, the rounded one.
 * CTest runs it with 1 and 2 threads and with RLX_NO_AVX512=1.
 */
#include "backend/cpu/bgemm.h"
#include "backend/cpu/cpu.h"
#include "check.h"
#include "cpu_matrix.h"
#include "rng.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* Outputs of y [M, N] off from x [M, K] @ w [N, K]^T: with round_x, from
 * the product of x rounded to BF16 within (K + 8) 2^-24 and from the exact
 * one within 2^-8 of the magnitude; else from the exact one within (3K +
 * 8) 2^-24. */
static int compare(const float *x, const uint16_t *w, const float *y, int64_t M, int64_t N, int64_t K, int round_x,
                   const char *what) {
  int bad = 0;
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double rounded = 0, rmag = 0, exact = 0, emag = 0;
      for (int64_t k = 0; k < K; k++) {
        const double wk = rlx_bf16_to_f32(w[j * K + k]), xk = x[i * K + k];
        const double xr = rlx_bf16_to_f32(rlx_f32_to_bf16(x[i * K + k]));
        rounded += xr * wk, rmag += fabs(xr * wk);
        exact += xk * wk, emag += fabs(xk * wk);
      }
      const double got = y[i * N + j], eps = 0x1p-24 * (double)K;
      const int ok = round_x ? fabs(got - rounded) <= (eps + 8 * 0x1p-24) * rmag && fabs(got - exact) <= 0x1p-8 * emag
                             : fabs(got - exact) <= (3 * eps + 8 * 0x1p-24) * emag;
      if (!ok && bad++ < 3)
        printf("  %s M %lld N %lld K %lld at [%lld, %lld]: got %.9g, bf16 x %.9g, exact %.9g\n", what, (long long)M,
               (long long)N, (long long)K, (long long)i, (long long)j, got, rounded, exact);
    }
  return bad;
}

static void test_shape(cpu_ctx *ctx, int64_t M, int64_t N, int64_t K) {
  float *x = malloc((size_t)(M * K) * sizeof *x), *y = malloc((size_t)(M * N) * sizeof *y);
  uint16_t *w = malloc((size_t)(N * K) * sizeof *w);
  for (int64_t i = 0; i < M * K; i++) x[i] = (float)normal_value();
  for (int64_t i = 0; i < N * K; i++) w[i] = rlx_f32_to_bf16((float)normal_value());
  CHECK(bgemm_avx512(ctx, M, N, K, x, w, y) == 0, "M %lld N %lld K %lld: out of memory", (long long)M,
        (long long)N, (long long)K);
  const int bad = compare(x, w, y, M, N, K, 1, "bgemm_avx512");
  CHECK(bad == 0, "bgemm_avx512 M %lld N %lld K %lld: %d outputs off", (long long)M, (long long)N, (long long)K,
        bad);
  free(x), free(y), free(w);
}

enum { M = 20, N = 45, K = 200 };

/* x = b (1 + 2^-10) for BF16 b in [0.5, 2), w BF16 in [0.5, 2). */
static void fill_biased(float *x, uint16_t *w) {
  for (int i = 0; i < M * K; i++)
    x[i] = rlx_bf16_to_f32(rlx_f32_to_bf16((float)(0.5 + 1.5 * rng_uniform()))) * (1.0f + 0x1p-10f);
  for (int i = 0; i < N * K; i++) w[i] = rlx_f32_to_bf16((float)(0.5 + 1.5 * rng_uniform()));
}

/* DequantMatMul of BF16 w on a context with flags: F32 x and F64 x
 * (rounded to F32, then as F32). */
static void test_kernel(unsigned flags, int round_x) {
  cpu_ctx *ctx = cpu_ctx_new(0);
  cpu_ctx_set_flags(ctx, flags);
  static float x[M * K], y[M * N], y64[M * N];
  static uint16_t w[N * K];
  fill_biased(x, w);
  CHECK(dequant_matmul_f32_f64(ctx, x, w, RLX_BF16, M, N, K, y, y64) == RLX_OK, "flags %u: %s", flags,
        rlx_last_error());
  int bad = compare(x, w, y, M, N, K, round_x, "DequantMatMul F32 x");
  CHECK(bad == 0, "DequantMatMul F32 x, flags %u: %d outputs off", flags, bad);
  bad = compare(x, w, y64, M, N, K, round_x, "DequantMatMul F64 x");
  CHECK(bad == 0, "DequantMatMul F64 x, flags %u: %d outputs off", flags, bad);
  cpu_ctx_free(ctx);
}

/* The same product as a compiled graph, flags in rlx_options. */
static void test_session(const rlx_graph *g, unsigned flags, int round_x) {
  static float x[M * K], y[M * N];
  static uint16_t w[N * K];
  fill_biased(x, w);
  rlx_options o = {RLX_DEVICE_CPU, 0, flags, 0, NULL};
  rlx_session *s = NULL;
  rlx_status st = rlx_compile(g, &o, &s);
  if (!st) st = rlx_set_input(s, "x", x, sizeof x);
  if (!st) st = rlx_set_param(s, "w", w, sizeof w);
  if (!st) st = rlx_run(s);
  if (!st) st = rlx_output(s, 0, y, sizeof y);
  CHECK(st == RLX_OK, "session, flags %u: %s", flags, rlx_last_error());
  const int bad = st ? 0 : compare(x, w, y, M, N, K, round_x, "session");
  CHECK(bad == 0, "session, flags %u: %d outputs off", flags, bad);
  rlx_session_free(s);
}

int main(void) {
  rng_seed(0x2545F4914F6CDD1Dull);
  /* the flag's path: AMX BF16 tiles (exact) go first where they run */
  const int rounds = bgemm_avx512_supported() && !bgemm_amx_supported();
  printf("bgemm_avx512 %s; with the flag DequantMatMul of BF16 weights is %s\n",
         bgemm_avx512_supported() ? "runs" : "does not run here", rounds ? "rounded" : "exact");
  if (bgemm_avx512_supported()) {
    cpu_ctx *ctx = cpu_ctx_new(0);
    printf("bgemm_avx512: %d threads\n", cpu_ctx_threads(ctx));
    static const int64_t shapes[][3] = {{9, 1, 1},     {9, 16, 2},    {10, 31, 7},   {12, 32, 64},
                                        {13, 33, 33},  {17, 64, 96},  {24, 70, 576}, {25, 45, 1100},
                                        {40, 96, 2049}, {37, 5, 31},  {12, 33, 1025}, {29, 300, 1100}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
      test_shape(ctx, shapes[s][0], shapes[s][1], shapes[s][2]);
    cpu_ctx_free(ctx);
  }
  test_kernel(0, 0);
  test_kernel(RLX_FLAG_BF16_MATH, rounds);
  rlx_graph *g = rlx_graph_new("bf16_math");
  rlx_node x = rlx_input(g, "x", RLX_F32, 2, (const int64_t[]){M, K});
  rlx_node w = rlx_param(g, "w", RLX_BF16, 2, (const int64_t[]){N, K});
  CHECK(rlx_graph_set_outputs(g, 1, (rlx_node[]){rlx_dequant_matmul(g, x, w)}) == RLX_OK, "graph: %s",
        rlx_last_error());
  test_session(g, RLX_FLAG_BF16_MATH, rounds);
  test_session(g, 0, 0);
  test_session(g, RLX_FLAG_BF16_MATH, rounds);
  rlx_graph_free(g);
  return check_report();
}
