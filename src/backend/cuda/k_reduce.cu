/* k_reduce.cu — Reduce, ArgMax, ArgMin, Cumsum, Softmax, LogSoftmax.
 *
 * Reduce and the arg reductions give each output element a group of
 * threads (a warp, or a whole block when there are few outputs or many
 * elements each) that strides over its reduced elements and combines
 * partial results; floats accumulate in double and integers in 64 bits
 * with wrap-around, as the CPU kernels (k_reduce.c). The arg reductions
 * keep the first index on ties and let the first NaN win (NumPy). */
#include "cu_common.cuh"

#include <math.h>

/* ---------------------------------------------------------------- helpers */

__device__ __forceinline__ int64_t kept_offset(const cu_reduce_args &a, int64_t o) {
  int64_t off = 0;
  for (int d = a.krank - 1; d >= 0; d--) {
    off += (o % a.kdims[d]) * a.kstride[d];
    o /= a.kdims[d];
  }
  return off;
}

__device__ __forceinline__ int64_t red_offset(const cu_reduce_args &a, int64_t r) {
  int64_t off = 0;
  for (int d = a.rrank - 1; d >= 0; d--) {
    off += (r % a.rdims[d]) * a.rstride[d];
    r /= a.rdims[d];
  }
  return off;
}

/* Combining two partial results of one group (float and integer forms). */
__device__ __forceinline__ double comb_f(int op, double x, double y) {
  switch (op) {
  case RLX_REDUCE_PROD: return x * y;
  case RLX_REDUCE_MAX: return (x != x || y != y) ? x + y : x > y ? x : y;
  case RLX_REDUCE_MIN: return (x != x || y != y) ? x + y : x < y ? x : y;
  default: return x + y;
  }
}
__device__ __forceinline__ long long comb_i(int op, long long x, long long y) {
  switch (op) {
  case RLX_REDUCE_PROD: return (long long)((unsigned long long)x * (unsigned long long)y);
  case RLX_REDUCE_MAX: return x > y ? x : y;
  case RLX_REDUCE_MIN: return x < y ? x : y;
  default: return (long long)((unsigned long long)x + (unsigned long long)y);
  }
}

/* Does (v, i) beat (bv, bi)? want_max; NaN wins; ties go to the smaller index. */
__device__ __forceinline__ bool arg_better_f(double v, long long i, double bv, long long bi, bool want_max) {
  bool vn = v != v, bn = bv != bv;
  if (vn || bn) return vn && (!bn || i < bi);
  if (v == bv) return i < bi;
  return want_max ? v > bv : v < bv;
}
__device__ __forceinline__ bool arg_better_i(long long v, long long i, long long bv, long long bi, bool want_max) {
  if (v == bv) return i < bi;
  return want_max ? v > bv : v < bv;
}

/* ---------------------------------------------------------------- Reduce / ArgMax / ArgMin */

/* GROUP threads per output element (32: a warp, or the whole block). */
template <int GROUP> __global__ void reduce_kernel(const __grid_constant__ cu_reduce_args a) {
  __shared__ double sf[CU_THREADS];
  __shared__ long long si[CU_THREADS];
  const int lane = threadIdx.x % GROUP;
  const int per_block = CU_THREADS / GROUP;
  const int64_t o = (int64_t)blockIdx.x * per_block + threadIdx.x / GROUP;
  const bool active = o < a.n_out;
  const bool is_float = cu_is_float(a.x_dtype);
  const int64_t base = active ? kept_offset(a, o) : 0;
  double f;
  long long iv, idx = -1;
  if (a.kind == CU_RED_REDUCE) {
    f = a.op == RLX_REDUCE_PROD ? 1.0 : a.op == RLX_REDUCE_MAX ? -INFINITY : a.op == RLX_REDUCE_MIN ? INFINITY : 0.0;
    iv = a.op == RLX_REDUCE_PROD ? 1 : a.op == RLX_REDUCE_MAX ? (-9223372036854775807LL - 1)
         : a.op == RLX_REDUCE_MIN ? 9223372036854775807LL : 0;
    for (int64_t r = lane; active && r < a.count; r += GROUP) {
      int64_t at = base + red_offset(a, r);
      if (is_float) f = comb_f(a.op, f, cu_ld_f(a.x, a.x_dtype, at));
      else iv = comb_i(a.op, iv, cu_ld_i(a.x, a.x_dtype, at));
    }
  } else {
    const bool want_max = a.kind == CU_RED_ARGMAX;
    f = 0;
    iv = 0;
    for (int64_t r = lane; active && r < a.count; r += GROUP) {
      int64_t at = base + red_offset(a, r);
      if (is_float) {
        double v = cu_ld_f(a.x, a.x_dtype, at);
        if (idx < 0 || arg_better_f(v, r, f, idx, want_max)) f = v, idx = r;
      } else {
        long long v = cu_ld_i(a.x, a.x_dtype, at);
        if (idx < 0 || arg_better_i(v, r, iv, idx, want_max)) iv = v, idx = r;
      }
    }
  }
  /* tree combine within the group through shared memory */
  sf[threadIdx.x] = f;
  si[threadIdx.x] = a.kind == CU_RED_REDUCE ? iv : idx;
  __shared__ long long sv[CU_THREADS];
  sv[threadIdx.x] = iv;
  __syncthreads();
  for (int w = GROUP / 2; w > 0; w /= 2) {
    if (lane < w) {
      int t = threadIdx.x, u = threadIdx.x + w;
      if (a.kind == CU_RED_REDUCE) {
        if (is_float) sf[t] = comb_f(a.op, sf[t], sf[u]);
        else si[t] = comb_i(a.op, si[t], si[u]);
      } else if (si[u] >= 0) {
        bool take = si[t] < 0 || (is_float ? arg_better_f(sf[u], si[u], sf[t], si[t], a.kind == CU_RED_ARGMAX)
                                           : arg_better_i(sv[u], si[u], sv[t], si[t], a.kind == CU_RED_ARGMAX));
        if (take) sf[t] = sf[u], sv[t] = sv[u], si[t] = si[u];
      }
    }
    __syncthreads();
  }
  if (!active || lane != 0) return;
  if (a.kind != CU_RED_REDUCE) {
    cu_st_i(a.out, a.out_dtype, o, si[threadIdx.x] < 0 ? 0 : si[threadIdx.x]);
  } else if (is_float) {
    double v = sf[threadIdx.x];
    cu_st_f(a.out, a.out_dtype, o, a.op == RLX_REDUCE_MEAN ? v / (double)a.count : v);
  } else {
    cu_st_i(a.out, a.out_dtype, o, si[threadIdx.x]);
  }
}

/* Cumsum: one thread per row, in order (the CPU's summation order). */
__global__ void cumsum_kernel(const __grid_constant__ cu_reduce_args a) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  const bool is_float = cu_is_float(a.x_dtype);
  for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < a.n_out; o += step) {
    int64_t base = kept_offset(a, o);
    double sum = 0.0;
    unsigned long long isum = 0;
    for (int64_t s = 0; s < a.count; s++) {
      int64_t j = a.reverse ? a.count - 1 - s : s, at = base + j * a.cum_stride;
      if (a.exclusive) {
        if (is_float) cu_st_f(a.out, a.out_dtype, at, sum);
        else cu_st_i(a.out, a.out_dtype, at, (long long)isum);
      }
      if (is_float) sum += cu_ld_f(a.x, a.x_dtype, at);
      else isum += (unsigned long long)cu_ld_i(a.x, a.x_dtype, at);
      if (!a.exclusive) {
        if (is_float) cu_st_f(a.out, a.out_dtype, at, sum);
        else cu_st_i(a.out, a.out_dtype, at, (long long)isum);
      }
    }
  }
}

extern "C" int cu_reduce_launch(const cu_reduce_args *a, cudaStream_t st) {
  if (a->n_out <= 0) return cudaSuccess;
  if (a->kind == CU_RED_CUMSUM) {
    cumsum_kernel<<<cu_blocks(a->n_out, CU_THREADS), CU_THREADS, 0, st>>>(*a);
  } else if (a->count >= 4096 || a->n_out < 512) {
    reduce_kernel<CU_THREADS><<<(unsigned)a->n_out, CU_THREADS, 0, st>>>(*a);
  } else {
    int per = CU_THREADS / 32;
    reduce_kernel<32><<<(unsigned)((a->n_out + per - 1) / per), CU_THREADS, 0, st>>>(*a);
  }
  return cudaGetLastError();
}

/* ---------------------------------------------------------------- Softmax / LogSoftmax */

/* One block per row; T is the compute type (double for F64). The max
 * ignores NaN (as the CPU's x > m), after which a NaN poisons the sum and
 * so the whole row, as there. */
template <typename T>
__global__ void softmax_kernel(const void *x, void *out, int dtype, int64_t len, int64_t inner, int log_softmax) {
  __shared__ T scratch[32];
  const int64_t row = blockIdx.x, o = row / inner, i = row % inner;
  const int64_t base = o * len * inner + i;
  T m = -INFINITY;
  for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
    T v = cu_acc<T>::ld(x, dtype, base + j * inner);
    m = v > m ? v : m;
  }
  m = cu_block_max<T>(m, scratch, (T)-INFINITY);
  T s = 0;
  for (int64_t j = threadIdx.x; j < len; j += blockDim.x) s += cu_exp(cu_acc<T>::ld(x, dtype, base + j * inner) - m);
  s = cu_block_sum<T>(s, scratch);
  const T log_s = cu_log(s);
  for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
    T v = cu_acc<T>::ld(x, dtype, base + j * inner);
    /* (v - m) - log(s), not v - (m + log(s)): exact where v is near m, even for large |v| */
    cu_acc<T>::st(out, dtype, base + j * inner, log_softmax ? (v - m) - log_s : cu_exp(v - m) / s);
  }
}

extern "C" int cu_softmax_launch(const void *x, void *out, int dtype, int64_t outer, int64_t len, int64_t inner,
                                 int log_softmax, cudaStream_t st) {
  int64_t rows = outer * inner;
  if (rows <= 0 || len <= 0) return cudaSuccess;
  if (rows > 0x7fffffff) return cudaErrorInvalidValue;
  int threads = len >= 1024 ? 256 : len >= 256 ? 128 : 32;
  if (dtype == RLX_F64) softmax_kernel<double><<<(unsigned)rows, threads, 0, st>>>(x, out, dtype, len, inner, log_softmax);
  else softmax_kernel<float><<<(unsigned)rows, threads, 0, st>>>(x, out, dtype, len, inner, log_softmax);
  return cudaGetLastError();
}
