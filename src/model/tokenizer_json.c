/* tokenizer_json.c — a decoder folder's BPE tokenizer.json (and
 * tokenizer_config.json) as the tokenizer.ggml.* keys llama.cpp's converter
 * writes (hf_llama.h), so the GGUF tokenizer (tokenizer.c) runs it.
 *
 * Tokens: model.vocab and added_tokens by id, padded to the model's rows
 * with [PAD<i>] (unused); an added special token is a control token, any
 * other added token user-defined. Merges: "a b" strings or [a, b] pairs.
 * Byte-level BPE: the pre-tokenizer is recognized from its structure and
 * Split regex: ByteLevel alone is gpt2, Digits + ByteLevel smollm, the
 * Llama 3 and Qwen2 regexes llama-bpe and qwen2; anything else is
 * RLX_ERR_UNSUPPORTED. SentencePiece-style BPE (byte_fallback: Llama 2,
 * Mistral, TinyLlama) is model "llama" as convert_hf_to_gguf.py's
 * LlamaHfVocab writes it (<0xNN> tokens of type byte, scores -1000), plus
 * the merges, which rlx then applies by rank as Hugging Face does, and
 * where the ▁ prefix goes (tokenizer.rlx.prepend_scheme): the normalizer
 * Prepend("▁") + Replace(" ", "▁") puts it in front of every span between
 * added tokens, the pre-tokenizer Metaspace (split false) as its
 * prepend_scheme says. The decoder must be Replace("▁", " "), ByteFallback,
 * Fuse and, with the prefix, Strip(" ", 1, 0).
 * BOS/EOS: tokenizer_config.json's bos_token / eos_token, else the ids of
 * generation_config.json or config.json; add_bos_token from
 * tokenizer_config.json, else whether the post-processor template starts
 * with a special token. */
#include "hf_llama.h"

#include "../ir/ir.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char llama3_regex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char qwen2_regex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

typedef struct {
  const hf_folder *h;
  json_doc d;               /* tokenizer.json */
  int64_t n_vocab;
  char **text;              /* [n_vocab] decoded token texts (NULL: a gap) */
  size_t *len;
  int32_t *type;
} tok_json;

static rlx_status bad(const tok_json *t, const char *what) {
  return rlx_set_error(RLX_ERR_FORMAT, "%s/tokenizer.json: %s", t->h->dir, what);
}

/* One pre-tokenizer step into the features the known splitters have. */
typedef struct { int byte_level, byte_regex, digits, split, n_other; const char *regex; char *regex_buf; } pre_shape;

static void pre_step(const json_doc *d, int64_t p, pre_shape *s) {
  int64_t ty = json_get(d, p, "type");
  if (json_str_eq(d, ty, "ByteLevel")) {
    int use_regex = 1, prefix = 0;
    json_bool(d, json_get(d, p, "use_regex"), &use_regex);
    json_bool(d, json_get(d, p, "add_prefix_space"), &prefix);
    s->byte_level++;
    s->byte_regex += use_regex;
    s->n_other += prefix;
  } else if (json_str_eq(d, ty, "Digits")) {
    int single = 0;
    json_bool(d, json_get(d, p, "individual_digits"), &single);
    s->digits++;
    s->n_other += !single;
  } else if (json_str_eq(d, ty, "Split") && !s->regex_buf) {
    s->split++;
    s->regex_buf = json_strdup(d, json_get(d, json_get(d, p, "pattern"), "Regex"), NULL);
    s->n_other += !s->regex_buf || !json_str_eq(d, json_get(d, p, "behavior"), "Isolated");
  } else {
    s->n_other++;
  }
}

static rlx_status pre_name(tok_json *t, const char **out) {
  const json_doc *d = &t->d;
  int64_t p = json_get(d, 0, "pre_tokenizer");
  pre_shape s = {0};
  if (json_str_eq(d, json_get(d, p, "type"), "Sequence")) {
    int64_t list = json_get(d, p, "pretokenizers");
    if (json_kind(d, list) != JSON_ARRAY) return bad(t, "pre_tokenizer Sequence without a pretokenizers array");
    for (int64_t k = json_first(d, list); k >= 0 && (uint32_t)k < d->tok[list].next; k = json_next(d, k))
      pre_step(d, k, &s);
  } else if (json_kind(d, p) == JSON_OBJECT) {
    pre_step(d, p, &s);
  } else {
    s.n_other++;
  }
  *out = NULL;
  if (!s.n_other && s.byte_level == 1) {
    if (!s.split && !s.digits && s.byte_regex) *out = "gpt2";
    else if (!s.split && s.digits == 1 && s.byte_regex) *out = "smollm";
    else if (s.split == 1 && !s.digits && !s.byte_regex && !strcmp(s.regex_buf, llama3_regex)) *out = "llama-bpe";
    else if (s.split == 1 && !s.digits && !s.byte_regex && !strcmp(s.regex_buf, qwen2_regex)) *out = "qwen2";
  }
  free(s.regex_buf);
  if (!*out)
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "%s/tokenizer.json: the pre-tokenizer is not one rlx knows (byte-level "
                         "BPE as GPT-2, SmolLM, Llama 3 or Qwen2 split it)", t->h->dir);
  return RLX_OK;
}

/* SentencePiece-style BPE: whether a ▁ prefix is added, and where. */
typedef struct { int prefix; const char *scheme; } spm_shape;

static int is_type(const json_doc *d, int64_t p, const char *type) {
  return json_str_eq(d, json_get(d, p, "type"), type);
}

/* Replace(from -> to) with a String pattern. */
static int is_replace(const json_doc *d, int64_t p, const char *from, const char *to) {
  return is_type(d, p, "Replace") && json_str_eq(d, json_get(d, json_get(d, p, "pattern"), "String"), from) &&
         json_str_eq(d, json_get(d, p, "content"), to);
}

/* The n steps of a Sequence's list key (or p itself as one step) into
 * step[0..4); -1 when there are more than 4. */
static int steps(const json_doc *d, int64_t p, const char *key, int64_t step[4]) {
  if (!is_type(d, p, "Sequence")) {
    step[0] = p;
    return json_kind(d, p) == JSON_OBJECT;
  }
  int64_t list = json_get(d, p, key);
  int n = 0;
  if (json_kind(d, list) != JSON_ARRAY) return -1;
  for (int64_t k = json_first(d, list); k >= 0 && (uint32_t)k < d->tok[list].next; k = json_next(d, k)) {
    if (n == 4) return -1;
    step[n++] = k;
  }
  return n;
}

static rlx_status spm_recognize(tok_json *t, spm_shape *out) {
  static const char mark[] = "\xe2\x96\x81"; /* ▁ */
  const json_doc *d = &t->d;
  int64_t model = json_get(d, 0, "model"), norm = json_get(d, 0, "normalizer"), pre = json_get(d, 0, "pre_tokenizer");
  int64_t step[4];
  int n, ok = 0, flag = 0;
  out->prefix = 0;
  out->scheme = "first";
  if (json_kind(d, pre) == JSON_NULL && (n = steps(d, norm, "normalizers", step)) > 0 && n <= 2) {
    /* [Prepend("▁"),] Replace(" ", "▁") */
    out->prefix = n == 2 && is_type(d, step[0], "Prepend") && json_str_eq(d, json_get(d, step[0], "prepend"), mark);
    out->scheme = "every";
    ok = n == 1 + out->prefix && is_replace(d, step[n - 1], " ", mark);
  } else if (json_kind(d, norm) == JSON_NULL && is_type(d, pre, "Metaspace")) {
    int64_t scheme = json_get(d, pre, "prepend_scheme");
    out->prefix = !json_str_eq(d, scheme, "never");
    out->scheme = json_str_eq(d, scheme, "always") ? "always" : "first";
    ok = json_str_eq(d, json_get(d, pre, "replacement"), mark) && json_bool(d, json_get(d, pre, "split"), &flag) &&
         !flag && (json_str_eq(d, scheme, "first") || json_str_eq(d, scheme, "always") || !out->prefix);
  }
  if (!ok)
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "%s/tokenizer.json: the normalizer and pre-tokenizer are not one rlx "
                         "knows for byte-fallback BPE (Prepend and Replace to ▁, or Metaspace without split)",
                         t->h->dir);
  n = steps(d, json_get(d, 0, "decoder"), "decoders", step);
  if (!(n == 3 + out->prefix && is_replace(d, step[0], mark, " ") && is_type(d, step[1], "ByteFallback") &&
        is_type(d, step[2], "Fuse") &&
        (!out->prefix || (is_type(d, step[3], "Strip") && json_str_eq(d, json_get(d, step[3], "content"), " ") &&
                          json_int(d, json_get(d, step[3], "start"), 1, 1, &(int64_t){0}) &&
                          json_int(d, json_get(d, step[3], "stop"), 0, 0, &(int64_t){0})))))
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "%s/tokenizer.json: the decoder is not Replace(\"▁\", \" \"), "
                         "ByteFallback, Fuse%s", t->h->dir, out->prefix ? ", Strip(\" \", 1, 0)" : " (no Strip)");
  static const char *const off[] = {"dropout", "continuing_subword_prefix", "end_of_word_suffix"};
  for (int k = 0; k < 3; k++)
    if (json_kind(d, json_get(d, model, off[k])) != JSON_NULL)
      return rlx_set_error(RLX_ERR_UNSUPPORTED, "%s/tokenizer.json: model.%s", t->h->dir, off[k]);
  if (json_bool(d, json_get(d, model, "ignore_merges"), &flag) && flag)
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "%s/tokenizer.json: model.ignore_merges with byte fallback", t->h->dir);
  return RLX_OK;
}

/* <0xNN>: a byte token of Hugging Face's ByteFallback decoder. */
static int byte_token(const char *s, size_t n) {
  return n == 6 && !memcmp(s, "<0x", 3) && isxdigit((unsigned char)s[3]) && isxdigit((unsigned char)s[4]) &&
         s[5] == '>';
}

/* Token `id` gets the text of string token s. */
static rlx_status set_token(tok_json *t, int64_t id, int64_t s, int32_t type) {
  if (id < 0 || id >= t->n_vocab) {
    char msg[160];
    snprintf(msg, sizeof msg, "token id %lld is outside the model's %lld rows (config.json vocab_size)", (long long)id,
             (long long)t->n_vocab);
    return bad(t, msg);
  }
  char *text = json_strdup(&t->d, s, &t->len[id]);
  if (!text) return json_kind(&t->d, s) == JSON_STRING ? rlx_set_error(RLX_ERR_NOMEM, "out of memory")
                                                      : bad(t, "a token is not a string");
  free(t->text[id]);
  t->text[id] = text;
  t->type[id] = type;
  return RLX_OK;
}

static rlx_status read_tokens(tok_json *t) {
  const json_doc *d = &t->d;
  int64_t model = json_get(d, 0, "model"), ty = json_get(d, model, "type");
  if (json_kind(d, model) != JSON_OBJECT) return bad(t, "no model object");
  if (ty >= 0 && !json_str_eq(d, ty, "BPE"))
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "%s/tokenizer.json: model type is not BPE (rlx runs BPE decoders, "
                         "byte-level or with byte fallback)", t->h->dir);
  int64_t vocab = json_get(d, model, "vocab");
  if (json_kind(d, vocab) != JSON_OBJECT) return bad(t, "model.vocab is not an object");
  rlx_status st = RLX_OK;
  for (int64_t k = json_first(d, vocab); !st && k >= 0 && (uint32_t)k < d->tok[vocab].next;
       k = json_next(d, json_next(d, k))) {
    int64_t id;
    if (!json_int(d, json_next(d, k), 0, INT32_MAX, &id)) return bad(t, "a model.vocab id is not an integer");
    st = set_token(t, id, k, 1);
  }
  int64_t added = json_get(d, 0, "added_tokens");
  if (added >= 0 && json_kind(d, added) != JSON_ARRAY) return bad(t, "added_tokens is not an array");
  for (int64_t k = added < 0 ? -1 : json_first(d, added); !st && k >= 0 && (uint32_t)k < d->tok[added].next;
       k = json_next(d, k)) {
    int64_t id;
    int special = 0;
    if (!json_int(d, json_get(d, k, "id"), 0, INT32_MAX, &id)) return bad(t, "an added token has no integer id");
    json_bool(d, json_get(d, k, "special"), &special);
    st = set_token(t, id, json_get(d, k, "content"), special ? 3 : 4);
  }
  for (int64_t i = 0; !st && i < t->n_vocab; i++) {
    if (t->text[i]) continue;
    char pad[32];
    int n = snprintf(pad, sizeof pad, "[PAD%lld]", (long long)i);
    if (!(t->text[i] = malloc((size_t)n + 1))) return rlx_set_error(RLX_ERR_NOMEM, "out of memory");
    memcpy(t->text[i], pad, (size_t)n + 1);
    t->len[i] = (size_t)n;
    t->type[i] = 5;
  }
  return st;
}

/* SentencePiece-style BPE: byte tokens, scores, the unknown token and the
 * ▁ prefix. */
static rlx_status spm_meta(tok_json *t, const spm_shape *shape, gguf_meta *w) {
  const json_doc *d = &t->d;
  int64_t model = json_get(d, 0, "model"), unk = -1;
  int n_bytes = 0, fuse = 0;
  float *score = malloc(sizeof(float) * (size_t)t->n_vocab);
  if (!score) return rlx_set_error(RLX_ERR_NOMEM, "out of memory");
  size_t un;
  char *u = json_strdup(d, json_get(d, model, "unk_token"), &un);
  for (int64_t i = 0; i < t->n_vocab; i++) {
    score[i] = -1000.0f;  /* LlamaHfVocab's: merges are by rank */
    if (t->type[i] == 1 && byte_token(t->text[i], t->len[i])) {
      t->type[i] = 6;
      n_bytes += !islower((unsigned char)t->text[i][3]) && !islower((unsigned char)t->text[i][4]);
    }
    if (u && unk < 0 && t->len[i] == un && !memcmp(t->text[i], u, un)) unk = i;
  }
  free(u);
  gguf_meta_f32_array(w, "tokenizer.ggml.scores", score, (uint64_t)t->n_vocab);
  free(score);
  if (unk >= 0) gguf_meta_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)unk);
  /* rlx fuses unknown characters into one <unk> */
  if (unk >= 0 && n_bytes < 256 && json_bool(d, json_get(d, model, "fuse_unk"), &fuse) && !fuse)
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "%s/tokenizer.json: fuse_unk false without every <0xNN> token",
                         t->h->dir);
  gguf_meta_bool(w, "tokenizer.ggml.add_space_prefix", shape->prefix);
  if (shape->prefix) gguf_meta_str(w, "tokenizer.rlx.prepend_scheme", shape->scheme, strlen(shape->scheme));
  return RLX_OK;
}

/* model.merges as "a b" strings. */
static rlx_status write_merges(tok_json *t, gguf_meta *w) {
  const json_doc *d = &t->d;
  int64_t merges = json_get(d, json_get(d, 0, "model"), "merges");
  if (json_kind(d, merges) != JSON_ARRAY) return bad(t, "model.merges is not an array");
  uint64_t n = d->tok[merges].size, i = 0;
  char **s = calloc(n + 1, sizeof *s);
  size_t *len = calloc(n + 1, sizeof *len);
  rlx_status st = s && len ? RLX_OK : rlx_set_error(RLX_ERR_NOMEM, "out of memory");
  for (int64_t k = json_first(d, merges); !st && k >= 0 && (uint32_t)k < d->tok[merges].next; k = json_next(d, k), i++) {
    if (json_kind(d, k) == JSON_STRING) {
      s[i] = json_strdup(d, k, &len[i]);
    } else if (json_kind(d, k) == JSON_ARRAY && d->tok[k].size == 2) {
      int64_t a = json_first(d, k), b = json_next(d, a);
      size_t la, lb;
      char *x = json_strdup(d, a, &la), *y = json_strdup(d, b, &lb);
      if (x && y && (s[i] = malloc(la + lb + 2))) {
        memcpy(s[i], x, la);
        s[i][la] = ' ';
        memcpy(s[i] + la + 1, y, lb + 1);
        len[i] = la + 1 + lb;
      }
      free(x);
      free(y);
    }
    if (!s[i]) st = bad(t, "a merge is neither a string nor a pair of strings");
  }
  if (!st) gguf_meta_str_array(w, "tokenizer.ggml.merges", (const char *const *)s, len, n);
  for (uint64_t k = 0; s && k < n; k++) free(s[k]);
  free(s);
  free(len);
  return st;
}

/* The id of a token given as a string or an {"content": ...} object in
 * tokenizer_config.json; -1 when absent or not in the vocabulary. */
static int64_t config_token(const tok_json *t, const json_doc *c, const char *key) {
  int64_t v = json_get(c, 0, key);
  if (json_kind(c, v) == JSON_OBJECT) v = json_get(c, v, "content");
  size_t n;
  char *s = json_strdup(c, v, &n);
  int64_t id = -1;
  for (int64_t i = 0; s && i < t->n_vocab && id < 0; i++)
    if (t->len[i] == n && !memcmp(t->text[i], s, n)) id = i;
  free(s);
  return id;
}

/* An id (or the first of a list) of key in dir/rel; -1 when absent. */
static int64_t file_id(const tok_json *t, const char *rel, const char *key, int64_t *second) {
  char *text;
  json_doc c;
  int64_t id = -1;
  if (second) *second = -1;
  if (!hf_exists(t->h, rel) || hf_read_json(t->h, rel, &text, &c)) return -1;
  int64_t v = json_get(&c, 0, key);
  if (json_kind(&c, v) == JSON_ARRAY) {
    int64_t a = json_first(&c, v), b = a >= 0 && c.tok[v].size > 1 ? json_next(&c, a) : -1;
    if (second && b >= 0 && !json_int(&c, b, 0, t->n_vocab - 1, second)) *second = -1;
    v = a;
  }
  if (v < 0 || !json_int(&c, v, 0, t->n_vocab - 1, &id)) id = -1;
  json_free(&c);
  free(text);
  return id;
}

/* A chat template value: a string, or a list of {"name", "template"} (the
 * "default" one). */
static rlx_status write_template(gguf_meta *w, const json_doc *c, int64_t tpl) {
  if (json_kind(c, tpl) == JSON_ARRAY) {
    int64_t pick = -1;
    for (int64_t k = json_first(c, tpl); k >= 0 && (uint32_t)k < c->tok[tpl].next; k = json_next(c, k))
      if (pick < 0 || json_str_eq(c, json_get(c, k, "name"), "default")) pick = json_get(c, k, "template");
    tpl = pick;
  }
  size_t n;
  char *s = json_kind(c, tpl) == JSON_STRING ? json_strdup(c, tpl, &n) : NULL;
  if (s) gguf_meta_str(w, "tokenizer.chat_template", s, n);
  free(s);
  return !s && json_kind(c, tpl) == JSON_STRING ? rlx_set_error(RLX_ERR_NOMEM, "out of memory") : RLX_OK;
}

/* The template of chat_template.jinja, else of chat_template.json (where
 * transformers saves it apart from tokenizer_config.json). */
static rlx_status template_file(const tok_json *t, gguf_meta *w) {
  char *text;
  size_t n;
  json_doc c;
  rlx_status st = RLX_OK;
  if (hf_exists(t->h, "chat_template.jinja")) {
    if ((st = hf_read_text(t->h, "chat_template.jinja", &text, &n))) return st;
    gguf_meta_str(w, "tokenizer.chat_template", text, n);
    free(text);
  } else if (hf_exists(t->h, "chat_template.json")) {
    if ((st = hf_read_json(t->h, "chat_template.json", &text, &c))) return st;
    st = write_template(w, &c, json_get(&c, 0, "chat_template"));
    json_free(&c);
    free(text);
  }
  return st;
}

/* tokenizer_config.json: BOS/EOS, add_bos/add_eos, the chat template. */
static rlx_status write_config(tok_json *t, gguf_meta *w) {
  char *text = NULL;
  json_doc c = {0};
  rlx_status st = hf_exists(t->h, "tokenizer_config.json") ? hf_read_json(t->h, "tokenizer_config.json", &text, &c)
                                                           : RLX_OK;
  if (st) return st;
  const int have = text != NULL;
  int64_t second, gen_second;
  int64_t bos = have ? config_token(t, &c, "bos_token") : -1, eos = have ? config_token(t, &c, "eos_token") : -1;
  int64_t gen_eos = file_id(t, "generation_config.json", "eos_token_id", &gen_second);
  if (bos < 0) bos = file_id(t, "generation_config.json", "bos_token_id", NULL);
  if (bos < 0) bos = file_id(t, "config.json", "bos_token_id", NULL);
  if (eos < 0) eos = gen_eos >= 0 ? gen_eos : file_id(t, "config.json", "eos_token_id", &second);
  /* a second end of generation (Llama 3 Instruct's <|eot_id|>) */
  int64_t eot = gen_eos >= 0 && gen_eos != eos ? gen_eos : gen_second != eos ? gen_second : -1;
  if (bos >= 0) gguf_meta_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)bos);
  if (eos >= 0) gguf_meta_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)eos);
  if (eot >= 0) gguf_meta_u32(w, "tokenizer.ggml.eot_token_id", (uint32_t)eot);

  int add_bos = 0, add_eos = 0;
  if (!have || !json_bool(&c, json_get(&c, 0, "add_bos_token"), &add_bos)) {
    /* TemplateProcessing: {"single": [{"SpecialToken": ...}, {"Sequence": ...}]},
     * alone or in a Sequence of processors (Llama 3's, after ByteLevel) */
    const json_doc *d = &t->d;
    int64_t pp = json_get(d, 0, "post_processor"), list = json_get(d, pp, "processors");
    int64_t k = json_kind(d, list) == JSON_ARRAY ? json_first(d, list) : pp;
    for (; k >= 0 && !add_bos; k = k != pp && (uint32_t)json_next(d, k) < d->tok[list].next ? json_next(d, k) : -1) {
      int64_t single = json_get(d, k, "single");
      add_bos = json_kind(d, single) == JSON_ARRAY && json_get(d, json_first(d, single), "SpecialToken") >= 0;
    }
  }
  if (have) json_bool(&c, json_get(&c, 0, "add_eos_token"), &add_eos);
  gguf_meta_bool(w, "tokenizer.ggml.add_bos_token", add_bos);
  gguf_meta_bool(w, "tokenizer.ggml.add_eos_token", add_eos);

  int64_t tpl = have ? json_get(&c, 0, "chat_template") : -1;
  if (tpl >= 0) st = write_template(w, &c, tpl);
  else st = template_file(t, w);
  json_free(&c);
  free(text);
  return st;
}

rlx_status hf_tokenizer_meta(const hf_folder *h, int64_t n_vocab, gguf_meta *w) {
  tok_json t = {h, {0}, n_vocab, NULL, NULL, NULL};
  char *text = NULL;
  if (!hf_exists(h, "tokenizer.json")) return rlx_set_error(RLX_ERR_IO, "%s: no tokenizer.json", h->dir);
  rlx_status st = hf_read_json(h, "tokenizer.json", &text, &t.d);
  if (st) return st;
  /* The padding rows are made up here: a vocab_size far past the
   * tokenizer's tokens is an error, not a billion [PAD] strings. */
  int64_t model = json_get(&t.d, 0, "model"), vocab = json_get(&t.d, model, "vocab");
  int64_t added = json_get(&t.d, 0, "added_tokens");
  int64_t n_tok = (json_kind(&t.d, vocab) == JSON_OBJECT ? t.d.tok[vocab].size : 0) +
                  (json_kind(&t.d, added) == JSON_ARRAY ? t.d.tok[added].size : 0);
  if (n_vocab > 2 * n_tok + 1024) {
    st = rlx_set_error(RLX_ERR_FORMAT, "%s: config.json's vocab_size %lld is far past tokenizer.json's %lld tokens",
                       h->dir, (long long)n_vocab, (long long)n_tok);
    json_free(&t.d);
    free(text);
    return st;
  }
  t.text = calloc((size_t)n_vocab, sizeof *t.text);
  t.len = calloc((size_t)n_vocab, sizeof *t.len);
  t.type = calloc((size_t)n_vocab, sizeof *t.type);
  const char *pre = NULL;
  if (!t.text || !t.len || !t.type) st = rlx_set_error(RLX_ERR_NOMEM, "out of memory");
  if (!st && json_kind(&t.d, 0) != JSON_OBJECT) st = bad(&t, "not a JSON object");
  int spm = 0;
  spm_shape shape = {0, "first"};
  if (!st) json_bool(&t.d, json_get(&t.d, model, "byte_fallback"), &spm);
  if (!st) st = spm ? spm_recognize(&t, &shape) : pre_name(&t, &pre);
  if (!st) st = read_tokens(&t);
  if (!st && spm) st = spm_meta(&t, &shape, w);
  if (!st) {
    gguf_meta_str(w, "tokenizer.ggml.model", spm ? "llama" : "gpt2", spm ? 5 : 4);
    if (spm) pre = "default";
    gguf_meta_str(w, "tokenizer.ggml.pre", pre, strlen(pre));
    gguf_meta_str_array(w, "tokenizer.ggml.tokens", (const char *const *)t.text, t.len, (uint64_t)n_vocab);
    gguf_meta_i32_array(w, "tokenizer.ggml.token_type", t.type, (uint64_t)n_vocab);
    st = write_merges(&t, w);
  }
  if (!st) st = write_config(&t, w);
  for (int64_t i = 0; t.text && i < n_vocab; i++) free(t.text[i]);
  free(t.text);
  free(t.len);
  free(t.type);
  json_free(&t.d);
  free(text);
  return st;
}
