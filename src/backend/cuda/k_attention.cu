/* k_attention.cu — Attention as one flash-attention-style kernel (scores
 * never reach device memory): online softmax over key blocks, every mask
 * kind (causal and sliding window bottom-right aligned, custom additive
 * mask with broadcasting), grouped-query heads, [B,S,H,D] / [B,H,S,D] /
 * [B,S,H*D] through strides, score scale and logit softcap.
 *
 * Three kernels compute the same function:
 *  - flash_decode: few query rows per kv head (decode), or one query a
 *    block (a batch over a KV pool), keys split over blocks (below);
 *  - flash_tc: F16/BF16 with head_dim a multiple of 16 up to 128, on the
 *    tensor cores (mma.sync m16n8k16, F32 accumulation): a block of 4 warps
 *    takes 64 or 128 query rows of one (batch, head) (16 or 32 a warp);
 *    Q as A fragments in registers (or re-read from shared memory where
 *    they do not fit), S = Q K^T and O += P V run as mma, P stays in
 *    registers, rounded to the input type for the second product (as
 *    FA2); K/V tiles double-buffered by cp.async. Causal and
 *    sliding-window tiles outside the visible band are skipped.
 *  - flash_exact: every float dtype and head_dim up to 256, one block per
 *    query row whose warps split the keys, F32 (F64 for F64) throughout:
 *    the reference-precision path.
 * A row whose visible scores include a NaN gives NaN; a row with no
 * visible key gives zeros (the CPU kernel's rules, k_attention.c). */
#include "cu_common.cuh"

#include <cooperative_groups.h>
#include <math.h>

__device__ __forceinline__ bool key_visible(const cu_attn_args &a, int64_t i, int64_t j) {
  const int64_t last = i + (a.T - a.S);
  if (a.mask_kind == RLX_MASK_CAUSAL) return j <= last;
  if (a.mask_kind == RLX_MASK_SLIDING_WINDOW) return j <= last && j > last - a.window;
  return true;
}

/* The custom mask's value for (b, h, query i, key j). */
__device__ __forceinline__ float mask_value(const cu_attn_args &a, int64_t b, int64_t h, int64_t i, int64_t j) {
  return a.mask[b * a.mask_stride[0] + h * a.mask_stride[1] + i * a.mask_stride[2] + j * a.mask_stride[3]];
}

/* Score from the raw dot product: scale, softcap, and with a custom mask
 * its value m (mask_value, read ahead where a kernel can). */
template <typename T> __device__ __forceinline__ T finish_score_masked(const cu_attn_args &a, T dot, float m) {
  T s = dot * (T)a.scale;
  if (a.softcap > 0) s = (T)a.softcap * cu_tanh(s / (T)a.softcap);
  if (a.mask_kind == RLX_MASK_CUSTOM) s += (T)m;
  return s;
}

/* Score of query i, key j from the raw dot product (scale, softcap, mask). */
template <typename T>
__device__ __forceinline__ T finish_score(const cu_attn_args &a, T dot, int64_t b, int64_t h, int64_t i, int64_t j) {
  return finish_score_masked<T>(a, dot, a.mask_kind == RLX_MASK_CUSTOM ? mask_value(a, b, h, i, j) : 0.f);
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

#define TC_KEYS 64   /* keys per tile */

/* The mma asm is not volatile: a pure function of its registers, so the
 * compiler may interleave it with the fragment loads of the next step. */
template <typename E> struct tc_type;
template <> struct tc_type<__half> {
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *(uint32_t *)&v;
  }
  static __device__ __forceinline__ void mma(float *d, const uint32_t *a, uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
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
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

#define TC_STAGES 2   /* K/V tiles in flight: the next one loads while this one is used */

/* Query rows a warp takes: MS slices of 16 (the mma's M). Two slices share
 * every K and V fragment read from shared memory between two mma, which
 * halves the shared-memory traffic per FLOP (the one-slice kernel was
 * bound by it: one ldmatrix.x4 of 512 bytes per two mma). */
template <int DK, int MS> struct tc_shape {
  static constexpr int D = DK * 16, KS = D + 8, TILE = TC_KEYS * KS, ROWS = 4 * 16 * MS;
  /* Q as A fragments in registers where they fit beside O and S (MS * DK
   * <= 8: 32 registers); otherwise in shared memory, re-read by ldmatrix */
  static constexpr bool QREG = MS * DK <= 8;
  /* dynamic shared memory: TC_STAGES tiles of K and of V (and Q's rows
   * unless in registers), rows padded by 16 bytes (D + 8 elements) so the
   * 8 row addresses of an ldmatrix fall into distinct bank groups */
  static constexpr size_t smem = (size_t)(2 * TC_STAGES * TILE + (QREG ? 0 : ROWS * KS)) * 2;
};

/* 16 bytes global -> shared without a register round trip; zeros when !valid. */
__device__ __forceinline__ void cp_async16(unsigned s, const void *gmem, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(valid ? 16 : 0));
}

/* Four 8x8 b16 matrices from shared memory (lane L gives the address of
 * row L % 8 of matrix L / 8); .trans delivers each transposed. */
__device__ __forceinline__ void ldsm_x4(uint32_t *r, unsigned s) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t *r, unsigned s) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}

/* 2^x on the special-function unit (2^-inf = 0); P is rounded to 16 bits
 * for the second product, far coarser than its 2-ulp error. */
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

/* DK = head_dim / 16, MS = 16-row slices per warp (block: 4 warps, 64 * MS
 * query rows of one (batch, head)). K and V tiles [keys][D] stream through
 * shared memory by cp.async, TC_STAGES deep; the mma B fragments come out
 * by ldmatrix (V's transposed by ldmatrix.trans, so V is stored as it
 * lies). Scores stay unscaled until the row maximum is known: p =
 * 2^(s * scale * log2e - m), one FMA and one ex2 per score. The grid runs
 * the query blocks last-first: under a causal mask they see the most keys,
 * and starting them first evens out the tail. */
template <typename E, int DK, int MS>
__global__ void __launch_bounds__(128, 2) flash_tc(const __grid_constant__ cu_attn_args a) {
  typedef tc_shape<DK, MS> sh;
  constexpr int D = sh::D, KS = sh::KS, TILE = sh::TILE, ROWS = sh::ROWS, WR = 16 * MS;
  extern __shared__ __align__(16) unsigned char tc_smem[];
  E *ks = (E *)tc_smem, *vs = ks + TC_STAGES * TILE, *qs = vs + TC_STAGES * TILE;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t4 = lane % 4;
  const int64_t bh = blockIdx.y, b = bh / a.H, h = bh % a.H, hk = h / (a.H / a.Hkv);
  /* row and key indices fit 32 bits (tc_applies) */
  const int q0 = (int)(gridDim.x - 1 - blockIdx.x) * ROWS, r0 = q0 + warp * WR, S = (int)a.S, T = (int)a.T;
  const E *q = (const E *)a.q, *k = (const E *)a.k, *v = (const E *)a.v;
  const int64_t qbase = b * a.q_sb + h * a.q_sh, kbase = b * a.kv_sb + hk * a.kv_sh;

  /* Q: rows r0 + 16 ms + g (+8) as A fragments, or the block's rows into
   * shared memory (with the first K/V tile's copy group) */
  uint32_t qa[sh::QREG ? MS : 1][sh::QREG ? DK : 1][4];
  if (sh::QREG) {
#pragma unroll
    for (int ms = 0; ms < MS; ms++) {
      const int ra = r0 + 16 * ms + g, rb = ra + 8;
#pragma unroll
      for (int kk = 0; kk < DK; kk++) {
        const int c = kk * 16 + 2 * t4;
        qa[ms][kk][0] = ra < S ? *(const uint32_t *)(q + qbase + ra * a.q_ss + c) : 0u;
        qa[ms][kk][1] = rb < S ? *(const uint32_t *)(q + qbase + rb * a.q_ss + c) : 0u;
        qa[ms][kk][2] = ra < S ? *(const uint32_t *)(q + qbase + ra * a.q_ss + c + 8) : 0u;
        qa[ms][kk][3] = rb < S ? *(const uint32_t *)(q + qbase + rb * a.q_ss + c + 8) : 0u;
      }
    }
  } else {
#pragma unroll 4
    for (int e = threadIdx.x; e < ROWS * (D / 8); e += 128) {
      const int qr = e / (D / 8), c = (e % (D / 8)) * 8;
      const bool ok = q0 + qr < S;
      cp_async16((unsigned)__cvta_generic_to_shared(qs + qr * KS + c), q + qbase + (int64_t)(ok ? q0 + qr : 0) * a.q_ss + c, ok);
    }
  }
  float o[MS][DK * 2][4];
#pragma unroll
  for (int ms = 0; ms < MS; ms++)
#pragma unroll
    for (int n = 0; n < DK * 2; n++) o[ms][n][0] = o[ms][n][1] = o[ms][n][2] = o[ms][n][3] = 0.f;
  /* per row (slice ms, rows g and g+8): running maximum (log2 units), sum, NaN seen */
  float m[MS][2], l[MS][2];
  unsigned saw_nan = 0; /* bit 2 ms + r */
#pragma unroll
  for (int ms = 0; ms < MS; ms++)
#pragma unroll
    for (int r = 0; r < 2; r++) m[ms][r] = -INFINITY, l[ms][r] = 0.f;
  const float LOG2E = 1.4426950408889634f, scale_log2 = (float)a.scale * LOG2E;
  const int shift = T - S, win = (int)(a.window < 0x7fffffff ? a.window : 0x7fffffff);
  const bool banded = a.mask_kind == RLX_MASK_CAUSAL || a.mask_kind == RLX_MASK_SLIDING_WINDOW;
  /* scores that need more than the scale (custom mask, softcap) go
   * through finish_score; the two-slice kernel takes only plain ones (the
   * general path's 64-bit index math would spill its registers) */
  const bool plain = MS == 2 || (a.mask_kind != RLX_MASK_CUSTOM && a.softcap <= 0);

  /* the band of keys any row of this block may see */
  int kend = T, kbeg = 0;
  const int qlast = (q0 + ROWS < S ? q0 + ROWS : S) - 1;
  if (banded) {
    kend = qlast + shift + 1;
    kend = kend < 0 ? 0 : kend > T ? T : kend;
  }
  if (a.mask_kind == RLX_MASK_SLIDING_WINDOW) {
    const int64_t first = (int64_t)q0 + shift - a.window + 1;
    kbeg = first < 0 ? 0 : (int)(first / TC_KEYS * TC_KEYS);
  }
  const int ntiles = kend > kbeg ? (kend - kbeg + TC_KEYS - 1) / TC_KEYS : 0;
  /* all 128 threads copy a tile, 16 bytes of K and of V each per step:
   * thread t takes the 16-byte column t % CPR of rows t / CPR + RSTEP i
   * (when 128 is a multiple of CPR; otherwise element order) */
  constexpr int CPR = D / 8, RSTEP = 128 % CPR == 0 ? 128 / CPR : 0;
  const int cr = RSTEP ? threadIdx.x / CPR : 0, cc = RSTEP ? (threadIdx.x % CPR) * 8 : 0;
  const E *kg = k + kbase + cc, *vg = v + kbase + cc;
  const unsigned ks_sh = (unsigned)__cvta_generic_to_shared(ks), vs_sh = (unsigned)__cvta_generic_to_shared(vs);
  auto load_tile = [&](int stage, int k0) {
    if (RSTEP) {
#pragma unroll
      for (int i = 0; i < TC_KEYS / (RSTEP ? RSTEP : 1); i++) {
        const int row = k0 + cr + i * RSTEP;
        const bool ok = row < T;
        const int64_t off = (int64_t)(ok ? row : 0) * a.kv_ss;
        const unsigned at = 2u * (stage * TILE + (cr + i * RSTEP) * KS + cc);
        cp_async16(ks_sh + at, kg + off, ok);
        cp_async16(vs_sh + at, vg + off, ok);
      }
    } else {
#pragma unroll 4
      for (int e = threadIdx.x; e < TC_KEYS * CPR; e += 128) {
        const int kr = e / CPR, c = (e % CPR) * 8;
        const bool ok = k0 + kr < T;
        const int64_t off = kbase + (int64_t)(ok ? k0 + kr : 0) * a.kv_ss + c;
        const unsigned at = 2u * (stage * TILE + kr * KS + c);
        cp_async16(ks_sh + at, k + off, ok);
        cp_async16(vs_sh + at, v + off, ok);
      }
    }
  };
  if (ntiles > 0) load_tile(0, kbeg);
  cu_cp_async_commit();
  /* each lane's ldmatrix row addresses (bytes, shared window): K and Q
   * row-major fragments, V transposed (see the products below) */
  const unsigned k_lane = (unsigned)__cvta_generic_to_shared(ks) +
                          2u * (((lane & 7) + (lane >> 4) * 8) * KS + ((lane >> 3) & 1) * 8);
  const unsigned v_lane = (unsigned)__cvta_generic_to_shared(vs) +
                          2u * (((lane & 7) + ((lane >> 3) & 1) * 8) * KS + (lane >> 4) * 8);
  const unsigned q_lane = (unsigned)__cvta_generic_to_shared(qs) +
                          2u * ((warp * WR + (lane & 7) + ((lane >> 3) & 1) * 8) * KS + (lane >> 4) * 8);
  for (int it = 0; it < ntiles; it++) {
    const int k0 = kbeg + it * TC_KEYS;
    if (it + 1 < ntiles) load_tile((it + 1) % TC_STAGES, k0 + TC_KEYS);
    cu_cp_async_commit();
    cu_cp_async_wait<1>(); /* this tile's group (and Q's) has landed; the next may be in flight */
    __syncthreads();
    const unsigned kt = k_lane + 2u * (it % TC_STAGES) * TILE, vt = v_lane + 2u * (it % TC_STAGES) * TILE;
    /* a warp whose rows see no key of the tile skips it */
    const bool idle = r0 >= S || (banded && k0 > r0 + WR - 1 + shift) ||
                      (a.mask_kind == RLX_MASK_SLIDING_WINDOW && (int64_t)k0 + TC_KEYS - 1 <= (int64_t)r0 + shift - a.window);
    if (!idle) {
      float s[MS][TC_KEYS / 8][4];
#pragma unroll
      for (int ms = 0; ms < MS; ms++)
#pragma unroll
        for (int n = 0; n < TC_KEYS / 8; n++) s[ms][n][0] = s[ms][n][1] = s[ms][n][2] = s[ms][n][3] = 0.f;
      /* S = Q K^T: one ldmatrix.x4 gives the B fragments of two 8-key tiles
       * (matrices: keys +0..7 / d lo, keys +0..7 / d hi, keys +8..15 / d lo, hi),
       * used by every slice */
#pragma unroll
      for (int kk = 0; kk < DK; kk++) {
        uint32_t qf[MS][4];
#pragma unroll
        for (int ms = 0; ms < MS; ms++) {
          if (sh::QREG) {
#pragma unroll
            for (int e = 0; e < 4; e++) qf[ms][e] = qa[sh::QREG ? ms : 0][sh::QREG ? kk : 0][e];
          } else { /* matrices: rows 0-7 / k lo, rows 8-15 / k lo, rows 0-7 / k hi, rows 8-15 / k hi */
            ldsm_x4(qf[ms], q_lane + 2u * (ms * 16 * KS + kk * 16));
          }
        }
#pragma unroll
        for (int n2 = 0; n2 < TC_KEYS / 16; n2++) {
          uint32_t bf[4];
          ldsm_x4(bf, kt + 2u * (n2 * 16 * KS + kk * 16));
#pragma unroll
          for (int ms = 0; ms < MS; ms++) {
            tc_type<E>::mma(s[ms][2 * n2], qf[ms], bf[0], bf[1]);
            tc_type<E>::mma(s[ms][2 * n2 + 1], qf[ms], bf[2], bf[3]);
          }
        }
      }
      /* mask; row maxima of rows g (c0, c1) and g+8 (c2, c3). Plain scores
       * (no custom mask, no softcap) stay unscaled (scale > 0 keeps the
       * order); the others become log2-unit scores here. A tile every row
       * of this warp sees whole needs no mask: a NaN score then reaches the
       * sum and so the row's output by itself. */
      float mx[MS][2];
      const bool interior = plain && k0 + TC_KEYS <= T && r0 + WR <= S &&
                            (a.mask_kind == RLX_MASK_NONE || k0 + TC_KEYS - 1 <= r0 + shift) &&
                            (a.mask_kind != RLX_MASK_SLIDING_WINDOW || (int64_t)k0 > (int64_t)r0 + WR - 1 + shift - a.window);
#pragma unroll
      for (int ms = 0; ms < MS; ms++) {
        mx[ms][0] = mx[ms][1] = -INFINITY;
        if (interior) {
#pragma unroll
          for (int n = 0; n < TC_KEYS / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) mx[ms][e >> 1] = fmaxf(mx[ms][e >> 1], s[ms][n][e]);
        } else if (plain) {
          /* the diagonal (and ragged) tiles of a causal / sliding-window / no
           * mask: visibility from 32-bit offsets, rel = i + shift - j */
          const int rel0 = r0 + 16 * ms + g + shift - k0 - 2 * t4, jleft = T - k0 - 2 * t4;
          const int rows_left = S - r0 - 16 * ms - g;
#pragma unroll
          for (int n = 0; n < TC_KEYS / 8; n++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
              const int rel = rel0 + (e >= 2 ? 8 : 0) - n * 8 - (e & 1);
              const bool vis = rows_left > (e >= 2 ? 8 : 0) && jleft > n * 8 + (e & 1) &&
                               (a.mask_kind == RLX_MASK_NONE || rel >= 0) &&
                               (a.mask_kind != RLX_MASK_SLIDING_WINDOW || rel < win);
              float x = vis ? s[ms][n][e] : -INFINITY;
              if (x != x) saw_nan |= 1u << (2 * ms + (e >> 1)), x = -INFINITY;
              s[ms][n][e] = x;
              mx[ms][e >> 1] = fmaxf(mx[ms][e >> 1], x);
            }
          }
        } else if (MS == 1) {
#pragma unroll
          for (int n = 0; n < TC_KEYS / 8; n++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
              const int64_t i = r0 + 16 * ms + g + (e >= 2 ? 8 : 0), j = k0 + n * 8 + 2 * t4 + (e & 1);
              float x = -INFINITY;
              if (i < S && j < T && key_visible(a, i, j)) {
                x = finish_score<float>(a, s[ms][n][e], b, h, i, j);
                if (x != x) saw_nan |= 1u << (2 * ms + (e >> 1)), x = -INFINITY;
              }
              s[ms][n][e] = x * LOG2E;
              mx[ms][e >> 1] = fmaxf(mx[ms][e >> 1], s[ms][n][e]);
            }
          }
        }
      }
      /* p = 2^(s * f - m) with f the score's factor to log2 units */
      const float f = plain ? scale_log2 : 1.f;
      /* P as A fragments of 16 keys: (row g, k lo), (row g+8, k lo), (row g, k hi), (row g+8, k hi) */
      uint32_t pa[MS][TC_KEYS / 16][4];
#pragma unroll
      for (int ms = 0; ms < MS; ms++) {
        float alpha[2], nm[2], ls[2] = {0.f, 0.f};
#pragma unroll
        for (int r = 0; r < 2; r++) {
          float x = mx[ms][r];
          x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
          x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
          const float mn = fmaxf(m[ms][r], x * f);
          alpha[r] = mn == -INFINITY ? 1.f : ex2(m[ms][r] - mn);
          m[ms][r] = mn;
          nm[r] = mn == -INFINITY ? 0.f : -mn; /* a row with nothing visible yet: every p is 2^-inf = 0 */
        }
#pragma unroll
        for (int n = 0; n < TC_KEYS / 8; n++) {
          float p[4];
#pragma unroll
          for (int e = 0; e < 4; e++) {
            p[e] = ex2(fmaf(s[ms][n][e], f, nm[e >> 1]));
            ls[e >> 1] += p[e];
          }
          pa[ms][n / 2][(n % 2) * 2 + 0] = tc_type<E>::pack(p[0], p[1]);
          pa[ms][n / 2][(n % 2) * 2 + 1] = tc_type<E>::pack(p[2], p[3]);
        }
#pragma unroll
        for (int r = 0; r < 2; r++) l[ms][r] = l[ms][r] * alpha[r] + ls[r];
        /* O is rescaled only when some row's maximum moved (after the first
         * tiles of a row it rarely does) */
        if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {
#pragma unroll
          for (int n = 0; n < DK * 2; n++)
            o[ms][n][0] *= alpha[0], o[ms][n][1] *= alpha[0], o[ms][n][2] *= alpha[1], o[ms][n][3] *= alpha[1];
        }
      }
      /* O += P V: ldmatrix.trans of V [keys][D] gives the B fragments of two
       * 8-column tiles (matrices: keys lo / d +0, keys hi / d +0, keys lo / d +8, keys hi / d +8) */
#pragma unroll
      for (int j = 0; j < TC_KEYS / 16; j++)
#pragma unroll
        for (int n2 = 0; n2 < DK; n2++) {
          uint32_t bf[4];
          ldsm_x4_trans(bf, vt + 2u * (j * 16 * KS + n2 * 16));
#pragma unroll
          for (int ms = 0; ms < MS; ms++) {
            tc_type<E>::mma(o[ms][2 * n2], pa[ms][j], bf[0], bf[1]);
            tc_type<E>::mma(o[ms][2 * n2 + 1], pa[ms][j], bf[2], bf[3]);
          }
        }
    }
    __syncthreads(); /* every warp is done with this stage before it is refilled */
  }
  asm volatile("cp.async.wait_all;\n" ::); /* Q's copy when no tile ran */
  if (r0 >= S) return;
  E *out = (E *)a.out;
  /* the four threads of a quad hold the columns of the same rows */
  saw_nan |= __shfl_xor_sync(0xffffffffu, saw_nan, 1);
  saw_nan |= __shfl_xor_sync(0xffffffffu, saw_nan, 2);
#pragma unroll
  for (int ms = 0; ms < MS; ms++) {
#pragma unroll
    for (int r = 0; r < 2; r++) {
      l[ms][r] += __shfl_xor_sync(0xffffffffu, l[ms][r], 1);
      l[ms][r] += __shfl_xor_sync(0xffffffffu, l[ms][r], 2);
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
      const int i = r0 + 16 * ms + g + 8 * r;
      if (i >= S) continue;
      const float inv = l[ms][r] > 0.f ? 1.f / l[ms][r] : 0.f;
#pragma unroll
      for (int n = 0; n < DK * 2; n++) {
        float y0 = o[ms][n][2 * r] * inv, y1 = o[ms][n][2 * r + 1] * inv;
        if ((saw_nan >> (2 * ms + r)) & 1) y0 = y1 = NAN;
        *(uint32_t *)(out + qbase + (int64_t)i * a.q_ss + n * 8 + 2 * t4) = tc_type<E>::pack(y0, y1);
      }
    }
  }
}

/* flash_tc<E, DK, MS> for a head dim: its launch, or (smem_only) only
 * raising its shared-memory limit past the default 48 KB, which is done at
 * plan time, outside any stream capture. */
template <typename E, int DK, int MS> static int tc_one(const cu_attn_args *a, cudaStream_t st, int smem_only) {
  const size_t smem = tc_shape<DK, MS>::smem;
  if (smem_only)
    return cudaFuncSetAttribute(flash_tc<E, DK, MS>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  const int rows = tc_shape<DK, MS>::ROWS;
  dim3 grid((unsigned)((a->S + rows - 1) / rows), (unsigned)(a->B * a->H));
  flash_tc<E, DK, MS><<<grid, 128, smem, st>>>(*a);
  return cudaGetLastError();
}

template <typename E, int MS> static int launch_tc_ms(const cu_attn_args *a, cudaStream_t st, int smem_only) {
  switch (a->D / 16) {
  case 1: return tc_one<E, 1, MS>(a, st, smem_only);
  case 2: return tc_one<E, 2, MS>(a, st, smem_only);
  case 3: return tc_one<E, 3, MS>(a, st, smem_only);
  case 4: return tc_one<E, 4, MS>(a, st, smem_only);
  case 5: return tc_one<E, 5, MS>(a, st, smem_only);
  case 6: return tc_one<E, 6, MS>(a, st, smem_only);
  case 7: return tc_one<E, 7, MS>(a, st, smem_only);
  case 8: return tc_one<E, 8, MS>(a, st, smem_only);
  default: return cudaErrorInvalidValue;
  }
}

template <typename E> static int launch_tc(const cu_attn_args *a, cudaStream_t st, int smem_only) {
  return a->tc_tile == CU_ATTN_TILE_128 ? launch_tc_ms<E, 2>(a, st, smem_only) : launch_tc_ms<E, 1>(a, st, smem_only);
}

/* ---------------------------------------------------------------- split-key decode kernel */

#define DEC_MAX_ROWS 16          /* query rows per kv head: (H / Hkv) * S, or H / Hkv (per_query) */
#define DEC_MAX_QUERIES 64       /* per_query: query rows (batched sequences) at most */
#define DEC_POOL_PART_FLOATS ((int64_t)64 << 20) /* per_query: partial-state floats at most (256 MB) */
#define DEC_MAX_KEYS 128         /* keys per split */
#define DEC_STAGE_BYTES (64 << 10) /* a split's K and V rows staged in shared memory */
#define DEC_THREADS 128
#define DEC_WARPS (DEC_THREADS / 32)
#define DEC_MERGE_E 4             /* (row, d) elements a thread of the merge sums at once */
#define DEC_MERGE_S 8             /* over this many splits at once (16 made the kernel spill) */
#define DEC_MAX_CLUSTER 16        /* splits merged in a cluster's shared memory (the H200's largest cluster) */
static_assert(DEC_MAX_KEYS <= DEC_THREADS, "flash_decode gives every key of a split at least one thread");

/* Stages rows j0 .. j0+n-1 of one kv head (D contiguous elements each,
 * row stride ss) into dst [n][dst_ss]: 16-byte cp.async copies where the
 * rows allow (VEC), else element loads, all issued before any is used. */
template <typename E, bool VEC>
__device__ __forceinline__ void dec_stage_rows(E *dst, int dst_ss, const E *src, int64_t ss, int n, int D, int t) {
  if (VEC) {
    constexpr int PER = 16 / (int)sizeof(E);
    const int per_row = D / PER;
    for (int e = t; e < n * per_row; e += DEC_THREADS) {
      const int jj = e / per_row, c = (e % per_row) * PER;
      cu_cp_async16(dst + jj * dst_ss + c, src + jj * ss + c);
    }
  } else {
#pragma unroll 4
    for (int e = t; e < n * D; e += DEC_THREADS) dst[(e / D) * dst_ss + e % D] = src[(e / D) * ss + e % D];
  }
}

/* flash_decode's row stride of staged K rows, in elements: with 16-byte
 * rows one 16-byte step longer than the row, so that the 8 threads of a
 * quarter warp reading 16 bytes of 8 consecutive keys hit all 32 banks. */
__host__ __device__ __forceinline__ int dec_k_stride(int D, int es, bool vec) { return vec ? D + 16 / es : D; }

/* Where the merge reads the splits' partial states of a head: [R][D + 3]
 * floats a split, `stride` apart (each row's unnormalized o, then its m, l
 * and NaN flag), in global memory (part) or in the shared memory of the
 * merging block (the first of a cluster, which the others wrote). */
struct dec_parts_global {
  const float *base;
  size_t stride;
  __device__ float ld(int s, int off) const { return __ldcg(base + s * stride + off); }
};
struct dec_parts_shared {
  const float *base;
  size_t stride;
  __device__ float ld(int s, int off) const { return base[s * stride + off]; }
};

/* The merge of a head's splits: each row's maximum, NaN flag and weighted
 * sum L over the splits (a warp per row), the splits' weights kept in wsh
 * [R][splits], then every (row, d) sums its splits' partial outputs, the
 * loads of several splits and elements in flight (a chain of dependent
 * reads here took most of the kernel's time). */
template <typename E, typename P>
__device__ void dec_merge(const cu_attn_args &a, const P &src, float *wsh, float *ls, int *nan_row) {
  const int S = a.per_query ? 1 : (int)a.S, G = (int)(a.H / a.Hkv), R = G * S, D = (int)a.D, splits = a.splits;
  const int t = threadIdx.x, lane = t % 32, warp = t / 32;
  const int64_t i0 = a.per_query ? blockIdx.y % a.S : 0, bh = a.per_query ? blockIdx.y / a.S : blockIdx.y;
  const int64_t b = bh / a.Hkv, hk = bh % a.Hkv;
  const int per = R * D, chunk = DEC_MERGE_E * DEC_THREADS;
  for (int r = warp; r < R; r += DEC_WARPS) {
    float M = -INFINITY, m0 = -INFINITY, l0 = 0.f; /* m0, l0: split `lane`'s, kept for the second pass */
    int any_nan = 0;
    for (int s = lane; s < splits; s += 32) {
      const float m = src.ld(s, r * (D + 3) + D), l = src.ld(s, r * (D + 3) + D + 1);
      if (s == lane) m0 = m, l0 = l;
      M = fmaxf(M, m);
      any_nan |= src.ld(s, r * (D + 3) + D + 2) != 0.f;
    }
    M = cu_warp_max(M);
    any_nan = __any_sync(0xffffffffu, any_nan);
    float L = 0.f;
    for (int s = lane; s < splits; s += 32) {
      const float m = s == lane ? m0 : src.ld(s, r * (D + 3) + D), l = s == lane ? l0 : src.ld(s, r * (D + 3) + D + 1);
      const float w = M == -INFINITY || m == -INFINITY ? 0.f : expf(m - M);
      wsh[r * splits + s] = w;
      L += w * l;
    }
    L = cu_warp_sum(L);
    if (lane == 0) ls[r] = L, nan_row[r] = any_nan;
  }
  __syncthreads();
  for (int e0 = t; e0 < per; e0 += chunk) {
    int off[DEC_MERGE_E], wrow[DEC_MERGE_E];
    float acc[DEC_MERGE_E];
#pragma unroll
    for (int u = 0; u < DEC_MERGE_E; u++) {
      const int e = e0 + u * DEC_THREADS, r = e < per ? e / D : 0;
      off[u] = e < per ? r * (D + 3) + e % D : 0, wrow[u] = r * splits, acc[u] = 0.f;
    }
    for (int s0 = 0; s0 < splits; s0 += DEC_MERGE_S) {
      float o[DEC_MERGE_S][DEC_MERGE_E];
#pragma unroll
      for (int s = 0; s < DEC_MERGE_S; s++)
#pragma unroll
        for (int u = 0; u < DEC_MERGE_E; u++) /* a split of weight 0 (every key masked) wrote no o */
          o[s][u] = s0 + s < splits && wsh[wrow[u] + s0 + s] != 0.f ? src.ld(s0 + s, off[u]) : 0.f;
#pragma unroll
      for (int s = 0; s < DEC_MERGE_S; s++) {
        if (s0 + s >= splits) break;
#pragma unroll
        for (int u = 0; u < DEC_MERGE_E; u++) {
          const float w = wsh[wrow[u] + s0 + s];
          if (w != 0.f) acc[u] += w * o[s][u];
        }
      }
    }
#pragma unroll
    for (int u = 0; u < DEC_MERGE_E; u++) {
      const int e = e0 + u * DEC_THREADS;
      if (e >= per) break;
      const int r = e / D, d = e % D;
      const int64_t h = hk * G + r / S, i = i0 + r % S;
      const float y = nan_row[r] ? NAN : ls[r] > 0.f ? acc[u] / ls[r] : 0.f;
      cu_fl<E>::st((E *)a.out + b * a.q_sb + h * a.q_sh + i * a.q_ss + d, y);
    }
  }
}

/* Flash-decoding: with one query row per head (decode) a kernel that tiles
 * queries has one useful row per tile and one block per head walking all
 * keys. Here block (split, b*Hkv + hk) takes keys_per_split (<= the
 * block's threads) keys of one kv head against all the R = (H / Hkv) * S
 * query rows that read it (K and V read once per kv head):
 *  1. the split's K and V rows are copied to shared memory, V's copy in
 *     flight while the scores are formed;
 *  2. tpk threads (as many as the block has for each key, up to 8) score
 *     one key against all R rows (RC >= R accumulators), each a slice of
 *     the head dims, summed by shuffles (one thread a key left 3 of the 4
 *     warps idle at 32 keys a split);
 *  3. a warp per row forms the split's softmax state (max m, sum l);
 *  4. a thread per head-dim element sums p v over the keys for all rows;
 *  5. the splits' states are merged in split order: where the splits of
 *     a head are one thread block cluster (up to DEC_MAX_CLUSTER), every
 *     block writes its state into the shared memory of the cluster's
 *     first block, which merges them there; else through global memory,
 *     by the last block of the head to finish (the fence, the counter and
 *     the L2 reads after the splits' own work: 5-6 of the kernel's 12 us
 *     at the 8B decode shape, T 450, by clock stamps). Before, the first
 *     blocks of a cluster read the others' states where they lay
 *     (distributed shared memory), and every block waited for them at a
 *     second cluster barrier.
 * A custom mask's values for the split's keys are read with the q rows,
 * while K is in flight, not after the scores (a global round trip of
 * their own). With per_query (a batch of sequences over a KV pool) a block
 * takes the G rows of one query, and reads the mask first: where it hides
 * every key of the split, nothing is staged or scored and the block's
 * state is empty (m = -inf, l = 0, no o: the merge gives it weight 0 and
 * never reads its o). Both together: 4.785 ms a token of the 8B bf16 step through
 * the LLM API on the H200, against 4.809 before.
 * No step walks keys one after another with a reduction between them: a
 * decode step's attention is a few microseconds of latency, and an earlier
 * form (a warp per key, shuffles per key and row, K loaded key by key)
 * took 25-90 us at the 8B shape. F32 arithmetic throughout. */
template <typename E, bool VEC, int RC> __global__ void __launch_bounds__(DEC_THREADS) flash_decode(const __grid_constant__ cu_attn_args a) {
  extern __shared__ float dec_smem[];
  /* S: the query rows of the block, from i0 (per_query: one) */
  const int S = a.per_query ? 1 : (int)a.S, G = (int)(a.H / a.Hkv), R = G * S, D = (int)a.D, kps = (int)a.keys_per_split;
  const int kss = dec_k_stride(D, (int)sizeof(E), VEC);
  const int pcols = a.splits > kps ? a.splits : kps;
  float *qs = dec_smem;                             /* [RC][D]: rows past R are zeros */
  float *ps = qs + RC * D;                          /* [R][pcols] scores, then p; the merge's weights */
  float *ms = ps + R * pcols, *ls = ms + R;         /* [R] each */
  int *nan_row = (int *)(ls + R);                   /* [R] */
  float *mk = (float *)(nan_row + R);               /* [R][kps]: the custom mask's values */
  E *ks = (E *)(dec_smem + ((RC * D + R * pcols + 3 * R + R * kps + 3) & ~3)); /* [kps][kss], 16-byte aligned */
  E *vs = ks + (size_t)kps * kss;                   /* [kps][D] */
  float *os = (float *)(vs + (size_t)kps * D);      /* [splits][R][D + 3]: the cluster's states (first block) */
  __shared__ int last;
  const int t = threadIdx.x, lane = t % 32, warp = t / 32;
  /* hq: the (batch, kv head) of the block, or with per_query its query too */
  const int64_t hq = blockIdx.y, i0 = a.per_query ? hq % a.S : 0, bh = a.per_query ? hq / a.S : hq;
  const int64_t b = bh / a.Hkv, hk = bh % a.Hkv;
  const int64_t j0 = (int64_t)blockIdx.x * kps;
  int n = (int)(a.T - j0 < kps ? a.T - j0 : kps);
  const E *q = (const E *)a.q, *k = (const E *)a.k, *v = (const E *)a.v;
  const int64_t kbase = b * a.kv_sb + hk * a.kv_sh + j0 * a.kv_ss;
  cu_pdl_chain(); /* every K and V row may be the one the step before wrote */
  if (a.per_query) { /* the mask first: a split it hides from every row stages nothing */
    int seen = 0;
    for (int e = t; e < R * n; e += DEC_THREADS) {
      const int r = e / n, jj = e % n;
      const float m = mask_value(a, b, hk * G + r / S, i0 + r % S, j0 + jj);
      mk[r * kps + jj] = m;
      seen |= m != -INFINITY;
    }
    if (!__syncthreads_or(seen)) n = 0;
  }
  dec_stage_rows<E, VEC>(ks, kss, k + kbase, a.kv_ss, n, D, t);
  cu_cp_async_commit();
  dec_stage_rows<E, VEC>(vs, D, v + kbase, a.kv_ss, n, D, t);
  cu_cp_async_commit();
  /* row r: head hk*G + r / S, query i = i0 + r % S */
  for (int e = t; e < RC * D; e += DEC_THREADS) {
    const int r = e / D, d = e % D;
    qs[e] = r < R ? cu_fl<E>::ld(q + b * a.q_sb + (hk * G + r / S) * a.q_sh + (i0 + r % S) * a.q_ss + d) : 0.f;
  }
  for (int r = t; r < R; r += DEC_THREADS) nan_row[r] = 0;
  if (a.mask_kind == RLX_MASK_CUSTOM && !a.per_query)
    for (int e = t; e < R * n; e += DEC_THREADS) {
      const int r = e / n, jj = e % n;
      mk[r * kps + jj] = mask_value(a, b, hk * G + r / S, r % S, j0 + jj);
    }
  cu_cp_async_wait<1>(); /* this thread's K copies */
  __syncthreads();
  /* 2. scores: key jj by the tpk consecutive threads of a warp from jj * tpk */
  {
    int tpk = 1;
    while (tpk < 8 && 2 * tpk * kps <= DEC_THREADS) tpk *= 2;
    const int jj = t / tpk, sub = t % tpk;
    float dot[RC];
#pragma unroll
    for (int r = 0; r < RC; r++) dot[r] = 0.f;
    if (jj < n) {
      const E *kr = ks + jj * kss;
      if (VEC) {
        constexpr int PER = 16 / (int)sizeof(E);
        for (int d = sub * PER; d < D; d += tpk * PER) {
          float kf[PER];
          cu_unpack16<E>(*(const uint4 *)(kr + d), kf); /* shared memory */
#pragma unroll
          for (int r = 0; r < RC; r++)
#pragma unroll
            for (int e = 0; e < PER; e++) dot[r] = fmaf(qs[r * D + d + e], kf[e], dot[r]);
        }
      } else {
        for (int d = sub; d < D; d += tpk) {
          const float kf = cu_fl<E>::ld(kr + d);
#pragma unroll
          for (int r = 0; r < RC; r++) dot[r] = fmaf(qs[r * D + d], kf, dot[r]);
        }
      }
    }
    /* every thread of the warp takes part (those past the keys with zeros) */
    for (int o = 1; o < tpk; o *= 2)
#pragma unroll
      for (int r = 0; r < RC; r++) dot[r] += __shfl_xor_sync(0xffffffffu, dot[r], o);
    if (jj < n && sub == 0) {
      const int64_t j = j0 + jj;
#pragma unroll
      for (int r = 0; r < RC; r++) {
        if (r >= R) break;
        float x = -INFINITY;
        if (key_visible(a, i0 + r % S, j)) {
          x = finish_score_masked<float>(a, dot[r], a.mask_kind == RLX_MASK_CUSTOM ? mk[r * kps + jj] : 0.f);
          if (x != x) nan_row[r] = 1, x = -INFINITY;
        }
        ps[r * pcols + jj] = x;
      }
    }
  }
  __syncthreads();
  /* 3. the split's state per row: warp per row */
  for (int r = warp; r < R; r += DEC_WARPS) {
    float mx = -INFINITY;
    for (int jj = lane; jj < n; jj += 32) mx = fmaxf(mx, ps[r * pcols + jj]);
    mx = cu_warp_max(mx);
    float l = 0.f;
    for (int jj = lane; jj < n; jj += 32) {
      const float p = mx == -INFINITY ? 0.f : expf(ps[r * pcols + jj] - mx);
      ps[r * pcols + jj] = p;
      l += p;
    }
    l = cu_warp_sum(l);
    if (lane == 0) ms[r] = mx, ls[r] = l;
  }
  cu_cp_async_wait<0>(); /* V */
  __syncthreads();
  /* 4. o = sum_j p_j v_j: thread per head-dim element, all rows at once */
  const size_t stride = (size_t)R * (D + 3);
  float *po = a.splits == 1 ? NULL
              : a.cluster ? cooperative_groups::this_cluster().map_shared_rank(os, 0) + blockIdx.x * stride
                          : a.part + ((size_t)hq * a.splits + blockIdx.x) * stride;
  /* a split of no visible key writes no o: its weight in the merge is 0 */
  for (int d = t; d < D && (n > 0 || a.splits == 1); d += DEC_THREADS) {
    float o[RC];
#pragma unroll
    for (int r = 0; r < RC; r++) o[r] = 0.f;
    for (int jj = 0; jj < n; jj++) {
      const float vv = cu_fl<E>::ld(vs + jj * D + d);
#pragma unroll
      for (int r = 0; r < RC; r++) {
        const float p = r < R ? ps[r * pcols + jj] : 0.f;
        if (p != 0.f) o[r] = fmaf(p, vv, o[r]); /* a masked key's V is never read into a sum */
      }
    }
#pragma unroll
    for (int r = 0; r < RC; r++) {
      if (r >= R) break;
      if (a.splits == 1) {
        const int64_t h = hk * G + r / S, i = i0 + r % S;
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
  if (a.cluster) {
    const cooperative_groups::cluster_group cl = cooperative_groups::this_cluster();
    cl.sync(); /* every split's state written into the first block */
    if (cl.block_rank() == 0) dec_merge<E>(a, dec_parts_shared{os, stride}, ps, ls, nan_row);
    return;
  }
  __threadfence();
  __syncthreads();
  if (t == 0) last = atomicAdd(&a.count[hq], 1u) == (unsigned)a.splits - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  dec_merge<E>(a, dec_parts_global{a.part + (size_t)hq * a.splits * stride, stride}, ps, ls, nan_row);
  if (t == 0) a.count[hq] = 0; /* ready for the next run */
}

/* The kernel's row capacity RC for R query rows a kv head. */
static int dec_row_cap(int64_t R) { return R <= 4 ? 4 : R <= 8 ? 8 : 16; }

/* Query rows a block of flash_decode takes, and the blocks of a split
 * (grid.y): (batch, kv head) pairs, times the queries with per_query. */
static int64_t dec_rows(const cu_attn_args *a) { return (a->H / a->Hkv) * (a->per_query ? 1 : a->S); }
static int64_t dec_heads(const cu_attn_args *a) { return a->B * a->Hkv * (a->per_query ? a->S : 1); }

/* flash_decode's shared memory: q (RC rows), the scores, the row states
 * and the mask values in F32, then (16-byte aligned) the staged K rows
 * (padded: dec_k_stride) and V rows of a split, then (cluster) every
 * split's state, which the first block merges. */
static size_t dec_smem_bytes(const cu_attn_args *a) {
  const int64_t R = dec_rows(a), kps = a->keys_per_split, es = cu_float_bytes(a->dtype);
  const int64_t pcols = a->splits > kps ? a->splits : kps;
  const size_t floats = (size_t)(dec_row_cap(R) * a->D + R * pcols + 3 * R + R * kps + 3) & ~(size_t)3;
  const size_t state = a->cluster ? (size_t)(a->splits * R * (a->D + 3)) * sizeof(float) : 0;
  return floats * sizeof(float) + (size_t)(kps * (dec_k_stride((int)a->D, (int)es, true) + a->D) * es) + state;
}

/* flash_decode's launch attributes, set at plan time, outside any stream
 * capture, for both forms of the dtype's kernel: shared memory past the
 * default 48 KB (long contexts: the merge's R x splits weights), clusters
 * past the portable 8 blocks. With a cluster, whether the device can run
 * one at all (cudaOccupancyMaxActiveClusters). */
#define DEC_MAX_SMEM (160 << 10)
template <typename E, int RC> static int dec_set_attrs_rc(const cu_attn_args *a, size_t smem) {
  void (*const kernels[2])(cu_attn_args) = {flash_decode<E, true, RC>, flash_decode<E, false, RC>};
  for (int i = 0; i < 2; i++) {
    int st = smem > 48 * 1024 ? cudaFuncSetAttribute(kernels[i], cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) : 0;
    if (!st && a->cluster > 8) st = cudaFuncSetAttribute(kernels[i], cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    if (st) return st;
  }
  if (a->cluster <= 1) return cudaSuccess;
  cudaLaunchAttribute at[2];
  const cudaLaunchConfig_t cfg =
      cu_launch_config(dim3((unsigned)a->splits, (unsigned)dec_heads(a)), DEC_THREADS, smem, 0, 0, a->cluster, at);
  int n = 0;
  const int st = cudaOccupancyMaxActiveClusters(&n, kernels[0], &cfg);
  return st ? st : n < 1 ? cudaErrorInvalidConfiguration : cudaSuccess;
}
template <typename E> static int dec_set_attrs_of(const cu_attn_args *a, int rc, size_t smem) {
  return rc == 4 ? dec_set_attrs_rc<E, 4>(a, smem) : rc == 8 ? dec_set_attrs_rc<E, 8>(a, smem) : dec_set_attrs_rc<E, 16>(a, smem);
}
static int dec_set_attrs(const cu_attn_args *a, size_t smem) {
  const int rc = dec_row_cap(dec_rows(a));
  return a->dtype == RLX_F16 ? dec_set_attrs_of<__half>(a, rc, smem)
         : a->dtype == RLX_BF16 ? dec_set_attrs_of<__nv_bfloat16>(a, rc, smem) : dec_set_attrs_of<float>(a, rc, smem);
}
template <typename E, int RC> static void dec_launch_rc(const cu_attn_args *a, bool vec, dim3 grid, size_t smem, cudaStream_t st) {
  cu_launch_cluster(vec ? flash_decode<E, true, RC> : flash_decode<E, false, RC>, grid, DEC_THREADS, smem, st, a->pdl,
                    a->cluster, *a);
}
template <typename E> static void dec_launch(const cu_attn_args *a, bool vec, dim3 grid, size_t smem, cudaStream_t st) {
  const int rc = dec_row_cap(dec_rows(a));
  if (rc == 4) dec_launch_rc<E, 4>(a, vec, grid, smem, st);
  else if (rc == 8) dec_launch_rc<E, 8>(a, vec, grid, smem, st);
  else dec_launch_rc<E, 16>(a, vec, grid, smem, st);
}

/* Whether flash_tc takes a (16-byte aligned rows for cp.async and ldmatrix). */
static int tc_applies(const cu_attn_args *a) {
  return (a->dtype == RLX_F16 || a->dtype == RLX_BF16) && a->D % 16 == 0 && a->D <= 128 && cu_aligned16(a->q) &&
         cu_aligned16(a->k) && cu_aligned16(a->v) && cu_aligned16(a->out) && a->q_ss % 8 == 0 && a->kv_ss % 8 == 0 &&
         a->q_sb % 8 == 0 && a->q_sh % 8 == 0 && a->kv_sb % 8 == 0 && a->kv_sh % 8 == 0 && a->B * a->H < 65536 &&
         a->S < (1 << 30) && a->T < (1 << 30) &&
         !a->force_exact;
}

/* The shape of flash_tc: two query slices per warp (128-row blocks) for
 * plain scores (no custom mask, no softcap) where there are at least as
 * many of them as multiprocessors, else one (64-row blocks: twice the
 * blocks for a small grid). On the H200 (bench_cuda attn, 32 / 8 heads, D
 * 128, S 512): B = 1 (128 blocks of 128 rows) 64-row 0.0290 ms vs 0.0311,
 * B = 2 0.0452 vs 0.0428, B = 8 0.1247 vs 0.1162. RLX_CUDA_ATTN_TILE=64 |
 * 128 forces one (for measuring both) where it applies. (64-row blocks
 * held to 168 registers, 3 a multiprocessor, measured slower at every B.) */
static int tc_tile_for(const cu_attn_args *a) {
  const int plain = a->mask_kind != RLX_MASK_CUSTOM && a->softcap <= 0;
  if (a->tile_force == 64) return CU_ATTN_TILE_64;
  if (a->tile_force == 128) return plain ? CU_ATTN_TILE_128 : CU_ATTN_TILE_64;
  if (!plain) return CU_ATTN_TILE_64;
  int dev = 0, sms = 132;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
    sms = 132;
  (void)cudaGetLastError();
  const int64_t blocks2 = (a->S + 127) / 128 * a->B * a->H;
  return blocks2 >= (int64_t)sms ? CU_ATTN_TILE_128 : CU_ATTN_TILE_64;
}

extern "C" void cu_attention_plan(cu_attn_args *a, size_t *part_floats, size_t *counters) {
  *part_floats = *counters = 0;
  a->tc_tile = CU_ATTN_TILE_64;
  if (tc_applies(a)) { /* a failure here shows as the launch's error */
    a->tc_tile = tc_tile_for(a);
    (void)(a->dtype == RLX_F16 ? launch_tc<__half>(a, 0, 1) : launch_tc<__nv_bfloat16>(a, 0, 1));
  }
  a->splits = 0, a->keys_per_split = 0, a->cluster = 0, a->per_query = 0;
  if (a->Hkv < 1) return;
  /* a batch of sequences over a KV pool (a custom mask, more query rows a
   * kv head than a block holds, at most DEC_MAX_QUERIES of them): a block
   * per query, each skipping the splits of other sequences' cells (32
   * sequences of 190 cells on the H100: the tensor-core kernel walked
   * all 6,100 keys of the pool per head, 0.6 ms a layer) */
  const int64_t G = a->H / a->Hkv;
  a->per_query = a->mask_kind == RLX_MASK_CUSTOM && G * a->S > DEC_MAX_ROWS && G <= DEC_MAX_ROWS && a->S <= DEC_MAX_QUERIES;
  const int64_t R = dec_rows(a);
  if ((a->dtype != RLX_F32 && a->dtype != RLX_F16 && a->dtype != RLX_BF16) || a->force_exact || R < 1 ||
      R > DEC_MAX_ROWS || a->D > 256 || a->T < 1 || dec_heads(a) >= 65536) {
    a->per_query = 0;
    return;
  }
  /* keys per split: 128 (the block's threads), halved while the grid
   * would cover fewer than half the H200's 132 multiprocessors (down to
   * 32), at most what fits the staging space. On the H200 at the 8B decode
   * shape (bench_cuda_kernels attn): T 512 32-64 keys 14.4 us (16: 17.0,
   * 128: 16.5); T 2048 128 18.9 (64: 21.1, 16: 37.4); T 8192 128 48.7
   * (64: 55.7); T 32768 128 153 (64: 241). More, shorter splits lose: each
   * costs the merge a partial state, and a block's latency is mostly fixed. */
  int64_t kmax = DEC_STAGE_BYTES / (2 * a->D * cu_float_bytes(a->dtype)) / 16 * 16;
  kmax = kmax > DEC_MAX_KEYS ? DEC_MAX_KEYS : kmax;
  const int64_t heads = dec_heads(a);
  int64_t kps = DEC_MAX_KEYS;
  while (kps > 32 && heads * ((a->T + kps - 1) / kps) < 66) kps /= 2;
  kps = kps > kmax ? kmax : kps;
  const int64_t splits = (a->T + kps - 1) / kps;
  /* per_query's partial states grow with queries x keys: past
   * DEC_POOL_PART_FLOATS the tensor-core kernel takes the batch */
  if (splits > 0x7fffffff || (a->per_query && heads * splits * R * (a->D + 3) > DEC_POOL_PART_FLOATS))
    return (void)(a->per_query = 0);
  a->keys_per_split = kps, a->splits = (int)splits;
  /* the splits of a head as one cluster, merged in shared memory, where
   * they are few enough and RLX_CUDA_ATTN_CLUSTER is not 0 */
  if (splits > 1 && splits <= DEC_MAX_CLUSTER && !a->no_cluster) {
    a->cluster = (int)splits;
    const size_t smem = dec_smem_bytes(a);
    if (smem <= DEC_MAX_SMEM && dec_set_attrs(a, smem) == cudaSuccess) return;
    (void)cudaGetLastError();
  }
  a->cluster = 0;
  const size_t smem = dec_smem_bytes(a);
  if (smem > DEC_MAX_SMEM || dec_set_attrs(a, smem) != cudaSuccess) { /* the merge's R x splits weights do not fit */
    (void)cudaGetLastError();
    a->keys_per_split = 0, a->splits = 0, a->per_query = 0;
    return;
  }
  *part_floats = (size_t)(heads * splits * R * (a->D + 3));
  *counters = (size_t)heads;
}

extern "C" int cu_attention_launch(const cu_attn_args *a, cudaStream_t st) {
  if (a->B * a->H * a->S <= 0 || a->D <= 0) return cudaSuccess;
  if (a->splits > 0) {
    dim3 grid((unsigned)a->splits, (unsigned)dec_heads(a));
    const size_t smem = dec_smem_bytes(a);
    const int es = cu_float_bytes(a->dtype);
    const bool vec = a->D * es % 16 == 0 && a->kv_ss * es % 16 == 0 && a->kv_sh * es % 16 == 0 &&
                     a->kv_sb * es % 16 == 0 && cu_aligned16(a->k) && cu_aligned16(a->v);
    if (a->dtype == RLX_F16) dec_launch<__half>(a, vec, grid, smem, st);
    else if (a->dtype == RLX_BF16) dec_launch<__nv_bfloat16>(a, vec, grid, smem, st);
    else dec_launch<float>(a, vec, grid, smem, st);
    return cudaGetLastError();
  }
  if (tc_applies(a)) return a->dtype == RLX_F16 ? launch_tc<__half>(a, st, 0) : launch_tc<__nv_bfloat16>(a, st, 0);
  if (a->D > EXACT_MAX_CHUNKS * 32) return cudaErrorInvalidValue;
  const int64_t rows = a->B * a->H * a->S;
  if (rows > 0x7fffffff) return cudaErrorInvalidValue;
  if (a->dtype == RLX_F64) flash_exact<double><<<(unsigned)rows, EXACT_WARPS * 32, 0, st>>>(*a);
  else flash_exact<float><<<(unsigned)rows, EXACT_WARPS * 32, 0, st>>>(*a);
  return cudaGetLastError();
}
