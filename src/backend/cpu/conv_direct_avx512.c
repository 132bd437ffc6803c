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
 * channels, are turned back to channel rows through a small buffer and
 * stored with the epilogue: bias, residual, activation, clamp.
 *
 * The weight is packed once ([OC / DC] panels of K x DC, zero past OC)
 * and kept in the weight's prepack slot.
 */
#include "conv_direct.h"

#include "cpu_features.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

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
  const int64_t wp = (g->out[1] - 1) * g->stride[1] + (g->k[1] - 1) * g->dil[1] + 1;
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
  rlx_act act;
  float alpha;
  int clamp;
  float lo, hi;
} direct_job;

/* The padded copy's planes [begin, end) (channel c of the image at x):
 * rows of wp_w floats, the input at (pad0, pad1), zero elsewhere. */
static void pad_channels(void *arg, int64_t begin, int64_t end, int thread) {
  (void)thread;
  const direct_job *J = arg;
  const conv_geom *g = J->g;
  const int64_t H = g->in[0], W = g->in[1], p0 = g->pad[0], p1 = g->pad[1];
  /* columns [c0, c1) of a padded row hold input columns [c0 - p1, c1 - p1) */
  const int64_t c0 = p1 > 0 ? p1 : 0, c1 = p1 + W < J->wp_w ? p1 + W : J->wp_w;
  for (int64_t c = begin; c < end; c++) {
    float *d = J->pad + c * J->plane;
    const float *s = J->x + c * H * W;
    for (int64_t r = 0; r < J->hp; r++, d += J->wp_w) {
      const int64_t ih = r - p0;
      if (ih < 0 || ih >= H || c1 <= c0) {
        memset(d, 0, (size_t)J->wp_w * sizeof *d);
        continue;
      }
      memset(d, 0, (size_t)c0 * sizeof *d);
      memcpy(d + c0, s + ih * W + (c0 - p1), (size_t)(c1 - c0) * sizeof *d);
      memset(d + c1, 0, (size_t)(J->wp_w - c1) * sizeof *d);
    }
  }
}

/* Channels [oc0, oc0 + nc) of image b's tile (output row oh, columns
 * [ow0, ow0 + mr)) from tb, with the epilogue. */
static void store_tile(const direct_job *J, const float *tb, int mr, int64_t b, int64_t oc0, int64_t nc, int64_t oh,
                       int64_t ow0) {
  const __mmask16 m = (__mmask16)((1u << mr) - 1u);
  const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                         _mm512_set1_epi32(DC));
  const __m512 zero = _mm512_setzero_ps(), lo = _mm512_set1_ps(J->lo), hi = _mm512_set1_ps(J->hi);
  const __m512 alpha = _mm512_set1_ps(J->alpha);
  const int64_t pos = b * J->OC * J->P + oh * J->g->out[1] + ow0;
  for (int64_t o = 0; o < nc; o++) {
    __m512 v = _mm512_mask_i32gather_ps(zero, m, idx, tb + o, 4);
    if (J->bias) v = _mm512_add_ps(v, _mm512_set1_ps(J->bias[oc0 + o]));
    const int64_t at = (oc0 + o) * J->P + pos;
    if (J->res) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, J->res + at));
    if (J->act == RLX_ACT_RELU) v = _mm512_max_ps(zero, v);
    else if (J->act == RLX_ACT_LEAKY_RELU)
      v = _mm512_mask_mul_ps(v, _mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ), v, alpha);
    if (J->clamp) v = _mm512_min_ps(hi, _mm512_max_ps(lo, v)); /* NaN stays */
    _mm512_mask_storeu_ps(J->y + at, m, v);
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

/* The weight [OC, K] as ceil(OC / DC) panels of K x DC, zero past OC. */
static direct_weight *pack_weight(const float *w, int64_t OC, int64_t K) {
  const int64_t blocks = ceil_div(OC, DC);
  direct_weight *d = malloc(sizeof *d);
  if (!d) return NULL;
  d->bytes = (size_t)(blocks * K * DC) * sizeof(float);
  if (!(d->w = aligned_alloc(64, d->bytes))) {
    free(d);
    return NULL;
  }
  for (int64_t cb = 0; cb < blocks; cb++)
    for (int64_t k = 0; k < K; k++) {
      float *dst = d->w + (cb * K + k) * DC;
      for (int64_t o = 0; o < DC; o++) dst[o] = cb * DC + o < OC ? w[(cb * DC + o) * K + k] : 0.0f;
    }
  return d;
}

rlx_status conv_direct_forward(cpu_ctx *ctx, const ir_node *n, const conv_geom *g, const cpu_tensor *in,
                               cpu_tensor *out, const conv_epilogue *ce) {
  if (out->numel == 0) return RLX_OK;
  direct_job J = {.g = g, .C = in[0].d[1], .OC = in[1].d[0], .bias = n->n_in >= 3 ? in[2].data : NULL};
  const int64_t batch = in[0].d[0], KH = g->k[0], KW = g->k[1];
  J.K = J.C * KH * KW;
  J.P = g->out[0] * g->out[1];
  J.hp = (g->out[0] - 1) * g->stride[0] + (KH - 1) * g->dil[0] + 1;
  J.wp_w = (g->out[1] - 1) * g->stride[1] + (KW - 1) * g->dil[1] + 1;
  J.ocb = ceil_div(J.OC, DC);
  J.tiles = ceil_div(g->out[1], DR);
  J.act = ce ? ce->act : RLX_ACT_NONE;
  J.alpha = ce ? ce->alpha : 0.0f;
  J.clamp = ce && ce->clamp;
  J.lo = ce ? ce->lo : 0.0f;
  J.hi = ce ? ce->hi : 0.0f;
  direct_weight *dw = gemm_prepack_other(in[1].prepack, in[1].data);
  if (!dw) {
    if (!(dw = pack_weight(in[1].data, J.OC, J.K)))
      return rlx_set_error(RLX_ERR_NOMEM, "Conv (node %d): out of memory", n->id);
    gemm_prepack_set_other(in[1].prepack, in[1].data, dw, dw->bytes, direct_weight_free);
  }
  J.wp = dw->w;
  /* without padding the taps read the input in place (a 1x1 conv) */
  const int in_place = g->pad[0] == 0 && g->pad[1] == 0 && J.hp <= g->in[0] && J.wp_w <= g->in[1];
  J.ld = in_place ? g->in[1] : J.wp_w;
  J.plane = in_place ? g->in[0] * g->in[1] : J.hp * J.wp_w;
  int32_t *off = malloc((size_t)(J.K + PREFETCH_K) * sizeof *off);
  J.pad = in_place ? NULL
                   : aligned_alloc(64, ((size_t)(J.C * J.plane) * sizeof(float) + 63) & ~(size_t)63);
  if (!off || (!in_place && !J.pad)) {
    free(off);
    free(J.pad);
    return rlx_set_error(RLX_ERR_NOMEM, "Conv (node %d): out of memory", n->id);
  }
  /* the offsets of the K steps in the padded plane, and PREFETCH_K more
   * (the last one again) for the prefetches past the end */
  for (int64_t c = 0, k = 0; c < J.C; c++)
    for (int64_t kh = 0; kh < KH; kh++)
      for (int64_t kw = 0; kw < KW; kw++, k++)
        off[k] = (int32_t)(c * J.plane + kh * g->dil[0] * J.ld + kw * g->dil[1]);
  for (int64_t k = J.K; k < J.K + PREFETCH_K; k++) off[k] = off[J.K - 1];
  J.off = off;
  J.rows_outer = J.C * J.plane * (int64_t)sizeof(float) > ROWS_OUTER_BYTES;
  const int threads = cpu_ctx_threads(ctx);
  const int64_t items = J.ocb * g->out[0]; /* an image's */
  J.x = J.xp = in[0].data;
  J.y = out->data;
  J.res = ce ? ce->residual : NULL;
  if (!J.pad) cpu_parallel_for(ctx, batch * items, 1, rows_task, &J);
  /* an image padded, then its tiles, into one buffer: the copy stays in
   * L2 for the tiles to read (a whole batch's went out to L3 and was read
   * back from there) */
  for (int64_t b = 0; J.pad && b < batch; b++) {
    J.x = (const float *)in[0].data + b * J.C * g->in[0] * g->in[1];
    J.xp = J.pad;
    J.b0 = b;
    cpu_parallel_for(ctx, J.C, ceil_div(J.C, threads), pad_channels, &J);
    cpu_parallel_for(ctx, items, 1, rows_task, &J);
  }
  free(off);
  free(J.pad);
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
