/* shape.c — dims (static and symbolic), broadcasting, shape printing. */
#include "ir.h"

#include <string.h>

int64_t ir_dim_resolve(const rlx_graph *g, int64_t d) {
  if (!ir_dim_is_sym(d) || !g || !g->sym_binding) return d;
  int id = ir_dim_sym_id(d);
  if (id < g->n_sym_binding && g->sym_binding[id] >= 0) return g->sym_binding[id];
  return d;
}

int64_t ir_dim_mul(rlx_graph *g, int64_t a, int64_t b) {
  a = ir_dim_resolve(g, a);
  b = ir_dim_resolve(g, b);
  if (a == 1) return b;
  if (b == 1) return a;
  if (!ir_dim_is_sym(a) && !ir_dim_is_sym(b)) return a * b;
  if (a == 0 || b == 0) return 0;
  return ir_dim_anon(g);
}

int64_t ir_dim_add(rlx_graph *g, int64_t a, int64_t b) {
  a = ir_dim_resolve(g, a);
  b = ir_dim_resolve(g, b);
  if (a == 0) return b;
  if (b == 0) return a;
  if (!ir_dim_is_sym(a) && !ir_dim_is_sym(b)) return a + b;
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

int64_t ir_numel(const ir_shape *s) {
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++) {
    if (ir_dim_is_sym(s->d[i])) return -1;
    n *= s->d[i];
  }
  return n;
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
    } else {
      PUT("%lld", (long long)d);
    }
  }
  PUT("]");
#undef PUT
  return buf;
}
