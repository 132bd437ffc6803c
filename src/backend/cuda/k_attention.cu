/* k_attention.cu — Attention as one flash-attention-style kernel (scores
 * never reach device memory): online softmax over key blocks, every mask
 * kind (causal and sliding window bottom-right aligned, custom additive
 * mask with broadcasting), grouped-query heads, [B,S,H,D] / [B,H,S,D] /
 * [B,S,H*D] through strides, score scale and logit softcap.
 *
 * Three kernels compute the same function:
 *  - flash_decode: few query rows per kv head (decode), keys split over
 *    blocks (below);
 *  - flash_tc: F16/BF16 with head_dim a multiple of 16 up to 128, on the
 *    tensor cores (mma.sync m16n8k16, F32 accumulation): a block of 4 warps
 *    takes 64 query rows of one (batch, head); each warp keeps its 16 rows
 *    of Q as A fragments in registers, S = Q K^T and O += P V run as mma,
 *    P is rounded to the input type for the second product (as FA2).
 *    Causal and sliding-window blocks outside the visible band are skipped.
 *  - flash_exact: every float dtype and head_dim up to 256, one block per
 *    query row whose warps split the keys, F32 (F64 for F64) throughout:
 *    the reference-precision path.
 * A row whose visible scores include a NaN gives NaN; a row with no
 * visible key gives zeros (the CPU kernel's rules, k_attention.c). */
#include "cu_common.cuh"

#include <math.h>

__device__ __forceinline__ bool key_visible(const cu_attn_args &a, int64_t i, int64_t j) {
  const int64_t last = i + (a.T - a.S);
  if (a.mask_kind == RLX_MASK_CAUSAL) return j <= last;
  if (a.mask_kind == RLX_MASK_SLIDING_WINDOW) return j <= last && j > last - a.window;
  return true;
}

/* Score of query i, key j from the raw dot product (scale, softcap, mask). */
template <typename T>
__device__ __forceinline__ T finish_score(const cu_attn_args &a, T dot, int64_t b, int64_t h, int64_t i, int64_t j) {
  T s = dot * (T)a.scale;
  if (a.softcap > 0) s = (T)a.softcap * cu_tanh(s / (T)a.softcap);
  if (a.mask_kind == RLX_MASK_CUSTOM)
    s += (T)a.mask[b * a.mask_stride[0] + h * a.mask_stride[1] + i * a.mask_stride[2] + j * a.mask_stride[3]];
  return s;
}

/* ---------------------------------------------------------------- exact kernel */

#define EXACT_WARPS 4
#define EXACT_MAX_CHUNKS 8 /* head_dim <= 256 */

/* One block per query row; its warps split the keys (warp w takes chunks
 * of 32 keys w, w + EXACT_WARPS, ...; a lane scores one key), each keeps an
 * online-softmax state, and the states are merged at the end: a decode
 * step (one query row per head) still spreads over the keys. */
template <typename T> __global__ void __launch_bounds__(EXACT_WARPS * 32) flash_exact(const __grid_constant__ cu_attn_args a) {
  __shared__ T qs[EXACT_MAX_CHUNKS * 32];
  __shared__ T part_o[EXACT_WARPS][EXACT_MAX_CHUNKS * 32];
  __shared__ T part_m[EXACT_WARPS], part_l[EXACT_WARPS];
  __shared__ int part_nan[EXACT_WARPS];
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
  const int64_t row = blockIdx.x; /* (b, h, i) */
  const int64_t i = row % a.S, h = (row / a.S) % a.H, b = row / (a.S * a.H);
  const int64_t hk = h / (a.H / a.Hkv);
  const int64_t qoff = b * a.q_sb + h * a.q_sh + i * a.q_ss;
  for (int64_t d = threadIdx.x; d < a.D; d += blockDim.x) qs[d] = cu_acc<T>::ld(a.q, a.dtype, qoff + d);
  __syncthreads();
  const int64_t kbase = b * a.kv_sb + hk * a.kv_sh;
  T o[EXACT_MAX_CHUNKS];
#pragma unroll
  for (int c = 0; c < EXACT_MAX_CHUNKS; c++) o[c] = 0;
  T m = -INFINITY, l = 0;
  bool saw_nan = false;
  for (int64_t j0 = (int64_t)w * 32; j0 < a.T; j0 += EXACT_WARPS * 32) {
    const int64_t j = j0 + lane;
    T s = -INFINITY;
    if (j < a.T && key_visible(a, i, j)) {
      const int64_t koff = kbase + j * a.kv_ss;
      T dot = 0;
      for (int64_t d = 0; d < a.D; d++) dot += qs[d] * cu_acc<T>::ld(a.k, a.dtype, koff + d);
      s = finish_score<T>(a, dot, b, h, i, j);
      if (s != s) saw_nan = true, s = -INFINITY;
    }
    const T cm = cu_warp_max(s);
    const T mn = cm > m ? cm : m;
    if (mn == -INFINITY) continue; /* nothing visible yet */
    const T alpha = cu_exp(m - mn), p = cu_exp(s - mn);
    l = l * alpha + cu_warp_sum(p);
#pragma unroll
    for (int c = 0; c < EXACT_MAX_CHUNKS; c++) o[c] *= alpha;
    const int n = (int)(a.T - j0 < 32 ? a.T - j0 : 32);
    for (int t = 0; t < n; t++) {
      const T pt = __shfl_sync(0xffffffffu, p, t);
      if (pt == (T)0) continue;
      const int64_t voff = kbase + (j0 + t) * a.kv_ss;
#pragma unroll
      for (int c = 0; c < EXACT_MAX_CHUNKS; c++) {
        const int64_t d = lane + 32 * c;
        if (d < a.D) o[c] += pt * cu_acc<T>::ld(a.v, a.dtype, voff + d);
      }
    }
    m = mn;
  }
  /* merge the warps' states */
  saw_nan = __any_sync(0xffffffffu, saw_nan);
  if (lane == 0) part_m[w] = m, part_l[w] = l, part_nan[w] = saw_nan;
#pragma unroll
  for (int c = 0; c < EXACT_MAX_CHUNKS; c++) part_o[w][lane + 32 * c] = o[c];
  __syncthreads();
  T M = -INFINITY;
  int any_nan = 0;
  for (int k = 0; k < EXACT_WARPS; k++) {
    M = part_m[k] > M ? part_m[k] : M;
    any_nan |= part_nan[k];
  }
  T L = 0;
  for (int k = 0; k < EXACT_WARPS; k++)
    if (part_m[k] != -INFINITY) L += cu_exp(part_m[k] - M) * part_l[k];
  for (int64_t d = threadIdx.x; d < a.D; d += blockDim.x) {
    T acc = 0;
    for (int k = 0; k < EXACT_WARPS; k++)
      if (part_m[k] != -INFINITY) acc += cu_exp(part_m[k] - M) * part_o[k][d];
    T y = any_nan ? (T)NAN : L > (T)0 ? acc / L : (T)0;
    cu_acc<T>::st(a.out, a.dtype, qoff + d, y);
  }
}

/* ---------------------------------------------------------------- tensor-core kernel */

#define TC_ROWS 64   /* query rows per block: 4 warps x 16 */
#define TC_KEYS 64   /* keys per tile */

template <typename E> struct tc_type;
template <> struct tc_type<__half> {
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *(uint32_t *)&v;
  }
  static __device__ __forceinline__ void mma(float *d, const uint32_t *a, uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};
template <> struct tc_type<__nv_bfloat16> {
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *(uint32_t *)&v;
  }
  static __device__ __forceinline__ void mma(float *d, const uint32_t *a, uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

/* DK = head_dim / 16. */
template <typename E, int DK> __global__ void __launch_bounds__(128) flash_tc(const __grid_constant__ cu_attn_args a) {
  constexpr int D = DK * 16, KS = D + 8, VS = TC_KEYS + 8; /* padded rows: no bank conflicts */
  __shared__ __align__(16) E ks[TC_KEYS * KS];
  __shared__ __align__(16) E vt[D * VS];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t4 = lane % 4;
  const int64_t bh = blockIdx.y, b = bh / a.H, h = bh % a.H, hk = h / (a.H / a.Hkv);
  const int64_t q0 = (int64_t)blockIdx.x * TC_ROWS, r0 = q0 + warp * 16;
  const E *q = (const E *)a.q, *k = (const E *)a.k, *v = (const E *)a.v;
  const int64_t qbase = b * a.q_sb + h * a.q_sh, kbase = b * a.kv_sb + hk * a.kv_sh;

  /* Q rows r0+g and r0+g+8 as A fragments */
  uint32_t qa[DK][4];
  {
    const int64_t ra = r0 + g, rb = r0 + g + 8;
#pragma unroll
    for (int kk = 0; kk < DK; kk++) {
      const int c = kk * 16 + 2 * t4;
      qa[kk][0] = ra < a.S ? *(const uint32_t *)(q + qbase + ra * a.q_ss + c) : 0u;
      qa[kk][1] = rb < a.S ? *(const uint32_t *)(q + qbase + rb * a.q_ss + c) : 0u;
      qa[kk][2] = ra < a.S ? *(const uint32_t *)(q + qbase + ra * a.q_ss + c + 8) : 0u;
      qa[kk][3] = rb < a.S ? *(const uint32_t *)(q + qbase + rb * a.q_ss + c + 8) : 0u;
    }
  }
  float o[DK * 2][4];
#pragma unroll
  for (int n = 0; n < DK * 2; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  int saw_nan[2] = {0, 0}; /* per row: g and g+8 */
  const float LOG2E = 1.4426950408889634f, scale_log2 = (float)a.scale * LOG2E;

  /* the band of keys any row of this block may see */
  int64_t kend = a.T, kbeg = 0;
  const int64_t qlast = (q0 + TC_ROWS < a.S ? q0 + TC_ROWS : a.S) - 1;
  if (a.mask_kind == RLX_MASK_CAUSAL || a.mask_kind == RLX_MASK_SLIDING_WINDOW) {
    kend = qlast + (a.T - a.S) + 1;
    kend = kend < 0 ? 0 : kend > a.T ? a.T : kend;
  }
  if (a.mask_kind == RLX_MASK_SLIDING_WINDOW) {
    kbeg = q0 + (a.T - a.S) - a.window + 1;
    kbeg = kbeg < 0 ? 0 : kbeg / TC_KEYS * TC_KEYS;
  }
  for (int64_t k0 = kbeg; k0 < kend; k0 += TC_KEYS) {
    /* stage K [keys][D] (16-byte stores, a row per 16 threads) and V
     * transposed [D][keys] (consecutive threads take consecutive keys, so
     * the 2-byte stores of a warp fall into distinct banks) */
    __syncthreads();
    for (int e = threadIdx.x; e < TC_KEYS * (D / 8); e += blockDim.x) {
      const int kr = e / (D / 8), c = (e % (D / 8)) * 8;
      const int64_t key = k0 + kr;
      uint4 kv = make_uint4(0, 0, 0, 0);
      if (key < a.T) kv = *(const uint4 *)(k + kbase + key * a.kv_ss + c);
      *(uint4 *)(ks + kr * KS + c) = kv;
    }
    for (int e = threadIdx.x; e < TC_KEYS * (D / 8); e += blockDim.x) {
      const int kr = e % TC_KEYS, c = (e / TC_KEYS) * 8;
      const int64_t key = k0 + kr;
      uint4 vv = make_uint4(0, 0, 0, 0);
      if (key < a.T) vv = *(const uint4 *)(v + kbase + key * a.kv_ss + c);
      const E *ve = (const E *)&vv;
#pragma unroll
      for (int x = 0; x < 8; x++) vt[(c + x) * VS + kr] = ve[x];
    }
    __syncthreads();
    if (r0 >= a.S) continue; /* this warp's rows are past the end (it still helps load) */

    float s[TC_KEYS / 8][4];
#pragma unroll
    for (int n = 0; n < TC_KEYS / 8; n++) {
      s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < DK; kk++) {
        const E *kr = ks + (n * 8 + g) * KS + kk * 16 + 2 * t4;
        tc_type<E>::mma(s[n], qa[kk], *(const uint32_t *)kr, *(const uint32_t *)(kr + 8));
      }
    }
    /* scale, softcap, mask; row maxima of rows g (c0, c1) and g+8 (c2, c3).
     * A tile every row of this warp sees whole (no custom mask, no softcap)
     * needs only the scale: a NaN score then reaches the sum and so the
     * row's output by itself. */
    float mx[2] = {-INFINITY, -INFINITY};
    const int64_t shift = a.T - a.S;
    const bool interior = a.mask_kind != RLX_MASK_CUSTOM && a.softcap <= 0 && k0 + TC_KEYS <= a.T && r0 + 16 <= a.S &&
                          (a.mask_kind == RLX_MASK_NONE || k0 + TC_KEYS - 1 <= r0 + shift) &&
                          (a.mask_kind != RLX_MASK_SLIDING_WINDOW || k0 > r0 + 15 + shift - a.window);
    if (interior) {
#pragma unroll
      for (int n = 0; n < TC_KEYS / 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          s[n][e] *= scale_log2;
          mx[e >> 1] = fmaxf(mx[e >> 1], s[n][e]);
        }
    } else {
#pragma unroll
      for (int n = 0; n < TC_KEYS / 8; n++) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int64_t i = r0 + g + (e >= 2 ? 8 : 0), j = k0 + n * 8 + 2 * t4 + (e & 1);
          float x = -INFINITY;
          if (i < a.S && j < a.T && key_visible(a, i, j)) {
            x = finish_score<float>(a, s[n][e], b, h, i, j);
            if (x != x) saw_nan[e >> 1] = 1, x = -INFINITY;
          }
          s[n][e] = x * LOG2E;
          mx[e >> 1] = fmaxf(mx[e >> 1], s[n][e]);
        }
      }
    }
    float alpha[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      const float mn = fmaxf(m[r], mx[r]);
      alpha[r] = mn == -INFINITY ? 1.f : exp2f(m[r] - mn);
      m[r] = mn;
    }
    float ls[2] = {0.f, 0.f};
    uint32_t pa[TC_KEYS / 16][4];
#pragma unroll
    for (int n = 0; n < TC_KEYS / 8; n++) {
      float p[4];
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const float mr = m[e >> 1];
        p[e] = mr == -INFINITY ? 0.f : exp2f(s[n][e] - mr);
        ls[e >> 1] += p[e];
      }
      pa[n / 2][(n % 2) * 2 + 0] = tc_type<E>::pack(p[0], p[1]);
      pa[n / 2][(n % 2) * 2 + 1] = tc_type<E>::pack(p[2], p[3]);
    }
#pragma unroll
    for (int r = 0; r < 2; r++) l[r] = l[r] * alpha[r] + ls[r];
#pragma unroll
    for (int n = 0; n < DK * 2; n++) {
      o[n][0] *= alpha[0], o[n][1] *= alpha[0], o[n][2] *= alpha[1], o[n][3] *= alpha[1];
#pragma unroll
      for (int j = 0; j < TC_KEYS / 16; j++) {
        const E *vr = vt + (n * 8 + g) * VS + j * 16 + 2 * t4;
        /* A fragment order: (row g, k lo), (row g+8, k lo), (row g, k hi), (row g+8, k hi) */
        const uint32_t af[4] = {pa[j][0], pa[j][1], pa[j][2], pa[j][3]};
        tc_type<E>::mma(o[n], af, *(const uint32_t *)vr, *(const uint32_t *)(vr + 8));
      }
    }
  }
  if (r0 >= a.S) return;
  /* the four threads of a quad hold the columns of the same two rows */
#pragma unroll
  for (int r = 0; r < 2; r++) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    saw_nan[r] |= __shfl_xor_sync(0xffffffffu, saw_nan[r], 1);
    saw_nan[r] |= __shfl_xor_sync(0xffffffffu, saw_nan[r], 2);
  }
  E *out = (E *)a.out;
#pragma unroll
  for (int r = 0; r < 2; r++) {
    const int64_t i = r0 + g + 8 * r;
    if (i >= a.S) continue;
    const float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;
#pragma unroll
    for (int n = 0; n < DK * 2; n++) {
      float y0 = o[n][2 * r] * inv, y1 = o[n][2 * r + 1] * inv;
      if (saw_nan[r]) y0 = y1 = NAN;
      *(uint32_t *)(out + qbase + i * a.q_ss + n * 8 + 2 * t4) = tc_type<E>::pack(y0, y1);
    }
  }
}

template <typename E> static int launch_tc(const cu_attn_args *a, cudaStream_t st) {
  dim3 grid((unsigned)((a->S + TC_ROWS - 1) / TC_ROWS), (unsigned)(a->B * a->H));
  switch (a->D / 16) {
  case 1: flash_tc<E, 1><<<grid, 128, 0, st>>>(*a); break;
  case 2: flash_tc<E, 2><<<grid, 128, 0, st>>>(*a); break;
  case 3: flash_tc<E, 3><<<grid, 128, 0, st>>>(*a); break;
  case 4: flash_tc<E, 4><<<grid, 128, 0, st>>>(*a); break;
  case 5: flash_tc<E, 5><<<grid, 128, 0, st>>>(*a); break;
  case 6: flash_tc<E, 6><<<grid, 128, 0, st>>>(*a); break;
  case 7: flash_tc<E, 7><<<grid, 128, 0, st>>>(*a); break;
  case 8: flash_tc<E, 8><<<grid, 128, 0, st>>>(*a); break;
  default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

/* ---------------------------------------------------------------- split-key decode kernel */

#define DEC_MAX_ROWS 16   /* query rows per kv head: (H / Hkv) * S */
#define DEC_MAX_KEYS 128  /* keys per split */
#define DEC_THREADS 128
#define DEC_WARPS (DEC_THREADS / 32)

/* Flash-decoding: with one query row per head (decode) a kernel that tiles
 * queries has one useful row per tile and one block per head walking all
 * keys. Here block (split, b*Hkv + hk) takes keys_per_split keys of one kv
 * head against all the R = (H / Hkv) * S query rows that read it (K and V
 * read once per kv head): a warp scores one key for all R rows at a time
 * (lanes split the head dim, coalesced), the block then forms the split's
 * softmax state (max m, sum l, o = sum p v) per row, and the last block of
 * the head merges the splits' states in split order. F32 throughout. */
template <typename E> __global__ void __launch_bounds__(DEC_THREADS) flash_decode(const __grid_constant__ cu_attn_args a) {
  extern __shared__ float dec_smem[];
  const int R = (int)((a.H / a.Hkv) * a.S), D = (int)a.D;
  float *qs = dec_smem;                             /* [R][D] */
  float *ps = qs + R * D;                           /* [R][DEC_MAX_KEYS] scores, then p */
  float *ms = ps + R * DEC_MAX_KEYS, *ls = ms + R;  /* [R] each */
  int *nan_row = (int *)(ls + R);                   /* [R] */
  __shared__ int last;
  const int t = threadIdx.x, lane = t % 32, warp = t / 32;
  const int64_t bh = blockIdx.y, b = bh / a.Hkv, hk = bh % a.Hkv, G = a.H / a.Hkv;
  const int64_t j0 = (int64_t)blockIdx.x * a.keys_per_split;
  const int n = (int)(a.T - j0 < a.keys_per_split ? a.T - j0 : a.keys_per_split);
  const E *q = (const E *)a.q, *k = (const E *)a.k, *v = (const E *)a.v;
  const int64_t kbase = b * a.kv_sb + hk * a.kv_sh;
  /* row r: head hk*G + r / S, query i = r % S */
  for (int e = t; e < R * D; e += DEC_THREADS) {
    const int r = e / D, d = e % D;
    const int64_t h = hk * G + r / a.S, i = r % a.S;
    qs[e] = cu_fl<E>::ld(q + b * a.q_sb + h * a.q_sh + i * a.q_ss + d);
  }
  for (int r = t; r < R; r += DEC_THREADS) nan_row[r] = 0;
  __syncthreads();
  /* scores: warp per key */
  for (int jj = warp; jj < n; jj += DEC_WARPS) {
    const int64_t j = j0 + jj;
    bool any = false;
    for (int64_t i = 0; i < a.S; i++) any |= key_visible(a, i, j);
    if (!any) {
      for (int r = lane; r < R; r += 32) ps[r * DEC_MAX_KEYS + jj] = -INFINITY;
      continue;
    }
    float dot[DEC_MAX_ROWS];
#pragma unroll
    for (int r = 0; r < DEC_MAX_ROWS; r++) dot[r] = 0.f;
    const E *kr = k + kbase + j * a.kv_ss;
    for (int d = lane; d < D; d += 32) {
      const float kv = cu_fl<E>::ld(kr + d);
#pragma unroll
      for (int r = 0; r < DEC_MAX_ROWS; r++)
        if (r < R) dot[r] = fmaf(qs[r * D + d], kv, dot[r]);
    }
#pragma unroll
    for (int r = 0; r < DEC_MAX_ROWS; r++) {
      if (r >= R) break;
      const float s = cu_warp_sum(dot[r]);
      if (lane == 0) {
        const int64_t h = hk * G + r / a.S, i = r % a.S;
        float x = -INFINITY;
        if (key_visible(a, i, j)) {
          x = finish_score<float>(a, s, b, h, i, j);
          if (x != x) nan_row[r] = 1, x = -INFINITY;
        }
        ps[r * DEC_MAX_KEYS + jj] = x;
      }
    }
  }
  __syncthreads();
  /* the split's state per row: warp per row */
  for (int r = warp; r < R; r += DEC_WARPS) {
    float mx = -INFINITY;
    for (int jj = lane; jj < n; jj += 32) mx = fmaxf(mx, ps[r * DEC_MAX_KEYS + jj]);
    mx = cu_warp_max(mx);
    float l = 0.f;
    for (int jj = lane; jj < n; jj += 32) {
      const float p = mx == -INFINITY ? 0.f : expf(ps[r * DEC_MAX_KEYS + jj] - mx);
      ps[r * DEC_MAX_KEYS + jj] = p;
      l += p;
    }
    l = cu_warp_sum(l);
    if (lane == 0) ms[r] = mx, ls[r] = l;
  }
  __syncthreads();
  /* o = sum_j p_j v_j: thread per head-dim element, all rows at once (V read once) */
  float *po = a.splits > 1 ? a.part + ((size_t)bh * a.splits + blockIdx.x) * (size_t)R * (D + 3) : NULL;
  for (int d = t; d < D; d += DEC_THREADS) {
    float o[DEC_MAX_ROWS];
#pragma unroll
    for (int r = 0; r < DEC_MAX_ROWS; r++) o[r] = 0.f;
    for (int jj = 0; jj < n; jj++) {
      const float vv = cu_fl<E>::ld(v + kbase + (j0 + jj) * a.kv_ss + d);
#pragma unroll
      for (int r = 0; r < DEC_MAX_ROWS; r++) {
        const float p = r < R ? ps[r * DEC_MAX_KEYS + jj] : 0.f;
        if (p != 0.f) o[r] = fmaf(p, vv, o[r]); /* a masked key's V is never read into a sum */
      }
    }
#pragma unroll
    for (int r = 0; r < DEC_MAX_ROWS; r++) {
      if (r >= R) break;
      if (a.splits == 1) {
        const int64_t h = hk * G + r / a.S, i = r % a.S;
        const float y = nan_row[r] ? NAN : ls[r] > 0.f ? o[r] / ls[r] : 0.f;
        cu_fl<E>::st((E *)a.out + b * a.q_sb + h * a.q_sh + i * a.q_ss + d, y);
      } else {
        po[r * (D + 3) + d] = o[r];
      }
    }
  }
  if (a.splits == 1) return;
  for (int r = t; r < R; r += DEC_THREADS) {
    po[r * (D + 3) + D] = ms[r];
    po[r * (D + 3) + D + 1] = ls[r];
    po[r * (D + 3) + D + 2] = (float)nan_row[r];
  }
  __threadfence();
  __syncthreads();
  if (t == 0) last = atomicAdd(&a.count[bh], 1u) == (unsigned)a.splits - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  const float *pb = a.part + (size_t)bh * a.splits * (size_t)R * (D + 3);
  const size_t stride = (size_t)R * (D + 3);
  for (int e = t; e < R * D; e += DEC_THREADS) {
    const int r = e / D, d = e % D;
    float M = -INFINITY;
    int any_nan = 0;
    for (int s = 0; s < a.splits; s++) {
      const float *ps_ = pb + s * stride + r * (D + 3);
      M = fmaxf(M, __ldcg(ps_ + D));
      any_nan |= __ldcg(ps_ + D + 2) != 0.f;
    }
    float L = 0.f, acc = 0.f;
    if (M != -INFINITY)
      for (int s = 0; s < a.splits; s++) {
        const float *ps_ = pb + s * stride + r * (D + 3);
        const float m = __ldcg(ps_ + D);
        if (m == -INFINITY) continue;
        const float w = expf(m - M);
        L += w * __ldcg(ps_ + D + 1);
        acc += w * __ldcg(ps_ + d);
      }
    const int64_t h = hk * G + r / a.S, i = r % a.S;
    const float y = any_nan ? NAN : L > 0.f ? acc / L : 0.f;
    cu_fl<E>::st((E *)a.out + b * a.q_sb + h * a.q_sh + i * a.q_ss + d, y);
  }
  if (t == 0) a.count[bh] = 0; /* ready for the next run */
}

static size_t dec_smem_bytes(const cu_attn_args *a) {
  const int64_t R = (a->H / a->Hkv) * a->S;
  return (size_t)(R * a->D + R * DEC_MAX_KEYS + 3 * R) * sizeof(float);
}

extern "C" void cu_attention_plan(cu_attn_args *a, size_t *part_floats, size_t *counters) {
  *part_floats = *counters = 0;
  a->splits = 0, a->keys_per_split = 0;
  const int64_t R = a->Hkv > 0 ? (a->H / a->Hkv) * a->S : 0;
  if ((a->dtype != RLX_F32 && a->dtype != RLX_F16 && a->dtype != RLX_BF16) || a->force_exact || R < 1 ||
      R > DEC_MAX_ROWS || a->D > 256 || a->T < 1 || a->B * a->Hkv >= 65536 || dec_smem_bytes(a) > 48 * 1024)
    return;
  /* about two blocks per multiprocessor of the H200 (132), 32 to 128 keys each */
  const int64_t heads = a->B * a->Hkv, want = (264 + heads - 1) / heads;
  int64_t kps = (a->T + want - 1) / want;
  kps = (kps + 31) / 32 * 32;
  kps = kps < 32 ? 32 : kps > DEC_MAX_KEYS ? DEC_MAX_KEYS : kps;
  const int64_t splits = (a->T + kps - 1) / kps;
  if (splits > 0x7fffffff) return;
  a->keys_per_split = kps, a->splits = (int)splits;
  *part_floats = (size_t)(heads * splits * R * (a->D + 3));
  *counters = (size_t)heads;
}

static int aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

extern "C" int cu_attention_launch(const cu_attn_args *a, cudaStream_t st) {
  if (a->B * a->H * a->S <= 0 || a->D <= 0) return cudaSuccess;
  if (a->splits > 0) {
    dim3 grid((unsigned)a->splits, (unsigned)(a->B * a->Hkv));
    const size_t smem = dec_smem_bytes(a);
    if (a->dtype == RLX_F16) flash_decode<__half><<<grid, DEC_THREADS, smem, st>>>(*a);
    else if (a->dtype == RLX_BF16) flash_decode<__nv_bfloat16><<<grid, DEC_THREADS, smem, st>>>(*a);
    else flash_decode<float><<<grid, DEC_THREADS, smem, st>>>(*a);
    return cudaGetLastError();
  }
  const int tc = (a->dtype == RLX_F16 || a->dtype == RLX_BF16) && a->D % 16 == 0 && a->D <= 128 &&
                 aligned16(a->q) && aligned16(a->k) && aligned16(a->v) && aligned16(a->out) &&
                 a->q_ss % 8 == 0 && a->kv_ss % 8 == 0 && a->q_sb % 8 == 0 && a->q_sh % 8 == 0 &&
                 a->kv_sb % 8 == 0 && a->kv_sh % 8 == 0 && a->B * a->H < 65536 && !a->force_exact;
  if (tc) return a->dtype == RLX_F16 ? launch_tc<__half>(a, st) : launch_tc<__nv_bfloat16>(a, st);
  if (a->D > EXACT_MAX_CHUNKS * 32) return cudaErrorInvalidValue;
  const int64_t rows = a->B * a->H * a->S;
  if (rows > 0x7fffffff) return cudaErrorInvalidValue;
  if (a->dtype == RLX_F64) flash_exact<double><<<(unsigned)rows, EXACT_WARPS * 32, 0, st>>>(*a);
  else flash_exact<float><<<(unsigned)rows, EXACT_WARPS * 32, 0, st>>>(*a);
  return cudaGetLastError();
}
