/* test_session.c — sessions over symbolic dims: rlx_set_input_shaped binds
 * sizes at run time; each distinct binding is planned once and cached (a
 * second run with the same sizes plans nothing), up to 8 plans a session;
 * conflicting bindings and misuse get statuses. */
#include "rlx.h"

#include <math.h>
#include <stdlib.h>

#include "check.h"

/* y[S] = sum(relu(x[S,4]) * w[4], axis 1) + z[S] */
static rlx_graph *build(void) {
  rlx_graph *g = rlx_graph_new("sym");
  int64_t S = rlx_dim_sym(g, "S");
  int64_t xd[] = {S, 4}, wd[] = {4}, zd[] = {S};
  rlx_node x = rlx_input(g, "x", RLX_F32, 2, xd);
  rlx_node w = rlx_param(g, "w", RLX_F32, 1, wd);
  rlx_node z = rlx_input(g, "z", RLX_F32, 1, zd);
  int64_t axes[] = {1};
  rlx_node r = rlx_reduce(g, RLX_REDUCE_SUM, rlx_mul(g, rlx_activation(g, RLX_ACT_RELU, x), w), 1, axes, 0);
  rlx_node y = rlx_add(g, r, z);
  rlx_graph_set_outputs(g, 1, &y);
  return g;
}

/* Runs with S rows and checks against a direct computation. */
static void run_rows(rlx_session *s, int64_t S) {
  float *x = malloc(sizeof(float) * (size_t)S * 4), *z = malloc(sizeof(float) * (size_t)S);
  float *y = malloc(sizeof(float) * (size_t)S);
  for (int64_t i = 0; i < S * 4; i++) x[i] = (float)sin((double)i) * 2;
  for (int64_t i = 0; i < S; i++) z[i] = (float)i;
  int64_t xd[] = {S, 4}, zd[] = {S};
  CHECK(rlx_set_input_shaped(s, "x", x, sizeof(float) * (size_t)S * 4, 2, xd) == RLX_OK, "%s", rlx_last_error());
  CHECK(rlx_set_input_shaped(s, "z", z, sizeof(float) * (size_t)S, 1, zd) == RLX_OK, "%s", rlx_last_error());
  CHECK(rlx_run(s) == RLX_OK, "%s", rlx_last_error());
  rlx_dtype t;
  int64_t od[8];
  CHECK(rlx_output_type(s, 0, &t, od) == 1 && od[0] == S && t == RLX_F32, "output type");
  CHECK(rlx_output(s, 0, y, sizeof(float) * (size_t)S) == RLX_OK, "%s", rlx_last_error());
  const float w[] = {0.5f, -1.0f, 2.0f, 0.25f};
  double worst = 0;
  for (int64_t i = 0; i < S; i++) {
    double acc = z[i];
    for (int k = 0; k < 4; k++) acc += fmax(x[i * 4 + k], 0) * w[k];
    worst = fmax(worst, fabs(acc - y[i]));
  }
  CHECK(worst < 1e-5, "S=%lld max error %g", (long long)S, worst);
  free(x);
  free(z);
  free(y);
}

int main(void) {
  rlx_graph *g = build();
  CHECK(rlx_graph_status(g) == RLX_OK, "%s", rlx_last_error());
  rlx_session *s = NULL;
  CHECK(rlx_compile(g, NULL, &s) == RLX_OK, "%s", rlx_last_error());
  const float w[] = {0.5f, -1.0f, 2.0f, 0.25f};
  CHECK(rlx_set_param(s, "w", w, sizeof w) == RLX_OK, "%s", rlx_last_error());

  rlx_session_stats st;
  rlx_session_get_stats(s, &st);
  CHECK(st.plans_built == 0, "a symbolic graph is planned at its first run, built %lld", (long long)st.plans_built);

  run_rows(s, 3);
  run_rows(s, 3);
  rlx_session_get_stats(s, &st);
  CHECK(st.plans_built == 1 && st.plan_cache_hits == 1, "same sizes: built %lld hits %lld",
        (long long)st.plans_built, (long long)st.plan_cache_hits);
  run_rows(s, 7);
  run_rows(s, 1);
  run_rows(s, 3);
  rlx_session_get_stats(s, &st);
  CHECK(st.plans_built == 3 && st.plan_cache_hits == 2 && st.runs == 5, "built %lld hits %lld runs %lld",
        (long long)st.plans_built, (long long)st.plan_cache_hits, (long long)st.runs);

  /* 20 more sizes: the session holds 8 plans at most, the least recently
   * run go to the compile cache's idle plans (4 a graph), and a size run
   * again comes back from there, with a right result */
  for (int64_t S = 10; S < 30; S++) {
    run_rows(s, S);
    rlx_session_get_stats(s, &st);
    CHECK(st.plans_held >= 1 && st.plans_held <= 8, "S=%lld: %lld plans held", (long long)S, (long long)st.plans_held);
  }
  run_rows(s, 21); /* the last one let go */
  run_rows(s, 29);
  rlx_session_get_stats(s, &st);
  CHECK(st.plans_built == 23 && st.plans_reused == 1 && st.plans_held == 8, "built %lld reused %lld held %lld",
        (long long)st.plans_built, (long long)st.plans_reused, (long long)st.plans_held);
  run_rows(s, 3); /* let go long ago, and dropped from the cache: built again */
  rlx_session_get_stats(s, &st);
  CHECK(st.plans_built == 24 && st.plans_held == 8, "built %lld held %lld", (long long)st.plans_built,
        (long long)st.plans_held);

  /* misuse */
  float buf[64] = {0};
  int64_t d5[] = {5, 4}, d3[] = {3}, d53[] = {5, 3};
  CHECK_ERR(rlx_set_input(s, "x", buf, sizeof(float) * 20), RLX_ERR_SHAPE, "symbolic", "rlx_set_input_shaped");
  CHECK_ERR(rlx_set_input_shaped(s, "x", buf, sizeof(float) * 20, 1, d5), RLX_ERR_SHAPE, "rank");
  CHECK_ERR(rlx_set_input_shaped(s, "x", buf, sizeof(float) * 15, 2, d53), RLX_ERR_SHAPE, "dim 1");
  CHECK_ERR(rlx_set_input_shaped(s, "x", buf, sizeof(float) * 19, 2, d5), RLX_ERR_INVALID, "bytes");
  /* x binds S=5 while z binds S=3 */
  CHECK(rlx_set_input_shaped(s, "x", buf, sizeof(float) * 20, 2, d5) == RLX_OK, "%s", rlx_last_error());
  CHECK(rlx_set_input_shaped(s, "z", buf, sizeof(float) * 3, 1, d3) == RLX_OK, "%s", rlx_last_error());
  CHECK_ERR(rlx_run(s), RLX_ERR_SHAPE, "symbol S", "\"z\"");

  rlx_session_free(s);
  rlx_graph_free(g);

  /* a static graph is planned at compile time, once */
  rlx_graph *h = rlx_graph_new("static");
  int64_t d[] = {2, 2};
  rlx_node a = rlx_input(h, "a", RLX_F32, 2, d);
  rlx_node b = rlx_activation(h, RLX_ACT_EXP, a);
  rlx_graph_set_outputs(h, 1, &b);
  CHECK(rlx_compile(h, NULL, &s) == RLX_OK, "%s", rlx_last_error());
  float in[4] = {0, 1, 2, 3}, out[4];
  for (int r = 0; r < 3; r++) {
    CHECK(rlx_set_input(s, "a", in, sizeof in) == RLX_OK, "%s", rlx_last_error());
    CHECK(rlx_run(s) == RLX_OK, "%s", rlx_last_error());
  }
  CHECK(rlx_output(s, 0, out, sizeof out) == RLX_OK && fabs(out[3] - exp(3.0)) < 1e-4, "exp");
  rlx_session_get_stats(s, &st);
  CHECK(st.plans_built == 1 && st.runs == 3, "static: built %lld runs %lld", (long long)st.plans_built,
        (long long)st.runs);
  rlx_session_free(s);
  rlx_graph_free(h);
  return check_report();
}
