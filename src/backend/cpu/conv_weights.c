/* conv_weights.c — F32 Conv whose weight is a param or a constant, on the
 * GEMM with the weight packed once.
 *
 * Per image: y[OC, P] = W[OC, K] · col[K, P] (+ bias[OC]), K = C * taps, P
 * the output positions. W is the GEMM's A operand, kept in the
 * micro-kernel's row panels by the input's prepack slot between runs
 * (cpu_gemm_prepacked_a), so the weights are neither converted nor packed
 * per call. col is x itself for a 1x1 kernel of stride 1 without padding
 * (x[C, P] is col[K, P]), x's taps copied out once for one of a larger
 * stride; else the GEMM's tiles make col's blocks straight
 * into their panels (pack_cols, a gemm_b_source: col is never stored;
 * with AVX-512 by conv_im2col_avx512.c);
 * where that cannot run (no packed weight), im2col into a scratch buffer
 * (threaded over channels) by blocks of columns of at most
 * CONV_W_COL_FLOATS. Small planes are multiplied turned (below), an
 * image at a time. Otherwise a batch's images are one product (their
 * columns side by side, gemm_col_groups): the packed weight is streamed
 * once a block of columns for all of them, and the threads split the
 * batch's columns, not each image's plane. The
 * product is threaded over columns; the bias (and a FusedConv's residual,
 * activation and clamp) is applied by the GEMM to each output tile as it
 * is stored (gemm_epilogue's row part), not in passes over y afterwards.
 */
#include "conv_weights.h"

#include "conv_direct.h"
#include "conv_im2col_avx512.h"
#include "cpu_features.h"
#include "gemm.h"
#include "gemm_pack.h"

#include <stdlib.h>
#include <string.h>

/* The most floats of a block of im2col columns: 512 KiB, so that the block
 * is still in L2 when the GEMM packs it (whole, ResNet-50's 7 MiB col of
 * its 56x56 3x3 convs went to memory and back: those convs ran 10% slower,
 * 1 thread, interleaved runs; 256 KiB measured the same as 512). */
#define CONV_W_COL_FLOATS ((int64_t)1 << 17)

/* Planes of at most this many output positions (the 7x7 stages of
 * ResNet and MobileNetV2) are multiplied turned: Y^T[P, OC] = col^T ·
 * W^T, so that the GEMM's columns are the output channels (whole panels
 * of 32, where 49 positions are a panel and a half) and its rows the
 * positions; y is then written from Y^T with the epilogue. ResNet-50's
 * 7x7 stage: 12.1 ms turned against 15.5 ms, 1 thread, warm runs; its
 * 14x14 stage measured 4% slower turned, so 196 positions stay as they
 * are. */
#define CONV_W_TURNED_MAX_P 128
/* output channels unturned a block with a residual */
#define UNTURN_ROWS 16

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

int conv_weights_applies(const ir_node *n, const cpu_tensor *in, const cpu_tensor *out) {
  if (n->a.groups != 1 || !in[1].prepack || out->dtype != RLX_F32) return 0;
  for (int i = 0; i < n->n_in; i++)
    if (in[i].dtype != RLX_F32) return 0;
  return 1;
}

typedef struct {
  const conv_geom *g;
  const float *x, *bias;
  float *col, *y;
  int64_t C, OC, P, in_plane, taps;
  int64_t j0, nj; /* the block of output positions in col */
  float *yt;                /* turned: Y^T [P, OC] of one image */
  const float *res;         /* turned: the image's residual, or NULL */
  const conv_epilogue *ce;  /* turned: applied with the residual */
  int avx512;               /* panels by conv_im2col_panel_avx512 */
} conv_w_job;

/* B of the product as a gemm_b_source: the im2col columns, made straight
 * into the GEMM's panels, a panel of output positions at a time (no col
 * matrix: nothing written to memory and read back to pack). Column j is
 * position j % P of image j / P after x (the GEMM asks for one image's
 * columns a call). */
static void pack_cols(const void *ctx, int64_t k0, int64_t kc, int64_t j0, int64_t nc, float *dst, int64_t nr) {
  const conv_w_job *J = ctx;
  const float *x = J->x + j0 / J->P * J->C * J->in_plane;
  j0 %= J->P;
  for (int64_t p = 0; p * nr < nc; p++) {
    const int64_t first = j0 + p * nr, width = min64(nr, nc - p * nr);
    float *d = dst + p * kc * nr;
#if defined(__x86_64__) || defined(__i386__)
    if (J->avx512 && conv_im2col_panel_avx512(J->g, x, k0, kc, first, width, d, nr, nr)) continue;
#endif
    conv_im2col(J->g, x, k0, kc, first, first + width, d, nr);
    if (width < nr)
      for (int64_t k = 0; k < kc; k++) memset(d + k * nr + width, 0, (size_t)(nr - width) * sizeof *d);
  }
}

/* Rows [begin, end) of y from Y^T (a vector transpose: element by
 * element, each load and store was its own instruction), with the residual
 * and the epilogue (without a residual the GEMM applied it). The residual
 * may be y's own buffer (plan_memory.c): its rows are read before they are
 * stored, the epilogue applied in a block turned into t. */
static void unturn_rows(void *arg, int64_t begin, int64_t end, int thread) {
  (void)thread;
  const conv_w_job *J = arg;
  if (!J->res) {
    cpu_transpose(J->yt + begin, J->OC, J->P, end - begin, J->y + begin * J->P, J->P);
    return;
  }
  float t[UNTURN_ROWS * CONV_W_TURNED_MAX_P];
  for (int64_t o = begin; o < end; o += UNTURN_ROWS) {
    const int64_t rows = min64(UNTURN_ROWS, end - o);
    cpu_transpose(J->yt + o, J->OC, J->P, rows, t, J->P);
    for (int64_t r = 0; r < rows; r++) {
      cpu_gemm_row_post(t + r * J->P, J->P, 0.0f, J->res + (o + r) * J->P, J->ce);
      memcpy(J->y + (o + r) * J->P, t + r * J->P, (size_t)J->P * sizeof *t);
    }
  }
}

/* Rows [begin, end) (image b, channel c as row b * C + c) of the
 * subsampled input of a strided 1x1 conv: its output positions' taps,
 * [OH, OW] a channel, which the GEMM then reads in place. */
static void subsample_rows(void *arg, int64_t begin, int64_t end, int thread) {
  (void)thread;
  const conv_w_job *J = arg;
  const int64_t OH = J->g->out[0], OW = J->g->out[1], W = J->g->in[1], s0 = J->g->stride[0], s1 = J->g->stride[1];
#if defined(__x86_64__) || defined(__i386__)
  if (J->avx512 && s0 == 2 && s1 == 2 &&
      conv_taps2_avx512(J->x + begin * J->in_plane, end - begin, J->g->in[0], W, OH, OW, J->col + begin * J->P))
    return;
#endif
  for (int64_t r = begin; r < end; r++) {
    const float *x = J->x + r * J->in_plane;
    float *d = J->col + r * J->P;
    for (int64_t oh = 0; oh < OH; oh++, d += OW) {
      const float *xr = x + oh * s0 * W;
      for (int64_t ow = 0; ow < OW; ow++) d[ow] = xr[ow * s1];
    }
  }
}

/* col rows (c, kh, kw) of the channels [begin, end) of one image, for the
 * block's positions: with AVX-512 32 positions a pass (the turned 7x7
 * planes' rows are runs of 7 floats, too short for the scalar copy). */
static void im2col_channels(void *arg, int64_t begin, int64_t end, int thread) {
  (void)thread;
  const conv_w_job *J = arg;
  const float *x = J->x + begin * J->in_plane;
  const int64_t rows = (end - begin) * J->taps;
  float *col = J->col + begin * J->taps * J->nj;
#if defined(__x86_64__) || defined(__i386__)
  int done = J->avx512;
  for (int64_t q = 0; done && q < J->nj; q += 32) {
    const int64_t width = min64(32, J->nj - q);
    done = conv_im2col_panel_avx512(J->g, x, 0, rows, J->j0 + q, width, col + q, width, J->nj);
  }
  if (done) return;
#endif
  conv_im2col(J->g, x, 0, rows, J->j0, J->j0 + J->nj, col, J->nj);
}

rlx_status conv_weights_forward(cpu_ctx *ctx, const ir_node *n, const conv_geom *g, const cpu_tensor *in,
                                cpu_tensor *out, const conv_epilogue *ce) {
  if (out->numel == 0) return RLX_OK;
  if (conv_direct_applies(n, g, in, out, ce)) return conv_direct_forward(ctx, n, g, in, out, ce);
  conv_w_job J = {.g = g, .bias = n->n_in >= 3 ? in[2].data : NULL, .C = in[0].d[1], .OC = in[1].d[0],
                  .taps = g->k[0] * g->k[1], .avx512 = cpu_get_features()->avx512};
  const int64_t batch = in[0].d[0], K = J.C * J.taps;
  J.in_plane = g->in[0] * g->in[1];
  J.P = g->out[0] * g->out[1];
  /* a 1x1 kernel without padding: x is its own col, read in place by the
   * GEMM; with a stride (ResNet's downsampling convs) once its taps are
   * copied out of x for the whole batch, in order (the im2col panels read
   * a piece of every channel's row a panel, scattered over memory) */
  const int direct = J.taps == 1 && g->pad[0] == 0 && g->pad[1] == 0;
  const int strided = direct && J.in_plane != J.P;
  /* positions per block: all, or what the scratch holds (multiples of 64) */
  const int threads = cpu_ctx_threads(ctx);
  /* at least two column panels a thread, or the block's product idles threads */
  const int64_t block = direct ? J.P : min64(J.P, max64(64 * threads, CONV_W_COL_FLOATS / K / 64 * 64));
  const int turned = J.P <= CONV_W_TURNED_MAX_P && J.P <= block && J.OC >= 32;
  /* the taps in this thread's buffer, kept between calls in huge pages
   * (the product reads them in place: a new page every row) */
  float *taps = strided ? gemm_thread_buf(GEMM_BUF_TAPS, (size_t)(batch * J.C * J.P)) : NULL;
  if ((!direct && !(J.col = malloc((size_t)(K * block) * sizeof *J.col + 1))) || (strided && !taps) ||
      (turned && !(J.yt = malloc((size_t)(J.P * J.OC) * sizeof *J.yt + 1)))) {
    free(J.col);
    return rlx_set_error(RLX_ERR_NOMEM, "Conv (node %d): out of memory", n->id);
  }
  const gemm_operand w = {in[1].data, RLX_F32, 0, K, 0, NULL};
  gemm_epilogue ep = ce ? *ce : (gemm_epilogue){.act = RLX_ACT_NONE};
  ep.bias = NULL;
  ep.row_bias = J.bias;
  ep.ldr = J.P;
  /* turned: the bias per GEMM column; the epilogue in the GEMM when there
   * is no residual to add before it */
  const conv_epilogue none = {.act = RLX_ACT_NONE};
  J.ce = ce ? ce : &none;
  gemm_epilogue ept = {.bias = J.bias, .act = RLX_ACT_NONE};
  if (!J.ce->residual) {
    ept.act = J.ce->act;
    ept.alpha = J.ce->alpha;
    ept.clamp = J.ce->clamp;
    ept.lo = J.ce->lo;
    ept.hi = J.ce->hi;
  }
  const gemm_operand wt = {in[1].data, RLX_F32, 1, K, 0, NULL}; /* W^T: B stored [N, K] */
  J.x = in[0].data;
  J.y = out->data;
  if (strided) {
    J.col = taps;
    cpu_parallel_for(ctx, batch * J.C, 16, subsample_rows, &J);
    J.col = NULL;
    J.x = taps;
    J.in_plane = J.P;
  }
  const float *x0 = J.x;
  /* A batch's images as one product, the packed weight streamed once for
   * all of them (the images' columns side by side, gemm_col_groups) */
  const gemm_col_groups images = {batch, J.P, J.OC * J.P, J.C * J.in_plane, J.OC * J.P};
  const gemm_b_source cols_src = {pack_cols, &J};
  const gemm_operand x_cols = {J.x, RLX_F32, 0, J.P, 0, NULL};
  ep.residual = ce ? ce->residual : NULL;
  /* y in the residual's buffer (plan_memory.c): a product that stopped
   * part way has added to some of it, so none can start over */
  const int in_res = ep.residual == J.y;
  int done = 0, partial = 0;
  if (!turned && batch > 1) {
    done = cpu_gemm_prepacked_a_groups(ctx, J.OC, K, &w, in[1].prepack, direct ? &x_cols : NULL,
                                       direct ? NULL : &cols_src, &images, J.y, J.P, &ep);
    partial = !done && in_res;
  }
  for (int64_t b = 0; b < batch && !done && !partial; b++) {
    J.x = x0 + b * J.C * J.in_plane;
    J.y = (float *)out->data + b * J.OC * J.P;
    if (turned) {
      J.j0 = 0;
      J.nj = J.P;
      if (!direct) cpu_parallel_for(ctx, J.C, min64(J.C, (J.C + threads - 1) / threads), im2col_channels, &J);
      const gemm_operand cols_t = {direct ? J.x : J.col, RLX_F32, 1, J.P, 0, NULL}; /* col^T: A stored [K, M] */
      cpu_gemm_prepacked(ctx, 1, J.P, J.OC, K, &cols_t, &wt, in[1].prepack, J.yt, J.OC, 0, &ept);
      J.res = J.ce->residual ? J.ce->residual + b * J.OC * J.P : NULL;
      cpu_parallel_for(ctx, J.OC, 16, unturn_rows, &J);
      continue;
    }
    ep.residual = ce && ce->residual ? ce->residual + b * J.OC * J.P : NULL;
    if (!direct && cpu_gemm_prepacked_a_source(ctx, J.OC, J.P, K, &w, in[1].prepack, &cols_src, J.y, J.P, &ep))
      continue;
    if (!direct && in_res) {
      partial = 1;
      break;
    }
    for (J.j0 = 0; J.j0 < J.P; J.j0 += block) { /* no packed weight or memory: im2col by blocks */
      J.nj = min64(block, J.P - J.j0);
      if (!direct) cpu_parallel_for(ctx, J.C, min64(J.C, (J.C + threads - 1) / threads), im2col_channels, &J);
      const gemm_operand cols = direct ? (gemm_operand){J.x, RLX_F32, 0, J.P, 0, NULL}
                                       : (gemm_operand){J.col, RLX_F32, 0, J.nj, 0, NULL};
      ep.residual = ce && ce->residual ? ce->residual + b * J.OC * J.P + J.j0 : NULL;
      cpu_gemm_prepacked_a(ctx, J.OC, J.nj, K, &w, in[1].prepack, &cols, J.y + J.j0, J.P, &ep);
    }
  }
  free(J.col);
  free(J.yt);
  return partial ? rlx_set_error(RLX_ERR_NOMEM, "Conv (node %d): out of memory", n->id) : RLX_OK;
}
