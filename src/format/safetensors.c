/* safetensors.c — the safetensors parser.
 *
 * Layout: u64 N (little-endian), N bytes of UTF-8 JSON, tensor data. The
 * JSON is one object: each member is a tensor,
 *   "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
 * with offsets relative to the byte after the header, except the optional
 * "__metadata__": {"key": "value", ...} (strings only).
 *
 * The JSON parser here reads exactly that grammar and nothing more: strict
 * JSON strings (escapes, surrogate pairs, valid UTF-8, no control bytes),
 * non-negative integers without sign, fraction or exponent, whitespace
 * anywhere JSON allows it (writers pad the header with spaces). Every
 * member of a tensor appears exactly once; unknown members, duplicate
 * names and trailing bytes are errors. Limits follow the reference
 * implementation (header at most 100 MB; data_offsets must hold exactly the
 * bytes of dtype x shape), except that gaps between tensors are allowed.
 */
#include "format.h"

#include <stdlib.h>
#include <string.h>

#define MAX_HEADER_BYTES 100000000ull

typedef struct {
  const char *name;
  int bits;     /* per element */
  int dtype;    /* rlx dtype, or -1: listed but not supported */
} st_dtype;

static const st_dtype st_dtypes[] = {
  {"F32", 32, RLX_F32},     {"F16", 16, RLX_F16},     {"BF16", 16, RLX_BF16},   {"F64", 64, RLX_F64},
  {"I8", 8, RLX_I8},        {"U8", 8, RLX_U8},        {"I32", 32, RLX_I32},     {"I64", 64, RLX_I64},
  {"BOOL", 8, RLX_BOOL},    {"I16", 16, -1},          {"U16", 16, -1},          {"U32", 32, -1},
  {"U64", 64, -1},          {"C64", 64, -1},          {"F8_E5M2", 8, -1},       {"F8_E4M3", 8, -1},
  {"F8_E4M3FNUZ", 8, -1},   {"F8_E5M2FNUZ", 8, -1},   {"F8_E8M0", 8, -1},       {"F6_E2M3", 6, -1},
  {"F6_E3M2", 6, -1},       {"F4", 4, -1},
};

typedef struct {
  rlx_model_file *f;
  const uint8_t *s;   /* the header */
  uint64_t n, pos;
  char *scratch;      /* decoded strings (never longer than the header) */
  int64_t cap_tensors, cap_meta;
} json;

static rlx_status bad(json *j, const char *what) {
  return fmt_fail(j->f, RLX_ERR_FORMAT, "header: %s at offset %llu", what, (unsigned long long)(8 + j->pos));
}

static void skip_ws(json *j) {
  while (j->pos < j->n) {
    uint8_t c = j->s[j->pos];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
    j->pos++;
  }
}

/* Skips whitespace, then consumes c if it is next; returns whether it was. */
static int take(json *j, char c) {
  skip_ws(j);
  if (j->pos < j->n && j->s[j->pos] == (uint8_t)c) {
    j->pos++;
    return 1;
  }
  return 0;
}

static rlx_status expect(json *j, char c) {
  if (take(j, c)) return RLX_OK;
  char msg[32];
  snprintf(msg, sizeof msg, "expected '%c'", c);
  return bad(j, msg);
}

static int hex4(const uint8_t *p, uint32_t *v) {
  *v = 0;
  for (int i = 0; i < 4; i++) {
    uint8_t c = p[i];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return 0;
    *v = *v << 4 | (uint32_t)d;
  }
  return 1;
}

static size_t put_utf8(char *out, uint32_t cp) {
  if (cp < 0x80) return out[0] = (char)cp, 1;
  if (cp < 0x800) return out[0] = (char)(0xc0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3f)), 2;
  if (cp < 0x10000)
    return out[0] = (char)(0xe0 | cp >> 12), out[1] = (char)(0x80 | (cp >> 6 & 0x3f)),
           out[2] = (char)(0x80 | (cp & 0x3f)), 3;
  return out[0] = (char)(0xf0 | cp >> 18), out[1] = (char)(0x80 | (cp >> 12 & 0x3f)),
         out[2] = (char)(0x80 | (cp >> 6 & 0x3f)), out[3] = (char)(0x80 | (cp & 0x3f)), 4;
}

/* Length of the valid UTF-8 sequence at p (avail bytes), or 0: no overlong
 * forms, no surrogates, nothing above U+10FFFF. */
static int utf8_len(const uint8_t *p, uint64_t avail) {
  uint8_t c = p[0];
  int len;
  uint32_t cp, min;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) len = 2, cp = c & 0x1f, min = 0x80;
  else if (c >= 0xe0 && c <= 0xef) len = 3, cp = c & 0x0f, min = 0x800;
  else if (c >= 0xf0 && c <= 0xf4) len = 4, cp = c & 0x07, min = 0x10000;
  else return 0;
  if ((uint64_t)len > avail) return 0;
  for (int i = 1; i < len; i++) {
    if ((p[i] & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (p[i] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return len;
}

/* A JSON string, decoded into j->scratch (valid until the next string). */
static rlx_status parse_string(json *j, const char **out, size_t *len) {
  skip_ws(j);
  if (j->pos >= j->n || j->s[j->pos] != '"') return bad(j, "expected a string");
  j->pos++;
  size_t k = 0;
  for (;;) {
    if (j->pos >= j->n) return bad(j, "unterminated string");
    uint8_t c = j->s[j->pos];
    if (c == '"') {
      j->pos++;
      break;
    }
    if (c < 0x20) return bad(j, "control byte in a string");
    if (c != '\\') {
      int l = utf8_len(j->s + j->pos, j->n - j->pos);
      if (!l) return bad(j, "invalid UTF-8 in a string");
      memcpy(j->scratch + k, j->s + j->pos, (size_t)l);
      k += (size_t)l;
      j->pos += (uint64_t)l;
      continue;
    }
    if (j->n - j->pos < 2) return bad(j, "unterminated escape");
    uint8_t e = j->s[j->pos + 1];
    const char *simple = strchr("\"\\/bfnrt", e);
    if (e && simple) {
      static const char decoded[] = "\"\\/\b\f\n\r\t";
      j->scratch[k++] = decoded[simple - "\"\\/bfnrt"];
      j->pos += 2;
      continue;
    }
    uint32_t cp, lo;
    if (e != 'u') return bad(j, "invalid escape");
    if (j->n - j->pos < 6 || !hex4(j->s + j->pos + 2, &cp)) return bad(j, "invalid \\u escape");
    j->pos += 6;
    if (cp >= 0xdc00 && cp <= 0xdfff) return bad(j, "unpaired low surrogate");
    if (cp >= 0xd800 && cp <= 0xdbff) {
      if (j->n - j->pos < 6 || j->s[j->pos] != '\\' || j->s[j->pos + 1] != 'u' || !hex4(j->s + j->pos + 2, &lo) ||
          lo < 0xdc00 || lo > 0xdfff)
        return bad(j, "unpaired high surrogate");
      j->pos += 6;
      cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
    }
    /* 6 escaped bytes (12 for a pair) decode to at most 4: the scratch,
     * as long as the header, always has room. */
    k += put_utf8(j->scratch + k, cp);
  }
  j->scratch[k] = 0;
  *out = j->scratch;
  *len = k;
  return RLX_OK;
}

static rlx_status parse_uint(json *j, uint64_t *v) {
  skip_ws(j);
  if (j->pos < j->n && j->s[j->pos] == '-') return bad(j, "negative number");
  if (j->pos >= j->n || j->s[j->pos] < '0' || j->s[j->pos] > '9') return bad(j, "expected a non-negative integer");
  if (j->s[j->pos] == '0' && j->pos + 1 < j->n && j->s[j->pos + 1] >= '0' && j->s[j->pos + 1] <= '9')
    return bad(j, "number with a leading zero");
  *v = 0;
  while (j->pos < j->n && j->s[j->pos] >= '0' && j->s[j->pos] <= '9') {
    unsigned d = j->s[j->pos] - '0';
    if (*v > (UINT64_MAX - d) / 10) return bad(j, "integer overflows 64 bits");
    *v = *v * 10 + d;
    j->pos++;
  }
  if (j->pos < j->n && (j->s[j->pos] == '.' || j->s[j->pos] == 'e' || j->s[j->pos] == 'E'))
    return bad(j, "expected an integer, got a fraction or exponent");
  return RLX_OK;
}

/* A NUL-terminated copy of a decoded name; names are C strings, so a
 * \u0000 inside one is an error. */
static rlx_status copy_name(json *j, const char *s, size_t len, const char *what, const char **out) {
  if (memchr(s, 0, len)) {
    char msg[64];
    snprintf(msg, sizeof msg, "%s contains a NUL byte", what);
    return bad(j, msg);
  }
  *out = fmt_strdup(j->f, s, len);
  return *out ? RLX_OK : RLX_ERR_NOMEM;
}

static fmt_meta *new_meta(json *j) {
  rlx_model_file *f = j->f;
  if (f->n_meta == j->cap_meta) {
    int64_t cap = j->cap_meta ? 2 * j->cap_meta : 16;
    fmt_meta *m = realloc(f->meta, (size_t)cap * sizeof *m);
    if (!m) return rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory for metadata", f->name), NULL;
    f->meta = m;
    j->cap_meta = cap;
  }
  fmt_meta *m = &f->meta[f->n_meta++];
  memset(m, 0, sizeof *m);
  return m;
}

static rlx_file_tensor *new_tensor(json *j) {
  rlx_model_file *f = j->f;
  if (f->n_tensors == j->cap_tensors) {
    int64_t cap = j->cap_tensors ? 2 * j->cap_tensors : 64;
    rlx_file_tensor *t = realloc(f->tensors, (size_t)cap * sizeof *t);
    if (!t) return rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory for tensors", f->name), NULL;
    f->tensors = t;
    j->cap_tensors = cap;
  }
  rlx_file_tensor *t = &f->tensors[f->n_tensors++];
  memset(t, 0, sizeof *t);
  return t;
}

/* "__metadata__": {"key": "value", ...} */
static rlx_status parse_metadata(json *j) {
  rlx_status st = expect(j, '{');
  if (st || take(j, '}')) return st;
  do {
    const char *s;
    size_t len;
    fmt_meta *m;
    if ((st = parse_string(j, &s, &len))) return st;
    if (!(m = new_meta(j))) return RLX_ERR_NOMEM;
    if ((st = copy_name(j, s, len, "a metadata key", &m->key)) || (st = expect(j, ':'))) return st;
    skip_ws(j);
    if (j->pos < j->n && j->s[j->pos] != '"') return bad(j, "__metadata__ values must be strings");
    if ((st = parse_string(j, &s, &len))) return st;
    m->type = RLX_META_STRING;
    m->len = len;
    if (!(m->str = fmt_strdup(j->f, s, len))) return RLX_ERR_NOMEM;
  } while (take(j, ','));
  return expect(j, '}');
}

static rlx_status parse_shape(json *j, rlx_file_tensor *t) {
  rlx_status st = expect(j, '[');
  if (st || take(j, ']')) return st;
  do {
    uint64_t d;
    if ((st = parse_uint(j, &d))) return st;
    if (t->rank == RLX_MAX_RANK)
      return fmt_fail(j->f, RLX_ERR_UNSUPPORTED, "tensor '%.128s' has more than %d dims", t->name, RLX_MAX_RANK);
    if (d > INT64_MAX) return bad(j, "dim too large");
    t->dims[t->rank++] = (int64_t)d;
  } while (take(j, ','));
  return expect(j, ']');
}

/* {"dtype": ..., "shape": [...], "data_offsets": [begin, end]} in any order. */
static rlx_status parse_tensor(json *j, rlx_file_tensor *t) {
  rlx_status st = expect(j, '{');
  if (st) return st;
  int have_dtype = 0, have_shape = 0, have_offsets = 0;
  const st_dtype *dt = NULL;
  uint64_t begin = 0, end = 0;
  if (!take(j, '}')) {
    do {
      const char *s;
      size_t len;
      if ((st = parse_string(j, &s, &len)) || (st = expect(j, ':'))) return st;
      if (!strcmp(s, "dtype") && len == 5) {
        if (have_dtype++) return bad(j, "repeated \"dtype\"");
        if ((st = parse_string(j, &s, &len))) return st;
        for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0] && !dt; i++)
          if (!strcmp(s, st_dtypes[i].name) && strlen(s) == len) dt = &st_dtypes[i];
        if (!dt)
          return fmt_fail(j->f, RLX_ERR_FORMAT, "tensor '%.128s': unknown dtype \"%.32s\"", t->name, s);
      } else if (!strcmp(s, "shape") && len == 5) {
        if (have_shape++) return bad(j, "repeated \"shape\"");
        if ((st = parse_shape(j, t))) return st;
      } else if (!strcmp(s, "data_offsets") && len == 12) {
        if (have_offsets++) return bad(j, "repeated \"data_offsets\"");
        if ((st = expect(j, '[')) || (st = parse_uint(j, &begin)) || (st = expect(j, ',')) ||
            (st = parse_uint(j, &end)) || (st = expect(j, ']')))
          return st;
      } else {
        return fmt_fail(j->f, RLX_ERR_FORMAT, "tensor '%.128s': unknown member \"%.32s\"", t->name, s);
      }
    } while (take(j, ','));
    if ((st = expect(j, '}'))) return st;
  }
  if (!have_dtype || !have_shape || !have_offsets)
    return fmt_fail(j->f, RLX_ERR_FORMAT, "tensor '%.128s' lacks \"%s\"", t->name,
                    !have_dtype ? "dtype" : !have_shape ? "shape" : "data_offsets");
  uint64_t numel = 1;
  for (int d = 0; d < t->rank; d++) {
    uint64_t n = (uint64_t)t->dims[d];
    if (n && numel > (uint64_t)INT64_MAX / n) {
      int zero = 0;  /* a later 0 dim makes it empty: not an overflow */
      for (int k = d; k < t->rank; k++) zero |= t->dims[k] == 0;
      if (!zero) return fmt_fail(j->f, RLX_ERR_FORMAT, "tensor '%.128s': the element count overflows", t->name);
      numel = 0;
      break;
    }
    numel *= n;
  }
  if (numel > UINT64_MAX / (uint64_t)dt->bits)
    return fmt_fail(j->f, RLX_ERR_FORMAT, "tensor '%.128s': the byte size overflows", t->name);
  const uint64_t bits = numel * (uint64_t)dt->bits;
  if (bits % 8)
    return fmt_fail(j->f, RLX_ERR_FORMAT, "tensor '%.128s': %llu %s elements are not a whole number of bytes",
                    t->name, (unsigned long long)numel, dt->name);
  if (begin > end)
    return fmt_fail(j->f, RLX_ERR_FORMAT, "tensor '%.128s': data_offsets [%llu, %llu] end before they begin", t->name,
                    (unsigned long long)begin, (unsigned long long)end);
  if (end - begin != bits / 8)
    return fmt_fail(j->f, RLX_ERR_FORMAT, "tensor '%.128s': data_offsets [%llu, %llu] hold %llu bytes, %s of %llu "
                    "elements needs %llu", t->name, (unsigned long long)begin, (unsigned long long)end,
                    (unsigned long long)(end - begin), dt->name, (unsigned long long)numel,
                    (unsigned long long)(bits / 8));
  if (end - begin > j->f->size)
    return fmt_fail(j->f, RLX_ERR_FORMAT, "tensor '%.128s': %llu bytes, more than the file has", t->name,
                    (unsigned long long)(end - begin));
  t->supported = dt->dtype >= 0;
  t->dtype = dt->dtype >= 0 ? (rlx_dtype)dt->dtype : RLX_DTYPE_COUNT;
  t->type_name = dt->name;
  t->type_code = -1;
  t->numel = (int64_t)numel;
  t->nbytes = (size_t)(end - begin);
  t->offset = begin;  /* relative; fmt_finish checks it and makes it absolute */
  return RLX_OK;
}

rlx_status fmt_safetensors_parse(rlx_model_file *f) {
  if (f->size < 8)
    return fmt_fail(f, RLX_ERR_FORMAT, "truncated: %llu bytes, the header length needs 8",
                    (unsigned long long)f->size);
  const uint64_t n = fmt_rd64(f->base);
  if (n > f->size - 8)
    return fmt_fail(f, RLX_ERR_FORMAT, "header length %llu exceeds the %llu bytes after it", (unsigned long long)n,
                    (unsigned long long)(f->size - 8));
  if (n > MAX_HEADER_BYTES)
    return fmt_fail(f, RLX_ERR_FORMAT, "header length %llu exceeds the limit of %llu", (unsigned long long)n,
                    MAX_HEADER_BYTES);
  f->data_offset = 8 + n;
  json j = {.f = f, .s = f->base + 8, .n = n};
  j.scratch = malloc((size_t)n + 1);
  if (!j.scratch) return rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory for a %llu-byte header", f->name,
                                       (unsigned long long)n);
  int have_metadata = 0;
  rlx_status st = expect(&j, '{');
  if (!st && !take(&j, '}')) {
    do {
      const char *s;
      size_t len;
      if ((st = parse_string(&j, &s, &len))) break;
      if (len == 12 && !strcmp(s, "__metadata__")) {
        if (have_metadata++) {
          st = bad(&j, "repeated \"__metadata__\"");
          break;
        }
        if ((st = expect(&j, ':')) || (st = parse_metadata(&j))) break;
        continue;
      }
      rlx_file_tensor *t = new_tensor(&j);
      if (!t) {
        st = RLX_ERR_NOMEM;
        break;
      }
      if ((st = copy_name(&j, s, len, "a tensor name", &t->name)) || (st = expect(&j, ':')) ||
          (st = parse_tensor(&j, t)))
        break;
    } while (take(&j, ','));
    if (!st) st = expect(&j, '}');
  }
  if (!st) {
    skip_ws(&j);
    if (j.pos != j.n) st = bad(&j, "bytes after the header object");
  }
  free(j.scratch);
  return st;
}
