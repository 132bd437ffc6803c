/* gemm_scalar.c — the portable SGEMM variant: plain C micro-kernel and
 * GEMV loops, epilogue through the reference scalar math. Used when the
 * CPU has no AVX2/FMA (or RLX_NO_AVX2=1), and for the pieces the vector
 * variants leave to it. */
#include "elementwise_math.h"
#include "gemm_kernels.h"

#define MR 4
#define NR 8

void gemm_scalar_convert(const void *src, rlx_dtype dt, float *dst, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = gemm_load(src, dt, i);
}

void gemm_scalar_act_row(float *y, int64_t n, rlx_act act, float alpha) {
  if (act == RLX_ACT_NONE) return;
  for (int64_t j = 0; j < n; j++) y[j] = (float)cpu_act_apply(act, y[j], alpha);
}

void gemm_scalar_pack_t(const float *src, int64_t ld, int64_t rows, int64_t kc, float *dst,
                        int64_t dst_stride) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t k = 0; k < kc; k++) dst[k * dst_stride + r] = src[r * ld + k];
}

static void scalar_pack_b(const float *src, int64_t ld, int64_t kc, int64_t nc, float *dst) {
  for (int64_t k = 0; k < kc; k++)
    for (int64_t j0 = 0; j0 < nc; j0 += NR) {
      float *d = dst + (j0 / NR * kc + k) * NR;
      for (int64_t j = 0; j < NR; j++) d[j] = j0 + j < nc ? src[k * ld + j0 + j] : 0.0f;
    }
}

static void scalar_epilogue(float *y, int64_t n, const float *bias, int bias_step, rlx_act act,
                            float alpha) {
  if (bias)
    for (int64_t j = 0; j < n; j++) y[j] += bias[j * bias_step];
  gemm_scalar_act_row(y, n, act, alpha);
}

void gemm_scalar_row_post(float *y, int64_t n, float add, const float *res, rlx_act act, float alpha,
                          int clamp, float lo, float hi) {
  for (int64_t j = 0; j < n; j++) y[j] += add + (res ? res[j] : 0.0f);
  gemm_scalar_act_row(y, n, act, alpha);
  for (int64_t j = 0; clamp && j < n; j++) { /* selects: NaN stays */
    float v = y[j] < lo ? lo : y[j];
    y[j] = v > hi ? hi : v;
  }
}

static void scalar_micro(int mr, int nr, int64_t kc, const float *Ap, const float *Bp, float *C,
                         int64_t ldc, int flags, const gemm_tile_epilogue *ep) {
  float acc[MR][NR] = {{0}};
  for (int64_t k = 0; k < kc; k++) {
    const float *a = Ap + k * mr, *b = Bp + k * NR;
    for (int i = 0; i < mr; i++)
      for (int j = 0; j < NR; j++) acc[i][j] += a[i] * b[j];
  }
  for (int i = 0; i < mr; i++) {
    float *c = C + i * ldc;
    for (int j = 0; j < nr; j++) c[j] = (flags & GEMM_ACCUMULATE) ? c[j] + acc[i][j] : acc[i][j];
    if (flags & GEMM_LAST) scalar_epilogue(c, nr, ep->bias, 1, ep->act, ep->alpha);
  }
}

static void scalar_gemv_rows(int64_t K, int64_t n, const float *x, const void *R, rlx_dtype dt,
                             int64_t ld, float *y) {
  for (int64_t j = 0; j < n; j++) y[j] = 0.0f;
  for (int64_t k = 0; k < K; k++)
    for (int64_t j = 0; j < n; j++) y[j] += x[k] * gemm_load(R, dt, k * ld + j);
}

static void scalar_gemv_dots(int64_t K, int64_t n, const float *x, const void *R, rlx_dtype dt,
                             int64_t ld, float *y) {
  for (int64_t j = 0; j < n; j++) {
    float s = 0.0f;
    for (int64_t k = 0; k < K; k++) s += gemm_load(R, dt, j * ld + k) * x[k];
    y[j] = s;
  }
}

const gemm_isa gemm_isa_scalar = {
    .name = "scalar", .mr_max = MR, .nr_max = NR, .kc = 256, .mc = 64, .nc = 1024,
    .a_block_floats = 16 * 1024, .b_block_floats = 16 * 1024,
    .micro = scalar_micro, .gemv_rows = scalar_gemv_rows, .gemv_dots = scalar_gemv_dots,
    .epilogue = scalar_epilogue, .row_post = gemm_scalar_row_post, .convert = gemm_scalar_convert,
    .pack_t = gemm_scalar_pack_t, .pack_b = scalar_pack_b,
};
