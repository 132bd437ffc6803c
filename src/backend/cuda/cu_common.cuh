/* cu_common.cuh — device helpers shared by the kernels: typed element
 * loads and stores with the CPU backend's conversion rules (cpu_util.c),
 * launch sizing and warp reductions.
 *
 * Conversions: floats to float types round to nearest even once (from
 * double directly, as the CPU's round-to-odd trick does); floats to
 * integers truncate toward zero and saturate (NaN -> 0); to BOOL is != 0;
 * integers to integers wrap to the width. */
#ifndef RLX_CU_COMMON_CUH
#define RLX_CU_COMMON_CUH

#include "cu_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <utility>

#define CU_THREADS 256

static inline unsigned cu_blocks(int64_t work, int threads) {
  int64_t b = (work + threads - 1) / threads;
  /* a grid-stride loop covers the rest: enough blocks to fill the chip */
  return (unsigned)(b < 1 ? 1 : b > 132 * 32 ? 132 * 32 : b);
}

__device__ __forceinline__ int cu_is_float(int dt) {
  return dt == RLX_F32 || dt == RLX_F16 || dt == RLX_BF16 || dt == RLX_F64;
}

/* Truncate toward zero and saturate into the integer dtype; NaN -> 0. */
__device__ __forceinline__ long long cu_f2i_sat(double v, int dt) {
  if (v != v) return 0;
  double lo, hi;
  switch (dt) {
  case RLX_I8: lo = -128.0, hi = 127.0; break;
  case RLX_U8: lo = 0.0, hi = 255.0; break;
  case RLX_I32: lo = -2147483648.0, hi = 2147483647.0; break;
  default: /* I64 */
    if (v <= -9223372036854775808.0) return (long long)(-9223372036854775807LL - 1);
    if (v >= 9223372036854775807.0) return 9223372036854775807LL;
    return (long long)v;
  }
  if (v <= lo) return (long long)lo;
  if (v >= hi) return (long long)hi;
  return (long long)v;
}

/* An int64 wrapped to the width of an integer dtype (BOOL: != 0). */
__device__ __forceinline__ long long cu_wrap_i(long long v, int dt) {
  switch (dt) {
  case RLX_I8: return (long long)(int8_t)(uint8_t)(unsigned long long)v;
  case RLX_U8: return (long long)(uint8_t)(unsigned long long)v;
  case RLX_I32: return (long long)(int32_t)(uint32_t)(unsigned long long)v;
  case RLX_BOOL: return v != 0;
  default: return v;
  }
}

/* Element i of p as double (floats, integers, bool). */
__device__ __forceinline__ double cu_ld_f(const void *p, int dt, int64_t i) {
  switch (dt) {
  case RLX_F32: return ((const float *)p)[i];
  case RLX_F16: return __half2float(((const __half *)p)[i]);
  case RLX_BF16: return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
  case RLX_F64: return ((const double *)p)[i];
  case RLX_I8: return ((const int8_t *)p)[i];
  case RLX_U8: return ((const uint8_t *)p)[i];
  case RLX_I32: return ((const int32_t *)p)[i];
  case RLX_I64: return (double)((const long long *)p)[i];
  case RLX_BOOL: return ((const uint8_t *)p)[i] != 0;
  default: return 0;
  }
}

/* Element i as float: for the kernels that compute F16/BF16/F32 in F32. */
__device__ __forceinline__ float cu_ld_f32(const void *p, int dt, int64_t i) {
  switch (dt) {
  case RLX_F32: return ((const float *)p)[i];
  case RLX_F16: return __half2float(((const __half *)p)[i]);
  case RLX_BF16: return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
  default: return (float)cu_ld_f(p, dt, i);
  }
}

/* Element i as int64: integers exact, floats truncated and saturated. */
__device__ __forceinline__ long long cu_ld_i(const void *p, int dt, int64_t i) {
  switch (dt) {
  case RLX_I8: return ((const int8_t *)p)[i];
  case RLX_U8: return ((const uint8_t *)p)[i];
  case RLX_I32: return ((const int32_t *)p)[i];
  case RLX_I64: return ((const long long *)p)[i];
  case RLX_BOOL: return ((const uint8_t *)p)[i] != 0;
  default: return cu_f2i_sat(cu_ld_f(p, dt, i), RLX_I64);
  }
}

/* Store v with conversion to dt (rounding once for float types). */
__device__ __forceinline__ void cu_st_f(void *p, int dt, int64_t i, double v) {
  switch (dt) {
  case RLX_F32: ((float *)p)[i] = (float)v; break;
  case RLX_F16: ((__half *)p)[i] = __double2half(v); break;
  case RLX_BF16: ((__nv_bfloat16 *)p)[i] = __double2bfloat16(v); break;
  case RLX_F64: ((double *)p)[i] = v; break;
  case RLX_I8: ((int8_t *)p)[i] = (int8_t)cu_f2i_sat(v, RLX_I8); break;
  case RLX_U8: ((uint8_t *)p)[i] = (uint8_t)cu_f2i_sat(v, RLX_U8); break;
  case RLX_I32: ((int32_t *)p)[i] = (int32_t)cu_f2i_sat(v, RLX_I32); break;
  case RLX_I64: ((long long *)p)[i] = cu_f2i_sat(v, RLX_I64); break;
  case RLX_BOOL: ((uint8_t *)p)[i] = v != 0; break;
  default: break;
  }
}

/* Store a float already computed in F32 (F16/BF16/F32 outputs round from it). */
__device__ __forceinline__ void cu_st_f32(void *p, int dt, int64_t i, float v) {
  switch (dt) {
  case RLX_F32: ((float *)p)[i] = v; break;
  case RLX_F16: ((__half *)p)[i] = __float2half_rn(v); break;
  case RLX_BF16: ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v); break;
  default: cu_st_f(p, dt, i, (double)v); break;
  }
}

/* Store an int64 (integers wrap; float types get the rounded value). */
__device__ __forceinline__ void cu_st_i(void *p, int dt, int64_t i, long long v) {
  switch (dt) {
  case RLX_I8: ((int8_t *)p)[i] = (int8_t)cu_wrap_i(v, dt); break;
  case RLX_U8: ((uint8_t *)p)[i] = (uint8_t)cu_wrap_i(v, dt); break;
  case RLX_I32: ((int32_t *)p)[i] = (int32_t)cu_wrap_i(v, dt); break;
  case RLX_I64: ((long long *)p)[i] = v; break;
  case RLX_BOOL: ((uint8_t *)p)[i] = v != 0; break;
  default: cu_st_f(p, dt, i, (double)v); break;
  }
}

/* Compute-type selection for the row kernels: F64 in double, the rest in float. */
template <typename T> struct cu_acc;
template <> struct cu_acc<float> {
  static __device__ __forceinline__ float ld(const void *p, int dt, int64_t i) { return cu_ld_f32(p, dt, i); }
  static __device__ __forceinline__ void st(void *p, int dt, int64_t i, float v) { cu_st_f32(p, dt, i, v); }
};
template <> struct cu_acc<double> {
  static __device__ __forceinline__ double ld(const void *p, int dt, int64_t i) { return cu_ld_f(p, dt, i); }
  static __device__ __forceinline__ void st(void *p, int dt, int64_t i, double v) { cu_st_f(p, dt, i, v); }
};

__device__ __forceinline__ float cu_exp(float x) { return expf(x); }
__device__ __forceinline__ double cu_exp(double x) { return exp(x); }
__device__ __forceinline__ float cu_log(float x) { return logf(x); }
__device__ __forceinline__ double cu_log(double x) { return log(x); }
__device__ __forceinline__ float cu_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double cu_sqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float cu_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double cu_tanh(double x) { return tanh(x); }

/* Typed float elements for the kernels that compute F16/BF16/F32 in F32
 * (F64 in F64): acc is the compute type, ld widens, st rounds once to
 * nearest even, round is st then ld (the value a store would keep). */
template <typename E> struct cu_fl;
template <> struct cu_fl<float> {
  typedef float acc;
  static __device__ __forceinline__ float ld(const float *p) { return *p; }
  static __device__ __forceinline__ void st(float *p, float v) { *p = v; }
  static __device__ __forceinline__ float round(float v) { return v; }
};
template <> struct cu_fl<double> {
  typedef double acc;
  static __device__ __forceinline__ double ld(const double *p) { return *p; }
  static __device__ __forceinline__ void st(double *p, double v) { *p = v; }
  static __device__ __forceinline__ double round(double v) { return v; }
};
template <> struct cu_fl<__half> {
  typedef float acc;
  static __device__ __forceinline__ float ld(const __half *p) { return __half2float(*p); }
  static __device__ __forceinline__ void st(__half *p, float v) { *p = __float2half_rn(v); }
  static __device__ __forceinline__ float round(float v) { return __half2float(__float2half_rn(v)); }
};
template <> struct cu_fl<__nv_bfloat16> {
  typedef float acc;
  static __device__ __forceinline__ float ld(const __nv_bfloat16 *p) { return __bfloat162float(*p); }
  static __device__ __forceinline__ void st(__nv_bfloat16 *p, float v) { *p = __float2bfloat16_rn(v); }
  static __device__ __forceinline__ float round(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }
};

/* Rope's rotation of the pair (x0, x1) by the angle of cosine c and sine
 * s: member 0 is x0 c - x1 s, member 1 x0 s + x1 c, each operation
 * rounded (no contraction into an FMA), so that every kernel that rotates
 * (the rope kernels, the GEMV that applies a Rope) gives the same bits. */
__device__ __forceinline__ float cu_rope_rotate(float x0, float x1, float c, float s, int member) {
  return member ? __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c)) : __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
}

/* sin and cos of angle theta below F64: theta in double (positions make it
 * large), reduced to about [-pi, pi] (a multiply, not a division: a
 * quotient rounded the other way leaves it a hair outside), then float. */
__device__ __forceinline__ void cu_rope_sincos(double theta, float *sn, float *cs) {
  const double TWO_PI = 6.283185307179586476925, INV_TWO_PI = 0.15915494309189533577;
  sincosf((float)(theta - rint(theta * INV_TWO_PI) * TWO_PI), sn, cs);
}

/* Where a product that applies a Rope (cu_gemv_rope) puts its unit n
 * (an output column in the order the launch computes them): column
 * cu_rope_col(n), so that the two columns of a rotated pair are units 2p
 * and 2p + 1 of a head (adjacent warps of one block in the float GEMV,
 * adjacent rows of one warp in the integer GEMV's direct kernels): with
 * neox, pair i is columns (i, i + n_rot / 2), else (2i, 2i + 1), which are
 * the units themselves; dims past n_rot keep their column. */
__device__ __forceinline__ int64_t cu_rope_col(const cu_gemv_rope &r, int64_t n) {
  const int e = (int)n % (int)r.D; /* a segment's columns fit an int (cu_gemv_rope_fits, cu_qmv_rope_fits) */
  if (!r.neox || e >= r.n_rot) return n;
  return n - e + e / 2 + (e & 1) * (r.n_rot / 2);
}

/* The cosine and sine of pair i at row m (= b * S + s) of a Rope that a
 * product applies as it stores (cu_gemv_rope): from its tables, or from
 * the position as the Rope kernel turns it (the pair's frequency in
 * double here, where the Rope kernel's comes from the lowering: the
 * same to an ulp of a double). */
__device__ __forceinline__ void cu_rope_cos_sin(const cu_gemv_rope &r, int64_t m, int64_t i, float *c, float *s) {
  const int64_t half = r.n_rot / 2;
  if (r.cos) {
    const int64_t at = (r.table_batched ? m / r.S * r.S * half : 0) + m % r.S * half + i;
    *c = cu_ld_f32(r.cos, r.table_dtype, at), *s = cu_ld_f32(r.sin, r.table_dtype, at);
    return;
  }
  const long long p = cu_ld_i(r.pos, r.pos_dtype, r.pos_batched ? m : m % r.S);
  cu_rope_sincos((double)p * (pow(r.base, -2.0 * (double)i / (double)r.n_rot) / r.scale), s, c);
}

/* 16 bytes of E at p (16-byte aligned) widened to float / rounded from
 * float (cu_unpack16: of 16 bytes loaded already): 8 elements of
 * F16/BF16, 4 of F32. One 16-byte access: the
 * memory-bound kernels reach copy bandwidth only with these. */
template <typename E> __device__ __forceinline__ void cu_unpack16(const uint4 &u, float *v) {
  const E *e = (const E *)&u;
#pragma unroll
  for (int k = 0; k < 16 / (int)sizeof(E); k++) v[k] = cu_fl<E>::ld(e + k);
}
/* (global memory only: a read-only cached load) */
template <typename E> __device__ __forceinline__ void cu_ld16(const E *p, float *v) { cu_unpack16<E>(__ldg((const uint4 *)p), v); }
/* 16 bytes of global memory read once (a weight streamed by a product):
 * through L2 only, leaving L1 to the data the block rereads. */
__device__ __forceinline__ uint4 cu_ld16_stream(const void *p) {
  uint4 u;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w)
      : "l"(p));
  return u;
}
template <typename E> __device__ __forceinline__ void cu_st16(E *p, const float *v) {
  uint4 u;
  E *e = (E *)&u;
#pragma unroll
  for (int k = 0; k < 16 / (int)sizeof(E); k++) cu_fl<E>::st(e + k, v[k]);
  *(uint4 *)p = u;
}

/* Activations with the CPU backend's formulas (k_elementwise.c), shared by
 * the elementwise interpreter and the product epilogues. */
template <typename T> __device__ __forceinline__ T cu_sigmoid(T x) {
  if (x >= (T)0) return (T)1 / ((T)1 + cu_exp(-x));
  T e = cu_exp(x);
  return e / ((T)1 + e);
}

__device__ __forceinline__ float cu_erf(float x) { return erff(x); }
__device__ __forceinline__ double cu_erf(double x) { return erf(x); }
__device__ __forceinline__ float cu_log1p(float x) { return log1pf(x); }
__device__ __forceinline__ double cu_log1p(double x) { return log1p(x); }
__device__ __forceinline__ float cu_rint(float x) { return rintf(x); }
__device__ __forceinline__ double cu_rint(double x) { return rint(x); }
__device__ __forceinline__ float cu_sin(float x) { return sinf(x); }
__device__ __forceinline__ double cu_sin(double x) { return sin(x); }
__device__ __forceinline__ float cu_cos(float x) { return cosf(x); }
__device__ __forceinline__ double cu_cos(double x) { return cos(x); }

template <typename T> __device__ T cu_act(int act, T x, T alpha) {
  const T SQRT1_2 = (T)0.70710678118654752440, SQRT_2_OVER_PI = (T)0.79788456080286535588;
  switch (act) {
  case RLX_ACT_GELU: return (T)0.5 * x * ((T)1 + cu_erf(x * SQRT1_2));
  case RLX_ACT_GELU_TANH: return (T)0.5 * x * ((T)1 + cu_tanh(SQRT_2_OVER_PI * (x + (T)0.044715 * x * x * x)));
  case RLX_ACT_SILU: return x * cu_sigmoid(x);
  case RLX_ACT_RELU: return x < (T)0 ? (T)0 : x;
  case RLX_ACT_LEAKY_RELU: return x < (T)0 ? alpha * x : x;
  case RLX_ACT_SIGMOID: return cu_sigmoid(x);
  case RLX_ACT_TANH: return cu_tanh(x);
  case RLX_ACT_EXP: return cu_exp(x);
  case RLX_ACT_LOG: return cu_log(x);
  case RLX_ACT_SQRT: return cu_sqrt(x);
  case RLX_ACT_RSQRT: return (T)1 / cu_sqrt(x);
  case RLX_ACT_NEG: return -x;
  case RLX_ACT_ABS: return x < (T)0 ? -x : x == (T)0 ? (T)0 : x;
  case RLX_ACT_SIN: return cu_sin(x);
  case RLX_ACT_COS: return cu_cos(x);
  case RLX_ACT_ERF: return cu_erf(x);
  case RLX_ACT_SOFTPLUS: return x > (T)0 ? x + cu_log1p(cu_exp(-x)) : cu_log1p(cu_exp(x));
  case RLX_ACT_ROUND: return cu_rint(x);
  case RLX_ACT_SIGN: return x > (T)0 ? (T)1 : x < (T)0 ? (T)-1 : x;
  case RLX_ACT_RECIPROCAL: return (T)1 / x;
  case RLX_ACT_SQUARE: return x * x;
  default: return x;
  }
}

/* silu in F32: as the elementwise kernels compute it, or (FAST, for
 * F16/BF16 results) with the special-function unit's exponential and
 * reciprocal: errors of a few F32 ulps, far below the 16-bit rounding,
 * and the kernel stays at memory speed. */
template <bool FAST> __device__ __forceinline__ float cu_silu_f32(float x) {
  if (!FAST) return cu_act<float>(RLX_ACT_SILU, x, 0.f);
  return x * __frcp_rn(1.f + __expf(-x));
}

template <typename T> __device__ __forceinline__ T cu_warp_sum(T v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
template <typename T> __device__ __forceinline__ T cu_warp_max(T v) {
  for (int o = 16; o > 0; o /= 2) {
    T u = __shfl_xor_sync(0xffffffffu, v, o);
    v = u > v ? u : v;
  }
  return v;
}

/* Sum over the block (blockDim.x a multiple of 32, <= 1024); every thread
 * gets the result. scratch: 32 entries of shared memory. */
template <typename T> __device__ T cu_block_sum(T v, T *scratch) {
  v = cu_warp_sum(v);
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T r = lane < nw ? scratch[lane] : (T)0;
  return cu_warp_sum(r);
}
template <typename T> __device__ T cu_block_max(T v, T *scratch, T lowest) {
  v = cu_warp_max(v);
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T r = lane < nw ? scratch[lane] : lowest;
  return cu_warp_max(r);
}

/* Records the first data error of a run. */
__device__ __forceinline__ void cu_raise(cu_error *e, int code, int node, long long value,
                                         long long element, long long limit) {
  if (atomicCAS(&e->code, 0, -1) == 0) {
    e->node = node;
    e->value = value;
    e->element = element;
    e->limit = limit;
    __threadfence();
    atomicExch(&e->code, code);
  }
}

/* Bytes of an element of the float dtypes the 16-byte vector paths take
 * (F32 4, F16 / BF16 2); 0 for the others. */
static inline int cu_float_bytes(int dtype) {
  return dtype == RLX_F32 ? 4 : dtype == RLX_F16 || dtype == RLX_BF16 ? 2 : 0;
}

/* Whether p may be read by 16-byte vector loads (a null pointer may: it is
 * never read). */
static inline int cu_aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

/* Asynchronous 16-byte copies global -> shared (sm_80+): a streaming
 * kernel keeps a whole stage of loads in flight per warp without holding
 * them in registers. cu_cp_async_wait<N>: all but the N most recent
 * committed groups of this thread have landed (then a barrier makes them
 * visible to the other threads). */
__device__ __forceinline__ void cu_cp_async16(void *smem, const void *gmem) {
  const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cu_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cu_cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

/* Programmatic dependent launch (sm_90): a kernel launched with
 * cu_launch(..., pdl = 1) may start while the kernel before it in the
 * stream still runs, once that one has called cu_pdl_trigger (or ended);
 * it must call cu_pdl_wait before reading anything the earlier kernels
 * wrote (every thread that reads, and before it ends: the wait is what
 * orders the chain). Both are no-ops in a kernel launched without it. */
__device__ __forceinline__ void cu_pdl_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
__device__ __forceinline__ void cu_pdl_trigger() { asm volatile("griddepcontrol.launch_dependents;\n" ::); }
/* The start of a kernel in a chain of dependent launches (a decode step:
 * norm, products, rope, cache writes, attention, ...): wait for the kernel
 * before, then let the next one launch, so that its launch is spent while
 * this one runs and it starts the moment this one ends. Triggering before
 * the wait let the whole chain launch ahead, every kernel's blocks holding
 * multiprocessors while they waited: the bf16 decode step of the 8B shape
 * went from 5.5 to 6.9 ms. */
__device__ __forceinline__ void cu_pdl_chain() {
  cu_pdl_wait();
  cu_pdl_trigger();
}
/* A launch's configuration: pdl as above; cluster > 1: thread block
 * clusters of that many blocks along x (sm_90: their shared memory is one
 * space, cooperative_groups::this_cluster()). at: room for the attributes. */
static inline cudaLaunchConfig_t cu_launch_config(dim3 grid, dim3 block, size_t smem, cudaStream_t st, int pdl,
                                                  int cluster, cudaLaunchAttribute at[2]) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = st, cfg.attrs = at;
  if (pdl) {
    at[cfg.numAttrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[cfg.numAttrs++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster > 1) {
    at[cfg.numAttrs].id = cudaLaunchAttributeClusterDimension;
    at[cfg.numAttrs].val.clusterDim.x = (unsigned)cluster;
    at[cfg.numAttrs].val.clusterDim.y = at[cfg.numAttrs].val.clusterDim.z = 1;
    cfg.numAttrs++;
  }
  return cfg;
}
template <typename... P, typename... A>
static cudaError_t cu_launch_cluster(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t st,
                                     int pdl, int cluster, A &&...args) {
  cudaLaunchAttribute at[2];
  const cudaLaunchConfig_t cfg = cu_launch_config(grid, block, smem, st, pdl, cluster, at);
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<A>(args)...);
}
template <typename... P, typename... A>
static cudaError_t cu_launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t st, int pdl,
                             A &&...args) {
  return cu_launch_cluster(kernel, grid, block, smem, st, pdl, 1, std::forward<A>(args)...);
}

#endif /* RLX_CU_COMMON_CUH */
