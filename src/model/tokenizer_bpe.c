/* tokenizer_bpe.c — byte-level BPE (tokenizer.ggml.model "gpt2"): the
 * pre-tokenizer splits of GPT-2, SmolLM (digits one by one first),
 * Llama 3 and Qwen 2, written by hand after their regexes (the way
 * llama.cpp's unicode.cpp does), then rank-ordered merges on each piece
 * with a heap, as Hugging Face's BPE model applies them. */
#include "tokenizer.h"

#include "ir/hash.h"
#include "ir/ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- the byte alphabet */

/* GPT-2's bytes_to_unicode(): printable bytes spell themselves, the others
 * are moved to U+0100 and up, in byte order. */
static uint32_t spell_cp(int b) {
  if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) return (uint32_t)b;
  int n = 0;
  for (int k = 0; k < b; k++)
    if (!((k >= '!' && k <= '~') || (k >= 0xA1 && k <= 0xAC) || (k >= 0xAE && k <= 0xFF))) n++;
  return 256u + (uint32_t)n;
}

static int utf8_encode(uint32_t cp, char *out) {
  if (cp < 0x80) { out[0] = (char)cp; return 1; }
  out[0] = (char)(0xC0 | cp >> 6);
  out[1] = (char)(0x80 | (cp & 0x3F));
  return 2;  /* the alphabet stays below U+0800 */
}

/* The byte spelled by codepoint cp, or -1. Built once; the table is
 * constant after that, so concurrent first calls write the same values. */
static int unspell_cp(uint32_t cp) {
  static int16_t table[324];
  static int ready;
  if (!ready) {
    for (int i = 0; i < 324; i++) table[i] = -1;
    for (int b = 0; b < 256; b++) table[spell_cp(b)] = (int16_t)b;
    ready = 1;
  }
  return cp < 324 ? table[cp] : -1;
}

long tok_bpe_unspell(const char *s, size_t len, char *out) {
  long n = 0;
  for (size_t i = 0; i < len;) {
    uint32_t cp;
    i += (size_t)tok_utf8_decode((const uint8_t *)s + i, len - i, &cp);
    int b = unspell_cp(cp);
    if (b < 0) return -1;
    out[n++] = (char)b;
  }
  return n;
}

/* ---------------------------------------------------------------- merges */

static uint64_t pair_key(int32_t l, int32_t r) { return ((uint64_t)(uint32_t)l << 32 | (uint32_t)r) + 1; }

static uint64_t mix(uint64_t k) { return ir_hash_u64(k); }

const tok_merge *tok_find_merge(const rlx_tokenizer *t, int32_t l, int32_t r) {
  uint64_t key = pair_key(l, r);
  for (uint64_t i = mix(key) & t->merge_mask;; i = (i + 1) & t->merge_mask) {
    if (t->merges[i].key == key) return &t->merges[i];
    if (!t->merges[i].key) return NULL;
  }
}

rlx_status tok_merges_load(rlx_tokenizer *t, const rlx_model_file *f) {
  rlx_meta_value arr, e;
  if (rlx_meta_lookup(f, "tokenizer.ggml.merges", &arr) != RLX_OK)
    return rlx_set_error(RLX_ERR_FORMAT, "tokenizer: a gpt2 tokenizer needs tokenizer.ggml.merges");
  if (arr.type != RLX_META_ARRAY || (arr.count && arr.elem_type != RLX_META_STRING) || arr.count >= INT32_MAX / 2)
    return rlx_set_error(RLX_ERR_FORMAT, "tokenizer: tokenizer.ggml.merges must be an array of strings");
  uint64_t slots = 16;
  while (slots < 2 * arr.count) slots *= 2;
  t->merges = calloc(slots, sizeof(tok_merge));
  t->merge_mask = slots - 1;
  char *buf = NULL;
  size_t buf_cap = 0;
  if (!t->merges) return rlx_set_error(RLX_ERR_NOMEM, "tokenizer: out of memory");
  for (uint64_t i = 0; i < arr.count; i++) {
    const char *s;
    size_t len;
    if (rlx_meta_elem(&arr, i, &e) || rlx_meta_as_string(&e, &s, &len)) {
      free(buf);
      return rlx_set_error(RLX_ERR_FORMAT, "tokenizer: merge %llu unreadable", (unsigned long long)i);
    }
    const char *sp = memchr(s, ' ', len);
    int32_t l = -1, r = -1, m = -1;
    if (sp && sp > s && sp + 1 < s + len && !memchr(sp + 1, ' ', (size_t)(s + len - sp - 1))) {
      size_t ll = (size_t)(sp - s), rl = len - ll - 1;
      if (ll + rl > buf_cap) {
        free(buf);
        buf_cap = 2 * (ll + rl);
        if (!(buf = malloc(buf_cap))) return rlx_set_error(RLX_ERR_NOMEM, "tokenizer: out of memory");
      }
      memcpy(buf, s, ll);
      memcpy(buf + ll, sp + 1, rl);
      l = tok_lookup(t, s, ll);
      r = tok_lookup(t, sp + 1, rl);
      m = tok_lookup(t, buf, ll + rl);
    }
    if (l < 0 || r < 0 || m < 0) {
      free(buf);
      return rlx_set_error(RLX_ERR_FORMAT,
                           "tokenizer: merge %llu '%.*s' is not two vocabulary tokens whose join is one",
                           (unsigned long long)i, (int)(len < 64 ? len : 64), s);
    }
    /* A pair listed twice keeps its last rank, as Hugging Face's map does. */
    uint64_t key = pair_key(l, r), k = mix(key) & t->merge_mask;
    while (t->merges[k].key && t->merges[k].key != key) k = (k + 1) & t->merge_mask;
    t->merges[k] = (tok_merge){key, (int32_t)i, m};
  }
  free(buf);
  return RLX_OK;
}

rlx_status tok_bpe_init(rlx_tokenizer *t, const rlx_model_file *f) {
  for (int b = 0; b < 256; b++) {
    char s[2];
    int n = utf8_encode(spell_cp(b), s);
    /* -1 when the vocabulary lacks the byte (SmolLM2 has no 0x04): with no
     * unknown token Hugging Face's BPE drops such a byte. */
    t->byte_id[b] = tok_lookup(t, s, (size_t)n);
  }
  return tok_merges_load(t, f);
}

/* One candidate merge of the symbols at pos and its successor. */
typedef struct { int32_t rank, pos, left, right; } cand;

static int cand_less(const cand *a, const cand *b) { return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos; }

static void heap_push(cand *h, int *n, cand c) {
  int i = (*n)++;
  while (i > 0 && cand_less(&c, &h[(i - 1) / 2])) { h[i] = h[(i - 1) / 2]; i = (i - 1) / 2; }
  h[i] = c;
}

static cand heap_pop(cand *h, int *n) {
  cand top = h[0], last = h[--(*n)];
  int i = 0;
  for (;;) {
    int c = 2 * i + 1;
    if (c >= *n) break;
    if (c + 1 < *n && cand_less(&h[c + 1], &h[c])) c++;
    if (!cand_less(&h[c], &last)) break;
    h[i] = h[c];
    i = c;
  }
  h[i] = last;
  return top;
}

/* Scratch space of one encode call, sized for its longest piece. */
typedef struct {
  int32_t *id, *prev, *next;
  cand *heap;
  char *spelled;
} bpe_scratch;

static void push_pair(const rlx_tokenizer *t, bpe_scratch *w, int *nh, int32_t pos) {
  if (pos < 0) return;
  int32_t nx = w->next[pos];
  if (nx < 0) return;
  const tok_merge *m = tok_find_merge(t, w->id[pos], w->id[nx]);
  if (m) heap_push(w->heap, nh, (cand){m->rank, pos, w->id[pos], w->id[nx]});
}

static void bpe_piece(const rlx_tokenizer *t, const uint8_t *s, size_t n, bpe_scratch *w, tok_out *o) {
  if (t->ignore_merges) {
    size_t sl = 0;
    for (size_t i = 0; i < n; i++) sl += (size_t)utf8_encode(spell_cp(s[i]), w->spelled + sl);
    int32_t id = tok_lookup(t, w->spelled, sl);
    if (id >= 0) { tok_emit(o, id); return; }
  }
  int32_t ns = 0;
  for (size_t i = 0; i < n; i++)
    if (t->byte_id[s[i]] >= 0) w->id[ns++] = t->byte_id[s[i]];
  if (!ns) return;
  for (int32_t i = 0; i < ns; i++) {
    w->prev[i] = i - 1;
    w->next[i] = i + 1 < ns ? i + 1 : -1;
  }
  int nh = 0;
  for (int32_t i = 0; i + 1 < ns; i++) push_pair(t, w, &nh, i);
  while (nh) {
    cand c = heap_pop(w->heap, &nh);
    int32_t nx = w->next[c.pos];
    if (w->id[c.pos] != c.left || nx < 0 || w->id[nx] != c.right) continue;  /* stale */
    w->id[c.pos] = tok_find_merge(t, c.left, c.right)->result;
    w->id[nx] = -1;
    w->next[c.pos] = w->next[nx];
    if (w->next[nx] >= 0) w->prev[w->next[nx]] = c.pos;
    push_pair(t, w, &nh, w->prev[c.pos]);
    push_pair(t, w, &nh, c.pos);
  }
  for (int32_t i = 0; i >= 0; i = w->next[i]) tok_emit(o, w->id[i]);
}

/* ---------------------------------------------------------------- pre-tokenizer splits */

/* The codepoints of a span with their classes; cut() receives pieces as
 * codepoint ranges. */
typedef struct {
  const uint32_t *cp;
  const uint8_t *fl;
  int64_t end;
} cpts;

#define OUT_OF_RANGE 0xFFFFFFFFu
static uint32_t cp_at(const cpts *c, int64_t i) { return i < c->end ? c->cp[i] : OUT_OF_RANGE; }
static int fl_at(const cpts *c, int64_t i) { return i < c->end ? c->fl[i] : 0; }
static int is_other(const cpts *c, int64_t i) { return i < c->end && !c->fl[i]; }  /* [^\s\p{L}\p{N}] */
static uint32_t lower_ascii(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

/* 's|'t|'re|'ve|'m|'ll|'d (any case when fold): the contraction's length, or 0. */
static int contraction(const cpts *c, int64_t pos, int fold) {
  if (cp_at(c, pos) != '\'' || pos + 1 >= c->end) return 0;
  uint32_t c1 = cp_at(c, pos + 1), c2 = cp_at(c, pos + 2);
  if (fold) { c1 = lower_ascii(c1); c2 = lower_ascii(c2); }
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
  if (pos + 2 < c->end && ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l'))) return 3;
  return 0;
}

/* Whitespace run at pos: \s+(?!\S) leaves its last character to the
 * piece after it; \s+ at the end of the span takes the whole run. */
static int64_t space_run_end(const cpts *c, int64_t pos) {
  int64_t n = 0;
  while (fl_at(c, pos + n) & TOK_CPT_SPACE) n++;
  if (n > 1 && pos + n < c->end) return pos + n - 1;
  return n ? pos + n : pos + 1;
}

/* GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static int64_t next_gpt2(const cpts *c, int64_t pos) {
  int k = contraction(c, pos, 0);
  if (k) return pos + k;
  int64_t p = pos + (cp_at(c, pos) == ' ');
  int f = fl_at(c, p);
  if (p < c->end && (f & (TOK_CPT_LETTER | TOK_CPT_NUMBER))) {
    int cls = f & TOK_CPT_LETTER ? TOK_CPT_LETTER : TOK_CPT_NUMBER;
    while (fl_at(c, p) & cls) p++;
    return p;
  }
  if (is_other(c, p)) {
    while (is_other(c, p)) p++;
    return p;
  }
  return space_run_end(c, pos);
}

/* Llama 3 (digits up to 3) and Qwen 2 (digits one by one):
 * (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
 * | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static int64_t next_llama3(const cpts *c, int64_t pos, int max_digits) {
  int k = contraction(c, pos, 1);
  if (k) return pos + k;
  uint32_t cp = cp_at(c, pos);
  int f = fl_at(c, pos);
  if (!(cp == '\r' || cp == '\n' || (f & TOK_CPT_NUMBER)) &&
      ((f & TOK_CPT_LETTER) || (fl_at(c, pos + 1) & TOK_CPT_LETTER))) {
    int64_t p = pos + 1;
    while (fl_at(c, p) & TOK_CPT_LETTER) p++;
    return p;
  }
  if (f & TOK_CPT_NUMBER) {
    int64_t p = pos;
    while ((fl_at(c, p) & TOK_CPT_NUMBER) && p - pos < max_digits) p++;
    return p;
  }
  int64_t p = pos + (cp == ' ');
  if (is_other(c, p)) {
    while (is_other(c, p)) p++;
    while (cp_at(c, p) == '\r' || cp_at(c, p) == '\n') p++;
    return p;
  }
  int64_t n = 0, last_nl = -1;
  while (fl_at(c, pos + n) & TOK_CPT_SPACE) {
    uint32_t w = cp_at(c, pos + n);
    if (w == '\r' || w == '\n') last_nl = pos + n;
    n++;
  }
  if (last_nl >= 0) return last_nl + 1;
  return space_run_end(c, pos);
}

static void split_span(const rlx_tokenizer *t, const cpts *c, int64_t start, const size_t *off, const uint8_t *s,
                       bpe_scratch *w, tok_out *o) {
  for (int64_t pos = start; pos < c->end;) {
    int64_t e;
    switch (t->pre) {
    case TOK_PRE_LLAMA3: e = next_llama3(c, pos, 3); break;
    case TOK_PRE_QWEN2: e = next_llama3(c, pos, 1); break;
    default: e = next_gpt2(c, pos); break;
    }
    bpe_piece(t, s + off[pos], off[e] - off[pos], w, o);
    pos = e;
  }
}

rlx_status tok_bpe_encode(const rlx_tokenizer *t, const char *text, size_t len, tok_out *o) {
  const uint8_t *s = (const uint8_t *)text;
  uint32_t *cp = malloc(sizeof(uint32_t) * len);
  uint8_t *fl = malloc(len);
  size_t *off = malloc(sizeof(size_t) * (len + 1));
  bpe_scratch w = {malloc(sizeof(int32_t) * len), malloc(sizeof(int32_t) * len), malloc(sizeof(int32_t) * len),
                   malloc(sizeof(cand) * 3 * len), malloc(2 * len)};
  rlx_status st = RLX_OK;
  if (!cp || !fl || !off || !w.id || !w.prev || !w.next || !w.heap || !w.spelled) {
    st = rlx_set_error(RLX_ERR_NOMEM, "tokenizer: out of memory");
    goto done;
  }
  int64_t n = 0;
  for (size_t i = 0; i < len; n++) {
    off[n] = i;
    i += (size_t)tok_utf8_decode(s + i, len - i, &cp[n]);
    fl[n] = (uint8_t)tok_cpt_flags(cp[n]);
  }
  off[n] = len;
  if (t->pre == TOK_PRE_SMOLLM) {
    /* Hugging Face's Digits(individual_digits) runs first: every number
     * character is a piece, the spans between are split as GPT-2's. */
    int64_t a = 0;
    while (a < n) {
      int64_t b = a;
      while (b < n && !(fl[b] & TOK_CPT_NUMBER)) b++;
      cpts c = {cp, fl, b};
      split_span(t, &c, a, off, s, &w, o);
      if (b < n) bpe_piece(t, s + off[b], off[b + 1] - off[b], &w, o), b++;
      a = b;
    }
  } else {
    cpts c = {cp, fl, n};
    split_span(t, &c, 0, off, s, &w, o);
  }
done:
  free(cp);
  free(fl);
  free(off);
  free(w.id);
  free(w.prev);
  free(w.next);
  free(w.heap);
  free(w.spelled);
  return st;
}
