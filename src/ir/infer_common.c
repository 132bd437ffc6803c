/* infer_common.c — checks that the shape inference of several op groups shares. */
#include "ir.h"

int ir_require_float_inputs(rlx_graph *g, ir_node *n, int count) {
  rlx_dtype t = ir_in(g, n, 0)->dtype;
  if (!ir_is_float(t))
    return ir_fail(g, n, RLX_ERR_DTYPE, "input 0 dtype %s is not a float type", rlx_dtype_name(t));
  for (int i = 1; i < count && i < n->n_in; i++) {
    rlx_dtype ti = ir_in(g, n, i)->dtype;
    if (ti != t)
      return ir_fail(g, n, RLX_ERR_DTYPE, "input %d dtype %s differs from input 0 dtype %s", i,
                     rlx_dtype_name(ti), rlx_dtype_name(t));
  }
  return 0;
}

int ir_dims_compatible(int64_t a, int64_t b) { return a == b || ir_dim_is_sym(a) || ir_dim_is_sym(b); }

int ir_shapes_compatible(const ir_shape *a, const ir_shape *b) {
  if (a->rank != b->rank) return 0;
  for (int i = 0; i < a->rank; i++)
    if (!ir_dims_compatible(a->d[i], b->d[i])) return 0;
  return 1;
}
