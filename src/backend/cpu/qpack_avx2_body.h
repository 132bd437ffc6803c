/* qpack_avx2_body.h — the AVX2 kernels over packed weight groups (layout:
 * qpack.h) for CPUs without AVX-512 VNNI, compiled twice: by
 * qpack_avx2.c (QPACK_VNNI 0: u8 x s8 sums by vpmaddubsw + vpmaddwd) and
 * by qpack_avxvnni.c (QPACK_VNNI 1: AVX-VNNI's 256-bit vpdpbusd). The
 * including file defines QPACK_VNNI and QPACK_GETTER, the name of its
 * qpack_kernel_fn lookup.
 *
 * A group's 16 row lanes are two halves of 8 with their own accumulators;
 * a tile of several rows walks all of K for each half (the activation
 * tile, in L1, is read twice), a 1-row tile both halves at once (tile).
 * Per 32-element block a half's weights are 8 registers of 8 lanes x 4
 * levels (weights 4t .. 4t + 3 in register t, as in qpack_avx512.c); each
 * meets a broadcast of 4 activation bytes per row, and the scales are
 * applied per row and block as there.
 *
 * Without VNNI, vpmaddubsw's int16 pair sums of as many registers as
 * cannot overflow are added before vpmaddwd widens them (a pair is at most
 * 2 x 127 x the top level: 4-bit levels 8 registers, 5-bit 4).
 * Q8_0's unsigned bytes (level + 128) would saturate a pair: that path
 * takes the signed levels (byte ^ 0x80) with their sign moved onto the
 * activation (|w| <= 128 against |x| <= 127: pairs <= 32512) and leaves
 * out the offset term the activation block carries (qpack_quantize_row).
 */
#ifndef QPACK_VNNI
#error "define QPACK_VNNI and QPACK_GETTER before including qpack_avx2_body.h"
#endif

#include "qpack.h"
#include "qpack_prefetch.h"
#include "simd.h"

#include <string.h>

#define QPACK_KERNEL_MR 6

ALWAYS_INLINE __m256 ph8(const uint8_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

/* Registers t = 0..7 of a half block: q is the block plus 32 x half. */
ALWAYS_INLINE void load_weights(const uint8_t *q, int nibbles, __m256i *wq) {
  if (nibbles) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int t = 0; t < 4; t++) {
      const __m256i v = _mm256_loadu_si256((const __m256i *)(q + 64 * t));
      wq[t] = _mm256_and_si256(v, m4);
      wq[t + 4] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    }
  } else {
    for (int t = 0; t < 8; t++) wq[t] = _mm256_loadu_si256((const __m256i *)(q + 64 * t));
  }
}

/* Bit 4 of the levels from the half's 32 bytes of the plane (byte k bit
 * t: register t's byte k, qpack.c's put_plane): a shift to bit 4 each. */
ALWAYS_INLINE void add_high_bits(const uint8_t *plane, __m256i *wq) {
  const __m256i h = _mm256_loadu_si256((const __m256i *)plane), b4 = _mm256_set1_epi8(16);
  for (int t = 0; t < 8; t++) {
    const __m256i s = t < 4 ? _mm256_slli_epi16(h, 4 - t) : _mm256_srli_epi16(h, t - 4);
    wq[t] = _mm256_or_si256(wq[t], _mm256_and_si256(s, b4));
  }
}

/* init + the int32 sums of registers t0 .. t1 - 1 against activation
 * levels x (4 bytes per register). group: registers whose int16 pair sums
 * fit before widening; sign: signed weights (Q8_0 without VNNI). */
ALWAYS_INLINE __m256i sums(const __m256i *wq, const int8_t *x, int t0, int t1, int group, int sign, __m256i init) {
  __m256i s = init;
#if QPACK_VNNI
  /* two chains: one of 8 kept 6 rows waiting on vpdpbusd's latency */
  (void)group, (void)sign;
  __m256i s1 = _mm256_setzero_si256();
  for (int t = t0; t < t1; t++) {
    int32_t x4;
    memcpy(&x4, x + 4 * t, 4);
    const __m256i xb = _mm256_set1_epi32(x4);
    if ((t - t0) & 1) s1 = _mm256_dpbusd_avx_epi32(s1, wq[t], xb);
    else s = _mm256_dpbusd_avx_epi32(s, wq[t], xb);
  }
  s = _mm256_add_epi32(s, s1);
#else
  __m256i p = _mm256_setzero_si256();
  for (int t = t0, n = 0; t < t1; t++) {
    int32_t x4;
    memcpy(&x4, x + 4 * t, 4);
    const __m256i xb = _mm256_set1_epi32(x4);
    const __m256i prod = sign ? _mm256_maddubs_epi16(_mm256_abs_epi8(wq[t]), _mm256_sign_epi8(xb, wq[t]))
                              : _mm256_maddubs_epi16(wq[t], xb);
    p = n ? _mm256_add_epi16(p, prod) : prod;
    if (++n == group || t == t1 - 1) {
      s = _mm256_add_epi32(s, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
      n = 0;
    }
  }
#endif
  return s;
}

/* qpack_prefetch.h's requests for the bb bytes at blk, asked only by a
 * pass over the first half (tile). */
ALWAYS_INLINE void prefetch_block(const qpack *p, const uint8_t *blk, size_t bb, int h, int nr) {
  if (!h) prefetch_both(p, blk, bb, nr);
}

ALWAYS_INLINE const qdot_q8_0 *act_row(const qdot_q8_0 *act, int64_t b, int nr, int r) { return act + b * nr + r; }

/* Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (layout as in qpack_avx512.c's legacy_tile):
 * halves h0 .. h0 + nh - 1 of the group in one walk over K, into acc[h]. */
ALWAYS_INLINE void legacy_halves(const qpack *p, int64_t g, int h0, int nh, const qdot_q8_0 *act, int nr,
                                 __m256 acc[2][QPACK_KERNEL_MR], rlx_dtype w) {
  const int q8 = w == RLX_Q8_0, signed_q8 = q8 && !QPACK_VNNI;
  const int five = w == RLX_Q5_0 || w == RLX_Q5_1, min = w == RLX_Q4_1 || w == RLX_Q5_1;
  const size_t qbytes = q8 ? 512 : five ? 256 + 64 : 256;
  const size_t bb = qbytes + (min ? 64 : 32);
  const int group = q8 ? 1 : five ? 4 : 8;
  const uint8_t *blk = p->data + (size_t)g * p->group_bytes;
  for (int64_t b = 0; b < p->K / QDOT_QK; b++, blk += bb) {
    prefetch_block(p, blk, bb, h0, nr);
    for (int h = h0; h < h0 + nh; h++) {
      __m256i wq[8];
      load_weights(blk + 32 * h, !q8, wq);
      if (five) add_high_bits(blk + 256 + 32 * h, wq);
      for (int t = 0; signed_q8 && t < 8; t++) wq[t] = _mm256_xor_si256(wq[t], _mm256_set1_epi8((char)0x80));
      const __m256 dw = ph8(blk + qbytes + 16 * h);
      for (int r = 0; r < nr; r++) {
        const qdot_q8_0 *a = act_row(act, b, nr, r);
        const __m256 f = _mm256_cvtepi32_ps(sums(wq, a->qs, 0, 8, group, signed_q8, _mm256_setzero_si256()));
        __m256 *c = &acc[h][r];
        if (min) {
          *c = _mm256_fmadd_ps(f, _mm256_mul_ps(dw, _mm256_set1_ps(a->d)), *c);
          *c = _mm256_fmadd_ps(ph8(blk + qbytes + 32 + 16 * h), _mm256_set1_ps(a->s), *c);
        } else if (signed_q8) {
          *c = _mm256_fmadd_ps(f, _mm256_mul_ps(dw, _mm256_set1_ps(a->d)), *c);
        } else {
          *c = _mm256_fmadd_ps(_mm256_fmadd_ps(f, _mm256_set1_ps(a->d), _mm256_set1_ps(a->s)), dw, *c);
        }
      }
    }
  }
}

/* Q4_K and Q5_K (qpack_avx512.c's k4_tile; the header's 6-bit scales and
 * mins as its k4_scales takes them), halves as legacy_halves. Each row
 * sums its super-block without the activation's d (the super-block's,
 * qpack_quantize_row): two FMAs a block, d once a super-block into the
 * row's total in memory. */
ALWAYS_INLINE void k4_halves(const qpack *p, int64_t g, int h0, int nh, const qdot_q8_0 *act, int nr,
                             __m256 acc[2][QPACK_KERNEL_MR], rlx_dtype w) {
  const size_t bb = w == RLX_Q5_K ? 256 + 64 : 256, hb = QPACK_K4_HEADER;
  const __m256i top = _mm256_set1_epi32(0x30);
  const uint8_t *sb = p->data + (size_t)g * p->group_bytes;
  _Alignas(32) float total[2][QPACK_KERNEL_MR][8];
  for (int h = h0; h < h0 + nh; h++)
    for (int r = 0; r < nr; r++) _mm256_store_ps(total[h][r], _mm256_setzero_ps());
  for (int64_t s = 0; s < p->K / QDOT_QK_K; s++, sb += hb + 8 * bb) {
    __m256 part[2][QPACK_KERNEL_MR];
    for (int h = h0; h < h0 + nh; h++)
      for (int r = 0; r < nr; r++) part[h][r] = _mm256_setzero_ps();
    for (int j = 0; j < 8; j++) {
      const uint8_t *blk = sb + hb + j * bb;
      if (j) prefetch_block(p, blk, bb, h0, nr);
      else prefetch_block(p, sb, hb + bb, h0, nr); /* the header with the first block */
      for (int h = h0; h < h0 + nh; h++) {
        __m256i wq[8];
        load_weights(blk + 32 * h, 1, wq);
        if (w == RLX_Q5_K) add_high_bits(blk + 256 + 32 * h, wq);
        const __m256 d = ph8(sb + 16 * h), ndmin = _mm256_sub_ps(_mm256_setzero_ps(), ph8(sb + 32 + 16 * h));
        const __m256i hi = _mm256_loadu_si256((const __m256i *)(sb + QPACK_K4_HI + 32 * h));
        const __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(sb + QPACK_K4_LO + 16 * j + 8 * h)));
        const __m256i hj = _mm256_srl_epi32(hi, _mm_cvtsi32_si128(4 * j));
        const __m256i sc = _mm256_or_si256(_mm256_and_si256(lo, _mm256_set1_epi32(15)),
                                           _mm256_and_si256(_mm256_slli_epi32(hj, 4), top));
        const __m256i mn = _mm256_or_si256(_mm256_srli_epi32(lo, 4), _mm256_and_si256(_mm256_slli_epi32(hj, 2), top));
        const __m256 dw = _mm256_mul_ps(d, _mm256_cvtepi32_ps(sc));
        const __m256 mw = _mm256_mul_ps(ndmin, _mm256_cvtepi32_ps(mn));
        for (int r = 0; r < nr; r++) {
          const qdot_q8_0 *a = act_row(act, s * 8 + j, nr, r);
          const __m256i i = sums(wq, a->qs, 0, 8, w == RLX_Q5_K ? 4 : 8, 0, _mm256_setzero_si256());
          part[h][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i), dw, part[h][r]);
          part[h][r] = _mm256_fmadd_ps(mw, _mm256_set1_ps(a->s), part[h][r]);
        }
      }
    }
    for (int h = h0; h < h0 + nh; h++)
      for (int r = 0; r < nr; r++) {
        const __m256 dx = _mm256_set1_ps(act_row(act, s * 8, nr, r)->d);
        _mm256_store_ps(total[h][r], _mm256_fmadd_ps(part[h][r], dx, _mm256_load_ps(total[h][r])));
      }
  }
  for (int h = h0; h < h0 + nh; h++)
    for (int r = 0; r < nr; r++) acc[h][r] = _mm256_load_ps(total[h][r]);
}

/* Q6_K (qpack_avx512.c's q6_k_tile): registers 4 bh .. 4 bh + 3 of lane
 * half h of block half bh, the 32 bytes of that lane half in each of the
 * block half's 3 vectors (qpack_avx512.h's q6_k_half; the fourth
 * register's 2-bit pieces, masked before the word shifts, stay in their
 * byte). With VNNI the weights are the stored signed bytes 4 (level -
 * 32); vpmaddubsw's int16 pairs would overflow on those against
 * activations + 128, so without VNNI they are level - 32 (6 bits
 * sign-extended: |w| <= 32, a pair <= 2 x 255 x 32 and two pairs still
 * fit), sums a quarter of VNNI's. */
ALWAYS_INLINE void q6_k_regs(const uint8_t *blk, int bh, int h, __m256i w[4]) {
  const __m256i low = _mm256_set1_epi8(3);
  const uint8_t *q = blk + 192 * bh + 32 * h;
  const __m256i v0 = _mm256_load_si256((const __m256i *)q);
  const __m256i v1 = _mm256_load_si256((const __m256i *)(q + 64));
  const __m256i v2 = _mm256_load_si256((const __m256i *)(q + 128));
#if QPACK_VNNI
  const __m256i top = _mm256_set1_epi8((char)0xFC);
  w[0] = _mm256_and_si256(v0, top);
  w[1] = _mm256_and_si256(v1, top);
  w[2] = _mm256_and_si256(v2, top);
  w[3] = _mm256_or_si256(_mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(v0, low), 2),
                                         _mm256_slli_epi16(_mm256_and_si256(v1, low), 4)),
                         _mm256_slli_epi16(_mm256_and_si256(v2, low), 6));
#else
  const __m256i six = _mm256_set1_epi8(0x3F), bit5 = _mm256_set1_epi8(0x20);
  w[0] = _mm256_and_si256(_mm256_srli_epi16(v0, 2), six);
  w[1] = _mm256_and_si256(_mm256_srli_epi16(v1, 2), six);
  w[2] = _mm256_and_si256(_mm256_srli_epi16(v2, 2), six);
  w[3] = _mm256_or_si256(_mm256_or_si256(_mm256_and_si256(v0, low), _mm256_slli_epi16(_mm256_and_si256(v1, low), 2)),
                         _mm256_slli_epi16(_mm256_and_si256(v2, low), 4));
  for (int t = 0; t < 4; t++) w[t] = _mm256_sub_epi8(_mm256_xor_si256(w[t], bit5), bit5);
#endif
}

/* The int32 sums of a block half's 4 registers against activation levels
 * + 128 (x: 16 bytes, unsigned). */
ALWAYS_INLINE __m256i q6_k_sums(const __m256i w[4], const int8_t *x) {
  __m256i s = _mm256_setzero_si256();
#if QPACK_VNNI
  for (int t = 0; t < 4; t++) {
    int32_t x4;
    memcpy(&x4, x + 4 * t, 4);
    s = _mm256_dpbusd_avx_epi32(s, _mm256_set1_epi32(x4), w[t]);
  }
#else
  for (int t = 0; t < 4; t += 2) {
    int32_t x0, x1;
    memcpy(&x0, x + 4 * t, 4);
    memcpy(&x1, x + 4 * t + 4, 4);
    const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(_mm256_set1_epi32(x0), w[t]),
                                       _mm256_maddubs_epi16(_mm256_set1_epi32(x1), w[t + 1]));
    s = _mm256_add_epi32(s, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
  }
#endif
  return s;
}

/* Q6_K halves as legacy_halves: signed weights against the activation
 * levels + 128 (vpdpbusd's and vpmaddubsw's unsigned operand). Each block
 * half's scale d sc goes into the row's super-block sum (one FMA), which
 * then loses corr (qpack.h) and meets the row's d in memory, as
 * qpack_avx512.c's q6_k_tile does: 6 rows of sums and totals overflow
 * the 16 registers. */
ALWAYS_INLINE void q6_k_halves(const qpack *p, int64_t g, int h0, int nh, const qdot_q8_0 *act, int nr,
                               __m256 acc[2][QPACK_KERNEL_MR]) {
  const uint8_t *head = p->data + (size_t)g * p->group_bytes;
  const uint8_t *sb = head + qpack_q6_heads(p->K);
  const size_t bb = QPACK_Q6_BLOCK;
  /* the sums are of 4 (level - 32) with VNNI, of level - 32 without */
  const __m256 quarter = _mm256_set1_ps(QPACK_VNNI ? 0.25f : 1.0f), corr_scale = _mm256_set1_ps(QPACK_VNNI ? 1.0f : 0.25f);
  if (!h0) prefetch_ahead(p, head, qpack_q6_heads(p->K));
  _Alignas(32) float total[2][QPACK_KERNEL_MR][8];
  for (int h = h0; h < h0 + nh; h++)
    for (int r = 0; r < nr; r++) _mm256_store_ps(total[h][r], _mm256_setzero_ps());
  for (int64_t c = 0; c < p->K / QDOT_QK_K; c++, head += QPACK_Q6_HEAD, sb += QPACK_Q6_SUPER) {
    __m256 part[2][QPACK_KERNEL_MR];
    for (int h = h0; h < h0 + nh; h++)
      for (int r = 0; r < nr; r++) part[h][r] = _mm256_setzero_ps();
    for (int j = 0; j < 8; j++) {
      const uint8_t *blk = sb + QPACK_Q6_SC + j * bb;
      if (j) prefetch_block(p, blk, bb, h0, nr);
      else prefetch_block(p, sb, QPACK_Q6_SC + bb, h0, nr);
      const qdot_q8_0 *a = act_row(act, c * 8 + j, nr, 0);
      for (int h = h0; h < h0 + nh; h++) {
        for (int bh = 0; bh < 2; bh++) {
          __m256i w[4];
          q6_k_regs(blk, bh, h, w);
          const __m128i sc8 = _mm_loadl_epi64((const __m128i *)(sb + 32 * j + 16 * bh + 8 * h));
          const __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc8));
          for (int r = 0; r < nr; r++)
            part[h][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q6_k_sums(w, a[r].qs + 16 * bh)), sc, part[h][r]);
        }
      }
    }
    for (int h = h0; h < h0 + nh; h++) {
      const __m256 d = _mm256_mul_ps(ph8(head + 16 * h), quarter);
      const __m256 corr = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(head + 32 + 32 * h))),
                                        corr_scale);
      for (int r = 0; r < nr; r++) {
        const __m256 dx = _mm256_mul_ps(d, _mm256_set1_ps(act_row(act, c * 8, nr, r)->d));
        _mm256_store_ps(total[h][r], _mm256_fmadd_ps(_mm256_sub_ps(part[h][r], corr), dx, _mm256_load_ps(total[h][r])));
      }
    }
  }
  for (int h = h0; h < h0 + nh; h++)
    for (int r = 0; r < nr; r++) acc[h][r] = _mm256_load_ps(total[h][r]);
}

/* Halves h0 .. h0 + nh - 1 of a group into y. Called with constant h0
 * and nh, so the kernels index their per-half sums with constants and
 * keep them in registers. */
ALWAYS_INLINE void tile_halves(const qpack *p, int64_t g, const qdot_q8_0 *act, int nr, float *y, int64_t ldy,
                               int lanes, rlx_dtype w, int h0, int nh) {
  __m256 acc[2][QPACK_KERNEL_MR];
  for (int h = h0; h < h0 + nh; h++)
    for (int r = 0; r < nr; r++) acc[h][r] = _mm256_setzero_ps();
  if (w == RLX_Q4_K || w == RLX_Q5_K) k4_halves(p, g, h0, nh, act, nr, acc, w);
  else if (w == RLX_Q6_K) q6_k_halves(p, g, h0, nh, act, nr, acc);
  else legacy_halves(p, g, h0, nh, act, nr, acc, w);
  for (int h = h0; h < h0 + nh && 8 * h < lanes; h++) {
    const int n = lanes - 8 * h < 8 ? lanes - 8 * h : 8;
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    for (int r = 0; r < nr; r++) {
      if (n == 8) _mm256_storeu_ps(y + r * ldy + 8 * h, acc[h][r]);
      else _mm256_maskstore_ps(y + r * ldy + 8 * h, m, acc[h][r]);
    }
  }
}

/* A 1-row tile (decode) walks both halves of each block at once, so the
 * weight stream and its prefetches run without a break; more rows take a
 * half at a time (their sums fill the registers), the second half's pass
 * reading the group again out of the L2. A group's padding rows are
 * zeros: a 1-row tile computes them and stores only the lanes. */
ALWAYS_INLINE void tile(const qpack *p, int64_t g, const qdot_q8_0 *act, int nr, float *y,
                        int64_t ldy, int lanes, rlx_dtype w) {
  if (nr == 1) {
    tile_halves(p, g, act, nr, y, ldy, lanes, w, 0, 2);
  } else {
    tile_halves(p, g, act, nr, y, ldy, lanes, w, 0, 1);
    if (lanes > 8) tile_halves(p, g, act, nr, y, ldy, lanes, w, 1, 1);
  }
}

QPACK_DEFINE_KERNELS(QPACK_GETTER, tile, QPACK_DTYPES)
