/* param_store.h — the device copies of one session's params, shared by
 * every plan of that session (the backend's store_new, backend.h).
 *
 * A session makes a plan per shape binding (an LLM: one per 128-key
 * bucket of its KV cache). Each plan used to upload every weight into
 * buffers of its own: a build re-sent the whole model, and the device held
 * a copy of it per plan. Now a plan looks each param up here by name and
 * size and reads the one buffer all plans share; the buffer remembers the
 * version of the data it holds, so a plan copies in only what another plan
 * (or the first run) has not. A KV cache that one plan updates in place is
 * therefore already where the next plan reads it. */
#ifndef RLX_CUDA_PARAM_STORE_H
#define RLX_CUDA_PARAM_STORE_H

#include "rlx.h"

#include <stddef.h>
#include <stdint.h>

typedef struct cuda_store_entry {
  char *name;
  size_t bytes;
  void *dev;               /* device buffer of `bytes` */
  uint64_t version;        /* leaf version of the data in dev (0: none yet) */
  int users;               /* plans reading it */
  struct cuda_store_entry *next;
} cuda_store_entry;

typedef struct cuda_store cuda_store;

cuda_store *cuda_store_new(int device);   /* on CUDA device `device`; NULL: out of memory */
void cuda_store_free(cuda_store *s); /* after every plan put its entries back */
/* The entry of param `name` of `bytes`, made (and allocated on the device)
 * when no plan holds one; the caller becomes one of its users. */
rlx_status cuda_store_get(cuda_store *s, const char *name, size_t bytes, cuda_store_entry **out);
/* The caller stops using e; its device buffer goes with its last user. */
void cuda_store_put(cuda_store *s, cuda_store_entry *e);

#endif /* RLX_CUDA_PARAM_STORE_H */
