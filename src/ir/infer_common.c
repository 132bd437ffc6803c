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
