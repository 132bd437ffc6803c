/* vjp_conv.c — vector-Jacobian rules of the convolution, pooling,
 * resizing and signal ops: Conv, ConvTranspose, Pool (expanded),
 * ResizeNearest2x, Resize, Fft, LogMel (expanded).
 *
 * Conv and ConvTranspose are each other's adjoint in x (the input gradient
 * of one is the other op with the same weight); the weight gradient of
 * both is one convolution of the input with the output gradient
 * (conv_weight_grad). */
#include "autodiff.h"

#include <stdlib.h>
#include <string.h>

/* v cropped to the first want[i] elements of each spatial dim. */
static rlx_node crop_spatial(ad_ctx *c, rlx_node v, int nd, const int64_t *want) {
  ir_shape s = ad_type(c, v).shape;
  for (int i = 0; i < nd; i++)
    if (s.d[2 + i] > want[i]) v = rlx_narrow(c->g, v, 2 + i, 0, want[i]);
  return v;
}

/* dW of y = conv(X, W) with X [N, C, L...] (C = groups * Cg) and output
 * gradient G [N, O, T...] (O = groups * Og): dW[o, c', k] = sum over n, t
 * of G[n, o, t] X[n, group(o) Cg + c', t s - pad_begin + k d]. It is a
 * convolution with the roles turned: batch Cg, channels groups * N, the
 * output gradient as the kernel, stride d and dilation s swapped. Cropped
 * to the kernel dims k. */
static rlx_node conv_weight_grad(ad_ctx *c, rlx_node X, rlx_node G, const rlx_conv_desc *d, const int64_t *k) {
  rlx_graph *g = c->g;
  ir_shape sx = ad_type(c, X).shape, sg = ad_type(c, G).shape;
  const int nd = d->ndim;
  const int64_t N = sx.d[0], Gr = d->groups, Cg = sx.d[1] / Gr, Og = sg.d[1] / Gr;
  int64_t xs[RLX_MAX_RANK] = {N, Gr, Cg}, gs[RLX_MAX_RANK] = {N, Gr, Og};
  int64_t xflat[RLX_MAX_RANK] = {Cg, Gr * N}, gflat[RLX_MAX_RANK] = {Gr * Og, N};
  int64_t xperm[RLX_MAX_RANK] = {2, 1, 0}, gperm[RLX_MAX_RANK] = {1, 2, 0}, back[RLX_MAX_RANK] = {1, 0};
  for (int i = 0; i < nd; i++) {
    xs[3 + i] = xflat[2 + i] = sx.d[2 + i];
    gs[3 + i] = gflat[2 + i] = sg.d[2 + i];
    xperm[3 + i] = gperm[3 + i] = 3 + i;
    back[2 + i] = 2 + i;
  }
  rlx_node I = rlx_reshape(g, rlx_transpose(g, rlx_reshape(g, X, 3 + nd, xs), 3 + nd, xperm), 2 + nd, xflat);
  rlx_node W = rlx_reshape(g, rlx_transpose(g, rlx_reshape(g, G, 3 + nd, gs), 3 + nd, gperm), 2 + nd, gflat);
  rlx_conv_desc wd = *d;
  for (int i = 0; i < nd; i++) {
    wd.stride[i] = d->dilation[i];
    wd.dilation[i] = d->stride[i];
    wd.output_pad[i] = 0;
  }
  rlx_node R = rlx_transpose(g, rlx_conv(g, I, W, -1, &wd), 2 + nd, back); /* [O, Cg, K'...] */
  return crop_spatial(c, R, nd, k);
}

/* The bias gradient: g summed over batch and spatial dims, as two sums
 * over adjacent axes (the spatial ones, then the batch), which the
 * backends reduce without a strided walk. */
static rlx_status bias_grad(ad_ctx *c, const ir_node *n, rlx_node g) {
  if (n->n_in < 3 || !ad_active(c, n->in[2])) return RLX_OK;
  int64_t spatial[2] = {2, 3}, batch = 0;
  rlx_node per_image = rlx_reduce(c->g, RLX_REDUCE_SUM, g, (int)n->a.ndim, spatial, 0); /* [N, O] */
  return ad_accum(c, n->in[2], 0, rlx_reduce(c->g, RLX_REDUCE_SUM, per_image, 1, &batch, 0));
}

/* dx = ConvTranspose(g, w) with the conv's stride, pads, dilation and
 * groups; output_pad restores the input positions the stride skipped at
 * the end. */
rlx_status ad_vjp_Conv(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  rlx_node x = n->in[0], w = n->in[1];
  ir_shape sx = ad_type(c, x).shape, sw = ad_type(c, w).shape;
  rlx_conv_desc d = ad_conv_desc(n);
  rlx_status st = RLX_OK;
  if (ad_active(c, x)) {
    rlx_conv_desc td = d;
    for (int i = 0; i < d.ndim; i++) {
      int64_t span = sx.d[2 + i] + d.pad[i] + d.pad[d.ndim + i] - d.dilation[i] * (sw.d[2 + i] - 1) - 1;
      td.output_pad[i] = span % d.stride[i];
    }
    st = ad_accum(c, x, 0, rlx_conv_transpose(c->g, gout[0], w, -1, &td));
  }
  if (st == RLX_OK && ad_active(c, w)) st = ad_accum(c, w, 0, conv_weight_grad(c, x, gout[0], &d, sw.d + 2));
  return st ? st : bias_grad(c, n, gout[0]);
}

/* dx = Conv(g, w) with the same stride, pads, dilation and groups; the
 * end pad shrinks by output_pad (what ConvTranspose added past the pad).
 * dw is conv_weight_grad with g as the input and x as the gradient. */
rlx_status ad_vjp_ConvTranspose(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  rlx_node x = n->in[0], w = n->in[1];
  ir_shape sx = ad_type(c, x).shape, sw = ad_type(c, w).shape;
  rlx_conv_desc d = ad_conv_desc(n);
  for (int i = 0; i < d.ndim; i++) {
    int64_t end = d.pad[d.ndim + i] - d.output_pad[i];
    d.pad[d.ndim + i] = end > 0 ? end : 0;
    d.output_pad[i] = 0;
  }
  rlx_status st = RLX_OK;
  if (ad_active(c, x)) st = ad_accum(c, x, 0, crop_spatial(c, rlx_conv(c->g, gout[0], w, -1, &d), d.ndim, sx.d + 2));
  if (st == RLX_OK && ad_active(c, w)) st = ad_accum(c, w, 0, conv_weight_grad(c, gout[0], x, &d, sw.d + 2));
  return st ? st : bias_grad(c, n, gout[0]);
}

/* Max pooling over windows that tile the input (stride = kernel, no pad;
 * the floor mode's leftover rows and columns get no gradient): the window
 * axes gathered last, ArgMax picks the input that gave each max (the first
 * on ties, a NaN where there is one, as torch), and the output gradient
 * goes there: dx = OneHot(argmax) * g. Six layout or elementwise passes
 * instead of the per-tap slices, masks and pads of the expansion. -1 when
 * the pool is not of that kind. */
static rlx_node tiled_max_pool_grad(ad_ctx *c, const ir_node *n, rlx_node g) {
  const int nd = (int)n->a.ndim;
  rlx_node x = n->in[0];
  ir_type tx = ad_type(c, x);
  const ir_shape *out = &n->out[0].shape;
  if (n->a.pool != RLX_POOL_MAX) return -1;
  int64_t taps = 1;
  for (int i = 0; i < nd; i++) {
    int64_t k = n->a.kernel.v[i];
    if (n->a.stride.v[i] != k || n->a.pad.v[i] || n->a.pad.v[nd + i] || ir_dim_is_sym(tx.shape.d[2 + i]) ||
        ir_dim_is_sym(out->d[2 + i]))
      return -1;
    taps *= k;
  }
  if (ir_dim_is_sym(tx.shape.d[0]) || ir_dim_is_sym(tx.shape.d[1])) return -1;
  rlx_graph *gr = c->g;
  const int64_t N = tx.shape.d[0], C = tx.shape.d[1];
  /* [N, C, O0, K0 (, O1, K1)] and the window axes last: [N, C, O0 (, O1), taps] */
  int64_t split[6] = {N, C}, win[5] = {N, C}, gsh[5] = {N, C}, full[6] = {N, C}, back[6] = {0, 1, 2, 4, 3, 5};
  int64_t before[RLX_MAX_RANK] = {0}, after[RLX_MAX_RANK] = {0};
  int cropped = 0;
  for (int i = 0; i < nd; i++) {
    int64_t o = out->d[2 + i], k = n->a.kernel.v[i], used = o * k;
    split[2 + 2 * i] = o;
    split[3 + 2 * i] = k;
    win[2 + i] = gsh[2 + i] = o;
    after[2 + i] = tx.shape.d[2 + i] - used;
    cropped |= after[2 + i] != 0;
    if (after[2 + i]) x = rlx_narrow(gr, x, 2 + i, 0, used);
    full[2 + i] = used;
  }
  win[2 + nd] = taps;
  gsh[2 + nd] = 1;
  rlx_node xs = rlx_reshape(gr, x, 2 + 2 * nd, split);
  if (nd == 2) xs = rlx_transpose(gr, xs, 6, back);
  rlx_node hit = rlx_one_hot(gr, rlx_argmax(gr, rlx_reshape(gr, xs, 3 + nd, win), 2 + nd, 0), taps, tx.dtype);
  rlx_node dx = rlx_mul(gr, hit, rlx_reshape(gr, g, 3 + nd, gsh));
  if (nd == 2) {
    const int64_t tiled[6] = {N, C, split[2], split[4], split[3], split[5]};
    dx = rlx_transpose(gr, rlx_reshape(gr, dx, 6, tiled), 6, back);
  }
  dx = rlx_reshape(gr, dx, 2 + nd, full);
  return cropped ? rlx_pad(gr, dx, 2 + nd, before, after, 0.0) : dx;
}

rlx_status ad_vjp_Pool(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  rlx_node dx = ad_active(c, n->in[0]) ? tiled_max_pool_grad(c, n, gout[0]) : -1;
  if (dx >= 0) return ad_accum(c, n->in[0], 0, dx);
  return ad_vjp_expanded(c, n, gout, ad_expand_pool);
}

/* Each input element was copied to a 2x2 block: sum the block. */
rlx_status ad_vjp_ResizeNearest2x(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  ir_shape s = ad_type(c, n->in[0]).shape;
  int64_t blocks[6] = {s.d[0], s.d[1], s.d[2], 2, s.d[3], 2}, axes[2] = {3, 5};
  rlx_node r = rlx_reshape(c->g, gout[0], 6, blocks);
  return ad_accum(c, n->in[0], 0, rlx_reduce(c->g, RLX_REDUCE_SUM, r, 2, axes, 0));
}

/* Bilinear source coordinate, as the Resize kernel (torch's
 * area_pixel_compute_source_index). */
static double bilinear_src(int64_t dst, int64_t in, int64_t out, int align_corners) {
  if (align_corners) return out > 1 ? (double)dst * (double)(in - 1) / (double)(out - 1) : 0.0;
  double s = ((double)dst + 0.5) * (double)in / (double)out - 0.5;
  return s < 0 ? 0 : s;
}

/* The interpolation matrix of one spatial dim: w[o * in + i] is the weight
 * of input i in output o (transposed: w[i * out + o]). */
static void resize_matrix(const ir_node *n, int64_t in, int64_t out, int transposed, double *w) {
  int bilinear = n->a.resize_mode == RLX_RESIZE_BILINEAR;
  for (int64_t i = 0; i < in * out; i++) w[i] = 0;
  for (int64_t o = 0; o < out; o++) {
    int64_t i0, i1;
    double l;
    if (bilinear) {
      double s = bilinear_src(o, in, out, (int)n->a.align_corners);
      i0 = (int64_t)s;
      i1 = i0 < in - 1 ? i0 + 1 : i0;
      l = s - (double)i0;
    } else {
      i0 = i1 = o * in / out;
      l = 0;
    }
    w[transposed ? i0 * out + o : o * in + i0] += 1 - l;
    w[transposed ? i1 * out + o : o * in + i1] += l;
  }
}

/* Resize is y = A x B^T per plane (A [OH, H], B [OW, W] the interpolation
 * matrices), so dx = A^T g B. */
rlx_status ad_vjp_Resize(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  ir_type tx = ad_type(c, n->in[0]);
  int64_t H = tx.shape.d[2], W = tx.shape.d[3], OH = n->a.out_h, OW = n->a.out_w;
  if (ir_dim_is_sym(H) || ir_dim_is_sym(W)) return ad_unsupported(c, n, "Resize of symbolic spatial dims");
  double *at = malloc((size_t)(H * OH + W * OW) * sizeof *at);
  if (!at) return ir_fail(c->g, n, RLX_ERR_NOMEM, "autodiff: out of memory"), RLX_ERR_NOMEM;
  double *bm = at + H * OH;
  resize_matrix(n, H, OH, 1, at);
  resize_matrix(n, W, OW, 0, bm);
  int64_t ad[2] = {H, OH}, bd[2] = {OW, W};
  rlx_node A_t = ad_constant(c, tx.dtype, 2, ad, at), B = ad_constant(c, tx.dtype, 2, bd, bm);
  free(at);
  return ad_accum(c, n->in[0], 0, rlx_matmul(c->g, rlx_matmul(c->g, A_t, gout[0]), B));
}

/* v [.., len, ..] brought to length want along axis: cropped or zero-padded
 * at the end (the adjoint of the FFT's own zero-pad or crop to n). */
static rlx_node fit_length(ad_ctx *c, rlx_node v, int axis, int64_t want) {
  ir_shape s = ad_type(c, v).shape;
  int64_t len = s.d[axis];
  if (len > want) return rlx_narrow(c->g, v, axis, 0, want);
  if (len == want) return v;
  int64_t b[RLX_MAX_RANK] = {0}, e[RLX_MAX_RANK] = {0};
  e[axis] = want - len;
  return rlx_pad(c->g, v, s.rank, b, e, 0.0);
}

/* A per-bin weight [m, 1, ..., 1, parts] against the layout of a complex
 * tensor of rank `rank` with bins on `axis`: w(k, part). */
static rlx_node bin_weights(ad_ctx *c, rlx_dtype t, int rank, int axis, int64_t m, int parts, int64_t tn,
                            double (*w)(int64_t k, int part, int64_t tn)) {
  int64_t dims[RLX_MAX_RANK];
  int r = 0;
  dims[r++] = m;
  for (int i = axis + 1; i < rank - 1; i++) dims[r++] = 1;
  dims[r++] = parts;
  double *v = malloc((size_t)(m * parts) * sizeof *v);
  if (!v) return ir_fail(c->g, NULL, RLX_ERR_NOMEM, "autodiff: out of memory");
  for (int64_t k = 0; k < m; k++)
    for (int p = 0; p < parts; p++) v[k * parts + p] = w(k, p, tn);
  rlx_node r_node = ad_constant(c, t, r, dims, v);
  free(v);
  return r_node;
}

/* Whether bin k of a length-tn real transform is its own mirror (DC, and
 * Nyquist for even tn). */
static int self_mirrored(int64_t k, int64_t tn) { return k == 0 || (tn % 2 == 0 && k == tn / 2); }

/* rfft's adjoint weights its bins: the middle ones stand for two
 * conjugate bins of the full spectrum, which irfft counts twice. */
static double rfft_weight(int64_t k, int part, int64_t tn) {
  (void)part;
  return self_mirrored(k, tn) ? 1.0 : 0.5;
}

/* irfft's adjoint: rfft(g) * (1 or 2) / n; the imaginary parts of the
 * self-mirrored bins are ignored by irfft, so get nothing. */
static double irfft_weight(int64_t k, int part, int64_t tn) {
  if (self_mirrored(k, tn)) return part ? 0.0 : 1.0 / (double)tn;
  return 2.0 / (double)tn;
}

/* The DFT of length n is F, the inverse F^H / n; as real-linear maps on
 * (re, im) pairs their adjoints are F^H = n ifft and F / n = fft / n. */
rlx_status ad_vjp_Fft(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  rlx_graph *g = c->g;
  ir_type tx = ad_type(c, n->in[0]);
  const int real = n->a.real != 0, inverse = n->a.inverse != 0, axis = (int)n->a.axis;
  const int64_t L = tx.shape.d[axis];
  int64_t tn = n->a.n ? n->a.n : real && inverse ? 2 * (L - 1) : L;
  if (ir_dim_is_sym(L)) return ad_unsupported(c, n, "Fft of symbolic length");
  rlx_node r;
  if (!real) {
    r = rlx_fft(g, gout[0], !inverse, 0, tn, axis);
    r = ad_scale(c, r, inverse ? 1.0 / (double)tn : (double)tn);
  } else if (!inverse) {
    int rank = ad_type(c, gout[0]).shape.rank;
    rlx_node h = rlx_mul(g, gout[0], bin_weights(c, tx.dtype, rank, axis, tn / 2 + 1, 1, tn, rfft_weight));
    r = ad_scale(c, rlx_fft(g, h, 1, 1, tn, axis), (double)tn);
  } else {
    r = rlx_fft(g, gout[0], 0, 1, tn, axis);
    r = rlx_mul(g, r, bin_weights(c, tx.dtype, tx.shape.rank, axis, tn / 2 + 1, 2, tn, irfft_weight));
  }
  return ad_accum(c, n->in[0], 0, fit_length(c, r, axis, L));
}

rlx_status ad_vjp_LogMel(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  return ad_vjp_expanded(c, n, gout, ad_expand_log_mel);
}
