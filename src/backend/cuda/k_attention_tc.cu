/* k_attention_tc.cu — flash_tc, the attention of F16/BF16 with head_dim a
 * multiple of 16 up to 128 on the tensor cores (k_attention.cu says how it
 * fits beside the other two kernels). */
#include "k_attention.cuh"

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
          alpha[r] = mn == -INFINITY ? 1.f : attn_ex2(m[ms][r] - mn);
          m[ms][r] = mn;
          nm[r] = mn == -INFINITY ? 0.f : -mn; /* a row with nothing visible yet: every p is 2^-inf = 0 */
        }
#pragma unroll
        for (int n = 0; n < TC_KEYS / 8; n++) {
          float p[4];
#pragma unroll
          for (int e = 0; e < 4; e++) {
            p[e] = attn_ex2(fmaf(s[ms][n][e], f, nm[e >> 1]));
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

/* Whether flash_tc takes a (16-byte aligned rows for cp.async and ldmatrix). */
int cu_attn_tc_applies(const cu_attn_args *a) {
  return (a->dtype == RLX_F16 || a->dtype == RLX_BF16) && !kv_is_block(a->kv_dtype) && a->D % 16 == 0 && a->D <= 128 &&
         cu_aligned16(a->q) && cu_aligned16(a->k) && cu_aligned16(a->v) && cu_aligned16(a->out) && a->q_ss % 8 == 0 &&
         a->kv_ss % 8 == 0 && a->q_sb % 8 == 0 && a->q_sh % 8 == 0 && a->kv_sb % 8 == 0 && a->kv_sh % 8 == 0 && a->B * a->H < 65536 &&
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
int cu_attn_tc_tile_for(const cu_attn_args *a) {
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

int cu_attn_tc_launch(const cu_attn_args *a, cudaStream_t st, int smem_only) {
  return a->dtype == RLX_F16 ? launch_tc<__half>(a, st, smem_only) : launch_tc<__nv_bfloat16>(a, st, smem_only);
}
