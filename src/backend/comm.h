/* comm.h — a communicator (rlx.h's rlx_comm) as the backends see it: the
 * ranks an AllReduce sums over. src/runtime/comm.c makes them; the CPU
 * backend sums through a local group (comm_local.c: ranks that are threads
 * of one process), the CUDA backend through NCCL (cuda/nccl_comm.c). */
#ifndef RLX_BACKEND_COMM_H
#define RLX_BACKEND_COMM_H

#include "../ir/ir.h"

typedef enum { COMM_LOCAL, COMM_NCCL } comm_kind;

typedef struct comm_group comm_group;

struct rlx_comm {
  comm_kind kind;
  int rank, world;
  comm_group *group;  /* COMM_LOCAL: the ranks' shared state */
  void *nccl;         /* COMM_NCCL: the ncclComm_t */
  int device;         /* COMM_NCCL: the CUDA device of the rank */
  int timeout_ms;     /* COMM_NCCL: how long a run waits for the other ranks */
};

/* The dtypes an AllReduce sums: F32, F16, BF16, F64, I32, I64. */
int comm_dtype_ok(rlx_dtype t);

/* COMM_LOCAL: world communicators of one group into comms[]. */
rlx_status comm_local_new(int world, rlx_comm **comms);
void       comm_local_free(rlx_comm *c);
void       comm_local_abort(rlx_comm *c);
/* y = the sum over the ranks of each rank's x (n elements of t), in rank
 * order, accumulated in double (integers in int64, wrapping) and rounded
 * once, so every rank gets the same bits; y may be x. Waits for every
 * rank; RLX_ERR_DEVICE when the group was aborted, RLX_ERR_SHAPE when the
 * ranks disagree on n or t. */
rlx_status comm_local_all_reduce(rlx_comm *c, const void *x, void *y, int64_t n, rlx_dtype t);

#endif /* RLX_BACKEND_COMM_H */
