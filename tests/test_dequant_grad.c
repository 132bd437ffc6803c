/* test_dequant_grad.c — derivatives of DequantMatMul with F16/BF16 weights
 * (whose dequantization is widening, so w is a float tensor with a
 * gradient), against products computed here in double.
 *
 * y = x @ w^T with x f64 [2, 3, K] (batched: the weight gradient sums over
 * all rows), w [N, K] in F16 or BF16; loss = sum(r * y).
 *   - rlx_grad: dx = r @ w, dw = r^T x (over the 6 rows) rounded to w's dtype;
 *   - rlx_jvp along (tx, tw): ty = tx @ w^T + x @ tw^T.
 * Tolerances: dx and ty: 1e-5 of the sum of |terms| (the forward product
 * of an F64 x runs in F32); dw: the rounding to w's dtype (2^-8 relative
 * for F16, 2^-7 for BF16 — twice a half ulp) plus 1e-5 of |terms|. A rule
 * that drops either term, or the weight gradient, is off by O(1). */
#include "rlx.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"

#define B 2
#define M 3
#define N 5
#define K 40
#define ROWS (B * M)

static uint64_t rng_state = 0x853C49E6748FEA9Bull;

static double rng_normal(void) {
  double s = 0;
  for (int i = 0; i < 12; i++) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    s += (double)(rng_state >> 11) / 9007199254740992.0;
  }
  return s - 6.0;
}

static uint16_t to16(rlx_dtype t, double v) {
  return t == RLX_F16 ? rlx_f32_to_f16((float)v) : rlx_f32_to_bf16((float)v);
}

static double from16(rlx_dtype t, uint16_t h) {
  return t == RLX_F16 ? rlx_f16_to_f32(h) : rlx_bf16_to_f32(h);
}

/* 16-bit weights [N, K] and their values. */
static void random16(rlx_dtype t, uint16_t *h, double *v) {
  for (int i = 0; i < N * K; i++) {
    h[i] = to16(t, 0.3 * rng_normal());
    v[i] = from16(t, h[i]);
  }
}

static rlx_session *compile_or_fail(const rlx_graph *g, const char *what) {
  rlx_session *s = NULL;
  rlx_status st = rlx_compile(g, NULL, &s);
  CHECK(st == RLX_OK, "%s: compile: %s", what, rlx_last_error());
  return st == RLX_OK ? s : NULL;
}

static void test_dtype(rlx_dtype t) {
  const char *tn = rlx_dtype_name(t);
  rlx_graph *g = rlx_graph_new("dequant_grad");
  rlx_node x = rlx_input(g, "x", RLX_F64, 3, (const int64_t[]){B, M, K});
  rlx_node w = rlx_param(g, "w", t, 2, (const int64_t[]){N, K});
  rlx_node r = rlx_input(g, "r", RLX_F64, 3, (const int64_t[]){B, M, N});
  rlx_node y = rlx_dequant_matmul(g, x, w);
  rlx_node loss = rlx_reduce(g, RLX_REDUCE_SUM, rlx_mul(g, y, r), 3, (const int64_t[]){0, 1, 2}, 0);
  CHECK(rlx_graph_set_outputs(g, 2, (rlx_node[]){loss, y}) == RLX_OK, "%s: outputs: %s", tn, rlx_last_error());

  static double xv[ROWS * K], rv[ROWS * N], wv[N * K], txv[ROWS * K], twv[N * K];
  static uint16_t wh[N * K], twh[N * K];
  for (int i = 0; i < ROWS * K; i++) xv[i] = rng_normal(), txv[i] = rng_normal();
  for (int i = 0; i < ROWS * N; i++) rv[i] = rng_normal();
  random16(t, wh, wv);
  random16(t, twh, twv);

  /* reverse mode */
  rlx_graph *gg = NULL;
  rlx_status st = rlx_grad(g, loss, 2, (rlx_node[]){x, w}, &gg);
  CHECK(st == RLX_OK, "%s: rlx_grad: %s", tn, rlx_last_error());
  rlx_session *s = gg ? compile_or_fail(gg, tn) : NULL;
  if (s) {
    static double dx[ROWS * K];
    static uint16_t dw[N * K];
    st = rlx_set_input(s, "x", xv, sizeof xv);
    if (!st) st = rlx_set_input(s, "r", rv, sizeof rv);
    if (!st) st = rlx_set_param(s, "w", wh, sizeof wh);
    if (!st) st = rlx_run(s);
    if (!st) st = rlx_output(s, 1, dx, sizeof dx);
    if (!st) st = rlx_output(s, 2, dw, sizeof dw);
    CHECK(st == RLX_OK, "%s: grad run: %s", tn, rlx_last_error());
    double worst_x = 0, worst_w = 0;
    for (int i = 0; !st && i < ROWS; i++)
      for (int k = 0; k < K; k++) {
        double want = 0, mag = 0;
        for (int n = 0; n < N; n++) want += rv[i * N + n] * wv[n * K + k], mag += fabs(rv[i * N + n] * wv[n * K + k]);
        worst_x = fmax(worst_x, fabs(dx[i * K + k] - want) / (1e-5 * mag + 1e-300));
      }
    const double rel16 = t == RLX_F16 ? 0x1p-10 : 0x1p-7;
    for (int n = 0; !st && n < N; n++)
      for (int k = 0; k < K; k++) {
        double want = 0, mag = 0;
        for (int i = 0; i < ROWS; i++) want += rv[i * N + n] * xv[i * K + k], mag += fabs(rv[i * N + n] * xv[i * K + k]);
        double err = fabs(from16(t, dw[n * K + k]) - want);
        worst_w = fmax(worst_w, err / (rel16 * fabs(want) + 1e-5 * mag + 1e-300));
      }
    CHECK(!st && worst_x <= 1.0, "%s: dx off by %.3g of its tolerance", tn, worst_x);
    CHECK(!st && worst_w <= 1.0, "%s: dw off by %.3g of its tolerance", tn, worst_w);
    printf("%s: grad: dx at %.3g, dw at %.3g of their tolerances\n", tn, worst_x, worst_w);
  }
  rlx_session_free(s);
  rlx_graph_free(gg);

  /* forward mode */
  rlx_graph *jg = NULL;
  st = rlx_jvp(g, 2, (rlx_node[]){x, w}, &jg);
  CHECK(st == RLX_OK, "%s: rlx_jvp: %s", tn, rlx_last_error());
  s = jg ? compile_or_fail(jg, tn) : NULL;
  if (s) {
    static double ty[ROWS * N];
    st = rlx_set_input(s, "x", xv, sizeof xv);
    if (!st) st = rlx_set_input(s, "r", rv, sizeof rv);
    if (!st) st = rlx_set_param(s, "w", wh, sizeof wh);
    if (!st) st = rlx_set_input(s, "x.tangent", txv, sizeof txv);
    if (!st) st = rlx_set_input(s, "w.tangent", twh, sizeof twh);
    if (!st) st = rlx_run(s);
    if (!st) st = rlx_output(s, 3, ty, sizeof ty); /* loss, y, then their tangents */
    CHECK(st == RLX_OK, "%s: jvp run: %s", tn, rlx_last_error());
    double worst = 0;
    for (int i = 0; !st && i < ROWS; i++)
      for (int n = 0; n < N; n++) {
        double want = 0, mag = 0;
        for (int k = 0; k < K; k++) {
          double a = txv[i * K + k] * wv[n * K + k], b = xv[i * K + k] * twv[n * K + k];
          want += a + b;
          mag += fabs(a) + fabs(b);
        }
        worst = fmax(worst, fabs(ty[i * N + n] - want) / (1e-5 * mag + 1e-300));
      }
    CHECK(!st && worst <= 1.0, "%s: jvp off by %.3g of its tolerance", tn, worst);
    printf("%s: jvp at %.3g of its tolerance\n", tn, worst);
  }
  rlx_session_free(s);
  rlx_graph_free(jg);
  rlx_graph_free(g);
}

int main(void) {
  test_dtype(RLX_F16);
  test_dtype(RLX_BF16);
  return check_report();
}
