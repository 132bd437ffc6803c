/* gemm_pack.c — the SGEMM's operands packed into the micro-kernels'
 * panels (layouts in gemm_kernels.h), F16/BF16 converted to F32 on the
 * way: the blocks one tile packs for itself, and an operand packed whole
 * (a prepacked weight, or the operand every tile of one matrix shares),
 * into buffers each thread keeps between calls.
 */
#include "gemm_pack.h"

#include "cpu_relax.h"
#include "huge_alloc.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- per-thread buffers */

typedef struct {
  float *p[GEMM_BUF_COUNT];
  size_t cap[GEMM_BUF_COUNT]; /* floats */
} thread_bufs;

static pthread_key_t bufs_key;
static pthread_once_t bufs_once = PTHREAD_ONCE_INIT;
static int bufs_key_ok;

static void bufs_free(void *v) {
  thread_bufs *b = v;
  for (int i = 0; i < GEMM_BUF_COUNT; i++) huge_free(b->p[i], b->cap[i] * sizeof(float));
  free(b);
}

static void bufs_init(void) { bufs_key_ok = pthread_key_create(&bufs_key, bufs_free) == 0; }

float *gemm_thread_buf(int which, size_t n) {
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
  huge_free(b->p[which], b->cap[which] * sizeof(float));
  if (!n) n = 1;
  b->p[which] = huge_alloc(n * sizeof(float));
  b->cap[which] = b->p[which] ? n : 0;
  return b->p[which];
}

/* ---------------------------------------------------------------- operand views */

void gemm_load_run(const gemm_isa *isa, const void *src, rlx_dtype dt, int64_t step, float *dst, int64_t n) {
  if (step == 1) {
    if (dt == RLX_F32) memcpy(dst, src, (size_t)n * sizeof(float));
    else isa->convert(src, dt, dst, n);
  } else {
    for (int64_t i = 0; i < n; i++) dst[i] = gemm_load(src, dt, i * step);
  }
}

/* ---------------------------------------------------------------- one tile's blocks */

void gemm_pack_a_block(const gemm_isa *isa, const mat_view *A, int64_t i0, int64_t mc, int64_t k0, int64_t kc,
                       int64_t panels, float *Ap, float *tmp) {
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
        gemm_load_run(isa, view_at(A, i0 + r0, k0 + k), A->dt, A->rs, dst + k * mr, mr);
    }
    dst += mr * kc;
  }
}

void gemm_pack_b_block(const gemm_isa *isa, const mat_view *B, int64_t k0, int64_t kc, int64_t j0, int64_t nc,
                       float *Bp, float *tmp) {
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

pack_job gemm_pack_job_for(const gemm_isa *isa, const mat_view *X, int is_a, int64_t K, int64_t rows, float *dst,
                           int64_t chunks) {
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

/* Packs unit u of the job; tmp: pack_tmp_floats floats. */
static void pack_unit(const pack_job *j, int64_t u, float *tmp) {
  const int64_t pad = j->is_a ? j->rows : j->panels * j->isa->nr_max;
  int64_t kb = u / j->chunks, p0, p1;
  chunk_range(j, u % j->chunks, &p0, &p1);
  int64_t pc = split_at(j->K, j->kblocks, kb), kc = split_at(j->K, j->kblocks, kb + 1) - pc;
  int64_t r0 = panel_start(j, p0), r1 = panel_start(j, p1);
  float *dst = j->dst + pc * pad + r0 * kc;
  if (j->is_a) gemm_pack_a_block(j->isa, &j->X, r0, r1 - r0, pc, kc, p1 - p0, dst, tmp);
  else gemm_pack_b_block(j->isa, &j->X, pc, kc, r0, r1 - r0, dst, tmp);
}

typedef struct {
  pack_job job;
  _Atomic int failed; /* a task had no conversion buffer: dst incomplete */
} pack_whole_job;

static void pack_task(void *arg, int64_t begin, int64_t end, int thread) {
  (void)thread;
  pack_whole_job *w = arg;
  float *tmp = gemm_thread_buf(GEMM_BUF_X, (size_t)pack_tmp_floats(&w->job));
  if (!tmp) {
    atomic_store(&w->failed, 1);
    return;
  }
  for (int64_t u = begin; u < end; u++) pack_unit(&w->job, u, tmp);
}

/* Micro-panels per task of the parallel packing: at most this many, and
 * few enough for 4 tasks per thread (one thread must not pack alone). */
#define PACK_CHUNK_PANELS 16

int gemm_pack_whole(cpu_ctx *ctx, const gemm_isa *isa, const mat_view *X, int is_a, int64_t K, int64_t rows,
                    float *dst) {
  int64_t panels = ceil_div(rows, is_a ? isa->mr_max : isa->nr_max), kblocks = ceil_div(K, isa->kc);
  int64_t per = ceil_div(panels * kblocks, 4 * (int64_t)cpu_ctx_threads(ctx));
  if (per > PACK_CHUNK_PANELS) per = PACK_CHUNK_PANELS;
  pack_whole_job w = {gemm_pack_job_for(isa, X, is_a, K, rows, dst, ceil_div(panels, per)), 0};
  cpu_parallel_for(ctx, w.job.kblocks * w.job.chunks, 1, pack_task, &w);
  return !atomic_load(&w.failed);
}

/* ---------------------------------------------------------------- shared by the tiles */

/* A unit's state in shared_pack. */
enum { UNIT_FREE, UNIT_PACKING, UNIT_READY };

/* How long a tile polls a unit another tile is packing before it yields
 * the core to that tile (on a machine with more runnable threads than
 * cores the packer may be queued behind it). */
#define UNIT_SPIN_POLLS 2048

int gemm_shared_pack_init(shared_pack *sp, const pack_job *job) {
  sp->job = *job;
  size_t units = (size_t)(job->kblocks * job->chunks);
  if (!(sp->state = malloc(units * sizeof *sp->state))) return 0;
  for (size_t u = 0; u < units; u++) atomic_init(&sp->state[u], UNIT_FREE);
  return 1;
}

void gemm_unit_ready(shared_pack *sp, int64_t kb, int64_t c, float *tmp) {
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
