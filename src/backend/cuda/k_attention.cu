/* k_attention.cu — Attention as one flash-attention-style kernel (scores
 * never reach device memory): online softmax over key blocks, every mask
 * kind (causal and sliding window bottom-right aligned, custom additive
 * mask with broadcasting), grouped-query heads, [B,S,H,D] / [B,H,S,D] /
 * [B,S,H*D] through strides, score scale and logit softcap.
 *
 * Four kernels compute the same function (flash_decode in
 * k_attention_decode.cu, flash_tc in k_attention_tc.cu, flash_f32 in
 * k_attention_f32.cu, flash_exact and the choice between them here):
 *  - flash_decode: few query rows per kv head (decode), one query a block
 *    (a batch over a KV pool), or 16 rows a block where neither flash_tc
 *    nor flash_f32 applies (prefill rows of another head_dim), keys split
 *    over blocks; for a decode step over a
 *    float cache of up to 1,024 keys, flash_decode_lanes (the rows' q and
 *    state in registers, eight lanes a key, nothing staged);
 *  - flash_tc: F16/BF16 with head_dim a multiple of 16 up to 128, on the
 *    tensor cores (mma.sync m16n8k16, F32 accumulation): a block of 4 warps
 *    takes 64 or 128 query rows of one (batch, head) (16 or 32 a warp);
 *    Q as A fragments in registers (or re-read from shared memory where
 *    they do not fit), S = Q K^T and O += P V run as mma, P stays in
 *    registers, rounded to the input type for the second product (as
 *    FA2); K/V tiles double-buffered by cp.async. Causal and
 *    sliding-window tiles outside the visible band are skipped.
 *  - flash_f32: F32 with head_dim 32, 64, 96 or 128, the rows flash_decode
 *    does not take (prefill, an encoder): a block of 128 threads takes 64
 *    query rows of one (batch, head), both products register-tiled on
 *    the FMA units as an SGEMM is, F32 throughout.
 *  - flash_exact: every float dtype and head_dim up to 256, one block per
 *    query row whose warps split the keys, F32 (F64 for F64) throughout:
 *    the reference-precision path.
 * A row whose visible scores include a NaN gives NaN; a row with no
 * visible key gives zeros (the CPU kernel's rules, k_attention.c). */
#include "k_attention.cuh"
#include "k_quant_blocks.cuh"

#include <math.h>

/* ---------------------------------------------------------------- exact kernel */

#define EXACT_WARPS 4
#define EXACT_MAX_CHUNKS 8 /* head_dim <= 256 */

/* Element e (counted as the k/v strides count elements) of a cache of
 * RLX_Q8_0 or RLX_Q4_0 blocks (k_quant_blocks.cuh). D is a multiple of 32,
 * so every row starts a block. (flash_decode stages whole blocks with
 * chunk_decode8.) */
__device__ __forceinline__ float kv_block_ld(const void *p, int kv_dtype, int64_t e) {
  return kv_dtype == RLX_Q8_0 ? legacy_value_at<RLX_Q8_0>((const uint8_t *)p, e)
                              : legacy_value_at<RLX_Q4_0>((const uint8_t *)p, e);
}

/* Element e of k or v: of q's dtype, or decoded from its blocks. */
template <typename T> __device__ __forceinline__ T kv_ld(const cu_attn_args &a, const void *p, int64_t e) {
  return kv_is_block(a.kv_dtype) ? (T)kv_block_ld(p, a.kv_dtype, e) : cu_acc<T>::ld(p, a.dtype, e);
}

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
      for (int64_t d = 0; d < a.D; d++) dot += qs[d] * kv_ld<T>(a, a.k, koff + d);
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
        if (d < a.D) o[c] += pt * kv_ld<T>(a, a.v, voff + d);
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

extern "C" void cu_attention_plan(cu_attn_args *a, size_t *part_floats, size_t *counters) {
  *part_floats = *counters = 0;
  a->tc_tile = CU_ATTN_TILE_64;
  const int tc = cu_attn_tc_applies(a), f32 = !tc && cu_attn_f32_applies(a);
  if (tc) { /* a failure here shows as the launch's error */
    a->tc_tile = cu_attn_tc_tile_for(a);
    (void)cu_attn_tc_launch(a, 0, 1);
  }
  if (f32) (void)cu_attn_f32_launch(a, 0, 1);
  cu_attn_decode_plan(a, part_floats, counters, !tc && !f32);
}

extern "C" int cu_attention_launch(const cu_attn_args *a, cudaStream_t st) {
  if (a->B * a->H * a->S <= 0 || a->D <= 0) return cudaSuccess;
  if (a->splits > 0) return cu_attn_decode_launch(a, st);
  if (cu_attn_tc_applies(a)) return cu_attn_tc_launch(a, st, 0);
  if (cu_attn_f32_applies(a)) return cu_attn_f32_launch(a, st, 0);
  if (a->D > EXACT_MAX_CHUNKS * 32) return cudaErrorInvalidValue;
  const int64_t rows = a->B * a->H * a->S;
  if (rows > 0x7fffffff) return cudaErrorInvalidValue;
  if (a->dtype == RLX_F64) flash_exact<double><<<(unsigned)rows, EXACT_WARPS * 32, 0, st>>>(*a);
  else flash_exact<float><<<(unsigned)rows, EXACT_WARPS * 32, 0, st>>>(*a);
  return cudaGetLastError();
}
