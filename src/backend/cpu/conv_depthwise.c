/* conv_depthwise.c — F32 depthwise Conv (one input and one output channel
 * per group: MobileNet's 3 x 3 layers) as direct loops.
 *
 * Each output plane is its own item on the pool. Its input plane is first
 * copied with the padding made explicit (zeros) and its columns dealt into
 * `stride` phases (phase q holds the columns q, q + stride, ...), so that
 * every kernel tap reads a contiguous run for a whole output row: an
 * output row starts at the bias and adds, per kernel row, the weighted
 * runs of its taps, with no test of any position (vectorized loops).
 * 3 x 3 kernels of stride 1 or 2 take the AVX-512 plane kernel instead
 * where the CPU has it (conv_depthwise_avx512.c: no copy, masked loads).
 */
#include "conv_depthwise.h"

#include "cpu_features.h"

#include <stdlib.h>
#include <string.h>

/* Inputs of more bytes than this (MobileNetV2's 28x28 and larger at batch
 * 8; at batch 1 the prefetches cost time) have their planes asked for
 * ahead (prefetch_next). */
#define DW_PREFETCH_MIN_BYTES ((int64_t)4 << 20)

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int conv_depthwise_applies(const ir_node *n, const cpu_tensor *in, const cpu_tensor *out) {
  if (out->dtype != RLX_F32 || in[1].d[1] != 1 || n->a.groups != in[0].d[1] || in[1].d[0] != n->a.groups)
    return 0;
  for (int i = 0; i < n->n_in; i++)
    if (in[i].dtype != RLX_F32) return 0;
  return 1;
}

typedef struct {
  const conv_geom *g;
  const float *x, *w, *bias;
  float *y;
  const conv_epilogue *ce;
  int avx512_3x3;        /* planes by conv_dw3x3_plane_avx512 */
  const uint16_t *masks; /* or by conv_dw3x3_flat_avx512, with these */
  int64_t C;
  int64_t rows, cols; /* of the padded plane; cols: per phase */
  int prefetch;       /* the AVX-512 kernels ask for the next plane ahead */
} dw_job;

/* The padded plane of x: row r is input row r - pad (zero outside), and
 * phase q of a row holds its padded columns q + stride * i, i < cols. */
static void pad_plane(const dw_job *J, const float *x, float *dst) {
  const conv_geom *g = J->g;
  const int64_t H = g->in[0], W = g->in[1], s = g->stride[1];
  memset(dst, 0, (size_t)(J->rows * s * J->cols) * sizeof *dst);
  for (int64_t ih = 0; ih < H; ih++) {
    float *row = dst + (ih + g->pad[0]) * s * J->cols;
    const float *xr = x + ih * W;
    for (int64_t q = 0; q < s; q++) {
      /* padded columns q + s * i inside the input: i in [lo, hi), input
       * column q + s * i - pad */
      const int64_t lo = g->pad[1] > q ? ceil_div(g->pad[1] - q, s) : 0, hi = ceil_div(W + g->pad[1] - q, s);
      float *d = row + q * J->cols;
      if (s == 1)
        memcpy(d + lo, xr + lo - g->pad[1], (size_t)(hi - lo) * sizeof *d);
      else
        for (int64_t i = lo; i < hi; i++) d[i] = xr[q + s * i - g->pad[1]];
    }
  }
}

/* Output plane `it` (image it / C, channel it % C) with the bias;
 * padded: room for the padded plane, or NULL. */
static void dw_plane(const dw_job *J, int64_t it, float *padded) {
  const conv_geom *g = J->g;
  const int64_t OH = g->out[0], OW = g->out[1], KH = g->k[0], KW = g->k[1], s = g->stride[1];
  const int64_t c = it % J->C;
  const float *x = J->x + it * g->in[0] * g->in[1], *w = J->w + c * KH * KW;
  float *y = J->y + it * OH * OW;
  const float b = J->bias ? J->bias[c] : 0.0f;
  if (!padded) { /* no memory for the copy: the same sums, testing positions */
    for (int64_t oh = 0; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++) {
        float acc = b;
        for (int64_t kh = 0; kh < KH; kh++)
          for (int64_t kw = 0; kw < KW; kw++) {
            const int64_t ih = oh * g->stride[0] - g->pad[0] + kh * g->dil[0];
            const int64_t iw = ow * s - g->pad[1] + kw * g->dil[1];
            if (ih >= 0 && ih < g->in[0] && iw >= 0 && iw < g->in[1])
              acc += w[kh * KW + kw] * x[ih * g->in[1] + iw];
          }
        y[oh * OW + ow] = acc;
      }
    return;
  }
  pad_plane(J, x, padded);
  if (KH == 3 && KW == 3) { /* the common kernel: all nine taps in one pass over the row */
    const float *r[9];
    for (int64_t oh = 0; oh < OH; oh++) {
      for (int64_t kh = 0; kh < 3; kh++)
        for (int64_t kw = 0; kw < 3; kw++) {
          const int64_t c0 = kw * g->dil[1];
          r[kh * 3 + kw] = padded + (oh * g->stride[0] + kh * g->dil[0]) * s * J->cols + c0 % s * J->cols + c0 / s;
        }
      float *yr = y + oh * OW;
      for (int64_t ow = 0; ow < OW; ow++)
        yr[ow] = b + w[0] * r[0][ow] + w[1] * r[1][ow] + w[2] * r[2][ow] + w[3] * r[3][ow] + w[4] * r[4][ow] +
                 w[5] * r[5][ow] + w[6] * r[6][ow] + w[7] * r[7][ow] + w[8] * r[8][ow];
    }
    return;
  }
  for (int64_t oh = 0; oh < OH; oh++) {
    float *yr = y + oh * OW;
    for (int64_t ow = 0; ow < OW; ow++) yr[ow] = b;
    for (int64_t kh = 0; kh < KH; kh++) {
      const float *row = padded + (oh * g->stride[0] + kh * g->dil[0]) * s * J->cols;
      int64_t kw = 0;
      for (; kw + 3 <= KW; kw += 3) { /* three taps a pass over the output row */
        const int64_t c0 = kw * g->dil[1], c1 = c0 + g->dil[1], c2 = c1 + g->dil[1];
        const float *r0 = row + c0 % s * J->cols + c0 / s, *r1 = row + c1 % s * J->cols + c1 / s;
        const float *r2 = row + c2 % s * J->cols + c2 / s;
        const float w0 = w[kh * KW + kw], w1 = w[kh * KW + kw + 1], w2 = w[kh * KW + kw + 2];
        for (int64_t ow = 0; ow < OW; ow++) yr[ow] += w0 * r0[ow] + w1 * r1[ow] + w2 * r2[ow];
      }
      for (; kw < KW; kw++) {
        const int64_t c0 = kw * g->dil[1];
        const float *r0 = row + c0 % s * J->cols + c0 / s, w0 = w[kh * KW + kw];
        for (int64_t ow = 0; ow < OW; ow++) yr[ow] += w0 * r0[ow];
      }
    }
  }
}

/* conv_dw3x3_flat_avx512's masks (conv_dw3x3_flat_masks_avx512), made
 * every call: NULL where out of memory or not on x86. */
static uint16_t *flat_masks(const conv_geom *g) {
#if defined(__x86_64__) || defined(__i386__)
  const int64_t W = g->in[1], vecs = ceil_div(g->out[0] * W, 16);
  uint16_t *m = malloc((size_t)(vecs * 9) * sizeof *m + 1);
  if (m) conv_dw3x3_flat_masks_avx512(m, g->out[0], g->in[0], W, g->pad[0], g->pad[1]);
  return m;
#else
  (void)g;
  return NULL;
#endif
}

#if defined(__x86_64__) || defined(__i386__)
/* The lines of plane it + 1 of the input into L2 while plane it is made
 * (J->prefetch): an input of more than DW_PREFETCH_MIN_BYTES comes from
 * L3 or memory, ahead of what the hardware prefetchers ask for. */
static void prefetch_next(const dw_job *J, int64_t it, int64_t end) {
  if (!J->prefetch || it + 1 >= end) return;
  const int64_t n = J->g->in[0] * J->g->in[1];
  const float *p = J->x + (it + 1) * n;
  /* as asm: GCC 12 removed a loop of nothing but _mm_prefetch at -O2 */
  for (int64_t i = 0; i < n; i += 16) __asm__ volatile("prefetcht1 %0" : : "m"(p[i]));
}
#endif

static void dw_planes(void *arg, int64_t begin, int64_t end, int thread) {
  (void)thread;
  const dw_job *J = arg;
  const int64_t plane = J->rows * J->g->stride[1] * J->cols, out_plane = J->g->out[0] * J->g->out[1];
#if defined(__x86_64__) || defined(__i386__)
  if (J->masks) {
    for (int64_t it = begin; it < end; it++) {
      prefetch_next(J, it, end);
      conv_dw3x3_flat_avx512(J->x + it * J->g->in[0] * J->g->in[1], J->w + it % J->C * 9,
                             J->bias ? J->bias[it % J->C] : 0.0f, J->y + it * out_plane,
                             J->ce && J->ce->residual ? J->ce->residual + it * out_plane : NULL, J->ce, J->masks,
                             out_plane, J->g->in[1], J->g->pad[0], J->g->pad[1]);
    }
    return;
  }
  if (J->avx512_3x3) {
    for (int64_t it = begin; it < end; it++) {
      prefetch_next(J, it, end);
      conv_dw3x3_plane_avx512(J->g, J->x + it * J->g->in[0] * J->g->in[1], J->w + it % J->C * 9,
                              J->bias ? J->bias[it % J->C] : 0.0f, J->y + it * out_plane,
                              J->ce && J->ce->residual ? J->ce->residual + it * out_plane : NULL, J->ce);
    }
    return;
  }
#endif
  float *padded = malloc((size_t)plane * sizeof *padded + 1);
  for (int64_t it = begin; it < end; it++) {
    dw_plane(J, it, padded);
    if (J->ce) /* the plane is still in cache */
      cpu_gemm_row_post(J->y + it * out_plane, out_plane, 0.0f,
                        J->ce->residual ? J->ce->residual + it * out_plane : NULL, J->ce);
  }
  free(padded);
}

rlx_status conv_depthwise_forward(cpu_ctx *ctx, const ir_node *n, const conv_geom *g, const cpu_tensor *in,
                                  cpu_tensor *out, const conv_epilogue *ce) {
  if (out->numel == 0) return RLX_OK; /* no positions: the padded plane's sizes would not hold */
  dw_job J = {g, in[0].data, in[1].data, n->n_in >= 3 ? in[2].data : NULL, out->data, ce, 0, NULL, in[0].d[1], 0, 0, 0};
  J.avx512_3x3 = cpu_get_features()->avx512 && g->k[0] == 3 && g->k[1] == 3 && g->dil[0] == 1 && g->dil[1] == 1 &&
                 (g->stride[1] == 1 || g->stride[1] == 2);
  /* padded rows and columns: every tap of every output inside */
  J.rows = (g->out[0] - 1) * g->stride[0] + (g->k[0] - 1) * g->dil[0] + 1;
  if (J.rows < g->pad[0] + g->in[0]) J.rows = g->pad[0] + g->in[0];
  const int64_t cols = (g->out[1] - 1) * g->stride[1] + (g->k[1] - 1) * g->dil[1] + 1;
  J.cols = ceil_div(cols > g->pad[1] + g->in[1] ? cols : g->pad[1] + g->in[1], g->stride[1]);
  uint16_t *masks = NULL;
  if (J.avx512_3x3 && g->stride[0] == 1 && g->stride[1] == 1 && g->out[1] == g->in[1] &&
      (masks = flat_masks(g)) != NULL) /* else the row kernel: the same sums */
    J.masks = masks;
  /* not where the AVX-512 kernel walks rows in order: there it measured slower */
  J.prefetch = J.avx512_3x3 && (int64_t)in[0].nbytes > DW_PREFETCH_MIN_BYTES && (J.masks || !conv_dw3x3_wide_rows(g));
  cpu_parallel_for(ctx, in[0].d[0] * J.C, 1, dw_planes, &J);
  free(masks);
  return RLX_OK;
}
