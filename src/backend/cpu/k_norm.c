/* k_norm.c — CPU reference kernels: Softmax, LogSoftmax, LayerNorm, RmsNorm,
 * GroupNorm, BatchNorm. Everything is computed in double. */
#include "cpu.h"
#include "norm_rows.h"

#include <math.h>
#include <stdlib.h>

/* ---------------------------------------------------------------- row routines */

void cpu_moments(const double *x, int64_t n, double *mean, double *var) {
  double s = 0.0, q = 0.0;
  for (int64_t i = 0; i < n; i++) s += x[i];
  double m = s / (double)n;
  for (int64_t i = 0; i < n; i++) q += (x[i] - m) * (x[i] - m);
  *mean = m;
  *var = q / (double)n;
}

static double row_max(const double *x, int64_t n) {
  double m = -INFINITY;
  for (int64_t i = 0; i < n; i++)
    if (x[i] > m) m = x[i];
  return m;
}

void cpu_softmax_row(double *x, int64_t n) {
  double m = row_max(x, n), s = 0.0;
  for (int64_t i = 0; i < n; i++) {
    x[i] = exp(x[i] - m);
    s += x[i];
  }
  for (int64_t i = 0; i < n; i++) x[i] /= s;
}

void cpu_log_softmax_row(double *x, int64_t n) {
  double m = row_max(x, n), s = 0.0;
  for (int64_t i = 0; i < n; i++) s += exp(x[i] - m);
  double lse = m + log(s);
  for (int64_t i = 0; i < n; i++) x[i] -= lse;
}

void cpu_layer_norm_row(double *x, int64_t n, const double *gamma, const double *beta,
                        double eps) {
  double mean, var;
  cpu_moments(x, n, &mean, &var);
  double r = 1.0 / sqrt(var + eps);
  for (int64_t i = 0; i < n; i++) x[i] = (x[i] - mean) * r * gamma[i] + beta[i];
}

void cpu_rms_norm_row(double *x, int64_t n, const double *gamma, const double *beta,
                      double eps) {
  double q = 0.0;
  for (int64_t i = 0; i < n; i++) q += x[i] * x[i];
  double r = 1.0 / sqrt(q / (double)n + eps);
  for (int64_t i = 0; i < n; i++) x[i] = x[i] * r * gamma[i] + beta[i];
}

/* ---------------------------------------------------------------- helpers */

static double *alloc_f64(int64_t count, const ir_node *n) {
  double *p = malloc((size_t)(count > 0 ? count : 1) * sizeof *p);
  if (!p) rlx_set_error(RLX_ERR_NOMEM, "%s (node %d): no memory for scratch", ir_ops[n->op].name,
                        n->id);
  return p;
}

/* Loads inputs in[0..count) (none empty) as doubles into v[]; on failure
 * frees what was loaded and returns RLX_ERR_NOMEM (set by cpu_load_f64). */
static rlx_status load_all(const cpu_tensor *in, int count, double **v) {
  for (int i = 0; i < count; i++) {
    v[i] = cpu_load_f64(&in[i]);
    if (!v[i]) {
      while (i-- > 0) free(v[i]);
      return RLX_ERR_NOMEM;
    }
  }
  return RLX_OK;
}

static void free_all(double **v, int count) {
  for (int i = 0; i < count; i++) free(v[i]);
}

/* ---------------------------------------------------------------- Softmax / LogSoftmax */

static rlx_status softmax_axis(const ir_node *n, const cpu_tensor *x, cpu_tensor *out,
                               void (*row_fn)(double *, int64_t)) {
  int64_t outer, len, inner;
  cpu_axis_split(x, (int)n->a.axis, &outer, &len, &inner);
  double *row = alloc_f64(len, n);
  if (!row) return RLX_ERR_NOMEM;
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t i = 0; i < inner; i++) {
      int64_t base = o * len * inner + i;
      for (int64_t j = 0; j < len; j++) row[j] = cpu_get(x, base + j * inner);
      row_fn(row, len);
      for (int64_t j = 0; j < len; j++) cpu_set(out, base + j * inner, row[j]);
    }
  }
  free(row);
  return RLX_OK;
}

rlx_status cpu_Softmax(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  (void)ctx;
  return softmax_axis(n, &in[0], &out[0], cpu_softmax_row);
}

rlx_status cpu_LogSoftmax(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in,
                          cpu_tensor *out) {
  (void)ctx;
  return softmax_axis(n, &in[0], &out[0], cpu_log_softmax_row);
}

/* ---------------------------------------------------------------- LayerNorm / RmsNorm */

static rlx_status last_axes_norm(const ir_node *n, const cpu_tensor *in, cpu_tensor *out,
                                 void (*row_fn)(double *, int64_t, const double *,
                                                const double *, double)) {
  int64_t row = 1;
  for (int i = (int)n->a.axis; i < in[0].rank; i++) row *= in[0].d[i];
  if (in[0].numel == 0) return RLX_OK;
  double *v[3];
  if (load_all(in, 3, v) != RLX_OK) return RLX_ERR_NOMEM;
  for (int64_t r = 0; r < in[0].numel / row; r++) row_fn(v[0] + r * row, row, v[1], v[2], n->a.eps);
  cpu_store_f64(&out[0], v[0]);
  free_all(v, 3);
  return RLX_OK;
}

rlx_status cpu_LayerNorm(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in,
                         cpu_tensor *out) {
  (void)ctx;
  return last_axes_norm(n, in, out, cpu_layer_norm_row);
}

rlx_status cpu_RmsNorm(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  (void)ctx;
  return last_axes_norm(n, in, out, cpu_rms_norm_row);
}

/* ---------------------------------------------------------------- GroupNorm / BatchNorm */

/* x is [N, C, spatial...]; the spatial size per channel. */
static int64_t spatial_size(const cpu_tensor *x) {
  int64_t s = 1;
  for (int i = 2; i < x->rank; i++) s *= x->d[i];
  return s;
}

rlx_status cpu_GroupNorm(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in,
                         cpu_tensor *out) {
  (void)ctx;
  const cpu_tensor *x = &in[0];
  if (x->numel == 0) return RLX_OK;
  int64_t batch = x->d[0], c = x->d[1], groups = n->a.groups, s = spatial_size(x);
  int64_t cpg = c / groups, span = cpg * s;  /* a group is contiguous in [N, C, S] */
  double *v[3];
  if (load_all(in, 3, v) != RLX_OK) return RLX_ERR_NOMEM;
  for (int64_t b = 0; b < batch; b++) {
    for (int64_t grp = 0; grp < groups; grp++) {
      double *p = v[0] + (b * groups + grp) * span, mean, var;
      cpu_moments(p, span, &mean, &var);
      double r = 1.0 / sqrt(var + n->a.eps);
      for (int64_t j = 0; j < span; j++) {
        int64_t ch = grp * cpg + j / s;
        p[j] = (p[j] - mean) * r * v[1][ch] + v[2][ch];
      }
    }
  }
  cpu_store_f64(&out[0], v[0]);
  free_all(v, 3);
  return RLX_OK;
}

rlx_status cpu_BatchNorm(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in,
                         cpu_tensor *out) {
  (void)ctx;
  const cpu_tensor *x = &in[0];
  if (x->numel == 0) return RLX_OK;
  int64_t c = x->d[1], s = spatial_size(x);
  double *v[5];  /* x, mean, var, gamma, beta */
  if (load_all(in, 5, v) != RLX_OK) return RLX_ERR_NOMEM;
  for (int64_t i = 0; i < x->numel; i++) {
    int64_t ch = (i / s) % c;
    v[0][i] = (v[0][i] - v[1][ch]) / sqrt(v[2][ch] + n->a.eps) * v[3][ch] + v[4][ch];
  }
  cpu_store_f64(&out[0], v[0]);
  free_all(v, 5);
  return RLX_OK;
}
