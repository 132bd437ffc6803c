/* test_bgemm.c — the BF16 GEMM (bgemm.h, vdpbf16ps) against dot products
 * in double.
 *
 * w: random BF16 patterns of normal values; x: normal F32 values. Each
 * output is checked twice: against sum_k bf16(x_k) w_k in double (the
 * kernel's rounding of x, nearest even, computed here by rlx_f32_to_bf16:
 * |error| <= 1e-5 sum_k |bf16(x_k) w_k|, F32 accumulation over up to a few
 * thousand terms), and against sum_k x_k w_k (<= 2^-8 sum_k |x_k w_k|:
 * rounding x to BF16 moves each term by at most 2^-9 of itself). Shapes:
 * K odd and even, 1 and past one panel block (1024 pairs... 1100 values),
 * N below, at and past a 32-row panel (ragged), M from 9 (the first row
 * count past the dot kernels) to 40 (several 12-row tiles, a ragged last).
 * Then cpu_DequantMatMul of BF16 weights at M 20, which takes this kernel,
 * and of F64 x, rounded to F32 first. CTest runs it with 1 and 2 threads.
 * Skips (77) on a CPU without AVX-512 BF16.
 */
#include "backend/cpu/bgemm.h"
#include "backend/cpu/cpu.h"
#include "check.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;

static uint32_t rng_next(void) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(rng_state >> 33);
}

static float normal_value(void) {
  double u = ((double)rng_next() + 1.0) / 4294967297.0, v = (double)rng_next() / 4294967296.0;
  return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

/* Outputs of y [M, N] off from x [M, K] (F32 values) @ w [N, K]^T. */
static int compare(const float *x, const uint16_t *w, const float *y, int64_t M, int64_t N, int64_t K,
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
      const double got = y[i * N + j];
      if ((!(fabs(got - rounded) <= 1e-5 * rmag) || !(fabs(got - exact) <= 0x1p-8 * emag)) && bad++ < 3)
        printf("  %s M %lld N %lld K %lld at [%lld, %lld]: got %.9g, bf16 x %.9g, exact %.9g\n", what,
               (long long)M, (long long)N, (long long)K, (long long)i, (long long)j, got, rounded, exact);
    }
  return bad;
}

static void fill(float *x, int64_t nx, uint16_t *w, int64_t nw) {
  for (int64_t i = 0; i < nx; i++) x[i] = normal_value();
  for (int64_t i = 0; i < nw; i++) w[i] = rlx_f32_to_bf16(normal_value());
}

static void test_shape(cpu_ctx *ctx, int64_t M, int64_t N, int64_t K) {
  float *x = malloc((size_t)(M * K) * sizeof *x), *y = malloc((size_t)(M * N) * sizeof *y);
  uint16_t *w = malloc((size_t)(N * K) * sizeof *w);
  fill(x, M * K, w, N * K);
  CHECK(bgemm_bf16(ctx, x, M, w, N, K, y) == 0, "M %lld N %lld K %lld: out of memory", (long long)M,
        (long long)N, (long long)K);
  const int bad = compare(x, w, y, M, N, K, "bgemm");
  CHECK(bad == 0, "bgemm M %lld N %lld K %lld: %d outputs off", (long long)M, (long long)N, (long long)K, bad);
  free(x), free(y), free(w);
}

static void set_tensor(cpu_tensor *t, void *data, rlx_dtype dt, int64_t rows, int64_t cols) {
  memset(t, 0, sizeof *t);
  t->data = data;
  t->dtype = dt;
  t->rank = 2;
  t->d[0] = rows;
  t->d[1] = cols;
  t->numel = rows * cols;
  t->nbytes = rlx_dtype_nbytes(dt, t->numel);
}

/* DequantMatMul of BF16 w: F32 x and F64 x (rounded to F32, then as F32). */
static void test_kernel(cpu_ctx *ctx) {
  const int64_t M = 20, N = 45, K = 200;
  float *x = malloc((size_t)(M * K) * sizeof *x), *y = malloc((size_t)(M * N) * sizeof *y);
  double *xd = malloc((size_t)(M * K) * sizeof *xd), *yd = malloc((size_t)(M * N) * sizeof *yd);
  uint16_t *w = malloc((size_t)(N * K) * sizeof *w);
  fill(x, M * K, w, N * K);
  for (int64_t i = 0; i < M * K; i++) xd[i] = x[i];
  ir_node node;
  memset(&node, 0, sizeof node);
  node.op = RLX_OP_DequantMatMul;
  cpu_tensor in[2], out;
  set_tensor(&in[0], x, RLX_F32, M, K);
  set_tensor(&in[1], w, RLX_BF16, N, K);
  set_tensor(&out, y, RLX_F32, M, N);
  CHECK(cpu_DequantMatMul(ctx, &node, in, &out) == RLX_OK, "F32 x: %s", rlx_last_error());
  int bad = compare(x, w, y, M, N, K, "DequantMatMul F32 x");
  CHECK(bad == 0, "DequantMatMul F32 x: %d outputs off", bad);
  set_tensor(&in[0], xd, RLX_F64, M, K);
  set_tensor(&out, yd, RLX_F64, M, N);
  CHECK(cpu_DequantMatMul(ctx, &node, in, &out) == RLX_OK, "F64 x: %s", rlx_last_error());
  for (int64_t i = 0; i < M * N; i++) y[i] = (float)yd[i];
  bad = compare(x, w, y, M, N, K, "DequantMatMul F64 x");
  CHECK(bad == 0, "DequantMatMul F64 x: %d outputs off", bad);
  free(x), free(y), free(xd), free(yd), free(w);
}

int main(void) {
  if (!bgemm_available()) {
    printf("no AVX-512 BF16 on this CPU: skipped\n");
    return 77;
  }
  cpu_ctx *ctx = cpu_ctx_new(0);
  printf("bgemm: %d threads\n", cpu_ctx_threads(ctx));
  static const int64_t shapes[][3] = {{9, 1, 1},   {9, 16, 2},   {10, 31, 7},    {12, 32, 64},  {13, 33, 33},
                                      {17, 64, 96}, {24, 70, 576}, {25, 45, 1100}, {40, 96, 2049}, {37, 5, 31}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    test_shape(ctx, shapes[s][0], shapes[s][1], shapes[s][2]);
  test_kernel(ctx);
  cpu_ctx_free(ctx);
  return check_report();
}
