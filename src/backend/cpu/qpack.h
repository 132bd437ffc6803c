/* qpack.h — GGUF weight matrices repacked for the CPU's integer GEMM.
 *
 * The block dot products of qdot.h walk one weight row at a time, so a
 * prefill of M rows decodes every weight block again for each tile of at
 * most QDOT_MAX_ROWS activation rows and sums 32-element dots horizontally.
 * A packed matrix instead interleaves QPACK_ROWS = 16 weight rows, so one
 * vector register holds 4 consecutive weights of each of the 16 rows and
 * vpdpbusd (u8 weights x s8 activations, 4 products into each of 16 int32
 * lanes) meets a broadcast of 4 activation bytes: 16 outputs at once, no
 * horizontal sums, and each decoded weight register serves QPACK_MR
 * activation rows (qpack_avx512.c).
 *
 * Layout, per group of 16 rows (the last group padded with zero rows), per
 * 32-element block b of K, for row lane l (0..15) and 4-byte chunk t:
 *   Q4_0, Q4_1, Q4_K  q[t][l][i] (t < 4, 256 bytes): low nibble weight
 *                     4t + i, high nibble weight 16 + 4t + i (ggml's Q4_0
 *                     byte order, so Q4_0 and Q4_1 bytes are copied as they
 *                     are); unsigned levels 0..15.
 *   Q8_0              q[t][l][i] (t < 8, 512 bytes): weight 4t + i + 128
 *                     (unsigned: vpdpbusd's u8 operand).
 *   Q5_0, Q6_K        Q4_0's nibbles, then per higher bit (4; and 5) 8
 *                     masks of 64 bits, mask t bit 4 l + i = that bit of
 *                     level 4t + i (added to register t's bytes by a
 *                     masked byte add).
 * then the block's scales:
 *   Q4_0, Q5_0, Q8_0  fp16 d[16]; weight = d (level - 8 | 16 | 128)
 *   Q4_1              fp16 d[16], fp16 m[16]; weight = d level + m
 *   Q4_K              u8 sc[16], u8 mn[16] (6-bit sub-block scale and min),
 *                     after a super-block header of fp16 d[16], dmin[16]
 *                     every 8 blocks; weight = d sc level - dmin mn
 *   Q6_K              int8 sc[2][16] (levels 0..15 and 16..31 of the
 *                     block), after a super-block header of fp16 d[16];
 *                     weight = d sc (level - 32)
 * so a row costs the bytes of its GGUF row (Q4_K: 148 of 144 per 256).
 * The weights meet activations in qdot_q8_0 blocks (qpack_quantize_row:
 * the levels of qdot.h's dot kernels for the same weight type; s holds
 * -8, -16, -128 times d (sum of the levels) for Q4_0, Q5_0, Q8_0, the
 * weights' offset, and for Q6_K two int16: the sums of levels 0..15 and
 * 16..31): results
 * equal those of dequantized weights against the dequantized activations
 * up to float rounding.
 */
#ifndef RLX_CPU_QPACK_H
#define RLX_CPU_QPACK_H

#include "cpu.h"
#include "qdot.h"

#include <stddef.h>
#include <stdint.h>

#define QPACK_ROWS 16 /* weight rows interleaved in a group */
#define QPACK_MR 6    /* activation rows one kernel pass holds in registers */

typedef struct qpack {
  rlx_dtype dtype;       /* the GGUF dtype packed */
  int64_t N, K;          /* rows and columns of the weight */
  int64_t groups;        /* ceil(N / 16) */
  size_t group_bytes;    /* bytes of one group (all of K) */
  uint8_t *data;         /* groups * group_bytes, 64-byte aligned */
  /* qpack_acquire's registry: the packed bytes, a digest of them, users */
  const void *src;
  uint64_t digest;
  int users;
  struct qpack *next;
} qpack;

/* The kernel of a group: y[r * ldy + l] = row (16 g + l) . act row r for
 * r < nr (1..QPACK_MR), l < lanes (1..16); act rows are K / 32 qdot_q8_0
 * blocks, act_stride bytes apart. */
typedef void (*qpack_kernel_fn)(const qpack *p, int64_t g, const qdot_q8_0 *act, size_t act_stride,
                                int nr, float *y, int64_t ldy, int lanes);

/* 1 when this CPU has a packed kernel for w (AVX-512 VNNI and w one of the
 * dtypes above; RLX_QPACK=0 turns packing off, RLX_NO_AVX512 too). */
int qpack_supported(rlx_dtype w);

/* An activation row of K floats as the K / 32 qdot_q8_0 blocks the kernels
 * of w take, with table q: its quantize_q8_0 for legacy w; for Q4_K the
 * levels and scale of its quantize_q8_k (ggml's block_q8_K, what
 * llama.cpp's K-quant dots use), each super-block written as 8 blocks of
 * one d and s = d (sum of the block's levels) (Q6_K: the two int16 sums
 * of the block's halves in s's bytes). */
void qpack_quantize_row(const qdot_ops *q, rlx_dtype w, const float *x, qdot_q8_0 *dst, int64_t K);

/* Bytes qpack_new allocates for an N x K matrix of w. */
size_t qpack_bytes(rlx_dtype w, int64_t N, int64_t K);

/* Packs N rows of K elements of w (GGUF bytes, any alignment) with the
 * context's threads; NULL when out of memory or w is not packable. */
qpack *qpack_new(cpu_ctx *ctx, rlx_dtype w, const void *rows, int64_t N, int64_t K);
void   qpack_free(qpack *p);

/* The packed copy of these weight bytes shared by every plan of the
 * process that holds them (a model's prefill and decode plans run the same
 * weights): found by address, dtype, shape and a digest of sampled bytes,
 * else packed; each acquire is matched by a qpack_release, the last one
 * frees it. NULL as for qpack_new. */
qpack *qpack_acquire(cpu_ctx *ctx, rlx_dtype w, const void *rows, int64_t N, int64_t K);
void   qpack_release(void *p);

/* y [M, N] = act rows (M rows of K / 32 qdot_q8_0 blocks) against p, on
 * the context's threads. */
void qpack_matmul(cpu_ctx *ctx, const qpack *p, const qdot_q8_0 *act, int64_t M, float *y);

/* The AVX-512 VNNI kernel of each packable dtype; NULL where
 * qpack_avx512.c was built without -mavx512vnni or for other dtypes. */
qpack_kernel_fn qpack_avx512_kernel(rlx_dtype w);

#endif /* RLX_CPU_QPACK_H */
