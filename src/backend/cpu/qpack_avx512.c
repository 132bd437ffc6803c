/* qpack_avx512.c — the AVX-512 VNNI kernels over packed weight groups
 * (layout: qpack.h). Built with -mavx512vnni; called only after
 * qpack_supported() has checked the CPU.
 *
 * Per 32-element block: the group's weights are 8 registers of 16 rows x 4
 * unsigned levels (Q4: one load gives two registers, low and high
 * nibbles), weights 4t .. 4t + 3 in register t for every type. Register t
 * is decoded once and meets the broadcast 4 bytes t of each of the nr
 * activation rows in turn (vpdpbusd, 4 products into each of 16 int32
 * lanes): nr independent sums in flight, enough to cover vpdpbusd's
 * latency at two a cycle when nr is QPACK_KERNEL_MR = 12, which the 32
 * zmm registers still hold (12 int sums, 12 float sums, the weights).
 * Then two FMAs per row add d_w d_x isum + m_w s_x to the row's 16 float
 * sums, where m_w is the block's offset term (Q4_1: m, Q4_K: -dmin mn) and
 * s_x = d_x (sum of the activation levels); for Q4_0, Q5_0 and Q8_0 (m_w =
 * -8, -16, -128 times d_w) the activation block carries -8, -16, -128 s_x
 * and the FMAs add d_w (d_x isum + that).
 */
#include "qpack.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
#include "qpack_avx512.h"
#include "qpack_prefetch.h"

#define QPACK_KERNEL_MR 12

/* s[r] = the block's int32 sums of activation row r (block b of act) against
 * its 8 weight registers, r < nr. Few rows (decode) split each row's 8
 * vpdpbusd over C chains added at the end (exact: int32 sums), so the
 * block's latency is 8 / C products, not 8: one chain of 8 kept a decode
 * step waiting on vpdpbusd's latency instead of on memory. With chains,
 * low nibbles go to the even ones and high nibbles to the odd ones, so
 * a high nibble is used in place, 16 times its level (a mask, no shift),
 * and the odd chains' total is divided by 16 once (exact: a multiple of
 * 16): a decode step spends fewer instructions per weight byte, which
 * the memory stream then hides. */
AI void block_sums(const uint8_t *q, int nibbles, const uint8_t *planes, int plane, const qdot_q8_0 *act,
                   int64_t b, int nr, __m512i *s) {
  const int C = nr == 1 ? 4 : nr <= 3 ? 2 : 1;
  const int in_place = nibbles && !plane && C > 1;
  __m512i part[QPACK_KERNEL_MR][4];
  for (int r = 0; r < nr; r++)
    for (int c = 0; c < C; c++) part[r][c] = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int t = 0; t < 4; t++) {
    __m512i lo, hi;
    if (in_place) {
      const __m512i v = _mm512_loadu_si512((const void *)(q + 64 * t));
      lo = _mm512_and_si512(v, _mm512_set1_epi8(0x0F));
      hi = _mm512_and_si512(v, _mm512_set1_epi8((char)0xF0));
    } else {
      weights_pair(q, nibbles, planes, plane, t, &lo, &hi);
    }
    const int c0 = 2 * t % C, c1 = (2 * t + 1) % C;
    for (int r = 0; r < nr; r++)
      part[r][c0] = _mm512_dpbusd_epi32(part[r][c0], lo, bcast4(act_at(act, b, nr, r)->qs + 4 * t));
    for (int r = 0; r < nr; r++)
      part[r][c1] = _mm512_dpbusd_epi32(part[r][c1], hi, bcast4(act_at(act, b, nr, r)->qs + 16 + 4 * t));
  }
  for (int r = 0; r < nr; r++) {
    if (in_place) {
      __m512i even = part[r][0], odd = part[r][1];
      for (int c = 2; c < C; c += 2) {
        even = _mm512_add_epi32(even, part[r][c]);
        odd = _mm512_add_epi32(odd, part[r][c + 1]);
      }
      s[r] = _mm512_add_epi32(even, _mm512_srai_epi32(odd, 4));
    } else {
      s[r] = part[r][0];
      for (int c = 1; c < C; c++) s[r] = _mm512_add_epi32(s[r], part[r][c]);
    }
  }
}

AI void store_rows(const __m512 *acc, int nr, float *y, int64_t ldy, int lanes) {
  const __mmask16 m = (__mmask16)((1u << lanes) - 1);
  for (int r = 0; r < nr; r++) {
    if (lanes == QPACK_ROWS) _mm512_storeu_ps(y + r * ldy, acc[r]);
    else _mm512_mask_storeu_ps(y + r * ldy, m, acc[r]);
  }
}

/* Q4_0, Q4_1, Q5_0, Q5_1, Q8_0: blocks of bb bytes, q (Q5_0, Q5_1: and
 * the bit-4 masks) then fp16 d[16] (Q4_1, Q5_1: then m[16]). */
AI void legacy_tile(const qpack *p, int64_t g, const qdot_q8_0 *act, int nr, float *y, int64_t ldy,
                    int lanes, rlx_dtype w) {
  const int nibbles = w != RLX_Q8_0;
  const int five = w == RLX_Q5_0 || w == RLX_Q5_1, min = w == RLX_Q4_1 || w == RLX_Q5_1;
  const size_t qbytes = w == RLX_Q8_0 ? 512 : five ? 256 + 64 : 256;
  const size_t bb = qbytes + (min ? 64 : 32);
  const uint8_t *blk = p->data + (size_t)g * p->group_bytes;
  const int64_t nb = p->K / QDOT_QK;
  __m512 acc[QPACK_KERNEL_MR];
  for (int r = 0; r < nr; r++) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; b++, blk += bb) {
    prefetch_both(p, blk, bb, nr);
    __m512i s[QPACK_KERNEL_MR];
    block_sums(blk, nibbles, blk + 256, five, act, b, nr, s);
    const __m512 dw = ph16(blk + qbytes);
    if (min) {
      const __m512 mw = ph16(blk + qbytes + 32);
      for (int r = 0; r < nr; r++) {
        const qdot_q8_0 *a = act_at(act, b, nr, r);
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[r]), _mm512_mul_ps(dw, _mm512_set1_ps(a->d)), acc[r]);
        acc[r] = _mm512_fmadd_ps(mw, _mm512_set1_ps(a->s), acc[r]);
      }
    } else {
      for (int r = 0; r < nr; r++) {
        const qdot_q8_0 *a = act_at(act, b, nr, r);
        const __m512 f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[r]), _mm512_set1_ps(a->d), _mm512_set1_ps(a->s));
        acc[r] = _mm512_fmadd_ps(f, dw, acc[r]);
      }
    }
  }
  store_rows(acc, nr, y, ldy, lanes);
}

/* Q4_K and Q5_K: per super-block a header fp16 d[16], dmin[16] and the
 * 6-bit scales and mins (k4_scales), then 8 blocks of nibbles (Q5_K: and
 * the bit-4 masks).
 * The activation's d is the super-block's (qpack_quantize_row): each row
 * sums its super-block without it, 2 operations a block (the scale d sc
 * times the int sums, the min -dmin mn times the level sum s), and the
 * super-block's sum times d meets the row's total in memory, since 12
 * rows of int sums, super-block sums and totals overflow the registers. */
AI void k4_tile(const qpack *p, int64_t g, const qdot_q8_0 *act, int nr, float *y, int64_t ldy,
                int lanes, rlx_dtype w) {
  const int five = w == RLX_Q5_K;
  const size_t bb = five ? 256 + 64 : 256, hb = QPACK_K4_HEADER;
  const uint8_t *sb = p->data + (size_t)g * p->group_bytes;
  const int64_t nsb = p->K / QDOT_QK_K;
  _Alignas(64) float total[QPACK_KERNEL_MR][QPACK_ROWS];
  for (int r = 0; r < nr; r++) _mm512_store_ps(total[r], _mm512_setzero_ps());
  for (int64_t c = 0; c < nsb; c++, sb += hb + 8 * bb) {
    __m512 part[QPACK_KERNEL_MR];
    for (int r = 0; r < nr; r++) part[r] = _mm512_setzero_ps();
    for (int j = 0; j < 8; j++) {
      const uint8_t *blk = sb + hb + j * bb;
      if (j) prefetch_both(p, blk, bb, nr);
      else prefetch_both(p, sb, hb + bb, nr);
      __m512i s[QPACK_KERNEL_MR];
      block_sums(blk, 1, blk + 256, five, act, c * 8 + j, nr, s);
      __m512 dw, mw;
      k4_scales(sb, j, &dw, &mw);
      for (int r = 0; r < nr; r++) {
        part[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[r]), dw, part[r]);
        part[r] = _mm512_fmadd_ps(mw, _mm512_set1_ps(act_at(act, c * 8 + j, nr, r)->s), part[r]);
      }
    }
    for (int r = 0; r < nr; r++) {
      const __m512 dx = _mm512_set1_ps(act_at(act, c * 8, nr, r)->d);
      _mm512_store_ps(total[r], _mm512_fmadd_ps(part[r], dx, _mm512_load_ps(total[r])));
    }
  }
  __m512 acc[QPACK_KERNEL_MR];
  for (int r = 0; r < nr; r++) acc[r] = _mm512_load_ps(total[r]);
  store_rows(acc, nr, y, ldy, lanes);
}

/* Q6_K: the group's super-block heads, fp16 d[16] and int32 corr[16]
 * each, then per super-block int8 sc[8][2][16] and 8 blocks of two halves
 * (q6_k_half). The weights are signed, 4 (level - 32), and meet the
 * activation levels + 128 (qpack_quantize_row: vpdpbusd's unsigned
 * operand), so each half's sum carries 128 (sum of its weights); corr,
 * the super-block's sum of those times the halves' scales (qpack.c), is
 * taken out once per super-block, and d / 4 scales the rest (exact).
 * Each half of a block (registers 0-3 and 4-7) has its own scale: one
 * FMA each. */
AI void q6_k_tile(const qpack *p, int64_t g, const qdot_q8_0 *act, int nr, float *y, int64_t ldy, int lanes) {
  const uint8_t *head = p->data + (size_t)g * p->group_bytes;
  const uint8_t *sb = head + qpack_q6_heads(p->K);
  const int64_t nsb = p->K / QDOT_QK_K;
  const size_t bb = QPACK_Q6_BLOCK;
  /* the heads: the blocks' prefetches below cover only the bytes after them */
  prefetch_ahead(p, head, qpack_q6_heads(p->K));
  _Alignas(64) float total[QPACK_KERNEL_MR][QPACK_ROWS];
  for (int r = 0; r < nr; r++) _mm512_store_ps(total[r], _mm512_setzero_ps());
  for (int64_t c = 0; c < nsb; c++, head += QPACK_Q6_HEAD, sb += QPACK_Q6_SUPER) {
    const __m512 d = _mm512_mul_ps(ph16(head), _mm512_set1_ps(0.25f));
    const __m512 dcorr = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_loadu_si512((const void *)(head + 32))));
    __m512 part[QPACK_KERNEL_MR];
    for (int r = 0; r < nr; r++) part[r] = _mm512_setzero_ps();
    for (int j = 0; j < 8; j++) {
      const uint8_t *blk = sb + QPACK_Q6_SC + j * bb;
      if (j) prefetch_both(p, blk, bb, nr);
      else prefetch_both(p, sb, QPACK_Q6_SC + bb, nr); /* the scales with the first block */
      const qdot_q8_0 *a = act + (c * 8 + j) * nr;
      __m512i w[4], s[QPACK_KERNEL_MR];
      for (int r = 0; r < nr; r++) s[r] = _mm512_setzero_si512();
      q6_k_half(blk, 0, w);
#pragma GCC unroll 4
      for (int t = 0; t < 4; t++)
        for (int r = 0; r < nr; r++) s[r] = _mm512_dpbusd_epi32(s[r], bcast4(a[r].qs + 4 * t), w[t]);
      const __m512 dsc0 = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(sb + 32 * j)))));
      for (int r = 0; r < nr; r++) {
        part[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[r]), dsc0, part[r]);
        s[r] = _mm512_setzero_si512();
      }
      q6_k_half(blk, 1, w);
#pragma GCC unroll 4
      for (int t = 0; t < 4; t++)
        for (int r = 0; r < nr; r++) s[r] = _mm512_dpbusd_epi32(s[r], bcast4(a[r].qs + 16 + 4 * t), w[t]);
      const __m512 dsc1 = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(sb + 32 * j + 16)))));
      for (int r = 0; r < nr; r++) part[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[r]), dsc1, part[r]);
    }
    for (int r = 0; r < nr; r++) {
      const __m512 dx = _mm512_set1_ps(act[c * 8 * nr + r].d);
      _mm512_store_ps(total[r], _mm512_fmadd_ps(_mm512_sub_ps(part[r], dcorr), dx, _mm512_load_ps(total[r])));
    }
  }
  __m512 acc[QPACK_KERNEL_MR];
  for (int r = 0; r < nr; r++) acc[r] = _mm512_load_ps(total[r]);
  store_rows(acc, nr, y, ldy, lanes);
}

AI void tile(const qpack *p, int64_t g, const qdot_q8_0 *act, int nr, float *y, int64_t ldy, int lanes,
             rlx_dtype w) {
  if (w == RLX_Q4_K || w == RLX_Q5_K) k4_tile(p, g, act, nr, y, ldy, lanes, w);
  else if (w == RLX_Q6_K) q6_k_tile(p, g, act, nr, y, ldy, lanes);
  else legacy_tile(p, g, act, nr, y, ldy, lanes, w);
}

QPACK_DEFINE_KERNELS(qpack_avx512_kernel, tile, QPACK_DTYPES)

#else

qpack_kernel_fn qpack_avx512_kernel(rlx_dtype w, int *rows) {
  (void)w, (void)rows;
  return NULL;
}

#endif
