/* ops_grid.c — GridSample, AffineGrid and RoiAlign.
 *
 * GridSample (2 or 3 spatial dims) as ONNX's reference defines it: each
 * grid coordinate is unnormalized (align_corners or not), rounded half to
 * even for nearest, and when it lies outside the borders clamped (border)
 * or reflected (reflection). Along each axis it has 1 (nearest), 2
 * (linear) or 4 (cubic, Keys with a = -0.75) taps at floor(p) + k with
 * their weights; a tap outside the input reads 0 (zeros), the clamped
 * index (border) or the reflected one (reflection). The output is the sum
 * over every combination of taps of the product of their weights times
 * the input there, one Gather from X laid out as [N * spatial, C].
 */
#include "onnx.h"

#include <string.h>

#define K(v) ox_scalar(im, RLX_F32, (v))

static rlx_node floor_f(ox_importer *im, rlx_node x) { return rlx_sub(im->g, x, rlx_mod(im->g, x, K(1))); }

/* ONNX's _gs_reflect: x reflected by the near border until inside [lo, hi]. */
static rlx_node reflect(ox_importer *im, rlx_node x, double lo, double hi) {
  rlx_graph *g = im->g;
  double rng = hi - lo;
  if (rng <= 0) return rlx_mul(g, x, K(0));   /* a single cell: lo, which is 0 here */
  rlx_node below = rlx_compare(g, RLX_CMP_LT, x, K(lo)), above = rlx_compare(g, RLX_CMP_GT, x, K(hi));
  rlx_node dx = rlx_where(g, below, rlx_sub(g, K(lo), x), rlx_sub(g, x, K(hi)));
  rlx_node n = floor_f(im, rlx_div(g, dx, K(rng)));
  rlx_node r = rlx_sub(g, dx, rlx_mul(g, n, K(rng)));
  rlx_node even = rlx_compare(g, RLX_CMP_EQ, rlx_mod(g, n, K(2)), K(0));
  rlx_node from_lo = rlx_add(g, K(lo), r), from_hi = rlx_sub(g, K(hi), r);
  rlx_node fx = rlx_where(g, below, rlx_where(g, even, from_lo, from_hi), rlx_where(g, even, from_hi, from_lo));
  return rlx_where(g, below, fx, rlx_where(g, above, fx, x));
}

enum { PAD_ZEROS, PAD_BORDER, PAD_REFLECTION };

/* One tap along an axis of size s: its index (as F32) made readable, and
 * whether it reads the input (zeros: inside it; else always). */
static rlx_node tap_index(ox_importer *im, rlx_node i, int64_t s, int pad, double lo, double hi, rlx_node *inside) {
  rlx_graph *g = im->g;
  double last = (double)(s - 1);
  *inside = -1;
  if (pad == PAD_ZEROS)
    *inside = rlx_where(g, rlx_compare(g, RLX_CMP_GE, i, K(0)), rlx_compare(g, RLX_CMP_LE, i, K(last)),
                        rlx_compare(g, RLX_CMP_NE, K(0), K(0)));
  else if (pad == PAD_REFLECTION) {   /* truncated, as the reference's int() */
    rlx_node f = reflect(im, i, lo, hi);
    i = rlx_where(g, rlx_compare(g, RLX_CMP_LT, f, K(0)), rlx_activation(g, RLX_ACT_NEG, floor_f(im, rlx_activation(g, RLX_ACT_NEG, f))),
                  floor_f(im, f));
  }
  return rlx_clamp(g, i, 0, last);
}

/* Keys' cubic weights (a = -0.75) of the taps at -1, 0, 1, 2 from floor(p), t = p - floor(p). */
static rlx_node cubic_weight(ox_importer *im, rlx_node t, int k) {
  rlx_graph *g = im->g;
  const double a = -0.75;
  rlx_node d = k == -1 ? rlx_add(g, t, K(1)) : k == 0 ? t : k == 1 ? rlx_sub(g, K(1), t) : rlx_sub(g, K(2), t);
  if (k == 0 || k == 1)   /* ((a + 2) d - (a + 3)) d^2 + 1 */
    return rlx_add(g, rlx_mul(g, rlx_sub(g, rlx_mul(g, K(a + 2), d), K(a + 3)), rlx_mul(g, d, d)), K(1));
  /* ((a d - 5a) d + 8a) d - 4a */
  return rlx_sub(g, rlx_mul(g, rlx_add(g, rlx_mul(g, rlx_sub(g, rlx_mul(g, K(a), d), K(5 * a)), d), K(8 * a)), d), K(4 * a));
}

rlx_status ox_op_grid_sample(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node x = IN(0), grid = IN(1);
  NEED(x);
  NEED(grid);
  int64_t xd[RLX_MAX_RANK], gd[RLX_MAX_RANK];
  rlx_dtype xt;
  int xr = rlx_node_type(g, x, &xt, xd), gr = rlx_node_type(g, grid, NULL, gd), nd = xr - 2;
  if (nd < 1 || nd > 3 || gr != xr || gd[gr - 1] != nd || gd[0] != xd[0])
    return ox_node_fail(im, n, RLX_ERR_SHAPE, "X of rank %d and grid of rank %d (last dim %lld)", xr, gr, (long long)gd[gr - 1]);
  for (int i = 0; i < xr; i++)
    if (ir_dim_is_sym(xd[i]) || ir_dim_is_sym(gd[i])) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "symbolic dims");
  const char *mode = ox_attr_str(n, "mode", im->opset >= 20 ? "linear" : "bilinear");
  const char *pm = ox_attr_str(n, "padding_mode", "zeros");
  int align = (int)ox_attr_int(n, "align_corners", 0);
  int taps = !strcmp(mode, "nearest") ? 1 : !strcmp(mode, "linear") || !strcmp(mode, "bilinear") ? 2
           : !strcmp(mode, "cubic") || !strcmp(mode, "bicubic") ? 4 : 0;
  int pad = !strcmp(pm, "zeros") ? PAD_ZEROS : !strcmp(pm, "border") ? PAD_BORDER : !strcmp(pm, "reflection") ? PAD_REFLECTION : -1;
  if (!taps || pad < 0) return ox_node_fail(im, n, RLX_ERR_INVALID, "mode \"%s\", padding_mode \"%s\"", mode, pm);
  int64_t N = xd[0], C = xd[1], S = 1, P = 1;
  for (int i = 0; i < nd; i++) S *= xd[2 + i];
  for (int i = 1; i < gr - 1; i++) P *= gd[i];
  /* X as [N * S, C]; the grid as [N, P, nd] in F32 */
  int64_t perm[RLX_MAX_RANK] = {0}, t2[2] = {N * S, C}, g3[3] = {N, P, nd};
  for (int i = 0; i < nd; i++) perm[1 + i] = 2 + i;
  perm[1 + nd] = 1;
  rlx_node table = rlx_reshape(g, rlx_transpose(g, x, xr, perm), 2, t2);
  rlx_node gf = rlx_reshape(g, rlx_cast(g, grid, RLX_F32), 3, g3);
  /* per axis: the taps' indices (F32), weights and whether they read */
  rlx_node idx[3][4], w[3][4], in[3][4];
  for (int i = 0; i < nd; i++) {
    int64_t s = xd[2 + i];
    double lo = align ? 0 : -0.5, hi = align ? (double)s - 1 : (double)s - 0.5;
    rlx_node c = rlx_reshape(g, rlx_narrow(g, gf, 2, nd - 1 - i, 1), 2, (int64_t[]){N, P});   /* x is the last axis */
    rlx_node p = align ? rlx_mul(g, rlx_add(g, c, K(1)), K(0.5 * (double)(s - 1)))
                       : rlx_mul(g, rlx_sub(g, rlx_mul(g, rlx_add(g, c, K(1)), K((double)s)), K(1)), K(0.5));
    if (taps == 1) p = rlx_activation(g, RLX_ACT_ROUND, p);
    rlx_node out = rlx_where(g, rlx_compare(g, RLX_CMP_LT, p, K(lo)), rlx_compare(g, RLX_CMP_EQ, K(0), K(0)),
                             rlx_compare(g, RLX_CMP_GT, p, K(hi)));
    if (pad == PAD_BORDER) p = rlx_where(g, out, rlx_clamp(g, p, 0, (double)s - 1), p);
    else if (pad == PAD_REFLECTION) p = reflect(im, p, lo, hi);
    rlx_node f = floor_f(im, p), t = rlx_sub(g, p, f);
    for (int k = 0; k < taps; k++) {
      int off = taps == 4 ? k - 1 : k;
      rlx_node at = taps == 1 ? p : rlx_add(g, f, K(off));
      idx[i][k] = tap_index(im, at, s, pad, lo, hi, &in[i][k]);
      w[i][k] = taps == 1 ? -1 : taps == 2 ? (k ? t : rlx_sub(g, K(1), t)) : cubic_weight(im, t, off);
    }
  }
  /* the sum over every combination of taps */
  int64_t stride[3], combos = 1;
  for (int i = nd - 1, st = 1; i >= 0; st *= (int)xd[2 + i], i--) stride[i] = st;
  for (int i = 0; i < nd; i++) combos *= taps;
  rlx_node base = rlx_mul(g, rlx_iota(g, RLX_I64, 2, (int64_t[]){N, P}, 0), ox_scalar(im, RLX_I64, (double)S)), acc = -1;
  for (int64_t cmb = 0; cmb < combos; cmb++) {
    rlx_node flat = base, wt = -1, ok = -1;
    for (int i = 0, rest = (int)cmb; i < nd; i++, rest /= taps) {
      int k = rest % taps;
      flat = rlx_add(g, flat, rlx_mul(g, rlx_cast(g, idx[i][k], RLX_I64), ox_scalar(im, RLX_I64, (double)stride[i])));
      if (w[i][k] >= 0) wt = wt < 0 ? w[i][k] : rlx_mul(g, wt, w[i][k]);
      if (in[i][k] >= 0) ok = ok < 0 ? in[i][k] : rlx_where(g, ok, in[i][k], ok);
    }
    if (ok >= 0) wt = rlx_where(g, ok, wt < 0 ? K(1) : wt, K(0));
    rlx_node v = rlx_cast(g, rlx_gather(g, table, flat, 0), RLX_F32);   /* [N, P, C] */
    if (wt >= 0) v = rlx_mul(g, v, rlx_reshape(g, wt, 3, (int64_t[]){N, P, 1}));
    acc = acc < 0 ? v : rlx_add(g, acc, v);
  }
  int64_t yd[RLX_MAX_RANK];
  yd[0] = N;
  yd[1] = C;
  for (int i = 1; i < gr - 1; i++) yd[1 + i] = gd[i];
  rlx_node y = rlx_transpose(g, acc, 3, (int64_t[]){0, 2, 1});
  return ox_set_out(im, n, 0, rlx_cast(g, rlx_reshape(g, y, xr, yd), xt));
}

/* AffineGrid: theta [N, 2, 3] or [N, 3, 4] times the normalized base grid
 * of size (N, C, H, W) or (N, C, D, H, W): [N, H, W, 2] or [N, D, H, W, 3]. */
rlx_status ox_op_affine_grid(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node theta = IN(0);
  NEED(theta);
  int64_t cnt, td[RLX_MAX_RANK];
  const int64_t *size = ox_in_ints(im, n, 1, &cnt);
  if (!size || (cnt != 4 && cnt != 5)) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "size not known at import");
  if (ox_ints_sym(im, size, cnt)) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "size " OX_SYM_HINT);
  int nd = (int)cnt - 2, align = (int)ox_attr_int(n, "align_corners", 0);
  rlx_dtype t;
  if (rlx_node_type(g, theta, &t, td) != 3 || td[1] != nd || td[2] != nd + 1)
    return ox_node_fail(im, n, RLX_ERR_SHAPE, "theta must be [N, %d, %d]", nd, nd + 1);
  int64_t P = 1;
  for (int i = 2; i < cnt; i++) {
    if (size[i] < 1 || size[i] > (1 << 20)) return ox_node_fail(im, n, RLX_ERR_INVALID, "size %lld", (long long)size[i]);
    P *= size[i];
  }
  if (P > (1 << 24)) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a grid of %lld points", (long long)P);
  double *base = ox_alloc(im->arena, (size_t)(P * (nd + 1)) * sizeof *base);
  if (!base) return ox_node_fail(im, n, RLX_ERR_NOMEM, "out of memory");
  for (int64_t p = 0; p < P; p++) {   /* row p: (x, y[, z], 1), x along the last dim */
    int64_t rest = p;
    for (int i = nd - 1; i >= 0; i--) {
      int64_t s = size[2 + i], at = rest % s;
      rest /= s;
      double v = align ? (s > 1 ? -1 + 2.0 * (double)at / (double)(s - 1) : 0) : (2.0 * (double)at + 1) / (double)s - 1;
      base[p * (nd + 1) + (nd - 1 - i)] = v;
    }
    base[p * (nd + 1) + nd] = 1;
  }
  rlx_node b = rlx_cast(g, rlx_constant(g, RLX_F64, 2, (int64_t[]){P, nd + 1}, base), t);
  rlx_node grid = rlx_matmul(g, b, rlx_transpose(g, theta, 3, (int64_t[]){0, 2, 1}));   /* [N, P, nd] */
  int64_t od[RLX_MAX_RANK];
  od[0] = td[0];
  for (int i = 0; i < nd; i++) od[1 + i] = size[2 + i];
  od[1 + nd] = nd;
  return ox_set_out(im, n, 0, rlx_reshape(g, grid, nd + 2, od));
}

/* RoiAlign(X [N, C, H, W], rois [R, 4], batch_indices [R]) with a fixed
 * sampling_ratio s: each output bin samples an s x s grid, bilinear from
 * its 4 corners as ONNX's reference computes them (a sample more than one
 * cell outside reads 0; coordinates clamped to the last row and column),
 * then the average, or the max over the samples of each weighted corner.
 * The grid is separable, so the coordinates and weights are computed per
 * axis ([R, samples]) and each corner is one Gather from X as [N*H*W, C]. */
rlx_status ox_op_roi_align(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node x = IN(0), rois = IN(1), bi = IN(2);
  NEED(x);
  NEED(rois);
  NEED(bi);
  int64_t xd[RLX_MAX_RANK], rd[RLX_MAX_RANK];
  rlx_dtype t;
  if (rlx_node_type(g, x, &t, xd) != 4 || rlx_node_type(g, rois, NULL, rd) != 2 || rd[1] != 4)
    return ox_node_fail(im, n, RLX_ERR_SHAPE, "X must be [N, C, H, W] and rois [R, 4]");
  for (int i = 0; i < 4; i++)
    if (ir_dim_is_sym(xd[i]) || (i < 2 && ir_dim_is_sym(rd[i]))) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "symbolic dims");
  int64_t oh = ox_attr_int(n, "output_height", 1), ow = ox_attr_int(n, "output_width", 1), sr = ox_attr_int(n, "sampling_ratio", 0);
  if (sr < 1) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "sampling_ratio 0 (a grid that depends on each roi's size)");
  if (oh < 1 || ow < 1 || oh * sr > 4096 || ow * sr > 4096) return ox_node_fail(im, n, RLX_ERR_INVALID, "an output of %lld x %lld", (long long)oh, (long long)ow);
  int half = !strcmp(ox_attr_str(n, "coordinate_transformation_mode", im->opset >= 16 ? "half_pixel" : "output_half_pixel"), "half_pixel");
  int is_max = !strcmp(ox_attr_str(n, "mode", "avg"), "max");
  double scale = ox_attr_float(n, "spatial_scale", 1), off = half ? 0.5 : 0;
  int64_t N = xd[0], C = xd[1], H = xd[2], W = xd[3], R = rd[0];
  rlx_node rf = rlx_cast(g, rois, RLX_F32);
  rlx_node hi_w[2][2], idx_c[2][2], ok[2];   /* per axis (0: y, 1: x): corner indices and weights */
  for (int a = 0; a < 2; a++) {
    int64_t bins = a ? ow : oh, size = a ? W : H, m = bins * sr;
    rlx_node start = rlx_sub(g, rlx_mul(g, rlx_narrow(g, rf, 1, a ? 0 : 1, 1), K(scale)), K(off));   /* [R, 1] */
    rlx_node end = rlx_sub(g, rlx_mul(g, rlx_narrow(g, rf, 1, a ? 2 : 3, 1), K(scale)), K(off));
    rlx_node len = rlx_sub(g, end, start);
    if (!half) len = rlx_max(g, len, K(1));
    float *c = ox_alloc(im->arena, (size_t)m * sizeof *c);
    if (!c) return ox_node_fail(im, n, RLX_ERR_NOMEM, "out of memory");
    for (int64_t j = 0; j < m; j++) c[j] = (float)((double)(j / sr) + ((double)(j % sr) + 0.5) / (double)sr);
    rlx_node p = rlx_add(g, start, rlx_mul(g, rlx_div(g, len, K((double)bins)), rlx_constant(g, RLX_F32, 2, (int64_t[]){1, m}, c)));
    ok[a] = rlx_where(g, rlx_compare(g, RLX_CMP_GE, p, K(-1)), rlx_compare(g, RLX_CMP_LE, p, K((double)size)),
                      rlx_compare(g, RLX_CMP_NE, p, p));
    p = rlx_max(g, p, K(0));
    rlx_node low = floor_f(im, p), last = rlx_compare(g, RLX_CMP_GE, low, K((double)(size - 1)));
    low = rlx_where(g, last, K((double)(size - 1)), low);
    p = rlx_where(g, last, low, p);
    rlx_node high = rlx_where(g, last, low, rlx_add(g, low, K(1))), l = rlx_sub(g, p, low);
    idx_c[a][0] = rlx_cast(g, low, RLX_I64);
    idx_c[a][1] = rlx_cast(g, high, RLX_I64);
    hi_w[a][0] = rlx_sub(g, K(1), l);
    hi_w[a][1] = l;
  }
  int64_t sh = oh * sr, sw = ow * sr;
  rlx_node table = rlx_reshape(g, rlx_transpose(g, x, 4, (int64_t[]){0, 2, 3, 1}), 2, (int64_t[]){N * H * W, C});
  rlx_node base = rlx_reshape(g, rlx_mul(g, rlx_cast(g, bi, RLX_I64), ox_scalar(im, RLX_I64, (double)(H * W))), 3, (int64_t[]){R, 1, 1});
  rlx_node valid = rlx_where(g, rlx_reshape(g, ok[0], 3, (int64_t[]){R, sh, 1}), rlx_reshape(g, ok[1], 3, (int64_t[]){R, 1, sw}),
                             rlx_compare(g, RLX_CMP_NE, K(0), K(0)));
  rlx_node acc = -1;
  for (int cy = 0; cy < 2; cy++)
    for (int cx = 0; cx < 2; cx++) {
      rlx_node iy = rlx_reshape(g, rlx_mul(g, idx_c[0][cy], ox_scalar(im, RLX_I64, (double)W)), 3, (int64_t[]){R, sh, 1});
      rlx_node flat = rlx_add(g, rlx_add(g, base, iy), rlx_reshape(g, idx_c[1][cx], 3, (int64_t[]){R, 1, sw}));
      rlx_node w = rlx_mul(g, rlx_reshape(g, hi_w[0][cy], 3, (int64_t[]){R, sh, 1}), rlx_reshape(g, hi_w[1][cx], 3, (int64_t[]){R, 1, sw}));
      w = rlx_where(g, valid, w, K(0));
      rlx_node v = rlx_mul(g, rlx_cast(g, rlx_gather(g, table, flat, 0), RLX_F32), rlx_reshape(g, w, 4, (int64_t[]){R, sh, sw, 1}));
      acc = acc < 0 ? v : is_max ? rlx_max(g, acc, v) : rlx_add(g, acc, v);   /* [R, sh, sw, C] */
    }
  acc = rlx_reshape(g, acc, 6, (int64_t[]){R, oh, sr, ow, sr, C});
  rlx_node y = rlx_reduce(g, is_max ? RLX_REDUCE_MAX : RLX_REDUCE_MEAN, acc, 2, (int64_t[]){2, 4}, 0);   /* [R, oh, ow, C] */
  return ox_set_out(im, n, 0, rlx_cast(g, rlx_transpose(g, y, 4, (int64_t[]){0, 3, 1, 2}), t));
}
