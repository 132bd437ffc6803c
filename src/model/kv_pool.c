/* kv_pool.c — the cells of the decoder's KV pool (model.h llm_pool): which
 * position of which sequences each cell holds, where a run's rows go, and
 * the mask that keeps every query to its own sequence's past. */
#include "model.h"

#include "../ir/ir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

rlx_status llm_pool_init(llm_pool *p, int32_t n_seq, int64_t n_ctx) {
  memset(p, 0, sizeof *p);
  p->n_seq = n_seq;
  p->n_ctx = n_ctx;
  p->n_cells = n_seq * n_ctx;
  size_t cells = (size_t)p->n_cells;
  p->pos = malloc(cells * sizeof *p->pos);
  p->seqs = calloc(cells, sizeof *p->seqs);
  p->n_past = calloc((size_t)n_seq, sizeof *p->n_past);
  p->tokens = malloc(cells * sizeof *p->tokens);
  if (!p->pos || !p->seqs || !p->n_past || !p->tokens) {
    llm_pool_free(p);
    return rlx_set_error(RLX_ERR_NOMEM, "rlx_llm_load: out of memory for the cells of %lld sequences of %lld",
                         (long long)n_seq, (long long)n_ctx);
  }
  for (size_t c = 0; c < cells; c++) p->pos[c] = -1;
  return RLX_OK;
}

void llm_pool_free(llm_pool *p) {
  free(p->pos);
  free(p->seqs);
  free(p->n_past);
  free(p->tokens);
  free(p->mask);
  memset(p, 0, sizeof *p);
}

void llm_pool_truncate(llm_pool *p, int32_t seq, int64_t n_past) {
  const uint64_t bit = 1ull << seq;
  for (int64_t c = 0; c < p->n_cells; c++)
    if ((p->seqs[c] & bit) && p->pos[c] >= n_past) {
      /* the rows stay, masked, until a run writes over them */
      if (!(p->seqs[c] &= ~bit)) p->pos[c] = -1;
    }
  if (p->n_past[seq] > n_past) p->n_past[seq] = n_past;
}

int64_t llm_pool_find(const llm_pool *p, int64_t want, int64_t from, int64_t *start) {
  int64_t best = 0, best_start = from;
  for (int64_t c = from; c < p->n_cells;) {
    if (p->seqs[c]) {
      c++;
      continue;
    }
    int64_t e = c;
    while (e < p->n_cells && !p->seqs[e] && e - c < want) e++;
    if (e - c == want) {
      *start = c;
      return want;
    }
    if (e - c > best) best = e - c, best_start = c;
    c = e;
  }
  *start = best_start;
  return best;
}

int64_t llm_pool_after(const llm_pool *p, uint64_t seqs) {
  for (int64_t c = p->n_cells - 1; c >= 0; c--)
    if (p->seqs[c] & seqs) return c + 1;
  return 0;
}

int64_t llm_pool_live(const llm_pool *p, int64_t *cells) {
  int64_t n = 0;
  for (int64_t c = 0; c < p->n_cells; c++)
    if (p->seqs[c]) cells[n++] = c;
  return n;
}

void llm_pool_pack(llm_pool *p, const int64_t *cells, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    p->pos[i] = p->pos[cells[i]];
    p->seqs[i] = p->seqs[cells[i]];
  }
  for (int64_t c = n; c < p->n_cells; c++) {
    p->pos[c] = -1;
    p->seqs[c] = 0;
  }
}

int64_t llm_pool_key_len(const llm_pool *p, int64_t end) {
  int64_t hi = end;
  for (int64_t c = p->n_cells - 1; c >= hi; c--)
    if (p->seqs[c]) {
      hi = c + 1;
      break;
    }
  int64_t t = (hi + LLM_KV_BUCKET - 1) / LLM_KV_BUCKET * LLM_KV_BUCKET;
  return t < p->n_cells ? t : p->n_cells;
}

rlx_status llm_pool_mask(llm_pool *p, const int32_t *seq, const int32_t *pos, int64_t S, int64_t T) {
  size_t need = (size_t)ir_size_mul(S, T);  /* S <= LLM_MAX_BATCH, T <= n_cells: far below the limit */
  if (need > p->mask_cap) {
    float *m = realloc(p->mask, need * sizeof *m);
    if (!m)
      return rlx_set_error(RLX_ERR_NOMEM, "rlx_llm_decode: out of memory for a %lldx%lld mask", (long long)S,
                           (long long)T);
    p->mask = m;
    p->mask_cap = need;
  }
  for (int64_t i = 0; i < S; i++) {
    const uint64_t bit = 1ull << seq[i];
    float *row = p->mask + i * T;
    for (int64_t j = 0; j < T; j++) row[j] = (p->seqs[j] & bit) && p->pos[j] <= pos[i] ? 0.0f : -INFINITY;
  }
  return RLX_OK;
}

void llm_pool_seq_cells(const llm_pool *p, int32_t seq, int64_t *cells) {
  const uint64_t bit = 1ull << seq;
  for (int64_t c = 0; c < p->n_cells; c++)
    if ((p->seqs[c] & bit) && p->pos[c] < p->n_past[seq]) cells[p->pos[c]] = c;
}
