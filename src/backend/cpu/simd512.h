/* simd512.h — the 16-lane (AVX-512F) f32 math of the CPU kernels: exp,
 * log, tanh, sigmoid, silu, erf and the two GELU forms as simd16_*, the
 * same functions as simd.h's simd_* (one source, simd_math.h: the same
 * result bit for bit in every lane), plus the lane-mask helpers.
 *
 * Include it only from a file compiled with -mavx512f -mavx512bw
 * -mavx512vl -mavx2 -mfma -mf16c (CMakeLists.txt) whose code is reached
 * only after a run-time check that the CPU and OS have AVX-512
 * (cpu_features.h).
 */
#ifndef RLX_CPU_SIMD512_H
#define RLX_CPU_SIMD512_H

#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__)
#error "simd512.h needs -mavx512f -mavx512bw -mavx512vl"
#endif

#include "simd.h"

/* Lanes [0, n) of 16 (n clamped to 0..16). */
static inline __mmask16 simd16_tail_mask(int64_t n) {
  return n <= 0 ? (__mmask16)0 : n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
}

static inline __m512 simd16_abs(__m512 x) {
  return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff)));
}

/* Lanes of a where m is set, else b. */
static inline __m512 simd16_select(__mmask16 m, __m512 a, __m512 b) { return _mm512_mask_blend_ps(m, b, a); }

/* ---------------------------------------------------------------- math (simd_math.h) */

static inline __m512 s16_set1(float f) { return _mm512_set1_ps(f); }
static inline __m512 s16_zero(void) { return _mm512_setzero_ps(); }
static inline __m512 s16_add(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
static inline __m512 s16_sub(__m512 a, __m512 b) { return _mm512_sub_ps(a, b); }
static inline __m512 s16_mul(__m512 a, __m512 b) { return _mm512_mul_ps(a, b); }
static inline __m512 s16_div(__m512 a, __m512 b) { return _mm512_div_ps(a, b); }
static inline __m512 s16_fmadd(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }
static inline __m512 s16_fnmadd(__m512 a, __m512 b, __m512 c) { return _mm512_fnmadd_ps(a, b, c); }
static inline __m512 s16_fmsub(__m512 a, __m512 b, __m512 c) { return _mm512_fmsub_ps(a, b, c); }
/* vminps / vmaxps: the second operand for a NaN, as at 8 lanes */
static inline __m512 s16_min(__m512 a, __m512 b) { return _mm512_min_ps(a, b); }
static inline __m512 s16_max(__m512 a, __m512 b) { return _mm512_max_ps(a, b); }
static inline __m512 s16_round(__m512 x) {
  return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
static inline __mmask16 s16_lt(__m512 a, __m512 b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
static inline __mmask16 s16_eq(__m512 a, __m512 b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
static inline __mmask16 s16_nge(__m512 a, __m512 b) { return _mm512_cmp_ps_mask(a, b, _CMP_NGE_UQ); }
static inline __m512i s16_cvt(__m512 x) { return _mm512_cvtps_epi32(x); }
static inline __m512i s16_iset1(int v) { return _mm512_set1_epi32(v); }
static inline __m512i s16_iadd(__m512i a, __m512i b) { return _mm512_add_epi32(a, b); }
static inline __m512i s16_isub(__m512i a, __m512i b) { return _mm512_sub_epi32(a, b); }
static inline __m512i s16_iand(__m512i a, __m512i b) { return _mm512_and_si512(a, b); }
static inline __m512i s16_ior(__m512i a, __m512i b) { return _mm512_or_si512(a, b); }
#define s16_srai(a, n) _mm512_srai_epi32(a, n)
#define s16_srli(a, n) _mm512_srli_epi32(a, n)
#define s16_slli(a, n) _mm512_slli_epi32(a, n)
static inline __m512 s16_ifloat(__m512i a) { return _mm512_cvtepi32_ps(a); }
static inline __m512 s16_asf(__m512i a) { return _mm512_castsi512_ps(a); }
static inline __m512i s16_asi(__m512 a) { return _mm512_castps_si512(a); }
static inline __m512 s16_copysign(__m512 mag, __m512 sgn) {
  const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_andnot_si512(sign, _mm512_castps_si512(mag)),
                                             _mm512_and_si512(sign, _mm512_castps_si512(sgn))));
}
#define s16_select simd16_select
#define s16_abs simd16_abs

#define SIMD_V __m512
#define SIMD_M __mmask16
#define SIMD_I __m512i
#define SIMD_FN(name) simd16_##name
#define SIMD_OP(name) s16_##name
#include "simd_math.h"
#undef SIMD_V
#undef SIMD_M
#undef SIMD_I
#undef SIMD_FN
#undef SIMD_OP

#endif /* RLX_CPU_SIMD512_H */
