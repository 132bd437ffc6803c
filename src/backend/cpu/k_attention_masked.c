/* k_attention_masked.c — the CPU attention under a custom mask (a
 * decoder's KV pool: each query sees its own sequence's cells, scattered
 * among other sequences' cells); k_attention.c runs the rest.
 *
 * A row's bits depend only on the values of the keys it sees and their
 * order, not on where they sit, on the other rows of the call or on its
 * size. A quantized matmul rounds its activations to 8 bits, so a 1e-6
 * difference in an attention row flips a rounding step and grows to
 * logits off by more than 1 a few layers on: a sequence decoded beside
 * others would not give the tokens it gives alone. The scores are always
 * dot products with K's rows (decode's and prefill's alike). A row's
 * visible keys are cut into ranges of FLASH_SPLIT_KEYS visible keys
 * (masked_cut: counted in keys, not cells, so a cut falls at the same key
 * of a sequence wherever its cells sit). Per range, the row's scores are
 * kept for the whole range (no online rescaling, whose points depend on
 * where blocks cut the keys): the max, then the exponentials summed in key
 * order in double, and P V as one chain of multiply-adds per output in key
 * order, masked keys adding exact zeros. The ranges are merged in order
 * (merge_range), on one thread or, when the items are few, after units of
 * (item, range) ran on several.
 *
 * The rows are ordered query-major (the group's heads of one query next
 * to each other). An item is a run of queries of one sequence (each query
 * sees the last key of the one before it: a prefill's queries; a decode
 * step's queries of distinct sequences are items of their own), at most
 * J->rows_item rows. Per key range, the item gathers the cells that one
 * of its rows sees (masked -inf entries and keys outside a row's
 * first..last finite entry left out) and walks them in blocks of
 * FLASH_BK: a block of F32 rows that is one run of cells is read in
 * place, any other block's K and V rows are copied (or converted from
 * F16, BF16 or a quantized cache's Q8_0 / Q4_0 blocks) into the thread's
 * scratch. So a query reads its own sequence's keys only, however the
 * sequences' cells interleave. Per block the scores and
 * the P V product are computed for the first..last row that sees a key of
 * it. Masked keys are not read, so non-finite values there do not reach
 * the row. */
#include "k_attention_flash.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Mask row of row r of an item (J->ranges, J->bnd). */
static int64_t mask_row(const flash_job *J, int64_t b, int64_t hk, int64_t first, int64_t r) {
  const int64_t h = hk * J->group + (first + r) % J->group, i = (first + r) / J->group;
  return (b * J->mask_heads + (J->mask_heads > 1 ? h : 0)) * J->p->q_len + i;
}

/* The mask row of row r of an item (query i of head h). */
static const float *mask_of(const flash_job *J, int64_t b, int64_t hk, int64_t first, int64_t r) {
  const int64_t h = hk * J->group + (first + r) % J->group, i = (first + r) / J->group, *ms = J->p->mask_strides;
  return J->mask + b * ms[0] + h * ms[1] + i * ms[2];
}

/* Whether the 8 floats at m are all +0 or -0. */
static int zero8(const float *m) {
  uint32_t u[8], bits = 0;
  memcpy(u, m, sizeof u);
  for (int i = 0; i < 8; i++) bits |= u[i] << 1;
  return bits == 0;
}

/* Cuts each mask row's visible keys into ranges of FLASH_SPLIT_KEYS (items:
 * mask rows): range c is cells [bnd[c], bnd[c + 1]), counted in visible
 * keys, so the cut falls at the same key of a sequence wherever its cells
 * sit; J->dense: whether the row's first..last keys are all visible with
 * entries +-0 (a KV pool's row of one sequence in a run of cells), whose
 * scores then take no mask add (adding +-0 changes no value). */
static void masked_cut(void *arg, int64_t begin, int64_t end, int thread) {
  (void)thread;
  flash_job *J = arg;
  const cpu_attention_params *p = J->p;
  const int64_t S = p->q_len, *ms = p->mask_strides;
  for (int64_t mr = begin; mr < end; mr++) {
    const int64_t i = mr % S, h = mr / S % J->mask_heads, b = mr / S / J->mask_heads;
    const float *mrow = J->mask + b * ms[0] + h * ms[1] + i * ms[2];
    int64_t lo, hi, seen = 0, *bnd = J->bnd + mr * J->bnd_n;
    int zero = 1;
    flash_row_keys(J, b, h, i, &lo, &hi);
    for (int64_t j = lo; j <= hi; j++) {
      /* 8 keys a step where none starts a range: all -inf, or none with
       * the count past a range's first key and 8 short of the next */
      const int64_t at = seen % FLASH_SPLIT_KEYS;
      const unsigned inf = ms[3] == 1 && j + 7 <= hi ? flash_neg_inf8(mrow + j) : 1;
      if (inf == 0xFF || (inf == 0 && at > 0 && at + 8 <= FLASH_SPLIT_KEYS)) {
        seen += inf ? 0 : 8;
        zero = zero && (inf || zero8(mrow + j));
        j += 7;
        continue;
      }
      const float v = mrow[j * ms[3]];
      if (v == -INFINITY) continue;
      zero = zero && v == 0.0f;
      if (seen++ % FLASH_SPLIT_KEYS == 0) bnd[(seen - 1) / FLASH_SPLIT_KEYS] = j;
    }
    J->dense[mr] = zero && seen == hi - lo + 1;
    J->ranges[mr] = (seen + FLASH_SPLIT_KEYS - 1) / FLASH_SPLIT_KEYS;
    bnd[J->ranges[mr]] = hi + 1;
  }
}

/* Cuts the S * group rows of a (batch, kv head) into items (J->qb,
 * J->q_blocks): a query joins the item of the query before it when it
 * sees that query's last key (batch 0's, head 0's mask rows, whose last
 * visible keys masked_cut left in J->bnd: the cut only bounds the work, a
 * row's bits do not depend on it), at most rows_item rows an item. */
static void cut_items(flash_job *J) {
  const int64_t S = J->p->q_len, G = J->group, *ms = J->p->mask_strides;
  int64_t n = 0, in_item = 0;
  J->qb[0] = 0;
  for (int64_t i = 0; i < S; i++) {
    if (i > 0 && J->ranges[i - 1] > 0) { /* mask row i - 1 sees a key, the last hi */
      const int64_t hi = J->bnd[(i - 1) * J->bnd_n + J->ranges[i - 1]] - 1;
      if (J->mask[i * ms[2] + hi * ms[3]] == -INFINITY && in_item) J->qb[++n] = i * G, in_item = 0;
    }
    for (int64_t g = 0; g < G; g++) {
      if (in_item == J->rows_item) J->qb[++n] = i * G + g, in_item = 0;
      in_item++;
    }
  }
  J->qb[++n] = S * G;
  J->q_blocks = n;
}

rlx_status flash_masked_setup(cpu_ctx *ctx, flash_job *J, int threads) {
  const cpu_attention_params *p = J->p;
  const int64_t S = p->q_len, T = p->kv_len, B = p->batch;
  J->mask_heads = p->mask_strides[1] ? p->num_heads : 1;
  const int64_t mrows = B * J->mask_heads * S;
  J->bnd_n = T / FLASH_SPLIT_KEYS + 2;
  J->bnd = malloc((size_t)(mrows * J->bnd_n) * sizeof *J->bnd);
  J->ranges = malloc((size_t)mrows * sizeof *J->ranges);
  J->qb = malloc((size_t)(S * J->group + 1) * sizeof *J->qb);
  J->dense = malloc((size_t)mrows);
  if (!J->bnd || !J->ranges || !J->qb || !J->dense) {
    flash_masked_free(J);
    return rlx_set_error(RLX_ERR_NOMEM, "Attention: out of memory for %lld keys", (long long)T);
  }
  cpu_parallel_for(ctx, mrows, 1 + 4096 / (T + 1), masked_cut, J);
  J->max_ranges = 1;
  for (int64_t mr = 0; mr < mrows; mr++) J->max_ranges = J->ranges[mr] > J->max_ranges ? J->ranges[mr] : J->max_ranges;
  cut_items(J);
  /* few items for the threads: units of (item, key range) */
  if (threads > 1 && B * p->num_kv_heads * J->q_blocks < 2 * (int64_t)threads) J->splits = J->max_ranges;
  return RLX_OK;
}

void flash_masked_free(flash_job *J) {
  free(J->bnd);
  free(J->ranges);
  free(J->qb);
  free(J->dense);
  J->bnd = J->ranges = J->qb = NULL;
  J->dense = NULL;
}

/* Whether a row with visible cells [lo, hi] and mask row mrow (key stride
 * ks) sees cell j. */
static int sees(const float *mrow, int64_t ks, int64_t lo, int64_t hi, int64_t j) {
  return j >= lo && j <= hi && mrow[j * ks] != -INFINITY;
}

/* The item's R rows' mask rows into x->mrow; the rows whose mask row and
 * key range differ from the row before (x->mdist) and their count. */
static int64_t item_masks(const flash_job *J, const item_scratch *x, int64_t b, int64_t hk, int64_t first,
                          int64_t R) {
  int64_t n = 0;
  for (int64_t r = 0; r < R; r++) {
    x->mrow[r] = mask_of(J, b, hk, first, r);
    if (r == 0 || x->mrow[r] != x->mrow[r - 1] || x->row_lo[r] != x->row_lo[r - 1] ||
        x->row_hi[r] != x->row_hi[r - 1])
      x->mdist[n++] = r;
  }
  return n;
}

/* The cells in [key_lo, key_hi] that one of the item's rows sees (nd
 * distinct rows, item_masks), in order, into keys; their count. */
static int64_t gather_keys(const flash_job *J, const item_scratch *x, int64_t nd, int64_t key_lo, int64_t key_hi) {
  const int64_t ks = J->p->mask_strides[3];
  int64_t n = 0;
  if (nd == 1) { /* one query's rows (a decode step's item) */
    const float *mrow = x->mrow[x->mdist[0]];
    for (int64_t j = key_lo; j <= key_hi; j++)
      if (mrow[j * ks] != -INFINITY) x->keys[n++] = (int32_t)j;
    return n;
  }
  for (int64_t j = key_lo; j <= key_hi; j++)
    for (int64_t d = 0; d < nd; d++) {
      const int64_t r = x->mdist[d];
      if (sees(x->mrow[r], ks, x->row_lo[r], x->row_hi[r], j)) {
        x->keys[n++] = (int32_t)j;
        break;
      }
    }
  return n;
}

/* The rows [*r0, *r1) of an item that block cells[0..nk) is computed for:
 * first..last row that sees one of its cells; 0 when none does. */
static int block_rows(const flash_job *J, const item_scratch *x, int64_t R, const int32_t *cells, int64_t nk,
                      int64_t *r0, int64_t *r1) {
  const int64_t ks = J->p->mask_strides[3];
  *r0 = R, *r1 = 0;
  for (int64_t r = 0; r < R; r++) {
    const float *mrow = x->mrow[r];
    for (int64_t k = 0; k < nk; k++)
      if (sees(mrow, ks, x->row_lo[r], x->row_hi[r], cells[k])) {
        if (r < *r0) *r0 = r;
        *r1 = r + 1;
        break;
      }
  }
  return *r0 < *r1;
}

/* The first of cells[0..nk) (sorted) at or past cell j. */
static int64_t first_at(const int32_t *cells, int64_t nk, int64_t j) {
  if (cells[nk - 1] - cells[0] == nk - 1) /* one run of cells (a prefill's block) */
    return j <= cells[0] ? 0 : j - cells[0] < nk ? j - cells[0] : nk;
  int64_t a = 0, b = nk;
  while (a < b) {
    const int64_t mid = (a + b) / 2;
    if (cells[mid] < j) a = mid + 1;
    else b = mid;
  }
  return a;
}

/* Row r's cells within block cells[0..nk) (sorted): [*c0, *c1) of it. */
static void row_window(const int32_t *cells, int64_t nk, int64_t lo, int64_t hi, int64_t *c0, int64_t *c1) {
  *c0 = first_at(cells, nk, lo);
  *c1 = hi < lo ? *c0 : first_at(cells, nk, hi + 1);
}

/* srow[c0..c1) += the mask entries of their cells: one vector add where
 * the cells are one run and the mask row is contiguous (or one value). */
static void add_mask(const cpu_vec_ops *vo, float *srow, const float *mrow, int64_t ks, const int32_t *cells,
                     int64_t c0, int64_t c1) {
  if (c0 >= c1) return;
  if (ks <= 1 && cells[c1 - 1] - cells[c0] == c1 - 1 - c0) {
    vo->binary(RLX_BIN_ADD, srow + c0, 1, mrow + cells[c0] * ks, (int)ks, srow + c0, c1 - c0);
    return;
  }
  for (int64_t k = c0; k < c1; k++) srow[k] += mrow[cells[k] * ks];
}

/* l[r] += the R rows' nk scores (row stride lds), each row's in key
 * order: the same sums as one row at a time, rows side by side so that
 * the additions of 8 rows are in flight together. */
static void sum_rows(const float *s, int64_t lds, double *l, int64_t R, int64_t nk) {
  int64_t r = 0;
  for (; r + 8 <= R; r += 8) {
    double a[8];
    for (int i = 0; i < 8; i++) a[i] = l[r + i];
    for (int64_t k = 0; k < nk; k++)
      for (int i = 0; i < 8; i++) a[i] += s[(r + i) * lds + k];
    for (int i = 0; i < 8; i++) l[r + i] = a[i];
  }
  for (; r < R; r++) {
    double a = l[r];
    for (int64_t k = 0; k < nk; k++) a += s[r * lds + k];
    l[r] = a;
  }
}

/* K or V rows (base) of block cells[0..nk) as f32: read in place when
 * they are F32 and one run of cells (*ld their stride), else copied or
 * converted into x->kv (*ld D). Copied rows beat reading them in place
 * one stride apart (N sequences decoded in step: cells N apart). */
static const float *block_kv(const flash_job *J, const item_scratch *x, const void *base, const float *rows,
                             int64_t b, int64_t hk, const int32_t *cells, int64_t nk, int64_t *ld) {
  const int64_t D = J->p->head_dim;
  if (!J->tiles && cells[nk - 1] - cells[0] == nk - 1) {
    *ld = J->kf_row;
    return rows + cells[0] * J->kf_row;
  }
  for (int64_t k = 0; k < nk; k++)
    if (J->tiles) flash_load_kv_row(J, x->kv + k * D, base, b, hk, cells[k]);
    else memcpy(x->kv + k * D, rows + cells[k] * J->kf_row, (size_t)D * sizeof *x->kv);
  *ld = D;
  return x->kv;
}

/* Key range c of the item's R rows (see above) into x->O, m, l: all of a
 * row's scores in the range first, kept in Sc at their cell's place in the
 * gathered keys; then each row's max, its exponentials and their sum in
 * key order, and P V block by block. */
static void masked_range(const flash_job *J, const item_scratch *x, int64_t b, int64_t hk, int64_t first, int64_t R,
                         int64_t c) {
  const cpu_attention_params *p = J->p;
  const cpu_vec_ops *vo = J->vo;
  const int64_t D = p->head_dim, T = p->kv_len, Hkv = p->num_kv_heads, lds = J->lds, ks = p->mask_strides[3];
  for (int64_t r = 0; r < R; r++) {
    const int64_t mr = mask_row(J, b, hk, first, r), *bnd = J->bnd + mr * J->bnd_n;
    x->row_lo[r] = c < J->ranges[mr] ? bnd[c] : T;
    x->row_hi[r] = c < J->ranges[mr] ? bnd[c + 1] - 1 : -1;
  }
  int64_t key_lo, key_hi;
  flash_item_reset(J, x, R, &key_lo, &key_hi);
  const int64_t n = gather_keys(J, x, item_masks(J, x, b, hk, first, R), key_lo, key_hi);
  /* F32 rows in place (J->kf_row == J->vf_row: one layout) */
  const float *krows = (const float *)J->k + flash_head_row(p, Hkv, T, b, hk, 0);
  const float *vrows = (const float *)J->v + flash_head_row(p, Hkv, T, b, hk, 0);
  for (int pass = 0; pass < 2; pass++)
    for (int64_t k0 = 0, blk = 0; k0 < n; k0 += FLASH_BK, blk++) {
      const int64_t nk = n - k0 < FLASH_BK ? n - k0 : FLASH_BK;
      const int32_t *cells = x->keys + k0;
      int64_t *r0 = &x->blk[2 * blk], *r1 = r0 + 1, ld;
      if (pass == 0 && !block_rows(J, x, R, cells, nk, r0, r1)) *r0 = *r1 = 0;
      if (*r0 == *r1) continue;
      float *sb = x->Sc + k0;
      const float *kv = block_kv(J, x, pass ? J->v : J->k, pass ? vrows : krows, b, hk, cells, nk, &ld);
      if (pass == 0) vo->qk_rows(x->Q + *r0 * D, D, kv, ld, sb + *r0 * lds, lds, *r1 - *r0, nk, D);
      for (int64_t r = *r0; r < *r1; r++) {
        float *srow = sb + r * lds;
        int64_t c0, c1;
        row_window(cells, nk, x->row_lo[r], x->row_hi[r], &c0, &c1);
        if (pass == 0) {
          flash_softcap_row(p, vo, srow, nk);
          if (!J->dense[mask_row(J, b, hk, first, r)]) add_mask(vo, srow, x->mrow[r], ks, cells, c0, c1);
          float mb = c0 < c1 ? vo->max(srow + c0, c1 - c0) : -INFINITY;
          /* a NaN score poisons the row (as the reference's softmax) */
          if (!isnan(x->m[r]) && (isnan(mb) || mb > x->m[r])) x->m[r] = mb;
          continue;
        }
        if (c0 >= c1 || x->m[r] == -INFINITY) { /* nothing visible here */
          memset(srow, 0, (size_t)nk * sizeof *srow);
          continue;
        }
        vo->exp_shift_sum(srow + c0, x->m[r], srow + c0, c1 - c0);
        if (c0 > 0) memset(srow, 0, (size_t)c0 * sizeof *srow);
        if (c1 < nk) memset(srow + c1, 0, (size_t)(nk - c1) * sizeof *srow);
      }
      if (pass == 0) continue;
      /* in key order: masked keys and those outside a row's window add exact zeros */
      sum_rows(sb + *r0 * lds, lds, x->l + *r0, *r1 - *r0, nk);
      vo->pv_tile(sb + *r0 * lds, lds, kv, ld, x->O + *r0 * D, D, *r1 - *r0, nk, D);
    }
}

/* Merges a row's next key range (o, m, l: its unnormalized output, max and
 * sum) into what came before (oa, ma, la), ranges in order: the same
 * steps whether the ranges ran on one thread or on several. */
static void merge_range(float *oa, float *ma, double *la, const float *o, float m, double l, int64_t D) {
  if (m == -INFINITY || isnan(*ma)) return;
  if (isnan(m)) {
    *ma = m, *la = NAN;
    return;
  }
  if (m > *ma) {
    const float w = *ma == -INFINITY ? 0.0f : expf(*ma - m);
    for (int64_t d = 0; d < D; d++) oa[d] *= w;
    *la *= w;
    *ma = m;
  }
  const float w = expf(m - *ma);
  for (int64_t d = 0; d < D; d++) oa[d] += w * o[d];
  *la += (double)w * l;
}

/* A masked item's floats in J->part per range: O [rows, D], m [rows], l [rows] (double). */
static float *part_m(const flash_job *J, float *part) { return part + J->rows_item * J->p->head_dim; }
static double *part_l(const flash_job *J, float *part) { return flash_align_double(part_m(J, part) + J->rows_item); }

/* Items under a custom mask: units are items (their key ranges one after
 * the other, merged as they come) or, with few items, (item, range) pairs
 * that leave their range in J->part for masked_merge. */
void flash_masked_items(void *arg, int64_t begin, int64_t end, int thread) {
  flash_job *J = arg;
  const int64_t D = J->p->head_dim, Hkv = J->p->num_kv_heads, per = J->splits;
  const item_scratch x = flash_scratch_of(J, thread);
  for (int64_t unit = begin; unit < end; unit++) {
    const int64_t item = unit / per, bh = item / J->q_blocks, b = bh / Hkv, hk = bh % Hkv;
    const int64_t first = J->qb[item % J->q_blocks], R = J->qb[item % J->q_blocks + 1] - first;
    flash_item_load(J, &x, b, hk, first, R);
    if (J->part) {
      float *part = J->part + (size_t)unit * J->part_floats;
      masked_range(J, &x, b, hk, first, R, unit % per);
      memcpy(part, x.O, (size_t)(R * D) * sizeof *x.O);
      memcpy(part_m(J, part), x.m, (size_t)R * sizeof *x.m);
      memcpy(part_l(J, part), x.l, (size_t)R * sizeof *x.l);
      continue;
    }
    memset(x.Oa, 0, (size_t)(R * D) * sizeof *x.Oa);
    for (int64_t r = 0; r < R; r++) x.ma[r] = -INFINITY, x.la[r] = 0.0;
    for (int64_t c = 0; c < J->max_ranges; c++) {
      masked_range(J, &x, b, hk, first, R, c);
      for (int64_t r = 0; r < R; r++) merge_range(x.Oa + r * D, &x.ma[r], &x.la[r], x.O + r * D, x.m[r], x.l[r], D);
    }
    flash_item_store(J, x.Oa, x.ma, x.la, b, hk, first, R);
  }
}

/* The ranges that masked_items left in J->part, merged in order (items). */
void flash_masked_merge(void *arg, int64_t begin, int64_t end, int thread) {
  flash_job *J = arg;
  const int64_t D = J->p->head_dim, Hkv = J->p->num_kv_heads;
  const item_scratch x = flash_scratch_of(J, thread);
  for (int64_t item = begin; item < end; item++) {
    const int64_t bh = item / J->q_blocks, b = bh / Hkv, hk = bh % Hkv;
    const int64_t first = J->qb[item % J->q_blocks], R = J->qb[item % J->q_blocks + 1] - first;
    memset(x.Oa, 0, (size_t)(R * D) * sizeof *x.Oa);
    for (int64_t r = 0; r < R; r++) x.ma[r] = -INFINITY, x.la[r] = 0.0;
    for (int64_t c = 0; c < J->splits; c++) {
      float *part = J->part + (size_t)(item * J->splits + c) * J->part_floats;
      for (int64_t r = 0; r < R; r++)
        merge_range(x.Oa + r * D, &x.ma[r], &x.la[r], part + r * D, part_m(J, part)[r], part_l(J, part)[r], D);
    }
    flash_item_store(J, x.Oa, x.ma, x.la, b, hk, first, R);
  }
}

