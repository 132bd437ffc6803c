/* k_quant_mma.cu — the integer product at 3 to CU_QMM_MAX_M rows of x
 * (2 for Q6_K; DequantMatMul in a batched decode step), on the tensor
 * cores.
 *
 * The ring kernel (k_quant_gemv.cu) gives each lane its own 32 weights
 * and loads x's 32 levels for them once per row of x: at 8 rows of x a
 * lane reads ten times the weights' bytes of x, and L1, not DRAM, bounds
 * the product. Here a warp holds a tile of 16 weight rows x 32 weights as
 * the A fragment of mma.m16n8k32 (int8 levels) and x's rows as its B
 * fragment (8 columns), so each level of x is read once per 16 weight
 * rows. Lane (g, t) of the mma layout (g = lane / 4, t = lane % 4) takes
 * the level words t and t + 4 of a 32-weight unit (weights 4t..4t+3 and
 * 16+4t..16+4t+3) of rows g and g + 8, and the same words of x's row g;
 * its four int32 sums are rows g and g + 8 against x's rows 2t and
 * 2t + 1. Each unit's sums are scaled by the unit's weight scale and x's
 * d (offsets and mins through x's s), in F32, as the M = 1 kernels do;
 * Q6_K's two scales a unit (one per 16 weights) take two m16n8k16.
 *
 * A block owns 16 consecutive rows of the concatenated segments; its
 * warps split K and add their tiles through shared memory at the end.
 * Each warp copies chunks of its 16 rows (CBK blocks of each) with
 * 16-byte cp.async into a ring of QMMA_STAGES buffers, as the ring kernel
 * does, and reads the fragments from there (blocks of 18, 34 and 210
 * bytes are only 2-byte aligned: sm_words). */
#include "qmv_common.cuh"

#define QMMA_WARPS 4
#define QMMA_STAGES 3

/* Blocks of a row a chunk (CBK: at least 128 bytes, whole super-blocks)
 * and the 16-byte pieces of a row's slot (P): CBK blocks, up to 15 bytes
 * before the first (the copy starts 16-byte aligned) and the word
 * sm_words reads past the last, in an odd count so that the rows of the 8
 * lane groups fall in different banks. */
template <int S> struct qmma_chunk {
  enum { CBK = S == RLX_Q8_0 ? 4 : qmv_fmt<S>::BW == 32 ? 8 : 1 };
  enum { P = ((CBK * qmv_fmt<S>::BB + 15 + 4 + 15) / 16) | 1 };
};

/* This lane's part of unit u of the block at b (shared memory): level
 * words lo (weights 4t..4t+3) and hi (16+4t..16+4t+3), the scales of the
 * unit's first and last 16 weights (sc0, sc1: equal but in Q6_K) and the
 * offset that meets x's sum (off). Each decoder is qmv_unit's, for two of
 * its eight words. */
template <int S>
__device__ __forceinline__ void qmma_unit(const uint8_t *b, int u, int t, int &lo, int &hi, float &sc0, float &sc1,
                                          float &off) {
  typedef qmv_fmt<S> F;
  if (S == RLX_Q4_0 || S == RLX_Q4_1) { /* 16 bytes: weight l low nibble, l + 16 high */
    const bool q41 = S == RLX_Q4_1;
    int q;
    sm_words<F::A, 1>(b + (q41 ? 4 : 2) + 4 * t, &q);
    lo = q & 0x0F0F0F0F, hi = (q >> 4) & 0x0F0F0F0F;
    const float d = sm_f16(b);
    sc0 = sc1 = d;
    off = q41 ? sm_f16(b + 2) : -8.f * d;
  } else if (S == RLX_Q8_0) {
    sm_words<F::A, 1>(b + 2 + 4 * t, &lo);
    sm_words<F::A, 1>(b + 18 + 4 * t, &hi);
    sc0 = sc1 = sm_f16(b);
    off = 0.f;
  } else if (S == RLX_Q4_K) { /* d, dmin, 12 bytes of 6-bit scales and mins, 128 bytes of levels */
    int ls, lm;
    q4k_scale_min(b + 4, u, ls, lm);
    const uint8_t *q = b + 16 + 32 * (u >> 1); /* sub-blocks 2i (low nibbles) and 2i + 1 (high) */
    const int sh = 4 * (u & 1);
    lo = (*(const int *)(q + 4 * t) >> sh) & 0x0F0F0F0F;
    hi = (*(const int *)(q + 16 + 4 * t) >> sh) & 0x0F0F0F0F;
    sc0 = sc1 = sm_f16(b) * (float)ls;
    off = -sm_f16(b + 2) * (float)lm;
  } else { /* Q6_K: ql[128] qh[64] scales[16] d; a scale per 16 weights */
    const int h = u >> 2, qq = u & 3, shl = 4 * (qq >> 1), shh = 2 * qq;
    const uint8_t *ql = b + 64 * h + 32 * (qq & 1), *qh = b + 128 + 32 * h;
    int l0, l1, h0, h1;
    sm_words<F::A, 1>(ql + 4 * t, &l0);
    sm_words<F::A, 1>(ql + 16 + 4 * t, &l1);
    sm_words<F::A, 1>(qh + 4 * t, &h0);
    sm_words<F::A, 1>(qh + 16 + 4 * t, &h1);
    lo = (int)__vsub4((unsigned)(((l0 >> shl) & 0x0F0F0F0F) | (((h0 >> shh) & 0x03030303) << 4)), 0x20202020u);
    hi = (int)__vsub4((unsigned)(((l1 >> shl) & 0x0F0F0F0F) | (((h1 >> shh) & 0x03030303) << 4)), 0x20202020u);
    const float d = sm_f16(b + 208);
    const int8_t *sc = (const int8_t *)(b + 192 + 8 * h + 2 * qq);
    sc0 = d * (float)sc[0], sc1 = d * (float)sc[1];
    off = 0.f;
  }
}

/* c = A (16 x 32 int8: a0 a1 rows g and g + 8 at k 4t.., a2 a3 at k
 * 16+4t..) times B (32 x 8: b0 k 4t.., b1 k 16+4t.. of column g);
 * c[0..1] row g, columns 2t and 2t + 1, c[2..3] row g + 8. */
__device__ __forceinline__ void qmma_k32(int *c, int a0, int a1, int a2, int a3, int b0, int b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %10, %10, %10};\n"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(0));
}
/* The same over 16 of k (a0 a1 and b0 at k 4t..). */
__device__ __forceinline__ void qmma_k16(int *c, int a0, int a1, int b0) {
  asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%7, %7, %7, %7};\n"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a0), "r"(a1), "r"(b0), "r"(0));
}

template <int S, typename O> __global__ void __launch_bounds__(QMMA_WARPS * 32) qmma_kernel(const __grid_constant__ cu_qmv_args a) {
  typedef qmv_fmt<S> F;
  typedef qmma_chunk<S> C;
  enum { UPB = F::BW / 32, SLOT = C::P * 16 };
  __shared__ __align__(16) uint8_t ring[QMMA_WARPS][QMMA_STAGES][16][SLOT];
  __shared__ float4 part[QMMA_WARPS][32];
  const int lane = threadIdx.x % 32, wp = threadIdx.x / 32, g = lane >> 2, t = lane & 3;
  const int64_t r0 = (int64_t)blockIdx.x * 16, K = a.K, nblk = K / F::BW, rb = nblk * F::BB, K32 = K / 32;
  const int64_t b0 = nblk * wp / QMMA_WARPS, b1 = nblk * (wp + 1) / QMMA_WARPS; /* this warp's blocks of a row */
  const int nch = (int)((b1 - b0 + C::CBK - 1) / C::CBK);
  /* lanes l and l + 16 hold row r0 + l's address (a row past the end reads row r0; its sums are not stored) */
  int seg;
  int64_t rs;
  const uintptr_t row_at = qmv_row(a, r0 + (lane & 15) < a.rows ? r0 + (lane & 15) : r0, rb, seg, rs);
  int ic = 0; /* the next chunk to copy; past the end an empty group keeps the count */
  auto issue = [&]() {
    if (ic < nch) {
      const int64_t bc = b0 + (int64_t)ic * C::CBK, bytes = (bc + C::CBK <= b1 ? C::CBK : b1 - bc) * F::BB;
      uint8_t(*dst)[SLOT] = ring[wp][ic % QMMA_STAGES];
      const int piece = lane & 15;
#pragma unroll
      for (int j = 0; j < 16; j += 2) { /* two rows at a time, one 16-byte piece a lane */
        const int row = j + (lane >> 4);
        const uintptr_t p = __shfl_sync(0xffffffffu, row_at, row) + (uintptr_t)(bc * F::BB), p0 = p & ~(uintptr_t)15;
        if (piece < (int)((p + bytes - p0 + 15) / 16)) cu_cp_async16(dst[row] + 16 * piece, (const void *)(p0 + 16 * piece));
      }
    }
    ic++;
    cu_cp_async_commit();
  };
#pragma unroll
  for (int j = 0; j < QMMA_STAGES - 1; j++) issue();
  cu_pdl_wait(); /* the weights are params; x's levels and the residual come from the kernels before */
  const int M = (int)a.M;
  const int8_t *xq = (const int8_t *)a.qx;
  const float2 *dsx = (const float2 *)(xq + qx_levels_bytes(a.M, K));
  const int8_t *xg = xq + (int64_t)min(g, M - 1) * K; /* B's column g; columns past M are not stored */
  const float2 *ds_a = dsx + (int64_t)min(2 * t, M - 1) * K32, *ds_b = dsx + (int64_t)min(2 * t + 1, M - 1) * K32;
  const uintptr_t at_g = __shfl_sync(0xffffffffu, row_at, g), at_g8 = __shfl_sync(0xffffffffu, row_at, g + 8);
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (int c = 0; c < nch; c++) {
    issue();
    cu_cp_async_wait<QMMA_STAGES - 1>();
    __syncwarp(); /* every lane's copies of this chunk have landed */
    const int64_t bc = b0 + (int64_t)c * C::CBK;
    const int nb = (int)(bc + C::CBK <= b1 ? C::CBK : b1 - bc);
    const uint8_t *w0 = ring[wp][c % QMMA_STAGES][g] + ((at_g + bc * F::BB) & 15);
    const uint8_t *w1 = ring[wp][c % QMMA_STAGES][g + 8] + ((at_g8 + bc * F::BB) & 15);
#pragma unroll
    for (int b = 0; b < C::CBK; b++) {
      if (b >= nb) break;
#pragma unroll
      for (int u = 0; u < UPB; u++) {
        const int64_t k32 = (bc + b) * UPB + u;
        int lo0, hi0, lo1, hi1;
        float s00, s01, off0, s10, s11, off1;
        qmma_unit<S>(w0 + b * F::BB, u, t, lo0, hi0, s00, s01, off0);
        qmma_unit<S>(w1 + b * F::BB, u, t, lo1, hi1, s10, s11, off1);
        const int x0 = *(const int *)(xg + 32 * k32 + 4 * t), x1 = *(const int *)(xg + 32 * k32 + 16 + 4 * t);
        const float2 da = ds_a[k32], db = ds_b[k32];
        if (S == RLX_Q6_K) {
          int cl[4], ch[4];
          qmma_k16(cl, lo0, lo1, x0);
          qmma_k16(ch, hi0, hi1, x1);
          acc[0] = fmaf(da.x, fmaf(s00, (float)cl[0], s01 * (float)ch[0]), acc[0]);
          acc[1] = fmaf(db.x, fmaf(s00, (float)cl[1], s01 * (float)ch[1]), acc[1]);
          acc[2] = fmaf(da.x, fmaf(s10, (float)cl[2], s11 * (float)ch[2]), acc[2]);
          acc[3] = fmaf(db.x, fmaf(s10, (float)cl[3], s11 * (float)ch[3]), acc[3]);
        } else {
          int cs[4];
          qmma_k32(cs, lo0, lo1, hi0, hi1, x0, x1);
          acc[0] = fmaf(da.x, s00 * (float)cs[0], acc[0]);
          acc[1] = fmaf(db.x, s00 * (float)cs[1], acc[1]);
          acc[2] = fmaf(da.x, s10 * (float)cs[2], acc[2]);
          acc[3] = fmaf(db.x, s10 * (float)cs[3], acc[3]);
          if (S != RLX_Q8_0) {
            acc[0] = fmaf(off0, da.y, acc[0]), acc[1] = fmaf(off0, db.y, acc[1]);
            acc[2] = fmaf(off1, da.y, acc[2]), acc[3] = fmaf(off1, db.y, acc[3]);
          }
        }
      }
    }
    __syncwarp(); /* the next iteration's issue refills this stage */
  }
  part[wp][lane] = make_float4(acc[0], acc[1], acc[2], acc[3]);
  __syncthreads();
  if (wp != 0) return;
  float4 s = part[0][lane];
#pragma unroll
  for (int w = 1; w < QMMA_WARPS; w++) {
    const float4 q = part[w][lane];
    s.x += q.x, s.y += q.y, s.z += q.z, s.w += q.w;
  }
  float nf_a = 1.f, nf_b = 1.f; /* x's norm factors of columns 2t and 2t + 1 */
  for (int m = 0; m < M; m++) {
    const float f = qmv_norm_factor(a, qmv_norm_part(a, m));
    if (m == 2 * t) nf_a = f;
    if (m == 2 * t + 1) nf_b = f;
  }
  const float v[4] = {s.x * nf_a, s.y * nf_b, s.z * nf_a, s.w * nf_b};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const int m = 2 * t + (i & 1);
    const int64_t r = r0 + g + 8 * (i >> 1);
    if (m >= M || r >= a.rows) continue;
    int sg;
    int64_t n;
    qmv_row(a, r, rb, sg, n);
    const int64_t N = a.seg[sg].N;
    O *out = (O *)a.seg[sg].out;
    const O *res = (const O *)a.seg[sg].resid;
    cu_fl<O>::st(out + m * N + n, (typename cu_fl<O>::acc)(res ? v[i] + (float)cu_fl<O>::ld(res + m * N + n) : v[i]));
  }
}

template <typename O> static int qmma_typed(const cu_qmv_args *a, cudaStream_t st) {
  const dim3 g((unsigned)((a->rows + 15) / 16)), t(QMMA_WARPS * 32);
  switch (a->scheme) {
  case RLX_Q4_0: return cu_launch(qmma_kernel<RLX_Q4_0, O>, g, t, 0, st, a->pdl, *a);
  case RLX_Q4_1: return cu_launch(qmma_kernel<RLX_Q4_1, O>, g, t, 0, st, a->pdl, *a);
  case RLX_Q8_0: return cu_launch(qmma_kernel<RLX_Q8_0, O>, g, t, 0, st, a->pdl, *a);
  case RLX_Q4_K: return cu_launch(qmma_kernel<RLX_Q4_K, O>, g, t, 0, st, a->pdl, *a);
  case RLX_Q6_K: return cu_launch(qmma_kernel<RLX_Q6_K, O>, g, t, 0, st, a->pdl, *a);
  default: return cudaErrorInvalidValue;
  }
}

int qmv_mma_launch(const cu_qmv_args *a, cudaStream_t st) {
  switch (a->out_dtype) {
  case RLX_F32: return qmma_typed<float>(a, st);
  case RLX_F64: return qmma_typed<double>(a, st);
  case RLX_F16: return qmma_typed<__half>(a, st);
  case RLX_BF16: return qmma_typed<__nv_bfloat16>(a, st);
  default: return cudaErrorInvalidValue;
  }
}
