/* reader.c — the protobuf wire format of onnx.proto, decoded by hand.
 *
 * Hand-written rather than generated or linked (protobuf-c): no dependency,
 * the few messages ONNX uses, and every read checked against the bytes left
 * of its enclosing message, so a hostile file gets a status naming the
 * offset, never a read out of bounds. Repeated fields are counted in a first
 * scan of their message and filled in a second (no reallocation); nesting
 * (subgraphs in attributes) is bounded by OX_MAX_DEPTH. */
#include "onnx.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OX_MAX_DEPTH 32

/* ---------------------------------------------------------------- arena */

struct ox_chunk {
  ox_chunk *next;
  size_t used, cap;
  _Alignas(16) unsigned char data[];
};

void *ox_alloc(ox_arena *a, size_t n) {
  n = (n + 15) & ~(size_t)15;
  if (n == 0) n = 16;
  ox_chunk *c = a->head;
  if (!c || c->cap - c->used < n) {
    size_t cap = n > 65536 ? n : 65536;
    if (cap > SIZE_MAX - sizeof *c) {
      rlx_set_error(RLX_ERR_NOMEM, "ONNX: an allocation of %zu bytes", n);
      return NULL;
    }
    c = malloc(sizeof *c + cap);
    if (!c) {
      rlx_set_error(RLX_ERR_NOMEM, "ONNX: out of memory (%zu bytes)", n);
      return NULL;
    }
    c->next = a->head;
    c->used = 0;
    c->cap = cap;
    a->head = c;
  }
  void *p = c->data + c->used;
  c->used += n;
  memset(p, 0, n);
  return p;
}

void ox_arena_free(ox_arena *a) {
  for (ox_chunk *c = a->head, *next; c; c = next) {
    next = c->next;
    free(c);
  }
  a->head = NULL;
}

/* ---------------------------------------------------------------- wire cursor */

typedef struct {
  ox_arena *a;
  const char *name;
  const uint8_t *base;
  rlx_status st;
  int depth;
} ox_rd;

typedef struct { const uint8_t *p, *end; } pb;

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

static int rd_fail(ox_rd *r, const uint8_t *at, const char *fmt, ...) {
  if (r->st == RLX_OK) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    r->st = rlx_set_error(RLX_ERR_FORMAT, "%s: ONNX: offset %zu: %s", r->name, (size_t)(at - r->base), msg);
  }
  return -1;
}

static int pb_varint(ox_rd *r, pb *c, uint64_t *v) {
  uint64_t x = 0;
  *v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (c->p >= c->end) return rd_fail(r, c->p, "truncated varint");
    uint8_t b = *c->p++;
    x |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = x;
      return 0;
    }
  }
  return rd_fail(r, c->p, "varint longer than 10 bytes");
}

/* Next field of c: 1 and its number/wire type, 0 at the end, -1 on error. */
static int pb_next(ox_rd *r, pb *c, uint32_t *field, int *wt) {
  if (c->p >= c->end) return 0;
  uint64_t key;
  if (pb_varint(r, c, &key)) return -1;
  *wt = (int)(key & 7);
  if (key >> 3 == 0 || key >> 3 > 536870911u) return rd_fail(r, c->p, "bad field number %llu", (unsigned long long)(key >> 3));
  *field = (uint32_t)(key >> 3);
  return 1;
}

static int pb_bytes(ox_rd *r, pb *c, pb *sub) {
  uint64_t n;
  if (pb_varint(r, c, &n)) return -1;
  if (n > (uint64_t)(c->end - c->p)) return rd_fail(r, c->p, "length %llu past the end of its message (%zu bytes left)",
                                                    (unsigned long long)n, (size_t)(c->end - c->p));
  sub->p = c->p;
  sub->end = c->p + n;
  c->p += n;
  return 0;
}

static int pb_skip(ox_rd *r, pb *c, int wt) {
  uint64_t v;
  pb sub;
  switch (wt) {
  case WT_VARINT: return pb_varint(r, c, &v);
  case WT_LEN: return pb_bytes(r, c, &sub);
  case WT_I64:
  case WT_I32: {
    size_t n = wt == WT_I64 ? 8 : 4;
    if ((size_t)(c->end - c->p) < n) return rd_fail(r, c->p, "truncated fixed-size field");
    c->p += n;
    return 0;
  }
  default: return rd_fail(r, c->p, "unsupported wire type %d (groups are not used by ONNX)", wt);
  }
}

static int want_wt(ox_rd *r, pb *c, int wt, int want, const char *what) {
  if (wt != want) return rd_fail(r, c->p, "%s has wire type %d, expected %d", what, wt, want);
  return 0;
}

static const char *pb_string(ox_rd *r, pb *c, int wt, const char *what) {
  pb s;
  if (want_wt(r, c, wt, WT_LEN, what) || pb_bytes(r, c, &s)) return NULL;
  size_t n = (size_t)(s.end - s.p);
  char *out = ox_alloc(r->a, n + 1);
  if (!out) {
    r->st = RLX_ERR_NOMEM;
    return NULL;
  }
  memcpy(out, s.p, n);
  return out;
}

static int pb_int(ox_rd *r, pb *c, int wt, int64_t *v, const char *what) {
  uint64_t u;
  if (want_wt(r, c, wt, WT_VARINT, what) || pb_varint(r, c, &u)) return -1;
  *v = (int64_t)u;
  return 0;
}

/* Occurrences of field in message m (elements, for a packed varint field
 * when packed is set); -1 on a malformed message. */
static int64_t pb_count(ox_rd *r, pb m, uint32_t field, int packed) {
  int64_t n = 0;
  uint32_t f;
  int wt, k;
  while ((k = pb_next(r, &m, &f, &wt)) > 0) {
    if (f == field && packed && wt == WT_LEN) {
      pb s;
      if (pb_bytes(r, &m, &s)) return -1;
      for (const uint8_t *q = s.p; q < s.end; q++) n += !(*q & 0x80);
      continue;
    }
    if (f == field) n++;
    if (pb_skip(r, &m, wt)) return -1;
  }
  return k < 0 ? -1 : n;
}

static void *rd_array(ox_rd *r, int64_t n, size_t elem) {
  if (n < 0) return NULL;
  if ((uint64_t)n > (SIZE_MAX / 2) / elem || n > INT32_MAX) {
    r->st = rlx_set_error(RLX_ERR_FORMAT, "%s: ONNX: %lld repeated entries", r->name, (long long)n);
    return NULL;
  }
  void *p = ox_alloc(r->a, (size_t)n * elem + 1);
  if (!p) r->st = RLX_ERR_NOMEM;
  return p;
}

/* Appends the varint(s) of a packed or unpacked repeated int field. */
static int pb_ints(ox_rd *r, pb *c, int wt, int64_t *out, int64_t cap, int64_t *n) {
  uint64_t u;
  if (wt == WT_VARINT) {
    if (pb_varint(r, c, &u)) return -1;
    if (*n >= cap) return rd_fail(r, c->p, "more ints than counted");
    out[(*n)++] = (int64_t)u;
    return 0;
  }
  pb s;
  if (want_wt(r, c, wt, WT_LEN, "a repeated int") || pb_bytes(r, c, &s)) return -1;
  while (s.p < s.end) {
    if (pb_varint(r, &s, &u)) return -1;
    if (*n >= cap) return rd_fail(r, s.p, "more ints than counted");
    out[(*n)++] = (int64_t)u;
  }
  return 0;
}

/* ---------------------------------------------------------------- messages */

static int rd_graph(ox_rd *r, pb m, ox_graph *g);

static int rd_tensor(ox_rd *r, pb m, ox_tensor *t) {
  pb all = m;
  t->msg = m.p;
  t->msg_len = (size_t)(m.end - m.p);
  t->msg_pos = (uint64_t)(m.p - r->base);
  int64_t ndims = pb_count(r, m, 1, 1);
  if (ndims < 0) return -1;
  if (ndims > OX_MAX_RANK) return rd_fail(r, m.p, "a tensor of rank %lld (at most %d)", (long long)ndims, OX_MAX_RANK);
  uint32_t f;
  int wt, k;
  int64_t nd = 0;
  while ((k = pb_next(r, &m, &f, &wt)) > 0) {
    switch (f) {
    case 1: if (pb_ints(r, &m, wt, t->dims, OX_MAX_RANK, &nd)) return -1; break;
    case 2: { int64_t v; if (pb_int(r, &m, wt, &v, "TensorProto.data_type")) return -1; t->data_type = (int32_t)v; break; }
    case 8: if (!(t->name = pb_string(r, &m, wt, "TensorProto.name"))) return -1; break;
    case 9: {
      pb s;
      if (want_wt(r, &m, wt, WT_LEN, "TensorProto.raw_data") || pb_bytes(r, &m, &s)) return -1;
      t->raw = s.p;
      t->raw_len = (size_t)(s.end - s.p);
      t->has_raw = 1;
      break;
    }
    case 4: case 5: case 7: case 10: case 11:
      t->typed_field = (int)f;
      if (pb_skip(r, &m, wt)) return -1;
      break;
    case 6: return rd_fail(r, m.p, "string tensors are not supported");
    case 13: {  /* external_data: StringStringEntryProto */
      pb e;
      if (want_wt(r, &m, wt, WT_LEN, "TensorProto.external_data") || pb_bytes(r, &m, &e)) return -1;
      const char *key = NULL, *val = NULL;
      uint32_t f2;
      int wt2, k2;
      while ((k2 = pb_next(r, &e, &f2, &wt2)) > 0) {
        if (f2 == 1) { if (!(key = pb_string(r, &e, wt2, "key"))) return -1; }
        else if (f2 == 2) { if (!(val = pb_string(r, &e, wt2, "value"))) return -1; }
        else if (pb_skip(r, &e, wt2)) return -1;
      }
      if (k2 < 0) return -1;
      if (!key || !val) break;
      if (!strcmp(key, "location")) t->location = val;
      else if (!strcmp(key, "offset") || !strcmp(key, "length")) {
        char *end;
        long long v = strtoll(val, &end, 10);
        if (!*val || *end || v < 0) return rd_fail(r, e.p, "external data %s \"%s\" is not a size", key, val);
        if (key[0] == 'o') t->ext_offset = v;
        else t->ext_length = v;
      }
      break;
    }
    case 14: { int64_t v; if (pb_int(r, &m, wt, &v, "TensorProto.data_location")) return -1; t->external = v == 1; break; }
    case 3: return rd_fail(r, m.p, "segmented tensors are not supported");
    default: if (pb_skip(r, &m, wt)) return -1;
    }
  }
  if (k < 0) return -1;
  t->rank = (int)nd;
  t->numel = 1;
  for (int i = 0; i < t->rank; i++) {
    if (t->dims[i] < 0) return rd_fail(r, all.p, "tensor %s: dim %d is negative (%lld)", t->name ? t->name : "", i, (long long)t->dims[i]);
    if (t->dims[i] && t->numel > INT64_MAX / t->dims[i]) return rd_fail(r, all.p, "tensor %s: element count overflows", t->name ? t->name : "");
    t->numel *= t->dims[i];
  }
  if (!t->name) t->name = "";
  return 0;
}

/* TypeProto: a tensor type, or an optional of one (an optional input is
 * given as its tensor). Other types (sequences, maps) leave has_type 0. */
static int rd_type(ox_rd *r, pb tp, ox_value_info *v, int nested) {
  uint32_t f2;
  int wt2, k2;
  while ((k2 = pb_next(r, &tp, &f2, &wt2)) > 0) {
    if (f2 == 9 && !nested) {  /* TypeProto.Optional: its elem_type, a TypeProto */
      pb opt, inner;
      uint32_t f;
      int wt, k;
      if (want_wt(r, &tp, wt2, WT_LEN, "TypeProto.optional_type") || pb_bytes(r, &tp, &opt)) return -1;
      while ((k = pb_next(r, &opt, &f, &wt)) > 0) {
        if (f != 1) { if (pb_skip(r, &opt, wt)) return -1; continue; }
        if (want_wt(r, &opt, wt, WT_LEN, "Optional.elem_type") || pb_bytes(r, &opt, &inner) || rd_type(r, inner, v, 1)) return -1;
      }
      if (k < 0) return -1;
      continue;
    }
    if (f2 != 1) { if (pb_skip(r, &tp, wt2)) return -1; continue; }
    pb tt;  /* TypeProto.Tensor */
    if (want_wt(r, &tp, wt2, WT_LEN, "TypeProto.tensor_type") || pb_bytes(r, &tp, &tt)) return -1;
    v->has_type = 1;
    uint32_t f3;
    int wt3, k3;
    while ((k3 = pb_next(r, &tt, &f3, &wt3)) > 0) {
      if (f3 == 1) {
        int64_t e;
        if (pb_int(r, &tt, wt3, &e, "elem_type")) return -1;
        v->elem_type = (int32_t)e;
      } else if (f3 == 2) {  /* TensorShapeProto */
        pb sh;
        if (want_wt(r, &tt, wt3, WT_LEN, "shape") || pb_bytes(r, &tt, &sh)) return -1;
        v->has_shape = 1;
        v->rank = 0;
        uint32_t f4;
        int wt4, k4;
        while ((k4 = pb_next(r, &sh, &f4, &wt4)) > 0) {
          if (f4 != 1) { if (pb_skip(r, &sh, wt4)) return -1; continue; }
          pb d;
          if (want_wt(r, &sh, wt4, WT_LEN, "dim") || pb_bytes(r, &sh, &d)) return -1;
          if (v->rank >= OX_MAX_RANK) return rd_fail(r, d.p, "a value of rank above %d", OX_MAX_RANK);
          int i = v->rank++;
          v->dims[i] = -1;
          uint32_t f5;
          int wt5, k5;
          while ((k5 = pb_next(r, &d, &f5, &wt5)) > 0) {
            if (f5 == 1) {
              if (pb_int(r, &d, wt5, &v->dims[i], "dim_value")) return -1;
              if (v->dims[i] < 0) v->dims[i] = -1;
            } else if (f5 == 2) {
              if (!(v->dim_params[i] = pb_string(r, &d, wt5, "dim_param"))) return -1;
            } else if (pb_skip(r, &d, wt5)) return -1;
          }
          if (k5 < 0) return -1;
        }
        if (k4 < 0) return -1;
      } else if (pb_skip(r, &tt, wt3)) return -1;
    }
    if (k3 < 0) return -1;
  }
  return k2 < 0 ? -1 : 0;
}

static int rd_value_info(ox_rd *r, pb m, ox_value_info *v) {
  uint32_t f;
  int wt, k;
  while ((k = pb_next(r, &m, &f, &wt)) > 0) {
    if (f == 1) {
      if (!(v->name = pb_string(r, &m, wt, "ValueInfoProto.name"))) return -1;
    } else if (f == 2) {  /* TypeProto */
      pb tp;
      if (want_wt(r, &m, wt, WT_LEN, "ValueInfoProto.type") || pb_bytes(r, &m, &tp) || rd_type(r, tp, v, 0)) return -1;
    } else if (pb_skip(r, &m, wt)) return -1;
  }
  if (k < 0) return -1;
  if (!v->name) v->name = "";
  return 0;
}

static int rd_attr(ox_rd *r, pb m, ox_attr *at) {
  int64_t nf = pb_count(r, m, 7, 0), ni = pb_count(r, m, 8, 1), ns = pb_count(r, m, 9, 0);
  if (nf < 0 || ni < 0 || ns < 0) return -1;
  /* floats may be packed: count their bytes instead */
  pb scan = m;
  uint32_t f;
  int wt, k;
  while ((k = pb_next(r, &scan, &f, &wt)) > 0) {
    if (f == 7 && wt == WT_LEN) {
      pb s;
      if (pb_bytes(r, &scan, &s)) return -1;
      nf += (int64_t)((s.end - s.p) / 4) - 1;
    } else if (pb_skip(r, &scan, wt)) return -1;
  }
  if (k < 0) return -1;
  if (!(at->floats = rd_array(r, nf, sizeof(float))) || !(at->ints = rd_array(r, ni, sizeof(int64_t))) ||
      !(at->strings = rd_array(r, ns, sizeof(char *))))
    return -1;
  while ((k = pb_next(r, &m, &f, &wt)) > 0) {
    switch (f) {
    case 1: if (!(at->name = pb_string(r, &m, wt, "AttributeProto.name"))) return -1; break;
    case 20: { int64_t v; if (pb_int(r, &m, wt, &v, "AttributeProto.type")) return -1; at->type = (int)v; break; }
    case 2: {
      if (want_wt(r, &m, wt, WT_I32, "AttributeProto.f") || (size_t)(m.end - m.p) < 4) return rd_fail(r, m.p, "truncated float");
      float x;
      memcpy(&x, m.p, 4);
      m.p += 4;
      at->f = x;
      break;
    }
    case 3: if (pb_int(r, &m, wt, &at->i, "AttributeProto.i")) return -1; break;
    case 4: {
      pb s;
      if (want_wt(r, &m, wt, WT_LEN, "AttributeProto.s") || pb_bytes(r, &m, &s)) return -1;
      char *c = ox_alloc(r->a, (size_t)(s.end - s.p) + 1);
      if (!c) return r->st = RLX_ERR_NOMEM, -1;
      memcpy(c, s.p, (size_t)(s.end - s.p));
      at->s = c;
      at->s_len = (size_t)(s.end - s.p);
      break;
    }
    case 5: {
      pb s;
      if (want_wt(r, &m, wt, WT_LEN, "AttributeProto.t") || pb_bytes(r, &m, &s)) return -1;
      if (!(at->t = ox_alloc(r->a, sizeof *at->t))) return r->st = RLX_ERR_NOMEM, -1;
      if (rd_tensor(r, s, at->t)) return -1;
      break;
    }
    case 6: {
      pb s;
      if (want_wt(r, &m, wt, WT_LEN, "AttributeProto.g") || pb_bytes(r, &m, &s)) return -1;
      if (!(at->g = ox_alloc(r->a, sizeof *at->g))) return r->st = RLX_ERR_NOMEM, -1;
      if (rd_graph(r, s, at->g)) return -1;
      break;
    }
    case 7:
      if (wt == WT_I32) {
        if ((size_t)(m.end - m.p) < 4 || at->n_floats >= nf) return rd_fail(r, m.p, "truncated float");
        memcpy(&at->floats[at->n_floats++], m.p, 4);
        m.p += 4;
      } else {
        pb s;
        if (want_wt(r, &m, wt, WT_LEN, "AttributeProto.floats") || pb_bytes(r, &m, &s)) return -1;
        size_t n = (size_t)(s.end - s.p) / 4;
        if ((size_t)(s.end - s.p) % 4 || (int64_t)n > nf - at->n_floats) return rd_fail(r, s.p, "packed floats of %zu bytes", (size_t)(s.end - s.p));
        if (n) memcpy(&at->floats[at->n_floats], s.p, n * 4);
        at->n_floats += (int64_t)n;
      }
      break;
    case 8: if (pb_ints(r, &m, wt, at->ints, ni, &at->n_ints)) return -1; break;
    case 9:
      if (at->n_strings >= ns) return rd_fail(r, m.p, "more strings than counted");
      if (!(at->strings[at->n_strings++] = pb_string(r, &m, wt, "AttributeProto.strings"))) return -1;
      break;
    case 21: if (!(at->ref_attr_name = pb_string(r, &m, wt, "AttributeProto.ref_attr_name"))) return -1; break;
    default: if (pb_skip(r, &m, wt)) return -1;
    }
  }
  if (k < 0) return -1;
  if (!at->name) at->name = "";
  return 0;
}

/* The repeated string fields of a node or function (inputs, outputs). */
static int rd_strings(ox_rd *r, pb m, uint32_t field, const char ***out, int *n) {
  int64_t c = pb_count(r, m, field, 0);
  if (c < 0 || !(*out = rd_array(r, c, sizeof(char *)))) return -1;
  uint32_t f;
  int wt, k;
  *n = 0;
  while ((k = pb_next(r, &m, &f, &wt)) > 0) {
    if (f == field) {
      if (*n >= c || !((*out)[(*n)++] = pb_string(r, &m, wt, "a name"))) return -1;
    } else if (pb_skip(r, &m, wt)) return -1;
  }
  return k < 0 ? -1 : 0;
}

static int rd_node(ox_rd *r, pb m, ox_node *n) {
  if (rd_strings(r, m, 1, &n->inputs, &n->n_inputs) || rd_strings(r, m, 2, &n->outputs, &n->n_outputs)) return -1;
  int64_t na = pb_count(r, m, 5, 0);
  if (na < 0 || !(n->attrs = rd_array(r, na, sizeof *n->attrs))) return -1;
  uint32_t f;
  int wt, k;
  while ((k = pb_next(r, &m, &f, &wt)) > 0) {
    if (f == 3) { if (!(n->name = pb_string(r, &m, wt, "NodeProto.name"))) return -1; }
    else if (f == 4) { if (!(n->op_type = pb_string(r, &m, wt, "NodeProto.op_type"))) return -1; }
    else if (f == 7) { if (!(n->domain = pb_string(r, &m, wt, "NodeProto.domain"))) return -1; }
    else if (f == 5) {
      pb s;
      if (want_wt(r, &m, wt, WT_LEN, "NodeProto.attribute") || pb_bytes(r, &m, &s)) return -1;
      if (n->n_attrs >= na) return rd_fail(r, s.p, "more attributes than counted");
      if (rd_attr(r, s, &n->attrs[n->n_attrs++])) return -1;
    } else if (pb_skip(r, &m, wt)) return -1;
  }
  if (k < 0) return -1;
  if (!n->name) n->name = "";
  if (!n->domain) n->domain = "";
  if (!n->op_type) return rd_fail(r, m.p, "a node without op_type");
  return 0;
}

/* Reads every occurrence of a message field into an array of elem-sized
 * records with fn. */
typedef int (*rd_fn)(ox_rd *, pb, void *);
static int rd_repeated(ox_rd *r, pb m, uint32_t field, size_t elem, rd_fn fn, void **out, int *n) {
  int64_t c = pb_count(r, m, field, 0);
  if (c < 0 || !(*out = rd_array(r, c, elem))) return -1;
  uint32_t f;
  int wt, k;
  *n = 0;
  while ((k = pb_next(r, &m, &f, &wt)) > 0) {
    if (f != field) { if (pb_skip(r, &m, wt)) return -1; continue; }
    pb s;
    if (want_wt(r, &m, wt, WT_LEN, "a message field") || pb_bytes(r, &m, &s)) return -1;
    if (*n >= c) return rd_fail(r, s.p, "more entries than counted");
    if (fn(r, s, (char *)*out + (size_t)(*n)++ * elem)) return -1;
  }
  return k < 0 ? -1 : 0;
}

static int rd_node_v(ox_rd *r, pb m, void *p) { return rd_node(r, m, p); }
static int rd_tensor_v(ox_rd *r, pb m, void *p) { return rd_tensor(r, m, p); }
static int rd_vi_v(ox_rd *r, pb m, void *p) { return rd_value_info(r, m, p); }

static int rd_opset(ox_rd *r, pb m, void *p) {
  ox_opset *o = p;
  uint32_t f;
  int wt, k;
  while ((k = pb_next(r, &m, &f, &wt)) > 0) {
    if (f == 1) { if (!(o->domain = pb_string(r, &m, wt, "OperatorSetIdProto.domain"))) return -1; }
    else if (f == 2) { if (pb_int(r, &m, wt, &o->version, "OperatorSetIdProto.version")) return -1; }
    else if (pb_skip(r, &m, wt)) return -1;
  }
  if (!o->domain) o->domain = "";
  return k < 0 ? -1 : 0;
}

static int rd_graph(ox_rd *r, pb m, ox_graph *g) {
  if (++r->depth > OX_MAX_DEPTH) return rd_fail(r, m.p, "subgraphs nested deeper than %d", OX_MAX_DEPTH);
  if (rd_repeated(r, m, 1, sizeof(ox_node), rd_node_v, (void **)&g->nodes, &g->n_nodes) ||
      rd_repeated(r, m, 5, sizeof(ox_tensor), rd_tensor_v, (void **)&g->inits, &g->n_inits) ||
      rd_repeated(r, m, 11, sizeof(ox_value_info), rd_vi_v, (void **)&g->inputs, &g->n_inputs) ||
      rd_repeated(r, m, 12, sizeof(ox_value_info), rd_vi_v, (void **)&g->outputs, &g->n_outputs) ||
      rd_repeated(r, m, 13, sizeof(ox_value_info), rd_vi_v, (void **)&g->vinfo, &g->n_vinfo))
    return -1;
  uint32_t f;
  int wt, k;
  while ((k = pb_next(r, &m, &f, &wt)) > 0) {
    if (f == 2) { if (!(g->name = pb_string(r, &m, wt, "GraphProto.name"))) return -1; }
    else if (f == 15) return rd_fail(r, m.p, "sparse initializers are not supported");
    else if (pb_skip(r, &m, wt)) return -1;
  }
  if (k < 0) return -1;
  if (!g->name) g->name = "";
  r->depth--;
  return 0;
}

static int rd_function(ox_rd *r, pb m, void *p) {
  ox_function *fn = p;
  if (rd_strings(r, m, 4, &fn->inputs, &fn->n_inputs) || rd_strings(r, m, 5, &fn->outputs, &fn->n_outputs) ||
      rd_strings(r, m, 6, &fn->attr_names, &fn->n_attr_names) ||
      rd_repeated(r, m, 7, sizeof(ox_node), rd_node_v, (void **)&fn->nodes, &fn->n_nodes) ||
      rd_repeated(r, m, 9, sizeof(ox_opset), rd_opset, (void **)&fn->opsets, &fn->n_opsets))
    return -1;
  uint32_t f;
  int wt, k;
  while ((k = pb_next(r, &m, &f, &wt)) > 0) {
    if (f == 1) { if (!(fn->name = pb_string(r, &m, wt, "FunctionProto.name"))) return -1; }
    else if (f == 10) { if (!(fn->domain = pb_string(r, &m, wt, "FunctionProto.domain"))) return -1; }
    else if (pb_skip(r, &m, wt)) return -1;
  }
  if (!fn->name) fn->name = "";
  if (!fn->domain) fn->domain = "";
  return k < 0 ? -1 : 0;
}

rlx_status ox_parse_model(ox_arena *a, const char *name, const uint8_t *data, size_t size, ox_model *out) {
  ox_rd r = {.a = a, .name = name, .base = data, .st = RLX_OK};
  memset(out, 0, sizeof *out);
  pb m = {data, data + size};
  int bad = rd_repeated(&r, m, 8, sizeof(ox_opset), rd_opset, (void **)&out->opsets, &out->n_opsets) ||
            rd_repeated(&r, m, 25, sizeof(ox_function), rd_function, (void **)&out->functions, &out->n_functions);
  uint32_t f;
  int wt, k = 0;
  while (!bad && (k = pb_next(&r, &m, &f, &wt)) > 0) {
    switch (f) {
    case 1: bad = pb_int(&r, &m, wt, &out->ir_version, "ModelProto.ir_version"); break;
    case 2: bad = !(out->producer_name = pb_string(&r, &m, wt, "ModelProto.producer_name")); break;
    case 3: bad = !(out->producer_version = pb_string(&r, &m, wt, "ModelProto.producer_version")); break;
    case 4: bad = !(out->domain = pb_string(&r, &m, wt, "ModelProto.domain")); break;
    case 5: bad = pb_int(&r, &m, wt, &out->model_version, "ModelProto.model_version"); break;
    case 7: {
      pb s;
      if (out->graph) { bad = rd_fail(&r, m.p, "two graphs"); break; }
      bad = want_wt(&r, &m, wt, WT_LEN, "ModelProto.graph") || pb_bytes(&r, &m, &s) ||
            !(out->graph = ox_alloc(a, sizeof *out->graph)) || rd_graph(&r, s, out->graph);
      break;
    }
    default: bad = pb_skip(&r, &m, wt);
    }
  }
  if (k < 0) bad = 1;
  if (bad) {
    if (r.st == RLX_OK) r.st = rlx_set_error(RLX_ERR_NOMEM, "%s: ONNX: out of memory", name);
    return r.st;
  }
  if (!out->graph) return rlx_set_error(RLX_ERR_FORMAT, "%s: ONNX: the model has no graph", name);
  if (!out->producer_name) out->producer_name = "";
  if (!out->producer_version) out->producer_version = "";
  if (!out->domain) out->domain = "";
  return RLX_OK;
}

int64_t ox_opset_of(const ox_opset *opsets, int n, const char *domain) {
  int dflt = !*domain || !strcmp(domain, "ai.onnx");
  for (int i = 0; i < n; i++) {
    int d = !*opsets[i].domain || !strcmp(opsets[i].domain, "ai.onnx");
    if (dflt ? d : !strcmp(opsets[i].domain, domain)) return opsets[i].version;
  }
  return 0;
}
