/* param_store.c — the params shared by the plans of a session (param_store.h).
 * A session's plans run on its thread, but an idle plan of the compile
 * cache can be freed from another session's thread: a mutex guards the list. */
#include "param_store.h"

#include "../../ir/ir.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct cuda_store {
  pthread_mutex_t mu;
  int device;
  cuda_store_entry *head;
};

cuda_store *cuda_store_new(int device) {
  cuda_store *s = calloc(1, sizeof *s);
  if (s && pthread_mutex_init(&s->mu, NULL) != 0) {
    free(s);
    return NULL;
  }
  if (s) s->device = device;
  return s;
}

void cuda_store_free(cuda_store *s) {
  if (!s) return;
  if (s->head) cudaSetDevice(s->device);
  while (s->head) { /* none left when every plan put its entries back; freed anyway */
    cuda_store_entry *e = s->head;
    s->head = e->next;
    cudaFree(e->dev);
    free(e->name);
    free(e);
  }
  pthread_mutex_destroy(&s->mu);
  free(s);
}

rlx_status cuda_store_get(cuda_store *s, const char *name, size_t bytes, cuda_store_entry **out) {
  *out = NULL;
  rlx_status st = RLX_OK;
  pthread_mutex_lock(&s->mu);
  cudaSetDevice(s->device);
  cuda_store_entry *e = s->head;
  while (e && (e->bytes != bytes || strcmp(e->name, name) != 0)) e = e->next;
  if (!e) {
    e = calloc(1, sizeof *e);
    char *copy = malloc(strlen(name) + 1);
    cudaError_t ce = cudaErrorMemoryAllocation;
    if (!e || !copy || (ce = cudaMalloc(&e->dev, bytes ? bytes : 1)) != cudaSuccess) {
      st = rlx_set_error(RLX_ERR_NOMEM, "CUDA: cannot allocate %zu bytes of device memory for param \"%s\": %s", bytes,
                         name, cudaGetErrorString(ce));
      free(e), free(copy);
      e = NULL;
    } else {
      e->name = strcpy(copy, name);
      e->bytes = bytes;
      e->next = s->head;
      s->head = e;
    }
  }
  if (e) {
    e->users++;
    *out = e;
  }
  pthread_mutex_unlock(&s->mu);
  return st;
}

void cuda_store_put(cuda_store *s, cuda_store_entry *e) {
  if (!s || !e) return;
  pthread_mutex_lock(&s->mu);
  if (--e->users == 0) {
    cudaSetDevice(s->device);
    cuda_store_entry **p = &s->head;
    while (*p && *p != e) p = &(*p)->next;
    if (*p) *p = e->next;
    cudaFree(e->dev);
    free(e->name);
    free(e);
  }
  pthread_mutex_unlock(&s->mu);
}
