/* cpu_pool.c — the persistent worker pool behind cpu_parallel_for.
 *
 * One process-wide pool of pthreads, started on first use and kept (no
 * thread creation per op). A parallel loop splits [0, n) into chunks that
 * the caller and the workers take from a shared atomic counter. Loops from
 * different user threads are serialized; a loop started inside a pool task
 * runs serially in that task (no nested parallelism, no deadlock).
 */
#include "cpu.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#define CPU_POOL_MAX_THREADS 256

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t work_cv, done_cv;
  pthread_mutex_t job_mu;     /* one parallel loop at a time */
  int n_workers;              /* threads besides the caller */
  uint64_t generation;        /* bumped per job */
  int job_workers;            /* workers taking part in the current job */
  int pending;                /* of those, not finished yet */
  cpu_task_fn fn;
  void *arg;
  int64_t n, chunk;
  atomic_llong next;
} cpu_pool;

struct cpu_ctx { int threads; };

static cpu_pool pool = {.mu = PTHREAD_MUTEX_INITIALIZER, .work_cv = PTHREAD_COND_INITIALIZER,
                        .done_cv = PTHREAD_COND_INITIALIZER, .job_mu = PTHREAD_MUTEX_INITIALIZER};
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static _Thread_local int in_task;

static void run_chunks(int thread) {
  for (;;) {
    int64_t b = atomic_fetch_add(&pool.next, pool.chunk);
    if (b >= pool.n) break;
    int64_t e = b + pool.chunk < pool.n ? b + pool.chunk : pool.n;
    pool.fn(pool.arg, b, e, thread);
  }
}

static void *worker_main(void *p) {
  int index = (int)(intptr_t)p;  /* 1..n_workers; the caller is 0 */
  uint64_t seen = 0;
  in_task = 1;
  pthread_mutex_lock(&pool.mu);
  for (;;) {
    while (pool.generation == seen) pthread_cond_wait(&pool.work_cv, &pool.mu);
    seen = pool.generation;
    if (index > pool.job_workers) continue;
    pthread_mutex_unlock(&pool.mu);
    run_chunks(index);
    pthread_mutex_lock(&pool.mu);
    if (--pool.pending == 0) pthread_cond_signal(&pool.done_cv);
  }
  return NULL;
}

int cpu_hardware_threads(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > CPU_POOL_MAX_THREADS ? CPU_POOL_MAX_THREADS : (int)n;
}

/* Threads wanted: RLX_THREADS, else all cores. */
static int default_threads(void) {
  const char *env = getenv("RLX_THREADS");
  int n = env ? atoi(env) : 0;
  if (n <= 0) n = cpu_hardware_threads();
  return n > CPU_POOL_MAX_THREADS ? CPU_POOL_MAX_THREADS : n;
}

static void pool_start(void) {
  int want = default_threads();
  int hw = cpu_hardware_threads();
  int n = (want > hw ? want : hw) - 1;
  for (int i = 0; i < n; i++) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int ok = pthread_create(&t, &attr, worker_main, (void *)(intptr_t)(i + 1)) == 0;
    pthread_attr_destroy(&attr);
    if (!ok) break;  /* fewer workers is still correct */
    pool.n_workers++;
  }
}

cpu_ctx *cpu_ctx_new(int threads) {
  cpu_ctx *c = malloc(sizeof *c);
  if (!c) return NULL;
  pthread_once(&pool_once, pool_start);
  if (threads <= 0) threads = default_threads();
  if (threads > pool.n_workers + 1) threads = pool.n_workers + 1;
  c->threads = threads;
  return c;
}

void cpu_ctx_free(cpu_ctx *c) { free(c); }

int cpu_ctx_threads(const cpu_ctx *c) { return c ? c->threads : 1; }

void cpu_parallel_for(cpu_ctx *ctx, int64_t n, int64_t grain, cpu_task_fn fn, void *arg) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int threads = cpu_ctx_threads(ctx);
  if (in_task || threads <= 1 || n <= grain) {
    fn(arg, 0, n, 0);
    return;
  }
  pthread_mutex_lock(&pool.job_mu);
  int64_t chunks = (n + grain - 1) / grain;
  int workers = threads - 1;
  if (chunks - 1 < workers) workers = (int)(chunks - 1);
  /* A few chunks per thread balance uneven work without much overhead. */
  int64_t per = (n + (int64_t)(workers + 1) * 4 - 1) / ((int64_t)(workers + 1) * 4);
  pthread_mutex_lock(&pool.mu);
  pool.fn = fn;
  pool.arg = arg;
  pool.n = n;
  pool.chunk = per > grain ? per : grain;
  atomic_store(&pool.next, 0);
  pool.job_workers = workers;
  pool.pending = workers;
  pool.generation++;
  pthread_cond_broadcast(&pool.work_cv);
  pthread_mutex_unlock(&pool.mu);
  in_task = 1;
  run_chunks(0);
  in_task = 0;
  pthread_mutex_lock(&pool.mu);
  while (pool.pending > 0) pthread_cond_wait(&pool.done_cv, &pool.mu);
  pthread_mutex_unlock(&pool.mu);
  pthread_mutex_unlock(&pool.job_mu);
}
