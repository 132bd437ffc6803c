/* cpu_pool.c — the persistent worker pool behind cpu_parallel_for.
 *
 * One process-wide pool of pthreads, started on first use and kept (no
 * thread creation per op). A parallel loop splits [0, n) into chunks that
 * the caller and the workers take from a shared atomic counter. Loops from
 * different user threads are serialized; a loop started inside a pool task
 * runs serially in that task (no nested parallelism, no deadlock).
 *
 * Hand-off: a decode step runs hundreds of parallel loops of a few tens of
 * microseconds each, so waking a worker through a condition variable per
 * loop (a futex wake plus the scheduler's latency, several microseconds
 * even on an idle machine) costs a large share of each loop. Workers and
 * the waiting caller therefore spin on the job counter for up to
 * CPU_POOL_SPIN_NS after their last job before they sleep on the condition
 * variable, so loops in quick succession hand over through memory alone,
 * while an idle pool stops burning cores after that bound. The bound runs
 * from a worker's last chunk, not from the last job it saw: a worker that
 * the loops do not need (a context of fewer threads than the pool has)
 * sleeps after it and stays asleep, so it neither spins on a core nor is
 * woken per loop (a pool sized to a 16-core machine serving 2-thread
 * loops would otherwise keep 14 cores busy and pay a broadcast wake-up
 * per loop). Each worker sleeps on its own condition variable and the
 * publisher wakes only the ones the job uses. The sleep side is a Dekker
 * pair on seq_cst atomics: a sleeper announces itself (sleeping[i] /
 * caller_sleeping) and then re-checks the counter under the mutex; the
 * publisher stores the counter and then checks for sleepers, so either the
 * sleeper sees the new value or the publisher sees the sleeper and signals
 * under the mutex (no lost wake-up).
 *
 * The loop ends when its chunks are done, not when every worker has
 * checked in: on a machine with more runnable threads than cores a worker
 * may not get a core for milliseconds, and the others (the caller
 * included) then take its chunks; waiting for it to arrive and find
 * nothing left would stall the caller for a scheduler slice. So a worker
 * may arrive after its job ended: it claims chunks only through `next`,
 * which carries the job's sequence number (a compare-and-swap that fails
 * for an old job), and it reads the job's fields only while it holds an
 * unfinished chunk, which the caller waits for.
 */
#include "cpu.h"
#include "cpu_relax.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define CPU_POOL_MAX_THREADS 256
#define CPU_POOL_MAX_WORKERS 255 /* also the mask of the count in generation */
/* How long an idle worker (or the caller waiting for the workers) polls
 * before sleeping: longer than the gap between the loops of one decode
 * step, short enough that an idle process does not hold cores. After the
 * first CPU_POOL_PAUSE_NS each poll also yields the core: on a machine
 * with more runnable threads than cores the thread being waited for may be
 * queued behind the poller, and pure pausing would keep it off the core. */
#define CPU_POOL_SPIN_NS 200000
#define CPU_POOL_PAUSE_NS 20000

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t done_cv;
  pthread_cond_t work_cv[CPU_POOL_MAX_WORKERS + 1]; /* per worker (index 1..) */
  pthread_mutex_t job_mu;     /* one parallel loop at a time */
  int n_workers;              /* threads besides the caller */
  /* Per job: (sequence number << 8) | its worker count, stored after the
   * job's fields; the count travels in it because a worker that does not
   * take part must not read fields the next job may already be writing. */
  atomic_uint_fast64_t generation;
  atomic_int sleeping[CPU_POOL_MAX_WORKERS + 1]; /* worker i in (or entering) its wait */
  atomic_int caller_sleeping; /* the caller in (or entering) pthread_cond_wait on done_cv */
  cpu_task_fn fn;
  void *arg;
  int64_t n, chunk;
  /* The claim word: (job sequence number mod 2^32) << 32 | the job's chunk
   * count << 16 | index of the next chunk to claim (counts < 2^16: a job
   * has at most 4 chunks per thread). One atomic word, so a claim sees the
   * count of the same job it claims from. */
  atomic_uint_fast64_t next;
  atomic_llong done;          /* chunks of the current job finished */
} cpu_pool;

struct cpu_ctx { int threads; unsigned flags; rlx_comm *comm; };

static cpu_pool pool = {.mu = PTHREAD_MUTEX_INITIALIZER, .done_cv = PTHREAD_COND_INITIALIZER, .job_mu = PTHREAD_MUTEX_INITIALIZER};
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static _Thread_local int in_task;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Claims and runs chunks of job `seq` until none is left (or the job is no
 * longer the current one). */
static void run_chunks(int thread, uint64_t seq) {
  const uint64_t tag = (seq & 0xffffffffu) << 32;
  for (;;) {
    uint64_t v = atomic_load(&pool.next);
    int64_t c, total;
    do {
      c = (int64_t)(v & 0xffff);
      total = (int64_t)(v >> 16 & 0xffff);
      if ((v & ~(uint64_t)0xffffffffu) != tag || c >= total) return;
    } while (!atomic_compare_exchange_weak(&pool.next, &v, v + 1));
    /* chunk c of job seq is ours: the job's fields stay until it is done */
    int64_t b = c * pool.chunk, e = b + pool.chunk < pool.n ? b + pool.chunk : pool.n;
    pool.fn(pool.arg, b, e, thread);
    if (atomic_fetch_add(&pool.done, 1) + 1 == total && thread != 0 && atomic_load(&pool.caller_sleeping)) {
      pthread_mutex_lock(&pool.mu);
      pthread_cond_signal(&pool.done_cv);
      pthread_mutex_unlock(&pool.mu);
    }
  }
}

/* One poll of a spin-wait that began at *start (0: not yet; the clock is
 * read every 64 polls): pauses, or yields past CPU_POOL_PAUSE_NS. Returns
 * 0 once CPU_POOL_SPIN_NS have passed. */
static int spin_step(unsigned i, int64_t *start, int *yielding) {
  if ((i & 63) == 0) {
    int64_t t = now_ns();
    if (!*start) *start = t;
    if (t - *start >= CPU_POOL_SPIN_NS) return 0;
    *yielding = t - *start >= CPU_POOL_PAUSE_NS;
  }
  if (*yielding) sched_yield();
  else cpu_relax();
  return 1;
}

/* Polls until the generation differs from seen or the spin bound counted
 * from `start` (0: now) passes; returns the generation last read. */
static uint64_t spin_for_job(uint64_t seen, int64_t start) {
  int yielding = 0;
  for (unsigned i = 1;; i++) {
    uint64_t g = atomic_load_explicit(&pool.generation, memory_order_acquire);
    if (g != seen || !spin_step(i, &start, &yielding)) return g;
  }
}

static void *worker_main(void *p) {
  int index = (int)(intptr_t)p;  /* 1..n_workers; the caller is 0 */
  uint64_t seen = 0;
  int64_t last_work = 0; /* when it last ran chunks (0: not yet) */
  in_task = 1;
  for (;;) {
    uint64_t g = spin_for_job(seen, last_work);
    if (g == seen) {
      pthread_mutex_lock(&pool.mu);
      atomic_store(&pool.sleeping[index], 1);
      while ((g = atomic_load(&pool.generation)) == seen) pthread_cond_wait(&pool.work_cv[index], &pool.mu);
      atomic_store(&pool.sleeping[index], 0);
      pthread_mutex_unlock(&pool.mu);
    }
    seen = g;
    if (index > (int)(g & CPU_POOL_MAX_WORKERS)) {
      if (!last_work) last_work = now_ns(); /* spin from here, once */
      continue;
    }
    run_chunks(index, g >> 8);
    last_work = now_ns();
  }
  return NULL;
}

/* The caller's wait for the chunks the workers took: spin, then sleep. */
static void wait_for_chunks(int64_t chunks) {
  int64_t start = 0;
  int yielding = 0;
  for (unsigned i = 1; atomic_load_explicit(&pool.done, memory_order_acquire) < chunks; i++) {
    if (!spin_step(i, &start, &yielding)) {
      pthread_mutex_lock(&pool.mu);
      atomic_store(&pool.caller_sleeping, 1);
      while (atomic_load(&pool.done) < chunks) pthread_cond_wait(&pool.done_cv, &pool.mu);
      atomic_store(&pool.caller_sleeping, 0);
      pthread_mutex_unlock(&pool.mu);
      return;
    }
  }
}

int cpu_hardware_threads(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > CPU_POOL_MAX_THREADS ? CPU_POOL_MAX_THREADS : (int)n;
}

/* Threads wanted: RLX_THREADS, else all cores. */
static int default_threads(void) {
  const int64_t n = ir_env_int("RLX_THREADS", 0);
  if (n <= 0) return cpu_hardware_threads();
  return n > CPU_POOL_MAX_THREADS ? CPU_POOL_MAX_THREADS : (int)n;
}

static void pool_start(void) {
  int want = default_threads();
  int hw = cpu_hardware_threads();
  int n = (want > hw ? want : hw) - 1;
  if (n > CPU_POOL_MAX_WORKERS) n = CPU_POOL_MAX_WORKERS;
  for (int i = 0; i < n; i++) {
    if (pthread_cond_init(&pool.work_cv[i + 1], NULL) != 0) break;
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

int rlx_cpu_threads(int requested) {
  pthread_once(&pool_once, pool_start);
  if (requested <= 0) requested = default_threads();
  return requested > pool.n_workers + 1 ? pool.n_workers + 1 : requested;
}

cpu_ctx *cpu_ctx_new(int threads) {
  cpu_ctx *c = malloc(sizeof *c);
  if (!c) return NULL;
  c->threads = rlx_cpu_threads(threads);
  c->flags = 0;
  c->comm = NULL;
  return c;
}

void cpu_ctx_set_comm(cpu_ctx *c, rlx_comm *comm) { c->comm = comm; }
rlx_comm *cpu_ctx_comm(const cpu_ctx *c) { return c ? c->comm : NULL; }
void cpu_ctx_set_flags(cpu_ctx *c, unsigned flags) { c->flags = flags; }
unsigned cpu_ctx_flags(const cpu_ctx *c) { return c ? c->flags : 0; }

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
  /* No worker reads these before it claims a chunk of this job (through
   * `next`, published below); the previous job's chunks are all done. */
  pool.fn = fn;
  pool.arg = arg;
  pool.n = n;
  pool.chunk = per > grain ? per : grain; /* so at most 4 (workers + 1) <= 1024 chunks */
  int64_t total = (n + pool.chunk - 1) / pool.chunk;
  uint64_t seq = (atomic_load_explicit(&pool.generation, memory_order_relaxed) >> 8) + 1;
  atomic_store(&pool.done, 0);
  atomic_store(&pool.next, (seq & 0xffffffffu) << 32 | (uint64_t)total << 16);
  atomic_store(&pool.generation, seq << 8 | (uint64_t)workers);
  /* wake the job's workers that sleep (only those) */
  int asleep = 0;
  for (int i = 1; i <= workers && !asleep; i++) asleep = atomic_load(&pool.sleeping[i]);
  if (asleep) {
    pthread_mutex_lock(&pool.mu);
    for (int i = 1; i <= workers; i++)
      if (atomic_load(&pool.sleeping[i])) pthread_cond_signal(&pool.work_cv[i]);
    pthread_mutex_unlock(&pool.mu);
  }
  in_task = 1;
  run_chunks(0, seq);
  in_task = 0;
  wait_for_chunks(total);
  pthread_mutex_unlock(&pool.job_mu);
}
