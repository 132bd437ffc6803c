/* llama_hparams.h — the Llama-family decoder's hyperparameters (llama.c):
 * read from GGUF metadata (or a Hugging Face folder's, hf_llama.h) and
 * checked, and RoPE's per-rotation frequencies. Internal. */
#ifndef RLX_MODEL_LLAMA_HPARAMS_H
#define RLX_MODEL_LLAMA_HPARAMS_H

#include "hf_llama.h"
#include "rlx.h"

#include <stdint.h>

typedef enum { ARCH_LLAMA, ARCH_QWEN2, ARCH_QWEN3 } llm_arch;

/* llama.cpp's rope scaling types (<arch>.rope.scaling.type) rlx computes. */
typedef enum { ROPE_SCALING_NONE, ROPE_SCALING_LINEAR, ROPE_SCALING_YARN } rope_scaling;

typedef struct {
  llm_arch arch;
  char name[32];
  int64_t n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_rot, n_ctx_train;
  float norm_eps;
  rlx_rope_mode rope_mode;
  /* RoPE as llama.cpp reads it: rotation i of position p turns by
   * p * base^(-2i/n_rot) / freq_factor[i] (rope_freqs.weight), times
   * freq_scale (1 / rope.scaling.factor; 1 for none), YaRN blending the
   * unscaled angle back in for the fast-turning pairs and scaling cos/sin
   * by its magnitude factor. */
  rope_scaling scaling;
  float rope_base, rope_freq_scale, rope_attn_factor;
  float yarn_ext_factor, yarn_beta_fast, yarn_beta_slow;
  int64_t n_ctx_orig;       /* rope.scaling.original_context_length */
  int has_freq_factors;     /* rope_freqs.weight */
} llm_hparams;

/* The hyperparameters of f and the vocabulary size (token_embd.weight's
 * rows, of hf's tensors when hf is not NULL). */
rlx_status llm_read_hparams(const rlx_model_file *f, const hf_llm *hf, llm_hparams *hp);

/* Into freq [n_rot / 2] the angle per position of each rotation, into
 * *mscale the scale of cos and sin; sets hp->has_freq_factors. */
rlx_status llm_rope_frequencies(const rlx_model_file *f, llm_hparams *hp, double *freq, double *mscale);

/* The info fields that come from the hyperparameters. */
void llm_fill_info(const llm_hparams *hp, rlx_llm_info *out);

#endif
