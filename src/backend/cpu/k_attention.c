/* k_attention.c — Attention (Rope: k_rope.c).
 *
 * F64 runs the double-precision reference (cpu_attention_f64); F32, F16 and
 * BF16 run the tiled kernel below (cpu_attention_fast), in f32 with the
 * storage dtype converted on the fly; so do K and V of a GGUF block dtype
 * under an F32 q (a quantized KV cache), decoded to f32 rows. */
#include "k_attention_flash.h"
#include "linalg_rows.h"
#include "quant_blocks.h"

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
int64_t flash_head_row(const cpu_attention_params *p, int64_t heads, int64_t len, int64_t b,
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
        const double *qrow = q + flash_head_row(p, p->num_heads, S, b, h, i);
        double *orow = out + flash_head_row(p, p->num_heads, S, b, h, i);
        double mx = -INFINITY;
        for (int64_t j = 0; j < T; j++) {
          if (!key_visible(p, i, j)) {
            scores[j] = -INFINITY;
            continue;
          }
          const double *krow = k + flash_head_row(p, p->num_kv_heads, T, b, hk, j);
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
          const double *vrow = v + flash_head_row(p, p->num_kv_heads, T, b, hk, j);
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
 * scores of the block (a small GEMM against K transposed) and an online
 * softmax — a running max m and sum l per row, the output rows
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
 * read in place (F32) or converted to f32 rows. Under a custom mask (see
 * below) K and V stored in another dtype than F32 (F16, BF16, a quantized
 * cache's Q8_0 or Q4_0 blocks) are converted a key block at a time into
 * the thread's scratch instead, as each block is used: the cache's bytes
 * are read once per item and no f32 copy of it goes through memory.
 *
 * When there are fewer items than twice the threads (decode with few kv
 * heads), the keys of each item are split into ranges of whole key blocks
 * (flash-decoding): each range leaves its unnormalized rows with their m
 * and l, and a merge pass rescales them by e^(m - max m) and divides by
 * the merged l.
 *
 * With a custom mask (a decoder's KV pool) an item runs
 * flash_masked_items instead (k_attention_masked.c). */

static size_t dtype_bytes(rlx_dtype t) { return (size_t)ir_dtypes[t].size; }

/* Elements between consecutive sequence positions of one head. */
static int64_t seq_stride(const cpu_attention_params *p, int64_t heads) {
  return p->bhsd ? p->head_dim : heads * p->head_dim;
}

/* Row j of K or V (base) of (b, hk) as D floats: converted from the
 * storage dtype, a block dtype's row decoded (a row is whole blocks). */
void flash_load_kv_row(const flash_job *J, float *dst, const void *base, int64_t b, int64_t hk, int64_t j) {
  const cpu_attention_params *p = J->p;
  const int64_t D = p->head_dim, r = flash_head_row(p, p->num_kv_heads, p->kv_len, b, hk, j) / D; /* whole rows */
  const char *row = (const char *)base + (size_t)r * J->kv_row;
  if (J->kv_dt == RLX_Q8_0 || J->kv_dt == RLX_Q4_0 || !ir_is_block(J->kv_dt)) J->vo->load(dst, row, J->kv_dt, D);
  else quant_dequantize_row(J->kv_dt, row, dst, D);
}

/* K -> kt (transposed, f32) or, on the rows path for F16/BF16 or blocks,
 * f32 rows; V -> f32 rows for those; items are (batch, kv head) pairs. */
static void flash_prepare(void *arg, int64_t begin, int64_t end, int thread) {
  flash_job *J = arg;
  const cpu_attention_params *p = J->p;
  const int64_t D = p->head_dim, T = p->kv_len, Hkv = p->num_kv_heads;
  float *tmp = J->scratch + (size_t)thread * J->scratch_floats; /* 8 rows of D */
  for (int64_t item = begin; item < end; item++) {
    int64_t b = item / Hkv, hk = item % Hkv;
    float *kt = J->kt ? J->kt + item * D * J->t8 : NULL;
    for (int64_t j0 = 0; kt && j0 < J->t8; j0 += 8) {
      int64_t nk = T - j0 < 8 ? T - j0 : 8;
      for (int64_t jj = 0; jj < nk; jj++) flash_load_kv_row(J, tmp + jj * D, J->k, b, hk, j0 + jj);
      for (int64_t jj = nk; jj < 8; jj++) memset(tmp + jj * D, 0, (size_t)D * sizeof *tmp);
      for (int64_t d = 0; d < D; d++)
        for (int64_t jj = 0; jj < 8; jj++) kt[d * J->t8 + j0 + jj] = tmp[jj * D + d];
    }
    if (J->kf)
      for (int64_t j = 0; j < T; j++) flash_load_kv_row(J, (float *)J->kf + ((b * Hkv + hk) * T + j) * D, J->k, b, hk, j);
    if (J->vf)
      for (int64_t j = 0; j < T; j++) flash_load_kv_row(J, (float *)J->vf + ((b * Hkv + hk) * T + j) * D, J->v, b, hk, j);
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
  if (stride == 1) {
    while (*hi - 7 >= *lo && flash_neg_inf8(mrow + *hi - 7) == 0xFF) *hi -= 8;
    while (*lo + 7 <= *hi && flash_neg_inf8(mrow + *lo) == 0xFF) *lo += 8;
  }
  while (*hi >= *lo && mrow[*hi * stride] == -INFINITY) (*hi)--;
  while (*lo <= *hi && mrow[*lo * stride] == -INFINITY) (*lo)++;
}

/* The keys row r of an item (query i of head h) may see: the mask kind's
 * range, narrowed by a custom mask's -inf entries. */
void flash_row_keys(const flash_job *J, int64_t b, int64_t h, int64_t i, int64_t *lo, int64_t *hi) {
  visible_keys(J->p, i, lo, hi);
  if (J->mask) {
    const int64_t *ms = J->p->mask_strides;
    mask_visible_keys(J->mask + b * ms[0] + h * ms[1] + i * ms[2], ms[3], J->p->kv_len, lo, hi);
  }
}

/* Whether row r (query i of head h) sees a key of block [j0, j0 + nk):
 * one in its [lo, hi] whose custom-mask entry is not -inf. */
static int row_sees_block(const flash_job *J, int64_t b, int64_t h, int64_t i, int64_t lo, int64_t hi,
                          int64_t j0, int64_t nk) {
  int64_t c0 = lo > j0 ? lo : j0, c1 = hi < j0 + nk - 1 ? hi : j0 + nk - 1;
  if (c0 > c1) return 0;
  if (!J->mask) return 1;
  const int64_t *ms = J->p->mask_strides;
  const float *mrow = J->mask + b * ms[0] + h * ms[1] + i * ms[2];
  for (int64_t j = c0; j <= c1; j++)
    if (mrow[j * ms[3]] != -INFINITY) return 1;
  return 0;
}

/* The rows [*r0, *r1) of an item that key block [j0, j0 + nk) is computed
 * for: first..last row that sees a key of it; 0 when none does. */
static int block_rows(const flash_job *J, int64_t b, int64_t hk, int64_t first, int64_t R, const int64_t *row_lo,
                      const int64_t *row_hi, int64_t j0, int64_t nk, int64_t *r0, int64_t *r1) {
  const int64_t group = J->group;
  int64_t r = 0, e = R;
  while (r < R && !row_sees_block(J, b, hk * group + (first + r) % group, (first + r) / group, row_lo[r], row_hi[r],
                                  j0, nk))
    r++;
  if (r == R) return 0;
  while (e - 1 > r &&
         !row_sees_block(J, b, hk * group + (first + e - 1) % group, (first + e - 1) / group, row_lo[e - 1],
                         row_hi[e - 1], j0, nk))
    e--;
  *r0 = r;
  *r1 = e;
  return 1;
}


/* The first 8-byte aligned address at or after f. */
double *flash_align_double(float *f) { return (double *)(void *)(((uintptr_t)f + 7) & ~(uintptr_t)7); }

item_scratch flash_scratch_of(const flash_job *J, int thread) {
  const int64_t rows_max = J->rows_item, D = J->p->head_dim;
  item_scratch x;
  x.Q = J->scratch + (size_t)thread * J->scratch_floats;
  x.Sc = x.Q + rows_max * D;
  x.O = x.Sc + rows_max * J->lds;
  x.m = x.O + rows_max * D;
  x.l = (double *)(void *)(x.m + rows_max + (rows_max & 1)); /* 8-byte aligned */
  x.row_lo = (int64_t *)(void *)(x.l + rows_max);
  x.row_hi = x.row_lo + rows_max;
  x.blk = x.row_hi + rows_max;
  x.Oa = (float *)(void *)(x.blk + 2 * (J->p->kv_len / FLASH_BK + 2));
  x.ma = x.Oa + rows_max * D;
  x.la = flash_align_double(x.ma + rows_max);
  x.kv = (float *)(void *)(x.la + rows_max);
  x.mrow = (const float **)(void *)(x.kv + FLASH_BK * D); /* 8-byte aligned: FLASH_BK * D is even */
  x.mdist = (int64_t *)(void *)(x.mrow + rows_max);
  x.keys = (int32_t *)(void *)(x.mdist + rows_max);
  return x;
}

/* Loads and scales the item's R query rows (its row r is row first + r of
 * the (batch, kv head)). */
void flash_item_load(const flash_job *J, const item_scratch *x, int64_t b, int64_t hk, int64_t first, int64_t R) {
  const cpu_attention_params *p = J->p;
  const int64_t D = p->head_dim, group = J->group;
  const size_t es = dtype_bytes(J->dt);
  for (int64_t r = 0; r < R; r++) {
    int64_t h = hk * group + (first + r) % group, i = (first + r) / group;
    J->vo->load(x->Q + r * D, (const char *)J->q + (size_t)flash_head_row(p, p->num_heads, p->q_len, b, h, i) * es,
                J->dt, D);
    J->vo->scale(x->Q + r * D, J->scale, D);
  }
}

/* Clears the R rows' O, m and l, and gives the union of their visible keys
 * (x->row_lo, row_hi) in [*key_lo, *key_hi]. */
void flash_item_reset(const flash_job *J, const item_scratch *x, int64_t R, int64_t *key_lo, int64_t *key_hi) {
  *key_lo = J->p->kv_len;
  *key_hi = -1;
  for (int64_t r = 0; r < R; r++) {
    x->m[r] = -INFINITY;
    x->l[r] = 0.0;
    if (x->row_lo[r] < *key_lo) *key_lo = x->row_lo[r];
    if (x->row_hi[r] > *key_hi) *key_hi = x->row_hi[r];
  }
  memset(x->O, 0, (size_t)(R * J->p->head_dim) * sizeof *x->O);
  if (*key_lo < 0) *key_lo = 0;
}

/* The item's rows O / l into out (a row that saw no key: zeros). */
void flash_item_store(const flash_job *J, float *O, const float *m, const double *l, int64_t b, int64_t hk,
                       int64_t first, int64_t R) {
  const cpu_attention_params *p = J->p;
  const int64_t D = p->head_dim;
  for (int64_t r = 0; r < R; r++) {
    int64_t h = hk * J->group + (first + r) % J->group, i = (first + r) / J->group;
    float *orow = O + r * D;
    if (m[r] == -INFINITY || l[r] == 0.0) memset(orow, 0, (size_t)D * sizeof *orow); /* all masked */
    else J->vo->scale(orow, (float)(1.0 / l[r]), D);
    J->vo->store((char *)J->out + (size_t)flash_head_row(p, p->num_heads, p->q_len, b, h, i) * dtype_bytes(J->dt), J->dt,
                 orow, D);
  }
}

/* Row r's visible keys within block [j0, j0 + nk): [*c0, *c1) of it. */
static void row_window(int64_t lo, int64_t hi, int64_t j0, int64_t nk, int64_t *c0, int64_t *c1) {
  *c0 = lo - j0 > 0 ? lo - j0 : 0;
  *c1 = hi - j0 + 1 < nk ? hi - j0 + 1 : nk;
}

/* Softcap of a row of nk scores. */
void flash_softcap_row(const cpu_attention_params *p, const cpu_vec_ops *vo, float *srow, int64_t nk) {
  if (p->softcap <= 0) return;
  vo->scale(srow, (float)(1.0 / p->softcap), nk);
  vo->act(RLX_ACT_TANH, 0.0f, srow, srow, nk);
  vo->scale(srow, (float)p->softcap, nk);
}

static void flash_items(void *arg, int64_t begin, int64_t end, int thread) {
  flash_job *J = arg;
  const cpu_attention_params *p = J->p;
  const cpu_vec_ops *vo = J->vo;
  const int64_t D = p->head_dim, S = p->q_len, T = p->kv_len, Hkv = p->num_kv_heads;
  const int64_t bkp = J->lds, rows_max = J->rows_item;
  const item_scratch x = flash_scratch_of(J, thread);
  float *Q = x.Q, *Sc = x.Sc, *O = x.O, *m = x.m;
  double *l = x.l;
  const int64_t *row_lo = x.row_lo, *row_hi = x.row_hi;
  for (int64_t unit = begin; unit < end; unit++) {
    const int64_t item = unit / J->splits, split = unit % J->splits;
    const int64_t bh = item / J->q_blocks, b = bh / Hkv, hk = bh % Hkv, first = item % J->q_blocks * J->rows_item;
    const int64_t R = S * J->group - first < J->rows_item ? S * J->group - first : J->rows_item;
    int64_t key_lo, key_hi;
    flash_item_load(J, &x, b, hk, first, R);
    for (int64_t r = 0; r < R; r++)
      flash_row_keys(J, b, hk * J->group + (first + r) % J->group, (first + r) / J->group, &x.row_lo[r], &x.row_hi[r]);
    flash_item_reset(J, &x, R, &key_lo, &key_hi);
    if (J->splits > 1) { /* this unit's range of the keys */
      int64_t r0 = split * J->split_keys, r1 = r0 + J->split_keys - 1;
      if (key_lo < r0) key_lo = r0;
      if (key_hi > r1) key_hi = r1;
    }
    const float *kt = J->kt ? J->kt + bh * D * J->t8 : NULL;
    const float *krows = kt     ? NULL
                         : J->kf ? J->kf + bh * T * D
                                 : (const float *)J->k + flash_head_row(p, Hkv, T, b, hk, 0);
    for (int64_t j0 = key_lo; j0 <= key_hi; j0 += FLASH_BK) {
      const int64_t nk = key_hi + 1 - j0 < FLASH_BK ? key_hi + 1 - j0 : FLASH_BK;
      int64_t r0, r1;
      if (!block_rows(J, b, hk, first, R, row_lo, row_hi, j0, nk, &r0, &r1)) continue;
      const int64_t nr = r1 - r0;
      if (kt) vo->qk_tile(Q + r0 * D, D, kt + j0, J->t8, Sc + r0 * bkp, bkp, nr, nk, D);
      else vo->qk_rows(Q + r0 * D, D, krows + j0 * J->kf_row, J->kf_row, Sc + r0 * bkp, bkp, nr, nk, D);
      for (int64_t r = r0; r < r1; r++) {
        float *srow = Sc + r * bkp;
        flash_softcap_row(p, vo, srow, nk);
        int64_t c0, c1;
        row_window(row_lo[r], row_hi[r], j0, nk, &c0, &c1);
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
                              : (const float *)J->v + flash_head_row(p, Hkv, T, b, hk, j0);
      vo->pv_tile(Sc + r0 * bkp, bkp, vb, J->vf_row, O + r0 * D, D, nr, nk, D);
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
    flash_item_store(J, O, m, l, b, hk, first, R);
  }
}

/* Merges the key ranges of split items: per row, the ranges' sums rescaled
 * to the largest max (a NaN max makes the row NaN; no visible key: zeros). */
static void flash_merge(void *arg, int64_t begin, int64_t end, int thread) {
  flash_job *J = arg;
  const cpu_attention_params *p = J->p;
  const cpu_vec_ops *vo = J->vo;
  const int64_t D = p->head_dim, S = p->q_len, H = p->num_heads, Hkv = p->num_kv_heads;
  const int64_t group = J->group, rows_max = J->rows_item;
  const size_t es = dtype_bytes(J->dt);
  float *orow = J->scratch + (size_t)thread * J->scratch_floats;
  for (int64_t item = begin; item < end; item++) {
    const int64_t bh = item / J->q_blocks, b = bh / Hkv, hk = bh % Hkv, first = item % J->q_blocks * J->rows_item;
    const int64_t R = S * J->group - first < J->rows_item ? S * J->group - first : J->rows_item;
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
      int64_t h = hk * group + (first + r) % group, i = (first + r) / group;
      vo->store((char *)J->out + (size_t)flash_head_row(p, H, S, b, h, i) * es, J->dt, orow, D);
    }
  }
}

rlx_status cpu_attention_fast(cpu_ctx *ctx, const cpu_attention_params *p, rlx_dtype dt, rlx_dtype kv_dt,
                              const void *q, const void *k, const void *v, const float *mask, void *out) {
  const int64_t B = p->batch, S = p->q_len, T = p->kv_len, D = p->head_dim;
  const int64_t Hkv = p->num_kv_heads;
  if (B == 0 || S == 0 || p->num_heads == 0) return RLX_OK;
  flash_job J = {.p = p, .vo = cpu_vec(), .dt = dt, .kv_dt = kv_dt, .kv_row = rlx_dtype_nbytes(kv_dt, D),
                 .q = q, .k = k, .v = v, .out = out, .mask = p->mask_kind == RLX_MASK_CUSTOM ? mask : NULL};
  J.group = p->num_heads / Hkv;
  J.scale = (float)(p->score_scale > 0 ? p->score_scale : 1.0 / sqrt((double)D));
  J.t8 = (T + 7) / 8 * 8;
  const int threads = cpu_ctx_threads(ctx);
  const int masked = J.mask != NULL;
  J.lds = masked ? J.t8 : FLASH_BK;
  /* online: whole queries, about FLASH_ROWS rows; masked: rows cut at will,
   * for the scores kept and for the threads */
  int64_t bq = (FLASH_ROWS + J.group - 1) / J.group;
  J.rows_item = J.group * (bq < S ? bq : S);
  if (masked) {
    const int64_t fit = FLASH_MASKED_SCORES / (J.lds ? J.lds : 1), per = S * J.group * B * Hkv / threads;
    if (J.rows_item > fit) J.rows_item = fit;
    if (J.rows_item > per) J.rows_item = per;
    if (J.rows_item < 1) J.rows_item = 1;
  }
  J.q_blocks = (S * J.group + J.rows_item - 1) / J.rows_item;
  const int64_t rows = J.rows_item;
  /* Q, scores, O, m, l (double: 2 floats), padding, row_lo and row_hi (int64: 2 floats each), and
   * for masked_items each key block's rows (2 int64) */
  J.scratch_floats = (size_t)(rows * D + rows * J.lds + rows * D + 3 * rows + 2 + 4 * rows);
  if (masked) /* each key block's rows (2 int64), Oa, ma, la (double), alignment, a key block of K or V, the
               * rows' mask rows and distinct rows (2 x 8 bytes), the keys (int32) */
    J.scratch_floats += (size_t)(4 * (T / FLASH_BK + 2) + rows * D + 3 * rows + 4 + FLASH_BK * D + 4 * rows + T);
  J.splits = 1;
  rlx_status st = masked ? flash_masked_setup(ctx, &J, threads) : RLX_OK;
  if (st) return st;
  /* few items for the threads: split the keys (whole key blocks per range) */
  const int64_t items = B * Hkv * J.q_blocks;
  if (!masked && threads > 1 && items < 2 * (int64_t)threads && T >= 2 * FLASH_SPLIT_KEYS) {
    int64_t want = (2 * (int64_t)threads + items - 1) / items, most = T / FLASH_SPLIT_KEYS;
    J.splits = want < most ? want : most;
    int64_t blocks = (T + FLASH_BK - 1) / FLASH_BK;
    J.split_keys = (blocks + J.splits - 1) / J.splits * FLASH_BK;
    J.splits = (T + J.split_keys - 1) / J.split_keys;
  }
  /* masked: O, m, l (double, 8-byte aligned), and even, so the next part stays aligned */
  J.part_floats = masked ? (size_t)((rows * (D + 3) + 3) / 2 * 2) : (size_t)(rows * (D + 2));
  if (J.scratch_floats < (size_t)(8 * D)) J.scratch_floats = (size_t)(8 * D); /* flash_prepare */
  J.scratch_floats = (J.scratch_floats + 15) / 16 * 16;
  /* masked: K and V converted a key block at a time, into each thread's
   * scratch (a cache's rows are read once, not written out as f32 first) */
  J.tiles = masked && kv_dt != RLX_F32;
  const int rows_path = masked || rows <= FLASH_DOT_ROWS, convert = kv_dt != RLX_F32 && T > 0 && !J.tiles;
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
    flash_masked_free(&J);
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
  cpu_parallel_for(ctx, items * J.splits, 1, masked ? flash_masked_items : flash_items, &J);
  if (J.splits > 1) cpu_parallel_for(ctx, items, 1, masked ? flash_masked_merge : flash_merge, &J);
  free(part);
  free(scratch);
  free(kt);
  free(kf);
  free(vf);
  flash_masked_free(&J);
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
    return cpu_attention_fast(ctx, &p, tq->dtype, tk->dtype, tq->data, tk->data, tv->data,
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
