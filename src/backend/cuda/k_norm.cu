/* k_norm.cu — LayerNorm, RmsNorm and the fused residual forms
 * (FusedResidualLN / FusedResidualRmsNorm), and Rope.
 *
 * Norms: one block per row; the row value x (+ res) (+ bias) is recomputed
 * from the inputs in each pass instead of being stored (the re-reads hit
 * L1/L2, the output is written once). Layer norm takes the biased variance
 * in a second pass over (v - mean), as the CPU's two-pass moments. F64
 * computes in double, the rest in float. */
#include "cu_common.cuh"

template <typename T> __device__ __forceinline__ T norm_value(const cu_norm_args &a, int64_t at, int64_t j) {
  T v = cu_acc<T>::ld(a.x, a.dtype, at);
  if (a.res) v += cu_acc<T>::ld(a.res, a.dtype, at);
  if (a.bias) v += cu_acc<T>::ld(a.bias, a.dtype, j);
  return v;
}

template <typename T> __global__ void norm_kernel(const __grid_constant__ cu_norm_args a) {
  __shared__ T scratch[32];
  const int64_t base = (int64_t)blockIdx.x * a.len;
  T s = 0;
  for (int64_t j = threadIdx.x; j < a.len; j += blockDim.x) {
    T v = norm_value<T>(a, base + j, j);
    s += a.rms ? v * v : v;
  }
  s = cu_block_sum<T>(s, scratch);
  T mean = 0, r;
  if (a.rms) {
    r = (T)1 / cu_sqrt(s / (T)a.len + (T)a.eps);
  } else {
    mean = s / (T)a.len;
    T q = 0;
    for (int64_t j = threadIdx.x; j < a.len; j += blockDim.x) {
      T d = norm_value<T>(a, base + j, j) - mean;
      q += d * d;
    }
    q = cu_block_sum<T>(q, scratch);
    r = (T)1 / cu_sqrt(q / (T)a.len + (T)a.eps);
  }
  for (int64_t j = threadIdx.x; j < a.len; j += blockDim.x) {
    T v = norm_value<T>(a, base + j, j);
    T y = (v - mean) * r * cu_acc<T>::ld(a.gamma, a.dtype, j) + cu_acc<T>::ld(a.beta, a.dtype, j);
    cu_acc<T>::st(a.out, a.dtype, base + j, y);
  }
}

extern "C" int cu_norm_launch(const cu_norm_args *a, cudaStream_t st) {
  if (a->rows <= 0 || a->len <= 0) return cudaSuccess;
  if (a->rows > 0x7fffffff) return cudaErrorInvalidValue;
  /* (a variant holding the row in registers, one read instead of two or
   * three, measured slower on the H200 for 576 and 4096-element rows) */
  int threads = a->len >= 2048 ? 512 : a->len >= 512 ? 256 : a->len >= 128 ? 128 : 32;
  if (a->dtype == RLX_F64) norm_kernel<double><<<(unsigned)a->rows, threads, 0, st>>>(*a);
  else norm_kernel<float><<<(unsigned)a->rows, threads, 0, st>>>(*a);
  return cudaGetLastError();
}

/* ---------------------------------------------------------------- Rope */

/* One thread per (b, s, pair i < n_rot/2) and per dim past n_rot, looping
 * over the heads: the angle of (position, i) is computed once for all
 * heads, in double from positions (large positions need it: theta reaches
 * 1e5 rad), or read from the tables as given. */
__global__ void rope_kernel(const __grid_constant__ cu_rope_args a) {
  const int64_t half = a.n_rot / 2, pass = a.D - a.n_rot, per_pos = half + pass;
  const int64_t total = a.B * a.S * per_pos;
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += step) {
    const int64_t e = t % per_pos, bs = t / per_pos; /* bs = b*S + s */
    const int64_t s = bs % a.S, b = bs / a.S;
    const int64_t first = bs * a.H * a.D;
    if (e >= half) { /* a dim past n_rot: copied */
      const int64_t d = a.n_rot + (e - half);
      for (int64_t h = 0; h < a.H; h++) cu_st_f(a.out, a.dtype, first + h * a.D + d, cu_ld_f(a.x, a.dtype, first + h * a.D + d));
      continue;
    }
    const int64_t i = e;
    double c, sn;
    if (a.pos) {
      long long p = cu_ld_i(a.pos, a.pos_dtype, a.pos_batched ? b * a.S + s : s);
      double theta = (double)p * pow(a.base, -2.0 * (double)i / (double)a.n_rot) / a.scale;
      sincos(theta, &sn, &c);
    } else {
      int64_t at = (a.table_batched ? b * a.S * half : 0) + s * half + i;
      c = cu_ld_f(a.cos, a.table_dtype, at);
      sn = cu_ld_f(a.sin, a.table_dtype, at);
    }
    const int64_t i0 = a.neox ? i : 2 * i, i1 = a.neox ? i + half : 2 * i + 1;
    const float fc = (float)c, fs = (float)sn;
    for (int64_t h = 0; h < a.H; h++) {
      const int64_t row = first + h * a.D;
      if (a.dtype == RLX_F64) {
        double x0 = cu_ld_f(a.x, a.dtype, row + i0), x1 = cu_ld_f(a.x, a.dtype, row + i1);
        cu_st_f(a.out, a.dtype, row + i0, x0 * c - x1 * sn);
        cu_st_f(a.out, a.dtype, row + i1, x0 * sn + x1 * c);
      } else {
        float x0 = cu_ld_f32(a.x, a.dtype, row + i0), x1 = cu_ld_f32(a.x, a.dtype, row + i1);
        cu_st_f32(a.out, a.dtype, row + i0, x0 * fc - x1 * fs);
        cu_st_f32(a.out, a.dtype, row + i1, x0 * fs + x1 * fc);
      }
    }
  }
}

extern "C" int cu_rope_launch(const cu_rope_args *a, cudaStream_t st) {
  int64_t total = a->B * a->S * (a->D - a->n_rot / 2);
  if (total <= 0 || a->H <= 0) return cudaSuccess;
  rope_kernel<<<cu_blocks(total, CU_THREADS), CU_THREADS, 0, st>>>(*a);
  return cudaGetLastError();
}
