/* tokenizer.c — the tokenizer object: loading the vocabulary from the
 * tokenizer.ggml.* metadata (every array length, id and type checked), the
 * special tokens (BOS/EOS rules, end of generation, tokens matched whole
 * in the text) and the public encode/decode API. */
#include "tokenizer.h"

#include "ir/hash.h"
#include "ir/ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- codepoints */

int tok_cpt_flags(uint32_t cp) {
  int lo = 0, hi = tok_n_cpt_ranges - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    if (cp < tok_cpt_ranges[mid].first) hi = mid - 1;
    else if (cp > tok_cpt_ranges[mid].last) lo = mid + 1;
    else return tok_cpt_ranges[mid].flags;
  }
  return 0;
}

int tok_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp) {
  static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
  uint8_t c = s[0];
  int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (len == 1) { *cp = c; return 1; }
  if (len == 0 || (size_t)len > n) { *cp = 0xFFFD; return 1; }
  uint32_t v = c & (0x7F >> len);
  for (int i = 1; i < len; i++) {
    if ((s[i] & 0xC0) != 0x80) { *cp = 0xFFFD; return 1; }
    v = v << 6 | (s[i] & 0x3F);
  }
  if (v < min_cp[len] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) { *cp = 0xFFFD; return 1; }
  *cp = v;
  return len;
}

/* ---------------------------------------------------------------- text -> id map */

static uint64_t hash_bytes(const char *s, size_t n) { return ir_hash_bytes(s, n); }

int32_t tok_lookup(const rlx_tokenizer *t, const char *s, size_t len) {
  for (uint64_t i = hash_bytes(s, len) & t->map.mask;; i = (i + 1) & t->map.mask) {
    int32_t v = t->map.slots[i];
    if (!v) return -1;
    int32_t id = v - 1;
    if (tok_text_len(t, id) == len && !memcmp(tok_text(t, id), s, len)) return id;
  }
}

/* Later ids win over earlier ones with the same text (Hugging Face builds
 * its vocabulary as a dict the same way). */
static void map_insert(rlx_tokenizer *t, int32_t id) {
  const char *s = tok_text(t, id);
  size_t len = tok_text_len(t, id);
  for (uint64_t i = hash_bytes(s, len) & t->map.mask;; i = (i + 1) & t->map.mask) {
    int32_t v = t->map.slots[i];
    if (!v || (tok_text_len(t, v - 1) == len && !memcmp(tok_text(t, v - 1), s, len))) {
      t->map.slots[i] = id + 1;
      return;
    }
  }
}

/* ---------------------------------------------------------------- loading */

void rlx_tokenizer_free(rlx_tokenizer *t) {
  if (!t) return;
  free(t->text);
  free(t->text_off);
  free(t->piece);
  free(t->piece_off);
  free(t->type);
  free(t->score);
  free(t->map.slots);
  free(t->merges);
  free(t->eog);
  free(t->added);
  free(t);
}

/* An optional token id: absent gives -1. */
static rlx_status load_id(const rlx_model_file *f, const rlx_tokenizer *t, const char *key, int32_t *out) {
  rlx_meta_value v;
  *out = -1;
  if (rlx_meta_lookup(f, key, &v) != RLX_OK) return RLX_OK;
  int64_t id;
  if (rlx_meta_as_i64(&v, &id) != RLX_OK)
    return rlx_set_error(RLX_ERR_FORMAT, "tokenizer: %s is a %s, not an integer", key, rlx_meta_type_name(v.type));
  if (id < 0 || id >= t->n_vocab)
    return rlx_set_error(RLX_ERR_FORMAT, "tokenizer: %s = %lld is outside the vocabulary of %d tokens", key,
                         (long long)id, t->n_vocab);
  *out = (int32_t)id;
  return RLX_OK;
}

static rlx_status load_flag(const rlx_model_file *f, const char *key, int *out) {
  rlx_meta_value v;
  if (rlx_meta_lookup(f, key, &v) != RLX_OK) return RLX_OK;
  if (rlx_meta_as_bool(&v, out) != RLX_OK)
    return rlx_set_error(RLX_ERR_FORMAT, "tokenizer: %s is a %s, not a bool", key, rlx_meta_type_name(v.type));
  return RLX_OK;
}

/* The array key of n_vocab elements (n_vocab < 0: any positive count). */
static rlx_status load_array(const rlx_model_file *f, const char *key, int64_t n_vocab, rlx_meta_value *v) {
  if (rlx_meta_lookup(f, key, v) != RLX_OK)
    return rlx_set_error(RLX_ERR_FORMAT, "tokenizer: %s is missing", key);
  if (v->type != RLX_META_ARRAY)
    return rlx_set_error(RLX_ERR_FORMAT, "tokenizer: %s is a %s, not an array", key, rlx_meta_type_name(v->type));
  if (n_vocab >= 0 && (int64_t)v->count != n_vocab)
    return rlx_set_error(RLX_ERR_FORMAT, "tokenizer: %s has %llu elements for %lld tokens", key,
                         (unsigned long long)v->count, (long long)n_vocab);
  return RLX_OK;
}

static rlx_status load_tokens(const rlx_model_file *f, rlx_tokenizer *t) {
  rlx_meta_value arr, e;
  rlx_status st = load_array(f, "tokenizer.ggml.tokens", -1, &arr);
  if (st) return st;
  if (arr.elem_type != RLX_META_STRING || arr.count == 0 || arr.count >= INT32_MAX / 2)
    return rlx_set_error(RLX_ERR_FORMAT, "tokenizer: tokenizer.ggml.tokens must be 1 to %d strings (%llu %ss)",
                         INT32_MAX / 2, (unsigned long long)arr.count, rlx_meta_type_name(arr.elem_type));
  t->n_vocab = (int32_t)arr.count;
  uint64_t total = 0;
  for (int32_t i = 0; i < t->n_vocab; i++) {
    const char *s;
    size_t len;
    if (rlx_meta_elem(&arr, (uint64_t)i, &e) || rlx_meta_as_string(&e, &s, &len))
      return rlx_set_error(RLX_ERR_FORMAT, "tokenizer: token %d unreadable", i);
    total += len;
  }
  t->text = malloc(total + 1);
  t->text_off = malloc(sizeof(uint64_t) * ((size_t)t->n_vocab + 1));
  uint64_t slots = 16;
  while (slots < 2 * (uint64_t)t->n_vocab) slots *= 2;
  t->map.slots = calloc(slots, sizeof(int32_t));
  t->map.mask = slots - 1;
  if (!t->text || !t->text_off || !t->map.slots) return rlx_set_error(RLX_ERR_NOMEM, "tokenizer: out of memory");
  uint64_t pos = 0;
  for (int32_t i = 0; i < t->n_vocab; i++) {
    const char *s;
    size_t len;
    rlx_meta_elem(&arr, (uint64_t)i, &e);
    rlx_meta_as_string(&e, &s, &len);
    t->text_off[i] = pos;
    memcpy(t->text + pos, s, len);
    pos += len;
  }
  t->text_off[t->n_vocab] = pos;
  for (int32_t i = 0; i < t->n_vocab; i++) map_insert(t, i);
  return RLX_OK;
}

static rlx_status load_types_scores(const rlx_model_file *f, rlx_tokenizer *t) {
  rlx_meta_value arr, e;
  t->type = malloc((size_t)t->n_vocab);
  if (!t->type) return rlx_set_error(RLX_ERR_NOMEM, "tokenizer: out of memory");
  memset(t->type, TOK_TYPE_NORMAL, (size_t)t->n_vocab);
  rlx_status st;
  if (rlx_meta_find(f, "tokenizer.ggml.token_type") >= 0) {
    if ((st = load_array(f, "tokenizer.ggml.token_type", t->n_vocab, &arr))) return st;
    for (int32_t i = 0; i < t->n_vocab; i++) {
      int64_t v;
      if (rlx_meta_elem(&arr, (uint64_t)i, &e) || rlx_meta_as_i64(&e, &v) || v < 0 || v > TOK_TYPE_BYTE)
        return rlx_set_error(RLX_ERR_FORMAT, "tokenizer: tokenizer.ggml.token_type[%d] is not a type 0-6", i);
      t->type[i] = (uint8_t)(v ? v : TOK_TYPE_NORMAL);
    }
  }
  /* SentencePiece merges by score, unless merges (ranks) are given */
  if (t->kind != TOK_SPM || rlx_meta_find(f, "tokenizer.ggml.merges") >= 0) return RLX_OK;
  if ((st = load_array(f, "tokenizer.ggml.scores", t->n_vocab, &arr))) return st;
  t->score = malloc(sizeof(float) * (size_t)t->n_vocab);
  if (!t->score) return rlx_set_error(RLX_ERR_NOMEM, "tokenizer: out of memory");
  for (int32_t i = 0; i < t->n_vocab; i++)
    if (rlx_meta_elem(&arr, (uint64_t)i, &e) || rlx_meta_as_f32(&e, &t->score[i]))
      return rlx_set_error(RLX_ERR_FORMAT, "tokenizer: tokenizer.ggml.scores[%d] is not a number", i);
  return RLX_OK;
}

static int is_special_type(int type) { return type == TOK_TYPE_CONTROL || type == TOK_TYPE_UNKNOWN; }

/* The bytes each token decodes to. SentencePiece: ▁ is a space and a byte
 * token <0xNN> its byte; byte-level BPE: the byte alphabet spelled back
 * (a token outside the alphabet, such as an added "<think>", is its text);
 * an unused token nothing. */
static rlx_status build_pieces(rlx_tokenizer *t) {
  uint64_t total = t->text_off[t->n_vocab];
  t->piece = malloc(total + 1);
  t->piece_off = malloc(sizeof(uint64_t) * ((size_t)t->n_vocab + 1));
  if (!t->piece || !t->piece_off) return rlx_set_error(RLX_ERR_NOMEM, "tokenizer: out of memory");
  uint64_t pos = 0;
  for (int32_t i = 0; i < t->n_vocab; i++) {
    const char *s = tok_text(t, i);
    size_t len = tok_text_len(t, i);
    char *out = t->piece + pos;
    long n = -1;
    if (is_special_type(t->type[i])) {
      /* their text, as it is */
    } else if (t->type[i] == TOK_TYPE_UNUSED) {
      n = 0;  /* a padding row ([PAD<i>]): no text, as in llama.cpp and Hugging Face */
    } else if (t->kind == TOK_BPE) {
      n = tok_bpe_unspell(s, len, out);
    } else if (t->type[i] == TOK_TYPE_BYTE && len == 6 && !memcmp(s, "<0x", 3) && s[5] == '>') {
      char hex[3] = {s[3], s[4], 0}, *end;
      unsigned long b = strtoul(hex, &end, 16);
      if (*end == 0) { out[0] = (char)b; n = 1; }
    } else {
      n = 0;
      for (size_t k = 0; k < len;) {
        if (k + 3 <= len && !memcmp(s + k, "\xe2\x96\x81", 3)) { out[n++] = ' '; k += 3; }
        else out[n++] = s[k++];
      }
    }
    if (n < 0) { memcpy(out, s, len); n = (long)len; }
    t->piece_off[i] = pos;
    pos += (uint64_t)n;
  }
  t->piece_off[t->n_vocab] = pos;
  return RLX_OK;
}

/* Longest first: at one position the longest match wins, as in Hugging
 * Face's added-token matching (leftmost-longest). */
typedef struct { size_t len; int32_t id; } added_key;
static int cmp_added(const void *a, const void *b) {
  const added_key *x = a, *y = b;
  if (x->len != y->len) return x->len > y->len ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

/* Texts that end a turn in the chat formats rlx knows. */
static const char *const eog_texts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                        "<|eom_id|>", "<EOT>", "<|end_of_text|>", "<end_of_utterance>"};

/* Whether the text of token id is spelled in the byte-level alphabet (its
 * piece then is shorter than its text or the same printable ASCII). */
static int in_byte_alphabet(const rlx_tokenizer *t, int32_t id) {
  const char *s = tok_text(t, id);
  size_t len = tok_text_len(t, id);
  for (size_t i = 0; i < len;) {
    uint32_t cp;
    char b[4];
    int k = tok_utf8_decode((const uint8_t *)s + i, len - i, &cp);
    if (tok_bpe_unspell(s + i, (size_t)k, b) < 0) return 0;
    i += (size_t)k;
  }
  return 1;
}

static rlx_status build_specials(rlx_tokenizer *t) {
  t->added = malloc(sizeof(int32_t) * (size_t)t->n_vocab);
  t->eog = malloc(sizeof(int32_t) * (3 + sizeof eog_texts / sizeof eog_texts[0]));
  if (!t->added || !t->eog) return rlx_set_error(RLX_ERR_NOMEM, "tokenizer: out of memory");
  for (int32_t i = 0; i < t->n_vocab; i++) {
    int ty = t->type[i];
    if (tok_text_len(t, i) == 0 || (ty != TOK_TYPE_CONTROL && ty != TOK_TYPE_USER && ty != TOK_TYPE_UNKNOWN &&
                                    i != t->bos && i != t->eos && i != t->unk))
      continue;
    /* Hugging Face does not add a byte-level control token written outside
     * the byte alphabet (a llama.cpp mislabel). */
    if (t->kind == TOK_BPE && ty == TOK_TYPE_CONTROL && !in_byte_alphabet(t, i)) continue;
    if (tok_lookup(t, tok_text(t, i), tok_text_len(t, i)) != i) continue;
    t->added[t->n_added++] = i;
  }
  added_key *keys = malloc(sizeof(added_key) * ((size_t)t->n_added + 1));
  if (!keys) return rlx_set_error(RLX_ERR_NOMEM, "tokenizer: out of memory");
  for (int k = 0; k < t->n_added; k++) keys[k] = (added_key){tok_text_len(t, t->added[k]), t->added[k]};
  qsort(keys, (size_t)t->n_added, sizeof(added_key), cmp_added);
  for (int k = 0; k < t->n_added; k++) t->added[k] = keys[k].id;
  free(keys);
  int32_t ids[3] = {t->eos, t->eot, t->eom};
  for (int k = 0; k < 3; k++)
    if (ids[k] >= 0) t->eog[t->n_eog++] = ids[k];
  for (size_t k = 0; k < sizeof eog_texts / sizeof eog_texts[0]; k++) {
    int32_t id = tok_lookup(t, eog_texts[k], strlen(eog_texts[k]));
    if (id >= 0 && t->type[id] == TOK_TYPE_CONTROL && !rlx_token_is_eog(t, id)) t->eog[t->n_eog++] = id;
  }
  return RLX_OK;
}

static const struct { const char *name; tok_pre pre; } pre_names[] = {
    {"default", TOK_PRE_GPT2},     {"gpt2", TOK_PRE_GPT2},       {"gpt-2", TOK_PRE_GPT2},
    {"phi-2", TOK_PRE_GPT2},       {"smollm", TOK_PRE_SMOLLM},   {"starcoder", TOK_PRE_SMOLLM},
    {"refact", TOK_PRE_SMOLLM},    {"llama-bpe", TOK_PRE_LLAMA3}, {"llama3", TOK_PRE_LLAMA3},
    {"llama-v3", TOK_PRE_LLAMA3},  {"smaug-bpe", TOK_PRE_LLAMA3}, {"qwen2", TOK_PRE_QWEN2},
    {"deepseek-r1-qwen", TOK_PRE_QWEN2},
};

static rlx_status load_prepend(const rlx_model_file *f, rlx_tokenizer *t) {
  static const char *const names[] = {"first", "always", "every"};
  const char *s;
  size_t n;
  t->prepend = TOK_PREPEND_FIRST;
  if (rlx_meta_find(f, "tokenizer.rlx.prepend_scheme") < 0) return RLX_OK;
  if (rlx_meta_get_string(f, "tokenizer.rlx.prepend_scheme", &s, &n) != RLX_OK)
    return rlx_set_error(RLX_ERR_FORMAT, "tokenizer: tokenizer.rlx.prepend_scheme is not a string");
  for (int k = 0; k < 3; k++)
    if (strlen(names[k]) == n && !memcmp(names[k], s, n)) {
      t->prepend = (tok_prepend)k;
      return RLX_OK;
    }
  return rlx_set_error(RLX_ERR_UNSUPPORTED, "tokenizer: tokenizer.rlx.prepend_scheme '%.*s' (first, always or every)",
                       (int)(n < 64 ? n : 64), s);
}

static rlx_status load(const rlx_model_file *f, rlx_tokenizer *t) {
  const char *model;
  size_t model_len;
  if (rlx_meta_get_string(f, "tokenizer.ggml.model", &model, &model_len) != RLX_OK)
    return rlx_set_error(RLX_ERR_INVALID, "tokenizer: the file has no string tokenizer.ggml.model");
  if (model_len == 4 && !memcmp(model, "gpt2", 4)) t->kind = TOK_BPE;
  else if (model_len == 5 && !memcmp(model, "llama", 5)) t->kind = TOK_SPM;
  else
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "tokenizer: tokenizer.ggml.model '%.*s' (rlx reads gpt2 and llama)",
                         (int)model_len, model);
  t->pre = TOK_PRE_GPT2;
  const char *pre;
  size_t pre_len;
  if (t->kind == TOK_BPE && rlx_meta_get_string(f, "tokenizer.ggml.pre", &pre, &pre_len) == RLX_OK) {
    size_t k, n = sizeof pre_names / sizeof pre_names[0];
    for (k = 0; k < n; k++)
      if (strlen(pre_names[k].name) == pre_len && !memcmp(pre_names[k].name, pre, pre_len)) break;
    if (k == n)
      return rlx_set_error(RLX_ERR_UNSUPPORTED, "tokenizer: pre-tokenizer '%.*s' (tokenizer.ggml.pre) is not known",
                           (int)pre_len, pre);
    t->pre = pre_names[k].pre;
  }
  t->ignore_merges = t->pre == TOK_PRE_LLAMA3;
  rlx_status st;
  if ((st = load_tokens(f, t)) || (st = load_types_scores(f, t))) return st;
  if ((st = load_id(f, t, "tokenizer.ggml.bos_token_id", &t->bos)) ||
      (st = load_id(f, t, "tokenizer.ggml.eos_token_id", &t->eos)) ||
      (st = load_id(f, t, "tokenizer.ggml.unknown_token_id", &t->unk)) ||
      (st = load_id(f, t, "tokenizer.ggml.eot_token_id", &t->eot)) ||
      (st = load_id(f, t, "tokenizer.ggml.eom_token_id", &t->eom)))
    return st;
  /* Defaults where the metadata is silent: llama.cpp's (a SentencePiece
   * vocabulary and Llama 3 start with BOS). */
  t->add_bos = t->kind == TOK_SPM || t->pre == TOK_PRE_LLAMA3;
  t->add_eos = 0;
  t->add_space_prefix = t->kind == TOK_SPM;
  if ((st = load_flag(f, "tokenizer.ggml.add_bos_token", &t->add_bos)) ||
      (st = load_flag(f, "tokenizer.ggml.add_eos_token", &t->add_eos)) ||
      (st = load_flag(f, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix)) || (st = load_prepend(f, t)))
    return st;
  if (t->kind == TOK_BPE) {
    if ((st = tok_bpe_init(t, f))) return st;
  } else {
    for (int b = 0; b < 256; b++) {
      char name[8];
      snprintf(name, sizeof name, "<0x%02X>", b);
      t->byte_id[b] = tok_lookup(t, name, 6);
    }
    if (rlx_meta_find(f, "tokenizer.ggml.merges") >= 0 && (st = tok_merges_load(t, f))) return st;
  }
  if ((st = build_pieces(t)) || (st = build_specials(t))) return st;
  return RLX_OK;
}

rlx_status rlx_tokenizer_load(const rlx_model_file *f, rlx_tokenizer **out) {
  if (!f || !out) return rlx_set_error(RLX_ERR_INVALID, "rlx_tokenizer_load: NULL argument");
  *out = NULL;
  rlx_tokenizer *t = calloc(1, sizeof *t);
  if (!t) return rlx_set_error(RLX_ERR_NOMEM, "tokenizer: out of memory");
  rlx_status st = load(f, t);
  if (st) {
    rlx_tokenizer_free(t);
    return st;
  }
  *out = t;
  return RLX_OK;
}

int32_t rlx_tokenizer_vocab_size(const rlx_tokenizer *t) { return t ? t->n_vocab : 0; }
int32_t rlx_token_bos(const rlx_tokenizer *t) { return t ? t->bos : -1; }
int32_t rlx_token_eos(const rlx_tokenizer *t) { return t ? t->eos : -1; }

int rlx_token_is_eog(const rlx_tokenizer *t, int32_t id) {
  if (!t) return 0;
  for (int k = 0; k < t->n_eog; k++)
    if (t->eog[k] == id) return 1;
  return 0;
}

/* ---------------------------------------------------------------- encoding */

static rlx_status encode_span(const rlx_tokenizer *t, const char *s, size_t len, int at_start, tok_out *o) {
  if (len == 0) return RLX_OK;
  return t->kind == TOK_BPE ? tok_bpe_encode(t, s, len, o) : tok_spm_encode(t, s, len, at_start, o);
}

/* The added token starting at s (n bytes left), longest first; -1 if none. */
static int32_t match_added(const rlx_tokenizer *t, const char *s, size_t n, int parse_special) {
  for (int k = 0; k < t->n_added; k++) {
    int32_t id = t->added[k];
    size_t len = tok_text_len(t, id);
    if (len > n || tok_text(t, id)[0] != s[0]) continue;
    if (!parse_special && t->type[id] != TOK_TYPE_USER) continue;
    if (!memcmp(tok_text(t, id), s, len)) return id;
  }
  return -1;
}

rlx_status rlx_tokenize(const rlx_tokenizer *t, const char *text, size_t len, int add_special, int parse_special,
                        int32_t *ids, int64_t cap, int64_t *n_out) {
  if (!t || (!text && len) || (!ids && cap > 0) || cap < 0 || !n_out)
    return rlx_set_error(RLX_ERR_INVALID, "rlx_tokenize: NULL argument or negative cap");
  tok_out o = {ids, cap, 0};
  if (add_special && t->add_bos && t->bos >= 0) tok_emit(&o, t->bos);
  /* The first byte of every added token, to skip positions quickly. */
  uint8_t first[256] = {0};
  for (int k = 0; k < t->n_added; k++) first[(uint8_t)tok_text(t, t->added[k])[0]] = 1;
  size_t span = 0;
  rlx_status st = RLX_OK;
  for (size_t i = 0; i < len && !st; i++) {
    if (!first[(uint8_t)text[i]]) continue;
    int32_t id = match_added(t, text + i, len - i, parse_special);
    if (id < 0) continue;
    st = encode_span(t, text + span, i - span, span == 0, &o);
    tok_emit(&o, id);
    i += tok_text_len(t, id) - 1;
    span = i + 1;
  }
  if (!st) st = encode_span(t, text + span, len - span, span == 0, &o);
  if (!st && add_special && t->add_eos && t->eos >= 0) tok_emit(&o, t->eos);
  *n_out = o.n;
  if (st) return st;
  if (o.n > cap)
    return rlx_set_error(RLX_ERR_INVALID, "rlx_tokenize: %lld tokens do not fit in %lld", (long long)o.n,
                         (long long)cap);
  return RLX_OK;
}

/* ---------------------------------------------------------------- decoding */

static rlx_status check_id(const rlx_tokenizer *t, int32_t id) {
  if (id < 0 || id >= t->n_vocab)
    return rlx_set_error(RLX_ERR_INVALID, "tokenizer: token id %d outside the vocabulary of %d", id, t->n_vocab);
  return RLX_OK;
}

/* The bytes of id to write (empty for an unrendered control token). */
static const char *piece_of(const rlx_tokenizer *t, int32_t id, int render_special, size_t *len) {
  if (is_special_type(t->type[id]) && !render_special) {
    *len = 0;
    return "";
  }
  *len = (size_t)(t->piece_off[id + 1] - t->piece_off[id]);
  return t->piece + t->piece_off[id];
}

static rlx_status finish_bytes(const char *what, size_t n, char *buf, size_t cap, size_t *n_out) {
  *n_out = n;
  if (n < cap) buf[n] = 0;
  if (n > cap) return rlx_set_error(RLX_ERR_INVALID, "%s: %zu bytes do not fit in %zu", what, n, cap);
  return RLX_OK;
}

rlx_status rlx_token_to_piece(const rlx_tokenizer *t, int32_t id, int render_special, char *buf, size_t cap,
                              size_t *n_out) {
  if (!t || (!buf && cap) || !n_out) return rlx_set_error(RLX_ERR_INVALID, "rlx_token_to_piece: NULL argument");
  rlx_status st = check_id(t, id);
  if (st) return st;
  size_t len;
  const char *p = piece_of(t, id, render_special, &len);
  if (cap) memcpy(buf, p, len < cap ? len : cap); /* cap 0: a size query, buf may be NULL */
  return finish_bytes("rlx_token_to_piece", len, buf, cap, n_out);
}

rlx_status rlx_detokenize(const rlx_tokenizer *t, const int32_t *ids, int64_t n, int render_special, char *buf,
                          size_t cap, size_t *n_out) {
  if (!t || (!ids && n) || n < 0 || (!buf && cap) || !n_out)
    return rlx_set_error(RLX_ERR_INVALID, "rlx_detokenize: NULL argument");
  size_t total = 0;
  int first = 1;
  for (int64_t i = 0; i < n; i++) {
    rlx_status st = check_id(t, ids[i]);
    if (st) return st;
    size_t len;
    const char *p = piece_of(t, ids[i], render_special, &len);
    /* SentencePiece: the dummy prefix is not text. Hugging Face's decoder
     * strips one leading space of the whole output (only one: "  Hello"
     * decodes to " Hello"). */
    if (first && len) {
      first = 0;
      if (t->kind == TOK_SPM && t->add_space_prefix && p[0] == ' ') { p++; len--; }
    }
    if (total < cap) memcpy(buf + total, p, len < cap - total ? len : cap - total);
    total += len;
  }
  return finish_bytes("rlx_detokenize", total, buf, cap, n_out);
}
