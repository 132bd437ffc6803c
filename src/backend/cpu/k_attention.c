/* k_attention.c — Attention and Rope, computed in double. */
#include "cpu.h"
#include "linalg_rows.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- Attention */

void cpu_attention_params_from_attrs(cpu_attention_params *p, const ir_attrs *a) {
  memset(p, 0, sizeof *p);
  p->num_heads = a->num_heads;
  p->num_kv_heads = a->num_kv_heads;
  p->head_dim = a->head_dim;
  p->mask_kind = (rlx_mask_kind)a->mask;
  p->window = a->window;
  p->score_scale = a->score_scale;
  p->softcap = a->softcap;
}

/* Element offset of row (b, h, s) of a [B, S, H, D] or [B, H, S, D] tensor. */
static int64_t head_row(const cpu_attention_params *p, int64_t heads, int64_t len, int64_t b,
                        int64_t h, int64_t s) {
  int64_t row = p->bhsd ? (b * heads + h) * len + s : (b * len + s) * heads + h;
  return row * p->head_dim;
}

/* Whether query i may see key j under a causal or sliding-window mask:
 * bottom-right aligned, so the last query sees the last key. */
static int key_visible(const cpu_attention_params *p, int64_t i, int64_t j) {
  int64_t last = i + (p->kv_len - p->q_len);
  switch (p->mask_kind) {
  case RLX_MASK_CAUSAL: return j <= last;
  case RLX_MASK_SLIDING_WINDOW: return j <= last && j > last - p->window;
  default: return 1;
  }
}

rlx_status cpu_attention_f64(const cpu_attention_params *p, const double *q, const double *k,
                             const double *v, double *out) {
  const int64_t S = p->q_len, T = p->kv_len, D = p->head_dim;
  const int64_t group = p->num_heads / p->num_kv_heads;
  const double scale = p->score_scale > 0 ? p->score_scale : 1.0 / sqrt((double)D);
  double *scores = malloc((size_t)(T > 0 ? T : 1) * sizeof(double));
  if (!scores) return rlx_set_error(RLX_ERR_NOMEM, "Attention: out of memory");
  for (int64_t b = 0; b < p->batch; b++) {
    for (int64_t h = 0; h < p->num_heads; h++) {
      const int64_t hk = h / group;
      for (int64_t i = 0; i < S; i++) {
        const double *qrow = q + head_row(p, p->num_heads, S, b, h, i);
        double *orow = out + head_row(p, p->num_heads, S, b, h, i);
        double mx = -INFINITY;
        for (int64_t j = 0; j < T; j++) {
          if (!key_visible(p, i, j)) {
            scores[j] = -INFINITY;
            continue;
          }
          const double *krow = k + head_row(p, p->num_kv_heads, T, b, hk, j);
          double s = 0.0;
          for (int64_t d = 0; d < D; d++) s += qrow[d] * krow[d];
          s *= scale;
          if (p->softcap > 0) s = p->softcap * tanh(s / p->softcap);
          if (p->mask_kind == RLX_MASK_CUSTOM)
            s += p->mask[b * p->mask_strides[0] + h * p->mask_strides[1] +
                         i * p->mask_strides[2] + j * p->mask_strides[3]];
          scores[j] = s;
          if (s > mx || isnan(s)) mx = s; /* a NaN score poisons the row, as in softmax */
        }
        for (int64_t d = 0; d < D; d++) orow[d] = 0.0;
        if (mx == -INFINITY) continue; /* every key masked: zeros, not 0/0 */
        double sum = 0.0;
        for (int64_t j = 0; j < T; j++) {
          scores[j] = exp(scores[j] - mx);
          sum += scores[j];
        }
        for (int64_t j = 0; j < T; j++) {
          if (scores[j] == 0.0) continue;
          const double w = scores[j] / sum;
          const double *vrow = v + head_row(p, p->num_kv_heads, T, b, hk, j);
          for (int64_t d = 0; d < D; d++) orow[d] += w * vrow[d];
        }
      }
    }
  }
  free(scores);
  return RLX_OK;
}

rlx_status cpu_Attention(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  (void)ctx;
  const cpu_tensor *tq = &in[0], *tk = &in[1], *tv = &in[2];
  cpu_attention_params p;
  cpu_attention_params_from_attrs(&p, &n->a);
  p.bhsd = tq->rank == 4 && n->a.layout == RLX_LAYOUT_BHSD;
  int seq_axis = p.bhsd ? 2 : 1;
  p.batch = tq->d[0];
  p.q_len = tq->d[seq_axis];
  p.kv_len = tk->d[seq_axis];
  if (out->numel == 0) return RLX_OK;

  rlx_status st = RLX_OK;
  double *q = cpu_load_f64(tq), *k = cpu_load_f64(tk), *v = cpu_load_f64(tv);
  double *mask = NULL, *o = malloc((size_t)out->numel * sizeof(double));
  if (p.mask_kind == RLX_MASK_CUSTOM) {
    const int64_t full[4] = {p.batch, p.num_heads, p.q_len, p.kv_len};
    cpu_bcast_strides(&in[3], 4, full, p.mask_strides);
    mask = cpu_load_f64(&in[3]);
    p.mask = mask;
  }
  if (!q || !k || !v || !o || (p.mask_kind == RLX_MASK_CUSTOM && !mask)) {
    st = rlx_set_error(RLX_ERR_NOMEM, "Attention (node %d): out of memory", n->id);
    goto done;
  }
  st = cpu_attention_f64(&p, q, k, v, o);
  if (st == RLX_OK) cpu_store_f64(out, o);
done:
  free(q);
  free(k);
  free(v);
  free(mask);
  free(o);
  return st;
}

/* ---------------------------------------------------------------- Rope */

void cpu_rope_apply_f64(double *x, int64_t batch, int64_t seq, int64_t heads, int64_t head_dim,
                        int64_t n_rot, rlx_rope_mode mode, const double *cos, const double *sin,
                        int64_t table_batch_stride) {
  const int64_t half = n_rot / 2;
  for (int64_t b = 0; b < batch; b++) {
    for (int64_t s = 0; s < seq; s++) {
      const double *c = cos + b * table_batch_stride + s * half;
      const double *sn = sin + b * table_batch_stride + s * half;
      for (int64_t h = 0; h < heads; h++) {
        double *head = x + ((b * seq + s) * heads + h) * head_dim;
        for (int64_t i = 0; i < half; i++) {
          /* normal rotates adjacent pairs, neox the two halves of [0, n_rot) */
          int64_t i0 = mode == RLX_ROPE_NEOX ? i : 2 * i;
          int64_t i1 = mode == RLX_ROPE_NEOX ? i + half : 2 * i + 1;
          double x0 = head[i0], x1 = head[i1];
          head[i0] = x0 * c[i] - x1 * sn[i];
          head[i1] = x0 * sn[i] + x1 * c[i];
        }
      }
    }
  }
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

rlx_status cpu_Rope(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  (void)ctx;
  const cpu_tensor *tx = &in[0];
  const int64_t D = n->a.head_dim, n_rot = n->a.n_rot, half = n_rot / 2;
  const int64_t B = tx->d[0], S = tx->d[1];
  const int64_t H = tx->rank == 4 ? tx->d[2] : tx->d[2] / D;
  if (out->numel == 0) return RLX_OK;

  rlx_status st = RLX_OK;
  double *x = cpu_load_f64(tx), *cos_t = NULL, *sin_t = NULL;
  int64_t table_batch_stride;
  if (n->n_in == 3) {
    /* [S, n_rot/2] is shared by every batch; [B, S, n_rot/2] is not */
    table_batch_stride = in[1].rank == 3 ? S * half : 0;
    cos_t = cpu_load_f64(&in[1]);
    sin_t = cpu_load_f64(&in[2]);
  } else {
    table_batch_stride = in[1].rank == 2 ? S * half : 0;
    size_t bytes = (size_t)in[1].numel * (size_t)half * sizeof(double);
    cos_t = malloc(bytes);
    sin_t = malloc(bytes);
    if (cos_t && sin_t) rope_tables(&in[1], n_rot, n->a.base, n->a.scale, cos_t, sin_t);
  }
  if (!x || !cos_t || !sin_t) {
    st = rlx_set_error(RLX_ERR_NOMEM, "Rope (node %d): out of memory", n->id);
    goto done;
  }
  cpu_rope_apply_f64(x, B, S, H, D, n_rot, (rlx_rope_mode)n->a.rope_mode, cos_t, sin_t,
                     table_batch_stride);
  cpu_store_f64(out, x);
done:
  free(x);
  free(cos_t);
  free(sin_t);
  return st;
}
