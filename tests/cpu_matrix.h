/* cpu_matrix.h — a row-major [rows, cols] cpu_tensor over the caller's
 * memory, for the tests and benchmarks that call CPU kernels directly. */
#ifndef RLX_CPU_MATRIX_H
#define RLX_CPU_MATRIX_H

#include "backend/cpu/cpu.h"

#include <stdlib.h>
#include <string.h>

static inline void set_matrix(cpu_tensor *t, void *data, rlx_dtype dt, int64_t rows, int64_t cols) {
  memset(t, 0, sizeof *t);
  t->data = data;
  t->dtype = dt;
  t->rank = 2;
  t->d[0] = rows;
  t->d[1] = cols;
  t->numel = rows * cols;
  t->nbytes = rlx_dtype_nbytes(dt, t->numel);
}

/* cpu_DequantMatMul of x [M, K] by w [N, K] (dtype wt) with x as F32, then
 * as F64 (the same values, so rounded to F32 first): y32 gets the first
 * product, y64 the second rounded to F32, for the caller to compare each.
 * The first failing status (its message in rlx_last_error). */
static inline rlx_status dequant_matmul_f32_f64(cpu_ctx *ctx, float *x, void *w, rlx_dtype wt, int64_t M,
                                                int64_t N, int64_t K, float *y32, float *y64) {
  double *xd = malloc((size_t)(M * K) * sizeof *xd), *yd = malloc((size_t)(M * N) * sizeof *yd);
  if (!xd || !yd) {
    free(xd), free(yd);
    return RLX_ERR_NOMEM;
  }
  for (int64_t i = 0; i < M * K; i++) xd[i] = x[i];
  ir_node node;
  memset(&node, 0, sizeof node);
  node.op = RLX_OP_DequantMatMul;
  cpu_tensor in[2], out;
  set_matrix(&in[0], x, RLX_F32, M, K);
  set_matrix(&in[1], w, wt, N, K);
  set_matrix(&out, y32, RLX_F32, M, N);
  rlx_status st = cpu_DequantMatMul(ctx, &node, in, &out);
  if (st == RLX_OK) {
    set_matrix(&in[0], xd, RLX_F64, M, K);
    set_matrix(&out, yd, RLX_F64, M, N);
    st = cpu_DequantMatMul(ctx, &node, in, &out);
  }
  for (int64_t i = 0; st == RLX_OK && i < M * N; i++) y64[i] = (float)yd[i];
  free(xd), free(yd);
  return st;
}

#endif /* RLX_CPU_MATRIX_H */
