/* kv_rows.c — reading and writing K/V rows of chosen cells of a decoder's
 * cache from the host (model.h llm_cache_view): a sequence's state saved
 * to a file and back, rows copied out of shared cells, keys re-roped by a
 * context shift. These are rare operations, so they go through the
 * session's ordinary interface a layer at a time (the last run's Assign
 * outputs read back, rlx_set_param to write) and cost a copy of each
 * layer's cache; the decode path never pays for them. A decoder split over
 * ranks that are threads (tensor parallelism) holds each row in pieces, a
 * rank's heads in its session: a rank's piece is the slice of the row at
 * rank * piece bytes, so rows read and written whole are what an unsplit
 * decoder's would be (state files move between tp sizes). */
#include "model.h"

#include "../backend/cpu/quant_blocks.h" /* ggml's block codecs: a quantized cache's rows */
#include "../ir/ir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The layer bytes of one K (or V) param. */
static size_t layer_bytes(const llm_kv_cache *kv) {
  return (size_t)kv->n_ctx * rlx_dtype_nbytes(kv->dtype, kv->kv_dim);
}

/* Cache `which` (2 l: K of layer l, 2 l + 1: its V) into buf. */
static rlx_status read_layer(const llm_cache_view *v, int64_t which, void *buf) {
  if (!*v->ran) {
    memset(buf, 0, layer_bytes(v->kv));
    return RLX_OK;
  }
  return rlx_output(v->sess, (int)(1 + which), buf, layer_bytes(v->kv));
}

static rlx_status write_layer(const llm_cache_view *v, int64_t which, const void *buf) {
  char name[48];
  snprintf(name, sizeof name, "cache.%c.%d", which % 2 ? 'v' : 'k', (int)(which / 2));
  return rlx_set_param(v->sess, name, buf, layer_bytes(v->kv));
}

/* A one-token run into a free cell, seeing only that cell: the session's
 * outputs then show the params just set. Its row is garbage in a cell no
 * sequence sees (finite: the query attends to itself). */
static rlx_status refresh(rlx_llm *m) {
  llm_pool *p = llm_pool_of(m);
  int64_t cell;
  if (!llm_pool_find(p, 1, 0, &cell))
    return rlx_set_error(RLX_ERR_NOMEM, "rlx_llm: the KV pool has no free cell to refresh its rows through");
  const int64_t T = llm_pool_key_len(p, cell + 1);
  const int32_t seq = 0, pos = 0, token = 0, row = 0;
  rlx_status st = llm_pool_mask(p, &seq, &pos, 1, T);
  if (st) return st;
  for (int64_t j = 0; j < T; j++) p->mask[j] = j == cell ? 0.0f : -INFINITY;
  float *logits = malloc((size_t)rlx_llm_vocab_size(m) * sizeof *logits);
  if (!logits) return rlx_set_error(RLX_ERR_NOMEM, "rlx_llm: out of memory");
  st = llm_run(m, &token, &pos, 1, cell, T, &row, 1, logits);
  free(logits);
  return st;
}

/* Each rank's each layer's K and V through fn(layer bytes, which, rank,
 * user): read, changed in place when fn says so (returns 1), written back;
 * then refreshed. */
typedef int (*layer_fn)(unsigned char *layer, int64_t which, int rank, void *user);

/* A rank of several processes holds a slice of the rows: another process
 * has the rest. */
static rlx_status whole_cache(const rlx_llm *m) {
  return llm_rank_of_world(m) ? rlx_set_error(RLX_ERR_UNSUPPORTED, "rlx_llm: the KV cache of a decoder split over "
                                              "processes is not read, moved or re-roped here (sequence save, load, "
                                              "copy, shift, and packing the pool's cells): each process holds a "
                                              "slice of its rows")
                              : RLX_OK;
}

static rlx_status each_layer(rlx_llm *m, layer_fn fn, void *user) {
  rlx_status st = whole_cache(m);
  if (st) return st;
  llm_cache_view v;
  llm_cache_view_of(m, 0, &v);
  unsigned char *buf = malloc(layer_bytes(v.kv));
  if (!buf) return rlx_set_error(RLX_ERR_NOMEM, "rlx_llm: out of memory for a layer of the KV cache");
  int wrote = 0;
  for (int r = 0; r < llm_n_rank(m) && st == RLX_OK; r++) {
    llm_cache_view_of(m, r, &v);
    for (int64_t w = 0; w < 2 * v.kv->n_layer && st == RLX_OK; w++) {
      st = read_layer(&v, w, buf);
      if (st == RLX_OK && fn(buf, w, r, user)) {
        st = write_layer(&v, w, buf);
        wrote = 1;
      }
    }
  }
  free(buf);
  /* set but not yet read back: until the refresh, the outputs show the old rows */
  if (wrote && st == RLX_OK) st = refresh(m);
  return st;
}

typedef struct {
  const int64_t *cells;
  int64_t n;
  size_t row, piece;   /* bytes of a whole row, and of a rank's piece of it */
  unsigned char *buf;
  int write;
} io_job;

static int io_layer(unsigned char *layer, int64_t which, int rank, void *user) {
  io_job *j = user;
  unsigned char *rows = j->buf + (size_t)which * (size_t)j->n * j->row + (size_t)rank * j->piece;
  for (int64_t i = 0; i < j->n; i++) {
    unsigned char *cell = layer + (size_t)j->cells[i] * j->piece;
    if (j->write) memcpy(cell, rows + (size_t)i * j->row, j->piece);
    else memcpy(rows + (size_t)i * j->row, cell, j->piece);
  }
  return j->write;
}

rlx_status llm_cells_io(rlx_llm *m, const int64_t *cells, int64_t n, void *buf, int write) {
  io_job j = {cells, n, llm_row_bytes(m), llm_row_bytes(m) / (size_t)llm_n_rank(m), buf, write};
  return each_layer(m, io_layer, &j);
}

typedef struct {
  const int64_t *cells;
  int64_t n;
  size_t row;  /* a rank's piece */
} pack_job;

/* cells[i] >= i, increasing: moving in order never overwrites a row still to move */
static int pack_layer(unsigned char *layer, int64_t which, int rank, void *user) {
  (void)which, (void)rank;
  pack_job *j = user;
  for (int64_t i = 0; i < j->n; i++)
    if (j->cells[i] != i) memcpy(layer + (size_t)i * j->row, layer + (size_t)j->cells[i] * j->row, j->row);
  return 1;
}

rlx_status llm_cells_pack(rlx_llm *m, const int64_t *cells, int64_t n) {
  pack_job j = {cells, n, llm_row_bytes(m) / (size_t)llm_n_rank(m)};
  return each_layer(m, pack_layer, &j);
}

typedef struct {
  const int64_t *cells;
  int64_t n;
  llm_cache_view v;
  const double *cos_t, *sin_t;  /* [n_rot / 2] of the delta */
  float *row;                   /* [kv_dim] */
} rope_job;

/* A cache row of n values of dtype t <-> f32: a block dtype's row decoded
 * or quantized again (ggml's reference quantization, as the graph's
 * Quantize writes it), a 16-bit one converted (rounded to nearest). */
static void load_row(const unsigned char *p, rlx_dtype t, float *f, int64_t n) {
  if (rlx_dtype_is_block(t)) {
    quant_dequantize_row(t, p, f, n);
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    uint16_t h;
    if (t == RLX_F32) memcpy(&f[i], p + 4 * i, 4);
    else memcpy(&h, p + 2 * i, 2), f[i] = t == RLX_F16 ? rlx_f16_to_f32(h) : rlx_bf16_to_f32(h);
  }
}

static void store_row(unsigned char *p, rlx_dtype t, const float *f, int64_t n) {
  if (rlx_dtype_is_block(t)) {
    quant_quantize_row(t, f, p, n);
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    uint16_t h = t == RLX_F16 ? rlx_f32_to_f16(f[i]) : rlx_f32_to_bf16(f[i]);
    if (t == RLX_F32) memcpy(p + 4 * i, &f[i], 4);
    else memcpy(p + 2 * i, &h, 2);
  }
}

/* Rotates each head of the cells' K rows (the pairs rlx's Rope rotates:
 * adjacent for normal, the halves of [0, n_rot) for neox), in f32 and
 * rounded back to the cache's dtype (a quantized row decoded, rotated and
 * quantized again, as llama.cpp shifts a quantized cache). */
static int rope_layer(unsigned char *layer, int64_t which, int rank, void *user) {
  (void)rank; /* a rank's piece is whole heads, rotated alike */
  rope_job *j = user;
  if (which % 2) return 0; /* values are not rotated */
  const rlx_dtype t = j->v.kv->dtype;
  const int64_t D = j->v.head_dim, half = j->v.n_rot / 2, dim = j->v.kv->kv_dim;
  const size_t row_bytes = rlx_dtype_nbytes(t, dim);
  for (int64_t c = 0; c < j->n; c++) {
    unsigned char *cell = layer + (size_t)j->cells[c] * row_bytes;
    load_row(cell, t, j->row, dim);
    for (int64_t h = 0; h < dim / D; h++) {
      float *head = j->row + h * D;
      for (int64_t i = 0; i < half; i++) {
        int64_t i0 = j->v.rope_mode == RLX_ROPE_NEOX ? i : 2 * i;
        int64_t i1 = j->v.rope_mode == RLX_ROPE_NEOX ? i + half : 2 * i + 1;
        double x0 = head[i0], x1 = head[i1];
        head[i0] = (float)(x0 * j->cos_t[i] - x1 * j->sin_t[i]);
        head[i1] = (float)(x0 * j->sin_t[i] + x1 * j->cos_t[i]);
      }
    }
    store_row(cell, t, j->row, dim);
  }
  return 1;
}

rlx_status llm_rerope(rlx_llm *m, const int64_t *cells, int64_t n, int64_t delta) {
  rope_job j = {cells, n, {0}, NULL, NULL, NULL};
  llm_cache_view_of(m, 0, &j.v);
  const int64_t half = j.v.n_rot / 2;
  double *tab = malloc((size_t)(2 * half) * sizeof *tab);
  j.row = malloc((size_t)j.v.kv->kv_dim * sizeof *j.row);
  if (!tab || !j.row) {
    free(tab);
    free(j.row);
    return rlx_set_error(RLX_ERR_NOMEM, "rlx_llm_seq_shift: out of memory");
  }
  /* the angle of a rotation is linear in the position (llama.c), so moving
   * by delta turns by delta times its frequency; the magnitude (YaRN's
   * mscale) was applied once, when the row was written */
  for (int64_t i = 0; i < half; i++) {
    tab[i] = cos((double)delta * j.v.rope_freq[i]);
    tab[half + i] = sin((double)delta * j.v.rope_freq[i]);
  }
  j.cos_t = tab;
  j.sin_t = tab + half;
  rlx_status st = n ? each_layer(m, rope_layer, &j) : RLX_OK;
  free(tab);
  free(j.row);
  return st;
}
