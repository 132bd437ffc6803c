/* test_threads.c — sessions and threads (the contract in rlx.h):
 *   - separate sessions of one graph, compiled and run in parallel threads
 *     (sharing the compile cache and the CPU pool), give the results of a
 *     plain loop in double for every thread's own inputs;
 *   - one session shared by several threads: every call either works or
 *     fails with RLX_ERR_INVALID saying the session is in use, contention
 *     is seen, and afterwards the session still computes correctly.
 * The CI runs it again under ThreadSanitizer (scripts/test.sh), where any
 * data race fails it. */
#include "check.h"
#include "rlx.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define M 24
#define K 40
#define N 16
#define THREADS 4
#define ITERS 40

static rlx_graph *graph;
static float weight[K * N];

/* y = relu(x @ w + x[:, :N]) */
static void build(void) {
  graph = rlx_graph_new("threads");
  rlx_node x = rlx_input(graph, "x", RLX_F32, 2, (const int64_t[]){M, K});
  rlx_node w = rlx_param(graph, "w", RLX_F32, 2, (const int64_t[]){K, N});
  rlx_node xs = rlx_narrow(graph, x, 1, 0, N);
  rlx_node y = rlx_activation(graph, RLX_ACT_RELU, rlx_add(graph, rlx_matmul(graph, x, w), xs));
  rlx_graph_set_outputs(graph, 1, &y);
  for (int i = 0; i < K * N; i++) weight[i] = (float)((i * 7 % 13) - 6) / 8.0f;
}

static void inputs_of(int seed, float *x) {
  for (int i = 0; i < M * K; i++) x[i] = (float)(((i + 31 * seed) * 11 % 17) - 8) / 4.0f;
}

static int matches_reference(const float *x, const float *y) {
  for (int r = 0; r < M; r++)
    for (int c = 0; c < N; c++) {
      double acc = x[r * K + c];
      for (int k = 0; k < K; k++) acc += (double)x[r * K + k] * weight[k * N + c];
      double want = acc > 0 ? acc : 0;
      if (fabs(y[r * N + c] - want) > 1e-4 * (1 + fabs(want))) return 0;
    }
  return 1;
}

static rlx_status compile_one(rlx_session **s) {
  rlx_options opt = {RLX_DEVICE_CPU, 2, 0, 0, NULL};
  rlx_status st = rlx_compile(graph, &opt, s);
  if (st == RLX_OK) st = rlx_set_param(*s, "w", weight, sizeof weight);
  return st;
}

/* ---------------------------------------------------------------- a session each */

typedef struct {
  int id, good, failed;
  char error[256];
} own_job;

static void *own_session(void *arg) {
  own_job *j = arg;
  rlx_session *s = NULL;
  rlx_status st = compile_one(&s);
  float x[M * K], y[M * N];
  for (int it = 0; it < ITERS && st == RLX_OK; it++) {
    inputs_of(j->id * 1000 + it, x);
    st = rlx_set_input(s, "x", x, sizeof x);
    if (st == RLX_OK) st = rlx_run(s);
    if (st == RLX_OK) st = rlx_output(s, 0, y, sizeof y);
    if (st == RLX_OK) j->good += matches_reference(x, y);
  }
  if (st) {
    j->failed = 1;
    snprintf(j->error, sizeof j->error, "%s: %s", rlx_status_name(st), rlx_last_error());
  }
  rlx_session_free(s);
  return NULL;
}

static void check_own_sessions(void) {
  pthread_t th[THREADS];
  own_job jobs[THREADS];
  for (int t = 0; t < THREADS; t++) {
    jobs[t] = (own_job){t, 0, 0, ""};
    pthread_create(&th[t], NULL, own_session, &jobs[t]);
  }
  for (int t = 0; t < THREADS; t++) {
    pthread_join(th[t], NULL);
    CHECK(!jobs[t].failed && jobs[t].good == ITERS, "thread %d: %d of %d runs right %s", t, jobs[t].good, ITERS,
          jobs[t].error);
  }
}

/* ---------------------------------------------------------------- one session shared */

static rlx_session *shared;
static atomic_int busy_seen, other_errors, stop;

static void *shared_session(void *arg) {
  int id = (int)(intptr_t)arg;
  float x[M * K], y[M * N];
  inputs_of(id, x);
  for (int it = 0; it < 100000 && !atomic_load(&stop); it++) {
    rlx_status st[3] = {rlx_set_input(shared, "x", x, sizeof x), rlx_run(shared), rlx_output(shared, 0, y, sizeof y)};
    for (int k = 0; k < 3; k++) {
      if (st[k] == RLX_OK) continue;
      if (st[k] == RLX_ERR_INVALID && strstr(rlx_last_error(), "in use by another thread")) {
        if (atomic_fetch_add(&busy_seen, 1) > 200) atomic_store(&stop, 1);
      } else {
        atomic_fetch_add(&other_errors, 1);
      }
    }
  }
  return NULL;
}

static void check_shared_session(void) {
  CHECK(compile_one(&shared) == RLX_OK, "%s", rlx_last_error());
  pthread_t th[THREADS];
  for (int t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, shared_session, (void *)(intptr_t)t);
  for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  printf("shared session: %d calls refused as in use\n", atomic_load(&busy_seen));
  CHECK(atomic_load(&busy_seen) > 0, "sharing a session was never detected");
  CHECK(atomic_load(&other_errors) == 0, "%d calls failed otherwise", atomic_load(&other_errors));
  /* the session is intact: one thread, a new input, the right output */
  float x[M * K], y[M * N];
  inputs_of(77, x);
  rlx_status st = rlx_set_input(shared, "x", x, sizeof x);
  if (st == RLX_OK) st = rlx_run(shared);
  if (st == RLX_OK) st = rlx_output(shared, 0, y, sizeof y);
  CHECK(st == RLX_OK && matches_reference(x, y), "after sharing: %s", st ? rlx_last_error() : "wrong output");
  rlx_session_free(shared);
}

int main(void) {
  build();
  CHECK(rlx_graph_status(graph) == RLX_OK, "%s", rlx_last_error());
  check_own_sessions();
  check_shared_session();
  rlx_graph_free(graph);
  return check_report();
}
