/* conv_gemm.c — Conv and ConvTranspose on the CPU's SGEMM.
 *
 * Conv, per batch item b and group: Y[og, P] = W_g[og, cg*taps] · col +
 * bias, where col[(c, kh, kw), p] is the input tap that output position p
 * reads (im2col; 0 in the padding). ConvTranspose, its adjoint: col =
 * W_g^T[og*taps, cg] · X_g[cg, in positions], then every col entry is
 * added to the output position it lands on (col2im). Autodiff lowers the
 * conv gradients to these two ops (vjp_conv.c), so they run here as well.
 *
 * Work items are (batch item, group, block): a block of output positions
 * for Conv (the items write disjoint parts of y), a block of output
 * channels for ConvTranspose (col2im scatters across positions, never
 * across channels). Items run on the pool with serial GEMMs; when there
 * are fewer items than threads, they run one after another with the GEMM
 * threaded instead.
 */
#include "conv_gemm.h"

#include "gemm.h"

#include <stdlib.h>
#include <string.h>

/* Floats of column scratch per item: a block of im2col columns (and the
 * panels cpu_sgemm packs from it) stays near the cache. */
#define CONV_COL_BUDGET ((int64_t)1 << 20)
/* Floats of one K chunk of a column block (im2col rows x columns): about
 * an L2 cache, where the GEMM packs it from. */
#define CONV_CHUNK_BUDGET ((int64_t)1 << 16)
/* Transposed-layout output planes smaller than this take column blocks
 * across images. */
#define CONV_MULTI_PLANE 256
/* The fewest columns a block is cut to, so the GEMM's N stays worth it. */
#define CONV_MIN_COLS 16

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int conv_gemm_applies(const cpu_tensor *in, int n_in, const cpu_tensor *out) {
  rlx_dtype t = out->dtype;
  if (t != RLX_F32 && t != RLX_F16 && t != RLX_BF16) return 0;
  for (int i = 0; i < n_in; i++)
    if (in[i].dtype != t) return 0;
  return 1;
}

/* ---------------------------------------------------------------- operands */

/* The F32 views of x, w, bias and y: the tensors themselves for F32, else
 * converted copies (y written back by operands_finish). */
typedef struct {
  const float *x, *w, *bias;
  float *y;
  float *owned[4];
} conv_operands;

static void operands_free(conv_operands *o) {
  for (int i = 0; i < 4; i++) free(o->owned[i]);
}

static rlx_status operands_load(const ir_node *n, const cpu_tensor *in, const cpu_tensor *out,
                                conv_operands *o) {
  memset(o, 0, sizeof *o);
  int has_bias = n->n_in >= 3;
  if (out->dtype == RLX_F32) {
    o->x = in[0].data;
    o->w = in[1].data;
    o->bias = has_bias ? in[2].data : NULL;
    o->y = out->data;
    return RLX_OK;
  }
  float *x = o->owned[0] = cpu_load_f32(&in[0]);
  float *w = o->owned[1] = cpu_load_f32(&in[1]);
  float *b = o->owned[2] = has_bias ? cpu_load_f32(&in[2]) : NULL;
  float *y = o->owned[3] = malloc((size_t)out->numel * sizeof *y + 1);
  if (!x || !w || (has_bias && !b) || !y) {
    operands_free(o);
    return rlx_set_error(RLX_ERR_NOMEM, "%s (node %d): out of memory", ir_ops[n->op].name, n->id);
  }
  o->x = x;
  o->w = w;
  o->bias = b;
  o->y = y;
  return RLX_OK;
}

static void operands_finish(conv_operands *o, cpu_tensor *out) {
  if (out->dtype != RLX_F32) cpu_store_f32(out, o->y);
  operands_free(o);
}

/* The q in [0, run) with 0 <= start + q * step < limit, as [*lo, *hi). */
static void tap_range(int64_t start, int64_t step, int64_t limit, int64_t run, int64_t *lo,
                      int64_t *hi) {
  int64_t l = start < 0 ? ceil_div(-start, step) : 0;
  int64_t h = start < limit ? ceil_div(limit - start, step) : 0;
  *lo = min64(l, run);
  *hi = max64(*lo, min64(h, run));
}

/* ---------------------------------------------------------------- Conv */

/* The q in [0, run) with 0 <= start + q * step < limit, as [*lo, *hi):
 * without divisions when the whole run is inside (the usual case: most
 * runs of an unpadded conv, every run of its weight gradient). */
static void run_range(int64_t start, int64_t step, int64_t limit, int64_t run, int64_t *lo, int64_t *hi) {
  if (start >= 0 && start + (run - 1) * step < limit) {
    *lo = 0;
    *hi = run;
  } else {
    tap_range(start, step, limit, run, lo, hi);
  }
}

/* d[q] = xr[q * step] for q in [lo, hi), 0 for the rest of [0, run)
 * (the taps in the padding). Plain loops: runs are often a few floats;
 * stride 2 (the stems' convs) has its own, which vectorizes. */
static void gather_run(float *d, const float *xr, int64_t step, int64_t lo, int64_t hi, int64_t run) {
  for (int64_t q = 0; q < lo; q++) d[q] = 0;
  if (step == 1)
    for (int64_t q = lo; q < hi; q++) d[q] = xr[q];
  else if (step == 2)
    for (int64_t q = lo; q < hi; q++) d[q] = xr[2 * q];
  else
    for (int64_t q = lo; q < hi; q++) d[q] = xr[q * step];
  for (int64_t q = hi; q < run; q++) d[q] = 0;
}

/* col[(r - r0) * ld + j - j0] for the rows r = (c, kh, kw) in [r0, r0 +
 * rows) of the group's input x [cg, H, W] and the output positions j in
 * [j0, j1). Rows are walked as the (c, kh, kw) nest, runs are output
 * rows: a weight gradient's conv has tens of thousands of rows of a few
 * short runs each, so nothing here divides per row or per run. */
void conv_im2col(const conv_geom *g, const float *x, int64_t r0, int64_t rows, int64_t j0, int64_t j1, float *col,
                 int64_t ld) {
  const int64_t H = g->in[0], W = g->in[1], OW = g->out[1], KH = g->k[0], KW = g->k[1];
  const int64_t nj = j1 - j0, s = g->stride[1], oh0 = j0 / OW, ow0 = j0 % OW;
  int64_t c = r0 / (KH * KW), kh = r0 % (KH * KW) / KW, kw = r0 % KW;
  float *dst = col;
  for (int64_t r = 0; r < rows; r++, dst += ld) {
    const float *xc = x + c * H * W;
    int64_t oh = oh0, ow = ow0;
    for (int64_t j = 0; j < nj; oh++, ow = 0) {
      const int64_t run = min64(OW - ow, nj - j), ih = oh * g->stride[0] - g->pad[0] + kh * g->dil[0];
      float *d = dst + j;
      j += run;
      if (ih < 0 || ih >= H) {
        for (int64_t q = 0; q < run; q++) d[q] = 0;
        continue;
      }
      const int64_t iw = ow * s - g->pad[1] + kw * g->dil[1];
      const float *xr = xc + ih * W + iw;
      int64_t lo, hi;
      run_range(iw, s, W, run, &lo, &hi);
      gather_run(d, xr, s, lo, hi, run);
    }
    if (++kw == KW) { /* the next row of the (c, kh, kw) nest */
      kw = 0;
      if (++kh == KH) {
        kh = 0;
        c++;
      }
    }
  }
}

/* The transpose of im2col: colT[j - j0][r] for output positions j in
 * [j0, j1) and rows r = (c, kh, kw). Runs are kernel rows (kw), so this is
 * the layout for kernels wider than the output — the weight gradient's
 * conv, whose "kernel" is the output gradient (24 wide against an output
 * of 5: runs of 24 floats instead of 5). */
static void im2col_t(const conv_geom *g, const float *x, int64_t rows, int64_t j0, int64_t j1, float *colt) {
  const int64_t H = g->in[0], W = g->in[1], OW = g->out[1], KH = g->k[0], KW = g->k[1];
  const int64_t dh = g->dil[0], dw = g->dil[1], channels = rows / (KH * KW);
  for (int64_t j = j0; j < j1; j++) {
    const int64_t oh = j / OW, ow = j % OW;
    const int64_t ih0 = oh * g->stride[0] - g->pad[0], iw0 = ow * g->stride[1] - g->pad[1];
    float *d = colt + (j - j0) * rows;
    int64_t lo, hi;
    run_range(iw0, dw, W, KW, &lo, &hi);
    for (int64_t c = 0; c < channels; c++) {
      const float *xc = x + c * H * W;
      for (int64_t kh = 0; kh < KH; kh++, d += KW) {
        const int64_t ih = ih0 + kh * dh;
        if (ih < 0 || ih >= H) {
          for (int64_t q = 0; q < KW; q++) d[q] = 0;
          continue;
        }
        const float *xr = xc + ih * W + iw0;
        gather_run(d, xr, dw, lo, hi, KW);
      }
    }
  }
}

typedef struct {
  cpu_ctx *ctx; /* threads the GEMM when the items run one by one */
  conv_geom g;
  conv_operands op;
  int64_t c_in, c_out, groups, cg, og, K, in_plane, out_plane;
  int64_t cols, blocks; /* output positions per block, blocks per (b, group) */
  int direct;           /* 1x1 kernel, stride 1, no pad: x is its own im2col */
  int transposed;       /* kernel wider than the output: im2col_t */
  /* K is cut into chunks of chunk_c input channels (kc = chunk_c * taps
   * rows of col), so a block's columns stay in cache between im2col and
   * the GEMM; chunks after the first add their product through acc. */
  int64_t taps, chunk_c;
  /* Small output planes of the transposed layout (weight gradients): a
   * block's columns run across images (positions q = b * out_plane + j),
   * so the GEMM's N is not one small plane and the large "kernel" is
   * packed once per block, not once per image; results go through ybuf to
   * their images. (Forward convs measured no faster this way.) */
  int multi;
  int64_t batch;
  float *scratch;       /* per thread: kc * cols floats of col, og * cols of acc (and of ybuf) */
  int64_t scratch_per;
} conv_job;

static void conv_multi_items(void *arg, int64_t begin, int64_t end, int thread) {
  conv_job *J = arg;
  const int64_t P = J->out_plane, total = J->batch * P;
  float *col = J->scratch + (int64_t)thread * J->scratch_per;
  float *acc = col + J->chunk_c * J->taps * J->cols, *ybuf = acc + J->og * J->cols;
  for (int64_t it = begin; it < end; it++) {
    const int64_t gr = it / J->blocks, q0 = it % J->blocks * J->cols, nq = min64(J->cols, total - q0);
    for (int64_t c0 = 0; c0 < J->cg; c0 += J->chunk_c) {
      const int64_t kc = min64(J->chunk_c, J->cg - c0) * J->taps;
      for (int64_t q = q0; q < q0 + nq;) { /* the block's part of each image */
        const int64_t b = q / P, j0 = q - b * P, j1 = min64(P, q0 + nq - b * P);
        const float *xg = J->op.x + (b * J->c_in + gr * J->cg + c0) * J->in_plane;
        if (J->transposed)
          im2col_t(&J->g, xg, kc, j0, j1, col + (q - q0) * kc);
        else
          conv_im2col(&J->g, xg, 0, kc, j0, j1, col + (q - q0), nq);
        q += j1 - j0;
      }
      const float *A = J->op.w + gr * J->og * J->K + c0 * J->taps;
      float *dst = c0 == 0 ? ybuf : acc;
      cpu_sgemm(J->ctx, 0, J->transposed, J->og, nq, kc, A, J->K, col, J->transposed ? kc : nq, dst, nq, NULL);
      if (c0 > 0)
        for (int64_t i = 0; i < J->og * nq; i++) ybuf[i] += acc[i];
    }
    for (int64_t q = q0; q < q0 + nq;) {
      const int64_t b = q / P, j0 = q - b * P, j1 = min64(P, q0 + nq - b * P);
      for (int64_t o = 0; o < J->og; o++) {
        const float bo = J->op.bias ? J->op.bias[gr * J->og + o] : 0.0f;
        float *y = J->op.y + (b * J->c_out + gr * J->og + o) * P;
        const float *src = ybuf + o * nq + (q - q0);
        for (int64_t j = j0; j < j1; j++) y[j] = src[j - j0] + bo;
      }
      q += j1 - j0;
    }
  }
}

/* A conv of one item (one image, one group, one block: the weight
 * gradient of a first layer, whose turned batch is 1) whose K spans
 * several chunks: the chunks are spread over the threads, each adding
 * its products into its own part (acc + og * cols), summed afterwards. */
static void conv_splitk_chunks(void *arg, int64_t begin, int64_t end, int thread) {
  conv_job *J = arg;
  float *col = J->scratch + (int64_t)thread * J->scratch_per;
  float *acc = col + J->chunk_c * J->taps * J->cols, *part = acc + J->og * J->cols;
  const int64_t nj = J->out_plane;
  for (int64_t ch = begin; ch < end; ch++) {
    const int64_t c0 = ch * J->chunk_c, kc = min64(J->chunk_c, J->cg - c0) * J->taps;
    const float *xg = J->op.x + c0 * J->in_plane;
    if (J->transposed)
      im2col_t(&J->g, xg, kc, 0, nj, col);
    else
      conv_im2col(&J->g, xg, 0, kc, 0, nj, col, nj);
    cpu_sgemm(NULL, 0, J->transposed, J->og, nj, kc, J->op.w + c0 * J->taps, J->K, col, J->transposed ? kc : nj,
              acc, nj, NULL);
    for (int64_t i = 0; i < J->og * nj; i++) part[i] += acc[i];
  }
}

static void conv_items(void *arg, int64_t begin, int64_t end, int thread) {
  conv_job *J = arg;
  float *col = J->scratch ? J->scratch + (int64_t)thread * J->scratch_per : NULL;
  float *acc = col ? col + J->chunk_c * J->taps * J->cols : NULL;
  for (int64_t it = begin; it < end; it++) {
    const int64_t bg = it / J->blocks, b = bg / J->groups, gr = bg % J->groups;
    const int64_t j0 = it % J->blocks * J->cols, nj = min64(J->cols, J->out_plane - j0);
    float *y = J->op.y + (b * J->c_out + gr * J->og) * J->out_plane + j0;
    for (int64_t c0 = 0; c0 < J->cg; c0 += J->chunk_c) {
      const int64_t kc = min64(J->chunk_c, J->cg - c0) * J->taps;
      const float *xg = J->op.x + (b * J->c_in + gr * J->cg + c0) * J->in_plane;
      const float *B = xg + j0;
      int64_t ldb = J->in_plane;
      if (J->transposed) {
        im2col_t(&J->g, xg, kc, j0, j0 + nj, col);
        B = col;
        ldb = kc;
      } else if (!J->direct) {
        conv_im2col(&J->g, xg, 0, kc, j0, j0 + nj, col, nj);
        B = col;
        ldb = nj;
      }
      const float *A = J->op.w + gr * J->og * J->K + c0 * J->taps;
      if (c0 == 0) {
        cpu_sgemm(J->ctx, 0, J->transposed, J->og, nj, kc, A, J->K, B, ldb, y, J->out_plane, NULL);
        continue;
      }
      cpu_sgemm(J->ctx, 0, J->transposed, J->og, nj, kc, A, J->K, B, ldb, acc, nj, NULL);
      for (int64_t o = 0; o < J->og; o++)
        for (int64_t j = 0; j < nj; j++) y[o * J->out_plane + j] += acc[o * nj + j];
    }
    if (J->op.bias)
      for (int64_t o = 0; o < J->og; o++) {
        const float bo = J->op.bias[gr * J->og + o];
        float *yo = y + o * J->out_plane;
        for (int64_t j = 0; j < nj; j++) yo[j] += bo;
      }
  }
}

rlx_status conv_gemm_forward(cpu_ctx *ctx, const ir_node *n, const conv_geom *g, const cpu_tensor *in,
                             cpu_tensor *out) {
  if (out->numel == 0) return RLX_OK;
  conv_job J = {.ctx = ctx, .g = *g};
  const int64_t batch = in[0].d[0], taps = g->k[0] * g->k[1];
  J.c_in = in[0].d[1];
  J.c_out = in[1].d[0];
  J.groups = n->a.groups;
  J.cg = in[1].d[1];
  J.og = J.c_out / J.groups;
  J.K = J.cg * taps;
  J.in_plane = g->in[0] * g->in[1];
  J.out_plane = g->out[0] * g->out[1];
  J.direct = taps == 1 && g->stride[0] == 1 && g->stride[1] == 1 && g->pad[0] == 0 && g->pad[1] == 0 &&
             J.in_plane == J.out_plane;
  J.transposed = !J.direct && g->k[1] > g->out[1];
  /* Column blocks: within the scratch budget, and enough of them to give
   * every thread an item where batch and groups alone do not. */
  const int threads = cpu_ctx_threads(ctx);
  const int64_t bgs = batch * J.groups;
  J.cols = J.direct ? J.out_plane : min64(J.out_plane, max64(CONV_COL_BUDGET / max64(J.K, 1), CONV_MIN_COLS));
  if (bgs * ceil_div(J.out_plane, J.cols) < threads)
    J.cols = min64(J.cols, max64(ceil_div(J.out_plane, ceil_div(threads, bgs)), 4 * CONV_MIN_COLS));
  J.blocks = ceil_div(J.out_plane, J.cols);
  J.batch = batch;
  J.multi = J.transposed && J.out_plane < CONV_MULTI_PLANE && batch > 1;
  if (J.multi) { /* blocks of columns across images, as many as threads want */
    const int64_t total = batch * J.out_plane;
    J.cols = min64(total, max64(CONV_CHUNK_BUDGET / max64(J.K, 1), CONV_MULTI_PLANE));
    if (J.groups * ceil_div(total, J.cols) < threads)
      J.cols = max64(CONV_MIN_COLS, ceil_div(total, ceil_div(threads, J.groups)));
    J.blocks = ceil_div(total, J.cols);
  }
  J.taps = taps;
  J.chunk_c = J.direct ? J.cg : min64(J.cg, max64(1, CONV_CHUNK_BUDGET / max64(taps * J.cols, 1)));
  J.scratch_per = J.direct ? 0
                  : J.chunk_c * taps * J.cols + (J.chunk_c < J.cg || J.multi ? J.og * J.cols : 0) +
                        (J.multi ? J.og * J.cols : 0);
  const int64_t items = J.multi ? J.groups * J.blocks : bgs * J.blocks, chunks = ceil_div(J.cg, J.chunk_c);
  const int splitk = !J.direct && !J.multi && items == 1 && threads > 1 && chunks > 1;
  if (splitk) J.scratch_per = J.chunk_c * taps * J.cols + 2 * J.og * J.cols;
  const int pooled = items >= threads || splitk;
  rlx_status st = operands_load(n, in, out, &J.op);
  if (st != RLX_OK) return st;
  if (!J.direct) {
    const size_t floats = (size_t)((pooled ? threads : 1) * J.scratch_per) + 1;
    J.scratch = splitk ? calloc(floats, sizeof *J.scratch) : malloc(floats * sizeof *J.scratch); /* parts start at 0 */
    if (!J.scratch) {
      operands_free(&J.op);
      return rlx_set_error(RLX_ERR_NOMEM, "Conv (node %d): out of memory", n->id);
    }
  }
  if (splitk) {
    cpu_parallel_for(ctx, chunks, 1, conv_splitk_chunks, &J);
    for (int64_t o = 0; o < J.og; o++)
      for (int64_t j = 0; j < J.out_plane; j++) {
        float v = J.op.bias ? J.op.bias[o] : 0.0f;
        for (int t = 0; t < threads; t++)
          v += J.scratch[t * J.scratch_per + J.chunk_c * taps * J.cols + J.og * J.cols + o * J.out_plane + j];
        J.op.y[o * J.out_plane + j] = v;
      }
  } else {
    cpu_task_fn fn = J.multi ? conv_multi_items : conv_items;
    if (pooled)
      cpu_parallel_for(ctx, items, 1, fn, &J);
    else
      fn(&J, 0, items, 0);
  }
  free(J.scratch);
  operands_finish(&J.op, out);
  return RLX_OK;
}

/* ---------------------------------------------------------------- ConvTranspose */

/* Adds col[r][j - j0] — rows r = (oc, kh, kw) of `rows` output channels
 * starting at y, columns the input positions j in [j0, j1) — to the
 * output position each lands on; the rest fall in the cropped pads. Rows
 * walked as the (oc, kh, kw) nest (no division per row, nor per run
 * inside the output). */
static void col2im(const conv_geom *g, const float *col, int64_t rows, int64_t j0, int64_t j1, float *y) {
  const int64_t W = g->in[1], OH = g->out[0], OW = g->out[1], KH = g->k[0], KW = g->k[1];
  const int64_t nj = j1 - j0, s = g->stride[1], ih0 = j0 / W, iw0 = j0 % W;
  const float *src = col;
  for (int64_t oc = 0; oc < rows / (KH * KW); oc++) {
    float *yc = y + oc * OH * OW;
    for (int64_t kh = 0; kh < KH; kh++) {
      for (int64_t kw = 0; kw < KW; kw++, src += nj) {
        int64_t ih = ih0, iw = iw0;
        for (int64_t j = 0; j < nj; ih++, iw = 0) {
          const int64_t run = min64(W - iw, nj - j), oh = ih * g->stride[0] - g->pad[0] + kh * g->dil[0];
          const float *sr = src + j;
          j += run;
          if (oh < 0 || oh >= OH) continue;
          const int64_t ow = iw * s - g->pad[1] + kw * g->dil[1];
          float *yr = yc + oh * OW + ow;
          int64_t lo, hi;
          run_range(ow, s, OW, run, &lo, &hi);
          for (int64_t q = lo; q < hi; q++) yr[q * s] += sr[q];
        }
      }
    }
  }
}

typedef struct {
  cpu_ctx *ctx;
  conv_geom g;
  conv_operands op;
  int64_t c_in, c_out, groups, cg, og, taps, in_plane, out_plane;
  int64_t chans, chan_blocks; /* output channels per block, blocks per (b, group) */
  int64_t cols;               /* input positions per GEMM */
  float *scratch;             /* chans * taps * cols floats per thread */
} convt_job;

static void convt_items(void *arg, int64_t begin, int64_t end, int thread) {
  convt_job *J = arg;
  const int64_t per = J->chans * J->taps * J->cols;
  float *col = J->scratch + (int64_t)thread * per;
  for (int64_t it = begin; it < end; it++) {
    const int64_t bg = it / J->chan_blocks, b = bg / J->groups, gr = bg % J->groups;
    const int64_t oc0 = it % J->chan_blocks * J->chans, nc = min64(J->chans, J->og - oc0);
    float *y = J->op.y + (b * J->c_out + gr * J->og + oc0) * J->out_plane;
    for (int64_t o = 0; o < nc; o++) {
      const float bo = J->op.bias ? J->op.bias[gr * J->og + oc0 + o] : 0.0f;
      for (int64_t p = 0; p < J->out_plane; p++) y[o * J->out_plane + p] = bo;
    }
    const float *xg = J->op.x + (b * J->c_in + gr * J->cg) * J->in_plane;
    /* w [c_in, og, taps]: the group's rows, the block's columns */
    const float *wg = J->op.w + gr * J->cg * J->og * J->taps + oc0 * J->taps;
    for (int64_t j0 = 0; j0 < J->in_plane; j0 += J->cols) {
      const int64_t nj = min64(J->cols, J->in_plane - j0);
      cpu_sgemm(J->ctx, 1, 0, nc * J->taps, nj, J->cg, wg, J->og * J->taps, xg + j0, J->in_plane, col, nj,
                NULL);
      col2im(&J->g, col, nc * J->taps, j0, j0 + nj, y);
    }
  }
}

rlx_status conv_gemm_transpose(cpu_ctx *ctx, const ir_node *n, const conv_geom *g, const cpu_tensor *in,
                               cpu_tensor *out) {
  if (out->numel == 0) return RLX_OK;
  convt_job J = {.ctx = ctx, .g = *g};
  const int64_t batch = in[0].d[0];
  J.c_in = in[0].d[1];
  J.c_out = out->d[1];
  J.groups = n->a.groups;
  J.cg = J.c_in / J.groups;
  J.og = in[1].d[1];
  J.taps = g->k[0] * g->k[1];
  J.in_plane = g->in[0] * g->in[1];
  J.out_plane = g->out[0] * g->out[1];
  const int threads = cpu_ctx_threads(ctx);
  const int64_t bgs = batch * J.groups;
  J.chan_blocks = bgs < threads ? min64(J.og, ceil_div(threads, bgs)) : 1;
  J.chans = ceil_div(J.og, J.chan_blocks);
  J.chan_blocks = ceil_div(J.og, J.chans);
  J.cols = max64(1, min64(J.in_plane, max64(CONV_COL_BUDGET / (J.chans * J.taps), CONV_MIN_COLS)));
  const int64_t items = bgs * J.chan_blocks;
  const int pooled = items >= threads;
  rlx_status st = operands_load(n, in, out, &J.op);
  if (st != RLX_OK) return st;
  J.scratch = malloc((size_t)((pooled ? threads : 1) * J.chans * J.taps * J.cols) * sizeof *J.scratch + 1);
  if (!J.scratch) {
    operands_free(&J.op);
    return rlx_set_error(RLX_ERR_NOMEM, "ConvTranspose (node %d): out of memory", n->id);
  }
  if (pooled)
    cpu_parallel_for(ctx, items, 1, convt_items, &J);
  else
    convt_items(&J, 0, items, 0);
  free(J.scratch);
  operands_finish(&J.op, out);
  return RLX_OK;
}
