/* gemm_pack.h — the SGEMM's packing of operands into the micro-kernels'
 * panels (gemm_pack.c; layouts in gemm_kernels.h): views of an operand's
 * matrices, the per-thread buffers, one tile's blocks, and an operand
 * packed whole, either in a parallel loop of its own or by the tiles of
 * one product as they first need each part (shared_pack). Internal to the
 * GEMM driver (gemm.c, gemm_tile.c), but for the per-thread buffers, which
 * conv_weights.c takes one of too.
 */
#ifndef RLX_GEMM_PACK_H
#define RLX_GEMM_PACK_H

#include "gemm_kernels.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* ---- even splits */

/* [0, n) in `parts` nearly equal pieces: piece p is [split_at(n, parts, p),
 * split_at(n, parts, p + 1)). */
static inline int64_t split_at(int64_t n, int64_t parts, int64_t p) {
  return n / parts * p + (p < n % parts ? p : n % parts);
}

static inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* ---- per-thread buffers */

/* GEMM_BUF_SHARED: the calling thread's copy of an operand packed once for all
 * the threads of one call (shared_pack); GEMM_BUF_TAPS: a strided 1x1
 * conv's taps copied out of x, the B that the product then reads in place
 * (conv_weights.c). */
enum { GEMM_BUF_A, GEMM_BUF_B, GEMM_BUF_X, GEMM_BUF_Y, GEMM_BUF_SHARED, GEMM_BUF_TAPS, GEMM_BUF_COUNT };

/* This thread's buffer `which` with room for n floats, 64-byte aligned, or
 * NULL when memory is short (the caller then takes the unpacked path).
 * Kept between calls, freed when the thread exits; from 1 MiB on in huge
 * pages (huge_alloc: a B read in place takes a new 4 KiB page every row). */
float *gemm_thread_buf(int which, size_t n);

/* ---- operand views */

/* One matrix of an operand: element (r, k) of op(X) (r: the M row of A or
 * the N column of B) is at data[r*rs + k*ks]. */
typedef struct {
  const void *data;
  rlx_dtype dt;
  int64_t rs, ks;
} mat_view;

/* Matrix b of operand o, strides still 0. */
static inline mat_view view_of(const gemm_operand *o, int64_t b) {
  int64_t off = o->batch_offsets ? o->batch_offsets[b] : b * o->batch_stride;
  mat_view v = {(const char *)o->data + off * (int64_t)gemm_elem_size(o->dtype), o->dtype, 0, 0};
  return v;
}

/* A not transposed is [M,K]: (r, k) at r*ld + k; B not transposed is [K,N]:
 * (r = j, k) at k*ld + j. The transposed layouts swap the strides. */
static inline mat_view view_a(const gemm_operand *o, int64_t b) {
  mat_view v = view_of(o, b);
  v.rs = o->trans ? 1 : o->ld;
  v.ks = o->trans ? o->ld : 1;
  return v;
}

static inline mat_view view_b(const gemm_operand *o, int64_t b) {
  mat_view v = view_of(o, b);
  v.rs = o->trans ? o->ld : 1;
  v.ks = o->trans ? 1 : o->ld;
  return v;
}

static inline const void *view_at(const mat_view *v, int64_t r, int64_t k) {
  return (const char *)v->data + (r * v->rs + k * v->ks) * (int64_t)gemm_elem_size(v->dt);
}

/* dst[i] = element i*step of the run starting at src, for i < n (F32 out). */
void gemm_load_run(const gemm_isa *isa, const void *src, rlx_dtype dt, int64_t step, float *dst, int64_t n);

/* ---- one tile's blocks */

/* Ap <- op(A)[i0 : i0+mc, k0 : k0+kc] as `panels` row panels (even split of
 * mc), each k-major with its own row count as stride. tmp: kc floats. */
void gemm_pack_a_block(const gemm_isa *isa, const mat_view *A, int64_t i0, int64_t mc, int64_t k0, int64_t kc,
                       int64_t panels, float *Ap, float *tmp);

/* Bp <- op(B)[k0 : k0+kc, j0 : j0+nc] as column panels of nr_max (the last
 * zero-padded), each k-major with stride nr_max. tmp: max(kc, nc) floats. */
void gemm_pack_b_block(const gemm_isa *isa, const mat_view *B, int64_t k0, int64_t kc, int64_t j0, int64_t nc,
                       float *Bp, float *tmp);

/* ---- operands packed whole */

/* One operand packed whole: B in the prepacked layout (struct
 * gemm_prepack), or A (all M rows, `rows` = M) for K block kb at
 * dst + pc * M in the row panels of gemm_tile_packed's single A block of M
 * rows (the even split of M into ceil(M / mr) panels; a chunk of
 * consecutive panels, split evenly into as many panels on its own, gives
 * the same panels: the larger ones come first in both). The work comes in
 * units: unit kb * chunks + c is chunk c (chunk_panels consecutive
 * micro-panels, the last one fewer) of K block kb. */
typedef struct {
  const gemm_isa *isa;
  mat_view X;
  int is_a;
  int64_t K, rows, kblocks, panels, chunk_panels, chunks;
  float *dst;
} pack_job;

/* The job for op(A) (is_a; rows = M) or op(B) (rows = N) of a K-deep
 * product into dst (K * rows floats for A, K * rows rounded up to nr for
 * B), in about `chunks` chunks per K block (at least 1 panel each). */
pack_job gemm_pack_job_for(const gemm_isa *isa, const mat_view *X, int is_a, int64_t K, int64_t rows, float *dst,
                           int64_t chunks);

/* Floats of the conversion buffer a unit of the job needs. */
static inline int64_t pack_tmp_floats(const pack_job *j) {
  int64_t kc = ceil_div(j->K, j->kblocks);
  int64_t span = j->chunk_panels * (j->is_a ? j->isa->mr_max : j->isa->nr_max);
  return kc > span ? kc : span;
}

/* Packs an operand whole (gemm_pack_job_for) on the ctx's threads, as its
 * own parallel loop; 0 when a thread had no buffer. */
int gemm_pack_whole(cpu_ctx *ctx, const gemm_isa *isa, const mat_view *X, int is_a, int64_t K, int64_t rows,
                    float *dst);

/* An operand packed once per call for all the tiles of one matrix, by the
 * tiles themselves as they first need each unit, inside the one parallel
 * loop of the product (as OpenBLAS shares B panels between its threads):
 * no loop of its own and no barrier before the product starts, and each
 * thread first multiplies with the chunks it has just packed (in its own
 * cache) before it reads the others'. A unit is packed by the first tile
 * that claims it; a tile that needs a unit another one is packing waits
 * for it (it never waits for a unit nobody has begun: it packs it itself,
 * so a worker that is late or preempted before its first tile delays
 * nothing). Chunks of one K block are the parts a tile walks in rotation
 * (first_part). */
typedef struct {
  pack_job job;
  _Atomic unsigned char *state; /* [kblocks * chunks] */
} shared_pack;

/* sp set up for job (all units free); 0 when out of memory. The caller
 * frees sp->state. */
int gemm_shared_pack_init(shared_pack *sp, const pack_job *job);

/* Chunk c of K block kb packed: by this tile, or by the one that claimed
 * it first (waited for). tmp: pack_tmp_floats floats. */
void gemm_unit_ready(shared_pack *sp, int64_t kb, int64_t c, float *tmp);

/* The part (chunk) a tile starts with, of `parts`, for tile t of a split
 * over `threads`: the threads' first tiles start evenly spaced, so that each
 * packs a run of chunks before it reaches chunks another thread packed;
 * later tiles start one chunk further each. */
static inline int64_t first_part(int64_t t, int64_t threads, int64_t parts) {
  return (t % threads * parts / threads + t / threads) % parts;
}

#endif /* RLX_GEMM_PACK_H */
