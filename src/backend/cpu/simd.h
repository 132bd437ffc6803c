/* simd.h — AVX2/FMA/F16C building blocks of the CPU kernels' vector code:
 * 8-lane f32 math (exp, log, tanh, sigmoid, erf and the two GELU forms),
 * half / bfloat16 conversion of 8 values, horizontal reductions.
 *
 * Include it only from a file compiled with -mavx2 -mfma -mf16c
 * (CMakeLists.txt), and reach that file's code only after a run-time check
 * that the CPU has the extensions (cpu_vec() in vec.h): nothing here may
 * run on a CPU without them.
 *
 * The math follows Cephes' single-precision routines (range reduction plus
 * minimax polynomials); against a double reference the errors are a few
 * f32 ulp (tests/test_vec.c: exp, log <= 2, tanh <= 3, sigmoid, silu, erf
 * <= 4, gelu <= 10), except where the argument's own rounding is amplified:
 * gelu_tanh's negative tail (~x e^{2u}) loses ~|2u| ulp to u. Special values behave as libm: NaN
 * propagates, exp(-inf) = 0, exp(+inf) = inf, log(0) = -inf, log(x < 0) =
 * NaN, tanh(+-inf) = +-1, erf(+-inf) = +-1.
 */
#ifndef RLX_CPU_SIMD_H
#define RLX_CPU_SIMD_H

#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "simd.h needs -mavx2 -mfma -mf16c"
#endif

#include <immintrin.h>
#include <math.h>
#include <stdint.h>

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

/* ---------------------------------------------------------------- exp, log */

/* e^x. x = n ln2 + r, |r| <= ln2/2, e^r by a degree-6 polynomial; 2^n is
 * applied as two factors so results down to the subnormals are right.
 * Inputs are clamped to [-105, 89]: beyond them e^x is 0 or inf anyway. */
static inline __m256 simd_exp(__m256 x) {
  /* max/min return their second operand for a NaN: a NaN x stays NaN */
  x = _mm256_min_ps(_mm256_set1_ps(89.0f), _mm256_max_ps(_mm256_set1_ps(-105.0f), x));
  __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  __m256i ni = _mm256_cvtps_epi32(n);
  __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

/* ln x: x = m 2^e with m in [sqrt(1/2), sqrt(2)), ln(m) by a polynomial in
 * m - 1, plus e ln2 in two parts. Subnormal inputs are scaled up first. */
static inline __m256 simd_log(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  __m256 tiny = _mm256_cmp_ps(x, _mm256_set1_ps(1.17549435e-38f), _CMP_LT_OQ);
  __m256 xs = simd_select(tiny, _mm256_mul_ps(x, _mm256_set1_ps(33554432.0f)), x); /* 2^25 */
  __m256i bits = _mm256_castps_si256(xs);
  __m256 e = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(126)));
  e = _mm256_sub_ps(e, _mm256_and_ps(tiny, _mm256_set1_ps(25.0f)));
  __m256 m = _mm256_castsi256_ps(_mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)),
                                                 _mm256_set1_epi32(0x3f000000))); /* [0.5, 1) */
  __m256 lo = _mm256_cmp_ps(m, _mm256_set1_ps(0.707106781186547524f), _CMP_LT_OQ);
  e = _mm256_sub_ps(e, _mm256_and_ps(lo, one));
  m = _mm256_add_ps(_mm256_sub_ps(m, one), _mm256_and_ps(lo, m)); /* 2m - 1 or m - 1 */
  __m256 z = _mm256_mul_ps(m, m);
  __m256 y = _mm256_set1_ps(7.0376836292e-2f);
  y = _mm256_fmadd_ps(y, m, _mm256_set1_ps(-1.1514610310e-1f));
  y = _mm256_fmadd_ps(y, m, _mm256_set1_ps(1.1676998740e-1f));
  y = _mm256_fmadd_ps(y, m, _mm256_set1_ps(-1.2420140846e-1f));
  y = _mm256_fmadd_ps(y, m, _mm256_set1_ps(1.4249322787e-1f));
  y = _mm256_fmadd_ps(y, m, _mm256_set1_ps(-1.6668057665e-1f));
  y = _mm256_fmadd_ps(y, m, _mm256_set1_ps(2.0000714765e-1f));
  y = _mm256_fmadd_ps(y, m, _mm256_set1_ps(-2.4999993993e-1f));
  y = _mm256_fmadd_ps(y, m, _mm256_set1_ps(3.3333331174e-1f));
  y = _mm256_mul_ps(_mm256_mul_ps(y, m), z);
  y = _mm256_fmadd_ps(e, _mm256_set1_ps(-2.12194440e-4f), y);
  y = _mm256_fnmadd_ps(z, _mm256_set1_ps(0.5f), y);
  __m256 r = _mm256_add_ps(m, y);
  r = _mm256_fmadd_ps(e, _mm256_set1_ps(0.693359375f), r);
  /* specials: log(0) = -inf, log(+inf) = +inf, log(<0) and log(NaN) = NaN */
  r = simd_select(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_EQ_OQ), _mm256_set1_ps(-INFINITY), r);
  r = simd_select(_mm256_cmp_ps(x, _mm256_set1_ps(INFINITY), _CMP_EQ_OQ), x, r);
  r = simd_select(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_NGE_UQ), _mm256_set1_ps(NAN), r);
  return r;
}

/* ---------------------------------------------------------------- tanh, sigmoid */

/* |x| < 0.625: x + x^3 P(x^2); else sign(x) (1 - 2 / (e^{2|x|} + 1)). */
static inline __m256 simd_tanh(__m256 x) {
  __m256 a = simd_abs(x);
  __m256 z = _mm256_mul_ps(x, x);
  __m256 p = _mm256_set1_ps(-5.70498872745e-3f);
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(2.06390887954e-2f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-5.37397155531e-2f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(1.33314422036e-1f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-3.33332819422e-1f));
  __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, z), x, x);
  __m256 e = simd_exp(_mm256_add_ps(a, a));
  __m256 big = _mm256_sub_ps(_mm256_set1_ps(1.0f),
                             _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, _mm256_set1_ps(1.0f))));
  big = simd_copysign(big, x);
  return simd_select(_mm256_cmp_ps(a, _mm256_set1_ps(0.625f), _CMP_LT_OQ), small, big);
}

/* 1 / (1 + e^-x) as e / (1 + e) with e = e^{-|x|} <= 1 for x < 0: no
 * overflow, and relative accuracy in the negative tail (into the
 * subnormals). */
static inline __m256 simd_sigmoid(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  __m256 e = simd_exp(_mm256_sub_ps(_mm256_setzero_ps(), simd_abs(x)));
  __m256 num = simd_select(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ), e, one);
  return _mm256_div_ps(num, _mm256_add_ps(one, e));
}

/* ---------------------------------------------------------------- erf, erfc, GELU */

/* erf(x) for |x| < 1: x P(x^2). */
static inline __m256 simd_erf_small(__m256 x) {
  __m256 z = _mm256_mul_ps(x, x);
  __m256 p = _mm256_set1_ps(7.853861353153693e-5f);
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-8.010193625184903e-4f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(5.188327685732524e-3f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-2.685381193529856e-2f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(1.128358514861418e-1f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-3.761262582423300e-1f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(1.128379165726710e0f));
  return _mm256_mul_ps(p, x);
}

/* erfc(a) for a >= 1 (erf's tail, where 1 - erf would cancel): e^{-a^2}
 * (1/a) P(1/a^2), one polynomial on [1, 2) and one on [2, inf) (Cephes).
 * e^{-a^2} takes the rounding error of a*a into account (in the tail erfc
 * is sensitive to a^2: a rounded a*a would cost ~a^2 ulp). Above a = 10.5
 * erfc is 0 in f32 (e^{-a^2} underflows). */
static inline __m256 simd_erfc_tail(__m256 a) {
  a = _mm256_min_ps(_mm256_set1_ps(10.5f), a); /* (a NaN stays NaN) */
  __m256 sq = _mm256_mul_ps(a, a);
  __m256 sq_err = _mm256_fmsub_ps(a, a, sq); /* a*a - sq, exactly */
  __m256 z = simd_exp(_mm256_sub_ps(_mm256_setzero_ps(), sq));
  z = _mm256_fnmadd_ps(z, sq_err, z); /* e^{-sq - err} ~ e^{-sq} (1 - err) */
  __m256 q = _mm256_div_ps(_mm256_set1_ps(1.0f), a);
  __m256 y = _mm256_mul_ps(q, q);
  __m256 p = _mm256_set1_ps(2.326819970068386e-2f);
  p = _mm256_fmadd_ps(p, y, _mm256_set1_ps(-1.387039388740657e-1f));
  p = _mm256_fmadd_ps(p, y, _mm256_set1_ps(3.687424674597105e-1f));
  p = _mm256_fmadd_ps(p, y, _mm256_set1_ps(-5.824733027278666e-1f));
  p = _mm256_fmadd_ps(p, y, _mm256_set1_ps(6.210004621745983e-1f));
  p = _mm256_fmadd_ps(p, y, _mm256_set1_ps(-4.944515323274145e-1f));
  p = _mm256_fmadd_ps(p, y, _mm256_set1_ps(3.404879937665872e-1f));
  p = _mm256_fmadd_ps(p, y, _mm256_set1_ps(-2.741127028184656e-1f));
  p = _mm256_fmadd_ps(p, y, _mm256_set1_ps(5.638259427386472e-1f));
  __m256 r = _mm256_set1_ps(-1.047766399936249e1f);
  r = _mm256_fmadd_ps(r, y, _mm256_set1_ps(1.297719955372516e1f));
  r = _mm256_fmadd_ps(r, y, _mm256_set1_ps(-7.495518717768503e0f));
  r = _mm256_fmadd_ps(r, y, _mm256_set1_ps(2.921019019210786e0f));
  r = _mm256_fmadd_ps(r, y, _mm256_set1_ps(-1.015265279202700e0f));
  r = _mm256_fmadd_ps(r, y, _mm256_set1_ps(4.218463358204948e-1f));
  r = _mm256_fmadd_ps(r, y, _mm256_set1_ps(-2.820767439740514e-1f));
  r = _mm256_fmadd_ps(r, y, _mm256_set1_ps(5.641895067754075e-1f));
  __m256 poly = simd_select(_mm256_cmp_ps(a, _mm256_set1_ps(2.0f), _CMP_LT_OQ), p, r);
  return _mm256_mul_ps(_mm256_mul_ps(z, q), poly);
}

static inline __m256 simd_erf(__m256 x) {
  __m256 a = simd_abs(x);
  __m256 big = _mm256_sub_ps(_mm256_set1_ps(1.0f), simd_erfc_tail(_mm256_max_ps(_mm256_set1_ps(1.0f), a)));
  big = simd_copysign(big, x);
  return simd_select(_mm256_cmp_ps(a, _mm256_set1_ps(1.0f), _CMP_LT_OQ), simd_erf_small(x), big);
}

/* GELU, erf form: x Phi(x) with Phi(x) = erfc(a)/2 for x < 0 and
 * 1 - erfc(a)/2 for x >= 0, a = |x|/sqrt2, and erfc(a) = e^{-a^2} erfcx(a):
 * erfcx by a rational fit (degrees 4/5, ~7 ulp on [0, 10.5]), e^{-a^2}
 * from x itself (x^2/2 exactly, as sq + sq_err). One exp and one division;
 * relative accuracy also as x -> -inf. */
static inline __m256 simd_gelu(__m256 x) {
  const __m256 half = _mm256_set1_ps(0.5f);
  __m256 ax = _mm256_min_ps(_mm256_set1_ps(14.849242f), simd_abs(x)); /* erfc(10.5) is 0 in f32 */
  __m256 a = _mm256_mul_ps(ax, _mm256_set1_ps(0.70710678118654752f));
  __m256 p = _mm256_set1_ps(0.033400606364011765f);
  p = _mm256_fmadd_ps(p, a, _mm256_set1_ps(0.2321174293756485f));
  p = _mm256_fmadd_ps(p, a, _mm256_set1_ps(0.7376965880393982f));
  p = _mm256_fmadd_ps(p, a, _mm256_set1_ps(1.2442325353622437f));
  p = _mm256_fmadd_ps(p, a, _mm256_set1_ps(1.0f));
  __m256 q = _mm256_set1_ps(0.05920042470097542f);
  q = _mm256_fmadd_ps(q, a, _mm256_set1_ps(0.4114411175251007f));
  q = _mm256_fmadd_ps(q, a, _mm256_set1_ps(1.336735725402832f));
  q = _mm256_fmadd_ps(q, a, _mm256_set1_ps(2.41489315032959f));
  q = _mm256_fmadd_ps(q, a, _mm256_set1_ps(2.372612237930298f));
  q = _mm256_fmadd_ps(q, a, _mm256_set1_ps(1.0f));
  __m256 xx = _mm256_mul_ps(ax, ax);
  __m256 sq = _mm256_mul_ps(half, xx), sq_err = _mm256_mul_ps(half, _mm256_fmsub_ps(ax, ax, xx));
  __m256 e = simd_exp(_mm256_sub_ps(_mm256_setzero_ps(), sq));
  e = _mm256_fnmadd_ps(e, sq_err, e);
  __m256 ec = _mm256_mul_ps(_mm256_mul_ps(half, e), _mm256_div_ps(p, q)); /* erfc(a) / 2 */
  __m256 phi = simd_select(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ), ec,
                           _mm256_sub_ps(_mm256_set1_ps(1.0f), ec));
  return _mm256_mul_ps(x, phi);
}

/* GELU, tanh form: x (1 + tanh u) / 2 = x sigmoid(2u), u = sqrt(2/pi) (x +
 * 0.044715 x^3): no cancellation in either tail. */
static inline __m256 simd_gelu_tanh(__m256 x) {
  /* 2u = x (k + k 0.044715 x^2), k = 2 sqrt(2/pi): three roundings */
  __m256 u2 = _mm256_mul_ps(x, _mm256_fmadd_ps(_mm256_set1_ps(0.071354816f), _mm256_mul_ps(x, x),
                                               _mm256_set1_ps(1.5957691216057308f)));
  return _mm256_mul_ps(x, simd_sigmoid(u2));
}

static inline __m256 simd_silu(__m256 x) { return _mm256_mul_ps(x, simd_sigmoid(x)); }

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
