/* gemm.c — the SGEMM driver: picks the kernel variant for this CPU, splits
 * a product into tiles of C and runs them on the thread pool. A tile's
 * blocked loops are gemm_tile.c's; the packing of operands (converting
 * F16/BF16 to F32 on the way) gemm_pack.c's; the micro-kernels
 * gemm_<variant>.c's.
 *
 * Rows or columns of one (M = 1, N = 1: decode-time matrix-vector products)
 * skip packing: they stream the matrix once through a GEMV kernel, split
 * over the threads by output elements.
 *
 * Threads: the tasks are batch x (tm x tn) tiles of C, handed out
 * dynamically, a few per thread. One matrix is cut along one dimension
 * only, into equal tiles (up to a micro-panel), a multiple of the thread
 * count: columns when it has few rows and a large B, or a B widened from
 * F16/BF16 (A then packed once, shared by all tiles), rows otherwise (B
 * packed once), so no tile repeats another's packing (split_one_matrix).
 * The shared operand is packed by the tiles themselves, chunk by chunk as
 * they first need it, inside the product's one parallel loop
 * (shared_pack, as OpenBLAS's threads share B panels).
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
#include "gemm_prepack.h"
#include "gemm_tile.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

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

void cpu_gemm_row_post(float *y, int64_t n, float add, const float *res, const gemm_epilogue *ep) {
  active_isa()->row_post(y, n, add, res, ep->act, ep->alpha, ep->clamp, ep->lo, ep->hi);
}

void cpu_transpose(const float *src, int64_t ld, int64_t rows, int64_t cols, float *dst, int64_t dst_ld) {
  active_isa()->pack_t(src, ld, rows, cols, dst, dst_ld);
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
  if (!gemm_pack_whole(ctx, isa, &B, is_a, K, N, panels)) { /* once: all threads */
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
  int c_in;      /* gemm_problem's */
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
                       sp, first, j->b_src, &j->failed, j->b_ld, j->groups, j->group_pad, 0, 0, j->c_in};
    if (j->gemv) {
      int64_t len = j->M == 1 ? j->N : j->M, units = ceil_div(len, GEMV_UNIT);
      int64_t o0 = split_at(units, j->tn, tj) * GEMV_UNIT, o1 = split_at(units, j->tn, tj + 1) * GEMV_UNIT;
      if (o1 > len) o1 = len;
      if (o0 < o1) gemm_tile_gemv(&pr, o0, o1);
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
    if (m0 < m1 && n0 < n1) gemm_tile_packed(&pr, m0, m1, n0, n1);
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
  float *dst = gemm_thread_buf(GEMM_BUF_SHARED, (size_t)floats);
  if (!dst) return NULL;
  mat_view X = is_a ? view_a(j->a, 0) : view_b(j->b, 0);
  pack_job job = gemm_pack_job_for(isa, &X, is_a, j->K, rows, dst, tiles);
  return gemm_shared_pack_init(&j->shared, &job) ? dst : NULL;
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
 *  - the same for more rows where B is F16/BF16 without a slot (a
 *    weight widened as it is packed) and A fits the shared buffer: each
 *    tile widens its own blocks of B and meets all of A with each from
 *    its L2, where tiles of rows would each re-read every K block of
 *    the shared B (16 MiB of 8192 columns on AVX2) from the L3, much of it
 *    packed in another core's cache;
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
  const int widened_b = !j->b_packed && j->b->dtype != RLX_F32 && M * j->K <= GEMM_SHARED_MAX_FLOATS;
  if ((reuses_a(isa, M, j->K) || widened_b) && j->K * j->N > GEMM_SMALL_B_FLOATS) {
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

/* ep, or *own: ep without its residual where that is C itself (gemm.h),
 * *c_in then set */
static const gemm_epilogue *residual_in_c(const gemm_epilogue *ep, const float *C, int64_t ldc,
                                          const gemm_col_groups *groups, gemm_epilogue *own, int *c_in) {
  *c_in = ep->residual && ep->residual == C && ep->ldr == ldc && (!groups || groups->r_stride == groups->c_stride);
  if (!*c_in) return ep;
  *own = *ep;
  own->residual = NULL;
  return own;
}

static void fill_k0(const gemm_isa *isa, int64_t batch, int64_t M, int64_t N, float *C,
                    int64_t ldc, int64_t c_batch_stride, const gemm_epilogue *ep, int c_in) {
  for (int64_t b = 0; b < batch; b++)
    for (int64_t i = 0; i < M; i++) {
      float *c = C + b * c_batch_stride + i * ldc;
      for (int64_t j = 0; j < N && !c_in; j++) c[j] = 0.0f;
      isa->epilogue(c, N, ep->bias, 1, inner_act(ep), ep->alpha);
    }
  if (has_rows(ep)) /* one matrix: the row part's residual is of one C */
    for (int64_t b = 0; b < batch; b++) gemm_rows_post(isa, ep, C + b * c_batch_stride, ldc, 0, M, 0, N);
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
  gemm_epilogue own;
  int c_in = 0; /* (a residual is of one matrix) */
  if (batch == 1) ep = residual_in_c(ep, C, ldc, NULL, &own, &c_in);
  const gemm_isa *isa = active_isa();
  if (K == 0) {
    fill_k0(isa, batch, M, N, C, ldc, c_batch_stride, ep, c_in);
    return;
  }
  if (!operand_ok(a) || !operand_ok(b)) return;

  /* (the GEMV kernels overwrite C: with C in, the tiles) */
  gemm_job job = {isa, M, N, K, a, b, C, ldc, c_batch_stride, ep, 1, 1, (M == 1 || N == 1) && !c_in, NULL, NULL,
                  {{0}, NULL}, 1, NULL, 0, 0, NULL, 0, 0, c_in};
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
  gemm_epilogue own;
  int c_in;
  ep = residual_in_c(ep ? ep : &no_epilogue, C, ldc, groups, &own, &c_in);
  gemm_job job = {isa, M, N, K, a, b, C, ldc, 0, ep, 1, 1, 0, NULL, ap, {{0}, NULL}, 1,
                  b_src, 0, 0, groups, 0, 0, c_in};
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
   * streams from L3 once a block of columns that fits L2 (gemm_tile_packed):
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
