/* pool_max_avx512.c — F32 max pooling of one plane with windows three
 * columns wide at stride 1 or 2 along W (ResNet's 3 x 3 stride-2 pool)
 * on AVX-512. Compiled with -mavx512f -mavx512bw -mavx512vl -mfma; called
 * only when cpu_features.h says the CPU has them.
 *
 * An output row is made 16 positions at a time in one register, as the
 * depthwise plane kernel makes its rows (conv_depthwise_avx512.c): per
 * window row inside the input, its three columns as three vectors (stride
 * 2: the even and odd lanes of two loads, vpermt2ps), columns outside the
 * input read as -inf through masked loads (no padded copy). The maxima are
 * taken in window order, each `v > m ? v : m` (vmaxps), so that of equal
 * values (-0, +0) the first one wins, as in the reference loops.
 */
#include "pool_max.h"

#if defined(__x86_64__) || defined(__i386__)
#include "simd512.h"

#include <immintrin.h>
#include <math.h>
#include <stdint.h>

/* Lanes l of a load of 16 columns from column s with 0 <= s + l < W. */
static inline __mmask16 cols_mask(int64_t s, int64_t W) {
  const int64_t lo = s < 0 ? -s : 0, hi = W - s < 16 ? W - s : 16;
  if (hi <= lo) return 0;
  return (__mmask16)((((uint32_t)1 << hi) - 1u) & ~(((uint32_t)1 << lo) - 1u));
}

/* Columns s .. s + 15 of row r, -inf outside [0, W); the address is formed
 * only for a load with lanes inside the row. */
static inline __m512 load_cols(const float *r, int64_t s, int64_t W, __m512 ninf) {
  const __mmask16 m = cols_mask(s, W);
  return m ? _mm512_mask_loadu_ps(ninf, m, (const float *)((uintptr_t)r + (uintptr_t)(s * (int64_t)sizeof(float))))
           : ninf;
}

/* m, then each of the three columns of row r for the 16 outputs whose
 * window starts at column s, in column order. */
static inline __attribute__((always_inline)) __m512 row_max(__m512 m, const float *r, int64_t s, int64_t W,
                                                            int64_t sw, int edge, __m512 ninf) {
  if (sw == 1) {
    m = _mm512_max_ps(edge ? load_cols(r, s, W, ninf) : _mm512_loadu_ps(r + s), m);
    m = _mm512_max_ps(edge ? load_cols(r, s + 1, W, ninf) : _mm512_loadu_ps(r + s + 1), m);
    return _mm512_max_ps(edge ? load_cols(r, s + 2, W, ninf) : _mm512_loadu_ps(r + s + 2), m);
  }
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  const __m512 a = edge ? load_cols(r, s, W, ninf) : _mm512_loadu_ps(r + s);
  const __m512 b = edge ? load_cols(r, s + 16, W, ninf) : _mm512_loadu_ps(r + s + 16);
  const __m512 c = edge ? load_cols(r, s + 2, W, ninf) : _mm512_loadu_ps(r + s + 2);
  const __m512 d = edge ? load_cols(r, s + 18, W, ninf) : _mm512_loadu_ps(r + s + 18);
  m = _mm512_max_ps(_mm512_permutex2var_ps(a, even, b), m);
  m = _mm512_max_ps(_mm512_permutex2var_ps(a, odd, b), m);
  return _mm512_max_ps(_mm512_permutex2var_ps(c, even, d), m);
}

static inline __attribute__((always_inline)) void plane(const conv_geom *g, const float *x, float *y,
                                                        const int64_t sw) {
  const int64_t H = g->in[0], W = g->in[1], OH = g->out[0], OW = g->out[1], KH = g->k[0];
  const int64_t sh = g->stride[0], ph = g->pad[0], pw = g->pad[1];
  const __m512 ninf = _mm512_set1_ps(-INFINITY);
  const int64_t span = sw == 1 ? 18 : 34; /* the columns a vector reads: s .. s + span - 1 */
  for (int64_t oh = 0; oh < OH; oh++) {
    const int64_t h0 = oh * sh - ph;
    const int64_t kh0 = h0 < 0 ? -h0 : 0, kh1 = H - h0 < KH ? H - h0 : KH;
    float *yr = y + oh * OW;
    for (int64_t ow0 = 0; ow0 < OW; ow0 += 16) {
      const int64_t s = sw * ow0 - pw;
      __m512 m = ninf;
      if (s >= 0 && s + span <= W)
        for (int64_t kh = kh0; kh < kh1; kh++) m = row_max(m, x + (h0 + kh) * W, s, W, sw, 0, ninf);
      else
        for (int64_t kh = kh0; kh < kh1; kh++) m = row_max(m, x + (h0 + kh) * W, s, W, sw, 1, ninf);
      _mm512_mask_storeu_ps(yr + ow0, simd16_tail_mask(OW - ow0), m);
    }
  }
}

int pool_max3_plane_avx512(const conv_geom *g, const float *x, float *y) {
  const int64_t n = g->in[0] * g->in[1];
  __mmask16 nan = 0;
  for (int64_t i = 0; i < n; i += 16) {
    const __m512 v = _mm512_maskz_loadu_ps(simd16_tail_mask(n - i), x + i);
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  }
  if (nan) return 1;
  if (g->stride[1] == 1)
    plane(g, x, y, 1);
  else
    plane(g, x, y, 2);
  return 0;
}

#endif /* x86 */
