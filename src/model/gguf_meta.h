/* gguf_meta.h — a GGUF image built in memory (gguf_meta.c): metadata keys
 * and small F32 tensors, for a model whose metadata is derived from other
 * files (a Hugging Face folder's JSON) and then read by the same code that
 * reads a GGUF file, through rlx_model_file_open_memory. Internal.
 *
 * Every call appends; the first failure (out of memory) is kept in st and
 * makes later calls no-ops, so a writer is checked once at the end. */
#ifndef RLX_MODEL_GGUF_META_H
#define RLX_MODEL_GGUF_META_H

#include "rlx.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
  uint8_t *kv;              /* the key/value section */
  size_t kv_len, kv_cap;
  uint64_t n_kv;
  uint8_t *ti;              /* tensor infos */
  size_t ti_len, ti_cap;
  float *data;              /* tensor data, each tensor padded to 32 bytes */
  size_t data_len, data_cap; /* floats */
  uint64_t n_tensors;
  rlx_status st;
} gguf_meta;

void gguf_meta_str(gguf_meta *w, const char *key, const char *s, size_t len);
void gguf_meta_u32(gguf_meta *w, const char *key, uint32_t v);
void gguf_meta_i32(gguf_meta *w, const char *key, int32_t v);
void gguf_meta_f32(gguf_meta *w, const char *key, float v);
void gguf_meta_bool(gguf_meta *w, const char *key, int v);
/* An array of n strings: s[i] of len[i] bytes. */
void gguf_meta_str_array(gguf_meta *w, const char *key, const char *const *s, const size_t *len, uint64_t n);
void gguf_meta_i32_array(gguf_meta *w, const char *key, const int32_t *v, uint64_t n);
void gguf_meta_f32_array(gguf_meta *w, const char *key, const float *v, uint64_t n);
/* A 1-D F32 tensor of n values. */
void gguf_meta_tensor_f32(gguf_meta *w, const char *name, const float *v, int64_t n);

/* The whole image (version 3, alignment 32) in *out (malloc'd, *size
 * bytes); frees the writer either way. */
rlx_status gguf_meta_finish(gguf_meta *w, uint8_t **out, size_t *size);
void       gguf_meta_free(gguf_meta *w);

#endif
