/* gguf.c — the GGUF parser (versions 2 and 3, little-endian).
 *
 * Layout (ggml's docs/gguf.md): magic "GGUF", u32 version, u64 tensor
 * count, u64 key/value count; the key/value pairs (key: u64 length + bytes;
 * u32 value type; value); the tensor infos (name; u32 n_dims; n_dims u64
 * dims, innermost first; u32 GGML type; u64 offset relative to the data
 * section); padding to general.alignment (default 32); tensor data. v1 had
 * 32-bit counts and lengths; v2 made them 64-bit; v3 only added big-endian
 * files (whose version field then reads byte-swapped).
 *
 * Every read goes through the cursor below, which checks the bytes left
 * before it reads; a count is checked against the bytes left (each item
 * needs at least some bytes) before anything is allocated for it.
 */
#include "format.h"

#include <stdlib.h>
#include <string.h>

#define GGUF_DEFAULT_ALIGNMENT 32

/* ---------------------------------------------------------------- GGML types */

typedef struct {
  const char *name;
  int block, size;   /* elements per block, bytes per block */
  int dtype;         /* rlx dtype, or -1: listed but not supported */
} ggml_type;

/* ggml.h's enum ggml_type, with block sizes from ggml's type traits (as in
 * the gguf package's GGML_QUANT_SIZES). Gaps are types ggml has removed. */
static const ggml_type ggml_types[] = {
  [0] = {"F32", 1, 4, RLX_F32},           [1] = {"F16", 1, 2, RLX_F16},
  [2] = {"Q4_0", 32, 18, RLX_Q4_0},       [3] = {"Q4_1", 32, 20, RLX_Q4_1},
  [6] = {"Q5_0", 32, 22, RLX_Q5_0},       [7] = {"Q5_1", 32, 24, RLX_Q5_1},
  [8] = {"Q8_0", 32, 34, RLX_Q8_0},       [9] = {"Q8_1", 32, 40, -1},
  [10] = {"Q2_K", 256, 84, RLX_Q2_K},     [11] = {"Q3_K", 256, 110, RLX_Q3_K},
  [12] = {"Q4_K", 256, 144, RLX_Q4_K},    [13] = {"Q5_K", 256, 176, RLX_Q5_K},
  [14] = {"Q6_K", 256, 210, RLX_Q6_K},    [15] = {"Q8_K", 256, 292, RLX_Q8_K},
  [16] = {"IQ2_XXS", 256, 66, -1},        [17] = {"IQ2_XS", 256, 74, -1},
  [18] = {"IQ3_XXS", 256, 98, -1},        [19] = {"IQ1_S", 256, 50, -1},
  [20] = {"IQ4_NL", 32, 18, -1},          [21] = {"IQ3_S", 256, 110, -1},
  [22] = {"IQ2_S", 256, 82, -1},          [23] = {"IQ4_XS", 256, 136, -1},
  [24] = {"I8", 1, 1, RLX_I8},            [25] = {"I16", 1, 2, -1},
  [26] = {"I32", 1, 4, RLX_I32},          [27] = {"I64", 1, 8, RLX_I64},
  [28] = {"F64", 1, 8, RLX_F64},          [29] = {"IQ1_M", 256, 56, -1},
  [30] = {"BF16", 1, 2, RLX_BF16},        [34] = {"TQ1_0", 256, 54, -1},
  [35] = {"TQ2_0", 256, 66, -1},          [39] = {"MXFP4", 32, 17, -1},
  [40] = {"NVFP4", 64, 36, -1},           [41] = {"Q1_0", 128, 18, -1},
};
#define N_GGML_TYPES (sizeof ggml_types / sizeof ggml_types[0])

/* ---------------------------------------------------------------- bounded reads */

typedef struct {
  rlx_model_file *f;
  uint64_t pos;      /* <= f->size */
  char what[224];    /* what is being read, for messages */
} cursor;

static uint64_t left(const cursor *c) { return c->f->size - c->pos; }

static rlx_status truncated(cursor *c, uint64_t need) {
  return fmt_fail(c->f, RLX_ERR_FORMAT, "truncated: %s at offset %llu needs %llu bytes, %llu left", c->what,
                  (unsigned long long)c->pos, (unsigned long long)need, (unsigned long long)left(c));
}

static rlx_status read_u32(cursor *c, uint32_t *v) {
  *v = 0;
  if (left(c) < 4) return truncated(c, 4);
  *v = fmt_rd32(c->f->base + c->pos);
  c->pos += 4;
  return RLX_OK;
}

static rlx_status read_u64(cursor *c, uint64_t *v) {
  *v = 0;
  if (left(c) < 8) return truncated(c, 8);
  *v = fmt_rd64(c->f->base + c->pos);
  c->pos += 8;
  return RLX_OK;
}

/* A string: u64 length + bytes (no terminator in the file). */
static rlx_status read_string(cursor *c, const char **s, uint64_t *len) {
  *s = NULL;
  rlx_status st = read_u64(c, len);
  if (st) return st;
  if (*len > left(c))
    return fmt_fail(c->f, RLX_ERR_FORMAT, "%s: string length %llu at offset %llu exceeds the %llu bytes left",
                    c->what, (unsigned long long)*len, (unsigned long long)(c->pos - 8),
                    (unsigned long long)left(c));
  *s = (const char *)c->f->base + c->pos;
  c->pos += *len;
  return RLX_OK;
}

/* "'key'" for messages: at most 96 bytes, unprintable bytes as '?'. */
static void quote_name(char *dst, size_t cap, const char *s, uint64_t len) {
  size_t n = 0;
  dst[n++] = '\'';
  for (uint64_t i = 0; i < len && n + 5 < cap && i < 96; i++) {
    unsigned char ch = (unsigned char)s[i];
    dst[n++] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
  }
  if (len > 96 && n + 5 < cap) dst[n++] = '.', dst[n++] = '.', dst[n++] = '.';
  dst[n++] = '\'';
  dst[n] = 0;
}

/* A key or tensor name: no NUL bytes inside (it is used as a C string). */
static rlx_status read_name(cursor *c, const char *what, char **out) {
  const char *s;
  uint64_t len;
  rlx_status st = read_string(c, &s, &len);
  if (st) return st;
  if (memchr(s, 0, (size_t)len)) {
    char q[112];
    quote_name(q, sizeof q, s, len);
    return fmt_fail(c->f, RLX_ERR_FORMAT, "%s: %s %s contains a NUL byte", c->what, what, q);
  }
  *out = fmt_strdup(c->f, s, (size_t)len);
  return *out ? RLX_OK : RLX_ERR_NOMEM;
}

/* ---------------------------------------------------------------- metadata values */

static rlx_status check_bools(cursor *c, uint64_t at, uint64_t n) {
  for (uint64_t i = 0; i < n; i++)
    if (c->f->base[at + i] > 1)
      return fmt_fail(c->f, RLX_ERR_FORMAT, "%s: bool value %u at offset %llu (must be 0 or 1)", c->what,
                      c->f->base[at + i], (unsigned long long)(at + i));
  return RLX_OK;
}

/* An array value: u32 element type, u64 count, the elements. Sets
 * *first_pos to the first element and, for elements of variable size
 * (strings, arrays), *index to the elems[] entries indexing them. */
static rlx_status read_array(cursor *c, int depth, uint32_t *elem_type, uint64_t *count, uint64_t *first_pos,
                             uint64_t *index) {
  rlx_status st = read_u32(c, elem_type);
  if (!st) st = read_u64(c, count);
  if (st) return st;
  const uint32_t t = *elem_type;
  const uint64_t n = *count;
  if (t >= RLX_META_TYPE_COUNT)
    return fmt_fail(c->f, RLX_ERR_FORMAT, "%s: unknown array element type %u at offset %llu", c->what, t,
                    (unsigned long long)(c->pos - 12));
  if (t == RLX_META_ARRAY && depth >= FMT_MAX_ARRAY_DEPTH)
    return fmt_fail(c->f, RLX_ERR_FORMAT, "%s: arrays nested deeper than %d levels", c->what, FMT_MAX_ARRAY_DEPTH);
  *first_pos = c->pos;
  *index = 0;
  const int size = fmt_meta_type_size(t);
  if (size) {
    if (n > left(c) / (uint64_t)size)
      return fmt_fail(c->f, RLX_ERR_FORMAT, "%s: array of %llu %s at offset %llu needs more than the %llu bytes left",
                      c->what, (unsigned long long)n, rlx_meta_type_name((rlx_meta_type)t),
                      (unsigned long long)c->pos, (unsigned long long)left(c));
    if (t == RLX_META_BOOL && (st = check_bools(c, c->pos, n))) return st;
    c->pos += n * (uint64_t)size;
    return RLX_OK;
  }
  /* Strings take at least 8 bytes (their length), arrays 12. */
  const uint64_t min_size = t == RLX_META_STRING ? 8 : 12;
  if (n > left(c) / min_size)
    return fmt_fail(c->f, RLX_ERR_FORMAT, "%s: array of %llu %ss at offset %llu cannot fit in the %llu bytes left",
                    c->what, (unsigned long long)n, rlx_meta_type_name((rlx_meta_type)t), (unsigned long long)c->pos,
                    (unsigned long long)left(c));
  uint64_t first = fmt_reserve_elems(c->f, n);
  if (first == UINT64_MAX) return RLX_ERR_NOMEM;
  *index = first;
  for (uint64_t i = 0; i < n; i++) {
    c->f->elems[first + i].pos = c->pos;
    c->f->elems[first + i].index = 0;
    if (t == RLX_META_STRING) {
      const char *s;
      uint64_t len;
      if ((st = read_string(c, &s, &len))) return st;
    } else {
      uint32_t et;
      uint64_t cnt, pos, sub;
      if ((st = read_array(c, depth + 1, &et, &cnt, &pos, &sub))) return st;
      c->f->elems[first + i].index = sub;  /* elems may have moved: index again */
    }
  }
  return RLX_OK;
}

static rlx_status read_kv(cursor *c, int64_t i, fmt_meta *m) {
  snprintf(c->what, sizeof c->what, "metadata entry %lld", (long long)i);
  char *key;
  rlx_status st = read_name(c, "key", &key);
  if (st) return st;
  m->key = key;
  char q[112];
  quote_name(q, sizeof q, key, strlen(key));
  snprintf(c->what, sizeof c->what, "metadata %s", q);
  uint32_t type;
  if ((st = read_u32(c, &type))) return st;
  if (type >= RLX_META_TYPE_COUNT)
    return fmt_fail(c->f, RLX_ERR_FORMAT, "%s: unknown value type %u at offset %llu", c->what, type,
                    (unsigned long long)(c->pos - 4));
  m->type = (rlx_meta_type)type;
  m->pos = c->pos;
  if (type == RLX_META_STRING) {
    const char *s;
    uint64_t len;
    if ((st = read_string(c, &s, &len))) return st;
    m->len = (size_t)len;
    m->str = fmt_strdup(c->f, s, (size_t)len);
    return m->str ? RLX_OK : RLX_ERR_NOMEM;
  }
  if (type == RLX_META_ARRAY) {
    uint32_t et;
    st = read_array(c, 1, &et, &m->count, &m->pos, &m->index);
    m->elem_type = (rlx_meta_type)et;
    return st;
  }
  const int size = fmt_meta_type_size(type);
  if (left(c) < (uint64_t)size) return truncated(c, (uint64_t)size);
  if (type == RLX_META_BOOL && (st = check_bools(c, c->pos, 1))) return st;
  c->pos += (uint64_t)size;
  return RLX_OK;
}

/* general.alignment: a u32 power of two, if present. */
static rlx_status read_alignment(rlx_model_file *f) {
  f->alignment = GGUF_DEFAULT_ALIGNMENT;
  for (int64_t i = 0; i < f->n_meta; i++) {
    const fmt_meta *m = &f->meta[i];
    if (strcmp(m->key, "general.alignment")) continue;
    if (m->type != RLX_META_U32)
      return fmt_fail(f, RLX_ERR_FORMAT, "general.alignment is a %s (must be u32)", rlx_meta_type_name(m->type));
    uint32_t a = fmt_rd32(f->base + m->pos);
    if (a == 0 || (a & (a - 1)))
      return fmt_fail(f, RLX_ERR_FORMAT, "general.alignment %u is not a power of two", a);
    f->alignment = a;
    return RLX_OK;
  }
  return RLX_OK;
}

/* ---------------------------------------------------------------- tensor infos */

static rlx_status read_tensor_info(cursor *c, int64_t i, rlx_file_tensor *t) {
  snprintf(c->what, sizeof c->what, "tensor info %lld", (long long)i);
  char *name;
  rlx_status st = read_name(c, "name", &name);
  if (st) return st;
  t->name = name;
  char q[112];
  quote_name(q, sizeof q, name, strlen(name));
  snprintf(c->what, sizeof c->what, "tensor %s", q);
  uint32_t n_dims, type;
  if ((st = read_u32(c, &n_dims))) return st;
  if (n_dims > RLX_MAX_RANK)
    return fmt_fail(c->f, RLX_ERR_FORMAT, "%s: %u dims (at most %d)", c->what, n_dims, RLX_MAX_RANK);
  uint64_t ne[RLX_MAX_RANK];
  int64_t numel = 1;
  for (uint32_t d = 0; d < n_dims; d++) {
    if ((st = read_u64(c, &ne[d]))) return st;
    if (ne[d] > INT64_MAX)
      return fmt_fail(c->f, RLX_ERR_FORMAT, "%s: dim %u is %llu", c->what, d, (unsigned long long)ne[d]);
  }
  for (uint32_t d = 0; d < n_dims; d++) {
    if (ne[d] && (uint64_t)numel > (uint64_t)INT64_MAX / ne[d]) {
      int zero = 0;  /* a later 0 dim makes it empty: not an overflow */
      for (uint32_t k = d; k < n_dims; k++) zero |= ne[k] == 0;
      if (!zero) return fmt_fail(c->f, RLX_ERR_FORMAT, "%s: the element count overflows 64 bits", c->what);
      numel = 0;
      break;
    }
    numel *= (int64_t)ne[d];
  }
  if ((st = read_u32(c, &type))) return st;
  if (type >= N_GGML_TYPES || !ggml_types[type].name)
    return fmt_fail(c->f, RLX_ERR_FORMAT, "%s: unknown GGML type %u", c->what, type);
  const ggml_type *gt = &ggml_types[type];
  /* Rows are whole blocks (ggml packs along ne[0]). */
  const uint64_t row = n_dims ? ne[0] : 1;
  if (row % (uint64_t)gt->block)
    return fmt_fail(c->f, RLX_ERR_FORMAT, "%s: %s rows of %llu elements are not whole blocks of %d", c->what,
                    gt->name, (unsigned long long)row, gt->block);
  const uint64_t blocks = (uint64_t)numel / (uint64_t)gt->block;
  if (blocks > c->f->size / (uint64_t)gt->size)
    return fmt_fail(c->f, RLX_ERR_FORMAT, "%s: %lld %s elements need more bytes than the file has (%llu)", c->what,
                    (long long)numel, gt->name, (unsigned long long)c->f->size);
  uint64_t offset;
  if ((st = read_u64(c, &offset))) return st;
  if (offset % c->f->alignment)
    return fmt_fail(c->f, RLX_ERR_FORMAT, "%s: data offset %llu is not a multiple of the alignment %llu", c->what,
                    (unsigned long long)offset, (unsigned long long)c->f->alignment);
  t->supported = gt->dtype >= 0;
  t->dtype = gt->dtype >= 0 ? (rlx_dtype)gt->dtype : RLX_DTYPE_COUNT;
  t->type_name = gt->name;
  t->type_code = (int)type;
  t->rank = (int)n_dims;
  for (uint32_t d = 0; d < n_dims; d++) t->dims[d] = (int64_t)ne[n_dims - 1 - d];
  t->numel = numel;
  t->nbytes = (size_t)(blocks * (uint64_t)gt->size);
  t->offset = offset;  /* relative; fmt_finish checks it and makes it absolute */
  return RLX_OK;
}

/* ---------------------------------------------------------------- the file */

static uint32_t bswap32(uint32_t v) { return v >> 24 | (v >> 8 & 0xff00) | (v << 8 & 0xff0000) | v << 24; }

rlx_status fmt_gguf_parse(rlx_model_file *f) {
  cursor c = {.f = f, .pos = 4};  /* the magic was checked by the caller */
  snprintf(c.what, sizeof c.what, "the header");
  uint32_t version;
  uint64_t n_tensors, n_kv;
  rlx_status st = read_u32(&c, &version);
  if (st) return st;
  if (version != 2 && version != 3) {
    uint32_t swapped = bswap32(version);
    if (swapped >= 1 && swapped <= 3)
      return fmt_fail(f, RLX_ERR_UNSUPPORTED, "a big-endian file (version %u); rlx reads little-endian GGUF only",
                      swapped);
    if (version == 1)
      return fmt_fail(f, RLX_ERR_UNSUPPORTED, "version 1 (32-bit counts) is not supported: convert the file to v3");
    return fmt_fail(f, RLX_ERR_UNSUPPORTED, "version %u; rlx reads GGUF versions 2 and 3", version);
  }
  f->version = version;
  if ((st = read_u64(&c, &n_tensors)) || (st = read_u64(&c, &n_kv))) return st;
  /* A key/value pair needs at least 13 bytes (empty key, u32 type, u8 value)
   * and a tensor info 24 (empty name, n_dims, type, offset). */
  if (n_kv > left(&c) / 13)
    return fmt_fail(f, RLX_ERR_FORMAT, "%llu metadata entries cannot fit in the %llu bytes after the header",
                    (unsigned long long)n_kv, (unsigned long long)left(&c));
  if (n_tensors > left(&c) / 24)
    return fmt_fail(f, RLX_ERR_FORMAT, "%llu tensor infos cannot fit in the %llu bytes after the header",
                    (unsigned long long)n_tensors, (unsigned long long)left(&c));
  f->meta = calloc(n_kv ? (size_t)n_kv : 1, sizeof *f->meta);
  if (!f->meta) return rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory for %llu metadata entries", f->name,
                                     (unsigned long long)n_kv);
  for (uint64_t i = 0; i < n_kv; i++) {
    f->n_meta = (int64_t)i + 1;  /* so close() sees what was filled */
    if ((st = read_kv(&c, (int64_t)i, &f->meta[i]))) return st;
  }
  if ((st = read_alignment(f))) return st;
  if (n_tensors > left(&c) / 24)
    return fmt_fail(f, RLX_ERR_FORMAT, "%llu tensor infos cannot fit in the %llu bytes left at offset %llu",
                    (unsigned long long)n_tensors, (unsigned long long)left(&c), (unsigned long long)c.pos);
  f->tensors = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof *f->tensors);
  if (!f->tensors) return rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory for %llu tensor infos", f->name,
                                        (unsigned long long)n_tensors);
  for (uint64_t i = 0; i < n_tensors; i++) {
    f->n_tensors = (int64_t)i + 1;
    if ((st = read_tensor_info(&c, (int64_t)i, &f->tensors[i]))) return st;
  }
  /* The data section starts at the next multiple of the alignment. */
  if (c.pos > UINT64_MAX - (f->alignment - 1))
    return fmt_fail(f, RLX_ERR_FORMAT, "the data offset overflows");
  f->data_offset = (c.pos + f->alignment - 1) & ~(f->alignment - 1);
  return RLX_OK;
}
