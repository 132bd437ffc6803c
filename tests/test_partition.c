/* test_partition.c — hybrid execution without a GPU: the partitioner with
 * a stand-in device (the CPU backend declining Softmax, LogSoftmax and
 * Reduce) against one CPU plan of the same graph. Checks the results of
 * every output (values crossing cuts both ways, a value read by two later
 * segments, a graph output that is a cut value), that independent nodes of
 * one backend are scheduled together (five segments where node order gives
 * seven), that RLX_TRACE names each declined node and that the plan counts
 * them (rlx_session_stats.fallback_nodes). */
#include "check.h"
#include "runtime/partition.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

static int declined[RLX_OP_COUNT];

static int stand_in_claims(const rlx_backend *b, const rlx_graph *g, rlx_node n, char *why, size_t cap) {
  (void)b;
  if (!declined[g->nodes[n].op]) return 1;
  snprintf(why, cap, "the stand-in device has no %s", ir_ops[g->nodes[n].op].name);
  return 0;
}

/* Runs plan p of backend b on g's leaves, reads output k into dst. */
static rlx_status run_read(const rlx_backend *b, void *p, const rlx_graph *g, const void **leaf_data, int k, float *dst,
                           size_t bytes) {
  rlx_bindings bind = {leaf_data, NULL};
  rlx_status st = b->run(p, &bind);
  return st ? st : b->read(p, g->outputs[k], 0, dst, bytes);
}

int main(void) {
  rlx_backend stand_in = rlx_cpu_backend;
  stand_in.name = "stand-in";
  stand_in.claims = stand_in_claims;
  declined[RLX_OP_Softmax] = declined[RLX_OP_LogSoftmax] = declined[RLX_OP_Reduce] = 1;

  /* node order alternates device / CPU: relu, softmax, exp, log_softmax, add, add, sum, mul */
  rlx_graph *g = rlx_graph_new("hybrid");
  int64_t xd[2] = {3, 7}, ax[1] = {1};
  rlx_node x = rlx_input(g, "x", RLX_F32, 2, xd);
  rlx_node r1 = rlx_activation(g, RLX_ACT_RELU, x);
  rlx_node s1 = rlx_softmax(g, x, -1);
  rlx_node r2 = rlx_activation(g, RLX_ACT_EXP, x);
  rlx_node s2 = rlx_log_softmax(g, x, -1);
  rlx_node dev_sum = rlx_add(g, r1, r2);
  rlx_node mixed = rlx_add(g, dev_sum, s1);           /* device, reads a CPU value */
  rlx_node red = rlx_reduce(g, RLX_REDUCE_SUM, mixed, 1, ax, 1); /* CPU, reads a device value */
  rlx_node y = rlx_mul(g, red, s2);                   /* device, reads two CPU values */
  rlx_node outs[4] = {y, s1, dev_sum, x};
  CHECK(rlx_graph_set_outputs(g, 4, outs) == RLX_OK, "outputs: %s", rlx_last_error());

  float xv[21];
  for (int i = 0; i < 21; i++) xv[i] = (float)(i % 5) - 2.0f + 0.25f * (float)i;
  const void **leaf_data = calloc((size_t)g->n_nodes, sizeof *leaf_data);
  leaf_data[x] = xv;

  char path[] = "/tmp/rlx_partition_trace_XXXXXX";
  int fd = mkstemp(path), saved = dup(2);
  fflush(stderr);
  dup2(fd, 2);
  setenv("RLX_TRACE", "1", 1);
  void *hp = NULL, *cp = NULL;
  rlx_status st = rlx_partition_compile(&stand_in, g, NULL, NULL, &hp);
  unsetenv("RLX_TRACE");
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  static char trace[1 << 14];
  lseek(fd, 0, SEEK_SET);
  ssize_t got = read(fd, trace, sizeof trace - 1);
  trace[got > 0 ? got : 0] = 0;
  close(fd);
  unlink(path);
  CHECK(st == RLX_OK, "partition compile: %s", rlx_last_error());
  CHECK(rlx_cpu_backend.compile(&rlx_cpu_backend, g, NULL, NULL, &cp) == RLX_OK, "cpu compile: %s", rlx_last_error());

  CHECK(strstr(trace, "stand-in declines node 2 (Softmax): the stand-in device has no Softmax") != NULL,
        "trace names Softmax; trace:\n%s", trace);
  CHECK(strstr(trace, "declines node 4 (LogSoftmax)") && strstr(trace, "declines node 7 (Reduce)"),
        "trace names LogSoftmax and Reduce; trace:\n%s", trace);
  /* device {relu, exp, add} | cpu {softmax, log_softmax} | device {add} | cpu {sum} | device {mul} */
  CHECK(strstr(trace, "5 segments (3 on stand-in, 2 on cpu), 5 values cross a cut") != NULL,
        "segments merged by scheduling; trace:\n%s", trace);
  rlx_session_stats stats = {0};
  if (hp) rlx_hybrid_backend.memory_stats(hp, &stats);
  CHECK(stats.fallback_nodes == 3, "the plan counts its 3 CPU nodes as fallbacks, got %lld",
        (long long)stats.fallback_nodes);

  for (int round = 0; st == RLX_OK && hp && cp && round < 2; round++) {
    if (round) xv[4] = -7.5f; /* new input data: cut values are staged again */
    const size_t bytes[4] = {3 * 7 * 4, 3 * 7 * 4, 3 * 7 * 4, 0};
    for (int k = 0; k < 3; k++) {
      float want[21], have[21];
      CHECK(run_read(&rlx_cpu_backend, cp, g, leaf_data, k, want, bytes[k]) == RLX_OK, "cpu run: %s", rlx_last_error());
      CHECK(run_read(&rlx_hybrid_backend, hp, g, leaf_data, k, have, bytes[k]) == RLX_OK, "hybrid run: %s",
            rlx_last_error());
      CHECK(!memcmp(want, have, bytes[k]), "round %d output %d: hybrid == cpu", round, k);
    }
  }
  if (hp) rlx_hybrid_backend.free(hp);
  if (cp) rlx_cpu_backend.free(cp);
  free(leaf_data);
  rlx_graph_free(g);
  return check_report();
}
