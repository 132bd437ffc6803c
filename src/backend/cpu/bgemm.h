/* bgemm.h — y = x @ w^T for BF16 weights on AVX-512 BF16 (vdpbf16ps),
 * the prefill product of BF16 GGUF matrices (k_quant.c).
 *
 * x [M, K] F32 is rounded to BF16 (nearest even, as llama.cpp rounds the
 * activations of its BF16 path) and packed once per call in tiles of
 * BGEMM_MR rows, each pair of k a 32-bit lane; w [N, K] BF16 is read in
 * place (the mapped file) and packed per task into a panel of BGEMM_NR
 * rows by BGEMM_KC pairs (the L2 share of one core), so the weights need
 * no resident copy. Products of pairs accumulate in F32 (vdpbf16ps);
 * y [M, N] F32 is written, never read before (K blocks after the first
 * add to it). vdpbf16ps does 32 multiply-adds an instruction against
 * vfmadd231ps's 16 (Zen 4 and Sapphire Rapids issue either once a cycle
 * on zmm), so this runs at up to twice the SGEMM's rate over widened
 * weights. */
#ifndef RLX_CPU_BGEMM_H
#define RLX_CPU_BGEMM_H

#include "cpu.h"

#include <stdint.h>

/* 1 when the CPU has AVX-512 BF16 (and AVX-512 is not turned off by
 * RLX_NO_AVX512) and this build compiled the kernel. */
int bgemm_available(void);

/* y [M, N] = x [M, K] @ w [N, K]^T, w rows of K BF16 values (K > 0), over
 * ctx's threads. Returns 0, or -1 when out of memory (y then undefined).
 * Only call when bgemm_available(). */
int bgemm_bf16(cpu_ctx *ctx, const float *x, int64_t M, const uint16_t *w, int64_t N, int64_t K, float *y);

#endif /* RLX_CPU_BGEMM_H */
