/* cudnn_loader.c — cuDNN opened on first use instead of linked, as
 * cuBLASLt is (cublaslt_loader.c): only the convolutions call it
 * (cuda_conv.c), and a process that runs none, or a machine without the
 * library, never maps it. Each function below has cuDNN's own prototype and
 * forwards to the library, dlopen'ed on the first call; without it every
 * call returns CUDNN_STATUS_NOT_INITIALIZED and cuda_cudnn_error() says
 * why, which is what the claims give as the reason a Conv stays on the CPU.
 * Built without cudnn.h, only cuda_cudnn_error() is here. */
#include "cu_kernels.h"

#ifndef RLX_HAVE_CUDNN

const char *cuda_cudnn_error(void) { return "rlx was built without cuDNN (cudnn.h not found)"; }

#else

#include "library_loader.h"

#include <cudnn.h>
#include <pthread.h>

#define DNN_FUNCTIONS(X)                                                                                            \
  X(cudnnCreate)                                                                                                    \
  X(cudnnDestroy)                                                                                                   \
  X(cudnnSetStream)                                                                                                 \
  X(cudnnGetStream)                                                                                                 \
  X(cudnnCreateTensorDescriptor)                                                                                    \
  X(cudnnDestroyTensorDescriptor)                                                                                   \
  X(cudnnSetTensor4dDescriptor)                                                                                     \
  X(cudnnCreateFilterDescriptor)                                                                                    \
  X(cudnnDestroyFilterDescriptor)                                                                                   \
  X(cudnnSetFilter4dDescriptor)                                                                                     \
  X(cudnnCreateConvolutionDescriptor)                                                                               \
  X(cudnnDestroyConvolutionDescriptor)                                                                              \
  X(cudnnSetConvolution2dDescriptor)                                                                                \
  X(cudnnSetConvolutionGroupCount)                                                                                  \
  X(cudnnSetConvolutionMathType)                                                                                    \
  X(cudnnFindConvolutionForwardAlgorithm)                                                                           \
  X(cudnnConvolutionForward)                                                                                        \
  X(cudnnFindConvolutionBackwardDataAlgorithm)                                                                      \
  X(cudnnConvolutionBackwardData)

static struct {
#define DNN_POINTER(f) __typeof__(f) *f;
  DNN_FUNCTIONS(DNN_POINTER)
#undef DNN_POINTER
} dnn;

#define DNN_STRING2(x) #x
#define DNN_STRING(x) DNN_STRING2(x)
/* cuDNN keeps its C ABI within a major version. */
static const char dnn_soname[] = "libcudnn.so." DNN_STRING(CUDNN_MAJOR);

static pthread_once_t dnn_once = PTHREAD_ONCE_INIT;
static int dnn_loaded;
static char dnn_error[320];

static void dnn_load(void) {
#define DNN_SYMBOL(f) {#f, (void **)&dnn.f},
  static const cuda_library_symbol symbols[] = {DNN_FUNCTIONS(DNN_SYMBOL)};
#undef DNN_SYMBOL
  dnn_loaded = cuda_library_load(dnn_soname, NULL, symbols, (int)(sizeof symbols / sizeof *symbols), dnn_error,
                                 sizeof dnn_error);
}

static int dnn_ready(void) {
  pthread_once(&dnn_once, dnn_load);
  return dnn_loaded;
}

const char *cuda_cudnn_error(void) { return dnn_ready() ? NULL : dnn_error; }

#define DNN_FORWARD(f, params, args)                                                                                \
  cudnnStatus_t CUDNNWINAPI f params { return dnn_ready() ? dnn.f args : CUDNN_STATUS_NOT_INITIALIZED; }

DNN_FORWARD(cudnnCreate, (cudnnHandle_t * h), (h))
DNN_FORWARD(cudnnDestroy, (cudnnHandle_t h), (h))
DNN_FORWARD(cudnnSetStream, (cudnnHandle_t h, cudaStream_t st), (h, st))
DNN_FORWARD(cudnnGetStream, (cudnnHandle_t h, cudaStream_t *st), (h, st))
DNN_FORWARD(cudnnCreateTensorDescriptor, (cudnnTensorDescriptor_t * d), (d))
DNN_FORWARD(cudnnDestroyTensorDescriptor, (cudnnTensorDescriptor_t d), (d))
DNN_FORWARD(cudnnSetTensor4dDescriptor,
            (cudnnTensorDescriptor_t d, cudnnTensorFormat_t f, cudnnDataType_t t, int n, int c, int h, int w),
            (d, f, t, n, c, h, w))
DNN_FORWARD(cudnnCreateFilterDescriptor, (cudnnFilterDescriptor_t * d), (d))
DNN_FORWARD(cudnnDestroyFilterDescriptor, (cudnnFilterDescriptor_t d), (d))
DNN_FORWARD(cudnnSetFilter4dDescriptor,
            (cudnnFilterDescriptor_t d, cudnnDataType_t t, cudnnTensorFormat_t f, int k, int c, int h, int w),
            (d, t, f, k, c, h, w))
DNN_FORWARD(cudnnCreateConvolutionDescriptor, (cudnnConvolutionDescriptor_t * d), (d))
DNN_FORWARD(cudnnDestroyConvolutionDescriptor, (cudnnConvolutionDescriptor_t d), (d))
DNN_FORWARD(cudnnSetConvolution2dDescriptor,
            (cudnnConvolutionDescriptor_t d, int pad_h, int pad_w, int u, int v, int dil_h, int dil_w,
             cudnnConvolutionMode_t mode, cudnnDataType_t t),
            (d, pad_h, pad_w, u, v, dil_h, dil_w, mode, t))
DNN_FORWARD(cudnnSetConvolutionGroupCount, (cudnnConvolutionDescriptor_t d, int groups), (d, groups))
DNN_FORWARD(cudnnSetConvolutionMathType, (cudnnConvolutionDescriptor_t d, cudnnMathType_t m), (d, m))
DNN_FORWARD(cudnnFindConvolutionForwardAlgorithm,
            (cudnnHandle_t h, const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,
             const cudnnConvolutionDescriptor_t c, const cudnnTensorDescriptor_t y, const int requested, int *returned,
             cudnnConvolutionFwdAlgoPerf_t *perf),
            (h, x, w, c, y, requested, returned, perf))
DNN_FORWARD(cudnnConvolutionForward,
            (cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t xd, const void *x,
             const cudnnFilterDescriptor_t wd, const void *w, const cudnnConvolutionDescriptor_t c,
             cudnnConvolutionFwdAlgo_t algo, void *ws, size_t ws_bytes, const void *beta,
             const cudnnTensorDescriptor_t yd, void *y),
            (h, alpha, xd, x, wd, w, c, algo, ws, ws_bytes, beta, yd, y))
DNN_FORWARD(cudnnFindConvolutionBackwardDataAlgorithm,
            (cudnnHandle_t h, const cudnnFilterDescriptor_t w, const cudnnTensorDescriptor_t dy,
             const cudnnConvolutionDescriptor_t c, const cudnnTensorDescriptor_t dx, const int requested,
             int *returned, cudnnConvolutionBwdDataAlgoPerf_t *perf),
            (h, w, dy, c, dx, requested, returned, perf))
DNN_FORWARD(cudnnConvolutionBackwardData,
            (cudnnHandle_t h, const void *alpha, const cudnnFilterDescriptor_t wd, const void *w,
             const cudnnTensorDescriptor_t dyd, const void *dy, const cudnnConvolutionDescriptor_t c,
             cudnnConvolutionBwdDataAlgo_t algo, void *ws, size_t ws_bytes, const void *beta,
             const cudnnTensorDescriptor_t dxd, void *dx),
            (h, alpha, wd, w, dyd, dy, c, algo, ws, ws_bytes, beta, dxd, dx))

#endif
