/* k_attention_decode.cu — flash_decode, the split-key attention of few
 * query rows a kv head (decode) or one query a block (a batch of sequences
 * over a KV pool), and flash_decode_lanes, its form for a decode step over
 * a float cache of up to DL_MAX_T keys; k_attention.cu says how they fit
 * beside the other two kernels. */
#include "k_attention.cuh"
#include "k_quant_blocks.cuh"

#include <cooperative_groups.h>

#define DEC_MAX_ROWS 16          /* query rows a block: (H / Hkv) * S, or (H / Hkv) * q_block */
#define DEC_MAX_QUERIES 64       /* q_block 1 (a KV pool): query rows (batched sequences) at most */
#define DEC_POOL_PART_FLOATS ((int64_t)64 << 20) /* q_block: partial-state floats at most (256 MB) */
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

/* Stages rows of a block-typed cache (Q8_0, Q4_0; D a multiple of 32, so
 * each row starts a block) decoded into dst [n][dst_ss], as the plain
 * rows' layout in shared memory: the scoring and the sums below read them
 * alike. A thread decodes 8 values of a block at a time (chunk_decode8),
 * rows assigned as in dec_stage_rows; loads, not copies in flight. */
template <typename E>
__device__ __forceinline__ void dec_stage_blocks(E *dst, int dst_ss, const void *src, int kv_dtype, int64_t base,
                                                 int64_t ss, int n, int D, int t) {
  const int per_row = D / 8, rpp = DEC_THREADS / per_row, c = t % per_row;
  const int64_t bb = kv_dtype == RLX_Q8_0 ? 34 : 18;
  if (t >= rpp * per_row) return;
#pragma unroll 4
  for (int jj = t / per_row; jj < n; jj += rpp) {
    const uint8_t *row = (const uint8_t *)src + (base + jj * ss) / 32 * bb;
    float y[8];
    if (kv_dtype == RLX_Q8_0) chunk_decode8<RLX_Q8_0>(row, c / 4, c % 4, y);
    else chunk_decode8<RLX_Q4_0>(row, c / 4, c % 4, y);
#pragma unroll
    for (int k = 0; k < 8; k++) cu_fl<E>::st(dst + jj * dst_ss + 8 * c + k, y[k]);
  }
}

/* Output element off of the attention (its dtype E, or F32 of the value
 * rounded to E: out_f32). */
template <typename E> __device__ __forceinline__ void dec_store(const cu_attn_args &a, int64_t off, float y) {
  if (a.out_f32) ((float *)a.out)[off] = cu_fl<E>::round(y);
  else cu_fl<E>::st((E *)a.out + off, y);
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

/* The query rows of block y: S queries from i0 of the (batch, kv head)
 * bh, G rows each; Rmax: the rows of the largest block, what a split's
 * partial state is laid out for. */
struct dec_block {
  int S, Rmax;
  int64_t i0, bh;
};
__device__ __forceinline__ dec_block dec_block_of(const cu_attn_args &a) {
  const int G = (int)(a.H / a.Hkv);
  if (!a.q_block) return dec_block{(int)a.S, G * (int)a.S, 0, blockIdx.y};
  const int64_t nq = (a.S + a.q_block - 1) / a.q_block, i0 = blockIdx.y % nq * a.q_block;
  return dec_block{(int)(a.S - i0 < a.q_block ? a.S - i0 : a.q_block), G * a.q_block, i0, blockIdx.y / nq};
}

/* The kv head whose K and V rows block head hk reads (kv_rep: a block
 * per q head). */
__device__ __forceinline__ int64_t dec_kv_head(const cu_attn_args &a, int64_t hk) { return a.kv_rep > 1 ? hk / a.kv_rep : hk; }

/* Where row r of block blk (head hk * G + r / S, query i0 + r % S of
 * batch b) starts in q, and in the output, which has q's strides. */
__device__ __forceinline__ int64_t dec_row_off(const cu_attn_args &a, const dec_block &blk, int64_t b, int64_t hk, int r) {
  const int64_t G = a.H / a.Hkv;
  return b * a.q_sb + (hk * G + r / blk.S) * a.q_sh + (blk.i0 + r % blk.S) * a.q_ss;
}

/* The weight of a softmax state of max m merged into one of max M >= m
 * (a state with no visible key, m = -inf, weighs nothing), and a row's
 * output from its weighted sum o, its sum of weights l and its NaN flag
 * (a row with no visible key gives zeros). */
__device__ __forceinline__ float dec_weight(float m, float M) { return m == -INFINITY ? 0.f : expf(m - M); }
__device__ __forceinline__ float dec_row_value(float o, float l, int nan) { return nan ? NAN : l > 0.f ? o / l : 0.f; }

/* The merge of a head's splits: each row's maximum, NaN flag and weighted
 * sum L over the splits (a warp per row), the splits' weights kept in wsh
 * [R][splits], then every (row, d) sums its splits' partial outputs, the
 * loads of several splits and elements in flight (a chain of dependent
 * reads here took most of the kernel's time). */
template <typename E, int NT, typename P>
__device__ void dec_merge(const cu_attn_args &a, const P &src, float *wsh, float *ls, int *nan_row) {
  const dec_block blk = dec_block_of(a);
  const int S = blk.S, G = (int)(a.H / a.Hkv), R = G * S, D = (int)a.D, splits = a.splits;
  const int t = threadIdx.x, lane = t % 32, warp = t / 32;
  const int64_t b = blk.bh / a.Hkv, hk = blk.bh % a.Hkv;
  const int per = R * D, chunk = DEC_MERGE_E * NT;
  for (int r = warp; r < R; r += NT / 32) {
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
      const float w = dec_weight(m, M);
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
      const int e = e0 + u * NT, r = e < per ? e / D : 0;
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
      const int e = e0 + u * NT;
      if (e >= per) break;
      const int r = e / D, d = e % D;
      dec_store<E>(a, dec_row_off(a, blk, b, hk, r) + d, dec_row_value(acc[u], ls[r], nan_row[r]));
    }
  }
}

/* Once a block has written its split's state (po in flash_decode): with
 * a cluster, the first block merges every split's state from its shared
 * memory (os) after the cluster barrier; else the last block of the head
 * to finish merges them from global memory and leaves the head's counter
 * zeroed for the next run. wsh: R x splits floats of scratch; ls and
 * nan_row: R each. */
template <typename E, int NT>
__device__ void dec_merge_splits(const cu_attn_args &a, float *os, size_t stride, float *wsh, float *ls, int *nan_row) {
  __shared__ int last;
  const int64_t hq = blockIdx.y;
  if (a.cluster) {
    const cooperative_groups::cluster_group cl = cooperative_groups::this_cluster();
    cl.sync(); /* every split's state written into the first block */
    if (cl.block_rank() == 0) dec_merge<E, NT>(a, dec_parts_shared{os, stride}, wsh, ls, nan_row);
    return;
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(&a.count[hq], 1u) == (unsigned)a.splits - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  dec_merge<E, NT>(a, dec_parts_global{a.part + (size_t)hq * a.splits * stride, stride}, wsh, ls, nan_row);
  if (threadIdx.x == 0) a.count[hq] = 0; /* ready for the next run */
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
 * their own). With q_block (a batch of sequences over a KV pool, one
 * query a block; rows the tensor-core kernel does not take, DEC_MAX_ROWS
 * a block) a block takes the G rows of each of its queries, and reads the
 * mask first: where it hides
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
  /* S: the queries of the block, from i0 */
  const dec_block blk = dec_block_of(a);
  const int S = blk.S, G = (int)(a.H / a.Hkv), R = G * S, D = (int)a.D, kps = (int)a.keys_per_split;
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
  const int t = threadIdx.x, lane = t % 32, warp = t / 32;
  /* hq: the (batch, kv head) of the block, with q_block its block of queries too */
  const int64_t hq = blockIdx.y, i0 = blk.i0, bh = blk.bh;
  const int64_t b = bh / a.Hkv, hk = bh % a.Hkv;
  const int64_t j0 = (int64_t)blockIdx.x * kps;
  int n = (int)(a.T - j0 < kps ? a.T - j0 : kps);
  const E *q = (const E *)a.q, *k = (const E *)a.k, *v = (const E *)a.v;
  const int64_t kbase = b * a.kv_sb + dec_kv_head(a, hk) * a.kv_sh + j0 * a.kv_ss;
  cu_pdl_chain(); /* every K and V row may be the one the step before wrote */
  if (a.q_block) { /* the mask first: a split it (or causality) hides from every row stages nothing */
    int seen = 0;
    for (int e = t; e < R * n; e += DEC_THREADS) {
      const int r = e / n, jj = e % n;
      const int64_t i = i0 + r % S, j = j0 + jj;
      float m = 0.f;
      if (a.mask_kind == RLX_MASK_CUSTOM) mk[r * kps + jj] = m = mask_value(a, b, hk * G + r / S, i, j);
      seen |= m != -INFINITY && key_visible(a, i, j);
    }
    if (!__syncthreads_or(seen)) n = 0;
  }
  if (kv_is_block(a.kv_dtype)) {
    dec_stage_blocks<E>(ks, kss, a.k, a.kv_dtype, kbase, a.kv_ss, n, D, t);
    dec_stage_blocks<E>(vs, D, a.v, a.kv_dtype, kbase, a.kv_ss, n, D, t);
  } else {
    dec_stage_rows<E, VEC>(ks, kss, k + kbase, a.kv_ss, n, D, t);
    cu_cp_async_commit();
    dec_stage_rows<E, VEC>(vs, D, v + kbase, a.kv_ss, n, D, t);
  }
  cu_cp_async_commit();
  for (int e = t; e < RC * D; e += DEC_THREADS) {
    const int r = e / D, d = e % D;
    const int64_t qi = dec_row_off(a, blk, b, hk, r) + d;
    qs[e] = r >= R ? 0.f : a.q_f32 ? cu_fl<E>::round(((const float *)a.q)[qi]) : cu_fl<E>::ld(q + qi);
  }
  for (int r = t; r < R; r += DEC_THREADS) nan_row[r] = 0;
  if (a.mask_kind == RLX_MASK_CUSTOM && !a.q_block)
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
  const size_t stride = (size_t)blk.Rmax * (D + 3);
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
        dec_store<E>(a, dec_row_off(a, blk, b, hk, r) + d, dec_row_value(o[r], ls[r], nan_row[r]));
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
  dec_merge_splits<E, DEC_THREADS>(a, os, stride, ps, ls, nan_row);
}

/* flash_decode_lanes: flash_decode's work for a float cache and one
 * block of queries a kv head (a decode step), with nothing staged: eight
 * lanes take a key (DL = D / 8 elements each, loaded straight into
 * registers), a warp four keys at a time, a block of DL_WARPS warps 32.
 * The R rows' q slices stay in registers; a key's R dot products are summed
 * over its 8 lanes by three shuffles each, and each group of 8 lanes keeps
 * an online-softmax state per row (max m, sum l and its slice of o, scaled
 * when the max grows). The four groups of a warp merge by shuffles, the
 * warps through shared memory, and the split's state goes where
 * flash_decode's goes (the output, or the merge of the splits). A decode
 * step's attention is a chain of dependent steps on few blocks, so what
 * counts is how long one block takes: flash_decode's block, one warp a
 * scheduler, waits on each of its steps in turn (staging in shared memory,
 * scores, softmax, a sum per head element over the keys); here each lane
 * does a key's share from load to sum with no barrier until the warps
 * merge, two warps a scheduler. */
#define DL_WARPS 8
#define DL_THREADS (DL_WARPS * 32)
#define DL_LPK 8      /* lanes a key */
#define DL_MAX_T 1024 /* keys at most (cu_attn_decode_plan) */

/* flash_decode_lanes' row capacity for R rows, and the floats of its
 * warps' states in shared memory, which the merge's R x splits weights
 * reuse. */
__host__ __device__ __forceinline__ int dec_lanes_rc(int64_t R) { return R <= 1 ? 1 : R <= 4 ? 4 : 8; }
__host__ __device__ __forceinline__ size_t dec_lanes_scratch(const cu_attn_args &a) {
  const int64_t R = a.H / a.Hkv * a.S;
  const size_t w = (size_t)(DL_WARPS * dec_lanes_rc(R) * a.D), m = (size_t)(R * a.splits);
  return w > m ? w : m;
}

/* DL elements of E at p (DL * sizeof(E) a multiple of 8, p aligned to it) as float. */
template <typename E, int DL> __device__ __forceinline__ void dl_load(const E *p, float *v) {
  constexpr int BYTES = DL * (int)sizeof(E);
  static_assert(BYTES % 8 == 0, "a lane's slice is whole 8-byte words");
  if constexpr (BYTES % 16 == 0) {
#pragma unroll
    for (int i = 0; i < BYTES / 16; i++) cu_unpack16<E>(__ldg((const uint4 *)p + i), v + i * (16 / (int)sizeof(E)));
  } else {
    const uint2 u = __ldg((const uint2 *)p);
    const E *e = (const E *)&u;
#pragma unroll
    for (int k = 0; k < DL; k++) v[k] = cu_fl<E>::ld(e + k);
  }
}

template <typename E, int RC, int DL> __global__ void __launch_bounds__(DL_THREADS) flash_decode_lanes(const __grid_constant__ cu_attn_args a) {
  extern __shared__ float dec_smem[];
  const dec_block blk = dec_block_of(a);
  const int S = blk.S, G = (int)(a.H / a.Hkv), R = G * S, D = DL * DL_LPK, kps = (int)a.keys_per_split;
  const int t = threadIdx.x, lane = t % 32, warp = t / 32, grp = lane / DL_LPK, sub = lane % DL_LPK;
  const int64_t bh = blk.bh, b = bh / a.Hkv, hk = bh % a.Hkv, j0 = (int64_t)blockIdx.x * kps;
  const int n = (int)(a.T - j0 < kps ? a.T - j0 : kps);
  const size_t wfloats = dec_lanes_scratch(a); /* >= DL_WARPS * RC * D and the merge's R x splits */
  float *wo = dec_smem;                                 /* [DL_WARPS][RC][D]: each warp's o */
  float *wm = wo + wfloats, *wl = wm + DL_WARPS * RC;   /* [DL_WARPS][RC]: its m and l */
  float *ls = wl + DL_WARPS * RC;                       /* [RC] */
  int *nan_row = (int *)(ls + RC), *wnan = nan_row + RC; /* [RC]; [DL_WARPS]: a bit a row */
  float *os = dec_smem + ((wfloats + 2 * DL_WARPS * RC + 2 * RC + DL_WARPS + 3) & ~(size_t)3); /* cluster states */
  const int64_t kvh = dec_kv_head(a, hk);
  const E *kc = (const E *)a.k + b * a.kv_sb + kvh * a.kv_sh + j0 * a.kv_ss + sub * DL;
  const E *vc = (const E *)a.v + b * a.kv_sb + kvh * a.kv_sh + j0 * a.kv_ss + sub * DL;
  cu_pdl_chain(); /* every K and V row may be the one the step before wrote */
  float q[RC][DL];
#pragma unroll
  for (int r = 0; r < RC; r++) {
    const int64_t qi = dec_row_off(a, blk, b, hk, r < R ? r : 0) + sub * DL;
    if (a.q_f32) {
#pragma unroll
      for (int e = 0; e < DL; e++) q[r][e] = cu_fl<E>::round(((const float *)a.q)[qi + e]);
    } else {
      dl_load<E, DL>((const E *)a.q + qi, q[r]);
    }
    if (r >= R)
#pragma unroll
      for (int e = 0; e < DL; e++) q[r][e] = 0.f;
  }
  float m[RC], l[RC], o[RC][DL];
  int nanm = 0;
#pragma unroll
  for (int r = 0; r < RC; r++) {
    m[r] = -INFINITY, l[r] = 0.f;
#pragma unroll
    for (int e = 0; e < DL; e++) o[r][e] = 0.f;
  }
  for (int jb = warp * (32 / DL_LPK); jb < n; jb += DL_WARPS * (32 / DL_LPK)) {
    const int jj = jb + grp;
    const int64_t j = j0 + jj;
    const bool in = jj < n;
    float kf[DL], vf[DL], mk[RC];
    if (in) {
      dl_load<E, DL>(kc + jj * a.kv_ss, kf);
      dl_load<E, DL>(vc + jj * a.kv_ss, vf);
    } else {
#pragma unroll
      for (int e = 0; e < DL; e++) kf[e] = vf[e] = 0.f;
    }
#pragma unroll
    for (int r = 0; r < RC; r++)
      mk[r] = in && r < R && a.mask_kind == RLX_MASK_CUSTOM ? mask_value(a, b, hk * G + r / S, blk.i0 + r % S, j) : 0.f;
    float dot[RC];
#pragma unroll
    for (int r = 0; r < RC; r++) {
      dot[r] = 0.f;
#pragma unroll
      for (int e = 0; e < DL; e++) dot[r] = fmaf(q[r][e], kf[e], dot[r]);
    }
#pragma unroll
    for (int x = 1; x < DL_LPK; x *= 2)
#pragma unroll
      for (int r = 0; r < RC; r++) dot[r] += __shfl_xor_sync(0xffffffffu, dot[r], x);
    if (!in) continue;
#pragma unroll
    for (int r = 0; r < RC; r++) {
      if (r >= R || !key_visible(a, blk.i0 + r % S, j)) continue;
      float sc = finish_score_masked<float>(a, dot[r], mk[r]);
      if (sc != sc) nanm |= 1 << r, sc = -INFINITY;
      if (sc == -INFINITY) continue; /* a masked key's V is never read into a sum */
      if (sc > m[r]) {
        const float c = dec_weight(m[r], sc);
        l[r] *= c;
#pragma unroll
        for (int e = 0; e < DL; e++) o[r][e] *= c;
        m[r] = sc;
      }
      const float p = expf(sc - m[r]);
      l[r] += p;
#pragma unroll
      for (int e = 0; e < DL; e++) o[r][e] = fmaf(p, vf[e], o[r][e]);
    }
  }
  /* the warp's four groups into one state */
#pragma unroll
  for (int x = DL_LPK; x < 32; x *= 2) {
    nanm |= __shfl_xor_sync(0xffffffffu, nanm, x);
#pragma unroll
    for (int r = 0; r < RC; r++) {
      const float m2 = __shfl_xor_sync(0xffffffffu, m[r], x), l2 = __shfl_xor_sync(0xffffffffu, l[r], x);
      const float M = fmaxf(m[r], m2), c1 = dec_weight(m[r], M), c2 = dec_weight(m2, M);
      l[r] = l[r] * c1 + l2 * c2;
#pragma unroll
      for (int e = 0; e < DL; e++) {
        const float o2 = __shfl_xor_sync(0xffffffffu, o[r][e], x);
        o[r][e] = o[r][e] * c1 + o2 * c2;
      }
      m[r] = M;
    }
  }
  if (grp == 0) {
#pragma unroll
    for (int r = 0; r < RC; r++)
#pragma unroll
      for (int e = 0; e < DL; e++) wo[(warp * RC + r) * D + sub * DL + e] = o[r][e];
    if (sub == 0) {
#pragma unroll
      for (int r = 0; r < RC; r++) wm[warp * RC + r] = m[r], wl[warp * RC + r] = l[r];
      wnan[warp] = nanm;
    }
  }
  __syncthreads();
  /* the warps' states into the split's: (row, element) a thread */
  const size_t stride = (size_t)blk.Rmax * (D + 3);
  float *po = a.splits == 1 ? NULL
              : a.cluster ? cooperative_groups::this_cluster().map_shared_rank(os, 0) + blockIdx.x * stride
                          : a.part + ((size_t)blockIdx.y * a.splits + blockIdx.x) * stride;
  for (int e = t; e < R * D; e += DL_THREADS) {
    const int r = e / D, d = e % D;
    float M = -INFINITY;
    int any_nan = 0;
#pragma unroll
    for (int w = 0; w < DL_WARPS; w++) M = fmaxf(M, wm[w * RC + r]), any_nan |= wnan[w] >> r & 1;
    float L = 0.f, O = 0.f;
#pragma unroll
    for (int w = 0; w < DL_WARPS; w++) {
      const float c = dec_weight(wm[w * RC + r], M);
      L += c * wl[w * RC + r], O += c * wo[(w * RC + r) * D + d];
    }
    if (a.splits == 1) {
      dec_store<E>(a, dec_row_off(a, blk, b, hk, r) + d, dec_row_value(O, L, any_nan));
      continue;
    }
    po[r * (D + 3) + d] = O;
    if (d == 0) po[r * (D + 3) + D] = M, po[r * (D + 3) + D + 1] = L, po[r * (D + 3) + D + 2] = (float)any_nan;
  }
  if (a.splits == 1) return;
  __syncthreads(); /* wo is the merge's scratch from here */
  dec_merge_splits<E, DL_THREADS>(a, os, stride, wo, ls, nan_row);
}

/* The kernel's row capacity RC for R query rows a kv head. */
static int dec_row_cap(int64_t R) { return R <= 4 ? 4 : R <= 8 ? 8 : 16; }

/* Query rows a block of flash_decode takes, and the blocks of a split
 * (grid.y): (batch, kv head) pairs, times the blocks of queries with q_block. */
static int64_t dec_rows(const cu_attn_args *a) { return (a->H / a->Hkv) * (a->q_block ? a->q_block : a->S); }
static int64_t dec_heads(const cu_attn_args *a) {
  return a->B * a->Hkv * (a->q_block ? (a->S + a->q_block - 1) / a->q_block : 1);
}

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

/* The kernel that takes a (flash_decode_lanes, or flash_decode's form
 * for a's rows and the rows' alignment: vec), its threads and its shared
 * memory. */
typedef void (*dec_kernel_fn)(cu_attn_args);
template <typename E> static dec_kernel_fn dec_kernel_of(const cu_attn_args *a, bool vec) {
  if (a->lanes) {
    const int64_t dl = a->D / DL_LPK;
    if (dec_lanes_rc(dec_rows(a)) == 1)
      return dl == 4 ? flash_decode_lanes<E, 1, 4> : dl == 8 ? flash_decode_lanes<E, 1, 8> : flash_decode_lanes<E, 1, 16>;
    if (dec_lanes_rc(dec_rows(a)) == 4)
      return dl == 4 ? flash_decode_lanes<E, 4, 4> : dl == 8 ? flash_decode_lanes<E, 4, 8> : flash_decode_lanes<E, 4, 16>;
    return dl == 4 ? flash_decode_lanes<E, 8, 4> : flash_decode_lanes<E, 8, 8>;
  }
  const int rc = dec_row_cap(dec_rows(a));
  if (rc == 4) return vec ? flash_decode<E, true, 4> : flash_decode<E, false, 4>;
  if (rc == 8) return vec ? flash_decode<E, true, 8> : flash_decode<E, false, 8>;
  return vec ? flash_decode<E, true, 16> : flash_decode<E, false, 16>;
}
static dec_kernel_fn dec_kernel(const cu_attn_args *a, bool vec) {
  return a->dtype == RLX_F16    ? dec_kernel_of<__half>(a, vec)
         : a->dtype == RLX_BF16 ? dec_kernel_of<__nv_bfloat16>(a, vec)
                                : dec_kernel_of<float>(a, vec);
}
static int dec_threads(const cu_attn_args *a) { return a->lanes ? DL_THREADS : DEC_THREADS; }

/* flash_decode_lanes' shared memory: its warps' states (dec_lanes_scratch,
 * then m and l of each warp's rows, the rows' l and NaN flags, each warp's
 * NaN bits), then (16-byte aligned; cluster) every split's state. */
static size_t dec_lanes_smem_bytes(const cu_attn_args *a) {
  const int64_t R = dec_rows(a), rc = dec_lanes_rc(R);
  size_t floats = (dec_lanes_scratch(*a) + 2 * DL_WARPS * rc + 2 * rc + DL_WARPS + 3) & ~(size_t)3;
  if (a->cluster) floats += (size_t)(a->splits * R * (a->D + 3));
  return floats * sizeof(float);
}
static size_t dec_launch_smem(const cu_attn_args *a) { return a->lanes ? dec_lanes_smem_bytes(a) : dec_smem_bytes(a); }

/* Whether flash_decode_lanes takes a (flash_decode's other conditions
 * hold): one block of queries a kv head, a float cache, D of 32, 64 or 128
 * (8 lanes a key, 4 to 16 elements each), at most 8 rows (4 at D 128: the
 * rows' q and o in registers), and 16-byte aligned rows. */
static int dec_lanes_applies(const cu_attn_args *a) {
  const int64_t R = dec_rows(a), es = cu_float_bytes(a->dtype);
  const bool q_ok = a->q_f32 || (cu_aligned16(a->q) && (a->q_sb * es) % 16 == 0 && (a->q_sh * es) % 16 == 0 &&
                                 (a->q_ss * es) % 16 == 0);
  return !a->q_block && !kv_is_block(a->kv_dtype) && (a->D == 32 || a->D == 64 || a->D == 128) && R <= 8 &&
         (R <= 4 || a->D <= 64) && q_ok && cu_aligned16(a->k) && cu_aligned16(a->v) && (a->kv_ss * es) % 16 == 0 &&
         (a->kv_sh * es) % 16 == 0 && (a->kv_sb * es) % 16 == 0;
}

/* The kernel's launch attributes, set at plan time, outside any stream
 * capture, for both forms of flash_decode: shared memory past the default
 * 48 KB (long contexts: the merge's R x splits weights), clusters past the
 * portable 8 blocks. With a cluster, whether the device can run one at all
 * (cudaOccupancyMaxActiveClusters). */
#define DEC_MAX_SMEM (160 << 10)
static int dec_set_attrs(const cu_attn_args *a, size_t smem) {
  for (int vec = 0; vec < 2; vec++) {
    const dec_kernel_fn k = dec_kernel(a, vec);
    int st = smem > 48 * 1024 ? cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) : 0;
    if (!st && a->cluster > 8) st = cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    if (st) return st;
  }
  if (a->cluster <= 1) return cudaSuccess;
  cudaLaunchAttribute at[2];
  const cudaLaunchConfig_t cfg = cu_launch_config(dim3((unsigned)a->splits, (unsigned)dec_heads(a)), dec_threads(a),
                                                  smem, 0, 0, a->cluster, at);
  int n = 0;
  const int st = cudaOccupancyMaxActiveClusters(&n, dec_kernel(a, true), &cfg);
  return st ? st : n < 1 ? cudaErrorInvalidConfiguration : cudaSuccess;
}

/* No split-key decode for a: its fields as unplanned, the heads as given. */
static void dec_plan_none(cu_attn_args *a) {
  if (a->kv_rep > 1) a->Hkv = a->H / a->kv_rep;
  a->splits = 0, a->keys_per_split = 0, a->cluster = 0, a->q_block = 0, a->lanes = 0, a->kv_rep = 0;
}

void cu_attn_decode_plan(cu_attn_args *a, size_t *part_floats, size_t *counters, int prefill) {
  dec_plan_none(a); /* a may have been planned before */
  if (a->Hkv < 1) return;
  const int64_t G = a->H / a->Hkv;
  if (G * a->S > DEC_MAX_ROWS && G <= DEC_MAX_ROWS) {
    /* a batch of sequences over a KV pool (a custom mask, at most
     * DEC_MAX_QUERIES queries): a block per query, each skipping the
     * splits of other sequences' cells (32 sequences of 190 cells on the
     * H100: the tensor-core kernel walked all 6,100 keys of the pool per
     * head, 0.6 ms a layer) */
    if (a->mask_kind == RLX_MASK_CUSTOM && a->S <= DEC_MAX_QUERIES) a->q_block = 1;
    /* rows neither flash_tc nor flash_f32 takes: DEC_MAX_ROWS a
     * block, each block's K and V read once for all of them, where the
     * exact kernel reads them once per row */
    else if (prefill) a->q_block = (int)(DEC_MAX_ROWS / G);
  }
  int64_t R = dec_rows(a);
  if ((a->dtype != RLX_F32 && a->dtype != RLX_F16 && a->dtype != RLX_BF16) || a->force_exact || R < 1 ||
      R > DEC_MAX_ROWS || a->D > 256 || a->T < 1 || dec_heads(a) >= 65536) {
    a->q_block = 0;
    return;
  }
  /* flash_decode_lanes up to DL_MAX_T keys. Its block is mostly fixed
   * latency (one block of 8 warps a multiprocessor, four keys a warp at a
   * time), so it takes long splits: one up to 128 keys, 256 keys a split
   * up to 512 where the heads share kv heads, else 128 keys (64 below 512
   * keys without shared heads); past DL_MAX_T flash_decode's staging
   * wins. Where the heads share kv heads up to 512 keys, a block per q
   * head rather than per kv head, each reading its kv head's rows (from
   * L2 after the first): a block per kv head leaves most multiprocessors
   * idle (8 of 132 at the 8B shape) while its G rows take their dot
   * products and softmax steps in turn. */
  const int lanes = a->T <= DL_MAX_T && dec_lanes_applies(a);
  const int rep = lanes && a->T <= 512 && a->H > a->Hkv && a->B * a->H < 65536;
  if (rep) a->kv_rep = (int)G, a->Hkv = a->H, R = dec_rows(a);
  /* flash_decode's keys per split: 128 (the block's threads), halved
   * while the grid would cover fewer than half the H200's 132
   * multiprocessors (down to 32), at most what fits the staging space. On the H200 at the 8B decode
   * shape (bench_cuda_kernels attn): T 512 32-64 keys 14.4 us (16: 17.0,
   * 128: 16.5); T 2048 128 18.9 (64: 21.1, 16: 37.4); T 8192 128 48.7
   * (64: 55.7); T 32768 128 153 (64: 241). More, shorter splits lose: each
   * costs the merge a partial state, and a block's latency is mostly fixed. */
  int64_t kmax = DEC_STAGE_BYTES / (2 * a->D * cu_float_bytes(a->dtype)) / 16 * 16;
  kmax = kmax > DEC_MAX_KEYS ? DEC_MAX_KEYS : kmax;
  const int64_t heads = dec_heads(a);
  int64_t kps = DEC_MAX_KEYS;
  while (kps > 32 && heads * ((a->T + kps - 1) / kps) < 66) kps /= 2;
  if (lanes) kps = a->T <= 128 ? 128 : rep ? 256 : a->T > 512 ? 128 : 64;
  else if (kps > kmax) kps = kmax;
  const int64_t splits = (a->T + kps - 1) / kps;
  /* q_block's partial states grow with queries x keys: past
   * DEC_POOL_PART_FLOATS another kernel takes the rows */
  if (splits > 0x7fffffff || (a->q_block && splits > 1 && heads * splits * R * (a->D + 3) > DEC_POOL_PART_FLOATS))
    return dec_plan_none(a);
  a->keys_per_split = kps, a->splits = (int)splits, a->lanes = lanes;
  /* the splits of a head as one cluster, merged in shared memory, where
   * they are few enough and RLX_CUDA_ATTN_CLUSTER is not 0 */
  if (splits > 1 && splits <= DEC_MAX_CLUSTER && !a->no_cluster) {
    a->cluster = (int)splits;
    const size_t smem = dec_launch_smem(a);
    if (smem <= DEC_MAX_SMEM && dec_set_attrs(a, smem) == cudaSuccess) return;
    (void)cudaGetLastError();
  }
  a->cluster = 0;
  const size_t smem = dec_launch_smem(a);
  if (smem > DEC_MAX_SMEM || dec_set_attrs(a, smem) != cudaSuccess) { /* the merge's R x splits weights do not fit */
    (void)cudaGetLastError();
    return dec_plan_none(a);
  }
  *part_floats = (size_t)(heads * splits * R * (a->D + 3));
  *counters = (size_t)heads;
}

int cu_attn_decode_launch(const cu_attn_args *a, cudaStream_t st) {
  const dim3 grid((unsigned)a->splits, (unsigned)dec_heads(a));
  const int es = cu_float_bytes(a->dtype);
  const bool vec = a->D * es % 16 == 0 && a->kv_ss * es % 16 == 0 && a->kv_sh * es % 16 == 0 &&
                   a->kv_sb * es % 16 == 0 && cu_aligned16(a->k) && cu_aligned16(a->v);
  cu_launch_cluster(dec_kernel(a, vec), grid, dec_threads(a), dec_launch_smem(a), st, a->pdl, a->cluster, *a);
  return cudaGetLastError();
}
