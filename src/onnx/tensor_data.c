/* tensor_data.c — the bytes of an ONNX tensor: raw_data used in place, the
 * typed fields (float_data, int32_data, ...) decoded into the arena, or a
 * range of an external data file, which must lie inside the model's folder. */
#define _XOPEN_SOURCE 700   /* realpath */
#include "onnx.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* size: bytes of an element as rlx holds it; per_byte: elements a stored
 * byte packs (the 4- and 2-bit types). */
static const struct { const char *name; int rlx; int size; int per_byte; } ox_types[OX_DTYPE_LAST + 1] = {
  [OX_UNDEFINED] = {"undefined", -1, 0, 1},  [OX_FLOAT] = {"float", RLX_F32, 4, 1},
  [OX_UINT8] = {"uint8", RLX_U8, 1, 1},      [OX_INT8] = {"int8", RLX_I8, 1, 1},
  [OX_UINT16] = {"uint16", RLX_U16, 2, 1},   [OX_INT16] = {"int16", RLX_I16, 2, 1},
  [OX_INT32] = {"int32", RLX_I32, 4, 1},     [OX_INT64] = {"int64", RLX_I64, 8, 1},
  [OX_STRING] = {"string", -1, 0, 1},        [OX_BOOL] = {"bool", RLX_BOOL, 1, 1},
  [OX_FLOAT16] = {"float16", RLX_F16, 2, 1}, [OX_DOUBLE] = {"double", RLX_F64, 8, 1},
  [OX_UINT32] = {"uint32", RLX_U32, 4, 1},   [OX_UINT64] = {"uint64", RLX_U64, 8, 1},
  [OX_COMPLEX64] = {"complex64", -1, 8, 1},  [OX_COMPLEX128] = {"complex128", -1, 16, 1},
  [OX_BFLOAT16] = {"bfloat16", RLX_BF16, 2, 1},
  /* the narrow types (narrow.c), one element a byte */
  [17] = {"float8e4m3fn", RLX_U8, 1, 1}, [18] = {"float8e4m3fnuz", RLX_U8, 1, 1},
  [19] = {"float8e5m2", RLX_U8, 1, 1},   [20] = {"float8e5m2fnuz", RLX_U8, 1, 1},
  [21] = {"uint4", RLX_U8, 1, 2},        [22] = {"int4", RLX_U8, 1, 2},
  [23] = {"float4e2m1", RLX_U8, 1, 2},   [24] = {"float8e8m0", RLX_U8, 1, 1},
  [25] = {"uint2", RLX_U8, 1, 4},        [26] = {"int2", RLX_U8, 1, 4},
};

int ox_rlx_dtype(int32_t t) { return t >= 0 && t <= OX_DTYPE_LAST ? ox_types[t].rlx : -1; }
const char *ox_dtype_name(int32_t t) { return t >= 0 && t <= OX_DTYPE_LAST ? ox_types[t].name : "unknown"; }
int ox_is_narrow(int32_t t) { return t > OX_BFLOAT16 && t <= OX_DTYPE_LAST; }

void ox_external_free(ox_external *x) {
  for (int i = 0; i < x->n_files; i++) {
    fmt_unmap(&x->files[i].map);
    free(x->files[i].path);
  }
  free(x->files);
  x->files = NULL;
  x->n_files = 0;
}

/* The mapping of location (relative to x->dir), refusing any path that
 * leaves the folder: absolute, a ".." component, or a symlink whose target
 * is outside (the real path must start with the folder's real path). */
static rlx_status external_file(ox_external *x, const char *model, const char *loc, const fmt_mapping **out) {
  if (!x->dir) return rlx_set_error(RLX_ERR_INVALID, "%s: ONNX: external data \"%s\" of a model loaded from memory", model, loc);
  if (!*loc || loc[0] == '/')
    return rlx_set_error(RLX_ERR_FORMAT, "%s: ONNX: external data location \"%s\" is not a relative path", model, loc);
  for (const char *p = loc; *p;) {
    const char *e = strchr(p, '/');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n == 2 && p[0] == '.' && p[1] == '.')
      return rlx_set_error(RLX_ERR_FORMAT, "%s: ONNX: external data location \"%s\" leaves the model's folder", model, loc);
    p += n + (e != NULL);
  }
  size_t dl = strlen(x->dir), ll = strlen(loc);
  char *joined = malloc(dl + ll + 2);
  char *real_dir = NULL, *real = NULL;
  rlx_status st = RLX_OK;
  if (!joined) return rlx_set_error(RLX_ERR_NOMEM, "%s: ONNX: out of memory", model);
  memcpy(joined, x->dir, dl);
  joined[dl] = '/';
  memcpy(joined + dl + 1, loc, ll + 1);
  real_dir = realpath(x->dir, NULL);
  real = realpath(joined, NULL);
  free(joined);
  if (!real_dir || !real) {
    st = rlx_set_error(RLX_ERR_IO, "%s: ONNX: external data \"%s\": %s", model, loc, strerror(errno));
  } else {
    size_t rl = strlen(real_dir);
    if (strncmp(real, real_dir, rl) != 0 || (real[rl] != '/' && !(rl == 1 && real_dir[0] == '/')))
      st = rlx_set_error(RLX_ERR_FORMAT, "%s: ONNX: external data \"%s\" resolves to %s, outside the model's folder",
                         model, loc, real);
  }
  free(real_dir);
  if (st) {
    free(real);
    return st;
  }
  for (int i = 0; i < x->n_files; i++)
    if (!strcmp(x->files[i].path, real)) {
      free(real);
      *out = &x->files[i].map;
      return RLX_OK;
    }
  void *files = realloc(x->files, (size_t)(x->n_files + 1) * sizeof *x->files);
  if (!files) {
    free(real);
    return rlx_set_error(RLX_ERR_NOMEM, "%s: ONNX: out of memory", model);
  }
  x->files = files;
  fmt_mapping map;
  if ((st = fmt_map_file(real, &map))) {
    free(real);
    return st;
  }
  x->files[x->n_files].path = real;
  x->files[x->n_files].map = map;
  *out = &x->files[x->n_files++].map;
  return RLX_OK;
}

typedef struct { const uint8_t *p, *end; } cur;

static int varint(cur *c, uint64_t *v) {
  uint64_t x = 0;
  for (int s = 0; s < 64 && c->p < c->end; s += 7) {
    uint8_t b = *c->p++;
    x |= (uint64_t)(b & 0x7f) << s;
    if (!(b & 0x80)) { *v = x; return 0; }
  }
  return -1;
}

/* Stores element i (from a typed field's value v) in the tensor's dtype. */
static void store(int32_t type, uint8_t *dst, int64_t i, uint64_t bits) {
  switch (type) {
  case OX_FLOAT: { uint32_t u = (uint32_t)bits; memcpy(dst + i * 4, &u, 4); break; }
  case OX_DOUBLE: case OX_INT64: case OX_UINT64: memcpy(dst + i * 8, &bits, 8); break;
  case OX_INT32: case OX_UINT32: { uint32_t u = (uint32_t)bits; memcpy(dst + i * 4, &u, 4); break; }
  case OX_INT16: case OX_UINT16: case OX_FLOAT16: case OX_BFLOAT16: { uint16_t u = (uint16_t)bits; memcpy(dst + i * 2, &u, 2); break; }
  default: dst[i] = (uint8_t)bits;
  }
}

/* Decodes the typed field of t (every occurrence, packed or not). */
static rlx_status decode_typed(ox_arena *a, const char *model, ox_tensor *t, int size, int64_t count) {
  size_t nbytes = (size_t)count * (size_t)size;
  int fixed = t->typed_field == 4 ? 4 : t->typed_field == 10 ? 8 : 0;
  /* Each value takes at least one byte of the message (fixed: its size),
   * so a count the message cannot hold fails before any allocation. */
  if ((uint64_t)count > t->msg_len / (uint64_t)(fixed ? fixed : 1))
    return rlx_set_error(RLX_ERR_FORMAT, "%s: ONNX: tensor %s claims %lld elements in a message of %zu bytes", model,
                         t->name, (long long)t->numel, t->msg_len);
  uint8_t *dst = ox_alloc(a, nbytes);
  if (!dst) return RLX_ERR_NOMEM;
  int64_t n = 0;
  cur c = {t->msg, t->msg + t->msg_len};
  while (c.p < c.end) {
    uint64_t key, v;
    if (varint(&c, &key)) goto bad;
    int wt = (int)(key & 7);
    if ((int)(key >> 3) != t->typed_field) {
      if (wt == 0) { if (varint(&c, &v)) goto bad; }
      else if (wt == 2) { if (varint(&c, &v) || v > (uint64_t)(c.end - c.p)) goto bad; c.p += v; }
      else if (wt == 1 || wt == 5) { size_t k = wt == 1 ? 8 : 4; if ((size_t)(c.end - c.p) < k) goto bad; c.p += k; }
      else goto bad;
      continue;
    }
    cur run = c;
    if (wt == 2) {
      if (varint(&c, &v) || v > (uint64_t)(c.end - c.p)) goto bad;
      run.p = c.p;
      run.end = c.p + v;
      c.p += v;
    } else {
      run.end = c.end;
    }
    do {
      uint64_t bits = 0;
      if (fixed) {
        if ((size_t)(run.end - run.p) < (size_t)fixed) goto bad;
        memcpy(&bits, run.p, (size_t)fixed);  /* little-endian host */
        run.p += fixed;
      } else if (varint(&run, &bits)) goto bad;
      if (n >= count) return rlx_set_error(RLX_ERR_FORMAT, "%s: ONNX: tensor %s has more values than its %lld elements",
                                           model, t->name, (long long)t->numel);
      store(t->data_type, dst, n++, bits);
    } while (wt == 2 && run.p < run.end);
    if (wt != 2) c.p = run.p;
  }
  if (n != count)
    return rlx_set_error(RLX_ERR_FORMAT, "%s: ONNX: tensor %s has %lld values for %lld elements", model, t->name,
                         (long long)n, (long long)t->numel);
  t->data = dst;
  t->nbytes = nbytes;
  return RLX_OK;
bad:
  return rlx_set_error(RLX_ERR_FORMAT, "%s: ONNX: tensor %s: a malformed typed data field", model, t->name);
}

/* The bytes of a 4- or 2-bit type unpacked, one element a byte (the first
 * element in the lowest bits). */
static rlx_status unpack(ox_arena *a, ox_tensor *t, int per_byte) {
  uint8_t *dst = ox_alloc(a, (size_t)t->numel);
  if (!dst) return RLX_ERR_NOMEM;
  const uint8_t *src = t->data;
  int bits = 8 / per_byte;
  for (int64_t i = 0; i < t->numel; i++)
    dst[i] = (uint8_t)(src[i / per_byte] >> (bits * (int)(i % per_byte)) & ((1u << bits) - 1));
  t->data = dst;
  t->nbytes = (size_t)t->numel;
  return RLX_OK;
}

/* The stored bytes of t: raw_data in place, a typed field decoded, or a
 * range of an external file; count stored elements of size bytes. */
static rlx_status stored_bytes(ox_arena *a, ox_external *x, const char *model, ox_tensor *t, int size, int64_t count) {
  int32_t dt = t->data_type;
  if ((uint64_t)count > SIZE_MAX / (uint64_t)size)
    return rlx_set_error(RLX_ERR_FORMAT, "%s: ONNX: tensor %s is too large", model, t->name);
  size_t nbytes = (size_t)count * (size_t)size;
  if (t->external) {
    if (!t->location) return rlx_set_error(RLX_ERR_FORMAT, "%s: ONNX: external tensor %s has no location", model, t->name);
    const fmt_mapping *map = NULL;
    rlx_status st = external_file(x, model, t->location, &map);
    if (st) return st;
    uint64_t len = t->ext_length ? (uint64_t)t->ext_length : (uint64_t)nbytes;
    if (len != nbytes || (uint64_t)t->ext_offset > map->size || len > map->size - (uint64_t)t->ext_offset)
      return rlx_set_error(RLX_ERR_FORMAT, "%s: ONNX: external tensor %s: %llu bytes at offset %lld of %s (%zu bytes), %zu expected",
                           model, t->name, (unsigned long long)len, (long long)t->ext_offset, t->location, map->size, nbytes);
    t->data = map->data + t->ext_offset;
    t->nbytes = nbytes;
    return RLX_OK;
  }
  if (t->has_raw) {
    if (t->raw_len != nbytes)
      return rlx_set_error(RLX_ERR_FORMAT, "%s: ONNX: tensor %s has %zu bytes of raw_data for %lld %s elements",
                           model, t->name, t->raw_len, (long long)t->numel, ox_dtype_name(dt));
    t->data = t->raw;
    t->nbytes = nbytes;
    return RLX_OK;
  }
  if (!t->typed_field) return rlx_set_error(RLX_ERR_FORMAT, "%s: ONNX: tensor %s has no data", model, t->name);
  return decode_typed(a, model, t, size, count);
}

rlx_status ox_tensor_resolve(ox_arena *a, ox_external *x, const char *model, ox_tensor *t) {
  if (t->data || t->numel == 0) return RLX_OK;
  int32_t dt = t->data_type;
  int size = dt >= 0 && dt <= OX_DTYPE_LAST ? ox_types[dt].size : 0;
  if (size == 0 || ox_rlx_dtype(dt) < 0)
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "%s: ONNX: tensor %s has data type %s (%d), which rlx does not support",
                         model, t->name, ox_dtype_name(dt), (int)dt);
  int per_byte = ox_types[dt].per_byte;
  rlx_status st = stored_bytes(a, x, model, t, size, t->numel / per_byte + (t->numel % per_byte != 0));
  return st || per_byte == 1 ? st : unpack(a, t, per_byte);
}

const void *ox_aligned_data(ox_arena *a, const ox_tensor *t) {
  size_t size = t->numel ? t->nbytes / (size_t)t->numel : 1;
  if (!t->data || size == 0 || (uintptr_t)t->data % size == 0) return t->data;
  void *copy = ox_alloc(a, t->nbytes);   /* raw_data sits anywhere in the file */
  if (copy) memcpy(copy, t->data, t->nbytes);
  return copy;
}
