/* k_spatial.cu — Pool, Resize and GroupNorm over NCHW planes (cu_kernels.h
 * says what each computes). F32/F16/BF16 elements, arithmetic in F32;
 * the convolutions themselves are cuDNN's (cuda_conv.c). */
#include "cu_common.cuh"

/* One thread an output element; the window's bounds clipped to x as the
 * CPU kernel clips them (k_conv.c), so avg's divisor is the same. */
__global__ void pool_kernel(const __grid_constant__ cu_pool_args a) {
  const int64_t total = a.planes * a.oh * a.ow;
  for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < total; o += (int64_t)gridDim.x * blockDim.x) {
    const int64_t ow = o % a.ow, oh = o / a.ow % a.oh, p = o / (a.ow * a.oh);
    const int64_t h0 = oh * a.sh - a.ph, w0 = ow * a.sw - a.pw;
    const int64_t kh0 = h0 < 0 ? -h0 : 0, kh1 = a.ih - h0 < a.kh ? a.ih - h0 : a.kh;
    const int64_t kw0 = w0 < 0 ? -w0 : 0, kw1 = a.iw - w0 < a.kw ? a.iw - w0 : a.kw;
    const int64_t base = p * a.ih * a.iw;
    float acc = a.is_max ? -INFINITY : 0.f;
    bool nan = false;
    for (int64_t kh = kh0; kh < kh1; kh++) {
      const int64_t row = base + (h0 + kh) * a.iw + w0;
      for (int64_t kw = kw0; kw < kw1; kw++) {
        const float v = cu_ld_f32(a.x, a.dtype, row + kw);
        if (a.is_max) {
          acc = v > acc ? v : acc;
          nan |= v != v;
        } else {
          acc += v;
        }
      }
    }
    if (a.is_max && nan) acc = NAN;
    if (!a.is_max) acc /= (float)(a.count_include_pad ? a.kh * a.kw : (kh1 - kh0) * (kw1 - kw0));
    cu_st_f32(a.y, a.dtype, o, acc);
  }
}

extern "C" int cu_pool_launch(const cu_pool_args *a, cudaStream_t st) {
  const int64_t total = a->planes * a->oh * a->ow;
  if (total <= 0) return cudaSuccess;
  pool_kernel<<<cu_blocks(total, CU_THREADS), CU_THREADS, 0, st>>>(*a);
  return cudaGetLastError();
}

/* Bilinear source coordinate of output index dst (torch's
 * area_pixel_compute_source_index), in double as the CPU computes it. */
__device__ __forceinline__ double resize_src(int64_t dst, int64_t in, int64_t out, int align_corners) {
  if (align_corners) return out > 1 ? (double)dst * (double)(in - 1) / (double)(out - 1) : 0.0;
  const double s = ((double)dst + 0.5) * (double)in / (double)out - 0.5;
  return s < 0 ? 0 : s;
}

__global__ void resize_kernel(const __grid_constant__ cu_resize_args a) {
  const int64_t total = a.planes * a.oh * a.ow;
  for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < total; o += (int64_t)gridDim.x * blockDim.x) {
    const int64_t j = o % a.ow, i = o / a.ow % a.oh, p = o / (a.ow * a.oh);
    const int64_t base = p * a.ih * a.iw;
    if (!a.bilinear) {
      cu_st_f32(a.y, a.dtype, o, cu_ld_f32(a.x, a.dtype, base + (i * a.ih / a.oh) * a.iw + j * a.iw / a.ow));
      continue;
    }
    const double sy = resize_src(i, a.ih, a.oh, a.align_corners), sx = resize_src(j, a.iw, a.ow, a.align_corners);
    const int64_t y0 = (int64_t)sy, x0 = (int64_t)sx;
    const int64_t y1 = y0 < a.ih - 1 ? y0 + 1 : y0, x1 = x0 < a.iw - 1 ? x0 + 1 : x0;
    const float ly = (float)(sy - (double)y0), lx = (float)(sx - (double)x0);
    const float v00 = cu_ld_f32(a.x, a.dtype, base + y0 * a.iw + x0), v01 = cu_ld_f32(a.x, a.dtype, base + y0 * a.iw + x1);
    const float v10 = cu_ld_f32(a.x, a.dtype, base + y1 * a.iw + x0), v11 = cu_ld_f32(a.x, a.dtype, base + y1 * a.iw + x1);
    cu_st_f32(a.y, a.dtype, o, (1 - ly) * ((1 - lx) * v00 + lx * v01) + ly * ((1 - lx) * v10 + lx * v11));
  }
}

extern "C" int cu_resize_launch(const cu_resize_args *a, cudaStream_t st) {
  const int64_t total = a->planes * a->oh * a->ow;
  if (total <= 0) return cudaSuccess;
  resize_kernel<<<cu_blocks(total, CU_THREADS), CU_THREADS, 0, st>>>(*a);
  return cudaGetLastError();
}

/* A block an (image, group) span, contiguous in [N, C, S]: the mean, then
 * the variance about it (two passes over the span, as the CPU's
 * cpu_moments), then the normalized, scaled output. */
__global__ void group_norm_kernel(const __grid_constant__ cu_group_norm_args a) {
  __shared__ float scratch[32];
  const int64_t span = a.cpg * a.spatial, base = (int64_t)blockIdx.x * span;
  const int64_t grp = (int64_t)blockIdx.x % a.groups;
  float s = 0.f;
  for (int64_t j = threadIdx.x; j < span; j += blockDim.x) s += cu_ld_f32(a.x, a.dtype, base + j);
  const float mean = cu_block_sum(s, scratch) / (float)span;
  float q = 0.f;
  for (int64_t j = threadIdx.x; j < span; j += blockDim.x) {
    const float d = cu_ld_f32(a.x, a.dtype, base + j) - mean;
    q += d * d;
  }
  const float r = 1.f / sqrtf(cu_block_sum(q, scratch) / (float)span + (float)a.eps);
  for (int64_t j = threadIdx.x; j < span; j += blockDim.x) {
    const int64_t ch = grp * a.cpg + j / a.spatial;
    const float v = (cu_ld_f32(a.x, a.dtype, base + j) - mean) * r;
    cu_st_f32(a.y, a.dtype, base + j, v * cu_ld_f32(a.gamma, a.dtype, ch) + cu_ld_f32(a.beta, a.dtype, ch));
  }
}

extern "C" int cu_group_norm_launch(const cu_group_norm_args *a, cudaStream_t st) {
  const int64_t rows = a->n * a->groups, span = a->cpg * a->spatial;
  if (rows <= 0 || span <= 0) return cudaSuccess;
  if (rows > 0x7fffffff) return cudaErrorInvalidValue;
  const int threads = span >= 4096 ? 512 : span >= 512 ? 256 : 64;
  group_norm_kernel<<<(unsigned)rows, threads, 0, st>>>(*a);
  return cudaGetLastError();
}
