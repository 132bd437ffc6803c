/* k_attention.cuh — what the attention kernels share (k_attention.cu: the
 * exact kernel and the dispatch; k_attention_tc.cu: the tensor-core
 * kernel; k_attention_f32.cu: the F32 prefill kernel;
 * k_attention_decode.cu: the split-key decode kernel): which keys
 * a query sees, how a raw dot product becomes a score, and each family's
 * plan and launch. */
#ifndef RLX_K_ATTENTION_CUH
#define RLX_K_ATTENTION_CUH

#include "cu_common.cuh"

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

/* 2^x on the special-function unit (2^-inf = 0), 2 ulp: the tiled
 * kernels' softmax in log2 units (flash_tc rounds P to 16 bits after it;
 * in flash_f32 it is far below the F32 sums' own rounding). */
__device__ __forceinline__ float attn_ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__host__ __device__ __forceinline__ bool kv_is_block(int kv_dtype) {
  return kv_dtype == RLX_Q8_0 || kv_dtype == RLX_Q4_0;
}

/* flash_tc (k_attention_tc.cu): whether it takes a, its tile shape for a,
 * and its launch, or (smem_only) only raising its shared-memory limit,
 * which is done at plan time, outside any stream capture. */
int cu_attn_tc_applies(const cu_attn_args *a);
int cu_attn_tc_tile_for(const cu_attn_args *a);
int cu_attn_tc_launch(const cu_attn_args *a, cudaStream_t st, int smem_only);

/* flash_f32 (k_attention_f32.cu): whether it takes a, and its launch, or
 * (smem_only) only raising its shared-memory limit (at plan time). */
int cu_attn_f32_applies(const cu_attn_args *a);
int cu_attn_f32_launch(const cu_attn_args *a, cudaStream_t st, int smem_only);

/* flash_decode (k_attention_decode.cu): its plan (a's splits, keys per
 * split, cluster and q_block, all 0 where it does not apply; the
 * partial-state floats and counters it needs; prefill: it may take rows
 * in blocks of queries, where flash_tc does not take a) and its launch. */
void cu_attn_decode_plan(cu_attn_args *a, size_t *part_floats, size_t *counters, int prefill);
int cu_attn_decode_launch(const cu_attn_args *a, cudaStream_t st);

#endif /* RLX_K_ATTENTION_CUH */
