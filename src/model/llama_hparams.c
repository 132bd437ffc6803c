/* llama_hparams.c — the Llama-family decoder's hyperparameters: the
 * architecture, sizes, norm epsilon and RoPE keys llama.cpp reads from GGUF
 * metadata, each checked, and the RoPE frequencies they (and
 * rope_freqs.weight) give. */
#include "llama_hparams.h"

#include "../ir/ir.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const char *const rope_scaling_names[] = {"none", "linear", "yarn"};

static rlx_status meta_i64(const rlx_model_file *f, const char *arch, const char *key, int64_t dflt,
                           int required, int64_t *out) {
  char full[128];
  snprintf(full, sizeof full, "%s.%s", arch, key);
  if (rlx_meta_find(f, full) < 0) {
    if (required) return rlx_set_error(RLX_ERR_FORMAT, "rlx_llm_load: the file has no metadata key %s", full);
    *out = dflt;
    return RLX_OK;
  }
  if (rlx_meta_get_i64(f, full, out) != RLX_OK)
    return rlx_set_error(RLX_ERR_FORMAT, "rlx_llm_load: metadata %s is not an integer", full);
  return RLX_OK;
}

static rlx_status meta_f32(const rlx_model_file *f, const char *arch, const char *key, float dflt, float *out) {
  char full[128];
  snprintf(full, sizeof full, "%s.%s", arch, key);
  if (rlx_meta_find(f, full) < 0) {
    *out = dflt;
    return RLX_OK;
  }
  if (rlx_meta_get_f32(f, full, out) != RLX_OK || !isfinite(*out))
    return rlx_set_error(RLX_ERR_FORMAT, "rlx_llm_load: metadata %s is not a finite number", full);
  return RLX_OK;
}

/* The rope keys llama.cpp honours for these archs: rope.freq_base,
 * rope.scaling.type (none / linear / yarn; absent: linear, as llama.cpp),
 * rope.scaling.factor (or the older rope.scale_linear; 0 or absent: 1),
 * rope.scaling.original_context_length (absent: context_length),
 * rope.scaling.attn_factor, and the YaRN knobs rope.scaling.yarn_ext_factor
 * (absent: 1 for yarn, else 0), yarn_beta_fast (32), yarn_beta_slow (1). */
static rlx_status read_rope_scaling(const rlx_model_file *f, const char *arch, llm_hparams *hp) {
  char key[128];
  const char *type = "linear";
  snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
  if (rlx_meta_find(f, key) >= 0 && rlx_meta_get_string(f, key, &type, NULL) != RLX_OK)
    return rlx_set_error(RLX_ERR_FORMAT, "rlx_llm_load: metadata %s is not a string", key);
  if (!strcmp(type, "none")) hp->scaling = ROPE_SCALING_NONE;
  else if (!strcmp(type, "linear")) hp->scaling = ROPE_SCALING_LINEAR;
  else if (!strcmp(type, "yarn")) hp->scaling = ROPE_SCALING_YARN;
  else
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "rlx_llm_load: %s: rope scaling type \"%s\" is not supported (rlx "
                         "computes none, linear and yarn)", arch, type);
  float factor, linear;
  rlx_status st;
  if ((st = meta_f32(f, arch, "rope.freq_base", 10000.0f, &hp->rope_base)) ||
      (st = meta_f32(f, arch, "rope.scale_linear", 0.0f, &linear)) ||
      (st = meta_f32(f, arch, "rope.scaling.factor", linear, &factor)) ||
      (st = meta_f32(f, arch, "rope.scaling.attn_factor", 1.0f, &hp->rope_attn_factor)) ||
      (st = meta_f32(f, arch, "rope.scaling.yarn_ext_factor", hp->scaling == ROPE_SCALING_YARN ? 1.0f : 0.0f,
                     &hp->yarn_ext_factor)) ||
      (st = meta_f32(f, arch, "rope.scaling.yarn_beta_fast", 32.0f, &hp->yarn_beta_fast)) ||
      (st = meta_f32(f, arch, "rope.scaling.yarn_beta_slow", 1.0f, &hp->yarn_beta_slow)) ||
      (st = meta_i64(f, arch, "rope.scaling.original_context_length", hp->n_ctx_train, 0, &hp->n_ctx_orig)))
    return st;
  /* each must be positive, or (zero_ok) at least 0 */
  const struct { const char *key; double value; int zero_ok; } checks[] = {
      {"rope.freq_base", hp->rope_base, 0},
      {"rope.scaling.factor", factor, 1},
      {"rope.scaling.attn_factor", hp->rope_attn_factor, 0},
      {"rope.scaling.yarn_ext_factor", hp->yarn_ext_factor, 1},
      {"rope.scaling.yarn_beta_fast", hp->yarn_beta_fast, 0},
      {"rope.scaling.yarn_beta_slow", hp->yarn_beta_slow, 0},
      {"rope.scaling.original_context_length", (double)hp->n_ctx_orig, 0}};
  for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++)
    if (checks[i].zero_ok ? checks[i].value < 0 : checks[i].value <= 0)
      return rlx_set_error(RLX_ERR_FORMAT, "rlx_llm_load: %s.%s is %g; it must be %s", arch, checks[i].key,
                           checks[i].value, checks[i].zero_ok ? "0 or more" : "positive");
  /* "none" never scales, whatever factor the file carries (llama.cpp) */
  hp->rope_freq_scale = factor == 0.0f || hp->scaling == ROPE_SCALING_NONE ? 1.0f : 1.0f / factor;
  return RLX_OK;
}

static rlx_status read_hparams(const rlx_model_file *f, llm_hparams *hp) {
  const char *arch;
  rlx_meta_value v;
  if (rlx_meta_lookup(f, "general.architecture", &v) != RLX_OK)
    return rlx_set_error(RLX_ERR_FORMAT, "rlx_llm_load: the file has no general.architecture key");
  if (rlx_meta_get_string(f, "general.architecture", &arch, NULL) != RLX_OK)
    return rlx_set_error(RLX_ERR_FORMAT, "rlx_llm_load: general.architecture is a %s, not a string",
                         rlx_meta_type_name(v.type));
  if (!strcmp(arch, "llama")) hp->arch = ARCH_LLAMA;
  else if (!strcmp(arch, "qwen2")) hp->arch = ARCH_QWEN2;
  else if (!strcmp(arch, "qwen3")) hp->arch = ARCH_QWEN3;
  else
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "rlx_llm_load: architecture \"%s\" is not a Llama-family decoder "
                         "rlx builds (llama, qwen2, qwen3)", arch);
  snprintf(hp->name, sizeof hp->name, "%s", arch);
  /* llama.cpp's rope types: normal for llama, neox for the Qwens */
  hp->rope_mode = hp->arch == ARCH_LLAMA ? RLX_ROPE_NORMAL : RLX_ROPE_NEOX;
  rlx_status st;
  if ((st = meta_i64(f, arch, "block_count", 0, 1, &hp->n_layer)) ||
      (st = meta_i64(f, arch, "embedding_length", 0, 1, &hp->n_embd)) ||
      (st = meta_i64(f, arch, "feed_forward_length", 0, 1, &hp->n_ff)) ||
      (st = meta_i64(f, arch, "attention.head_count", 0, 1, &hp->n_head)) ||
      (st = meta_i64(f, arch, "attention.head_count_kv", hp->n_head, 0, &hp->n_head_kv)) ||
      (st = meta_i64(f, arch, "context_length", 2048, 0, &hp->n_ctx_train)))
    return st;
  if (hp->n_layer <= 0 || hp->n_layer > 4096 || hp->n_embd <= 0 || hp->n_embd > (1 << 20) || hp->n_ff <= 0 ||
      hp->n_ff > (1 << 22) || hp->n_head <= 0 || hp->n_head > 4096 || hp->n_head_kv <= 0 || hp->n_ctx_train <= 0)
    return rlx_set_error(RLX_ERR_FORMAT, "rlx_llm_load: %s: implausible sizes (block_count %lld, embedding_length "
                         "%lld, feed_forward_length %lld, head_count %lld, head_count_kv %lld, context_length %lld)",
                         arch, (long long)hp->n_layer, (long long)hp->n_embd, (long long)hp->n_ff,
                         (long long)hp->n_head, (long long)hp->n_head_kv, (long long)hp->n_ctx_train);
  if (hp->n_head % hp->n_head_kv)
    return rlx_set_error(RLX_ERR_FORMAT, "rlx_llm_load: %s: head_count %lld is not a multiple of head_count_kv %lld",
                         arch, (long long)hp->n_head, (long long)hp->n_head_kv);
  int64_t dflt_head_dim = hp->n_embd % hp->n_head ? 0 : hp->n_embd / hp->n_head, value_len;
  if ((st = meta_i64(f, arch, "attention.key_length", dflt_head_dim, 0, &hp->head_dim)) ||
      (st = meta_i64(f, arch, "attention.value_length", hp->head_dim, 0, &value_len)))
    return st;
  if (hp->head_dim <= 0 || hp->head_dim > 1024 || hp->head_dim % 2)
    return rlx_set_error(RLX_ERR_FORMAT, "rlx_llm_load: %s: no usable head size (embedding_length %lld over "
                         "head_count %lld, attention.key_length %lld)", arch, (long long)hp->n_embd,
                         (long long)hp->n_head, (long long)hp->head_dim);
  if (value_len != hp->head_dim)
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "rlx_llm_load: %s: value_length %lld differs from key_length %lld",
                         arch, (long long)value_len, (long long)hp->head_dim);
  if ((st = meta_i64(f, arch, "rope.dimension_count", hp->head_dim, 0, &hp->n_rot))) return st;
  if (hp->n_rot <= 0 || hp->n_rot > hp->head_dim || hp->n_rot % 2)
    return rlx_set_error(RLX_ERR_FORMAT, "rlx_llm_load: %s: rope.dimension_count %lld does not fit head size %lld",
                         arch, (long long)hp->n_rot, (long long)hp->head_dim);
  if ((st = meta_f32(f, arch, "attention.layer_norm_rms_epsilon", 1e-6f, &hp->norm_eps))) return st;
  if (hp->norm_eps < 0)
    return rlx_set_error(RLX_ERR_FORMAT, "rlx_llm_load: %s: rms epsilon %g is negative", arch, hp->norm_eps);
  return read_rope_scaling(f, arch, hp);
}

/* The angle per position of each of the n_rot / 2 rotations, and the scale
 * of cos and sin, as llama.cpp's ggml_rope_ext computes them: theta_i =
 * p * base^(-2i/n_rot) / freq_factor_i, interpolated by freq_scale; YaRN
 * (ext_factor > 0) ramps from the interpolated angle (slow rotations, past
 * the correction dim of beta_slow) back to the unscaled one (fast rotations,
 * before the correction dim of beta_fast) and scales the magnitude by
 * 1 + 0.1 ln(factor). Both angles are linear in p, so the blend is one
 * frequency per rotation. */
rlx_status llm_rope_frequencies(const rlx_model_file *f, llm_hparams *hp, double *freq, double *mscale) {
  const int64_t half = hp->n_rot / 2;
  rlx_file_tensor t;
  int has_factors = hp->has_freq_factors = rlx_model_file_find_tensor(f, "rope_freqs.weight", &t) == RLX_OK;
  if (has_factors && (!t.supported || (t.dtype != RLX_F32 && t.dtype != RLX_F16 && t.dtype != RLX_BF16) ||
                      t.numel != half))
    return rlx_set_error(RLX_ERR_FORMAT, "rlx_llm_load: %s: rope_freqs.weight has %lld values of type %s; expected "
                         "%lld floats, one per rotation of rope.dimension_count %lld", hp->name, (long long)t.numel,
                         t.type_name, (long long)half, (long long)hp->n_rot);
  const double base = hp->rope_base, fs = hp->rope_freq_scale, ext = hp->yarn_ext_factor;
  double low = 0, high = 0;
  if (ext > 0) {
    /* the rotation that turns n_ctx_orig / (2 pi beta) times over the original context */
    const double two_pi = 6.283185307179586;
    double d_fast = (double)hp->n_rot * log((double)hp->n_ctx_orig / (hp->yarn_beta_fast * two_pi)) / (2 * log(base));
    double d_slow = (double)hp->n_rot * log((double)hp->n_ctx_orig / (hp->yarn_beta_slow * two_pi)) / (2 * log(base));
    low = fmax(0.0, floor(d_fast));
    high = fmin((double)hp->n_rot - 1, ceil(d_slow));
  }
  for (int64_t i = 0; i < half; i++) {
    double factor = 1.0;
    if (has_factors) {
      const unsigned char *p = (const unsigned char *)t.data + i * (t.dtype == RLX_F32 ? 4 : 2);
      float v32;
      uint16_t v16;
      if (t.dtype == RLX_F32) memcpy(&v32, p, 4);
      else memcpy(&v16, p, 2), v32 = t.dtype == RLX_F16 ? rlx_f16_to_f32(v16) : rlx_bf16_to_f32(v16);
      factor = v32;
      if (!(factor > 0) || !isfinite(factor))
        return rlx_set_error(RLX_ERR_FORMAT, "rlx_llm_load: %s: rope_freqs.weight[%lld] is %g; frequency factors "
                             "are positive", hp->name, (long long)i, factor);
    }
    double extrap = pow(base, -2.0 * (double)i / (double)hp->n_rot) / factor, mix = 0.0;
    if (ext > 0) mix = ext * (1.0 - fmin(1.0, fmax(0.0, ((double)i - low) / fmax(0.001, high - low))));
    freq[i] = extrap * (fs * (1.0 - mix) + mix);
  }
  *mscale = hp->rope_attn_factor * (ext > 0 && fs < 1 ? 1.0 + 0.1 * log(1.0 / fs) : 1.0);
  return RLX_OK;
}

/* The hyperparameters and the vocabulary size (token_embd.weight's rows). */
rlx_status llm_read_hparams(const rlx_model_file *f, const hf_llm *hf, llm_hparams *hp) {
  rlx_status st = read_hparams(f, hp);
  if (st) return st;
  rlx_file_tensor embd;
  if (hf && (st = hf_llm_tensor(hf, "token_embd.weight", &embd))) return st;
  if (!hf && rlx_model_file_find_tensor(f, "token_embd.weight", &embd) != RLX_OK)
    return rlx_set_error(RLX_ERR_FORMAT, "rlx_llm_load: %s: the file has no tensor token_embd.weight", hp->name);
  hp->n_vocab = embd.rank == 2 ? embd.dims[0] : 0;
  int64_t vocab;
  if (hp->n_vocab <= 0 || hp->n_vocab > INT32_MAX)
    return rlx_set_error(RLX_ERR_FORMAT, "rlx_llm_load: token_embd.weight has rank %d; expected [n_vocab, %lld]",
                         embd.rank, (long long)hp->n_embd);
  if ((st = meta_i64(f, hp->name, "vocab_size", hp->n_vocab, 0, &vocab))) return st;
  if (vocab != hp->n_vocab)
    return rlx_set_error(RLX_ERR_FORMAT, "rlx_llm_load: %s.vocab_size %lld differs from token_embd.weight's %lld rows",
                         hp->name, (long long)vocab, (long long)hp->n_vocab);
  /* A vocabulary of another size than the embedding's rows: the model
   * would generate ids with no text (or be fed ids it has no row for). */
  rlx_meta_value toks;
  if (rlx_meta_lookup(f, "tokenizer.ggml.tokens", &toks) == RLX_OK && toks.count != (uint64_t)hp->n_vocab)
    return rlx_set_error(RLX_ERR_FORMAT, "rlx_llm_load: tokenizer.ggml.tokens has %llu entries, token_embd.weight %lld rows",
                         (unsigned long long)toks.count, (long long)hp->n_vocab);
  return RLX_OK;
}

/* The info fields that come from the hyperparameters. */
void llm_fill_info(const llm_hparams *hp, rlx_llm_info *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->arch, sizeof out->arch, "%s", hp->name);
  out->n_vocab = hp->n_vocab;
  out->n_embd = hp->n_embd;
  out->n_layer = hp->n_layer;
  out->n_head = hp->n_head;
  out->n_head_kv = hp->n_head_kv;
  out->head_dim = hp->head_dim;
  out->n_ff = hp->n_ff;
  out->n_ctx_train = hp->n_ctx_train;
  out->rope_base = hp->rope_base;
  snprintf(out->rope_scaling, sizeof out->rope_scaling, "%s", rope_scaling_names[hp->scaling]);
  out->rope_freq_scale = hp->rope_freq_scale;
  out->rope_freq_factors = hp->has_freq_factors;
  out->norm_eps = hp->norm_eps;
}
