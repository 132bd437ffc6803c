/* gemm.h — the CPU backend's single-precision GEMM with a fused epilogue.
 *
 *   C[M,N] = act(op(A)[M,K] · op(B)[K,N] + bias[N])
 *
 * op(X) is X or its transpose (trans_*: X is stored [K,M] / [N,K]); row
 * strides lda/ldb/ldc in elements. bias may be NULL; act RLX_ACT_NONE for
 * none (alpha: leaky_relu slope). The epilogue is applied in registers
 * before C is stored. Threads over the ctx's pool (ctx NULL: serial).
 * AVX2/FMA packed kernel when the CPU has it (runtime detection), a scalar
 * path otherwise; both give the same results up to summation order.
 */
#ifndef RLX_GEMM_H
#define RLX_GEMM_H

#include "cpu.h"

typedef struct {
  const float *bias;   /* [N] or NULL */
  rlx_act act;
  float alpha;
} gemm_epilogue;

void cpu_sgemm(cpu_ctx *ctx, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, const float *A,
               int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc, const gemm_epilogue *ep);

#endif /* RLX_GEMM_H */
