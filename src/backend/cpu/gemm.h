/* gemm.h — the CPU backend's single-precision GEMM with a fused epilogue.
 *
 *   C[M,N] = act(op(A)[M,K] · op(B)[K,N] + bias[N])
 *
 * (or, for a convolution, clamp(act(... + row_bias[M] + residual)): the
 * row part of gemm_epilogue).
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
 * C must not overlap A, B or bias. A residual may be C itself (the same
 * rows: residual == C, ldr == ldc, in column groups r_stride == c_stride):
 * the product is then added to C's values from the first K block on, the
 * residual never read after C is written (a convolution planned into its
 * residual's buffer). M, N, K >= 0 (a negative size is a
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
  /* A convolution's epilogue (C = W · columns): row_bias[i] added to row
   * i, a residual R[M, N] (row stride ldr) added, then act, then a clamp
   * to [lo, hi] when clamp is set (NaN stays). Applied to each micro-tile
   * of C right after its last K block, while it is in L1. One matrix
   * only (batch 1). */
  const float *row_bias;  /* [M] or NULL */
  const float *residual;  /* or NULL */
  int64_t ldr;
  int clamp;
  float lo, hi;
} gemm_epilogue;

void cpu_sgemm(cpu_ctx *ctx, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, const float *A,
               int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc, const gemm_epilogue *ep);

/* The row part of ep (the fields after alpha; act included) on one row
 * of n values: y[j] = clamp(act(y[j] + add + res[j])) (res NULL: none),
 * with this CPU's vector code. For kernels that produce a convolution's
 * rows themselves (depthwise). */
void cpu_gemm_row_post(float *y, int64_t n, float add, const float *res, const gemm_epilogue *ep);

/* dst[c * dst_ld + r] = src[r * ld + c] for r < rows, c < cols, with this
 * CPU's vector transpose (the GEMM's packing of transposed operands). */
void cpu_transpose(const float *src, int64_t ld, int64_t rows, int64_t cols, float *dst, int64_t dst_ld);

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

typedef struct gemm_prepack gemm_prepack;

/* cpu_gemm with a slot that keeps B packed between calls (below; NULL:
 * cpu_gemm). Used when the batch shares one B matrix. */
void cpu_gemm_prepacked(cpu_ctx *ctx, int64_t batch, int64_t M, int64_t N, int64_t K,
                        const gemm_operand *a, const gemm_operand *b, gemm_prepack *b_prepack,
                        float *C, int64_t ldc, int64_t c_batch_stride, const gemm_epilogue *ep);

/* C[M,N] = act(op(A) · op(B) + bias) (one matrix) with A kept packed in a
 * slot between calls, as B is by cpu_gemm_prepacked (a convolution's
 * weight [OC, K] times its columns [K, positions]). Without a slot, or
 * where the slot cannot hold it: cpu_gemm. */
void cpu_gemm_prepacked_a(cpu_ctx *ctx, int64_t M, int64_t N, int64_t K, const gemm_operand *a,
                          gemm_prepack *a_prepack, const gemm_operand *b, float *C, int64_t ldc,
                          const gemm_epilogue *ep);

/* A B operand its owner writes block by block straight into the
 * micro-kernel's panels, never storing it whole (a convolution's im2col
 * columns): pack(ctx, k0, kc, j0, nc, dst, nr) writes B's rows [k0, k0 +
 * kc) and columns [j0, j0 + nc) as ceil(nc / nr) panels of kc x nr floats
 * (panel p at dst + p * kc * nr, k-major), zero past nc. Called from
 * several threads at once, for disjoint blocks. */
typedef struct {
  void (*pack)(const void *ctx, int64_t k0, int64_t kc, int64_t j0, int64_t nc, float *dst, int64_t nr);
  const void *ctx;
} gemm_b_source;

/* cpu_gemm_prepacked_a with B from a source. Returns 0, with C
 * unspecified, where it could not run (A not packed in its slot, or no
 * memory for a block): the caller then makes B itself. */
int cpu_gemm_prepacked_a_source(cpu_ctx *ctx, int64_t M, int64_t N, int64_t K, const gemm_operand *a,
                                gemm_prepack *a_prepack, const gemm_b_source *b, float *C, int64_t ldc,
                                const gemm_epilogue *ep);

/* The columns of a product as several matrices side by side (a
 * convolution's images: their columns in one product stream the packed
 * weight once for all of them): column j is column j % width of matrix
 * j / width, which starts c_stride floats after the one before it in C,
 * b_stride elements in an operand B, r_stride floats in the epilogue's
 * residual (a column bias is indexed by the column in its matrix). Each
 * matrix's columns are padded to whole micro-panels inside the product, so
 * that no tile of C spans two. */
typedef struct {
  int64_t count, width;
  int64_t c_stride, b_stride, r_stride;
} gemm_col_groups;

/* cpu_gemm_prepacked_a over groups->count * groups->width columns in
 * groups, B an operand (b) or a source (b_src, which is then asked for
 * the columns of one matrix at a time, in the product's unpadded column
 * numbers). Returns 0, with C unspecified, where it could not run (A not
 * packed in its slot, or no memory for a block): the caller then takes
 * the matrices one by one. */
int cpu_gemm_prepacked_a_groups(cpu_ctx *ctx, int64_t M, int64_t K, const gemm_operand *a, gemm_prepack *a_prepack,
                                const gemm_operand *b, const gemm_b_source *b_src, const gemm_col_groups *groups,
                                float *C, int64_t ldc, const gemm_epilogue *ep);

/* ---- prepacked B operands (weights)
 *
 * A gemm_prepack holds op(B) converted to F32 and laid out in the
 * micro-kernel's panels for every K block, so that calls with the same B
 * skip packing it (per call that costs a full pass over B, which for
 * M ~ 100-500 rows is 10-20% of the GEMM). It fills on the first call that
 * takes the packed path with it (never for M = 1 or N = 1, which stream B
 * unpacked) and is reused while the operand's data pointer, dtype, layout
 * and K x N stay the same; the owner calls gemm_prepack_reset when the bytes
 * behind the pointer change (a param rebound). The copy is extra memory:
 * 4 * K * ceil(N / nr) * nr bytes. All prepacked copies of the process
 * together stay under RLX_PREPACK_MAX_MB (MiB, default 1024); past it an
 * operand is packed per call as without a slot. RLX_PREPACK=0 turns
 * prepacking off. One cpu_gemm call at a time per slot. */
gemm_prepack *gemm_prepack_new(void);          /* an empty slot; NULL: out of memory */
void          gemm_prepack_free(gemm_prepack *p);
void          gemm_prepack_reset(gemm_prepack *p); /* drop the packed copy */
size_t        gemm_prepack_bytes(const gemm_prepack *p); /* held by p now */
size_t        gemm_prepack_total_bytes(void);  /* held by all slots of the process */

/* A slot may instead hold another packed form of a weight, made by another
 * kernel (the 16-row groups of quantized weights, qpack.h): an object with
 * its free function, valid for the data pointer `key`, dropped by
 * gemm_prepack_reset like the panels and counted in the byte totals (not
 * in RLX_PREPACK_MAX_MB: it replaces the weight's reads, it does not widen
 * them). gemm_prepack_other: the object held for key, or NULL. */
void *gemm_prepack_other(const gemm_prepack *p, const void *key);
void  gemm_prepack_set_other(gemm_prepack *p, const void *key, void *obj, size_t bytes,
                             void (*free_fn)(void *));

/* The kernel variant cpu_gemm runs with on this CPU after the RLX_NO_AVX2 /
 * RLX_NO_AVX512 overrides (cpu_features.h): "avx512", "avx2" or "scalar". */
const char *cpu_gemm_variant(void);

#endif /* RLX_GEMM_H */
