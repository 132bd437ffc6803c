/* test_pass_pipeline.c — the pipeline as a whole: it composes the passes
 * (the optimized graph computes what the input computes, and is smaller),
 * RLX_TRACE says what each pass changed, RLX_DUMP prints the graph after
 * the passes named, the options come from the environment and the flags,
 * and RLX_DISPATCH_REPORT prints the dispatch table after rlx_compile. */
#include "pass_test_util.h"

#include <stdio.h>
#include <unistd.h>

/* Everything written to stderr between capture_start and capture_end. */
static int saved_fd = -1;
static FILE *capture_file;

static void capture_start(void) {
  fflush(stderr);
  capture_file = tmpfile();
  saved_fd = dup(2);
  dup2(fileno(capture_file), 2);
}

static char *capture_end(void) {
  fflush(stderr);
  dup2(saved_fd, 2);
  close(saved_fd);
  long n = ftell(capture_file);
  char *text = calloc((size_t)n + 1, 1);
  if (!text) {
    printf("out of memory capturing stderr\n");
    exit(1);
  }
  rewind(capture_file);
  if (fread(text, 1, (size_t)n, capture_file) != (size_t)n) text[0] = 0;
  fclose(capture_file);
  return text;
}

static int count_of(const char *text, const char *needle) {
  int c = 0;
  for (const char *p = text; (p = strstr(p, needle)); p++) c++;
  return c;
}

/* Work for every pass: a constant chain (fold), a duplicate (cse), x * 1
 * (simplify), a dead branch (dce), a fused op (legalize when decomposing). */
static rlx_graph *build(void) {
  rlx_graph *g = rlx_graph_new("pipe");
  int64_t xd[] = {3, 4}, wd[] = {4, 4}, bd[] = {4};
  float ones[] = {1, 1, 1, 1}, cv[] = {0.5f, 1, 2, -1};
  rlx_node x = rlx_input(g, "x", RLX_F32, 2, xd), w = rlx_param(g, "w", RLX_F32, 2, wd);
  rlx_node c = rlx_activation(g, RLX_ACT_EXP, rlx_constant(g, RLX_F32, 1, bd, cv));
  rlx_node a1 = rlx_mul(g, rlx_matmul(g, x, w), rlx_constant(g, RLX_F32, 1, bd, ones));
  rlx_node a2 = rlx_matmul(g, x, w);
  rlx_activation(g, RLX_ACT_TANH, a2); /* dead */
  rlx_node h = rlx_fused_matmul_bias_act(g, rlx_add(g, a1, a2), w, c, RLX_ACT_RELU, 0);
  rlx_graph_set_outputs(g, 1, &h);
  CHECK(rlx_graph_status(g) == RLX_OK, "%s", rlx_last_error());
  return g;
}

static void defaults(pass_options *o) {
  memset(o, 0, sizeof *o);
  o->fuse = o->optimize = 1;
  o->eval = rt_const_eval;
  o->eval_ctx = (void *)&rlx_cpu_backend;
}

static void test_trace_and_result(void) {
  rlx_graph *g = build(), *out = NULL;
  pass_options o;
  defaults(&o);
  o.trace = 1;
  capture_start();
  rlx_status st = pass_pipeline(g, &o, &out);
  char *log = capture_end();
  CHECK(st == RLX_OK && out, "%s", rlx_last_error());
  CHECK(strstr(log, "rlx: fold: folded 1 node ("), "fold trace: %s", log);
  CHECK(strstr(log, "rlx: cse: merged 1 node ("), "cse trace: %s", log);
  CHECK(strstr(log, "rlx: simplify: simplified 1 node ("), "simplify trace: %s", log);
  CHECK(strstr(log, "rlx: dce: removed "), "dce trace: %s", log);
  CHECK(strstr(log, "rlx: legalize: no change"), "legalize trace: %s", log);
  CHECK(strstr(log, "rlx: pipeline: 11 -> "), "pipeline summary: %s", log);
  free(log);
  if (out) {
    CHECK(rlx_graph_verify(out) == RLX_OK, "%s", rlx_last_error());
    CHECK(out->n_nodes < g->n_nodes && pt_count(out, "MatMul") <= 1, "smaller: %d -> %d nodes", g->n_nodes, out->n_nodes);
    pt_check_same(g, out, 1e-6, 1e-6, "pipeline result");
  }
  rlx_graph_free(out);
  /* fusion off, and optimize off (only legalize runs) */
  o.fuse = 0;
  capture_start();
  st = pass_pipeline(g, &o, &out);
  log = capture_end();
  CHECK(st == RLX_OK && strstr(log, "rlx: fuse: off"), "fuse off: %s", log);
  free(log);
  rlx_graph_free(out);
  o.optimize = 0;
  capture_start();
  st = pass_pipeline(g, &o, &out);
  log = capture_end();
  CHECK(st == RLX_OK && !strstr(log, "fold") && strstr(log, "legalize"), "optimize off: %s", log);
  CHECK(out && out->n_nodes == g->n_nodes, "optimize off keeps the graph");
  free(log);
  rlx_graph_free(out);
  rlx_graph_free(g);
}

static void test_dump(void) {
  rlx_graph *g = build(), *out = NULL;
  pass_options o;
  defaults(&o);
  o.dump = "cse,after-legalize,nonsense";
  capture_start();
  rlx_status st = pass_pipeline(g, &o, &out);
  char *log = capture_end();
  CHECK(st == RLX_OK, "%s", rlx_last_error());
  CHECK(strstr(log, "rlx: graph after cse, ") && strstr(log, "rlx: graph after legalize, "),
        "named dumps: %s", log);
  CHECK(!strstr(log, "graph after fold"), "unnamed passes are not dumped");
  CHECK(strstr(log, "no pass named \"nonsense\""), "unknown name warned about");
  CHECK(count_of(log, "graph \"pipe\" {") == count_of(log, "rlx: graph after"), "each dump is the text form");
  free(log);
  rlx_graph_free(out);
  o.dump = "all";
  capture_start();
  st = pass_pipeline(g, &o, &out);
  log = capture_end();
  CHECK(st == RLX_OK && strstr(log, "graph after input") && strstr(log, "graph after fold") &&
        strstr(log, "graph after simplify") && strstr(log, "graph after fuse") && strstr(log, "graph after legalize") &&
        strstr(log, "(round 2)"), "all: %s", log);
  /* the last dump parses back to the pipeline's result */
  const char *last = strstr(log, "rlx: graph after legalize");
  const char *text = last ? strstr(last, "graph \"pipe\"") : NULL;
  rlx_graph *parsed = NULL;
  CHECK(text && rlx_graph_from_text(text, &parsed) == RLX_OK && out && rlx_graph_hash(parsed) == rlx_graph_hash(out),
        "the dump is the graph: %s", rlx_last_error());
  rlx_graph_free(parsed);
  free(log);
  rlx_graph_free(out);
  rlx_graph_free(g);
}

static void test_env_options(void) {
  setenv("RLX_FUSE", "0", 1);
  setenv("RLX_TRACE", "1", 1);
  setenv("RLX_DUMP", "fold", 1);
  setenv("RLX_DECOMPOSE_FUSED", "1", 1);
  pass_options o;
  pass_options_from_env(&o);
  CHECK(o.fuse == 0 && o.trace == 1 && o.dump && !strcmp(o.dump, "fold") && o.decompose_fused == 1 && o.optimize == 1,
        "options from the environment");
  unsetenv("RLX_FUSE");
  unsetenv("RLX_TRACE");
  unsetenv("RLX_DUMP");
  unsetenv("RLX_DECOMPOSE_FUSED");
  pass_options_from_env(&o);
  CHECK(o.fuse == 1 && o.trace == 0 && !o.dump && o.decompose_fused == 0, "defaults");
}

/* rlx_compile with RLX_DISPATCH_REPORT=1 (and RLX_DECOMPOSE_FUSED=1: the
 * fused op shows as decomposed, its primitives as native). */
static void test_dispatch_report(void) {
  rlx_graph *g = build();
  rlx_session *s = NULL;
  setenv("RLX_DISPATCH_REPORT", "1", 1);
  setenv("RLX_DECOMPOSE_FUSED", "1", 1);
  rlx_options opt = {RLX_DEVICE_CPU, 1, RLX_FLAG_NO_FUSE, 0, NULL};
  capture_start();
  rlx_status st = rlx_compile(g, &opt, &s);
  char *log = capture_end();
  unsetenv("RLX_DISPATCH_REPORT");
  unsetenv("RLX_DECOMPOSE_FUSED");
  CHECK(st == RLX_OK, "%s", rlx_last_error());
  CHECK(strstr(log, "rlx: dispatch report for graph \"pipe\" on cpu"), "header: %s", log);
  CHECK(strstr(log, "native  decomposed  fallback"), "columns: %s", log);
  char row[128];
  snprintf(row, sizeof row, "  %-24s %8d %11d %9d\n", "FusedMatMulBiasAct", 0, 1, 0);
  CHECK(strstr(log, row), "decomposed row: %s", log);
  snprintf(row, sizeof row, "  %-24s %8d %11d %9d\n", "MatMul", 2, 0, 0);
  CHECK(strstr(log, row), "MatMul row (one left by cse, one from the decomposition): %s", log);
  CHECK(strstr(log, "  total ") && !strstr(log, "Input"), "total, no leaves: %s", log);
  free(log);
  rlx_session_free(s);
  /* without the switch nothing is printed */
  capture_start();
  st = rlx_compile(g, &opt, &s);
  log = capture_end();
  CHECK(st == RLX_OK && !strstr(log, "dispatch report"), "silent by default: %s", log);
  free(log);
  rlx_session_free(s);
  rlx_graph_free(g);
}

int main(void) {
  test_trace_and_result();
  test_dump();
  test_env_options();
  test_dispatch_report();
  return check_report();
}
