/* library_loader.h — a library of the CUDA stack (cuBLASLt, cuDNN, NCCL)
 * opened on its first use instead of linked: the soname from the loader's
 * search path, then from the toolkit rlx was built with, and a table of
 * its functions resolved. cublaslt_loader.c, cudnn_loader.c and
 * nccl_comm.c each keep the table and call this once (pthread_once). */
#ifndef RLX_CUDA_LIBRARY_LOADER_H
#define RLX_CUDA_LIBRARY_LOADER_H

#include <stddef.h>

typedef struct {
  const char *name; /* as the library exports it */
  void **slot;      /* where its address goes: a function pointer's storage */
} cuda_library_symbol;

/* Opens soname and fills every slot of symbols[0..n); 1 when all resolved.
 * Else 0, with "cannot load SONAME[ (what)]: <dlerror>" or "SONAME lacks
 * NAME" in error[0..cap). The library stays open for the process's life,
 * as a linked one would. */
int cuda_library_load(const char *soname, const char *what, const cuda_library_symbol *symbols, int n, char *error,
                      size_t cap);

#endif /* RLX_CUDA_LIBRARY_LOADER_H */
