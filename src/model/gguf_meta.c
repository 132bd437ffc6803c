/* gguf_meta.c — the in-memory GGUF writer (gguf_meta.h). */
#include "gguf_meta.h"

#include "../ir/ir.h"

#include <stdlib.h>
#include <string.h>

/* GGUF value types (the file format's numbering). */
enum { T_U32 = 4, T_I32 = 5, T_F32 = 6, T_BOOL = 7, T_STR = 8, T_ARR = 9 };
#define ALIGN 32

static void put(gguf_meta *w, uint8_t **buf, size_t *len, size_t *cap, const void *p, size_t n) {
  if (w->st || !n) return; /* n = 0: *buf may still be NULL, and NULL + 0 is undefined */
  if (*len + n > *cap) {
    size_t c = *cap ? *cap : 4096;
    while (c < *len + n) c *= 2;
    uint8_t *b = realloc(*buf, c);
    if (!b) {
      w->st = rlx_set_error(RLX_ERR_NOMEM, "out of memory");
      return;
    }
    *buf = b;
    *cap = c;
  }
  memcpy(*buf + *len, p, n);
  *len += n;
}

static void kv(gguf_meta *w, const void *p, size_t n) { put(w, &w->kv, &w->kv_len, &w->kv_cap, p, n); }
static void kv_u32(gguf_meta *w, uint32_t v) { kv(w, &v, 4); }
static void kv_u64(gguf_meta *w, uint64_t v) { kv(w, &v, 8); }
static void kv_string(gguf_meta *w, const char *s, size_t len) {
  kv_u64(w, len);
  kv(w, s, len);
}
static void key(gguf_meta *w, const char *k, uint32_t type) {
  kv_string(w, k, strlen(k));
  kv_u32(w, type);
  w->n_kv++;
}

void gguf_meta_str(gguf_meta *w, const char *k, const char *s, size_t len) {
  key(w, k, T_STR);
  kv_string(w, s, len);
}
void gguf_meta_u32(gguf_meta *w, const char *k, uint32_t v) {
  key(w, k, T_U32);
  kv_u32(w, v);
}
void gguf_meta_i32(gguf_meta *w, const char *k, int32_t v) {
  key(w, k, T_I32);
  kv(w, &v, 4);
}
void gguf_meta_f32(gguf_meta *w, const char *k, float v) {
  key(w, k, T_F32);
  kv(w, &v, 4);
}
void gguf_meta_bool(gguf_meta *w, const char *k, int v) {
  uint8_t b = v != 0;
  key(w, k, T_BOOL);
  kv(w, &b, 1);
}

void gguf_meta_str_array(gguf_meta *w, const char *k, const char *const *s, const size_t *len, uint64_t n) {
  key(w, k, T_ARR);
  kv_u32(w, T_STR);
  kv_u64(w, n);
  for (uint64_t i = 0; i < n; i++) kv_string(w, s[i], len[i]);
}

void gguf_meta_i32_array(gguf_meta *w, const char *k, const int32_t *v, uint64_t n) {
  key(w, k, T_ARR);
  kv_u32(w, T_I32);
  kv_u64(w, n);
  kv(w, v, n * sizeof *v);
}

void gguf_meta_f32_array(gguf_meta *w, const char *k, const float *v, uint64_t n) {
  key(w, k, T_ARR);
  kv_u32(w, T_F32);
  kv_u64(w, n);
  kv(w, v, n * sizeof *v);
}

void gguf_meta_tensor_f32(gguf_meta *w, const char *name, const float *v, int64_t n) {
  const size_t pad = ALIGN / sizeof(float), padded = ((size_t)n + pad - 1) / pad * pad;
  uint64_t offset = (uint64_t)w->data_len * sizeof(float), len = strlen(name), ne = (uint64_t)n;
  const uint32_t n_dims = 1, type_f32 = 0;
  put(w, &w->ti, &w->ti_len, &w->ti_cap, &len, 8);
  put(w, &w->ti, &w->ti_len, &w->ti_cap, name, len);
  put(w, &w->ti, &w->ti_len, &w->ti_cap, &n_dims, 4);
  put(w, &w->ti, &w->ti_len, &w->ti_cap, &ne, 8);
  put(w, &w->ti, &w->ti_len, &w->ti_cap, &type_f32, 4);
  put(w, &w->ti, &w->ti_len, &w->ti_cap, &offset, 8);
  size_t bytes = w->data_len * sizeof(float), cap = w->data_cap * sizeof(float);
  uint8_t *data = (uint8_t *)w->data;
  put(w, &data, &bytes, &cap, v, (size_t)n * sizeof *v);
  float zero = 0;
  for (size_t i = (size_t)n; i < padded; i++) put(w, &data, &bytes, &cap, &zero, sizeof zero);
  w->data = (float *)data;
  w->data_len = bytes / sizeof(float);
  w->data_cap = cap / sizeof(float);
  w->n_tensors++;
}

rlx_status gguf_meta_finish(gguf_meta *w, uint8_t **out, size_t *size) {
  *out = NULL;
  *size = 0;
  rlx_status st = w->st;
  if (!st) {
    const size_t head = 4 + 4 + 8 + 8, meta = head + w->kv_len + w->ti_len;
    const size_t data_at = (meta + ALIGN - 1) / ALIGN * ALIGN, total = data_at + w->data_len * sizeof(float);
    uint8_t *b = calloc(1, total);
    if (!b) st = rlx_set_error(RLX_ERR_NOMEM, "out of memory");
    else {
      const uint32_t version = 3;
      memcpy(b, "GGUF", 4);
      memcpy(b + 4, &version, 4);
      memcpy(b + 8, &w->n_tensors, 8);
      memcpy(b + 16, &w->n_kv, 8);
      if (w->kv_len) memcpy(b + head, w->kv, w->kv_len);
      if (w->ti_len) memcpy(b + head + w->kv_len, w->ti, w->ti_len);
      if (w->data_len) memcpy(b + data_at, w->data, w->data_len * sizeof(float));
      *out = b;
      *size = total;
    }
  }
  gguf_meta_free(w);
  return st;
}

void gguf_meta_free(gguf_meta *w) {
  free(w->kv);
  free(w->ti);
  free(w->data);
  memset(w, 0, sizeof *w);
}
