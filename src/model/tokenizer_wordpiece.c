/* tokenizer_wordpiece.c — the encoder tokenizer of wordpiece.h: loading
 * tokenizer.json / vocab.txt (every id, string and template checked) and
 * encoding (added tokens, then per span the WordPiece model: normalize,
 * pre-tokenize, greedy longest match; or the Unigram model of unigram.h;
 * then the template). */
#include "unigram.h"

#include "../ir/hash.h"
#include "../ir/ir.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  char *s;        /* content; matched in the raw text */
  size_t len;
  int32_t id;
  int lstrip, rstrip;  /* the whitespace before / after it goes with it */
} wp_added;

struct wp_tokenizer {
  int clean_text, chinese, strip_accents, lowercase;
  int32_t n_vocab;
  char *text;             /* every token's text back to back */
  uint64_t *off;          /* n_vocab + 1 offsets */
  int32_t *slots;         /* hash map of the texts: id + 1, 0 empty */
  uint64_t mask;
  int32_t unk, pad;
  int64_t max_chars, max_length;
  char prefix[16];
  size_t prefix_len;
  wp_added *added;        /* longest first */
  int n_added;
  wp_item *single, *pair;
  int n_single, n_pair;
  ug_model *ug;           /* a Unigram model (NULL: WordPiece) */
};

/* ---------------------------------------------------------------- vocabulary */

/* keyed (ir/hash.h): a vocabulary cannot choose texts that all collide */
static uint64_t hash_bytes(const char *s, size_t n) { return ir_hash_bytes(s, n); }

int32_t wp_lookup(const wp_tokenizer *t, const char *s, size_t n) {
  for (uint64_t i = hash_bytes(s, n) & t->mask;; i = (i + 1) & t->mask) {
    int32_t id = t->slots[i] - 1;
    if (id < 0) return -1;
    if (t->off[id + 1] - t->off[id] == n && !memcmp(t->text + t->off[id], s, n)) return id;
  }
}

/* Builds the text table and map from n_vocab strings (NULL: no token of
 * that id, which keeps an empty text and is never matched). */
static rlx_status build_vocab(wp_tokenizer *t, const char *what, char **strs, const size_t *lens) {
  uint64_t total = 0;
  for (int32_t i = 0; i < t->n_vocab; i++) total += strs[i] ? lens[i] : 0;
  uint64_t cap = 16;
  while (cap < 2 * (uint64_t)t->n_vocab) cap *= 2;
  t->text = malloc(total + 1);
  t->off = malloc(((size_t)t->n_vocab + 1) * sizeof *t->off);
  t->slots = calloc(cap, sizeof *t->slots);
  if (!t->text || !t->off || !t->slots) return rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory", what);
  t->mask = cap - 1;
  uint64_t o = 0;
  for (int32_t i = 0; i < t->n_vocab; i++) {
    t->off[i] = o;
    if (strs[i]) memcpy(t->text + o, strs[i], lens[i]), o += lens[i];
  }
  t->off[t->n_vocab] = o;
  for (int32_t i = 0; i < t->n_vocab; i++) {
    if (!strs[i]) continue;
    size_t n = lens[i];
    uint64_t h = hash_bytes(strs[i], n) & t->mask;
    for (;; h = (h + 1) & t->mask) {
      int32_t id = t->slots[h] - 1;
      if (id < 0) break;
      if (t->off[id + 1] - t->off[id] == n && !memcmp(t->text + t->off[id], strs[i], n))
        return rlx_set_error(RLX_ERR_FORMAT, "%s: token \"%.*s\" appears twice in the vocabulary", what,
                             (int)(n > 64 ? 64 : n), strs[i]);
    }
    t->slots[h] = i + 1;
  }
  return RLX_OK;
}

static int32_t id_of(const wp_tokenizer *t, const char *s) { return wp_lookup(t, s, strlen(s)); }

static void default_templates(wp_tokenizer *t, int32_t cls, int32_t sep, int roberta) {
  t->n_single = 3;
  t->single[0] = (wp_item){cls, 0};
  t->single[1] = (wp_item){WP_SEQ_A, 0};
  t->single[2] = (wp_item){sep, 0};
  int n = 0;
  t->pair[n++] = (wp_item){cls, 0};
  t->pair[n++] = (wp_item){WP_SEQ_A, 0};
  t->pair[n++] = (wp_item){sep, 0};
  if (roberta) t->pair[n++] = (wp_item){sep, 0};
  t->pair[n++] = (wp_item){WP_SEQ_B, roberta ? 0 : 1};
  t->pair[n++] = (wp_item){sep, roberta ? 0 : 1};
  t->n_pair = n;
}

static wp_tokenizer *new_tokenizer(void) {
  wp_tokenizer *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->single = calloc(8, sizeof *t->single);
  t->pair = calloc(8, sizeof *t->pair);
  if (!t->single || !t->pair) {
    wp_free(t);
    return NULL;
  }
  t->clean_text = t->chinese = 1;
  t->strip_accents = t->lowercase = 1;
  t->unk = t->pad = -1;
  t->max_chars = 100;
  memcpy(t->prefix, "##", 3);
  t->prefix_len = 2;
  return t;
}

void wp_free(wp_tokenizer *t) {
  if (!t) return;
  free(t->text);
  free(t->off);
  free(t->slots);
  for (int i = 0; i < t->n_added; i++) free(t->added[i].s);
  free(t->added);
  free(t->single);
  free(t->pair);
  ug_free(t->ug);
  free(t);
}

int32_t wp_vocab_size(const wp_tokenizer *t) { return t->n_vocab; }
int32_t wp_pad_id(const wp_tokenizer *t) { return t->pad < 0 ? 0 : t->pad; }
int64_t wp_max_length(const wp_tokenizer *t) { return t->max_length; }

rlx_status wp_load_vocab(const char *text, size_t len, const char *what, int lowercase, wp_tokenizer **out) {
  *out = NULL;
  wp_tokenizer *t = new_tokenizer();
  if (!t) return rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory", what);
  int64_t n = 0;
  for (size_t i = 0; i < len; i++) n += text[i] == '\n';
  n += len && text[len - 1] != '\n';
  rlx_status st = RLX_OK;
  char **strs = calloc((size_t)n + 1, sizeof *strs);
  size_t *lens = calloc((size_t)n + 1, sizeof *lens);
  if (!strs || !lens) st = rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory", what);
  if (!st && (n == 0 || n > INT32_MAX - 1)) st = rlx_set_error(RLX_ERR_FORMAT, "%s: %lld tokens", what, (long long)n);
  for (size_t i = 0, k = 0; !st && i < len; k++) {
    size_t e = i;
    while (e < len && text[e] != '\n') e++;
    size_t l = e - i;
    if (l && text[i + l - 1] == '\r') l--;
    strs[k] = (char *)text + i;
    lens[k] = l;
    i = e + 1;
  }
  if (!st) {
    t->n_vocab = (int32_t)n;
    t->lowercase = t->strip_accents = lowercase;
    st = build_vocab(t, what, strs, lens);
  }
  free(strs);
  free(lens);
  if (!st) {
    t->unk = id_of(t, "[UNK]");
    t->pad = id_of(t, "[PAD]");
    int32_t cls = id_of(t, "[CLS]"), sep = id_of(t, "[SEP]");
    if (t->unk < 0 || cls < 0 || sep < 0) st = rlx_set_error(RLX_ERR_FORMAT, "%s: no [UNK], [CLS] or [SEP] token", what);
    else default_templates(t, cls, sep, 0);
  }
  /* the special tokens are matched in the text, as BertWordPieceTokenizer adds them */
  static const char *const specials[] = {"[MASK]", "[UNK]", "[CLS]", "[SEP]", "[PAD]"};
  if (!st && !(t->added = calloc(5, sizeof *t->added))) st = rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory", what);
  for (int i = 0; !st && i < 5; i++) {
    int32_t id = id_of(t, specials[i]);
    if (id < 0) continue;
    wp_added *a = &t->added[t->n_added];
    a->len = strlen(specials[i]);
    a->id = id;
    if (!(a->s = malloc(a->len + 1))) st = rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory", what);
    else memcpy(a->s, specials[i], a->len + 1), t->n_added++;
  }
  if (st) wp_free(t);
  else *out = t;
  return st;
}

/* ---------------------------------------------------------------- tokenizer.json */

#define JSON_FAIL(...) (st = rlx_set_error(RLX_ERR_FORMAT, __VA_ARGS__))

static rlx_status read_normalizer(wp_tokenizer *t, const json_doc *d, int64_t n, const char *what) {
  if (n < 0 || json_kind(d, n) == JSON_NULL) {
    t->clean_text = t->chinese = t->strip_accents = t->lowercase = 0;
    return RLX_OK;
  }
  if (!json_str_eq(d, json_get(d, n, "type"), "BertNormalizer"))
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "%s: normalizer: only BertNormalizer is supported", what);
  int v;
  t->clean_text = json_bool(d, json_get(d, n, "clean_text"), &v) ? v : 1;
  t->chinese = json_bool(d, json_get(d, n, "handle_chinese_chars"), &v) ? v : 1;
  t->lowercase = json_bool(d, json_get(d, n, "lowercase"), &v) ? v : 1;
  t->strip_accents = json_bool(d, json_get(d, n, "strip_accents"), &v) ? v : t->lowercase;
  return RLX_OK;
}

/* The id of a special token named in a post-processor ("[CLS]" or ["[CLS]", 101]). */
static int32_t special_id(const wp_tokenizer *t, const json_doc *d, int64_t v) {
  int64_t id;
  if (json_kind(d, v) == JSON_ARRAY && d->tok[v].size == 2 &&
      json_int(d, json_next(d, json_first(d, v)), 0, t->n_vocab - 1, &id))
    return (int32_t)id;
  return -1;
}

static rlx_status read_template(wp_tokenizer *t, const json_doc *d, int64_t list, int64_t specials,
                                wp_item *items, int *n_items, const char *what) {
  if (json_kind(d, list) != JSON_ARRAY || d->tok[list].size > 8)
    return rlx_set_error(RLX_ERR_FORMAT, "%s: post_processor template is not a list of at most 8 items", what);
  *n_items = 0;
  for (int64_t e = json_first(d, list); e >= 0 && *n_items < (int)d->tok[list].size; e = json_next(d, e)) {
    int64_t sp = json_get(d, e, "SpecialToken"), seq = json_get(d, e, "Sequence"), type;
    wp_item it = {0, 0};
    int64_t body = sp >= 0 ? sp : seq;
    if (body < 0) return rlx_set_error(RLX_ERR_FORMAT, "%s: post_processor item is neither SpecialToken nor Sequence", what);
    if (json_int(d, json_get(d, body, "type_id"), 0, 1 << 20, &type)) it.type_id = (int32_t)type;
    int64_t name = json_get(d, body, "id");
    if (seq >= 0) {
      if (json_str_eq(d, name, "A")) it.id = WP_SEQ_A;
      else if (json_str_eq(d, name, "B")) it.id = WP_SEQ_B;
      else return rlx_set_error(RLX_ERR_FORMAT, "%s: post_processor Sequence id is not A or B", what);
    } else {
      char *s = json_strdup(d, name, NULL);
      int64_t ids = s ? json_get(d, json_get(d, specials, s), "ids") : -1;
      free(s);
      int64_t id;
      if (json_kind(d, ids) != JSON_ARRAY || d->tok[ids].size != 1 ||
          !json_int(d, json_first(d, ids), 0, t->n_vocab - 1, &id))
        return rlx_set_error(RLX_ERR_FORMAT, "%s: post_processor special token without one valid id", what);
      it.id = (int32_t)id;
    }
    items[(*n_items)++] = it;
  }
  return RLX_OK;
}

static rlx_status read_post_processor(wp_tokenizer *t, const json_doc *d, int64_t p, const char *what) {
  if (p < 0 || json_kind(d, p) == JSON_NULL) {
    t->n_single = t->n_pair = 0;
    t->single[t->n_single++] = (wp_item){WP_SEQ_A, 0};
    t->pair[t->n_pair++] = (wp_item){WP_SEQ_A, 0};
    t->pair[t->n_pair++] = (wp_item){WP_SEQ_B, 1};
    return RLX_OK;
  }
  int64_t type = json_get(d, p, "type");
  if (json_str_eq(d, type, "TemplateProcessing")) {
    int64_t specials = json_get(d, p, "special_tokens");
    rlx_status st = read_template(t, d, json_get(d, p, "single"), specials, t->single, &t->n_single, what);
    return st ? st : read_template(t, d, json_get(d, p, "pair"), specials, t->pair, &t->n_pair, what);
  }
  int roberta = json_str_eq(d, type, "RobertaProcessing");
  if (!roberta && !json_str_eq(d, type, "BertProcessing"))
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "%s: post_processor type is not supported", what);
  int32_t cls = special_id(t, d, json_get(d, p, "cls")), sep = special_id(t, d, json_get(d, p, "sep"));
  if (cls < 0 || sep < 0) return rlx_set_error(RLX_ERR_FORMAT, "%s: post_processor without valid cls/sep", what);
  default_templates(t, cls, sep, roberta);
  return RLX_OK;
}

static int added_longer_first(const void *a, const void *b) {
  const wp_added *x = a, *y = b;
  return x->len < y->len ? 1 : x->len > y->len ? -1 : 0;
}

static rlx_status read_added(wp_tokenizer *t, const json_doc *d, int64_t list, const char *what) {
  if (list < 0 || json_kind(d, list) == JSON_NULL) return RLX_OK;
  if (json_kind(d, list) != JSON_ARRAY) return rlx_set_error(RLX_ERR_FORMAT, "%s: added_tokens is not a list", what);
  t->added = calloc((size_t)d->tok[list].size + 1, sizeof *t->added);
  if (!t->added) return rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory", what);
  for (int64_t e = json_first(d, list); e >= 0 && t->n_added < (int)d->tok[list].size; e = json_next(d, e)) {
    int64_t id;
    int norm = 0;
    json_bool(d, json_get(d, e, "normalized"), &norm);
    if (!json_int(d, json_get(d, e, "id"), 0, t->n_vocab - 1, &id))
      return rlx_set_error(RLX_ERR_FORMAT, "%s: added token without a valid id", what);
    wp_added a = {NULL, 0, (int32_t)id, 0, 0};
    json_bool(d, json_get(d, e, "lstrip"), &a.lstrip);
    json_bool(d, json_get(d, e, "rstrip"), &a.rstrip);
    a.s = json_strdup(d, json_get(d, e, "content"), &a.len);
    if (!a.s) return rlx_set_error(RLX_ERR_FORMAT, "%s: added token %lld without content", what, (long long)id);
    if (norm || a.len == 0) {  /* matched after normalization: left to the vocabulary */
      free(a.s);
      continue;
    }
    t->added[t->n_added++] = a;
  }
  qsort(t->added, (size_t)t->n_added, sizeof *t->added, added_longer_first);
  return RLX_OK;
}

/* WordPiece's model.vocab (an object of ids): its texts in id order into
 * *strs and *lens, t->n_vocab of them. */
static rlx_status read_vocab_object(wp_tokenizer *t, const json_doc *d, int64_t vocab, const char *what, char ***strs_out,
                                    size_t **lens_out) {
  rlx_status st = RLX_OK;
  if (json_kind(d, vocab) != JSON_OBJECT || d->tok[vocab].size == 0)
    return JSON_FAIL("%s: model.vocab is not a non-empty object", what);
  /* the ids: every one in [0, 2^24), the vocabulary as large as the largest + 1 */
  int64_t max_id = -1;
  for (int64_t k = json_first(d, vocab); k >= 0 && (uint32_t)k < d->tok[vocab].next; k = json_next(d, json_next(d, k))) {
    int64_t id;
    if (!json_int(d, json_next(d, k), 0, (1 << 24) - 1, &id))
      return JSON_FAIL("%s: model.vocab has an id that is not an integer in [0, 2^24)", what);
    if (id > max_id) max_id = id;
  }
  t->n_vocab = (int32_t)max_id + 1;
  char **strs = *strs_out = calloc((size_t)t->n_vocab, sizeof *strs);
  size_t *lens = *lens_out = calloc((size_t)t->n_vocab, sizeof *lens);
  if (!strs || !lens) return rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory", what);
  for (int64_t k = json_first(d, vocab); !st && k >= 0 && (uint32_t)k < d->tok[vocab].next;
       k = json_next(d, json_next(d, k))) {
    int64_t id;
    json_int(d, json_next(d, k), 0, max_id, &id);
    if (strs[id]) return JSON_FAIL("%s: model.vocab gives id %lld twice", what, (long long)id);
    strs[id] = json_strdup(d, k, &lens[id]);
    if (!strs[id]) st = rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory", what);
  }
  return st;
}

/* WordPiece's unknown token, continuation prefix, word limit, normalizer and pre-tokenizer. */
static rlx_status read_wordpiece(wp_tokenizer *t, const json_doc *d, int64_t model, const char *what) {
  rlx_status st = RLX_OK;
  char *unk = json_strdup(d, json_get(d, model, "unk_token"), NULL);
  t->unk = unk ? id_of(t, unk) : -1;
  free(unk);
  if (t->unk < 0) return JSON_FAIL("%s: model.unk_token is missing or not in the vocabulary", what);
  int64_t pfx = json_get(d, model, "continuing_subword_prefix");
  if (pfx >= 0) {
    if (json_kind(d, pfx) != JSON_STRING || d->tok[pfx].len >= sizeof t->prefix)
      return JSON_FAIL("%s: model.continuing_subword_prefix is not a short string", what);
    t->prefix_len = (size_t)json_str(d, pfx, t->prefix);
  }
  int64_t mc = json_get(d, model, "max_input_chars_per_word");
  if (mc >= 0 && !json_int(d, mc, 0, INT32_MAX, &t->max_chars))
    return JSON_FAIL("%s: model.max_input_chars_per_word is not a count", what);
  if ((st = read_normalizer(t, d, json_get(d, 0, "normalizer"), what))) return st;
  int64_t pre = json_get(d, 0, "pre_tokenizer");
  if (!json_str_eq(d, json_get(d, pre, "type"), "BertPreTokenizer"))
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "%s: pre_tokenizer: only BertPreTokenizer is supported", what);
  return RLX_OK;
}

static rlx_status load_doc(wp_tokenizer *t, const json_doc *d, const char *what) {
  rlx_status st = RLX_OK;
  int64_t model = json_get(d, 0, "model");
  int64_t type = json_get(d, model, "type");
  if (json_kind(d, model) != JSON_OBJECT) return JSON_FAIL("%s: no \"model\" object", what);
  int unigram = json_str_eq(d, type, "Unigram");
  if (type >= 0 && !unigram && !json_str_eq(d, type, "WordPiece"))
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "%s: model type is not WordPiece or Unigram", what);
  char **strs = NULL;
  size_t *lens = NULL;
  st = unigram ? ug_load(d, model, what, &t->ug, &strs, &lens, &t->n_vocab)
               : read_vocab_object(t, d, json_get(d, model, "vocab"), what, &strs, &lens);
  if (!st) st = build_vocab(t, what, strs, lens);
  for (int32_t i = 0; strs && i < t->n_vocab; i++) free(strs[i]);
  free(strs);
  free(lens);
  if (!st && unigram) {
    t->unk = ug_unk_id(t->ug);
    st = ug_load_front(t->ug, t, d, json_get(d, 0, "normalizer"), json_get(d, 0, "pre_tokenizer"), what);
  } else if (!st) {
    st = read_wordpiece(t, d, model, what);
  }
  if (st) return st;
  int64_t trunc = json_get(d, 0, "truncation");
  if (json_kind(d, trunc) == JSON_OBJECT && !json_int(d, json_get(d, trunc, "max_length"), 1, INT32_MAX, &t->max_length))
    return JSON_FAIL("%s: truncation.max_length is not a positive count", what);
  if ((st = read_added(t, d, json_get(d, 0, "added_tokens"), what))) return st;
  int64_t pad = json_get(d, json_get(d, 0, "padding"), "pad_id");
  int64_t pid;
  t->pad = json_int(d, pad, 0, t->n_vocab - 1, &pid) ? (int32_t)pid : id_of(t, unigram ? "<pad>" : "[PAD]");
  return read_post_processor(t, d, json_get(d, 0, "post_processor"), what);
}

rlx_status wp_load_json(const char *text, size_t len, const char *what, wp_tokenizer **out) {
  *out = NULL;
  json_doc d;
  rlx_status st = json_parse(text, len, what, &d);
  if (st) return st;
  wp_tokenizer *t = new_tokenizer();
  if (!t) st = rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory", what);
  else if (json_kind(&d, 0) != JSON_OBJECT) st = rlx_set_error(RLX_ERR_FORMAT, "%s: not a JSON object", what);
  else st = load_doc(t, &d, what);
  json_free(&d);
  if (st) wp_free(t);
  else *out = t;
  return st;
}

/* ---------------------------------------------------------------- encoding */

static int cpt_flags(uint32_t cp) {
  int lo = 0, hi = wp_n_cpt_ranges - 1;
  while (lo <= hi) {
    int m = (lo + hi) / 2;
    if (cp < wp_cpt_ranges[m].first) hi = m - 1;
    else if (cp > wp_cpt_ranges[m].last) lo = m + 1;
    else return wp_cpt_ranges[m].flags;
  }
  return 0;
}

static const wp_cpt_map *map_find(const wp_cpt_map *m, int n, uint32_t cp) {
  int lo = 0, hi = n - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    if (cp < m[mid].cp) hi = mid - 1;
    else if (cp > m[mid].cp) lo = mid + 1;
    else return &m[mid];
  }
  return NULL;
}

typedef struct {
  uint32_t *cp;
  size_t n, cap;
} cpt_buf;

static int put(cpt_buf *b, uint32_t cp) {
  if (b->n == b->cap) {
    size_t cap = b->cap ? 2 * b->cap : 256;
    uint32_t *p = realloc(b->cp, cap * sizeof *p);
    if (!p) return -1;
    b->cp = p;
    b->cap = cap;
  }
  b->cp[b->n++] = cp;
  return 0;
}

static int put_lower(const wp_tokenizer *t, cpt_buf *b, uint32_t cp) {
  const wp_cpt_map *m = t->lowercase ? map_find(wp_lower_map, wp_n_lower_map, cp) : NULL;
  if (!m) return put(b, cp);
  for (int i = 0; i < m->len; i++)
    if (put(b, wp_lower_data[m->off + i])) return -1;
  return 0;
}

/* One codepoint through the BertNormalizer into b. */
static int normalize(const wp_tokenizer *t, cpt_buf *b, uint32_t cp) {
  int f = cpt_flags(cp);
  if (t->clean_text) {
    if (cp == 0 || cp == 0xFFFD || (f & WP_CONTROL)) return 0;
    if (f & WP_SPACE) cp = ' ';
  }
  int cjk = t->chinese && (f & WP_CJK);
  if (cjk && put(b, ' ')) return -1;
  int r = 0;
  if (t->strip_accents && cp >= 0xAC00 && cp <= 0xD7A3) {  /* Hangul syllable: NFD by formula */
    uint32_t s = cp - 0xAC00;
    r = put_lower(t, b, 0x1100 + s / 588) | put_lower(t, b, 0x1161 + s % 588 / 28);
    if (s % 28) r |= put_lower(t, b, 0x11A7 + s % 28);
  } else if (t->strip_accents && (f & WP_MARK)) {
    r = 0;
  } else {
    const wp_cpt_map *m = t->strip_accents ? map_find(wp_strip_map, wp_n_strip_map, cp) : NULL;
    if (!m) r = put_lower(t, b, cp);
    else
      for (int i = 0; i < m->len && !r; i++) r = put_lower(t, b, wp_strip_data[m->off + i]);
  }
  if (cjk && !r) r = put(b, ' ');
  return r;
}

static int utf8_encode(uint32_t cp, char *o) {
  if (cp < 0x80) return o[0] = (char)cp, 1;
  if (cp < 0x800) return o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3F)), 2;
  if (cp < 0x10000)
    return o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | (cp >> 6 & 0x3F)), o[2] = (char)(0x80 | (cp & 0x3F)), 3;
  o[0] = (char)(0xF0 | cp >> 18), o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
  o[2] = (char)(0x80 | (cp >> 6 & 0x3F)), o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* Decodes one UTF-8 sequence (an invalid byte is U+FFFD); returns its length. */
static int utf8_decode(const uint8_t *s, size_t n, uint32_t *cp) {
  uint8_t c = s[0];
  int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (len == 1) return *cp = c, 1;
  if (len == 0 || (size_t)len > n) return *cp = 0xFFFD, 1;
  uint32_t v = c & (0x7F >> len);
  for (int i = 1; i < len; i++) {
    if ((s[i] & 0xC0) != 0x80) return *cp = 0xFFFD, 1;
    v = v << 6 | (s[i] & 0x3F);
  }
  static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (v < min[len] || v > 0x10FFFF || (v >= 0xD800 && v < 0xE000)) return *cp = 0xFFFD, 1;
  return *cp = v, len;
}

int wp_emit(wp_ids *o, int32_t id, int32_t type) {
  if (o->n == o->cap) {
    int64_t cap = o->cap ? 2 * o->cap : 64;
    int32_t *ids = realloc(o->ids, (size_t)cap * sizeof *ids);
    if (!ids) return -1;
    o->ids = ids;
    int32_t *types = realloc(o->types, (size_t)cap * sizeof *types);
    if (!types) return -1;
    o->types = types;
    o->cap = cap;
  }
  o->ids[o->n] = id;
  o->types[o->n++] = type;
  return 0;
}

void wp_ids_free(wp_ids *o) {
  free(o->ids);
  free(o->types);
  memset(o, 0, sizeof *o);
}

/* WordPiece of one word (n codepoints), into o. */
static int word_pieces(const wp_tokenizer *t, const uint32_t *w, size_t n, char *scratch, size_t *byte_off, wp_ids *o) {
  if ((int64_t)n > t->max_chars) return wp_emit(o, t->unk, 0);
  size_t nb = 0;
  char *bytes = scratch + t->prefix_len;
  for (size_t i = 0; i < n; i++) byte_off[i] = nb, nb += (size_t)utf8_encode(w[i], bytes + nb);
  byte_off[n] = nb;
  int64_t first = o->n;
  for (size_t start = 0; start < n;) {
    /* a continuation is looked up with the prefix written over the bytes
     * just before it (matched already, never read again) */
    const char *piece = bytes + byte_off[start] - (start ? t->prefix_len : 0);
    if (start) memcpy(bytes + byte_off[start] - t->prefix_len, t->prefix, t->prefix_len);
    int32_t id = -1;
    size_t end = n;
    for (; end > start; end--) {
      id = wp_lookup(t, piece, (size_t)(bytes + byte_off[end] - piece));
      if (id >= 0) break;
    }
    if (id < 0) {
      o->n = first;
      return wp_emit(o, t->unk, 0);
    }
    if (wp_emit(o, id, 0)) return -1;
    start = end;
  }
  return 0;
}

/* Normalizes, pre-tokenizes and WordPieces s[0..len) (no added tokens in it). */
static rlx_status encode_span(const wp_tokenizer *t, const char *s, size_t len, int first, cpt_buf *b, wp_ids *o) {
  if (t->ug) return ug_encode(t, t->ug, s, len, first, o);
  b->n = 0;
  for (size_t i = 0; i < len;) {
    uint32_t cp;
    i += (size_t)utf8_decode((const uint8_t *)s + i, len - i, &cp);
    if (normalize(t, b, cp)) return rlx_set_error(RLX_ERR_NOMEM, "wordpiece: out of memory");
  }
  size_t longest = 0, run = 0;
  for (size_t i = 0; i < b->n; i++) {
    run = (cpt_flags(b->cp[i]) & (WP_SPACE | WP_PUNCT)) ? 0 : run + 1;
    if (run > longest) longest = run;
  }
  size_t cap = (longest > (size_t)t->max_chars ? (size_t)t->max_chars : longest) + 1;
  char *scratch = malloc(cap * 4 + t->prefix_len + 4);
  size_t *byte_off = malloc((cap + 1) * sizeof *byte_off);
  int err = !scratch || !byte_off;
  for (size_t i = 0; i < b->n && !err;) {
    int f = cpt_flags(b->cp[i]);
    if (f & WP_SPACE) {
      i++;
      continue;
    }
    size_t j = i + 1;
    if (!(f & WP_PUNCT))
      while (j < b->n && !(cpt_flags(b->cp[j]) & (WP_SPACE | WP_PUNCT))) j++;
    err = word_pieces(t, b->cp + i, j - i, scratch, byte_off, o) != 0;
    i = j;
  }
  free(scratch);
  free(byte_off);
  return err ? rlx_set_error(RLX_ERR_NOMEM, "wordpiece: out of memory") : RLX_OK;
}

/* Whether s[i..] starts with a whitespace character; its length in *n. */
static int space_at(const char *s, size_t len, size_t i, size_t *n) {
  uint32_t cp;
  *n = (size_t)utf8_decode((const uint8_t *)s + i, len - i, &cp);
  return (cpt_flags(cp) & WP_SPACE) != 0;
}

/* The ids of one text: plain spans and the added tokens written in it (an
 * lstrip/rstrip token takes the whitespace before/after it along, as
 * tokenizers' AddedVocabulary does). */
static rlx_status encode_text(const wp_tokenizer *t, const char *s, size_t len, wp_ids *o) {
  cpt_buf b = {0};
  rlx_status st = RLX_OK;
  size_t start = 0;
  for (size_t i = 0; i < len && !st;) {
    int hit = -1;
    for (int k = 0; k < t->n_added && hit < 0; k++)
      if (t->added[k].len <= len - i && !memcmp(s + i, t->added[k].s, t->added[k].len)) hit = k;
    if (hit < 0) {
      i++;
      continue;
    }
    size_t end = i, n;
    if (t->added[hit].lstrip) {
      size_t k = i;
      while (k > 0) {
        size_t c = k - 1;
        while (c > 0 && k - c < 4 && ((uint8_t)s[c] & 0xC0) == 0x80) c--;
        if (!space_at(s, len, c, &n) || c + n != k) break;
        k = c;
      }
      if (k >= start) end = k;
    }
    if (end > start) st = encode_span(t, s + start, end - start, start == 0, &b, o);
    if (!st && wp_emit(o, t->added[hit].id, 0)) st = rlx_set_error(RLX_ERR_NOMEM, "wordpiece: out of memory");
    i += t->added[hit].len;
    while (t->added[hit].rstrip && i < len && space_at(s, len, i, &n)) i += n;
    start = i;
  }
  if (!st && start < len) st = encode_span(t, s + start, len - start, start == 0, &b, o);
  free(b.cp);
  return st;
}

rlx_status wp_encode(const wp_tokenizer *t, const char *a, size_t alen, const char *b, size_t blen,
                     int add_special, int64_t max_len, wp_ids *o) {
  o->n = 0;
  wp_ids sa = {0}, sb = {0};
  rlx_status st = encode_text(t, a, alen, &sa);
  if (!st && b) st = encode_text(t, b, blen, &sb);
  const wp_item *tpl = b ? t->pair : t->single;
  int n_tpl = b ? t->n_pair : t->n_single;
  if (!st && max_len > 0) {
    int64_t specials = 0;
    if (add_special)
      for (int i = 0; i < n_tpl; i++) specials += tpl[i].id >= 0;
    int64_t budget = max_len > specials ? max_len - specials : 0;
    if (sa.n + sb.n > budget) {  /* longest first, as tokenizers: the shorter keeps at most half */
      int64_t *lo = sa.n > sb.n ? &sb.n : &sa.n, *hi = lo == &sa.n ? &sb.n : &sa.n;
      if (*lo > budget / 2) *lo = budget / 2;
      *hi = budget - *lo;
    }
  }
  for (int i = 0; !st && i < n_tpl; i++) {
    const wp_ids *seq = tpl[i].id == WP_SEQ_A ? &sa : tpl[i].id == WP_SEQ_B ? &sb : NULL;
    int err = 0;
    if (!seq) err = add_special ? wp_emit(o, tpl[i].id, tpl[i].type_id) : 0;
    else
      for (int64_t k = 0; k < seq->n && !err; k++) err = wp_emit(o, seq->ids[k], add_special ? tpl[i].type_id : seq == &sb);
    if (err) st = rlx_set_error(RLX_ERR_NOMEM, "wordpiece: out of memory");
  }
  wp_ids_free(&sa);
  wp_ids_free(&sb);
  return st;
}
