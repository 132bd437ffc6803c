/* test_comm.c — AllReduce over ranks that are threads of one process
 * (rlx_comm_new_local, the CPU backend): every rank compiles its own graph
 * with its own communicator and gets the sum over the ranks of what each
 * computed, checked against the sum of the ranks' inputs in double, the
 * same bits on every rank; a rank that aborts ends the others' waits with
 * an error; ranks that disagree on the shape get an error, not garbage. */
#include "check.h"
#include "rlx.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_WORLD 4
#define RUNS 3

typedef struct {
  rlx_comm *comm;
  int rank, n, runs, abort_instead;
  rlx_dtype dtype;
  float out[RUNS][64];
  rlx_status st;
  char err[256];
} rank_job;

/* The rank's input of run `run`: distinct per rank and run. */
static float input_of(int rank, int run, int i) { return (float)sin(1.0 + rank * 7.3 + run * 2.1 + i * 0.37) * 3.0f; }

/* y = AllReduce(x * 2) then y + 1: a product before the sum and a use after it. */
static void *rank_main(void *arg) {
  rank_job *j = arg;
  if (j->abort_instead) {
    struct timespec ts = {0, 50 * 1000000};
    nanosleep(&ts, NULL);
    rlx_comm_abort(j->comm);
    return NULL;
  }
  rlx_graph *g = rlx_graph_new("allreduce");
  const int64_t dims[1] = {j->n};
  rlx_node x = rlx_input(g, "x", j->dtype, 1, dims);
  rlx_node two = rlx_constant(g, j->dtype, 0, NULL, j->dtype == RLX_F32 ? (const void *)&(float){2.0f}
                                                                           : (const void *)&(uint16_t){0x4000});
  rlx_node y = rlx_all_reduce(g, rlx_mul(g, x, two));
  rlx_node one = rlx_constant(g, j->dtype, 0, NULL, j->dtype == RLX_F32 ? (const void *)&(float){1.0f}
                                                                           : (const void *)&(uint16_t){0x3c00});
  rlx_node z = rlx_cast(g, rlx_add(g, y, one), RLX_F32);
  rlx_graph_set_outputs(g, 1, &z);
  rlx_options o = {RLX_DEVICE_CPU, 1, 0, 0, j->comm};
  rlx_session *s = NULL;
  rlx_status st = rlx_compile(g, &o, &s);
  for (int run = 0; st == RLX_OK && run < j->runs; run++) {
    float xf[64];
    uint16_t xh[64];
    for (int i = 0; i < j->n; i++) xf[i] = input_of(j->rank, run, i), xh[i] = rlx_f32_to_f16(xf[i]);
    st = j->dtype == RLX_F32 ? rlx_set_input(s, "x", xf, sizeof(float) * (size_t)j->n)
                             : rlx_set_input(s, "x", xh, sizeof(uint16_t) * (size_t)j->n);
    if (st == RLX_OK) st = rlx_run(s);
    if (st == RLX_OK) st = rlx_output(s, 0, j->out[run], sizeof(float) * (size_t)j->n);
  }
  if (st) {
    snprintf(j->err, sizeof j->err, "%s", rlx_last_error());
    rlx_comm_abort(j->comm); /* the others would wait for this rank */
  }
  j->st = st;
  rlx_session_free(s);
  rlx_graph_free(g);
  return NULL;
}

static void run_world(int world, rank_job *jobs) {
  pthread_t th[MAX_WORLD];
  for (int r = 0; r < world; r++) pthread_create(&th[r], NULL, rank_main, &jobs[r]);
  for (int r = 0; r < world; r++) pthread_join(th[r], NULL);
}

static void test_sums(int world, rlx_dtype dtype, int n) {
  rlx_comm *comms[MAX_WORLD];
  CHECK(rlx_comm_new_local(world, comms) == RLX_OK, "new_local(%d): %s", world, rlx_last_error());
  rank_job jobs[MAX_WORLD];
  memset(jobs, 0, sizeof jobs);
  for (int r = 0; r < world; r++)
    jobs[r] = (rank_job){.comm = comms[r], .rank = r, .n = n, .runs = RUNS, .dtype = dtype};
  run_world(world, jobs);
  for (int r = 0; r < world; r++)
    CHECK(jobs[r].st == RLX_OK, "world %d rank %d: %s: %s", world, r, rlx_status_name(jobs[r].st), jobs[r].err);
  for (int run = 0; run < RUNS; run++) {
    double worst = 0;
    for (int i = 0; i < n; i++) {
      double sum = 0;
      for (int r = 0; r < world; r++) {
        double x = dtype == RLX_F32 ? input_of(r, run, i) : rlx_f16_to_f32(rlx_f32_to_f16(input_of(r, run, i)));
        sum += 2 * x;
      }
      double want = sum + 1, got = jobs[0].out[run][i];
      double tol = dtype == RLX_F32 ? 1e-5 : 2e-3 * (fabs(want) + 1); /* f16: the sum and the +1 each round */
      if (fabs(got - want) > tol * (fabs(want) + 1) && fabs(got - want) - tol * (fabs(want) + 1) > worst)
        worst = fabs(got - want);
    }
    CHECK(worst == 0, "world %d %s run %d: a sum off by %g", world, rlx_dtype_name(dtype), run, worst);
    for (int r = 1; r < world; r++)
      CHECK(!memcmp(jobs[r].out[run], jobs[0].out[run], sizeof(float) * (size_t)n),
            "world %d run %d: rank %d's sum differs from rank 0's", world, run, r);
  }
  for (int r = 0; r < world; r++) {
    CHECK(rlx_comm_rank(comms[r]) == r && rlx_comm_world(comms[r]) == world, "rank/world of comm %d", r);
    rlx_comm_free(comms[r]);
  }
}

/* Rank world-1 never runs and aborts: the others get RLX_ERR_DEVICE, not a hang. */
static void test_abort(void) {
  rlx_comm *comms[3];
  CHECK(rlx_comm_new_local(3, comms) == RLX_OK, "new_local(3)");
  rank_job jobs[3];
  memset(jobs, 0, sizeof jobs);
  for (int r = 0; r < 3; r++)
    jobs[r] = (rank_job){.comm = comms[r], .rank = r, .n = 8, .runs = 1, .dtype = RLX_F32, .abort_instead = r == 2};
  run_world(3, jobs);
  for (int r = 0; r < 2; r++)
    CHECK(jobs[r].st == RLX_ERR_DEVICE && strstr(jobs[r].err, "aborted"), "rank %d after an abort: %s: %s", r,
          rlx_status_name(jobs[r].st), jobs[r].err);
  for (int r = 0; r < 3; r++) rlx_comm_free(comms[r]);
}

/* Ranks whose tensors differ in size: an error on every rank. */
static void test_mismatch(void) {
  rlx_comm *comms[2];
  CHECK(rlx_comm_new_local(2, comms) == RLX_OK, "new_local(2)");
  rank_job jobs[2] = {{.comm = comms[0], .rank = 0, .n = 5, .runs = 1, .dtype = RLX_F32},
                      {.comm = comms[1], .rank = 1, .n = 6, .runs = 1, .dtype = RLX_F32}};
  run_world(2, jobs);
  for (int r = 0; r < 2; r++)
    CHECK(jobs[r].st == RLX_ERR_SHAPE || jobs[r].st == RLX_ERR_DEVICE, "rank %d of a mismatch: %s: %s", r,
          rlx_status_name(jobs[r].st), jobs[r].err);
  for (int r = 0; r < 2; r++) rlx_comm_free(comms[r]);
}

static void test_errors(void) {
  rlx_comm *c[2];
  CHECK_ERR(rlx_comm_new_local(0, c), RLX_ERR_INVALID, "world 0");
  CHECK_ERR(rlx_comm_new_local(2, NULL), RLX_ERR_INVALID, "NULL");
  rlx_comm *one = NULL;
  CHECK_ERR(rlx_comm_new_nccl_rank(2, 2, "127.0.0.1:1", 0, 100, &one), RLX_ERR_INVALID, "rank 2");
  rlx_status st = rlx_comm_new_nccl_local(2, 0, c);
  /* without CUDA, or without two GPUs here */
  CHECK(st == RLX_ERR_UNSUPPORTED || st == RLX_ERR_DEVICE || st == RLX_OK, "new_nccl_local: %s", rlx_status_name(st));
  if (st == RLX_OK) rlx_comm_free(c[0]), rlx_comm_free(c[1]);
  CHECK(rlx_comm_world(NULL) == 1 && rlx_comm_rank(NULL) == 0, "NULL is a world of one");
  rlx_comm_free(NULL);
  rlx_comm_abort(NULL);
  /* a session whose AllReduce has a local comm of one rank: the identity */
  CHECK(rlx_comm_new_local(1, c) == RLX_OK, "new_local(1)");
  rank_job j = {.comm = c[0], .rank = 0, .n = 3, .runs = 1, .dtype = RLX_F32};
  rank_main(&j);
  CHECK(j.st == RLX_OK && fabsf(j.out[0][2] - (2 * input_of(0, 0, 2) + 1)) < 1e-5f, "world of one: %s", j.err);
  rlx_comm_free(c[0]);
}

int main(void) {
  for (int world = 1; world <= MAX_WORLD; world++) test_sums(world, RLX_F32, 37);
  test_sums(3, RLX_F16, 64);
  test_sums(2, RLX_F32, 1);
  test_abort();
  test_mismatch();
  test_errors();
  return check_report();
}
