/* ops_nn.c — importers of ONNX's network ops: matrix products, convolution,
 * pooling, normalization, softmax, reductions. */
#include "onnx.h"

#include <math.h>
#include <string.h>

static int is(const ox_node *n, const char *op) { return !strcmp(n->op_type, op); }

rlx_status ox_op_matmul(ox_importer *im, const ox_node *n) {
  rlx_node a = IN(0);
  NEED(a);
  rlx_node b = IN(1);
  NEED(b);
  return ox_set_out(im, n, 0, rlx_matmul(im->g, a, b));
}

static rlx_node transpose2(rlx_graph *g, rlx_node x) {
  static const int64_t perm[2] = {1, 0};
  return rlx_transpose(g, x, 2, perm);
}

rlx_status ox_op_gemm(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node a = IN(0);
  NEED(a);
  rlx_node b = IN(1);
  NEED(b);
  if (ox_attr_int(n, "transA", 0)) a = transpose2(g, a);
  if (ox_attr_int(n, "transB", 0)) b = transpose2(g, b);
  double alpha = ox_attr_float(n, "alpha", 1.0), beta = ox_attr_float(n, "beta", 1.0);
  rlx_node y = rlx_matmul(g, a, b);
  if (alpha != 1.0) y = rlx_mul(g, y, ox_scalar_like(im, y, alpha));
  if (ox_has_in(n, 2) && beta != 0.0) {
    rlx_node c = IN(2);
    NEED(c);
    if (beta != 1.0) c = rlx_mul(g, c, ox_scalar_like(im, c, beta));
    y = rlx_add(g, y, c);
  }
  return ox_set_out(im, n, 0, y);
}

rlx_status ox_read_spatial(ox_importer *im, const ox_node *n, const int64_t *xdims, int xr, const int64_t *kernel,
                           int transpose, ox_spatial *sp) {
  sp->nd = xr - 2;
  if (sp->nd < 1 || sp->nd > OX_MAX_SPATIAL)
    return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "%d spatial dims (at most %d)", sp->nd, OX_MAX_SPATIAL);
  const ox_attr *st = ox_attr_get(n, "strides"), *di = ox_attr_get(n, "dilations"), *pa = ox_attr_get(n, "pads");
  if ((st && st->n_ints != sp->nd) || (di && di->n_ints != sp->nd) || (pa && pa->n_ints != 2 * sp->nd))
    return ox_node_fail(im, n, RLX_ERR_INVALID, "strides/dilations/pads of the wrong length");
  for (int i = 0; i < sp->nd; i++) {
    sp->k[i] = kernel[i];
    sp->s[i] = st ? st->ints[i] : 1;
    sp->d[i] = di ? di->ints[i] : 1;
    sp->pad[i] = pa ? pa->ints[i] : 0;
    sp->pad[sp->nd + i] = pa ? pa->ints[sp->nd + i] : 0;
    if (sp->s[i] < 1 || sp->d[i] < 1 || sp->pad[i] < 0 || sp->pad[sp->nd + i] < 0)
      return ox_node_fail(im, n, RLX_ERR_INVALID, "strides and dilations must be >= 1 and pads >= 0");
  }
  const char *ap = ox_attr_str(n, "auto_pad", "NOTSET");
  if (!strcmp(ap, "VALID")) {
    for (int i = 0; i < 2 * sp->nd; i++) sp->pad[i] = 0;
  } else if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
    if (transpose) return RLX_OK;   /* ConvTranspose's pads follow from its output shape (transpose_pads) */
    for (int i = 0; i < sp->nd; i++) {
      int64_t in = xdims[2 + i];
      if (ir_dim_is_sym(in)) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "auto_pad over a symbolic dim");
      int64_t out = (in + sp->s[i] - 1) / sp->s[i];
      int64_t total = (out - 1) * sp->s[i] + (sp->k[i] - 1) * sp->d[i] + 1 - in;
      if (total < 0) total = 0;
      int64_t small = total / 2, big = total - small;
      int upper = !strcmp(ap, "SAME_UPPER");
      sp->pad[i] = upper ? small : big;
      sp->pad[sp->nd + i] = upper ? big : small;
    }
  } else if (strcmp(ap, "NOTSET")) {
    return ox_node_fail(im, n, RLX_ERR_INVALID, "auto_pad %s", ap);
  }
  return RLX_OK;
}

/* ConvTranspose with output_shape or auto_pad SAME (output = input *
 * stride): the total padding stride (in - 1) + output_padding + the
 * dilated kernel - out, split as ONNX says (SAME_UPPER: the smaller half
 * first); a negative total is output padding at the end. */
static rlx_status transpose_pads(ox_importer *im, const ox_node *n, const int64_t *xd, const ox_spatial *sp, rlx_conv_desc *d) {
  const ox_attr *os = ox_attr_get(n, "output_shape");
  const char *ap = ox_attr_str(n, "auto_pad", "NOTSET");
  int same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER"), upper = !strcmp(ap, "SAME_UPPER");
  if (!os && !same) return RLX_OK;
  if (os && os->n_ints < sp->nd) return ox_node_fail(im, n, RLX_ERR_INVALID, "output_shape of %lld dims", (long long)os->n_ints);
  for (int i = 0; i < sp->nd; i++) {
    int64_t in = xd[2 + i];
    if (ir_dim_is_sym(in)) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "output_shape or auto_pad over a symbolic dim");
    int64_t out = os ? os->ints[os->n_ints - sp->nd + i] : in * sp->s[i];
    int64_t total = sp->s[i] * (in - 1) + d->output_pad[i] + (sp->k[i] - 1) * sp->d[i] + 1 - out, begin = 0, end = 0;
    if (out < 1 || out > ((int64_t)1 << 30)) return ox_node_fail(im, n, RLX_ERR_INVALID, "an output dim of %lld", (long long)out);
    if (total < 0) d->output_pad[i] -= total;
    else begin = upper ? total / 2 : total - total / 2, end = total - begin;
    d->pad[i] = begin;
    d->pad[sp->nd == 1 ? 1 : 2 + i] = end;
  }
  return RLX_OK;
}

rlx_status ox_op_conv(ox_importer *im, const ox_node *n) {
  int transpose = is(n, "ConvTranspose");
  rlx_node x = IN(0);
  NEED(x);
  rlx_node w = IN(1);
  NEED(w);
  rlx_node bias = -1;
  if (ox_has_in(n, 2)) {
    bias = IN(2);
    NEED(bias);
  }
  int64_t xd[RLX_MAX_RANK], wd[RLX_MAX_RANK];
  int xr = rlx_node_type(im->g, x, NULL, xd), wr = rlx_node_type(im->g, w, NULL, wd);
  if (wr != xr) return ox_node_fail(im, n, RLX_ERR_INVALID, "weight of rank %d for input of rank %d", wr, xr);
  const ox_attr *ks = ox_attr_get(n, "kernel_shape");
  ox_spatial sp;
  rlx_status st = ox_read_spatial(im, n, xd, xr, ks && ks->n_ints == xr - 2 ? ks->ints : wd + 2, transpose, &sp);
  if (st) return st;
  if (sp.nd > 2) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "%d spatial dims (rlx: 1 or 2)", sp.nd);
  rlx_conv_desc d = {.ndim = sp.nd, .groups = ox_attr_int(n, "group", 1)};
  for (int i = 0; i < sp.nd; i++) {
    d.stride[i] = sp.s[i];
    d.dilation[i] = sp.d[i];
    d.pad[i] = sp.pad[i];
    d.pad[2 + i] = sp.pad[sp.nd + i];
  }
  if (sp.nd == 1) {   /* rlx's 1-D pad is [begin, end] */
    d.pad[1] = sp.pad[1];
    d.pad[2] = 0;
  }
  if (transpose) {
    const ox_attr *op = ox_attr_get(n, "output_padding");
    for (int i = 0; op && i < sp.nd && i < op->n_ints; i++) d.output_pad[i] = op->ints[i];
    if ((st = transpose_pads(im, n, xd, &sp, &d))) return st;
    return ox_set_out(im, n, 0, rlx_conv_transpose(im->g, x, w, bias, &d));
  }
  return ox_set_out(im, n, 0, rlx_conv(im->g, x, w, bias, &d));
}

rlx_status ox_op_global_pool(ox_importer *im, const ox_node *n) {
  rlx_node x = IN(0);
  NEED(x);
  int r = rlx_node_type(im->g, x, NULL, NULL);
  int64_t axes[RLX_MAX_RANK];
  for (int i = 2; i < r; i++) axes[i - 2] = i;
  rlx_reduce_op op = is(n, "GlobalMaxPool") ? RLX_REDUCE_MAX : RLX_REDUCE_MEAN;
  return ox_set_out(im, n, 0, rlx_reduce(im->g, op, x, r - 2, axes, 1));
}

/* BatchNormalization; in training mode (opset 14 on) normalized by the
 * batch's mean and (biased) variance over all axes but 1, with the running
 * statistics momentum * input + (1 - momentum) * batch as outputs 1 and 2. */
rlx_status ox_op_batch_norm(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  int training = ox_attr_int(n, "training_mode", 0) != 0;
  if ((training && im->opset < 14) || (!training && n->n_outputs > 1 && n->outputs[1][0]))
    return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "training mode before opset 14 (running statistics outputs)");
  if (im->opset < 9 && ox_attr_get(n, "spatial") && ox_attr_int(n, "spatial", 1) == 0)
    return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "spatial = 0");
  rlx_node in[5];
  for (int i = 0; i < 5; i++) {
    in[i] = IN(i);
    NEED(in[i]);
  }
  double eps = ox_attr_float(n, "epsilon", 1e-5);
  if (!training)   /* ONNX: X, scale, B, mean, var */
    return ox_set_out(im, n, 0, rlx_batch_norm(g, in[0], in[3], in[4], in[1], in[2], eps));
  int64_t axes[RLX_MAX_RANK];
  int r = rlx_node_type(g, in[0], NULL, NULL), k = 0;
  for (int i = 0; i < r; i++)
    if (i != 1) axes[k++] = i;
  rlx_node mean = rlx_reduce(g, RLX_REDUCE_MEAN, in[0], k, axes, 0);
  rlx_node dev = rlx_sub(g, in[0], rlx_reduce(g, RLX_REDUCE_MEAN, in[0], k, axes, 1));
  rlx_node var = rlx_reduce(g, RLX_REDUCE_MEAN, rlx_mul(g, dev, dev), k, axes, 0);
  double m = ox_attr_float(n, "momentum", 0.9);
  rlx_status st = ox_set_out(im, n, 0, rlx_batch_norm(g, in[0], mean, var, in[1], in[2], eps));
  rlx_node mm = ox_scalar_like(im, in[3], m), rest = ox_scalar_like(im, in[3], 1 - m);
  if (!st) st = ox_set_out(im, n, 1, rlx_add(g, rlx_mul(g, in[3], mm), rlx_mul(g, mean, rest)));
  if (!st) st = ox_set_out(im, n, 2, rlx_add(g, rlx_mul(g, in[4], mm), rlx_mul(g, var, rest)));
  return st;
}

rlx_status ox_op_layer_norm(ox_importer *im, const ox_node *n) {
  rlx_node x = IN(0);
  NEED(x);
  rlx_node gamma = IN(1);
  NEED(gamma);
  rlx_node beta;
  int rms = is(n, "RMSNormalization");
  if (!rms && ox_has_in(n, 2)) {
    beta = IN(2);
    NEED(beta);
  } else {
    beta = rlx_mul(im->g, gamma, ox_scalar_like(im, gamma, 0));
  }
  int r = rlx_node_type(im->g, x, NULL, NULL);
  int64_t axis = ox_attr_int(n, "axis", -1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return ox_node_fail(im, n, RLX_ERR_INVALID, "axis out of range");
  int64_t gd[RLX_MAX_RANK], xd[RLX_MAX_RANK], full[RLX_MAX_RANK];
  int gr = rlx_node_type(im->g, gamma, NULL, gd);
  rlx_node_type(im->g, x, NULL, xd);
  if (gr != r - axis) {   /* gamma/beta broadcast to the normalized dims */
    for (int i = axis; i < r; i++) full[i - axis] = xd[i];
    gamma = rlx_expand(im->g, gamma, r - (int)axis, full);
    beta = rlx_expand(im->g, beta, r - (int)axis, full);
  }
  double eps = ox_attr_float(n, "epsilon", 1e-5);
  if (!rms && n->n_outputs > 1) {   /* Mean and InvStdDev, in f32 (stash_type 1), normalized dims kept as 1 */
    int64_t axes[RLX_MAX_RANK];
    for (int i = (int)axis; i < r; i++) axes[i - axis] = i;
    rlx_node xf = rlx_cast(im->g, x, RLX_F32);
    rlx_node mean = rlx_reduce(im->g, RLX_REDUCE_MEAN, xf, r - (int)axis, axes, 1);
    rlx_node dev = rlx_sub(im->g, xf, mean);
    rlx_node var = rlx_reduce(im->g, RLX_REDUCE_MEAN, rlx_mul(im->g, dev, dev), r - (int)axis, axes, 1);
    rlx_node inv = rlx_activation(im->g, RLX_ACT_RSQRT, rlx_add(im->g, var, ox_scalar(im, RLX_F32, eps)));
    rlx_status st = ox_set_out(im, n, 1, mean);
    if (!st && n->n_outputs > 2) st = ox_set_out(im, n, 2, inv);
    if (st) return st;
  }
  return ox_set_out(im, n, 0, rms ? rlx_rms_norm(im->g, x, gamma, beta, (int)axis, eps)
                                  : rlx_layer_norm(im->g, x, gamma, beta, (int)axis, eps));
}

/* InstanceNormalization (a group per channel) and GroupNormalization on
 * rlx's GroupNorm; before opset 21 GroupNormalization's scale and bias are
 * per group, repeated here over the group's channels. */
rlx_status ox_op_group_norm(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node x = IN(0), scale = IN(1), bias = IN(2);
  NEED(x);
  NEED(scale);
  NEED(bias);
  int64_t xd[RLX_MAX_RANK];
  int r = rlx_node_type(g, x, NULL, xd);
  if (r < 2 || ir_dim_is_sym(xd[1])) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "x of rank %d or a symbolic channel dim", r);
  int instance = is(n, "InstanceNormalization");
  int64_t groups = instance ? xd[1] : ox_attr_int(n, "num_groups", 0);
  if (groups < 1 || xd[1] % groups) return ox_node_fail(im, n, RLX_ERR_INVALID, "%lld groups of %lld channels", (long long)groups, (long long)xd[1]);
  if (!instance && im->opset < 21 && groups != xd[1]) {
    int64_t gc[2] = {groups, xd[1] / groups}, col[2] = {groups, 1};
    scale = rlx_reshape(g, rlx_expand(g, rlx_reshape(g, scale, 2, col), 2, gc), 1, &xd[1]);
    bias = rlx_reshape(g, rlx_expand(g, rlx_reshape(g, bias, 2, col), 2, gc), 1, &xd[1]);
  }
  return ox_set_out(im, n, 0, rlx_group_norm(g, x, scale, bias, groups, ox_attr_float(n, "epsilon", 1e-5)));
}

/* MeanVarianceNormalization: (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9)
 * over axes (default 0, 2, 3), as ONNX's function body computes it. */
rlx_status ox_op_mvn(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node x = IN(0);
  NEED(x);
  int r = rlx_node_type(g, x, NULL, NULL);
  const ox_attr *a = ox_attr_get(n, "axes");
  int64_t axes[RLX_MAX_RANK] = {0, 2, 3}, na = a ? a->n_ints : 3;
  if (na > r || na < 1) return ox_node_fail(im, n, RLX_ERR_INVALID, "%lld axes of a rank-%d input", (long long)na, r);
  for (int64_t i = 0; a && i < na; i++) axes[i] = a->ints[i];
  rlx_node mean = rlx_reduce(g, RLX_REDUCE_MEAN, x, (int)na, axes, 1);
  rlx_node msq = rlx_reduce(g, RLX_REDUCE_MEAN, rlx_mul(g, x, x), (int)na, axes, 1);
  rlx_node sd = rlx_activation(g, RLX_ACT_SQRT, rlx_sub(g, msq, rlx_mul(g, mean, mean)));
  return ox_set_out(im, n, 0, rlx_div(g, rlx_sub(g, x, mean), rlx_add(g, sd, ox_scalar_like(im, x, 1e-9))));
}

rlx_status ox_op_lrn(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node x = IN(0);
  NEED(x);
  int64_t xd[RLX_MAX_RANK];
  int r = rlx_node_type(g, x, NULL, xd);
  if (r != 4) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "rank %d (4 only)", r);
  int64_t size = ox_attr_int(n, "size", 1);
  double alpha = ox_attr_float(n, "alpha", 1e-4), beta = ox_attr_float(n, "beta", 0.75), bias = ox_attr_float(n, "bias", 1.0);
  /* The sum of squares over a window of channels: an average pool of
   * [N, 1, C, H*W] with a [size, 1] kernel (padding counted) times size. */
  int64_t flat[4] = {xd[0], 1, xd[1], -1};
  rlx_node sq = rlx_reshape(g, rlx_mul(g, x, x), 4, flat);
  rlx_pool_desc d = {.kind = RLX_POOL_AVG, .ndim = 2, .kernel = {size, 1}, .stride = {1, 1},
                     .pad = {(size - 1) / 2, 0, size - 1 - (size - 1) / 2, 0}, .count_include_pad = 1};
  rlx_node sum = rlx_reshape(g, rlx_pool(g, sq, &d), 4, xd);
  rlx_node den = rlx_pow(g, rlx_add(g, rlx_mul(g, sum, ox_scalar_like(im, x, alpha)), ox_scalar_like(im, x, bias)),
                         ox_scalar_like(im, x, beta));
  return ox_set_out(im, n, 0, rlx_div(g, x, den));
}

rlx_status ox_op_softmax(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node x = IN(0);
  NEED(x);
  int log = is(n, "LogSoftmax");
  int64_t xd[RLX_MAX_RANK];
  int r = rlx_node_type(g, x, NULL, xd);
  int64_t axis = ox_attr_int(n, "axis", im->opset < 13 ? 1 : -1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= (r ? r : 1)) return ox_node_fail(im, n, RLX_ERR_INVALID, "axis out of range");
  if (im->opset >= 13 || axis == r - 1)
    return ox_set_out(im, n, 0, log ? rlx_log_softmax(g, x, (int)axis) : rlx_softmax(g, x, (int)axis));
  /* Before opset 13: over the flattened dims from axis on. */
  int64_t two[2] = {-1, 1};
  for (int i = (int)axis; i < r; i++) {
    if (ir_dim_is_sym(xd[i])) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a symbolic dim after the axis");
    two[1] *= xd[i];
  }
  rlx_node f = rlx_reshape(g, x, 2, two);
  f = log ? rlx_log_softmax(g, f, 1) : rlx_softmax(g, f, 1);
  return ox_set_out(im, n, 0, rlx_reshape(g, f, r, xd));
}

rlx_status ox_op_reduce(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node x = IN(0);
  NEED(x);
  int r = rlx_node_type(g, x, NULL, NULL);
  int axes_input = im->opset >= (is(n, "ReduceSum") ? 13 : 18);
  int64_t k = 0, axes[RLX_MAX_RANK];
  const int64_t *ax = NULL;
  if (axes_input) {
    if (ox_has_in(n, 1) && !(ax = ox_in_ints(im, n, 1, &k)))
      return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "axes not known at import");
  } else {
    const ox_attr *a = ox_attr_get(n, "axes");
    if (a) ax = a->ints, k = a->n_ints;
  }
  int keep = (int)ox_attr_int(n, "keepdims", 1);
  if (k > r) return ox_node_fail(im, n, RLX_ERR_INVALID, "%lld axes for rank %d", (long long)k, r);
  if (!ax || k == 0) {
    if (axes_input && ox_attr_int(n, "noop_with_empty_axes", 0)) return ox_set_out(im, n, 0, x);
    k = r;
    for (int i = 0; i < r; i++) axes[i] = i;
  } else {
    memcpy(axes, ax, (size_t)k * sizeof *axes);
  }
  rlx_reduce_op op = RLX_REDUCE_SUM;
  rlx_node in = x;
  if (is(n, "ReduceMean")) op = RLX_REDUCE_MEAN;
  else if (is(n, "ReduceMax")) op = RLX_REDUCE_MAX;
  else if (is(n, "ReduceMin")) op = RLX_REDUCE_MIN;
  else if (is(n, "ReduceProd")) op = RLX_REDUCE_PROD;
  else if (is(n, "ReduceSumSquare") || is(n, "ReduceL2")) in = rlx_mul(g, x, x);
  else if (is(n, "ReduceL1")) in = rlx_activation(g, RLX_ACT_ABS, x);
  else if (is(n, "ReduceLogSumExp")) in = rlx_activation(g, RLX_ACT_EXP, x);
  /* bool max and min (any, all) on U8; max and min over no elements are
   * the lowest and highest value of the dtype (as ONNX's reference) */
  int64_t xd[RLX_MAX_RANK];
  rlx_dtype t;
  rlx_node_type(g, x, &t, xd);
  int any_all = t == RLX_BOOL && (op == RLX_REDUCE_MAX || op == RLX_REDUCE_MIN);
  if (any_all) in = rlx_cast(g, in, t = RLX_U8);
  int empty = 0;
  for (int64_t i = 0; i < k; i++) empty |= axes[i] >= -r && axes[i] < r && xd[axes[i] < 0 ? axes[i] + r : axes[i]] == 0;
  rlx_node y;
  if (empty && (op == RLX_REDUCE_MAX || op == RLX_REDUCE_MIN)) {
    int mx = op == RLX_REDUCE_MAX;
    double lo = ir_is_float(t) ? -INFINITY : t == RLX_I8 ? -128 : t == RLX_I16 ? -32768 : t == RLX_I32 ? -2147483648.0 : 0;
    double hi = ir_is_float(t) ? INFINITY : t == RLX_I8 ? 127 : t == RLX_U8 ? 255 : t == RLX_I16 ? 32767 : t == RLX_U16 ? 65535
              : t == RLX_I32 ? 2147483647.0 : t == RLX_U32 ? 4294967295.0 : 9.2e18;
    y = rlx_add(g, rlx_reduce(g, RLX_REDUCE_SUM, in, (int)k, axes, keep), ox_scalar(im, t, mx ? lo : hi));
  } else {
    y = rlx_reduce(g, op, in, (int)k, axes, keep);
  }
  if (any_all) y = rlx_compare(g, RLX_CMP_NE, y, ox_scalar(im, RLX_U8, 0));
  if (is(n, "ReduceL2")) y = rlx_activation(g, RLX_ACT_SQRT, y);
  if (is(n, "ReduceLogSum") || is(n, "ReduceLogSumExp")) y = rlx_activation(g, RLX_ACT_LOG, y);
  return ox_set_out(im, n, 0, y);
}

rlx_status ox_op_arg(ox_importer *im, const ox_node *n) {
  rlx_node x = IN(0);
  NEED(x);
  int axis = (int)ox_attr_int(n, "axis", 0), keep = (int)ox_attr_int(n, "keepdims", 1);
  if (ox_attr_int(n, "select_last_index", 0)) {
    /* The last extreme is the first of x reversed along axis: d-1 - index. */
    int64_t dims[RLX_MAX_RANK];
    int r = rlx_node_type(im->g, x, NULL, dims), a = axis < 0 ? axis + r : axis;
    if (a < 0 || a >= r || ir_dim_is_sym(dims[a]) || dims[a] > (1 << 24))
      return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "select_last_index on axis %d", axis);
    int64_t *rev = ox_alloc(im->arena, (size_t)dims[a] * sizeof *rev + 1);
    if (!rev) return RLX_ERR_NOMEM;
    for (int64_t i = 0; i < dims[a]; i++) rev[i] = dims[a] - 1 - i;
    rlx_node xr = rlx_gather(im->g, x, rlx_constant(im->g, RLX_I64, 1, &dims[a], rev), a);
    rlx_node i = is(n, "ArgMax") ? rlx_argmax(im->g, xr, a, keep) : rlx_argmin(im->g, xr, a, keep);
    return ox_set_out(im, n, 0, rlx_sub(im->g, ox_scalar(im, RLX_I64, (double)(dims[a] - 1)), i));
  }
  return ox_set_out(im, n, 0, is(n, "ArgMax") ? rlx_argmax(im->g, x, axis, keep) : rlx_argmin(im->g, x, axis, keep));
}

rlx_status ox_op_cumsum(ox_importer *im, const ox_node *n) {
  rlx_node x = IN(0);
  NEED(x);
  int64_t k;
  const int64_t *axis = ox_in_ints(im, n, 1, &k);
  if (!axis || k != 1) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "an axis not known at import");
  return ox_set_out(im, n, 0, rlx_cumsum(im->g, x, (int)axis[0], (int)ox_attr_int(n, "exclusive", 0),
                                         (int)ox_attr_int(n, "reverse", 0)));
}

/* CumProd: the running product along the axis, one slice at a time (a
 * chain of products, exact in every dtype; at most 256 steps). */
rlx_status ox_op_cumprod(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node x = IN(0);
  NEED(x);
  int64_t k, dims[RLX_MAX_RANK];
  const int64_t *axis = ox_in_ints(im, n, 1, &k);
  if (!axis || k != 1) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "an axis not known at import");
  int r = rlx_node_type(g, x, NULL, dims);
  int64_t a = axis[0] < 0 ? axis[0] + r : axis[0];
  if (a < 0 || a >= r) return ox_node_fail(im, n, RLX_ERR_INVALID, "axis %lld for rank %d", (long long)axis[0], r);
  int64_t len = dims[a];
  if (ir_dim_is_sym(len) || len > 256) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a product along %lld elements (at most 256)", (long long)len);
  if (len == 0) return ox_set_out(im, n, 0, x);
  int excl = (int)ox_attr_int(n, "exclusive", 0), rev = (int)ox_attr_int(n, "reverse", 0);
  rlx_node parts[256], run = -1;
  for (int64_t s = 0; s < len; s++) {
    int64_t i = rev ? len - 1 - s : s;
    rlx_node xi = rlx_narrow(g, x, (int)a, i, 1);
    rlx_node before = run;
    if (run < 0) {   /* the empty product: ones of one slice's shape */
      int64_t one[RLX_MAX_RANK], slice[RLX_MAX_RANK];
      for (int d = 0; d < r; d++) one[d] = 1, slice[d] = d == a ? 1 : dims[d];
      before = rlx_expand(g, rlx_reshape(g, ox_scalar_like(im, x, 1), r, one), r, slice);
    }
    run = run < 0 ? xi : rlx_mul(g, run, xi);
    parts[i] = excl ? before : run;
  }
  return ox_set_out(im, n, 0, len == 1 ? parts[0] : rlx_concat(g, (int)len, parts, (int)a));
}

/* Resize / Upsample of the last two dims of a 4-D tensor: rlx's nearest is
 * floor(dst * in / out) (ONNX asymmetric + floor, and half_pixel with the
 * round_prefer_* modes on whole-number upscales, where both agree); its
 * bilinear is half_pixel (clamped) or align_corners. */
rlx_status ox_op_resize(ox_importer *im, const ox_node *n) {
  rlx_node x = IN(0);
  NEED(x);
  int64_t xd[RLX_MAX_RANK];
  int r = rlx_node_type(im->g, x, NULL, xd);
  if (r != 4) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "rank %d (4 only)", r);
  int legacy = is(n, "Upsample") || im->opset < 11;
  int si = legacy ? 1 : 2;
  int64_t out[4] = {xd[0], xd[1], xd[2], xd[3]}, k = 0;
  int whole = 1;
  ox_value *sv = is(n, "Upsample") && im->opset < 9 ? NULL : ox_in_known(im, n, si);
  const ox_attr *sa = ox_attr_get(n, "scales");
  const int64_t *sizes = !legacy && ox_has_in(n, 3) ? ox_in_ints(im, n, 3, &k) : NULL;
  if (ox_attr_get(n, "axes") || ox_attr_int(n, "antialias", 0) || strcmp(ox_attr_str(n, "keep_aspect_ratio_policy", "stretch"), "stretch"))
    return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "axes, antialias or keep_aspect_ratio_policy");
  if (sizes && k == 4) {
    memcpy(out, sizes, sizeof out);
  } else if ((sv && sv->known && sv->reals && sv->numel == 4) || (sa && sa->n_floats == 4)) {
    for (int i = 0; i < 4; i++) {
      double s = sa ? sa->floats[i] : sv->reals[i];
      if (ir_dim_is_sym(xd[i])) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a symbolic dim");
      out[i] = ox_f2i(floor((double)xd[i] * s));
      /* ONNX maps coordinates with the scale itself: rlx's out/in ratio is
       * the same only when in * scale is a whole number */
      if ((double)out[i] != (double)xd[i] * s)
        return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a scale of %g on a dim of %lld (not a whole size)", s, (long long)xd[i]);
      whole &= s >= 1 && s == floor(s);
    }
  } else {
    return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "scales or sizes not known at import");
  }
  if (out[0] != xd[0] || out[1] != xd[1]) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "resizing the batch or channel dim");
  for (int i = 2; i < 4; i++) whole &= xd[i] > 0 && out[i] >= xd[i] && out[i] % xd[i] == 0;
  const char *mode = ox_attr_str(n, "mode", "nearest");
  const char *ctm = ox_attr_str(n, "coordinate_transformation_mode", legacy ? "asymmetric" : "half_pixel");
  const char *nm = ox_attr_str(n, "nearest_mode", legacy ? "floor" : "round_prefer_floor");
  if (!strcmp(mode, "nearest")) {
    int floor_asym = !strcmp(ctm, "asymmetric") && !strcmp(nm, "floor");
    int half_round = (!strcmp(ctm, "half_pixel") || !strcmp(ctm, "pytorch_half_pixel")) && !strncmp(nm, "round_prefer", 12);
    if (!(floor_asym || (half_round && whole)) && !(legacy && whole))
      return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "nearest with %s / %s", ctm, nm);
    return ox_set_out(im, n, 0, rlx_resize(im->g, x, RLX_RESIZE_NEAREST, out[2], out[3], 0));
  }
  if (!strcmp(mode, "linear") || !strcmp(mode, "bilinear")) {
    int ac = !strcmp(ctm, "align_corners");
    if (ac && (out[2] < 2 || out[3] < 2)) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "align_corners to a size of 1");
    if (!ac && strcmp(ctm, "half_pixel") && !(!strcmp(ctm, "pytorch_half_pixel") && out[2] > 1 && out[3] > 1))
      return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "linear with %s", ctm);
    return ox_set_out(im, n, 0, rlx_resize(im->g, x, RLX_RESIZE_BILINEAR, out[2], out[3], ac));
  }
  return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "mode %s", mode);
}

/* A per-axis quantization parameter [C] shaped to broadcast against x
 * (C at axis, 1 elsewhere); a single element passes as it is. */
static rlx_node per_axis(ox_importer *im, const ox_node *n, rlx_node p, int r) {
  int64_t pd[RLX_MAX_RANK], shape[RLX_MAX_RANK];
  int pr = rlx_node_type(im->g, p, NULL, pd);
  if (pr == 0 || (pr == 1 && pd[0] == 1)) return p;
  int64_t axis = ox_attr_int(n, "axis", 1);
  if (axis < 0) axis += r;
  if (pr != 1 || axis < 0 || axis >= r) return -1;
  for (int i = 0; i < r; i++) shape[i] = i == axis ? pd[0] : 1;
  return rlx_reshape(im->g, p, r, shape);
}

/* QuantizeLinear / DequantizeLinear of a narrow type (narrow.c): float8
 * and float4 by the cast's rounding of x / scale + zero point (saturating
 * unless saturate = 0), the 4- and 2-bit integers rounding half to even and
 * saturating to their range. */
static rlx_status quant_narrow(ox_importer *im, const ox_node *n, rlx_node x, rlx_node scale, rlx_node zp, int32_t type) {
  rlx_graph *g = im->g;
  if (scale < 0 || (ox_has_in(n, 2) && zp < 0)) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "scale or zero point of that shape");
  rlx_dtype st;
  rlx_node_type(g, scale, &st, NULL);
  rlx_node z = zp >= 0 ? ox_narrow_decode(im, zp, type) : -1;
  if (is(n, "DequantizeLinear")) {
    rlx_node v = rlx_cast(g, ox_narrow_decode(im, x, type), st);
    if (z >= 0) v = rlx_sub(g, v, rlx_cast(g, z, st));
    return ox_set_out(im, n, 0, rlx_mul(g, v, scale));
  }
  rlx_node v = rlx_div(g, rlx_cast(g, x, RLX_F32), rlx_cast(g, scale, RLX_F32));
  double lo, hi;
  int bits = ox_narrow_int_range(type, &lo, &hi);
  if (bits) v = rlx_activation(g, RLX_ACT_ROUND, v);
  if (z >= 0) v = rlx_add(g, v, z);
  v = bits ? ox_narrow_int_bytes(im, rlx_clamp(g, v, lo, hi), type)
           : ox_narrow_encode(im, v, type, (int)ox_attr_int(n, "saturate", 1), NULL);
  return ox_set_out_typed(im, n, 0, v, type);
}

/* QuantizeLinear / DequantizeLinear with 8- or 16-bit integer data (and
 * int32 to dequantize), a scale per tensor or per axis (blocked scales and
 * the 4-bit and float8 types are RLX_ERR_UNSUPPORTED). Rounding half to
 * even, saturating. */
rlx_status ox_op_quant_linear(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  if (ox_attr_int(n, "block_size", 0)) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "blocked scales");
  rlx_node x = IN(0), scale, zp = -1;
  NEED(x);
  scale = IN(1);
  NEED(scale);
  if (ox_has_in(n, 2)) {
    zp = IN(2);
    NEED(zp);
  }
  rlx_dtype xt, st, qt = RLX_U8;
  int r = rlx_node_type(g, x, &xt, NULL);
  rlx_node_type(g, scale, &st, NULL);
  int32_t narrow = zp >= 0 ? ox_in_value(im, n, 2)->onnx_type : 0;
  if (zp >= 0) rlx_node_type(g, zp, &qt, NULL);
  else if (ox_attr_get(n, "output_dtype")) {
    int dt = ox_rlx_dtype((int32_t)ox_attr_int(n, "output_dtype", 2));
    qt = dt < 0 ? RLX_DTYPE_COUNT : (rlx_dtype)dt;
    narrow = (int32_t)ox_attr_int(n, "output_dtype", 2);
  }
  int dequant = is(n, "DequantizeLinear");
  if (dequant) {
    qt = xt;
    narrow = ox_in_value(im, n, 0)->onnx_type;
  }
  if (ox_is_narrow(narrow)) return quant_narrow(im, n, x, per_axis(im, n, scale, r), zp >= 0 ? per_axis(im, n, zp, r) : -1, narrow);
  double qlo = qt == RLX_I8 ? -128 : qt == RLX_I16 ? -32768 : qt == RLX_I32 ? -2147483648.0 : 0;
  double qhi = qt == RLX_I8 ? 127 : qt == RLX_U8 ? 255 : qt == RLX_I16 ? 32767 : qt == RLX_U16 ? 65535 : 2147483647.0;
  if (qt != RLX_U8 && qt != RLX_I8 && qt != RLX_U16 && qt != RLX_I16 && !(dequant && qt == RLX_I32))
    return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "quantized type %s", rlx_dtype_name(qt));
  scale = per_axis(im, n, scale, r);
  if (zp >= 0) zp = per_axis(im, n, zp, r);
  if (scale < 0 || (ox_has_in(n, 2) && zp < 0)) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "scale or zero point of that shape");
  if (dequant) {
    rlx_node v = rlx_cast(g, x, st);
    if (zp >= 0) v = rlx_sub(g, v, rlx_cast(g, zp, st));
    return ox_set_out(im, n, 0, rlx_mul(g, v, scale));
  }
  rlx_node v = rlx_activation(g, RLX_ACT_ROUND, rlx_div(g, x, scale));
  if (zp >= 0) v = rlx_add(g, v, rlx_cast(g, zp, xt));
  return ox_set_out(im, n, 0, rlx_cast(g, rlx_clamp(g, v, qlo, qhi), qt));
}

/* DynamicQuantizeLinear: uint8 with the scale and zero point of x's range
 * (widened to include 0). */
rlx_status ox_op_dynamic_quant(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node x = IN(0);
  NEED(x);
  int r = rlx_node_type(g, x, NULL, NULL);
  int64_t axes[RLX_MAX_RANK];
  for (int i = 0; i < r; i++) axes[i] = i;
  rlx_node zero = ox_scalar_like(im, x, 0);
  rlx_node hi = rlx_max(g, rlx_reduce(g, RLX_REDUCE_MAX, x, r, axes, 0), zero);
  rlx_node lo = rlx_min(g, rlx_reduce(g, RLX_REDUCE_MIN, x, r, axes, 0), zero);
  rlx_node scale = rlx_div(g, rlx_sub(g, hi, lo), ox_scalar_like(im, x, 255));
  rlx_node zpf = rlx_clamp(g, rlx_activation(g, RLX_ACT_ROUND, rlx_div(g, rlx_activation(g, RLX_ACT_NEG, lo), scale)), 0, 255);
  rlx_node y = rlx_clamp(g, rlx_add(g, rlx_activation(g, RLX_ACT_ROUND, rlx_div(g, x, scale)), zpf), 0, 255);
  rlx_status st = ox_set_out(im, n, 0, rlx_cast(g, y, RLX_U8));
  if (!st) st = ox_set_out(im, n, 1, scale);
  return st ? st : ox_set_out(im, n, 2, rlx_cast(g, zpf, RLX_U8));
}
