/* cublaslt_loader.c — cuBLASLt opened on first use instead of linked.
 *
 * libcublasLt is about 540 MB; linking it made every process of a
 * CUDA-enabled rlx map it and touch ~190 MiB at start-up, `rlx --help` and
 * CPU-only runs included. The CUDA backend calls only the functions listed
 * below (cuda_matmul.c); this file defines each of them with cuBLASLt's own
 * prototype and forwards it to the library, which is dlopen'ed on the first
 * call. Without the library every call returns CUBLAS_STATUS_NOT_INITIALIZED
 * and cuda_cublaslt_error() says why, so a machine lacking it gets a status
 * from the first matrix product, not a loader failure at start-up. */
#include "cu_kernels.h"
#include "library_loader.h"

#include <cublasLt.h>
#include <pthread.h>

#define LT_FUNCTIONS(X)                                                                                             \
  X(cublasLtCreate)                                                                                                 \
  X(cublasLtMatmul)                                                                                                 \
  X(cublasLtMatmulAlgoGetHeuristic)                                                                                 \
  X(cublasLtMatmulDescCreate)                                                                                       \
  X(cublasLtMatmulDescDestroy)                                                                                      \
  X(cublasLtMatmulDescSetAttribute)                                                                                 \
  X(cublasLtMatmulPreferenceCreate)                                                                                 \
  X(cublasLtMatmulPreferenceDestroy)                                                                                \
  X(cublasLtMatmulPreferenceSetAttribute)                                                                           \
  X(cublasLtMatrixLayoutCreate)                                                                                     \
  X(cublasLtMatrixLayoutDestroy)                                                                                    \
  X(cublasLtMatrixLayoutSetAttribute)

/* One pointer per function, typed from the header's declaration. */
static struct {
#define LT_POINTER(f) __typeof__(f) *f;
  LT_FUNCTIONS(LT_POINTER)
#undef LT_POINTER
} lt;

#define LT_STRING2(x) #x
#define LT_STRING(x) LT_STRING2(x)
/* The soname of the toolkit rlx was compiled against (cuBLAS keeps its ABI
 * within a major version). */
static const char lt_soname[] = "libcublasLt.so." LT_STRING(CUBLAS_VER_MAJOR);

static pthread_once_t lt_once = PTHREAD_ONCE_INIT;
static int lt_loaded;
static char lt_error[256];

static void lt_load(void) {
#define LT_SYMBOL(f) {#f, (void **)&lt.f},
  static const cuda_library_symbol symbols[] = {LT_FUNCTIONS(LT_SYMBOL)};
#undef LT_SYMBOL
  lt_loaded = cuda_library_load(lt_soname, NULL, symbols, (int)(sizeof symbols / sizeof *symbols), lt_error,
                                sizeof lt_error);
}

static int lt_ready(void) {
  pthread_once(&lt_once, lt_load);
  return lt_loaded;
}

const char *cuda_cublaslt_error(void) { return lt_ready() ? NULL : lt_error; }

#define LT_FORWARD(f, params, args)                                                                                 \
  cublasStatus_t CUBLASWINAPI f params { return lt_ready() ? lt.f args : CUBLAS_STATUS_NOT_INITIALIZED; }

LT_FORWARD(cublasLtCreate, (cublasLtHandle_t *h), (h))
LT_FORWARD(cublasLtMatmul,
           (cublasLtHandle_t h, cublasLtMatmulDesc_t op, const void *alpha, const void *a, cublasLtMatrixLayout_t la,
            const void *b, cublasLtMatrixLayout_t lb, const void *beta, const void *c, cublasLtMatrixLayout_t lc,
            void *d, cublasLtMatrixLayout_t ld, const cublasLtMatmulAlgo_t *algo, void *ws, size_t ws_bytes,
            cudaStream_t st),
           (h, op, alpha, a, la, b, lb, beta, c, lc, d, ld, algo, ws, ws_bytes, st))
LT_FORWARD(cublasLtMatmulAlgoGetHeuristic,
           (cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lb,
            cublasLtMatrixLayout_t lc, cublasLtMatrixLayout_t ld, cublasLtMatmulPreference_t pref, int requested,
            cublasLtMatmulHeuristicResult_t results[], int *returned),
           (h, op, la, lb, lc, ld, pref, requested, results, returned))
LT_FORWARD(cublasLtMatmulDescCreate, (cublasLtMatmulDesc_t * d, cublasComputeType_t compute, cudaDataType_t scale),
           (d, compute, scale))
LT_FORWARD(cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t d), (d))
LT_FORWARD(cublasLtMatmulDescSetAttribute,
           (cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const void *buf, size_t bytes),
           (d, attr, buf, bytes))
LT_FORWARD(cublasLtMatmulPreferenceCreate, (cublasLtMatmulPreference_t * p), (p))
LT_FORWARD(cublasLtMatmulPreferenceDestroy, (cublasLtMatmulPreference_t p), (p))
LT_FORWARD(cublasLtMatmulPreferenceSetAttribute,
           (cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr, const void *buf, size_t bytes),
           (p, attr, buf, bytes))
LT_FORWARD(cublasLtMatrixLayoutCreate,
           (cublasLtMatrixLayout_t * l, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld),
           (l, type, rows, cols, ld))
LT_FORWARD(cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t l), (l))
LT_FORWARD(cublasLtMatrixLayoutSetAttribute,
           (cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr, const void *buf, size_t bytes),
           (l, attr, buf, bytes))
