/* k_attention.c — Attention and Rope.
 *
 * F64 runs the double-precision reference (cpu_attention_f64); F32, F16 and
 * BF16 run the tiled kernel below (cpu_attention_fast), in f32 with the
 * storage dtype converted on the fly. */
#include "cpu.h"
#include "linalg_rows.h"
#include "vec.h"

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

/* ---------------------------------------------------------------- Attention, F32/F16/BF16
 *
 * Flash-attention style: a work item is (batch, kv head, block of queries)
 * and holds the query rows of every query head that reads that kv head
 * (GQA: they share K and V). It walks the keys in blocks of FLASH_BK:
 * scores of the block (a small GEMM against K transposed), the mask, and an
 * online softmax — a running max m and sum l per row, the output rows
 * rescaled by e^(m_old - m_new) when the max grows — so no score matrix
 * beyond rows x FLASH_BK exists. Key blocks that no query of the item may
 * see (causal / sliding window) are skipped. Accumulation is f32 (sums of
 * the softmax in double).
 *
 * Before the items, K of each (batch, kv head) is transposed once into f32
 * [D, T8] (T rounded up to 8, zero padded) and V converted to f32 when
 * stored as F16/BF16: O(T*D) memory, read by every query block. With at
 * most FLASH_DOT_ROWS rows per item (decode), the transpose would cost as
 * much as the attention: the scores are dot products with K's rows then,
 * read in place (F32) or converted to f32 rows.
 *
 * A custom mask's -inf entries count as masked keys too: each row's keys
 * outside the first..last finite entry of its mask row are skipped like
 * causally masked ones (a KV cache read over a padded key length: the
 * padding costs a scan of the mask row, not the scores).
 *
 * When there are fewer items than twice the threads (decode with few kv
 * heads), the keys of each item are split into ranges of whole key blocks
 * (flash-decoding): each range leaves its unnormalized rows with their m
 * and l, and a merge pass rescales them by e^(m - max m) and divides by
 * the merged l. */

#define FLASH_BK 64       /* keys per block */
#define FLASH_ROWS 64     /* query rows (query heads x queries) per item, about */
#define FLASH_DOT_ROWS 8  /* at most this many rows (decode): scores as dot products with K's rows */
#define FLASH_SPLIT_KEYS 256 /* keys per split at least, when the keys are split (below) */

typedef struct {
  const cpu_attention_params *p;
  const cpu_vec_ops *vo;
  rlx_dtype dt;                 /* of q, k, v and out */
  const void *q, *k, *v;
  void *out;
  const float *mask;            /* custom mask (F32) or NULL */
  int64_t group, t8, bq, q_blocks;
  int64_t splits, split_keys;   /* key ranges per item (1: no split), keys per range */
  float *part;                  /* splits > 1: per (item, range): O [rows, D], m [rows], l [rows] */
  size_t part_floats;
  float *kt;                    /* [B, Hkv, D, t8], or NULL: the rows path */
  const float *kf, *vf;         /* K (rows path) / V as f32 rows, or NULL: read in place (F32) */
  int64_t kf_row, vf_row;       /* row strides of kf or k, vf or v, in elements */
  float *scratch;               /* per thread: scratch_floats */
  size_t scratch_floats;
  float scale;
} flash_job;

static size_t dtype_bytes(rlx_dtype t) { return (size_t)ir_dtypes[t].size; }

/* Elements between consecutive sequence positions of one head. */
static int64_t seq_stride(const cpu_attention_params *p, int64_t heads) {
  return p->bhsd ? p->head_dim : heads * p->head_dim;
}

/* K -> kt (transposed, f32) or, on the rows path for F16/BF16, f32 rows;
 * V -> f32 rows for F16/BF16; items are (batch, kv head) pairs. */
static void flash_prepare(void *arg, int64_t begin, int64_t end, int thread) {
  flash_job *J = arg;
  const cpu_attention_params *p = J->p;
  const int64_t D = p->head_dim, T = p->kv_len, Hkv = p->num_kv_heads;
  const size_t es = dtype_bytes(J->dt);
  float *tmp = J->scratch + (size_t)thread * J->scratch_floats; /* 8 rows of D */
  for (int64_t item = begin; item < end; item++) {
    int64_t b = item / Hkv, hk = item % Hkv;
    float *kt = J->kt ? J->kt + item * D * J->t8 : NULL;
    for (int64_t j0 = 0; kt && j0 < J->t8; j0 += 8) {
      int64_t nk = T - j0 < 8 ? T - j0 : 8;
      for (int64_t jj = 0; jj < nk; jj++)
        J->vo->load(tmp + jj * D, (const char *)J->k + (size_t)head_row(p, Hkv, T, b, hk, j0 + jj) * es,
                    J->dt, D);
      for (int64_t jj = nk; jj < 8; jj++) memset(tmp + jj * D, 0, (size_t)D * sizeof *tmp);
      for (int64_t d = 0; d < D; d++)
        for (int64_t jj = 0; jj < 8; jj++) kt[d * J->t8 + j0 + jj] = tmp[jj * D + d];
    }
    if (J->kf)
      for (int64_t j = 0; j < T; j++)
        J->vo->load((float *)J->kf + ((b * Hkv + hk) * T + j) * D,
                    (const char *)J->k + (size_t)head_row(p, Hkv, T, b, hk, j) * es, J->dt, D);
    if (J->vf)
      for (int64_t j = 0; j < T; j++)
        J->vo->load((float *)J->vf + ((b * Hkv + hk) * T + j) * D,
                    (const char *)J->v + (size_t)head_row(p, Hkv, T, b, hk, j) * es, J->dt, D);
  }
}

/* Keys query i may see: [*lo, *hi] (empty when lo > hi). */
static void visible_keys(const cpu_attention_params *p, int64_t i, int64_t *lo, int64_t *hi) {
  int64_t last = i + (p->kv_len - p->q_len);
  *lo = 0;
  *hi = p->kv_len - 1;
  if (p->mask_kind == RLX_MASK_CAUSAL || p->mask_kind == RLX_MASK_SLIDING_WINDOW) {
    if (last < *hi) *hi = last;
    if (p->mask_kind == RLX_MASK_SLIDING_WINDOW && last - p->window + 1 > 0) *lo = last - p->window + 1;
  }
}

/* Narrows [*lo, *hi] to the first..last key whose custom-mask entry is
 * not -inf (mrow: the row's mask, stride its key stride; empty when all
 * are -inf). */
static void mask_visible_keys(const float *mrow, int64_t stride, int64_t T, int64_t *lo, int64_t *hi) {
  if (stride == 0) {
    if (T > 0 && mrow[0] == -INFINITY) *lo = T, *hi = -1;
    return;
  }
  while (*hi >= *lo && mrow[*hi * stride] == -INFINITY) (*hi)--;
  while (*lo <= *hi && mrow[*lo * stride] == -INFINITY) (*lo)++;
}

/* The keys row r of an item (query i of head h) may see: the mask kind's
 * range, narrowed by a custom mask's -inf entries. */
static void row_keys(const flash_job *J, int64_t b, int64_t h, int64_t i, int64_t *lo, int64_t *hi) {
  visible_keys(J->p, i, lo, hi);
  if (J->mask) {
    const int64_t *ms = J->p->mask_strides;
    mask_visible_keys(J->mask + b * ms[0] + h * ms[1] + i * ms[2], ms[3], J->p->kv_len, lo, hi);
  }
}

static void flash_items(void *arg, int64_t begin, int64_t end, int thread) {
  flash_job *J = arg;
  const cpu_attention_params *p = J->p;
  const cpu_vec_ops *vo = J->vo;
  const int64_t D = p->head_dim, S = p->q_len, T = p->kv_len, H = p->num_heads, Hkv = p->num_kv_heads;
  const int64_t group = J->group, bkp = FLASH_BK;
  const size_t es = dtype_bytes(J->dt);
  const int64_t rows_max = group * J->bq;
  float *Q = J->scratch + (size_t)thread * J->scratch_floats;
  float *Sc = Q + rows_max * D, *O = Sc + rows_max * bkp, *m = O + rows_max * D;
  double *l = (double *)(void *)(m + rows_max + (rows_max & 1)); /* 8-byte aligned */
  int64_t *row_lo = (int64_t *)(void *)(l + rows_max), *row_hi = row_lo + rows_max;
  for (int64_t unit = begin; unit < end; unit++) {
    const int64_t item = unit / J->splits, split = unit % J->splits;
    const int64_t qb = item % J->q_blocks, bh = item / J->q_blocks, b = bh / Hkv, hk = bh % Hkv;
    const int64_t q0 = qb * J->bq, nq = S - q0 < J->bq ? S - q0 : J->bq, R = group * nq;
    /* rows: r = g * nq + ii is query q0 + ii of head hk * group + g */
    for (int64_t r = 0; r < R; r++) {
      int64_t h = hk * group + r / nq, i = q0 + r % nq;
      vo->load(Q + r * D, (const char *)J->q + (size_t)head_row(p, H, S, b, h, i) * es, J->dt, D);
      vo->scale(Q + r * D, J->scale, D);
      m[r] = -INFINITY;
      l[r] = 0.0;
    }
    memset(O, 0, (size_t)(R * D) * sizeof *O);
    int64_t key_lo = T, key_hi = -1;
    for (int64_t r = 0; r < R; r++) {
      row_keys(J, b, hk * group + r / nq, q0 + r % nq, &row_lo[r], &row_hi[r]);
      if (row_lo[r] < key_lo) key_lo = row_lo[r];
      if (row_hi[r] > key_hi) key_hi = row_hi[r];
    }
    if (key_lo < 0) key_lo = 0;
    if (J->splits > 1) { /* this unit's range of the keys */
      int64_t r0 = split * J->split_keys, r1 = r0 + J->split_keys - 1;
      if (key_lo < r0) key_lo = r0;
      if (key_hi > r1) key_hi = r1;
    }
    const float *kt = J->kt ? J->kt + bh * D * J->t8 : NULL;
    const float *krows = kt     ? NULL
                         : J->kf ? J->kf + bh * T * D
                                 : (const float *)J->k + head_row(p, Hkv, T, b, hk, 0);
    for (int64_t j0 = key_lo / FLASH_BK * FLASH_BK; j0 <= key_hi; j0 += FLASH_BK) {
      const int64_t nk = T - j0 < FLASH_BK ? T - j0 : FLASH_BK;
      if (kt) vo->qk_tile(Q, D, kt + j0, J->t8, Sc, bkp, R, nk, D);
      else vo->qk_rows(Q, D, krows + j0 * J->kf_row, J->kf_row, Sc, bkp, R, nk, D);
      for (int64_t r = 0; r < R; r++) {
        float *srow = Sc + r * bkp;
        int64_t h = hk * group + r / nq, i = q0 + r % nq, lo, hi;
        if (p->softcap > 0) {
          vo->scale(srow, (float)(1.0 / p->softcap), nk);
          vo->act(RLX_ACT_TANH, 0.0f, srow, srow, nk);
          vo->scale(srow, (float)p->softcap, nk);
        }
        if (J->mask) {
          const int64_t *ms = p->mask_strides;
          const float *mrow = J->mask + b * ms[0] + h * ms[1] + i * ms[2] + j0 * ms[3];
          vo->binary(RLX_BIN_ADD, srow, 1, mrow, ms[3] != 0, srow, nk);
        }
        lo = row_lo[r];
        hi = row_hi[r];
        int64_t c0 = lo - j0 > 0 ? lo - j0 : 0, c1 = hi - j0 + 1 < nk ? hi - j0 + 1 : nk;
        float mb = c0 < c1 ? vo->max(srow + c0, c1 - c0) : -INFINITY;
        /* a NaN score poisons the row (as the reference's softmax) */
        float m_new = isnan(m[r]) ? m[r] : (isnan(mb) || mb > m[r]) ? mb : m[r];
        if (c0 >= c1 || m_new == -INFINITY) { /* nothing visible (yet) */
          memset(srow, 0, (size_t)nk * sizeof *srow);
          continue;
        }
        if (m_new != m[r]) {
          float corr = m[r] == -INFINITY ? 0.0f : expf(m[r] - m_new);
          vo->scale(O + r * D, corr, D);
          l[r] *= corr;
          m[r] = m_new;
        }
        l[r] += vo->exp_shift_sum(srow + c0, m_new, srow + c0, c1 - c0);
        if (c0 > 0) memset(srow, 0, (size_t)c0 * sizeof *srow);
        if (c1 < nk) memset(srow + c1, 0, (size_t)(nk - c1) * sizeof *srow);
      }
      const float *vb = J->vf ? J->vf + (bh * T + j0) * D
                              : (const float *)J->v + head_row(p, Hkv, T, b, hk, j0);
      vo->pv_tile(Sc, bkp, vb, J->vf_row, O, D, R, nk, D);
    }
    if (J->splits > 1) { /* leave the range's rows for flash_merge */
      float *part = J->part + (size_t)unit * J->part_floats;
      memcpy(part, O, (size_t)(R * D) * sizeof *O);
      for (int64_t r = 0; r < R; r++) {
        part[rows_max * D + r] = m[r];
        part[rows_max * (D + 1) + r] = (float)l[r];
      }
      continue;
    }
    for (int64_t r = 0; r < R; r++) {
      int64_t h = hk * group + r / nq, i = q0 + r % nq;
      float *orow = O + r * D;
      if (m[r] == -INFINITY || l[r] == 0.0) memset(orow, 0, (size_t)D * sizeof *orow); /* all masked */
      else vo->scale(orow, (float)(1.0 / l[r]), D);
      vo->store((char *)J->out + (size_t)head_row(p, H, S, b, h, i) * es, J->dt, orow, D);
    }
  }
}

/* Merges the key ranges of split items: per row, the ranges' sums rescaled
 * to the largest max (a NaN max makes the row NaN; no visible key: zeros). */
static void flash_merge(void *arg, int64_t begin, int64_t end, int thread) {
  flash_job *J = arg;
  const cpu_attention_params *p = J->p;
  const cpu_vec_ops *vo = J->vo;
  const int64_t D = p->head_dim, S = p->q_len, H = p->num_heads, Hkv = p->num_kv_heads;
  const int64_t group = J->group, rows_max = group * J->bq;
  const size_t es = dtype_bytes(J->dt);
  float *orow = J->scratch + (size_t)thread * J->scratch_floats;
  for (int64_t item = begin; item < end; item++) {
    const int64_t qb = item % J->q_blocks, bh = item / J->q_blocks, b = bh / Hkv, hk = bh % Hkv;
    const int64_t q0 = qb * J->bq, nq = S - q0 < J->bq ? S - q0 : J->bq, R = group * nq;
    const float *parts = J->part + (size_t)(item * J->splits) * J->part_floats;
    for (int64_t r = 0; r < R; r++) {
      float mx = -INFINITY;
      for (int64_t c = 0; c < J->splits; c++) {
        float mc = parts[c * J->part_floats + rows_max * D + r];
        if (isnan(mc) || mc > mx) mx = isnan(mx) ? mx : mc;
      }
      double l = 0.0;
      memset(orow, 0, (size_t)D * sizeof *orow);
      for (int64_t c = 0; c < J->splits && mx != -INFINITY; c++) {
        const float *part = parts + c * J->part_floats;
        float mc = part[rows_max * D + r];
        if (mc == -INFINITY) continue; /* no visible key in this range */
        float w = isnan(mx) ? NAN : expf(mc - mx);
        l += (double)w * part[rows_max * (D + 1) + r];
        for (int64_t d = 0; d < D; d++) orow[d] += w * part[r * D + d];
      }
      if (mx == -INFINITY || l == 0.0) memset(orow, 0, (size_t)D * sizeof *orow);
      else vo->scale(orow, (float)(1.0 / l), D);
      int64_t h = hk * group + r / nq, i = q0 + r % nq;
      vo->store((char *)J->out + (size_t)head_row(p, H, S, b, h, i) * es, J->dt, orow, D);
    }
  }
}

rlx_status cpu_attention_fast(cpu_ctx *ctx, const cpu_attention_params *p, rlx_dtype dt, const void *q,
                              const void *k, const void *v, const float *mask, void *out) {
  const int64_t B = p->batch, S = p->q_len, T = p->kv_len, D = p->head_dim;
  const int64_t Hkv = p->num_kv_heads;
  if (B == 0 || S == 0 || p->num_heads == 0) return RLX_OK;
  flash_job J = {.p = p, .vo = cpu_vec(), .dt = dt, .q = q, .k = k, .v = v, .out = out,
                 .mask = p->mask_kind == RLX_MASK_CUSTOM ? mask : NULL};
  J.group = p->num_heads / Hkv;
  J.scale = (float)(p->score_scale > 0 ? p->score_scale : 1.0 / sqrt((double)D));
  J.t8 = (T + 7) / 8 * 8;
  J.bq = (FLASH_ROWS + J.group - 1) / J.group;
  if (J.bq > S) J.bq = S;
  J.q_blocks = (S + J.bq - 1) / J.bq;
  const int64_t rows = J.group * J.bq;
  const int threads = cpu_ctx_threads(ctx);
  /* Q, scores, O, m, l (double: 2 floats), padding, row_lo and row_hi (int64: 2 floats each) */
  J.scratch_floats = (size_t)(rows * D + rows * FLASH_BK + rows * D + 3 * rows + 2 + 4 * rows);
  /* few items for the threads: split the keys (whole key blocks per range) */
  const int64_t items = B * Hkv * J.q_blocks;
  J.splits = 1;
  if (threads > 1 && items < 2 * (int64_t)threads && T >= 2 * FLASH_SPLIT_KEYS) {
    int64_t want = (2 * (int64_t)threads + items - 1) / items, most = T / FLASH_SPLIT_KEYS;
    J.splits = want < most ? want : most;
    int64_t blocks = (T + FLASH_BK - 1) / FLASH_BK;
    J.split_keys = (blocks + J.splits - 1) / J.splits * FLASH_BK;
    J.splits = (T + J.split_keys - 1) / J.split_keys;
  }
  J.part_floats = (size_t)(rows * (D + 2));
  if (J.scratch_floats < (size_t)(8 * D)) J.scratch_floats = (size_t)(8 * D); /* flash_prepare */
  J.scratch_floats = (J.scratch_floats + 15) / 16 * 16;
  const int rows_path = rows <= FLASH_DOT_ROWS, convert = dt != RLX_F32 && T > 0;
  const size_t kv_floats = (size_t)(B * Hkv * T * D);
  float *scratch = malloc(J.scratch_floats * (size_t)threads * sizeof(float));
  float *kt = rows_path ? NULL : malloc((size_t)(B * Hkv * D * (J.t8 ? J.t8 : 1)) * sizeof(float));
  float *kf = rows_path && convert ? malloc(kv_floats * sizeof(float)) : NULL;
  float *vf = convert ? malloc(kv_floats * sizeof(float)) : NULL;
  float *part = J.splits > 1 ? malloc(J.part_floats * (size_t)(items * J.splits) * sizeof(float)) : NULL;
  if (!scratch || (!rows_path && !kt) || (rows_path && convert && !kf) || (convert && !vf) ||
      (J.splits > 1 && !part)) {
    free(scratch);
    free(kt);
    free(kf);
    free(vf);
    free(part);
    return rlx_set_error(RLX_ERR_NOMEM, "Attention: out of memory for %lld keys", (long long)T);
  }
  J.scratch = scratch;
  J.kt = kt;
  J.kf = kf;
  J.vf = vf;
  J.part = part;
  J.kf_row = kf ? D : seq_stride(p, Hkv);
  J.vf_row = vf ? D : seq_stride(p, Hkv);
  cpu_parallel_for(ctx, B * Hkv, 1, flash_prepare, &J);
  cpu_parallel_for(ctx, items * J.splits, 1, flash_items, &J);
  if (J.splits > 1) cpu_parallel_for(ctx, items, 1, flash_merge, &J);
  free(part);
  free(scratch);
  free(kt);
  free(kf);
  free(vf);
  return RLX_OK;
}

rlx_status cpu_Attention(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  const cpu_tensor *tq = &in[0], *tk = &in[1], *tv = &in[2];
  cpu_attention_params p;
  cpu_attention_params_from_attrs(&p, &n->a);
  p.bhsd = tq->rank == 4 && n->a.layout == RLX_LAYOUT_BHSD;
  int seq_axis = p.bhsd ? 2 : 1;
  p.batch = tq->d[0];
  p.q_len = tq->d[seq_axis];
  p.kv_len = tk->d[seq_axis];
  if (out->numel == 0) return RLX_OK;
  if (p.mask_kind == RLX_MASK_CUSTOM) {
    const int64_t full[4] = {p.batch, p.num_heads, p.q_len, p.kv_len};
    cpu_bcast_strides(&in[3], 4, full, p.mask_strides);
  }

  if (tq->dtype != RLX_F64)
    return cpu_attention_fast(ctx, &p, tq->dtype, tq->data, tk->data, tv->data,
                              p.mask_kind == RLX_MASK_CUSTOM ? in[3].data : NULL, out->data);

  rlx_status st = RLX_OK;
  double *q = cpu_load_f64(tq), *k = cpu_load_f64(tk), *v = cpu_load_f64(tv);
  double *mask = NULL, *o = malloc((size_t)out->numel * sizeof(double));
  if (p.mask_kind == RLX_MASK_CUSTOM) {
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

/* Rope on F32/F16/BF16: x rotated in f32 (in out itself for F32) with the
 * double tables rounded to f32 once. */
static void rope_f32(const ir_node *n, const cpu_tensor *tx, cpu_tensor *out, float *x, float *cos_f,
                     float *sin_f, const double *cos_t, const double *sin_t, int64_t table_n,
                     int64_t table_batch_stride) {
  const int64_t D = n->a.head_dim, B = tx->d[0], S = tx->d[1];
  const int64_t H = tx->rank == 4 ? tx->d[2] : tx->d[2] / D;
  const cpu_vec_ops *vo = cpu_vec();
  for (int64_t i = 0; i < table_n; i++) {
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
  if (n->n_in == 3) {
    /* [S, n_rot/2] is shared by every batch; [B, S, n_rot/2] is not */
    table_batch_stride = in[1].rank == 3 ? S * half : 0;
    table_n = in[1].numel;
    cos_t = cpu_load_f64(&in[1]);
    sin_t = cpu_load_f64(&in[2]);
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
  if (!(fast ? (void *)xf : (void *)x) || !cos_t || !sin_t) {
    st = rlx_set_error(RLX_ERR_NOMEM, "Rope (node %d): out of memory", n->id);
    goto done;
  }
  if (fast) {
    float *xbuf = out->dtype == RLX_F32 ? out->data : xf + 2 * table_n;
    rope_f32(n, tx, out, xbuf, xf, xf + table_n, cos_t, sin_t, table_n, table_batch_stride);
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
