/* partition.h — hybrid execution: a graph split into maximal segments that
 * one backend claims, the device backend's segments on the device and the
 * rest on the CPU, with the values that cross a cut staged in host memory.
 * The hybrid plan is itself an rlx_backend, so a session runs it like any
 * other backend. */
#ifndef RLX_PARTITION_H
#define RLX_PARTITION_H

#include "../backend/backend.h"

#include <stdint.h>

/* Partitions between rlx_device_backend() and the CPU (compile), runs the
 * segments in order (run), reads any node's output from its segment (read). */
extern const rlx_backend rlx_hybrid_backend;

/* The hybrid compile with `device` standing for the device backend (tests
 * partition with a CPU backend that declines some ops); the plan runs,
 * reads and frees through rlx_hybrid_backend. store: the device backend's
 * (backend.h store_new) or NULL. */
rlx_status rlx_partition_compile(const rlx_backend *device, const rlx_graph *g, const rlx_options *opt, void *store,
                                 void **plan);

/* A new leaf version, unique in the process (rlx_bindings.leaf_version):
 * sessions take one each time a leaf's data is set. Never 0. */
uint64_t rlx_leaf_version_next(void);

#endif /* RLX_PARTITION_H */
