/* comm.c — rlx.h's communicators: a local group for ranks that are
 * threads (backend/comm_local.c), NCCL for CUDA ranks (backend/cuda,
 * nccl_comm.c), whose processes meet through the TCP bootstrap. */
#include "../backend/backend.h"
#include "../backend/comm.h"
#include "bootstrap.h"

#include <stdlib.h>

#define COMM_MAX_WORLD 4096

static rlx_status check_world(const char *fn, int world, void *comms) {
  if (!comms) return rlx_set_error(RLX_ERR_INVALID, "%s: comms is NULL", fn);
  if (world < 1 || world > COMM_MAX_WORLD)
    return rlx_set_error(RLX_ERR_INVALID, "%s: world %d is not in [1, %d]", fn, world, COMM_MAX_WORLD);
  return RLX_OK;
}

rlx_status rlx_comm_new_local(int world, rlx_comm **comms) {
  rlx_status st = check_world("rlx_comm_new_local", world, comms);
  return st ? st : comm_local_new(world, comms);
}

rlx_status rlx_comm_new_nccl_local(int world, int first_device, rlx_comm **comms) {
  rlx_status st = check_world("rlx_comm_new_nccl_local", world, comms);
  if (st) return st;
#ifdef RLX_HAVE_CUDA
  if (first_device < 0 || first_device + world > rlx_cuda_device_count())
    return rlx_set_error(RLX_ERR_DEVICE, "rlx_comm_new_nccl_local: devices %d to %d asked for; this machine has %d",
                         first_device, first_device + world - 1, rlx_cuda_device_count());
  return cuda_nccl_init_all(world, first_device, comms);
#else
  (void)first_device;
  return rlx_set_error(RLX_ERR_UNSUPPORTED, "rlx_comm_new_nccl_local: rlx was built without CUDA (RLX_CUDA=OFF)");
#endif
}

rlx_status rlx_comm_new_nccl_rank(int rank, int world, const char *master, int device, int timeout_ms,
                                  rlx_comm **out) {
  if (!out) return rlx_set_error(RLX_ERR_INVALID, "rlx_comm_new_nccl_rank: out is NULL");
  *out = NULL;
  if (world < 1 || world > COMM_MAX_WORLD || rank < 0 || rank >= world)
    return rlx_set_error(RLX_ERR_INVALID, "rlx_comm_new_nccl_rank: rank %d is not in a world of %d (at most %d)",
                         rank, world, COMM_MAX_WORLD);
#ifdef RLX_HAVE_CUDA
  if (device < 0 || device >= rlx_cuda_device_count())
    return rlx_set_error(RLX_ERR_DEVICE, "rlx_comm_new_nccl_rank: device %d asked for; this machine has %d", device,
                         rlx_cuda_device_count());
  unsigned char id[CUDA_NCCL_ID_BYTES];
  rlx_status st = rank == 0 ? cuda_nccl_unique_id(id) : RLX_OK;
  if (st == RLX_OK) st = rt_bootstrap(master, rank, world, id, sizeof id, timeout_ms);
  if (st == RLX_OK) st = cuda_nccl_init_rank(rank, world, id, device, timeout_ms > 0 ? timeout_ms : 60000, out);
  return st;
#else
  (void)master, (void)device, (void)timeout_ms;
  return rlx_set_error(RLX_ERR_UNSUPPORTED, "rlx_comm_new_nccl_rank: rlx was built without CUDA (RLX_CUDA=OFF)");
#endif
}

int rlx_comm_rank(const rlx_comm *c) { return c ? c->rank : 0; }
int rlx_comm_world(const rlx_comm *c) { return c ? c->world : 1; }

void rlx_comm_abort(rlx_comm *c) {
  if (!c) return;
  if (c->kind == COMM_LOCAL) comm_local_abort(c);
#ifdef RLX_HAVE_CUDA
  else cuda_nccl_abort(c);
#endif
}

void rlx_comm_free(rlx_comm *c) {
  if (!c) return;
  if (c->kind == COMM_LOCAL) comm_local_free(c);
#ifdef RLX_HAVE_CUDA
  else cuda_nccl_free(c);
#endif
}
