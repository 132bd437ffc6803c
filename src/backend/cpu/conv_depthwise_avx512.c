/* conv_depthwise_avx512.c — the AVX-512 depthwise 3 x 3 plane (stride 1
 * or 2 along W, dilation 1: MobileNet's layers). Compiled with -mavx512f
 * -mavx512bw -mavx512vl -mfma; called only when cpu_features.h says the
 * CPU has them.
 *
 * 16 output positions of a row are made in one register: the bias, then
 * for each kernel row inside the input (rows in the padding add nothing)
 * its three taps, each the 16 input columns it reads as one masked load
 * (stride 2: the even or odd lanes of two loads, vpermt2ps); columns
 * outside the input are masked off, so the padding costs no copy of the
 * plane. Planes of rows of one or two vectors are made a column of such
 * vectors at a time, down all rows, so each column's masks are worked out
 * once; wider ones row after row. The epilogue
 * (residual, relu or none, clamp) is applied before the vector's one
 * store; other activations run on the stored plane (cpu_gemm_row_post,
 * while it is in cache).
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

/* The masks of the loads one vector of outputs makes in a row (stride 1:
 * columns s, s + 1, s + 2; stride 2: s, s + 16, s + 2, s + 18). */
typedef struct {
  __mmask16 m[4];
} tap_masks;

static inline tap_masks block_masks(int64_t s, int64_t W, int64_t sw) {
  tap_masks t;
  if (sw == 1) {
    t.m[0] = cols_mask(s, W), t.m[1] = cols_mask(s + 1, W), t.m[2] = cols_mask(s + 2, W), t.m[3] = 0;
  } else {
    t.m[0] = cols_mask(s, W), t.m[1] = cols_mask(s + 16, W);
    t.m[2] = cols_mask(s + 2, W), t.m[3] = cols_mask(s + 18, W);
  }
  return t;
}

/* 16 columns of row r from column s under mask m; the address is formed
 * only for a load with lanes inside the row. */
static inline __m512 load_masked(const float *r, int64_t s, __mmask16 m) {
  return m ? _mm512_maskz_loadu_ps(m, (const float *)((uintptr_t)r + (uintptr_t)(s * (int64_t)sizeof(float))))
           : _mm512_setzero_ps();
}

/* acc + the three taps of input row r for the 16 outputs whose first tap
 * is column s (stride 1 or 2); `edge`: columns may fall outside the row,
 * the loads take the masks tm. */
static inline __attribute__((always_inline)) __m512 row_taps(__m512 acc, const float *r, int64_t s, int64_t sw,
                                                             int edge, const tap_masks *tm, __m512 w0, __m512 w1,
                                                             __m512 w2) {
  if (sw == 1) {
    const __m512 a = edge ? load_masked(r, s, tm->m[0]) : _mm512_loadu_ps(r + s);
    const __m512 b = edge ? load_masked(r, s + 1, tm->m[1]) : _mm512_loadu_ps(r + s + 1);
    const __m512 c = edge ? load_masked(r, s + 2, tm->m[2]) : _mm512_loadu_ps(r + s + 2);
    return _mm512_fmadd_ps(w2, c, _mm512_fmadd_ps(w1, b, _mm512_fmadd_ps(w0, a, acc)));
  }
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  const __m512 a = edge ? load_masked(r, s, tm->m[0]) : _mm512_loadu_ps(r + s);
  const __m512 b = edge ? load_masked(r, s + 16, tm->m[1]) : _mm512_loadu_ps(r + s + 16);
  const __m512 c = edge ? load_masked(r, s + 2, tm->m[2]) : _mm512_loadu_ps(r + s + 2);
  const __m512 d = edge ? load_masked(r, s + 18, tm->m[3]) : _mm512_loadu_ps(r + s + 18);
  acc = _mm512_fmadd_ps(w0, _mm512_permutex2var_ps(a, even, b), acc);
  acc = _mm512_fmadd_ps(w1, _mm512_permutex2var_ps(a, odd, b), acc);
  return _mm512_fmadd_ps(w2, _mm512_permutex2var_ps(c, even, d), acc);
}

/* The 16 outputs from ow0 of one row: rows r0..r2 (NULL: in the padding). */
static inline __attribute__((always_inline)) __m512 taps16(const float *r0, const float *r1, const float *r2,
                                                           int64_t s, int64_t sw, int edge, const tap_masks *tm,
                                                           const __m512 *wk, __m512 acc) {
  if (r0) acc = row_taps(acc, r0, s, sw, edge, tm, wk[0], wk[1], wk[2]);
  if (r1) acc = row_taps(acc, r1, s, sw, edge, tm, wk[3], wk[4], wk[5]);
  if (r2) acc = row_taps(acc, r2, s, sw, edge, tm, wk[6], wk[7], wk[8]);
  return acc;
}

/* One column of vectors (outputs ow0 .. ow0 + 15 of every row): the
 * masks depend on the columns only, so they are worked out once here, not
 * once a row (on the narrow planes of stride 2 every vector is an edge
 * one, and the masks were most of its work). */
static inline __attribute__((always_inline)) void column(const conv_geom *g, const float *x, const __m512 *wk,
                                                         __m512 vb, float *y, const float *res,
                                                         const conv_epilogue *ce, const int64_t sw, int64_t ow0,
                                                         int edge) {
  const int64_t H = g->in[0], W = g->in[1], OH = g->out[0], OW = g->out[1];
  const int64_t sh = g->stride[0], ph = g->pad[0];
  const int in_reg = !ce || ce->act == RLX_ACT_NONE || ce->act == RLX_ACT_RELU;
  const int relu = ce && ce->act == RLX_ACT_RELU, clamp = ce && ce->clamp;
  const __m512 lo = _mm512_set1_ps(clamp ? ce->lo : 0.0f), hi = _mm512_set1_ps(clamp ? ce->hi : 0.0f);
  const int64_t s = sw * ow0 - g->pad[1];
  const tap_masks tm = edge ? block_masks(s, W, sw) : (tap_masks){{0, 0, 0, 0}};
  const __mmask16 m = simd16_tail_mask(OW - ow0);
  for (int64_t oh = 0; oh < OH; oh++) {
    const int64_t ih0 = oh * sh - ph;
    const float *r0 = ih0 >= 0 && ih0 < H ? x + ih0 * W : NULL;
    const float *r1 = ih0 + 1 >= 0 && ih0 + 1 < H ? x + (ih0 + 1) * W : NULL;
    const float *r2 = ih0 + 2 >= 0 && ih0 + 2 < H ? x + (ih0 + 2) * W : NULL;
    __m512 v = taps16(r0, r1, r2, s, sw, edge, &tm, wk, vb);
    if (in_reg) {
      if (res) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, res + oh * OW + ow0));
      if (relu) v = _mm512_max_ps(_mm512_setzero_ps(), v); /* NaN and -0 pass, as the GEMM's */
      if (clamp) v = _mm512_min_ps(hi, _mm512_max_ps(lo, v)); /* NaN stays */
    }
    _mm512_mask_storeu_ps(y + oh * OW + ow0, m, v);
  }
}

/* The epilogue applied in the register: residual, relu, clamp. */
typedef struct {
  int in_reg, relu, clamp;
  __m512 lo, hi;
} reg_epilogue;

/* The vector of outputs ow0 .. ow0 + 15 (lanes m) of row oh, whose first
 * tap is column s, stored with the epilogue. */
static inline __attribute__((always_inline)) void out_vector(const conv_geom *g, const float *x, const __m512 *wk,
                                                             __m512 vb, float *y, const float *res,
                                                             const reg_epilogue re, const int64_t sw, int64_t ow0,
                                                             int64_t s, int edge, const tap_masks *tm, __mmask16 m,
                                                             int64_t oh) {
  const int64_t H = g->in[0], W = g->in[1], OW = g->out[1];
  const int64_t ih0 = oh * g->stride[0] - g->pad[0];
  const float *r0 = ih0 >= 0 && ih0 < H ? x + ih0 * W : NULL;
  const float *r1 = ih0 + 1 >= 0 && ih0 + 1 < H ? x + (ih0 + 1) * W : NULL;
  const float *r2 = ih0 + 2 >= 0 && ih0 + 2 < H ? x + (ih0 + 2) * W : NULL;
  __m512 v = taps16(r0, r1, r2, s, sw, edge, tm, wk, vb);
  if (re.in_reg) {
    if (res) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, res + oh * OW + ow0));
    if (re.relu) v = _mm512_max_ps(_mm512_setzero_ps(), v); /* NaN and -0 pass, as the GEMM's */
    if (re.clamp) v = _mm512_min_ps(re.hi, _mm512_max_ps(re.lo, v)); /* NaN stays */
  }
  _mm512_mask_storeu_ps(y + oh * OW + ow0, m, v);
}

/* Vectors of a row that a pass of wide_rows reads the input for (128
 * outputs: 256 input columns at stride 2) */
#define ROW_VECS 8

/* A plane of rows of more than two vectors, in passes of up to ROW_VECS
 * vectors of each row, row after row: the input is read in the order it
 * lies (a column of vectors down all rows read a wide plane from L3 in
 * strided runs of a few lines a row; planes of one or two vectors a row,
 * in cache, ran slower this way). */
static inline __attribute__((always_inline)) void wide_rows(const conv_geom *g, const float *x, const __m512 *wk,
                                                            __m512 vb, float *y, const float *res,
                                                            const reg_epilogue re, const int64_t sw,
                                                            const int64_t span) {
  const int64_t W = g->in[1], OW = g->out[1];
  for (int64_t c0 = 0; c0 < OW; c0 += 16 * ROW_VECS) {
    const int nv = (int)((OW - c0 + 15) / 16 < ROW_VECS ? (OW - c0 + 15) / 16 : ROW_VECS);
    int64_t st[ROW_VECS];
    int edge[ROW_VECS];
    tap_masks tm[ROW_VECS];
    __mmask16 m[ROW_VECS];
    for (int v = 0; v < nv; v++) {
      const int64_t ow0 = c0 + 16 * v;
      st[v] = sw * ow0 - g->pad[1];
      edge[v] = !(st[v] >= 0 && st[v] + span <= W);
      tm[v] = edge[v] ? block_masks(st[v], W, sw) : (tap_masks){{0, 0, 0, 0}};
      m[v] = simd16_tail_mask(OW - ow0);
    }
    for (int64_t oh = 0; oh < g->out[0]; oh++)
      for (int v = 0; v < nv; v++) {
        if (edge[v])
          out_vector(g, x, wk, vb, y, res, re, sw, c0 + 16 * v, st[v], 1, &tm[v], m[v], oh);
        else
          out_vector(g, x, wk, vb, y, res, re, sw, c0 + 16 * v, st[v], 0, &tm[v], m[v], oh);
      }
  }
}

static inline __attribute__((always_inline)) void plane(const conv_geom *g, const float *x, const __m512 *wk,
                                                        __m512 vb, float *y, const float *res,
                                                        const conv_epilogue *ce, const int64_t sw) {
  const int64_t W = g->in[1], OH = g->out[0], OW = g->out[1];
  /* the columns a vector reads: s .. s + span - 1 */
  const int64_t span = sw == 1 ? 18 : 34;
  const int clamp = ce && ce->clamp;
  const reg_epilogue re = {.in_reg = !ce || ce->act == RLX_ACT_NONE || ce->act == RLX_ACT_RELU,
                           .relu = ce && ce->act == RLX_ACT_RELU, .clamp = clamp,
                           .lo = _mm512_set1_ps(clamp ? ce->lo : 0.0f), .hi = _mm512_set1_ps(clamp ? ce->hi : 0.0f)};
  if (conv_dw3x3_wide_rows(g)) {
    wide_rows(g, x, wk, vb, y, res, re, sw, span);
  } else {
    for (int64_t ow0 = 0; ow0 < OW; ow0 += 16) {
      const int64_t s = sw * ow0 - g->pad[1];
      if (s >= 0 && s + span <= W)
        column(g, x, wk, vb, y, res, ce, sw, ow0, 0);
      else
        column(g, x, wk, vb, y, res, ce, sw, ow0, 1);
    }
  }
  if (!re.in_reg) /* the plane is still in cache */
    for (int64_t oh = 0; oh < OH; oh++) cpu_gemm_row_post(y + oh * OW, OW, 0.0f, res ? res + oh * OW : NULL, ce);
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

void conv_dw3x3_flat_masks_avx512(uint16_t *masks, int64_t OH, int64_t H, int64_t W, int64_t ph, int64_t pw) {
  /* each lane's output row and column, carried from vector to vector */
  __m512i oh = _mm512_setzero_si512(), ow = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i vw = _mm512_set1_epi32((int)W), one = _mm512_set1_epi32(1), step = _mm512_set1_epi32(16);
  for (__mmask16 past = _mm512_cmpge_epi32_mask(ow, vw); past; past = _mm512_cmpge_epi32_mask(ow, vw)) {
    ow = _mm512_mask_sub_epi32(ow, past, ow, vw);
    oh = _mm512_mask_add_epi32(oh, past, oh, one);
  }
  for (int64_t v = 0, vecs = (OH * W + 15) / 16; v < vecs; v++, masks += 9) {
    const __mmask16 live = _mm512_cmplt_epi32_mask(oh, _mm512_set1_epi32((int)OH));
    __mmask16 row_ok[3], col_ok[3];
    for (int k = 0; k < 3; k++) { /* input row oh - ph + k and column ow - pw + k inside */
      const __m512i ih = _mm512_add_epi32(oh, _mm512_set1_epi32((int)(k - ph)));
      const __m512i iw = _mm512_add_epi32(ow, _mm512_set1_epi32((int)(k - pw)));
      row_ok[k] = _mm512_mask_cmplt_epi32_mask(_mm512_cmpge_epi32_mask(ih, _mm512_setzero_si512()), ih,
                                               _mm512_set1_epi32((int)H)) & live;
      col_ok[k] = _mm512_mask_cmplt_epi32_mask(_mm512_cmpge_epi32_mask(iw, _mm512_setzero_si512()), iw, vw);
    }
    for (int t = 0; t < 9; t++) masks[t] = (uint16_t)(row_ok[t / 3] & col_ok[t % 3]);
    ow = _mm512_add_epi32(ow, step);
    for (__mmask16 past = _mm512_cmpge_epi32_mask(ow, vw); past; past = _mm512_cmpge_epi32_mask(ow, vw)) {
      ow = _mm512_mask_sub_epi32(ow, past, ow, vw);
      oh = _mm512_mask_add_epi32(oh, past, oh, one);
    }
  }
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
