/* conv_im2col_avx512.c — a convolution's im2col columns written straight
 * into one GEMM panel with AVX-512 (compiled with -mavx512f -mavx512bw
 * -mavx512vl; called only when cpu_features.h says the CPU has them).
 *
 * A panel's positions [first, first + width) fall in a few output rows:
 * the segments. For each im2col row (c, kh, kw) the panel row of nr
 * floats is made in two registers: each segment inside the input rows
 * is one masked load a half (stride 2: the even lanes of two loads,
 * vpermt2ps), the lanes of taps in the padding masked off, so padding
 * costs no branch a position; then one store a half. The loads of each
 * kernel column (offsets and masks) and the offsets of each kernel row
 * are worked out once a panel, not once a tap or a channel. The scalar conv_im2col walked runs of a few floats a call
 * (ResNet-50's 3x3 convs: 7% of its time, 1 thread).
 */
#include "conv_im2col_avx512.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <stdint.h>

/* The segments a panel may have (32 positions over output rows of at
 * least 5), the taps of a kernel (7 x 7 and smaller) and the rows or
 * columns of one (the tables' sizes). */
#define MAX_SEGS 8
#define MAX_TAPS 49
#define MAX_SIDE 49

/* One segment's loads for one tap: from the channel's plane at off, with
 * masks m[0..1] (stride 1: the two halves of the panel row) or m[0..3]
 * (stride 2: the four raw loads whose even lanes make them). */
typedef struct {
  int64_t off;
  __mmask16 m[4];
} seg_load;

/* Bits [lo, hi) of a 16-lane mask, lo and hi clipped to [0, 16]. */
static inline __mmask16 lanes(int64_t lo, int64_t hi) {
  lo = lo < 0 ? 0 : lo > 16 ? 16 : lo;
  hi = hi < 0 ? 0 : hi > 16 ? 16 : hi;
  if (hi <= lo) return 0;
  return (__mmask16)((((uint32_t)1 << hi) - 1u) & ~(((uint32_t)1 << lo) - 1u));
}

/* into with lanes m loaded from p + i (the address formed as an integer:
 * p + i may lie outside the plane where those lanes are masked off; a
 * masked-off lane is never read). */
static inline __m512 load_at(__m512 into, __mmask16 m, const float *p, int64_t i) {
  return _mm512_mask_loadu_ps(into, m, (const float *)((uintptr_t)p + (uintptr_t)(i * (int64_t)sizeof(float))));
}

int conv_im2col_panel_avx512(const conv_geom *g, const float *x, int64_t r0, int64_t rows, int64_t first,
                             int64_t width, float *d, int64_t nr, int64_t ld) {
  const int64_t H = g->in[0], W = g->in[1], OW = g->out[1], KH = g->k[0], KW = g->k[1];
  const int64_t sh = g->stride[0], sw = g->stride[1], taps = KH * KW;
  if (nr > 32 || width > nr || width < 1 || ld < nr || (sw != 1 && sw != 2) || KH > MAX_SIDE || KW > MAX_SIDE || taps > MAX_TAPS)
    return 0;
  /* the segments: output row oh, first column ow, panel lanes [q, q + len) */
  int64_t seg_oh[MAX_SEGS], seg_ow[MAX_SEGS], seg_q[MAX_SEGS], seg_len[MAX_SEGS];
  int nseg = 0;
  for (int64_t q = 0; q < width;) {
    if (nseg == MAX_SEGS) return 0;
    const int64_t j = first + q, ow = j % OW, len = OW - ow < width - q ? OW - ow : width - q;
    seg_oh[nseg] = j / OW;
    seg_ow[nseg] = ow;
    seg_q[nseg] = q;
    seg_len[nseg++] = len;
    q += len;
  }
  /* a tap's loads, the same for every channel, are those of its kernel
   * column (masks, column offset) at its kernel row's offset, with no lanes
   * where that row is off the plane: KH + KW entries a segment to work
   * out, not KH x KW (a table of taps cost the 7x7 stem, 3 channels, much
   * of its panels' time) */
  const int sh1 = sw == 2; /* x / sw as x >> sh1 for x >= 0 */
  seg_load col[MAX_SIDE][MAX_SEGS];
  for (int64_t kw = 0; kw < KW; kw++)
    for (int s = 0; s < nseg; s++) {
      /* lane seg_q + i of the segment reads column iw0 + i * sw */
      const int64_t iw0 = seg_ow[s] * sw - g->pad[1] + kw * g->dil[1];
      int64_t a = iw0 < 0 ? (-iw0 + sw - 1) >> sh1 : 0, b = iw0 < W ? (W - iw0 + sw - 1) >> sh1 : 0;
      if (b > seg_len[s]) b = seg_len[s];
      if (b < a) b = a;
      a += seg_q[s]; /* lanes [a, b) of the panel row */
      b += seg_q[s];
      seg_load *e = &col[kw][s];
      if (sw == 1) { /* lane l: column iw0 - seg_q + l */
        e->off = iw0 - seg_q[s];
        e->m[0] = lanes(a, b);
        e->m[1] = lanes(a - 16, b - 16);
      } else { /* lane l: raw element 2l of the loads from iw0 - 2 seg_q; raw [2a, 2b - 1) */
        e->off = iw0 - 2 * seg_q[s];
        for (int h = 0; h < 4; h++) e->m[h] = lanes(2 * a - 16 * h, 2 * b - 1 - 16 * h);
      }
    }
  int64_t row_off[MAX_SIDE][MAX_SEGS];
  __mmask16 row_in[MAX_SIDE][MAX_SEGS]; /* all lanes, or none off the plane */
  for (int64_t kh = 0; kh < KH; kh++)
    for (int s = 0; s < nseg; s++) {
      const int64_t ih = seg_oh[s] * sh - g->pad[0] + kh * g->dil[0];
      row_in[kh][s] = ih < 0 || ih >= H ? 0 : 0xFFFF;
      row_off[kh][s] = ih * W;
    }
  const __mmask16 st_lo = lanes(0, nr), st_hi = lanes(0, nr - 16);
  const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  int64_t c = r0 / taps, kh = r0 % taps / KW, kw = r0 % KW;
  const float *xc = x + c * H * W;
  for (int64_t r = 0; r < rows; r++, d += ld) {
    __m512 lo = _mm512_setzero_ps(), hi = lo;
    const seg_load *e = col[kw];
    if (sw == 1) {
      for (int s = 0; s < nseg; s++) {
        const __mmask16 in = row_in[kh][s];
        const int64_t off = row_off[kh][s] + e[s].off;
        lo = load_at(lo, e[s].m[0] & in, xc, off);
        hi = load_at(hi, e[s].m[1] & in, xc, off + 16);
      }
    } else {
      __m512 r0v = lo, r1v = lo, r2v = lo, r3v = lo;
      for (int s = 0; s < nseg; s++) {
        const __mmask16 in = row_in[kh][s];
        const int64_t off = row_off[kh][s] + e[s].off;
        r0v = load_at(r0v, e[s].m[0] & in, xc, off);
        r1v = load_at(r1v, e[s].m[1] & in, xc, off + 16);
        r2v = load_at(r2v, e[s].m[2] & in, xc, off + 32);
        r3v = load_at(r3v, e[s].m[3] & in, xc, off + 48);
      }
      lo = _mm512_permutex2var_ps(r0v, evens, r1v);
      hi = _mm512_permutex2var_ps(r2v, evens, r3v);
    }
    _mm512_mask_storeu_ps(d, st_lo, lo);
    if (st_hi) _mm512_mask_storeu_ps(d + 16, st_hi, hi);
    if (++kw == KW) { /* the next kernel row */
      kw = 0;
      if (++kh == KH) { /* the next channel */
        kh = 0;
        xc += H * W;
      }
    }
  }
  return 1;
}

/* The even lanes of the 32 floats at p: one row's outputs [ow, ow + 16). */
static inline __m512 evens_at(const float *p, __m512i evens) {
  return _mm512_permutex2var_ps(_mm512_loadu_ps(p), evens, _mm512_loadu_ps(p + 16));
}

int conv_taps2_avx512(const float *x, int64_t planes, int64_t H, int64_t W, int64_t OH, int64_t OW, float *d) {
  /* A row's 32-float loads read on into the next input rows: for every
   * row but a plane's last, H - 1 - 2 oh >= 2 rows follow (2 OH <= H + 1),
   * 3 W >= 32 floats from the row's start, and the loads of OW >= 16
   * outputs end at most one float past the row. Its stores of 16 outputs
   * pass the row by at most 16 - OW <= OW floats (OW >= 8), which the next
   * row of the plane then stores. */
  if (W < 15) return 0;
  const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  for (int64_t p = 0; p < planes; p++) {
    const float *xp = x + p * H * W;
    for (int64_t oh = 0; oh < OH - 1; oh++, d += OW) {
      const float *xr = xp + 2 * oh * W;
      int64_t ow = 0;
      for (; ow + 16 < OW; ow += 16) _mm512_storeu_ps(d + ow, evens_at(xr + 2 * ow, evens));
      if (OW >= 16) ow = OW - 16; /* the last 16, overlapping */
      _mm512_storeu_ps(d + ow, evens_at(xr + 2 * ow, evens));
    }
    const float *xr = xp + 2 * (OH - 1) * W; /* the last row: raw [0, 2 OW - 1) */
    for (int64_t ow = 0; ow < OW; ow += 16) {
      const int64_t n = OW - ow < 16 ? OW - ow : 16;
      const __m512 lo = _mm512_maskz_loadu_ps(lanes(0, 2 * n - 1), xr + 2 * ow);
      const __m512 hi = _mm512_maskz_loadu_ps(lanes(0, 2 * n - 17), xr + 2 * ow + 16);
      _mm512_mask_storeu_ps(d + ow, lanes(0, n), _mm512_permutex2var_ps(lo, evens, hi));
    }
    d += OW;
  }
  return 1;
}

#endif /* x86 */
