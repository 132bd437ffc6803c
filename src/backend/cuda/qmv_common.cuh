/* qmv_common.cuh — what the integer decode products (k_quant_gemv.cu at
 * one or two rows of x, k_quant_mma.cu up to CU_QMM_MAX_M) share: the block
 * formats, the quantized x's layout, reads of 2-byte aligned words from
 * shared memory, a row's address among the segments of a launch and x's
 * deferred RmsNorm factor. */
#pragma once
#include "cu_common.cuh"

/* Block geometry per scheme: bytes, weights, blocks per chunk of the ring
 * kernel (2048 weights), and the alignment the level bytes keep in shared
 * memory. */
template <int S> struct qmv_fmt;
template <> struct qmv_fmt<RLX_Q4_0> { enum { BB = 18, BW = 32, CB = 64, A = 2 }; };
template <> struct qmv_fmt<RLX_Q4_1> { enum { BB = 20, BW = 32, CB = 64, A = 4 }; };
template <> struct qmv_fmt<RLX_Q8_0> { enum { BB = 34, BW = 32, CB = 64, A = 2 }; };
template <> struct qmv_fmt<RLX_Q4_K> { enum { BB = 144, BW = 256, CB = 8, A = 16 }; };
template <> struct qmv_fmt<RLX_Q6_K> { enum { BB = 210, BW = 256, CB = 8, A = 2 }; };

/* NW little-endian words of shared memory from p, which is A-byte aligned
 * (2: the aligned words around it, joined by funnel shifts). */
template <int A, int NW> __device__ __forceinline__ void sm_words(const uint8_t *p, int *w) {
  if (A >= 16 && NW % 4 == 0) {
#pragma unroll
    for (int k = 0; k < NW; k += 4) {
      const int4 v = *(const int4 *)(p + 4 * k);
      w[k] = v.x, w[k + 1] = v.y, w[k + 2] = v.z, w[k + 3] = v.w;
    }
  } else if (A >= 4) {
#pragma unroll
    for (int k = 0; k < NW; k++) w[k] = ((const int *)p)[k];
  } else {
    const int *q = (const int *)((uintptr_t)p & ~(uintptr_t)3);
    const unsigned sh = ((uintptr_t)p & 2) ? 16u : 0u;
    int prev = q[0];
#pragma unroll
    for (int k = 0; k < NW; k++) {
      const int next = q[k + 1];
      w[k] = (int)__funnelshift_r((unsigned)prev, (unsigned)next, sh);
      prev = next;
    }
  }
}
__device__ __forceinline__ float sm_f16(const uint8_t *p) { return __half2float(__ushort_as_half(*(const unsigned short *)p)); }

/* The 6-bit scale (*ls) and min (*lm) of sub-block u of a Q4_K block
 * from its 12 scale bytes s (ggml's get_scale_min_k4). */
__device__ __forceinline__ void q4k_scale_min(const uint8_t *s, int u, int &ls, int &lm) {
  if (u < 4) {
    ls = s[u] & 63, lm = s[u + 4] & 63;
  } else {
    ls = (s[u + 4] & 0xF) | (s[u - 4] >> 6) << 4;
    lm = (s[u + 4] >> 4) | (s[u] >> 6) << 4;
  }
}

/* Quantized activations: levels [M, K] int8, then (d, s) [M, K / 32] F32
 * pairs, then (an RmsNorm's factor deferred) the sums of squares [M, K / 32]. */
__host__ __device__ __forceinline__ int64_t qx_levels_bytes(int64_t M, int64_t K) { return (M * K + 15) / 16 * 16; }
__host__ __device__ __forceinline__ int64_t qx_ssq_offset(int64_t M, int64_t K) {
  return qx_levels_bytes(M, K) + (M * K / 32) * 2 * (int64_t)sizeof(float);
}

/* Where x's RmsNorm was left to the product (a.norm_ssq): this lane's
 * share of row m's sum of squares, loaded right after the PDL wait so
 * that its latency hides behind x's; qmv_norm_factor finishes it at the
 * store. Without a deferred norm, 0 (and the factor 1). */
__device__ __forceinline__ float qmv_norm_part(const cu_qmv_args &a, int m) {
  if (!a.norm_ssq) return 0.f;
  const int64_t n = a.K / 32;
  const float *p = a.norm_ssq + m * n;
  float s = 0.f;
  for (int64_t i = threadIdx.x % 32; i < n; i += 32) s += p[i];
  return s;
}
__device__ __forceinline__ float qmv_norm_factor(const cu_qmv_args &a, float part) {
  if (!a.norm_ssq) return 1.f;
  return 1.f / sqrtf(cu_warp_sum(part) / (float)a.K + a.norm_eps); /* k_norm.cu's formula */
}


/* Row r of the concatenated segments of a call (segment s's rows follow
 * segment s - 1's: q, k and v of a layer in one launch): its segment (*s),
 * its output column (*rs: the row within the segment, or where a Rope's
 * pairs put it, cu_rope_col) and the address of its weights. */
__device__ __forceinline__ uintptr_t qmv_row(const cu_qmv_args &a, int64_t r, int64_t rb, int &s, int64_t &rs) {
  s = 0;
  while (s + 1 < a.nseg && r >= a.seg[s].N) r -= a.seg[s].N, s++;
  rs = a.seg[s].rope.on ? cu_rope_col(a.seg[s].rope, r) : r;
  return (uintptr_t)a.seg[s].w + (uintptr_t)(rs * rb);
}

/* The start of segment s's cache row (cu_cache_write), checked: -1 past
 * the cache, reported once (by the store of its first element). */
__device__ __forceinline__ int qmv_cache_start(const cu_qmv_args &a, int s, bool first) {
  const cu_cache_write &c = a.seg[s].cache;
  const long long start = c.dyn_dtype == RLX_I64 ? *(const long long *)c.dyn : *(const int32_t *)c.dyn;
  if (start >= 0 && start <= c.dyn_max) return (int)start;
  if (first) cu_raise(c.err, CU_ERR_START, c.node, start, 0, c.dyn_max);
  return -1;
}

/* Output (m, col) of segment s, v its finished sum: with the segment's
 * residual added, stored as O, or (cu_cache_write) rounded to O and
 * stored into the cache row at start (qmv_cache_start; -1: not stored),
 * where the UpdateSlice it replaces would have copied it. */
template <typename O>
__device__ __forceinline__ void qmv_put(const cu_qmv_args &a, int s, int64_t m, int64_t col, float v, int start) {
  const int64_t N = a.seg[s].N;
  const cu_cache_write &c = a.seg[s].cache;
  if (c.dst) {
    if (start >= 0) cu_st_f32(c.dst, c.dst_dtype, c.dst_off + start * c.dyn_mul + m * N + col, (float)cu_fl<O>::round(v));
    return;
  }
  if (a.seg[s].resid) v += (float)cu_fl<O>::ld((const O *)a.seg[s].resid + m * N + col);
  cu_fl<O>::st((O *)a.seg[s].out + m * N + col, (typename cu_fl<O>::acc)v);
}

/* What a direct kernel's R rows (segment seg[j], column rs[j]; one row of
 * x) store besides their sums: the cosine and sine of each Rope pair
 * (rows 2p and 2p + 1) and each cache row's start. The kernels take them
 * right after their PDL wait (a table or a position may come from the
 * kernels before), so that these loads and the angles run while the
 * weights stream, not after the sums. */
template <int R> struct qmv_tail {
  float c[(R + 1) / 2], s[(R + 1) / 2];
  int turns; /* bit p: pair p is rotated (a dim past n_rot is not) */
  int start[R];
};
template <int R>
__device__ __forceinline__ qmv_tail<R> qmv_tail_of(const cu_qmv_args &a, const int *seg, const int64_t *rs, int lane) {
  qmv_tail<R> t;
  t.turns = 0;
#pragma unroll
  for (int p = 0; p < (R + 1) / 2; p++) {
    const cu_gemv_rope &r = a.seg[seg[2 * p]].rope;
    t.c[p] = 1.f, t.s[p] = 0.f;
    if (R % 2 == 0 && r.on) {
      const int e = (int)rs[2 * p] % (int)r.D, half = (int)(r.n_rot / 2);
      if (e < r.n_rot) cu_rope_cos_sin(r, 0, r.neox ? e % half : e / 2, &t.c[p], &t.s[p]), t.turns |= 1 << p;
    }
  }
#pragma unroll
  for (int j = 0; j < R; j++) t.start[j] = a.seg[seg[j]].cache.dst ? qmv_cache_start(a, seg[j], lane == 0 && rs[j] == 0) : 0;
  return t;
}

/* The product on the tensor cores, 2 <= M <= CU_QMM_MAX_M (k_quant_mma.cu). */
int qmv_mma_launch(const cu_qmv_args *a, cudaStream_t st);
