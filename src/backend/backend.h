/* backend.h — the interface every backend implements.
 *
 * A backend lowers a specialized graph (all dims concrete) into a plan and
 * runs it. Leaves (inputs, params, constants) are not part of a plan's
 * arena: the runtime passes their host data at run time.
 */
#ifndef RLX_BACKEND_H
#define RLX_BACKEND_H

#include "../ir/ir.h"

#include <stddef.h>

typedef struct {
  const void *const *leaf_data;   /* [n_nodes]: host data of each leaf, NULL for other nodes */
  /* [n_nodes] or NULL: a number that changes whenever a leaf's data is set
   * (0: unknown). A backend that keeps leaves in device memory copies a
   * leaf again only when its version moved; NULL: on every run. */
  const uint64_t *leaf_version;
} rlx_bindings;

typedef struct rlx_backend rlx_backend;
struct rlx_backend {
  const char *name;
  /* 1 if this backend can run node n of g (op, dtypes, shapes); else 0 with
   * the reason in why (for RLX_TRACE and the dispatch report). */
  int (*claims)(const rlx_backend *b, const rlx_graph *g, rlx_node n, char *why, size_t cap);
  /* Lower g (specialized; it outlives the plan) into *plan. store: the
   * session's store (store_new) the plan keeps its params in, or NULL (the
   * plan keeps its own); it outlives the plan. */
  rlx_status (*compile)(const rlx_backend *b, const rlx_graph *g, const rlx_options *opt, void *store, void **plan);
  rlx_status (*run)(void *plan, const rlx_bindings *bind);
  /* Copy output `index` of non-leaf node n after a run into dst (nbytes exact). */
  rlx_status (*read)(void *plan, rlx_node n, int index, void *dst, size_t nbytes);
  /* The plan's memory figures into st->arena_bytes, naive_bytes,
   * peak_live_bytes, views and in_place, a device's device_launches (and
   * the hybrid plan's fallback_nodes). */
  void (*memory_stats)(const void *plan, rlx_session_stats *st);
  void (*free)(void *plan);
  /* Optional (NULL: the session reads every Assign back with read()). After
   * a run, keep the value of Assign node a as its param's value at
   * `version` in the backend's own memory, so the next run of this plan
   * reads it there and the session's host copy is not refreshed: 1 if
   * kept, 0 if the backend cannot (then nothing changed). A device backend
   * keeps a KV cache or trained weights resident this way instead of
   * copying them out and back in on every run. */
  int (*keep_assigned)(void *plan, rlx_node a, uint64_t version);
  /* Copies the kept value of param p (see keep_assigned) into dst, when
   * the session needs its host copy (another plan that cannot share it,
   * share_kept, is about to run). */
  rlx_status (*fetch_param)(void *plan, rlx_node p, void *dst, size_t nbytes);
  /* Optional (NULL: no store). A store holds the params of one session in
   * the backend's memory for all of its plans, so that a plan for a new
   * shape binding does not upload every weight again (a device keeps a
   * copy per plan otherwise), on device device_index (rlx_options). store_new:
   * NULL on out of memory. */
  void *(*store_new)(int device_index);
  void (*store_free)(void *store);
  /* Optional (NULL: never). Param p_from of plan `from` is kept there
   * (keep_assigned); make it plan `to`'s param p_to with no copy: 1 when
   * `to` reads p_to from the same memory (the store) and now counts the
   * kept value as its own, else 0 (the session fetches it to the host and
   * `to` copies it in). */
  int (*share_kept)(void *from, rlx_node p_from, void *to, rlx_node p_to);
  /* Optional (NULL: the plans' first runs do it). Before any plan of the
   * session's graph g (unspecialized) runs, put into store what those runs
   * would make of its params as bound now (bind): the CPU's packed copies
   * of quantized weights, made once at load instead of inside the first
   * run. */
  rlx_status (*prepare)(void *store, const rlx_graph *g, const rlx_options *opt, const rlx_bindings *bind);
};

extern const rlx_backend rlx_cpu_backend;
#ifdef RLX_HAVE_CUDA
extern const rlx_backend rlx_cuda_backend;
int rlx_cuda_available(void);   /* a CUDA device is present (probed once) */
int rlx_cuda_device_count(void); /* how many (probed once) */
/* NCCL communicators (cuda/nccl_comm.c; libnccl.so.2 opened on first use,
 * RLX_ERR_UNSUPPORTED without it). */
#define CUDA_NCCL_ID_BYTES 128
rlx_status cuda_nccl_unique_id(void *id);
rlx_status cuda_nccl_init_all(int world, int first_device, rlx_comm **comms);
rlx_status cuda_nccl_init_rank(int rank, int world, const void *id, int device, int timeout_ms, rlx_comm **out);
void       cuda_nccl_abort(rlx_comm *c);
void       cuda_nccl_free(rlx_comm *c);
#endif

#endif /* RLX_BACKEND_H */
