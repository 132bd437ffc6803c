/* text_print.c — the text form of a graph printed (rlx_graph_to_text),
 * and the hash of that text (rlx_graph_hash); text_parse.c reads it back.
 *
 *   graph "name" {
 *     %0 = Input{name="x"} : f32[2,S]
 *     %1 = Constant{data=h"0000803f"} : f32[1]
 *     %2 = Binary{op=add}(%0, %1) : f32[2,S]
 *     %3 = TopK{k=1, axis=1}(%2) : (f32[2,1], i64[2,1])
 *     outputs %2, %3
 *   }
 *
 * The printed form is canonical: one line per node in id order, every
 * attribute of the op's ops.def row in that order, and the full type, so a
 * graph prints to one text and equal graphs print equal texts (which is
 * what the hash relies on). Floats print as the shortest of %.15g..%.17g
 * that reads back to the same double, so they round-trip exactly.
 */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

/* Where printed text goes: a growing heap buffer, or (for the hash) straight
 * into FNV-1a, so hashing allocates nothing and cannot fail. */
typedef struct {
  int hashing;
  uint64_t hash;
  char *buf;
  size_t len, cap;
  int nomem;
} text_out;

static void put_bytes(text_out *o, const void *p, size_t n) {
  const unsigned char *b = p;
  if (o->hashing) {
    for (size_t i = 0; i < n; i++) {
      o->hash ^= b[i];
      o->hash *= FNV_PRIME;
    }
    return;
  }
  if (o->nomem) return;
  if (n >= o->cap - o->len) {  /* keep one byte for the closing NUL */
    size_t cap = o->cap ? o->cap : 256;
    while (n >= cap - o->len) {
      if (cap > SIZE_MAX / 2) {
        o->nomem = 1;
        return;
      }
      cap *= 2;
    }
    char *nb = realloc(o->buf, cap);
    if (!nb) {
      o->nomem = 1;
      return;
    }
    o->buf = nb;
    o->cap = cap;
  }
  memcpy(o->buf + o->len, b, n);
  o->len += n;
}

static void put_str(text_out *o, const char *s) { put_bytes(o, s, strlen(s)); }

static void put_int(text_out *o, int64_t v) {
  char b[24];
  snprintf(b, sizeof b, "%lld", (long long)v);
  put_str(o, b);
}

static void put_f64(text_out *o, double v) {
  if (isnan(v)) {
    put_str(o, "nan");
    return;
  }
  if (isinf(v)) {
    put_str(o, v > 0 ? "inf" : "-inf");
    return;
  }
  char b[40];
  for (int prec = 15; prec <= 17; prec++) {  /* %.17g always reads back exactly */
    snprintf(b, sizeof b, "%.*g", prec, v);
    if (strtod(b, NULL) == v) break;
  }
  put_str(o, b);
}

/* A string in double quotes: \" \\ \n \t, \xHH for other control bytes. */
static void put_quoted(text_out *o, const char *s) {
  static const char hex[] = "0123456789abcdef";
  put_str(o, "\"");
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    char esc[4] = {'\\', 0, 0, 0};
    size_t n = 2;
    if (*p == '"' || *p == '\\') esc[1] = (char)*p;
    else if (*p == '\n') esc[1] = 'n';
    else if (*p == '\t') esc[1] = 't';
    else if (*p < 0x20 || *p == 0x7f) {
      esc[1] = 'x';
      esc[2] = hex[*p >> 4];
      esc[3] = hex[*p & 15];
      n = 4;
    } else {
      put_bytes(o, p, 1);
      continue;
    }
    put_bytes(o, esc, n);
  }
  put_str(o, "\"");
}

/* Name v of a NULL-terminated enum table, or "?" when out of range. */
static const char *enum_name(const char *const *names, int64_t v) {
  for (int64_t i = 0; names[i]; i++)
    if (i == v) return names[i];
  return "?";
}

static void put_dim(text_out *o, const rlx_graph *g, int64_t d) {
  if (!ir_dim_is_sym(d)) {
    put_int(o, d);
    return;
  }
  int64_t id = IR_SYM_BASE - d;  /* >= 0; no overflow for any d <= IR_SYM_BASE */
  put_str(o, id < g->n_syms && g->syms[id].name ? g->syms[id].name : "?");
}

static void put_type(text_out *o, const rlx_graph *g, const ir_type *t) {
  put_str(o, rlx_dtype_name(t->dtype));
  put_str(o, "[");
  for (int i = 0; i < t->shape.rank; i++) {
    if (i) put_str(o, ",");
    put_dim(o, g, t->shape.d[i]);
  }
  put_str(o, "]");
}

/* The type of a node: `T`, or `(T0, T1)` for a multi-output node. */
static void put_node_type(text_out *o, const rlx_graph *g, const ir_node *n) {
  if (n->n_out == 1) {
    put_type(o, g, &n->out[0]);
    return;
  }
  put_str(o, "(");
  for (int i = 0; i < n->n_out; i++) {
    if (i) put_str(o, ", ");
    put_type(o, g, &n->out[i]);
  }
  put_str(o, ")");
}

/* Step operand: k >= 0 is region input k ("i<k>"), k < 0 is step -k-1 ("s<-k-1>"). */
static void put_operand(text_out *o, int k) {
  put_str(o, k >= 0 ? "i" : "s");
  put_int(o, k >= 0 ? (int64_t)k : -(int64_t)k - 1);
}

static void put_step(text_out *o, const rlx_region_step *s) {
  static const char *const kinds[] = {"act", "bin", "cast", "cmp", NULL};
  put_str(o, enum_name(kinds, s->kind));
  put_str(o, ".");
  switch (s->kind) {
  case RLX_STEP_ACT: put_str(o, enum_name(ir_act_names, s->op)); break;
  case RLX_STEP_BIN: put_str(o, enum_name(ir_binop_names, s->op)); break;
  case RLX_STEP_CMP: put_str(o, enum_name(ir_cmpop_names, s->op)); break;
  default: put_str(o, rlx_dtype_name(s->to)); break;
  }
  put_str(o, "(");
  put_operand(o, s->a);
  if (s->kind == RLX_STEP_BIN || s->kind == RLX_STEP_CMP) {
    put_str(o, ",");
    put_operand(o, s->b);
  }
  if (s->kind == RLX_STEP_ACT && s->op == RLX_ACT_LEAKY_RELU) {
    put_str(o, "; ");
    put_f64(o, s->alpha);
  }
  put_str(o, ")");
}

static void put_attr_value(text_out *o, const rlx_graph *g, const ir_attr_info *info, const ir_attrs *a) {
  const void *field = (const char *)a + info->offset;
  switch (info->kind) {
  case IR_A_STR: {
    const char *s = *(char *const *)field;
    put_quoted(o, s ? s : "");
    break;
  }
  case IR_A_BYTES: {
    static const char hex[] = "0123456789abcdef";
    const ir_bytes *b = field;
    put_str(o, "h\"");
    for (size_t i = 0; i < b->n; i++) {
      char h[2] = {hex[b->p[i] >> 4], hex[b->p[i] & 15]};
      put_bytes(o, h, 2);
    }
    put_str(o, "\"");
    break;
  }
  case IR_A_INT: put_int(o, *(const int64_t *)field); break;
  case IR_A_BOOL: put_str(o, *(const int64_t *)field ? "true" : "false"); break;
  case IR_A_F64: put_f64(o, *(const double *)field); break;
  case IR_A_ENUM: put_str(o, enum_name(info->enum_names, *(const int64_t *)field)); break;
  case IR_A_DTYPE: case IR_A_DTYPE_OR_NONE: {
    int64_t t = *(const int64_t *)field;
    put_str(o, info->kind == IR_A_DTYPE_OR_NONE && t == -1 ? "none" : rlx_dtype_name((rlx_dtype)t));
    break;
  }
  case IR_A_ILIST: case IR_A_DIMS: case IR_A_ENUMLIST: {
    const ir_ilist *l = field;
    put_str(o, "[");
    for (int i = 0; i < l->n; i++) {
      if (i) put_str(o, ", ");
      if (info->kind == IR_A_ENUMLIST) put_str(o, enum_name(info->enum_names, l->v[i]));
      else if (info->kind == IR_A_DIMS) put_dim(o, g, l->v[i]);
      else put_int(o, l->v[i]);
    }
    put_str(o, "]");
    break;
  }
  case IR_A_CHAIN: {
    const ir_chain *c = field;
    put_str(o, "[");
    for (int i = 0; i < c->n; i++) {
      if (i) put_str(o, ", ");
      put_step(o, &c->s[i]);
    }
    put_str(o, "]");
    break;
  }
  }
}

static void put_node(text_out *o, const rlx_graph *g, const ir_node *n) {
  put_str(o, "  %");
  put_int(o, n->id);
  put_str(o, " = ");
  put_str(o, ir_ops[n->op].name);
  ir_attr_id ids[IR_ATTR_COUNT];
  int n_attrs = ir_op_attr_ids(n->op, ids);
  if (n_attrs) {
    put_str(o, "{");
    for (int i = 0; i < n_attrs; i++) {
      if (i) put_str(o, ", ");
      put_str(o, ir_attr_table[ids[i]].key);
      put_str(o, "=");
      put_attr_value(o, g, &ir_attr_table[ids[i]], &n->a);
    }
    put_str(o, "}");
  }
  if (n->n_in) {
    put_str(o, "(");
    for (int i = 0; i < n->n_in; i++) {
      put_str(o, i ? ", %" : "%");
      put_int(o, n->in[i]);
    }
    put_str(o, ")");
  }
  put_str(o, " : ");
  put_node_type(o, g, n);
  put_str(o, "\n");
}

static void put_graph(text_out *o, const rlx_graph *g, const char *name) {
  put_str(o, "graph ");
  put_quoted(o, name);
  put_str(o, " {\n");
  for (int i = 0; i < g->n_nodes; i++) put_node(o, g, &g->nodes[i]);
  if (g->n_outputs) {
    put_str(o, "  outputs");
    for (int i = 0; i < g->n_outputs; i++) {
      put_str(o, i ? ", %" : " %");
      put_int(o, g->outputs[i]);
    }
    put_str(o, "\n");
  }
  put_str(o, "}\n");
}

/* The printed text as a string; NULL (the buffer freed) when out of memory. */
static char *text_string(text_out *o) {
  if (o->nomem) {
    free(o->buf);
    return NULL;
  }
  o->buf[o->len] = 0;
  return o->buf;
}

char *rlx_graph_to_text(const rlx_graph *g) {
  if (!g) {
    rlx_set_error(RLX_ERR_INVALID, "rlx_graph_to_text: graph is NULL");
    return NULL;
  }
  text_out o = {0};
  put_graph(&o, g, g->name ? g->name : "");
  char *s = text_string(&o);
  if (!s) rlx_set_error(RLX_ERR_NOMEM, "rlx_graph_to_text: out of memory");
  return s;
}

char *ir_node_type_text(const rlx_graph *g, const ir_node *n) {
  text_out o = {0};
  put_node_type(&o, g, n);
  return text_string(&o);
}

/* FNV-1a 64 of the canonical text with an empty graph name (`graph "" {`),
 * so renaming a graph keeps its hash. It depends only on the bytes of that
 * text: the same on every run and every machine. */
uint64_t rlx_graph_hash(const rlx_graph *g) {
  if (!g) return 0;
  text_out o = {.hashing = 1, .hash = FNV_OFFSET};
  put_graph(&o, g, "");
  return o.hash;
}
