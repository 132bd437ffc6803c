/* text_parse.c — the text form of a graph (text_print.c prints it) read
 * back into a graph: rlx_graph_from_text.
 *
 * The parser accepts more than the printer emits: free whitespace, `#`
 * comments, arbitrary (non-negative, distinct) node labels, omitted
 * attributes (their attrs.def default) and omitted non-leaf types (checked
 * against inference when given). Its grammar is flat — no construct
 * contains itself — so it needs no recursion; every list, name, string and
 * number has a bound instead, and every syntax error is RLX_ERR_FORMAT with
 * "line L, col C: ..." in rlx_last_error(). The tokens are text_lex.c's.
 */
#include "hash.h"
#include "ir.h"
#include "text_lex.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Parser bounds beyond a token's (text_lex.h): a text beyond them is an
 * error, never a crash. */
enum {
  TEXT_MAX_INPUTS = 1 << 16,  /* inputs of one node; outputs of the graph */
  TEXT_MAX_CHAIN = 1 << 12,   /* steps of one elementwise chain */
};

/* ================================================================ parser state */

/* A defined node label; label -1 marks an empty slot. */
typedef struct {
  int64_t label;
  rlx_node node;
  int line;
} label_slot;

typedef struct {
  text_lexer lx;           /* lx.t: the current token */
  rlx_graph *g;
  label_slot *labels;      /* open addressing, capacity a power of two */
  size_t n_labels, cap_labels;
} parser;

/* ================================================================ parser helpers */

#define TRY(expr) do { rlx_status st_ = (expr); if (st_ != RLX_OK) return st_; } while (0)

static rlx_status advance(parser *P) { return text_lex_next(&P->lx); }

static int at_punct(const parser *P, char c) { return P->lx.t.kind == TK_PUNCT && P->lx.t.s[0] == c; }

static int at_word(const parser *P, const char *w) {
  return P->lx.t.kind == TK_IDENT && P->lx.t.len == strlen(w) && memcmp(P->lx.t.s, w, P->lx.t.len) == 0;
}

static rlx_status expect_punct(parser *P, char c, const char *where) {
  if (!at_punct(P, c)) return text_syntax(&P->lx.t, "expected '%c' %s, got %s", c, where, TOK_DESC(&P->lx.t));
  return advance(P);
}


/* Label table (labels are arbitrary non-negative int64, so hashed, keyed:
 * the file chooses them). */
static label_slot *label_slot_for(const parser *P, int64_t label) {
  size_t mask = P->cap_labels - 1;
  for (size_t i = (size_t)ir_hash_u64((uint64_t)label) & mask;; i = (i + 1) & mask)
    if (P->labels[i].label == label || P->labels[i].label < 0) return &P->labels[i];
}

static const label_slot *label_find(const parser *P, int64_t label) {
  if (!P->cap_labels) return NULL;
  const label_slot *s = label_slot_for(P, label);
  return s->label == label ? s : NULL;
}

static rlx_status label_add(parser *P, const tok *at, rlx_node node) {
  if (2 * (P->n_labels + 1) > P->cap_labels) {
    size_t cap = P->cap_labels ? 2 * P->cap_labels : 64;
    label_slot *old = P->labels, *fresh = malloc(cap * sizeof *fresh);
    if (!fresh) return text_nomem(at);
    for (size_t i = 0; i < cap; i++) fresh[i].label = -1;
    size_t old_cap = P->cap_labels;
    P->labels = fresh;
    P->cap_labels = cap;
    for (size_t i = 0; i < old_cap; i++)
      if (old[i].label >= 0) *label_slot_for(P, old[i].label) = old[i];
    free(old);
  }
  label_slot *s = label_slot_for(P, at->label);
  s->label = at->label;
  s->node = node;
  s->line = at->line;
  P->n_labels++;
  return RLX_OK;
}

/* The node of the label at the current token. */
static rlx_status parse_label_ref(parser *P, rlx_node *node) {
  if (P->lx.t.kind != TK_LABEL) return text_syntax(&P->lx.t, "expected a node label (%%N), got %s", TOK_DESC(&P->lx.t));
  const label_slot *s = label_find(P, P->lx.t.label);
  if (!s)
    return text_syntax(&P->lx.t, "%%%lld: undefined or forward reference (graphs must be acyclic and in topological order)",
                  (long long)P->lx.t.label);
  *node = s->node;
  return advance(P);
}

/* A label reference appended to the list *v (*n used of *cap, grown by
 * doubling), at most TEXT_MAX_INPUTS of them; what names the list in the
 * message ("inputs", "outputs"). */
static rlx_status push_label_ref(parser *P, rlx_node **v, int *n, int *cap, const char *what) {
  if (*n == TEXT_MAX_INPUTS) return text_syntax(&P->lx.t, "more than %d %s", TEXT_MAX_INPUTS, what);
  if (*n == *cap) {
    const int grown_cap = *cap ? 2 * *cap : 8;
    rlx_node *grown = realloc(*v, (size_t)grown_cap * sizeof *grown);
    if (!grown) return text_nomem(&P->lx.t);
    *v = grown, *cap = grown_cap;
  }
  const rlx_status st = parse_label_ref(P, &(*v)[*n]);
  if (!st) (*n)++;
  return st;
}

/* The status and message of the builder call that just failed, prefixed with the position. */
static rlx_status builder_error(parser *P, const tok *at) {
  rlx_status st = rlx_graph_status(P->g);
  char msg[600];
  snprintf(msg, sizeof msg, "%s", rlx_last_error());
  return text_fail_at(st ? st : RLX_ERR_INTERNAL, at->line, at->col, "%s", msg);
}

/* ================================================================ values */

static rlx_status parse_int(parser *P, int64_t *v) {
  const tok *t = &P->lx.t;
  if (t->kind != TK_NUM || memchr(t->s, '.', t->len) || memchr(t->s, 'e', t->len) || memchr(t->s, 'E', t->len))
    return text_syntax(t, "expected an integer, got %s", TOK_DESC(t));
  char buf[TEXT_MAX_NUM + 1];
  memcpy(buf, t->s, t->len);
  buf[t->len] = 0;
  errno = 0;
  long long x = strtoll(buf, NULL, 10);
  if (errno == ERANGE) return text_syntax(t, "integer %s does not fit in 64 bits", buf);
  *v = x;
  return advance(P);
}

static rlx_status parse_f64(parser *P, double *v) {
  const tok *t = &P->lx.t;
  if (at_word(P, "inf")) *v = INFINITY;
  else if (at_word(P, "nan")) *v = NAN;
  else if (at_punct(P, '-')) {
    TRY(advance(P));
    if (!at_word(P, "inf")) return text_syntax(&P->lx.t, "expected a number, got %s", TOK_DESC(&P->lx.t));
    *v = -INFINITY;
  } else if (t->kind == TK_NUM) {
    char buf[TEXT_MAX_NUM + 1];
    memcpy(buf, t->s, t->len);
    buf[t->len] = 0;
    errno = 0;
    double x = strtod(buf, NULL);
    if (errno == ERANGE && isinf(x)) return text_syntax(t, "number %s is out of the range of f64", buf);
    *v = x;  /* ERANGE with a finite x is a subnormal: exact enough, and what %.17g prints */
  } else {
    return text_syntax(t, "expected a number, got %s", TOK_DESC(t));
  }
  return advance(P);
}

/* "a, b, c" of a NULL-terminated name table, for messages. */
static const char *names_list(const char *const *names, char *buf, size_t cap) {
  size_t n = 0;
  buf[0] = 0;
  for (int i = 0; names[i] && n < cap; i++) {
    int k = snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", names[i]);
    if (k > 0) n += (size_t)k;
  }
  return buf;
}

static rlx_status parse_enum(parser *P, const char *const *names, const char *what, int64_t *v) {
  if (P->lx.t.kind != TK_IDENT) return text_syntax(&P->lx.t, "expected a name for %s, got %s", what, TOK_DESC(&P->lx.t));
  int e = ir_enum_from_name(names, P->lx.t.s, P->lx.t.len);
  if (e < 0)
    return text_syntax(&P->lx.t, "bad value '%.*s' for %s (one of: %s)", (int)P->lx.t.len, P->lx.t.s, what,
                  names_list(names, (char[400]){0}, 400));
  *v = e;
  return advance(P);
}

static rlx_status parse_dtype(parser *P, int allow_none, int64_t *v) {
  if (allow_none && at_word(P, "none")) {
    *v = -1;
    return advance(P);
  }
  int t = P->lx.t.kind == TK_IDENT ? ir_dtype_from_name(P->lx.t.s, P->lx.t.len) : -1;
  if (t < 0) return text_syntax(&P->lx.t, "expected a dtype%s, got %s", allow_none ? " or none" : "", TOK_DESC(&P->lx.t));
  *v = t;
  return advance(P);
}

/* A symbolic dim by name (the same name gives the same symbol). */
static rlx_status sym_dim(parser *P, const tok *t, int64_t *d) {
  char name[TEXT_MAX_IDENT + 1];
  memcpy(name, t->s, t->len);
  name[t->len] = 0;
  *d = rlx_dim_sym(P->g, name);
  return *d == -1 ? builder_error(P, t) : RLX_OK;
}

static rlx_status anon_dim(parser *P, const tok *t, int64_t *d) {
  *d = ir_dim_anon(P->g);
  return P->g->err ? builder_error(P, t) : RLX_OK;
}

/* [v, v, ...] into an ir_ilist (at most RLX_MAX_RANK entries). */
static rlx_status parse_list(parser *P, const ir_attr_info *info, ir_ilist *l) {
  TRY(expect_punct(P, '[', "to open a list"));
  l->n = 0;
  while (!at_punct(P, ']')) {
    if (l->n) TRY(expect_punct(P, ',', "or ']' in a list"));
    if (l->n == RLX_MAX_RANK) return text_syntax(&P->lx.t, "list %s has more than %d entries", info->key, RLX_MAX_RANK);
    int64_t *v = &l->v[l->n];
    if (info->kind == IR_A_ENUMLIST) {
      TRY(parse_enum(P, info->enum_names, info->key, v));
    } else if (info->kind == IR_A_DIMS && P->lx.t.kind == TK_IDENT) {
      TRY(sym_dim(P, &P->lx.t, v));
      TRY(advance(P));
    } else if (info->kind == IR_A_DIMS && at_punct(P, '?')) {
      TRY(anon_dim(P, &P->lx.t, v));
      TRY(advance(P));
    } else {
      tok at = P->lx.t;
      TRY(parse_int(P, v));
      if (info->kind == IR_A_DIMS && ir_dim_is_sym(*v)) return text_syntax(&at, "dim %lld out of range", (long long)*v);
    }
    l->n++;
  }
  return advance(P);
}

/* Step operand "i<k>" (region input k) or "s<k>" (step k, stored as -k-1). */
static rlx_status parse_operand(parser *P, int *k) {
  const tok *t = &P->lx.t;
  int ok = t->kind == TK_IDENT && t->len >= 2 && t->len <= 10 && (t->s[0] == 'i' || t->s[0] == 's');
  int v = 0;
  for (size_t i = 1; ok && i < t->len; i++) {
    ok = text_is_digit(t->s[i]);
    v = v * 10 + (t->s[i] - '0');  /* at most 9 digits: fits */
  }
  if (!ok) return text_syntax(t, "expected a step operand i<k> (region input k) or s<k> (step k), got %s", TOK_DESC(t));
  *k = t->s[0] == 'i' ? v : -v - 1;
  return advance(P);
}

/* kind.name(a[,b][; alpha]) — see put_step. */
static rlx_status parse_step(parser *P, rlx_region_step *s) {
  static const char *const kinds[] = {"act", "bin", "cast", "cmp", NULL};
  memset(s, 0, sizeof *s);
  int64_t v = 0;
  TRY(parse_enum(P, kinds, "step kind", &v));
  s->kind = (rlx_step_kind)v;
  TRY(expect_punct(P, '.', "after the step kind"));
  switch (s->kind) {
  case RLX_STEP_ACT: TRY(parse_enum(P, ir_act_names, "activation", &v)); break;
  case RLX_STEP_BIN: TRY(parse_enum(P, ir_binop_names, "binary op", &v)); break;
  case RLX_STEP_CMP: TRY(parse_enum(P, ir_cmpop_names, "comparison", &v)); break;
  default: {
    int64_t to = 0;
    TRY(parse_dtype(P, 0, &to));
    s->to = (rlx_dtype)to;
    v = 0;
  }
  }
  s->op = (int)v;
  TRY(expect_punct(P, '(', "to open the step operands"));
  TRY(parse_operand(P, &s->a));
  if (s->kind == RLX_STEP_BIN || s->kind == RLX_STEP_CMP) {
    TRY(expect_punct(P, ',', "between the two step operands"));
    TRY(parse_operand(P, &s->b));
  }
  if (s->kind == RLX_STEP_ACT && s->op == RLX_ACT_LEAKY_RELU) {
    s->alpha = ir_attr_table[IR_ATTR_alpha].def;  /* as for a leaky_relu Activation */
    if (at_punct(P, ';')) {
      TRY(advance(P));
      TRY(parse_f64(P, &s->alpha));
    }
  }
  return expect_punct(P, ')', "to close the step");
}

static rlx_status parse_chain(parser *P, ir_chain *c) {
  TRY(expect_punct(P, '[', "to open the chain"));
  int cap = 0;
  rlx_status st = RLX_OK;
  while (!st && !at_punct(P, ']')) {
    if (c->n && (st = expect_punct(P, ',', "or ']' in the chain"))) break;
    if (c->n == TEXT_MAX_CHAIN) {
      st = text_syntax(&P->lx.t, "chain has more than %d steps", TEXT_MAX_CHAIN);
    } else if (c->n == cap) {
      cap = cap ? 2 * cap : 8;
      rlx_region_step *s = realloc(c->s, (size_t)cap * sizeof *s);
      if (!s) st = text_nomem(&P->lx.t);
      else c->s = s;
    }
    if (!st && !(st = parse_step(P, &c->s[c->n]))) c->n++;
  }
  /* on failure the caller frees c->s with the rest of the attributes */
  return st ? st : advance(P);
}

static rlx_status parse_attr_value(parser *P, const ir_attr_info *info, ir_attrs *a) {
  void *field = (char *)a + info->offset;
  tok *t = &P->lx.t;
  switch (info->kind) {
  case IR_A_STR: {
    if (t->kind != TK_STR) return text_syntax(t, "expected a string for %s, got %s", info->key, TOK_DESC(t));
    char *s = text_decode_str(t);
    if (!s) return text_nomem(t);
    free(*(char **)field);
    *(char **)field = s;
    return advance(P);
  }
  case IR_A_BYTES: {
    if (t->kind != TK_HEX) return text_syntax(t, "expected h\"hex bytes\" for %s, got %s", info->key, TOK_DESC(t));
    ir_bytes *b = field;
    free(b->p);
    b->n = t->len / 2;
    b->p = b->n ? malloc(b->n) : NULL;
    if (b->n && !b->p) return text_nomem(t);
    for (size_t i = 0; i < b->n; i++) b->p[i] = (uint8_t)(text_hex_value(t->s[2 * i]) * 16 + text_hex_value(t->s[2 * i + 1]));
    return advance(P);
  }
  case IR_A_INT: return parse_int(P, field);
  case IR_A_BOOL:
    if (!at_word(P, "true") && !at_word(P, "false"))
      return text_syntax(t, "expected true or false for %s, got %s", info->key, TOK_DESC(t));
    *(int64_t *)field = at_word(P, "true");
    return advance(P);
  case IR_A_F64: return parse_f64(P, field);
  case IR_A_ENUM: return parse_enum(P, info->enum_names, info->key, field);
  case IR_A_DTYPE: return parse_dtype(P, 0, field);
  case IR_A_DTYPE_OR_NONE: return parse_dtype(P, 1, field);
  case IR_A_ILIST: case IR_A_DIMS: case IR_A_ENUMLIST: return parse_list(P, info, field);
  case IR_A_CHAIN: return parse_chain(P, field);
  }
  return text_syntax(t, "attribute %s has an unknown kind", info->key);
}

/* {key=value, ...} with the keys of op's ops.def row, each at most once. */
static rlx_status parse_attrs(parser *P, int op, ir_attrs *a) {
  ir_attr_id ids[IR_ATTR_COUNT];
  int n_ids = ir_op_attr_ids(op, ids);
  int seen[IR_ATTR_COUNT] = {0};
  TRY(advance(P));  /* '{' */
  for (int count = 0; !at_punct(P, '}'); count++) {
    if (count) TRY(expect_punct(P, ',', "or '}' after an attribute"));
    tok key = P->lx.t;
    if (key.kind != TK_IDENT) return text_syntax(&key, "expected an attribute name, got %s", TOK_DESC(&key));
    int k = 0;
    while (k < n_ids && !(strlen(ir_attr_table[ids[k]].key) == key.len &&
                          memcmp(ir_attr_table[ids[k]].key, key.s, key.len) == 0))
      k++;
    if (k == n_ids) {
      char keys[400];
      size_t n = 0;
      keys[0] = 0;
      for (int i = 0; i < n_ids && n < sizeof keys; i++) {
        int w = snprintf(keys + n, sizeof keys - n, "%s%s", i ? ", " : "", ir_attr_table[ids[i]].key);
        if (w > 0) n += (size_t)w;
      }
      return text_syntax(&key, "unknown attribute '%.*s' for %s (it takes: %s)", (int)key.len, key.s,
                    ir_ops[op].name, n_ids ? keys : "none");
    }
    if (seen[k]) return text_syntax(&key, "attribute '%.*s' given twice", (int)key.len, key.s);
    seen[k] = 1;
    TRY(advance(P));
    TRY(expect_punct(P, '=', "after the attribute name"));
    TRY(parse_attr_value(P, &ir_attr_table[ids[k]], a));
  }
  return advance(P);
}

/* ================================================================ types */

/* A dim of a written type: static, a named symbol, or `?` (any symbolic dim). */
typedef struct {
  enum { DIM_STATIC, DIM_NAMED, DIM_ANY } kind;
  int64_t v;
  tok name;
} dim_decl;

typedef struct {
  int dtype, rank;
  dim_decl d[RLX_MAX_RANK];
} type_decl;

/* The ": T" or ": (T0, T1)" of a node. */
typedef struct {
  int n;               /* 0: no type written */
  type_decl t[IR_MAX_OUTPUTS];
  tok at;              /* first token of the type */
  const char *end;     /* just past its last byte */
} node_type_decl;

static rlx_status parse_type(parser *P, type_decl *ty, const char **end) {
  tok at = P->lx.t;
  int64_t dt = 0;
  TRY(parse_dtype(P, 0, &dt));
  ty->dtype = (int)dt;
  ty->rank = 0;
  TRY(expect_punct(P, '[', "after the dtype"));
  /* The builders' limit (RLX_MAX_TENSOR_BYTES), through the same checked
   * arithmetic: a type this parser accepts is one they accept. */
  int64_t numel = 1;
  while (!at_punct(P, ']')) {
    if (ty->rank) TRY(expect_punct(P, ',', "or ']' in a type"));
    if (ty->rank == RLX_MAX_RANK) return text_syntax(&P->lx.t, "type has more than %d dims", RLX_MAX_RANK);
    dim_decl *d = &ty->d[ty->rank];
    if (P->lx.t.kind == TK_IDENT) {
      d->kind = DIM_NAMED;
      d->name = P->lx.t;
      TRY(advance(P));
    } else if (at_punct(P, '?')) {
      d->kind = DIM_ANY;
      TRY(advance(P));
    } else if (P->lx.t.kind != TK_NUM) {
      return text_syntax(&P->lx.t, "expected a dim (an integer, a symbol or ?), got %s", TOK_DESC(&P->lx.t));
    } else {
      tok dt_tok = P->lx.t;
      d->kind = DIM_STATIC;
      TRY(parse_int(P, &d->v));
      if (d->v < 0) return text_syntax(&dt_tok, "negative dim %lld", (long long)d->v);
      if (!ir_size_ok(d->v))
        return text_syntax(&dt_tok, "dim %lld is too large: more than the largest tensor (RLX_MAX_TENSOR_BYTES, 2^40)",
                      (long long)d->v);
      numel = ir_size_mul(numel, d->v);
    }
    ty->rank++;
  }
  int64_t bytes = ir_size_mul(numel / ir_dtypes[dt].block, ir_dtypes[dt].size);
  if (numel == IR_SIZE_OVER || bytes == IR_SIZE_OVER)
    return text_syntax(&at, "type %.*s is too large: more than the largest tensor (RLX_MAX_TENSOR_BYTES, 2^40 elements "
                  "or bytes)", (int)(P->lx.t.s + 1 - at.s), at.s);
  *end = P->lx.t.s + 1;
  return advance(P);
}

static rlx_status parse_node_type(parser *P, node_type_decl *decl) {
  decl->at = P->lx.t;
  if (!at_punct(P, '(')) {
    decl->n = 1;
    return parse_type(P, &decl->t[0], &decl->end);
  }
  TRY(advance(P));
  while (decl->n == 0 || !at_punct(P, ')')) {
    if (decl->n) TRY(expect_punct(P, ',', "or ')' between output types"));
    if (decl->n == IR_MAX_OUTPUTS) return text_syntax(&P->lx.t, "more than %d output types", IR_MAX_OUTPUTS);
    TRY(parse_type(P, &decl->t[decl->n++], &decl->end));
  }
  decl->end = P->lx.t.s + 1;
  return advance(P);
}

static int dim_matches(parser *P, const dim_decl *d, int64_t dim) {
  if (d->kind == DIM_STATIC) return dim == d->v;
  if (d->kind == DIM_ANY) return ir_dim_is_sym(dim);
  int id = ir_sym_lookup(P->g, d->name.s, d->name.len, 0);
  return id >= 0 && dim == ir_sym_dim(id);
}

/* A written type of a non-leaf must be the inferred one. */
static rlx_status check_node_type(parser *P, const tok *at, rlx_node id, const node_type_decl *decl) {
  const ir_node *n = &P->g->nodes[id];
  rlx_status st = RLX_OK;
  if (decl->n != n->n_out) st = RLX_ERR_SHAPE;
  for (int o = 0; o < n->n_out && !st; o++) {
    const type_decl *t = &decl->t[o];
    const ir_type *got = &n->out[o];
    if (t->dtype != (int)got->dtype) st = RLX_ERR_DTYPE;
    else if (t->rank != got->shape.rank) st = RLX_ERR_SHAPE;
    for (int i = 0; i < t->rank && !st; i++)
      if (!dim_matches(P, &t->d[i], got->shape.d[i])) st = RLX_ERR_SHAPE;
  }
  if (!st) return RLX_OK;
  char *inferred = ir_node_type_text(P->g, n);
  size_t wrote = (size_t)(decl->end - decl->at.s);
  st = text_fail_at(st, at->line, at->col, "%s (node %d): declared type %.*s but inferred %s", ir_ops[n->op].name,
               (int)id, (int)(wrote > 300 ? 300 : wrote), decl->at.s, inferred ? inferred : "?");
  free(inferred);
  return st;
}

/* ================================================================ nodes and the graph */

/* A leaf through its public builder: Input/Param/Constant need their type. */
static rlx_status build_leaf(parser *P, int op, const tok *at, const ir_attrs *a, int n_in,
                             const node_type_decl *decl, rlx_node *id) {
  const char *name = ir_ops[op].name;
  if (n_in) return text_fail_at(RLX_ERR_INVALID, at->line, at->col, "%s takes 0 inputs, got %d", name, n_in);
  if (decl->n != 1)
    return text_syntax(at, "%s needs one type, e.g. '%%0 = %s{...} : f32[2,3]'", name, name);
  const type_decl *t = &decl->t[0];
  int64_t dims[RLX_MAX_RANK], numel = 1;
  for (int i = 0; i < t->rank; i++) {
    const dim_decl *d = &t->d[i];
    if (d->kind == DIM_STATIC) dims[i] = d->v;
    else if (d->kind == DIM_NAMED) TRY(sym_dim(P, &d->name, &dims[i]));
    else TRY(anon_dim(P, at, &dims[i]));
    numel = d->kind == DIM_STATIC && numel >= 0 ? ir_size_mul(numel, d->v) : -1;
  }
  if (op == RLX_OP_Constant) {
    size_t need = numel < 0 ? 0 : rlx_dtype_nbytes((rlx_dtype)t->dtype, numel);
    if (numel < 0 || (need == 0 && numel > 0))
      return text_fail_at(RLX_ERR_SHAPE, at->line, at->col, "a Constant needs a static shape of whole %s blocks",
                     rlx_dtype_name((rlx_dtype)t->dtype));
    if (a->data.n != need)
      return text_syntax(at, "Constant data has %zu bytes but its type %.*s needs %zu", a->data.n,
                    (int)(decl->end - decl->at.s), decl->at.s, need);
    static const uint8_t no_data;  /* rlx_constant wants a pointer even for 0 bytes */
    *id = rlx_constant(P->g, (rlx_dtype)t->dtype, t->rank, dims, a->data.n ? a->data.p : &no_data);
  } else {
    if (!a->name) return text_syntax(at, "%s needs a name, e.g. '%s{name=\"x\"}'", name, name);
    *id = (op == RLX_OP_Input ? rlx_input : rlx_param)(P->g, a->name, (rlx_dtype)t->dtype, t->rank, dims);
  }
  return *id < 0 ? builder_error(P, at) : RLX_OK;
}

/* %N = Op{attrs}(inputs) : type */
static rlx_status parse_node(parser *P) {
  tok label = P->lx.t;
  const label_slot *prev = label_find(P, label.label);
  if (prev) return text_syntax(&label, "%%%lld is defined twice (first on line %d)", (long long)label.label, prev->line);
  TRY(advance(P));
  TRY(expect_punct(P, '=', "after the node label"));
  tok op_tok = P->lx.t;
  if (op_tok.kind != TK_IDENT) return text_syntax(&op_tok, "expected an op name, got %s", TOK_DESC(&op_tok));
  int op = ir_op_from_name(op_tok.s, op_tok.len);
  if (op < 0) return text_syntax(&op_tok, "unknown op '%.*s'", (int)op_tok.len, op_tok.s);
  TRY(advance(P));

  ir_attrs a;
  ir_attrs_init_defaults(&a);
  rlx_node *in = NULL, id = -1;
  int n_in = 0, cap_in = 0;
  node_type_decl decl;
  memset(&decl, 0, sizeof decl);
  rlx_status st = RLX_OK;
  if (at_punct(P, '{')) st = parse_attrs(P, op, &a);
  if (!st && at_punct(P, '(')) {
    st = advance(P);
    while (!st && !at_punct(P, ')')) {
      if (n_in && (st = expect_punct(P, ',', "or ')' between inputs"))) break;
      st = push_label_ref(P, &in, &n_in, &cap_in, "inputs");
    }
    if (!st) st = advance(P);
  }
  if (!st && at_punct(P, ':')) {
    st = advance(P);
    if (!st) st = parse_node_type(P, &decl);
  }
  if (st || ir_ops[op].category == RLX_CAT_LEAF) {
    if (!st) st = build_leaf(P, op, &op_tok, &a, n_in, &decl, &id);  /* the builder copies a */
    ir_attrs_free(&a);
  } else {
    id = ir_add_node(P->g, op, n_in, in, &a);  /* takes the attributes, also on failure */
    st = id < 0 ? builder_error(P, &op_tok) : decl.n ? check_node_type(P, &op_tok, id, &decl) : RLX_OK;
  }
  free(in);
  return st ? st : label_add(P, &label, id);
}

/* outputs %a, %b, ... (possibly none) */
static rlx_status parse_outputs(parser *P) {
  tok at = P->lx.t;
  rlx_node *outs = NULL;
  int n = 0, cap = 0;
  rlx_status st = advance(P);
  while (!st && (n ? at_punct(P, ',') : P->lx.t.kind == TK_LABEL)) {
    if (n && (st = advance(P))) break;
    st = push_label_ref(P, &outs, &n, &cap, "outputs");
  }
  if (!st && rlx_graph_set_outputs(P->g, n, outs) != RLX_OK) st = builder_error(P, &at);
  free(outs);
  return st;
}

static rlx_status parse_graph(parser *P) {
  TRY(advance(P));
  if (!at_word(P, "graph")) return text_syntax(&P->lx.t, "expected 'graph \"name\" {', got %s", TOK_DESC(&P->lx.t));
  TRY(advance(P));
  if (P->lx.t.kind != TK_STR) return text_syntax(&P->lx.t, "expected the graph name as a string, got %s", TOK_DESC(&P->lx.t));
  char *name = text_decode_str(&P->lx.t);
  if (!name) return text_nomem(&P->lx.t);
  P->g = rlx_graph_new(name);
  free(name);
  if (!P->g) return text_nomem(&P->lx.t);
  TRY(advance(P));
  TRY(expect_punct(P, '{', "after the graph name"));
  while (P->lx.t.kind == TK_LABEL) TRY(parse_node(P));
  if (at_word(P, "outputs")) TRY(parse_outputs(P));
  if (!at_punct(P, '}'))
    return text_syntax(&P->lx.t, "expected a node '%%N = Op...', 'outputs' or '}', got %s", TOK_DESC(&P->lx.t));
  TRY(advance(P));
  if (P->lx.t.kind != TK_EOF) return text_syntax(&P->lx.t, "unexpected %s after the graph", TOK_DESC(&P->lx.t));
  return rlx_graph_status(P->g);
}

rlx_status rlx_graph_from_text(const char *text, rlx_graph **out) {
  if (out) *out = NULL;
  if (!text || !out)
    return rlx_set_error(RLX_ERR_INVALID, "rlx_graph_from_text: %s is NULL", text ? "out" : "text");
  parser P;
  memset(&P, 0, sizeof P);
  text_lex_init(&P.lx, text);
  rlx_status st = parse_graph(&P);
  free(P.labels);
  if (st) {
    rlx_graph_free(P.g);
    return st;
  }
  *out = P.g;
  return RLX_OK;
}
