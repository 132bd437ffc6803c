/* test_cuda_params.c — the CUDA executable's params: they stay on the
 * device and a new rlx_set_param is seen (folded weight transposes too),
 * state updated by Assign stays there across plans, the plans of one
 * session share one device copy of each param, and a freed session gives
 * its device memory back. Skips (exit 77) without a CUDA device. */
#include "cuda_backend_test.h"

#include <cuda_runtime_api.h>

/* A KV-cache-like param that every run updates in place (UpdateSlice +
 * Assign): the CUDA session keeps it in device memory (params_kept, no
 * copy to the host and back), also when runs of two shape bindings (two
 * plans) take turns and when a Param is set again, and every output
 * matches a CPU session run in lockstep. A weight that feeds a folded
 * transpose rides along; an assigned counter (c + 1, param-only) must not
 * be folded: it changes on every run. */
static void test_kept_state(void) {
  rlx_graph *g = rlx_graph_new("kept state");
  const int64_t S = rlx_dim_sym(g, "S");
  int64_t cd[3] = {1, 8, 4}, rd[3] = {1, 1, 4}, one[1] = {1}, xd[2] = {S, 4}, wd[2] = {4, 4}, perm[2] = {1, 0},
          axis1[1] = {1};
  rlx_node cache = rlx_param(g, "cache", RLX_F32, 3, cd), counter = rlx_param(g, "counter", RLX_F32, 1, one);
  rlx_node w = rlx_param(g, "w", RLX_F32, 2, wd);
  rlx_node row = rlx_input(g, "row", RLX_F32, 3, rd), start = rlx_input(g, "start", RLX_I32, 1, one);
  rlx_node x = rlx_input(g, "x", RLX_F32, 2, xd);
  rlx_node u = rlx_update_slice(g, cache, row, start, 1);
  float onef = 1.0f;
  rlx_node c1 = rlx_add(g, counter, rlx_constant(g, RLX_F32, 1, one, &onef));
  rlx_node sum = rlx_reduce(g, RLX_REDUCE_SUM, u, 1, axis1, 0); /* [1, 4] */
  rlx_node y = rlx_add(g, rlx_add(g, rlx_matmul(g, x, rlx_transpose(g, w, 2, perm)), sum), c1);
  rlx_node outs[3] = {y, rlx_assign(g, cache, u), rlx_assign(g, counter, c1)};
  rlx_graph_set_outputs(g, 3, outs);
  rlx_options cu = {RLX_DEVICE_CUDA, 0, 0, 0, NULL}, cpu = {RLX_DEVICE_CPU, 0, 0, 0, NULL};
  rlx_session *sg = NULL, *sc = NULL;
  CHECK(rlx_compile(g, &cu, &sg) == RLX_OK && rlx_compile(g, &cpu, &sc) == RLX_OK, "compile kept-state graph: %s",
        rlx_last_error());
  float *zeros = calloc(32, sizeof(float)), *wv = random_tensor(RLX_F32, 16, 1.0);
  for (int k = 0; sg && sc && k < 2; k++) {
    rlx_session *s = k ? sc : sg;
    CHECK(rlx_set_param(s, "cache", zeros, 32 * sizeof(float)) == RLX_OK && rlx_set_param(s, "w", wv, 64) == RLX_OK &&
              rlx_set_param(s, "counter", zeros, 4) == RLX_OK,
          "set params");
  }
  int64_t kept_runs = 0;
  for (int step = 0; sg && sc && step < 14; step++) {
    const int64_t n = 1 + (step / 3) % 2; /* two plans, taking turns */
    float *xv = random_tensor(RLX_F32, 4 * n, 1.0), *rv = random_tensor(RLX_F32, 4, 1.0);
    int32_t st = (int32_t)(step % 8);
    if (step == 9) /* a param set again between runs: the new bytes win over the kept ones */
      for (int k = 0; k < 2; k++) CHECK(rlx_set_param(k ? sc : sg, "cache", zeros, 32 * sizeof(float)) == RLX_OK, "reset");
    float y[2][8], c[2][32], cnt[2];
    for (int k = 0; k < 2; k++) {
      rlx_session *s = k ? sc : sg;
      rlx_status rs = rlx_set_input_shaped(s, "x", xv, (size_t)(16 * n), 2, (int64_t[]){n, 4});
      if (rs == RLX_OK) rs = rlx_set_input(s, "row", rv, 16);
      if (rs == RLX_OK) rs = rlx_set_input(s, "start", &st, 4);
      if (rs == RLX_OK) rs = rlx_run(s);
      if (rs == RLX_OK) rs = rlx_output(s, 0, y[k], (size_t)(16 * n));
      if (rs == RLX_OK) rs = rlx_output(s, 1, c[k], sizeof c[k]);
      if (rs == RLX_OK) rs = rlx_output(s, 2, &cnt[k], 4);
      CHECK(rs == RLX_OK, "kept state step %d on %s: %s", step, k ? "cpu" : "cuda", rlx_last_error());
    }
    rlx_session_stats stats;
    rlx_session_get_stats(sg, &stats);
    kept_runs += stats.params_kept == 2;
    CHECK(worst_ratio(RLX_F32, y[0], y[1], 4 * n, 1e-5, 1e-5) <= 1 && !memcmp(c[0], c[1], sizeof c[0]) && cnt[0] == cnt[1],
          "kept state step %d (S %lld): cuda and cpu agree (counter %g / %g)", step, (long long)n, cnt[0], cnt[1]);
    free(xv), free(rv);
  }
  CHECK(kept_runs == 14, "the CUDA session kept both assigned params on the device in %lld of 14 runs",
        (long long)kept_runs);
  free(zeros), free(wv);
  rlx_session_free(sg);
  rlx_session_free(sc);
  rlx_graph_free(g);
}

static void test_params(void) {
  /* y = x @ transpose(cast(w)) * 2: transpose(cast(w)) is parameter-only */
  rlx_graph *g = rlx_graph_new("params");
  int64_t xd[2] = {5, 16}, wd[2] = {12, 16}, perm[2] = {1, 0}, sd[1] = {1};
  rlx_node x = rlx_input(g, "x", RLX_F32, 2, xd), w = rlx_param(g, "w", RLX_F64, 2, wd);
  float two = 2.0f;
  rlx_node c = rlx_constant(g, RLX_F32, 1, sd, &two);
  rlx_node wt = rlx_transpose(g, rlx_cast(g, w, RLX_F32), 2, perm);
  rlx_node y = rlx_mul(g, rlx_matmul(g, x, rlx_activation(g, RLX_ACT_TANH, wt)), c);
  rlx_graph_set_outputs(g, 1, &y);
  rlx_options cu = {RLX_DEVICE_CUDA, 0, 0, 0, NULL};
  rlx_session *s = NULL;
  CHECK(rlx_compile(g, &cu, &s) == RLX_OK, "compile params graph: %s", rlx_last_error());
  if (!s) {
    rlx_graph_free(g);
    return;
  }
  float *xv = random_tensor(RLX_F32, 80, 1.0);
  double *w1 = random_tensor(RLX_F64, 192, 1.0), *w2 = random_tensor(RLX_F64, 192, 1.0);
  float got[60], again[60], want[60];
  size_t cb;
  for (int round = 0; round < 2; round++) {
    double *w = round ? w2 : w1;
    CHECK(rlx_set_param(s, "w", w, 192 * sizeof(double)) == RLX_OK, "set w");
    CHECK(rlx_set_input(s, "x", xv, 80 * sizeof(float)) == RLX_OK, "set x");
    CHECK(rlx_run(s) == RLX_OK && rlx_output(s, 0, got, sizeof got) == RLX_OK, "run %d: %s", round, rlx_last_error());
    CHECK(rlx_run(s) == RLX_OK && rlx_output(s, 0, again, sizeof again) == RLX_OK && !memcmp(got, again, sizeof got),
          "run %d again: the same result without new data", round);
    bound_leaf l[2] = {{"x", 0, xv, 80 * sizeof(float)}, {"w", 1, w, 192 * sizeof(double)}};
    float *ref = run_graph(g, RLX_DEVICE_CPU, l, 2, 0, &cb);
    if (ref) memcpy(want, ref, sizeof want);
    free(ref);
    double r = worst_ratio(RLX_F32, got, want, 60, 1e-4, 1e-4);
    CHECK(r <= 1.0, "params round %d (%s): worst error %.3g of tolerance", round,
          round ? "after rlx_set_param with new values" : "first upload", r);
  }
  free(xv), free(w1), free(w2);
  rlx_session_free(s);
  rlx_graph_free(g);
}

enum { SH_N = 8192, SH_K = 8192 }; /* w: 128 MiB of f16, 256 MiB as f32 */

static size_t device_free_bytes(void) {
  size_t free_b = 0, total = 0;
  cudaDeviceSynchronize();
  return cudaMemGetInfo(&free_b, &total) == cudaSuccess ? free_b : 0;
}

/* y = x @ w^T for x of S rows on session s, against a product in doubles. */
static void check_shared_run(rlx_session *s, const float *w, int64_t S, const char *what) {
  float *x = random_tensor(RLX_F32, (size_t)(S * SH_K), 1.0), *y = malloc((size_t)(S * SH_N) * sizeof *y),
        *want = malloc((size_t)(S * SH_N) * sizeof *want);
  rlx_status st = rlx_set_input_shaped(s, "x", x, (size_t)(S * SH_K) * sizeof *x, 2, (int64_t[]){S, SH_K});
  if (st == RLX_OK) st = rlx_run(s);
  if (st == RLX_OK) st = rlx_output(s, 0, y, (size_t)(S * SH_N) * sizeof *y);
  CHECK(st == RLX_OK, "%s (S %lld): %s", what, (long long)S, rlx_last_error());
  for (int64_t r = 0; r < S; r++)
    for (int64_t n = 0; n < SH_N; n++) {
      double acc = 0;
      for (int64_t k = 0; k < SH_K; k++) acc += (double)x[r * SH_K + k] * w[n * SH_K + k];
      want[r * SH_N + n] = (float)acc;
    }
  double worst = st == RLX_OK ? worst_ratio(RLX_F32, y, want, (size_t)(S * SH_N), 1e-3, 1e-3) : 1e9;
  CHECK(worst <= 1.0, "%s (S %lld): worst error %.3g of tolerance", what, (long long)S, worst);
  free(x), free(y), free(want);
}

/* y = x @ transpose(cast(w, F32)), w an F16 param: the cast is folded
 * (computed once from w, kept on the device). Two shape bindings are two
 * plans; they must read one device copy of w and of its folded cast
 * (cudaMemGetInfo: the second plan takes far less than the cast's 256 MiB;
 * the first one also loads cuBLASLt's kernels, ~70 MiB, and its workspace).
 * The
 * plans of a freed session go to the next session of the graph with their
 * copy of w; a second live session may not use that copy (it would
 * overwrite the first one's w), so it makes its own, and each session
 * computes with its own weights. */
static void test_shared_params(void) {
  rlx_graph *g = rlx_graph_new("shared params");
  const int64_t S = rlx_dim_sym(g, "S");
  int64_t xd[2] = {S, SH_K}, wd[2] = {SH_N, SH_K}, perm[2] = {1, 0};
  rlx_node x = rlx_input(g, "x", RLX_F32, 2, xd), w = rlx_param(g, "w", RLX_F16, 2, wd);
  rlx_node y = rlx_matmul(g, x, rlx_transpose(g, rlx_cast(g, w, RLX_F32), 2, perm));
  rlx_graph_set_outputs(g, 1, &y);
  const size_t n_w = (size_t)SH_N * SH_K, wbytes = n_w * sizeof(float), hbytes = n_w * sizeof(uint16_t);
  uint16_t *h1 = random_tensor(RLX_F16, (int64_t)n_w, 1.0), *h2 = random_tensor(RLX_F16, (int64_t)n_w, 1.0);
  float *w1 = malloc(wbytes), *w2 = malloc(wbytes); /* the references' weights: the f16 values */
  for (size_t i = 0; i < n_w; i++) w1[i] = (float)rlx_value_as_f64(RLX_F16, h1, (int64_t)i);
  for (size_t i = 0; i < n_w; i++) w2[i] = (float)rlx_value_as_f64(RLX_F16, h2, (int64_t)i);
  rlx_options cu = {RLX_DEVICE_CUDA, 0, 0, 0, NULL};
  rlx_session *a = NULL, *b = NULL, *c = NULL;
  CHECK(rlx_compile(g, &cu, &a) == RLX_OK && rlx_set_param(a, "w", h1, hbytes) == RLX_OK, "compile: %s",
        rlx_last_error());
  if (!a) goto done;
  size_t free0 = device_free_bytes();
  check_shared_run(a, w1, 2, "first plan");
  size_t free1 = device_free_bytes();
  check_shared_run(a, w1, 1, "second plan");
  size_t free2 = device_free_bytes();
  CHECK(free0 >= free1 + wbytes + hbytes, "the first plan holds w and its cast: %zu MiB taken, they are %zu MiB",
        (free0 - free1) >> 20, (wbytes + hbytes) >> 20);
  CHECK(free1 < free2 + wbytes / 2, "the second plan shares w and its cast: it took %lld MiB (the cast is %zu MiB)",
        ((long long)free1 - (long long)free2) >> 20, wbytes >> 20);
  rlx_set_param(a, "w", h2, hbytes); /* a new w reaches both plans */
  check_shared_run(a, w2, 1, "first plan, new w");
  check_shared_run(a, w2, 2, "second plan, new w");
  rlx_session_free(a);
  a = NULL;
  /* b takes the idle plans over, with their copy of w; c, alive beside b, builds its own */
  CHECK(rlx_compile(g, &cu, &b) == RLX_OK && rlx_compile(g, &cu, &c) == RLX_OK, "compile b, c: %s", rlx_last_error());
  if (!b || !c) goto done;
  rlx_set_param(b, "w", h1, hbytes);
  rlx_set_param(c, "w", h2, hbytes);
  for (int round = 0; round < 2; round++) {
    check_shared_run(b, w1, 1, "session b");
    check_shared_run(c, w2, 2, "session c beside b");
    check_shared_run(b, w1, 2, "session b, its second plan");
    check_shared_run(c, w2, 1, "session c, its second plan");
  }
  rlx_session_stats sb, sc;
  rlx_session_get_stats(b, &sb);
  rlx_session_get_stats(c, &sc);
  CHECK(sb.plans_reused == 2 && sb.plans_built == 0 && sc.plans_reused == 0 && sc.plans_built == 2,
        "b took over both idle plans (reused %lld, built %lld), c built its own (reused %lld, built %lld)",
        (long long)sb.plans_reused, (long long)sb.plans_built, (long long)sc.plans_reused, (long long)sc.plans_built);
done:
  rlx_session_free(a);
  rlx_session_free(b);
  rlx_session_free(c);
  free(w1), free(w2), free(h1), free(h2);
  rlx_graph_free(g);
}

/* A session whose params take more than 1 GiB of device memory (an LLM's
 * weights) gives that memory back when it is freed: its plans do not wait
 * in the compile cache holding the weights (cudaMemGetInfo). Its stats
 * report the params' device bytes. */
static void test_freed_params_released(void) {
  enum { BN = 20480, BK = 16384 }; /* w: 1.25 GiB of f32 */
  rlx_graph *g = rlx_graph_new("big params");
  int64_t xd[2] = {1, BK}, wd[2] = {BN, BK}, perm[2] = {1, 0};
  rlx_node x = rlx_input(g, "x", RLX_F32, 2, xd), w = rlx_param(g, "w", RLX_F32, 2, wd);
  rlx_node y = rlx_matmul(g, x, rlx_transpose(g, w, 2, perm));
  rlx_graph_set_outputs(g, 1, &y);
  const size_t wbytes = (size_t)BN * BK * sizeof(float);
  float *wv = calloc((size_t)BN * BK, sizeof *wv), *xv = calloc(BK, sizeof *xv), *yv = malloc(BN * sizeof *yv);
  for (int64_t k = 0; k < BK; k++) xv[k] = 1.0f;
  for (int64_t n = 0; n < BN; n++) wv[(size_t)n * BK + (size_t)(n % BK)] = (float)(n % 7); /* y[n] = n % 7 */
  const size_t free0 = device_free_bytes();
  rlx_options cu = {RLX_DEVICE_CUDA, 0, 0, 0, NULL};
  rlx_session *s = NULL;
  rlx_status st = wv && xv && yv ? rlx_compile(g, &cu, &s) : RLX_ERR_NOMEM;
  if (st == RLX_OK) st = rlx_set_param(s, "w", wv, wbytes);
  if (st == RLX_OK) st = rlx_set_input(s, "x", xv, BK * sizeof *xv);
  if (st == RLX_OK) st = rlx_run(s);
  if (st == RLX_OK) st = rlx_output(s, 0, yv, BN * sizeof *yv);
  CHECK(st == RLX_OK, "big params: %s", rlx_last_error());
  int bad = 0;
  for (int64_t n = 0; st == RLX_OK && n < BN; n++) bad += yv[n] != (float)(n % 7);
  CHECK(st == RLX_OK && !bad, "big params: %d wrong outputs", bad);
  rlx_session_stats ss = {0};
  rlx_session_get_stats(s, &ss);
  CHECK(ss.param_device_bytes == wbytes, "param_device_bytes %zu, w is %zu", ss.param_device_bytes, wbytes);
  const size_t free1 = device_free_bytes();
  rlx_session_free(s);
  const size_t free2 = device_free_bytes();
  CHECK(free1 + wbytes <= free0 + ((size_t)256 << 20), "the session held w: %zu MiB taken", (free0 - free1) >> 20);
  CHECK(free2 + ((size_t)256 << 20) >= free0, "freed, it gave w back: %lld MiB still taken",
        ((long long)free0 - (long long)free2) >> 20);
  free(wv), free(xv), free(yv);
  rlx_graph_free(g);
}

int main(void) {
  if (!cuda_backend_test_begin()) return CUDA_SKIP;
  test_params();
  test_kept_state();
  test_shared_params();
  test_freed_params_released();
  return check_report();
}
