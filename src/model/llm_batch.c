/* llm_batch.c — several sequences in one decoder (rlx.h rlx_llm_decode):
 * a batch placed into the KV pool's cells (kv_pool.c) and run as one
 * graph, and the per-sequence bookkeeping (n_past, truncate, copy).
 * rlx_llm_eval is a batch of sequence 0. */
#include "model.h"

#include "../ir/ir.h"

#include <stdlib.h>
#include <string.h>

/* Entry e's sequence. */
static int32_t seq_of(const int32_t *seq, int64_t e) { return seq ? seq[e] : 0; }

/* Whether entry e of n returns logits: want[e], or every entry (want NULL,
 * !last_only), or only the last (last_only). */
static int wanted(const int8_t *want, int last_only, int64_t e, int64_t n) {
  return last_only ? e == n - 1 : !want || want[e];
}

/* Checks the whole batch before anything changes. */
static rlx_status check_batch(rlx_llm *m, int64_t n, const int32_t *tok, const int32_t *seq, const char *fn) {
  const llm_pool *p = llm_pool_of(m);
  const int64_t V = rlx_llm_vocab_size(m);
  int64_t count[LLM_MAX_SEQ] = {0};
  for (int64_t e = 0; e < n; e++) {
    int32_t s = seq_of(seq, e);
    if (s < 0 || s >= p->n_seq)
      return rlx_set_error(RLX_ERR_INVALID, "%s: entry %lld: sequence %d is outside [0, %d)", fn, (long long)e, s,
                           p->n_seq);
    if (tok[e] < 0 || tok[e] >= V)
      return rlx_set_error(RLX_ERR_INVALID, "%s: token %lld is %d, outside the vocabulary [0, %lld)", fn,
                           (long long)e, tok[e], (long long)V);
    count[s]++;
  }
  for (int32_t s = 0; s < p->n_seq; s++)
    if (count[s] > p->n_ctx - p->n_past[s])
      return rlx_set_error(RLX_ERR_INVALID, "%s: %lld tokens of sequence %d after %lld do not fit the context of "
                           "%lld", fn, (long long)count[s], s, (long long)p->n_past[s], (long long)p->n_ctx);
  return RLX_OK;
}

/* One piece: entries [e0, e0 + S) into cells [start, start + S); its
 * wanted logits at dst (or, when none is wanted, the last row into scratch). */
static rlx_status run_piece(rlx_llm *m, const int32_t *tok, const int32_t *seq, int64_t e0, int64_t S,
                            int64_t start, const int8_t *want, int last_only, int64_t n, float *dst,
                            float *scratch, int64_t *n_rows) {
  llm_pool *p = llm_pool_of(m);
  int32_t sq[LLM_MAX_BATCH], pos[LLM_MAX_BATCH], rows[LLM_MAX_BATCH];
  int64_t R = 0;
  for (int64_t i = 0; i < S; i++) {
    const int64_t e = e0 + i, cell = start + i;
    const int32_t s = seq_of(seq, e);
    sq[i] = s;
    pos[i] = (int32_t)p->n_past[s]++;
    p->pos[cell] = pos[i];
    p->seqs[cell] = 1ull << s;
    p->tokens[s * p->n_ctx + pos[i]] = tok[e];
    if (wanted(want, last_only, e, n)) rows[R++] = (int32_t)i;
  }
  *n_rows = R;
  if (!R) {
    rows[R++] = (int32_t)(S - 1);
    dst = scratch;
  }
  const int64_t T = llm_pool_key_len(p, start + S);
  rlx_status st = llm_pool_mask(p, sq, pos, S, T);
  return st ? st : llm_run(m, tok + e0, pos, S, start, T, rows, R, dst);
}

/* Packs the pool's cells in use to its bottom, in their order: the cells
 * first, so that the run which refreshes the moved rows (kv_rows.c) goes
 * to a cell free after the move. A move that fails leaves rows half moved:
 * every sequence is emptied. */
static rlx_status pack(rlx_llm *m, const char *fn) {
  llm_pool *p = llm_pool_of(m);
  int64_t *cells = malloc((size_t)p->n_cells * sizeof *cells);
  if (!cells) return rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory", fn);
  const int64_t n = llm_pool_live(p, cells);
  llm_pool_pack(p, cells, n);
  rlx_status st = llm_cells_pack(m, cells, n);
  for (int32_t s = 0; st && s < p->n_seq; s++) llm_pool_truncate(p, s, 0);
  free(cells);
  return st;
}

static rlx_status decode(rlx_llm *m, int64_t n, const int32_t *tok, const int32_t *seq, const int8_t *want,
                         int last_only, float *logits, const char *fn) {
  rlx_status st = check_batch(m, n, tok, seq, fn);
  if (st) return st;
  int any = 0;
  for (int64_t e = 0; e < n && !any; e++) any = wanted(want, last_only, e, n);
  if (any && !logits) return rlx_set_error(RLX_ERR_INVALID, "%s: logits is NULL", fn);
  /* weights read in place from a file that shrank would be SIGBUS */
  if ((st = llm_file_check(m))) return st;
  llm_pool *p = llm_pool_of(m);
  int64_t saved[LLM_MAX_SEQ];
  memcpy(saved, p->n_past, (size_t)p->n_seq * sizeof *saved);
  const int64_t V = rlx_llm_vocab_size(m);
  float *scratch = NULL;
  int64_t out = 0;
  for (int64_t done = 0; done < n && st == RLX_OK;) {
    const int64_t most = n - done < LLM_MAX_BATCH ? n - done : LLM_MAX_BATCH;
    uint64_t seqs = 0;
    for (int64_t e = done; e < n; e++) seqs |= 1ull << seq_of(seq, e);
    int64_t start, S = llm_pool_find(p, most, llm_pool_after(p, seqs), &start), R;
    /* no free cell after those sequences' cells: pack the pool to its
     * bottom; each sequence fits its n_ctx, so the pool (n_seq * n_ctx)
     * then has room */
    if (!S && (st = pack(m, fn)) == RLX_OK) S = llm_pool_find(p, most, llm_pool_after(p, seqs), &start);
    if (st) break;
    if (!S) {
      st = rlx_set_error(RLX_ERR_INTERNAL, "%s: the KV pool has no free cell", fn);
      break;
    }
    if (!scratch && !(scratch = malloc((size_t)V * sizeof *scratch))) {
      st = rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory", fn);
      break;
    }
    st = run_piece(m, tok, seq, done, S, start, want, last_only, n, logits ? logits + out * V : NULL, scratch, &R);
    out += R;
    done += S;
  }
  free(scratch);
  if (st)
    for (int32_t s = 0; s < p->n_seq; s++) llm_pool_truncate(p, s, saved[s]);
  return st;
}

rlx_status rlx_llm_decode(rlx_llm *m, const rlx_llm_batch *b, float *logits) {
  if (!m || !b) return rlx_set_error(RLX_ERR_INVALID, "rlx_llm_decode: NULL argument");
  if (b->n <= 0 || !b->token)
    return rlx_set_error(RLX_ERR_INVALID, "rlx_llm_decode: a batch of %lld entries%s", (long long)b->n,
                         b->token ? "" : " without tokens");
  return decode(m, b->n, b->token, b->seq, b->logits, 0, logits, "rlx_llm_decode");
}

rlx_status rlx_llm_eval(rlx_llm *m, const int32_t *tokens, int64_t n, int all_logits, float *logits) {
  if (!m || !tokens || !logits) return rlx_set_error(RLX_ERR_INVALID, "rlx_llm_eval: NULL argument");
  if (n <= 0) return rlx_set_error(RLX_ERR_INVALID, "rlx_llm_eval: %lld tokens", (long long)n);
  return decode(m, n, tokens, NULL, NULL, !all_logits, logits, "rlx_llm_eval");
}

/* ---------------------------------------------------------------- sequences */

static int bad_seq(const rlx_llm *m, int32_t seq) {
  return !m || seq < 0 || seq >= llm_pool_of((rlx_llm *)m)->n_seq;
}

static rlx_status seq_error(const rlx_llm *m, int32_t seq, const char *fn) {
  if (!m) return rlx_set_error(RLX_ERR_INVALID, "%s: model is NULL", fn);
  return rlx_set_error(RLX_ERR_INVALID, "%s: sequence %d is outside [0, %d)", fn, seq,
                       llm_pool_of((rlx_llm *)m)->n_seq);
}

int32_t rlx_llm_n_seq(const rlx_llm *m) { return m ? llm_pool_of((rlx_llm *)m)->n_seq : 0; }
int64_t rlx_llm_n_ctx(const rlx_llm *m) { return m ? llm_pool_of((rlx_llm *)m)->n_ctx : 0; }
int64_t rlx_llm_n_past(const rlx_llm *m) { return rlx_llm_seq_n_past(m, 0); }

int64_t rlx_llm_seq_n_past(const rlx_llm *m, int32_t seq) {
  return bad_seq(m, seq) ? 0 : llm_pool_of((rlx_llm *)m)->n_past[seq];
}

const int32_t *rlx_llm_seq_tokens(const rlx_llm *m, int32_t seq) {
  if (bad_seq(m, seq)) return NULL;
  const llm_pool *p = llm_pool_of((rlx_llm *)m);
  return p->tokens + seq * p->n_ctx;
}

static rlx_status truncate_seq(rlx_llm *m, int32_t seq, int64_t n_past, const char *fn) {
  if (bad_seq(m, seq)) return seq_error(m, seq, fn);
  llm_pool *p = llm_pool_of(m);
  if (n_past < 0 || n_past > p->n_past[seq])
    return rlx_set_error(RLX_ERR_INVALID, "%s: n_past %lld outside [0, %lld]", fn, (long long)n_past,
                         (long long)p->n_past[seq]);
  llm_pool_truncate(p, seq, n_past);
  return RLX_OK;
}

rlx_status rlx_llm_truncate(rlx_llm *m, int64_t n_past) { return truncate_seq(m, 0, n_past, "rlx_llm_truncate"); }

rlx_status rlx_llm_seq_truncate(rlx_llm *m, int32_t seq, int64_t n_past) {
  return truncate_seq(m, seq, n_past, "rlx_llm_seq_truncate");
}

rlx_status rlx_llm_seq_copy(rlx_llm *m, int32_t src, int32_t dst, int64_t n) {
  if (bad_seq(m, src)) return seq_error(m, src, "rlx_llm_seq_copy");
  if (bad_seq(m, dst)) return seq_error(m, dst, "rlx_llm_seq_copy");
  llm_pool *p = llm_pool_of(m);
  if (n < 0 || n > p->n_past[src])
    return rlx_set_error(RLX_ERR_INVALID, "rlx_llm_seq_copy: n %lld outside [0, %lld] (sequence %d)", (long long)n,
                         (long long)p->n_past[src], src);
  if (src == dst) return llm_pool_truncate(p, dst, n), RLX_OK;
  llm_pool_truncate(p, dst, 0);
  const uint64_t from = 1ull << src, to = 1ull << dst;
  for (int64_t c = 0; c < p->n_cells; c++)
    if ((p->seqs[c] & from) && p->pos[c] < n) p->seqs[c] |= to;
  memcpy(p->tokens + dst * p->n_ctx, p->tokens + src * p->n_ctx, (size_t)n * sizeof *p->tokens);
  p->n_past[dst] = n;
  return RLX_OK;
}
