/* k_layout.cu — data movement: the strided box copy behind Expand,
 * Transpose, Narrow, Slice, Concat, Pad, UpdateSlice, ResizeNearest2x and
 * TransformRegion (the lowering only chooses strides), a fill, Gather
 * (indices checked on the device), Iota, OneHot and Tri.
 *
 * Elements move as bytes of their size, so every plain dtype is exact;
 * a copy that converts (an absorbed Cast) takes float types. */
#include "cu_common.cuh"

#include <type_traits>

/* I: the index type, 32-bit when every index and offset fits. */
/* One element: bytes as they are (S = D), or widened and rounded. */
template <typename S, typename D> __device__ __forceinline__ void copy_elem(D *d, const S *s) {
  if constexpr (std::is_same<S, D>::value) *d = *s;
  else cu_fl<D>::st(d, cu_fl<S>::ld(s));
}

/* The start of an UpdateSlice's copy (its dyn), checked: -1 when out of
 * range (raised as node's error). */
__device__ __forceinline__ long long copy_start(const cu_copy_args &a, const void *dyn, int node) {
  const long long start = a.dyn_dtype == RLX_I64 ? *(const long long *)dyn : *(const int32_t *)dyn;
  if (start >= 0 && start <= a.dyn_max) return start;
  if (blockIdx.x == 0 && threadIdx.x == 0) cu_raise(a.err, CU_ERR_START, node, start, 0, a.dyn_max);
  return -1;
}

/* Elements [0, numel) of the copy, then (src2) [numel, 2 numel) of the
 * second one. */
template <typename S, typename D, typename I> __global__ void copy_kernel(const __grid_constant__ cu_copy_args a) {
  cu_pdl_chain();
  int64_t off[2] = {a.dst_off, a.dst_off};
  if (a.dyn) { /* both starts checked in order, so that the first's error is the one kept */
    const long long s0 = copy_start(a, a.dyn, a.node), s1 = a.src2 ? copy_start(a, a.dyn2, a.node2) : 0;
    off[0] = s0 < 0 ? -1 : off[0] + s0 * a.dyn_mul;
    off[1] = s1 < 0 ? -1 : off[1] + s1 * a.dyn_mul;
  }
  const I n = (I)a.numel, total = a.src2 ? 2 * n : n, step = (I)(gridDim.x * blockDim.x);
  for (I i = (I)(blockIdx.x * blockDim.x + threadIdx.x); i < total; i += step) {
    const int part = i >= n;
    if (off[part] < 0) continue;
    I rest = i - (part ? n : 0), so = 0, d_o = 0;
    for (int d = a.rank - 1; d >= 0; d--) {
      const I dim = (I)a.dims[d], q = rest / dim, idx = rest - q * dim;
      rest = q;
      so += (idx >> a.shift[d]) * (I)a.src_stride[d];
      d_o += idx * (I)a.dst_stride[d];
    }
    const S *src = (const S *)(part ? a.src2 : a.src);
    D *dst = (D *)(part ? a.dst2 : a.dst) + off[part];
    copy_elem<S, D>(dst + d_o, src + so);
  }
}

/* Elements a launch of copy_kernel moves: both copies' with src2. */
static int64_t copy_elements(const cu_copy_args *a) { return a->numel * (a->src2 ? 2 : 1); }

static bool copy_fits_32(const cu_copy_args *a) {
  const int64_t lim = (int64_t)1 << 31;
  if (copy_elements(a) >= lim - (int64_t)CU_THREADS * 132 * 32) return false;
  int64_t hs = 0, hd = 0;
  for (int d = 0; d < a->rank; d++) hs += (a->dims[d] - 1) * a->src_stride[d], hd += (a->dims[d] - 1) * a->dst_stride[d];
  return hs < lim && hd < lim;
}

template <typename S, typename D = S> static void copy_typed(const cu_copy_args *a, unsigned blocks, cudaStream_t st) {
  if (copy_fits_32(a)) cu_launch(copy_kernel<S, D, uint32_t>, blocks, CU_THREADS, 0, st, a->pdl, *a);
  else cu_launch(copy_kernel<S, D, int64_t>, blocks, CU_THREADS, 0, st, a->pdl, *a);
}

template <typename S> static int copy_from(const cu_copy_args *a, unsigned blocks, cudaStream_t st) {
  switch (a->dst_dtype) {
  case RLX_F32: copy_typed<S, float>(a, blocks, st); break;
  case RLX_F16: copy_typed<S, __half>(a, blocks, st); break;
  case RLX_BF16: copy_typed<S, __nv_bfloat16>(a, blocks, st); break;
  default: return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

extern "C" int cu_copy_launch(const cu_copy_args *a, cudaStream_t st) {
  if (a->numel <= 0 && !a->dyn) return cudaSuccess; /* an empty UpdateSlice still checks its start */
  if (a->src2 && !a->dyn) return cudaErrorInvalidValue;
  unsigned blocks = cu_blocks(copy_elements(a), CU_THREADS);
  if (a->convert) {
    const int e = a->src_dtype == RLX_F32   ? copy_from<float>(a, blocks, st)
                  : a->src_dtype == RLX_F16 ? copy_from<__half>(a, blocks, st)
                  : a->src_dtype == RLX_BF16 ? copy_from<__nv_bfloat16>(a, blocks, st)
                                             : cudaErrorInvalidValue;
    return e != cudaSuccess ? e : cudaGetLastError();
  }
  switch (a->es) {
  case 1: copy_typed<uint8_t>(a, blocks, st); break;
  case 2: copy_typed<uint16_t>(a, blocks, st); break;
  case 4: copy_typed<uint32_t>(a, blocks, st); break;
  case 8: copy_typed<unsigned long long>(a, blocks, st); break;
  default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

template <typename E> __global__ void fill_kernel(E *dst, int64_t n, E v) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) dst[i] = v;
}

extern "C" int cu_fill_launch(void *dst, int es, int64_t numel, uint64_t pattern, cudaStream_t st) {
  if (numel <= 0) return cudaSuccess;
  unsigned blocks = cu_blocks(numel, CU_THREADS);
  switch (es) {
  case 1: fill_kernel<uint8_t><<<blocks, CU_THREADS, 0, st>>>((uint8_t *)dst, numel, (uint8_t)pattern); break;
  case 2: fill_kernel<uint16_t><<<blocks, CU_THREADS, 0, st>>>((uint16_t *)dst, numel, (uint16_t)pattern); break;
  case 4: fill_kernel<uint32_t><<<blocks, CU_THREADS, 0, st>>>((uint32_t *)dst, numel, (uint32_t)pattern); break;
  case 8:
    fill_kernel<unsigned long long><<<blocks, CU_THREADS, 0, st>>>((unsigned long long *)dst, numel,
                                                                   (unsigned long long)pattern);
    break;
  default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

/* ---------------------------------------------------------------- Gather */

/* Index j of idx as an int64 in [0, len), or -1 (with the error raised). */
__device__ __forceinline__ long long gather_index(const cu_gather_args &a, int64_t j) {
  long long k;
  if (cu_is_float(a.idx_dtype)) {
    double f = trunc(cu_ld_f(a.idx, a.idx_dtype, j));
    if (f >= 0 && f < (double)a.len) return (long long)f;
    k = f != f ? (long long)-1 : cu_f2i_sat(f, RLX_I64);
  } else {
    k = cu_ld_i(a.idx, a.idx_dtype, j);
    if (k >= 0 && k < a.len) return k;
  }
  cu_raise(a.err, CU_ERR_INDEX, a.node, k, j, a.len);
  return -1;
}

template <typename E> __global__ void gather_kernel(const __grid_constant__ cu_gather_args a) {
  const int64_t total = a.outer * a.n_idx * a.inner;
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  const E *table = (const E *)a.table;
  E *out = (E *)a.out;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
    int64_t e = i % a.inner, r = i / a.inner, j = r % a.n_idx, o = r / a.n_idx;
    long long k = gather_index(a, j);
    if (k < 0) continue;
    out[i] = table[(o * a.len + k) * a.inner + e];
  }
}

extern "C" int cu_gather_launch(const cu_gather_args *a, cudaStream_t st) {
  int64_t total = a->outer * a->n_idx * a->inner;
  if (total <= 0) return cudaSuccess;
  unsigned blocks = cu_blocks(total, CU_THREADS);
  switch (a->es) {
  case 1: gather_kernel<uint8_t><<<blocks, CU_THREADS, 0, st>>>(*a); break;
  case 2: gather_kernel<uint16_t><<<blocks, CU_THREADS, 0, st>>>(*a); break;
  case 4: gather_kernel<uint32_t><<<blocks, CU_THREADS, 0, st>>>(*a); break;
  case 8: gather_kernel<unsigned long long><<<blocks, CU_THREADS, 0, st>>>(*a); break;
  default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

/* ---------------------------------------------------------------- Iota, OneHot, Tri */

__global__ void iota_kernel(void *out, int dtype, int64_t numel, int64_t len, int64_t inner) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < numel; i += step)
    cu_st_i(out, dtype, i, (i / inner) % len);
}

extern "C" int cu_iota_launch(void *out, int dtype, int64_t numel, int64_t len, int64_t inner, cudaStream_t st) {
  if (numel <= 0) return cudaSuccess;
  iota_kernel<<<cu_blocks(numel, CU_THREADS), CU_THREADS, 0, st>>>(out, dtype, numel, len, inner);
  return cudaGetLastError();
}

template <typename E>
__global__ void one_hot_kernel(const void *idx, int idx_dtype, E *out, E one, int64_t n_idx, int64_t depth) {
  const int64_t total = n_idx * depth, step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step)
    out[i] = cu_ld_i(idx, idx_dtype, i / depth) == i % depth ? one : (E)0;
}

extern "C" int cu_one_hot_launch(const void *idx, int idx_dtype, void *out, int es, uint64_t one_bits,
                                 int64_t n_idx, int64_t depth, cudaStream_t st) {
  int64_t total = n_idx * depth;
  if (total <= 0) return cudaSuccess;
  unsigned b = cu_blocks(total, CU_THREADS);
  switch (es) {
  case 1: one_hot_kernel<uint8_t><<<b, CU_THREADS, 0, st>>>(idx, idx_dtype, (uint8_t *)out, (uint8_t)one_bits, n_idx, depth); break;
  case 2: one_hot_kernel<uint16_t><<<b, CU_THREADS, 0, st>>>(idx, idx_dtype, (uint16_t *)out, (uint16_t)one_bits, n_idx, depth); break;
  case 4: one_hot_kernel<uint32_t><<<b, CU_THREADS, 0, st>>>(idx, idx_dtype, (uint32_t *)out, (uint32_t)one_bits, n_idx, depth); break;
  case 8:
    one_hot_kernel<unsigned long long><<<b, CU_THREADS, 0, st>>>(idx, idx_dtype, (unsigned long long *)out,
                                                                 (unsigned long long)one_bits, n_idx, depth);
    break;
  default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

template <typename E>
__global__ void tri_kernel(const E *x, E *out, int64_t total, int64_t rows, int64_t cols, int upper, int64_t k) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
    int64_t c = i % cols, r = (i / cols) % rows;
    int keep = upper ? c >= r + k : c <= r + k;
    out[i] = keep ? x[i] : (E)0;
  }
}

extern "C" int cu_tri_launch(const void *x, void *out, int es, int64_t mats, int64_t rows, int64_t cols,
                             int upper, int64_t k, cudaStream_t st) {
  int64_t total = mats * rows * cols;
  if (total <= 0) return cudaSuccess;
  unsigned b = cu_blocks(total, CU_THREADS);
  switch (es) {
  case 1: tri_kernel<uint8_t><<<b, CU_THREADS, 0, st>>>((const uint8_t *)x, (uint8_t *)out, total, rows, cols, upper, k); break;
  case 2: tri_kernel<uint16_t><<<b, CU_THREADS, 0, st>>>((const uint16_t *)x, (uint16_t *)out, total, rows, cols, upper, k); break;
  case 4: tri_kernel<uint32_t><<<b, CU_THREADS, 0, st>>>((const uint32_t *)x, (uint32_t *)out, total, rows, cols, upper, k); break;
  case 8:
    tri_kernel<unsigned long long><<<b, CU_THREADS, 0, st>>>((const unsigned long long *)x, (unsigned long long *)out,
                                                             total, rows, cols, upper, k);
    break;
  default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}
