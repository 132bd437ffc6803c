/* qpack_pack_avx512.c — Q6_K super-blocks repacked into a group (layout:
 * qpack.h) with AVX-512: the scalar packer (qpack.c) places each lane's
 * levels a byte at a time, 16 lanes x 8 blocks x 32 levels per
 * super-block, the slowest part of a model's first prefill for Q6_K
 * files; here a block's 8 level registers are assembled
 * for all 16 lanes (a gather of one 4-level word per lane) and each of its
 * 6 vectors is one select of two shifted registers. Built with the AVX-512 flags;
 * called only where qpack_pack_avx512_available() says so.
 */
#include "qpack.h"

#include "cpu_features.h"

#include <string.h>

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>

int qpack_pack_avx512_available(void) { return cpu_get_features()->avx512; }

/* The 256 levels of one lane's Q6_K super-block {ql[128], qh[64],
 * scales[16], d} in ggml's order (dequantize_row_q6_K), 32 a block, each
 * with bit 5 inverted (qpack.h), into y; returns corr = 128 sum over the
 * 16-element halves h of sc_h (sum of h's level - 32), times 4 (qpack.c's
 * pack_q6_k). */
static int32_t lane_levels(const uint8_t *blk, uint8_t *y) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3), flip = _mm256_set1_epi8(0x20);
  int32_t corr = 0;
  for (int n = 0; n < 2; n++) {
    const __m256i a = _mm256_loadu_si256((const __m256i *)(blk + 64 * n));
    const __m256i c = _mm256_loadu_si256((const __m256i *)(blk + 64 * n + 32));
    const __m256i h = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * n));
    __m256i v[4];
    v[0] = _mm256_or_si256(_mm256_and_si256(a, m4), _mm256_slli_epi16(_mm256_and_si256(h, m2), 4));
    v[1] = _mm256_or_si256(_mm256_and_si256(c, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m2), 4));
    v[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m2), 4));
    v[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c, 4), m4),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m2), 4));
    for (int q = 0; q < 4; q++) {
      /* the sums of each 8 levels: halves 2 (4n + q) and 2 (4n + q) + 1 */
      const __m256i s = _mm256_sad_epu8(v[q], _mm256_setzero_si256());
      const int32_t s0 = (int32_t)(_mm256_extract_epi64(s, 0) + _mm256_extract_epi64(s, 1)) - 16 * 32;
      const int32_t s1 = (int32_t)(_mm256_extract_epi64(s, 2) + _mm256_extract_epi64(s, 3)) - 16 * 32;
      const int hh = 2 * (4 * n + q);
      corr += 4 * 128 * ((int8_t)blk[192 + hh] * s0 + (int8_t)blk[192 + hh + 1] * s1);
      _mm256_storeu_si256((__m256i *)(y + 128 * n + 32 * q), _mm256_xor_si256(v[q], flip));
    }
  }
  return corr;
}

void qpack_pack_q6_k_avx512(const uint8_t *src, size_t row_bytes, int lanes, uint8_t *head, uint8_t *body) {
  _Alignas(64) uint8_t lv[QPACK_ROWS][256];
  memset(head, 0, QPACK_Q6_HEAD); /* padding lanes: zero d and corr */
  for (int l = 0; l < lanes; l++) {
    const uint8_t *blk = src + (size_t)l * row_bytes;
    memcpy(head + 2 * l, blk + 208, 2);
    const int32_t corr = lane_levels(blk, lv[l]);
    memcpy(head + 32 + 4 * l, &corr, 4);
  }
  /* padding lanes: all zero, as the scalar packer leaves them */
  for (int l = lanes; l < QPACK_ROWS; l++) memset(lv[l], 0, sizeof lv[l]);
  /* lane l's word: dword 64 l (byte 256 l) from a block's word in lv[0] */
  const __m512i at = _mm512_slli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 6);
  const __m512i top = _mm512_set1_epi8((char)0xFC);
  memset(body, 0, QPACK_Q6_SC); /* padding lanes: zero scales */
  for (int j = 0; j < 8; j++) {
    uint8_t *o = body + QPACK_Q6_SC + (size_t)j * QPACK_Q6_BLOCK;
    __m512i r[8]; /* register t: lane l's levels 32 j + 4 t .. + 3 in dword l */
    for (int t = 0; t < 8; t++) r[t] = _mm512_i32gather_epi32(at, (const void *)&lv[0][32 * j + 4 * t], 4);
    /* qpack.c's put_q6_levels: register 4h + k in bits 2..7 (select 0xE4:
     * c ? a : b), bits 2k, 2k + 1 of register 4h + 3 in bits 0..1 */
    for (int h = 0; h < 2; h++)
      for (int k = 0; k < 3; k++)
        _mm512_storeu_si512((void *)(o + 192 * h + 64 * k),
                            _mm512_ternarylogic_epi32(_mm512_slli_epi16(r[4 * h + k], 2),
                                                      _mm512_srli_epi16(r[4 * h + 3], 2 * k), top, 0xE4));
    for (int l = 0; l < lanes; l++) {
      const uint8_t *sc = src + (size_t)l * row_bytes + 192 + 2 * j;
      body[32 * j + l] = sc[0];
      body[32 * j + 16 + l] = sc[1];
    }
  }
}

#else

int qpack_pack_avx512_available(void) { return 0; }

void qpack_pack_q6_k_avx512(const uint8_t *src, size_t row_bytes, int lanes, uint8_t *head, uint8_t *body) {
  (void)src, (void)row_bytes, (void)lanes, (void)head, (void)body;
}

#endif
