/* qpack.h — GGUF weight matrices repacked for the CPU's integer GEMM.
 *
 * The block dot products of qdot.h walk one weight row at a time, so a
 * prefill of M rows decodes every weight block again for each tile of at
 * most QDOT_MAX_ROWS activation rows and sums 32-element dots horizontally.
 * A packed matrix instead interleaves QPACK_ROWS = 16 weight rows, so one
 * vector register holds 4 consecutive weights of each of the 16 rows and
 * vpdpbusd (u8 weights x s8 activations, 4 products into each of 16 int32
 * lanes) meets a broadcast of 4 activation bytes: 16 outputs at once, no
 * horizontal sums, and each decoded weight register serves several
 * activation rows (qpack_avx512.c). The same layout is AMX's B tile
 * (16 columns of 4 bytes a row), so whole tiles of 16 activation rows go
 * through tdpbsud where the CPU runs it (qpack_amx.c).
 *
 * Layout, per group of 16 rows (the last group padded with zero rows), per
 * 32-element block b of K, for row lane l (0..15) and 4-byte chunk t:
 *   Q4_0, Q4_1, Q4_K  q[t][l][i] (t < 4, 256 bytes): low nibble weight
 *                     4t + i, high nibble weight 16 + 4t + i (ggml's Q4_0
 *                     byte order, so Q4_0 and Q4_1 bytes are copied as they
 *                     are); unsigned levels 0..15.
 *   Q8_0              q[t][l][i] (t < 8, 512 bytes): weight 4t + i + 128
 *                     (unsigned: vpdpbusd's u8 operand).
 *   Q5_0, Q5_1, Q5_K  Q4_0's nibbles, then a 64-byte plane of the levels'
 *                     bit 4, for the AVX-512 kernels 8 masks of 64 bits,
 *                     mask t bit 4 l + i = bit 4 of level 4t + i (added to
 *                     register t's bytes by a masked byte add), for the
 *                     AVX2 kernels byte 32 (l / 8) + 4 (l % 8) + i bit t
 *                     (shifted to bit 4 of register t's bytes); which one:
 *                     qpack.c's avx2_planes.
 *   Q6_K              per half h (weights 16 h ..) 3 x 64 bytes: byte
 *                     64 k + 4 l + i = level 16 h + 4k + i with bit 5
 *                     inverted in bits 2..7 (the signed byte: 4 (level -
 *                     32)), and in bits 0..1 bits 2k, 2k + 1 of level 16
 *                     h + 12 + i (qpack.c's put_q6_levels), 384 bytes.
 * then the block's scales:
 *   Q4_0, Q5_0, Q8_0  fp16 d[16]; weight = d (level - 8 | 16 | 128)
 *   Q4_1, Q5_1        fp16 d[16], fp16 m[16]; weight = d level + m
 *   Q4_K, Q5_K        none in the block: every 8 blocks a super-block
 *                     header of fp16 d[16], dmin[16] and the 6-bit scale
 *                     sc and min mn of each of its blocks j, u8 lo[8][16]
 *                     (lo[j][l] = sc mod 16 + 16 (mn mod 16)) and u32
 *                     hi[16] (bits 4j.. of hi[l]: sc / 16, then mn / 16,
 *                     2 bits each); weight = d sc level - dmin mn
 *   Q6_K              none in the block: the group starts with the
 *                     heads of all its super-blocks, fp16 d[16] and
 *                     int32 corr[16] each (qpack.c's pack_q6_k), padded
 *                     to 64 bytes, then each super-block is int8
 *                     sc[8][2][16] (block j's levels 0..15 and 16..31)
 *                     and its 8 blocks, so every block starts a cache
 *                     line (a 64-byte load never spans two); weight =
 *                     d sc (level - 32)
 * so a row costs the bytes of its GGUF row (Q4_K and Q5_K: as many, 144
 * and 176 per 256; Q6_K: 214 of 210). A decode step streams every byte
 * of its weights once, so a byte more a row is time more a token.
 * The weights meet activations in qdot_q8_0 blocks (qpack_quantize_row:
 * the levels of qdot.h's dot kernels for the same weight type; s holds
 * -8, -16, -128 times d (sum of the levels) for Q4_0, Q5_0, Q8_0, the
 * weights' offset, d (sum of the levels) for Q4_1 and Q5_1, the sum of
 * the levels without d for Q4_K, Q5_K and Q6_K (d is the super-block's,
 * the same in its 8 blocks); Q6_K's levels are stored + 128, unsigned,
 * for its signed weights): results
 * equal those of dequantized weights against the dequantized activations
 * up to float rounding.
 *
 * Budget: a packed matrix takes the bytes of its GGUF rows (+2% for
 * Q6_K), once per process (qpack_acquire), made by the context's
 * threads at load (the session's prepare step, cpu_dequant_prepack) or
 * else on first use; the model then reads only the packed copy, so the
 * mapped file's pages of packed matrices become clean page cache the
 * kernel may drop: resident memory stays about one model. Repacking
 * speed (seconds for an 8B file) is in BENCHMARKS.md.
 *
 * F16 and BF16 weights are not packed: they stay on the float dot kernels
 * (decode, bound by memory) and the SGEMM (prefill). A kept packed copy
 * lost in the model: decode slower, twice the resident memory, and no
 * prefill gain at real prompt lengths (BENCHMARKS.md).
 */
#ifndef RLX_CPU_QPACK_H
#define RLX_CPU_QPACK_H

#include "cpu.h"
#include "qdot.h"

#include <stddef.h>
#include <stdint.h>

#define QPACK_ROWS 16 /* weight rows interleaved in a group */
/* A Q4_K / Q5_K super-block header (above): fp16 d[16] at 0, dmin[16] at
 * 32, u8 lo[8][16] at QPACK_K4_LO, u32 hi[16] at QPACK_K4_HI. */
#define QPACK_K4_LO 64
#define QPACK_K4_HI 192
#define QPACK_K4_HEADER 256
/* A Q6_K group (above): super-block heads of QPACK_Q6_HEAD bytes (fp16
 * d[16], then int32 corr[16] at 32), qpack_q6_heads(K) bytes in all, then
 * super-blocks of QPACK_Q6_SUPER bytes: sc[8][2][16], then blocks of
 * QPACK_Q6_BLOCK bytes from QPACK_Q6_SC on. */
#define QPACK_Q6_HEAD 96
#define QPACK_Q6_SC 256
#define QPACK_Q6_BLOCK 384
#define QPACK_Q6_SUPER (QPACK_Q6_SC + 8 * QPACK_Q6_BLOCK)
static inline size_t qpack_q6_heads(int64_t K) {
  return ((size_t)(K / QDOT_QK_K) * QPACK_Q6_HEAD + 63) & ~(size_t)63;
}

typedef struct qpack {
  rlx_dtype dtype;       /* the GGUF dtype packed */
  int64_t N, K;          /* rows and columns of the weight */
  int64_t groups;        /* ceil(N / 16) */
  size_t group_bytes;    /* bytes of one group (all of K) */
  uint8_t *data;         /* groups * group_bytes, from huge_alloc.h */
  uint32_t pf_l2, pf_l1; /* the kernels' prefetch distances on this CPU (qpack_prefetch.h) */
  /* qpack_acquire's registry: the packed bytes, a digest of them, users */
  const void *src;
  uint64_t digest;
  int users;
  struct qpack *next;
} qpack;

/* The kernel of a group: y[r * ldy + l] = row (16 g + l) . act row r for
 * r < nr (1 .. the kernel's rows), l < lanes (1..16); act holds the nr
 * rows' K / 32 qdot_q8_0 blocks interleaved, block b of row r at
 * act[b nr + r] (a block's rows side by side: one pointer and constant
 * offsets reach them all). */
typedef void (*qpack_kernel_fn)(const qpack *p, int64_t g, const qdot_q8_0 *act, int nr, float *y, int64_t ldy,
                                int lanes);

/* 1 when this CPU has a packed kernel for w (qpack_kernel; RLX_QPACK=0
 * turns packing off). */
int qpack_supported(rlx_dtype w);

/* An activation row of K floats as the K / 32 qdot_q8_0 blocks the kernels
 * of w take, with table q: its quantize_q8_0 for legacy w; for the
 * K-quants the levels and scale of its quantize_q8_k (ggml's block_q8_K,
 * what llama.cpp's K-quant dots use), each super-block written as 8 blocks of
 * one d and s = the sum of the block's levels (Q6_K: the levels stored
 * + 128). */
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
 * the context's threads; the rows are first copied into the kernel's
 * interleaved tiles. 0, or -1 when that copy finds no memory. */
int qpack_matmul(cpu_ctx *ctx, const qpack *p, const qdot_q8_0 *act, int64_t M, float *y);

/* The kernel of w for M activation rows on this CPU and in *rows the most
 * rows it takes at once: AVX-512 VNNI, else AVX2 with AVX-VNNI, else AVX2
 * (vpmaddubsw); NULL where none is built or usable (cpu_features.h:
 * RLX_NO_AVX512, RLX_NO_VNNI and RLX_NO_AVX2 step down). A Q4_K or Q6_K
 * decode (M 1) on an AMD CPU with both VNNIs takes AVX-VNNI's. */
qpack_kernel_fn qpack_kernel(rlx_dtype w, int64_t M, int *rows);

/* AMX int8 tiles for prefill (qpack_amx.c): 1 when this CPU's tiles are
 * granted and probed (cpu_amx_int8) and w has tile kernels (every packed
 * type). */
int qpack_amx_supported(rlx_dtype w);

/* y [M, N] = act rows (row-major, M a multiple of 16, K of 64) against groups
 * [g0, g1) of p with AMX tiles; wb: K / 32 x 512 bytes, 64-byte aligned,
 * for the group's decoded weights. */
void qpack_amx_groups(const qpack *p, int64_t g0, int64_t g1, const qdot_q8_0 *act, int64_t M, float *y,
                      uint8_t *wb);

/* One Q6_K super-block of `lanes` rows (row_bytes apart from src) into
 * its packed head and body (qpack.h's layout), on AVX-512
 * (qpack_pack_avx512.c); call only where qpack_pack_avx512_available(). */
int  qpack_pack_avx512_available(void);
void qpack_pack_q6_k_avx512(const uint8_t *src, size_t row_bytes, int lanes, uint8_t *head, uint8_t *body);

/* Each kernel file's lookup of its kernel for w (and its rows); NULL where
 * the file was built without its instruction-set flags or for other
 * dtypes. */
qpack_kernel_fn qpack_avx512_kernel(rlx_dtype w, int *rows);
qpack_kernel_fn qpack_avxvnni_kernel(rlx_dtype w, int *rows);
qpack_kernel_fn qpack_avx2_kernel(rlx_dtype w, int *rows);

/* For the kernel files: the packable dtypes, X(dtype, A) for each. */
#define QPACK_DTYPES(X, A) \
  X(RLX_Q4_0, A) X(RLX_Q4_1, A) X(RLX_Q5_0, A) X(RLX_Q5_1, A) X(RLX_Q8_0, A) X(RLX_Q4_K, A) X(RLX_Q5_K, A) X(RLX_Q6_K, A)

/* For the kernel files: one qpack_kernel_fn per dtype W of the list
 * DTYPES, calling TILE(p, g, act, nr, y, ldy, lanes, W) with
 * nr a constant 1 .. MR (a tile's per-row accumulators then live in
 * registers; MR is 6 or 12), and GETTER, the lookup of them by dtype. */
#define QPACK_NR_(n, TILE, W) \
  case n: TILE(p, g, act, n, y, ldy, lanes, W); break;
#define QPACK_NRS_6(X, TILE, W) X(1, TILE, W) X(2, TILE, W) X(3, TILE, W) X(4, TILE, W) X(5, TILE, W)
#define QPACK_NRS_12(X, TILE, W)                                                                              \
  X(1, TILE, W) X(2, TILE, W) X(3, TILE, W) X(4, TILE, W) X(5, TILE, W) X(6, TILE, W) \
  X(7, TILE, W) X(8, TILE, W) X(9, TILE, W) X(10, TILE, W) X(11, TILE, W)
#define QPACK_CAT_(a, b) a##b
#define QPACK_CAT(a, b) QPACK_CAT_(a, b)
#define QPACK_KERNEL_(W, TILE)                                                                                \
  static void qpack_kernel_##W(const qpack *p, int64_t g, const qdot_q8_0 *act, int nr, float *y, int64_t ldy, \
                               int lanes) {                                                                  \
    switch (nr) {                                                                                            \
      QPACK_CAT(QPACK_NRS_, QPACK_KERNEL_MR)(QPACK_NR_, TILE, W)                                             \
    default: TILE(p, g, act, QPACK_KERNEL_MR, y, ldy, lanes, W); break;                                     \
    }                                                                                                        \
  }
#define QPACK_CASE_(W, A) \
  case W: return qpack_kernel_##W;
/* The including file defines QPACK_KERNEL_MR first, the activation rows
 * its kernels hold in registers: 6 or 12 (AVX2's 16 ymm registers hold 6
 * rows' sums, AVX-512's 32 zmm 12). */
#define QPACK_DEFINE_KERNELS(GETTER, TILE, DTYPES)                                                            \
  DTYPES(QPACK_KERNEL_, TILE)                                                                                \
  qpack_kernel_fn GETTER(rlx_dtype w, int *rows) {                                                           \
    *rows = QPACK_KERNEL_MR;                                                                                 \
    switch (w) {                                                                                             \
      DTYPES(QPACK_CASE_, 0)                                                                                 \
    default: return NULL;                                                                                    \
    }                                                                                                        \
  }

#endif /* RLX_CPU_QPACK_H */
