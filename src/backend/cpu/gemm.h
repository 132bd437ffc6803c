/* gemm.h — the CPU backend's single-precision GEMM with a fused epilogue.
 *
 *   C[M,N] = act(op(A)[M,K] · op(B)[K,N] + bias[N])
 *
 * op(X) is X or its transpose (trans_*: X is stored [K,M] / [N,K]); row
 * strides lda/ldb/ldc in elements. bias may be NULL; act RLX_ACT_NONE for
 * none (alpha: leaky_relu slope). The epilogue is applied in registers
 * before C is stored. Threads over the ctx's pool (ctx NULL: serial).
 * AVX-512 or AVX2/FMA packed kernels when the CPU has them (run-time
 * detection, cpu_features.h), a scalar path otherwise; all give the same
 * results up to summation order (and the last bits of the transcendental
 * activations).
 *
 * Accumulation is in F32. K = 0 gives C = act(bias) (0 without bias).
 * C must not overlap A, B or bias. M, N, K >= 0 (a negative size is a
 * caller bug: nothing is computed). cpu_sgemm needs no memory of its own
 * to be correct: if its packing buffers cannot be had, an unpacked loop
 * computes the same.
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

/* ---- the general entry: batches and F16/BF16 operands */

/* One operand of cpu_gemm: a matrix stored as `dtype` (RLX_F32, RLX_F16 or
 * RLX_BF16; converted to F32 while packing, accumulation in F32), or a batch
 * of them. Matrix b of the batch starts at element batch_offsets[b] of data
 * when batch_offsets is given, else at b * batch_stride (0: one matrix
 * shared by the whole batch, as in broadcasting). */
typedef struct {
  const void *data;
  rlx_dtype dtype;
  int trans;                    /* A: stored [K,M]; B: stored [N,K] */
  int64_t ld;                   /* row stride of the stored matrix, elements */
  int64_t batch_stride;
  const int64_t *batch_offsets; /* [batch] or NULL */
} gemm_operand;

/* For b in [0, batch): C + b*c_batch_stride = act(op(A_b) · op(B_b) + bias),
 * each C_b [M,N] with row stride ldc, F32. Threads over batches and tiles
 * together. An operand of another dtype is a caller bug (nothing computed). */
void cpu_gemm(cpu_ctx *ctx, int64_t batch, int64_t M, int64_t N, int64_t K, const gemm_operand *a,
              const gemm_operand *b, float *C, int64_t ldc, int64_t c_batch_stride,
              const gemm_epilogue *ep);

/* The kernel variant cpu_gemm runs with on this CPU after the RLX_NO_AVX2 /
 * RLX_NO_AVX512 overrides (cpu_features.h): "avx512", "avx2" or "scalar". */
const char *cpu_gemm_variant(void);

#endif /* RLX_GEMM_H */
