/* lower_collective.c — AllReduce on the device: ncclAllReduce on the
 * plan's stream (recorded by the capture like any launch), or, with no
 * communicator or a world of one, a copy. A local communicator's ranks
 * (threads summing host buffers) are the CPU's. */
#include "cuda_plan.h"

rlx_status cuda_lower_all_reduce(cuda_plan *pl, const ir_node *n) {
  const ir_type *out = &n->out[0];
  const size_t bytes = rlx_dtype_nbytes(out->dtype, numel_of(out));
  uint8_t *dst = out_ptr(pl, n), *src = in_ptr(pl, n, 0);
  rlx_comm *c = pl->comm;
  if (!c || c->world == 1) {
    if (dst == src || !bytes) return RLX_OK;
    cuda_step *s = cuda_new_step(pl, ST_MEMCPY, n);
    if (!s) return cuda_nomem(n);
    s->dst = dst, s->src = src, s->bytes = bytes;
    return RLX_OK;
  }
  if (c->kind != COMM_NCCL)
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "AllReduce (node %d): a CUDA session sums over an NCCL communicator "
                         "(rlx_comm_new_nccl_local or _rank), not a local one", n->id);
  cuda_step *s = cuda_new_step(pl, ST_ALL_REDUCE, n);
  if (!s) return cuda_nomem(n);
  s->dst = dst, s->src = src, s->n0 = numel_of(out), s->dtype = out->dtype;
  pl->collectives = 1;
  return RLX_OK;
}
