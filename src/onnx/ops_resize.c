/* ops_resize.c — ONNX Resize and Upsample in every mode. The common
 * cases (nearest and bilinear of rank-4 images at whole ratios) take
 * rlx's resize ops (ox_op_resize, ops_nn.c); the rest is separable: each
 * resized axis is a product with a constant [out, in] matrix computed at
 * import exactly as ONNX's reference computes its taps (coordinate
 * transformation, nearest rounding, linear, cubic with its coefficient
 * and exclude_outside, antialias, edge clamping), plus the
 * extrapolation value where tf_crop_and_resize samples outside. */
#include "onnx.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAXTAPS 64

typedef struct {
  const char *mode, *ctm, *nearest;
  double a;          /* cubic_coeff_a */
  int exclude, antialias;
} resize_kind;

static int is(const char *a, const char *b) { return !strcmp(a, b); }

/* The taps of one output coordinate at fraction ratio; their count. */
static int coeffs(const resize_kind *k, double ratio, double scale, double *c) {
  if (is(k->mode, "nearest")) {
    int up = ratio == floor(ratio) ? 1
           : is(k->nearest, "round_prefer_ceil") ? ratio >= 0.5
           : is(k->nearest, "floor") ? 0
           : is(k->nearest, "ceil") ? 1 : ratio > 0.5;
    c[0] = !up, c[1] = up;
    return 2;
  }
  double s = scale < 1 ? scale : 1, sum = 0, A = k->a;
  int m = 0;
  if (is(k->mode, "linear")) {
    if (!k->antialias) return c[0] = 1 - ratio, c[1] = ratio, 2;
    int start = (int)floor(-1 / s) + 1, foot = 2 - 2 * start;
    for (int i = 0; i < foot && m < MAXTAPS; i++) {
      double v = 1 - fabs(((double)(start + i) - ratio) * s);
      sum += c[m++] = v < 0 ? 0 : v > 1 ? 1 : v;
    }
  } else {
    if (!k->antialias) {
      double r1 = ratio + 1, q = 1 - ratio, q1 = q + 1;
      c[0] = ((A * r1 - 5 * A) * r1 + 8 * A) * r1 - 4 * A;
      c[1] = ((A + 2) * ratio - (A + 3)) * ratio * ratio + 1;
      c[2] = ((A + 2) * q - (A + 3)) * q * q + 1;
      c[3] = ((A * q1 - 5 * A) * q1 + 8 * A) * q1 - 4 * A;
      return 4;
    }
    int start = (int)floor(-2 / s) + 1, end = 2 - start;
    for (int i = start; i < end && m < MAXTAPS; i++) {
      double x = fabs(s * (i - ratio)), x2 = x * x, x3 = x2 * x;
      double v = x <= 1 ? (A + 2) * x3 - (A + 3) * x2 + 1 : x < 2 ? A * x3 - 5 * A * x2 + 8 * A * x - 4 * A : 0;
      sum += c[m++] = v;
    }
  }
  for (int i = 0; i < m; i++) c[i] /= sum;
  return m;
}

/* The [out, in] matrix of one axis (w, zeroed) and, for tf_crop_and_resize,
 * which outputs take the extrapolation value (ext). */
static void axis_matrix(const resize_kind *k, int64_t in, int64_t out, double scale, const double *roi, double *w,
                        unsigned char *ext) {
  double outw = scale * (double)in, c[MAXTAPS];
  for (int64_t o = 0; o < out; o++) {
    double y = (double)o, x;
    if (is(k->ctm, "align_corners")) x = outw == 1 ? 0 : y * (double)(in - 1) / (outw - 1);
    else if (is(k->ctm, "asymmetric")) x = y / scale;
    else if (is(k->ctm, "tf_crop_and_resize")) {
      x = (outw == 1 ? (roi[1] - roi[0]) * (double)(in - 1) / 2 : y * (roi[1] - roi[0]) * (double)(in - 1) / (outw - 1)) +
          roi[0] * (double)(in - 1);
      if ((ext[o] = x < 0 || x > (double)(in - 1))) continue;
    } else if (is(k->ctm, "pytorch_half_pixel")) x = outw == 1 ? -0.5 : (y + 0.5) / scale - 0.5;
    else if (is(k->ctm, "half_pixel_symmetric")) {
      double center = (double)in / 2;
      x = center * (1 - (double)out / outw) + (y + 0.5) / scale - 0.5;
    } else x = (y + 0.5) / scale - 0.5;   /* half_pixel */
    double fl = floor(x), ratio = x == fl ? 1 : x - fl;
    int m = coeffs(k, ratio, scale, c);
    int pad = (m + 1) / 2;
    double xp = x + pad, pp = floor(xp), frac = xp - pp;
    int64_t off = m % 2 == 0 ? (frac == 0 ? -(m / 2) : -(m / 2) + 1) : (frac <= 0.5 ? -((m - 1) / 2) : -((m - 1) / 2) + 1);
    int64_t start = (int64_t)pp + off - pad;
    if (k->exclude) {
      double sum = 0;
      for (int t = 0; t < m; t++) {
        if (start + t < 0 || start + t >= in) c[t] = 0;
        sum += c[t];
      }
      for (int t = 0; t < m && sum != 0; t++) c[t] /= sum;
    }
    for (int t = 0; t < m; t++) {
      int64_t i = start + t < 0 ? 0 : start + t >= in ? in - 1 : start + t;
      w[o * in + i] += c[t];
    }
  }
}

/* Resize by the separable matrices (any rank, any mode). */
static rlx_status resize_separable(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node x = IN(0);
  NEED(x);
  int64_t xd[RLX_MAX_RANK];
  rlx_dtype t;
  int r = rlx_node_type(g, x, &t, xd);
  int upsample = !strcmp(n->op_type, "Upsample"), legacy = upsample || im->opset < 11;
  resize_kind k = {ox_attr_str(n, "mode", "nearest"), ox_attr_str(n, "coordinate_transformation_mode", legacy ? "asymmetric" : "half_pixel"),
                   ox_attr_str(n, "nearest_mode", legacy ? "floor" : "round_prefer_floor"), ox_attr_float(n, "cubic_coeff_a", -0.75),
                   (int)ox_attr_int(n, "exclude_outside", 0), (int)ox_attr_int(n, "antialias", 0)};
  if (is(k.mode, "bilinear")) k.mode = "linear";   /* Upsample's name */
  if (!is(k.mode, "nearest") && !is(k.mode, "linear") && !is(k.mode, "cubic"))
    return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "mode %s", k.mode);
  /* axes (opset 18) map the given scales, sizes and roi onto dims */
  int64_t axes[RLX_MAX_RANK], na = r;
  const ox_attr *aa = ox_attr_get(n, "axes");
  if (aa) {
    if (aa->n_ints > r) return ox_node_fail(im, n, RLX_ERR_INVALID, "%lld axes for rank %d", (long long)aa->n_ints, r);
    na = aa->n_ints;
    for (int64_t i = 0; i < na; i++) {
      axes[i] = aa->ints[i] < 0 ? aa->ints[i] + r : aa->ints[i];
      if (axes[i] < 0 || axes[i] >= r) return ox_node_fail(im, n, RLX_ERR_INVALID, "axis %lld", (long long)aa->ints[i]);
    }
  } else {
    for (int i = 0; i < r; i++) axes[i] = i;
  }
  double scale[RLX_MAX_RANK], roi[2 * RLX_MAX_RANK];
  int64_t out[RLX_MAX_RANK];
  for (int i = 0; i < r; i++) {
    if (ir_dim_is_sym(xd[i])) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a symbolic dim");
    scale[i] = 1, out[i] = xd[i], roi[i] = 0, roi[r + i] = 1;
  }
  const ox_value *rv = !legacy && ox_has_in(n, 1) ? ox_in_known(im, n, 1) : NULL;
  if (rv && rv->numel == 2 * na)
    for (int64_t i = 0; i < na; i++) roi[axes[i]] = rv->reals ? rv->reals[i] : 0, roi[r + axes[i]] = rv->reals ? rv->reals[na + i] : 1;
  const ox_value *sv = upsample && im->opset < 9 ? NULL : ox_in_known(im, n, legacy ? 1 : 2);
  const ox_value *zv = !legacy && ox_has_in(n, 3) ? ox_in_known(im, n, 3) : NULL;
  const ox_attr *sa = ox_attr_get(n, "scales");
  if (zv && zv->numel == na && zv->ints) {
    const char *pol = ox_attr_str(n, "keep_aspect_ratio_policy", "stretch");
    double pick = is(pol, "not_larger") ? INFINITY : -INFINITY;
    for (int64_t i = 0; i < na; i++) {
      double s = (double)zv->ints[i] / (double)xd[axes[i]];
      scale[axes[i]] = s, out[axes[i]] = zv->ints[i];
      pick = is(pol, "not_larger") ? fmin(pick, s) : fmax(pick, s);
    }
    if (!is(pol, "stretch"))
      for (int64_t i = 0; i < na; i++) scale[axes[i]] = pick, out[axes[i]] = (int64_t)(pick * (double)xd[axes[i]] + 0.5);
  } else if ((sv && sv->numel == na && sv->reals) || (sa && sa->n_floats == na)) {
    for (int64_t i = 0; i < na; i++) {
      double s = sv && sv->reals ? sv->reals[i] : sa->floats[i];
      if (!(s > 0)) return ox_node_fail(im, n, RLX_ERR_INVALID, "scale %g", s);
      scale[axes[i]] = s, out[axes[i]] = (int64_t)(s * (double)xd[axes[i]]);
    }
  } else {
    return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "scales or sizes not known at import");
  }
  rlx_dtype ct = t == RLX_F64 ? RLX_F64 : RLX_F32;
  double extrapolation = ox_attr_float(n, "extrapolation_value", 0);
  rlx_node y = rlx_cast(g, x, ct);
  for (int a = 0; a < r; a++) {
    if (fabs(scale[a] - 1) < 1e-9 && out[a] == xd[a] && roi[a] == 0 && roi[r + a] == 1) continue;
    int64_t in = xd[a], o = out[a];
    if (in * o > (1 << 24) || o < 0) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "resizing %lld to %lld", (long long)in, (long long)o);
    double *w = calloc((size_t)(in * o + 1), sizeof *w);
    unsigned char *ext = calloc((size_t)o + 1, 1);
    void *wt = malloc((size_t)(in * o + 1) * 8), *bias = malloc((size_t)o * 8 + 8);
    if (!w || !ext || !wt || !bias) {
      free(w), free(ext), free(wt), free(bias);
      return ox_node_fail(im, n, RLX_ERR_NOMEM, "out of memory");
    }
    double ar[2] = {roi[a], roi[r + a]};
    axis_matrix(&k, in, o, scale[a], ar, w, ext);
    int any_ext = 0;
    for (int64_t i = 0; i < in; i++)   /* transposed: [in, out], y's axis moved last times it */
      for (int64_t j = 0; j < o; j++) ox_store(ct, wt, i * o + j, w[j * in + i], 0);
    for (int64_t j = 0; j < o; j++) any_ext |= ext[j], ox_store(ct, bias, j, ext[j] ? extrapolation : 0, 0);
    int64_t wd[2] = {in, o}, perm[RLX_MAX_RANK], back[RLX_MAX_RANK];
    for (int i = 0, m = 0; i < r; i++)
      if (i != a) perm[m++] = i;
    perm[r - 1] = a;
    for (int i = 0; i < r; i++) back[perm[i]] = i;
    rlx_node z = rlx_matmul(g, rlx_transpose(g, y, r, perm), rlx_constant(g, ct, 2, wd, wt));
    if (any_ext) z = rlx_add(g, z, rlx_constant(g, ct, 1, &o, bias));
    y = rlx_transpose(g, z, r, back);
    free(w), free(ext), free(wt), free(bias);
  }
  if (t != ct) y = rlx_cast(g, ir_is_int(t) ? rlx_activation(g, RLX_ACT_ROUND, y) : y, t);
  return ox_set_out(im, n, 0, y);
}

/* Resize / Upsample: rlx's resize ops where they apply, else separable. */
rlx_status ox_op_resize_any(ox_importer *im, const ox_node *n) {
  rlx_status st = ox_op_resize(im, n);
  if (st != RLX_ERR_UNSUPPORTED || rlx_graph_status(im->g)) return st;
  return resize_separable(im, n);
}
