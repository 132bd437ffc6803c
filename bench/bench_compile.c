/* bench_compile.c — compile time of a 30-layer Llama-style decoder graph
 * (SmolLM2-135M sizes: hidden 576, 9 heads, 3 kv heads, head dim 64,
 * SwiGLU 1536, vocab 49152), built with the C builders, static sequence
 * length 64 so rlx_compile also plans it.
 *
 *   first    the process's first compile (thread pool start, fresh pages)
 *   cold     the compile cache cleared first: every pass runs, the plan is built
 *   hit      the same graph again while the first session is alive: a
 *            cache hit (no passes), the plan built anew (a live session's
 *            plan is not shared)
 *   reuse    again after freeing the previous session: a hit that takes
 *            the freed session's plan over (a lookup)
 *
 * Each is the median of RUNS compiles, wall clock and process CPU time (on
 * a loaded machine the wall clock also counts the time the process waits
 * for a core; CPU time does not); the ratios are against the cold compile,
 * the peer in the same process. Goal: cold < 50 ms.
 *
 *   bench_compile [runs]      (build target bench_compile; not a test)
 */
#include "bench_util.h"
#include "rlx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { LAYERS = 30, HIDDEN = 576, HEADS = 9, KV_HEADS = 3, HEAD_DIM = 64, FFN = 1536, VOCAB = 49152, SEQ = 64 };

static rlx_node param(rlx_graph *g, const char *what, int layer, int64_t rows, int64_t cols) {
  char name[64];
  snprintf(name, sizeof name, "layers.%d.%s", layer, what);
  int64_t d[] = {rows, cols};
  return cols ? rlx_param(g, name, RLX_F32, 2, d) : rlx_param(g, name, RLX_F32, 1, d);
}

static rlx_graph *build_decoder(void) {
  rlx_graph *g = rlx_graph_new("smollm2_135m");
  int64_t tok_d[] = {1, SEQ}, emb_d[] = {VOCAB, HIDDEN}, tab_d[] = {SEQ, HEAD_DIM / 2}, head_d[] = {HIDDEN, VOCAB};
  int64_t hid_d[] = {HIDDEN};
  float *zeros = calloc(HIDDEN, sizeof *zeros);
  rlx_node beta = rlx_constant(g, RLX_F32, 1, hid_d, zeros); /* RmsNorm's beta: no shift */
  free(zeros);
  rlx_node cos = rlx_input(g, "rope_cos", RLX_F32, 2, tab_d), sin = rlx_input(g, "rope_sin", RLX_F32, 2, tab_d);
  rlx_node x = rlx_gather(g, rlx_param(g, "embed", RLX_F32, 2, emb_d), rlx_input(g, "tokens", RLX_I32, 2, tok_d), 0);
  rlx_attention_desc att = {HEADS, KV_HEADS, HEAD_DIM, RLX_MASK_CAUSAL, 0, 0, 0, RLX_LAYOUT_BSHD};
  rlx_rope_desc rope = {HEAD_DIM, HEAD_DIM, RLX_ROPE_NEOX, 10000, 1};
  for (int l = 0; l < LAYERS; l++) {
    rlx_node h = rlx_rms_norm(g, x, param(g, "attn_norm", l, HIDDEN, 0), beta, -1, 1e-5);
    rlx_node q = rlx_rope_cos_sin(g, rlx_matmul(g, h, param(g, "wq", l, HIDDEN, HEADS * HEAD_DIM)), cos, sin, &rope);
    rlx_node k = rlx_rope_cos_sin(g, rlx_matmul(g, h, param(g, "wk", l, HIDDEN, KV_HEADS * HEAD_DIM)), cos, sin, &rope);
    rlx_node v = rlx_matmul(g, h, param(g, "wv", l, HIDDEN, KV_HEADS * HEAD_DIM));
    rlx_node a = rlx_attention(g, q, k, v, -1, &att);
    x = rlx_add(g, x, rlx_matmul(g, a, param(g, "wo", l, HEADS * HEAD_DIM, HIDDEN)));
    h = rlx_rms_norm(g, x, param(g, "ffn_norm", l, HIDDEN, 0), beta, -1, 1e-5);
    rlx_node gate = rlx_matmul(g, h, param(g, "w_gate", l, HIDDEN, FFN));
    rlx_node up = rlx_matmul(g, h, param(g, "w_up", l, HIDDEN, FFN));
    rlx_node act = rlx_mul(g, rlx_activation(g, RLX_ACT_SILU, gate), up);
    x = rlx_add(g, x, rlx_matmul(g, act, param(g, "w_down", l, FFN, HIDDEN)));
  }
  x = rlx_rms_norm(g, x, rlx_param(g, "norm", RLX_F32, 1, hid_d), beta, -1, 1e-5);
  rlx_node logits = rlx_matmul(g, x, rlx_param(g, "lm_head", RLX_F32, 2, head_d));
  rlx_graph_set_outputs(g, 1, &logits);
  return g;
}

/* Compiles g once into *s, recording wall and CPU milliseconds; exits on failure. */
static void timed_compile(const rlx_graph *g, rlx_session **s, double *wall, double *cpu) {
  double w0 = clock_seconds(CLOCK_MONOTONIC), c0 = clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
  if (rlx_compile(g, NULL, s) != RLX_OK) {
    fprintf(stderr, "bench_compile: rlx_compile: %s\n", rlx_last_error());
    exit(1);
  }
  *wall = 1e3 * (clock_seconds(CLOCK_MONOTONIC) - w0);
  *cpu = 1e3 * (clock_seconds(CLOCK_PROCESS_CPUTIME_ID) - c0);
}

int main(int argc, char **argv) {
  int runs = argc > 1 ? atoi(argv[1]) : 9;
  if (runs < 1 || runs > 1000) runs = 9;
  /* [kind][clock][run]: kind cold, hit, reuse; clock wall, cpu */
  double *t[3][2];
  for (int k = 0; k < 3; k++)
    for (int c = 0; c < 2; c++) t[k][c] = malloc(sizeof(double) * (size_t)runs);
  rlx_graph *g = build_decoder();
  if (rlx_graph_status(g) != RLX_OK) {
    fprintf(stderr, "bench_compile: building the graph: %s\n", rlx_last_error());
    return 1;
  }
  rlx_session_stats st_cold = {0}, st_hit = {0}, st_reuse = {0};
  double first[2];
  rlx_session *s0;
  timed_compile(g, &s0, &first[0], &first[1]);
  rlx_session_free(s0);
  for (int r = 0; r < runs; r++) {
    rlx_session *a, *b, *c;
    rlx_compile_cache_clear();
    timed_compile(g, &a, &t[0][0][r], &t[0][1][r]);
    timed_compile(g, &b, &t[1][0][r], &t[1][1][r]);
    rlx_session_free(a);
    timed_compile(g, &c, &t[2][0][r], &t[2][1][r]);
    rlx_session_get_stats(b, &st_hit);
    rlx_session_get_stats(c, &st_reuse);
    rlx_session_free(b);
    rlx_session_free(c);
  }
  rlx_session *probe;
  double ignored[2];
  rlx_compile_cache_clear();
  timed_compile(g, &probe, &ignored[0], &ignored[1]);
  rlx_session_get_stats(probe, &st_cold);
  rlx_session_free(probe);
  double m[3][2];
  for (int k = 0; k < 3; k++)
    for (int c = 0; c < 2; c++) m[k][c] = bench_median(t[k][c], runs);
  printf("bench_compile: %d-layer Llama-style decoder (hidden %d, %d heads, %d kv heads, SwiGLU %d, vocab %d, "
         "seq %d): %d nodes; median of %d\n", LAYERS, HIDDEN, HEADS, KV_HEADS, FFN, VOCAB, SEQ,
         rlx_graph_num_nodes(g), runs);
  printf("  %-38s %9s %9s %16s\n", "", "wall ms", "cpu ms", "vs cold (wall)");
  printf("  %-38s %9.2f %9.2f %15.1fx\n", "first compile of the process (once)", first[0], first[1], m[0][0] / first[0]);
  static const char *const what[] = {"cold compile (all passes, plan built)", "second compile, first session alive",
                                     "second compile, first session freed"};
  for (int k = 0; k < 3; k++)
    printf("  %-38s %9.2f %9.2f %15.1fx\n", what[k], m[k][0], m[k][1], m[0][0] / m[k][0]);
  printf("  goal: cold < 50 ms: %s (wall), %s (cpu); first compile: %s (wall)\n", m[0][0] < 50 ? "met" : "MISSED",
         m[0][1] < 50 ? "met" : "MISSED", first[0] < 50 ? "met" : "MISSED");
  printf("  second compile: cache hit %s with plans built %lld; after the free: hit %s, plans reused %lld\n",
         st_hit.compile_cache_hit ? "yes" : "NO", (long long)st_hit.plans_built,
         st_reuse.compile_cache_hit ? "yes" : "NO", (long long)st_reuse.plans_reused);
  printf("  cold compile made %lld plan(s), arena %.1f MiB\n", (long long)st_cold.plans_built,
         (double)st_cold.arena_bytes / (1 << 20));
  for (int k = 0; k < 3; k++)
    for (int c = 0; c < 2; c++) free(t[k][c]);
  rlx_graph_free(g);
  rlx_compile_cache_clear();
  return 0;
}
