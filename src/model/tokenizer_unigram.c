/* tokenizer_unigram.c — the Unigram model of unigram.h: reading its
 * tokenizer.json parts (every score, id, charsmap offset and pattern
 * checked) and encoding a span (normalize, Metaspace, Viterbi). */
#include "unigram.h"

#include "../ir/hash.h"
#include "../ir/ir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N_PRECOMPILED, N_REPLACE, N_REPLACE_RUN, N_STRIP };
enum { PREPEND_NEVER, PREPEND_ALWAYS, PREPEND_FIRST };
#define UG_MAX_NORMALIZERS 16
#define UG_UNK_PENALTY 10.0   /* an unknown character scores the lowest piece minus this */

typedef struct {
  int kind;
  char *from, *to;           /* Replace: literal (or the repeated character of a run) and its replacement */
  size_t from_len, to_len;
  int64_t min_run;           /* N_REPLACE_RUN: runs of at least this many */
  int left, right;           /* Strip */
  uint32_t *units;           /* Precompiled: the double-array trie */
  size_t n_units;
  char *norm;                /* ... and the replacement strings it points into */
  size_t norm_len;
} ug_norm;

struct ug_model {
  double *score;
  int32_t n_vocab, unk;
  double min_score;
  int byte_fallback;
  int32_t byte_id[256];      /* <0xXX> pieces, -1 when absent */
  size_t max_piece;          /* the longest piece, bytes */
  uint64_t *prefix;          /* hashes (| 1; 0 empty) of every proper prefix of a piece: */
  uint64_t prefix_mask;      /* Viterbi stops extending where none goes on, as a trie walk would */
  ug_norm norm[UG_MAX_NORMALIZERS];
  int n_norm;
  int metaspace, split, prepend;
  char repl[5];              /* Metaspace's replacement character */
  size_t repl_len;
};

typedef struct {
  char *p;
  size_t n, cap;
} ug_buf;

static int buf_put(ug_buf *b, const char *s, size_t n) {
  if (b->cap - b->n < n) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->n < n) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
  }
  if (n) memcpy(b->p + b->n, s, n);
  b->n += n;
  return 0;
}

/* ---------------------------------------------------------------- UTF-8 */

/* The length of the valid UTF-8 sequence at s (0: invalid), its codepoint in *cp. */
static int utf8_at(const uint8_t *s, size_t n, uint32_t *cp) {
  uint8_t c = s[0];
  int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (len == 0 || (size_t)len > n) return 0;
  uint32_t v = len == 1 ? c : c & (0x7F >> len);
  for (int i = 1; i < len; i++) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    v = v << 6 | (s[i] & 0x3F);
  }
  static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (v < min[len] || v > 0x10FFFF || (v >= 0xD800 && v < 0xE000)) return 0;
  *cp = v;
  return len;
}

/* s[0..n) into b with every invalid byte as U+FFFD: the later steps read valid UTF-8. */
static int put_valid(ug_buf *b, const char *s, size_t n) {
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    int l = utf8_at((const uint8_t *)s + i, n - i, &cp);
    if (buf_put(b, l ? s + i : "\xEF\xBF\xBD", l ? (size_t)l : 3)) return -1;
    i += l ? (size_t)l : 1;
  }
  return 0;
}

/* The length of the (valid) UTF-8 character at s. */
static size_t char_len(const char *s) {
  uint8_t c = (uint8_t)s[0];
  return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
}

static uint32_t char_at(const char *s) {
  uint32_t cp = 0;
  utf8_at((const uint8_t *)s, char_len(s), &cp);
  return cp;
}

/* Unicode White_Space (Rust's char::is_whitespace, what Strip and lstrip test). */
static int is_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* ---------------------------------------------------------------- grapheme clusters (UAX #29) */

static int gcb(uint32_t cp) {
  int lo = 0, hi = ug_n_cpt_ranges - 1;
  while (lo <= hi) {
    int m = (lo + hi) / 2;
    if (cp < ug_cpt_ranges[m].first) hi = m - 1;
    else if (cp > ug_cpt_ranges[m].last) lo = m + 1;
    else return ug_cpt_ranges[m].flags;
  }
  return 0;
}

/* The end of the extended grapheme cluster starting at s[i] (rules GB3 to
 * GB13; GB9c's Indic conjuncts only join clusters of 9 bytes and more,
 * which the Precompiled normalizer reads per character anyway). */
static size_t grapheme_end(const char *s, size_t n, size_t i) {
  int prev = gcb(char_at(s + i));
  int ri = (prev & 15) == UG_RI, pict = (prev & UG_PICT) != 0, zwj_after_pict = 0;
  for (i += char_len(s + i); i < n; i += char_len(s + i)) {
    int cur = gcb(char_at(s + i)), p = prev & 15, c = cur & 15, join;
    if (p == UG_CR && c == UG_LF) join = 1;
    else if (p == UG_CR || p == UG_LF || p == UG_CONTROL || c == UG_CR || c == UG_LF || c == UG_CONTROL) join = 0;
    else if (p == UG_L && (c == UG_L || c == UG_V || c == UG_LV || c == UG_LVT)) join = 1;
    else if ((p == UG_LV || p == UG_V) && (c == UG_V || c == UG_T)) join = 1;
    else if ((p == UG_LVT || p == UG_T) && c == UG_T) join = 1;
    else if (c == UG_EXTEND || c == UG_ZWJ || c == UG_SPACING || p == UG_PREPEND) join = 1;
    else if (zwj_after_pict && (cur & UG_PICT)) join = 1;
    else join = p == UG_RI && c == UG_RI && ri % 2 == 1;
    if (!join) break;
    zwj_after_pict = pict && c == UG_ZWJ;
    pict = (pict && c == UG_EXTEND) || (cur & UG_PICT);
    ri = c == UG_RI ? ri + 1 : 0;
    prev = cur;
  }
  return i;
}

/* ---------------------------------------------------------------- normalizers */

/* SentencePiece's precompiled charsmap: the replacement of the shortest
 * prefix of key[0..n) the trie holds (Darts-clone's unit layout), as Hugging
 * Face's spm_precompiled takes it; NULL when none. */
static const char *charsmap_find(const ug_norm *z, const char *key, size_t n, size_t *len) {
  size_t pos = 0;
  uint32_t unit = z->units[0];
  pos ^= (unit >> 10) << ((unit & (1u << 9)) >> 6);
  for (size_t i = 0; i < n; i++) {
    uint8_t c = (uint8_t)key[i];
    if (c == 0) break;
    pos ^= c;
    if (pos >= z->n_units) return NULL;
    unit = z->units[pos];
    if ((unit & ((1u << 31) | 0xFF)) != c) return NULL;
    pos ^= (unit >> 10) << ((unit & (1u << 9)) >> 6);
    if (pos >= z->n_units) return NULL;
    if ((unit >> 8) & 1) {
      size_t v = z->units[pos] & ((1u << 31) - 1);
      if (v >= z->norm_len) return NULL;
      const char *r = z->norm + v, *end = memchr(r, 0, z->norm_len - v);
      *len = end ? (size_t)(end - r) : z->norm_len - v;
      return r;
    }
  }
  return NULL;
}

/* Hugging Face's Precompiled: a cluster shorter than 6 bytes is looked up
 * whole (its shortest mapped prefix replaces all of it), else each
 * character alone. The replacements are made valid UTF-8 (a hostile
 * charsmap may point into the middle of a character). */
static int precompiled(const ug_norm *z, const char *s, size_t n, ug_buf *out) {
  for (size_t i = 0; i < n;) {
    size_t e = grapheme_end(s, n, i), rl;
    const char *r = e - i < 6 ? charsmap_find(z, s + i, e - i, &rl) : NULL;
    if (r) {
      if (put_valid(out, r, rl)) return -1;
      i = e;
      continue;
    }
    for (; i < e; i += char_len(s + i)) {
      size_t cl = char_len(s + i);
      r = charsmap_find(z, s + i, cl, &rl);
      if (r ? put_valid(out, r, rl) : buf_put(out, s + i, cl)) return -1;
    }
  }
  return 0;
}

/* One normalizer, s[0..n) into out. *moved: the text's first character
 * no longer maps to the original's first (a Replace matched there, or
 * Strip removed it: tokenizers' alignments then start past 0, which
 * Metaspace's prepend_scheme "first" tests); a Precompiled mapping keeps
 * the start. */
static int apply(const ug_norm *z, const char *s, size_t n, ug_buf *out, int *moved) {
  out->n = 0;
  if (z->kind == N_PRECOMPILED) return precompiled(z, s, n, out);
  if (z->kind == N_STRIP) {
    size_t a = 0, b = n;
    while (z->left && a < b && is_space(char_at(s + a))) a += char_len(s + a);
    while (z->right && b > a) {
      size_t k = b - 1;
      while (k > a && ((uint8_t)s[k] & 0xC0) == 0x80) k--;
      if (!is_space(char_at(s + k))) break;
      b = k;
    }
    if (a > 0) *moved = 1;
    return buf_put(out, s + a, b - a);
  }
  for (size_t i = 0; i < n;) {
    size_t run = 0, end = i;  /* N_REPLACE: one match; N_REPLACE_RUN: the run of the character */
    if (z->kind == N_REPLACE) {
      if (z->from_len <= n - i && !memcmp(s + i, z->from, z->from_len)) run = 1, end = i + z->from_len;
    } else {
      while (z->from_len <= n - end && !memcmp(s + end, z->from, z->from_len)) run++, end += z->from_len;
      if ((int64_t)run < z->min_run) run = 0;
    }
    if (run) {
      if (i == 0) *moved = 1;
      if (buf_put(out, z->to, z->to_len)) return -1;
      i = end;
    } else if (end > i) {  /* a run too short: kept whole (not rescanned from each of its characters) */
      if (buf_put(out, s + i, end - i)) return -1;
      i = end;
    } else {
      size_t cl = char_len(s + i);
      if (buf_put(out, s + i, cl)) return -1;
      i += cl;
    }
  }
  return 0;
}

/* ---------------------------------------------------------------- Viterbi */

static int has_prefix(const ug_model *m, const char *s, size_t n) {
  uint64_t h = ir_hash_bytes(s, n) | 1;
  for (uint64_t i = h & m->prefix_mask;; i = (i + 1) & m->prefix_mask) {
    if (m->prefix[i] == h) return 1;
    if (!m->prefix[i]) return 0;
  }
}

/* The prefix table of the n pieces strs/lens (keyed hashes: a vocabulary
 * cannot make them collide on purpose; a collision only costs a lookup). */
static int build_prefixes(ug_model *m, char *const *strs, const size_t *lens, int32_t n) {
  uint64_t total = 0, cap = 16;
  for (int32_t i = 0; i < n; i++) total += lens[i];
  while (cap < 2 * total) cap *= 2;
  if (!(m->prefix = calloc(cap, sizeof *m->prefix))) return -1;
  m->prefix_mask = cap - 1;
  for (int32_t i = 0; i < n; i++)
    for (size_t b = 1; b < lens[i]; b++) {
      if (((uint8_t)strs[i][b] & 0xC0) == 0x80) continue;  /* prefixes end on characters */
      uint64_t h = ir_hash_bytes(strs[i], b) | 1, k = h & m->prefix_mask;
      while (m->prefix[k] && m->prefix[k] != h) k = (k + 1) & m->prefix_mask;
      m->prefix[k] = h;
    }
  return 0;
}

typedef struct {
  double score;
  int64_t from;     /* where the best path's last piece starts; -1 unreached */
  int32_t id;
} ug_node;

static int emit_bytes_or_unk(const wp_tokenizer *t, const ug_model *m, const char *s, size_t n, wp_ids *o) {
  int32_t id = wp_lookup(t, s, n);
  if (id >= 0) return wp_emit(o, id, 0);
  int all = m->byte_fallback;
  for (size_t i = 0; all && i < n; i++) all = m->byte_id[(uint8_t)s[i]] >= 0;
  if (!all) return wp_emit(o, m->unk, 0);
  for (size_t i = 0; i < n; i++)
    if (wp_emit(o, m->byte_id[(uint8_t)s[i]], 0)) return -1;
  return 0;
}

/* The best segmentation of one pre-token s[0..n) (tokenizers'
 * encode_optimized: pieces tried shortest first, a later one replacing an
 * earlier path only when strictly better; a start stops extending where no
 * piece goes on, so a hostile long piece costs nothing), unknown runs fused. */
static rlx_status viterbi(const wp_tokenizer *t, const ug_model *m, const char *s, size_t n, ug_node *best,
                          int64_t *starts, wp_ids *o) {
  const double unk_score = m->min_score - UG_UNK_PENALTY;
  for (size_t i = 0; i <= n; i++) best[i] = (ug_node){0, -1, -1};
  best[0].from = 0;
  for (size_t i = 0; i < n;) {
    size_t cl = char_len(s + i);
    int single = 0;
    for (size_t e = i + cl; e <= n && e - i <= m->max_piece; e += e < n ? char_len(s + e) : 1) {
      int32_t id = wp_lookup(t, s + i, e - i);
      int more = e < n && has_prefix(m, s + i, e - i);
      if (id >= 0 && id < m->n_vocab) {
        double sc = m->score[id] + best[i].score;
        if (best[e].from < 0 || sc > best[e].score) best[e] = (ug_node){sc, (int64_t)i, id};
        single |= e - i == cl;
      }
      if (!more) break;
    }
    if (!single) {
      if (m->unk < 0) return rlx_set_error(RLX_ERR_INVALID, "unigram: a character is in no piece and the model has no unk_id");
      double sc = unk_score + best[i].score;
      if (best[i + cl].from < 0 || sc > best[i + cl].score) best[i + cl] = (ug_node){sc, (int64_t)i, m->unk};
    }
    i += cl;
  }
  int64_t k = 0;
  for (int64_t e = (int64_t)n; e > 0; e = best[e].from) starts[k++] = e;
  int err = 0;
  for (int64_t j = k - 1; j >= 0 && !err; j--) {  /* starts[] holds ends, last first */
    int64_t end = starts[j], from = best[end].from;
    if (best[end].id != m->unk || m->unk < 0) {
      err = wp_emit(o, best[end].id, 0);
      continue;
    }
    while (j > 0 && best[starts[j - 1]].id == m->unk) end = starts[--j];
    err = emit_bytes_or_unk(t, m, s + from, (size_t)(end - from), o);
  }
  return err ? rlx_set_error(RLX_ERR_NOMEM, "unigram: out of memory") : RLX_OK;
}

/* ---------------------------------------------------------------- encoding */

rlx_status ug_encode(const wp_tokenizer *t, const ug_model *m, const char *s, size_t len, int first, wp_ids *o) {
  ug_buf a = {0}, b = {0};
  rlx_status st = RLX_OK;
  int err = put_valid(&a, s, len);
  for (int k = 0; k < m->n_norm && !err; k++) {
    int moved = 0;
    err = apply(&m->norm[k], a.p, a.n, &b, &moved);
    if (moved) first = 0;
    ug_buf tmp = a;
    a = b, b = tmp;
  }
  /* Metaspace: spaces become the replacement, one prepended, then split before each */
  if (!err && m->metaspace && a.n) {
    b.n = 0;
    int lead = a.n >= m->repl_len && !memcmp(a.p, m->repl, m->repl_len);
    if (!lead && a.p[0] == ' ') lead = 1;
    if (!lead && (m->prepend == PREPEND_ALWAYS || (m->prepend == PREPEND_FIRST && first))) err = buf_put(&b, m->repl, m->repl_len);
    for (size_t i = 0; i < a.n && !err; i++) err = a.p[i] == ' ' ? buf_put(&b, m->repl, m->repl_len) : buf_put(&b, a.p + i, 1);
    ug_buf tmp = a;
    a = b, b = tmp;
  }
  ug_node *best = err ? NULL : malloc((a.n + 1) * sizeof *best);
  int64_t *starts = best ? malloc((a.n + 1) * sizeof *starts) : NULL;
  if (err || !starts) st = rlx_set_error(RLX_ERR_NOMEM, "unigram: out of memory");
  for (size_t i = 0; !st && i < a.n;) {
    size_t e = i + 1;
    if (!m->metaspace || !m->split) e = a.n;
    else {
      if (a.n - i >= m->repl_len && !memcmp(a.p + i, m->repl, m->repl_len)) e = i + m->repl_len;
      while (e < a.n && !(a.n - e >= m->repl_len && !memcmp(a.p + e, m->repl, m->repl_len))) e++;
    }
    st = viterbi(t, m, a.p + i, e - i, best, starts, o);
    i = e;
  }
  free(best);
  free(starts);
  free(a.p);
  free(b.p);
  return st;
}

/* ---------------------------------------------------------------- loading */

#define FAIL(...) rlx_set_error(RLX_ERR_FORMAT, __VA_ARGS__)

void ug_free(ug_model *m) {
  if (!m) return;
  for (int i = 0; i < m->n_norm; i++) {
    free(m->norm[i].from);
    free(m->norm[i].to);
    free(m->norm[i].units);
    free(m->norm[i].norm);
  }
  free(m->score);
  free(m->prefix);
  free(m);
}

int32_t ug_unk_id(const ug_model *m) { return m->unk; }

rlx_status ug_load(const json_doc *d, int64_t model, const char *what, ug_model **out, char ***strs_out, size_t **lens_out,
                   int32_t *n_out) {
  *out = NULL;
  *strs_out = NULL;
  *lens_out = NULL;
  int64_t vocab = json_get(d, model, "vocab");
  if (json_kind(d, vocab) != JSON_ARRAY || d->tok[vocab].size == 0 || d->tok[vocab].size >= (1u << 24))
    return FAIL("%s: model.vocab is not a list of 1 to 2^24 [piece, score] pairs", what);
  ug_model *m = calloc(1, sizeof *m);
  int32_t n = (int32_t)d->tok[vocab].size;
  char **strs = calloc((size_t)n, sizeof *strs);
  size_t *lens = calloc((size_t)n, sizeof *lens);
  if (m) m->score = malloc((size_t)n * sizeof *m->score);
  rlx_status st = m && strs && lens && m->score ? RLX_OK : rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory", what);
  if (m) m->min_score = INFINITY, m->n_vocab = n, m->unk = -1;
  int32_t i = 0;
  for (int64_t e = json_first(d, vocab); !st && e >= 0 && i < n; e = json_next(d, e), i++) {
    int64_t piece = json_first(d, e), score = piece >= 0 ? json_next(d, piece) : -1;
    if (json_kind(d, e) != JSON_ARRAY || d->tok[e].size != 2 || json_kind(d, piece) != JSON_STRING ||
        !json_num(d, score, &m->score[i])) {
      st = FAIL("%s: model.vocab[%d] is not a [piece, score] pair", what, (int)i);
      break;
    }
    if (!(strs[i] = json_strdup(d, piece, &lens[i]))) st = rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory", what);
    else if (lens[i] > m->max_piece) m->max_piece = lens[i];
    if (m->score[i] < m->min_score) m->min_score = m->score[i];
  }
  int64_t unk = json_get(d, model, "unk_id"), id;
  if (!st && json_kind(d, unk) != JSON_NULL) {
    if (!json_int(d, unk, 0, n - 1, &id)) st = FAIL("%s: model.unk_id is not an id of the vocabulary", what);
    else m->unk = (int32_t)id;
  }
  int fb = 0;
  if (!st) json_bool(d, json_get(d, model, "byte_fallback"), &fb), m->byte_fallback = fb;
  if (!st && build_prefixes(m, strs, lens, n)) st = rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory", what);
  if (st) {
    for (int32_t k = 0; strs && k < n; k++) free(strs[k]);
    free(strs);
    free(lens);
    ug_free(m);
    return st;
  }
  *out = m;
  *strs_out = strs;
  *lens_out = lens;
  *n_out = n;
  return RLX_OK;
}

static int b64(int c) {
  return c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? c - 'a' + 26 : c >= '0' && c <= '9' ? c - '0' + 52
         : c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* The precompiled_charsmap (base64): [u32 trie bytes][trie units][replacements]. */
static rlx_status read_charsmap(ug_norm *z, const json_doc *d, int64_t v, const char *what) {
  size_t n;
  char *s = json_strdup(d, v, &n);
  if (!s) return FAIL("%s: Precompiled normalizer without a precompiled_charsmap string", what);
  uint8_t *blob = malloc(n / 4 * 3 + 3);
  size_t m = 0;
  uint32_t acc = 0;
  int bits = 0, bad = !blob;
  for (size_t i = 0; i < n && !bad; i++) {
    if (s[i] == '=') break;
    int x = b64((unsigned char)s[i]);
    if (x < 0) bad = 1;
    acc = acc << 6 | (uint32_t)x, bits += 6;
    if (bits >= 8) blob[m++] = (uint8_t)(acc >> (bits - 8)), bits -= 8;
  }
  free(s);
  uint32_t size = 0;
  if (!bad && m >= 4) size = (uint32_t)blob[0] | (uint32_t)blob[1] << 8 | (uint32_t)blob[2] << 16 | (uint32_t)blob[3] << 24;
  rlx_status st = RLX_OK;
  if (bad || m < 8 || size < 4 || size % 4 || size > m - 4) {
    st = blob ? FAIL("%s: precompiled_charsmap is not base64 of a trie (%zu bytes, trie %u)", what, m, size)
              : rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory", what);
  } else {
    z->n_units = size / 4;
    z->norm_len = m - 4 - size;
    z->units = malloc(z->n_units * sizeof *z->units);
    z->norm = malloc(z->norm_len + 1);
    if (!z->units || !z->norm) st = rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory", what);
    for (size_t i = 0; !st && i < z->n_units; i++) {
      const uint8_t *p = blob + 4 + 4 * i;
      z->units[i] = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    }
    if (!st) memcpy(z->norm, blob + 4 + size, z->norm_len);
  }
  free(blob);
  return st;
}

/* Replace: a String pattern, or a Regex of one character repeated ("x{2,}", "x+"). */
static rlx_status read_replace(ug_norm *z, const json_doc *d, int64_t n, const char *what) {
  int64_t pat = json_get(d, n, "pattern"), lit = json_get(d, pat, "String"), re = json_get(d, pat, "Regex");
  char *p = json_strdup(d, lit >= 0 ? lit : re, &z->from_len);
  z->from = p;
  z->to = json_strdup(d, json_get(d, n, "content"), &z->to_len);
  if (!p || !z->to || z->from_len == 0) return FAIL("%s: Replace normalizer without a pattern and content", what);
  z->kind = N_REPLACE;
  if (lit >= 0) return RLX_OK;
  uint32_t cp;
  int cl = utf8_at((const uint8_t *)p, z->from_len, &cp);
  long lo = -1;
  int used = -1;
  if (cl && !strchr(".[](){}|\\^$*+?", p[0])) {
    if (!strcmp(p + cl, "+")) lo = 1;
    else if (sscanf(p + cl, "{%ld,}%n", &lo, &used) != 1 || used < 0 || p[cl + used] || lo < 1 || lo > 1 << 20) lo = -1;
  }
  if (lo < 0)
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "%s: Replace regex \"%.40s\" is not supported (one character repeated is)", what, p);
  z->kind = N_REPLACE_RUN;
  z->from_len = (size_t)cl;
  z->min_run = lo;
  return RLX_OK;
}

static rlx_status read_normalizer(ug_model *m, const json_doc *d, int64_t n, int depth, const char *what) {
  if (n < 0 || json_kind(d, n) == JSON_NULL) return RLX_OK;
  int64_t type = json_get(d, n, "type");
  if (json_str_eq(d, type, "Sequence")) {
    int64_t list = json_get(d, n, "normalizers");
    if (json_kind(d, list) != JSON_ARRAY || depth > 4) return FAIL("%s: Sequence normalizer without a normalizers list", what);
    uint32_t k = 0;
    rlx_status st = RLX_OK;
    for (int64_t e = json_first(d, list); !st && e >= 0 && k < d->tok[list].size; e = json_next(d, e), k++)
      st = read_normalizer(m, d, e, depth + 1, what);
    return st;
  }
  if (m->n_norm == UG_MAX_NORMALIZERS) return FAIL("%s: more than %d normalizers", what, UG_MAX_NORMALIZERS);
  ug_norm *z = &m->norm[m->n_norm++];
  if (json_str_eq(d, type, "Precompiled")) {
    z->kind = N_PRECOMPILED;
    return read_charsmap(z, d, json_get(d, n, "precompiled_charsmap"), what);
  }
  if (json_str_eq(d, type, "Replace")) return read_replace(z, d, n, what);
  if (json_str_eq(d, type, "Strip")) {
    z->kind = N_STRIP;
    z->left = z->right = 1;
    json_bool(d, json_get(d, n, "strip_left"), &z->left);
    json_bool(d, json_get(d, n, "strip_right"), &z->right);
    return RLX_OK;
  }
  return rlx_set_error(RLX_ERR_UNSUPPORTED, "%s: normalizer: only Precompiled, Replace, Strip and Sequence are read with Unigram",
                       what);
}

static rlx_status read_metaspace(ug_model *m, const json_doc *d, int64_t p, const char *what) {
  if (p < 0 || json_kind(d, p) == JSON_NULL) return RLX_OK;
  if (!json_str_eq(d, json_get(d, p, "type"), "Metaspace"))
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "%s: pre_tokenizer: only Metaspace is read with Unigram", what);
  m->metaspace = m->split = 1;
  m->prepend = PREPEND_ALWAYS;
  int64_t r = json_get(d, p, "replacement");
  char rep[16];
  uint32_t cp;
  int64_t rl = json_kind(d, r) == JSON_STRING && d->tok[r].len < sizeof rep ? json_str(d, r, rep) : -1;
  if (rl <= 0 || utf8_at((const uint8_t *)rep, (size_t)rl, &cp) != rl)
    return FAIL("%s: Metaspace replacement is not one character", what);
  memcpy(m->repl, rep, (size_t)rl);
  m->repl_len = (size_t)rl;
  int v;
  if (json_bool(d, json_get(d, p, "add_prefix_space"), &v)) m->prepend = v ? PREPEND_ALWAYS : PREPEND_NEVER;
  int64_t scheme = json_get(d, p, "prepend_scheme");
  if (json_str_eq(d, scheme, "first")) m->prepend = PREPEND_FIRST;
  else if (json_str_eq(d, scheme, "never")) m->prepend = PREPEND_NEVER;
  else if (scheme >= 0 && !json_str_eq(d, scheme, "always"))
    return FAIL("%s: Metaspace prepend_scheme is not always, first or never", what);
  if (json_bool(d, json_get(d, p, "split"), &v)) m->split = v;
  return RLX_OK;
}

rlx_status ug_load_front(ug_model *m, const wp_tokenizer *t, const json_doc *d, int64_t normalizer, int64_t pre,
                         const char *what) {
  for (int b = 0; b < 256; b++) {
    char name[8];
    snprintf(name, sizeof name, "<0x%02X>", b);
    m->byte_id[b] = wp_lookup(t, name, 6);
  }
  rlx_status st = read_normalizer(m, d, normalizer, 0, what);
  return st ? st : read_metaspace(m, d, pre, what);
}
