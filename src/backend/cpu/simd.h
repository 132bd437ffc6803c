/* simd.h — AVX2/FMA/F16C building blocks of the CPU kernels' vector code:
 * 8-lane f32 math (exp, log, tanh, sigmoid, erf and the two GELU forms),
 * half / bfloat16 conversion of 8 values, horizontal reductions.
 *
 * Include it only from a file compiled with -mavx2 -mfma -mf16c
 * (CMakeLists.txt), and reach that file's code only after a run-time check
 * that the CPU has the extensions (cpu_vec() in vec.h): nothing here may
 * run on a CPU without them.
 *
 * The math itself (errors, special values) is written once for 8 and 16
 * lanes in simd_math.h.
 */
#ifndef RLX_CPU_SIMD_H
#define RLX_CPU_SIMD_H

#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "simd.h needs -mavx2 -mfma -mf16c"
#endif

#include <immintrin.h>
#include <math.h>
#include <stdint.h>

/* The micro-kernels' register blocks are arrays indexed by constant
 * template-like arguments: inlining them is what turns the arrays into
 * registers. */
#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* rlx_cmpop -> the vcmpps predicate (ordered: a NaN compares false, except
 * for NE, which holds), as X(op, predicate) for a switch over the ops. */
#define SIMD_CMP_PREDICATES(X)                                                           \
  X(RLX_CMP_EQ, _CMP_EQ_OQ) X(RLX_CMP_NE, _CMP_NEQ_UQ) X(RLX_CMP_LT, _CMP_LT_OQ)         \
  X(RLX_CMP_LE, _CMP_LE_OQ) X(RLX_CMP_GT, _CMP_GT_OQ) X(RLX_CMP_GE, _CMP_GE_OQ)

/* Lanes of a where mask is set, else b. */
static inline __m256 simd_select(__m256 mask, __m256 a, __m256 b) { return _mm256_blendv_ps(b, a, mask); }

static inline __m256 simd_abs(__m256 x) {
  return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
}

/* |mag| with the sign of sgn. */
static inline __m256 simd_copysign(__m256 mag, __m256 sgn) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  return _mm256_or_ps(_mm256_andnot_ps(sign, mag), _mm256_and_ps(sign, sgn));
}

/* ---------------------------------------------------------------- math (simd_math.h) */

/* The primitives simd_math.h is written in, on 8 lanes. */
static inline __m256 s8_set1(float f) { return _mm256_set1_ps(f); }
static inline __m256 s8_zero(void) { return _mm256_setzero_ps(); }
static inline __m256 s8_add(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
static inline __m256 s8_sub(__m256 a, __m256 b) { return _mm256_sub_ps(a, b); }
static inline __m256 s8_mul(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
static inline __m256 s8_div(__m256 a, __m256 b) { return _mm256_div_ps(a, b); }
static inline __m256 s8_fmadd(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }
static inline __m256 s8_fnmadd(__m256 a, __m256 b, __m256 c) { return _mm256_fnmadd_ps(a, b, c); }
static inline __m256 s8_fmsub(__m256 a, __m256 b, __m256 c) { return _mm256_fmsub_ps(a, b, c); }
static inline __m256 s8_min(__m256 a, __m256 b) { return _mm256_min_ps(a, b); }
static inline __m256 s8_max(__m256 a, __m256 b) { return _mm256_max_ps(a, b); }
static inline __m256 s8_round(__m256 x) {
  return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
static inline __m256 s8_lt(__m256 a, __m256 b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
static inline __m256 s8_eq(__m256 a, __m256 b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
static inline __m256 s8_nge(__m256 a, __m256 b) { return _mm256_cmp_ps(a, b, _CMP_NGE_UQ); }
static inline __m256i s8_cvt(__m256 x) { return _mm256_cvtps_epi32(x); }
static inline __m256i s8_iset1(int v) { return _mm256_set1_epi32(v); }
static inline __m256i s8_iadd(__m256i a, __m256i b) { return _mm256_add_epi32(a, b); }
static inline __m256i s8_isub(__m256i a, __m256i b) { return _mm256_sub_epi32(a, b); }
static inline __m256i s8_iand(__m256i a, __m256i b) { return _mm256_and_si256(a, b); }
static inline __m256i s8_ior(__m256i a, __m256i b) { return _mm256_or_si256(a, b); }
#define s8_srai(a, n) _mm256_srai_epi32(a, n)
#define s8_srli(a, n) _mm256_srli_epi32(a, n)
#define s8_slli(a, n) _mm256_slli_epi32(a, n)
static inline __m256 s8_ifloat(__m256i a) { return _mm256_cvtepi32_ps(a); }
static inline __m256 s8_asf(__m256i a) { return _mm256_castsi256_ps(a); }
static inline __m256i s8_asi(__m256 a) { return _mm256_castps_si256(a); }
#define s8_select simd_select
#define s8_abs simd_abs
#define s8_copysign simd_copysign

#define SIMD_V __m256
#define SIMD_M __m256
#define SIMD_I __m256i
#define SIMD_FN(name) simd_##name
#define SIMD_OP(name) s8_##name
#include "simd_math.h"
#undef SIMD_V
#undef SIMD_M
#undef SIMD_I
#undef SIMD_FN
#undef SIMD_OP

/* ---------------------------------------------------------------- half, bfloat16 */

static inline __m256 simd_load_f16(const uint16_t *p) {
  return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}

/* Round to nearest even; overflow to inf, NaN stays a quiet NaN. */
static inline void simd_store_f16(uint16_t *p, __m256 v) {
  _mm_storeu_si128((__m128i *)(void *)p, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

static inline __m256 simd_load_bf16(const uint16_t *p) {
  __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

/* bf16 bits of v in the low halves of the lanes: round to nearest even, a
 * NaN made quiet (as ir_f32_to_bf16). */
static inline __m256i simd_bf16_bits(__m256 v) {
  __m256i u = _mm256_castps_si256(v);
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
  __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  return _mm256_castps_si256(simd_select(nan, _mm256_castsi256_ps(quiet), _mm256_castsi256_ps(rounded)));
}

static inline void simd_store_bf16(uint16_t *p, __m256 v) {
  __m256i b = simd_bf16_bits(v);
  __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(b, b), 0x08);
  _mm_storeu_si128((__m128i *)(void *)p, _mm256_castsi256_si128(packed));
}

/* v as stored in bf16 and read back. */
static inline __m256 simd_round_bf16(__m256 v) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(simd_bf16_bits(v), 16));
}

static inline __m256 simd_round_f16(__m256 v) {
  return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

/* ---------------------------------------------------------------- horizontal */

static inline float simd_hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* Sum of the 4 lanes of a double vector. */
static inline double simd_hsum_pd(__m256d v) {
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

/* Max / min of the lanes; a NaN lane is ignored (callers that propagate NaN
 * track it themselves). */
static inline float simd_hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

static inline float simd_hmin(__m256 v) {
  __m128 s = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_min_ps(s, _mm_movehl_ps(s, s));
  s = _mm_min_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* Mask of the first n (0..8) lanes, for maskload / maskstore of a tail. */
static inline __m256i simd_tail_mask(int64_t n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), idx);
}

#endif /* RLX_CPU_SIMD_H */
