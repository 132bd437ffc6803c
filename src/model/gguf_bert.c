/* gguf_bert.c — a BERT encoder in a GGUF file as llama.cpp's
 * convert_hf_to_gguf.py writes it (architectures "bert" and "nomic-bert"),
 * opened as the
 * Hugging Face folder bert.c reads (hf_folder.h): its config.json,
 * tokenizer.json, modules.json and 1_Pooling/config.json are made up from
 * the metadata, and the Hugging Face tensor names bert.c asks for are
 * renamed to llama.cpp's (token_embd, blk.N.attn_q, blk.N.attn_qkv, ...).
 * nomic-bert's biases are there or not as in the file. F32, F16, BF16
 * and block-quantized matrices are read in place.
 *
 * The vocabulary is stored the converter's way ("phantom space": a word
 * start is "▁word", a continuation the bare piece, "[X]" specials as they
 * are) and turned back into WordPiece's ("word", "##piece"). GGUF does not
 * record the normalizer: like llama.cpp, the tokenizer lowercases and
 * strips accents (uncased models). Pooling is <arch>.pooling_type (mean,
 * CLS or last; none reads as mean) and, as llama.cpp's embeddings, the
 * result is L2-normalized. */
#include "hf_folder.h"

#include "../ir/ir.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A growing string; the first failure sticks in st. */
typedef struct {
  char *s;
  size_t n, cap;
  rlx_status st;
} sbuf;

static void put(sbuf *b, const char *p, size_t n) {
  if (b->st) return;
  if (b->n + n + 1 > b->cap) {
    size_t c = b->cap ? b->cap : 4096;
    while (c < b->n + n + 1) c *= 2;
    char *q = realloc(b->s, c);
    if (!q) {
      b->st = rlx_set_error(RLX_ERR_NOMEM, "out of memory");
      return;
    }
    b->s = q;
    b->cap = c;
  }
  memcpy(b->s + b->n, p, n);
  b->n += n;
  b->s[b->n] = 0;
}

static void puts_(sbuf *b, const char *s) { put(b, s, strlen(s)); }

static void putf(sbuf *b, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n > 0) put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* s as a JSON string (quotes included). */
static void put_json_str(sbuf *b, const char *s, size_t n) {
  put(b, "\"", 1);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      char e[2] = {'\\', (char)c};
      put(b, e, 2);
    } else if (c < 0x20) {
      putf(b, "\\u%04x", c);
    } else {
      put(b, s + i, 1);
    }
  }
  put(b, "\"", 1);
}

/* llama.cpp's names of the Hugging Face tensors bert.c asks for. */
static const struct { const char *hf, *gguf; } layer_names[] = {
    {"attention.self.query", "attn_q"},        {"attention.self.key", "attn_k"},
    {"attention.self.value", "attn_v"},        {"attention.output.dense", "attn_output"},
    {"attention.output.LayerNorm", "attn_output_norm"}, {"intermediate.dense", "ffn_up"},
    {"output.dense", "ffn_down"},              {"output.LayerNorm", "layer_output_norm"},
};
static const struct { const char *hf, *gguf; } nomic_layer_names[] = {
    {"attn.Wqkv", "attn_qkv"}, {"attn.out_proj", "attn_output"}, {"norm1", "attn_output_norm"},
    {"mlp.fc11", "ffn_up"},    {"mlp.fc12", "ffn_gate"},         {"mlp.fc2", "ffn_down"},
    {"norm2", "layer_output_norm"},
};
static const struct { const char *hf, *gguf; } global_names[] = {
    {"embeddings.word_embeddings", "token_embd"},      {"embeddings.position_embeddings", "position_embd"},
    {"embeddings.token_type_embeddings", "token_types"}, {"embeddings.LayerNorm", "token_embd_norm"},
    {"emb_ln", "token_embd_norm"},
};

static int bert_rename(const char *name, char *out, size_t cap) {
  const char *dot = strrchr(name, '.');
  if (!dot || (strcmp(dot, ".weight") && strcmp(dot, ".bias"))) return 0;
  size_t stem = (size_t)(dot - name);
  for (size_t i = 0; i < sizeof global_names / sizeof global_names[0]; i++)
    if (strlen(global_names[i].hf) == stem && !strncmp(name, global_names[i].hf, stem))
      return snprintf(out, cap, "%s%s", global_names[i].gguf, dot) > 0;
  int layer, at = 0;
  if (sscanf(name, "encoder.layer.%d.%n", &layer, &at) == 1 && at > 0 && layer >= 0) {
    for (size_t i = 0; i < sizeof layer_names / sizeof layer_names[0]; i++)
      if (strlen(layer_names[i].hf) == stem - (size_t)at && !strncmp(name + at, layer_names[i].hf, stem - (size_t)at))
        return snprintf(out, cap, "blk.%d.%s%s", layer, layer_names[i].gguf, dot) > 0;
  } else if (at = 0, sscanf(name, "encoder.layers.%d.%n", &layer, &at) == 1 && at > 0 && layer >= 0) {
    for (size_t i = 0; i < sizeof nomic_layer_names / sizeof nomic_layer_names[0]; i++)
      if (strlen(nomic_layer_names[i].hf) == stem - (size_t)at &&
          !strncmp(name + at, nomic_layer_names[i].hf, stem - (size_t)at))
        return snprintf(out, cap, "blk.%d.%s%s", layer, nomic_layer_names[i].gguf, dot) > 0;
  }
  return 0;
}

/* <arch>.key of the file (arch "bert" or "nomic-bert"). */
static rlx_status meta_int(const hf_folder *h, const char *arch, const char *k, int required, int64_t dflt, int64_t *out) {
  const rlx_model_file *f = h->shards[0];
  char key[96];
  snprintf(key, sizeof key, "%s%s%s", arch, *arch ? "." : "", k);
  *out = dflt;
  if (rlx_meta_find(f, key) < 0)
    return required ? rlx_set_error(RLX_ERR_FORMAT, "%s: no metadata key %s", h->dir, key) : RLX_OK;
  if (rlx_meta_get_i64(f, key, out) != RLX_OK)
    return rlx_set_error(RLX_ERR_FORMAT, "%s: metadata %s is not an integer", h->dir, key);
  return RLX_OK;
}

/* A float <arch>.key (def when absent). */
static rlx_status meta_num(const hf_folder *h, const char *arch, const char *k, float def, float *out) {
  char key[96];
  snprintf(key, sizeof key, "%s.%s", arch, k);
  *out = def;
  if (rlx_meta_find(h->shards[0], key) >= 0 && rlx_meta_get_f32(h->shards[0], key, out) != RLX_OK)
    return rlx_set_error(RLX_ERR_FORMAT, "%s: %s is not a number", h->dir, key);
  return RLX_OK;
}

static int has(const hf_folder *h, const char *name) {
  rlx_file_tensor t;
  return rlx_model_file_find_tensor(h->shards[0], name, &t) == RLX_OK;
}

/* config.json: BertModel's, or NomicBertModel's (its rotary base, its
 * biases as the file has them). */
static rlx_status make_config(hf_folder *h, const char *arch) {
  const rlx_model_file *f = h->shards[0];
  int64_t E, L, H, FF, ctx, types = 0, pad;
  float eps, base;
  rlx_status st;
  if ((st = meta_int(h, arch, "embedding_length", 1, 0, &E)) || (st = meta_int(h, arch, "block_count", 1, 0, &L)) ||
      (st = meta_int(h, arch, "attention.head_count", 1, 0, &H)) ||
      (st = meta_int(h, arch, "feed_forward_length", 1, 0, &FF)) ||
      (st = meta_int(h, arch, "context_length", 0, 512, &ctx)) ||
      (st = meta_int(h, "", "tokenizer.ggml.padding_token_id", 0, 0, &pad)) ||
      (st = meta_num(h, arch, "attention.layer_norm_epsilon", 1e-12f, &eps)) ||
      (st = meta_num(h, arch, "rope.freq_base", 10000.0f, &base)))
    return st;
  rlx_file_tensor t;
  if (rlx_model_file_find_tensor(f, "token_types.weight", &t) == RLX_OK && t.rank == 2) types = t.dims[0];
  sbuf b = {0};
  if (!strcmp(arch, "nomic-bert")) {
    putf(&b, "{\"model_type\": \"nomic_bert\", \"n_embd\": %lld, \"n_layer\": %lld, \"n_head\": %lld, ",
         (long long)E, (long long)L, (long long)H);
    putf(&b, "\"n_inner\": %lld, \"n_positions\": %lld, \"type_vocab_size\": %lld, \"layer_norm_epsilon\": %.9g, ",
         (long long)FF, (long long)ctx, (long long)types, (double)eps);
    putf(&b, "\"rotary_emb_base\": %.9g, \"rotary_emb_fraction\": 1.0, \"activation_function\": \"swiglu\", ",
         (double)base);
    putf(&b, "\"qkv_proj_bias\": %s, \"mlp_fc1_bias\": %s, \"mlp_fc2_bias\": %s}",
         has(h, "blk.0.attn_qkv.bias") ? "true" : "false", has(h, "blk.0.ffn_up.bias") ? "true" : "false",
         has(h, "blk.0.ffn_down.bias") ? "true" : "false");
  } else {
    putf(&b, "{\"model_type\": \"bert\", \"hidden_size\": %lld, \"num_hidden_layers\": %lld, ", (long long)E,
         (long long)L);
    putf(&b, "\"num_attention_heads\": %lld, \"intermediate_size\": %lld, \"max_position_embeddings\": %lld, ",
         (long long)H, (long long)FF, (long long)ctx);
    putf(&b, "\"type_vocab_size\": %lld, \"pad_token_id\": %lld, \"layer_norm_eps\": %.9g, \"hidden_act\": \"gelu\"}",
         (long long)types, (long long)pad, (double)eps);
  }
  if (b.st) {
    free(b.s);
    return b.st;
  }
  h->config_text = b.s;
  char *what = hf_path(h, "config.json");
  st = what ? json_parse(b.s, b.n, what, &h->config) : rlx_set_error(RLX_ERR_NOMEM, "out of memory");
  free(what);
  return st;
}

/* The id of special key, else of the token spelled dflt; -1 if neither. */
static int64_t special_id(const rlx_model_file *f, const rlx_meta_value *toks, const char *key, const char *dflt) {
  int64_t id;
  if (rlx_meta_find(f, key) >= 0 && rlx_meta_get_i64(f, key, &id) == RLX_OK && id >= 0 && (uint64_t)id < toks->count)
    return id;
  for (uint64_t i = 0; i < toks->count; i++) {
    rlx_meta_value e;
    const char *s;
    size_t n;
    if (!rlx_meta_elem(toks, i, &e) && !rlx_meta_as_string(&e, &s, &n) && n == strlen(dflt) && !memcmp(s, dflt, n))
      return (int64_t)i;
  }
  return -1;
}

/* tokenizer.json of the WordPiece vocabulary. */
static rlx_status make_tokenizer(hf_folder *h) {
  const rlx_model_file *f = h->shards[0];
  rlx_meta_value toks, e;
  const char *model;
  size_t model_len;
  if (rlx_meta_get_string(f, "tokenizer.ggml.model", &model, &model_len) != RLX_OK || model_len != 4 ||
      memcmp(model, "bert", 4))
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "%s: tokenizer.ggml.model is not \"bert\" (WordPiece)", h->dir);
  if (rlx_meta_lookup(f, "tokenizer.ggml.tokens", &toks) != RLX_OK || toks.type != RLX_META_ARRAY ||
      toks.elem_type != RLX_META_STRING || toks.count == 0 || toks.count > INT32_MAX / 2)
    return rlx_set_error(RLX_ERR_FORMAT, "%s: tokenizer.ggml.tokens is not an array of strings", h->dir);
  int64_t cls = special_id(f, &toks, "tokenizer.ggml.bos_token_id", "[CLS]");
  int64_t sep = special_id(f, &toks, "tokenizer.ggml.seperator_token_id", "[SEP]");
  int64_t unk = special_id(f, &toks, "tokenizer.ggml.unknown_token_id", "[UNK]");
  if (cls < 0 || sep < 0 || unk < 0)
    return rlx_set_error(RLX_ERR_FORMAT, "%s: the vocabulary has no [CLS], [SEP] or [UNK] token", h->dir);
  sbuf b = {0};
  puts_(&b, "{\"normalizer\": {\"type\": \"BertNormalizer\", \"lowercase\": true, \"strip_accents\": null, "
          "\"clean_text\": true, \"handle_chinese_chars\": true}, \"pre_tokenizer\": {\"type\": "
          "\"BertPreTokenizer\"}, \"added_tokens\": [");
  const int64_t special[5] = {cls, sep, unk, special_id(f, &toks, "tokenizer.ggml.padding_token_id", "[PAD]"),
                              special_id(f, &toks, "tokenizer.ggml.mask_token_id", "[MASK]")};
  const char *sp_text[5];
  size_t sp_len[5];
  for (int k = 0; k < 5; k++) {
    if (special[k] < 0) continue;
    rlx_meta_elem(&toks, (uint64_t)special[k], &e);
    rlx_meta_as_string(&e, &sp_text[k], &sp_len[k]);
    putf(&b, "%s{\"id\": %lld, \"special\": true, \"normalized\": false, \"content\": ", k ? ", " : "",
         (long long)special[k]);
    put_json_str(&b, sp_text[k], sp_len[k]);
    puts_(&b, "}");
  }
  puts_(&b, "], \"post_processor\": {\"type\": \"BertProcessing\", \"sep\": [");
  put_json_str(&b, sp_text[1], sp_len[1]);
  putf(&b, ", %lld], \"cls\": [", (long long)sep);
  put_json_str(&b, sp_text[0], sp_len[0]);
  putf(&b, ", %lld]}, \"model\": {\"type\": \"WordPiece\", \"continuing_subword_prefix\": \"##\", "
           "\"max_input_chars_per_word\": 100, \"unk_token\": ", (long long)cls);
  put_json_str(&b, sp_text[2], sp_len[2]);
  puts_(&b, ", \"vocab\": {");
  for (uint64_t i = 0; i < toks.count && !b.st; i++) {
    const char *s;
    size_t n;
    if (rlx_meta_elem(&toks, i, &e) || rlx_meta_as_string(&e, &s, &n)) {
      b.st = rlx_set_error(RLX_ERR_FORMAT, "%s: token %llu unreadable", h->dir, (unsigned long long)i);
      break;
    }
    if (i) puts_(&b, ", ");
    /* phantom space back to WordPiece */
    if (n >= 3 && !memcmp(s, "\xe2\x96\x81", 3)) {
      put_json_str(&b, s + 3, n - 3);
    } else if (n >= 2 && s[0] == '[' && s[n - 1] == ']') {
      put_json_str(&b, s, n);
    } else {
      char *c = malloc(n + 2);
      if (!c) {
        b.st = rlx_set_error(RLX_ERR_NOMEM, "out of memory");
        break;
      }
      memcpy(c, "##", 2);
      memcpy(c + 2, s, n);
      put_json_str(&b, c, n + 2);
      free(c);
    }
    putf(&b, ": %llu", (unsigned long long)i);
  }
  puts_(&b, "}}}");
  if (b.st) {
    free(b.s);
    return b.st;
  }
  return hf_add_vfile(h, "tokenizer.json", b.s, b.n);
}

/* modules.json and 1_Pooling/config.json: the pooling, then Normalize. */
static rlx_status make_pooling(hf_folder *h, const char *arch) {
  int64_t type;
  rlx_status st = meta_int(h, arch, "pooling_type", 0, 1, &type);
  if (st) return st;
  static const char *const modes[] = {"mean", "mean", "cls_token", "lasttoken"};
  if (type < 0 || type > 3)
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "%s: %s.pooling_type %lld (rlx pools by mean, CLS or last token)",
                         h->dir, arch, (long long)type);
  static const char modules[] =
      "[{\"idx\": 0, \"name\": \"0\", \"path\": \"\", \"type\": \"sentence_transformers.models.Transformer\"}, "
      "{\"idx\": 1, \"name\": \"1\", \"path\": \"1_Pooling\", \"type\": \"sentence_transformers.models.Pooling\"}, "
      "{\"idx\": 2, \"name\": \"2\", \"path\": \"2_Normalize\", \"type\": \"sentence_transformers.models.Normalize\"}]";
  char *m = malloc(sizeof modules), *p = malloc(64);
  if (!m || !p) {
    free(m);
    free(p);
    return rlx_set_error(RLX_ERR_NOMEM, "out of memory");
  }
  memcpy(m, modules, sizeof modules);
  int n = snprintf(p, 64, "{\"pooling_mode_%s_tokens\": true}", modes[type]);
  if (type == 2 || type == 3) n = snprintf(p, 64, "{\"pooling_mode_%s\": true}", modes[type]);
  if ((st = hf_add_vfile(h, "modules.json", m, sizeof modules - 1))) {
    free(p);
    return st;
  }
  return hf_add_vfile(h, "1_Pooling/config.json", p, (size_t)n);
}

rlx_status hf_open_gguf(const char *path, hf_folder *out) {
  memset(out, 0, sizeof *out);
  out->rename = bert_rename;
  if (!(out->dir = malloc(strlen(path) + 1)) || !(out->shards = malloc(sizeof *out->shards))) {
    hf_close(out);
    return rlx_set_error(RLX_ERR_NOMEM, "out of memory");
  }
  strcpy(out->dir, path);
  rlx_status st = rlx_model_file_open(path, &out->shards[0]);
  if (st) {
    hf_close(out);
    return st;
  }
  out->n_shards = 1;
  const char *arch = NULL;
  if (rlx_model_file_format(out->shards[0]) != RLX_FILE_GGUF ||
      rlx_meta_get_string(out->shards[0], "general.architecture", &arch, NULL) != RLX_OK ||
      (strcmp(arch, "bert") && strcmp(arch, "nomic-bert")))
    st = rlx_set_error(RLX_ERR_UNSUPPORTED, "%s: not a GGUF encoder of architecture bert or nomic-bert (architecture %s)",
                       path, arch ? arch : "none");
  if (!st) st = make_config(out, arch);
  if (!st) st = make_tokenizer(out);
  if (!st) st = make_pooling(out, arch);
  if (st) hf_close(out);
  return st;
}
