/* test_bgemm.c — the BF16- and F16-weight GEMM on AMX tiles (bgemm.h)
 * against dot products in double.
 *
 * w: normal values rounded to BF16 or F16; x: normal F32 values. The
 * kernel multiplies x's three BF16 parts (x to within 2^-24 of itself)
 * exactly by w's parts (BF16: 1, F16: 2) and sums in F32: at most 2
 * roundings per pair of k and pair of parts (the pair's sum, then the
 * accumulation), 3PK in all for P weight parts, so |error| <= (3PK + 3)
 * 2^-24 sum_k |x_k w_k| (the + 3: x's residue and the last steps). x or
 * an F16 w rounded to BF16 once instead moves a sum by about 2^-9 sqrt(K)
 * of its terms' magnitude over K, past this bound for K up to a few
 * hundred (the shapes below from K 7 to 576). Shapes: K odd and
 * even, within one 32-k chunk and past one 256-k block (1100, 2049); N
 * below, at and past a 32-row block (ragged); M from 9 to 40 (several
 * 16-token tiles, a ragged last). Then cpu_DequantMatMul of such weights
 * at M 20, which takes this kernel, and of F64 x, rounded to F32 first.
 * CTest runs it with 1 and 2 threads. Skips (77) where AMX BF16 does not
 * run (cpu_amx_bf16).
 */
#include "backend/cpu/bgemm.h"
#include "backend/cpu/cpu.h"
#include "check.h"
#include "cpu_matrix.h"
#include "rng.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

static rlx_dtype wt; /* the weights' dtype of this pass: RLX_BF16 or RLX_F16 */

static double weight(uint16_t v) { return wt == RLX_F16 ? rlx_f16_to_f32(v) : rlx_bf16_to_f32(v); }

/* Outputs of y [M, N] off from x [M, K] (F32 values) @ w [N, K]^T. */
static int compare(const float *x, const uint16_t *w, const float *y, int64_t M, int64_t N, int64_t K,
                   const char *what) {
  int bad = 0;
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double exact = 0, emag = 0;
      for (int64_t k = 0; k < K; k++) {
        const double wk = weight(w[j * K + k]), xk = x[i * K + k];
        exact += xk * wk, emag += fabs(xk * wk);
      }
      const double got = y[i * N + j];
      const double parts = wt == RLX_F16 ? 6.0 : 3.0;
      if (!(fabs(got - exact) <= (parts * (double)K + 3.0) * 0x1p-24 * emag) && bad++ < 3)
        printf("  %s %s M %lld N %lld K %lld at [%lld, %lld]: got %.9g, exact %.9g (off %.3g of the magnitude)\n",
               rlx_dtype_name(wt), what, (long long)M, (long long)N, (long long)K, (long long)i, (long long)j, got,
               exact, fabs(got - exact) / emag);
    }
  return bad;
}

static void fill(float *x, int64_t nx, uint16_t *w, int64_t nw) {
  for (int64_t i = 0; i < nx; i++) x[i] = (float)normal_value();
  for (int64_t i = 0; i < nw; i++) {
    const float v = (float)normal_value();
    w[i] = wt == RLX_F16 ? rlx_f32_to_f16(v) : rlx_f32_to_bf16(v);
  }
}

static void test_shape(cpu_ctx *ctx, int64_t M, int64_t N, int64_t K) {
  float *x = malloc((size_t)(M * K) * sizeof *x), *y = malloc((size_t)(M * N) * sizeof *y);
  uint16_t *w = malloc((size_t)(N * K) * sizeof *w);
  fill(x, M * K, w, N * K);
  CHECK(bgemm_amx(ctx, M, N, K, x, w, wt, y) == 0, "M %lld N %lld K %lld: out of memory", (long long)M,
        (long long)N, (long long)K);
  const int bad = compare(x, w, y, M, N, K, "bgemm");
  CHECK(bad == 0, "bgemm %s M %lld N %lld K %lld: %d outputs off", rlx_dtype_name(wt), (long long)M, (long long)N,
        (long long)K, bad);
  free(x), free(y), free(w);
}

/* DequantMatMul of wt weights: F32 x and F64 x (rounded to F32, then as F32). */
static void test_kernel(cpu_ctx *ctx) {
  const int64_t M = 20, N = 45, K = 200;
  float *x = malloc((size_t)(M * K) * sizeof *x), *y = malloc((size_t)(M * N) * sizeof *y);
  float *y64 = malloc((size_t)(M * N) * sizeof *y64);
  uint16_t *w = malloc((size_t)(N * K) * sizeof *w);
  fill(x, M * K, w, N * K);
  CHECK(dequant_matmul_f32_f64(ctx, x, w, wt, M, N, K, y, y64) == RLX_OK, "DequantMatMul: %s", rlx_last_error());
  int bad = compare(x, w, y, M, N, K, "DequantMatMul F32 x");
  CHECK(bad == 0, "DequantMatMul F32 x: %d outputs off", bad);
  bad = compare(x, w, y64, M, N, K, "DequantMatMul F64 x");
  CHECK(bad == 0, "DequantMatMul F64 x: %d outputs off", bad);
  free(x), free(y), free(y64), free(w);
}

int main(void) {
  rng_seed(0x2545F4914F6CDD1Dull);
  if (!bgemm_amx_supported()) {
    printf("AMX BF16 does not run here: skipped\n");
    return 77;
  }
  cpu_ctx *ctx = cpu_ctx_new(0);
  printf("bgemm: %d threads\n", cpu_ctx_threads(ctx));
  static const int64_t shapes[][3] = {{9, 1, 1},     {9, 16, 2},     {10, 31, 7},    {12, 32, 64},
                                      {13, 33, 33},  {17, 64, 96},   {24, 70, 576},  {25, 45, 1100},
                                      {40, 96, 2049}, {33, 64, 576}, {37, 5, 31}};
  static const rlx_dtype types[] = {RLX_BF16, RLX_F16};
  for (size_t t = 0; t < 2; t++) {
    wt = types[t];
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
      test_shape(ctx, shapes[s][0], shapes[s][1], shapes[s][2]);
    test_kernel(ctx);
  }
  cpu_ctx_free(ctx);
  return check_report();
}
