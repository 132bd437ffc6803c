/* pool_max_avx512.c — F32 max pooling of one plane with windows three
 * columns wide at stride 1 or 2 along W (ResNet's 3 x 3 stride-2 pool)
 * on AVX-512. Compiled with -mavx512f -mavx512bw -mavx512vl -mfma; called
 * only when cpu_features.h says the CPU has them.
 *
 * An output row is made in two passes, as the generic rows path of
 * k_conv.c makes it: the maxima of the window's input rows into a scratch
 * row with -inf in its padding, 16 columns a vector, then each window's
 * three columns from that row, 16 outputs a vector (stride 2: the even and
 * odd lanes of two loads, vpermt2ps). Each maximum is `v > m ? v : m`
 * (vmaxps); taken rows first, of equal values (-0, +0) the one kept may
 * differ from the reference loops' (window order), never the value. A
 * NaN (the reference loops propagate it) is found by compares of each
 * input row before its first use.
 */
#include "pool_max.h"

#if defined(__x86_64__) || defined(__i386__)
#include "simd512.h"

#include <immintrin.h>
#include <math.h>
#include <stdint.h>

/* The row of window-row maxima that plane() reads its windows from: -inf
 * in the POOL_MAX3_LEFT columns before the input's and after its W up to
 * the last vector's reach, so the column pass needs no masks. */
#define POOL_MAX3_LEFT 16

size_t pool_max3_row_floats(const conv_geom *g) {
  const int64_t sw = g->stride[1], OW = g->out[1], W = g->in[1];
  const int64_t reach = sw * ((OW + 15) / 16 * 16 - 16) - g->pad[1] + (sw == 1 ? 18 : 34);
  return (size_t)(POOL_MAX3_LEFT + (reach > W ? reach : W));
}

/* The rows first: each input column is loaded once an output row, not
 * once for each of its three window columns, and a stride-2 vector takes
 * three lane permutes, not nine (a window row at a time: ResNet-50's
 * 112 x 112 planes 1.7x slower, with a separate pass of NaN compares over
 * the plane). 1 where a window row holds a NaN. */
static inline __attribute__((always_inline)) int plane(const conv_geom *g, const float *x, float *y, float *row,
                                                       const int64_t sw) {
  const int64_t H = g->in[0], W = g->in[1], OH = g->out[0], OW = g->out[1], KH = g->k[0];
  const int64_t sh = g->stride[0], ph = g->pad[0], pw = g->pad[1];
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  float *r = row + POOL_MAX3_LEFT - pw; /* r[s]: window column s from the left pad */
  int64_t checked = 0;                  /* the input rows before it hold no NaN */
  for (int64_t oh = 0; oh < OH; oh++) {
    const int64_t h0 = oh * sh - ph;
    const int64_t kh0 = h0 < 0 ? -h0 : 0, kh1 = H - h0 < KH ? H - h0 : KH;
    __mmask16 nan = 0;
    for (checked = checked > h0 + kh0 ? checked : h0 + kh0; checked < h0 + kh1; checked++)
      for (int64_t j = 0; j < W; j += 16) {
        const __m512 v = _mm512_maskz_loadu_ps(simd16_tail_mask(W - j), x + checked * W + j);
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
      }
    if (nan) return 1;
    const float *x0 = x + (h0 + kh0) * W;
    for (int64_t j = 0; j < W; j += 16) {
      const __mmask16 t = simd16_tail_mask(W - j);
      __m512 m = _mm512_maskz_loadu_ps(t, x0 + j);
      for (int64_t kh = 1; kh < kh1 - kh0; kh++) m = _mm512_max_ps(_mm512_maskz_loadu_ps(t, x0 + kh * W + j), m);
      _mm512_mask_storeu_ps(row + POOL_MAX3_LEFT + j, t, m);
    }
    float *yr = y + oh * OW;
    for (int64_t ow0 = 0; ow0 < OW; ow0 += 16) {
      const float *c = r + sw * ow0;
      __m512 m;
      if (sw == 1) {
        m = _mm512_loadu_ps(c);
        m = _mm512_max_ps(_mm512_loadu_ps(c + 1), m);
        m = _mm512_max_ps(_mm512_loadu_ps(c + 2), m);
      } else {
        const __m512 a = _mm512_loadu_ps(c), b = _mm512_loadu_ps(c + 16);
        m = _mm512_permutex2var_ps(a, even, b);
        m = _mm512_max_ps(_mm512_permutex2var_ps(a, odd, b), m);
        m = _mm512_max_ps(_mm512_permutex2var_ps(_mm512_loadu_ps(c + 2), even, _mm512_loadu_ps(c + 18)), m);
      }
      _mm512_mask_storeu_ps(yr + ow0, simd16_tail_mask(OW - ow0), m);
    }
  }
  return 0;
}

int pool_max3_plane_avx512(const conv_geom *g, const float *x, float *y, float *row) {
  const int64_t len = (int64_t)pool_max3_row_floats(g);
  const __m512 ninf = _mm512_set1_ps(-INFINITY);
  _mm512_storeu_ps(row, ninf);
  for (int64_t j = POOL_MAX3_LEFT + g->in[1]; j < len; j += 16)
    _mm512_mask_storeu_ps(row + j, simd16_tail_mask(len - j), ninf);
  return g->stride[1] == 1 ? plane(g, x, y, row, 1) : plane(g, x, y, row, 2);
}

#endif /* x86 */
