/* conv_depthwise_avx512.c — the AVX-512 depthwise 3 x 3 plane (stride 1
 * or 2 along W, dilation 1: MobileNet's layers). Compiled with -mavx512f
 * -mavx512bw -mavx512vl -mfma; called only when cpu_features.h says the
 * CPU has them.
 *
 * An output row is made 16 positions at a time in one register: the bias,
 * then for each kernel row inside the input (rows in the padding add
 * nothing) its three taps, each the 16 input columns it reads as one
 * masked load (stride 2: the even or odd lanes of two loads, vpermt2ps);
 * columns outside the input are masked off, so the padding costs no copy
 * of the plane. The epilogue (residual, relu or none, clamp) is applied
 * before the row's one store; other activations run on the stored row
 * (cpu_gemm_row_post, while it is in L1).
 */
#include "conv_depthwise.h"

#if defined(__x86_64__) || defined(__i386__)
#include "simd512.h"

#include <immintrin.h>
#include <stdint.h>

/* Lanes l of a load of 16 columns from column s with 0 <= s + l < W. */
static inline __mmask16 cols_mask(int64_t s, int64_t W) {
  const int64_t lo = s < 0 ? -s : 0, hi = W - s < 16 ? W - s : 16;
  if (hi <= lo) return 0;
  return (__mmask16)((((uint32_t)1 << hi) - 1u) & ~(((uint32_t)1 << lo) - 1u));
}

/* Columns s .. s + 15 of row r (0 outside [0, W)); the address is formed
 * only for a load with lanes inside the row. */
static inline __m512 load_cols(const float *r, int64_t s, int64_t W) {
  const __mmask16 m = cols_mask(s, W);
  return m ? _mm512_maskz_loadu_ps(m, (const float *)((uintptr_t)r + (uintptr_t)(s * (int64_t)sizeof(float))))
           : _mm512_setzero_ps();
}

/* acc + the three taps of input row r for the 16 outputs whose first tap
 * is column s (stride 1 or 2); `edge`: columns may fall outside [0, W). */
static inline __attribute__((always_inline)) __m512 row_taps(__m512 acc, const float *r, int64_t s, int64_t W,
                                                             int64_t sw, int edge, __m512 w0, __m512 w1, __m512 w2) {
  if (sw == 1) {
    const __m512 a = edge ? load_cols(r, s, W) : _mm512_loadu_ps(r + s);
    const __m512 b = edge ? load_cols(r, s + 1, W) : _mm512_loadu_ps(r + s + 1);
    const __m512 c = edge ? load_cols(r, s + 2, W) : _mm512_loadu_ps(r + s + 2);
    return _mm512_fmadd_ps(w2, c, _mm512_fmadd_ps(w1, b, _mm512_fmadd_ps(w0, a, acc)));
  }
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  const __m512 a = edge ? load_cols(r, s, W) : _mm512_loadu_ps(r + s);
  const __m512 b = edge ? load_cols(r, s + 16, W) : _mm512_loadu_ps(r + s + 16);
  const __m512 c = edge ? load_cols(r, s + 2, W) : _mm512_loadu_ps(r + s + 2);
  const __m512 d = edge ? load_cols(r, s + 18, W) : _mm512_loadu_ps(r + s + 18);
  acc = _mm512_fmadd_ps(w0, _mm512_permutex2var_ps(a, even, b), acc);
  acc = _mm512_fmadd_ps(w1, _mm512_permutex2var_ps(a, odd, b), acc);
  return _mm512_fmadd_ps(w2, _mm512_permutex2var_ps(c, even, d), acc);
}

/* The 16 outputs from ow0 of one row: rows r0..r2 (NULL: in the padding). */
static inline __attribute__((always_inline)) __m512 taps16(const float *r0, const float *r1, const float *r2,
                                                           int64_t s, int64_t W, int64_t sw, int edge,
                                                           const __m512 *wk, __m512 acc) {
  if (r0) acc = row_taps(acc, r0, s, W, sw, edge, wk[0], wk[1], wk[2]);
  if (r1) acc = row_taps(acc, r1, s, W, sw, edge, wk[3], wk[4], wk[5]);
  if (r2) acc = row_taps(acc, r2, s, W, sw, edge, wk[6], wk[7], wk[8]);
  return acc;
}

static inline __attribute__((always_inline)) void plane(const conv_geom *g, const float *x, const __m512 *wk,
                                                        __m512 vb, float *y, const float *res,
                                                        const conv_epilogue *ce, const int64_t sw) {
  const int64_t H = g->in[0], W = g->in[1], OH = g->out[0], OW = g->out[1];
  const int64_t sh = g->stride[0], ph = g->pad[0], pw = g->pad[1];
  const int in_reg = !ce || ce->act == RLX_ACT_NONE || ce->act == RLX_ACT_RELU;
  const int relu = ce && ce->act == RLX_ACT_RELU, clamp = ce && ce->clamp;
  const __m512 lo = _mm512_set1_ps(clamp ? ce->lo : 0.0f), hi = _mm512_set1_ps(clamp ? ce->hi : 0.0f);
  /* the columns a vector reads: s .. s + span - 1 */
  const int64_t span = sw == 1 ? 18 : 34;
  for (int64_t oh = 0; oh < OH; oh++) {
    const int64_t ih0 = oh * sh - ph;
    const float *r0 = ih0 >= 0 && ih0 < H ? x + ih0 * W : NULL;
    const float *r1 = ih0 + 1 >= 0 && ih0 + 1 < H ? x + (ih0 + 1) * W : NULL;
    const float *r2 = ih0 + 2 >= 0 && ih0 + 2 < H ? x + (ih0 + 2) * W : NULL;
    float *yr = y + oh * OW;
    const float *rr = res ? res + oh * OW : NULL;
    for (int64_t ow0 = 0; ow0 < OW; ow0 += 16) {
      const int64_t s = sw * ow0 - pw;
      const __m512 acc = s >= 0 && s + span <= W ? taps16(r0, r1, r2, s, W, sw, 0, wk, vb)
                                                 : taps16(r0, r1, r2, s, W, sw, 1, wk, vb);
      const __mmask16 m = simd16_tail_mask(OW - ow0);
      __m512 v = acc;
      if (in_reg) {
        if (rr) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, rr + ow0));
        if (relu) v = _mm512_max_ps(_mm512_setzero_ps(), v); /* NaN and -0 pass, as the GEMM's */
        if (clamp) v = _mm512_min_ps(hi, _mm512_max_ps(lo, v)); /* NaN stays */
      }
      _mm512_mask_storeu_ps(yr + ow0, m, v);
    }
    if (!in_reg) cpu_gemm_row_post(yr, OW, 0.0f, rr, ce);
  }
}

void conv_dw3x3_flat_avx512(const float *x, const float *w, float bias, float *y, const float *res,
                            const conv_epilogue *ce, const uint16_t *masks, int64_t P, int64_t W, int64_t ph,
                            int64_t pw) {
  const int in_reg = !ce || ce->act == RLX_ACT_NONE || ce->act == RLX_ACT_RELU;
  const int relu = ce && ce->act == RLX_ACT_RELU, clamp = ce && ce->clamp;
  const __m512 lo = _mm512_set1_ps(clamp ? ce->lo : 0.0f), hi = _mm512_set1_ps(clamp ? ce->hi : 0.0f);
  __m512 wk[9];
  int64_t off[9]; /* input offset of tap t from the output position */
  for (int t = 0; t < 9; t++) {
    wk[t] = _mm512_set1_ps(w[t]);
    off[t] = (t / 3 - ph) * W + (t % 3 - pw);
  }
  const __m512 vb = _mm512_set1_ps(bias);
  for (int64_t p0 = 0; p0 < P; p0 += 16, masks += 9) {
    /* a sum per kernel row: three chains of three FMAs, not one of nine
     * (the FMA latency, not the loads, bounded one chain) */
    __m512 part[3] = {vb, _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int t = 0; t < 9; t++) /* unrolled: a masked load and an FMA per tap */
      part[t / 3] = _mm512_fmadd_ps(
          wk[t], _mm512_maskz_loadu_ps(masks[t], (const float *)((uintptr_t)x + (uintptr_t)((p0 + off[t]) * 4))),
          part[t / 3]);
    __m512 acc = _mm512_add_ps(_mm512_add_ps(part[0], part[1]), part[2]);
    const __mmask16 m = simd16_tail_mask(P - p0);
    if (in_reg) {
      if (res) acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(m, res + p0));
      if (relu) acc = _mm512_max_ps(_mm512_setzero_ps(), acc); /* NaN and -0 pass, as the GEMM's */
      if (clamp) acc = _mm512_min_ps(hi, _mm512_max_ps(lo, acc)); /* NaN stays */
    }
    _mm512_mask_storeu_ps(y + p0, m, acc);
  }
  if (!in_reg) cpu_gemm_row_post(y, P, 0.0f, res, ce);
}

void conv_dw3x3_plane_avx512(const conv_geom *g, const float *x, const float *w, float bias, float *y,
                             const float *res, const conv_epilogue *ce) {
  __m512 wk[9];
  for (int i = 0; i < 9; i++) wk[i] = _mm512_set1_ps(w[i]);
  if (g->stride[1] == 1)
    plane(g, x, wk, _mm512_set1_ps(bias), y, res, ce, 1);
  else
    plane(g, x, wk, _mm512_set1_ps(bias), y, res, ce, 2);
}

#endif /* x86 */
