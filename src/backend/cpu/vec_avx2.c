/* vec_avx2.c — the AVX2/FMA/F16C table of vec.h.
 *
 * Compiled with -mavx2 -mfma -mf16c (CMakeLists.txt) and reached only
 * through cpu_vec(), which checks the CPU first. Built without those flags
 * (a target that does not set them) the file defines no table and the
 * portable one runs. What is not vectorized here (sin, cos, softplus, pow,
 * mod) is delegated to the portable table.
 */
#include "vec.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include "simd.h"

#include <math.h>
#include <string.h>

/* ---------------------------------------------------------------- conversion */

/* Q8_0 and Q4_0 blocks {f16 d, 32 int8 | 16 bytes of nibble pairs}:
 * q * d (q - 8 for Q4_0) on 8 lanes, the products quant_blocks.c's
 * decoders round (int to float is exact). */
static void load_q8_0(float *dst, const uint8_t *b, int64_t n) {
  for (int64_t i = 0; i < n; i += 32, b += 34) {
    const __m256 d = _mm256_set1_ps(_cvtsh_ss((unsigned short)(b[0] | b[1] << 8)));
    for (int k = 0; k < 4; k++) {
      const __m128i q = _mm_loadl_epi64((const __m128i *)(const void *)(b + 2 + 8 * k));
      _mm256_storeu_ps(dst + i + 8 * k, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d));
    }
  }
}

static void load_q4_0(float *dst, const uint8_t *b, int64_t n) {
  const __m128i low = _mm_set1_epi8(0x0F);
  const __m256i eight = _mm256_set1_epi32(8);
  for (int64_t i = 0; i < n; i += 32, b += 18) {
    const __m256 d = _mm256_set1_ps(_cvtsh_ss((unsigned short)(b[0] | b[1] << 8)));
    const __m128i q = _mm_loadu_si128((const __m128i *)(const void *)(b + 2));
    const __m128i half[2] = {_mm_and_si128(q, low), _mm_and_si128(_mm_srli_epi16(q, 4), low)};
    for (int k = 0; k < 4; k++) {
      const __m128i bytes = k % 2 ? _mm_srli_si128(half[k / 2], 8) : half[k / 2];
      const __m256i v = _mm256_sub_epi32(_mm256_cvtepu8_epi32(bytes), eight);
      _mm256_storeu_ps(dst + i + 8 * k, _mm256_mul_ps(_mm256_cvtepi32_ps(v), d));
    }
  }
}

static void v_load(float *dst, const void *src, rlx_dtype t, int64_t n) {
  if (t == RLX_Q8_0 || t == RLX_Q4_0) {
    (t == RLX_Q8_0 ? load_q8_0 : load_q4_0)(dst, src, n);
    return;
  }
  if (t != RLX_F16 && t != RLX_BF16) {
    if ((const void *)dst != src) memmove(dst, src, (size_t)n * sizeof(float));
    return;
  }
  const uint16_t *h = src;
  int64_t i = 0;
  if (t == RLX_F16)
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, simd_load_f16(h + i));
  else
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, simd_load_bf16(h + i));
  if (i < n) {
    uint16_t tmp[8] = {0};
    float out[8];
    memcpy(tmp, h + i, (size_t)(n - i) * sizeof *tmp);
    _mm256_storeu_ps(out, t == RLX_F16 ? simd_load_f16(tmp) : simd_load_bf16(tmp));
    memcpy(dst + i, out, (size_t)(n - i) * sizeof *out);
  }
}

static void v_store(void *dst, rlx_dtype t, const float *src, int64_t n) {
  if (t != RLX_F16 && t != RLX_BF16) {
    if (dst != (const void *)src) memmove(dst, src, (size_t)n * sizeof(float));
    return;
  }
  uint16_t *h = dst;
  int64_t i = 0;
  if (t == RLX_F16)
    for (; i + 8 <= n; i += 8) simd_store_f16(h + i, _mm256_loadu_ps(src + i));
  else
    for (; i + 8 <= n; i += 8) simd_store_bf16(h + i, _mm256_loadu_ps(src + i));
  if (i < n) {
    float in[8] = {0};
    uint16_t tmp[8];
    memcpy(in, src + i, (size_t)(n - i) * sizeof *in);
    if (t == RLX_F16) simd_store_f16(tmp, _mm256_loadu_ps(in));
    else simd_store_bf16(tmp, _mm256_loadu_ps(in));
    memcpy(h + i, tmp, (size_t)(n - i) * sizeof *tmp);
  }
}

/* y[i] = EXPR(v) with v = x[i], 8 lanes at a time; the tail through a lane
 * mask (masked lanes read as 0 and are not stored). */
#define MAP1(x, y, n, EXPR)                                     \
  do {                                                          \
    int64_t i_ = 0;                                             \
    for (; i_ + 8 <= (n); i_ += 8) {                            \
      __m256 v = _mm256_loadu_ps((x) + i_);                     \
      _mm256_storeu_ps((y) + i_, (EXPR));                       \
    }                                                           \
    if (i_ < (n)) {                                             \
      __m256i m_ = simd_tail_mask((n) - i_);                    \
      __m256 v = _mm256_maskload_ps((x) + i_, m_);              \
      _mm256_maskstore_ps((y) + i_, m_, (EXPR));                \
    }                                                           \
  } while (0)

static void v_round(float *x, rlx_dtype t, int64_t n) {
  if (t == RLX_F16) MAP1(x, x, n, simd_round_f16(v));
  else if (t == RLX_BF16) MAP1(x, x, n, simd_round_bf16(v));
}

/* ---------------------------------------------------------------- elementwise */

static void v_act(rlx_act act, float alpha, const float *x, float *y, int64_t n) {
  const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f), va = _mm256_set1_ps(alpha);
  switch (act) {
  case RLX_ACT_NONE: if (x != y) memmove(y, x, (size_t)n * sizeof *y); break;
  case RLX_ACT_GELU: MAP1(x, y, n, simd_gelu(v)); break;
  case RLX_ACT_GELU_TANH: MAP1(x, y, n, simd_gelu_tanh(v)); break;
  case RLX_ACT_SILU: MAP1(x, y, n, simd_silu(v)); break;
  /* x < 0 is false for NaN and -0: both pass through, as the reference */
  case RLX_ACT_RELU: MAP1(x, y, n, simd_select(_mm256_cmp_ps(v, zero, _CMP_LT_OQ), zero, v)); break;
  case RLX_ACT_LEAKY_RELU:
    MAP1(x, y, n, simd_select(_mm256_cmp_ps(v, zero, _CMP_LT_OQ), _mm256_mul_ps(v, va), v));
    break;
  case RLX_ACT_SIGMOID: MAP1(x, y, n, simd_sigmoid(v)); break;
  case RLX_ACT_TANH: MAP1(x, y, n, simd_tanh(v)); break;
  case RLX_ACT_EXP: MAP1(x, y, n, simd_exp(v)); break;
  case RLX_ACT_LOG: MAP1(x, y, n, simd_log(v)); break;
  case RLX_ACT_SQRT: MAP1(x, y, n, _mm256_sqrt_ps(v)); break;
  case RLX_ACT_RSQRT: MAP1(x, y, n, _mm256_div_ps(one, _mm256_sqrt_ps(v))); break;
  case RLX_ACT_NEG: MAP1(x, y, n, _mm256_xor_ps(v, sign)); break;
  case RLX_ACT_ABS: MAP1(x, y, n, simd_abs(v)); break;
  case RLX_ACT_ERF: MAP1(x, y, n, simd_erf(v)); break;
  case RLX_ACT_ROUND: MAP1(x, y, n, _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)); break;
  case RLX_ACT_SIGN: /* keeps 0, -0 and NaN */
    MAP1(x, y, n, simd_select(_mm256_cmp_ps(v, zero, _CMP_GT_OQ), one,
                              simd_select(_mm256_cmp_ps(v, zero, _CMP_LT_OQ), _mm256_set1_ps(-1.0f), v)));
    break;
  case RLX_ACT_RECIPROCAL: MAP1(x, y, n, _mm256_div_ps(one, v)); break;
  case RLX_ACT_SQUARE: MAP1(x, y, n, _mm256_mul_ps(v, v)); break;
  default: cpu_vec_portable.act(act, alpha, x, y, n); break;
  }
}

/* y[i] = EXPR(va, vb) over a[i*sa], b[i*sb] (sa, sb 0 or 1). */
#define MAP2(a, sa, b, sb, y, n, EXPR)                                                      \
  do {                                                                                      \
    const __m256 a0_ = _mm256_set1_ps((a)[0]), b0_ = _mm256_set1_ps((b)[0]);               \
    int64_t i_ = 0;                                                                         \
    for (; i_ + 8 <= (n); i_ += 8) {                                                        \
      __m256 va = (sa) ? _mm256_loadu_ps((a) + i_) : a0_;                                   \
      __m256 vb = (sb) ? _mm256_loadu_ps((b) + i_) : b0_;                                   \
      _mm256_storeu_ps((y) + i_, (EXPR));                                                   \
    }                                                                                       \
    if (i_ < (n)) {                                                                         \
      __m256i m_ = simd_tail_mask((n) - i_);                                                \
      __m256 va = (sa) ? _mm256_maskload_ps((a) + i_, m_) : a0_;                            \
      __m256 vb = (sb) ? _mm256_maskload_ps((b) + i_, m_) : b0_;                            \
      _mm256_maskstore_ps((y) + i_, m_, (EXPR));                                            \
    }                                                                                       \
  } while (0)

/* max/min as the reference: a NaN operand gives a + b (NaN); otherwise
 * a > b ? a : b (so max(0, -0) is -0, as there). */
ALWAYS_INLINE __m256 bin_max(__m256 a, __m256 b) {
  __m256 r = simd_select(_mm256_cmp_ps(a, b, _CMP_GT_OQ), a, b);
  return simd_select(_mm256_cmp_ps(a, b, _CMP_UNORD_Q), _mm256_add_ps(a, b), r);
}

ALWAYS_INLINE __m256 bin_min(__m256 a, __m256 b) {
  __m256 r = simd_select(_mm256_cmp_ps(a, b, _CMP_LT_OQ), a, b);
  return simd_select(_mm256_cmp_ps(a, b, _CMP_UNORD_Q), _mm256_add_ps(a, b), r);
}

static void v_binary(rlx_binop op, const float *a, int sa, const float *b, int sb, float *y, int64_t n) {
  if (n <= 0) return;
  switch (op) {
  case RLX_BIN_ADD: MAP2(a, sa, b, sb, y, n, _mm256_add_ps(va, vb)); break;
  case RLX_BIN_SUB: MAP2(a, sa, b, sb, y, n, _mm256_sub_ps(va, vb)); break;
  case RLX_BIN_MUL: MAP2(a, sa, b, sb, y, n, _mm256_mul_ps(va, vb)); break;
  case RLX_BIN_DIV: MAP2(a, sa, b, sb, y, n, _mm256_div_ps(va, vb)); break;
  case RLX_BIN_MAX: MAP2(a, sa, b, sb, y, n, bin_max(va, vb)); break;
  case RLX_BIN_MIN: MAP2(a, sa, b, sb, y, n, bin_min(va, vb)); break;
  default: cpu_vec_portable.binary(op, a, sa, b, sb, y, n); break;
  }
}

#define CMP_CASE(OP, PRED) \
  case OP: MAP2(a, sa, b, sb, y, n, _mm256_and_ps(_mm256_cmp_ps(va, vb, PRED), one)); break;

static void v_compare(rlx_cmpop op, const float *a, int sa, const float *b, int sb, float *y, int64_t n) {
  if (n <= 0) return;
  const __m256 one = _mm256_set1_ps(1.0f);
  switch (op) {
  SIMD_CMP_PREDICATES(CMP_CASE)
  default: cpu_vec_portable.compare(op, a, sa, b, sb, y, n); break;
  }
}

static void v_scale(float *y, float s, int64_t n) {
  const __m256 vs = _mm256_set1_ps(s);
  MAP1(y, y, n, _mm256_mul_ps(v, vs));
}

/* ---------------------------------------------------------------- row reductions */

ALWAYS_INLINE __m256d lo_pd(__m256 v) { return _mm256_cvtps_pd(_mm256_castps256_ps128(v)); }
ALWAYS_INLINE __m256d hi_pd(__m256 v) { return _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)); }

/* Sums in f32 lanes over blocks of SUM_BLOCK elements (each lane adds at
 * most SUM_BLOCK / 32 values, so its rounding error stays ~1e-7 relative),
 * each block's total added in double: double accuracy over long rows at
 * f32 speed. */
#define SUM_BLOCK 1024

static double v_sum(const float *x, int64_t n) {
  double total = 0.0;
  for (int64_t b = 0; b < n; b += SUM_BLOCK) {
    const int64_t e = n - b < SUM_BLOCK ? n : b + SUM_BLOCK;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = b;
    for (; i + 32 <= e; i += 32) {
      s0 = _mm256_add_ps(s0, _mm256_loadu_ps(x + i));
      s1 = _mm256_add_ps(s1, _mm256_loadu_ps(x + i + 8));
      s2 = _mm256_add_ps(s2, _mm256_loadu_ps(x + i + 16));
      s3 = _mm256_add_ps(s3, _mm256_loadu_ps(x + i + 24));
    }
    for (; i < e; i += 8) s0 = _mm256_add_ps(s0, _mm256_maskload_ps(x + i, simd_tail_mask(e - i)));
    __m256 s = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
    total += simd_hsum_pd(_mm256_add_pd(lo_pd(s), hi_pd(s)));
  }
  return total;
}

static double v_sum_sq_dev(const float *x, float c, int64_t n) {
  const __m256 vc = _mm256_set1_ps(c);
  double total = 0.0;
  for (int64_t b = 0; b < n; b += SUM_BLOCK) {
    const int64_t e = n - b < SUM_BLOCK ? n : b + SUM_BLOCK;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    int64_t i = b;
    for (; i + 16 <= e; i += 16) {
      __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + i), vc), d1 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vc);
      s0 = _mm256_fmadd_ps(d0, d0, s0);
      s1 = _mm256_fmadd_ps(d1, d1, s1);
    }
    for (; i < e; i += 8) {
      __m256i m = simd_tail_mask(e - i);
      /* masked lanes: d = 0 - c, then zeroed */
      __m256 d = _mm256_and_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), vc), _mm256_castsi256_ps(m));
      s0 = _mm256_fmadd_ps(d, d, s0);
    }
    __m256 s = _mm256_add_ps(s0, s1);
    total += simd_hsum_pd(_mm256_add_pd(lo_pd(s), hi_pd(s)));
  }
  return total;
}

/* max (want_max) or min of x; NaN if any element is NaN. */
ALWAYS_INLINE float row_extreme(const float *x, int64_t n, int want_max) {
  const __m256 start = _mm256_set1_ps(want_max ? -INFINITY : INFINITY);
  __m256 m0 = start, m1 = start, nan = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
    m0 = want_max ? _mm256_max_ps(m0, a) : _mm256_min_ps(m0, a);
    m1 = want_max ? _mm256_max_ps(m1, b) : _mm256_min_ps(m1, b);
  }
  for (; i < n; i += 8) {
    __m256i m = simd_tail_mask(n - i);
    __m256 a = simd_select(_mm256_castsi256_ps(m), _mm256_maskload_ps(x + i, m), start);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
    m0 = want_max ? _mm256_max_ps(m0, a) : _mm256_min_ps(m0, a);
  }
  if (_mm256_movemask_ps(nan)) return NAN;
  __m256 m = want_max ? _mm256_max_ps(m0, m1) : _mm256_min_ps(m0, m1);
  return want_max ? simd_hmax(m) : simd_hmin(m);
}

static float v_max(const float *x, int64_t n) { return row_extreme(x, n, 1); }
static float v_min(const float *x, int64_t n) { return row_extreme(x, n, 0); }

static double v_exp_shift_sum(const float *x, float c, float *y, int64_t n) {
  const __m256 vc = _mm256_set1_ps(c);
  __m256d s0 = _mm256_setzero_pd(), s1 = s0;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 e = simd_exp(_mm256_sub_ps(_mm256_loadu_ps(x + i), vc));
    _mm256_storeu_ps(y + i, e);
    s0 = _mm256_add_pd(s0, lo_pd(e));
    s1 = _mm256_add_pd(s1, hi_pd(e));
  }
  if (i < n) {
    __m256i m = simd_tail_mask(n - i);
    __m256 e = simd_exp(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), vc));
    _mm256_maskstore_ps(y + i, m, e);
    e = _mm256_and_ps(e, _mm256_castsi256_ps(m));
    s0 = _mm256_add_pd(s0, lo_pd(e));
    s1 = _mm256_add_pd(s1, hi_pd(e));
  }
  return simd_hsum_pd(_mm256_add_pd(s0, s1));
}

static void v_norm_affine(const float *x, float shift, float scale, const float *gamma,
                          const float *beta, float *y, int64_t n) {
  const __m256 vs = _mm256_set1_ps(shift), vk = _mm256_set1_ps(scale);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vs), vk);
    if (gamma) v = _mm256_mul_ps(v, _mm256_loadu_ps(gamma + i));
    if (beta) v = _mm256_add_ps(v, _mm256_loadu_ps(beta + i));
    _mm256_storeu_ps(y + i, v);
  }
  for (; i < n; i++) {
    float v = (x[i] - shift) * scale;
    if (gamma) v *= gamma[i];
    y[i] = beta ? v + beta[i] : v;
  }
}

/* ---------------------------------------------------------------- across rows */

static void v_acc_sum(double *acc, const float *x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    _mm256_storeu_pd(acc + i, _mm256_add_pd(_mm256_loadu_pd(acc + i), lo_pd(v)));
    _mm256_storeu_pd(acc + i + 4, _mm256_add_pd(_mm256_loadu_pd(acc + i + 4), hi_pd(v)));
  }
  for (; i < n; i++) acc[i] += x[i];
}

/* acc = acc NaN ? acc : x NaN ? x : (max/min); _mm256_max_ps(a, b) returns
 * b when either is NaN. */
ALWAYS_INLINE void acc_extreme(float *acc, const float *x, int64_t n, int want_max) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 a = _mm256_loadu_ps(acc + i), v = _mm256_loadu_ps(x + i);
    __m256 r = want_max ? _mm256_max_ps(a, v) : _mm256_min_ps(a, v);
    _mm256_storeu_ps(acc + i, simd_select(_mm256_cmp_ps(a, a, _CMP_UNORD_Q), a, r));
  }
  for (; i < n; i++)
    if (!isnan(acc[i]) && (isnan(x[i]) || (want_max ? x[i] > acc[i] : x[i] < acc[i]))) acc[i] = x[i];
}

static void v_acc_max(float *acc, const float *x, int64_t n) { acc_extreme(acc, x, n, 1); }
static void v_acc_min(float *acc, const float *x, int64_t n) { acc_extreme(acc, x, n, 0); }

/* ---------------------------------------------------------------- attention tiles */

#define QK_MR 6

/* NR (<= QK_MR) rows x NV (1 or 2) vectors of 8 columns of s = q kt. */
ALWAYS_INLINE void qk_micro(const int NR, const int NV, const float *q, int64_t ldq, const float *kt,
                            int64_t ldkt, float *s, int64_t lds, int64_t depth) {
  __m256 acc[QK_MR][2];
#pragma GCC unroll 6
  for (int r = 0; r < NR; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t k = 0; k < depth; k++) {
    const float *kr = kt + k * ldkt;
    __m256 b0 = _mm256_loadu_ps(kr), b1 = NV > 1 ? _mm256_loadu_ps(kr + 8) : b0;
#pragma GCC unroll 6
    for (int r = 0; r < NR; r++) {
      __m256 a = _mm256_broadcast_ss(q + r * ldq + k);
      acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
      if (NV > 1) acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < NR; r++) {
    _mm256_storeu_ps(s + r * lds, acc[r][0]);
    if (NV > 1) _mm256_storeu_ps(s + r * lds + 8, acc[r][1]);
  }
}

#define QK_ROWS(NR)                                                                          \
  do {                                                                                       \
    for (int64_t c = 0; c < cols; c += 16) {                                                 \
      if (cols - c > 8) qk_micro(NR, 2, q + r * ldq, ldq, kt + c, ldkt, s + r * lds + c, lds, depth); \
      else qk_micro(NR, 1, q + r * ldq, ldq, kt + c, ldkt, s + r * lds + c, lds, depth);    \
    }                                                                                        \
  } while (0)

static void v_qk_tile(const float *q, int64_t ldq, const float *kt, int64_t ldkt, float *s, int64_t lds,
                      int64_t rows, int64_t cols, int64_t depth) {
  int64_t r = 0;
  for (; r + QK_MR <= rows; r += QK_MR) QK_ROWS(QK_MR);
  switch (rows - r) {
  case 5: QK_ROWS(5); break;
  case 4: QK_ROWS(4); break;
  case 3: QK_ROWS(3); break;
  case 2: QK_ROWS(2); break;
  case 1: QK_ROWS(1); break;
  default: break;
  }
}

#define PV_MR 6

/* o[NR rows, 8*NV columns] += p v; MASKED (NV = 1 only): the first `tail`
 * columns only, nothing read or written past them. */
ALWAYS_INLINE void pv_micro(const int NR, const int NV, const int MASKED, int64_t tail, const float *p,
                            int64_t ldp, const float *v, int64_t ldv, float *o, int64_t ldo, int64_t cols) {
  __m256 acc[PV_MR][2];
  const __m256i m = MASKED ? simd_tail_mask(tail) : _mm256_set1_epi32(-1);
#pragma GCC unroll 6
  for (int r = 0; r < NR; r++) {
    acc[r][0] = MASKED ? _mm256_maskload_ps(o + r * ldo, m) : _mm256_loadu_ps(o + r * ldo);
    acc[r][1] = NV > 1 ? _mm256_loadu_ps(o + r * ldo + 8) : acc[r][0];
  }
  for (int64_t c = 0; c < cols; c++) {
    const float *vr = v + c * ldv;
    __m256 b0 = MASKED ? _mm256_maskload_ps(vr, m) : _mm256_loadu_ps(vr);
    __m256 b1 = NV > 1 ? _mm256_loadu_ps(vr + 8) : b0;
#pragma GCC unroll 6
    for (int r = 0; r < NR; r++) {
      __m256 a = _mm256_broadcast_ss(p + r * ldp + c);
      acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
      if (NV > 1) acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < NR; r++) {
    if (MASKED) _mm256_maskstore_ps(o + r * ldo, m, acc[r][0]);
    else _mm256_storeu_ps(o + r * ldo, acc[r][0]);
    if (NV > 1) _mm256_storeu_ps(o + r * ldo + 8, acc[r][1]);
  }
}

#define PV_ROWS(NR)                                                                               \
  do {                                                                                            \
    const float *p_ = p + r * ldp;                                                                \
    float *o_ = o + r * ldo;                                                                      \
    int64_t j = 0;                                                                                \
    for (; j + 16 <= d; j += 16) pv_micro(NR, 2, 0, 0, p_, ldp, v + j, ldv, o_ + j, ldo, cols);  \
    if (j + 8 <= d) {                                                                             \
      pv_micro(NR, 1, 0, 0, p_, ldp, v + j, ldv, o_ + j, ldo, cols);                              \
      j += 8;                                                                                     \
    }                                                                                             \
    if (j < d) pv_micro(NR, 1, 1, d - j, p_, ldp, v + j, ldv, o_ + j, ldo, cols);                 \
  } while (0)

static void v_pv_tile(const float *p, int64_t ldp, const float *v, int64_t ldv, float *o, int64_t ldo,
                      int64_t rows, int64_t cols, int64_t d) {
  int64_t r = 0;
  for (; r + PV_MR <= rows; r += PV_MR) PV_ROWS(PV_MR);
  switch (rows - r) {
  case 5: PV_ROWS(5); break;
  case 4: PV_ROWS(4); break;
  case 3: PV_ROWS(3); break;
  case 2: PV_ROWS(2); break;
  case 1: PV_ROWS(1); break;
  default: break;
  }
}

/* Sums of four vectors' lanes: [sum a0, sum a1, sum a2, sum a3]. */
ALWAYS_INLINE __m128 hsum4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

/* NR (<= 4) query rows against two keys k0, k1 (k1 may be k0: one key). */
ALWAYS_INLINE void qk_rows_micro(const int NR, const float *q, int64_t ldq, const float *k0, const float *k1,
                                 float *s, int64_t lds, int64_t depth) {
  __m256 a[4][2];
#pragma GCC unroll 4
  for (int r = 0; r < NR; r++) a[r][0] = a[r][1] = _mm256_setzero_ps();
  for (int64_t i = 0; i < depth; i += 8) {
    __m256i m = simd_tail_mask(depth - i);
    __m256 b0 = _mm256_maskload_ps(k0 + i, m), b1 = _mm256_maskload_ps(k1 + i, m);
#pragma GCC unroll 4
    for (int r = 0; r < NR; r++) {
      __m256 x = _mm256_maskload_ps(q + r * ldq + i, m);
      a[r][0] = _mm256_fmadd_ps(x, b0, a[r][0]);
      a[r][1] = _mm256_fmadd_ps(x, b1, a[r][1]);
    }
  }
  float out[2][4];
  __m256 z = _mm256_setzero_ps();
  _mm_storeu_ps(out[0], hsum4(a[0][0], NR > 1 ? a[1][0] : z, NR > 2 ? a[2][0] : z, NR > 3 ? a[3][0] : z));
  _mm_storeu_ps(out[1], hsum4(a[0][1], NR > 1 ? a[1][1] : z, NR > 2 ? a[2][1] : z, NR > 3 ? a[3][1] : z));
  for (int r = 0; r < NR; r++) {
    s[r * lds] = out[0][r];
    if (k1 != k0) s[r * lds + 1] = out[1][r];
  }
}

#define QK_ROWS_BLOCK(NR)                                                                       \
  do {                                                                                          \
    for (int64_t c = 0; c < cols; c += 2) {                                                     \
      const float *k0 = k + c * ldk, *k1 = c + 1 < cols ? k0 + ldk : k0;                        \
      qk_rows_micro(NR, q + r * ldq, ldq, k0, k1, s + r * lds + c, lds, depth);                 \
    }                                                                                           \
  } while (0)

static void v_qk_rows(const float *q, int64_t ldq, const float *k, int64_t ldk, float *s, int64_t lds,
                      int64_t rows, int64_t cols, int64_t depth) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) QK_ROWS_BLOCK(4);
  switch (rows - r) {
  case 3: QK_ROWS_BLOCK(3); break;
  case 2: QK_ROWS_BLOCK(2); break;
  case 1: QK_ROWS_BLOCK(1); break;
  default: break;
  }
}

static const cpu_vec_ops avx2_table = {
    "avx2", v_load, v_store, v_round, v_act, v_binary, v_compare, v_scale,
    v_sum, v_sum_sq_dev, v_max, v_min, v_exp_shift_sum, v_norm_affine,
    v_acc_sum, v_acc_max, v_acc_min, v_qk_tile, v_pv_tile, v_qk_rows,
};

const cpu_vec_ops *const cpu_vec_avx2 = &avx2_table;

#else

const cpu_vec_ops *const cpu_vec_avx2 = NULL;

#endif
