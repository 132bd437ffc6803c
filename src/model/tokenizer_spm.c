/* tokenizer_spm.c — SentencePiece BPE (tokenizer.ggml.model "llama"):
 * spaces become ▁ (with a dummy ▁ in front of the text), every character
 * is a symbol (or its <0xNN> byte tokens when the vocabulary lacks it),
 * and adjacent symbols whose join is a token merge best score first.
 *
 * The order of merges is the one Hugging Face's BPE model uses for a GGUF
 * vocabulary (transformers' generate_merges): higher score of the joined
 * token first, then the longer left piece, the longer right piece, the
 * lower joined id, and the lower left and right ids; equal pairs merge
 * left to right. Where the metadata lists merges (a Hugging Face folder's
 * tokenizer.json), only listed pairs merge, lowest rank first, then left
 * to right, byte-fallback symbols too, as that BPE model applies them. */
#include "tokenizer.h"

#include "ir/ir.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  int32_t rank;  /* the merge's (0 when merging by score) */
  float score;
  int32_t left_chars, right_chars, merged, left, right, pos;
} spm_cand;

/* a before b: a merges first. */
static int cand_first(const spm_cand *a, const spm_cand *b) {
  if (a->rank != b->rank) return a->rank < b->rank;
  if (a->score != b->score) return a->score > b->score;
  if (a->left_chars != b->left_chars) return a->left_chars > b->left_chars;
  if (a->right_chars != b->right_chars) return a->right_chars > b->right_chars;
  if (a->merged != b->merged) return a->merged < b->merged;
  if (a->left != b->left) return a->left < b->left;
  if (a->right != b->right) return a->right < b->right;
  return a->pos < b->pos;
}

static void heap_push(spm_cand *h, int64_t *n, spm_cand c) {
  int64_t i = (*n)++;
  while (i > 0 && cand_first(&c, &h[(i - 1) / 2])) { h[i] = h[(i - 1) / 2]; i = (i - 1) / 2; }
  h[i] = c;
}

static spm_cand heap_pop(spm_cand *h, int64_t *n) {
  spm_cand top = h[0], last = h[--(*n)];
  int64_t i = 0;
  for (;;) {
    int64_t c = 2 * i + 1;
    if (c >= *n) break;
    if (c + 1 < *n && cand_first(&h[c + 1], &h[c])) c++;
    if (!cand_first(&h[c], &last)) break;
    h[i] = h[c];
    i = c;
  }
  h[i] = last;
  return top;
}

static int32_t utf8_chars(const char *s, size_t n) {
  int32_t k = 0;
  for (size_t i = 0; i < n; i++) k += ((uint8_t)s[i] & 0xC0) != 0x80;
  return k;
}

typedef struct {
  const rlx_tokenizer *t;
  const char *s;           /* the normalized text */
  int32_t *id;             /* symbol token, -1 once merged away */
  size_t *start, *len;     /* bytes of s the symbol covers */
  int64_t *prev, *next;
  uint8_t *frozen;         /* byte-fallback and unknown symbols do not merge */
  spm_cand *heap;
  int64_t nh;
} spm_work;

static void push_pair(spm_work *w, int64_t pos) {
  if (pos < 0) return;
  int64_t nx = w->next[pos];
  const rlx_tokenizer *t = w->t;
  if (nx < 0) return;
  if (t->merges) {
    const tok_merge *m = tok_find_merge(t, w->id[pos], w->id[nx]);
    if (m) heap_push(w->heap, &w->nh, (spm_cand){m->rank, 0, 0, 0, m->result, w->id[pos], w->id[nx], (int32_t)pos});
    return;
  }
  if (w->frozen[pos] || w->frozen[nx]) return;
  int32_t m = tok_lookup(t, w->s + w->start[pos], w->len[pos] + w->len[nx]);
  if (m < 0) return;
  spm_cand c = {0, t->score[m], utf8_chars(tok_text(t, w->id[pos]), tok_text_len(t, w->id[pos])),
                utf8_chars(tok_text(t, w->id[nx]), tok_text_len(t, w->id[nx])), m, w->id[pos], w->id[nx], (int32_t)pos};
  heap_push(w->heap, &w->nh, c);
}

rlx_status tok_spm_encode(const rlx_tokenizer *t, const char *text, size_t len, int at_start, tok_out *o) {
  static const char sp[] = "\xe2\x96\x81";  /* ▁ */
  size_t cap = 3 * len + 3, n = 0;
  char *s = malloc(cap);
  /* At most one symbol per byte, and four byte-fallback symbols per
   * character at most (one per byte). */
  size_t nsym_cap = cap;
  spm_work w = {t, s, malloc(sizeof(int32_t) * nsym_cap), malloc(sizeof(size_t) * nsym_cap),
                malloc(sizeof(size_t) * nsym_cap), malloc(sizeof(int64_t) * nsym_cap),
                malloc(sizeof(int64_t) * nsym_cap), malloc(nsym_cap), malloc(sizeof(spm_cand) * 3 * nsym_cap), 0};
  rlx_status st = RLX_OK;
  if (!s || !w.id || !w.start || !w.len || !w.prev || !w.next || !w.frozen || !w.heap) {
    st = rlx_set_error(RLX_ERR_NOMEM, "tokenizer: out of memory");
    goto done;
  }
  /* ▁ for every space, and one in front: Hugging Face's Metaspace puts it
   * in front of the text ("first") or of every span ("always") unless it
   * starts with one already; its Prepend normalizer in front of every
   * span. */
  const int starts_sp = text[0] == ' ' || (len >= 3 && !memcmp(text, sp, 3));
  if (t->add_space_prefix &&
      (t->prepend == TOK_PREPEND_EVERY || (!starts_sp && (at_start || t->prepend == TOK_PREPEND_ALWAYS)))) {
    memcpy(s, sp, 3);
    n = 3;
  }
  for (size_t i = 0; i < len; i++) {
    if (text[i] == ' ') { memcpy(s + n, sp, 3); n += 3; }
    else s[n++] = text[i];
  }
  /* Unknown characters are one <unk> (fuse_unk), which Hugging Face's BPE
   * holds back until the next character in the vocabulary: byte-fallback
   * characters between come before it. */
  int64_t ns = 0;
  size_t unk_start = 0, unk_len = 0;
  for (size_t i = 0; i <= n;) {
    uint32_t cp;
    size_t cl = i < n ? (size_t)tok_utf8_decode((const uint8_t *)s + i, n - i, &cp) : 0;
    int32_t id = i < n ? tok_lookup(t, s + i, cl) : -1;
    int fallback = i < n && id < 0;
    for (size_t b = 0; fallback && b < cl; b++) fallback = t->byte_id[(uint8_t)s[i + b]] >= 0;
    if (unk_len && (id >= 0 || i == n)) {
      w.id[ns] = t->unk; w.start[ns] = unk_start; w.len[ns] = unk_len; w.frozen[ns] = 2; ns++;
      unk_len = 0;
    }
    if (i == n) break;
    if (id >= 0) {
      w.id[ns] = id; w.start[ns] = i; w.len[ns] = cl; w.frozen[ns] = 0; ns++;
    } else if (fallback) {
      for (size_t b = 0; b < cl; b++) {
        w.id[ns] = t->byte_id[(uint8_t)s[i + b]]; w.start[ns] = i + b; w.len[ns] = 1; w.frozen[ns] = 1; ns++;
      }
    } else if (t->unk >= 0 || !t->merges) {
      /* (with merges and no unknown token: Hugging Face's BPE drops it) */
      if (!unk_len) unk_start = i;
      unk_len += cl;
    }
    i += cl;
  }
  for (int64_t i = 0; i < ns; i++) {
    w.prev[i] = i - 1;
    w.next[i] = i + 1 < ns ? i + 1 : -1;
  }
  for (int64_t i = 0; i + 1 < ns; i++) push_pair(&w, i);
  while (w.nh) {
    spm_cand c = heap_pop(w.heap, &w.nh);
    int64_t nx = w.next[c.pos];
    if (w.id[c.pos] != c.left || nx < 0 || w.id[nx] != c.right) continue;  /* stale */
    w.id[c.pos] = c.merged;
    w.len[c.pos] += w.len[nx];
    w.id[nx] = -1;
    w.next[c.pos] = w.next[nx];
    if (w.next[nx] >= 0) w.prev[w.next[nx]] = c.pos;
    push_pair(&w, w.prev[c.pos]);
    push_pair(&w, c.pos);
  }
  for (int64_t i = ns ? 0 : -1; i >= 0; i = w.next[i])
    if (w.id[i] >= 0) tok_emit(o, w.id[i]);
done:
  free(s);
  free(w.id);
  free(w.start);
  free(w.len);
  free(w.prev);
  free(w.next);
  free(w.frozen);
  free(w.heap);
  return st;
}
