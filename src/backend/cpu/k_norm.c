/* k_norm.c — CPU kernels: Softmax, LogSoftmax, LayerNorm, RmsNorm,
 * GroupNorm, BatchNorm.
 *
 * F64 (and GroupNorm / BatchNorm in every dtype) is computed in double by
 * the reference row routines. Softmax, LogSoftmax, LayerNorm and RmsNorm on
 * F32/F16/BF16 run vectorized (vec.h) in f32 with sums in double, threaded
 * over rows. */
#include "cpu.h"
#include "norm_rows.h"
#include "vec.h"

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

/* ---------------------------------------------------------------- f32 rows */

void cpu_layer_norm_row_f32(const float *x, float *y, int64_t n, const float *gamma,
                            const float *beta, double eps) {
  const cpu_vec_ops *vo = cpu_vec();
  double mean = vo->sum(x, n) / (double)n;
  double var = vo->sum_sq_dev(x, (float)mean, n) / (double)n;
  vo->norm_affine(x, (float)mean, (float)(1.0 / sqrt(var + eps)), gamma, beta, y, n);
}

void cpu_rms_norm_row_f32(const float *x, float *y, int64_t n, const float *gamma,
                          const float *beta, double eps) {
  const cpu_vec_ops *vo = cpu_vec();
  double ms = vo->sum_sq_dev(x, 0.0f, n) / (double)n;
  vo->norm_affine(x, 0.0f, (float)(1.0 / sqrt(ms + eps)), gamma, beta, y, n);
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

/* Softmax over an axis of an F32/F16/BF16 tensor seen as [outer, len,
 * inner]. inner == 1: items are rows of len; inner > 1: items are blocks of
 * SOFTMAX_COLS columns of one [len, inner] slab, reduced across its rows. */
#define SOFTMAX_COLS 64

typedef struct {
  const cpu_vec_ops *vo;
  const cpu_tensor *x;
  cpu_tensor *out;
  int want_log;
  int64_t len, inner, col_blocks;
  float *scratch; /* per thread: scratch_floats */
  int64_t scratch_floats;
} softmax_job;

/* y = softmax(x) or log_softmax(x) of one row (y may be x); tmp: len
 * floats (log only). The formulas of the double reference (max-subtracted;
 * an all -inf row gives NaN as there, a NaN makes the row NaN). */
static void softmax_row_f32(const cpu_vec_ops *vo, const float *x, float *y, float *tmp, int64_t len,
                            int want_log) {
  float m = vo->max(x, len);
  if (!want_log) {
    double s = vo->exp_shift_sum(x, m, y, len);
    vo->scale(y, (float)(1.0 / s), len);
    return;
  }
  double s = vo->exp_shift_sum(x, m, tmp, len);
  float lse_rest = (float)log(s);
  vo->binary(RLX_BIN_SUB, x, 1, &m, 0, y, len); /* x - m first: exact near the max */
  vo->binary(RLX_BIN_SUB, y, 1, &lse_rest, 0, y, len);
}

/* Rows of an F32 tensor are read and written in place; F16/BF16 rows go
 * through the f32 row buffer. */
static void softmax_rows(void *arg, int64_t begin, int64_t end, int thread) {
  softmax_job *J = arg;
  const int64_t len = J->len;
  const rlx_dtype dt = J->x->dtype;
  const size_t es = (size_t)ir_dtypes[dt].size;
  float *row = J->scratch + thread * J->scratch_floats, *tmp = row + len;
  for (int64_t r = begin; r < end; r++) {
    const void *src = (const char *)J->x->data + (size_t)(r * len) * es;
    void *dst = (char *)J->out->data + (size_t)(r * len) * es;
    if (dt == RLX_F32) {
      softmax_row_f32(J->vo, src, dst, tmp, len, J->want_log);
    } else {
      J->vo->load(row, src, dt, len);
      softmax_row_f32(J->vo, row, row, tmp, len, J->want_log);
      J->vo->store(dst, dt, row, len);
    }
  }
}

static void softmax_cols(void *arg, int64_t begin, int64_t end, int thread) {
  softmax_job *J = arg;
  const cpu_vec_ops *vo = J->vo;
  const int64_t len = J->len, inner = J->inner;
  const size_t es = (size_t)ir_dtypes[J->x->dtype].size;
  float *slab = J->scratch + thread * J->scratch_floats; /* [len, SOFTMAX_COLS] */
  float *mx = slab + len * SOFTMAX_COLS, *shift = mx + SOFTMAX_COLS;
  double *sum = (double *)(void *)(shift + SOFTMAX_COLS);
  for (int64_t item = begin; item < end; item++) {
    int64_t o = item / J->col_blocks, c0 = item % J->col_blocks * SOFTMAX_COLS;
    int64_t w = inner - c0 < SOFTMAX_COLS ? inner - c0 : SOFTMAX_COLS;
    for (int64_t c = 0; c < w; c++) mx[c] = -INFINITY, sum[c] = 0.0;
    for (int64_t j = 0; j < len; j++) {
      float *row = slab + j * SOFTMAX_COLS;
      vo->load(row, (const char *)J->x->data + (size_t)((o * len + j) * inner + c0) * es, J->x->dtype, w);
      vo->acc_max(mx, row, w);
    }
    for (int64_t j = 0; j < len; j++) {
      float *row = slab + j * SOFTMAX_COLS;
      vo->binary(RLX_BIN_SUB, row, 1, mx, 1, row, w); /* x - max */
      vo->act(RLX_ACT_EXP, 0.0f, row, J->want_log ? shift : row, w);
      vo->acc_sum(sum, J->want_log ? shift : row, w);
    }
    for (int64_t c = 0; c < w; c++) shift[c] = J->want_log ? (float)log(sum[c]) : (float)(1.0 / sum[c]);
    for (int64_t j = 0; j < len; j++) {
      float *row = slab + j * SOFTMAX_COLS;
      vo->binary(J->want_log ? RLX_BIN_SUB : RLX_BIN_MUL, row, 1, shift, 1, row, w);
      vo->store((char *)J->out->data + (size_t)((o * len + j) * inner + c0) * es, J->out->dtype, row, w);
    }
  }
}

static rlx_status softmax_fast(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *x, cpu_tensor *out,
                               int want_log) {
  softmax_job J = {.vo = cpu_vec(), .x = x, .out = out, .want_log = want_log};
  int64_t outer;
  cpu_axis_split(x, (int)n->a.axis, &outer, &J.len, &J.inner);
  if (x->numel == 0) return RLX_OK;
  int threads = cpu_ctx_threads(ctx);
  J.col_blocks = (J.inner + SOFTMAX_COLS - 1) / SOFTMAX_COLS;
  /* rows: the row and the log path's exp; columns: the slab, max, shift, sum (double) */
  J.scratch_floats = J.inner == 1 ? 2 * J.len : (J.len + 4) * SOFTMAX_COLS;
  J.scratch_floats = (J.scratch_floats + 15) / 16 * 16;
  J.scratch = malloc((size_t)(J.scratch_floats * threads) * sizeof(float));
  if (!J.scratch)
    return rlx_set_error(RLX_ERR_NOMEM, "%s (node %d): no memory for scratch", ir_ops[n->op].name, n->id);
  if (J.inner == 1) cpu_parallel_for(ctx, outer, cpu_vec_grain(J.len), softmax_rows, &J);
  else cpu_parallel_for(ctx, outer * J.col_blocks, cpu_vec_grain(J.len * SOFTMAX_COLS), softmax_cols, &J);
  free(J.scratch);
  return RLX_OK;
}

rlx_status cpu_Softmax(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  if (in[0].dtype != RLX_F64) return softmax_fast(ctx, n, &in[0], &out[0], 0);
  return softmax_axis(n, &in[0], &out[0], cpu_softmax_row);
}

rlx_status cpu_LogSoftmax(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in,
                          cpu_tensor *out) {
  if (in[0].dtype != RLX_F64) return softmax_fast(ctx, n, &in[0], &out[0], 1);
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

typedef struct {
  const cpu_vec_ops *vo;
  const cpu_tensor *x;
  cpu_tensor *out;
  int64_t len;
  const float *gamma, *beta;
  double eps;
  int rms;
  float *scratch; /* per thread: len floats */
} norm_job;

static void norm_rows(void *arg, int64_t begin, int64_t end, int thread) {
  norm_job *J = arg;
  const rlx_dtype dt = J->x->dtype;
  const size_t es = (size_t)ir_dtypes[dt].size;
  float *row = J->scratch + thread * J->len;
  for (int64_t r = begin; r < end; r++) {
    const void *src = (const char *)J->x->data + (size_t)(r * J->len) * es;
    void *dst = (char *)J->out->data + (size_t)(r * J->len) * es;
    const float *x = src;
    float *y = dt == RLX_F32 ? dst : row;
    if (dt != RLX_F32) {
      J->vo->load(row, src, dt, J->len);
      x = row;
    }
    if (J->rms) cpu_rms_norm_row_f32(x, y, J->len, J->gamma, J->beta, J->eps);
    else cpu_layer_norm_row_f32(x, y, J->len, J->gamma, J->beta, J->eps);
    if (dt != RLX_F32) J->vo->store(dst, dt, row, J->len);
  }
}

/* LayerNorm / RmsNorm of F32/F16/BF16: gamma and beta converted once, rows
 * in parallel. */
static rlx_status last_axes_norm_fast(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in,
                                      cpu_tensor *out, int rms) {
  norm_job J = {.vo = cpu_vec(), .x = &in[0], .out = out, .len = 1, .eps = n->a.eps, .rms = rms};
  for (int i = (int)n->a.axis; i < in[0].rank; i++) J.len *= in[0].d[i];
  if (in[0].numel == 0) return RLX_OK;
  int threads = cpu_ctx_threads(ctx);
  float *buf = malloc((size_t)(J.len * (2 + threads)) * sizeof(float));
  if (!buf) return rlx_set_error(RLX_ERR_NOMEM, "%s (node %d): no memory for scratch", ir_ops[n->op].name, n->id);
  J.vo->load(buf, in[1].data, in[1].dtype, J.len);
  J.vo->load(buf + J.len, in[2].data, in[2].dtype, J.len);
  J.gamma = buf;
  J.beta = buf + J.len;
  J.scratch = buf + 2 * J.len;
  cpu_parallel_for(ctx, in[0].numel / J.len, cpu_vec_grain(J.len), norm_rows, &J);
  free(buf);
  return RLX_OK;
}

rlx_status cpu_LayerNorm(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in,
                         cpu_tensor *out) {
  if (in[0].dtype != RLX_F64) return last_axes_norm_fast(ctx, n, in, out, 0);
  return last_axes_norm(n, in, out, cpu_layer_norm_row);
}

rlx_status cpu_RmsNorm(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  if (in[0].dtype != RLX_F64) return last_axes_norm_fast(ctx, n, in, out, 1);
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
