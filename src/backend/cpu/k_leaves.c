/* k_leaves.c — leaves are bound by the runtime (inputs and params to the
 * session's buffers, constants to their data), never run as kernels. */
#include "cpu.h"

static rlx_status leaf_not_run(const ir_node *n) {
  return rlx_set_error(RLX_ERR_INTERNAL, "%s (node %d): a leaf is bound by the runtime, not run",
                       ir_ops[n->op].name, n->id);
}

rlx_status cpu_Input(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  (void)ctx, (void)in, (void)out;
  return leaf_not_run(n);
}
rlx_status cpu_Param(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  (void)ctx, (void)in, (void)out;
  return leaf_not_run(n);
}
rlx_status cpu_Constant(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  (void)ctx, (void)in, (void)out;
  return leaf_not_run(n);
}
