/* bgemm.h — the prefill GEMM of BF16 and F16 weights on AMX BF16 tiles.
 *
 * y [M, N] = x [M, K] @ w [N, K]^T for F32 x and y and BF16 or F16 w,
 * read in place. x is split into three BF16 parts, x = hi + mid + lo (each
 * the round-to-nearest of what the ones before leave), which hold x's
 * 24-bit significand, and F16 w into two (its 11-bit significand): the
 * products of the parts are exact and tdpbf16ps sums them in F32, so the
 * result is the F32 product's up to the order of the sums, as the SGEMM
 * over widened weights gives and the decode's dot kernels (F32 x) agree
 * with. x rounded to BF16 once (llama.cpp's BF16 path) would move the
 * logits by about 5e-2.
 */
#ifndef RLX_BGEMM_H
#define RLX_BGEMM_H

#include "cpu.h"

#include <stdint.h>

/* 1 where the tile GEMM runs: AVX-512 BW and cpu_amx_bf16(), RLX_NO_AMX
 * unset. */
int bgemm_amx_supported(void);

/* y = x @ w^T as above on the thread pool; any M, N, K; wtype RLX_BF16 or
 * RLX_F16. 0, or -1 when its buffers cannot be allocated (y untouched). */
int bgemm_amx(cpu_ctx *ctx, int64_t M, int64_t N, int64_t K, const float *x, const uint16_t *w, rlx_dtype wtype,
              float *y);

#endif /* RLX_BGEMM_H */
