/* cuda_matmul.c — matrix products through cuBLASLt (cu_kernels.h: cuda_gemm).
 *
 * rlx is row-major and cuBLASLt column-major: C = A B (row-major) is
 * C^T = B^T A^T (column-major), and a row-major [R, C] matrix is a
 * column-major C x R matrix with leading dimension C, so the product runs
 * as m = N, n = M, k = K with cuBLASLt's "A" operand our B and its "B" our
 * A, no data moved. The bias [N] then lies along cuBLASLt's m, which is
 * where its BIAS epilogues add it. Descriptors, layouts and the algorithm
 * are chosen once at compile time (the heuristic sees the real pointer
 * alignments); a run only calls cublasLtMatmul, which a CUDA graph
 * captures. */
#include "../../ir/ir.h"
#include "cu_kernels.h"

#include <cublasLt.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct cuda_gemm {
  cublasLtHandle_t lt;                 /* the handle of the device it runs on */
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, lc;   /* cuBLASLt's A (our B), B (our A), C */
  cublasLtMatmulAlgo_t algo;
  void *workspace;
  float alpha32, beta32;
  double alpha64, beta64;
  int f64;
  int n;                               /* calls: 1, or n_ptrs */
  const void **pa, **pb;
  void **pc;
  const void *resid;                   /* cuBLASLt's C when it is not D (a residual added in), else NULL */
};

/* A cuBLASLt handle belongs to the device current when it was made: one a
 * device, made on first use. */
#define LT_MAX_DEVICES 64
static cublasLtHandle_t lt_handles[LT_MAX_DEVICES];
static cublasStatus_t lt_status[LT_MAX_DEVICES];
static unsigned char lt_made[LT_MAX_DEVICES];
static pthread_mutex_t lt_mu = PTHREAD_MUTEX_INITIALIZER;

/* The current device's handle into *h. */
static cublasStatus_t lt_handle_here(cublasLtHandle_t *h) {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= LT_MAX_DEVICES) {
    (void)cudaGetLastError();
    return CUBLAS_STATUS_NOT_INITIALIZED;
  }
  pthread_mutex_lock(&lt_mu);
  if (!lt_made[dev]) lt_status[dev] = cublasLtCreate(&lt_handles[dev]), lt_made[dev] = 1;
  const cublasStatus_t s = lt_status[dev];
  *h = lt_handles[dev];
  pthread_mutex_unlock(&lt_mu);
  return s;
}

static rlx_status lt_fail(cublasStatus_t s, const char *what) {
  return rlx_set_error(RLX_ERR_DEVICE, "cuBLASLt: %s failed (status %d)", what, (int)s);
}

/* Largest power of two (<= 256) dividing the address. */
static uint32_t alignment_of(const void *p) {
  uintptr_t u = (uintptr_t)p;
  uint32_t a = 256;
  while (a > 1 && u % a) a /= 2;
  return a;
}

void cuda_gemm_free(cuda_gemm *g) {
  if (!g) return;
  if (g->op) cublasLtMatmulDescDestroy(g->op);
  if (g->la) cublasLtMatrixLayoutDestroy(g->la);
  if (g->lb) cublasLtMatrixLayoutDestroy(g->lb);
  if (g->lc) cublasLtMatrixLayoutDestroy(g->lc);
  free(g->pa);
  free(g->pb);
  free(g->pc);
  free(g);
}

static cublasStatus_t set_batch(cublasLtMatrixLayout_t l, int64_t batch, int64_t stride) {
  int32_t count = (int32_t)batch;
  cublasStatus_t s = cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride);
  return s;
}

static cublasStatus_t run_algo(const cuda_gemm *g, const cublasLtMatmulAlgo_t *algo, int i, cudaStream_t st) {
  const void *alpha = g->f64 ? (const void *)&g->alpha64 : (const void *)&g->alpha32;
  const void *beta = g->f64 ? (const void *)&g->beta64 : (const void *)&g->beta32;
  return cublasLtMatmul(g->lt, g->op, alpha, g->pb[i], g->la, g->pa[i], g->lb, beta,
                        g->resid ? g->resid : g->pc[i], g->lc, g->pc[i], g->lc, algo, g->workspace,
                        CUDA_GEMM_WORKSPACE, st);
}

/* Best of three timings of two calls of algo on g's own operands (ms), or
 * a negative number when the algorithm fails to run. */
static float time_algo(const cuda_gemm *g, const cublasLtMatmulAlgo_t *algo, cudaEvent_t e0, cudaEvent_t e1) {
  if (run_algo(g, algo, 0, 0) != CUBLAS_STATUS_SUCCESS) return -1.f; /* warm-up */
  float best = -1.f;
  for (int t = 0; t < 3; t++) {
    cudaEventRecord(e0, 0);
    for (int r = 0; r < 2; r++)
      if (run_algo(g, algo, 0, 0) != CUBLAS_STATUS_SUCCESS) return -1.f;
    cudaEventRecord(e1, 0);
    float ms = 0.f;
    if (cudaEventSynchronize(e1) != cudaSuccess || cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess) return -1.f;
    best = best < 0.f || ms < best ? ms : best;
  }
  return best;
}

/* The algorithm for g's descriptors, or CUBLAS_STATUS_NOT_SUPPORTED: the
 * heuristic's first choice, or with RLX_CUDA_GEMM_TUNE=1, for products
 * large enough that a wrong choice would cost real time, the fastest of
 * its first GEMM_CANDIDATES timed once here, at compile time, on the
 * plan's own operands (scratch at this point: nothing runs yet). Off by
 * default: on the H200 it found nothing faster than the first choice for
 * the LLM shapes of bench_cuda (4096^3 and a Llama-3-8B layer's products
 * at 512 rows, within 1%), and it costs compile time. */
#define GEMM_CANDIDATES 8
static cublasStatus_t pick_algo(cuda_gemm *g, const cuda_gemm_desc *d, const void *a, const void *b, const void *c,
                                const void *c_in) {
  cublasLtMatmulPreference_t pref;
  cublasStatus_t s = cublasLtMatmulPreferenceCreate(&pref);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  uint64_t ws = CUDA_GEMM_WORKSPACE;
  uint32_t al_a = alignment_of(b), al_b = alignment_of(a), al_c = alignment_of(c_in), al_d = alignment_of(c);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_d, sizeof al_d);
  const double flops = 2.0 * (double)d->M * (double)d->N * (double)d->K * (double)(d->batch > 1 ? d->batch : 1);
  const int tune = flops >= 1e9 && ir_env_flag("RLX_CUDA_GEMM_TUNE", 0);
  cublasLtMatmulHeuristicResult_t res[GEMM_CANDIDATES];
  int found = 0;
  s = cublasLtMatmulAlgoGetHeuristic(g->lt, g->op, g->la, g->lb, g->lc, g->lc, pref, tune ? GEMM_CANDIDATES : 1,
                                     res, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  if (found < 1) return CUBLAS_STATUS_NOT_SUPPORTED;
  int best = 0;
  cudaEvent_t e0, e1;
  if (found > 1 && cudaEventCreate(&e0) == cudaSuccess) {
    if (cudaEventCreate(&e1) == cudaSuccess) {
      float best_ms = -1.f;
      for (int i = 0; i < found; i++) {
        const float ms = time_algo(g, &res[i].algo, e0, e1);
        if (ms >= 0.f && (best_ms < 0.f || ms < best_ms)) best_ms = ms, best = i;
      }
      cudaEventDestroy(e1);
    }
    cudaEventDestroy(e0);
    (void)cudaGetLastError(); /* a candidate that failed leaves no error behind */
  }
  g->algo = res[best].algo;
  return CUBLAS_STATUS_SUCCESS;
}

/* Descriptors of d with the given epilogue. */
static cublasStatus_t build(cuda_gemm *g, const cuda_gemm_desc *d, cublasLtEpilogue_t epi) {
  cudaDataType_t t = d->dtype == RLX_F16 ? CUDA_R_16F : d->dtype == RLX_BF16 ? CUDA_R_16BF
                   : d->dtype == RLX_F64 ? CUDA_R_64F : CUDA_R_32F;
  const cudaDataType_t tab = d->ab_bf16 ? CUDA_R_16BF : t; /* A and B */
  cublasComputeType_t ct = d->dtype == RLX_F64 ? CUBLAS_COMPUTE_64F
                         : d->dtype == RLX_F32 && d->tf32 && !d->ab_bf16 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                        : CUBLAS_COMPUTE_32F;
  cudaDataType_t scale = d->dtype == RLX_F64 ? CUDA_R_64F : CUDA_R_32F;
  cublasStatus_t s = cublasLtMatmulDescCreate(&g->op, ct, scale);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  cublasOperation_t ta = d->b_trans ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
  cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
  if (epi != CUBLASLT_EPILOGUE_DEFAULT) {
    s = cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    if (s == CUBLAS_STATUS_SUCCESS)
      s = cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &d->bias, sizeof d->bias);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
  }
  /* our B: [K, N] row-major = N x K column-major (ld N); b_trans: [N, K] = K x N (ld K), op T */
  if (d->b_trans) s = cublasLtMatrixLayoutCreate(&g->la, tab, (uint64_t)d->K, (uint64_t)d->N, d->K);
  else s = cublasLtMatrixLayoutCreate(&g->la, tab, (uint64_t)d->N, (uint64_t)d->K, d->N);
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&g->lb, tab, (uint64_t)d->K, (uint64_t)d->M, d->K);
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&g->lc, t, (uint64_t)d->N, (uint64_t)d->M, d->N);
  if (s == CUBLAS_STATUS_SUCCESS && d->batch > 1 && !d->pa) {
    s = set_batch(g->la, d->batch, d->stride_b);
    if (s == CUBLAS_STATUS_SUCCESS) s = set_batch(g->lb, d->batch, d->stride_a);
    if (s == CUBLAS_STATUS_SUCCESS) s = set_batch(g->lc, d->batch, d->stride_c);
  }
  const void *c = d->pc ? d->pc[0] : d->c;
  if (s == CUBLAS_STATUS_SUCCESS)
    s = pick_algo(g, d, d->pa ? d->pa[0] : d->a, d->pb ? d->pb[0] : d->b, c, d->resid ? d->resid : c);
  return s;
}

static void unbuild(cuda_gemm *g) {
  if (g->op) cublasLtMatmulDescDestroy(g->op);
  if (g->la) cublasLtMatrixLayoutDestroy(g->la);
  if (g->lb) cublasLtMatrixLayoutDestroy(g->lb);
  if (g->lc) cublasLtMatrixLayoutDestroy(g->lc);
  g->op = NULL, g->la = g->lb = g->lc = NULL;
}

rlx_status cuda_gemm_prepare(const cuda_gemm_desc *d, void *workspace, cuda_gemm **out, int *fused) {
  *out = NULL;
  *fused = CUDA_FUSED_NONE;
  cublasLtHandle_t lt = NULL;
  const cublasStatus_t ls = lt_handle_here(&lt);
  if (ls != CUBLAS_STATUS_SUCCESS) {
    const char *why = cuda_cublaslt_error();
    return why ? rlx_set_error(RLX_ERR_DEVICE, "cuBLASLt: %s", why) : lt_fail(ls, "cublasLtCreate");
  }
  cuda_gemm *g = calloc(1, sizeof *g);
  int n = d->pa ? d->n_ptrs : 1;
  if (!g || !(g->pa = calloc((size_t)n, sizeof *g->pa)) || !(g->pb = calloc((size_t)n, sizeof *g->pb)) ||
      !(g->pc = calloc((size_t)n, sizeof *g->pc))) {
    cuda_gemm_free(g);
    return rlx_set_error(RLX_ERR_NOMEM, "cuBLASLt: out of memory");
  }
  g->lt = lt;
  g->n = n;
  for (int i = 0; i < n; i++) {
    g->pa[i] = d->pa ? d->pa[i] : d->a;
    g->pb[i] = d->pb ? d->pb[i] : d->b;
    g->pc[i] = d->pc ? d->pc[i] : d->c;
  }
  g->workspace = workspace;
  g->f64 = d->dtype == RLX_F64;
  if (d->resid && d->pa) {
    cuda_gemm_free(g);
    return rlx_set_error(RLX_ERR_INTERNAL, "cuBLASLt: a residual with per-matrix pointers");
  }
  /* D = A B + resid: cuBLASLt's C input with beta 1, rounded once in the epilogue */
  g->resid = d->resid;
  g->alpha32 = 1.f, g->beta32 = d->resid ? 1.f : 0.f, g->alpha64 = 1.0, g->beta64 = d->resid ? 1.0 : 0.0;
  /* the fullest epilogue the library has a kernel for: bias + act, bias, none */
  const int native_act = d->act == RLX_ACT_RELU || d->act == RLX_ACT_GELU_TANH || d->act == RLX_ACT_NONE;
  cublasLtEpilogue_t tries[3];
  int fused_by[3], n_tries = 0;
  if (d->bias && native_act) {
    tries[n_tries] = d->act == RLX_ACT_RELU ? CUBLASLT_EPILOGUE_RELU_BIAS
                   : d->act == RLX_ACT_GELU_TANH ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    fused_by[n_tries++] = CUDA_FUSED_ALL;
  }
  if (d->bias && d->act != RLX_ACT_NONE) tries[n_tries] = CUBLASLT_EPILOGUE_BIAS, fused_by[n_tries++] = CUDA_FUSED_BIAS;
  tries[n_tries] = CUBLASLT_EPILOGUE_DEFAULT, fused_by[n_tries++] = d->bias || d->act != RLX_ACT_NONE ? CUDA_FUSED_NONE
                                                                                                 : CUDA_FUSED_ALL;
  cublasStatus_t s = CUBLAS_STATUS_NOT_SUPPORTED;
  for (int t = 0; t < n_tries && s != CUBLAS_STATUS_SUCCESS; t++) {
    unbuild(g);
    s = build(g, d, tries[t]);
    *fused = fused_by[t];
  }
  if (s != CUBLAS_STATUS_SUCCESS) {
    cuda_gemm_free(g);
    return rlx_set_error(RLX_ERR_DEVICE, "cuBLASLt: no %s matmul kernel for [%lld,%lld]x[%lld,%lld]%s (status %d)",
                         rlx_dtype_name(d->dtype), (long long)d->M, (long long)d->K, (long long)d->K,
                         (long long)d->N, d->b_trans ? " (b transposed)" : "", (int)s);
  }
  *out = g;
  return RLX_OK;
}

rlx_status cuda_gemm_run(const cuda_gemm *g, cudaStream_t st) {
  for (int i = 0; i < g->n; i++) {
    cublasStatus_t s = run_algo(g, &g->algo, i, st);
    if (s != CUBLAS_STATUS_SUCCESS) return lt_fail(s, "cublasLtMatmul");
  }
  return RLX_OK;
}
