/* k_quant_gemv.cu — the integer GEMV, DequantMatMul's decode path at one
 * or two rows of x (k_quant_mma.cu takes more, up to CU_QMM_MAX_M, and
 * k_quant.cu has the exact product), as llama.cpp's MMVQ computes it:
 * x is quantized once per product to 8-bit levels per 32 elements
 * (cu_quantize_x: d = amax / 127, levels roundf(x / d), s = d * sum of
 * levels — the CPU backend's qdot_q8_0 bit for bit, d kept in F32), and
 * each 32 weights meet their 32 levels of x in eight __dp4a, scaled by the
 * weight block's scale and d (offsets and mins through s). The CPU backend
 * quantizes x the same way for the legacy blocks and per 256 (ggml's
 * q8_K) for the K-quants; 32 is the finer of the two.
 *
 * At M = 1 every scheme but Q6_K takes a direct kernel (below the ring
 * kernel), which loads the weights straight into registers. Otherwise
 * weights stream through shared memory: each warp owns a run of
 * consecutive output columns (weight rows: one contiguous span of bytes
 * per segment) and copies it a chunk of whole blocks at a time with
 * 16-byte cp.async into a ring of qmv_stage<S>::N buffers, so a warp keeps
 * N - 1 chunks (4-6 KB) of loads in flight while it decodes an
 * earlier one. One launch can serve several products of the same x
 * (segments: q, k and v of a layer). A lane decodes one 32-weight unit (a legacy block, a K-quant
 * sub-block) from shared memory: 16-byte reads where the format keeps its
 * levels 16-byte aligned (Q4_K), else aligned words joined by funnel
 * shifts (blocks of 18, 34 and 210 bytes are only 2-byte aligned). A
 * chunk's copy starts at its first byte rounded down to 16 and ends
 * rounded up: the extra bytes share a 16-byte aligned span with a byte of
 * the row, so they are mapped memory (the matrix is 16-byte aligned). */
#include "qmv_common.cuh"

#define QMV_WARPS 4

/* A stage: a chunk, up to 15 bytes before it (its copy starts 16-byte
 * aligned) and the word sm_words may read past a 2-byte aligned run. N:
 * as many stages (3 to 6) as keep the 8 blocks of QMV_MIN_BLOCKS(1) in a
 * multiprocessor's shared memory (27 KB a block, with the 1 KB the
 * hardware keeps per block): the bytes a warp keeps in
 * flight are what the stream's speed hangs on. */
template <int S> struct qmv_stage {
  enum { BYTES = (qmv_fmt<S>::CB * qmv_fmt<S>::BB + 32 + 15) / 16 * 16 };
  enum { FIT = 27 * 1024 / (QMV_WARPS * BYTES), N = FIT < 3 ? 3 : FIT > 6 ? 6 : FIT };
};

/* The 32-weight unit u of block b (in shared memory) as 32 signed levels
 * v[0..7] (4 a word, in order), and how they scale: the unit contributes
 * dx * (sc0 * (v[0..3] . xq[0..15]) + sc1 * (v[4..7] . xq[16..31]))
 * + off * sx (sx = dx * sum(xq)). Each decoder is ggml's dequantize_row_*
 * for those weights (quant_blocks.c), in integers. */
template <int S> __device__ __forceinline__ void qmv_unit(const uint8_t *b, int u, int *v, float &sc0, float &sc1, float &off) {
  typedef qmv_fmt<S> F;
  if (S == RLX_Q4_0 || S == RLX_Q4_1) { /* 16 bytes: weight l low nibble, l + 16 high */
    const bool q41 = S == RLX_Q4_1;
    int q[4];
    sm_words<F::A, 4>(b + (q41 ? 4 : 2), q);
#pragma unroll
    for (int k = 0; k < 4; k++) v[k] = q[k] & 0x0F0F0F0F, v[k + 4] = (q[k] >> 4) & 0x0F0F0F0F;
    const float d = sm_f16(b);
    sc0 = sc1 = d;
    off = q41 ? sm_f16(b + 2) : -8.f * d;
  } else if (S == RLX_Q8_0) {
    sm_words<F::A, 8>(b + 2, v);
    sc0 = sc1 = sm_f16(b);
    off = 0.f;
  } else if (S == RLX_Q4_K) { /* d, dmin, 12 bytes of 6-bit scales and mins, 128 bytes of levels */
    int ls, lm;
    q4k_scale_min(b + 4, u, ls, lm);
    int q[8]; /* sub-blocks 2i (low nibbles) and 2i + 1 (high) share 32 bytes */
    sm_words<F::A, 8>(b + 16 + 32 * (u >> 1), q);
    const int sh = 4 * (u & 1);
#pragma unroll
    for (int k = 0; k < 8; k++) v[k] = (q[k] >> sh) & 0x0F0F0F0F;
    sc0 = sc1 = sm_f16(b) * (float)ls;
    off = -sm_f16(b + 2) * (float)lm;
  } else { /* Q6_K: ql[128] qh[64] scales[16] d; a scale per 16 weights */
    const int h = u >> 2, qq = u & 3;
    int ql[8], qh[8];
    sm_words<F::A, 8>(b + 64 * h + 32 * (qq & 1), ql);
    sm_words<F::A, 8>(b + 128 + 32 * h, qh);
    const int shl = 4 * (qq >> 1), shh = 2 * qq;
#pragma unroll
    for (int k = 0; k < 8; k++)
      v[k] = (int)__vsub4((unsigned)(((ql[k] >> shl) & 0x0F0F0F0F) | (((qh[k] >> shh) & 0x03030303) << 4)), 0x20202020u);
    const float d = sm_f16(b + 208);
    const int8_t *sc = (const int8_t *)(b + 192 + 8 * h + 2 * qq);
    sc0 = d * (float)sc[0], sc1 = d * (float)sc[1];
    off = 0.f;
  }
}

/* The end of a direct kernel's R rows r0.. (segment seg[j], output column
 * rs[j] of it): each row's sum over the warp, times x's norm factor nf,
 * stored by lane 0 (qmv_put, with what qmv_tail_of took); rows past
 * a.rows are not stored. In a Rope's segment (R even, cu_qmv_rope_fits)
 * rows 2p and 2p + 1 of the warp are a rotated pair (qmv_row put them
 * there), each rounded to O as the product's store would round it before
 * the Rope reads it. */
template <int R, typename O>
__device__ __forceinline__ void qmv_store_rows(const cu_qmv_args &a, const float *acc, const int *seg, const int64_t *rs,
                                               int64_t r0, int lane, float nf, const qmv_tail<R> &t) {
  float v[R];
#pragma unroll
  for (int j = 0; j < R; j++) v[j] = cu_warp_sum(acc[j]) * nf;
  if (lane != 0) return;
#pragma unroll
  for (int j = 0; j < R; j++) {
    if (r0 + j >= a.rows) break;
    float y = v[j];
    if (R % 2 == 0 && (t.turns >> (j / 2) & 1))
      y = cu_rope_rotate(cu_fl<O>::round(v[j & ~1]), cu_fl<O>::round(v[j | 1]), t.c[j / 2], t.s[j / 2], j & 1);
    qmv_put<O>(a, seg[j], 0, rs[j], y, t.start[j]);
  }
}

/* Blocks per multiprocessor the M = 1 kernel is built for (registers
 * capped at 64 a thread: 8 x 4 warps, as many as the smem of 4 stages of
 * Q8_0 chunks allows); more rows of x need more registers (4: no spills). */
#define QMV_MIN_BLOCKS(MM) ((MM) == 1 ? 8 : 4)

/* Each warp owns rpw consecutive rows of the concatenated segments and
 * streams them as one run of chunks (cu_qmv_plan takes one row a warp,
 * measured fastest; runs of rows keep the pipeline from draining between
 * rows, which did not pay); out[m, row] for every m < M <= MM. Two cursors
 * walk (row, chunk) without divisions (64-bit ones per chunk made the
 * kernel bound by instruction issue). */
template <int S, int MM, typename O>
__global__ void __launch_bounds__(QMV_WARPS * 32, QMV_MIN_BLOCKS(MM)) qmv_kernel(const __grid_constant__ cu_qmv_args a) {
  typedef qmv_fmt<S> F;
  enum { SB = qmv_stage<S>::BYTES, UPB = F::BW / 32 };
  enum { STAGES = qmv_stage<S>::N };
  __shared__ __align__(16) uint8_t ring[QMV_WARPS][STAGES][SB];
  const int lane = threadIdx.x % 32, wp = threadIdx.x / 32;
  const int64_t r0 = ((int64_t)blockIdx.x * QMV_WARPS + wp) * a.rpw;
  if (r0 >= a.rows) {
    cu_pdl_wait();
    return; /* no block-wide barrier below: each warp works alone */
  }
  const int64_t K = a.K, nblk = K / F::BW, nchunk = (nblk + F::CB - 1) / F::CB, rb = nblk * F::BB, K32 = K / 32;
  const int nrows = (int)(r0 + a.rpw <= a.rows ? a.rpw : a.rows - r0), nch = (int)nchunk;
  const int8_t *xq = (const int8_t *)a.qx;
  const float2 *dsx = (const float2 *)(xq + qx_levels_bytes(a.M, K));
  /* the issue cursor: row ir (of this warp's), chunk ic, into stage is */
  int64_t rs;
  int ir = 0, ic = 0, is = 0, seg;
  uintptr_t irow = qmv_row(a, r0, rb, seg, rs);
  auto issue = [&]() { /* past the end an empty group keeps the count */
    if (ir < nrows) {
      const uintptr_t p = irow + (uintptr_t)ic * (F::CB * F::BB), p0 = p & ~(uintptr_t)15;
      const int64_t bytes = (ic + 1 < nch ? F::CB : nblk - (int64_t)ic * F::CB) * F::BB;
      const int n16 = (int)((p + bytes - p0 + 15) / 16);
      uint8_t *dst = ring[wp][is];
      for (int i = lane; i < n16; i += 32) cu_cp_async16(dst + 16 * i, (const void *)(p0 + 16 * i));
      if (++ic == nch && ++ir < nrows) ic = 0, irow = qmv_row(a, r0 + ir, rb, seg, rs);
      is = is + 1 == STAGES ? 0 : is + 1;
    }
    cu_cp_async_commit();
  };
  float acc[MM];
#pragma unroll
  for (int m = 0; m < MM; m++) acc[m] = 0.f;
#pragma unroll
  for (int j = 0; j < STAGES - 1; j++) issue();
  cu_pdl_wait(); /* the weights are params; x's levels and the residual come from the kernels before */
  cu_pdl_trigger(); /* as cu_pdl_chain: the next kernel's launch is spent while this one streams */
  float nf[MM]; /* x's norm factor per row */
#pragma unroll
  for (int m = 0; m < MM; m++) nf[m] = m < a.M ? qmv_norm_factor(a, qmv_norm_part(a, m)) : 1.f;
  /* the compute cursor: row cr, chunk cc, in stage cs */
  int64_t crs;
  int cr = 0, cc = 0, cs = 0, cseg;
  uintptr_t crow = qmv_row(a, r0, rb, cseg, crs);
  for (int j = 0, total = nrows * nch; j < total; j++) {
    issue();
    cu_cp_async_wait<STAGES - 1>();
    __syncwarp(); /* every lane's copies of this chunk have landed */
    const uint8_t *blocks = ring[wp][cs] + ((crow + (uintptr_t)cc * (F::CB * F::BB)) & 15);
    const int units = (int)(cc + 1 < nch ? F::CB : nblk - (int64_t)cc * F::CB) * UPB;
    const int64_t u_base = (int64_t)cc * (F::CB * UPB); /* the chunk's first 32-weight unit in its row */
#pragma unroll 2
    for (int i = lane; i < units; i += 32) {
      int v[8];
      float sc0, sc1, off;
      qmv_unit<S>(blocks + (i / UPB) * F::BB, i % UPB, v, sc0, sc1, off);
      const int64_t k32 = u_base + i;
#pragma unroll
      for (int m = 0; m < MM; m++) {
        if (m >= a.M) break;
        const int4 *xp = (const int4 *)(xq + m * K + 32 * k32);
        const int4 x0 = xp[0], x1 = xp[1];
        const float2 ds = dsx[m * K32 + k32];
        const int lo = __dp4a(v[3], x0.w, __dp4a(v[2], x0.z, __dp4a(v[1], x0.y, __dp4a(v[0], x0.x, 0))));
        const int hi = __dp4a(v[7], x1.w, __dp4a(v[6], x1.z, __dp4a(v[5], x1.y, __dp4a(v[4], x1.x, 0))));
        float t;
        if (S == RLX_Q6_K) t = fmaf(sc0, (float)lo, sc1 * (float)hi);
        else t = sc0 * (float)(lo + hi);
        acc[m] = fmaf(ds.x, t, acc[m]);
        if (S == RLX_Q4_0 || S == RLX_Q4_1 || S == RLX_Q4_K) acc[m] = fmaf(off, ds.y, acc[m]);
      }
    }
    __syncwarp(); /* the next iteration's issue refills this stage */
    cs = cs + 1 == STAGES ? 0 : cs + 1;
    if (++cc < nch) continue;
    /* the row is done */
#pragma unroll
    for (int m = 0; m < MM; m++) {
      if (m >= a.M) break;
      const float v = cu_warp_sum(acc[m]) * nf[m];
      if (lane == 0) qmv_put<O>(a, cseg, m, crs, v, a.seg[cseg].cache.dst ? qmv_cache_start(a, cseg, m == 0 && crs == 0) : 0);
      acc[m] = 0.f;
    }
    if (++cr < nrows) cc = 0, crow = qmv_row(a, r0 + cr, rb, cseg, crs);
  }
}

/* Q4_K at M = 1 ("direct"): the weights go from memory straight into
 * registers, 16 bytes a load, no shared memory. The ring kernel above
 * spends ~400 warp instructions on a 4096-weight Q4_K row (one 32-weight
 * unit a lane at a time: scales decoded per unit from shared-memory bytes,
 * x's levels reloaded per unit), ~0.17 a weight byte; at the copy rate
 * that is close to 3 instructions a cycle a multiprocessor, and it ran at
 * 2.0 TB/s. Here four lanes share a super-block: lane p of the four owns
 * sub-blocks 2p and 2p + 1 (32 level bytes, two loads; the low and high
 * nibbles of the same bytes), decodes their two scales and mins once from
 * the block's 16-byte head (one load), and meets 64 levels of x in 16
 * __dp4a: ~0.06 instructions a weight byte. A warp covers 8 super-blocks
 * a step and R rows, which share x's loads; it loads QK_U steps of all R
 * rows before using any (R * QK_U * 1152 bytes in flight a warp: a
 * 4096-weight row is 2 steps), the first ones before the PDL wait (the
 * weights are params). */
#define QK_U 2
/* Blocks of 4 warps a multiprocessor (register caps with no spills): at R = 2, 20 warps of 4.6 KB in flight */
#define QK_MIN_BLOCKS(R) ((R) == 1 ? 8 : (R) == 2 ? 5 : 3)
template <int R, typename O>
__global__ void __launch_bounds__(QMV_WARPS * 32, QK_MIN_BLOCKS(R)) qmv_q4k_kernel(const __grid_constant__ cu_qmv_args a) {
  const int lane = threadIdx.x % 32, g = lane >> 2, p = lane & 3;
  const int64_t r0 = ((int64_t)blockIdx.x * QMV_WARPS + threadIdx.x / 32) * R;
  if (r0 >= a.rows) {
    cu_pdl_wait();
    return;
  }
  const int64_t nsb = a.K / 256, rb = nsb * 144;
  const int steps = (int)((nsb + 7) / 8);
  const uint8_t *w[R];
  int seg[R];
  int64_t rs[R];
#pragma unroll
  for (int j = 0; j < R; j++) /* a row past the end reads row r0 again; its sum is not stored */
    w[j] = (const uint8_t *)qmv_row(a, r0 + j < a.rows ? r0 + j : r0, rb, seg[j], rs[j]) + 16 + 32 * p;
  float acc[R];
#pragma unroll
  for (int j = 0; j < R; j++) acc[j] = 0.f;
  const int8_t *xq = (const int8_t *)a.qx;
  const float4 *ds4 = (const float4 *)(xq + qx_levels_bytes(1, a.K)); /* (d, s) of units 2i and 2i + 1 */
  /* the scale and min bytes of sub-blocks 2p and 2p + 1 (ggml's get_scale_min_k4) are bytes
   * b0 and b0 + 1 of the head's words y, z, w (scales[0..11]) */
  const int b0 = 2 * (p & 1), sh = 8 * b0;
  float np = 0.f; /* this lane's part of x's sum of squares (a deferred norm) */
  qmv_tail<R> tail;
  for (int s0 = 0; s0 < steps; s0 += QK_U) {
    uint4 wv[QK_U][R][3]; /* this lane's level bytes (2) and head (1) of super-block 8s + g of each row */
#pragma unroll
    for (int u = 0; u < QK_U; u++) {
      const int64_t sb = (int64_t)(s0 + u) * 8 + g;
#pragma unroll
      for (int j = 0; j < R; j++) {
        if (sb < nsb) {
          const uint8_t *b = w[j] + sb * 144;
          wv[u][j][0] = cu_ld16_stream(b), wv[u][j][1] = cu_ld16_stream(b + 16);
          wv[u][j][2] = cu_ld16_stream(b - 16 - 32 * p);
        } else {
          wv[u][j][0] = wv[u][j][1] = wv[u][j][2] = make_uint4(0, 0, 0, 0);
        }
      }
    }
    if (s0 == 0) { /* x's levels come from the kernel before */
      cu_pdl_wait();
      cu_pdl_trigger();
      np = qmv_norm_part(a, 0);
      tail = qmv_tail_of<R>(a, seg, rs, lane);
    }
#pragma unroll
    for (int u = 0; u < QK_U; u++) {
      const int64_t sb = (int64_t)(s0 + u) * 8 + g;
      if (sb >= nsb) break;
      const int64_t k32 = sb * 8 + 2 * p;
      const int4 *xp = (const int4 *)(xq + 32 * k32);
      const int4 x0 = xp[0], x1 = xp[1], x2 = xp[2], x3 = xp[3];
      const float4 ds = ds4[k32 / 2];
#pragma unroll
      for (int j = 0; j < R; j++) {
        const uint4 q0 = wv[u][j][0], q1 = wv[u][j][1], h = wv[u][j][2];
        const int M4 = 0x0F0F0F0F;
        int lo = __dp4a((int)q0.x & M4, x0.x, 0), hi = __dp4a((int)(q0.x >> 4) & M4, x2.x, 0);
        lo = __dp4a((int)q0.y & M4, x0.y, lo), hi = __dp4a((int)(q0.y >> 4) & M4, x2.y, hi);
        lo = __dp4a((int)q0.z & M4, x0.z, lo), hi = __dp4a((int)(q0.z >> 4) & M4, x2.z, hi);
        lo = __dp4a((int)q0.w & M4, x0.w, lo), hi = __dp4a((int)(q0.w >> 4) & M4, x2.w, hi);
        lo = __dp4a((int)q1.x & M4, x1.x, lo), hi = __dp4a((int)(q1.x >> 4) & M4, x3.x, hi);
        lo = __dp4a((int)q1.y & M4, x1.y, lo), hi = __dp4a((int)(q1.y >> 4) & M4, x3.y, hi);
        lo = __dp4a((int)q1.z & M4, x1.z, lo), hi = __dp4a((int)(q1.z >> 4) & M4, x3.z, hi);
        lo = __dp4a((int)q1.w & M4, x1.w, lo), hi = __dp4a((int)(q1.w >> 4) & M4, x3.w, hi);
        int ls0, lm0, ls1, lm1;
        if (p < 2) { /* sub-blocks 0..3: scales[u] & 63, scales[u + 4] & 63 */
          ls0 = (h.y >> sh) & 63, ls1 = (h.y >> (sh + 8)) & 63;
          lm0 = (h.z >> sh) & 63, lm1 = (h.z >> (sh + 8)) & 63;
        } else { /* 4..7: low / high nibble of scales[u + 4], top bits of scales[u - 4] / scales[u] */
          ls0 = ((h.w >> sh) & 0xF) | ((h.y >> (sh + 6)) & 3) << 4, ls1 = ((h.w >> (sh + 8)) & 0xF) | ((h.y >> (sh + 14)) & 3) << 4;
          lm0 = ((h.w >> (sh + 4)) & 0xF) | ((h.z >> (sh + 6)) & 3) << 4, lm1 = ((h.w >> (sh + 12)) & 0xF) | ((h.z >> (sh + 14)) & 3) << 4;
        }
        const float d = __half2float(__ushort_as_half((unsigned short)(h.x & 0xFFFF)));
        const float dmin = __half2float(__ushort_as_half((unsigned short)(h.x >> 16)));
        float t = fmaf(ds.x, d * (float)ls0 * (float)lo, acc[j]);
        t = fmaf(-dmin * (float)lm0, ds.y, t);
        t = fmaf(ds.z, d * (float)ls1 * (float)hi, t);
        acc[j] = fmaf(-dmin * (float)lm1, ds.w, t);
      }
    }
  }
  qmv_store_rows<R, O>(a, acc, seg, rs, r0, lane, qmv_norm_factor(a, np), tail);
}

/* The legacy blocks at M = 1 (Q4_0, Q4_1, Q8_0), direct as qmv_q4k_kernel:
 * lane l owns block 32s + l of each of the warp's R rows at step s, read
 * as the aligned words around it (blocks of 18 and 34 bytes are only
 * 2-byte aligned; the words are joined by funnel shifts, and the lanes'
 * words of one load share cache lines, so they are L1-cached loads), and
 * meets its 32 levels of x, loaded once for the R rows, in eight __dp4a.
 * LG_U steps are loaded before any is used (the first before the PDL
 * wait). */
template <int S> struct lg_fmt;
template <> struct lg_fmt<RLX_Q4_0> { enum { BB = 18, NW = 5, U = 4 }; };
template <> struct lg_fmt<RLX_Q4_1> { enum { BB = 20, NW = 5, U = 4 }; };
template <> struct lg_fmt<RLX_Q8_0> { enum { BB = 34, NW = 9, U = 2 }; };
template <int S, int R, typename O>
__global__ void __launch_bounds__(QMV_WARPS * 32, R == 1 ? 8 : 4) qmv_legacy_kernel(const __grid_constant__ cu_qmv_args a) {
  typedef lg_fmt<S> F;
  const int lane = threadIdx.x % 32;
  const int64_t r0 = ((int64_t)blockIdx.x * QMV_WARPS + threadIdx.x / 32) * R;
  if (r0 >= a.rows) {
    cu_pdl_wait();
    return;
  }
  const int64_t nblk = a.K / 32, rb = nblk * F::BB;
  const int steps = (int)((nblk + 31) / 32);
  uintptr_t w[R];
  int seg[R];
  int64_t rs[R];
#pragma unroll
  for (int j = 0; j < R; j++) /* a row past the end reads row r0 again; its sum is not stored */
    w[j] = qmv_row(a, r0 + j < a.rows ? r0 + j : r0, rb, seg[j], rs[j]);
  float acc[R];
#pragma unroll
  for (int j = 0; j < R; j++) acc[j] = 0.f;
  const int8_t *xq = (const int8_t *)a.qx;
  const float2 *dsx = (const float2 *)(xq + qx_levels_bytes(1, a.K));
  float np = 0.f; /* this lane's part of x's sum of squares (a deferred norm) */
  qmv_tail<R> tail;
  for (int s0 = 0; s0 < steps; s0 += F::U) {
    unsigned wv[F::U][R][F::NW]; /* the words from the block's first byte rounded down to 4 */
    unsigned sh[F::U][R];        /* 0 or 16: the block's offset in them, in bits */
#pragma unroll
    for (int u = 0; u < F::U; u++) {
      const int64_t c = (int64_t)(s0 + u) * 32 + lane;
#pragma unroll
      for (int j = 0; j < R; j++) {
        const uintptr_t p = w[j] + (uintptr_t)(c * F::BB);
        const unsigned *q = (const unsigned *)(p & ~(uintptr_t)3);
        sh[u][j] = (unsigned)(p & 2) * 8;
#pragma unroll
        for (int k = 0; k < F::NW; k++) wv[u][j][k] = c < nblk ? __ldg(q + k) : 0u;
      }
    }
    if (s0 == 0) { /* x's levels come from the kernel before */
      cu_pdl_wait();
      cu_pdl_trigger();
      np = qmv_norm_part(a, 0);
      tail = qmv_tail_of<R>(a, seg, rs, lane);
    }
#pragma unroll
    for (int u = 0; u < F::U; u++) {
      const int64_t c = (int64_t)(s0 + u) * 32 + lane;
      if (c >= nblk) break;
      const int4 *xp = (const int4 *)(xq + 32 * c);
      const int4 x0 = xp[0], x1 = xp[1];
      const float2 ds = dsx[c];
      const int xw[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
      for (int j = 0; j < R; j++) {
        const unsigned *v = wv[u][j], b = sh[u][j];
        const float d = __half2float(__ushort_as_half((unsigned short)((v[0] >> b) & 0xFFFF)));
        int dot = 0;
        float off;
        if (S == RLX_Q8_0) { /* levels: bytes 2..33 */
#pragma unroll
          for (int k = 0; k < 8; k++) dot = __dp4a((int)__funnelshift_rc(v[k], v[k + 1], b + 16), xw[k], dot);
          off = 0.f;
        } else { /* 16 bytes of nibbles from byte 2 (Q4_0) or 4 (Q4_1): weight l low, l + 16 high */
#pragma unroll
          for (int k = 0; k < 4; k++) {
            const int q = S == RLX_Q4_1 ? (int)v[k + 1] : (int)__funnelshift_rc(v[k], v[k + 1], b + 16);
            dot = __dp4a(q & 0x0F0F0F0F, xw[k], dot);
            dot = __dp4a((q >> 4) & 0x0F0F0F0F, xw[k + 4], dot);
          }
          off = S == RLX_Q4_1 ? __half2float(__ushort_as_half((unsigned short)(v[0] >> 16))) : -8.f * d;
        }
        acc[j] = fmaf(ds.x, d * (float)dot, acc[j]);
        if (S != RLX_Q8_0) acc[j] = fmaf(off, ds.y, acc[j]);
      }
    }
  }
  qmv_store_rows<R, O>(a, acc, seg, rs, r0, lane, qmv_norm_factor(a, np), tail);
}

/* The levels and (d, s) of 32 values, one a lane (v). A block with a NaN
 * or infinity gets d = s = NaN and levels 0 (its products are NaN, as the
 * float product's would be), as qdot_q8_0 does. */
__device__ __forceinline__ void quantize32(float v, int8_t *xq, float2 *ds) {
  const int lane = threadIdx.x % 32;
  const float a = fabsf(v);
  const bool finite = __all_sync(0xffffffffu, a <= 3.402823466e38f);
  const float amax = cu_warp_max(finite ? a : 0.f);
  const float d = amax / 127, id = d != 0.f ? 1.f / d : 0.f;
  float q = __fmul_rn(v, id);
  q = q != q ? 0.f : fminf(fmaxf(q, -127.f), 127.f);
  const int level = finite ? (int)roundf(q) : 0;
  xq[lane] = (int8_t)level;
  const int sum = cu_warp_sum(level);
  if (lane == 0) *ds = finite ? make_float2(d, __fmul_rn(d, (float)sum)) : make_float2(__int_as_float(0x7fc00000), __int_as_float(0x7fc00000));
}

/* x [M, K] -> levels and (d, s); one warp per 32 elements. Unlike
 * cu_pdl_chain, the trigger comes before the wait: the integer GEMV after
 * then streams its first weights (params) while this kernel still waits,
 * and the run-ahead stops there, since that GEMV triggers only after its
 * own wait. SW (a CU_SWIGLU_ kind): x is silu(gate) * up, rounded to X as
 * the launch it replaces rounds it (FusedSwiGLU's fast silu for 16-bit
 * types, once; the region's after each step). */
template <typename X, int SW> __global__ void quantize_x_kernel(const __grid_constant__ cu_quant_x_args a) {
  cu_pdl_trigger(); /* the GEMV after may start streaming its weights */
  cu_pdl_wait();
  const int64_t nb = a.M * a.K / 32, step = (int64_t)gridDim.x * (blockDim.x / 32);
  int8_t *xq = (int8_t *)a.qx;
  float2 *dsx = (float2 *)(xq + qx_levels_bytes(a.M, a.K));
  const X *x = (const X *)a.x;
  for (int64_t b = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; b < nb; b += step) {
    const int64_t e = b * 32 + threadIdx.x % 32;
    float v;
    if (SW == CU_SWIGLU_NONE) {
      v = (float)cu_fl<X>::ld(x + e);
    } else { /* K is a multiple of 32: a warp's elements share a row */
      const int64_t m = e / a.K, at = m * a.x_rs + (e - m * a.K);
      const float g = (float)cu_fl<X>::ld(x + at), u = (float)cu_fl<X>::ld((const X *)a.x2 + at);
      float sg = cu_silu_f32<SW == CU_SWIGLU_FUSED && sizeof(X) == 2>(g);
      if (SW == CU_SWIGLU_REGION) sg = cu_fl<X>::round(sg);
      v = cu_fl<X>::round(sg * u);
    }
    quantize32(v, xq + b * 32, dsx + b);
  }
}
template <typename X> static int quantize_x_typed(const cu_quant_x_args *a, cudaStream_t st) {
  const dim3 g(cu_blocks(a->M * a->K / 32, CU_THREADS / 32)), t(CU_THREADS);
  if (a->swiglu == CU_SWIGLU_FUSED) return cu_launch(quantize_x_kernel<X, CU_SWIGLU_FUSED>, g, t, 0, st, a->pdl, *a);
  if (a->swiglu == CU_SWIGLU_REGION) return cu_launch(quantize_x_kernel<X, CU_SWIGLU_REGION>, g, t, 0, st, a->pdl, *a);
  return cu_launch(quantize_x_kernel<X, CU_SWIGLU_NONE>, g, t, 0, st, a->pdl, *a);
}

/* The rows of an RmsNorm (x + res + bias if given) normalized, rounded to
 * the norm's dtype E (what its launch would have stored) and quantized,
 * the norm's formulas (k_norm.cu, F32). Block (c, row) quantizes the
 * QN_THREADS elements of slice c of the row (a warp's 32 one block of
 * levels) and sums the squares of the whole row itself, read again from
 * L2 by each of the row's blocks: a row of 4096 is then spread over 16
 * multiprocessors, where one block of 1024 threads issued the
 * instructions of the whole row on one, which bound it (a decode step of
 * the 8B shape has 64 of these). A thread's own element, its gamma and beta are loaded
 * with the first of the row's elements it sums, QN_V of which are loaded
 * before any is used. K < 2^31 (cu_quant_x_launch). */
#define QN_THREADS 256
#define QN_V 8
template <typename E> __global__ void __launch_bounds__(QN_THREADS) quantize_norm_kernel(const __grid_constant__ cu_quant_x_args a) {
  __shared__ float scratch[32];
  cu_pdl_trigger(); /* before the wait, as in quantize_x_kernel */
  cu_pdl_wait();
  const cu_norm_args &nm = a.norm;
  const int K = (int)a.K, t = threadIdx.x, j = blockIdx.x * QN_THREADS + t;
  const int64_t base = (int64_t)blockIdx.y * K;
  const E *x = (const E *)nm.x + base, *res = nm.res ? (const E *)nm.res + base : NULL, *bias = (const E *)nm.bias;
  const E *gamma = (const E *)nm.gamma, *beta = (const E *)nm.beta;
  auto value = [&](int i) {
    float v = cu_fl<E>::ld(x + i);
    if (res) v += cu_fl<E>::ld(res + i);
    if (bias) v += cu_fl<E>::ld(bias + i);
    return v;
  };
  float own = 0.f, gm = 0.f, bt = 0.f;
  if (j < K) {
    own = value(j), gm = cu_fl<E>::ld(gamma + j);
    if (beta) bt = cu_fl<E>::ld(beta + j);
  }
  float s = 0.f;
  for (int j0 = 0; j0 < K; j0 += QN_THREADS * QN_V) {
    float v[QN_V];
#pragma unroll
    for (int i = 0; i < QN_V; i++) v[i] = j0 + i * QN_THREADS + t < K ? value(j0 + i * QN_THREADS + t) : 0.f;
#pragma unroll
    for (int i = 0; i < QN_V; i++) s += v[i] * v[i];
  }
  s = cu_block_sum<float>(s, scratch);
  const float r = 1.f / sqrtf(s / (float)K + (float)nm.eps);
  /* a warp's 32 elements are consecutive, and all in the row or all past
   * it (K and the threads are multiples of 32) */
  const int j32 = j - t % 32;
  if (j32 >= K) return;
  int8_t *xq = (int8_t *)a.qx;
  float2 *dsx = (float2 *)(xq + qx_levels_bytes(a.M, a.K));
  quantize32(cu_fl<E>::round(own * r * gm + bt), xq + base + j32, dsx + (base + j32) / 32);
}

/* An RmsNorm's rows with the row's factor left to the products
 * (cu_quant_x_norm_deferred: no beta), one warp per 32 elements as in
 * quantize_x_kernel: the levels of v * gamma (v = x + res + bias) and the
 * sum of the 32 v^2, with no pass over the whole row first. The
 * normalized row is not rounded to E on the way (the norm's own launch
 * would store it in E): closer to the exact product, not bit for bit. */
template <typename E> __global__ void quantize_norm_deferred_kernel(const __grid_constant__ cu_quant_x_args a) {
  cu_pdl_trigger(); /* before the wait, as in quantize_x_kernel */
  cu_pdl_wait();
  const cu_norm_args &nm = a.norm;
  const int64_t nb = a.M * a.K / 32, step = (int64_t)gridDim.x * (blockDim.x / 32);
  int8_t *xq = (int8_t *)a.qx;
  float2 *dsx = (float2 *)(xq + qx_levels_bytes(a.M, a.K));
  float *ssq = (float *)(xq + qx_ssq_offset(a.M, a.K));
  const E *x = (const E *)nm.x, *res = (const E *)nm.res, *bias = (const E *)nm.bias, *gamma = (const E *)nm.gamma;
  for (int64_t b = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; b < nb; b += step) {
    const int64_t e = b * 32 + threadIdx.x % 32, j = e % a.K;
    float v = cu_fl<E>::ld(x + e);
    if (res) v += cu_fl<E>::ld(res + e);
    if (bias) v += cu_fl<E>::ld(bias + j);
    const float s = cu_warp_sum(v * v);
    if (threadIdx.x % 32 == 0) ssq[b] = s;
    quantize32(v * (float)cu_fl<E>::ld(gamma + j), xq + b * 32, dsx + b);
  }
}

extern "C" size_t cu_qx_bytes(int64_t M, int64_t K) {
  return (size_t)qx_ssq_offset(M, K) + (size_t)(M * K / 32) * sizeof(float);
}

extern "C" const float *cu_qx_ssq(const void *qx, int64_t M, int64_t K) {
  return (const float *)((const uint8_t *)qx + qx_ssq_offset(M, K));
}

extern "C" int cu_quant_x_norm_deferred(const cu_quant_x_args *a) {
  return a->has_norm && !a->norm.beta && (a->x_dtype == RLX_F32 || a->x_dtype == RLX_F16 || a->x_dtype == RLX_BF16);
}

extern "C" int cu_quant_x_launch(const cu_quant_x_args *a, cudaStream_t st) {
  if (a->M <= 0 || a->K <= 0) return cudaSuccess;
  if (a->K % 32 || ((uintptr_t)a->qx & 15)) return cudaErrorInvalidValue;
  if (cu_quant_x_norm_deferred(a)) {
    const dim3 g(cu_blocks(a->M * a->K / 32, CU_THREADS / 32)), t(CU_THREADS);
    if (a->x_dtype == RLX_F32) return cu_launch(quantize_norm_deferred_kernel<float>, g, t, 0, st, a->pdl, *a);
    if (a->x_dtype == RLX_F16) return cu_launch(quantize_norm_deferred_kernel<__half>, g, t, 0, st, a->pdl, *a);
    return cu_launch(quantize_norm_deferred_kernel<__nv_bfloat16>, g, t, 0, st, a->pdl, *a);
  }
  if (a->has_norm) {
    if (a->M > 65535 || a->K > INT32_MAX) return cudaErrorInvalidValue;
    const dim3 g((unsigned)((a->K + QN_THREADS - 1) / QN_THREADS), (unsigned)a->M), t(QN_THREADS);
    switch (a->x_dtype) {
    case RLX_F32: return cu_launch(quantize_norm_kernel<float>, g, t, 0, st, a->pdl, *a);
    case RLX_F16: return cu_launch(quantize_norm_kernel<__half>, g, t, 0, st, a->pdl, *a);
    case RLX_BF16: return cu_launch(quantize_norm_kernel<__nv_bfloat16>, g, t, 0, st, a->pdl, *a);
    default: return cudaErrorInvalidValue;
    }
  }
  if (a->swiglu != CU_SWIGLU_NONE && a->x_rs < a->K) return cudaErrorInvalidValue;
  switch (a->x_dtype) {
  case RLX_F32: return quantize_x_typed<float>(a, st);
  case RLX_F64: {
    if (a->swiglu != CU_SWIGLU_NONE) return cudaErrorInvalidValue;
    const dim3 g(cu_blocks(a->M * a->K / 32, CU_THREADS / 32)), t(CU_THREADS);
    return cu_launch(quantize_x_kernel<double, CU_SWIGLU_NONE>, g, t, 0, st, a->pdl, *a);
  }
  case RLX_F16: return quantize_x_typed<__half>(a, st);
  case RLX_BF16: return quantize_x_typed<__nv_bfloat16>(a, st);
  default: return cudaErrorInvalidValue;
  }
}

/* Whether a takes a direct kernel (qmv_q4k_kernel, qmv_legacy_kernel),
 * by its scheme and rows a warp, or the ring kernel. */
static bool qmv_direct(const cu_qmv_args *a) {
  if (a->M != 1) return false;
  if (a->scheme == RLX_Q4_K) return a->rpw == 1 || a->rpw == 2 || a->rpw == 4;
  if (a->scheme == RLX_Q4_0 || a->scheme == RLX_Q4_1 || a->scheme == RLX_Q8_0) return a->rpw == 1 || a->rpw == 2;
  return false;
}

template <int S, typename O> static int qmv_m(const cu_qmv_args *a, cudaStream_t st) {
  const dim3 g((unsigned)((a->rows + (int64_t)QMV_WARPS * a->rpw - 1) / ((int64_t)QMV_WARPS * a->rpw))), t(QMV_WARPS * 32);
  if constexpr (S == RLX_Q4_K) {
    if (qmv_direct(a) && a->rpw == 1) return cu_launch(qmv_q4k_kernel<1, O>, g, t, 0, st, a->pdl, *a);
    if (qmv_direct(a) && a->rpw == 2) return cu_launch(qmv_q4k_kernel<2, O>, g, t, 0, st, a->pdl, *a);
    if (qmv_direct(a) && a->rpw == 4) return cu_launch(qmv_q4k_kernel<4, O>, g, t, 0, st, a->pdl, *a);
  }
  if constexpr (S == RLX_Q4_0 || S == RLX_Q4_1 || S == RLX_Q8_0) {
    if (qmv_direct(a) && a->rpw == 1) return cu_launch(qmv_legacy_kernel<S, 1, O>, g, t, 0, st, a->pdl, *a);
    if (qmv_direct(a) && a->rpw == 2) return cu_launch(qmv_legacy_kernel<S, 2, O>, g, t, 0, st, a->pdl, *a);
  }
  if (a->M == 1) return cu_launch(qmv_kernel<S, 1, O>, g, t, 0, st, a->pdl, *a);
  return cu_launch(qmv_kernel<S, 2, O>, g, t, 0, st, a->pdl, *a);
}

template <typename O> static int qmv_typed(const cu_qmv_args *a, cudaStream_t st) {
  switch (a->scheme) {
  case RLX_Q4_0: return qmv_m<RLX_Q4_0, O>(a, st);
  case RLX_Q4_1: return qmv_m<RLX_Q4_1, O>(a, st);
  case RLX_Q8_0: return qmv_m<RLX_Q8_0, O>(a, st);
  case RLX_Q4_K: return qmv_m<RLX_Q4_K, O>(a, st);
  case RLX_Q6_K: return qmv_m<RLX_Q6_K, O>(a, st);
  default: return cudaErrorInvalidValue;
  }
}

/* Rows per warp: two for the direct kernels (M = 1; they take 1, 2 or 4:
 * the rows share x's loads), one for the ring kernel. For the ring kernel
 * an earlier plan gave one wave of warps (rows / 4224 a warp, streamed as
 * one run of chunks); on the H200 one row a warp was faster at every
 * shape bench_cuda_kernels measures (M = 1, TB/s of weights, one wave ->
 * one row a warp): q8_0 28672x4096 3.12 -> 3.57, 128256x4096 3.54 ->
 * 4.31; q4_K 28672x4096 1.88 -> 2.00. The ring kernel takes any rpw and
 * the direct ones 1, 2 or 4 (the bench sweeps them). */
extern "C" void cu_qmv_plan(cu_qmv_args *a) {
  a->rows = 0;
  for (int s = 0; s < a->nseg; s++) a->rows += a->seg[s].N;
  a->rpw = a->M == 1 && a->scheme != RLX_Q6_K ? 2 : 1; /* the direct kernels' rows a warp */
}

extern "C" int cu_qmv_rope_fits(const cu_qmv_args *a, int seg) {
  const cu_gemv_rope *r = &a->seg[seg].rope;
  if (!qmv_direct(a) || a->rpw % 2 || r->S != 1 || r->D < 2 || r->D % 2 || r->n_rot < 2 || r->n_rot % 2 ||
      r->n_rot > r->D || a->seg[seg].N % r->D || a->seg[seg].N > INT32_MAX)
    return 0;
  if (a->out_dtype != RLX_F32 && a->out_dtype != RLX_F16 && a->out_dtype != RLX_BF16) return 0;
  for (int s = 0; s < seg; s++) /* the segment starts at an even row: its pairs are a warp's */
    if (a->seg[s].N % 2) return 0;
  return 1;
}

/* The tensor-core kernel from 3 rows of x (Q6_K's from 2): at 2 rows the
 * ring kernel's extra loads of x still cost less than the tiles' decode
 * (bench_cuda_kernels quant M; BENCHMARKS.md). */
static bool qmv_takes_mma(const cu_qmv_args *a) { return a->M >= 3 || (a->M == 2 && a->scheme == RLX_Q6_K); }

extern "C" int cu_qmv_launch(const cu_qmv_args *a, cudaStream_t st) {
  if (a->M <= 0 || a->rows <= 0) return cudaSuccess;
  if (a->M > CU_QMM_MAX_M || a->nseg < 1 || a->nseg > CU_QMV_MAX_SEG || a->rpw < 1 || ((uintptr_t)a->qx & 15))
    return cudaErrorInvalidValue;
  for (int s = 0; s < a->nseg; s++)
    if ((uintptr_t)a->seg[s].w & 15) return cudaErrorInvalidValue; /* w: a param's own allocation */
  if (qmv_takes_mma(a)) return qmv_mma_launch(a, st);
  switch (a->out_dtype) {
  case RLX_F32: return qmv_typed<float>(a, st);
  case RLX_F64: return qmv_typed<double>(a, st);
  case RLX_F16: return qmv_typed<__half>(a, st);
  case RLX_BF16: return qmv_typed<__nv_bfloat16>(a, st);
  default: return cudaErrorInvalidValue;
  }
}
