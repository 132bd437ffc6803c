/* qpack_avx512.c — the AVX-512 VNNI kernels over packed weight groups
 * (layout: qpack.h). Built with -mavx512vnni; called only after
 * qpack_supported() has checked the CPU.
 *
 * Per 32-element block: the group's weights are 8 registers of 16 rows x 4
 * unsigned levels (Q4: one load gives two registers, low and high
 * nibbles), weights 4t .. 4t + 3 in register t for every type. For each
 * of the nr activation rows, 8 vpdpbusd with a broadcast of that row's 4
 * bytes t sum the block's 32 products per row lane in int32 (exact), and
 * two FMAs add d_w d_x isum + m_w s_x to the row's 16 float sums, where
 * m_w is the block's offset term (Q4_1: m, Q4_K: -dmin mn) and s_x = d_x
 * (sum of the activation levels); for Q4_0, Q5_0 and Q8_0 (m_w = -8, -16,
 * -128 times d_w) the activation block carries -8, -16, -128 s_x and the
 * FMAs add d_w (d_x isum + that).
 */
#include "qpack.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
#include <immintrin.h>
#include <string.h>

static inline __m512 ph16(const uint8_t *p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

static inline __m512 u8x16(const uint8_t *p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p)));
}

/* Weight registers t = 0..7 of one block: levels 4t .. 4t + 3 per lane. */
static inline __attribute__((always_inline)) void load_weights(const uint8_t *q, int nibbles, __m512i *wq) {
  if (nibbles) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int t = 0; t < 4; t++) {
      const __m512i v = _mm512_loadu_si512((const void *)(q + 64 * t));
      wq[t] = _mm512_and_si512(v, m4);
      wq[t + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    }
  } else {
    for (int t = 0; t < 8; t++) wq[t] = _mm512_loadu_si512((const void *)(q + 64 * t));
  }
}

/* Bit b (4 + plane) of the levels: 8 masks after the nibbles, plane by plane. */
static inline __attribute__((always_inline)) void add_high_bits(const uint8_t *planes, int n_planes, __m512i *wq) {
  for (int pl = 0; pl < n_planes; pl++) {
    const __m512i bit = _mm512_set1_epi8((char)(16 << pl));
    for (int t = 0; t < 8; t++) {
      uint64_t m;
      memcpy(&m, planes + 64 * pl + 8 * t, 8);
      wq[t] = _mm512_mask_add_epi8(wq[t], _cvtu64_mask64(m), wq[t], bit);
    }
  }
}

/* The block's int32 sums of activation row a against the 8 registers. */
static inline __attribute__((always_inline)) __m512i row_sums(const __m512i *wq, const qdot_q8_0 *a) {
  __m512i s = _mm512_setzero_si512();
  for (int t = 0; t < 8; t++) {
    int32_t x4;
    memcpy(&x4, a->qs + 4 * t, 4);
    s = _mm512_dpbusd_epi32(s, wq[t], _mm512_set1_epi32(x4));
  }
  return s;
}

/* acc[r] += dw d_x isum + mw s_x for the block's activation row r; with
 * mw NULL (an offset type, whose s already holds offset x s_x:
 * qpack_quantize_row) acc[r] += dw (d_x isum + s), one operation less. */
static inline __attribute__((always_inline)) void block_rows(const __m512i *wq, __m512 dw, const __m512 *mw,
                                                             const uint8_t *act, size_t act_stride,
                                                             int nr, __m512 *acc) {
  for (int r = 0; r < nr; r++) {
    const qdot_q8_0 *a = (const qdot_q8_0 *)(act + (size_t)r * act_stride);
    const __m512 f = _mm512_cvtepi32_ps(row_sums(wq, a));
    if (!mw) {
      acc[r] = _mm512_fmadd_ps(_mm512_fmadd_ps(f, _mm512_set1_ps(a->d), _mm512_set1_ps(a->s)), dw, acc[r]);
    } else {
      acc[r] = _mm512_fmadd_ps(f, _mm512_mul_ps(dw, _mm512_set1_ps(a->d)), acc[r]);
      acc[r] = _mm512_fmadd_ps(*mw, _mm512_set1_ps(a->s), acc[r]);
    }
  }
}

static inline __attribute__((always_inline)) void store_rows(const __m512 *acc, int nr, float *y,
                                                             int64_t ldy, int lanes) {
  const __mmask16 m = (__mmask16)((1u << lanes) - 1);
  for (int r = 0; r < nr; r++) {
    if (lanes == QPACK_ROWS) _mm512_storeu_ps(y + r * ldy, acc[r]);
    else _mm512_mask_storeu_ps(y + r * ldy, m, acc[r]);
  }
}

/* Q4_0, Q4_1, Q5_0, Q8_0: blocks of bb bytes, q (Q5_0: and the bit-4
 * masks) then fp16 d[16] (then m[16]). */
static inline __attribute__((always_inline)) void legacy_tile(const qpack *p, int64_t g, const qdot_q8_0 *act,
                                                              size_t act_stride, int nr, float *y, int64_t ldy,
                                                              int lanes, rlx_dtype w) {
  const int nibbles = w != RLX_Q8_0;
  const size_t qbytes = w == RLX_Q8_0 ? 512 : w == RLX_Q5_0 ? 256 + 64 : 256;
  const size_t bb = qbytes + (w == RLX_Q4_1 ? 64 : 32);
  const uint8_t *blk = p->data + (size_t)g * p->group_bytes;
  const int64_t nb = p->K / QDOT_QK;
  __m512 acc[QPACK_MR];
  for (int r = 0; r < nr; r++) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; b++, blk += bb) {
    __m512i wq[8];
    load_weights(blk, nibbles, wq);
    if (w == RLX_Q5_0) add_high_bits(blk + 256, 1, wq);
    const __m512 dw = ph16(blk + qbytes);
    if (w == RLX_Q4_1) {
      const __m512 mw = ph16(blk + qbytes + 32);
      block_rows(wq, dw, &mw, (const uint8_t *)(act + b), act_stride, nr, acc);
    } else {
      block_rows(wq, dw, NULL, (const uint8_t *)(act + b), act_stride, nr, acc);
    }
  }
  store_rows(acc, nr, y, ldy, lanes);
}

/* Q4_K: per super-block a header fp16 d[16], dmin[16], then 8 blocks of
 * nibbles and u8 sc[16], mn[16]. */
static inline __attribute__((always_inline)) void q4_k_tile(const qpack *p, int64_t g, const qdot_q8_0 *act,
                                                            size_t act_stride, int nr, float *y, int64_t ldy,
                                                            int lanes) {
  const uint8_t *sb = p->data + (size_t)g * p->group_bytes;
  const int64_t nsb = p->K / QDOT_QK_K;
  __m512 acc[QPACK_MR];
  for (int r = 0; r < nr; r++) acc[r] = _mm512_setzero_ps();
  for (int64_t s = 0; s < nsb; s++, sb += 64 + 8 * 288) {
    const __m512 d = ph16(sb), dmin = ph16(sb + 32);
    for (int j = 0; j < 8; j++) {
      const uint8_t *blk = sb + 64 + j * 288;
      __m512i wq[8];
      load_weights(blk, 1, wq);
      const __m512 dw = _mm512_mul_ps(d, u8x16(blk + 256));
      const __m512 mw = _mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), dmin), u8x16(blk + 272));
      block_rows(wq, dw, &mw, (const uint8_t *)(act + s * 8 + j), act_stride, nr, acc);
    }
  }
  store_rows(acc, nr, y, ldy, lanes);
}

/* Q6_K: per super-block a header fp16 d[16], then 8 blocks of nibbles, two
 * bit planes and int8 sc[2][16]. Each half of a block (registers 0-3 and
 * 4-7) has its own scale: the int32 sums start at -32 (sum of the half's
 * activation levels), are scaled in int32 (|sum| < 2^17, |sc| < 2^7) and
 * converted once. */
static inline __attribute__((always_inline)) void q6_k_tile(const qpack *p, int64_t g, const qdot_q8_0 *act,
                                                            size_t act_stride, int nr, float *y, int64_t ldy,
                                                            int lanes) {
  const uint8_t *sb = p->data + (size_t)g * p->group_bytes;
  const int64_t nsb = p->K / QDOT_QK_K;
  __m512 acc[QPACK_MR];
  for (int r = 0; r < nr; r++) acc[r] = _mm512_setzero_ps();
  for (int64_t s = 0; s < nsb; s++, sb += 32 + 8 * 416) {
    const __m512 d = ph16(sb);
    for (int j = 0; j < 8; j++) {
      const uint8_t *blk = sb + 32 + j * 416;
      __m512i wq[8];
      load_weights(blk, 1, wq);
      add_high_bits(blk + 256, 2, wq);
      const __m512i sc0 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 384)));
      const __m512i sc1 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 400)));
      for (int r = 0; r < nr; r++) {
        const qdot_q8_0 *a = (const qdot_q8_0 *)((const uint8_t *)(act + s * 8 + j) + (size_t)r * act_stride);
        int16_t half[2];
        memcpy(half, &a->s, sizeof half);
        __m512i s0 = _mm512_set1_epi32(-32 * half[0]), s1 = _mm512_set1_epi32(-32 * half[1]);
        for (int t = 0; t < 4; t++) {
          int32_t x0, x1;
          memcpy(&x0, a->qs + 4 * t, 4);
          memcpy(&x1, a->qs + 16 + 4 * t, 4);
          s0 = _mm512_dpbusd_epi32(s0, wq[t], _mm512_set1_epi32(x0));
          s1 = _mm512_dpbusd_epi32(s1, wq[t + 4], _mm512_set1_epi32(x1));
        }
        const __m512i i = _mm512_add_epi32(_mm512_mullo_epi32(s0, sc0), _mm512_mullo_epi32(s1, sc1));
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i), _mm512_mul_ps(d, _mm512_set1_ps(a->d)), acc[r]);
      }
    }
  }
  store_rows(acc, nr, y, ldy, lanes);
}

/* One function per dtype, specialized for each row count (the accumulators
 * then live in registers). */
#define ROW_CASES(CALL)                                                                                  \
  switch (nr) {                                                                                          \
  case 1: CALL(1); break;                                                                                \
  case 2: CALL(2); break;                                                                                \
  case 3: CALL(3); break;                                                                                \
  case 4: CALL(4); break;                                                                                \
  case 5: CALL(5); break;                                                                                \
  default: CALL(QPACK_MR); break;                                                                        \
  }

#define KERNEL(NAME, CALL)                                                                               \
  static void NAME(const qpack *p, int64_t g, const qdot_q8_0 *act, size_t act_stride, int nr, float *y, \
                   int64_t ldy, int lanes) {                                                             \
    ROW_CASES(CALL)                                                                                      \
  }
_Static_assert(QPACK_MR == 6, "ROW_CASES lists 1 .. QPACK_MR");

#define CALL_Q4_0(n) legacy_tile(p, g, act, act_stride, n, y, ldy, lanes, RLX_Q4_0)
#define CALL_Q4_1(n) legacy_tile(p, g, act, act_stride, n, y, ldy, lanes, RLX_Q4_1)
#define CALL_Q8_0(n) legacy_tile(p, g, act, act_stride, n, y, ldy, lanes, RLX_Q8_0)
#define CALL_Q4_K(n) q4_k_tile(p, g, act, act_stride, n, y, ldy, lanes)
#define CALL_Q5_0(n) legacy_tile(p, g, act, act_stride, n, y, ldy, lanes, RLX_Q5_0)
#define CALL_Q6_K(n) q6_k_tile(p, g, act, act_stride, n, y, ldy, lanes)

KERNEL(kernel_q4_0, CALL_Q4_0)
KERNEL(kernel_q4_1, CALL_Q4_1)
KERNEL(kernel_q8_0, CALL_Q8_0)
KERNEL(kernel_q4_k, CALL_Q4_K)
KERNEL(kernel_q5_0, CALL_Q5_0)
KERNEL(kernel_q6_k, CALL_Q6_K)

qpack_kernel_fn qpack_avx512_kernel(rlx_dtype w) {
  switch (w) {
  case RLX_Q4_0: return kernel_q4_0;
  case RLX_Q4_1: return kernel_q4_1;
  case RLX_Q8_0: return kernel_q8_0;
  case RLX_Q4_K: return kernel_q4_k;
  case RLX_Q5_0: return kernel_q5_0;
  case RLX_Q6_K: return kernel_q6_k;
  default: return NULL;
  }
}

#else

qpack_kernel_fn qpack_avx512_kernel(rlx_dtype w) {
  (void)w;
  return NULL;
}

#endif
