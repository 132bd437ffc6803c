/* test_cpu_pool.c — cpu_parallel_for (cpu_pool.c) under stress: every item
 * of every loop runs exactly once and the loop returns only after all ran.
 *
 * 1. Many tiny loops back to back (the decode pattern: workers spinning
 *    between jobs), with sizes and grains that give 1..many chunks, each
 *    item counted; thread indices stay in [0, threads).
 * 2. Loops separated by pauses longer than the pool's spin bound, so the
 *    workers go to sleep and must be woken through the condition variable.
 * 3. A loop started inside a task runs serially there (no deadlock).
 * 4. Several user threads, each with its own context, issuing loops at
 *    once (the pool serializes them).
 * Meant to be run under ASan and TSan as well (CTest runs it with
 * RLX_THREADS=2 and 4, more threads than the CI machine has cores).
 */
#include "backend/cpu/cpu.h"
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

typedef struct {
  atomic_int *hits;   /* per item */
  atomic_int bad_thread;
  int threads;
} count_job;

static void count_items(void *arg, int64_t begin, int64_t end, int thread) {
  count_job *J = arg;
  if (thread < 0 || thread >= J->threads) atomic_fetch_add(&J->bad_thread, 1);
  for (int64_t i = begin; i < end; i++) atomic_fetch_add(&J->hits[i], 1);
}

/* Runs one loop of n items and checks each ran once. */
static int one_loop(cpu_ctx *ctx, atomic_int *hits, int64_t n, int64_t grain) {
  for (int64_t i = 0; i < n; i++) atomic_store(&hits[i], 0);
  count_job J = {.hits = hits, .threads = cpu_ctx_threads(ctx)};
  cpu_parallel_for(ctx, n, grain, count_items, &J);
  int ok = atomic_load(&J.bad_thread) == 0;
  for (int64_t i = 0; i < n && ok; i++) ok = atomic_load(&hits[i]) == 1;
  return ok;
}

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

/* 3: a loop inside a task runs in that task, on its thread. */
typedef struct {
  cpu_ctx *ctx;
  atomic_int inner_items, inner_wrong_thread;
} nested_job;

static void inner_task(void *arg, int64_t begin, int64_t end, int thread) {
  nested_job *J = arg;
  if (thread != 0) atomic_fetch_add(&J->inner_wrong_thread, 1);
  atomic_fetch_add(&J->inner_items, (int)(end - begin));
}

static void outer_task(void *arg, int64_t begin, int64_t end, int thread) {
  (void)thread;
  nested_job *J = arg;
  for (int64_t i = begin; i < end; i++) cpu_parallel_for(J->ctx, 100, 1, inner_task, J);
}

/* 4: concurrent callers. */
typedef struct {
  int seed, failures;
} caller_arg;

static void *caller_main(void *p) {
  caller_arg *a = p;
  cpu_ctx *ctx = cpu_ctx_new(0);
  atomic_int *hits = malloc(4096 * sizeof *hits);
  if (!ctx || !hits) {
    a->failures++;
  } else {
    unsigned s = (unsigned)a->seed;
    for (int it = 0; it < 500; it++) {
      s = s * 1103515245u + 12345u;
      int64_t n = 1 + (s >> 8) % 4096, grain = 1 + (s >> 20) % 64;
      if (!one_loop(ctx, hits, n, grain)) a->failures++;
    }
  }
  free(hits);
  cpu_ctx_free(ctx);
  return NULL;
}

int main(void) {
  cpu_ctx *ctx = cpu_ctx_new(0);
  CHECK(ctx != NULL, "cpu_ctx_new");
  if (!ctx) return check_report();
  const int threads = cpu_ctx_threads(ctx);
  printf("pool: %d threads\n", threads);
  atomic_int *hits = malloc(100000 * sizeof *hits);
  CHECK(hits != NULL, "malloc");
  if (!hits) return check_report();

  /* 1. tiny loops back to back */
  int bad = 0;
  for (int it = 0; it < 5000; it++) {
    const int64_t n = 1 + it % 97, grain = 1 + it % 5;
    bad += !one_loop(ctx, hits, n, grain);
  }
  CHECK(bad == 0, "%d of 5000 tiny loops lost or repeated items", bad);
  bad = 0;
  for (int it = 0; it < 50; it++) bad += !one_loop(ctx, hits, 100000, 1 + it * 37);
  CHECK(bad == 0, "%d of 50 large loops lost or repeated items", bad);

  /* 2. past the spin bound: workers asleep between loops */
  bad = 0;
  for (int it = 0; it < 20; it++) {
    sleep_us(it % 2 ? 2000 : 50);
    bad += !one_loop(ctx, hits, 64 + it, 1);
  }
  CHECK(bad == 0, "%d of 20 loops after pauses lost or repeated items", bad);

  /* 3. nested */
  nested_job nj = {.ctx = ctx};
  cpu_parallel_for(ctx, 64, 1, outer_task, &nj);
  CHECK(atomic_load(&nj.inner_items) == 64 * 100, "nested loops ran %d items of 6400",
        atomic_load(&nj.inner_items));
  CHECK(atomic_load(&nj.inner_wrong_thread) == 0, "a nested loop ran on another thread index");

  /* 4. concurrent callers */
  enum { CALLERS = 3 };
  pthread_t t[CALLERS];
  caller_arg args[CALLERS];
  int started[CALLERS];
  for (int i = 0; i < CALLERS; i++) {
    args[i] = (caller_arg){.seed = 7 + i};
    started[i] = pthread_create(&t[i], NULL, caller_main, &args[i]) == 0;
  }
  for (int i = 0; i < CALLERS; i++) {
    if (started[i]) pthread_join(t[i], NULL);
    CHECK(started[i] && args[i].failures == 0, "caller %d: %d failed loops", i, args[i].failures);
  }

  free(hits);
  cpu_ctx_free(ctx);
  return check_report();
}
