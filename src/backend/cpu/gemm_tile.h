/* gemm_tile.h — one tile of C of the SGEMM (gemm_tile.c): the blocked,
 * packed loops over the micro-kernels, the matrix-vector product, the
 * unpacked fallback, and the epilogue's row part. The driver (gemm.c)
 * splits a product into such tiles and runs them on the thread pool.
 */
#ifndef RLX_GEMM_TILE_H
#define RLX_GEMM_TILE_H

#include "gemm_pack.h"

/* ---- the epilogue's row part */

/* Whether ep has a row part (gemm_epilogue: row bias, residual, clamp):
 * then act runs there, after the residual, not in the micro-kernel. */
static inline int has_rows(const gemm_epilogue *ep) { return ep->row_bias || ep->residual || ep->clamp; }

/* The act the micro-kernel and GEMV epilogues apply. */
static inline rlx_act inner_act(const gemm_epilogue *ep) { return has_rows(ep) ? RLX_ACT_NONE : ep->act; }

/* The row part of ep on C[i0 : i0+m, j0 : j0+n] (after the inner part). */
void gemm_rows_post(const gemm_isa *isa, const gemm_epilogue *ep, float *C, int64_t ldc, int64_t i0, int64_t m,
                    int64_t j0, int64_t n);

/* ---- blocking */

/* The largest K block: K in ceil(K / kc) even blocks (split_at). */
static inline int64_t k_block(const gemm_isa *isa, int64_t K) {
  return ceil_div(K, ceil_div(K, isa->kc));
}

/* Whether a tile of m rows packs one A block per K block and reuses it over
 * all of its columns (gemm_tile_packed). */
static inline int reuses_a(const gemm_isa *isa, int64_t m, int64_t K) {
  return m * k_block(isa, K) <= isa->a_block_floats;
}

/* ---- one tile */

typedef struct {
  const gemm_isa *isa;
  int64_t M, N, K;
  mat_view A, B;
  float *C;
  int64_t ldc;
  const gemm_epilogue *ep;
  /* B packed whole: prepacked (struct gemm_prepack), or shared by tiles of
   * all N columns; NULL: each tile packs its own blocks. */
  const float *b_packed;
  /* A packed whole, shared by tiles of all M rows that take the reuse-A
   * path; NULL: each tile packs its own blocks. */
  const float *a_packed;
  /* the one of a_packed / b_packed that the tiles pack as they go, or NULL:
   * what is there is complete */
  shared_pack *shared;
  int64_t first_part; /* the chunk of `shared` this tile starts with */
  /* B made by its owner (with a_packed only); a tile without a buffer for
   * its blocks sets *failed instead of computing */
  const gemm_b_source *b_src;
  _Atomic int *failed;
  /* with a_packed: B (F32, not transposed) read in place by the
   * micro-kernel, rows b_ld floats apart; 0: packed */
  int64_t b_ld;
  /* with a_packed: the columns are these matrices side by side, each
   * padded to group_pad (whole micro-panels), or NULL */
  const gemm_col_groups *groups;
  int64_t group_pad;
  /* with a_packed: the tile's row panels [a_p0, a_p1) of A's even split
   * into ceil(M / mr) panels */
  int64_t a_p0, a_p1;
  /* C holds the residual (gemm.h): every K block adds to it, and ep has
   * no residual */
  int c_in;
} gemm_problem;

/* C[m0 : m1, n0 : n1] through the packed micro-kernels (or, when no buffer
 * can be had, the unpacked loop; with b_src or groups, *failed set). */
void gemm_tile_packed(const gemm_problem *pr, int64_t m0, int64_t m1, int64_t n0, int64_t n1);

/* Outputs [o0, o1) of a problem with M == 1 (y = row of C over N) or N == 1
 * (y = column of C over M). */
void gemm_tile_gemv(const gemm_problem *pr, int64_t o0, int64_t o1);

#endif /* RLX_GEMM_TILE_H */
