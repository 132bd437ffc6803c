/* vec_avx512.c — the AVX-512 table of vec.h: the AVX2 table with its
 * compute-bound entries on 16 lanes.
 *
 * Compiled with -mavx512f -mavx512bw -mavx512vl -mavx2 -mfma -mf16c
 * (CMakeLists.txt) and reached only through cpu_vec(), which checks the
 * CPU first (and RLX_NO_AVX512). What runs 16 lanes wide: the activations
 * (exp, gelu, silu, ... : simd512.h's math, the same results bit for bit as
 * the AVX2 table's), softmax's exp_shift_sum, the binary ops, compares,
 * scale, norm_affine, the attention tiles and qk_rows (4 queries by 4 keys
 * a pass). The rest (conversions, row reductions) is the AVX2 table's:
 * bound by memory. Built without the flags, the file defines no table.
 */
#include "vec.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX2__) && \
    defined(__FMA__) && defined(__F16C__)
#include "simd512.h"

#include <pthread.h>
#include <string.h>

/* y[i] = EXPR(v) with v = x[i], 16 lanes at a time; the tail through a
 * lane mask (masked lanes read as 0 and are not stored). */
#define MAP1(x, y, n, EXPR)                                   \
  do {                                                        \
    int64_t i_ = 0;                                           \
    for (; i_ + 16 <= (n); i_ += 16) {                        \
      __m512 v = _mm512_loadu_ps((x) + i_);                   \
      _mm512_storeu_ps((y) + i_, (EXPR));                     \
    }                                                         \
    if (i_ < (n)) {                                           \
      __mmask16 m_ = simd16_tail_mask((n) - i_);              \
      __m512 v = _mm512_maskz_loadu_ps(m_, (x) + i_);         \
      _mm512_mask_storeu_ps((y) + i_, m_, (EXPR));            \
    }                                                         \
  } while (0)

#define LT(a, b) _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ)
#define GT(a, b) _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ)

static void v_act(rlx_act act, float alpha, const float *x, float *y, int64_t n) {
  const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f), va = _mm512_set1_ps(alpha);
  const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
  switch (act) {
  case RLX_ACT_NONE: if (x != y) memmove(y, x, (size_t)n * sizeof *y); break;
  case RLX_ACT_GELU: MAP1(x, y, n, simd16_gelu(v)); break;
  case RLX_ACT_GELU_TANH: MAP1(x, y, n, simd16_gelu_tanh(v)); break;
  case RLX_ACT_SILU: MAP1(x, y, n, simd16_silu(v)); break;
  /* x < 0 is false for NaN and -0: both pass through, as the reference */
  case RLX_ACT_RELU: MAP1(x, y, n, simd16_select(LT(v, zero), zero, v)); break;
  case RLX_ACT_LEAKY_RELU: MAP1(x, y, n, simd16_select(LT(v, zero), _mm512_mul_ps(v, va), v)); break;
  case RLX_ACT_SIGMOID: MAP1(x, y, n, simd16_sigmoid(v)); break;
  case RLX_ACT_TANH: MAP1(x, y, n, simd16_tanh(v)); break;
  case RLX_ACT_EXP: MAP1(x, y, n, simd16_exp(v)); break;
  case RLX_ACT_LOG: MAP1(x, y, n, simd16_log(v)); break;
  case RLX_ACT_SQRT: MAP1(x, y, n, _mm512_sqrt_ps(v)); break;
  case RLX_ACT_RSQRT: MAP1(x, y, n, _mm512_div_ps(one, _mm512_sqrt_ps(v))); break;
  case RLX_ACT_NEG:
    MAP1(x, y, n, _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(v), sign)));
    break;
  case RLX_ACT_ABS: MAP1(x, y, n, simd16_abs(v)); break;
  case RLX_ACT_ERF: MAP1(x, y, n, simd16_erf(v)); break;
  case RLX_ACT_ROUND:
    MAP1(x, y, n, _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    break;
  case RLX_ACT_SIGN: /* keeps 0, -0 and NaN */
    MAP1(x, y, n, simd16_select(GT(v, zero), one, simd16_select(LT(v, zero), _mm512_set1_ps(-1.0f), v)));
    break;
  case RLX_ACT_RECIPROCAL: MAP1(x, y, n, _mm512_div_ps(one, v)); break;
  case RLX_ACT_SQUARE: MAP1(x, y, n, _mm512_mul_ps(v, v)); break;
  default: cpu_vec_avx2->act(act, alpha, x, y, n); break;
  }
}

/* y[i] = EXPR(va, vb) over a[i*sa], b[i*sb] (sa, sb 0 or 1). */
#define MAP2(a, sa, b, sb, y, n, EXPR)                                     \
  do {                                                                     \
    const __m512 a0_ = _mm512_set1_ps((a)[0]), b0_ = _mm512_set1_ps((b)[0]); \
    int64_t i_ = 0;                                                        \
    for (; i_ + 16 <= (n); i_ += 16) {                                     \
      __m512 va = (sa) ? _mm512_loadu_ps((a) + i_) : a0_;                  \
      __m512 vb = (sb) ? _mm512_loadu_ps((b) + i_) : b0_;                  \
      _mm512_storeu_ps((y) + i_, (EXPR));                                  \
    }                                                                      \
    if (i_ < (n)) {                                                        \
      __mmask16 m_ = simd16_tail_mask((n) - i_);                           \
      __m512 va = (sa) ? _mm512_maskz_loadu_ps(m_, (a) + i_) : a0_;        \
      __m512 vb = (sb) ? _mm512_maskz_loadu_ps(m_, (b) + i_) : b0_;        \
      _mm512_mask_storeu_ps((y) + i_, m_, (EXPR));                         \
    }                                                                      \
  } while (0)

/* max/min as the reference: a NaN operand gives a + b (NaN); otherwise
 * a > b ? a : b (so max(0, -0) is -0, as there). */
static inline __m512 bin_max(__m512 a, __m512 b) {
  __m512 r = simd16_select(GT(a, b), a, b);
  return simd16_select(_mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q), _mm512_add_ps(a, b), r);
}

static inline __m512 bin_min(__m512 a, __m512 b) {
  __m512 r = simd16_select(LT(a, b), a, b);
  return simd16_select(_mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q), _mm512_add_ps(a, b), r);
}

static void v_binary(rlx_binop op, const float *a, int sa, const float *b, int sb, float *y, int64_t n) {
  if (n <= 0) return;
  switch (op) {
  case RLX_BIN_ADD: MAP2(a, sa, b, sb, y, n, _mm512_add_ps(va, vb)); break;
  case RLX_BIN_SUB: MAP2(a, sa, b, sb, y, n, _mm512_sub_ps(va, vb)); break;
  case RLX_BIN_MUL: MAP2(a, sa, b, sb, y, n, _mm512_mul_ps(va, vb)); break;
  case RLX_BIN_DIV: MAP2(a, sa, b, sb, y, n, _mm512_div_ps(va, vb)); break;
  case RLX_BIN_MAX: MAP2(a, sa, b, sb, y, n, bin_max(va, vb)); break;
  case RLX_BIN_MIN: MAP2(a, sa, b, sb, y, n, bin_min(va, vb)); break;
  default: cpu_vec_avx2->binary(op, a, sa, b, sb, y, n); break;
  }
}

#define CMP_CASE(OP, PRED) \
  case OP: MAP2(a, sa, b, sb, y, n, _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(va, vb, PRED), one)); break;

static void v_compare(rlx_cmpop op, const float *a, int sa, const float *b, int sb, float *y, int64_t n) {
  if (n <= 0) return;
  const __m512 one = _mm512_set1_ps(1.0f);
  switch (op) {
  SIMD_CMP_PREDICATES(CMP_CASE)
  default: cpu_vec_avx2->compare(op, a, sa, b, sb, y, n); break;
  }
}

static void v_scale(float *y, float s, int64_t n) {
  const __m512 vs = _mm512_set1_ps(s);
  MAP1(y, y, n, _mm512_mul_ps(v, vs));
}

/* The two 8-lane halves of v widened to double. */
static inline __m512d lo_pd(__m512 v) { return _mm512_cvtps_pd(_mm512_castps512_ps256(v)); }
static inline __m512d hi_pd(__m512 v) {
  return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

static double v_exp_shift_sum(const float *x, float c, float *y, int64_t n) {
  const __m512 vc = _mm512_set1_ps(c);
  __m512d s0 = _mm512_setzero_pd(), s1 = s0;
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = simd16_tail_mask(n - i);
    __m512 e = simd16_exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), vc));
    _mm512_mask_storeu_ps(y + i, m, e);
    e = _mm512_maskz_mov_ps(m, e);
    s0 = _mm512_add_pd(s0, lo_pd(e));
    s1 = _mm512_add_pd(s1, hi_pd(e));
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
}

static void v_norm_affine(const float *x, float shift, float scale, const float *gamma,
                          const float *beta, float *y, int64_t n) {
  const __m512 vs = _mm512_set1_ps(shift), vk = _mm512_set1_ps(scale);
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = simd16_tail_mask(n - i);
    __m512 v = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), vs), vk);
    if (gamma) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, gamma + i));
    if (beta) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, beta + i));
    _mm512_mask_storeu_ps(y + i, m, v);
  }
}

/* ---- attention tiles (vec.h's contract), 16 columns a vector. Each output
 * is the same chain of FMAs, in the same order, as the AVX2 table's, so
 * both give the same bits; twice the width pays where the FMA units are
 * 512 bits wide (Intel server cores), and costs nothing where they are two
 * 256-bit halves (Zen 4). Column tails through lane masks: nothing is read
 * or written past cols (qk) or d (pv). */

#define TILE_MR 8 /* rows per micro-tile: 16 accumulators of 32 zmm */

/* c[NR rows, 16*NV columns] (+)= a[NR, depth] b[depth, 16*NV] (row-major,
 * c added to when ACC, else overwritten); m0, m1: the two vectors' lanes.
 * qk is a = q, b = kt; pv is a = p, b = v, c = o, ACC. */
ALWAYS_INLINE void tile_micro16(const int NR, const int NV, const int ACC, __mmask16 m0, __mmask16 m1, const float *a,
                                int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc, int64_t depth) {
  __m512 acc[TILE_MR][2];
#pragma GCC unroll 8
  for (int r = 0; r < NR; r++) {
    acc[r][0] = ACC ? _mm512_maskz_loadu_ps(m0, c + r * ldc) : _mm512_setzero_ps();
    acc[r][1] = NV > 1 && ACC ? _mm512_maskz_loadu_ps(m1, c + r * ldc + 16) : _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < depth; k++) {
    const float *br = b + k * ldb;
    __m512 b0 = _mm512_maskz_loadu_ps(m0, br), b1 = NV > 1 ? _mm512_maskz_loadu_ps(m1, br + 16) : b0;
#pragma GCC unroll 8
    for (int r = 0; r < NR; r++) {
      __m512 x = _mm512_set1_ps(a[r * lda + k]);
      acc[r][0] = _mm512_fmadd_ps(x, b0, acc[r][0]);
      if (NV > 1) acc[r][1] = _mm512_fmadd_ps(x, b1, acc[r][1]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < NR; r++) {
    _mm512_mask_storeu_ps(c + r * ldc, m0, acc[r][0]);
    if (NV > 1) _mm512_mask_storeu_ps(c + r * ldc + 16, m1, acc[r][1]);
  }
}

/* One block of NR rows of a tile: the micro-tile over the columns (n of
 * them) in steps of 32, the last step on one or two masked vectors. */
#define TILE_ROWS(NR, ACC, n, ...)                                                                          \
  for (int64_t c = 0; c < (n); c += 32) {                                                                   \
    __mmask16 m0 = simd16_tail_mask((n) - c), m1 = simd16_tail_mask((n) - c - 16);                          \
    if (m1) tile_micro16(NR, 2, ACC, m0, m1, __VA_ARGS__);                                                  \
    else tile_micro16(NR, 1, ACC, m0, m1, __VA_ARGS__);                                                     \
  }

#define QK_ROWS16(NR) TILE_ROWS(NR, 0, cols, q + r * ldq, ldq, kt + c, ldkt, s + r * lds + c, lds, depth)
#define PV_ROWS16(NR) TILE_ROWS(NR, 1, d, p + r * ldp, ldp, v + c, ldv, o + r * ldo + c, ldo, cols)

/* The row blocks of a tile: TILE_MR at a time, then the remainder. */
#define TILE_ALL_ROWS(ROWS)                                                                                 \
  do {                                                                                                      \
    int64_t r = 0;                                                                                          \
    for (; r + TILE_MR <= rows; r += TILE_MR) ROWS(TILE_MR)                                                 \
    switch (rows - r) {                                                                                     \
    case 7: ROWS(7) break;                                                                                  \
    case 6: ROWS(6) break;                                                                                  \
    case 5: ROWS(5) break;                                                                                  \
    case 4: ROWS(4) break;                                                                                  \
    case 3: ROWS(3) break;                                                                                  \
    case 2: ROWS(2) break;                                                                                  \
    case 1: ROWS(1) break;                                                                                  \
    default: break;                                                                                         \
    }                                                                                                       \
  } while (0)

static void v_qk_tile(const float *q, int64_t ldq, const float *kt, int64_t ldkt, float *s, int64_t lds,
                      int64_t rows, int64_t cols, int64_t depth) {
  TILE_ALL_ROWS(QK_ROWS16);
}

static void v_pv_tile(const float *p, int64_t ldp, const float *v, int64_t ldv, float *o, int64_t ldo,
                      int64_t rows, int64_t cols, int64_t d) {
  TILE_ALL_ROWS(PV_ROWS16);
}

/* Lane sums of a, b, c, d: [sum a, sum b, sum c, sum d]. */
static inline __m128 hsum4_512(__m512 a, __m512 b, __m512 c, __m512 d) {
  const __m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
  const __m512 cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
  const __m512 u = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(ab), _mm512_castps_pd(cd))),
                                 _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(ab), _mm512_castps_pd(cd))));
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(u),
                                 _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(u), 1)));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

/* NR (<= 4) query rows against the nk (<= 4) keys kr[0..3] (repeats past
 * nk, whose sums are not stored). */
static inline __attribute__((always_inline)) void qk_rows_micro(const int NR, const float *q, int64_t ldq,
                                                                const float *const kr[4], int nk, float *s,
                                                                int64_t lds, int64_t depth) {
  __m512 a[4][4];
#pragma GCC unroll 4
  for (int r = 0; r < NR; r++) a[r][0] = a[r][1] = a[r][2] = a[r][3] = _mm512_setzero_ps();
  for (int64_t i = 0; i < depth; i += 16) {
    const __mmask16 m = depth - i >= 16 ? 0xFFFF : simd16_tail_mask(depth - i);
    __m512 b[4];
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) b[c] = _mm512_maskz_loadu_ps(m, kr[c] + i);
#pragma GCC unroll 4
    for (int r = 0; r < NR; r++) {
      const __m512 x = _mm512_maskz_loadu_ps(m, q + r * ldq + i);
#pragma GCC unroll 4
      for (int c = 0; c < 4; c++) a[r][c] = _mm512_fmadd_ps(x, b[c], a[r][c]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < NR; r++) /* a masked store: a loop of nk floats became a call to memcpy */
    _mm_mask_storeu_ps(s + r * lds, (__mmask8)((1u << nk) - 1), hsum4_512(a[r][0], a[r][1], a[r][2], a[r][3]));
}

#define QK_ROWS_BLOCK(NR)                                                                               \
  for (int64_t c = 0; c < cols; c += 4) {                                                               \
    const int nk = cols - c < 4 ? (int)(cols - c) : 4;                                                  \
    const float *const kr[4] = {k + c * ldk, k + (c + (nk > 1)) * ldk, k + (c + (nk > 2) * 2) * ldk,    \
                                k + (c + (nk > 3) * 3) * ldk};                                          \
    qk_rows_micro(NR, q + r * ldq, ldq, kr, nk, s + r * lds + c, lds, depth);                           \
  }

/* 4 query rows against 4 keys a pass, 16 lanes of depth a step. */
static void v_qk_rows(const float *q, int64_t ldq, const float *k, int64_t ldk, float *s, int64_t lds,
                      int64_t rows, int64_t cols, int64_t depth) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) QK_ROWS_BLOCK(4)
  switch (rows - r) {
  case 3: QK_ROWS_BLOCK(3) break;
  case 2: QK_ROWS_BLOCK(2) break;
  case 1: QK_ROWS_BLOCK(1) break;
  default: break;
  }
}

static cpu_vec_ops avx512_table;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_table(void) {
  avx512_table = *cpu_vec_avx2;
  avx512_table.name = "avx512";
  avx512_table.act = v_act;
  avx512_table.binary = v_binary;
  avx512_table.compare = v_compare;
  avx512_table.scale = v_scale;
  avx512_table.exp_shift_sum = v_exp_shift_sum;
  avx512_table.norm_affine = v_norm_affine;
  avx512_table.qk_tile = v_qk_tile;
  avx512_table.pv_tile = v_pv_tile;
  avx512_table.qk_rows = v_qk_rows;
}

const cpu_vec_ops *cpu_vec_avx512(void) {
  if (!cpu_vec_avx2) return NULL;
  pthread_once(&table_once, build_table);
  return &avx512_table;
}

#else

const cpu_vec_ops *cpu_vec_avx512(void) { return NULL; }

#endif
