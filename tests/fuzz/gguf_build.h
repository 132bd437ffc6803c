/* gguf_build.h — a GGUF v3 file written into memory, for the harnesses
 * that fuzz what lies behind the file reader (fuzz_tokenizer.c,
 * fuzz_chat_template.c): they turn the fuzzer's bytes into metadata
 * (vocabularies, templates) and open the result with
 * rlx_model_file_open_memory, as a model file would arrive. */
#ifndef RLX_FUZZ_GGUF_BUILD_H
#define RLX_FUZZ_GGUF_BUILD_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { GB_U32 = 4, GB_I32 = 5, GB_F32 = 6, GB_BOOL = 7, GB_STRING = 8, GB_ARRAY = 9 };

typedef struct {
  uint8_t *p;
  size_t n, cap;
  uint64_t n_kv;
  int failed;
} gguf_build;

static inline void gb_put(gguf_build *b, const void *d, size_t n) {
  if (b->failed) return;
  if (b->n + n > b->cap) {
    size_t cap = (b->n + n) * 2 + 64;
    uint8_t *p = realloc(b->p, cap);
    if (!p) {
      b->failed = 1;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->n, d, n);
  b->n += n;
}
static inline void gb_u32(gguf_build *b, uint32_t v) { gb_put(b, &v, 4); }
static inline void gb_u64(gguf_build *b, uint64_t v) { gb_put(b, &v, 8); }
static inline void gb_str(gguf_build *b, const char *s, size_t n) {
  gb_u64(b, n);
  gb_put(b, s, n);
}

/* The header, with the count of keys patched in by gb_finish; no tensors. */
static inline void gb_start(gguf_build *b) {
  memset(b, 0, sizeof *b);
  gb_put(b, "GGUF", 4);
  gb_u32(b, 3);
  gb_u64(b, 0);
  gb_u64(b, 0);
}
static inline void gb_key(gguf_build *b, const char *key, uint32_t type) {
  gb_str(b, key, strlen(key));
  gb_u32(b, type);
  b->n_kv++;
}
static inline void gb_kv_str(gguf_build *b, const char *key, const char *s, size_t n) {
  gb_key(b, key, GB_STRING);
  gb_str(b, s, n);
}
static inline void gb_kv_u32(gguf_build *b, const char *key, uint32_t v) {
  gb_key(b, key, GB_U32);
  gb_u32(b, v);
}
static inline void gb_kv_bool(gguf_build *b, const char *key, int v) {
  uint8_t x = (uint8_t)!!v;
  gb_key(b, key, GB_BOOL);
  gb_put(b, &x, 1);
}
/* An array's header: then n elements of elem_type follow. */
static inline void gb_kv_array(gguf_build *b, const char *key, uint32_t elem_type, uint64_t n) {
  gb_key(b, key, GB_ARRAY);
  gb_u32(b, elem_type);
  gb_u64(b, n);
}
static inline void gb_finish(gguf_build *b) {
  if (!b->failed) memcpy(b->p + 16, &b->n_kv, 8);
}

/* Splits data into at most max pieces at each sep byte: starts and lengths. */
static inline int gb_split(const uint8_t *data, size_t size, uint8_t sep, const uint8_t **at, size_t *len, int max) {
  int n = 0;
  size_t start = 0;
  for (size_t i = 0; i <= size && n < max; i++)
    if (i == size || data[i] == sep) {
      at[n] = data + start;
      len[n++] = i - start;
      start = i + 1;
    }
  return n;
}

#endif
