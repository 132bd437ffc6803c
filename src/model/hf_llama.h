/* hf_llama.h — a Hugging Face Llama-family decoder folder (llama, mistral,
 * qwen2, qwen3) seen as the GGUF file llama.cpp's convert_hf_to_gguf.py
 * would make of it (hf_llama.c, tokenizer_json.c).
 *
 * config.json, tokenizer.json, tokenizer_config.json and
 * generation_config.json become GGUF metadata (general.architecture,
 * <arch>.*, tokenizer.ggml.*, tokenizer.chat_template,
 * general.sampling.*) in an image opened with rlx_model_file_open_memory,
 * which the tokenizer, the chat template and the decoder read as they read
 * a GGUF file. The weights stay in the folder's safetensors mappings and
 * are found by their GGUF names (hf_llm_tensor): one decoder builder, two
 * weight sources. Llama's Q/K rows are as Hugging Face stores them (the
 * converter permutes them for GGUF's adjacent-pair rotation), so the
 * decoder rotates halves (neox) for every folder. Internal. */
#ifndef RLX_MODEL_HF_LLAMA_H
#define RLX_MODEL_HF_LLAMA_H

#include "gguf_meta.h"
#include "hf_folder.h"

typedef struct hf_llm hf_llm;

rlx_status hf_llm_open(const char *dir, hf_llm **out);
void       hf_llm_free(hf_llm *h);
/* The metadata image (its tensors: rope_freqs.weight for llama3 scaling). */
const rlx_model_file *hf_llm_file(const hf_llm *h);
/* The tensor of GGUF name `name`: the image's, else the folder's under its
 * Hugging Face name. RLX_ERR_FORMAT naming both names when absent. */
rlx_status hf_llm_tensor(const hf_llm *h, const char *name, rlx_file_tensor *out);
/* tie_word_embeddings: the output matrix is the embedding. */
int        hf_llm_tied(const hf_llm *h);
/* rlx_model_file_check of every shard. */
rlx_status hf_llm_check(const hf_llm *h);

/* tokenizer.json (BPE, byte-level) as tokenizer.ggml.* keys; n_vocab: the
 * model's rows (config.json vocab_size), the token list padded to it
 * (tokenizer_json.c). */
rlx_status hf_tokenizer_meta(const hf_folder *h, int64_t n_vocab, gguf_meta *w);

#endif
