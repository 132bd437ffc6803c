/* llm_seq_state.c — a sequence's state moved about: the context shift
 * (discard and re-rope) and saving to a file and back (rlx.h).
 *
 * The file, little-endian:
 *   magic "RLXSEQ01"
 *   u64 fingerprint   of the model's sizes, RoPE and cache dtype (below)
 *   u32 n_layer, u32 row_bytes (one K or V row in the cache's dtype)
 *   i64 n_past
 *   i32 tokens[n_past]
 *   per layer l: K rows of positions 0 .. n_past - 1, then V rows
 *   u64 FNV-1a of every byte before it
 * A loader checks every field and the length and the sum before it
 * changes anything. */
#include "model.h"

#include "../ir/ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STATE_MAGIC "RLXSEQ01"
#define STATE_HEADER (8 + 8 + 4 + 4 + 8)

static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}
#define FNV_START 0xcbf29ce484222325ull

/* The model's identity as far as its cache rows go: what shapes them. */
static uint64_t fingerprint(const rlx_llm *m) {
  rlx_llm_info in;
  rlx_llm_get_info(m, &in);
  const int64_t ints[] = {in.n_vocab, in.n_embd, in.n_layer, in.n_head, in.n_head_kv, in.head_dim, in.n_ff,
                          (int64_t)in.kv_cache_type, in.rope_freq_factors};
  const float floats[] = {in.rope_base, in.norm_eps, in.rope_freq_scale};
  uint64_t h = fnv1a(FNV_START, in.arch, strlen(in.arch));
  h = fnv1a(h, in.rope_scaling, strlen(in.rope_scaling));
  h = fnv1a(h, ints, sizeof ints);
  return fnv1a(h, floats, sizeof floats);
}

static void put_u32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_u64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get_u32(const unsigned char *p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
  return v;
}
static uint64_t get_u64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* The file's bytes for n positions; 0 past SIZE_MAX (not reached: n <= n_ctx). */
static size_t state_bytes(const rlx_llm *m, int64_t n) {
  return STATE_HEADER + (size_t)n * 4 + 2 * (size_t)llm_n_layer(m) * (size_t)n * llm_row_bytes(m) + 8;
}

static int bad(const rlx_llm *m, int32_t seq) { return !m || seq < 0 || seq >= rlx_llm_n_seq(m); }

rlx_status rlx_llm_seq_save(rlx_llm *m, int32_t seq, const char *path) {
  if (bad(m, seq) || !path)
    return rlx_set_error(RLX_ERR_INVALID, "rlx_llm_seq_save: %s", !m || !path ? "NULL argument" : "bad sequence");
  llm_pool *p = llm_pool_of(m);
  const int64_t n = p->n_past[seq];
  const size_t total = state_bytes(m, n);
  unsigned char *buf = malloc(total);
  int64_t *cells = malloc((size_t)(n ? n : 1) * sizeof *cells);
  rlx_status st = RLX_OK;
  if (!buf || !cells) st = rlx_set_error(RLX_ERR_NOMEM, "rlx_llm_seq_save: out of memory for %zu bytes", total);
  if (st == RLX_OK) {
    memcpy(buf, STATE_MAGIC, 8);
    put_u64(buf + 8, fingerprint(m));
    put_u32(buf + 16, (uint32_t)llm_n_layer(m));
    put_u32(buf + 20, (uint32_t)llm_row_bytes(m));
    put_u64(buf + 24, (uint64_t)n);
    unsigned char *q = buf + STATE_HEADER;
    for (int64_t i = 0; i < n; i++, q += 4) put_u32(q, (uint32_t)p->tokens[seq * p->n_ctx + i]);
    llm_pool_seq_cells(p, seq, cells);
    if (n) st = llm_cells_io(m, cells, n, q, 0);
  }
  if (st == RLX_OK) {
    put_u64(buf + total - 8, fnv1a(FNV_START, buf, total - 8));
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(buf, 1, total, f) == total;
    if (f && fclose(f)) ok = 0;
    if (!ok) st = rlx_set_error(RLX_ERR_IO, "rlx_llm_seq_save: cannot write %s", path);
  }
  free(buf);
  free(cells);
  return st;
}

/* The whole file into *buf (at most `cap` bytes, else RLX_ERR_FORMAT). */
static rlx_status read_file(const char *path, size_t cap, unsigned char **buf, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return rlx_set_error(RLX_ERR_IO, "rlx_llm_seq_load: cannot open %s", path);
  *buf = malloc(cap + 1);
  if (!*buf) {
    fclose(f);
    return rlx_set_error(RLX_ERR_NOMEM, "rlx_llm_seq_load: out of memory");
  }
  *len = fread(*buf, 1, cap + 1, f);
  int err = ferror(f);
  fclose(f);
  if (err) return rlx_set_error(RLX_ERR_IO, "rlx_llm_seq_load: cannot read %s", path);
  if (*len > cap)
    return rlx_set_error(RLX_ERR_FORMAT, "rlx_llm_seq_load: %s is longer than a state of this model's context (%zu "
                         "bytes)", path, cap);
  return RLX_OK;
}

/* The header and sizes of a state file of len bytes; n_past in *n. */
static rlx_status check_state(rlx_llm *m, const char *path, const unsigned char *b, size_t len, int64_t *n) {
  if (len < STATE_HEADER + 8 || memcmp(b, STATE_MAGIC, 8))
    return rlx_set_error(RLX_ERR_FORMAT, "rlx_llm_seq_load: %s is not a sequence state (magic %s)", path, STATE_MAGIC);
  if (get_u64(b + 8) != fingerprint(m) || get_u32(b + 16) != (uint32_t)llm_n_layer(m) ||
      get_u32(b + 20) != (uint32_t)llm_row_bytes(m))
    return rlx_set_error(RLX_ERR_FORMAT, "rlx_llm_seq_load: %s was saved by another model or cache type", path);
  uint64_t np = get_u64(b + 24);
  if (np > (uint64_t)rlx_llm_n_ctx(m))
    return rlx_set_error(RLX_ERR_FORMAT, "rlx_llm_seq_load: %s holds %llu positions; the context is %lld", path,
                         (unsigned long long)np, (long long)rlx_llm_n_ctx(m));
  *n = (int64_t)np;
  if (len != state_bytes(m, *n))
    return rlx_set_error(RLX_ERR_FORMAT, "rlx_llm_seq_load: %s is %zu bytes; %lld positions take %zu", path, len,
                         (long long)*n, state_bytes(m, *n));
  if (get_u64(b + len - 8) != fnv1a(FNV_START, b, len - 8))
    return rlx_set_error(RLX_ERR_FORMAT, "rlx_llm_seq_load: %s is damaged (its checksum differs)", path);
  const int64_t V = rlx_llm_vocab_size(m);
  for (int64_t i = 0; i < *n; i++) {
    uint32_t t = get_u32(b + STATE_HEADER + 4 * i);
    if (t >= (uint64_t)V)
      return rlx_set_error(RLX_ERR_FORMAT, "rlx_llm_seq_load: %s: token %lld is %u, outside the vocabulary", path,
                           (long long)i, t);
  }
  return RLX_OK;
}

rlx_status rlx_llm_seq_load(rlx_llm *m, int32_t seq, const char *path) {
  if (bad(m, seq) || !path)
    return rlx_set_error(RLX_ERR_INVALID, "rlx_llm_seq_load: %s", !m || !path ? "NULL argument" : "bad sequence");
  unsigned char *buf = NULL;
  size_t len = 0;
  int64_t n = 0, *cells = NULL;
  rlx_status st = read_file(path, state_bytes(m, rlx_llm_n_ctx(m)), &buf, &len);
  if (st == RLX_OK) st = check_state(m, path, buf, len, &n);
  if (st == RLX_OK && !(cells = malloc((size_t)(n ? n : 1) * sizeof *cells)))
    st = rlx_set_error(RLX_ERR_NOMEM, "rlx_llm_seq_load: out of memory");
  if (st == RLX_OK) {
    llm_pool *p = llm_pool_of(m);
    llm_pool_truncate(p, seq, 0);
    /* free cells, anywhere: the other sequences hold at most (n_seq - 1) * n_ctx */
    int64_t k = 0;
    for (int64_t c = 0; c < p->n_cells && k < n; c++)
      if (!p->seqs[c]) cells[k++] = c;
    for (int64_t i = 0; i < n; i++) {
      p->seqs[cells[i]] = 1ull << seq;
      p->pos[cells[i]] = (int32_t)i;
      p->tokens[seq * p->n_ctx + i] = (int32_t)get_u32(buf + STATE_HEADER + 4 * i);
    }
    p->n_past[seq] = n;
    if (n) st = llm_cells_io(m, cells, n, buf + STATE_HEADER + 4 * n, 1);
    if (st) llm_pool_truncate(p, seq, 0);
  }
  free(buf);
  free(cells);
  return st;
}

/* ---------------------------------------------------------------- context shift */

/* Gives seq a cell of its own for each of cells[0..n) that another
 * sequence also sees (rows copied), so moving its positions moves only its
 * own; cells[] is updated. */
static rlx_status unshare(rlx_llm *m, int32_t seq, int64_t *cells, int64_t n) {
  llm_pool *p = llm_pool_of(m);
  const uint64_t bit = 1ull << seq;
  int64_t k = 0;
  for (int64_t i = 0; i < n; i++) k += p->seqs[cells[i]] != bit;
  if (!k) return RLX_OK;
  int64_t *from = malloc((size_t)k * sizeof *from), *to = malloc((size_t)k * sizeof *to);
  void *rows = malloc((size_t)k * 2 * (size_t)llm_n_layer(m) * llm_row_bytes(m));
  rlx_status st = from && to && rows ? RLX_OK : rlx_set_error(RLX_ERR_NOMEM, "rlx_llm_seq_shift: out of memory");
  k = 0;
  for (int64_t i = 0; i < n && st == RLX_OK; i++)
    if (p->seqs[cells[i]] != bit) from[k++] = cells[i];
  if (st == RLX_OK) st = llm_cells_io(m, from, k, rows, 0);
  for (int64_t i = 0, j = 0; i < n && st == RLX_OK; i++) {
    if (p->seqs[cells[i]] == bit) continue;
    int64_t c;
    if (!llm_pool_find(p, 1, 0, &c)) {
      st = rlx_set_error(RLX_ERR_NOMEM, "rlx_llm_seq_shift: the KV pool has no free cell to copy a shared row into");
      break;
    }
    p->seqs[cells[i]] &= ~bit;
    p->seqs[c] = bit;
    p->pos[c] = p->pos[cells[i]];
    cells[i] = to[j++] = c;
  }
  if (st == RLX_OK) st = llm_cells_io(m, to, k, rows, 1);
  free(from);
  free(to);
  free(rows);
  return st;
}

rlx_status rlx_llm_seq_shift(rlx_llm *m, int32_t seq, int64_t n_keep, int64_t n_discard) {
  if (bad(m, seq))
    return rlx_set_error(RLX_ERR_INVALID, "rlx_llm_seq_shift: %s", !m ? "model is NULL" : "bad sequence");
  llm_pool *p = llm_pool_of(m);
  const int64_t n = p->n_past[seq];
  if (n_keep < 0 || n_discard < 0 || n_keep > n - n_discard)
    return rlx_set_error(RLX_ERR_INVALID, "rlx_llm_seq_shift: keep %lld and discard %lld of %lld positions",
                         (long long)n_keep, (long long)n_discard, (long long)n);
  if (!n_discard) return RLX_OK;
  int64_t *cells = malloc((size_t)n * sizeof *cells);
  if (!cells) return rlx_set_error(RLX_ERR_NOMEM, "rlx_llm_seq_shift: out of memory");
  llm_pool_seq_cells(p, seq, cells);
  const uint64_t bit = 1ull << seq;
  for (int64_t i = n_keep; i < n_keep + n_discard; i++)
    if (!(p->seqs[cells[i]] &= ~bit)) p->pos[cells[i]] = -1;
  int64_t *moved = cells + n_keep + n_discard, n_moved = n - n_keep - n_discard;
  rlx_status st = unshare(m, seq, moved, n_moved);
  if (st == RLX_OK) st = llm_rerope(m, moved, n_moved, -n_discard);
  if (st == RLX_OK) {
    for (int64_t i = 0; i < n_moved; i++) p->pos[moved[i]] -= (int32_t)n_discard;
    int32_t *tok = p->tokens + seq * p->n_ctx;
    memmove(tok + n_keep, tok + n_keep + n_discard, (size_t)n_moved * sizeof *tok);
    p->n_past[seq] = n - n_discard;
  } else {
    /* the moved rows are half done: keep what is certain */
    llm_pool_truncate(p, seq, n_keep);
  }
  free(cells);
  return st;
}
