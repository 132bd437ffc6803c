/* conv_direct_avx512.c — direct convolution with AVX-512 (compiled with
 * -mavx512f -mavx512bw -mavx512vl; used only when cpu_features.h says the
 * CPU has them).
 *
 * The im2col GEMM path writes every input tap of every output position
 * into the GEMM's panels (K x positions floats: 9 times the input for a
 * 3x3 kernel), which at ResNet's 56x56 stage took about a sixth of the
 * conv's time next to a micro-kernel already near the FMA ceiling. Here
 * the tap values are broadcast straight from the input: a tile is DR
 * consecutive output positions of one output row times DC output
 * channels, 28 accumulators; per K step (one input channel and kernel
 * tap) two vector loads of the packed weight (DC channels) and one
 * broadcast a position, each from the input plane at the tap's offset
 * (a table over K: position i of the tile reads base + off[k] + i *
 * stride). The input is copied once per image into a zero-padded plane,
 * so that no tap needs a bounds check. The tile's sums, positions x
 * channels, are turned back to channel rows through a small buffer (16 x
 * 16 register transposes) and stored with the epilogue: bias, residual,
 * activation, clamp.
 *
 * Convs of few K steps (the stems: 7x7 from 3 channels, K = 147; 3x3
 * from 3, K = 27) run the tile turned the other way (lanes_tile): vectors
 * of 16 consecutive output positions times LC channels, the input loaded
 * as vectors and the weight broadcast, so that each accumulator is a
 * piece of one channel's output row, stored as it is. Turning the tile
 * above into channel rows (then a gather a channel) took 16% of the stem's
 * time at K = 147. Their input is padded with each row's columns split
 * by phase of the stride (even columns, then odd), so that a tap's 16
 * positions are 16 consecutive floats.
 *
 * The weight is packed once ([OC / DC] panels of K x DC, zero past OC; LC
 * for the lanes tile) and kept in the weight's prepack slot.
 */
#include "conv_direct.h"

#include "cpu_features.h"
#include "huge_alloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "simd512.h"

#define DR 14 /* output positions a tile */
#define DC 32 /* output channels a tile */
/* K steps the prefetches of the weight panel and of the input taps run
 * ahead */
#define PREFETCH_K 24
/* An image's input (padded) of more bytes than this is not in L2 when a
 * channel block's pass over it ends: the next block would read it again
 * from L3. Past it a row's channel blocks run one after another instead,
 * taking the row's input from cache and the (smaller) weight from L2. */
#define ROWS_OUTER_BYTES ((int64_t)1 << 20)
/* The fewest input channels of a 1x1 conv taken here. With fewer the
 * GEMM, x in place and C stored along row panels, is faster; with more
 * its column blocks (L2-sized: 128 Ki floats / K) are too narrow, each
 * streaming the whole weight again, and here a channel block's weight
 * stays in L2. */
#define DIRECT_1X1_MIN_C 1024
/* The lanes tile: at most LV vectors of positions, LC channels (24 of the
 * 32 zmm registers accumulate), for convs of at most LANES_MAX_K steps */
#define LV 3
#define LC 8
#define LANES_MAX_K 256

typedef struct {
  float *w;    /* [ocb][K][DC] */
  size_t bytes;
} direct_weight;

static void direct_weight_free(void *p) {
  direct_weight *d = p;
  free(d->w);
  free(d);
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* The floats of each stride phase of a lanes tile's padded row: the
 * output row in whole vectors plus the taps' reach, in whole vectors
 * (the phases are split a vector at a time). */
static int64_t lanes_phase(const conv_geom *g) {
  const int64_t reach = (g->k[1] - 1) * g->dil[1] / g->stride[1];
  return ceil_div(ceil_div(g->out[1], 16) * 16 + reach, 16) * 16;
}

static int act_ok(const conv_epilogue *ce) {
  return !ce || ce->act == RLX_ACT_NONE || ce->act == RLX_ACT_RELU || ce->act == RLX_ACT_LEAKY_RELU;
}

int conv_direct_applies(const ir_node *n, const conv_geom *g, const cpu_tensor *in, const cpu_tensor *out,
                        const conv_epilogue *ce) {
  if (!cpu_get_features()->avx512 || n->a.groups != 1 || !in[1].prepack || !act_ok(ce)) return 0;
  if (out->dtype != RLX_F32 || in[0].dtype != RLX_F32 || in[1].dtype != RLX_F32) return 0;
  if (n->n_in >= 3 && in[2].dtype != RLX_F32) return 0;
  if (g->out[1] < 8) return 0;
  /* a 1x1 kernel: stride 1, from DIRECT_1X1_MIN_C channels, and whole
   * tiles of DC output channels (the GEMM reads x in place too, and its
   * rows waste nothing where the last channel tile here would be part
   * empty: 24 of 32) */
  if (g->k[0] * g->k[1] == 1 &&
      (g->stride[0] != 1 || g->stride[1] != 1 || in[0].d[1] < DIRECT_1X1_MIN_C || in[1].d[0] % DC != 0))
    return 0;
  if ((g->stride[0] != 1 && g->stride[0] != 2) || (g->stride[1] != 1 && g->stride[1] != 2)) return 0;
  /* the offsets table is int32: the padded plane of all channels must fit */
  const int64_t hp = (g->out[0] - 1) * g->stride[0] + (g->k[0] - 1) * g->dil[0] + 1;
  int64_t wp = (g->out[1] - 1) * g->stride[1] + (g->k[1] - 1) * g->dil[1] + 1;
  if (g->stride[1] * lanes_phase(g) > wp) wp = g->stride[1] * lanes_phase(g);
  const int64_t plane = hp * wp > g->in[0] * g->in[1] ? hp * wp : g->in[0] * g->in[1];
  return in[0].d[1] * plane < INT32_MAX / 2;
}

/* ---------------------------------------------------------------- tile */

/* The tile's sums, tb[i * DC + o] for positions i < mr, channels o < DC. */
static inline __attribute__((always_inline)) void tile_body(const int mr, const int sw, int64_t K, const float *x,
                                                              const int32_t *off, const float *w, float *tb) {
  __m512 c0[DR], c1[DR];
  _Pragma("GCC unroll 16") for (int i = 0; i < DR; i++) if (i < mr) c0[i] = c1[i] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k++) {
    const __m512 b0 = _mm512_load_ps(w), b1 = _mm512_load_ps(w + 16);
    _mm_prefetch((const char *)(w + PREFETCH_K * DC), _MM_HINT_T0);
    _mm_prefetch((const char *)(w + PREFETCH_K * DC + 16), _MM_HINT_T0);
    const float *pf = x + off[k + PREFETCH_K];
    _mm_prefetch((const char *)pf, _MM_HINT_T0);
    _mm_prefetch((const char *)(pf + (mr - 1) * sw), _MM_HINT_T0);
    const float *a = x + off[k];
    _Pragma("GCC unroll 16") for (int i = 0; i < DR; i++) if (i < mr) {
      const __m512 ai = _mm512_set1_ps(a[i * sw]);
      c0[i] = _mm512_fmadd_ps(ai, b0, c0[i]);
      c1[i] = _mm512_fmadd_ps(ai, b1, c1[i]);
    }
    w += DC;
  }
  _Pragma("GCC unroll 16") for (int i = 0; i < DR; i++) if (i < mr) {
    _mm512_store_ps(tb + i * DC, c0[i]);
    _mm512_store_ps(tb + i * DC + 16, c1[i]);
  }
}

#define TILE_CASE(r)                                                         \
  case r:                                                                    \
    if (sw == 1) tile_body(r, 1, K, x, off, w, tb);                          \
    else tile_body(r, 2, K, x, off, w, tb);                                  \
    break;

static void tile(int mr, int sw, int64_t K, const float *x, const int32_t *off, const float *w, float *tb) {
  switch (mr) {
    TILE_CASE(1) TILE_CASE(2) TILE_CASE(3) TILE_CASE(4) TILE_CASE(5) TILE_CASE(6) TILE_CASE(7)
    TILE_CASE(8) TILE_CASE(9) TILE_CASE(10) TILE_CASE(11) TILE_CASE(12) TILE_CASE(13) TILE_CASE(14)
  default: break;
  }
}

/* ---------------------------------------------------------------- driver */

typedef struct {
  const conv_geom *g;
  const float *x, *bias, *res; /* res: NULL, or [N, OC, P] */
  float *y;
  const float *wp;             /* packed weight */
  const float *xp;             /* the input, padded (image b0's) or in place */
  float *pad;                  /* one image's padded copy, NULL: none needed */
  int64_t b0;                  /* the image of item 0 */
  const int32_t *off;
  int64_t C, OC, K, P, hp, wp_w, ocb, tiles;
  int64_t ld, plane;           /* xp's row and channel strides */
  int rows_outer;              /* items by rows, then channel blocks */
  int lanes;                   /* the lanes tile: its weight panels and padded rows */
  int64_t phase;               /* lanes: the floats of a stride phase of a padded row */
  float *split;                /* lanes, stride 2: a padded row before its split, per thread */
  rlx_act act;
  float alpha;
  int clamp;
  float lo, hi;
} direct_job;

/* d[i] = s[i - p1] for the i < len where that is inside the input row s
 * of W floats, 0 for the rest (s NULL: a row of the padding). */
static void pad_row(float *d, const float *s, int64_t W, int64_t p1, int64_t len) {
  /* columns [c0, c1) of a padded row hold input columns [c0 - p1, c1 - p1) */
  const int64_t c0 = p1 < len ? p1 : len, c1 = p1 + W < len ? p1 + W : len;
  if (!s || c1 <= c0) {
    memset(d, 0, (size_t)len * sizeof *d);
    return;
  }
  memset(d, 0, (size_t)c0 * sizeof *d);
  memcpy(d + c0, s + (c0 - p1), (size_t)(c1 - c0) * sizeof *d);
  memset(d + c1, 0, (size_t)(len - c1) * sizeof *d);
}

/* The padded copy's planes [begin, end) (channel c of the image at x):
 * rows of wp_w floats, the input at (pad0, pad1), zero elsewhere. */
static void pad_channels(void *arg, int64_t begin, int64_t end, int thread) {
  (void)thread;
  const direct_job *J = arg;
  const conv_geom *g = J->g;
  const int64_t H = g->in[0], W = g->in[1];
  for (int64_t c = begin; c < end; c++) {
    float *d = J->pad + c * J->plane;
    for (int64_t r = 0, ih = -g->pad[0]; r < J->hp; r++, ih++, d += J->wp_w)
      pad_row(d, ih >= 0 && ih < H ? J->x + (c * H + ih) * W : NULL, W, g->pad[1], J->wp_w);
  }
}

/* The epilogue's operands, copied out of the job so that they stay in
 * registers across the stores to y (which may alias the job's floats) */
typedef struct {
  const float *bias, *res;
  float *y;
  rlx_act act;
  int clamp;
  __m512 lo, hi, alpha;
} tile_post;

static inline __attribute__((always_inline)) tile_post post_of(const direct_job *J) {
  return (tile_post){J->bias, J->res, J->y, J->act, J->clamp,
                     _mm512_set1_ps(J->lo), _mm512_set1_ps(J->hi), _mm512_set1_ps(J->alpha)};
}

/* y's lanes m at y + at, channel oc, from the sums v: bias, residual,
 * activation, clamp. */
static inline __attribute__((always_inline)) void store_post(const tile_post *p, __m512 v, __mmask16 m, int64_t oc,
                                                             int64_t at) {
  const __m512 zero = _mm512_setzero_ps();
  if (p->bias) v = _mm512_add_ps(v, _mm512_set1_ps(p->bias[oc]));
  if (p->res) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, p->res + at));
  if (p->act == RLX_ACT_RELU) v = _mm512_max_ps(zero, v);
  else if (p->act == RLX_ACT_LEAKY_RELU)
    v = _mm512_mask_mul_ps(v, _mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ), v, p->alpha);
  if (p->clamp) v = _mm512_min_ps(p->hi, _mm512_max_ps(p->lo, v)); /* NaN stays */
  _mm512_mask_storeu_ps(p->y + at, m, v);
}

/* r[j] lane i <- r[i] lane j: pairs of rows interleaved, then pairs of
 * pairs, then 128-bit quarters twice. */
static inline __attribute__((always_inline)) void transpose16(__m512 r[16]) {
  __m512 t[16];
  _Pragma("GCC unroll 16") for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  _Pragma("GCC unroll 16") for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  _Pragma("GCC unroll 16") for (int i = 0; i < 8; i++) {
    const int a = (i & 3) + (i & 4) * 2; /* 0-3, 8-11 */
    t[a] = _mm512_shuffle_f32x4(r[a], r[a + 4], 0x88);
    t[a + 4] = _mm512_shuffle_f32x4(r[a], r[a + 4], 0xDD);
  }
  _Pragma("GCC unroll 16") for (int i = 0; i < 4; i++) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xDD);
    r[i + 4] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0x88);
    r[i + 12] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0xDD);
  }
}

/* Channels [oc0, oc0 + nc) of image b's tile (output row oh, columns
 * [ow0, ow0 + mr)) from tb, with the epilogue: 16 channels at a time
 * turned into channel rows in registers (a gather a channel was slower). */
static void store_tile(const direct_job *J, const float *tb, int mr, int64_t b, int64_t oc0, int64_t nc, int64_t oh,
                       int64_t ow0) {
  const __mmask16 m = (__mmask16)((1u << mr) - 1u);
  const int64_t pos = b * J->OC * J->P + oh * J->g->out[1] + ow0;
  const tile_post post = post_of(J);
  for (int64_t h = 0; h < nc; h += 16) {
    __m512 r[16];
    _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++) r[i] =
        i < DR && i < mr ? _mm512_load_ps(tb + i * DC + h) : _mm512_setzero_ps();
    transpose16(r);
    _Pragma("GCC unroll 16") for (int o = 0; o < 16; o++) if (h + o < nc)
        store_post(&post, r[o], m, oc0 + h + o, (oc0 + h + o) * J->P + pos);
  }
}

/* Items [begin, end): item = (image b0 + i, channel block, output row),
 * every tile of the row; with rows_outer (image, output row, channel
 * block); image b0 + i at xp + i images. */
static void rows_task(void *arg, int64_t begin, int64_t end, int thread) {
  (void)thread;
  const direct_job *J = arg;
  const conv_geom *g = J->g;
  const int64_t OH = g->out[0], OW = g->out[1];
  float tb[DR * DC] __attribute__((aligned(64)));
  for (int64_t it = begin; it < end; it++) {
    const int64_t bi = it / (J->ocb * OH), b = J->b0 + bi;
    const int64_t oh = J->rows_outer ? it / J->ocb % OH : it % OH, cb = J->rows_outer ? it % J->ocb : it / OH % J->ocb;
    const int64_t oc0 = cb * DC;
    const int64_t nc = J->OC - oc0 < DC ? J->OC - oc0 : DC;
    const float *w = J->wp + cb * J->K * DC;
    for (int64_t t = 0; t < J->tiles; t++) {
      const int64_t ow0 = t * OW / J->tiles, mr = (t + 1) * OW / J->tiles - ow0;
      const float *x = J->xp + bi * J->C * J->plane + oh * g->stride[0] * J->ld + ow0 * g->stride[1];
      tile((int)mr, (int)g->stride[1], J->K, x, J->off, w, tb);
      store_tile(J, tb, (int)mr, b, oc0, nc, oh, ow0);
    }
  }
}

/* ---------------------------------------------------------------- lanes */

/* The lanes tile's padded planes [begin, end): each padded row (as
 * pad_channels makes it) as its stride's phases, J->phase floats each:
 * phase q holds the row's columns q, q + s, q + 2s, ... For stride 2 the
 * row is padded into a buffer of this thread's, then split a vector pair
 * at a time. */
static void lanes_pad_channels(void *arg, int64_t begin, int64_t end, int thread) {
  const direct_job *J = arg;
  const conv_geom *g = J->g;
  const int64_t H = g->in[0], W = g->in[1], n = J->phase;
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  float *row = J->split + thread * J->ld;
  for (int64_t c = begin; c < end; c++) {
    float *d = J->pad + c * J->plane;
    for (int64_t r = 0, ih = -g->pad[0]; r < J->hp; r++, ih++, d += J->ld) {
      const float *s = ih >= 0 && ih < H ? J->x + (c * H + ih) * W : NULL;
      if (g->stride[1] == 1) {
        pad_row(d, s, W, g->pad[1], n);
        continue;
      }
      pad_row(row, s, W, g->pad[1], 2 * n);
      for (int64_t q = 0; q < n; q += 16) {
        const __m512 a = _mm512_loadu_ps(row + 2 * q), b = _mm512_loadu_ps(row + 2 * q + 16);
        _mm512_storeu_ps(d + q, _mm512_permutex2var_ps(a, even, b));
        _mm512_storeu_ps(d + n + q, _mm512_permutex2var_ps(a, odd, b));
      }
    }
  }
}

/* Output row oh of image b, channels [oc0, oc0 + nc) (nc <= LC), vectors
 * [v0, v0 + nv) of its positions, with the epilogue: per K step nv
 * vector loads of the input at the step's offset and LC broadcasts of the
 * weight panel w (K x LC). */
static inline __attribute__((always_inline)) void lanes_body(const int nv, const direct_job *J, const float *x,
                                                             const float *w, int64_t b, int64_t oc0, int64_t nc,
                                                             int64_t oh, int64_t v0) {
  __m512 acc[LV][LC];
  _Pragma("GCC unroll 8") for (int o = 0; o < LC; o++)
    _Pragma("GCC unroll 4") for (int v = 0; v < LV; v++) if (v < nv) acc[v][o] = _mm512_setzero_ps();
  const int32_t *off = J->off;
  for (int64_t k = 0; k < J->K; k++) {
    const float *a = x + off[k];
    __m512 xv[LV];
    _Pragma("GCC unroll 4") for (int v = 0; v < LV; v++) if (v < nv) xv[v] = _mm512_loadu_ps(a + 16 * v);
    _Pragma("GCC unroll 8") for (int o = 0; o < LC; o++) {
      const __m512 wo = _mm512_set1_ps(w[o]);
      _Pragma("GCC unroll 4") for (int v = 0; v < LV; v++) if (v < nv) acc[v][o] =
          _mm512_fmadd_ps(xv[v], wo, acc[v][o]);
    }
    w += LC;
  }
  const int64_t OW = J->g->out[1], pos = b * J->OC * J->P + oh * OW + 16 * v0;
  const tile_post post = post_of(J);
  _Pragma("GCC unroll 4") for (int v = 0; v < LV; v++) if (v < nv) {
    const __mmask16 m = simd16_tail_mask(OW - 16 * (v0 + v));
    _Pragma("GCC unroll 8") for (int o = 0; o < LC; o++) if (o < nc)
      store_post(&post, acc[v][o], m, oc0 + o, (oc0 + o) * J->P + pos + 16 * v);
  }
}

static void lanes_tile(int nv, const direct_job *J, const float *x, const float *w, int64_t b, int64_t oc0,
                       int64_t nc, int64_t oh, int64_t v0) {
  switch (nv) {
  case 1: lanes_body(1, J, x, w, b, oc0, nc, oh, v0); break;
  case 2: lanes_body(2, J, x, w, b, oc0, nc, oh, v0); break;
  case 3: lanes_body(3, J, x, w, b, oc0, nc, oh, v0); break;
  default: break;
  }
}

/* Items [begin, end): item = (image b0 + i, output row), every channel
 * block (its weight panel reused by the row's tiles) and every tile of
 * at most LV vectors (the row's vectors split evenly). */
static void lanes_rows_task(void *arg, int64_t begin, int64_t end, int thread) {
  (void)thread;
  const direct_job *J = arg;
  const conv_geom *g = J->g;
  const int64_t OH = g->out[0], vecs = ceil_div(g->out[1], 16);
  for (int64_t it = begin; it < end; it++) {
    const int64_t bi = it / OH, oh = it % OH;
    const float *x = J->xp + bi * J->C * J->plane + oh * g->stride[0] * J->ld;
    for (int64_t cb = 0; cb < J->ocb; cb++) {
      const int64_t oc0 = cb * LC, nc = J->OC - oc0 < LC ? J->OC - oc0 : LC;
      for (int64_t t = 0; t < J->tiles; t++) {
        const int64_t v0 = t * vecs / J->tiles, nv = (t + 1) * vecs / J->tiles - v0;
        lanes_tile((int)nv, J, x + 16 * v0, J->wp + cb * J->K * LC, J->b0 + bi, oc0, nc, oh, v0);
      }
    }
  }
}

/* The weight [OC, K] as ceil(OC / nb) panels of K x nb, zero past OC. */
static direct_weight *pack_weight(const float *w, int64_t OC, int64_t K, int64_t nb) {
  const int64_t blocks = ceil_div(OC, nb);
  direct_weight *d = malloc(sizeof *d);
  if (!d) return NULL;
  d->bytes = (size_t)(blocks * K * nb) * sizeof(float);
  if (!(d->w = line_alloc(d->bytes))) {
    free(d);
    return NULL;
  }
  for (int64_t cb = 0; cb < blocks; cb++)
    for (int64_t k = 0; k < K; k++) {
      float *dst = d->w + (cb * K + k) * nb;
      for (int64_t o = 0; o < nb; o++) dst[o] = cb * nb + o < OC ? w[(cb * nb + o) * K + k] : 0.0f;
    }
  return d;
}

rlx_status conv_direct_forward(cpu_ctx *ctx, const ir_node *n, const conv_geom *g, const cpu_tensor *in,
                               cpu_tensor *out, const conv_epilogue *ce) {
  if (out->numel == 0) return RLX_OK;
  direct_job J = {.g = g, .C = in[0].d[1], .OC = in[1].d[0], .bias = n->n_in >= 3 ? in[2].data : NULL};
  const int64_t batch = in[0].d[0], KH = g->k[0], KW = g->k[1];
  J.K = J.C * KH * KW;
  /* by K alone (the weight's shape), so a weight keeps one packing */
  J.lanes = J.K <= LANES_MAX_K;
  const int64_t nb = J.lanes ? LC : DC;
  J.P = g->out[0] * g->out[1];
  J.hp = (g->out[0] - 1) * g->stride[0] + (KH - 1) * g->dil[0] + 1;
  J.wp_w = (g->out[1] - 1) * g->stride[1] + (KW - 1) * g->dil[1] + 1;
  J.ocb = ceil_div(J.OC, nb);
  J.tiles = J.lanes ? ceil_div(ceil_div(g->out[1], 16), LV) : ceil_div(g->out[1], DR);
  J.act = ce ? ce->act : RLX_ACT_NONE;
  J.alpha = ce ? ce->alpha : 0.0f;
  J.clamp = ce && ce->clamp;
  J.lo = ce ? ce->lo : 0.0f;
  J.hi = ce ? ce->hi : 0.0f;
  direct_weight *dw = gemm_prepack_other(in[1].prepack, in[1].data);
  if (!dw) {
    if (!(dw = pack_weight(in[1].data, J.OC, J.K, nb)))
      return rlx_set_error(RLX_ERR_NOMEM, "Conv (node %d): out of memory", n->id);
    gemm_prepack_set_other(in[1].prepack, in[1].data, dw, dw->bytes, direct_weight_free);
  }
  J.wp = dw->w;
  /* without padding the taps read the input in place (a 1x1 conv); the
   * lanes tile reads its rows split by phase, padded to whole vectors */
  const int in_place = !J.lanes && g->pad[0] == 0 && g->pad[1] == 0 && J.hp <= g->in[0] && J.wp_w <= g->in[1];
  J.phase = J.lanes ? lanes_phase(g) : 0;
  J.ld = in_place ? g->in[1] : J.lanes ? g->stride[1] * J.phase : J.wp_w;
  J.plane = in_place ? g->in[0] * g->in[1] : J.hp * J.ld;
  const int threads = cpu_ctx_threads(ctx);
  int32_t *off = malloc((size_t)(J.K + PREFETCH_K) * sizeof *off);
  J.pad = in_place ? NULL : line_alloc((size_t)(J.C * J.plane) * sizeof(float));
  J.split = J.lanes && g->stride[1] == 2 ? malloc((size_t)(threads * J.ld) * sizeof(float)) : NULL;
  if (!off || (!in_place && !J.pad) || (J.lanes && g->stride[1] == 2 && !J.split)) {
    free(off);
    free(J.pad);
    free(J.split);
    return rlx_set_error(RLX_ERR_NOMEM, "Conv (node %d): out of memory", n->id);
  }
  /* the offsets of the K steps in the padded plane, and PREFETCH_K more
   * (the last one again) for the prefetches past the end; a lanes tile's
   * tap kw reads phase kw * dil % s of the row, kw * dil / s on */
  const int64_t s1 = J.lanes ? g->stride[1] : 1;
  for (int64_t c = 0, k = 0; c < J.C; c++)
    for (int64_t kh = 0; kh < KH; kh++)
      for (int64_t kw = 0; kw < KW; kw++, k++)
        off[k] = (int32_t)(c * J.plane + kh * g->dil[0] * J.ld + kw * g->dil[1] % s1 * J.phase +
                           kw * g->dil[1] / s1);
  for (int64_t k = J.K; k < J.K + PREFETCH_K; k++) off[k] = off[J.K - 1];
  J.off = off;
  J.rows_outer = J.C * J.plane * (int64_t)sizeof(float) > ROWS_OUTER_BYTES;
  const int64_t items = J.lanes ? g->out[0] : J.ocb * g->out[0]; /* an image's */
  cpu_task_fn rows = J.lanes ? lanes_rows_task : rows_task;
  J.x = J.xp = in[0].data;
  J.y = out->data;
  J.res = ce ? ce->residual : NULL;
  if (!J.pad) cpu_parallel_for(ctx, batch * items, 1, rows, &J);
  /* an image padded, then its tiles, into one buffer: the copy stays in
   * L2 for the tiles to read (a whole batch's went out to L3 and was read
   * back from there) */
  for (int64_t b = 0; J.pad && b < batch; b++) {
    J.x = (const float *)in[0].data + b * J.C * g->in[0] * g->in[1];
    J.xp = J.pad;
    J.b0 = b;
    cpu_parallel_for(ctx, J.C, ceil_div(J.C, threads), J.lanes ? lanes_pad_channels : pad_channels, &J);
    cpu_parallel_for(ctx, items, 1, rows, &J);
  }
  free(off);
  free(J.pad);
  free(J.split);
  return RLX_OK;
}

#else /* not x86 */

int conv_direct_applies(const ir_node *n, const conv_geom *g, const cpu_tensor *in, const cpu_tensor *out,
                        const conv_epilogue *ce) {
  (void)n, (void)g, (void)in, (void)out, (void)ce;
  return 0;
}

rlx_status conv_direct_forward(cpu_ctx *ctx, const ir_node *n, const conv_geom *g, const cpu_tensor *in,
                               cpu_tensor *out, const conv_epilogue *ce) {
  (void)ctx, (void)g, (void)in, (void)out, (void)ce;
  return rlx_set_error(RLX_ERR_UNSUPPORTED, "Conv (node %d): no direct kernel on this CPU", n->id);
}

#endif
