/* test_prepack.c — the CPU backend keeps GEMM weights packed between runs
 * (gemm.h, cpu_gemm_prepacked); rebinding a param must still give the new
 * result. Through sessions, against a double reference computed here:
 *   - MatMul and FusedMatMulBiasAct with a param weight (fusion on and
 *     off), run twice (the second run reads the packed copy);
 *   - rlx_set_param with new values (the same session buffer: only the
 *     data version changes), rlx_set_param_ref to another buffer, and
 *     rlx_set_param_ref to the same buffer after writing new values into it;
 *   - a constant weight, and one param feeding two matmuls;
 *   - the plans of one session (one per shape binding) share one packed
 *     copy of a weight, which a new value replaces for all of them;
 *   - the packed copies are freed with the session.
 * CTest runs it again with RLX_PREPACK=0 and RLX_NO_AVX512=1. */
#include "rlx.h"
#include "backend/cpu/gemm.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

enum { M = 37, K = 70, N = 45 };

static uint64_t rng = 0x2545F4914F6CDD1Dull;

/* multiples of 1/16 in [-1/2, 1/2]: every sum below is exact in F32 */
static float exact_value(void) {
  rng = rng * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((int)((rng >> 33) % 17) - 8) / 16.0f;
}

static void fill(float *p, int64_t n) {
  for (int64_t i = 0; i < n; i++) p[i] = exact_value();
}

/* y = relu?(x @ w + bias?) in double, compared exactly */
static int64_t count_bad(const float *y, const float *x, const float *w, const float *bias, int relu) {
  int64_t bad = 0;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double s = bias ? bias[j] : 0.0;
      for (int k = 0; k < K; k++) s += (double)x[i * K + k] * (double)w[k * N + j];
      if (relu && s < 0) s = 0;
      if ((double)y[i * N + j] != s) bad++;
    }
  return bad;
}

static rlx_session *compile(rlx_graph *g, unsigned flags) {
  rlx_options opt = {RLX_DEVICE_CPU, 2, flags, 0, NULL};
  rlx_session *s = NULL;
  rlx_status st = rlx_compile(g, &opt, &s);
  CHECK(st == RLX_OK, "compile: %s", rlx_last_error());
  return s;
}

/* y0 = x @ w, y1 = relu(x @ w + bias) (the fusion pass makes it a
 * FusedMatMulBiasAct; with RLX_FLAG_NO_FUSE it stays MatMul, Add, Relu). */
static void test_rebind(unsigned flags) {
  const int64_t xd[2] = {M, K}, wd[2] = {K, N}, bd[1] = {N};
  rlx_graph *g = rlx_graph_new("prepack");
  rlx_node x = rlx_input(g, "x", RLX_F32, 2, xd);
  rlx_node w = rlx_param(g, "w", RLX_F32, 2, wd);
  rlx_node b = rlx_param(g, "b", RLX_F32, 1, bd);
  rlx_node mm = rlx_matmul(g, x, w);
  rlx_node y1 = rlx_activation(g, RLX_ACT_RELU, rlx_add(g, rlx_matmul(g, x, w), b));
  rlx_node outs[2] = {mm, y1};
  rlx_graph_set_outputs(g, 2, outs);
  rlx_session *s = compile(g, flags);
  static float xv[M * K], w0[K * N], w1[K * N], bv[N], y[M * N];
  float *ref_buf = malloc(sizeof w0);
  fill(xv, M * K);
  fill(w0, K * N);
  fill(w1, K * N);
  fill(bv, N);
  CHECK(rlx_set_input(s, "x", xv, sizeof xv) == RLX_OK, "x");
  CHECK(rlx_set_param(s, "b", bv, sizeof bv) == RLX_OK, "b");
  size_t before = gemm_prepack_total_bytes();
  /* the weight's values in each step, and how it is bound */
  const float *want[5] = {w0, w0, w1, w0, w1};
  for (int step = 0; step < 5; step++) {
    rlx_status st = RLX_OK;
    if (step == 0) st = rlx_set_param(s, "w", w0, sizeof w0);
    if (step == 2) st = rlx_set_param(s, "w", w1, sizeof w1); /* same buffer, new bytes */
    if (step == 3) {
      memcpy(ref_buf, w0, sizeof w0);
      st = rlx_set_param_ref(s, "w", ref_buf, sizeof w0);
    }
    if (step == 4) { /* the same borrowed buffer, rewritten, bound again */
      memcpy(ref_buf, w1, sizeof w1);
      st = rlx_set_param_ref(s, "w", ref_buf, sizeof w1);
    }
    CHECK(st == RLX_OK, "bind w: %s", rlx_last_error());
    CHECK(rlx_run(s) == RLX_OK, "run: %s", rlx_last_error());
    CHECK(rlx_output(s, 0, y, sizeof y) == RLX_OK, "output 0");
    CHECK(count_bad(y, xv, want[step], NULL, 0) == 0, "flags %u step %d: x @ w", flags, step);
    CHECK(rlx_output(s, 1, y, sizeof y) == RLX_OK, "output 1");
    CHECK(count_bad(y, xv, want[step], bv, 1) == 0, "flags %u step %d: relu(x @ w + b)", flags, step);
  }
  const char *env = getenv("RLX_PREPACK");
  size_t held = gemm_prepack_total_bytes() - before;
  if (env && strcmp(env, "0") == 0) CHECK(held == 0, "RLX_PREPACK=0 holds %zu bytes", held);
  else CHECK(held >= sizeof w0, "the weight is held packed (%zu bytes)", held);
  rlx_session_free(s);
  rlx_compile_cache_clear(); /* idle plans keep their copies until dropped */
  CHECK(gemm_prepack_total_bytes() == before, "freed with the session: %zu bytes left",
        gemm_prepack_total_bytes() - before);
  free(ref_buf);
  rlx_graph_free(g);
}

/* A constant weight: packed once, the result exact on every run. */
static void test_constant(void) {
  const int64_t xd[2] = {M, K}, wd[2] = {K, N};
  static float xv[M * K], wv[K * N], y[M * N];
  fill(xv, M * K);
  fill(wv, K * N);
  rlx_graph *g = rlx_graph_new("prepack_const");
  rlx_node x = rlx_input(g, "x", RLX_F32, 2, xd);
  rlx_node mm = rlx_matmul(g, x, rlx_constant(g, RLX_F32, 2, wd, wv));
  rlx_graph_set_outputs(g, 1, &mm);
  rlx_session *s = compile(g, 0);
  for (int run = 0; run < 3; run++) {
    if (run == 2) fill(xv, M * K);
    CHECK(rlx_set_input(s, "x", xv, sizeof xv) == RLX_OK, "x");
    CHECK(rlx_run(s) == RLX_OK, "run: %s", rlx_last_error());
    CHECK(rlx_output(s, 0, y, sizeof y) == RLX_OK, "output");
    CHECK(count_bad(y, xv, wv, NULL, 0) == 0, "constant weight, run %d", run);
  }
  rlx_session_free(s);
  rlx_graph_free(g);
}

/* y[S, N] = x[S, K] @ w at several S: a plan each, one packed copy of w
 * for all of them; a new w reaches every plan. */
static void test_plans_share(void) {
  static float xv[64 * K], w0[K * N], w1[K * N], y[64 * N];
  fill(xv, 64 * K);
  fill(w0, K * N);
  fill(w1, K * N);
  rlx_graph *g = rlx_graph_new("prepack_plans");
  const int64_t S = rlx_dim_sym(g, "S"), xd[2] = {S, K}, wd[2] = {K, N};
  rlx_node mm = rlx_matmul(g, rlx_input(g, "x", RLX_F32, 2, xd), rlx_param(g, "w", RLX_F32, 2, wd));
  rlx_graph_set_outputs(g, 1, &mm);
  rlx_session *s = compile(g, 0);
  size_t before = gemm_prepack_total_bytes(), one = 0;
  static const int64_t rows[] = {16, 24, 64, 16, 40};
  for (int pass = 0; pass < 2; pass++) {
    const float *w = pass ? w1 : w0;
    CHECK(rlx_set_param(s, "w", w, sizeof w0) == RLX_OK, "w: %s", rlx_last_error());
    for (int r = 0; r < 5; r++) {
      const int64_t m = rows[r];
      CHECK(rlx_set_input_shaped(s, "x", xv, sizeof(float) * (size_t)(m * K), 2, (const int64_t[]){m, K}) == RLX_OK,
            "x: %s", rlx_last_error());
      CHECK(rlx_run(s) == RLX_OK, "run: %s", rlx_last_error());
      CHECK(rlx_output(s, 0, y, sizeof(float) * (size_t)(m * N)) == RLX_OK, "output: %s", rlx_last_error());
      int64_t bad = 0;
      for (int64_t i = 0; i < m; i++)
        for (int j = 0; j < N; j++) {
          double sum = 0.0;
          for (int k = 0; k < K; k++) sum += (double)xv[i * K + k] * (double)w[k * N + j];
          bad += (double)y[i * N + j] != sum;
        }
      CHECK(bad == 0, "pass %d, %lld rows: %lld wrong", pass, (long long)m, (long long)bad);
      if (pass == 0 && r == 0) one = gemm_prepack_total_bytes() - before;
      CHECK(gemm_prepack_total_bytes() - before == one, "pass %d, %lld rows: %zu packed bytes, one copy is %zu", pass,
            (long long)m, gemm_prepack_total_bytes() - before, one);
    }
  }
  const char *env = getenv("RLX_PREPACK");
  if (env && strcmp(env, "0") == 0) CHECK(one == 0, "RLX_PREPACK=0 holds %zu bytes", one);
  else CHECK(one >= sizeof w0, "the weight is held packed (%zu bytes)", one);
  rlx_session_free(s);
  rlx_compile_cache_clear();
  CHECK(gemm_prepack_total_bytes() == before, "freed with the session: %zu bytes left",
        gemm_prepack_total_bytes() - before);
  rlx_graph_free(g);
}

int main(void) {
  test_plans_share();
  test_rebind(0);
  test_rebind(RLX_FLAG_NO_FUSE);
  test_constant();
  rlx_compile_cache_clear();
  return check_report();
}
