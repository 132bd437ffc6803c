/* mlp.c — the README's example as a program: build softmax(gelu(x @ w)),
 * compile it, run it, and check the result against the same math written
 * as plain loops. Exit status 0 when they agree.
 *
 *   cc mlp.c $(pkg-config --cflags --libs rlx) -o mlp     (or examples/CMakeLists.txt)
 */
#include <math.h>
#include <stdio.h>

#include "rlx.h"

enum { M = 3, K = 4, N = 5 };

#define TRY(call)                                                           \
  do {                                                                      \
    rlx_status st_ = (call);                                                \
    if (st_ != RLX_OK) {                                                    \
      fprintf(stderr, "%s: %s\n", rlx_status_name(st_), rlx_last_error()); \
      return 1;                                                             \
    }                                                                       \
  } while (0)

/* The reference: the same math, one element at a time. */
static void reference(const float *x, const float *w, double *y) {
  for (int i = 0; i < M; i++) {
    double row[N], max = -INFINITY, sum = 0;
    for (int j = 0; j < N; j++) {
      double acc = 0;
      for (int k = 0; k < K; k++) acc += (double)x[i * K + k] * w[k * N + j];
      row[j] = 0.5 * acc * (1 + erf(acc / sqrt(2.0)));  /* GELU, erf form */
      if (row[j] > max) max = row[j];
    }
    for (int j = 0; j < N; j++) sum += (row[j] = exp(row[j] - max));
    for (int j = 0; j < N; j++) y[i * N + j] = row[j] / sum;
  }
}

int main(void) {
  float x[M * K], w[K * N], y[M * N];
  for (int i = 0; i < M * K; i++) x[i] = (float)(i % 7) / 7 - 0.4f;
  for (int i = 0; i < K * N; i++) w[i] = (float)(i % 5) / 5 - 0.3f;

  rlx_graph *g = rlx_graph_new("mlp");
  int64_t xd[] = {M, K}, wd[] = {K, N};
  rlx_node xn = rlx_input(g, "x", RLX_F32, 2, xd);
  rlx_node wn = rlx_param(g, "w", RLX_F32, 2, wd);
  rlx_node yn = rlx_softmax(g, rlx_activation(g, RLX_ACT_GELU, rlx_matmul(g, xn, wn)), -1);
  rlx_graph_set_outputs(g, 1, &yn);
  TRY(rlx_graph_status(g)); /* one check for the whole chain of builders */

  rlx_session *s;
  TRY(rlx_compile(g, NULL, &s));
  TRY(rlx_set_param(s, "w", w, sizeof w));
  TRY(rlx_set_input(s, "x", x, sizeof x));
  TRY(rlx_run(s));
  TRY(rlx_output(s, 0, y, sizeof y));
  rlx_session_free(s);
  rlx_graph_free(g);

  double ref[M * N], worst = 0;
  reference(x, w, ref);
  for (int i = 0; i < M * N; i++) {
    double e = fabs(y[i] - ref[i]);
    if (e > worst) worst = e;
  }
  printf("mlp: softmax(gelu(x @ w)) row 0: %.5f %.5f %.5f %.5f %.5f (max error %.2g)\n",
         y[0], y[1], y[2], y[3], y[4], worst);
  return worst < 1e-5 ? 0 : 1;
}
