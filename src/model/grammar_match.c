/* grammar_match.c — a parsed GBNF grammar matched over the bytes of token
 * pieces (rlx.h rlx_grammar_*), as llama.cpp's pushdown matcher does it.
 *
 * The parse state is a set of stacks of element positions: the top of a
 * stack is the character class that may come next, the rest what follows
 * once it has matched. A rule reference on top is replaced by each of the
 * rule's alternatives (advance); a code point keeps the stacks whose top
 * matches it, each popped and advanced (accept_char). A stack that runs
 * empty means the text so far is a whole sentence. Left recursion, which
 * would make advance loop, is refused by the parser.
 *
 * Pieces are UTF-8 bytes; a piece may end inside a code point (byte-level
 * vocabularies split them), so the state also holds the bytes of an
 * unfinished code point, and such a piece is allowed when some stack's
 * class meets the range of code points those bytes can begin.
 *
 * Bounds: 4096 stacks of 4096 positions, advance 1024 rules deep and 2^20
 * calls a step; a text
 * that would pass them is refused (it does not fit the grammar as far as
 * the sampler is concerned) instead of growing without end. */
#include "grammar.h"

#include "ir/ir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STACKS 4096
#define MAX_STACK_LEN 4096
#define MAX_DEPTH 1024
#define MAX_ADVANCES (1 << 20) /* advance calls a step: alternatives can branch exponentially */

typedef struct {
  int32_t *data;             /* the stacks' positions, one after another */
  int64_t n_data, cap_data;
  int64_t *off;              /* [n] where stack i starts in data */
  int32_t *len;              /* [n] */
  int64_t n, cap;
} stack_set;

struct rlx_grammar {
  grammar_rules r;
  int32_t n_vocab;           /* 0 without a tokenizer */
  char *pieces;              /* every token's piece, one after another */
  int64_t *piece_off;        /* [n_vocab + 1] */
  unsigned char *eog;        /* [n_vocab] */
  stack_set cur, tmp[2];
  unsigned char pend[4];     /* an unfinished code point's bytes */
  int n_pend;
  int32_t *work;             /* stacks being built by advance */
  int64_t work_cap;
  int overflow;              /* a bound was hit in the last step */
  int64_t advances;          /* advance calls in the last step */
};

/* ---------------------------------------------------------------- stack sets */

static void set_clear(stack_set *s) { s->n = s->n_data = 0; }

static void set_free(stack_set *s) {
  free(s->data);
  free(s->off);
  free(s->len);
}

/* Adds the stack st[0..len) unless s has it; 0 when out of memory or past MAX_STACKS. */
static int set_add(stack_set *s, const int32_t *st, int32_t len) {
  for (int64_t i = 0; i < s->n; i++)
    if (s->len[i] == len && (!len || (s->data[s->off[i] + len - 1] == st[len - 1] &&
                                      !memcmp(s->data + s->off[i], st, (size_t)len * sizeof *st))))
      return 1;
  if (s->n == MAX_STACKS) return 0;
  if (s->n == s->cap) {
    int64_t cap = s->cap ? 2 * s->cap : 16;
    int64_t *off = realloc(s->off, (size_t)cap * sizeof *off);
    if (off) s->off = off;
    int32_t *l = realloc(s->len, (size_t)cap * sizeof *l);
    if (l) s->len = l;
    if (!off || !l) return 0;
    s->cap = cap;
  }
  if (len && s->n_data + len > s->cap_data) {
    int64_t cap = s->cap_data ? 2 * s->cap_data : 256;
    while (cap < s->n_data + len) cap *= 2;
    int32_t *d = realloc(s->data, (size_t)cap * sizeof *d);
    if (!d) return 0;
    s->data = d;
    s->cap_data = cap;
  }
  if (len) memcpy(s->data + s->n_data, st, (size_t)len * sizeof *st);
  s->off[s->n] = s->n_data;
  s->len[s->n++] = len;
  s->n_data += len;
  return 1;
}

static int ends_alt(const grammar_rules *r, int64_t pos) {
  return r->e[pos].type == G_END || r->e[pos].type == G_ALT;
}

/* Room for `need` positions at g->work[at..]. */
static int work_room(rlx_grammar *g, int64_t need) {
  if (need <= g->work_cap) return 1;
  int64_t cap = g->work_cap ? 2 * g->work_cap : 1024;
  while (cap < need) cap *= 2;
  int32_t *w = realloc(g->work, (size_t)cap * sizeof *w);
  if (!w) return 0;
  g->work = w;
  g->work_cap = cap;
  return 1;
}

/* Adds to out every stack the stack at g->work[at..at + len) becomes with
 * a character class (or nothing) on top. Addressed by offset: g->work may
 * move as it grows. */
static void advance(rlx_grammar *g, int64_t at, int32_t len, stack_set *out, int depth) {
  if (g->overflow) return;
  if (depth > MAX_DEPTH || len > MAX_STACK_LEN || ++g->advances > MAX_ADVANCES) {
    g->overflow = 1;
    return;
  }
  if (len == 0 || g->r.e[g->work[at + len - 1]].type != G_REF) {
    if (!set_add(out, g->work + at, len)) g->overflow = 1;
    return;
  }
  const int32_t top = g->work[at + len - 1];
  int64_t sub = g->r.rule_start[g->r.e[top].value];
  const int64_t child = at + len;
  for (;;) {
    if (!work_room(g, child + len + 1)) {
      g->overflow = 1;
      return;
    }
    memcpy(g->work + child, g->work + at, (size_t)(len - 1) * sizeof *g->work);
    int32_t n = len - 1;
    if (!ends_alt(&g->r, top + 1)) g->work[child + n++] = top + 1;  /* what follows the reference */
    if (!ends_alt(&g->r, sub)) g->work[child + n++] = (int32_t)sub;  /* the alternative */
    advance(g, child, n, out, depth + 1);
    while (!ends_alt(&g->r, sub)) sub++;
    if (g->r.e[sub].type == G_END || g->overflow) break;
    sub++;
  }
}

/* Whether the class at pos takes code point c; *after is the element past it. */
static int match_char(const grammar_rules *r, int64_t pos, uint32_t c, int64_t *after) {
  const int positive = r->e[pos].type != G_CHAR_NOT;
  int found = 0;
  do {
    if (r->e[pos].type == G_CHAR_ANY) {
      found = 1;
      pos++;
    } else if (r->e[pos + 1].type == G_CHAR_RNG_UPPER) {
      found |= r->e[pos].value <= c && c <= r->e[pos + 1].value;
      pos += 2;
    } else {
      found |= r->e[pos].value == c;
      pos++;
    }
  } while (r->e[pos].type == G_CHAR_ALT);
  *after = pos;
  return found == positive;
}

/* Whether the class at pos takes some code point of [lo, hi] (a negated
 * class is taken to: it excludes a few characters, not whole ranges). */
static int match_range(const grammar_rules *r, int64_t pos, uint32_t lo, uint32_t hi) {
  if (r->e[pos].type == G_CHAR_NOT) return 1;
  do {
    if (r->e[pos].type == G_CHAR_ANY) return 1;
    uint32_t a = r->e[pos].value, b = a;
    if (r->e[pos + 1].type == G_CHAR_RNG_UPPER) b = r->e[++pos].value;
    if (a <= hi && lo <= b) return 1;
    pos++;
  } while (r->e[pos].type == G_CHAR_ALT);
  return 0;
}

/* out = the stacks of in after code point c. */
static void accept_char(rlx_grammar *g, const stack_set *in, uint32_t c, stack_set *out) {
  set_clear(out);
  for (int64_t i = 0; i < in->n && !g->overflow; i++) {
    int32_t len = in->len[i];
    if (!len) continue;
    const int32_t *st = in->data + in->off[i];
    int64_t after;
    if (!match_char(&g->r, st[len - 1], c, &after)) continue;
    if (!work_room(g, len)) {
      g->overflow = 1;
      return;
    }
    memcpy(g->work, st, (size_t)(len - 1) * sizeof *st);
    int32_t n = len - 1;
    if (!ends_alt(&g->r, after)) g->work[n++] = (int32_t)after;
    advance(g, 0, n, out, 0);
  }
}

/* ---------------------------------------------------------------- bytes */

/* Bytes a lead byte begins (1..4); 0 for a byte no code point starts with
 * (continuations, C0 and C1 which only begin overlong forms, F5..FF). */
static int utf8_len(unsigned char b) {
  return b < 0x80 ? 1 : b >= 0xc2 && b <= 0xdf ? 2 : (b & 0xf0) == 0xe0 ? 3 : b >= 0xf0 && b <= 0xf4 ? 4 : 0;
}

/* The smallest code point of an n-byte form (shorter forms are overlong). */
static const uint32_t UTF8_MIN[5] = {0, 0, 0x80, 0x800, 0x10000};

/* Runs bytes over g->cur (starting with g->n_pend pending bytes) into a
 * scratch set; 1 when they fit. *result is the set after them (g->cur when
 * no code point completed); *pend / *n_pend the bytes left unfinished. */
static int run_bytes(rlx_grammar *g, const unsigned char *b, size_t n, stack_set **result, unsigned char *pend,
                     int *n_pend) {
  stack_set *cur = &g->cur;
  int which = 0, np = g->n_pend;
  memcpy(pend, g->pend, 4);
  g->overflow = 0;
  g->advances = 0;
  for (size_t i = 0; i < n; i++) {
    if (np == 0 ? !utf8_len(b[i]) : (b[i] & 0xc0) != 0x80) return 0;
    pend[np++] = b[i];
    if (np < utf8_len(pend[0])) continue;
    uint32_t c = np == 1 ? pend[0] : pend[0] & (0xffu >> (np + 1));
    for (int k = 1; k < np; k++) c = c << 6 | (pend[k] & 0x3fu);
    if (c < UTF8_MIN[np] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return 0; /* not UTF-8 */
    np = 0;
    stack_set *next = &g->tmp[which];
    which ^= 1;
    accept_char(g, cur, c, next);
    if (g->overflow || next->n == 0) return 0;
    cur = next;
  }
  if (np) { /* the code points the unfinished bytes can begin */
    const int need = utf8_len(pend[0]), rest = 6 * (need - np);
    uint32_t v = pend[0] & (0xffu >> (need + 1));
    for (int k = 1; k < np; k++) v = v << 6 | (pend[k] & 0x3fu);
    uint32_t lo = v << rest, hi = lo | ((1u << rest) - 1);
    if (lo < UTF8_MIN[need]) lo = UTF8_MIN[need];
    if (hi > 0x10ffff) hi = 0x10ffff;
    if (lo > hi) return 0;
    int any = 0;
    for (int64_t i = 0; i < cur->n && !any; i++)
      any = cur->len[i] && match_range(&g->r, cur->data[cur->off[i] + cur->len[i] - 1], lo, hi);
    if (!any) return 0;
  }
  *result = cur;
  *n_pend = np;
  return 1;
}

/* Makes result (a scratch set, or g->cur itself) the state. */
static void commit(rlx_grammar *g, stack_set *result, const unsigned char *pend, int n_pend) {
  if (result != &g->cur) {
    stack_set t = g->cur;
    g->cur = *result;
    *result = t;
  }
  memcpy(g->pend, pend, 4);
  g->n_pend = n_pend;
}

rlx_status grammar_accept_bytes(rlx_grammar *g, const char *bytes, size_t n) {
  stack_set *res;
  unsigned char pend[4];
  int np;
  if (!run_bytes(g, (const unsigned char *)bytes, n, &res, pend, &np))
    return rlx_set_error(RLX_ERR_INVALID, "rlx_grammar: the text leaves the grammar%s",
                         g->overflow ? " (past its bounds of stacks)" : "");
  commit(g, res, pend, np);
  return RLX_OK;
}

/* ---------------------------------------------------------------- the API */

int rlx_grammar_complete(const rlx_grammar *g) {
  if (!g || g->n_pend) return 0;
  for (int64_t i = 0; i < g->cur.n; i++)
    if (!g->cur.len[i]) return 1;
  return 0;
}

/* The vocabulary's pieces (control tokens: empty, never allowed). */
static rlx_status load_pieces(rlx_grammar *g, const rlx_tokenizer *tok) {
  g->n_vocab = rlx_tokenizer_vocab_size(tok);
  size_t cap = 1 << 16, used = 0;
  g->pieces = malloc(cap);
  g->piece_off = malloc(((size_t)g->n_vocab + 1) * sizeof *g->piece_off);
  g->eog = malloc((size_t)g->n_vocab + 1);
  if (!g->pieces || !g->piece_off || !g->eog) return rlx_set_error(RLX_ERR_NOMEM, "rlx_grammar_new: out of memory");
  for (int32_t id = 0; id < g->n_vocab; id++) {
    size_t n = 0;
    g->eog[id] = (unsigned char)rlx_token_is_eog(tok, id);
    for (;;) {
      rlx_status st = rlx_token_to_piece(tok, id, 0, g->pieces + used, cap - used, &n);
      if (st == RLX_OK && used + n < cap) break;
      char *p = realloc(g->pieces, 2 * cap + n);
      if (!p) return rlx_set_error(RLX_ERR_NOMEM, "rlx_grammar_new: out of memory");
      g->pieces = p;
      cap = 2 * cap + n;
    }
    g->piece_off[id] = (int64_t)used;
    used += n;
  }
  g->piece_off[g->n_vocab] = (int64_t)used;
  return RLX_OK;
}

rlx_status rlx_grammar_new(const char *gbnf, const char *root, const rlx_tokenizer *tok, rlx_grammar **out) {
  if (!out) return rlx_set_error(RLX_ERR_INVALID, "rlx_grammar_new: out is NULL");
  *out = NULL;
  rlx_grammar *g = calloc(1, sizeof *g);
  if (!g) return rlx_set_error(RLX_ERR_NOMEM, "rlx_grammar_new: out of memory");
  rlx_status st = grammar_parse(gbnf, root, &g->r);
  /* the start: each alternative of the root rule, advanced */
  for (int64_t sub = st ? 0 : g->r.rule_start[g->r.root]; st == RLX_OK;) {
    int32_t n = 0;
    if (!work_room(g, 1)) st = rlx_set_error(RLX_ERR_NOMEM, "rlx_grammar_new: out of memory");
    if (st) break;
    if (!ends_alt(&g->r, sub)) g->work[n++] = (int32_t)sub;
    advance(g, 0, n, &g->cur, 0);
    if (g->overflow) st = rlx_set_error(RLX_ERR_UNSUPPORTED, "rlx_grammar_new: the grammar's start passes the "
                                        "matcher's bounds (4096 stacks, rules nested 1024 deep)");
    while (!ends_alt(&g->r, sub)) sub++;
    if (g->r.e[sub].type == G_END) break;
    sub++;
  }
  if (st == RLX_OK && tok) st = load_pieces(g, tok);
  if (st) {
    rlx_grammar_free(g);
    return st;
  }
  *out = g;
  return RLX_OK;
}

void rlx_grammar_free(rlx_grammar *g) {
  if (!g) return;
  grammar_rules_free(&g->r);
  set_free(&g->cur);
  set_free(&g->tmp[0]);
  set_free(&g->tmp[1]);
  free(g->pieces);
  free(g->piece_off);
  free(g->eog);
  free(g->work);
  free(g);
}

int rlx_grammar_allows(const rlx_grammar *cg, int32_t token) {
  rlx_grammar *g = (rlx_grammar *)cg; /* the scratch sets change; the state does not */
  if (!g || token < 0 || token >= g->n_vocab) return 0;
  if (g->eog[token]) return rlx_grammar_complete(g);
  const int64_t a = g->piece_off[token], b = g->piece_off[token + 1];
  stack_set *res;
  unsigned char pend[4];
  int np;
  return b > a && run_bytes(g, (const unsigned char *)g->pieces + a, (size_t)(b - a), &res, pend, &np);
}

rlx_status rlx_grammar_accept(rlx_grammar *g, int32_t token) {
  if (!g) return rlx_set_error(RLX_ERR_INVALID, "rlx_grammar_accept: grammar is NULL");
  if (token < 0 || token >= g->n_vocab)
    return rlx_set_error(RLX_ERR_INVALID, "rlx_grammar_accept: token %d is outside the vocabulary of %d", token,
                         g->n_vocab);
  if (!rlx_grammar_allows(g, token))
    return rlx_set_error(RLX_ERR_INVALID, "rlx_grammar_accept: the grammar does not allow token %d here", token);
  if (g->eog[token]) return RLX_OK; /* the end: nothing more to match */
  return grammar_accept_bytes(g, g->pieces + g->piece_off[token], (size_t)(g->piece_off[token + 1] - g->piece_off[token]));
}

/* first[b]: whether some code point a piece can begin with byte b could
 * continue the state (b alone for ASCII, the range b leads otherwise) —
 * a filter that turns most of the vocabulary away with one lookup. */
static void first_bytes(const rlx_grammar *g, unsigned char *first) {
  memset(first, 0, 256);
  if (g->n_pend) { /* continuation bytes only: leave it to the full check */
    memset(first + 0x80, 1, 0x40);
    return;
  }
  for (int64_t i = 0; i < g->cur.n; i++) {
    if (!g->cur.len[i]) continue;
    const int64_t top = g->cur.data[g->cur.off[i] + g->cur.len[i] - 1];
    for (int b = 0; b < 256; b++) {
      if (first[b]) continue;
      int64_t after;
      const int n = utf8_len((unsigned char)b);
      if (n == 1) first[b] = (unsigned char)match_char(&g->r, top, (uint32_t)b, &after);
      else if (n) {
        const int rest = 6 * (n - 1);
        uint32_t lo = (uint32_t)(b & (0xff >> (n + 1))) << rest, hi = lo | ((1u << rest) - 1);
        if (lo < UTF8_MIN[n]) lo = UTF8_MIN[n];
        if (hi > 0x10ffff) hi = 0x10ffff;
        first[b] = lo <= hi && (unsigned char)match_range(&g->r, top, lo, hi);
      }
    }
  }
}

/* Whether a and b hold the same stacks (in any order; each set has no
 * duplicates). */
static int set_equal(const stack_set *a, const stack_set *b) {
  if (a->n != b->n) return 0;
  for (int64_t i = 0; i < a->n; i++) {
    int found = 0;
    for (int64_t j = 0; j < b->n && !found; j++)
      found = a->len[i] == b->len[j] &&
              !memcmp(a->data + a->off[i], b->data + b->off[j], (size_t)a->len[i] * sizeof *a->data);
    if (!found) return 0;
  }
  return 1;
}

int64_t grammar_mask(rlx_grammar *g, float *logits, int64_t n_vocab) {
  unsigned char first[256], same[128] = {0};
  first_bytes(g, first);
  const int complete = rlx_grammar_complete(g);
  /* same[c]: the ASCII code point c leaves the state as it is (a string's
   * ordinary characters, say): a piece's run of them costs a lookup each,
   * and the matcher starts after it */
  for (int c = 0; c < 128 && !g->n_pend; c++)
    if (first[c]) {
      g->overflow = 0;
      g->advances = 0;
      accept_char(g, &g->cur, (uint32_t)c, &g->tmp[0]);
      same[c] = !g->overflow && set_equal(&g->tmp[0], &g->cur);
    }
  int64_t n = 0;
  for (int64_t t = g->n_vocab; t < n_vocab; t++) logits[t] = -INFINITY;
  for (int32_t t = 0; t < g->n_vocab && t < n_vocab; t++) {
    if (logits[t] == -INFINITY) continue;
    const int64_t a = g->piece_off[t], b = g->piece_off[t + 1];
    const unsigned char *p = (const unsigned char *)g->pieces + a;
    int64_t k = 0;
    while (k < b - a && p[k] < 128 && same[p[k]]) k++;
    stack_set *res;
    unsigned char pend[4];
    int np;
    const int ok = g->eog[t] ? complete
                             : b > a && first[p[0]] && (k == b - a || run_bytes(g, p + k, (size_t)(b - a - k), &res, pend, &np));
    if (ok) n++;
    else logits[t] = -INFINITY;
  }
  return n;
}
