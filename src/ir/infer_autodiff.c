/* infer_autodiff.c — builder and shape inference of the op that exists for
 * autodiff: GradientReversal. */
#include "ir.h"

rlx_node rlx_gradient_reversal(rlx_graph *g, rlx_node x, double scale) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.scale = scale;
  rlx_node in[] = {x};
  return ir_add_node(g, RLX_OP_GradientReversal, 1, in, &a);
}

/* The identity on a float x; its vector-Jacobian rule sends -scale times
 * the gradient back (Ganin & Lempitsky's gradient reversal layer). scale
 * must be finite (any sign: -1 makes it a plain identity). */
int ir_infer_GradientReversal(rlx_graph *g, ir_node *n) {
  const ir_type *x = ir_in(g, n, 0);
  if (!ir_is_float(x->dtype))
    return ir_fail(g, n, RLX_ERR_DTYPE, "x dtype %s is not a float type", rlx_dtype_name(x->dtype));
  if (!isfinite(n->a.scale)) return ir_fail(g, n, RLX_ERR_INVALID, "scale %g must be finite", n->a.scale);
  n->out[0] = *x;
  return 0;
}
