/* gemm_act_avx2.h — the GEMM epilogue's activations on 8 lanes, on top of
 * the shared vector math of simd.h, for gemm_avx2.c and gemm_avx512.c (both
 * compiled with -mavx2 -mfma -mf16c). Semantics: cpu_act_apply
 * (elementwise_math.h); the few acts without vector code here (sin, cos,
 * softplus) are left to gemm_scalar_act_row on the stored tile.
 */
#ifndef RLX_GEMM_ACT_AVX2_H
#define RLX_GEMM_ACT_AVX2_H

#include "simd.h"

#include "rlx.h"

static inline int gemm_act_vectorized(rlx_act act) {
  return act != RLX_ACT_SIN && act != RLX_ACT_COS && act != RLX_ACT_SOFTPLUS;
}

/* act(x) for a vectorized act (others: x). */
static inline __m256 gemm_act8(__m256 x, rlx_act act, float alpha) {
  const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
  switch (act) {
  case RLX_ACT_RELU: return _mm256_max_ps(zero, x); /* NaN and -0 pass (max returns x) */
  case RLX_ACT_LEAKY_RELU:
    return simd_select(_mm256_cmp_ps(x, zero, _CMP_LT_OQ), _mm256_mul_ps(x, _mm256_set1_ps(alpha)), x);
  case RLX_ACT_GELU: return simd_gelu(x);
  case RLX_ACT_GELU_TANH: return simd_gelu_tanh(x);
  case RLX_ACT_SILU: return simd_silu(x);
  case RLX_ACT_SIGMOID: return simd_sigmoid(x);
  case RLX_ACT_TANH: return simd_tanh(x);
  case RLX_ACT_EXP: return simd_exp(x);
  case RLX_ACT_LOG: return simd_log(x);
  case RLX_ACT_SQRT: return _mm256_sqrt_ps(x);
  case RLX_ACT_RSQRT: return _mm256_div_ps(one, _mm256_sqrt_ps(x));
  case RLX_ACT_NEG: return _mm256_xor_ps(x, _mm256_set1_ps(-0.0f));
  case RLX_ACT_ABS: return simd_abs(x);
  case RLX_ACT_ERF: return simd_erf(x);
  case RLX_ACT_ROUND: return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  case RLX_ACT_SIGN: {
    /* 1, -1, or x itself for 0, -0 and NaN */
    __m256 s = simd_select(_mm256_cmp_ps(x, zero, _CMP_GT_OQ), one, x);
    return simd_select(_mm256_cmp_ps(x, zero, _CMP_LT_OQ), _mm256_set1_ps(-1.0f), s);
  }
  case RLX_ACT_RECIPROCAL: return _mm256_div_ps(one, x);
  case RLX_ACT_SQUARE: return _mm256_mul_ps(x, x);
  default: return x;
  }
}

#endif /* RLX_GEMM_ACT_AVX2_H */
