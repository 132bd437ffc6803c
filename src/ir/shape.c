/* shape.c — dims (static and symbolic), broadcasting, shape printing. */
#include "ir.h"

#include <stdio.h>
#include <string.h>

int64_t ir_dim_resolve(const rlx_graph *g, int64_t d) {
  if (!ir_dim_is_sym(d) || !g || !g->sym_binding) return d;
  int id = ir_dim_sym_id(d);
  if (id < g->n_sym_binding && g->sym_binding[id] >= 0) return g->sym_binding[id];
  return d;
}

/* ---------------------------------------------------------------- checked sizes */

#define LIMIT RLX_MAX_TENSOR_BYTES

/* Operands and sum in (-2^40, 2^40]: the sum cannot overflow, and a
 * negative result never reaches IR_SYM_BASE (it would read as a symbol). */
int64_t ir_size_add(int64_t a, int64_t b) {
  if (a > LIMIT || a <= -LIMIT || b > LIMIT || b <= -LIMIT) return IR_SIZE_OVER;
  int64_t s = a + b;
  return s > LIMIT || s <= -LIMIT ? IR_SIZE_OVER : s;
}

int64_t ir_size_mul(int64_t a, int64_t b) {
  if (a < 0 || b < 0) return IR_SIZE_OVER;
  if (a == 0 || b == 0) return 0;
  if (a > LIMIT || b > LIMIT || a > LIMIT / b) return IR_SIZE_OVER;
  return a * b;
}

int64_t ir_numel(const ir_shape *s) {
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++)
    if (ir_dim_is_sym(s->d[i])) return -1;
  for (int i = 0; i < s->rank; i++) {
    if (!ir_size_ok(s->d[i])) return IR_SIZE_OVER; /* also with a zero dim elsewhere */
    n = ir_size_mul(n, s->d[i]);
  }
  return n;
}

int64_t ir_type_nbytes(const ir_type *t) {
  int64_t n = ir_numel(&t->shape);
  if (n < 0 || n == IR_SIZE_OVER || !ir_dtype_valid(t->dtype)) return n < 0 ? -1 : IR_SIZE_OVER;
  const ir_dtype_info *d = &ir_dtypes[t->dtype];
  if (n % d->block) return IR_SIZE_OVER;
  return ir_size_mul(n / d->block, d->size);
}

int ir_type_check_size(const ir_type *t, char *why, size_t cap) {
  for (int i = 0; i < t->shape.rank; i++) {
    int64_t d = t->shape.d[i];
    if (!ir_dim_is_sym(d) && !ir_size_ok(d)) {
      if (d == IR_SIZE_OVER) snprintf(why, cap, "dim %d overflows past 2^40", i);
      else snprintf(why, cap, "dim %d is %lld", i, (long long)d);
      return -1;
    }
  }
  /* Symbolic dims: the static ones alone must fit (a binding is checked again). */
  int64_t n = 1;
  for (int i = 0; i < t->shape.rank; i++)
    if (!ir_dim_is_sym(t->shape.d[i])) n = ir_size_mul(n, t->shape.d[i]);
  if (n == IR_SIZE_OVER) {
    snprintf(why, cap, "more than 2^40 elements");
    return -1;
  }
  int64_t bytes = ir_dtype_valid(t->dtype) ? ir_size_mul(n / ir_dtypes[t->dtype].block, ir_dtypes[t->dtype].size) : 0;
  if (bytes == IR_SIZE_OVER) {
    snprintf(why, cap, "%lld elements of %s, more than 2^40 bytes", (long long)n, rlx_dtype_name(t->dtype));
    return -1;
  }
  return 0;
}

int64_t rlx_shape_numel(int rank, const int64_t *dims) {
  if (rank < 0 || rank > RLX_MAX_RANK || (rank && !dims)) return -1;
  ir_shape s = {rank, {0}};
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0) return -1;
    s.d[i] = dims[i];
  }
  int64_t n = ir_numel(&s);
  return n == IR_SIZE_OVER ? -1 : n;
}

/* ---------------------------------------------------------------- dims */

int64_t ir_dim_mul(rlx_graph *g, int64_t a, int64_t b) {
  a = ir_dim_resolve(g, a);
  b = ir_dim_resolve(g, b);
  if (a == 1) return b;
  if (b == 1) return a;
  if (!ir_dim_is_sym(a) && !ir_dim_is_sym(b)) return ir_size_mul(a, b);
  if (a == 0 || b == 0) return 0;
  return ir_dim_anon(g);
}

/* b may be negative (a window's length less its extent). */
int64_t ir_dim_add(rlx_graph *g, int64_t a, int64_t b) {
  a = ir_dim_resolve(g, a);
  b = ir_dim_resolve(g, b);
  if (!ir_dim_is_sym(a) && !ir_dim_is_sym(b)) return ir_size_add(a, b);
  if (a == 0) return b;
  if (b == 0) return a;
  return ir_dim_anon(g);
}

int ir_norm_axis(int64_t axis, int rank) {
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return -1;
  return (int)axis;
}

int ir_broadcast(rlx_graph *g, const ir_shape *a, const ir_shape *b, ir_shape *out) {
  int rank = a->rank > b->rank ? a->rank : b->rank;
  ir_shape r;
  r.rank = rank;
  for (int i = 0; i < rank; i++) {
    int ia = a->rank - rank + i, ib = b->rank - rank + i;
    int64_t da = ia >= 0 ? ir_dim_resolve(g, a->d[ia]) : 1;
    int64_t db = ib >= 0 ? ir_dim_resolve(g, b->d[ib]) : 1;
    int64_t d;
    if (da == db) d = da;
    else if (da == 1) d = db;
    else if (db == 1) d = da;
    else if (ir_dim_is_sym(da) && ir_dim_is_sym(db)) d = ir_dim_anon(g);
    else if (ir_dim_is_sym(da)) d = db;  /* checked again when specialized */
    else if (ir_dim_is_sym(db)) d = da;
    else return 0;
    r.d[i] = d;
  }
  *out = r;
  return 1;
}

int ir_shape_eq(const ir_shape *a, const ir_shape *b) {
  if (a->rank != b->rank) return 0;
  for (int i = 0; i < a->rank; i++)
    if (a->d[i] != b->d[i]) return 0;
  return 1;
}

int ir_type_eq(const ir_type *a, const ir_type *b) {
  return a->dtype == b->dtype && ir_shape_eq(&a->shape, &b->shape);
}

char *ir_shape_str(const rlx_graph *g, const ir_shape *s, char *buf, size_t cap) {
  size_t n = 0;
  if (cap == 0) return buf;
  buf[0] = 0;
#define PUT(...) do { if (n < cap) { int k_ = snprintf(buf + n, cap - n, __VA_ARGS__); \
                      if (k_ > 0) n += (size_t)k_; } } while (0)
  if (s->rank < 0 || s->rank > RLX_MAX_RANK) {
    PUT("[rank %d]", s->rank);
    return buf;
  }
  PUT("[");
  for (int i = 0; i < s->rank; i++) {
    int64_t d = s->d[i];
    if (i) PUT(",");
    if (ir_dim_is_sym(d)) {
      int id = ir_dim_sym_id(d);
      if (g && id < g->n_syms && g->syms[id].name) PUT("%s", g->syms[id].name);
      else PUT("?");
    } else if (d == IR_SIZE_OVER) {
      PUT(">2^40");  /* checked arithmetic saturated: past the limit */
    } else {
      PUT("%lld", (long long)d);
    }
  }
  PUT("]");
#undef PUT
  return buf;
}
