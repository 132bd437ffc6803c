/* bgemm.h — the prefill GEMMs of BF16 and F16 weights: y [M, N] = x [M, K]
 * @ w [N, K]^T for F32 x and y, w read in place.
 *
 * bgemm_amx, exact, on AMX BF16 tiles: x is split into three BF16 parts,
 * x = hi + mid + lo (each the round-to-nearest of what the ones before
 * leave), which hold x's 24-bit significand, and F16 w into two (its
 * 11-bit significand): the products of the parts are exact and tdpbf16ps
 * sums them in F32, so the result is the F32 product's up to the order of
 * the sums, as the SGEMM over widened weights gives and the decode's dot
 * kernels (F32 x) agree with.
 *
 * bgemm_avx512, under RLX_FLAG_BF16_MATH only, on AVX-512 BF16: x rounded
 * to BF16 once (nearest even, as llama.cpp's BF16 path does), pairs of k
 * multiplied by BF16 w with vdpbf16ps, summed in F32: 32 multiply-adds an
 * instruction against vfmadd231ps's 16, at a rounding of x that moves the
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

/* 1 where the vdpbf16ps GEMM runs: cpu_features' avx512_bf16 (off with
 * RLX_NO_AVX512) in a build that compiled it. */
int bgemm_avx512_supported(void);

/* y = bf16(x) @ w^T for BF16 w on the thread pool; any M, N, K. 0, or -1
 * when its buffers cannot be allocated (y untouched). */
int bgemm_avx512(cpu_ctx *ctx, int64_t M, int64_t N, int64_t K, const float *x, const uint16_t *w, float *y);

#endif /* RLX_BGEMM_H */
