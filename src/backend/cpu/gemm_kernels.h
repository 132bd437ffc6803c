/* gemm_kernels.h — what each instruction-set variant of the SGEMM provides
 * to the driver (gemm.c, gemm_tile.c, gemm_pack.c; internal to the CPU
 * backend).
 *
 * Layouts the driver packs for the micro-kernel:
 *   Ap: a micro-panel of op(A), k-major: for each k, mr consecutive floats
 *       (the rows of the panel).
 *   Bp: a micro-panel of op(B), k-major: for each k, nr_max floats (the
 *       columns), zero-padded past the matrix edge.
 */
#ifndef RLX_GEMM_KERNELS_H
#define RLX_GEMM_KERNELS_H

#include "gemm.h"

enum {
  GEMM_ACCUMULATE = 1, /* add the product to C (a later K block) instead of overwriting */
  GEMM_LAST = 2,       /* the last K block: apply bias + activation before the store */
  GEMM_B_FAR = 4,      /* Bp is a prepacked weight, in L3 or memory rather than L2 (a hint) */
  GEMM_B_NEXT = 8,     /* B in place, a whole tile: also ask for the tile at Bp + b_next into L2 */
};

/* The epilogue of one tile: bias already offset to the tile's first column
 * (NULL: none). A variant with micro_rows also takes gemm_epilogue's row
 * part here: row_bias offset to the tile's first row, residual to its
 * first element (row stride ldr), act after them, then the clamp. */
typedef struct {
  const float *bias;
  rlx_act act;
  float alpha;
  const float *row_bias, *residual;
  int64_t ldr;
  int clamp;
  float lo, hi;
  /* B read in place (a variant with b_in_place only): Bp is the tile's
   * first column of row 0 of an F32 B whose rows are b_ld floats apart,
   * columns past nr not read; 0: Bp is a packed panel. Not only at
   * GEMM_LAST. */
  int64_t b_ld;
  /* GEMM_B_NEXT: floats from Bp to the same tile of the next column block */
  int64_t b_next;
} gemm_tile_epilogue;

/* C[mr, nr] (+)= Ap · Bp over kc, then the epilogue when flags has
 * GEMM_LAST. 1 <= mr <= mr_max, 1 <= nr <= nr_max, kc >= 1. */
typedef void (*gemm_micro_fn)(int mr, int nr, int64_t kc, const float *Ap, const float *Bp,
                              float *C, int64_t ldc, int flags, const gemm_tile_epilogue *ep);

/* y[j] = sum_k x[k] * R[k*ld + j] for j < n (R read in its dtype: F32,
 * F16 or BF16). Overwrites y; K >= 1. */
typedef void (*gemm_gemv_rows_fn)(int64_t K, int64_t n, const float *x, const void *R,
                                  rlx_dtype dt, int64_t ld, float *y);
/* y[j] = sum_k R[j*ld + k] * x[k] for j < n. Overwrites y; K >= 1. */
typedef void (*gemm_gemv_dots_fn)(int64_t K, int64_t n, const float *x, const void *R,
                                  rlx_dtype dt, int64_t ld, float *y);
/* y[j] = act(y[j] + bias[j * bias_step]) for j < n (bias NULL: none;
 * bias_step 0 broadcasts bias[0]). */
typedef void (*gemm_epilogue_fn)(float *y, int64_t n, const float *bias, int bias_step,
                                 rlx_act act, float alpha);
/* The row part of a gemm_epilogue (a convolution's): y[j] = act(y[j] + add
 * + res[j]) (res NULL: no residual), then clamped to [lo, hi] with clamp
 * (NaN stays NaN, as Clamp), for j < n. */
typedef void (*gemm_row_post_fn)(float *y, int64_t n, float add, const float *res, rlx_act act,
                                 float alpha, int clamp, float lo, float hi);
/* dst[i] = src[i] as float for i < n; src F16 or BF16. */
typedef void (*gemm_convert_fn)(const void *src, rlx_dtype dt, float *dst, int64_t n);

/* Transposing copy (F32): dst[k*dst_stride + r] = src[r*ld + k] for
 * r < rows, k < kc. Packs A's row panels and B's columns when B is
 * transposed. */
typedef void (*gemm_pack_t_fn)(const float *src, int64_t ld, int64_t rows, int64_t kc,
                               float *dst, int64_t dst_stride);
/* Panels of B from rows contiguous in j (F32): row k of the block at
 * src + k*ld, nc columns, into ceil(nc / nr_max) panels of kc x nr_max,
 * panel p at dst + p*kc*nr_max, zero-padded past nc. */
typedef void (*gemm_pack_b_fn)(const float *src, int64_t ld, int64_t kc, int64_t nc,
                               float *dst);

typedef struct {
  const char *name;
  int mr_max, nr_max;         /* micro-tile */
  int micro_rows;             /* the micro-kernel applies the row part (gemm_tile_epilogue) */
  int b_in_place;             /* the micro-kernel reads B in place (gemm_tile_epilogue.b_ld) */
  int64_t kc, mc, nc;         /* cache blocking: K, M and N block sizes */
  int64_t a_block_floats;     /* up to this m x kc, one A block serves all of N */
  int64_t b_block_floats;     /* B block budget (L2) next to such an A block */
  gemm_micro_fn micro;
  gemm_gemv_rows_fn gemv_rows;
  gemm_gemv_dots_fn gemv_dots;
  gemm_epilogue_fn epilogue;
  gemm_row_post_fn row_post;
  gemm_convert_fn convert;
  gemm_pack_t_fn pack_t;
  gemm_pack_b_fn pack_b;
} gemm_isa;

extern const gemm_isa gemm_isa_scalar;
#if defined(__x86_64__) || defined(__i386__)
extern const gemm_isa gemm_isa_avx2;
extern const gemm_isa gemm_isa_avx512;
#endif

/* Element i of a matrix stored as dt (F32, F16 or BF16), as float. */
static inline float gemm_load(const void *p, rlx_dtype dt, int64_t i) {
  switch (dt) {
  case RLX_F16: return rlx_f16_to_f32(((const uint16_t *)p)[i]);
  case RLX_BF16: return rlx_bf16_to_f32(((const uint16_t *)p)[i]);
  default: return ((const float *)p)[i];
  }
}

/* Bytes of one element of a gemm operand dtype. */
static inline size_t gemm_elem_size(rlx_dtype dt) { return dt == RLX_F32 ? 4 : 2; }

/* The portable pieces the vector variants share for what they do not
 * vectorize (gemm_scalar.c). */
void gemm_scalar_convert(const void *src, rlx_dtype dt, float *dst, int64_t n);
void gemm_scalar_pack_t(const float *src, int64_t ld, int64_t rows, int64_t kc, float *dst,
                        int64_t dst_stride);
/* The AVX2 transposing copy (8 x 8 blocks), shared with the AVX-512 variant. */
void gemm_avx2_pack_t(const float *src, int64_t ld, int64_t rows, int64_t kc, float *dst,
                      int64_t dst_stride);
/* y[j] = act(y[j]) through the reference scalar math (elementwise_math.h):
 * for the activations a variant has no vector code for. */
void gemm_scalar_act_row(float *y, int64_t n, rlx_act act, float alpha);
/* The portable row_post (gemm_row_post_fn). */
void gemm_scalar_row_post(float *y, int64_t n, float add, const float *res, rlx_act act, float alpha,
                          int clamp, float lo, float hi);

#endif /* RLX_GEMM_KERNELS_H */
