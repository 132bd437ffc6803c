/* k_attention_f32.cu — flash_f32, the attention of F32 prefill rows on the
 * FMA units (k_attention.cu says how it fits beside the other kernels): an
 * encoder's or a prefill's many query rows in F32, which the tensor-core
 * kernel (16-bit types) does not take and the split-key decode kernel
 * takes 16 rows at a time.
 *
 * A block of 128 threads takes 64 query rows of one (batch, head) and
 * walks the keys in tiles of 64 staged in shared memory, with an online
 * softmax. Both products are register-tiled as an SGEMM is: thread (r, c)
 * holds the scores of rows 4r .. 4r+3 and keys c, c+8, .., c+56 of a tile
 * (8 lanes share a row group, so a row's maximum and sum are three
 * shuffles) and the same rows of O at columns 4c + 32m .. 4c + 32m + 3, so
 * each 16-byte load from shared memory feeds 8 multiply-adds. Scores, P
 * and O stay F32 throughout (no TF32). */
#include "k_attention.cuh"

#define F32_ROWS 64    /* query rows a block */
#define F32_KEYS 64    /* keys a tile */
#define F32_THREADS 128

/* NC = head_dim / 32. Rows of Q, K and V padded to D + 4 floats: the 8
 * lanes of a row group read keys c + 8u, whose rows then start 16 bytes
 * apart modulo 128 (no bank conflict); P's rows hold a tile's keys. */
template <int NC> struct f32_shape {
  static constexpr int D = 32 * NC, KS = D + 4, PS = F32_KEYS + 4;
  static constexpr size_t smem = (size_t)(F32_ROWS * KS + 2 * F32_KEYS * KS + F32_ROWS * PS) * sizeof(float);
};

__device__ __forceinline__ float4 f32_zero4() { return make_float4(0.f, 0.f, 0.f, 0.f); }

template <int NC> __global__ void __launch_bounds__(F32_THREADS) flash_f32(const __grid_constant__ cu_attn_args a) {
  typedef f32_shape<NC> sh;
  constexpr int D = sh::D, KS = sh::KS, PS = sh::PS;
  extern __shared__ __align__(16) float f32_smem[];
  float *qs = f32_smem, *ks = qs + F32_ROWS * KS, *vs = ks + F32_KEYS * KS, *ps = vs + F32_KEYS * KS;
  const int lane = threadIdx.x % 32, c = lane % 8, rg = (int)threadIdx.x / 32 * 4 + lane / 8;
  const int64_t bh = blockIdx.y, b = bh / a.H, h = bh % a.H, hk = h / (a.H / a.Hkv);
  /* row and key indices fit 32 bits (cu_attn_f32_applies); the blocks with
   * the most keys of a causal mask start first */
  const int q0 = (int)(gridDim.x - 1 - blockIdx.x) * F32_ROWS, S = (int)a.S, T = (int)a.T, r0 = q0 + 4 * rg;
  const float *q = (const float *)a.q, *k = (const float *)a.k, *v = (const float *)a.v;
  const int64_t qbase = b * a.q_sb + h * a.q_sh, kbase = b * a.kv_sb + hk * a.kv_sh;

  for (int e = threadIdx.x; e < F32_ROWS * (D / 4); e += F32_THREADS) { /* Q, zeros past S */
    const int r = e / (D / 4), col = e % (D / 4) * 4;
    *(float4 *)(qs + r * KS + col) =
        q0 + r < S ? *(const float4 *)(q + qbase + (int64_t)(q0 + r) * a.q_ss + col) : f32_zero4();
  }
  float o[4][NC][4], m[4], l[4];
#pragma unroll
  for (int i = 0; i < 4; i++) {
    m[i] = -INFINITY, l[i] = 0.f;
#pragma unroll
    for (int mc = 0; mc < NC; mc++) o[i][mc][0] = o[i][mc][1] = o[i][mc][2] = o[i][mc][3] = 0.f;
  }
  unsigned nan_rows = 0; /* bit i: row r0 + i saw a NaN score */
  const float LOG2E = 1.4426950408889634f;
  const bool custom = a.mask_kind == RLX_MASK_CUSTOM;
  const float *mask_bh = custom ? a.mask + b * a.mask_stride[0] + h * a.mask_stride[1] : NULL;

  /* the band of keys any row of this block may see */
  const int shift = T - S;
  int kend = T, kbeg = 0;
  const int qlast = (q0 + F32_ROWS < S ? q0 + F32_ROWS : S) - 1;
  if (a.mask_kind == RLX_MASK_CAUSAL || a.mask_kind == RLX_MASK_SLIDING_WINDOW) {
    kend = qlast + shift + 1;
    kend = kend < 0 ? 0 : kend > T ? T : kend;
  }
  if (a.mask_kind == RLX_MASK_SLIDING_WINDOW) {
    const int64_t first = (int64_t)q0 + shift - a.window + 1;
    kbeg = first < 0 ? 0 : (int)(first / F32_KEYS * F32_KEYS);
  }
  const int ntiles = kend > kbeg ? (kend - kbeg + F32_KEYS - 1) / F32_KEYS : 0;

  for (int it = 0; it < ntiles; it++) {
    const int k0 = kbeg + it * F32_KEYS;
    __syncthreads(); /* the last tile's K, V and P are read (and Q is stored) */
    for (int e = threadIdx.x; e < F32_KEYS * (D / 4); e += F32_THREADS) { /* K and V, zeros past T */
      const int r = e / (D / 4), col = e % (D / 4) * 4;
      const bool ok = k0 + r < T;
      const int64_t off = kbase + (int64_t)(ok ? k0 + r : 0) * a.kv_ss + col;
      *(float4 *)(ks + r * KS + col) = ok ? *(const float4 *)(k + off) : f32_zero4();
      *(float4 *)(vs + r * KS + col) = ok ? *(const float4 *)(v + off) : f32_zero4();
    }
    __syncthreads();

    /* S = Q K^T: rows r0 + i, keys k0 + c + 8u */
    float s[4][8];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
      for (int u = 0; u < 8; u++) s[i][u] = 0.f;
#pragma unroll 4
    for (int d = 0; d < D; d += 4) {
      float4 qv[4], kv[8];
#pragma unroll
      for (int i = 0; i < 4; i++) qv[i] = *(const float4 *)(qs + (4 * rg + i) * KS + d);
#pragma unroll
      for (int u = 0; u < 8; u++) kv[u] = *(const float4 *)(ks + (c + 8 * u) * KS + d);
#pragma unroll
      for (int i = 0; i < 4; i++)
#pragma unroll
        for (int u = 0; u < 8; u++) {
          float x = s[i][u];
          x = fmaf(qv[i].x, kv[u].x, x);
          x = fmaf(qv[i].y, kv[u].y, x);
          x = fmaf(qv[i].z, kv[u].z, x);
          s[i][u] = fmaf(qv[i].w, kv[u].w, x);
        }
    }

    /* scores (scale, softcap, mask) in log2 units, hidden keys -inf; the
     * online softmax's step for each row */
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const int row = r0 + i;
      const float *mrow = custom ? mask_bh + (int64_t)row * a.mask_stride[2] : NULL;
      float mx = -INFINITY;
#pragma unroll
      for (int u = 0; u < 8; u++) {
        const int j = k0 + c + 8 * u;
        float x = -INFINITY;
        if (row < S && j < T && key_visible(a, row, j)) {
          x = finish_score_masked<float>(a, s[i][u], custom ? mrow[(int64_t)j * a.mask_stride[3]] : 0.f);
          if (x != x) nan_rows |= 1u << i, x = -INFINITY;
        }
        s[i][u] = x * LOG2E;
        mx = fmaxf(mx, s[i][u]);
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
      const float mn = fmaxf(m[i], mx);
      const float alpha = mn == -INFINITY ? 1.f : attn_ex2(m[i] - mn);
      const float nm = mn == -INFINITY ? 0.f : -mn; /* nothing visible yet: every p is 2^-inf = 0 */
      m[i] = mn;
      float ls = 0.f;
#pragma unroll
      for (int u = 0; u < 8; u++) {
        const float p = attn_ex2(s[i][u] + nm);
        ls += p;
        ps[(4 * rg + i) * PS + c + 8 * u] = p;
      }
      l[i] = l[i] * alpha + ls; /* this thread's keys; the row's lanes are summed at the end */
#pragma unroll
      for (int mc = 0; mc < NC; mc++) o[i][mc][0] *= alpha, o[i][mc][1] *= alpha, o[i][mc][2] *= alpha, o[i][mc][3] *= alpha;
    }
    __syncthreads(); /* P's rows are written by the 8 lanes of each row group */

    /* O += P V: rows r0 + i, columns 4c + 32mc .. + 3 */
#pragma unroll 2
    for (int j = 0; j < F32_KEYS; j += 4) {
      float4 pv[4];
#pragma unroll
      for (int i = 0; i < 4; i++) pv[i] = *(const float4 *)(ps + (4 * rg + i) * PS + j);
#pragma unroll
      for (int jj = 0; jj < 4; jj++) {
        float4 vv[NC];
#pragma unroll
        for (int mc = 0; mc < NC; mc++) vv[mc] = *(const float4 *)(vs + (j + jj) * KS + 4 * c + 32 * mc);
#pragma unroll
        for (int i = 0; i < 4; i++) {
          const float p = jj == 0 ? pv[i].x : jj == 1 ? pv[i].y : jj == 2 ? pv[i].z : pv[i].w;
#pragma unroll
          for (int mc = 0; mc < NC; mc++) {
            o[i][mc][0] = fmaf(p, vv[mc].x, o[i][mc][0]);
            o[i][mc][1] = fmaf(p, vv[mc].y, o[i][mc][1]);
            o[i][mc][2] = fmaf(p, vv[mc].z, o[i][mc][2]);
            o[i][mc][3] = fmaf(p, vv[mc].w, o[i][mc][3]);
          }
        }
      }
    }
  }

  /* the 8 lanes of a row group hold parts of the same rows' sums */
  nan_rows |= __shfl_xor_sync(0xffffffffu, nan_rows, 1);
  nan_rows |= __shfl_xor_sync(0xffffffffu, nan_rows, 2);
  nan_rows |= __shfl_xor_sync(0xffffffffu, nan_rows, 4);
  float *out = (float *)a.out;
#pragma unroll
  for (int i = 0; i < 4; i++) {
    float li = l[i];
    li += __shfl_xor_sync(0xffffffffu, li, 1);
    li += __shfl_xor_sync(0xffffffffu, li, 2);
    li += __shfl_xor_sync(0xffffffffu, li, 4);
    const int row = r0 + i;
    if (row >= S) continue;
    const float inv = li > 0.f ? 1.f / li : 0.f;
    const bool nan = (nan_rows >> i) & 1;
#pragma unroll
    for (int mc = 0; mc < NC; mc++) {
      float4 y = make_float4(o[i][mc][0] * inv, o[i][mc][1] * inv, o[i][mc][2] * inv, o[i][mc][3] * inv);
      if (nan) y = make_float4(NAN, NAN, NAN, NAN);
      *(float4 *)(out + qbase + (int64_t)row * a.q_ss + 4 * c + 32 * mc) = y;
    }
  }
}

template <int NC> static int f32_one(const cu_attn_args *a, cudaStream_t st, int smem_only) {
  const size_t smem = f32_shape<NC>::smem;
  if (smem_only)
    return smem > 48 * 1024 ? cudaFuncSetAttribute(flash_f32<NC>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem)
                            : cudaSuccess;
  const dim3 grid((unsigned)((a->S + F32_ROWS - 1) / F32_ROWS), (unsigned)(a->B * a->H));
  flash_f32<NC><<<grid, F32_THREADS, smem, st>>>(*a);
  return cudaGetLastError();
}

/* Whether flash_f32 takes a: F32 q, k and v, head_dim 32, 64, 96 or 128,
 * 16-byte aligned rows (float4 loads and stores). */
int cu_attn_f32_applies(const cu_attn_args *a) {
  return a->dtype == RLX_F32 && a->kv_dtype == RLX_F32 && a->D % 32 == 0 && a->D <= 128 && cu_aligned16(a->q) &&
         cu_aligned16(a->k) && cu_aligned16(a->v) && cu_aligned16(a->out) && a->q_ss % 4 == 0 && a->q_sh % 4 == 0 &&
         a->q_sb % 4 == 0 && a->kv_ss % 4 == 0 && a->kv_sh % 4 == 0 && a->kv_sb % 4 == 0 && a->B * a->H < 65536 &&
         a->S < (1 << 30) && a->T < (1 << 30) && !a->force_exact;
}

int cu_attn_f32_launch(const cu_attn_args *a, cudaStream_t st, int smem_only) {
  switch (a->D / 32) {
  case 1: return f32_one<1>(a, st, smem_only);
  case 2: return f32_one<2>(a, st, smem_only);
  case 3: return f32_one<3>(a, st, smem_only);
  case 4: return f32_one<4>(a, st, smem_only);
  default: return cudaErrorInvalidValue;
  }
}
