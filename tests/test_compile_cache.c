/* test_compile_cache.c — the process-wide compile cache: a second
 * rlx_compile of the same graph is a hit (no passes), a freed session's
 * plan is taken over by the next one (no plan built), sessions that share a
 * compiled graph still compute independently, anything that changes the
 * graph or the options is a miss, the cache is bounded (LRU eviction,
 * idle plans counted with their packed weights) and can be turned off or
 * cleared. */
#include "rlx.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* y = softmax(x @ w * scale) over [4, 8] x [8, 3]; the scale is a constant. */
static rlx_graph *build(const char *name, float scale) {
  rlx_graph *g = rlx_graph_new(name);
  int64_t xd[] = {4, 8}, wd[] = {8, 3};
  rlx_node x = rlx_input(g, "x", RLX_F32, 2, xd), w = rlx_param(g, "w", RLX_F32, 2, wd);
  rlx_node y = rlx_softmax(g, rlx_mul(g, rlx_matmul(g, x, w), rlx_constant(g, RLX_F32, 0, NULL, &scale)), -1);
  rlx_graph_set_outputs(g, 1, &y);
  return g;
}

static float xs[32], ws[24];

static rlx_session *compile(const rlx_graph *g, unsigned flags) {
  rlx_options opt = {RLX_DEVICE_CPU, 1, flags, 0, NULL};
  rlx_session *s = NULL;
  CHECK(rlx_compile(g, &opt, &s) == RLX_OK, "%s", rlx_last_error());
  return s;
}

/* Runs s on (x * k, w) and returns output element 0. */
static float run(rlx_session *s, float k) {
  float x[32], y[12];
  for (int i = 0; i < 32; i++) x[i] = xs[i] * k;
  if (rlx_set_param(s, "w", ws, sizeof ws) || rlx_set_input(s, "x", x, sizeof x) || rlx_run(s) ||
      rlx_output(s, 0, y, sizeof y)) {
    CHECK(0, "run: %s", rlx_last_error());
    return NAN;
  }
  return y[0];
}

static rlx_session_stats stats(const rlx_session *s) {
  rlx_session_stats st;
  memset(&st, 0, sizeof st);
  rlx_session_get_stats(s, &st);
  return st;
}

static rlx_compile_cache_stats cache_stats(void) {
  rlx_compile_cache_stats st;
  rlx_compile_cache_get_stats(&st);
  return st;
}

static void test_hits(void) {
  rlx_compile_cache_clear();
  rlx_compile_cache_stats c0 = cache_stats();
  rlx_graph *g = build("cached", 0.5f);
  rlx_session *a = compile(g, 0);
  CHECK(stats(a).compile_cache_hit == 0 && stats(a).plans_built == 1, "first compile: passes and a plan");
  CHECK(cache_stats().graph_bytes == 2 * sizeof(float), "the scale constant, in the key graph and the optimized one: %zu",
        cache_stats().graph_bytes);
  /* the same graph, built again: a hit, while a is alive (its plan is busy) */
  rlx_graph *g2 = build("cached", 0.5f);
  rlx_session *b = compile(g2, 0);
  rlx_compile_cache_stats c1 = cache_stats();
  CHECK(stats(b).compile_cache_hit == 1 && c1.hits == c0.hits + 1 && c1.lookups == c0.lookups + 2 && c1.entries == 1,
        "second compile hits: hits %lld lookups %lld entries %d", (long long)(c1.hits - c0.hits),
        (long long)(c1.lookups - c0.lookups), c1.entries);
  CHECK(stats(b).plans_built == 1 && stats(b).plans_reused == 0, "a live session's plan is not shared");
  /* two sessions of one compiled graph compute independently */
  float ya = run(a, 1), yb = run(b, -3), ya2 = run(a, 1);
  CHECK(ya == ya2 && ya != yb, "independent sessions: %g %g %g", ya, yb, ya2);
  /* (the stats are taken before a run: the second shows what the first packed) */
  const rlx_session_stats sa = stats(a);
  CHECK(sa.packed_bytes >= 8 * 3 * sizeof(float), "w packed once: %zu bytes", sa.packed_bytes);
  const size_t idle0 = cache_stats().idle_plan_bytes;
  rlx_session_free(a);
  /* a's plan waits in the cache, counted with the packed w it holds; the
   * next session takes it over */
  CHECK(cache_stats().idle_plan_bytes == idle0 + sa.arena_bytes + sa.packed_bytes,
        "an idle plan is held: %zu bytes, arena %zu, packed %zu", cache_stats().idle_plan_bytes - idle0,
        sa.arena_bytes, sa.packed_bytes);
  rlx_session *c = compile(g, 0);
  CHECK(stats(c).compile_cache_hit == 1 && stats(c).plans_built == 0 && stats(c).plans_reused == 1,
        "third compile: hit, plan reused (built %lld reused %lld)", (long long)stats(c).plans_built,
        (long long)stats(c).plans_reused);
  CHECK(run(c, 1) == ya, "the reused plan computes the same");
  CHECK(cache_stats().plans_reused == c1.plans_reused + 1, "cache counts the reuse");
  rlx_session_free(b);
  rlx_session_free(c);
  rlx_graph_free(g);
  rlx_graph_free(g2);
}

static void test_misses(void) {
  rlx_compile_cache_clear();
  rlx_graph *g = build("miss", 0.5f);
  rlx_session *s = compile(g, 0);
  rlx_session_free(s);
  struct { rlx_graph *g; unsigned flags; const char *what; } cases[] = {
    {build("miss", 0.25f), 0, "another constant"},
    {build("other_name", 0.5f), 0, "another graph name"},
    {build("miss", 0.5f), RLX_FLAG_NO_FUSE, "fusion off"},
    {build("miss", 0.5f), RLX_FLAG_NO_OPTIMIZE, "optimization off"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    s = compile(cases[i].g, cases[i].flags);
    CHECK(s && stats(s).compile_cache_hit == 0, "%s must miss", cases[i].what);
    rlx_session_free(s);
    rlx_graph_free(cases[i].g);
  }
  /* another thread count: the graph hits, the plan does not */
  rlx_options two = {RLX_DEVICE_CPU, 2, 0, 0, NULL};
  CHECK(rlx_compile(g, &two, &s) == RLX_OK, "%s", rlx_last_error());
  CHECK(stats(s).compile_cache_hit == 1 && stats(s).plans_reused == 0 && stats(s).plans_built == 1,
        "threads 2: graph cached, plan built");
  rlx_session_free(s);
  /* a graph whose last builder failed is reported, never matched */
  rlx_graph *bad = build("miss", 0.5f);
  rlx_node none = rlx_softmax(bad, 12345, 0);
  CHECK(none < 0, "builder fails");
  rlx_session *t = NULL;
  CHECK(rlx_compile(bad, NULL, &t) == RLX_ERR_INVALID && !t, "sticky error wins over the cache");
  rlx_graph_free(bad);
  rlx_graph_free(g);
}

/* Symbolic shapes: plans are per binding; a freed session's plans for two
 * bindings both wait for the next session. */
static void test_symbolic(void) {
  rlx_compile_cache_clear();
  rlx_graph *g = rlx_graph_new("sym");
  int64_t xd[] = {rlx_dim_sym(g, "S"), 4};
  rlx_node y = rlx_activation(g, RLX_ACT_EXP, rlx_input(g, "x", RLX_F32, 2, xd));
  rlx_graph_set_outputs(g, 1, &y);
  float x[12] = {0}, out[12];
  int64_t s2[] = {2, 4}, s3[] = {3, 4};
  for (int round = 0; round < 2; round++) {
    rlx_session *s = compile(g, 0);
    CHECK(rlx_set_input_shaped(s, "x", x, 8 * sizeof(float), 2, s2) == RLX_OK && rlx_run(s) == RLX_OK &&
          rlx_output(s, 0, out, 8 * sizeof(float)) == RLX_OK && out[0] == 1, "S=2: %s", rlx_last_error());
    CHECK(rlx_set_input_shaped(s, "x", x, 12 * sizeof(float), 2, s3) == RLX_OK && rlx_run(s) == RLX_OK &&
          rlx_output(s, 0, out, 12 * sizeof(float)) == RLX_OK && out[11] == 1, "S=3: %s", rlx_last_error());
    rlx_session_stats st = stats(s);
    if (round == 0) CHECK(st.plans_built == 2 && st.plans_reused == 0, "round 0: built %lld", (long long)st.plans_built);
    else CHECK(st.plans_built == 0 && st.plans_reused == 2 && st.compile_cache_hit, "round 1: reused %lld",
               (long long)st.plans_reused);
    rlx_session_free(s);
  }
  rlx_graph_free(g);
}

static void test_bounds(void) {
  rlx_compile_cache_clear();
  setenv("RLX_COMPILE_CACHE", "2", 1);
  rlx_compile_cache_stats c0 = cache_stats();
  rlx_graph *gs[3] = {build("a", 1), build("b", 1), build("c", 1)};
  for (int i = 0; i < 3; i++) rlx_session_free(compile(gs[i], 0));
  rlx_compile_cache_stats c1 = cache_stats();
  CHECK(c1.entries == 2 && c1.capacity == 2 && c1.evictions == c0.evictions + 1, "bounded: %d entries, %lld evicted",
        c1.entries, (long long)(c1.evictions - c0.evictions));
  rlx_session *s = compile(gs[0], 0); /* evicted first (least recently used) */
  CHECK(stats(s).compile_cache_hit == 0, "the LRU graph was evicted");
  rlx_session_free(s);
  s = compile(gs[2], 0);
  CHECK(stats(s).compile_cache_hit == 1, "the most recent graph is held");
  /* clear while a session holds a graph: the session keeps working */
  rlx_compile_cache_clear();
  CHECK(cache_stats().entries == 0 && cache_stats().idle_plan_bytes == 0 && cache_stats().graph_bytes == 0, "cleared");
  CHECK(!isnan(run(s, 1)), "a live session outlives a clear");
  rlx_session_free(s);
  setenv("RLX_COMPILE_CACHE", "0", 1);
  s = compile(gs[1], 0);
  rlx_session *t = compile(gs[1], 0);
  CHECK(stats(t).compile_cache_hit == 0 && cache_stats().entries == 0 && cache_stats().capacity == 0, "off");
  rlx_session_free(s);
  rlx_session_free(t);
  unsetenv("RLX_COMPILE_CACHE");
  for (int i = 0; i < 3; i++) rlx_graph_free(gs[i]);
  /* RLX_DUMP bypasses the cache: the passes run to be shown */
  rlx_graph *g = build("dumped", 1);
  rlx_session_free(compile(g, 0));
  setenv("RLX_DUMP", "nonexistent_pass_to_stay_quiet", 1);
  s = compile(g, 0);
  unsetenv("RLX_DUMP");
  CHECK(stats(s).compile_cache_hit == 0, "RLX_DUMP bypasses the cache");
  rlx_session_free(s);
  rlx_graph_free(g);
  rlx_compile_cache_clear();
}

int main(void) {
  for (int i = 0; i < 32; i++) xs[i] = (float)sin(i * 0.7) * 2;
  for (int i = 0; i < 24; i++) ws[i] = (float)cos(i * 1.3);
  test_hits();
  test_misses();
  test_symbolic();
  test_bounds();
  return check_report();
}
