/* ops_pool.c — MaxPool, AveragePool and LpPool. With 1 or 2 spatial dims,
 * no dilations and a float input they are rlx's Pool op. Otherwise (3
 * spatial dims, dilations, integer inputs) they are built one spatial axis
 * at a time: a box window is separable (the max or sum over the window is
 * the max or sum over each axis in turn, and an average's count is the
 * product of the counts along each axis), and along an axis the k taps of
 * every window are k strided Slices of the padded input. MaxPool's Indices
 * take every tap of the whole window instead.
 */
#include "onnx.h"

#include <math.h>
#include <string.h>

static int is(const ox_node *n, const char *op) { return !strcmp(n->op_type, op); }

/* The attributes of a pool; ceil_mode becomes extra end padding (up to
 * stride - 1, never counted), after the explicit pads kept in end[]. */
static rlx_status read_pool(ox_importer *im, const ox_node *n, const int64_t *xd, int xr, ox_spatial *sp, int64_t *end) {
  const ox_attr *ks = ox_attr_get(n, "kernel_shape");
  if (!ks || ks->n_ints != xr - 2) return ox_node_fail(im, n, RLX_ERR_INVALID, "kernel_shape missing or of the wrong length");
  rlx_status st = ox_read_spatial(im, n, xd, xr, ks->ints, 0, sp);
  if (st) return st;
  for (int i = 0; i < sp->nd; i++) {
    end[i] = sp->pad[sp->nd + i];
    if (sp->k[i] < 1) return ox_node_fail(im, n, RLX_ERR_INVALID, "kernel_shape %lld", (long long)sp->k[i]);
    if (!ox_attr_int(n, "ceil_mode", 0)) continue;
    int64_t in = xd[2 + i], ek = (sp->k[i] - 1) * sp->d[i] + 1;
    if (ir_dim_is_sym(in)) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "ceil_mode over a symbolic dim");
    int64_t span = in + sp->pad[i] + sp->pad[sp->nd + i] - ek;
    int64_t out = (span + sp->s[i] - 1) / sp->s[i] + 1;
    if ((out - 1) * sp->s[i] >= in + sp->pad[i]) out--;   /* the last window must start inside */
    int64_t need = (out - 1) * sp->s[i] + ek - (in + sp->pad[i] + sp->pad[sp->nd + i]);
    if (need > 0) sp->pad[sp->nd + i] += need;
  }
  return RLX_OK;
}

/* x pooled along axis: the max or the sum of the k taps of each window. */
static rlx_node pool_axis(ox_importer *im, const ox_node *n, rlx_node x, int axis, int64_t k, int64_t s, int64_t d,
                          int64_t pb, int64_t pe, int is_max, int64_t *n_out) {
  rlx_graph *g = im->g;
  int64_t dims[RLX_MAX_RANK], before[RLX_MAX_RANK] = {0}, after[RLX_MAX_RANK] = {0};
  int64_t starts[RLX_MAX_RANK] = {0}, steps[RLX_MAX_RANK];
  rlx_dtype t;
  int r = rlx_node_type(g, x, &t, dims);
  if (ir_dim_is_sym(dims[axis])) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "pooling over a symbolic dim"), -1;
  *n_out = (dims[axis] + pb + pe - (k - 1) * d - 1) / s + 1;
  if (*n_out < 1) return ox_node_fail(im, n, RLX_ERR_SHAPE, "a window larger than the padded input"), -1;
  before[axis] = pb;
  after[axis] = pe;
  double lowest = ir_is_float(t) ? -INFINITY : t == RLX_I8 ? -128 : t == RLX_I16 ? -32768 : t == RLX_I32 ? -2147483648.0
                : t == RLX_I64 ? -9223372036854775808.0 : 0;
  if (pb || pe) x = rlx_pad(g, x, r, before, after, is_max ? lowest : 0);
  rlx_node acc = -1;
  for (int i = 0; i < r; i++) steps[i] = 1;
  steps[axis] = s;
  for (int64_t j = 0; j < k; j++) {
    int64_t ends[RLX_MAX_RANK];
    memcpy(ends, dims, sizeof ends);
    starts[axis] = j * d;
    ends[axis] = j * d + (*n_out - 1) * s + 1;
    rlx_node tap = rlx_slice(g, x, r, starts, ends, steps);
    acc = acc < 0 ? tap : is_max ? rlx_max(g, acc, tap) : rlx_add(g, acc, tap);
  }
  return acc;
}

/* The separable pool; kind: 'M' max, 'A' average, 'L' the sum (of |x|^p). */
static rlx_node pool_separable(ox_importer *im, const ox_node *n, rlx_node x, const ox_spatial *sp, const int64_t *end,
                               const int64_t *xd, int kind, int cip) {
  rlx_graph *g = im->g;
  int64_t outs[OX_MAX_SPATIAL], count_dims[RLX_MAX_RANK] = {1, 1};
  for (int i = 0; i < sp->nd && x >= 0; i++)
    x = pool_axis(im, n, x, 2 + i, sp->k[i], sp->s[i], sp->d[i], sp->pad[i], sp->pad[sp->nd + i], kind == 'M', &outs[i]);
  if (x < 0 || kind != 'A') return x;
  /* the count of each window: the product over the axes of the taps that
   * land on the input (count_include_pad: on the explicitly padded input) */
  int64_t total = 1;
  for (int i = 0; i < sp->nd; i++) total *= (count_dims[2 + i] = outs[i]);
  if (total > ((int64_t)1 << 24)) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "an output of %lld windows", (long long)total), -1;
  float *count = ox_alloc(im->arena, (size_t)total * sizeof *count);
  if (!count) return ox_node_fail(im, n, RLX_ERR_NOMEM, "out of memory"), -1;
  for (int64_t e = 0; e < total; e++) {
    double c = 1;
    int64_t left = e;
    for (int i = sp->nd - 1; i >= 0; i--) {
      int64_t o = left % outs[i], taps = 0, lo = cip ? -sp->pad[i] : 0, hi = xd[2 + i] + (cip ? end[i] : 0);
      left /= outs[i];
      for (int64_t j = 0; j < sp->k[i]; j++) {
        int64_t at = o * sp->s[i] + j * sp->d[i] - sp->pad[i];
        taps += at >= lo && at < hi;
      }
      c *= (double)taps;
    }
    count[e] = (float)c;
  }
  rlx_dtype t;
  rlx_node_type(g, x, &t, NULL);
  rlx_node cn = rlx_cast(g, rlx_constant(g, RLX_F32, 2 + sp->nd, count_dims, count), t);
  return rlx_div(g, x, cn);
}

static int needs_separable(rlx_graph *g, rlx_node x, const ox_spatial *sp) {
  rlx_dtype t;
  rlx_node_type(g, x, &t, NULL);
  int dilated = 0;
  for (int i = 0; i < sp->nd; i++) dilated |= sp->d[i] != 1;
  return sp->nd > 2 || dilated || !ir_is_float(t);
}

static rlx_pool_desc pool_desc(const ox_spatial *sp, rlx_pool_kind kind, int cip) {
  rlx_pool_desc d = {.kind = kind, .ndim = sp->nd, .count_include_pad = cip};
  for (int i = 0; i < sp->nd; i++) {
    d.kernel[i] = sp->k[i];
    d.stride[i] = sp->s[i];
    d.pad[i] = sp->pad[i];
    d.pad[2 + i] = sp->pad[sp->nd + i];
  }
  if (sp->nd == 1) {   /* rlx's 1-D pad is [begin, end] */
    d.pad[1] = sp->pad[1];
    d.pad[2] = 0;
  }
  return d;
}

/* MaxPool with its Indices output: every tap of the window (the product of
 * the per-axis taps) of the padded input and of its flat index (the
 * spatial part column-major with storage_order 1), the first largest kept. */
static rlx_status max_pool_indices(ox_importer *im, const ox_node *n, rlx_node x, const int64_t *xd, int xr, const ox_spatial *sp) {
  rlx_graph *g = im->g;
  int column_major = ox_attr_int(n, "storage_order", 0) != 0;   /* the spatial dims' index column-major */
  rlx_dtype t;
  rlx_node_type(g, x, &t, NULL);
  int64_t before[RLX_MAX_RANK] = {0}, after[RLX_MAX_RANK] = {0}, outs[OX_MAX_SPATIAL], taps = 1, stride[RLX_MAX_RANK], plane = 1;
  for (int i = 0; i < xr; i++)
    if (ir_dim_is_sym(xd[i])) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "symbolic dims");
  for (int k = 0; k < xr - 2; k++) {   /* spatial strides, then N and C over whole planes */
    int i = column_major ? 2 + k : xr - 1 - k;
    stride[i] = plane;
    plane *= xd[i];
  }
  stride[1] = plane;
  stride[0] = plane * xd[1];
  rlx_node flat = -1;
  for (int i = 0; i < xr; i++) {   /* the flat index of every element */
    rlx_node at = rlx_mul(g, rlx_iota(g, RLX_I64, xr, xd, i), ox_scalar(im, RLX_I64, (double)stride[i]));
    flat = flat < 0 ? at : rlx_add(g, flat, at);
  }
  for (int i = 0; i < sp->nd; i++) {
    before[2 + i] = sp->pad[i];
    after[2 + i] = sp->pad[sp->nd + i];
    outs[i] = (xd[2 + i] + sp->pad[i] + sp->pad[sp->nd + i] - (sp->k[i] - 1) * sp->d[i] - 1) / sp->s[i] + 1;
    if (outs[i] < 1) return ox_node_fail(im, n, RLX_ERR_SHAPE, "a window larger than the padded input");
    taps *= sp->k[i];
  }
  if (taps > 4096) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a window of %lld taps with Indices", (long long)taps);
  rlx_node xp = rlx_pad(g, x, xr, before, after, ir_is_float(t) ? -INFINITY : 0), ip = rlx_pad(g, flat, xr, before, after, -1);
  rlx_node best = -1, arg = -1;
  for (int64_t k = 0; k < taps; k++) {
    int64_t starts[RLX_MAX_RANK] = {0}, ends[RLX_MAX_RANK], steps[RLX_MAX_RANK];
    for (int i = 0; i < xr; i++) ends[i] = xd[i] + before[i] + after[i], steps[i] = 1;
    for (int i = sp->nd - 1, rest = (int)k; i >= 0; rest /= (int)sp->k[i], i--) {
      starts[2 + i] = rest % sp->k[i] * sp->d[i];
      ends[2 + i] = starts[2 + i] + (outs[i] - 1) * sp->s[i] + 1;
      steps[2 + i] = sp->s[i];
    }
    rlx_node v = rlx_slice(g, xp, xr, starts, ends, steps), iv = rlx_slice(g, ip, xr, starts, ends, steps);
    if (best < 0) {
      best = v, arg = iv;
      continue;
    }
    rlx_node more = rlx_compare(g, RLX_CMP_GT, v, best);
    best = rlx_where(g, more, v, best);
    arg = rlx_where(g, more, iv, arg);
  }
  rlx_status st = ox_set_out(im, n, 0, best);
  return st ? st : ox_set_out(im, n, 1, arg);
}

rlx_status ox_op_pool(ox_importer *im, const ox_node *n) {
  rlx_node x = IN(0);
  NEED(x);
  int is_max = is(n, "MaxPool");
  int64_t xd[RLX_MAX_RANK], end[OX_MAX_SPATIAL];
  int xr = rlx_node_type(im->g, x, NULL, xd);
  ox_spatial sp;
  rlx_status st = read_pool(im, n, xd, xr, &sp, end);
  if (st) return st;
  if (is_max && n->n_outputs > 1 && n->outputs[1][0]) return max_pool_indices(im, n, x, xd, xr, &sp);
  int cip = (int)ox_attr_int(n, "count_include_pad", 0);
  int ceil_extended = 0;
  for (int i = 0; i < sp.nd; i++) ceil_extended |= end[i] != sp.pad[sp.nd + i];
  if (needs_separable(im->g, x, &sp) || (!is_max && cip && ceil_extended)) {
    rlx_node y = pool_separable(im, n, x, &sp, end, xd, is_max ? 'M' : 'A', cip);
    NEED(y);
    return ox_set_out(im, n, 0, y);
  }
  /* the ceil-mode cells are never counted: max ignores padding, the average
   * here has no count_include_pad */
  rlx_pool_desc d = pool_desc(&sp, is_max ? RLX_POOL_MAX : RLX_POOL_AVG, cip);
  return ox_set_out(im, n, 0, rlx_pool(im->g, x, &d));
}

/* LpPool: (sum over the window of |x|^p)^(1/p); rlx's Pool op sums as an
 * average with the padding counted, times the window size. */
rlx_status ox_op_lp_pool(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node x = IN(0);
  NEED(x);
  int64_t xd[RLX_MAX_RANK], end[OX_MAX_SPATIAL];
  int xr = rlx_node_type(g, x, NULL, xd);
  ox_spatial sp;
  rlx_status st = read_pool(im, n, xd, xr, &sp, end);
  if (st) return st;
  double p = (double)ox_attr_int(n, "p", 2), window = 1;
  for (int i = 0; i < sp.nd; i++) window *= (double)sp.k[i];
  rlx_node xp = rlx_pow(g, rlx_activation(g, RLX_ACT_ABS, x), ox_scalar_like(im, x, p)), sum;
  int ceil_extended = 0;
  for (int i = 0; i < sp.nd; i++) ceil_extended |= end[i] != sp.pad[sp.nd + i];
  if (needs_separable(g, x, &sp) || ceil_extended) {
    sum = pool_separable(im, n, xp, &sp, end, xd, 'L', 1);
    NEED(sum);
  } else {
    rlx_pool_desc d = pool_desc(&sp, RLX_POOL_AVG, 1);
    sum = rlx_mul(g, rlx_pool(g, xp, &d), ox_scalar_like(im, x, window));
  }
  return ox_set_out(im, n, 0, rlx_pow(g, sum, ox_scalar_like(im, x, 1.0 / p)));
}
