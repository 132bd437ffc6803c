/* test_cuda_layout.c — the CUDA backend's elementwise and layout work
 * against the CPU backend: a new K or V row written into a cache (through
 * the Cast the copy absorbs; K and V rows joined into one launch; a start
 * out of range named for its node), and a graph with an op CUDA does not
 * claim, run in two backends with the declined node named by RLX_TRACE.
 * Skips (exit 77) without a CUDA device. */
#include "cuda_backend_test.h"

/* UpdateSlice(cache, Cast(x), start): a new K or V row into a cache of
 * another float type. The copy converts (no Cast launch): the CPU's bytes
 * exactly, replay == op by op, and one launch fewer than with the Cast
 * also an output (then it runs). Into the param itself (Assign, in place)
 * and into a new tensor. */
static void test_cast_update(void) {
  static const struct { rlx_dtype x, cache; } kinds[] = {{RLX_F32, RLX_BF16}, {RLX_F32, RLX_F16}, {RLX_F16, RLX_F32}};
  for (size_t ki = 0; ki < sizeof kinds / sizeof *kinds; ki++)
    for (int assign = 0; assign < 2; assign++) {
      const rlx_dtype xt = kinds[ki].x, ct = kinds[ki].cache;
      const int64_t T = 64, E = 40, S = 3;
      int64_t launches[2] = {0, 0};
      for (int cast_out = 0; cast_out < 2; cast_out++) {
        rlx_graph *g = rlx_graph_new("cast_update");
        int64_t cd[3] = {1, T, E}, xd[3] = {1, S, E};
        rlx_node cache = rlx_param(g, "cache", ct, 3, cd), x = rlx_input(g, "x", xt, 3, xd);
        rlx_node c = rlx_cast(g, x, ct), u = rlx_update_slice(g, cache, c, rlx_input(g, "start", RLX_I32, 0, NULL), 1);
        rlx_node outs[3] = {u, c, 0};
        int n_out = 1 + cast_out;
        if (assign) outs[n_out++] = rlx_assign(g, cache, u);
        rlx_graph_set_outputs(g, n_out, outs);
        int32_t start = 37;
        bound_leaf l[3] = {{"cache", 1, random_tensor(ct, T * E, 1.0), (size_t)(T * E) * dtype_size(ct)},
                           {"x", 0, random_tensor(xt, S * E, 3.0), (size_t)(S * E) * dtype_size(xt)},
                           {"start", 0, &start, sizeof start}};
        char what[96];
        snprintf(what, sizeof what, "cast update %s -> %s%s%s", rlx_dtype_name(xt), rlx_dtype_name(ct),
                 assign ? " (assign)" : "", cast_out ? " (cast an output)" : "");
        size_t cb = 0, gb = 0;
        void *cpu = run_graph(g, RLX_DEVICE_CPU, l, 3, 0, &cb), *gpu = run_graph(g, RLX_DEVICE_CUDA, l, 3, 0, &gb);
        CHECK(cpu && gpu && cb == gb && !memcmp(cpu, gpu, cb), "%s: the CPU's bytes", what);
        compare_replay(what, g, l, 3, 0, ct, 0.0);
        launches[cast_out] = device_launches(g);
        free(cpu), free(gpu), free(l[0].data), free(l[1].data);
        rlx_graph_free(g);
      }
      CHECK(launches[0] > 0 && launches[0] == launches[1] - 1, "cast update %s -> %s%s: %lld launches (cast run: %lld)",
            rlx_dtype_name(xt), rlx_dtype_name(ct), assign ? " (assign)" : "", (long long)launches[0],
            (long long)launches[1]);
    }
}

/* A K row and a V row into their caches in place (UpdateSlice + Assign, a
 * decode step's cache writes), by one start or two: one launch for both
 * (the second copy joins the first's) with the CPU's bytes, replay == op
 * by op. Not joined: the V update reading the K cache just written. A
 * start out of range in the joined launch is reported for its own node. */
static void test_update_join(void) {
  enum { SAME_START, TWO_STARTS, READS_FIRST, BAD_SECOND, FORMS };
  static const char *const names[FORMS] = {"one start", "two starts", "second reads the first", "second start bad"};
  for (int form = 0; form < FORMS; form++) {
    const int64_t T = 48, E = 24, S = 2;
    const rlx_dtype t = RLX_BF16;
    rlx_graph *g = rlx_graph_new("update_join");
    int64_t cd[3] = {1, T, E}, xd[3] = {1, S, E};
    rlx_node kc = rlx_param(g, "kc", t, 3, cd), vc = rlx_param(g, "vc", t, 3, cd);
    rlx_node start = rlx_input(g, "start", RLX_I32, 0, NULL);
    rlx_node start2 = form == SAME_START || form == READS_FIRST ? start : rlx_input(g, "start2", RLX_I32, 0, NULL);
    rlx_node uk = rlx_update_slice(g, kc, rlx_input(g, "k", t, 3, xd), start, 1);
    rlx_node vrow = form == READS_FIRST ? rlx_narrow(g, uk, 1, 0, S) : rlx_input(g, "v", t, 3, xd);
    rlx_node uv = rlx_update_slice(g, vc, vrow, start2, 1);
    rlx_node outs[4] = {uk, uv, rlx_assign(g, kc, uk), rlx_assign(g, vc, uv)};
    rlx_graph_set_outputs(g, 4, outs);
    int32_t s0 = 37, s1 = form == BAD_SECOND ? (int32_t)T : 5;
    bound_leaf l[6] = {{"kc", 1, random_tensor(t, T * E, 1.0), (size_t)(T * E) * dtype_size(t)},
                       {"vc", 1, random_tensor(t, T * E, 1.0), (size_t)(T * E) * dtype_size(t)},
                       {"k", 0, random_tensor(t, S * E, 3.0), (size_t)(S * E) * dtype_size(t)},
                       {"start", 0, &s0, sizeof s0}};
    int nl = 4;
    if (form != READS_FIRST) l[nl++] = (bound_leaf){"v", 0, random_tensor(t, S * E, 3.0), (size_t)(S * E) * dtype_size(t)};
    if (start2 != start) l[nl++] = (bound_leaf){"start2", 0, &s1, sizeof s1};
    char what[96];
    snprintf(what, sizeof what, "update join, %s", names[form]);
    if (form == BAD_SECOND) {
      size_t gb = 0;
      void *gpu = run_graph(g, RLX_DEVICE_CUDA, l, nl, 0, &gb);
      char want[64]; /* the second's start (the first's is in range) */
      snprintf(want, sizeof want, "): start %d out of range", (int)T);
      CHECK(!gpu && strstr(rlx_last_error(), "UpdateSlice (node") && strstr(rlx_last_error(), want),
            "%s: fails naming the second update: %s", what, rlx_last_error());
      free(gpu);
    } else {
      for (int o = 0; o < 2; o++) {
        size_t cb = 0, gb = 0;
        void *cpu = run_graph(g, RLX_DEVICE_CPU, l, nl, o, &cb), *gpu = run_graph(g, RLX_DEVICE_CUDA, l, nl, o, &gb);
        CHECK(cpu && gpu && cb == gb && !memcmp(cpu, gpu, cb), "%s output %d: the CPU's bytes", what, o);
        free(cpu), free(gpu);
        compare_replay(what, g, l, nl, o, t, 0.0);
      }
      const int64_t launches = device_launches(g);
      CHECK(form == READS_FIRST ? launches >= 2 : launches == 1, "%s: %lld launches", what, (long long)launches);
    }
    for (int i = 0; i < nl; i++)
      if (strncmp(l[i].name, "start", 5)) free(l[i].data);
    rlx_graph_free(g);
  }
}

static void test_hybrid(void) {
  /* x * 2 -> TopK (no CUDA kernel: the CPU) -> relu -> sum over the last two axes */
  rlx_graph *g = rlx_graph_new("hybrid");
  int64_t xd[4] = {2, 4, 6, 5}, one[1] = {1}, axes[2] = {2, 3};
  float two = 2.0f;
  rlx_node x = rlx_input(g, "x", RLX_F32, 4, xd);
  rlx_node y = rlx_mul(g, x, rlx_constant(g, RLX_F32, 1, one, &two));
  y = rlx_topk(g, y, 3, 3, NULL);
  y = rlx_reduce(g, RLX_REDUCE_SUM, rlx_activation(g, RLX_ACT_RELU, y), 2, axes, 0);
  rlx_graph_set_outputs(g, 1, &y);
  bound_leaf l[1] = {{"x", 0, random_tensor(RLX_F32, 240, 1.0), 240 * sizeof(float)}};
  compare("hybrid graph (TopK on the CPU)", g, l, 1, RLX_F32);
  const char *buf = cuda_compile_trace(g);
  CHECK(strstr(buf, "cuda declines node") && strstr(buf, "(TopK): TopK: no CUDA kernel"),
        "RLX_TRACE names the declined TopK node; trace was:\n%s", buf);
  CHECK(strstr(buf, "3 segments (2 on cuda, 1 on cpu)") != NULL, "partition: cuda | cpu | cuda; trace was:\n%s", buf);
  rlx_options o = {RLX_DEVICE_CUDA, 0, 0, 0, NULL};
  rlx_session *s = NULL;
  rlx_session_stats stats = {0};
  CHECK(rlx_compile(g, &o, &s) == RLX_OK && rlx_session_get_stats(s, &stats) == RLX_OK && stats.fallback_nodes == 1,
        "hybrid: the session counts 1 node on the CPU, got %lld", (long long)stats.fallback_nodes);
  rlx_session_free(s);
  free(l[0].data);
  rlx_graph_free(g);
}

int main(void) {
  if (!cuda_backend_test_begin()) return CUDA_SKIP;
  test_hybrid();
  test_cast_update();
  test_update_join();
  return check_report();
}
