/* vec_portable.c — the portable table of vec.h (plain C; the compiler may
 * vectorize it for the baseline ISA), and the choice between the tables.
 *
 * Transcendental functions go through the double-precision reference math
 * (elementwise_math.h), so this table is as accurate as the reference
 * kernels; the arithmetic that is exactly rounded in f32 (+ - * /, sqrt)
 * stays in f32.
 */
#include "vec.h"
#include "cpu_features.h"
#include "elementwise_math.h"
#include "quant_blocks.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

static void p_load(float *dst, const void *src, rlx_dtype t, int64_t n) {
  const uint16_t *h = src;
  switch (t) {
  case RLX_Q8_0:
  case RLX_Q4_0: quant_dequantize_row(t, src, dst, n); break;
  case RLX_F16: for (int64_t i = 0; i < n; i++) dst[i] = ir_f16_to_f32(h[i]); break;
  case RLX_BF16: for (int64_t i = 0; i < n; i++) dst[i] = ir_bf16_to_f32(h[i]); break;
  default: memmove(dst, src, (size_t)n * sizeof(float)); break;
  }
}

static void p_store(void *dst, rlx_dtype t, const float *src, int64_t n) {
  uint16_t *h = dst;
  switch (t) {
  case RLX_F16: for (int64_t i = 0; i < n; i++) h[i] = ir_f32_to_f16(src[i]); break;
  case RLX_BF16: for (int64_t i = 0; i < n; i++) h[i] = ir_f32_to_bf16(src[i]); break;
  default: memmove(dst, src, (size_t)n * sizeof(float)); break;
  }
}

static void p_round(float *x, rlx_dtype t, int64_t n) {
  switch (t) {
  case RLX_F16: for (int64_t i = 0; i < n; i++) x[i] = ir_f16_to_f32(ir_f32_to_f16(x[i])); break;
  case RLX_BF16: for (int64_t i = 0; i < n; i++) x[i] = ir_bf16_to_f32(ir_f32_to_bf16(x[i])); break;
  default: break;
  }
}

static void p_act(rlx_act act, float alpha, const float *x, float *y, int64_t n) {
  switch (act) {
  case RLX_ACT_NEG: for (int64_t i = 0; i < n; i++) y[i] = -x[i]; break;
  case RLX_ACT_SQUARE: for (int64_t i = 0; i < n; i++) y[i] = x[i] * x[i]; break;
  case RLX_ACT_RELU: for (int64_t i = 0; i < n; i++) y[i] = x[i] < 0 ? 0.0f : x[i]; break;
  case RLX_ACT_SQRT: for (int64_t i = 0; i < n; i++) y[i] = sqrtf(x[i]); break;
  default:
    for (int64_t i = 0; i < n; i++) y[i] = (float)cpu_act_apply(act, x[i], alpha);
    break;
  }
}

static void p_binary(rlx_binop op, const float *a, int sa, const float *b, int sb, float *y, int64_t n) {
  switch (op) {
  case RLX_BIN_ADD: for (int64_t i = 0; i < n; i++) y[i] = a[i * sa] + b[i * sb]; break;
  case RLX_BIN_SUB: for (int64_t i = 0; i < n; i++) y[i] = a[i * sa] - b[i * sb]; break;
  case RLX_BIN_MUL: for (int64_t i = 0; i < n; i++) y[i] = a[i * sa] * b[i * sb]; break;
  case RLX_BIN_DIV: for (int64_t i = 0; i < n; i++) y[i] = a[i * sa] / b[i * sb]; break;
  default:
    for (int64_t i = 0; i < n; i++) y[i] = (float)cpu_binop_apply_f(op, a[i * sa], b[i * sb]);
    break;
  }
}

static void p_compare(rlx_cmpop op, const float *a, int sa, const float *b, int sb, float *y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = (float)cpu_cmp_apply(op, a[i * sa], b[i * sb]);
}

static void p_scale(float *y, float s, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] *= s;
}

static double p_sum(const float *x, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; i++) s += x[i];
  return s;
}

static double p_sum_sq_dev(const float *x, float c, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; i++) {
    float d = x[i] - c;
    s += (double)d * d;
  }
  return s;
}

static float p_max(const float *x, int64_t n) {
  float m = -INFINITY;
  for (int64_t i = 0; i < n; i++) {
    if (isnan(x[i])) return x[i];
    if (x[i] > m) m = x[i];
  }
  return m;
}

static float p_min(const float *x, int64_t n) {
  float m = INFINITY;
  for (int64_t i = 0; i < n; i++) {
    if (isnan(x[i])) return x[i];
    if (x[i] < m) m = x[i];
  }
  return m;
}

static double p_exp_shift_sum(const float *x, float c, float *y, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; i++) {
    y[i] = (float)exp((double)(x[i] - c));
    s += y[i];
  }
  return s;
}

static void p_norm_affine(const float *x, float shift, float scale, const float *gamma,
                          const float *beta, float *y, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    float v = (x[i] - shift) * scale;
    if (gamma) v *= gamma[i];
    y[i] = beta ? v + beta[i] : v;
  }
}

static void p_acc_sum(double *acc, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) acc[i] += x[i];
}

static void p_acc_max(float *acc, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (isnan(x[i]) || x[i] > acc[i]) acc[i] = isnan(acc[i]) ? acc[i] : x[i];
}

static void p_acc_min(float *acc, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (isnan(x[i]) || x[i] < acc[i]) acc[i] = isnan(acc[i]) ? acc[i] : x[i];
}

static void p_qk_tile(const float *q, int64_t ldq, const float *kt, int64_t ldkt, float *s, int64_t lds,
                      int64_t rows, int64_t cols, int64_t depth) {
  for (int64_t r = 0; r < rows; r++) {
    float *srow = s + r * lds;
    for (int64_t c = 0; c < cols; c++) srow[c] = 0.0f;
    for (int64_t k = 0; k < depth; k++) {
      float qv = q[r * ldq + k];
      const float *krow = kt + k * ldkt;
      for (int64_t c = 0; c < cols; c++) srow[c] += qv * krow[c];
    }
  }
}

static void p_pv_tile(const float *p, int64_t ldp, const float *v, int64_t ldv, float *o, int64_t ldo,
                      int64_t rows, int64_t cols, int64_t d) {
  for (int64_t r = 0; r < rows; r++) {
    float *orow = o + r * ldo;
    for (int64_t c = 0; c < cols; c++) {
      float w = p[r * ldp + c];
      if (w == 0.0f) continue; /* masked keys */
      const float *vrow = v + c * ldv;
      for (int64_t j = 0; j < d; j++) orow[j] += w * vrow[j];
    }
  }
}

static void p_qk_rows(const float *q, int64_t ldq, const float *k, int64_t ldk, float *s, int64_t lds,
                      int64_t rows, int64_t cols, int64_t depth) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) {
      float acc = 0.0f;
      for (int64_t i = 0; i < depth; i++) acc += q[r * ldq + i] * k[c * ldk + i];
      s[r * lds + c] = acc;
    }
}

const cpu_vec_ops cpu_vec_portable = {
    "portable", p_load, p_store, p_round, p_act, p_binary, p_compare, p_scale,
    p_sum, p_sum_sq_dev, p_max, p_min, p_exp_shift_sum, p_norm_affine,
    p_acc_sum, p_acc_max, p_acc_min, p_qk_tile, p_pv_tile, p_qk_rows,
};

static const cpu_vec_ops *chosen;
static pthread_once_t chosen_once = PTHREAD_ONCE_INIT;

static void choose(void) {
  const cpu_features *f = cpu_get_features();
  if (f->avx512 && cpu_vec_avx512()) chosen = cpu_vec_avx512();
  else chosen = f->avx2_fma && f->f16c && cpu_vec_avx2 ? cpu_vec_avx2 : &cpu_vec_portable;
}

const cpu_vec_ops *cpu_vec(void) {
  pthread_once(&chosen_once, choose);
  return chosen;
}

int64_t cpu_vec_grain(int64_t item_elems) {
  if (item_elems < 1) item_elems = 1;
  int64_t g = CPU_VEC_MIN_CHUNK / item_elems;
  return g < 1 ? 1 : g;
}
