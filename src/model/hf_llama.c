/* hf_llama.c — a Hugging Face decoder folder as GGUF metadata plus the
 * folder's weights (hf_llama.h).
 *
 * config.json to <arch>.* keys as convert_hf_to_gguf.py writes them:
 * hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
 * num_key_value_heads, head_dim, max_position_embeddings, rms_norm_eps,
 * rope_theta, vocab_size, and rope_scaling: linear and yarn become
 * rope.scaling.* keys, llama3 the rope_freqs.weight factors (computed here
 * as the converter does). tie_word_embeddings: output.weight is then
 * absent and the decoder uses the embedding. Features the decoder does not
 * build (an o_proj or MLP bias, qwen2's sliding windows, other activations
 * or rope types) are RLX_ERR_UNSUPPORTED rather than a wrong model;
 * Mistral's sliding window caps the context instead.
 * generation_config.json's temperature / top_k / top_p become
 * general.sampling.*. */
#include "hf_llama.h"

#include "../ir/ir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct hf_llm {
  hf_folder hf;
  uint8_t *image;
  size_t image_size;
  rlx_model_file *meta;
  int tied;
};

/* model_type to the GGUF architecture. */
static const struct { const char *model_type, *arch; } archs[] = {
    {"llama", "llama"}, {"mistral", "llama"}, {"qwen2", "qwen2"}, {"qwen3", "qwen3"}};

/* GGUF tensor names to Hugging Face's: blk.<i>.<gguf> is model.layers.<i>.<hf>. */
static const struct { const char *gguf, *hf; } layer_names[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
};
static const struct { const char *gguf, *hf; } global_names[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
};

/* The Hugging Face name of GGUF tensor `name` into out; 0 when none. */
static int hf_name(const char *name, char *out, size_t cap) {
  for (size_t i = 0; i < sizeof global_names / sizeof global_names[0]; i++)
    if (!strcmp(name, global_names[i].gguf)) return snprintf(out, cap, "%s", global_names[i].hf) > 0;
  int layer, at = 0;
  if (sscanf(name, "blk.%d.%n", &layer, &at) != 1 || at == 0 || layer < 0) return 0;
  for (size_t i = 0; i < sizeof layer_names / sizeof layer_names[0]; i++)
    if (!strcmp(name + at, layer_names[i].gguf))
      return snprintf(out, cap, "model.layers.%d.%s", layer, layer_names[i].hf) > 0;
  return 0;
}

rlx_status hf_llm_tensor(const hf_llm *h, const char *name, rlx_file_tensor *out) {
  if (rlx_model_file_find_tensor(h->meta, name, out) == RLX_OK) return RLX_OK;
  char hf[128];
  if (!hf_name(name, hf, sizeof hf) || !hf_has_tensor(&h->hf, hf))
    return rlx_set_error(RLX_ERR_FORMAT, "%s: no tensor %s (GGUF name %s) in the weights", h->hf.dir,
                         hf_name(name, hf, sizeof hf) ? hf : "?", name);
  return hf_tensor(&h->hf, hf, out);
}

rlx_status hf_llm_check(const hf_llm *h) {
  for (int i = 0; i < h->hf.n_shards; i++) {
    rlx_status st = rlx_model_file_check(h->hf.shards[i]);
    if (st) return st;
  }
  return RLX_OK;
}

const rlx_model_file *hf_llm_file(const hf_llm *h) { return h->meta; }
int hf_llm_tied(const hf_llm *h) { return h->tied; }

void hf_llm_free(hf_llm *h) {
  if (!h) return;
  rlx_model_file_close(h->meta);
  free(h->image);
  hf_close(&h->hf);
  free(h);
}

/* ---------------------------------------------------------------- config.json */

static rlx_status unsupported(const hf_folder *h, const char *what) {
  return rlx_set_error(RLX_ERR_UNSUPPORTED, "%s/config.json: %s (rlx builds the Llama-family decoder without it)",
                       h->dir, what);
}

/* A flag of config.json (def when absent or null). */
static rlx_status config_bool(const hf_folder *h, const char *key, int def, int *out) {
  int64_t v = hf_config_tok(h, key);
  *out = def;
  if (v < 0 || json_kind(&h->config, v) == JSON_NULL) return RLX_OK;
  if (!json_bool(&h->config, v, out))
    return rlx_set_error(RLX_ERR_FORMAT, "%s/config.json: %s is not true or false", h->dir, key);
  return RLX_OK;
}

/* A number of the rope_scaling object (def when absent). */
static rlx_status scaling_num(const hf_folder *h, int64_t obj, const char *key, double def, double *out) {
  int64_t v = json_get(&h->config, obj, key);
  *out = def;
  if (v < 0 || json_kind(&h->config, v) == JSON_NULL) return RLX_OK;
  if (!json_num(&h->config, v, out) || !isfinite(*out) || *out <= 0)
    return rlx_set_error(RLX_ERR_FORMAT, "%s/config.json: the rope parameter %s is not a positive number", h->dir, key);
  return RLX_OK;
}

/* rope_scaling, or transformers 5's rope_parameters (which holds
 * rope_theta too); -1 when neither is an object. */
static int64_t rope_object(const hf_folder *h) {
  int64_t rs = hf_config_tok(h, "rope_scaling");
  if (json_kind(&h->config, rs) != JSON_OBJECT) rs = hf_config_tok(h, "rope_parameters");
  return json_kind(&h->config, rs) == JSON_OBJECT ? rs : -1;
}

/* rope_scaling: linear and yarn as rope.scaling.* keys, llama3 as
 * frequency factors (convert_hf_to_gguf.py's LlamaModel). */
static rlx_status write_rope_scaling(const hf_folder *h, const char *arch, int64_t n_rot, double base, int64_t n_ctx,
                                     gguf_meta *w) {
  const json_doc *d = &h->config;
  int64_t rs = rope_object(h);
  if (rs < 0) return RLX_OK;
  int64_t ty = json_get(d, rs, "rope_type");
  if (ty < 0) ty = json_get(d, rs, "type");
  char key[96], *type = json_strdup(d, ty, NULL);
  double factor, orig, a, b;
  rlx_status st = type ? scaling_num(h, rs, "factor", 1.0, &factor)
                       : rlx_set_error(RLX_ERR_FORMAT, "%s/config.json: rope_scaling has no rope_type", h->dir);
  if (!st) st = scaling_num(h, rs, "original_max_position_embeddings", (double)n_ctx, &orig);
  if (st || !strcmp(type, "default") || (!strcmp(type, "linear") && factor == 1.0)) {
    /* unscaled */
  } else if (!strcmp(type, "linear") || !strcmp(type, "yarn")) {
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    gguf_meta_str(w, key, type, strlen(type));
    snprintf(key, sizeof key, "%s.rope.scaling.factor", arch);
    gguf_meta_f32(w, key, (float)factor);
    if (!strcmp(type, "yarn")) {
      double beta_fast, beta_slow, attn;
      const double mscale = factor > 1 ? 1.0 + 0.1 * log(factor) : 1.0;
      if (!(st = scaling_num(h, rs, "beta_fast", 32, &beta_fast)) && !(st = scaling_num(h, rs, "beta_slow", 1, &beta_slow)) &&
          !(st = scaling_num(h, rs, "attention_factor", mscale, &attn))) {
        snprintf(key, sizeof key, "%s.rope.scaling.original_context_length", arch);
        gguf_meta_u32(w, key, (uint32_t)orig);
        snprintf(key, sizeof key, "%s.rope.scaling.yarn_beta_fast", arch);
        gguf_meta_f32(w, key, (float)beta_fast);
        snprintf(key, sizeof key, "%s.rope.scaling.yarn_beta_slow", arch);
        gguf_meta_f32(w, key, (float)beta_slow);
        /* Hugging Face scales cos/sin by attention_factor; llama.cpp by
         * attn_factor times its own YaRN magnitude */
        snprintf(key, sizeof key, "%s.rope.scaling.attn_factor", arch);
        gguf_meta_f32(w, key, (float)(attn / mscale));
      }
    }
  } else if (!strcmp(type, "llama3")) {
    if (!(st = scaling_num(h, rs, "low_freq_factor", 1, &a)) && !(st = scaling_num(h, rs, "high_freq_factor", 4, &b)) &&
        a >= b)
      st = rlx_set_error(RLX_ERR_FORMAT, "%s/config.json: rope_scaling low_freq_factor %g >= high_freq_factor %g",
                         h->dir, a, b);
    float *f = st ? NULL : malloc((size_t)(n_rot / 2) * sizeof *f);
    if (!st && !f) st = rlx_set_error(RLX_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; !st && i < n_rot / 2; i++) {
      const double wavelen = 6.283185307179586 / pow(base, -2.0 * (double)i / (double)n_rot);
      const double low_wavelen = orig / a, high_wavelen = orig / b;
      if (wavelen < high_wavelen) f[i] = 1;
      else if (wavelen > low_wavelen) f[i] = (float)factor;
      else {
        const double smooth = (orig / wavelen - a) / (b - a);
        f[i] = (float)(1.0 / ((1 - smooth) / factor + smooth));
      }
    }
    if (!st) gguf_meta_tensor_f32(w, "rope_freqs.weight", f, n_rot / 2);
    free(f);
  } else {
    char msg[96];
    snprintf(msg, sizeof msg, "rope_scaling type \"%.40s\"", type);
    st = unsupported(h, msg);
  }
  free(type);
  return st;
}

/* Writes the architecture's keys; *n_vocab gets vocab_size, *tied the tying. */
static rlx_status write_hparams(const hf_folder *h, gguf_meta *w, int64_t *n_vocab, int *tied) {
  const json_doc *d = &h->config;
  int64_t mt = hf_config_tok(h, "model_type");
  const char *arch = NULL;
  for (size_t i = 0; i < sizeof archs / sizeof archs[0] && !arch; i++)
    if (json_str_eq(d, mt, archs[i].model_type)) arch = archs[i].arch;
  if (!arch)
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "%s/config.json: model_type is not a Llama-family decoder rlx builds "
                         "(llama, mistral, qwen2, qwen3)", h->dir);
  int64_t act = hf_config_tok(h, "hidden_act");
  if (act >= 0 && !json_str_eq(d, act, "silu")) return unsupported(h, "hidden_act other than silu");
  int bias, mlp_bias, sliding;
  rlx_status st;
  if ((st = config_bool(h, "attention_bias", 0, &bias)) || (st = config_bool(h, "mlp_bias", 0, &mlp_bias)) ||
      (st = config_bool(h, "use_sliding_window", 0, &sliding)) || (st = config_bool(h, "tie_word_embeddings", 0, tied)))
    return st;
  if (bias && strcmp(arch, "qwen2")) return unsupported(h, "attention_bias (an o_proj bias)");
  if (mlp_bias) return unsupported(h, "mlp_bias");
  if (sliding) return unsupported(h, "use_sliding_window");
  int64_t E, ff, L, H, Hkv, D, ctx;
  double eps, theta;
  if ((st = hf_config_int(h, "hidden_size", 1, 1 << 20, -1, &E)) ||
      (st = hf_config_int(h, "intermediate_size", 1, 1 << 22, -1, &ff)) ||
      (st = hf_config_int(h, "num_hidden_layers", 1, 4096, -1, &L)) ||
      (st = hf_config_int(h, "num_attention_heads", 1, 4096, -1, &H)) ||
      (st = hf_config_int(h, "num_key_value_heads", 1, 4096, H, &Hkv)) ||
      (st = hf_config_int(h, "head_dim", 1, 1024, E % H ? 0 : E / H, &D)) ||
      (st = hf_config_int(h, "max_position_embeddings", 1, INT32_MAX, 2048, &ctx)) ||
      (st = hf_config_int(h, "vocab_size", 1, INT32_MAX / 2, -1, n_vocab)) ||
      (st = hf_config_num(h, "rms_norm_eps", 1e-6, &eps)) || (st = hf_config_num(h, "rope_theta", 10000.0, &theta)))
    return st;
  /* Mistral's sliding window: a context of at most the window, within
   * which it hides nothing */
  int64_t window = 0;
  if (!strcmp(arch, "llama") && (st = hf_config_int(h, "sliding_window", 1, INT32_MAX, ctx, &window))) return st;
  if (window && window < ctx) ctx = window;
  if (hf_config_tok(h, "rope_theta") < 0 && rope_object(h) >= 0 &&
      (st = scaling_num(h, rope_object(h), "rope_theta", theta, &theta)))
    return st;
  char key[96];
#define KEY_U32(k, v) (snprintf(key, sizeof key, "%s." k, arch), gguf_meta_u32(w, key, (uint32_t)(v)))
  gguf_meta_str(w, "general.architecture", arch, strlen(arch));
  KEY_U32("block_count", L);
  KEY_U32("embedding_length", E);
  KEY_U32("feed_forward_length", ff);
  KEY_U32("attention.head_count", H);
  KEY_U32("attention.head_count_kv", Hkv);
  KEY_U32("attention.key_length", D);
  KEY_U32("attention.value_length", D);
  KEY_U32("context_length", ctx);
  KEY_U32("vocab_size", *n_vocab);
#undef KEY_U32
  snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", arch);
  gguf_meta_f32(w, key, (float)eps);
  snprintf(key, sizeof key, "%s.rope.freq_base", arch);
  gguf_meta_f32(w, key, (float)theta);
  return write_rope_scaling(h, arch, D, theta, ctx, w);
}

/* generation_config.json's sampling defaults (optional file). */
static rlx_status write_sampling(const hf_folder *h, gguf_meta *w) {
  if (!hf_exists(h, "generation_config.json")) return RLX_OK;
  char *text;
  json_doc c;
  rlx_status st = hf_read_json(h, "generation_config.json", &text, &c);
  if (st) return st;
  double v;
  int64_t k;
  if (json_num(&c, json_get(&c, 0, "temperature"), &v) && v >= 0) gguf_meta_f32(w, "general.sampling.temp", (float)v);
  if (json_num(&c, json_get(&c, 0, "top_p"), &v) && v >= 0 && v <= 1) gguf_meta_f32(w, "general.sampling.top_p", (float)v);
  if (json_int(&c, json_get(&c, 0, "top_k"), 0, INT32_MAX, &k)) gguf_meta_i32(w, "general.sampling.top_k", (int32_t)k);
  json_free(&c);
  free(text);
  return RLX_OK;
}

rlx_status hf_llm_open(const char *dir, hf_llm **out) {
  *out = NULL;
  hf_llm *h = calloc(1, sizeof *h);
  if (!h) return rlx_set_error(RLX_ERR_NOMEM, "out of memory");
  gguf_meta w = {0};
  int64_t n_vocab = 0;
  rlx_status st = hf_open(dir, &h->hf);
  if (!st) st = write_hparams(&h->hf, &w, &n_vocab, &h->tied);
  if (!st) st = hf_tokenizer_meta(&h->hf, n_vocab, &w);
  if (!st) st = write_sampling(&h->hf, &w);
  if (!st) st = gguf_meta_finish(&w, &h->image, &h->image_size);
  else gguf_meta_free(&w);
  if (!st) st = rlx_model_file_open_memory(h->image, h->image_size, &h->meta);
  if (st) {
    hf_llm_free(h);
    return st;
  }
  *out = h;
  return RLX_OK;
}
