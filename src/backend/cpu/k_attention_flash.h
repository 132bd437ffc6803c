/* k_attention_flash.h — the CPU attention's tiled kernel (k_attention.c)
 * and its path under a custom mask (k_attention_masked.c): the job they
 * share and the helpers both use. */
#ifndef RLX_K_ATTENTION_FLASH_H
#define RLX_K_ATTENTION_FLASH_H

#include "cpu.h"
#include "linalg_rows.h"
#include "vec.h"

#include <string.h>

#define FLASH_BK 64       /* keys per block */
#define FLASH_ROWS 64     /* query rows (query heads x queries) per item, about */
#define FLASH_DOT_ROWS 8  /* at most this many rows (decode): scores as dot products with K's rows */
#define FLASH_SPLIT_KEYS 256 /* keys per split at least, when the keys are split; masked: keys per range */
#define FLASH_MASKED_SCORES (256 * 1024) /* masked_items: scores kept per thread, at most about */

typedef struct {
  const cpu_attention_params *p;
  const cpu_vec_ops *vo;
  rlx_dtype dt;                 /* of q and out */
  rlx_dtype kv_dt;              /* of k and v: dt, or a block dtype (dt F32) */
  size_t kv_row;                /* bytes of a head's row of k or v */
  const void *q, *k, *v;
  void *out;
  const float *mask;            /* custom mask (F32) or NULL */
  int64_t group, t8;
  /* an item: rows [first, first + rows_item) of a (batch, kv head)'s S * group
   * rows, row r being query r / group of head hk * group + r % group;
   * q_blocks items per (batch, kv head); masked: item q's rows are
   * [qb[q], qb[q + 1]), at most rows_item (flash_masked_setup) */
  int64_t rows_item, q_blocks, *qb;
  int64_t lds;                  /* row stride of the scores: FLASH_BK, or the keys (masked_items) */
  int64_t splits, split_keys;   /* key ranges per item (1: no split), keys per range */
  float *part;                  /* splits > 1: per (item, range): O [rows, D], m [rows], l [rows] */
  /* masked_items: mask rows (b, h if the mask has heads, i), each's key
   * ranges (masked_cut), the most of them; max_ranges key ranges per item
   * (splits 1) or per unit (splits max_ranges, part set) */
  int64_t mask_heads, bnd_n, *bnd, *ranges, max_ranges;
  uint8_t *dense;               /* per mask row: its keys first..last all visible, their entries +-0 */
  size_t part_floats;
  float *kt;                    /* [B, Hkv, D, t8], or NULL: the rows path */
  const float *kf, *vf;         /* K (rows path) / V as f32 rows, or NULL: read in place (F32) or per tile */
  int tiles;                    /* masked_items: K and V converted a key block at a time (not F32) */
  int64_t kf_row, vf_row;       /* row strides of kf or k, vf or v, in elements */
  float *scratch;               /* per thread: scratch_floats */
  size_t scratch_floats;
  float scale;
} flash_job;

/* One thread's scratch for an item: Q, scores (rows x J->lds), O, m, l
 * (double), the rows' visible keys; for masked_items each key block's
 * first and last row, the key ranges merged so far (Oa, ma, la), one key
 * block of K or V rows as f32 (kv: FLASH_BK x D), the rows' mask rows
 * (mrow) and those unlike the row before (mdist), and the keys the
 * item's rows see in a range (keys: up to T cells). */
typedef struct {
  float *Q, *Sc, *O, *m, *Oa, *ma, *kv;
  double *l, *la;
  int64_t *row_lo, *row_hi, *blk, *mdist;
  const float **mrow;
  int32_t *keys;
} item_scratch;

/* A bit per float of m[0..8) that is -inf (bit i for m[i]): masks are
 * scanned 8 entries a step (a pool's rows are mostly runs of -inf). */
static inline unsigned flash_neg_inf8(const float *m) {
  uint32_t u[8];
  unsigned bits = 0;
  memcpy(u, m, sizeof u);
  for (int i = 0; i < 8; i++) bits |= (unsigned)(u[i] == 0xff800000u) << i;
  return bits;
}

/* Element offset of row (b, h, s) of a [B, S, H, D] or [B, H, S, D] tensor. */
int64_t flash_head_row(const cpu_attention_params *p, int64_t heads, int64_t len, int64_t b, int64_t h, int64_t s);
void flash_load_kv_row(const flash_job *J, float *dst, const void *base, int64_t b, int64_t hk, int64_t j);
void flash_row_keys(const flash_job *J, int64_t b, int64_t h, int64_t i, int64_t *lo, int64_t *hi);
double *flash_align_double(float *f);
item_scratch flash_scratch_of(const flash_job *J, int thread);
void flash_item_load(const flash_job *J, const item_scratch *x, int64_t b, int64_t hk, int64_t first, int64_t R);
void flash_item_reset(const flash_job *J, const item_scratch *x, int64_t R, int64_t *key_lo, int64_t *key_hi);
void flash_item_store(const flash_job *J, float *O, const float *m, const double *l, int64_t b, int64_t hk,
                      int64_t first, int64_t R);
void flash_softcap_row(const cpu_attention_params *p, const cpu_vec_ops *vo, float *srow, int64_t nk);

/* Under a custom mask (k_attention_masked.c): the key ranges of every mask
 * row, the items (runs of one sequence's queries), J->max_ranges and
 * J->splits; flash_masked_free frees what it allocated. */
rlx_status flash_masked_setup(cpu_ctx *ctx, flash_job *J, int threads);
void flash_masked_free(flash_job *J);
void flash_masked_items(void *arg, int64_t begin, int64_t end, int thread);
void flash_masked_merge(void *arg, int64_t begin, int64_t end, int thread);

#endif
