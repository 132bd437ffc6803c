/* bootstrap.h — how the processes of a world find each other: rank 0
 * listens at the master address, every other rank connects to it and says
 * its rank, and once all world - 1 have joined rank 0 sends each the same
 * blob (NCCL's unique id). Plain TCP sockets; no GPU involved, so the CPU
 * tests it (test_bootstrap). */
#ifndef RLX_RUNTIME_BOOTSTRAP_H
#define RLX_RUNTIME_BOOTSTRAP_H

#include "rlx.h"

#include <stddef.h>

/* master: "host:port" (NULL or "": MASTER_ADDR and MASTER_PORT of the
 * environment). Rank 0 sends blob[0..n) to the others; another rank
 * receives it into blob. Every rank gives up after timeout_ms (<= 0: 60000)
 * with RLX_ERR_DEVICE, naming the ranks that had not joined: rank 0 when
 * one never connects, the others when rank 0 never answers or closes
 * (as it does when it gives up). RLX_ERR_INVALID for a bad address, rank
 * or world. */
rlx_status rt_bootstrap(const char *master, int rank, int world, void *blob, size_t n, int timeout_ms);

/* rank, world and master from RANK, WORLD_SIZE, MASTER_ADDR:MASTER_PORT
 * for those not given (rank < 0, world <= 0, master NULL); a value absent
 * everywhere is left as is. */
void rt_bootstrap_env(int *rank, int *world, const char **master, char *buf, size_t cap);

#endif
