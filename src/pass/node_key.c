/* node_key.c — when two nodes' attributes are the same, and a hash that
 * agrees with it: what CSE hash-conses on and what the compile cache
 * compares graphs by. Only the fields the op's ops.def row names count
 * (the others hold defaults and mean nothing for the op). */
#include "pass.h"

#include <string.h>

#define FNV_PRIME 0x100000001b3ull

uint64_t pass_hash_bytes(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= FNV_PRIME;
  }
  return h;
}

static uint64_t hash_i64(uint64_t h, int64_t v) { return pass_hash_bytes(h, &v, sizeof v); }

uint64_t pass_type_hash(uint64_t h, const ir_type *t) {
  h = pass_hash_bytes(h, &t->dtype, sizeof t->dtype);
  h = pass_hash_bytes(h, &t->shape.rank, sizeof t->shape.rank);
  return pass_hash_bytes(h, t->shape.d, (size_t)t->shape.rank * sizeof t->shape.d[0]);
}

/* Bitwise, so NaN attributes (a Pad value) equal themselves and -0 differs
 * from +0: the text form prints them differently too. */
static int f64_same(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

static int ilist_same(const ir_ilist *a, const ir_ilist *b) {
  if (a->n != b->n) return 0;
  for (int i = 0; i < a->n; i++)
    if (a->v[i] != b->v[i]) return 0;
  return 1;
}

/* Field by field: the struct has padding, and inference normalized the
 * fields a step kind does not use, so equal chains compare equal. */
static int step_same(const rlx_region_step *a, const rlx_region_step *b) {
  return a->kind == b->kind && a->op == b->op && a->a == b->a && a->b == b->b && a->to == b->to &&
         f64_same(a->alpha, b->alpha);
}

static int attr_same(const ir_attr_info *t, const ir_attrs *a, const ir_attrs *b) {
  const char *pa = (const char *)a + t->offset, *pb = (const char *)b + t->offset;
  switch (t->kind) {
  case IR_A_STR: {
    const char *sa = *(char *const *)pa, *sb = *(char *const *)pb;
    return sa == sb || (sa && sb && strcmp(sa, sb) == 0);
  }
  case IR_A_BYTES: {
    const ir_bytes *x = (const ir_bytes *)pa, *y = (const ir_bytes *)pb;
    return x->n == y->n && (x->n == 0 || memcmp(x->p, y->p, x->n) == 0);
  }
  case IR_A_INT: case IR_A_BOOL: case IR_A_ENUM: case IR_A_DTYPE: case IR_A_DTYPE_OR_NONE:
    return *(const int64_t *)pa == *(const int64_t *)pb;
  case IR_A_F64: return f64_same(*(const double *)pa, *(const double *)pb);
  case IR_A_ILIST: case IR_A_DIMS: case IR_A_ENUMLIST:
    return ilist_same((const ir_ilist *)pa, (const ir_ilist *)pb);
  case IR_A_CHAIN: {
    const ir_chain *x = (const ir_chain *)pa, *y = (const ir_chain *)pb;
    if (x->n != y->n) return 0;
    for (int i = 0; i < x->n; i++)
      if (!step_same(&x->s[i], &y->s[i])) return 0;
    return 1;
  }
  }
  return 0;
}

static uint64_t attr_hash(const ir_attr_info *t, const ir_attrs *a, uint64_t h) {
  const char *p = (const char *)a + t->offset;
  switch (t->kind) {
  case IR_A_STR: {
    const char *s = *(char *const *)p;
    return s ? pass_hash_bytes(h, s, strlen(s) + 1) : hash_i64(h, -1);
  }
  case IR_A_BYTES: {
    const ir_bytes *x = (const ir_bytes *)p;
    return pass_hash_bytes(hash_i64(h, (int64_t)x->n), x->p, x->n);
  }
  case IR_A_INT: case IR_A_BOOL: case IR_A_ENUM: case IR_A_DTYPE: case IR_A_DTYPE_OR_NONE:
    return hash_i64(h, *(const int64_t *)p);
  case IR_A_F64: return pass_hash_bytes(h, p, sizeof(double));
  case IR_A_ILIST: case IR_A_DIMS: case IR_A_ENUMLIST: {
    const ir_ilist *l = (const ir_ilist *)p;
    return pass_hash_bytes(hash_i64(h, l->n), l->v, (size_t)l->n * sizeof l->v[0]);
  }
  case IR_A_CHAIN: {
    const ir_chain *c = (const ir_chain *)p;
    h = hash_i64(h, c->n);
    for (int i = 0; i < c->n; i++) {
      const rlx_region_step *s = &c->s[i];
      int64_t f[] = {s->kind, s->op, s->a, s->b, s->to};
      h = pass_hash_bytes(pass_hash_bytes(h, f, sizeof f), &s->alpha, sizeof s->alpha);
    }
    return h;
  }
  }
  return h;
}

int pass_attrs_equal(int op, const ir_attrs *a, const ir_attrs *b) {
  ir_attr_id ids[IR_ATTR_COUNT];
  int n = ir_op_attr_ids(op, ids);
  for (int i = 0; i < n; i++)
    if (!attr_same(&ir_attr_table[ids[i]], a, b)) return 0;
  return 1;
}

uint64_t pass_attrs_hash(int op, const ir_attrs *a, uint64_t h) {
  ir_attr_id ids[IR_ATTR_COUNT];
  int n = ir_op_attr_ids(op, ids);
  for (int i = 0; i < n; i++) h = attr_hash(&ir_attr_table[ids[i]], a, h);
  return h;
}
