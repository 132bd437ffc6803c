/* k_collective.c — AllReduce on the CPU: the sum over the ranks of the
 * plan's communicator (a local group, comm_local.c); with none, or a world
 * of one, the input itself. */
#include "../comm.h"
#include "cpu.h"

#include <string.h>

rlx_status cpu_AllReduce(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  rlx_comm *c = cpu_ctx_comm(ctx);
  if (!c || c->world == 1) {
    if (out->data != in[0].data) memmove(out->data, in[0].data, in[0].nbytes);
    return RLX_OK;
  }
  if (c->kind != COMM_LOCAL)
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "AllReduce (node %d): the CPU sums over a local communicator "
                         "(rlx_comm_new_local), not over NCCL: run the session on its CUDA device", n->id);
  return comm_local_all_reduce(c, in[0].data, out->data, in[0].numel, in[0].dtype);
}
