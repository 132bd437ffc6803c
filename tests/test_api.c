/* test_api.c — a program written only against the names of
 * ARCHITECTURE.md's public API: builds an MLP in F64, compiles, runs, and
 * checks the result against a direct C computation to float64 accuracy;
 * round-trips the graph through its text form; and gets statuses (never a
 * crash) on bad input. Linked against both the static and shared library. */
#include "rlx.h"

#include <math.h>
#include <stdlib.h>

#include "check.h"

enum { M = 3, K = 4, N = 5 };

/* y = softmax(gelu(x @ w + b), axis -1), computed directly. */
static void reference(const double *x, const double *w, const double *b, double *y) {
  for (int i = 0; i < M; i++) {
    double row[N], mx = -INFINITY, sum = 0;
    for (int j = 0; j < N; j++) {
      double acc = b[j];
      for (int k = 0; k < K; k++) acc += x[i * K + k] * w[k * N + j];
      row[j] = 0.5 * acc * (1 + erf(acc / sqrt(2.0)));
      mx = row[j] > mx ? row[j] : mx;
    }
    for (int j = 0; j < N; j++) sum += exp(row[j] - mx);
    for (int j = 0; j < N; j++) y[i * N + j] = exp(row[j] - mx) / sum;
  }
}

static rlx_graph *build_mlp(void) {
  rlx_graph *g = rlx_graph_new("mlp");
  int64_t xd[] = {M, K}, wd[] = {K, N}, bd[] = {N};
  rlx_node x = rlx_input(g, "x", RLX_F64, 2, xd);
  rlx_node w = rlx_param(g, "w", RLX_F64, 2, wd);
  rlx_node b = rlx_param(g, "b", RLX_F64, 1, bd);
  rlx_node h = rlx_activation(g, RLX_ACT_GELU, rlx_add(g, rlx_matmul(g, x, w), b));
  rlx_node y = rlx_softmax(g, h, -1);
  rlx_graph_set_outputs(g, 1, &y);
  return g;
}

static double max_err(rlx_session *s, const double *x, const double *w, const double *b) {
  double y[M * N], want[M * N], err = INFINITY;
  if (rlx_set_param(s, "w", w, sizeof(double) * K * N) || rlx_set_param(s, "b", b, sizeof(double) * N) ||
      rlx_set_input(s, "x", x, sizeof(double) * M * K) || rlx_run(s) || rlx_output(s, 0, y, sizeof y))
    return err;
  reference(x, w, b, want);
  err = 0;
  for (int i = 0; i < M * N; i++) err = fmax(err, fabs(y[i] - want[i]));
  return err;
}

int main(void) {
  double x[M * K], w[K * N], b[N];
  for (int i = 0; i < M * K; i++) x[i] = sin(1.0 + i);
  for (int i = 0; i < K * N; i++) w[i] = cos(0.5 * i) * 0.7;
  for (int i = 0; i < N; i++) b[i] = 0.1 * i - 0.2;

  rlx_graph *g = build_mlp();
  CHECK(rlx_graph_status(g) == RLX_OK, "%s", rlx_last_error());
  CHECK(rlx_graph_verify(g) == RLX_OK, "%s", rlx_last_error());

  rlx_session *s = NULL;
  CHECK(rlx_compile(g, NULL, &s) == RLX_OK, "%s", rlx_last_error());
  double err = s ? max_err(s, x, w, b) : INFINITY;
  CHECK(err < 1e-14, "max error %g", err);

  /* text round trip: same graph, same results */
  char *text = rlx_graph_to_text(g);
  rlx_graph *g2 = NULL;
  CHECK(text && rlx_graph_from_text(text, &g2) == RLX_OK, "%s", rlx_last_error());
  CHECK(g2 && rlx_graph_hash(g2) == rlx_graph_hash(g), "hash differs after round trip");
  rlx_session *s2 = NULL;
  CHECK(g2 && rlx_compile(g2, NULL, &s2) == RLX_OK, "%s", rlx_last_error());
  err = s2 ? max_err(s2, x, w, b) : INFINITY;
  CHECK(err < 1e-14, "round-tripped graph: max error %g", err);

  /* bad input: statuses, never a crash */
  double big[64] = {0};
  CHECK_ERR(rlx_set_input(s, "x", x, sizeof x - 8), RLX_ERR_INVALID, "\"x\"", "bytes");
  CHECK_ERR(rlx_set_input(s, "nope", x, sizeof x), RLX_ERR_INVALID, "nope");
  CHECK_ERR(rlx_set_param(s, "x", x, sizeof x), RLX_ERR_INVALID, "not a param");
  CHECK_ERR(rlx_set_input(s, "x", NULL, sizeof x), RLX_ERR_INVALID, "NULL");
  CHECK_ERR(rlx_set_input(NULL, "x", x, sizeof x), RLX_ERR_INVALID, "NULL");
  CHECK_ERR(rlx_output(s, 0, big, sizeof big), RLX_ERR_INVALID, "bytes");
  CHECK_ERR(rlx_output(s, 3, big, sizeof big), RLX_ERR_INVALID, "index 3");
  rlx_session *none = NULL;
  CHECK_ERR(rlx_compile(NULL, NULL, &none), RLX_ERR_INVALID, "NULL");
  CHECK_ERR(rlx_compile(g, NULL, NULL), RLX_ERR_INVALID, "NULL");
  CHECK_ERR(rlx_run(NULL), RLX_ERR_INVALID, "NULL");

  /* wrong dtype: f32 param into an f64 matmul */
  rlx_graph *bad = rlx_graph_new("bad");
  int64_t d2[] = {2, 2};
  rlx_node a = rlx_input(bad, "a", RLX_F64, 2, d2);
  rlx_node c = rlx_param(bad, "c", RLX_F32, 2, d2);
  rlx_node m = rlx_matmul(bad, a, c);
  CHECK(m < 0, "matmul of f64 and f32 should fail");
  CHECK_ERR(rlx_graph_status(bad), RLX_ERR_DTYPE, "MatMul");
  rlx_session *s3 = NULL;
  CHECK_ERR(rlx_compile(bad, NULL, &s3), RLX_ERR_DTYPE, "MatMul");
  CHECK(s3 == NULL, "no session for an invalid graph");

  /* garbage text */
  rlx_graph *g3 = NULL;
  CHECK_ERR(rlx_graph_from_text("this is not a graph", &g3), RLX_ERR_FORMAT, "line 1");
  CHECK(g3 == NULL, "no graph from garbage");

  /* run before all inputs are set */
  rlx_session *s4 = NULL;
  CHECK(rlx_compile(g, NULL, &s4) == RLX_OK, "%s", rlx_last_error());
  CHECK_ERR(rlx_run(s4), RLX_ERR_INVALID, "never set");
  CHECK_ERR(rlx_output(s4, 0, big, sizeof(double) * M * N), RLX_ERR_INVALID, "rlx_run first");

  rlx_session_free(s4);
  rlx_graph_free(bad);
  free(text);
  rlx_session_free(s2);
  rlx_graph_free(g2);
  rlx_session_free(s);
  rlx_graph_free(g);
  return check_report();
}
