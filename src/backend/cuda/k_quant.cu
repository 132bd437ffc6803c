/* k_quant.cu — DequantMatMul and Dequantize over GGUF block dtypes (Q4_0,
 * Q4_1, Q8_0, Q4_K, Q6_K), reading the packed blocks directly.
 *
 * The unit of work is a chunk of 32 consecutive weights, decoded a quarter
 * (8 weights) at a time by k_quant_blocks.cuh.
 *
 * DequantMatMul for small M (decode, M <= CU_QMM_MAX_M) has two paths:
 *  - the default, integer one (k_quant_gemv.cu): x quantized to 8
 *    bits per 32 as llama.cpp and the CPU backend's fast kernels do, dp4a;
 *  - the exact one (RLX_QMATMUL_REF=1, as the CPU's reference mode): one
 *    warp per output column n walks row n of w in floats, 8 chunks per
 *    step (four lanes a chunk, so the lanes' loads of a step fall into 8
 *    consecutive blocks), every weight byte read once per call, all M rows
 *    of x at once, x as given.
 * Larger M is lowered by the host to a dequantization into a scratch
 * matrix followed by a tensor-core GEMM. */
#include "k_quant_blocks.cuh"

/* 8 consecutive x elements as A (one 16-byte load where x is F16/BF16 and
 * aligned: at M = 1 the product is close to bound by instruction issue, and
 * x's loads are half of it). */
template <typename X> __device__ __forceinline__ void load8(const X *p, typename cu_fl<X>::acc *v) {
  if constexpr (sizeof(X) == 2) {
    if (((uintptr_t)p & 15) == 0) {
      float f[8];
      cu_ld16<X>(p, f);
#pragma unroll
      for (int j = 0; j < 8; j++) v[j] = f[j];
      return;
    }
  }
#pragma unroll
  for (int j = 0; j < 8; j++) v[j] = cu_fl<X>::ld(p + j);
}

#define QMM_WARPS 8

/* One warp per output column n; each group of four lanes decodes one chunk
 * of 32 weights (a lane a quarter), so a warp step covers 8 chunks = 256
 * weights of row n, read once, against all M rows of x. M is a template
 * bound (MM >= M) so the accumulators stay in registers. */
template <typename X, int SCHEME, int MM>
__global__ void __launch_bounds__(QMM_WARPS * 32)
    qmm_kernel(const X *__restrict__ x, const uint8_t *__restrict__ w, X *__restrict__ out, int M, int64_t N, int64_t K) {
  typedef typename cu_fl<X>::acc A;
  const int lane = threadIdx.x % 32, part = lane % 4;
  const int64_t n = (int64_t)blockIdx.x * QMM_WARPS + threadIdx.x / 32;
  if (n >= N) return;
  const uint8_t *row = w + n * row_bytes(SCHEME, K);
  A acc[MM];
#pragma unroll
  for (int m = 0; m < MM; m++) acc[m] = 0;
  float y[8];
  A xv[8];
#pragma unroll 4 /* several chunks' loads in flight */
  for (int64_t c = lane / 4; c < K / 32; c += 8) {
    chunk_decode8<SCHEME>(row, c, part, y);
    const int64_t k0 = c * 32 + 8 * part;
#pragma unroll
    for (int m = 0; m < MM; m++) {
      if (m >= M) break;
      load8<X>(x + m * K + k0, xv);
      A s = 0;
#pragma unroll
      for (int l = 0; l < 8; l++) s += (A)y[l] * xv[l];
      acc[m] += s;
    }
  }
#pragma unroll
  for (int m = 0; m < MM; m++) {
    if (m >= M) break;
    A s = cu_warp_sum(acc[m]);
    if (lane == 0) cu_fl<X>::st(out + m * N + n, s);
  }
}

template <typename X, int SCHEME>
static void qmm_m(const X *x, const uint8_t *w, X *out, int M, int64_t N, int64_t K, cudaStream_t st) {
  const unsigned blocks = (unsigned)((N + QMM_WARPS - 1) / QMM_WARPS);
  if (M == 1) qmm_kernel<X, SCHEME, 1><<<blocks, QMM_WARPS * 32, 0, st>>>(x, w, out, M, N, K);
  else if (M <= 4) qmm_kernel<X, SCHEME, 4><<<blocks, QMM_WARPS * 32, 0, st>>>(x, w, out, M, N, K);
  else qmm_kernel<X, SCHEME, CU_QMM_MAX_M><<<blocks, QMM_WARPS * 32, 0, st>>>(x, w, out, M, N, K);
}

template <typename X>
static int qmm_typed(const void *x, const void *w, int scheme, void *out, int M, int64_t N, int64_t K, cudaStream_t st) {
  const X *xx = (const X *)x;
  const uint8_t *ww = (const uint8_t *)w;
  X *oo = (X *)out;
  switch (scheme) {
  case RLX_Q4_0: qmm_m<X, RLX_Q4_0>(xx, ww, oo, M, N, K, st); break;
  case RLX_Q4_1: qmm_m<X, RLX_Q4_1>(xx, ww, oo, M, N, K, st); break;
  case RLX_Q8_0: qmm_m<X, RLX_Q8_0>(xx, ww, oo, M, N, K, st); break;
  case RLX_Q4_K: qmm_m<X, RLX_Q4_K>(xx, ww, oo, M, N, K, st); break;
  case RLX_Q6_K: qmm_m<X, RLX_Q6_K>(xx, ww, oo, M, N, K, st); break;
  default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

extern "C" int cu_quant_supported(int scheme) {
  return scheme == RLX_Q4_0 || scheme == RLX_Q4_1 || scheme == RLX_Q8_0 || scheme == RLX_Q4_K || scheme == RLX_Q6_K;
}

extern "C" int cu_qmm_launch(const void *x, int x_dtype, const void *w, int scheme, void *out, int64_t M, int64_t N,
                             int64_t K, cudaStream_t st) {
  if (M <= 0 || N <= 0) return cudaSuccess;
  if (M > CU_QMM_MAX_M || ((uintptr_t)w & 15)) return cudaErrorInvalidValue; /* w: a param's own allocation */
  switch (x_dtype) {
  case RLX_F32: return qmm_typed<float>(x, w, scheme, out, (int)M, N, K, st);
  case RLX_F64: return qmm_typed<double>(x, w, scheme, out, (int)M, N, K, st);
  case RLX_F16: return qmm_typed<__half>(x, w, scheme, out, (int)M, N, K, st);
  case RLX_BF16: return qmm_typed<__nv_bfloat16>(x, w, scheme, out, (int)M, N, K, st);
  default: return cudaErrorInvalidValue;
  }
}

/* ---------------------------------------------------------------- Dequantize */

template <int SCHEME>
__global__ void dequant_kernel(const uint8_t *w, void *dst, int dst_dtype, int64_t rows, int64_t K) {
  const int64_t chunks = K / 32, total = rows * chunks, step = (int64_t)gridDim.x * blockDim.x;
  float y[32];
  for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += step) {
    const int64_t r = t / chunks, c = t % chunks;
#pragma unroll
    for (int p = 0; p < 4; p++) chunk_decode8<SCHEME>(w + r * row_bytes(SCHEME, K), c, p, y + 8 * p);
    const int64_t base = r * K + c * 32;
#pragma unroll
    for (int l = 0; l < 32; l++) cu_st_f32(dst, dst_dtype, base + l, y[l]);
  }
}

/* Into BF16 (the prefill product's operand, lower_matmul.c): a thread a
 * quarter chunk (8 weights), stored as one 16-byte vector, so a warp
 * writes 512 contiguous bytes; the kernel above, a chunk a thread, stores
 * 2-byte elements 64 bytes apart across the warp. */
template <int SCHEME> __global__ void dequant_bf16_kernel(const uint8_t *w, uint4 *dst, int64_t rows, int64_t K) {
  const int64_t parts = K / 8, total = rows * parts, step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += step) {
    const int64_t r = t / parts, k8 = t % parts;
    float y[8];
    chunk_decode8<SCHEME>(w + r * row_bytes(SCHEME, K), k8 / 4, (int)(k8 % 4), y);
    union {
      __nv_bfloat162 h[4];
      uint4 v;
    } u;
#pragma unroll
    for (int i = 0; i < 4; i++) u.h[i] = __floats2bfloat162_rn(y[2 * i], y[2 * i + 1]);
    dst[t] = u.v; /* element 8t: row r, weight 8 k8 */
  }
}

/* F16/BF16 "dequantized" (DequantMatMul of a 16-bit weight at prefill
 * rows, under x of another dtype): widened, exactly; F32 (x of a BF16
 * prefill product): rounded to the destination's dtype. */
template <typename W> __global__ void widen_kernel(const W *w, void *dst, int dst_dtype, int64_t total) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step)
    cu_st_f32(dst, dst_dtype, i, cu_fl<W>::ld(w + i));
}

/* ggml's roundf(v) as int8 (Q8_0), saturated, NaN 0; and MIN(hi, (int8_t)v)
 * for v >= 0 (Q4_0): quant_blocks.c's round_int8 and trunc_level. */
__device__ __forceinline__ int q_round_int8(float v) {
  if (v != v) return 0;
  const float r = roundf(v);
  return r < -128.0f ? -128 : r > 127.0f ? 127 : (int)r;
}
__device__ __forceinline__ int q_trunc_level(float v, int hi) { return !(v >= 1.0f) ? 0 : v < (float)hi ? (int)v : hi; }

/* Float rows quantized into Q8_0 / Q4_0 blocks, a thread a block (a KV
 * cache's new rows: few blocks a step): ggml's quantize_row_q8_0_ref /
 * q4_0_ref as quant_blocks.c writes them, the same operations in the same
 * order, each rounded once (no product and sum contracted into one fused
 * multiply-add), so the bytes are the CPU's. */
template <int SCHEME> __global__ void quantize_kernel(const void *x, int x_dtype, uint8_t *out, int64_t blocks) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < blocks; i += step) {
    float v[32];
#pragma unroll
    for (int j = 0; j < 32; j++) v[j] = cu_ld_f32(x, x_dtype, i * 32 + j);
    uint8_t *b = out + i * (SCHEME == RLX_Q8_0 ? 34 : 18);
    float d;
    if (SCHEME == RLX_Q8_0) {
      float amax = 0.0f;
#pragma unroll
      for (int j = 0; j < 32; j++) amax = amax > fabsf(v[j]) ? amax : fabsf(v[j]);
      d = __fdiv_rn(amax, 127.0f);
      const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
#pragma unroll
      for (int j = 0; j < 32; j++) b[2 + j] = (uint8_t)q_round_int8(__fmul_rn(v[j], id));
    } else {
      float amax = 0.0f, max = 0.0f;
#pragma unroll
      for (int j = 0; j < 32; j++)
        if (amax < fabsf(v[j])) amax = fabsf(v[j]), max = v[j];
      d = __fdiv_rn(max, -8.0f);
      const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
#pragma unroll
      for (int j = 0; j < 16; j++) {
        const int lo = q_trunc_level(__fadd_rn(__fmul_rn(v[j], id), 8.5f), 15);
        const int hi = q_trunc_level(__fadd_rn(__fmul_rn(v[j + 16], id), 8.5f), 15);
        b[2 + j] = (uint8_t)(lo | hi << 4);
      }
    }
    *(unsigned short *)b = __half_as_ushort(__float2half_rn(d));
  }
}

extern "C" int cu_quantize_launch(const void *x, int x_dtype, void *dst, int dst_dtype, int64_t rows, int64_t K,
                                  cudaStream_t st) {
  const int64_t blocks = rows * (K / 32);
  if (blocks <= 0) return cudaSuccess;
  const unsigned b = cu_blocks(blocks, CU_THREADS);
  switch (dst_dtype) {
  case RLX_Q8_0: quantize_kernel<RLX_Q8_0><<<b, CU_THREADS, 0, st>>>(x, x_dtype, (uint8_t *)dst, blocks); break;
  case RLX_Q4_0: quantize_kernel<RLX_Q4_0><<<b, CU_THREADS, 0, st>>>(x, x_dtype, (uint8_t *)dst, blocks); break;
  default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

extern "C" int cu_dequant_launch(const void *w, int scheme, void *dst, int dst_dtype, int64_t rows, int64_t K,
                                 cudaStream_t st) {
  if (scheme == RLX_F16 || scheme == RLX_BF16 || scheme == RLX_F32) {
    const int64_t n = rows * K;
    if (n <= 0) return cudaSuccess;
    const unsigned b = cu_blocks(n, CU_THREADS);
    if (scheme == RLX_F32) widen_kernel<float><<<b, CU_THREADS, 0, st>>>((const float *)w, dst, dst_dtype, n);
    else if (scheme == RLX_F16) widen_kernel<__half><<<b, CU_THREADS, 0, st>>>((const __half *)w, dst, dst_dtype, n);
    else widen_kernel<__nv_bfloat16><<<b, CU_THREADS, 0, st>>>((const __nv_bfloat16 *)w, dst, dst_dtype, n);
    return cudaGetLastError();
  }
  const int64_t total = rows * (K / 32);
  if (total <= 0) return cudaSuccess;
  if ((uintptr_t)w & 15) return cudaErrorInvalidValue; /* w: a param's own allocation */
  const uint8_t *ww = (const uint8_t *)w;
  if (dst_dtype == RLX_BF16 && !((uintptr_t)dst & 15)) {
    const unsigned b8 = cu_blocks(total * 4, CU_THREADS);
    uint4 *d8 = (uint4 *)dst;
    switch (scheme) {
    case RLX_Q4_0: dequant_bf16_kernel<RLX_Q4_0><<<b8, CU_THREADS, 0, st>>>(ww, d8, rows, K); break;
    case RLX_Q4_1: dequant_bf16_kernel<RLX_Q4_1><<<b8, CU_THREADS, 0, st>>>(ww, d8, rows, K); break;
    case RLX_Q8_0: dequant_bf16_kernel<RLX_Q8_0><<<b8, CU_THREADS, 0, st>>>(ww, d8, rows, K); break;
    case RLX_Q4_K: dequant_bf16_kernel<RLX_Q4_K><<<b8, CU_THREADS, 0, st>>>(ww, d8, rows, K); break;
    case RLX_Q6_K: dequant_bf16_kernel<RLX_Q6_K><<<b8, CU_THREADS, 0, st>>>(ww, d8, rows, K); break;
    default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
  }
  const unsigned b = cu_blocks(total, CU_THREADS);
  switch (scheme) {
  case RLX_Q4_0: dequant_kernel<RLX_Q4_0><<<b, CU_THREADS, 0, st>>>(ww, dst, dst_dtype, rows, K); break;
  case RLX_Q4_1: dequant_kernel<RLX_Q4_1><<<b, CU_THREADS, 0, st>>>(ww, dst, dst_dtype, rows, K); break;
  case RLX_Q8_0: dequant_kernel<RLX_Q8_0><<<b, CU_THREADS, 0, st>>>(ww, dst, dst_dtype, rows, K); break;
  case RLX_Q4_K: dequant_kernel<RLX_Q4_K><<<b, CU_THREADS, 0, st>>>(ww, dst, dst_dtype, rows, K); break;
  case RLX_Q6_K: dequant_kernel<RLX_Q6_K><<<b, CU_THREADS, 0, st>>>(ww, dst, dst_dtype, rows, K); break;
  default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}
