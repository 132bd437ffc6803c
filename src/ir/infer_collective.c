/* infer_collective.c — builder and shape inference of AllReduce, the sum
 * of a tensor over the ranks of a communicator (rlx_options.comm): the
 * output has the input's type; which ranks take part is the session's
 * business, not the graph's. */
#include "ir.h"

rlx_node rlx_all_reduce(rlx_graph *g, rlx_node x) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  rlx_node in[] = {x};
  return ir_add_node(g, RLX_OP_AllReduce, 1, in, &a);
}

/* The dtypes NCCL and the CPU's local group both sum. */
int ir_infer_AllReduce(rlx_graph *g, ir_node *n) {
  const ir_type *x = ir_in(g, n, 0);
  const rlx_dtype t = x->dtype;
  if (t != RLX_F32 && t != RLX_F16 && t != RLX_BF16 && t != RLX_F64 && t != RLX_I32 && t != RLX_I64)
    return ir_fail(g, n, RLX_ERR_DTYPE, "x has dtype %s; AllReduce sums f32, f16, bf16, f64, i32 or i64",
                   rlx_dtype_name(t));
  n->out[0] = *x;
  return 0;
}
