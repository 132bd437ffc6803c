/* k_quant.c — DequantMatMul, Quantize, Dequantize, FakeQuantize. The block
 * formats themselves live in quant_blocks.c; these kernels walk rows. */
#include "cpu.h"
#include "quant_blocks.h"

#include <math.h>
#include <stdlib.h>

/* Product of all dims but the last: the number of rows of a [..., K] tensor. */
static int64_t outer_rows(const cpu_tensor *t) {
  int64_t r = 1;
  for (int i = 0; i + 1 < t->rank; i++) r *= t->d[i];
  return r;
}

static rlx_status nomem(const ir_node *n) {
  return rlx_set_error(RLX_ERR_NOMEM, "%s (node %d): out of memory", ir_ops[n->op].name, n->id);
}

/* Row r of a float tensor [rows, K] as F32: the data itself for F32, else
 * converted into buf. */
static const float *f32_row(const cpu_tensor *t, int64_t r, int64_t K, float *buf) {
  if (t->dtype == RLX_F32) return (const float *)t->data + r * K;
  for (int64_t k = 0; k < K; k++) buf[k] = (float)cpu_get(t, r * K + k);
  return buf;
}

/* x [M, K] @ dequant(w [N, K])^T, one dequantized row of w at a time (the
 * weight is never expanded whole), accumulated in double. */
rlx_status cpu_DequantMatMul(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in,
                             cpu_tensor *out) {
  (void)ctx;
  const cpu_tensor *x = &in[0], *w = &in[1];
  const int64_t N = w->d[0], K = w->d[1], M = outer_rows(x);
  if (out->numel == 0) return RLX_OK;
  const size_t row_bytes = rlx_dtype_nbytes(w->dtype, K);
  rlx_status st = RLX_OK;
  double *xv = cpu_load_f64(x), *acc = malloc((size_t)out->numel * sizeof *acc);
  float *wrow = malloc((size_t)(K ? K : 1) * sizeof *wrow);
  if (!xv || !acc || !wrow) {
    st = nomem(n);
    goto done;
  }
  for (int64_t j = 0; j < N; j++) {
    const uint8_t *wr = (const uint8_t *)w->data + (size_t)j * row_bytes;
    if (quant_dequantize_row(w->dtype, wr, wrow, K)) {
      st = rlx_set_error(RLX_ERR_INTERNAL, "DequantMatMul (node %d): cannot decode %s rows of %lld",
                         n->id, rlx_dtype_name(w->dtype), (long long)K);
      goto done;
    }
    for (int64_t i = 0; i < M; i++) {
      const double *xr = xv + i * K;
      double s = 0.0;
      for (int64_t k = 0; k < K; k++) s += xr[k] * wrow[k];
      acc[i * N + j] = s;
    }
  }
  cpu_store_f64(out, acc);
done:
  free(xv);
  free(acc);
  free(wrow);
  return st;
}

/* Quantize / Dequantize: rows of the last dim, each a whole number of blocks. */
rlx_status cpu_Quantize(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  (void)ctx;
  const cpu_tensor *x = &in[0];
  const int64_t K = x->rank ? x->d[x->rank - 1] : 1;
  if (x->numel == 0) return RLX_OK;
  const int64_t rows = x->numel / K;
  const size_t row_bytes = rlx_dtype_nbytes(out->dtype, K);
  float *buf = malloc((size_t)K * sizeof *buf);
  if (!buf) return nomem(n);
  rlx_status st = RLX_OK;
  for (int64_t r = 0; r < rows && st == RLX_OK; r++)
    if (quant_quantize_row(out->dtype, f32_row(x, r, K, buf),
                           (uint8_t *)out->data + (size_t)r * row_bytes, K))
      st = rlx_set_error(RLX_ERR_INTERNAL, "Quantize (node %d): cannot encode %s rows of %lld",
                         n->id, rlx_dtype_name(out->dtype), (long long)K);
  free(buf);
  return st;
}

rlx_status cpu_Dequantize(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  (void)ctx;
  const cpu_tensor *x = &in[0];
  const int64_t K = x->rank ? x->d[x->rank - 1] : 1;
  if (x->numel == 0) return RLX_OK;
  const int64_t rows = x->numel / K;
  const size_t row_bytes = rlx_dtype_nbytes(x->dtype, K);
  for (int64_t r = 0; r < rows; r++)
    if (quant_dequantize_row(x->dtype, (const uint8_t *)x->data + (size_t)r * row_bytes,
                             (float *)out->data + r * K, K))
      return rlx_set_error(RLX_ERR_INTERNAL, "Dequantize (node %d): cannot decode %s rows of %lld",
                           n->id, rlx_dtype_name(x->dtype), (long long)K);
  return RLX_OK;
}

/* ---------------------------------------------------------------- FakeQuantize */

static int one_element(const cpu_tensor *t) {
  return t->rank == 0 || (t->rank == 1 && t->d[0] == 1);
}

/* Zero point c as an integer-valued double: integers exactly, floats
 * rounded to nearest (ties to even). */
static double zero_point_at(const cpu_tensor *z, int64_t c) {
  if (z->dtype == RLX_I32 || z->dtype == RLX_I64) return (double)cpu_get_i(z, c);
  return nearbyint(cpu_get(z, c));
}

/* Semantics: ir_infer_FakeQuantize. Computed in double for every dtype. */
rlx_status cpu_FakeQuantize(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in,
                            cpu_tensor *out) {
  (void)ctx;
  const cpu_tensor *x = &in[0], *scale = &in[1], *zp = &in[2];
  const int bits = (int)n->a.bits;
  const double qmin = n->a.symmetric ? -ldexp(1.0, bits - 1) : 0.0;
  const double qmax = n->a.symmetric ? ldexp(1.0, bits - 1) - 1.0 : ldexp(1.0, bits) - 1.0;
  const int per_tensor = one_element(scale) && one_element(zp);
  int64_t outer = 1, len = 1, inner = 1;
  if (!per_tensor) cpu_axis_split(x, (int)n->a.axis, &outer, &len, &inner);
  for (int64_t i = 0; i < x->numel; i++) {
    const int64_t c = per_tensor ? 0 : (i / inner) % len;
    const double s = cpu_get(scale, c), z = n->a.symmetric ? 0.0 : zero_point_at(zp, c);
    double q = nearbyint(cpu_get(x, i) / s) + z;
    /* comparisons, not fmin/fmax, so a NaN stays NaN */
    q = q < qmin ? qmin : q > qmax ? qmax : q;
    cpu_set(out, i, (q - z) * s);
  }
  return RLX_OK;
}
