/* nccl_comm.c — NCCL communicators (backend.h's cuda_nccl_*) and the
 * AllReduce launch, with libnccl opened on first use as cublaslt_loader.c
 * opens cuBLASLt: a CUDA build needs neither NCCL's library nor its header
 * (the few types and functions called are declared here, with NCCL's ABI
 * values), and a machine without libnccl.so.2 gets RLX_ERR_UNSUPPORTED
 * from the first communicator it asks for. */
#include "cuda_plan.h"
#include "library_loader.h"

#include <cuda_runtime.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* nccl.h's types, as far as they are used (stable across NCCL 2.x) */
typedef struct nccl_comm_opaque *nc_comm;
typedef struct { char internal[CUDA_NCCL_ID_BYTES]; } nc_unique_id;
typedef int nc_result; /* ncclSuccess 0, ncclInProgress 7 */
enum { NC_SUCCESS = 0, NC_IN_PROGRESS = 7 };
enum { NC_INT32 = 2, NC_INT64 = 4, NC_FLOAT16 = 6, NC_FLOAT32 = 7, NC_FLOAT64 = 8, NC_BFLOAT16 = 9 };
enum { NC_SUM = 0 };

static struct {
  nc_result (*GetUniqueId)(nc_unique_id *);
  nc_result (*CommInitRank)(nc_comm *, int, nc_unique_id, int);
  nc_result (*CommInitAll)(nc_comm *, int, const int *);
  nc_result (*CommDestroy)(nc_comm);
  nc_result (*CommAbort)(nc_comm);
  nc_result (*CommGetAsyncError)(nc_comm, nc_result *);
  nc_result (*AllReduce)(const void *, void *, size_t, int, int, nc_comm, cudaStream_t);
  nc_result (*GroupStart)(void);
  nc_result (*GroupEnd)(void);
  const char *(*GetErrorString)(nc_result);
} nc;

static pthread_once_t nc_once = PTHREAD_ONCE_INIT;
static int nc_loaded;
static char nc_error[256];
static const char nc_soname[] = "libnccl.so.2";

static void nc_load(void) {
#define NC_SYMBOL(f) {"nccl" #f, (void **)&nc.f},
  static const cuda_library_symbol symbols[] = {
      NC_SYMBOL(GetUniqueId) NC_SYMBOL(CommInitRank) NC_SYMBOL(CommInitAll) NC_SYMBOL(CommDestroy)
      NC_SYMBOL(CommAbort) NC_SYMBOL(CommGetAsyncError) NC_SYMBOL(AllReduce) NC_SYMBOL(GroupStart)
      NC_SYMBOL(GroupEnd) NC_SYMBOL(GetErrorString)};
#undef NC_SYMBOL
  nc_loaded = cuda_library_load(nc_soname, "NCCL", symbols, (int)(sizeof symbols / sizeof *symbols), nc_error,
                                sizeof nc_error);
}

static rlx_status nc_ready(const char *fn) {
  pthread_once(&nc_once, nc_load);
  return nc_loaded ? RLX_OK : rlx_set_error(RLX_ERR_UNSUPPORTED, "%s: %s", fn, nc_error);
}

static rlx_status nc_fail(nc_result r, const char *what) {
  return rlx_set_error(RLX_ERR_DEVICE, "NCCL: %s: %s", what, nc.GetErrorString(r));
}

static rlx_comm *nc_wrap(nc_comm c, int rank, int world, int device, int timeout_ms) {
  rlx_comm *w = calloc(1, sizeof *w);
  if (w) *w = (rlx_comm){COMM_NCCL, rank, world, NULL, c, device, timeout_ms};
  return w;
}

/* One AllReduce of a float over comms c[0..n) (this thread drives n
 * devices: a group), waited for: NCCL connects its ranks at their first
 * collective, which is better done here, where a failure is a clear error
 * at load, than inside the CUDA graph capture of the first plan. A comm
 * the wait aborted becomes NULL; on failure the caller aborts the rest. */
static rlx_status warm_up(nc_comm *c, const int *dev, int n, int timeout_ms) {
  float **buf = calloc((size_t)n, sizeof *buf);
  cudaStream_t *st = calloc((size_t)n, sizeof *st);
  rlx_status s = buf && st ? RLX_OK : rlx_set_error(RLX_ERR_NOMEM, "NCCL: out of memory");
  cudaError_t e = cudaSuccess;
  for (int r = 0; s == RLX_OK && r < n; r++)
    if ((e = cudaSetDevice(dev[r])) != cudaSuccess || (e = cudaMalloc((void **)&buf[r], sizeof(float))) != cudaSuccess ||
        (e = cudaMemset(buf[r], 0, sizeof(float))) != cudaSuccess ||
        (e = cudaStreamCreateWithFlags(&st[r], cudaStreamNonBlocking)) != cudaSuccess)
      s = cuda_fail(e, "preparing NCCL's first AllReduce");
  if (s == RLX_OK) {
    nc_result res = n > 1 ? nc.GroupStart() : NC_SUCCESS;
    for (int r = 0; res == NC_SUCCESS && r < n; r++) {
      cudaSetDevice(dev[r]);
      res = nc.AllReduce(buf[r], buf[r], 1, NC_FLOAT32, NC_SUM, c[r], st[r]);
    }
    if (n > 1) {
      nc_result end = nc.GroupEnd();
      if (res == NC_SUCCESS) res = end;
    }
    if (res != NC_SUCCESS) s = nc_fail(res, "the first AllReduce");
  }
  for (int r = 0; s == RLX_OK && r < n; r++) {
    rlx_comm w = {COMM_NCCL, r, n, NULL, c[r], dev[r], timeout_ms};
    cudaSetDevice(dev[r]);
    s = cuda_nccl_wait(&w, st[r]);
    if (!w.nccl) c[r] = NULL; /* aborted by the wait */
  }
  for (int r = 0; buf && st && r < n; r++) {
    cudaSetDevice(dev[r]);
    if (st[r]) cudaStreamDestroy(st[r]);
    cudaFree(buf[r]);
  }
  free(buf), free(st);
  return s;
}

rlx_status cuda_nccl_unique_id(void *id) {
  rlx_status st = nc_ready("rlx_comm_new_nccl_rank");
  if (st) return st;
  nc_unique_id u;
  nc_result r = nc.GetUniqueId(&u);
  if (r != NC_SUCCESS) return nc_fail(r, "ncclGetUniqueId");
  memcpy(id, &u, sizeof u);
  return RLX_OK;
}

rlx_status cuda_nccl_init_all(int world, int first_device, rlx_comm **comms) {
  rlx_status st = nc_ready("rlx_comm_new_nccl_local");
  if (st) return st;
  nc_comm *c = calloc((size_t)world, sizeof *c);
  int *dev = calloc((size_t)world, sizeof *dev);
  if (!c || !dev) {
    free(c), free(dev);
    return rlx_set_error(RLX_ERR_NOMEM, "rlx_comm_new_nccl_local: out of memory");
  }
  for (int r = 0; r < world; r++) dev[r] = first_device + r;
  nc_result res = nc.CommInitAll(c, world, dev);
  if (res != NC_SUCCESS) st = nc_fail(res, "ncclCommInitAll");
  else st = warm_up(c, dev, world, 60000);
  for (int r = 0; st == RLX_OK && r < world; r++)
    if (!(comms[r] = nc_wrap(c[r], r, world, dev[r], 60000))) {
      while (r--) free(comms[r]);
      st = rlx_set_error(RLX_ERR_NOMEM, "rlx_comm_new_nccl_local: out of memory");
    }
  if (st && res == NC_SUCCESS)
    for (int r = 0; r < world; r++)
      if (c[r]) nc.CommAbort(c[r]);
  free(c), free(dev);
  return st;
}

rlx_status cuda_nccl_init_rank(int rank, int world, const void *id, int device, int timeout_ms, rlx_comm **out) {
  rlx_status st = nc_ready("rlx_comm_new_nccl_rank");
  if (st) return st;
  cudaError_t e = cudaSetDevice(device);
  if (e != cudaSuccess) return cuda_fail(e, "cudaSetDevice");
  nc_unique_id u;
  memcpy(&u, id, sizeof u);
  nc_comm c;
  nc_result r = nc.CommInitRank(&c, world, u, rank);
  if (r != NC_SUCCESS) return nc_fail(r, "ncclCommInitRank");
  st = warm_up(&c, &device, 1, timeout_ms);
  if (st) {
    if (c) nc.CommAbort(c);
    return st;
  }
  if (!(*out = nc_wrap(c, rank, world, device, timeout_ms))) {
    nc.CommDestroy(c);
    return rlx_set_error(RLX_ERR_NOMEM, "rlx_comm_new_nccl_rank: out of memory");
  }
  return RLX_OK;
}

void cuda_nccl_abort(rlx_comm *c) {
  if (c->nccl && nc_loaded) nc.CommAbort(c->nccl);
  c->nccl = NULL; /* an aborted communicator is freed by the abort */
}

void cuda_nccl_free(rlx_comm *c) {
  if (c->nccl && nc_loaded) {
    cudaSetDevice(c->device);
    nc.CommDestroy(c->nccl);
  }
  free(c);
}

static int nc_dtype(rlx_dtype t) {
  switch (t) {
  case RLX_F32: return NC_FLOAT32;
  case RLX_F16: return NC_FLOAT16;
  case RLX_BF16: return NC_BFLOAT16;
  case RLX_F64: return NC_FLOAT64;
  case RLX_I32: return NC_INT32;
  default: return NC_INT64;
  }
}

rlx_status cuda_nccl_all_reduce(rlx_comm *c, const void *x, void *y, int64_t n, rlx_dtype t, cudaStream_t stream) {
  if (!c->nccl) return rlx_set_error(RLX_ERR_DEVICE, "AllReduce (rank %d of %d): the communicator was aborted",
                                     c->rank, c->world);
  nc_result r = nc.AllReduce(x, y, (size_t)n, nc_dtype(t), NC_SUM, c->nccl, stream);
  return r == NC_SUCCESS ? RLX_OK : nc_fail(r, "ncclAllReduce");
}

/* The plan's stream, waited for with the communicator's timeout: a rank
 * that died never finishes its share of an AllReduce, and a plain
 * synchronize would wait for it forever. A decode step is a few
 * milliseconds, so the first ones are waited by yielding (a sleep's
 * wake-up alone takes tens of microseconds), longer waits by sleeping. */
rlx_status cuda_nccl_wait(rlx_comm *c, cudaStream_t stream) {
  struct timespec t0, now, nap = {0, 100000};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    cudaError_t e = cudaStreamQuery(stream);
    if (e == cudaSuccess) return RLX_OK;
    if (e != cudaErrorNotReady) return cuda_fail(e, "running the plan");
    nc_result async = NC_SUCCESS;
    if (c->nccl && nc.CommGetAsyncError(c->nccl, &async) == NC_SUCCESS && async != NC_SUCCESS &&
        async != NC_IN_PROGRESS) {
      rlx_status st = nc_fail(async, "a collective of the run");
      cuda_nccl_abort(c);
      return st;
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    double ms = (double)(now.tv_sec - t0.tv_sec) * 1e3 + (double)(now.tv_nsec - t0.tv_nsec) * 1e-6;
    if (ms > c->timeout_ms) {
      cuda_nccl_abort(c);
      return rlx_set_error(RLX_ERR_DEVICE, "AllReduce (rank %d of %d): the other ranks did not answer within %d ms; "
                           "the communicator is aborted", c->rank, c->world, c->timeout_ms);
    }
    if (ms < 20) sched_yield();
    else nanosleep(&nap, NULL);
  }
}
