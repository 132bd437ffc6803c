/* cuda_conv.c — convolutions through cuDNN (cu_kernels.h: cuda_conv).
 *
 * cuDNN's legacy convolution API over NCHW F32 tensors: descriptors and the
 * algorithm are made once at compile time, before any capture (cudnnFind*
 * lists the candidates, find_algo times them again), kept per geometry for
 * the process so a network's repeated shapes are timed once. A run is then
 * one cudnnConvolutionForward (or BackwardData for ConvTranspose) on the
 * plan's stream with the plan's workspace: no allocation and no host wait,
 * so a CUDA graph captures it. */
#include "../../ir/ir.h"
#include "cu_kernels.h"

#ifndef RLX_HAVE_CUDNN

rlx_status cuda_cudnn_create(void **handle, cudaStream_t st) {
  (void)st;
  *handle = NULL;
  return rlx_set_error(RLX_ERR_UNSUPPORTED, "CUDA: %s", cuda_cudnn_error());
}
void cuda_cudnn_destroy(void *handle) { (void)handle; }
rlx_status cuda_conv_prepare(const cuda_conv_desc *d, void *handle, cuda_conv **out, size_t *ws_bytes) {
  (void)d, (void)handle, (void)ws_bytes;
  *out = NULL;
  return rlx_set_error(RLX_ERR_UNSUPPORTED, "CUDA: %s", cuda_cudnn_error());
}
rlx_status cuda_conv_run(const cuda_conv *c, void *ws, size_t ws_bytes) {
  (void)c, (void)ws, (void)ws_bytes;
  return rlx_set_error(RLX_ERR_UNSUPPORTED, "CUDA: %s", cuda_cudnn_error());
}
void cuda_conv_free(cuda_conv *c) { (void)c; }

#else

#include <cudnn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cuda_conv {
  cudnnHandle_t h;
  cudnnTensorDescriptor_t xd, yd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  int transposed, tf32, algo;
  size_t ws_bytes;
  int64_t y_elems; /* the output's */
  const void *x, *w;
  void *y;
};

/* The most workspace an algorithm may ask for; PyTorch's default limit is
 * the free memory, which a plan sharing the device cannot assume. */
#define CONV_WS_MAX ((size_t)256 << 20)
#define CONV_MAX_ALGOS 16 /* cudnnFind's candidates at most */
#define CONV_TIMING_ROUNDS 5
#define CONV_TIMING_CALLS 4 /* calls a timed graph */

static rlx_status dnn_fail(cudnnStatus_t s, const char *what) {
  const char *why = cuda_cudnn_error();
  if (why) return rlx_set_error(RLX_ERR_DEVICE, "cuDNN: %s: %s", what, why);
  return rlx_set_error(RLX_ERR_DEVICE, "cuDNN: %s failed (status %d)", what, (int)s);
}

rlx_status cuda_cudnn_create(void **handle, cudaStream_t st) {
  cudnnHandle_t h = NULL;
  cudnnStatus_t s = cudnnCreate(&h);
  if (s != CUDNN_STATUS_SUCCESS) return dnn_fail(s, "cudnnCreate");
  if ((s = cudnnSetStream(h, st)) != CUDNN_STATUS_SUCCESS) {
    cudnnDestroy(h);
    return dnn_fail(s, "cudnnSetStream");
  }
  *handle = h;
  return RLX_OK;
}

void cuda_cudnn_destroy(void *handle) {
  if (handle) cudnnDestroy(handle);
}

void cuda_conv_free(cuda_conv *c) {
  if (!c) return;
  if (c->xd) cudnnDestroyTensorDescriptor(c->xd);
  if (c->yd) cudnnDestroyTensorDescriptor(c->yd);
  if (c->wd) cudnnDestroyFilterDescriptor(c->wd);
  if (c->cd) cudnnDestroyConvolutionDescriptor(c->cd);
  free(c);
}

/* The algorithms found, by geometry (the descriptor without its pointers)
 * and device: a process-wide table, small (a network has a few dozen
 * distinct convolutions). */
typedef struct {
  cuda_conv_desc key;
  int device, algo, math;
  size_t ws_bytes;
} conv_found;
#define CONV_CACHE 256
static conv_found conv_cache[CONV_CACHE];
static int conv_cached;
static pthread_mutex_t conv_mu = PTHREAD_MUTEX_INITIALIZER;

static void geometry_of(const cuda_conv_desc *d, cuda_conv_desc *k) {
  memset(k, 0, sizeof *k);
  k->transposed = d->transposed, k->tf32 = d->tf32;
  k->N = d->N, k->C = d->C, k->H = d->H, k->W = d->W, k->K = d->K, k->OH = d->OH, k->OW = d->OW;
  k->R = d->R, k->S = d->S, k->groups = d->groups;
  for (int i = 0; i < 2; i++) k->pad[i] = d->pad[i], k->stride[i] = d->stride[i], k->dilation[i] = d->dilation[i];
}

static int cache_find(const cuda_conv_desc *k, int device, conv_found *out) {
  int hit = 0;
  pthread_mutex_lock(&conv_mu);
  for (int i = 0; i < conv_cached && !hit; i++)
    if (conv_cache[i].device == device && !memcmp(&conv_cache[i].key, k, sizeof *k)) *out = conv_cache[i], hit = 1;
  pthread_mutex_unlock(&conv_mu);
  return hit;
}

static void cache_put(const conv_found *f) {
  pthread_mutex_lock(&conv_mu);
  if (conv_cached < CONV_CACHE) conv_cache[conv_cached++] = *f;
  pthread_mutex_unlock(&conv_mu);
}

/* What find_algo weighs of a timed candidate: the forward and the
 * backward-data results of cudnnFind differ only in their types and their
 * algorithms' names. `spectral`: a transform whose rounding grows with the
 * spectrum's size (FFT, FFT tiling and non-fused Winograd: about 1e-4 of
 * the outputs where the direct sum stays near 1e-6). */
typedef struct {
  cudnnStatus_t status;
  cudnnDeterminism_t determinism;
  cudnnMathType_t math;
  size_t memory;
  int algo, spectral;
  float found_ms; /* cudnnFind's time */
} candidate;

/* p: a cudnnConvolution*AlgoPerf_t; ALGO: its algorithms' prefix. */
#define CANDIDATE(p, ALGO)                                                                                          \
  ((candidate){(p).status, (p).determinism, (p).mathType, (p).memory, (int)(p).algo,                               \
               (p).algo == ALGO##FFT || (p).algo == ALGO##FFT_TILING || (p).algo == ALGO##WINOGRAD_NONFUSED,   \
               (p).time})

/* A candidate is usable when it ran, fits the workspace limit, gives the
 * same bits every run (a replay must equal the op-by-op run, so no
 * split-K atomics) and, without TF32, keeps F32's accuracy: no
 * tensor-core math and no spectral transform. */
static int usable(const cuda_conv *c, const candidate *k) {
  if (k->status != CUDNN_STATUS_SUCCESS || k->memory > CONV_WS_MAX || k->determinism != CUDNN_DETERMINISTIC) return 0;
  return c->tf32 ||
         (!k->spectral && k->math != CUDNN_TENSOR_OP_MATH && k->math != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION);
}

/* cudnnFind may report CUDNN_DEFAULT_MATH for a candidate timed under
 * CUDNN_FMA_MATH; CUDNN_DEFAULT_MATH permits TF32 on Ampere and later, so
 * without TF32 the run keeps the FMA math it was timed with. */
static cudnnMathType_t math_of(const cuda_conv *c, cudnnMathType_t found) {
  return c->tf32 ? found : CUDNN_FMA_MATH;
}

/* One call of algorithm algo (math type set) writing y. */
static cudnnStatus_t conv_call(const cuda_conv *c, int algo, void *ws, size_t ws_bytes, void *y) {
  const float one = 1.f, zero = 0.f;
  if (!c->transposed)
    return cudnnConvolutionForward(c->h, &one, c->xd, c->x, c->wd, c->w, c->cd, (cudnnConvolutionFwdAlgo_t)algo, ws,
                                   ws_bytes, &zero, c->yd, y);
  return cudnnConvolutionBackwardData(c->h, &one, c->wd, c->w, c->xd, c->x, c->cd, (cudnnConvolutionBwdDataAlgo_t)algo,
                                      ws, ws_bytes, &zero, c->yd, y);
}

/* Candidate k's calls captured as a CUDA graph, as a plan replays them
 * (NULL when a call or the capture fails: then it could not be captured
 * in a plan either). */
static cudaGraphExec_t capture_candidate(cuda_conv *c, const candidate *k, void *ws, void *y, cudaStream_t st) {
  if (cudnnSetConvolutionMathType(c->cd, math_of(c, k->math)) != CUDNN_STATUS_SUCCESS ||
      cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal) != cudaSuccess)
    return NULL;
  int ok = 1;
  for (int r = 0; r < CONV_TIMING_CALLS && ok; r++) ok = conv_call(c, k->algo, ws, k->memory, y) == CUDNN_STATUS_SUCCESS;
  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec = NULL;
  ok &= cudaStreamEndCapture(st, &graph) == cudaSuccess && graph;
  if (ok && cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) exec = NULL;
  if (graph) cudaGraphDestroy(graph);
  return ok ? exec : NULL;
}

/* The index of the fastest of n usable candidates, timed again here on
 * the device alone: cudnnFind times each call once, host work included,
 * and at ResNet-50's sizes (tens of microseconds a call) the legacy API's
 * host-side dispatch is as long as the kernels, so its ranking (and a
 * timing of calls issued one by one) followed the host's noise, and a
 * network's plan moved by 2x from one process to the next. Each
 * candidate runs as a captured graph of CONV_TIMING_CALLS calls, as in a
 * plan's replay; its time is the best of CONV_TIMING_ROUNDS rounds, the
 * candidates interleaved within each round (after an untimed one), so
 * that the clocks' drift favours none. The inputs are the plan's own
 * buffers (scratch now: nothing has run); the output goes to a scratch y,
 * so no buffer the plan shares is written. When timing is not possible,
 * cudnnFind's order stands. ms[i]: candidate i's time a call (negative:
 * it failed). */
static int fastest_timed(cuda_conv *c, const candidate *k, int n, float *ms) {
  size_t ws_max = 0;
  for (int i = 0; i < n; i++) ws_max = k[i].memory > ws_max ? k[i].memory : ws_max, ms[i] = -1.f;
  const size_t ws_at = ((size_t)c->y_elems * sizeof(float) + 255) / 256 * 256;
  cudaStream_t st = NULL;
  void *buf = NULL;
  int best = -1;
  if (n < 2 || cudnnGetStream(c->h, &st) != CUDNN_STATUS_SUCCESS || !st ||
      cudaMalloc(&buf, ws_at + ws_max) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  cudaGraphExec_t exec[CONV_MAX_ALGOS];
  for (int i = 0; i < n; i++) exec[i] = capture_candidate(c, &k[i], (uint8_t *)buf + ws_at, buf, st);
  (void)cudaGetLastError(); /* a candidate that failed leaves no error behind */
  cudaEvent_t e0, e1;
  if (cudaEventCreate(&e0) == cudaSuccess) {
    if (cudaEventCreate(&e1) == cudaSuccess) {
      for (int round = 0; round <= CONV_TIMING_ROUNDS; round++)
        for (int i = 0; i < n; i++) {
          float t = 0.f;
          if (!exec[i] || cudaEventRecord(e0, st) != cudaSuccess || cudaGraphLaunch(exec[i], st) != cudaSuccess ||
              cudaEventRecord(e1, st) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
              cudaEventElapsedTime(&t, e0, e1) != cudaSuccess) {
            if (exec[i]) cudaGraphExecDestroy(exec[i]);
            exec[i] = NULL, ms[i] = -1.f;
            continue;
          }
          t /= CONV_TIMING_CALLS;
          if (round > 0 && (ms[i] < 0.f || t < ms[i])) ms[i] = t;
        }
      for (int i = 0; i < n; i++)
        if (ms[i] > 0.f && (best < 0 || ms[i] < ms[best])) best = i;
      cudaEventDestroy(e1);
    }
    cudaEventDestroy(e0);
  }
  for (int i = 0; i < n; i++)
    if (exec[i]) cudaGraphExecDestroy(exec[i]);
  cudaStreamSynchronize(st);
  cudaFree(buf);
  (void)cudaGetLastError();
  return best < 0 ? 0 : best;
}

/* The fastest usable algorithm among cudnnFind's candidates. */
static rlx_status find_algo(cuda_conv *c, conv_found *f) {
  candidate k[CONV_MAX_ALGOS];
  int got = 0, n = 0;
  cudnnStatus_t s;
  if (!c->transposed) {
    cudnnConvolutionFwdAlgoPerf_t p[CONV_MAX_ALGOS];
    s = cudnnFindConvolutionForwardAlgorithm(c->h, c->xd, c->wd, c->cd, c->yd, CONV_MAX_ALGOS, &got, p);
    for (int i = 0; i < got; i++) k[i] = CANDIDATE(p[i], CUDNN_CONVOLUTION_FWD_ALGO_);
  } else {
    cudnnConvolutionBwdDataAlgoPerf_t p[CONV_MAX_ALGOS];
    s = cudnnFindConvolutionBackwardDataAlgorithm(c->h, c->wd, c->xd, c->cd, c->yd, CONV_MAX_ALGOS, &got, p);
    for (int i = 0; i < got; i++) k[i] = CANDIDATE(p[i], CUDNN_CONVOLUTION_BWD_DATA_ALGO_);
  }
  if (s != CUDNN_STATUS_SUCCESS)
    return dnn_fail(s, c->transposed ? "cudnnFindConvolutionBackwardDataAlgorithm"
                                     : "cudnnFindConvolutionForwardAlgorithm");
  for (int i = 0; i < got; i++) /* the usable ones, in cudnnFind's order */
    if (usable(c, &k[i])) k[n++] = k[i];
  if (!n)
    return rlx_set_error(RLX_ERR_UNSUPPORTED,
                         "cuDNN: no algorithm for this %s that is deterministic, fits %zu MiB of workspace and, "
                         "without RLX_CUDA_TF32, keeps F32 accuracy",
                         c->transposed ? "ConvTranspose" : "Conv", CONV_WS_MAX >> 20);
  float ms[CONV_MAX_ALGOS];
  const candidate *b = &k[fastest_timed(c, k, n, ms)];
  if (ir_env_flag("RLX_TRACE", 0)) { /* what each usable candidate took, cudnnFind's time and ours */
    fprintf(stderr, "rlx: cuDNN %s N %lld C %lld %lldx%lld -> K %lld %lldx%lld, %lldx%lld filter, groups %lld:",
            c->transposed ? "ConvTranspose" : "Conv", (long long)f->key.N, (long long)f->key.C, (long long)f->key.H,
            (long long)f->key.W, (long long)f->key.K, (long long)f->key.OH, (long long)f->key.OW, (long long)f->key.R,
            (long long)f->key.S, (long long)f->key.groups);
    for (int i = 0; i < n; i++)
      fprintf(stderr, "%s algo %d math %d %.4f / %.4f ms", i ? "," : "", k[i].algo, (int)k[i].math, k[i].found_ms,
              ms[i]);
    fprintf(stderr, "; took algo %d math %d\n", b->algo, (int)b->math);
  }
  f->algo = b->algo, f->math = (int)math_of(c, b->math), f->ws_bytes = b->memory;
  return RLX_OK;
}

rlx_status cuda_conv_prepare(const cuda_conv_desc *d, void *handle, cuda_conv **out, size_t *ws_bytes) {
  *out = NULL;
  cuda_conv *c = calloc(1, sizeof *c);
  if (!c) return rlx_set_error(RLX_ERR_NOMEM, "CUDA: out of memory for a convolution");
  c->h = handle, c->transposed = d->transposed, c->tf32 = d->tf32, c->x = d->x, c->w = d->w, c->y = d->y;
  c->y_elems = d->transposed ? d->N * d->C * d->H * d->W : d->N * d->K * d->OH * d->OW;
  cudnnStatus_t s;
  /* ConvTranspose is the gradient of the convolution from y to x: its
   * filter [C, K / groups] is that convolution's [K' = C, C' = K / groups] */
  const int64_t fk = d->transposed ? d->C : d->K, fc = (d->transposed ? d->K : d->C) / d->groups;
#define DNN_TRY(call, what)                                                                                         \
  if ((s = (call)) != CUDNN_STATUS_SUCCESS) {                                                                       \
    rlx_status st = dnn_fail(s, what);                                                                              \
    cuda_conv_free(c);                                                                                              \
    return st;                                                                                                      \
  }
  DNN_TRY(cudnnCreateTensorDescriptor(&c->xd), "cudnnCreateTensorDescriptor")
  DNN_TRY(cudnnCreateTensorDescriptor(&c->yd), "cudnnCreateTensorDescriptor")
  DNN_TRY(cudnnCreateFilterDescriptor(&c->wd), "cudnnCreateFilterDescriptor")
  DNN_TRY(cudnnCreateConvolutionDescriptor(&c->cd), "cudnnCreateConvolutionDescriptor")
  DNN_TRY(cudnnSetTensor4dDescriptor(c->xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, (int)d->N, (int)d->C, (int)d->H,
                                     (int)d->W),
          "the input's descriptor")
  DNN_TRY(cudnnSetTensor4dDescriptor(c->yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, (int)d->N, (int)d->K, (int)d->OH,
                                     (int)d->OW),
          "the output's descriptor")
  DNN_TRY(cudnnSetFilter4dDescriptor(c->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, (int)fk, (int)fc, (int)d->R,
                                     (int)d->S),
          "the filter's descriptor")
  DNN_TRY(cudnnSetConvolution2dDescriptor(c->cd, (int)d->pad[0], (int)d->pad[1], (int)d->stride[0],
                                          (int)d->stride[1], (int)d->dilation[0], (int)d->dilation[1],
                                          CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
          "the convolution's descriptor")
  DNN_TRY(cudnnSetConvolutionGroupCount(c->cd, (int)d->groups), "cudnnSetConvolutionGroupCount")
  /* F32 FMA only unless TF32 is allowed (PyTorch's choice for allow_tf32) */
  DNN_TRY(cudnnSetConvolutionMathType(c->cd, d->tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH),
          "cudnnSetConvolutionMathType")
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) (void)cudaGetLastError();
  cuda_conv_desc key;
  geometry_of(d, &key);
  conv_found f;
  if (!cache_find(&key, device, &f)) {
    memset(&f, 0, sizeof f);
    f.key = key, f.device = device;
    rlx_status st = find_algo(c, &f);
    if (st) {
      cuda_conv_free(c);
      return st;
    }
    cache_put(&f);
  }
  DNN_TRY(cudnnSetConvolutionMathType(c->cd, (cudnnMathType_t)f.math), "cudnnSetConvolutionMathType")
#undef DNN_TRY
  c->algo = f.algo, c->ws_bytes = f.ws_bytes;
  *ws_bytes = f.ws_bytes;
  *out = c;
  return RLX_OK;
}

rlx_status cuda_conv_run(const cuda_conv *c, void *ws, size_t ws_bytes) {
  if (ws_bytes < c->ws_bytes) return rlx_set_error(RLX_ERR_INTERNAL, "cuDNN: a convolution's workspace is short");
  const cudnnStatus_t s = conv_call(c, c->algo, ws, c->ws_bytes, c->y);
  return s == CUDNN_STATUS_SUCCESS ? RLX_OK : dnn_fail(s, c->transposed ? "cudnnConvolutionBackwardData"
                                                                         : "cudnnConvolutionForward");
}

#endif
