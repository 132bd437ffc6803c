/* model_file.c — the rlx_model_file object: open (map + detect the format),
 * the checks GGUF and safetensors share, name lookup, and the public
 * accessors of tensors and metadata. */
#include "format.h"
#include "../ir/hash.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- errors */

rlx_status fmt_fail(const rlx_model_file *f, rlx_status st, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return rlx_set_error(st, "%s: %s: %s", f->name, rlx_file_format_name(f->format), msg);
}

/* ---------------------------------------------------------------- string storage */

struct fmt_chunk {
  fmt_chunk *next;
  size_t used, cap;
  char data[];
};

char *fmt_strdup(rlx_model_file *f, const void *s, size_t len) {
  fmt_chunk *c = f->strings;
  if (len >= SIZE_MAX - sizeof *c - 1) {
    rlx_set_error(RLX_ERR_NOMEM, "%s: a string of %zu bytes", f->name, len);
    return NULL;
  }
  if (!c || c->cap - c->used < len + 1) {
    size_t cap = len + 1 > 65536 ? len + 1 : 65536;
    c = malloc(sizeof *c + cap);
    if (!c) {
      rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory copying a string of %zu bytes", f->name, len);
      return NULL;
    }
    c->next = f->strings;
    c->used = 0;
    c->cap = cap;
    f->strings = c;
  }
  char *p = c->data + c->used;
  if (len) memcpy(p, s, len);
  p[len] = 0;
  c->used += len + 1;
  return p;
}

uint64_t fmt_reserve_elems(rlx_model_file *f, uint64_t n) {
  if (n > f->cap_elems - f->n_elems) {
    uint64_t cap = f->cap_elems ? f->cap_elems : 256;
    while (cap - f->n_elems < n) {
      if (cap > (UINT64_MAX >> 1)) cap = UINT64_MAX;
      else cap *= 2;
    }
    if (cap > SIZE_MAX / sizeof(fmt_elem)) {
      rlx_set_error(RLX_ERR_NOMEM, "%s: an index of %llu array elements", f->name, (unsigned long long)cap);
      return UINT64_MAX;
    }
    fmt_elem *e = realloc(f->elems, (size_t)cap * sizeof *e);
    if (!e) {
      rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory indexing %llu array elements", f->name,
                    (unsigned long long)cap);
      return UINT64_MAX;
    }
    f->elems = e;
    f->cap_elems = cap;
  }
  uint64_t first = f->n_elems;
  f->n_elems += n;
  return first;
}

/* ---------------------------------------------------------------- name index */

typedef const char *(*name_at_fn)(const rlx_model_file *f, int64_t i);

static const char *meta_key_at(const rlx_model_file *f, int64_t i) { return f->meta[i].key; }
static const char *tensor_name_at(const rlx_model_file *f, int64_t i) { return f->tensors[i].name; }

static uint64_t hash_name(const char *s) { return ir_hash_str(s); }

/* Position of name in the index, or -1. */
static int64_t index_find(const rlx_model_file *f, const fmt_index *ix, name_at_fn name_at, const char *name) {
  if (!ix->slots) return -1;
  for (uint64_t h = hash_name(name) & ix->mask;; h = (h + 1) & ix->mask) {
    int64_t s = ix->slots[h];
    if (!s) return -1;
    if (!strcmp(name_at(f, s - 1), name)) return s - 1;
  }
}

/* Indexes positions [0, n). A repeated name: RLX_ERR_FORMAT naming both. */
static rlx_status index_build(rlx_model_file *f, fmt_index *ix, int64_t n, name_at_fn name_at, const char *what) {
  if ((uint64_t)n > SIZE_MAX / (4 * sizeof *ix->slots))
    return rlx_set_error(RLX_ERR_NOMEM, "%s: an index of %lld names", f->name, (long long)n);
  uint64_t cap = 8;
  while (cap < (uint64_t)n * 2) cap *= 2;
  ix->slots = calloc((size_t)cap, sizeof *ix->slots);
  if (!ix->slots) return rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory indexing %lld names", f->name, (long long)n);
  ix->mask = cap - 1;
  for (int64_t i = 0; i < n; i++) {
    const char *name = name_at(f, i);
    uint64_t h = hash_name(name) & ix->mask;
    for (; ix->slots[h]; h = (h + 1) & ix->mask) {
      int64_t j = ix->slots[h] - 1;
      if (!strcmp(name_at(f, j), name))
        return fmt_fail(f, RLX_ERR_FORMAT, "duplicate %s '%.128s' (entries %lld and %lld)", what, name, (long long)j,
                        (long long)i);
    }
    ix->slots[h] = i + 1;
  }
  return RLX_OK;
}

/* ---------------------------------------------------------------- shared checks */

typedef struct {
  uint64_t begin, end;
  int64_t i;
} data_range;

static int range_cmp(const void *a, const void *b) {
  const data_range *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  return x->end < y->end ? -1 : x->end > y->end;
}

rlx_status fmt_finish(rlx_model_file *f) {
  rlx_status st = index_build(f, &f->meta_index, f->n_meta, meta_key_at, "metadata key");
  if (st) return st;
  st = index_build(f, &f->tensor_index, f->n_tensors, tensor_name_at, "tensor name");
  if (st) return st;
  if (f->n_tensors == 0) return RLX_OK;
  if (f->data_offset > f->size)
    return fmt_fail(f, RLX_ERR_FORMAT, "tensor data would start at offset %llu, past the end of the file (%llu bytes)",
                    (unsigned long long)f->data_offset, (unsigned long long)f->size);
  const uint64_t room = f->size - f->data_offset;
  data_range *r = malloc((size_t)f->n_tensors * sizeof *r);
  if (!r) return rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory checking %lld tensors", f->name, (long long)f->n_tensors);
  for (int64_t i = 0; i < f->n_tensors && !st; i++) {
    rlx_file_tensor *t = &f->tensors[i];
    if (t->offset > room || t->nbytes > room - t->offset) {
      st = fmt_fail(f, RLX_ERR_FORMAT,
                    "tensor '%.128s': data at relative offset %llu + %zu bytes ends past the end of the file "
                    "(%llu bytes of tensor data from offset %llu)",
                    t->name, (unsigned long long)t->offset, t->nbytes, (unsigned long long)room,
                    (unsigned long long)f->data_offset);
      break;
    }
    t->offset += f->data_offset;
    t->data = f->base + t->offset;
    r[i] = (data_range){t->offset, t->offset + t->nbytes, i};
  }
  if (!st) {
    qsort(r, (size_t)f->n_tensors, sizeof *r, range_cmp);
    /* Empty tensors overlap nothing; among the others each must end
     * before the next begins. */
    const data_range *prev = NULL;
    for (int64_t k = 0; k < f->n_tensors && !st; k++) {
      if (r[k].begin == r[k].end) continue;
      if (prev && prev->end > r[k].begin)
        st = fmt_fail(f, RLX_ERR_FORMAT, "tensors '%.128s' [%llu, %llu) and '%.128s' [%llu, %llu) overlap",
                      f->tensors[prev->i].name, (unsigned long long)prev->begin, (unsigned long long)prev->end,
                      f->tensors[r[k].i].name, (unsigned long long)r[k].begin, (unsigned long long)r[k].end);
      prev = &r[k];
    }
  }
  free(r);
  return st;
}

/* ---------------------------------------------------------------- open, close */

static int is_json_space(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* GGUF starts with its magic; safetensors with an 8-byte header length and
 * then the JSON object of its header. */
static rlx_status detect_and_parse(rlx_model_file *f) {
  if (f->size >= 4 && !memcmp(f->base, "GGUF", 4)) {
    f->format = RLX_FILE_GGUF;
    return fmt_gguf_parse(f);
  }
  for (uint64_t i = 8; i < f->size && i < 72; i++) {
    if (is_json_space(f->base[i])) continue;
    if (f->base[i] == '{') {
      f->format = RLX_FILE_SAFETENSORS;
      return fmt_safetensors_parse(f);
    }
    break;
  }
  if (f->size == 0) return rlx_set_error(RLX_ERR_FORMAT, "%s: empty file, not a GGUF or safetensors file", f->name);
  char head[4 * 8 + 1] = {0};
  for (uint64_t i = 0; i < f->size && i < 8; i++) snprintf(head + 3 * i, 4, "%02x ", f->base[i]);
  return rlx_set_error(RLX_ERR_FORMAT, "%s: not a GGUF or safetensors file (starts with %s)", f->name, head);
}

static rlx_status open_common(rlx_model_file *f, rlx_model_file **out) {
  rlx_status st = detect_and_parse(f);
  if (!st) st = fmt_finish(f);
  if (st) {
    rlx_model_file_close(f);
    return st;
  }
  *out = f;
  return RLX_OK;
}

static rlx_model_file *file_new(const char *name) {
  rlx_model_file *f = calloc(1, sizeof *f);
  if (!f) return NULL;
  f->alignment = 1;
  f->name = fmt_strdup(f, name, strlen(name));
  if (!f->name) {
    free(f);
    return NULL;
  }
  return f;
}

rlx_status rlx_model_file_open(const char *path, rlx_model_file **out) {
  if (!out) return rlx_set_error(RLX_ERR_INVALID, "rlx_model_file_open: out is NULL");
  *out = NULL;
  if (!path) return rlx_set_error(RLX_ERR_INVALID, "rlx_model_file_open: path is NULL");
  rlx_model_file *f = file_new(path);
  if (!f) return rlx_set_error(RLX_ERR_NOMEM, "rlx_model_file_open: out of memory");
  rlx_status st = fmt_map_file_watched(path, &f->map);
  if (st) {
    rlx_model_file_close(f);
    return st;
  }
  f->mapped = 1;
  f->base = f->map.data;
  f->size = f->map.size;
  return open_common(f, out);
}

rlx_status rlx_model_file_open_memory(const void *data, size_t size, rlx_model_file **out) {
  if (!out) return rlx_set_error(RLX_ERR_INVALID, "rlx_model_file_open_memory: out is NULL");
  *out = NULL;
  if (!data && size) return rlx_set_error(RLX_ERR_INVALID, "rlx_model_file_open_memory: data is NULL");
  rlx_model_file *f = file_new("<memory>");
  if (!f) return rlx_set_error(RLX_ERR_NOMEM, "rlx_model_file_open_memory: out of memory");
  f->base = data;
  f->size = size;
  return open_common(f, out);
}

void rlx_model_file_close(rlx_model_file *f) {
  if (!f) return;
  if (f->mapped) fmt_unmap(&f->map);
  free(f->meta);
  free(f->elems);
  free(f->tensors);
  free(f->meta_index.slots);
  free(f->tensor_index.slots);
  for (fmt_chunk *c = f->strings, *next; c; c = next) {
    next = c->next;
    free(c);
  }
  free(f);
}

rlx_status rlx_model_file_check(const rlx_model_file *f) {
  if (!f) return rlx_set_error(RLX_ERR_INVALID, "rlx_model_file_check: f is NULL");
  return f->mapped ? fmt_mapping_check(&f->map, f->name) : RLX_OK;
}

/* ---------------------------------------------------------------- file properties */

const char *rlx_file_format_name(rlx_file_format format) {
  switch (format) {
  case RLX_FILE_GGUF: return "GGUF";
  case RLX_FILE_SAFETENSORS: return "safetensors";
  }
  return "?";
}

rlx_file_format rlx_model_file_format(const rlx_model_file *f) { return f ? f->format : RLX_FILE_GGUF; }
uint32_t rlx_model_file_version(const rlx_model_file *f) { return f ? f->version : 0; }
uint64_t rlx_model_file_size(const rlx_model_file *f) { return f ? f->size : 0; }
uint64_t rlx_model_file_data_offset(const rlx_model_file *f) { return f ? f->data_offset : 0; }
uint64_t rlx_model_file_alignment(const rlx_model_file *f) { return f ? f->alignment : 0; }

/* ---------------------------------------------------------------- tensors */

int64_t rlx_model_file_num_tensors(const rlx_model_file *f) { return f ? f->n_tensors : 0; }

rlx_status rlx_model_file_tensor(const rlx_model_file *f, int64_t i, rlx_file_tensor *out) {
  if (!f || !out) return rlx_set_error(RLX_ERR_INVALID, "rlx_model_file_tensor: file or out is NULL");
  if (i < 0 || i >= f->n_tensors)
    return rlx_set_error(RLX_ERR_INVALID, "rlx_model_file_tensor: index %lld out of range [0, %lld)", (long long)i,
                         (long long)f->n_tensors);
  *out = f->tensors[i];
  return RLX_OK;
}

rlx_status rlx_model_file_find_tensor(const rlx_model_file *f, const char *name, rlx_file_tensor *out) {
  if (!f || !name || !out) return rlx_set_error(RLX_ERR_INVALID, "rlx_model_file_find_tensor: an argument is NULL");
  int64_t i = index_find(f, &f->tensor_index, tensor_name_at, name);
  if (i < 0) return rlx_set_error(RLX_ERR_INVALID, "%s: no tensor named '%s'", f->name, name);
  *out = f->tensors[i];
  return RLX_OK;
}

/* ---------------------------------------------------------------- metadata values */

static const struct {
  const char *name;
  int size;
} meta_types[RLX_META_TYPE_COUNT] = {
  [RLX_META_U8] = {"u8", 1},   [RLX_META_I8] = {"i8", 1},     [RLX_META_U16] = {"u16", 2},
  [RLX_META_I16] = {"i16", 2}, [RLX_META_U32] = {"u32", 4},   [RLX_META_I32] = {"i32", 4},
  [RLX_META_F32] = {"f32", 4}, [RLX_META_BOOL] = {"bool", 1}, [RLX_META_STRING] = {"string", 0},
  [RLX_META_ARRAY] = {"array", 0}, [RLX_META_U64] = {"u64", 8}, [RLX_META_I64] = {"i64", 8},
  [RLX_META_F64] = {"f64", 8},
};

const char *rlx_meta_type_name(rlx_meta_type t) {
  return (unsigned)t < RLX_META_TYPE_COUNT ? meta_types[t].name : "?";
}

int fmt_meta_type_size(uint32_t t) { return t < RLX_META_TYPE_COUNT ? meta_types[t].size : 0; }

static void value_of(const rlx_model_file *f, const fmt_meta *m, rlx_meta_value *v) {
  v->type = m->type;
  v->elem_type = m->type == RLX_META_ARRAY ? m->elem_type : RLX_META_TYPE_COUNT;
  v->count = m->type == RLX_META_ARRAY ? m->count : 0;
  v->file_ = f;
  v->key_ = m->key;
  v->str_ = m->str;
  v->pos_ = m->pos;
  v->aux_ = m->type == RLX_META_STRING ? m->len : m->index;
}

int64_t rlx_meta_count(const rlx_model_file *f) { return f ? f->n_meta : 0; }

const char *rlx_meta_key(const rlx_model_file *f, int64_t i, rlx_meta_value *v) {
  if (!f || i < 0 || i >= f->n_meta) return NULL;
  if (v) value_of(f, &f->meta[i], v);
  return f->meta[i].key;
}

int64_t rlx_meta_find(const rlx_model_file *f, const char *key) {
  if (!f || !key) return -1;
  return index_find(f, &f->meta_index, meta_key_at, key);
}

rlx_status rlx_meta_lookup(const rlx_model_file *f, const char *key, rlx_meta_value *v) {
  if (!f || !key || !v) return rlx_set_error(RLX_ERR_INVALID, "rlx_meta_lookup: an argument is NULL");
  int64_t i = rlx_meta_find(f, key);
  if (i < 0) return rlx_set_error(RLX_ERR_INVALID, "%s: no metadata key '%s'", f->name, key);
  value_of(f, &f->meta[i], v);
  return RLX_OK;
}

rlx_status rlx_meta_elem(const rlx_meta_value *a, uint64_t i, rlx_meta_value *e) {
  if (!a || !e || !a->file_) return rlx_set_error(RLX_ERR_INVALID, "rlx_meta_elem: an argument is NULL");
  if (a->type != RLX_META_ARRAY)
    return rlx_set_error(RLX_ERR_DTYPE, "metadata '%s' (%s) is not an array", a->key_, rlx_meta_type_name(a->type));
  if (i >= a->count)
    return rlx_set_error(RLX_ERR_INVALID, "metadata '%s': element %llu out of range [0, %llu)", a->key_,
                         (unsigned long long)i, (unsigned long long)a->count);
  /* Every position below was checked against the file when it was opened. */
  const rlx_model_file *f = a->file_;
  *e = (rlx_meta_value){.type = a->elem_type, .elem_type = RLX_META_TYPE_COUNT, .file_ = f, .key_ = a->key_};
  if (a->elem_type == RLX_META_STRING) {
    const fmt_elem *el = &f->elems[a->aux_ + i];
    e->aux_ = fmt_rd64(f->base + el->pos);
    e->str_ = (const char *)f->base + el->pos + 8;
  } else if (a->elem_type == RLX_META_ARRAY) {
    const fmt_elem *el = &f->elems[a->aux_ + i];
    e->elem_type = (rlx_meta_type)fmt_rd32(f->base + el->pos);
    e->count = fmt_rd64(f->base + el->pos + 4);
    e->pos_ = el->pos + 12;
    e->aux_ = el->index;
  } else {
    e->pos_ = a->pos_ + i * (uint64_t)meta_types[a->elem_type].size;
  }
  return RLX_OK;
}

/* A numeric value: an integer as sign + magnitude, or a float. */
typedef struct {
  int is_float, negative;
  uint64_t magnitude;
  double real;
} meta_number;

static int read_number(const rlx_meta_value *v, meta_number *n) {
  const uint8_t *p = v->file_->base + v->pos_;
  int64_t s = 0;
  uint64_t u = 0;
  int is_signed = 0;
  *n = (meta_number){0};
  switch (v->type) {
  case RLX_META_U8: u = p[0]; break;
  case RLX_META_U16: u = fmt_rd16(p); break;
  case RLX_META_U32: u = fmt_rd32(p); break;
  case RLX_META_U64: u = fmt_rd64(p); break;
  case RLX_META_I8: s = (int8_t)p[0], is_signed = 1; break;
  case RLX_META_I16: s = (int16_t)fmt_rd16(p), is_signed = 1; break;
  case RLX_META_I32: s = (int32_t)fmt_rd32(p), is_signed = 1; break;
  case RLX_META_I64: s = (int64_t)fmt_rd64(p), is_signed = 1; break;
  case RLX_META_F32: {
    uint32_t bits = fmt_rd32(p);
    float x;
    memcpy(&x, &bits, 4);
    n->is_float = 1, n->real = x;
    return 1;
  }
  case RLX_META_F64: {
    uint64_t bits = fmt_rd64(p);
    memcpy(&n->real, &bits, 8);
    n->is_float = 1;
    return 1;
  }
  default: return 0;
  }
  if (is_signed && s < 0) n->negative = 1, u = (uint64_t)0 - (uint64_t)s;
  else if (is_signed) u = (uint64_t)s;
  n->magnitude = u;
  n->real = n->negative ? -(double)u : (double)u;
  return 1;
}

static rlx_status not_a(const rlx_meta_value *v, const char *want) {
  return rlx_set_error(RLX_ERR_DTYPE, "metadata '%s' (%s) does not convert to %s", v->key_ ? v->key_ : "?",
                       rlx_meta_type_name(v->type), want);
}

static int valid_value(const rlx_meta_value *v) { return v && v->file_ && (unsigned)v->type < RLX_META_TYPE_COUNT; }

/* Integer in [-neg_limit, pos_limit] (neg_limit as a magnitude). */
static rlx_status as_integer(const rlx_meta_value *v, const char *want, uint64_t neg_limit, uint64_t pos_limit,
                             meta_number *n) {
  if (!valid_value(v)) return rlx_set_error(RLX_ERR_INVALID, "rlx_meta_as_%s: no value", want);
  if (!read_number(v, n) || n->is_float) return not_a(v, want);
  if (n->negative ? n->magnitude > neg_limit : n->magnitude > pos_limit)
    return rlx_set_error(RLX_ERR_DTYPE, "metadata '%s': %s%llu does not fit %s", v->key_, n->negative ? "-" : "",
                         (unsigned long long)n->magnitude, want);
  return RLX_OK;
}

static int64_t signed_of(const meta_number *n) {
  return n->negative ? (int64_t)(0 - n->magnitude) : (int64_t)n->magnitude;
}

rlx_status rlx_meta_as_u32(const rlx_meta_value *v, uint32_t *out) {
  meta_number n;
  rlx_status st = as_integer(v, "u32", 0, UINT32_MAX, &n);
  if (!st && out) *out = (uint32_t)n.magnitude;
  return st;
}

rlx_status rlx_meta_as_i32(const rlx_meta_value *v, int32_t *out) {
  meta_number n;
  rlx_status st = as_integer(v, "i32", (uint64_t)INT32_MAX + 1, INT32_MAX, &n);
  if (!st && out) *out = (int32_t)signed_of(&n);
  return st;
}

rlx_status rlx_meta_as_u64(const rlx_meta_value *v, uint64_t *out) {
  meta_number n;
  rlx_status st = as_integer(v, "u64", 0, UINT64_MAX, &n);
  if (!st && out) *out = n.magnitude;
  return st;
}

rlx_status rlx_meta_as_i64(const rlx_meta_value *v, int64_t *out) {
  meta_number n;
  rlx_status st = as_integer(v, "i64", (uint64_t)INT64_MAX + 1, INT64_MAX, &n);
  if (!st && out) *out = signed_of(&n);
  return st;
}

rlx_status rlx_meta_as_f64(const rlx_meta_value *v, double *out) {
  meta_number n;
  if (!valid_value(v)) return rlx_set_error(RLX_ERR_INVALID, "rlx_meta_as_f64: no value");
  if (!read_number(v, &n)) return not_a(v, "f64");
  if (out) *out = n.real;
  return RLX_OK;
}

rlx_status rlx_meta_as_f32(const rlx_meta_value *v, float *out) {
  meta_number n;
  if (!valid_value(v)) return rlx_set_error(RLX_ERR_INVALID, "rlx_meta_as_f32: no value");
  if (!read_number(v, &n)) return not_a(v, "f32");
  if (isfinite(n.real) && (n.real > FLT_MAX || n.real < -FLT_MAX))  /* inf and nan pass as they are */
    return rlx_set_error(RLX_ERR_DTYPE, "metadata '%s': %g does not fit f32", v->key_, n.real);
  if (out) *out = (float)n.real;
  return RLX_OK;
}

rlx_status rlx_meta_as_bool(const rlx_meta_value *v, int *out) {
  if (!valid_value(v)) return rlx_set_error(RLX_ERR_INVALID, "rlx_meta_as_bool: no value");
  if (v->type != RLX_META_BOOL) return not_a(v, "bool");
  if (out) *out = v->file_->base[v->pos_] != 0;
  return RLX_OK;
}

rlx_status rlx_meta_as_string(const rlx_meta_value *v, const char **s, size_t *len) {
  if (!valid_value(v)) return rlx_set_error(RLX_ERR_INVALID, "rlx_meta_as_string: no value");
  if (v->type != RLX_META_STRING) return not_a(v, "string");
  if (s) *s = v->str_;
  if (len) *len = (size_t)v->aux_;
  return RLX_OK;
}

#define RLX_META_GET(suffix, ctype)                                                      \
  rlx_status rlx_meta_get_##suffix(const rlx_model_file *f, const char *key, ctype *out) { \
    rlx_meta_value v;                                                                    \
    rlx_status st = rlx_meta_lookup(f, key, &v);                                         \
    return st ? st : rlx_meta_as_##suffix(&v, out);                                      \
  }
RLX_META_GET(bool, int)
RLX_META_GET(u32, uint32_t)
RLX_META_GET(i32, int32_t)
RLX_META_GET(u64, uint64_t)
RLX_META_GET(i64, int64_t)
RLX_META_GET(f32, float)
RLX_META_GET(f64, double)
#undef RLX_META_GET

rlx_status rlx_meta_get_string(const rlx_model_file *f, const char *key, const char **s, size_t *len) {
  rlx_meta_value v;
  rlx_status st = rlx_meta_lookup(f, key, &v);
  return st ? st : rlx_meta_as_string(&v, s, len);
}
