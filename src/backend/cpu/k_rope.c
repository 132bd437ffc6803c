/* k_rope.c — Rope: rotary position embeddings, from positions (tables
 * computed in double) or from precomputed cos/sin tables. */
#include "cpu.h"
#include "vec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- Rope */

/* The rotation, one body for double and float buffers. */
#define ROPE_APPLY(T)                                                                         \
  const int64_t half = n_rot / 2;                                                             \
  for (int64_t b = 0; b < batch; b++) {                                                       \
    for (int64_t s = 0; s < seq; s++) {                                                       \
      const T *c = cos + b * table_batch_stride + s * half;                                   \
      const T *sn = sin + b * table_batch_stride + s * half;                                  \
      for (int64_t h = 0; h < heads; h++) {                                                   \
        T *head = x + ((b * seq + s) * heads + h) * head_dim;                                 \
        for (int64_t i = 0; i < half; i++) {                                                  \
          /* normal rotates adjacent pairs, neox the two halves of [0, n_rot) */              \
          int64_t i0 = mode == RLX_ROPE_NEOX ? i : 2 * i;                                     \
          int64_t i1 = mode == RLX_ROPE_NEOX ? i + half : 2 * i + 1;                          \
          T x0 = head[i0], x1 = head[i1];                                                     \
          head[i0] = x0 * c[i] - x1 * sn[i];                                                  \
          head[i1] = x0 * sn[i] + x1 * c[i];                                                  \
        }                                                                                     \
      }                                                                                       \
    }                                                                                         \
  }

void cpu_rope_apply_f64(double *x, int64_t batch, int64_t seq, int64_t heads, int64_t head_dim,
                        int64_t n_rot, rlx_rope_mode mode, const double *cos, const double *sin,
                        int64_t table_batch_stride) {
  ROPE_APPLY(double)
}

void cpu_rope_apply_f32(float *x, int64_t batch, int64_t seq, int64_t heads, int64_t head_dim,
                        int64_t n_rot, rlx_rope_mode mode, const float *cos, const float *sin,
                        int64_t table_batch_stride) {
  ROPE_APPLY(float)
}

/* cos/sin tables [rows, n_rot/2] from the positions of pos (rows = numel):
 * theta_i = pos * base^(-2i/n_rot) / scale. */
static void rope_tables(const cpu_tensor *pos, int64_t n_rot, double base, double scale,
                        double *cos_t, double *sin_t) {
  const int64_t half = n_rot / 2;
  for (int64_t r = 0; r < pos->numel; r++) {
    double p = (double)cpu_get_i(pos, r);
    for (int64_t i = 0; i < half; i++) {
      double theta = p * pow(base, -2.0 * (double)i / (double)n_rot) / scale;
      cos_t[r * half + i] = cos(theta);
      sin_t[r * half + i] = sin(theta);
    }
  }
}

/* Whether a cos/sin table converts to f32 exactly (vec.h's load). */
static int f32_table(const cpu_tensor *t) {
  return t->dtype == RLX_F32 || t->dtype == RLX_F16 || t->dtype == RLX_BF16;
}

/* Rope on F32/F16/BF16: x rotated in f32 (in out itself for F32) with the
 * double tables rounded to f32 once, or (cos_t NULL) the f32, f16 or bf16
 * tables tc and ts converted to f32: the same values, without the detour
 * through double element by element. */
static void rope_f32(const ir_node *n, const cpu_tensor *tx, cpu_tensor *out, float *x, float *cos_f,
                     float *sin_f, const double *cos_t, const double *sin_t, const cpu_tensor *tc,
                     const cpu_tensor *ts, int64_t table_n, int64_t table_batch_stride) {
  const int64_t D = n->a.head_dim, B = tx->d[0], S = tx->d[1];
  const int64_t H = tx->rank == 4 ? tx->d[2] : tx->d[2] / D;
  const cpu_vec_ops *vo = cpu_vec();
  if (!cos_t) {
    vo->load(cos_f, tc->data, tc->dtype, table_n);
    vo->load(sin_f, ts->data, ts->dtype, table_n);
  }
  for (int64_t i = 0; cos_t && i < table_n; i++) {
    cos_f[i] = (float)cos_t[i];
    sin_f[i] = (float)sin_t[i];
  }
  vo->load(x, tx->data, tx->dtype, tx->numel);
  cpu_rope_apply_f32(x, B, S, H, D, n->a.n_rot, (rlx_rope_mode)n->a.rope_mode, cos_f, sin_f,
                     table_batch_stride);
  vo->store(out->data, out->dtype, x, out->numel);
}

rlx_status cpu_Rope(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  (void)ctx;
  const cpu_tensor *tx = &in[0];
  const int64_t D = n->a.head_dim, n_rot = n->a.n_rot, half = n_rot / 2;
  const int64_t B = tx->d[0], S = tx->d[1];
  const int64_t H = tx->rank == 4 ? tx->d[2] : tx->d[2] / D;
  if (out->numel == 0) return RLX_OK;

  rlx_status st = RLX_OK;
  const int fast = tx->dtype != RLX_F64;
  double *x = NULL, *cos_t = NULL, *sin_t = NULL;
  int64_t table_batch_stride, table_n;
  const int tables_f32 = fast && n->n_in == 3 && f32_table(&in[1]) && f32_table(&in[2]);
  if (n->n_in == 3) {
    /* [S, n_rot/2] is shared by every batch; [B, S, n_rot/2] is not */
    table_batch_stride = in[1].rank == 3 ? S * half : 0;
    table_n = in[1].numel;
    if (!tables_f32) {
      cos_t = cpu_load_f64(&in[1]);
      sin_t = cpu_load_f64(&in[2]);
    }
  } else {
    table_batch_stride = in[1].rank == 2 ? S * half : 0;
    table_n = in[1].numel * half;
    size_t bytes = (size_t)(table_n ? table_n : 1) * sizeof(double);
    cos_t = malloc(bytes);
    sin_t = malloc(bytes);
    if (cos_t && sin_t) rope_tables(&in[1], n_rot, n->a.base, n->a.scale, cos_t, sin_t);
  }
  /* f32 path: x (unless out is F32), then the f32 tables */
  float *xf = NULL;
  if (fast) {
    size_t floats = (size_t)(2 * table_n) + (out->dtype == RLX_F32 ? 0 : (size_t)out->numel);
    xf = malloc((floats ? floats : 1) * sizeof *xf);
  } else {
    x = cpu_load_f64(tx);
  }
  if (!(fast ? (void *)xf : (void *)x) || (!tables_f32 && (!cos_t || !sin_t))) {
    st = rlx_set_error(RLX_ERR_NOMEM, "Rope (node %d): out of memory", n->id);
    goto done;
  }
  if (fast) {
    float *xbuf = out->dtype == RLX_F32 ? out->data : xf + 2 * table_n;
    rope_f32(n, tx, out, xbuf, xf, xf + table_n, cos_t, sin_t, &in[1], &in[2], table_n, table_batch_stride);
  } else {
    cpu_rope_apply_f64(x, B, S, H, D, n_rot, (rlx_rope_mode)n->a.rope_mode, cos_t, sin_t,
                       table_batch_stride);
    cpu_store_f64(out, x);
  }
done:
  free(x);
  free(xf);
  free(cos_t);
  free(sin_t);
  return st;
}
