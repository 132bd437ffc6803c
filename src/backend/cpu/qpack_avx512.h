/* qpack_avx512.h — the AVX-512 pieces shared by the packed-group kernels
 * (qpack_avx512.c) and the AMX tile GEMM (qpack_amx.c): weight registers
 * decoded from a packed block (layout: qpack.h). Include only from files
 * built with -mavx512f -mavx512bw -mavx512vnni. */
#ifndef RLX_CPU_QPACK_AVX512_H
#define RLX_CPU_QPACK_AVX512_H

#include "qpack.h"

#include <immintrin.h>
#include <string.h>

#define AI static inline __attribute__((always_inline))

AI __m512 ph16(const uint8_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }

/* Sub-block j's scales d sc and offsets -dmin mn of the 16 rows of a
 * Q4_K / Q5_K super-block header h (qpack.h: 6-bit sc and mn, low bits
 * in lo[j], high bits in hi). */
AI void k4_scales(const uint8_t *h, int j, __m512 *dw, __m512 *mw) {
  const __m512i lo = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(h + QPACK_K4_LO + 16 * j)));
  const __m512i hi = _mm512_srl_epi32(_mm512_loadu_si512((const void *)(h + QPACK_K4_HI)), _mm_cvtsi32_si128(4 * j));
  const __m512i top = _mm512_set1_epi32(0x30);
  const __m512i sc = _mm512_or_si512(_mm512_and_si512(lo, _mm512_set1_epi32(15)),
                                     _mm512_and_si512(_mm512_slli_epi32(hi, 4), top));
  const __m512i mn = _mm512_or_si512(_mm512_srli_epi32(lo, 4), _mm512_and_si512(_mm512_slli_epi32(hi, 2), top));
  *dw = _mm512_mul_ps(ph16(h), _mm512_cvtepi32_ps(sc));
  *mw = _mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), ph16(h + 32)), _mm512_cvtepi32_ps(mn));
}

AI __m512i bcast4(const int8_t *p) {
  int32_t v;
  memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

AI const qdot_q8_0 *act_at(const qdot_q8_0 *act, int64_t b, int nr, int r) { return act + b * nr + r; }

/* Weight registers t and t + 4 of a block (t < 4): the low and high
 * nibbles of bytes 64 t .. 64 t + 63, or (Q8_0, nibbles 0) bytes 64 t and
 * 64 (t + 4); plane (Q5_0, Q5_1, Q5_K): the masks of bit 4 of the levels
 * at planes (+16 where set). */
AI void weights_pair(const uint8_t *q, int nibbles, const uint8_t *planes, int plane, int t, __m512i *lo,
                     __m512i *hi) {
  if (nibbles) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i v = _mm512_loadu_si512((const void *)(q + 64 * t));
    *lo = _mm512_and_si512(v, m4);
    *hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
  } else {
    *lo = _mm512_loadu_si512((const void *)(q + 64 * t));
    *hi = _mm512_loadu_si512((const void *)(q + 64 * (t + 4)));
  }
  if (plane) {
    const __m512i bit = _mm512_set1_epi8(16);
    uint64_t m0, m1;
    memcpy(&m0, planes + 8 * t, 8);
    memcpy(&m1, planes + 8 * (t + 4), 8);
    *lo = _mm512_mask_add_epi8(*lo, _cvtu64_mask64(m0), *lo, bit);
    *hi = _mm512_mask_add_epi8(*hi, _cvtu64_mask64(m1), *hi, bit);
  }
}

/* Q6_K's weight registers 4 h .. 4 h + 3 (half h of the block at q,
 * qpack.h): three 64-byte vectors of the first three registers' levels
 * in bits 2..7 (bit 5 inverted: the signed byte is 4 (level - 32)), whose
 * bits 0..1 carry the fourth register's levels two bits at a time: 9
 * operations for 4 registers, where planes of masks took 16 masked adds
 * and 16 mask loads for 8. */
AI void q6_k_half(const uint8_t *q, int h, __m512i w[4]) {
  const __m512i top = _mm512_set1_epi8((char)0xFC);
  const __m512i v0 = _mm512_load_si512((const void *)(q + 192 * h));
  const __m512i v1 = _mm512_load_si512((const void *)(q + 192 * h + 64));
  const __m512i v2 = _mm512_load_si512((const void *)(q + 192 * h + 128));
  w[0] = _mm512_and_si512(v0, top);
  w[1] = _mm512_and_si512(v1, top);
  w[2] = _mm512_and_si512(v2, top);
  /* the word shifts move bits across a byte boundary only where the
   * selects (0xE4: c ? a : b) take the other operand */
  const __m512i b01 = _mm512_slli_epi16(_mm512_and_si512(v0, _mm512_set1_epi8(3)), 2);
  const __m512i b23 = _mm512_ternarylogic_epi32(b01, _mm512_slli_epi16(v1, 4), _mm512_set1_epi8(0x0F), 0xE4);
  w[3] = _mm512_ternarylogic_epi32(b23, _mm512_slli_epi16(v2, 6), _mm512_set1_epi8(0x3F), 0xE4);
}

#endif /* RLX_CPU_QPACK_AVX512_H */
