/* qdot_avx2_body.h — the AVX2/FMA/F16C kernels of qdot.h, compiled twice:
 * by qdot_avx2.c (QDOT_VNNI 0) and by qdot_avx512.c (QDOT_VNNI 1, built
 * with AVX-512 VNNI + VL, where the u8 x s8 block sums are one vpdpbusd
 * instead of vpmaddubsw + vpmaddwd). The including file defines QDOT_VNNI
 * and QDOT_TABLE_NAME and gets `qdot_table`, its qdot_ops.
 *
 * One weight block at a time is unpacked into 32-byte vectors of levels
 * (unsigned where the format allows: Q4_0/Q5_0's offsets, Q3_K/Q6_K's
 * offsets and the mins are applied through the activation sums s and
 * bsums instead of per element), then meets each of the nr activation rows:
 * u8 x s8 products summed in s32 (dot_u8s8; the K-quants multiply s16 pair
 * sums by the sub-block scales with vpmaddwd, which cannot saturate: levels
 * <= 63 against |activation| <= 127), and one float FMA per block. Q8_0/Q8_K
 * weights are signed: the sign moves onto the activation (|w| <= 128 x
 * |a| <= 127 fits s16 pairs).
 *
 * The row count nr is a compile-time constant in each instance of a body
 * (ROWS_DISPATCH), so the per-row accumulators live in registers. A
 * K-quant super-block is unpacked once (k_unpacked, 16 vectors) and then
 * read by up to 8 rows; a legacy block stays in one register, its rows
 * come 4 at a time.
 */
#ifndef QDOT_VNNI
#error "define QDOT_VNNI and QDOT_TABLE_NAME before including qdot_avx2_body.h"
#endif

#include "simd.h"

#include <float.h>
#include <string.h>

_Static_assert(QDOT_MAX_ROWS == 8, "the ROWS_DISPATCH macros instantiate nr = 1..8");

/* ---------------------------------------------------------------- helpers */

ALWAYS_INLINE __m256i load32(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
ALWAYS_INLINE __m128i load16(const void *p) { return _mm_loadu_si128((const __m128i *)p); }

ALWAYS_INLINE float f16_at(const uint8_t *p) {
  uint16_t h;
  memcpy(&h, p, sizeof h);
  return _cvtsh_ss(h);
}

/* Two adjacent fp16 values (a block's d and m) in one conversion: *lo = p[0..1], returns p[2..3]. */
ALWAYS_INLINE float f16_pair_hi(const uint8_t *p, float *lo) {
  uint32_t h;
  memcpy(&h, p, sizeof h);
  const __m128 f = _mm_cvtph_ps(_mm_cvtsi32_si128((int)h));
  *lo = _mm_cvtss_f32(f);
  return _mm_cvtss_f32(_mm_movehdup_ps(f));
}

ALWAYS_INLINE float f32_at(const uint8_t *p) {
  float f;
  memcpy(&f, p, sizeof f);
  return f;
}

/* u8 x s8 -> s32 sums of 4 adjacent products: one vpdpbusd with VNNI,
 * else vpmaddubsw (s16 pairs; the levels never saturate them, qdot.h) and
 * vpmaddwd by 1. Exact either way: the two tables give the same sums. */
ALWAYS_INLINE __m256i dot_u8s8(__m256i u, __m256i s) {
#if QDOT_VNNI
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

ALWAYS_INLINE int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

/* 16 bytes of nibbles -> 32 levels: low nibbles are elements 0..15, high
 * nibbles 16..31 (the legacy layout). */
ALWAYS_INLINE __m256i nibbles32(const uint8_t *qs) {
  const __m128i t = load16(qs);
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0x0F));
}

/* 32 bits (little-endian) -> byte j is 0xFF where bit j is set. */
ALWAYS_INLINE __m256i bits32(const uint8_t *p) {
  uint32_t x;
  memcpy(&x, p, sizeof x);
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32((int)x), _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                                   0x0101010101010101, 0x0000000000000000));
  const __m256i others = _mm256_or_si256(spread, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
  return _mm256_cmpeq_epi8(others, _mm256_set1_epi64x(-1));
}

/* Bit k (0..7) of every byte of v moved to bit `to`, other bits 0. */
ALWAYS_INLINE __m256i bit_to(__m256i v, int k, int to) {
  return _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(v, k), to),
                          _mm256_set1_epi8((char)(1 << to)));
}

/* Shuffles that spread s16 scales over the pair sums of 32 levels.
 * k4[i]: scale i (of 8) on all 16 lanes (sub-blocks of 32: Q4_K, Q5_K).
 * q3k[i]: scale 2i on the low 128-bit lane, 2i + 1 on the high one, of a
 * vector holding the same 8 scales in both lanes (sub-blocks of 16:
 * Q2_K, Q3_K). b16[i]: bytes 2i (x8) then 2i + 1 (x8), for s8 scales
 * widened after the shuffle (Q6_K). */
static const uint8_t shuf_k4[8][32] __attribute__((aligned(32))) = {
#define K4(i) {2 * i, 2 * i + 1, 2 * i, 2 * i + 1, 2 * i, 2 * i + 1, 2 * i, 2 * i + 1, \
               2 * i, 2 * i + 1, 2 * i, 2 * i + 1, 2 * i, 2 * i + 1, 2 * i, 2 * i + 1, \
               2 * i, 2 * i + 1, 2 * i, 2 * i + 1, 2 * i, 2 * i + 1, 2 * i, 2 * i + 1, \
               2 * i, 2 * i + 1, 2 * i, 2 * i + 1, 2 * i, 2 * i + 1, 2 * i, 2 * i + 1}
    K4(0), K4(1), K4(2), K4(3), K4(4), K4(5), K4(6), K4(7)
#undef K4
};

static const uint8_t shuf_q3k[4][32] __attribute__((aligned(32))) = {
#define Q3(i) {4 * i, 4 * i + 1, 4 * i, 4 * i + 1, 4 * i, 4 * i + 1, 4 * i, 4 * i + 1,         \
               4 * i, 4 * i + 1, 4 * i, 4 * i + 1, 4 * i, 4 * i + 1, 4 * i, 4 * i + 1,         \
               4 * i + 2, 4 * i + 3, 4 * i + 2, 4 * i + 3, 4 * i + 2, 4 * i + 3, 4 * i + 2, \
               4 * i + 3, 4 * i + 2, 4 * i + 3, 4 * i + 2, 4 * i + 3, 4 * i + 2, 4 * i + 3, \
               4 * i + 2, 4 * i + 3}
    Q3(0), Q3(1), Q3(2), Q3(3)
#undef Q3
};

static const uint8_t shuf_b16[8][16] __attribute__((aligned(16))) = {
#define B16(i) {2 * i, 2 * i, 2 * i, 2 * i, 2 * i, 2 * i, 2 * i, 2 * i, \
                2 * i + 1, 2 * i + 1, 2 * i + 1, 2 * i + 1, 2 * i + 1, 2 * i + 1, 2 * i + 1, 2 * i + 1}
    B16(0), B16(1), B16(2), B16(3), B16(4), B16(5), B16(6), B16(7)
#undef B16
};

ALWAYS_INLINE __m256i shuffle(__m256i v, const uint8_t *table) {
  return _mm256_shuffle_epi8(v, _mm256_load_si256((const __m256i *)table));
}

/* Before every loop over the nr rows of a pass: gcc -O2 keeps such a loop
 * rolled when its body is large, and then the per-row accumulators live on
 * the stack (a store-forwarding round trip per block and row). */
#define ROWS_UNROLLED _Pragma("GCC unroll 8")

/* Activation row r's block b. */
#define ACT_Q8_0(act, as, r, b) ((const qdot_q8_0 *)((const uint8_t *)(act) + (size_t)(r) * (as)) + (b))
#define ACT_Q8_K(act, as, r, b) ((const qdot_q8_k *)((const uint8_t *)(act) + (size_t)(r) * (as)) + (b))

/* K-quants: one instance per row count, the block unpacked once for all. */
#define ROWS_DISPATCH(fn, body)                                                              \
  static void fn(int64_t nb, const void *w, const void *act, size_t as, int nr, float *out,  \
                 int64_t os) {                                                               \
    const uint8_t *wu = w;                                                                   \
    switch (nr) {                                                                            \
    case 1: body(nb, wu, act, as, 1, out, os); break;                                        \
    case 2: body(nb, wu, act, as, 2, out, os); break;                                        \
    case 3: body(nb, wu, act, as, 3, out, os); break;                                        \
    case 4: body(nb, wu, act, as, 4, out, os); break;                                        \
    case 5: body(nb, wu, act, as, 5, out, os); break;                                        \
    case 6: body(nb, wu, act, as, 6, out, os); break;                                        \
    case 7: body(nb, wu, act, as, 7, out, os); break;                                        \
    default: body(nb, wu, act, as, 8, out, os); break;                                       \
    }                                                                                        \
  }

/* Legacy types: their per-row state must stay in registers, which holds
 * for 4 rows; 5..8 rows are two passes (4 + the rest). */
#define ROWS_DISPATCH_4(fn, body)                                                            \
  static void fn##_upto4(int64_t nb, const uint8_t *w, const void *act, size_t as, int nr,   \
                         float *out, int64_t os) {                                           \
    switch (nr) {                                                                            \
    case 1: body(nb, w, act, as, 1, out, os); break;                                         \
    case 2: body(nb, w, act, as, 2, out, os); break;                                         \
    case 3: body(nb, w, act, as, 3, out, os); break;                                         \
    default: body(nb, w, act, as, 4, out, os); break;                                        \
    }                                                                                        \
  }                                                                                          \
  static void fn(int64_t nb, const void *w, const void *act, size_t as, int nr, float *out,  \
                 int64_t os) {                                                               \
    fn##_upto4(nb, w, act, as, nr < 4 ? nr : 4, out, os);                                    \
    if (nr > 4) fn##_upto4(nb, w, (const uint8_t *)act + 4 * as, as, nr - 4, out + 4 * os, os); \
  }

/* ---------------------------------------------------------------- activations */

/* roundf of integer-range floats: truncate, then step away from zero when
 * the dropped fraction is >= 0.5 (t - trunc(t) is exact). */
ALWAYS_INLINE __m256 round_half_away(__m256 t) {
  const __m256 tr = _mm256_round_ps(t, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 frac = simd_abs(_mm256_sub_ps(t, tr));
  const __m256 step = _mm256_or_ps(_mm256_and_ps(t, _mm256_set1_ps(-0.0f)), _mm256_set1_ps(1.0f));
  return _mm256_add_ps(tr, _mm256_and_ps(_mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ), step));
}

/* Levels as s32, clamped to -127..127, NaN -> 0 (as level_round in
 * qdot_scalar.c). half_even: nearest-even (ggml's nearest_int), else roundf. */
ALWAYS_INLINE __m256i levels8(__m256 t, int half_even) {
  const __m256 ordered = _mm256_cmp_ps(t, t, _CMP_ORD_Q);
  t = _mm256_and_ps(t, ordered);
  t = _mm256_min_ps(_mm256_max_ps(t, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
  if (!half_even) t = round_half_away(t);
  return _mm256_cvtps_epi32(t); /* nearest-even, the default MXCSR mode */
}

/* Four s32 vectors (32 levels in order) -> 32 s8. */
ALWAYS_INLINE __m256i pack32(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
  return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* max |x| over 8n floats, and whether any is NaN or infinite. */
ALWAYS_INLINE float abs_max(const float *x, int n, int *finite) {
  __m256 m = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
  for (int i = 0; i < n; i++) {
    const __m256 a = simd_abs(_mm256_loadu_ps(x + 8 * i));
    bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, _mm256_set1_ps(FLT_MAX), _CMP_NLE_UQ));
    m = _mm256_max_ps(m, a);
  }
  *finite = _mm256_movemask_ps(bad) == 0;
  return simd_hmax(m);
}

static void quantize_q8_0(const float *x, qdot_q8_0 *y, int64_t nb) {
  for (int64_t b = 0; b < nb; b++, x += QDOT_QK, y++) {
    int finite;
    const float amax = abs_max(x, 4, &finite);
    if (!finite) {
      y->d = y->s = NAN;
      memset(y->qs, 0, sizeof y->qs);
      continue;
    }
    const float d = amax / 127;
    const __m256 id = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    __m256i q[4];
    for (int i = 0; i < 4; i++) q[i] = levels8(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * i), id), 0);
    _mm256_storeu_si256((__m256i *)y->qs, pack32(q[0], q[1], q[2], q[3]));
    const int sum = hsum_i32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
    y->d = d;
    y->s = d * (float)sum;
  }
}

static void quantize_q8_k(const float *x, qdot_q8_k *y, int64_t nb) {
  for (int64_t b = 0; b < nb; b++, x += QDOT_QK_K, y++) {
    int finite;
    const float amax = abs_max(x, QDOT_QK_K / 8, &finite);
    memset(y, 0, sizeof *y);
    if (!finite) y->d = NAN;
    if (!finite || amax == 0.0f) continue;
    /* ggml takes the sign of the first element of largest magnitude */
    float max = 0.0f;
    for (int i = 0; i < QDOT_QK_K / 8; i++) {
      const __m256 a = simd_abs(_mm256_loadu_ps(x + 8 * i));
      const int hit = _mm256_movemask_ps(_mm256_cmp_ps(a, _mm256_set1_ps(amax), _CMP_EQ_OQ));
      if (hit) {
        max = x[8 * i + __builtin_ctz((unsigned)hit)];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m256 vs = _mm256_set1_ps(iscale);
    for (int g = 0; g < QDOT_QK_K / 32; g++) {
      __m256i q[4];
      for (int i = 0; i < 4; i++)
        q[i] = levels8(_mm256_mul_ps(vs, _mm256_loadu_ps(x + 32 * g + 8 * i)), 1);
      _mm256_storeu_si256((__m256i *)(y->qs + 32 * g), pack32(q[0], q[1], q[2], q[3]));
      y->bsums[2 * g] = (int16_t)hsum_i32(_mm256_add_epi32(q[0], q[1]));
      y->bsums[2 * g + 1] = (int16_t)hsum_i32(_mm256_add_epi32(q[2], q[3]));
    }
    y->d = 1 / iscale;
  }
}

/* ---------------------------------------------------------------- legacy weights */

/* Q4_0, Q4_1, Q5_0, Q5_1: unsigned levels u, w = d * u + c per block with
 * c = -8 d, m, -16 d, m; the c term of a block is c * (sum of its x) =
 * c * s. Q8_0: signed levels, no c. t is a constant after inlining, so
 * each instance keeps only its own branch. */
ALWAYS_INLINE void legacy_block(const rlx_dtype t, const int bytes, const uint8_t *w, int64_t b,
                                const void *act, size_t as, const int nr, __m256 *acc, float *corr) {
  const uint8_t *wb = w + b * bytes;
  float d = t == RLX_Q4_1 || t == RLX_Q5_1 ? 0.0f : f16_at(wb), c = 0.0f;
  __m256i q, sign = _mm256_setzero_si256();
  if (t == RLX_Q4_0) {
    q = nibbles32(wb + 2);
    c = -8.0f * d;
  } else if (t == RLX_Q4_1) {
    q = nibbles32(wb + 4);
    c = f16_pair_hi(wb, &d);
  } else if (t == RLX_Q5_0) {
    q = _mm256_or_si256(nibbles32(wb + 6), _mm256_and_si256(bits32(wb + 2), _mm256_set1_epi8(0x10)));
    c = -16.0f * d;
  } else if (t == RLX_Q5_1) {
    q = _mm256_or_si256(nibbles32(wb + 8), _mm256_and_si256(bits32(wb + 4), _mm256_set1_epi8(0x10)));
    c = f16_pair_hi(wb, &d);
  } else {
    sign = load32(wb + 2);
    q = _mm256_sign_epi8(sign, sign);
  }
  ROWS_UNROLLED
  for (int r = 0; r < nr; r++) {
    const qdot_q8_0 *y = ACT_Q8_0(act, as, r, b);
    __m256i yq = load32(y->qs);
    if (t == RLX_Q8_0) yq = _mm256_sign_epi8(yq, sign);
    const __m256 p = _mm256_cvtepi32_ps(dot_u8s8(q, yq));
    acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * y->d), p, acc[r]);
    if (t != RLX_Q8_0) corr[r] += c * y->s;
  }
}

/* One row (decode) alternates two accumulator sets over the blocks, so
 * consecutive blocks do not wait on each other's FMA. */
ALWAYS_INLINE void legacy_body(const rlx_dtype t, int64_t nb, const uint8_t *w, const void *act,
                               size_t as, const int nr, float *out, int64_t os) {
  const int bytes = t == RLX_Q4_0 ? 18 : t == RLX_Q4_1 ? 20 : t == RLX_Q5_0 ? 22
                  : t == RLX_Q5_1 ? 24 : 34;
  const int two = nr == 1;
  __m256 acc[2][QDOT_MAX_ROWS];
  float corr[2][QDOT_MAX_ROWS];
  for (int u = 0; u < 2; u++)
    for (int r = 0; r < nr; r++) {
      acc[u][r] = _mm256_setzero_ps();
      corr[u][r] = 0.0f;
    }
  int64_t b = 0;
  if (two)
    for (; b + 1 < nb; b += 2) {
      legacy_block(t, bytes, w, b, act, as, nr, acc[0], corr[0]);
      legacy_block(t, bytes, w, b + 1, act, as, nr, acc[1], corr[1]);
    }
  for (; b < nb; b++) legacy_block(t, bytes, w, b, act, as, nr, acc[0], corr[0]);
  for (int r = 0; r < nr; r++)
    out[r * os] = simd_hsum(_mm256_add_ps(acc[0][r], acc[1][r])) + (corr[0][r] + corr[1][r]);
}

#define LEGACY_BODY(name, T)                                                                   \
  ALWAYS_INLINE void name##_body(int64_t nb, const uint8_t *w, const void *act, size_t as,     \
                                 const int nr, float *out, int64_t os) {                       \
    legacy_body(T, nb, w, act, as, nr, out, os);                                               \
  }                                                                                            \
  ROWS_DISPATCH_4(dot_##name, name##_body)
LEGACY_BODY(q4_0, RLX_Q4_0)
LEGACY_BODY(q4_1, RLX_Q4_1)
LEGACY_BODY(q5_0, RLX_Q5_0)
LEGACY_BODY(q5_1, RLX_Q5_1)
LEGACY_BODY(q8_0, RLX_Q8_0)

/* ---------------------------------------------------------------- K-quant weights */

/* A K-quant super-block unpacked once per weight-row pass, then met by
 * each activation row: 8 groups of 32 levels q[g] with their s16 scales
 * s[g] (one per pair of levels, vpmaddwd's operand), plus the terms that
 * go through the activation's bsums (16 sums of 16):
 *   w = d * s * q - dmin * mn - d * off * o   per element, with
 *   mins m16 (Q2_K, Q4_K, Q5_K; one per bsum) and offsets o16 = the
 *   scales times off (Q3_K: 4, Q6_K: 32). Q8_K: q = |levels|, s = levels
 *   (the sign moves onto the activations), scales 1. */
typedef struct {
  __m256i q[8], s[8];
  __m256i m16, o16;
  float d, dmin;
} k_unpacked;

/* Q2_K: w = d * sc * u - dmin * mn over 16 sub-blocks of 16, u in 0..3. */
ALWAYS_INLINE void unpack_q2_k(const uint8_t *wb, k_unpacked *k) {
  const __m256i m3 = _mm256_set1_epi8(3);
  k->d = f16_at(wb + 80);
  k->dmin = f16_at(wb + 82);
  const __m128i packed = load16(wb);
  const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(packed, _mm_set1_epi8(0xF)));
  k->m16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(0xF)));
  /* scales 0..7 (8..15) in both 128-bit lanes */
  const __m256i sc[2] = {_mm256_permute2x128_si256(sc16, sc16, 0x00),
                         _mm256_permute2x128_si256(sc16, sc16, 0x11)};
  for (int c = 0; c < 2; c++) {
    const __m256i bits = load32(wb + 16 + 32 * c);
    for (int j = 0; j < 4; j++) {
      k->q[4 * c + j] = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * j), m3);
      k->s[4 * c + j] = shuffle(sc[c], shuf_q3k[j]);
    }
  }
}

/* Q3_K: w = d * (sc - 32) * (u - 4), u = low 2 bits | high bit << 2, over
 * 16 sub-blocks of 16. */
ALWAYS_INLINE void unpack_q3_k(const uint8_t *wb, k_unpacked *k) {
  const __m256i m3 = _mm256_set1_epi8(3);
  const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
  k->d = f16_at(wb + 108);
  uint32_t a[3];
  memcpy(a, wb + 96, sizeof a);
  /* the 16 6-bit scales (ggml's unpacking), minus 32 */
  const __m128i sc8 = _mm_sub_epi8(
      _mm_set_epi32((int)(((a[1] >> 4) & kmask2) | (((a[2] >> 6) & kmask1) << 4)),
                    (int)(((a[0] >> 4) & kmask2) | (((a[2] >> 4) & kmask1) << 4)),
                    (int)((a[1] & kmask2) | (((a[2] >> 2) & kmask1) << 4)),
                    (int)((a[0] & kmask2) | (((a[2] >> 0) & kmask1) << 4))),
      _mm_set1_epi8(32));
  const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
  k->o16 = sc16;
  const __m256i sc[2] = {_mm256_permute2x128_si256(sc16, sc16, 0x00),
                         _mm256_permute2x128_si256(sc16, sc16, 0x11)};
  const __m256i hbits = load32(wb);
  for (int c = 0; c < 2; c++) {
    const __m256i bits = load32(wb + 32 + 32 * c);
    for (int j = 0; j < 4; j++) {
      k->q[4 * c + j] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(bits, 2 * j), m3),
                                        bit_to(hbits, 4 * c + j, 2));
      k->s[4 * c + j] = shuffle(sc[c], shuf_q3k[j]);
    }
  }
}

/* Q4_K (hi = 0) and Q5_K (hi = 1): w = d * sc * u - dmin * mn over 8
 * sub-blocks of 32; u a nibble, plus a bit of qh as 16 for Q5_K. The 8 + 8
 * 6-bit scales and mins come from 12 bytes (ggml's get_scale_min_k4
 * unpacking). */
ALWAYS_INLINE void unpack_k45(const int hi, const uint8_t *wb, k_unpacked *k) {
  const __m256i m4 = _mm256_set1_epi8(0xF);
  const uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
  k->d = f16_at(wb);
  k->dmin = f16_at(wb + 2);
  uint32_t u[4];
  memcpy(u, wb + 4, 12);
  u[3] = ((u[2] >> 4) & kmask2) | (((u[1] >> 6) & kmask3) << 4);
  const uint32_t mins_lo = u[1] & kmask1;
  u[1] = (u[2] & kmask2) | (((u[0] >> 6) & kmask3) << 4);
  u[2] = mins_lo;
  u[0] &= kmask1;
  const __m128i sm8 = _mm_set_epi32((int)u[3], (int)u[2], (int)u[1], (int)u[0]);
  const __m256i sc16 = _mm256_cvtepu8_epi16(sm8);
  const __m256i scales = _mm256_permute2x128_si256(sc16, sc16, 0x00);
  /* each min twice: one per bsum of its sub-block of 32 */
  k->m16 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm8, sm8));
  const __m256i hbits = hi ? load32(wb + 16) : _mm256_setzero_si256();
  const uint8_t *qs = wb + (hi ? 48 : 16);
  for (int j = 0; j < 4; j++) {
    const __m256i bits = load32(qs + 32 * j);
    __m256i lo = _mm256_and_si256(bits, m4), up = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
    if (hi) {
      lo = _mm256_or_si256(lo, bit_to(hbits, 2 * j, 4));
      up = _mm256_or_si256(up, bit_to(hbits, 2 * j + 1, 4));
    }
    k->q[2 * j] = lo;
    k->q[2 * j + 1] = up;
    k->s[2 * j] = shuffle(scales, shuf_k4[2 * j]);
    k->s[2 * j + 1] = shuffle(scales, shuf_k4[2 * j + 1]);
  }
}

/* Q6_K: w = d * sc * (u - 32), u 6 bits (a nibble of ql, 2 bits of qh),
 * s8 scales over 16 sub-blocks of 16. */
ALWAYS_INLINE void unpack_q6_k(const uint8_t *wb, k_unpacked *k) {
  const __m256i m4 = _mm256_set1_epi8(0xF), m30 = _mm256_set1_epi8(0x30);
  k->d = f16_at(wb + 208);
  const __m128i sc8 = load16(wb + 192);
  k->o16 = _mm256_cvtepi8_epi16(sc8);
  for (int c = 0; c < 2; c++) {
    const __m256i qh = load32(wb + 128 + 32 * c);
    const __m256i l0 = load32(wb + 64 * c), l1 = load32(wb + 64 * c + 32);
    __m256i *q = k->q + 4 * c;
    q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
    q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(qh, m30));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                           _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
    for (int j = 0; j < 4; j++)
      k->s[4 * c + j] = _mm256_cvtepi8_epi16(
          _mm_shuffle_epi8(sc8, _mm_load_si128((const __m128i *)shuf_b16[4 * c + j])));
  }
}

/* Q8_K: w = d * q, q signed, one scale per 256. */
ALWAYS_INLINE void unpack_q8_k(const uint8_t *wb, k_unpacked *k) {
  k->d = f32_at(wb);
  for (int g = 0; g < 8; g++) {
    const __m256i q = load32(wb + 4 + 32 * g);
    k->q[g] = _mm256_sign_epi8(q, q);
    k->s[g] = q;
  }
}

/* Bytes ahead of a K-quant super-block in use that its dots ask the L2
 * for, and with one activation row (decode) the L1: these types stay in
 * the mapped file (no packed copy on AVX2), whose 4 KiB pages end the
 * hardware prefetcher's streams, and a decode's loads waited on DRAM
 * (BENCHMARKS.md). */
#define K_AHEAD 4096
#define K_L1 1024

/* One pass over a K-quant weight row for nr activation rows. t is a
 * constant after inlining. */
ALWAYS_INLINE void k_body(const rlx_dtype t, int64_t nb, const uint8_t *w, const void *act,
                          size_t as, const int nr, float *out, int64_t os) {
  const int bytes = t == RLX_Q2_K ? 84 : t == RLX_Q3_K ? 110 : t == RLX_Q4_K ? 144
                  : t == RLX_Q5_K ? 176 : t == RLX_Q6_K ? 210 : 292;
  const int mins = t == RLX_Q2_K || t == RLX_Q4_K || t == RLX_Q5_K;
  const int off_shift = t == RLX_Q3_K ? 2 : t == RLX_Q6_K ? 5 : 0; /* offset 4 or 32 */
  __m256 acc[QDOT_MAX_ROWS];
  for (int r = 0; r < nr; r++) acc[r] = _mm256_setzero_ps();
  k_unpacked k;
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *wb = w + b * bytes;
    for (int at = 0; at < bytes; at += 64) { /* every line of the block (K_AHEAD, K_L1) */
      _mm_prefetch((const char *)wb + K_AHEAD + at, _MM_HINT_T1);
      if (nr == 1) _mm_prefetch((const char *)wb + K_L1 + at, _MM_HINT_T0);
    }
    if (t == RLX_Q2_K) unpack_q2_k(wb, &k);
    else if (t == RLX_Q3_K) unpack_q3_k(wb, &k);
    else if (t == RLX_Q4_K) unpack_k45(0, wb, &k);
    else if (t == RLX_Q5_K) unpack_k45(1, wb, &k);
    else if (t == RLX_Q6_K) unpack_q6_k(wb, &k);
    else unpack_q8_k(wb, &k);
    ROWS_UNROLLED
    for (int r = 0; r < nr; r++) {
      const qdot_q8_k *y = ACT_Q8_K(act, as, r, b);
      __m256i sumi = _mm256_setzero_si256();
      if (off_shift)
        sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(_mm256_madd_epi16(k.o16, load32(y->bsums)),
                                                        off_shift));
      for (int g = 0; g < 8; g++) {
        const __m256i yq = load32(y->qs + 32 * g);
        if (t == RLX_Q8_K)
          sumi = _mm256_add_epi32(sumi, dot_u8s8(k.q[g], _mm256_sign_epi8(yq, k.s[g])));
        else
          sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(k.s[g], _mm256_maddubs_epi16(k.q[g], yq)));
      }
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(k.d * y->d), _mm256_cvtepi32_ps(sumi), acc[r]);
      if (mins)
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(-k.dmin * y->d),
                                 _mm256_cvtepi32_ps(_mm256_madd_epi16(k.m16, load32(y->bsums))), acc[r]);
    }
  }
  for (int r = 0; r < nr; r++) out[r * os] = simd_hsum(acc[r]);
}

#define K_BODY(name, T)                                                                        \
  ALWAYS_INLINE void name##_body(int64_t nb, const uint8_t *w, const void *act, size_t as,     \
                                 const int nr, float *out, int64_t os) {                       \
    k_body(T, nb, w, act, as, nr, out, os);                                                    \
  }                                                                                            \
  ROWS_DISPATCH(dot_##name, name##_body)
K_BODY(q2_k, RLX_Q2_K)
K_BODY(q3_k, RLX_Q3_K)
K_BODY(q4_k, RLX_Q4_K)
K_BODY(q5_k, RLX_Q5_K)
K_BODY(q6_k, RLX_Q6_K)
K_BODY(q8_k, RLX_Q8_K)

/* ---------------------------------------------------------------- F16 / BF16 */

/* The vectors of the 16-bit weight rows: zmm where the table is built
 * for AVX-512 (16 weights a vector, half the instructions per byte of a
 * decode's weight stream), else ymm. */
#if defined(__AVX512F__)
#define WV __m512
#define WL 16
#define WV_ZERO _mm512_setzero_ps
#define WV_FMA _mm512_fmadd_ps
#define WV_LOADX _mm512_loadu_ps
#define WV_ADD _mm512_add_ps
#define WV_HSUM _mm512_reduce_add_ps
ALWAYS_INLINE __m512 wide_load_f16(const uint16_t *p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p));
}
ALWAYS_INLINE __m512 wide_load_bf16(const uint16_t *p) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)p)), 16));
}
#else
#define WV __m256
#define WL 8
#define WV_ZERO _mm256_setzero_ps
#define WV_FMA _mm256_fmadd_ps
#define WV_LOADX _mm256_loadu_ps
#define WV_ADD _mm256_add_ps
#define WV_HSUM simd_hsum
#define wide_load_f16 simd_load_f16
#define wide_load_bf16 simd_load_bf16
#endif

/* Bytes ahead of the weights in use that the 16-bit kernels ask the L2
 * for (leaving L1 to the lines in use): the rows stream from the mapped
 * file, and the hardware prefetcher stops at each 4 KiB page's end; a
 * page and a half ahead keeps more lines in flight than one, and the
 * K = 8192 rows of a 1B model stream better at it than at two
 * (BENCHMARKS.md). */
#define WIDE_AHEAD 6144
/* A BF16 decode row (nr = 1) also asks the L1 for its weights this far
 * ahead: its loads waited on the L2. Two lines: 4 to 16 ran slower on
 * Zen 5 (F16's, widened by vcvtph2ps, measured no faster with it;
 * BENCHMARKS.md). */
#define WIDE_L1 128

/* A 16-bit weight row of nb elements against nr F32 rows: WL weights
 * widened per vector (load: wide_load_f16 / wide_load_bf16) meet every row
 * with an FMA (l1: with WIDE_L1's prefetch). U vectors per step, each
 * with its own accumulators, so that few rows still have U independent
 * FMA chains (decode, nr = 1: 4 chains keep up with a weight stream from
 * memory); U * nr <= 8 accumulators. */
#define WIDE_BODY(name, load, widen1, l1)                                                          \
  ALWAYS_INLINE void name##_body(int64_t nb, const uint8_t *w, const void *act, size_t as,       \
                                 const int nr, float *out, int64_t os) {                         \
    enum { U_MAX = 4 };                                                                          \
    const int U = nr == 1 ? 4 : nr <= 4 ? 2 : 1;                                                 \
    const uint16_t *wh = (const uint16_t *)(const void *)w;                                       \
    WV acc[U_MAX][QDOT_MAX_ROWS];                                                                \
    for (int u = 0; u < U; u++)                                                                  \
      ROWS_UNROLLED for (int r = 0; r < nr; r++) acc[u][r] = WV_ZERO();                          \
    int64_t k = 0;                                                                               \
    for (; k + WL * U <= nb; k += WL * U)                                                        \
      for (int u = 0; u < U; u++) {                                                              \
        if (2 * WL * u % 64 == 0) { /* a line a step */                                        \
          _mm_prefetch((const char *)(wh + k + WL * u) + WIDE_AHEAD, _MM_HINT_T1);               \
          if (l1 && nr == 1) _mm_prefetch((const char *)(wh + k + WL * u) + WIDE_L1, _MM_HINT_T0); \
        }                                                                                        \
        const WV wv = load(wh + k + WL * u);                                                     \
        ROWS_UNROLLED for (int r = 0; r < nr; r++) {                                             \
          const float *x = (const float *)(const void *)((const uint8_t *)act + (size_t)r * as); \
          acc[u][r] = WV_FMA(wv, WV_LOADX(x + k + WL * u), acc[u][r]);                           \
        }                                                                                        \
      }                                                                                          \
    for (; k + WL <= nb; k += WL) {                                                              \
      const WV wv = load(wh + k);                                                                \
      ROWS_UNROLLED for (int r = 0; r < nr; r++) {                                               \
        const float *x = (const float *)(const void *)((const uint8_t *)act + (size_t)r * as);   \
        acc[0][r] = WV_FMA(wv, WV_LOADX(x + k), acc[0][r]);                                      \
      }                                                                                          \
    }                                                                                            \
    ROWS_UNROLLED for (int r = 0; r < nr; r++) {                                                 \
      const float *x = (const float *)(const void *)((const uint8_t *)act + (size_t)r * as);     \
      for (int u = 1; u < U; u++) acc[0][r] = WV_ADD(acc[0][r], acc[u][r]);                      \
      float s = WV_HSUM(acc[0][r]);                                                              \
      for (int64_t t = k; t < nb; t++) {                                                         \
        uint16_t h;                                                                              \
        memcpy(&h, w + 2 * t, sizeof h);                                                         \
        s += widen1(h) * x[t];                                                                   \
      }                                                                                          \
      out[r * os] = s;                                                                           \
    }                                                                                            \
  }                                                                                              \
  ROWS_DISPATCH(dot_##name, name##_body)

ALWAYS_INLINE float bf16_widen1(uint16_t h) {
  const uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

WIDE_BODY(f16, wide_load_f16, _cvtsh_ss, 0)
WIDE_BODY(bf16, wide_load_bf16, bf16_widen1, 1)

static const qdot_ops qdot_table = {
  .name = QDOT_TABLE_NAME,
  .quantize_q8_0 = quantize_q8_0,
  .quantize_q8_k = quantize_q8_k,
  .dot = {[RLX_Q4_0] = dot_q4_0, [RLX_Q4_1] = dot_q4_1, [RLX_Q5_0] = dot_q5_0,
          [RLX_Q5_1] = dot_q5_1, [RLX_Q8_0] = dot_q8_0, [RLX_Q2_K] = dot_q2_k,
          [RLX_Q3_K] = dot_q3_k, [RLX_Q4_K] = dot_q4_k, [RLX_Q5_K] = dot_q5_k,
          [RLX_Q6_K] = dot_q6_k, [RLX_Q8_K] = dot_q8_k, [RLX_F16] = dot_f16,
          [RLX_BF16] = dot_bf16},
};

