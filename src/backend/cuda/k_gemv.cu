/* k_gemv.cu — dense products with few rows (decode: M <= CU_GEMV_MAX_M),
 * y[M, N] = act(x[M, K] @ w + bias) (+ resid: a residual add the product
 * absorbed), F32/F16/BF16 with F32 accumulation, rounded once to the
 * output type (the CPU's FusedMatMulBiasAct rule). w may also be F16/BF16
 * under an F32 x (DequantMatMul of a 16-bit GGUF weight): widened in
 * registers as it streams, so a decode step reads its 2 bytes an element.
 *
 * At M = 1 a product is a pass over the weights at memory speed, which a
 * GEMM library's tiles (sized for reuse that a single row does not have)
 * do not reach: cuBLASLt took 5-9 us per M = 1 product of a 135M decoder
 * on the H200 against the ~0.2 us its weight bytes take. Two layouts:
 *
 *  - w [K, N] (row-major, as rlx_matmul's b): a block owns 64 columns and a
 *    range of K; its 256 threads are 8 column groups (8 columns each, one
 *    16-byte load per row) x 32 row groups, so a warp reads 4 rows of 128
 *    contiguous bytes. A matrix too narrow to fill the chip is also split
 *    along K over blocks (ksplit): each writes F32 partial sums, and the
 *    last block of a column tile to arrive (a counter per tile, reset by
 *    that block) adds them in split order and applies the epilogue — no
 *    atomics on the values, so every run gives the same bits.
 *  - w [N, K] (a transposed weight read as op T, or GGUF-style rows): one
 *    warp per output column, each lane 8 consecutive K (16-byte loads).
 * Several products of the same x (q, k and v of a layer) share a launch:
 * their column tiles (columns) follow each other in the grid. At M = 1 a
 * 4096 x 1024 product is a few us of bytes behind a launch of its own.
 * A gate and an up projection of [N, K] weights (glu) go further: one warp
 * takes column n of both and writes silu(gate) * up, the SwiGLU region
 * that read them, so neither product reaches memory and the region's
 * launch goes (4.5 us a layer at Llama-3-8B's shape on the H200).
 */
#include "cu_common.cuh"

#define GEMV_THREADS 256
#define GEMV_COLS 64  /* columns per block, [K, N] layout */
#define GEMV_ROWG 32  /* row groups per block */
#define GEMV_WARPS (GEMV_THREADS / 32)

/* 8 consecutive elements from a 16-byte aligned address, widened to float. */
template <typename E> __device__ __forceinline__ void ld8(const E *p, float *v) {
  cu_ld16<E>(p, v);
  if (sizeof(E) == 4) cu_ld16<E>(p + 4, v + 4);
}

/* 8 consecutive weights, read past L1 (no allocate): every weight is read
 * once, and in L1 it would push out the x that every warp of the block
 * rereads (Llama-3-8B bf16 decode through the LLM API: 5.19-5.21 ms a
 * step with L1 loads, 5.04-5.10 without, H200). */
template <typename W> __device__ __forceinline__ void ld8w(const W *p, float *v) {
  cu_unpack16<W>(cu_ld16_stream(p), v);
  if (sizeof(W) == 4) cu_unpack16<W>(cu_ld16_stream(p + 4), v + 4);
}

/* Output (m, col) of sum v: the bias, act and residual applied; the store
 * rounds it to E. */
template <typename E>
__device__ __forceinline__ float gemv_value(const cu_gemv_args &a, const cu_gemv_seg &g, int64_t m, int64_t col, float v) {
  if (g.bias) v += cu_fl<E>::ld((const E *)g.bias + col);
  if (a.act != RLX_ACT_NONE) v = cu_act<float>(a.act, v, a.alpha);
  if (g.resid) v += cu_fl<E>::ld((const E *)g.resid + m * g.N + col);
  return v;
}
template <typename E>
__device__ __forceinline__ void gemv_store(const cu_gemv_args &a, const cu_gemv_seg &g, int64_t m, int64_t col, float v) {
  cu_fl<E>::st((E *)g.out + m * g.N + col, gemv_value<E>(a, g, m, col, v));
}

/* silu(gate) * up of a glu launch, each value rounded to E as the region
 * [act.silu(i0), bin.mul(s0, i1)] it replaces rounds its steps. */
template <typename E>
__device__ __forceinline__ void glu_store(const cu_gemv_seg &g, int64_t m, int64_t col, float gate, float up) {
  const float s = cu_fl<E>::round(cu_act<float>(RLX_ACT_SILU, cu_fl<E>::round(gate), 0.f));
  cu_fl<E>::st((E *)g.out + m * g.N + col, s * cu_fl<E>::round(up));
}

/* The segment that unit u (a column tile, or a column) of the launch falls
 * in; u becomes its index within the segment. per: columns per unit. */
__device__ __forceinline__ const cu_gemv_seg &gemv_segment(const cu_gemv_args &a, int64_t &u, int per) {
  int s = 0;
  while (s + 1 < a.nseg && u >= (a.seg[s].N + per - 1) / per) u -= (a.seg[s].N + per - 1) / per, s++;
  return a.seg[s];
}

/* w [K, N]. grid (column tiles of all segments, ksplit). */
template <typename E, typename W, int MM> __global__ void __launch_bounds__(GEMV_THREADS) gemv_kn(const __grid_constant__ cu_gemv_args a) {
  __shared__ float red[GEMV_WARPS][MM][GEMV_COLS];
  __shared__ int last;
  const int t = threadIdx.x, cg = t % 8, rg = t / 8, lane = t % 32, warp = t / 32;
  int64_t tile_i = blockIdx.x;
  const cu_gemv_seg &g = gemv_segment(a, tile_i, GEMV_COLS);
  const int64_t col0 = tile_i * GEMV_COLS + cg * 8;
  const int64_t kb = (int64_t)blockIdx.y * a.kchunk, ke = kb + a.kchunk < a.K ? kb + a.kchunk : a.K;
  const W *w = (const W *)g.w;
  const E *x = (const E *)a.x;
  cu_pdl_chain();
  float acc[MM][8];
#pragma unroll
  for (int m = 0; m < MM; m++)
#pragma unroll
    for (int j = 0; j < 8; j++) acc[m][j] = 0.f;
  if (col0 < g.N) {
#pragma unroll 4
    for (int64_t k = kb + rg; k < ke; k += GEMV_ROWG) {
      float wv[8];
      ld8w<W>(w + k * g.N + col0, wv);
#pragma unroll
      for (int m = 0; m < MM; m++) {
        if (m >= a.M) break;
        const float xv = cu_fl<E>::ld(x + m * a.K + k);
#pragma unroll
        for (int j = 0; j < 8; j++) acc[m][j] = fmaf(xv, wv[j], acc[m][j]);
      }
    }
  }
  /* the 4 row groups of a warp (lanes cg, cg+8, cg+16, cg+24), then the warps */
#pragma unroll
  for (int m = 0; m < MM; m++)
#pragma unroll
    for (int j = 0; j < 8; j++) {
      float v = acc[m][j];
      v += __shfl_xor_sync(0xffffffffu, v, 8);
      v += __shfl_xor_sync(0xffffffffu, v, 16);
      acc[m][j] = v;
    }
  if (lane < 8)
#pragma unroll
    for (int m = 0; m < MM; m++)
#pragma unroll
      for (int j = 0; j < 8; j++) red[warp][m][cg * 8 + j] = acc[m][j];
  __syncthreads();
  const int nout = (int)(a.M < MM ? a.M : MM) * GEMV_COLS;
  const int64_t tile = tile_i * GEMV_COLS;
  if (a.ksplit == 1) {
    for (int e = t; e < nout; e += GEMV_THREADS) {
      const int m = e / GEMV_COLS, c = e % GEMV_COLS;
      if (tile + c >= g.N) continue;
      float v = 0.f;
#pragma unroll
      for (int w8 = 0; w8 < GEMV_WARPS; w8++) v += red[w8][m][c];
      gemv_store<E>(a, g, m, tile + c, v);
    }
    return;
  }
  for (int e = t; e < nout; e += GEMV_THREADS) {
    const int m = e / GEMV_COLS, c = e % GEMV_COLS;
    if (tile + c >= g.N) continue;
    float v = 0.f;
#pragma unroll
    for (int w8 = 0; w8 < GEMV_WARPS; w8++) v += red[w8][m][c];
    g.part[((int64_t)blockIdx.y * a.M + m) * g.N + tile + c] = v;
  }
  __threadfence();
  __syncthreads();
  if (t == 0) {
    const unsigned prev = atomicAdd(&g.count[tile_i], 1u);
    last = prev == (unsigned)a.ksplit - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (int e = t; e < nout; e += GEMV_THREADS) {
    const int m = e / GEMV_COLS, c = e % GEMV_COLS;
    if (tile + c >= g.N) continue;
    float v = 0.f;
    for (int s = 0; s < a.ksplit; s++) v += __ldcg(&g.part[((int64_t)s * a.M + m) * g.N + tile + c]);
    gemv_store<E>(a, g, m, tile + c, v);
  }
  if (t == 0) g.count[tile_i] = 0; /* ready for the next run */
}

/* The epilogue of gemv_nk's warps in a Rope's segment: each warp's
 * outputs (column col, rounded to E as a store would) go to shared memory,
 * and each is stored rotated with its pair's partner, the adjacent warp's
 * (rows m of the output are the B * S positions). */
template <typename E, int MM>
__device__ __forceinline__ void gemv_rope_store(const cu_gemv_args &a, const cu_gemv_seg &g, int64_t col,
                                                const float *acc) {
  __shared__ float pv[MM][GEMV_WARPS];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const cu_gemv_rope &r = g.rope;
#pragma unroll
  for (int m = 0; m < MM; m++) {
    if (m >= a.M) break;
    const float v = cu_warp_sum(acc[m]);
    if (lane == 0) pv[m][warp] = cu_fl<E>::round(gemv_value<E>(a, g, m, col, v));
  }
  __syncthreads();
  const int64_t e = col % r.D, half = r.n_rot / 2;
  const int64_t i = r.neox ? e % half : e / 2; /* the pair, where e < n_rot */
  if (lane >= MM || lane >= a.M) return;
  const int m = lane;
  float y = pv[m][warp];
  if (e < r.n_rot) {
    float c, s;
    cu_rope_cos_sin(r, m, i, &c, &s);
    y = cu_rope_rotate(pv[m][warp & ~1], pv[m][warp | 1], c, s, warp & 1);
  }
  cu_fl<E>::st((E *)g.out + m * g.N + col, y);
}

/* The rows of the norm's output that gemv_nk's first warp writes (NORM):
 * row m is x * r[m] * gamma, as the norm kernel computes it. */
template <typename E, int MM>
__device__ __forceinline__ void gemv_norm_out(const cu_gemv_args &a, const float *r) {
  const E *x = (const E *)a.norm_x, *gamma = (const E *)a.norm_gamma;
  for (int64_t k = (int64_t)(threadIdx.x % 32) * 8; k < a.K; k += 256) {
    float gv[8], xv[8];
    ld8<E>(gamma + k, gv);
#pragma unroll
    for (int m = 0; m < MM; m++) {
      if (m >= a.M) break;
      ld8<E>(x + m * a.K + k, xv);
#pragma unroll
      for (int j = 0; j < 8; j++) xv[j] = xv[j] * r[m] * gv[j];
      cu_st16<E>((E *)a.x + m * a.K + k, xv);
      if (sizeof(E) == 4) cu_st16<E>((E *)a.x + m * a.K + k + 4, xv + 4);
    }
  }
}

/* w [N, K]: warp per column; GLU: of the gate (segment 0) and the up
 * (segment 1) weights, summed in the same order as two plain launches.
 * NORM: x is an RmsNorm's output that the launch computes
 * (cu_gemv_args.norm): each warp sums w * norm_x * gamma and the squares
 * of norm_x, and scales its sums by the row's 1 / sqrt(mean + eps), so
 * that the norm's own launch goes; the first warp also writes x. */
template <typename E, typename W, int MM, bool GLU, bool NORM>
__global__ void __launch_bounds__(GEMV_THREADS) gemv_nk(const __grid_constant__ cu_gemv_args a) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int64_t n = (int64_t)blockIdx.x * GEMV_WARPS + warp;
  const cu_gemv_seg &g = gemv_segment(a, n, 1);
  cu_pdl_chain();
  if (n >= g.N) return; /* never in a Rope's segment (a whole number of blocks), nor the first warp */
  if (!GLU && g.rope.on) n = cu_rope_col(g.rope, n);
  const W *w = (const W *)g.w + n * a.K, *wu = GLU ? (const W *)a.seg[1].w + n * a.K : w;
  const E *x = (const E *)(NORM ? a.norm_x : a.x), *gamma = (const E *)a.norm_gamma;
  float acc[MM], accu[MM], ss[MM];
#pragma unroll
  for (int m = 0; m < MM; m++) acc[m] = accu[m] = ss[m] = 0.f;
#pragma unroll 2
  for (int64_t k = lane * 8; k < a.K; k += 256) {
    float wv[8], uv[8], xv[8], gv[8];
    ld8w<W>(w + k, wv);
    if (GLU) ld8w<W>(wu + k, uv);
    if (NORM) ld8<E>(gamma + k, gv);
#pragma unroll
    for (int m = 0; m < MM; m++) {
      if (m >= a.M) break;
      ld8<E>(x + m * a.K + k, xv);
      if (NORM)
#pragma unroll
        for (int j = 0; j < 8; j++) ss[m] = fmaf(xv[j], xv[j], ss[m]), xv[j] *= gv[j];
#pragma unroll
      for (int j = 0; j < 8; j++) acc[m] = fmaf(xv[j], wv[j], acc[m]);
      if (GLU)
#pragma unroll
        for (int j = 0; j < 8; j++) accu[m] = fmaf(xv[j], uv[j], accu[m]);
    }
  }
  if (NORM) {
    float r[MM];
#pragma unroll
    for (int m = 0; m < MM; m++) {
      r[m] = 1.f / sqrtf(cu_warp_sum(ss[m]) / (float)a.K + (float)a.norm_eps);
      acc[m] *= r[m], accu[m] *= r[m];
    }
    if (blockIdx.x == 0 && warp == 0) gemv_norm_out<E, MM>(a, r);
  }
  if (!GLU && g.rope.on) { /* block-uniform: the whole block is in this segment */
    gemv_rope_store<E, MM>(a, g, n, acc);
    return;
  }
#pragma unroll
  for (int m = 0; m < MM; m++) {
    if (m >= a.M) break;
    const float v = cu_warp_sum(acc[m]), u = GLU ? cu_warp_sum(accu[m]) : 0.f;
    if (lane == 0) {
      if (GLU) glu_store<E>(g, m, n, v, u);
      else gemv_store<E>(a, g, m, n, v);
    }
  }
}

extern "C" int cu_gemv_supported(int dtype, int w_dtype, int64_t M, int64_t N, int64_t K, int w_trans, const void *x,
                                 const void *w) {
  if (dtype != RLX_F32 && dtype != RLX_F16 && dtype != RLX_BF16) return 0;
  if (w_dtype != dtype && !(dtype == RLX_F32 && (w_dtype == RLX_F16 || w_dtype == RLX_BF16))) return 0;
  if (M < 1 || M > CU_GEMV_MAX_M || N < 1 || K < 1 || !cu_aligned16(x) || !cu_aligned16(w)) return 0;
  /* 16-byte rows: 8 elements of w (and, for [N, K], of x) at a time */
  if (w_trans ? K % 8 != 0 : N % 8 != 0) return 0;
  return N < ((int64_t)1 << 31) / GEMV_COLS && K < ((int64_t)1 << 40);
}

extern "C" int cu_gemv_rope_fits(const cu_gemv_args *a, int seg) {
  const cu_gemv_rope *r = &a->seg[seg].rope;
  if (!a->w_trans || a->glu || r->D < 2 || r->n_rot < 2 || r->n_rot % 2 || r->n_rot > r->D || r->D % 2 ||
      a->seg[seg].N % r->D || a->seg[seg].N > INT32_MAX || r->S < 1 || a->M % r->S)
    return 0;
  for (int s = 0; s <= seg; s++)
    if (a->seg[s].N % GEMV_WARPS) return 0;
  return 1;
}

/* Column tiles (w [K, N]) or columns (w_trans) of all segments (of the
 * gate's, glu). */
static int64_t gemv_units(const cu_gemv_args *a, int per) {
  int64_t u = 0;
  for (int s = 0; s < (a->glu ? 1 : a->nseg); s++) u += (a->seg[s].N + per - 1) / per;
  return u;
}

extern "C" void cu_gemv_plan(cu_gemv_args *a, size_t *part_floats, size_t *counters) {
  *part_floats = *counters = 0;
  a->ksplit = 1, a->kchunk = a->K;
  if (a->w_trans) return;
  const int64_t tiles = gemv_units(a, GEMV_COLS);
  /* Column tiles enough for two blocks per multiprocessor of the H200
   * (132): no split (any split measured slower: 28672 x 4096 3.98 TB/s
   * unsplit, 3.40-3.82 split 2-4). Fewer: split K for about four blocks
   * per multiprocessor, each at least 2 rows per row group (4096 x 4096:
   * split 5 2.30 TB/s, 8 2.62, 12 2.56; 4096 x 14336: 5 3.19, 8 3.66,
   * 12 3.71; bench_cuda_kernels on the H200). */
  if (tiles >= 264) return;
  const int64_t want = (528 + tiles - 1) / tiles, most = a->K / (2 * GEMV_ROWG);
  int64_t split = want < most ? want : most;
  if (split > 64) split = 64;
  if (split <= 1) return;
  int64_t chunk = (a->K + split - 1) / split;
  chunk = (chunk + GEMV_ROWG - 1) / GEMV_ROWG * GEMV_ROWG;
  a->kchunk = chunk;
  a->ksplit = (int)((a->K + chunk - 1) / chunk);
  if (a->ksplit <= 1) {
    a->ksplit = 1, a->kchunk = a->K;
    return;
  }
  int64_t cols = 0;
  for (int s = 0; s < a->nseg; s++) cols += a->seg[s].N;
  *part_floats = (size_t)a->ksplit * (size_t)a->M * (size_t)cols;
  *counters = (size_t)tiles;
}

extern "C" void cu_gemv_set_scratch(cu_gemv_args *a, float *part, unsigned *count) {
  for (int s = 0; s < a->nseg; s++) {
    a->seg[s].part = part, a->seg[s].count = count;
    if (part) part += (size_t)a->ksplit * (size_t)a->M * (size_t)a->seg[s].N;
    if (count) count += (a->seg[s].N + GEMV_COLS - 1) / GEMV_COLS;
  }
}

template <typename E, typename W, int MM> static void gemv_typed_m(const cu_gemv_args *a, cudaStream_t st) {
  if (a->w_trans)
    cu_launch(a->norm ? (a->glu ? gemv_nk<E, W, MM, true, true> : gemv_nk<E, W, MM, false, true>)
                      : (a->glu ? gemv_nk<E, W, MM, true, false> : gemv_nk<E, W, MM, false, false>),
              (unsigned)((gemv_units(a, 1) + GEMV_WARPS - 1) / GEMV_WARPS), GEMV_THREADS, 0, st, a->pdl, *a);
  else
    cu_launch(gemv_kn<E, W, MM>, dim3((unsigned)gemv_units(a, GEMV_COLS), (unsigned)a->ksplit), GEMV_THREADS, 0, st,
              a->pdl, *a);
}

template <typename E, typename W> static void gemv_typed(const cu_gemv_args *a, cudaStream_t st) {
  if (a->M == 1) gemv_typed_m<E, W, 1>(a, st);
  else if (a->M == 2) gemv_typed_m<E, W, 2>(a, st);
  else if (a->M <= 4) gemv_typed_m<E, W, 4>(a, st);
  else gemv_typed_m<E, W, CU_GEMV_MAX_M>(a, st);
}

extern "C" int cu_gemv_launch(const cu_gemv_args *a, cudaStream_t st) {
  if (a->nseg < 1 || a->nseg > CU_GEMV_MAX_SEG || (a->glu && (a->nseg != 2 || !a->w_trans || a->act != RLX_ACT_NONE)))
    return cudaErrorInvalidValue;
#define MIXED(x, w) (16 * ((x) + 1) + (w)) /* x of one dtype, w of another */
  switch (a->dtype == a->w_dtype ? a->dtype : MIXED(a->dtype, a->w_dtype)) {
  case RLX_F32: gemv_typed<float, float>(a, st); break;
  case RLX_F16: gemv_typed<__half, __half>(a, st); break;
  case RLX_BF16: gemv_typed<__nv_bfloat16, __nv_bfloat16>(a, st); break;
  case MIXED(RLX_F32, RLX_F16): gemv_typed<float, __half>(a, st); break;
  case MIXED(RLX_F32, RLX_BF16): gemv_typed<float, __nv_bfloat16>(a, st); break;
  default: return cudaErrorInvalidValue;
  }
#undef MIXED
  return cudaGetLastError();
}
