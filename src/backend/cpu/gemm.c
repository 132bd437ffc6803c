/* gemm.c — the SGEMM driver: picks the kernel variant for this CPU, splits
 * the work over the thread pool, blocks for the caches and packs operands
 * (converting F16/BF16 to F32 on the way) for the micro-kernels of
 * gemm_<variant>.c.
 *
 * Packed path (the usual one), per task tile C[m0:m1, n0:n1], BLIS-style:
 *   B block (kc x nc) packed into column micro-panels of nr_max,
 *   A block (mc x kc) packed into row micro-panels of up to mr_max,
 *   micro-kernel per (row panel, column panel) pair on C[mr, nr].
 * Loop order by the tile's rows: when m x kc fits the A budget (M up to
 * ~100-200, prefill shapes), each K block packs A once and walks N in B
 * blocks small enough to stay in L2 after packing; otherwise N blocks of
 * nc, K blocks, then M blocks of mc, each B block (in L3) serving every M
 * block. kc is large (passes over C are the cost that grows with K / kc);
 * both micro-panels then stream from L2, with software prefetch ahead.
 * Block sizes are split evenly (K = 300 is two blocks of 150, not 256 + 44)
 * and so are the row panels of an A block (15 rows with mr_max 14 are 8 + 7,
 * not 14 + 1: a 1-row micro-kernel is latency-bound), so no panel runs
 * starved. The epilogue runs in the micro-kernel of the last K block.
 *
 * Rows or columns of one (M = 1, N = 1: decode-time matrix-vector products)
 * skip packing: they stream the matrix once through a GEMV kernel, split
 * over the threads by output elements.
 *
 * Threads: the tasks are batch x (tm x tn) tiles of C, handed out
 * dynamically, a few per thread. One matrix is cut along one dimension
 * only, into equal tiles (up to a micro-panel), a multiple of the thread
 * count: columns when it has few rows and a large B (A then packed once,
 * shared by all tiles), rows otherwise (B packed once), so no tile repeats
 * another's packing (split_one_matrix). The shared operand is packed by the tiles
 * themselves, chunk by chunk as they first need it, inside the product's
 * one parallel loop (shared_pack, as OpenBLAS's threads share B panels).
 * Batches of matrices take tiles that repeat the least packing
 * (choose_tiles). Each thread packs into its own buffers, kept between
 * calls (thread-specific, freed when the thread exits).
 *
 * A B operand with a gemm_prepack slot (weights) is packed once, whole, in
 * the layout the tiles would pack it in, and the tiles read their blocks
 * from there (prepacked, cpu_gemm_prepacked; the slots' memory, budget and
 * keys are gemm_prepack.c's); an A operand likewise (cpu_gemm_prepacked_a:
 * tiles of columns, each multiplying all rows).
 */
#include "gemm.h"

#include "cpu_features.h"
#include "cpu_relax.h"
#include "gemm_kernels.h"
#include "gemm_prepack.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- variant */

static const gemm_isa *active_isa(void) {
#if defined(__x86_64__) || defined(__i386__)
  const cpu_features *f = cpu_get_features();
  if (f->avx512 && f->f16c) return &gemm_isa_avx512;
  if (f->avx2_fma && f->f16c) return &gemm_isa_avx2;
#endif
  return &gemm_isa_scalar;
}

const char *cpu_gemm_variant(void) { return active_isa()->name; }

/* ---------------------------------------------------------------- per-thread buffers */

/* BUF_SHARED: the calling thread's copy of an operand packed once for all
 * the threads of one call (shared_operand). */
enum { BUF_A, BUF_B, BUF_X, BUF_Y, BUF_SHARED, BUF_COUNT };

typedef struct {
  float *p[BUF_COUNT];
  size_t cap[BUF_COUNT]; /* floats */
} thread_bufs;

static pthread_key_t bufs_key;
static pthread_once_t bufs_once = PTHREAD_ONCE_INIT;
static int bufs_key_ok;

static void bufs_free(void *v) {
  thread_bufs *b = v;
  for (int i = 0; i < BUF_COUNT; i++) free(b->p[i]);
  free(b);
}

static void bufs_init(void) { bufs_key_ok = pthread_key_create(&bufs_key, bufs_free) == 0; }

/* This thread's buffer `which` with room for n floats, 64-byte aligned, or
 * NULL when memory is short (the caller then takes the unpacked path). */
static float *thread_buf(int which, size_t n) {
  pthread_once(&bufs_once, bufs_init);
  if (!bufs_key_ok) return NULL;
  thread_bufs *b = pthread_getspecific(bufs_key);
  if (!b) {
    if (!(b = calloc(1, sizeof *b))) return NULL;
    if (pthread_setspecific(bufs_key, b) != 0) {
      free(b);
      return NULL;
    }
  }
  if (b->cap[which] >= n) return b->p[which];
  free(b->p[which]);
  size_t bytes = ((n ? n : 1) * sizeof(float) + 63) & ~(size_t)63;
  b->p[which] = aligned_alloc(64, bytes);
  b->cap[which] = b->p[which] ? n : 0;
  return b->p[which];
}

/* ---------------------------------------------------------------- operand views */

/* One matrix of an operand: element (r, k) of op(X) (r: the M row of A or
 * the N column of B) is at data[r*rs + k*ks]. */
typedef struct {
  const void *data;
  rlx_dtype dt;
  int64_t rs, ks;
} mat_view;

/* Matrix b of operand o, strides still 0. */
static mat_view view_of(const gemm_operand *o, int64_t b) {
  int64_t off = o->batch_offsets ? o->batch_offsets[b] : b * o->batch_stride;
  mat_view v = {(const char *)o->data + off * (int64_t)gemm_elem_size(o->dtype), o->dtype, 0, 0};
  return v;
}

/* A not transposed is [M,K]: (r, k) at r*ld + k; B not transposed is [K,N]:
 * (r = j, k) at k*ld + j. The transposed layouts swap the strides. */
static mat_view view_a(const gemm_operand *o, int64_t b) {
  mat_view v = view_of(o, b);
  v.rs = o->trans ? 1 : o->ld;
  v.ks = o->trans ? o->ld : 1;
  return v;
}

static mat_view view_b(const gemm_operand *o, int64_t b) {
  mat_view v = view_of(o, b);
  v.rs = o->trans ? o->ld : 1;
  v.ks = o->trans ? 1 : o->ld;
  return v;
}

static inline const void *view_at(const mat_view *v, int64_t r, int64_t k) {
  return (const char *)v->data + (r * v->rs + k * v->ks) * (int64_t)gemm_elem_size(v->dt);
}

/* dst[i] = element i*step of the run starting at src, for i < n (F32 out). */
static void load_run(const gemm_isa *isa, const void *src, rlx_dtype dt, int64_t step, float *dst,
                     int64_t n) {
  if (step == 1) {
    if (dt == RLX_F32) memcpy(dst, src, (size_t)n * sizeof(float));
    else isa->convert(src, dt, dst, n);
  } else {
    for (int64_t i = 0; i < n; i++) dst[i] = gemm_load(src, dt, i * step);
  }
}

/* ---------------------------------------------------------------- even splits */

/* [0, n) in `parts` nearly equal pieces: piece p is [split_at(n, parts, p),
 * split_at(n, parts, p + 1)). */
static inline int64_t split_at(int64_t n, int64_t parts, int64_t p) {
  return n / parts * p + (p < n % parts ? p : n % parts);
}

static inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* ---------------------------------------------------------------- epilogue rows */

/* Whether ep has a row part (gemm_epilogue: row bias, residual, clamp):
 * then act runs there, after the residual, not in the micro-kernel. */
static inline int has_rows(const gemm_epilogue *ep) { return ep->row_bias || ep->residual || ep->clamp; }

/* The act the micro-kernel and GEMV epilogues apply. */
static inline rlx_act inner_act(const gemm_epilogue *ep) { return has_rows(ep) ? RLX_ACT_NONE : ep->act; }

/* The row part of ep on rows [i0, i0+m) of n columns, c and res (the
 * residual, or NULL) at the columns' first element of row 0. */
static void rows_post_at(const gemm_isa *isa, const gemm_epilogue *ep, float *c, int64_t ldc, const float *res,
                         int64_t i0, int64_t m, int64_t n) {
  for (int64_t i = i0; i < i0 + m; i++)
    isa->row_post(c + i * ldc, n, ep->row_bias ? ep->row_bias[i] : 0.0f, res ? res + i * ep->ldr : NULL, ep->act,
                  ep->alpha, ep->clamp, ep->lo, ep->hi);
}

/* The row part of ep on C[i0 : i0+m, j0 : j0+n] (after the inner part). */
static void rows_post(const gemm_isa *isa, const gemm_epilogue *ep, float *C, int64_t ldc, int64_t i0,
                      int64_t m, int64_t j0, int64_t n) {
  rows_post_at(isa, ep, C + j0, ldc, ep->residual ? ep->residual + j0 : NULL, i0, m, n);
}

void cpu_gemm_row_post(float *y, int64_t n, float add, const float *res, const gemm_epilogue *ep) {
  active_isa()->row_post(y, n, add, res, ep->act, ep->alpha, ep->clamp, ep->lo, ep->hi);
}

void cpu_transpose(const float *src, int64_t ld, int64_t rows, int64_t cols, float *dst, int64_t dst_ld) {
  active_isa()->pack_t(src, ld, rows, cols, dst, dst_ld);
}

/* ---------------------------------------------------------------- packing */

/* Ap <- op(A)[i0 : i0+mc, k0 : k0+kc] as `panels` row panels (even split of
 * mc), each k-major with its own row count as stride. tmp: kc floats. */
static void pack_a_block(const gemm_isa *isa, const mat_view *A, int64_t i0, int64_t mc,
                         int64_t k0, int64_t kc, int64_t panels, float *Ap, float *tmp) {
  float *dst = Ap;
  for (int64_t p = 0; p < panels; p++) {
    int64_t r0 = split_at(mc, panels, p), mr = split_at(mc, panels, p + 1) - r0;
    const void *src = view_at(A, i0 + r0, k0);
    if (A->ks == 1 && A->dt == RLX_F32) {
      isa->pack_t(src, A->rs, mr, kc, dst, mr); /* rows contiguous in k: transpose */
    } else if (A->ks == 1) {
      for (int64_t r = 0; r < mr; r++) { /* convert a row, scatter it at stride mr */
        isa->convert(view_at(A, i0 + r0 + r, k0), A->dt, tmp, kc);
        for (int64_t k = 0; k < kc; k++) dst[k * mr + r] = tmp[k];
      }
    } else if (A->dt == RLX_F32 && A->rs == 1) { /* A transposed: each k is a contiguous run */
      const float *s = src;
      for (int64_t k = 0; k < kc; k++, s += A->ks)
        for (int64_t r = 0; r < mr; r++) dst[k * mr + r] = s[r];
    } else {
      for (int64_t k = 0; k < kc; k++)
        load_run(isa, view_at(A, i0 + r0, k0 + k), A->dt, A->rs, dst + k * mr, mr);
    }
    dst += mr * kc;
  }
}

/* Bp <- op(B)[k0 : k0+kc, j0 : j0+nc] as column panels of nr_max (the last
 * zero-padded), each k-major with stride nr_max. tmp: max(kc, nc) floats. */
static void pack_b_block(const gemm_isa *isa, const mat_view *B, int64_t k0, int64_t kc,
                         int64_t j0, int64_t nc, float *Bp, float *tmp) {
  const int64_t NR = isa->nr_max, panels = ceil_div(nc, NR);
  if (B->rs == 1 && B->dt == RLX_F32) {
    isa->pack_b(view_at(B, j0, k0), B->ks, kc, nc, Bp);
  } else if (B->rs == 1) {
    /* rows contiguous in j: convert each row once, deal it to the panels */
    for (int64_t k = 0; k < kc; k++) {
      isa->convert(view_at(B, j0, k0 + k), B->dt, tmp, nc);
      for (int64_t p = 0; p < panels; p++) {
        int64_t nr = nc - p * NR < NR ? nc - p * NR : NR;
        float *d = Bp + (p * kc + k) * NR;
        memcpy(d, tmp + p * NR, (size_t)nr * sizeof(float));
        for (int64_t j = nr; j < NR; j++) d[j] = 0.0f;
      }
    }
  } else {
    /* B transposed: column j is contiguous in k */
    for (int64_t p = 0; p < panels; p++) {
      int64_t nr = nc - p * NR < NR ? nc - p * NR : NR;
      float *d = Bp + p * kc * NR;
      if (B->dt == RLX_F32) {
        isa->pack_t(view_at(B, j0 + p * NR, k0), B->rs, nr, kc, d, NR);
      } else {
        for (int64_t j = 0; j < nr; j++) {
          isa->convert(view_at(B, j0 + p * NR + j, k0), B->dt, tmp, kc);
          for (int64_t k = 0; k < kc; k++) d[k * NR + j] = tmp[k];
        }
      }
      for (int64_t k = 0; k < kc; k++)
        for (int64_t j = nr; j < NR; j++) d[k * NR + j] = 0.0f;
    }
  }
}

/* ---------------------------------------------------------------- operands packed whole */

/* One operand packed whole: B in the prepacked layout (struct
 * gemm_prepack), or A (all M rows, `rows` = M) for K block kb at
 * dst + pc * M in the row panels of tile_packed's single A block of M rows
 * (the even split of M into ceil(M / mr) panels; a chunk of consecutive
 * panels, split evenly into as many panels on its own, gives the same
 * panels: the larger ones come first in both). The work comes in units:
 * unit kb * chunks + c is chunk c (chunk_panels consecutive micro-panels,
 * the last one fewer) of K block kb. */
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
static pack_job pack_job_for(const gemm_isa *isa, const mat_view *X, int is_a, int64_t K,
                             int64_t rows, float *dst, int64_t chunks) {
  int64_t panels = ceil_div(rows, is_a ? isa->mr_max : isa->nr_max);
  int64_t per = ceil_div(panels, chunks > 1 ? chunks : 1);
  pack_job j = {isa, *X, is_a, K, rows, ceil_div(K, isa->kc), panels, per, ceil_div(panels, per), dst};
  return j;
}

/* Micro-panels [*p0, *p1) of chunk c. */
static inline void chunk_range(const pack_job *j, int64_t c, int64_t *p0, int64_t *p1) {
  *p0 = c * j->chunk_panels;
  *p1 = *p0 + j->chunk_panels < j->panels ? *p0 + j->chunk_panels : j->panels;
}

/* The first row (A) or column (B) of micro-panel p (p = panels: the end). */
static inline int64_t panel_start(const pack_job *j, int64_t p) {
  if (j->is_a) return split_at(j->rows, j->panels, p);
  int64_t r = p * j->isa->nr_max;
  return r < j->rows ? r : j->rows;
}

/* Floats of the conversion buffer pack_unit needs. */
static inline int64_t pack_tmp_floats(const pack_job *j) {
  int64_t kc = ceil_div(j->K, j->kblocks);
  int64_t span = j->chunk_panels * (j->is_a ? j->isa->mr_max : j->isa->nr_max);
  return kc > span ? kc : span;
}

/* Packs unit u of the job; tmp: pack_tmp_floats floats. */
static void pack_unit(const pack_job *j, int64_t u, float *tmp) {
  const int64_t pad = j->is_a ? j->rows : j->panels * j->isa->nr_max;
  int64_t kb = u / j->chunks, p0, p1;
  chunk_range(j, u % j->chunks, &p0, &p1);
  int64_t pc = split_at(j->K, j->kblocks, kb), kc = split_at(j->K, j->kblocks, kb + 1) - pc;
  int64_t r0 = panel_start(j, p0), r1 = panel_start(j, p1);
  float *dst = j->dst + pc * pad + r0 * kc;
  if (j->is_a) pack_a_block(j->isa, &j->X, r0, r1 - r0, pc, kc, p1 - p0, dst, tmp);
  else pack_b_block(j->isa, &j->X, pc, kc, r0, r1 - r0, dst, tmp);
}

typedef struct {
  pack_job job;
  _Atomic int failed; /* a task had no conversion buffer: dst incomplete */
} pack_whole_job;

static void pack_task(void *arg, int64_t begin, int64_t end, int thread) {
  (void)thread;
  pack_whole_job *w = arg;
  float *tmp = thread_buf(BUF_X, (size_t)pack_tmp_floats(&w->job));
  if (!tmp) {
    atomic_store(&w->failed, 1);
    return;
  }
  for (int64_t u = begin; u < end; u++) pack_unit(&w->job, u, tmp);
}

/* Micro-panels per task of the parallel packing: at most this many, and
 * few enough for 4 tasks per thread (one thread must not pack alone). */
#define PACK_CHUNK_PANELS 16

/* Packs an operand whole (pack_job_for) on the ctx's threads, as its own
 * parallel loop; 0 when a thread had no buffer. */
static int pack_whole(cpu_ctx *ctx, const gemm_isa *isa, const mat_view *X, int is_a, int64_t K,
                      int64_t rows, float *dst) {
  int64_t panels = ceil_div(rows, is_a ? isa->mr_max : isa->nr_max), kblocks = ceil_div(K, isa->kc);
  int64_t per = ceil_div(panels * kblocks, 4 * (int64_t)cpu_ctx_threads(ctx));
  if (per > PACK_CHUNK_PANELS) per = PACK_CHUNK_PANELS;
  pack_whole_job w = {pack_job_for(isa, X, is_a, K, rows, dst, ceil_div(panels, per)), 0};
  cpu_parallel_for(ctx, w.job.kblocks * w.job.chunks, 1, pack_task, &w);
  return !atomic_load(&w.failed);
}

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
enum { UNIT_FREE, UNIT_PACKING, UNIT_READY };

typedef struct {
  pack_job job;
  _Atomic unsigned char *state; /* [kblocks * chunks] */
} shared_pack;

/* How long a tile polls a unit another tile is packing before it yields
 * the core to that tile (on a machine with more runnable threads than
 * cores the packer may be queued behind it). */
#define UNIT_SPIN_POLLS 2048

/* Chunk c of K block kb packed: by this tile, or by the one that claimed
 * it first (waited for). tmp: pack_tmp_floats floats. */
static void unit_ready(shared_pack *sp, int64_t kb, int64_t c, float *tmp) {
  _Atomic unsigned char *s = &sp->state[kb * sp->job.chunks + c];
  unsigned char v = atomic_load_explicit(s, memory_order_acquire);
  if (v == UNIT_READY) return;
  if (v == UNIT_FREE && atomic_compare_exchange_strong(s, &v, UNIT_PACKING)) {
    pack_unit(&sp->job, kb * sp->job.chunks + c, tmp);
    atomic_store_explicit(s, UNIT_READY, memory_order_release);
    return;
  }
  for (unsigned i = 0; atomic_load_explicit(s, memory_order_acquire) != UNIT_READY; i++) {
    if (i < UNIT_SPIN_POLLS) cpu_relax();
    else sched_yield();
  }
}

/* The part (chunk) a tile starts with, of `parts`, for tile t of a split
 * over `threads`: the threads' first tiles start evenly spaced, so that each
 * packs a run of chunks before it reaches chunks another thread packed;
 * later tiles start one chunk further each. */
static inline int64_t first_part(int64_t t, int64_t threads, int64_t parts) {
  return (t % threads * parts / threads + t / threads) % parts;
}

/* ---------------------------------------------------------------- one tile */

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
} gemm_problem;

/* The unpacked loop: correct without any buffer (when memory is short). */
static void tile_unpacked(const gemm_problem *pr, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const gemm_epilogue *ep = pr->ep;
  for (int64_t i = m0; i < m1; i++) {
    float *c = pr->C + i * pr->ldc;
    for (int64_t j = n0; j < n1; j++) {
      float s = 0.0f;
      for (int64_t k = 0; k < pr->K; k++)
        s += gemm_load(pr->A.data, pr->A.dt, i * pr->A.rs + k * pr->A.ks) *
             gemm_load(pr->B.data, pr->B.dt, j * pr->B.rs + k * pr->B.ks);
      c[j] = s;
    }
    gemm_isa_scalar.epilogue(c + n0, n1 - n0, ep->bias ? ep->bias + n0 : NULL, 1, inner_act(ep), ep->alpha);
    if (has_rows(ep)) rows_post(&gemm_isa_scalar, ep, pr->C, pr->ldc, i, 1, n0, n1 - n0);
  }
}

/* C[ic : ic+mc, jc : jc+nc] (+)= packed A block (`panels` row panels, the
 * even split of mc) x packed B block (read in place: Bp is B's row pc at
 * column 0). */
static void macro_kernel(const gemm_problem *pr, const float *Ap, int64_t ic, int64_t mc,
                         int64_t panels, const float *Bp, int64_t jc, int64_t nc, int64_t kc,
                         int flags) {
  const gemm_isa *isa = pr->isa;
  const gemm_epilogue *ep = pr->ep;
  const int64_t NR = isa->nr_max;
  /* B prepacked in a slot (not packed by the tiles of this call): a
   * weight, read from L3 or memory */
  const int far = pr->b_packed && !(pr->shared && !pr->shared->job.is_a) ? GEMM_B_FAR : 0;
  for (int64_t jr = 0; jr < nc; jr += NR) {
    int nr = (int)(nc - jr < NR ? nc - jr : NR);
    /* the panel's first column: in the bias, in C, the residual and B */
    int64_t col = jc + jr, cc = col, rc = col, bc = col;
    if (pr->groups) {
      const gemm_col_groups *g = pr->groups;
      const int64_t mat = col / pr->group_pad, p = col % pr->group_pad;
      if (g->width - p < nr) nr = (int)(g->width - p);
      col = p;
      cc = mat * g->c_stride + p;
      rc = mat * g->r_stride + p;
      bc = mat * g->b_stride + p;
    }
    gemm_tile_epilogue tep = {.bias = ep->bias ? ep->bias + col : NULL, .act = inner_act(ep), .alpha = ep->alpha};
    const int in_micro = isa->micro_rows && has_rows(ep);
    if (in_micro) {
      tep.act = ep->act;
      tep.ldr = ep->ldr;
      tep.clamp = ep->clamp;
      tep.lo = ep->lo;
      tep.hi = ep->hi;
    }
    tep.b_ld = pr->b_ld;
    const float *bp = pr->b_ld ? Bp + bc : Bp + jr * kc;
    /* No prefetch of the next B micro-panel here: the micro-kernel's own
     * prefetches run into it (the panels are consecutive), and a burst of
     * a whole panel's prefetches before a call stalled the core on the
     * fill buffers instead of overlapping the FMAs (MiniLM's products at
     * 24 rows against weights packed in L3: 3.9 -> 3.2 ms). */
    for (int64_t p = 0; p < panels; p++) {
      int64_t r0 = split_at(mc, panels, p), mr = split_at(mc, panels, p + 1) - r0;
      if (in_micro) {
        tep.row_bias = ep->row_bias ? ep->row_bias + ic + r0 : NULL;
        tep.residual = ep->residual ? ep->residual + (ic + r0) * ep->ldr + rc : NULL;
      }
      isa->micro((int)mr, nr, kc, Ap + r0 * kc, bp, pr->C + (ic + r0) * pr->ldc + cc, pr->ldc, flags | far, &tep);
      if ((flags & GEMM_LAST) && has_rows(ep) && !in_micro)
        rows_post_at(isa, ep, pr->C + cc, pr->ldc, ep->residual ? ep->residual + rc : NULL, ic + r0, mr, nr);
    }
  }
}

/* The largest K block: K in ceil(K / kc) even blocks (split_at). */
static inline int64_t k_block(const gemm_isa *isa, int64_t K) {
  return ceil_div(K, ceil_div(K, isa->kc));
}

/* Whether a tile of m rows packs one A block per K block and reuses it over
 * all of its columns (tile_packed). */
static inline int reuses_a(const gemm_isa *isa, int64_t m, int64_t K) {
  return m * k_block(isa, K) <= isa->a_block_floats;
}

/* Bp <- B's block [pc, pc + kc) x [jc, jc + nc) from its source or its
 * operand, as column panels: with groups, a matrix's columns at a time
 * (each padded to whole panels, as the product's columns are). tmp:
 * max(kc, nc) floats. */
static void pack_b_cols(const gemm_problem *pr, int64_t pc, int64_t kc, int64_t jc, int64_t nc, float *Bp,
                        float *tmp) {
  const gemm_col_groups *g = pr->groups;
  for (int64_t q = jc; q < jc + nc;) {
    int64_t mat = 0, p = q, len = nc, valid = nc;
    if (g) {
      mat = q / pr->group_pad;
      p = q % pr->group_pad;
      len = jc + nc - q < pr->group_pad - p ? jc + nc - q : pr->group_pad - p;
      valid = len < g->width - p ? len : g->width - p;
    }
    float *dst = Bp + (q - jc) * kc;
    if (pr->b_src) {
      pr->b_src->pack(pr->b_src->ctx, pc, kc, g ? mat * g->width + p : p, valid, dst, pr->isa->nr_max);
    } else {
      mat_view B = pr->B;
      if (g) B.data = (const char *)B.data + mat * g->b_stride * (int64_t)gemm_elem_size(B.dt);
      pack_b_block(pr->isa, &B, pc, kc, p, valid, dst, tmp);
    }
    q += len;
  }
}

static void tile_packed(const gemm_problem *pr, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const gemm_isa *isa = pr->isa;
  const int64_t NR = isa->nr_max, MR = isa->mr_max, K = pr->K;
  const int64_t m = m1 - m0, n = n1 - n0;
  const int64_t kblocks = ceil_div(K, isa->kc), KC = k_block(isa, K);
  shared_pack *sp = pr->shared;
  /* Few rows (m x kc fits the A budget; M up to ~100-200): one A block,
   * packed once per K block and reused over all of N, with B blocks sized to
   * stay in L2 between packing and use. More rows: M blocks of mc; B blocks
   * as large as nc allows, each reused by every M block. A prepacked B
   * (no packing to amortize) takes one A block up to twice the budget:
   * each B panel is then read once, with no A repacked per B block (ViT's
   * 197 token rows against its 768 x 3072 weights). */
  const int reuse_a = reuses_a(isa, m, K) || (pr->b_packed && !sp && m * KC <= 2 * isa->a_block_floats);
  const int64_t mblocks = reuse_a ? 1 : ceil_div(m, isa->mc), MC = ceil_div(m, mblocks);
  int64_t nc_max = reuse_a || pr->a_packed ? isa->b_block_floats / KC / NR * NR : isa->nc;
  if (nc_max < NR) nc_max = NR;
  /* a B packed whole needs no L2-sized blocks over N */
  if (reuse_a && pr->b_packed) nc_max = ceil_div(n, NR) * NR;
  /* but a prepacked B that several A blocks read in turn does: in blocks
   * of twice the L2 budget each is read from memory once, not once per A
   * block (ViT's 197 token rows are two A blocks against 768 x 3072) */
  const int64_t nc_l2 = 2 * isa->b_block_floats / KC / NR * NR;
  if (!reuse_a && pr->b_packed && !sp && mblocks > 1 && nc_l2 < nc_max) nc_max = nc_l2 > NR ? nc_l2 : NR;
  /* B packed by the tiles as they go: blocks of whole chunks */
  const int64_t b_chunk = sp && pr->b_packed ? sp->job.chunk_panels * NR : 0;
  if (b_chunk) nc_max = ceil_div(nc_max, b_chunk) * b_chunk;
  const int64_t nblocks = ceil_div(n, nc_max);
  const int64_t NC = b_chunk ? nc_max : ceil_div(ceil_div(n, nblocks), NR) * NR;
  int64_t tmp_floats = pr->b_packed || KC > NC ? KC : NC;
  if (sp && pack_tmp_floats(&sp->job) > tmp_floats) tmp_floats = pack_tmp_floats(&sp->job);
  float *Ap = pr->a_packed ? NULL : thread_buf(BUF_A, (size_t)(MC * KC));
  float *Bp = pr->b_packed || pr->b_ld ? NULL : thread_buf(BUF_B, (size_t)(KC * NC));
  float *tmp = thread_buf(BUF_X, (size_t)tmp_floats);
  if (!(Ap || pr->a_packed) || !(Bp || pr->b_packed || pr->b_ld) || !tmp) {
    if (pr->b_src || pr->groups) atomic_store(pr->failed, 1); /* no B matrix to read unpacked */
    else tile_unpacked(pr, m0, m1, n0, n1);
    return;
  }
  const int64_t n_pad = ceil_div(pr->N, NR) * NR;
  if (pr->a_packed) {
    /* tiles of columns, A shared (all M rows, one block per K block): its
     * chunks for this K block made ready, the free ones packed here in
     * rotation from this tile's first one, then each B block multiplied with
     * all rows (whole columns of micro-panels per B micro-panel), in runs
     * of row panels of at most the A budget, each of which stays in L2
     * while it meets the whole B block (a prepacked A of many rows: a
     * convolution's weight) */
    const int64_t panels = ceil_div(pr->M, MR);
    int64_t run = isa->a_block_floats / (KC * MR);
    if (run < 1) run = 1;
    for (int64_t kb = 0; kb < kblocks; kb++) {
      int64_t pc = split_at(K, kblocks, kb), kc = split_at(K, kblocks, kb + 1) - pc;
      int flags = (kb > 0 ? GEMM_ACCUMULATE : 0) | (kb == kblocks - 1 ? GEMM_LAST : 0);
      for (int64_t q = 0; sp && q < sp->job.chunks; q++)
        unit_ready(sp, kb, (pr->first_part + q) % sp->job.chunks, tmp);
      for (int64_t jc = n0; jc < n1; jc += NC) {
        int64_t nc = n1 - jc < NC ? n1 - jc : NC;
        const float *b = pr->b_packed ? pr->b_packed + pc * n_pad + jc * kc
                         : pr->b_ld   ? (const float *)pr->B.data + pc * pr->b_ld
                                      : Bp;
        if (!pr->b_packed && !pr->b_ld) pack_b_cols(pr, pc, kc, jc, nc, Bp, tmp);
        /* consecutive panels of the even split are the even split of
         * their own rows (pack_job) */
        for (int64_t p0 = pr->a_p0; p0 < pr->a_p1; p0 += run) {
          int64_t p1 = p0 + run < pr->a_p1 ? p0 + run : pr->a_p1;
          int64_t r0 = split_at(pr->M, panels, p0), r1 = split_at(pr->M, panels, p1);
          macro_kernel(pr, pr->a_packed + pc * pr->M + r0 * kc, r0, r1 - r0, p1 - p0, b, jc, nc, kc, flags);
        }
      }
    }
    return;
  }
  if (pr->b_packed) {
    /* B packed whole: for each block of columns and K block, each A block
     * packed once and multiplied with all of the block's B; B's chunks (when
     * the tiles pack them) in rotation from this tile's first one */
    const int64_t first_block = b_chunk ? pr->first_part * b_chunk / NC % nblocks : 0;
    for (int64_t bi = 0; bi < nblocks; bi++) {
      int64_t jc = n0 + (first_block + bi) % nblocks * NC, nc = n1 - jc < NC ? n1 - jc : NC;
      int64_t parts = b_chunk ? ceil_div(nc, b_chunk) : 1, width = b_chunk ? b_chunk : nc;
      for (int64_t kb = 0; kb < kblocks; kb++) {
        int64_t pc = split_at(K, kblocks, kb), kc = split_at(K, kblocks, kb + 1) - pc;
        int flags = (kb > 0 ? GEMM_ACCUMULATE : 0) | (kb == kblocks - 1 ? GEMM_LAST : 0);
        for (int64_t mb = 0; mb < mblocks; mb++) {
          int64_t ic = m0 + split_at(m, mblocks, mb), mc = m0 + split_at(m, mblocks, mb + 1) - ic;
          pack_a_block(isa, &pr->A, ic, mc, pc, kc, ceil_div(mc, MR), Ap, tmp);
          for (int64_t q = 0; q < parts; q++) {
            int64_t j0 = jc + (pr->first_part + q) % parts * width;
            int64_t j1 = j0 + width < jc + nc ? j0 + width : jc + nc;
            if (sp) unit_ready(sp, kb, j0 / b_chunk, tmp);
            macro_kernel(pr, Ap, ic, mc, ceil_div(mc, MR), pr->b_packed + pc * n_pad + j0 * kc, j0,
                         j1 - j0, kc, flags);
          }
        }
      }
    }
    return;
  }
  /* each tile packs its own blocks */
  for (int64_t kb = 0; reuse_a && kb < kblocks; kb++) {
    int64_t pc = split_at(K, kblocks, kb), kc = split_at(K, kblocks, kb + 1) - pc;
    int flags = (kb > 0 ? GEMM_ACCUMULATE : 0) | (kb == kblocks - 1 ? GEMM_LAST : 0);
    pack_a_block(isa, &pr->A, m0, m, pc, kc, ceil_div(m, MR), Ap, tmp);
    for (int64_t jc = n0; jc < n1; jc += NC) {
      int64_t nc = n1 - jc < NC ? n1 - jc : NC;
      pack_b_block(isa, &pr->B, pc, kc, jc, nc, Bp, tmp);
      macro_kernel(pr, Ap, m0, m, ceil_div(m, MR), Bp, jc, nc, kc, flags);
    }
  }
  for (int64_t jc = n0; !reuse_a && jc < n1; jc += NC) {
    int64_t nc = n1 - jc < NC ? n1 - jc : NC;
    for (int64_t kb = 0; kb < kblocks; kb++) {
      int64_t pc = split_at(K, kblocks, kb), kc = split_at(K, kblocks, kb + 1) - pc;
      int flags = (kb > 0 ? GEMM_ACCUMULATE : 0) | (kb == kblocks - 1 ? GEMM_LAST : 0);
      pack_b_block(isa, &pr->B, pc, kc, jc, nc, Bp, tmp);
      for (int64_t mb = 0; mb < mblocks; mb++) {
        int64_t ic = m0 + split_at(m, mblocks, mb), mc = m0 + split_at(m, mblocks, mb + 1) - ic;
        pack_a_block(isa, &pr->A, ic, mc, pc, kc, ceil_div(mc, MR), Ap, tmp);
        macro_kernel(pr, Ap, ic, mc, ceil_div(mc, MR), Bp, jc, nc, kc, flags);
      }
    }
  }
}

/* ---------------------------------------------------------------- matrix-vector */

/* Outputs [o0, o1) of a problem with M == 1 (y = row of C over N) or N == 1
 * (y = column of C over M). */
static void tile_gemv(const gemm_problem *pr, int64_t o0, int64_t o1) {
  const gemm_isa *isa = pr->isa;
  const gemm_epilogue *ep = pr->ep;
  const int64_t K = pr->K, n = o1 - o0;
  const int row = pr->M == 1;
  /* the vector and the matrix: for a row of C, x = A's row and R = B */
  const mat_view *xv = row ? &pr->A : &pr->B, *Rv = row ? &pr->B : &pr->A;
  const float *x = view_at(xv, 0, 0);
  if (xv->dt != RLX_F32 || xv->ks != 1) {
    float *xb = thread_buf(BUF_X, (size_t)K);
    if (!xb) goto unpacked;
    load_run(isa, x, xv->dt, xv->ks, xb, K);
    x = xb;
  }
  float *y = row ? pr->C + o0 : NULL;
  if (!row) {
    if (pr->ldc == 1) {
      y = pr->C + o0;
    } else if (!(y = thread_buf(BUF_Y, (size_t)n))) {
      goto unpacked;
    }
  }
  const void *R = view_at(Rv, o0, 0);
  /* R (r, k) at r*rs + k*ks: k-strided rows are dot products */
  if (Rv->rs == 1) isa->gemv_rows(K, n, x, R, Rv->dt, Rv->ks, y);
  else isa->gemv_dots(K, n, x, R, Rv->dt, Rv->rs, y);
  if (row) {
    isa->epilogue(y, n, ep->bias ? ep->bias + o0 : NULL, 1, inner_act(ep), ep->alpha);
    if (has_rows(ep)) rows_post(isa, ep, pr->C, pr->ldc, 0, 1, o0, n);
  } else {
    isa->epilogue(y, n, ep->bias, 0, inner_act(ep), ep->alpha);
    if (y != pr->C + o0)
      for (int64_t i = 0; i < n; i++) pr->C[(o0 + i) * pr->ldc] = y[i];
    if (has_rows(ep)) rows_post(isa, ep, pr->C, pr->ldc, o0, n, 0, 1);
  }
  return;
unpacked:
  if (row) tile_unpacked(pr, 0, 1, o0, o1);
  else tile_unpacked(pr, o0, o1, 0, 1);
}

/* ---------------------------------------------------------------- prepacked operands */

/* The panels of operand b (shared by the batch; is_a: operand a, whose N
 * rows are op(A)'s M) for this call, packing them when the slot does not
 * hold them (gemm_prepack.c keeps them); NULL: pack per tile instead. */
static const float *prepacked(cpu_ctx *ctx, const gemm_isa *isa, const gemm_operand *b, int is_a,
                              gemm_prepack *p, int64_t K, int64_t N) {
  const gemm_prepack_key key = {isa, b->data, b->dtype, b->trans, is_a, b->ld, K, N};
  const float *held;
  if (gemm_prepack_lookup(p, &key, &held)) return held;
  const int64_t NR = isa->nr_max, n_pad = is_a ? N : ceil_div(N, NR) * NR;
  float *panels = gemm_prepack_claim(p, &key, (size_t)K * (size_t)n_pad);
  if (!panels) return NULL;
  mat_view B = is_a ? view_a(b, 0) : view_b(b, 0);
  if (!pack_whole(ctx, isa, &B, is_a, K, N, panels)) { /* once: all threads */
    gemm_prepack_unclaim(p);
    return NULL;
  }
  return panels;
}

/* ---------------------------------------------------------------- tasks */

typedef struct {
  const gemm_isa *isa;
  int64_t M, N, K;
  const gemm_operand *a, *b;
  float *C;
  int64_t ldc, c_batch_stride;
  const gemm_epilogue *ep;
  int64_t tm, tn; /* tiles per matrix: rows x columns (GEMV: tn output chunks) */
  int gemv;
  const float *b_packed; /* the shared B, prepacked, or NULL */
  const float *a_packed; /* A packed once for all tiles (tiles of whole panels), or NULL */
  shared_pack shared;    /* when shared.state: a_packed / b_packed packed by the tiles */
  int64_t threads;       /* the threads the tiles are split for */
  const gemm_b_source *b_src; /* gemm_problem's */
  _Atomic int failed;
  int64_t b_ld;               /* gemm_problem's */
  const gemm_col_groups *groups;
  int64_t group_pad;
  int even_cols; /* tiles of nearly equal column counts (whole panels) */
} gemm_job;

/* A matrix-vector product's output chunks are multiples of 16 elements:
 * whole vectors and whole cache lines. (64 left the chunks of two threads
 * at 5 : 4 for N = 576, and the product 0.89x of OpenBLAS's sgemv.) */
#define GEMV_UNIT 16

/* The first column of tile t of tn over N columns cut nearly evenly at
 * whole panels of nr (tile tn: N). */
static int64_t col_cut(int64_t N, int64_t tn, int64_t t, int64_t nr) {
  int64_t c = (N * t / tn + nr / 2) / nr * nr;
  return t == tn || c > N ? N : c;
}

static void run_task(void *arg, int64_t begin, int64_t end, int thread) {
  (void)thread;
  gemm_job *j = arg;
  int64_t per = j->tm * j->tn;
  for (int64_t t = begin; t < end; t++) {
    int64_t b = t / per, tile = t % per, ti = tile / j->tn, tj = tile % j->tn;
    shared_pack *sp = j->shared.state ? &j->shared : NULL;
    int64_t first = sp ? first_part(j->tm > 1 ? ti : tj, j->threads, sp->job.chunks) : 0;
    gemm_problem pr = {j->isa, j->M, j->N, j->K, view_a(j->a, b), j->b_src ? (mat_view){0} : view_b(j->b, b),
                       j->C + b * j->c_batch_stride, j->ldc, j->ep, j->b_packed, j->a_packed,
                       sp, first, j->b_src, &j->failed, j->b_ld, j->groups, j->group_pad, 0, 0};
    if (j->gemv) {
      int64_t len = j->M == 1 ? j->N : j->M, units = ceil_div(len, GEMV_UNIT);
      int64_t o0 = split_at(units, j->tn, tj) * GEMV_UNIT, o1 = split_at(units, j->tn, tj + 1) * GEMV_UNIT;
      if (o1 > len) o1 = len;
      if (o0 < o1) tile_gemv(&pr, o0, o1);
      continue;
    }
    int64_t NR = j->isa->nr_max, units = ceil_div(j->N, NR);
    int64_t m0 = split_at(j->M, j->tm, ti), m1 = split_at(j->M, j->tm, ti + 1);
    if (j->a_packed) { /* tiles of whole panels of the packed A */
      const int64_t panels = ceil_div(j->M, j->isa->mr_max);
      pr.a_p0 = split_at(panels, j->tm, ti);
      pr.a_p1 = split_at(panels, j->tm, ti + 1);
      m0 = split_at(j->M, panels, pr.a_p0);
      m1 = split_at(j->M, panels, pr.a_p1);
    }
    int64_t n0 = split_at(units, j->tn, tj) * NR, n1 = split_at(units, j->tn, tj + 1) * NR;
    if (j->even_cols) { /* a short last panel counts for its columns only */
      n0 = col_cut(j->N, j->tn, tj, NR);
      n1 = col_cut(j->N, j->tn, tj + 1, NR);
    }
    if (n1 > j->N) n1 = j->N;
    if (m0 < m1 && n0 < n1) tile_packed(&pr, m0, m1, n0, n1);
  }
}

/* Below this much work per thread (in flops of the packed path, about ten
 * microseconds) handing a share to a worker costs more than it saves: the
 * workers spin between the loops of a graph, so a hand-off is a few
 * hundred nanoseconds, and a product of a few rows (one sentence's
 * 24 x 384 x 384, 7 Mflop) is worth splitting. A GEMV flop counts 16: it
 * streams its matrix from memory at a small fraction of the FMA rate. */
#define GEMM_MIN_FLOPS_PER_THREAD (1 << 21)
#define GEMM_GEMV_FLOP_WEIGHT 16
/* Tasks per thread: the pool hands them out dynamically, so a worker that
 * wakes late or is preempted leaves less for the others to wait on. */
#define GEMM_TASKS_PER_THREAD 4

/* Splits a matrix into up to `s` tiles tm x tn: as many as the micro-panels
 * allow (never more pieces than rows of row panels or columns of column
 * panels), and among those the split that repacks least (tiles pack tn
 * copies of A's rows and tm of B's columns: minimize tn*M + tm*N; a
 * prepacked B is still read tm times). For batches, where the tiles of
 * different matrices share nothing. */
static void choose_tiles(int64_t s, int64_t M, int64_t N, int64_t mr, int64_t nr, int64_t *tm,
                         int64_t *tn) {
  int64_t max_m = ceil_div(M, mr), max_n = ceil_div(N, nr);
  int64_t best_tiles = 0;
  double best_cost = 0.0;
  *tm = *tn = 1;
  for (int64_t a = 1; a <= s && a <= max_m; a++) {
    int64_t b = s / a < max_n ? s / a : max_n;
    double cost = (double)b * (double)M + (double)a * (double)N;
    if (a * b > best_tiles || (a * b == best_tiles && cost < best_cost)) {
      best_tiles = a * b;
      best_cost = cost;
      *tm = a;
      *tn = b;
    }
  }
}

/* Tiles for `threads` threads over `units` micro-panels: up to `want`, a
 * multiple of threads (every thread gets the same number of equal tiles;
 * the pool hands them out largest first), fewer only when there are fewer
 * panels than threads. */
static int64_t even_tiles(int64_t units, int64_t threads, int64_t want) {
  int64_t t = want < units ? want : units;
  return t >= threads ? t / threads * threads : t;
}

/* An operand packed once per call and shared by all tiles, at most this
 * many floats (the caller's buffer, kept between calls like the others);
 * past it the tiles pack their own blocks. */
#define GEMM_SHARED_MAX_FLOATS ((int64_t)16 << 20)

/* Operand A (is_a) or B of job j set up to be packed whole by the tiles
 * as they go (shared_pack) into the calling thread's shared buffer, in
 * about one chunk per tile of the split; NULL when it cannot be had (too
 * large, no memory). */
static float *share_operand(gemm_job *j, int is_a, int64_t tiles) {
  const gemm_isa *isa = j->isa;
  const int64_t rows = is_a ? j->M : j->N;
  const int64_t floats = j->K * (is_a ? rows : ceil_div(rows, isa->nr_max) * isa->nr_max);
  if (floats > GEMM_SHARED_MAX_FLOATS) return NULL;
  float *dst = thread_buf(BUF_SHARED, (size_t)floats);
  if (!dst) return NULL;
  mat_view X = is_a ? view_a(j->a, 0) : view_b(j->b, 0);
  j->shared.job = pack_job_for(isa, &X, is_a, j->K, rows, dst, tiles);
  size_t units = (size_t)(j->shared.job.kblocks * j->shared.job.chunks);
  if (!(j->shared.state = malloc(units * sizeof *j->shared.state))) return NULL;
  for (size_t u = 0; u < units; u++) atomic_init(&j->shared.state[u], UNIT_FREE);
  return dst;
}

/* A B of at most this many floats (1 MiB) is shared by tiles of rows even
 * when the matrix has few enough rows for tiles of columns: every row tile
 * then re-reads all of B, from L2 at this size, and needs none of A from
 * the other threads, so no tile waits for another's packing (tiles of
 * columns all need all of A before they start; OpenBLAS also splits such
 * products by rows). */
#define GEMM_SMALL_B_FLOATS ((int64_t)1 << 18)

/* One matrix (batch 1) over several threads: cut along one dimension only,
 * so that the operand every tile needs whole is packed once (by the tiles,
 * shared_pack) instead of once per tile:
 *  - few rows (the reuse-A path: M x kc fits the A budget; prefill
 *    shapes) and B over GEMM_SMALL_B_FLOATS: tiles of columns, A packed
 *    once;
 *  - more rows: tiles of rows, each of at least mc rows where M allows
 *    (a tile streams all of B, whose micro-panels then serve >= mc rows),
 *    B packed once (or prepacked in a slot).
 * Tiles are equal up to one micro-panel, a multiple of the thread count.
 * Returns 0 when the shared copy cannot be had (too large, no memory): the
 * caller then splits as for batches. */
static int split_one_matrix(gemm_job *j, int64_t threads, int64_t want) {
  const gemm_isa *isa = j->isa;
  const int64_t M = j->M;
  j->threads = threads;
  if (reuses_a(isa, M, j->K) && j->K * j->N > GEMM_SMALL_B_FLOATS) {
    j->tm = 1;
    j->tn = even_tiles(ceil_div(j->N, isa->nr_max), threads, want);
    return j->tn == 1 || (j->a_packed = share_operand(j, 1, j->tn)) != NULL;
  }
  int64_t by_rows = M / isa->mc > threads ? M / isa->mc : threads;
  j->tn = 1;
  j->tm = even_tiles(ceil_div(M, isa->mr_max), threads, by_rows < want ? by_rows : want);
  /* chunks of B: one per tile, and a few per block of nc columns (a tile
   * walks B in such blocks of whole chunks: small chunks round them up
   * little) */
  int64_t chunks = 4 * ceil_div(j->N, isa->nc) > j->tm ? 4 * ceil_div(j->N, isa->nc) : j->tm;
  return j->tm == 1 || j->b_packed || (j->b_packed = share_operand(j, 0, chunks)) != NULL;
}

static void fill_k0(const gemm_isa *isa, int64_t batch, int64_t M, int64_t N, float *C,
                    int64_t ldc, int64_t c_batch_stride, const gemm_epilogue *ep) {
  for (int64_t b = 0; b < batch; b++)
    for (int64_t i = 0; i < M; i++) {
      float *c = C + b * c_batch_stride + i * ldc;
      for (int64_t j = 0; j < N; j++) c[j] = 0.0f;
      isa->epilogue(c, N, ep->bias, 1, inner_act(ep), ep->alpha);
    }
  if (has_rows(ep)) /* one matrix: the row part's residual is of one C */
    for (int64_t b = 0; b < batch; b++) rows_post(isa, ep, C + b * c_batch_stride, ldc, 0, M, 0, N);
}

static int operand_ok(const gemm_operand *o) {
  return o && o->data && (o->dtype == RLX_F32 || o->dtype == RLX_F16 || o->dtype == RLX_BF16);
}

void cpu_gemm_prepacked(cpu_ctx *ctx, int64_t batch, int64_t M, int64_t N, int64_t K,
                        const gemm_operand *a, const gemm_operand *b, gemm_prepack *b_prepack,
                        float *C, int64_t ldc, int64_t c_batch_stride, const gemm_epilogue *ep) {
  static const gemm_epilogue no_epilogue = {.act = RLX_ACT_NONE};
  if (batch <= 0 || M <= 0 || N <= 0 || K < 0 || !C) return;
  if (!ep) ep = &no_epilogue;
  const gemm_isa *isa = active_isa();
  if (K == 0) {
    fill_k0(isa, batch, M, N, C, ldc, c_batch_stride, ep);
    return;
  }
  if (!operand_ok(a) || !operand_ok(b)) return;

  gemm_job job = {isa, M, N, K, a, b, C, ldc, c_batch_stride, ep, 1, 1, M == 1 || N == 1, NULL, NULL,
                  {{0}, NULL}, 1, NULL, 0, 0, NULL, 0, 0};
  double work = 2.0 * (double)M * (double)N * (double)K * (double)batch *
                (job.gemv ? GEMM_GEMV_FLOP_WEIGHT : 1);
  int64_t threads = cpu_ctx_threads(ctx);
  double by_work = work / GEMM_MIN_FLOPS_PER_THREAD;
  if (by_work < (double)threads) threads = by_work < 1.0 ? 1 : (int64_t)by_work;
  /* tiles per matrix: a few tasks per thread */
  int64_t want = threads > 1 ? threads * GEMM_TASKS_PER_THREAD : 1;
  int64_t s = batch >= want ? 1 : ceil_div(want, batch);
  if (job.gemv) {
    /* The matrix streamed by rows (gemv_rows) is read in runs as long as
     * an output chunk: one chunk per thread keeps them long (the prefetchers
     * lose DRAM bandwidth on short strided runs); dot products read whole
     * rows whatever the chunk. */
    int by_rows = M == 1 ? !b->trans : a->trans;
    int64_t units = ceil_div(M == 1 ? N : M, GEMV_UNIT), chunks = by_rows && batch == 1 ? threads : s;
    job.tn = chunks < units ? chunks : units;
  } else {
    if (b_prepack && (batch == 1 || (b->batch_stride == 0 && !b->batch_offsets)))
      job.b_packed = prepacked(ctx, isa, b, 0, b_prepack, K, N);
    if (batch > 1 || threads == 1 || !split_one_matrix(&job, threads, s))
      choose_tiles(s, M, N, isa->mr_max, isa->nr_max, &job.tm, &job.tn);
  }
  int64_t tasks = batch * job.tm * job.tn;
  cpu_parallel_for(threads > 1 ? ctx : NULL, tasks, 1, run_task, &job);
  free((void *)job.shared.state);
}

/* The most floats of C a tile of a product in column groups writes when
 * K takes several blocks (about half an L2). */
#define GEMM_GROUP_C_FLOATS ((int64_t)1 << 17)

/* The tiles of columns of cpu_gemm_prepacked_a over A packed in ap, B
 * an operand or a source, the columns N or groups; 0 when a tile failed
 * (b_src or groups only). */
static int run_prepacked_a(cpu_ctx *ctx, const gemm_isa *isa, int64_t M, int64_t N, int64_t K, const float *ap,
                           const gemm_operand *a, const gemm_operand *b, const gemm_b_source *b_src,
                           const gemm_col_groups *groups, float *C, int64_t ldc, const gemm_epilogue *ep) {
  static const gemm_epilogue no_epilogue = {.act = RLX_ACT_NONE};
  gemm_job job = {isa, M, N, K, a, b, C, ldc, 0, ep ? ep : &no_epilogue, 1, 1, 0, NULL, ap, {{0}, NULL}, 1,
                  b_src, 0, 0, groups, 0, 0};
  if (groups) { /* each matrix's columns padded to whole micro-panels */
    job.group_pad = ceil_div(groups->width, isa->nr_max) * isa->nr_max;
    job.N = groups->count * job.group_pad;
  }
  /* an F32 B of rows in memory: read in place by a micro-kernel that can
   * (no copy into panels a block: a 1x1 convolution's x) */
  if (b && isa->b_in_place && b->dtype == RLX_F32 && !b->trans) job.b_ld = b->ld;
  int64_t threads = cpu_ctx_threads(ctx);
  double by_work = 2.0 * (double)M * (double)N * (double)K / GEMM_MIN_FLOPS_PER_THREAD;
  if (by_work < (double)threads) threads = by_work < 1.0 ? 1 : (int64_t)by_work;
  const int64_t units = ceil_div(job.N, isa->nr_max);
  if (threads > 1 && !groups && b && 2 * M >= 3 * N) {
    /* many more rows than columns (a 1x1 convolution's weight over a
     * plane of 14 x 14): a tile of rows a thread, each streaming its part
     * of A once (tiles of columns read all of A, from L3) and all of B,
     * the smaller operand, read in place (a B made by a source would be
     * made once a tile) */
    job.tm = even_tiles(ceil_div(M, isa->mr_max), threads, threads);
    cpu_parallel_for(ctx, job.tm, 1, run_task, &job);
    return !atomic_load(&job.failed);
  }
  /* tiles of columns, each with all rows of the packed A, which a tile
   * streams from L3 once a block of columns that fits L2 (tile_packed):
   * without groups, tiles no narrower than such a block where the
   * threads still get one each, cut by columns (196 positions: 96 and 100,
   * not 4 panels and 3 of which one holds 4 columns) */
  job.tn = threads > 1 ? even_tiles(units, threads, threads * GEMM_TASKS_PER_THREAD) : 1;
  if (threads > 1 && !groups) {
    int64_t nc = isa->b_block_floats / k_block(isa, K) / isa->nr_max * isa->nr_max;
    int64_t blocks = ceil_div(job.N, nc > isa->nr_max ? nc : isa->nr_max);
    blocks = ceil_div(blocks > threads ? blocks : threads, threads) * threads;
    if (blocks < job.tn) job.tn = blocks;
    job.even_cols = 1;
  }
  /* a tile's C is read back once per K block after the first: with the
   * columns of several matrices, tiles small enough for C to stay in L2 */
  const int64_t c_tiles = ceil_div(M * job.N, GEMM_GROUP_C_FLOATS);
  if (groups && K > isa->kc && c_tiles > job.tn)
    job.tn = threads > 1 ? even_tiles(units, threads, c_tiles) : (c_tiles < units ? c_tiles : units);
  cpu_parallel_for(threads > 1 ? ctx : NULL, job.tn, 1, run_task, &job);
  return !atomic_load(&job.failed);
}

void cpu_gemm_prepacked_a(cpu_ctx *ctx, int64_t M, int64_t N, int64_t K, const gemm_operand *a,
                          gemm_prepack *a_prepack, const gemm_operand *b, float *C, int64_t ldc,
                          const gemm_epilogue *ep) {
  const gemm_isa *isa = active_isa();
  const float *ap = M > 1 && N > 1 && K > 0 && a_prepack && operand_ok(a) && operand_ok(b) && C
                        ? prepacked(ctx, isa, a, 1, a_prepack, K, M)
                        : NULL;
  if (!ap) {
    cpu_gemm(ctx, 1, M, N, K, a, b, C, ldc, 0, ep);
    return;
  }
  run_prepacked_a(ctx, isa, M, N, K, ap, a, b, NULL, NULL, C, ldc, ep);
}

int cpu_gemm_prepacked_a_source(cpu_ctx *ctx, int64_t M, int64_t N, int64_t K, const gemm_operand *a,
                                gemm_prepack *a_prepack, const gemm_b_source *b, float *C, int64_t ldc,
                                const gemm_epilogue *ep) {
  const gemm_isa *isa = active_isa();
  const float *ap = M > 1 && N > 1 && K > 0 && a_prepack && operand_ok(a) && b && C
                        ? prepacked(ctx, isa, a, 1, a_prepack, K, M)
                        : NULL;
  return ap && run_prepacked_a(ctx, isa, M, N, K, ap, a, NULL, b, NULL, C, ldc, ep);
}

int cpu_gemm_prepacked_a_groups(cpu_ctx *ctx, int64_t M, int64_t K, const gemm_operand *a, gemm_prepack *a_prepack,
                                const gemm_operand *b, const gemm_b_source *b_src, const gemm_col_groups *groups,
                                float *C, int64_t ldc, const gemm_epilogue *ep) {
  const gemm_isa *isa = active_isa();
  const int64_t N = groups ? groups->count * groups->width : 0;
  const float *ap = M > 1 && N > 1 && K > 0 && a_prepack && operand_ok(a) && (b ? operand_ok(b) : b_src != NULL) && C
                        ? prepacked(ctx, isa, a, 1, a_prepack, K, M)
                        : NULL;
  return ap && run_prepacked_a(ctx, isa, M, N, K, ap, a, b, b ? NULL : b_src, groups, C, ldc, ep);
}

void cpu_gemm(cpu_ctx *ctx, int64_t batch, int64_t M, int64_t N, int64_t K, const gemm_operand *a,
              const gemm_operand *b, float *C, int64_t ldc, int64_t c_batch_stride,
              const gemm_epilogue *ep) {
  cpu_gemm_prepacked(ctx, batch, M, N, K, a, b, NULL, C, ldc, c_batch_stride, ep);
}

void cpu_sgemm(cpu_ctx *ctx, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
               const float *A, int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc,
               const gemm_epilogue *ep) {
  gemm_operand a = {A, RLX_F32, trans_a, lda, 0, NULL};
  gemm_operand b = {B, RLX_F32, trans_b, ldb, 0, NULL};
  cpu_gemm(ctx, 1, M, N, K, &a, &b, C, ldc, 0, ep);
}
