/* ops_misc.c — importers of ONNX ops rlx has no single op for, built from
 * its ops: TopK, Swish, IsInf, Shrink, LpNormalization, Hardmax, OneHot,
 * EyeLike, SpaceToDepth / DepthToSpace, GatherElements. */
#include "onnx.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define IN(i) ox_in(im, n, i)
#define NEED(v) do { if ((v) < 0) return im->err ? im->err : ox_check(im, n, -1); } while (0)

static int is(const ox_node *n, const char *op) { return !strcmp(n->op_type, op); }

rlx_status ox_op_topk(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node x = IN(0);
  NEED(x);
  int64_t k, cnt;
  if (im->opset < 10) k = ox_attr_int(n, "k", 1);
  else {
    const int64_t *kv = ox_in_ints(im, n, 1, &cnt);
    if (!kv || cnt != 1) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "K not known at import");
    k = kv[0];
  }
  int axis = (int)ox_attr_int(n, "axis", -1), largest = (int)ox_attr_int(n, "largest", 1);
  rlx_dtype t;
  rlx_node_type(g, x, &t, NULL);
  if (!largest && !ir_is_float(t)) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "largest = 0 of an integer type");
  /* The k smallest are the k largest of -x. */
  rlx_node idx, vals = rlx_topk(g, largest ? x : rlx_activation(g, RLX_ACT_NEG, x), k, axis, &idx);
  if (!largest) vals = rlx_activation(g, RLX_ACT_NEG, vals);
  rlx_status st = ox_set_out(im, n, 0, vals);
  return st ? st : ox_set_out(im, n, 1, idx);
}

rlx_status ox_op_misc_elementwise(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node x = IN(0);
  NEED(x);
#define K(v) ox_scalar_like(im, x, (v))
  rlx_node r;
  if (is(n, "Swish")) {
    r = rlx_mul(g, x, rlx_activation(g, RLX_ACT_SIGMOID, rlx_mul(g, x, K(ox_attr_float(n, "alpha", 1.0)))));
  } else if (is(n, "IsInf")) {
    int pos = (int)ox_attr_int(n, "detect_positive", 1), neg = (int)ox_attr_int(n, "detect_negative", 1);
    rlx_node p = rlx_compare(g, RLX_CMP_EQ, x, K(INFINITY)), m = rlx_compare(g, RLX_CMP_EQ, x, K(-INFINITY));
    r = pos && neg ? rlx_where(g, p, p, m) : pos ? p : neg ? m : rlx_compare(g, RLX_CMP_NE, x, x);
    if (!pos && !neg) r = rlx_where(g, r, rlx_compare(g, RLX_CMP_EQ, x, x), r);   /* all false */
  } else {   /* Shrink */
    double lambd = ox_attr_float(n, "lambd", 0.5), bias = ox_attr_float(n, "bias", 0.0);
    rlx_node hi = rlx_where(g, rlx_compare(g, RLX_CMP_GT, x, K(lambd)), rlx_sub(g, x, K(bias)), K(0));
    r = rlx_where(g, rlx_compare(g, RLX_CMP_LT, x, K(-lambd)), rlx_add(g, x, K(bias)), hi);
  }
#undef K
  return ox_set_out(im, n, 0, r);
}

rlx_status ox_op_lp_norm(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node x = IN(0);
  NEED(x);
  int64_t p = ox_attr_int(n, "p", 2), axis = ox_attr_int(n, "axis", -1);
  if (p != 1 && p != 2) return ox_node_fail(im, n, RLX_ERR_INVALID, "p = %lld", (long long)p);
  rlx_node a = p == 1 ? rlx_activation(g, RLX_ACT_ABS, x) : rlx_mul(g, x, x);
  rlx_node norm = rlx_reduce(g, RLX_REDUCE_SUM, a, 1, &axis, 1);
  if (p == 2) norm = rlx_activation(g, RLX_ACT_SQRT, norm);
  return ox_set_out(im, n, 0, rlx_div(g, x, norm));
}

/* Moves axis to the end (and back with inverse): rlx_one_hot appends its axis. */
static void perm_to_last(int r, int axis, int64_t *to, int64_t *back) {
  for (int i = 0, k = 0; i < r; i++)
    if (i != axis) to[k++] = i;
  to[r - 1] = axis;
  for (int i = 0; i < r; i++) back[to[i]] = i;
}

rlx_status ox_op_hardmax(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node x = IN(0);
  NEED(x);
  int64_t dims[RLX_MAX_RANK], to[RLX_MAX_RANK], back[RLX_MAX_RANK];
  rlx_dtype t;
  int r = rlx_node_type(g, x, &t, dims);
  int64_t axis = ox_attr_int(n, "axis", -1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r || ir_dim_is_sym(dims[axis])) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "axis %lld", (long long)axis);
  perm_to_last(r, (int)axis, to, back);
  rlx_node xt = rlx_transpose(g, x, r, to);
  rlx_node oh = rlx_one_hot(g, rlx_argmax(g, xt, r - 1, 0), dims[axis], t);
  return ox_set_out(im, n, 0, rlx_transpose(g, oh, r, back));
}

rlx_status ox_op_one_hot(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node idx = IN(0);
  NEED(idx);
  ox_value *dv = ox_in_value(im, n, 1), *vv = ox_in_value(im, n, 2);
  if (!dv || !dv->known || dv->numel != 1 || !vv || !vv->known || vv->numel != 2)
    return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "depth and values not known at import");
  int64_t depth = dv->ints ? dv->ints[0] : ox_f2i(dv->reals[0]);
  if (depth <= 0 || depth > (1 << 24)) return ox_node_fail(im, n, RLX_ERR_INVALID, "depth %lld", (long long)depth);
  double off = vv->ints ? (double)vv->ints[0] : vv->reals[0], on = vv->ints ? (double)vv->ints[1] : vv->reals[1];
  rlx_dtype it;
  int r = rlx_node_type(g, idx, &it, NULL);
  if (ir_is_float(it)) idx = rlx_cast(g, idx, RLX_I64);
  /* negative indices count from the end */
  rlx_node fixed = rlx_where(g, rlx_compare(g, RLX_CMP_LT, idx, ox_scalar_like(im, idx, 0)),
                             rlx_add(g, idx, ox_scalar_like(im, idx, (double)depth)), idx);
  rlx_node oh = rlx_one_hot(g, fixed, depth, vv->dtype);
  rlx_node y = rlx_add(g, rlx_mul(g, oh, ox_scalar(im, vv->dtype, on - off)), ox_scalar(im, vv->dtype, off));
  int64_t axis = ox_attr_int(n, "axis", -1);
  if (axis < 0) axis += r + 1;
  if (axis < 0 || axis > r) return ox_node_fail(im, n, RLX_ERR_INVALID, "axis out of range");
  if (axis != r) {   /* the new axis from the end to its place */
    int64_t perm[RLX_MAX_RANK];
    for (int i = 0, k = 0; i <= r; i++) perm[i] = i == axis ? r : k++;
    y = rlx_transpose(g, y, r + 1, perm);
  }
  return ox_set_out(im, n, 0, y);
}

rlx_status ox_op_eye_like(ox_importer *im, const ox_node *n) {
  rlx_node x = IN(0);
  NEED(x);
  int64_t dims[RLX_MAX_RANK];
  rlx_dtype t;
  int r = rlx_node_type(im->g, x, &t, dims);
  if (ox_attr_get(n, "dtype")) {
    int dt = ox_rlx_dtype((int32_t)ox_attr_int(n, "dtype", 1));
    if (dt < 0) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "dtype");
    t = (rlx_dtype)dt;
  }
  if (r != 2 || ir_dim_is_sym(dims[0]) || ir_dim_is_sym(dims[1]) || dims[0] * dims[1] > (1 << 24))
    return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a shape that is not a static matrix");
  int64_t k = ox_attr_int(n, "k", 0);
  size_t es = rlx_dtype_nbytes(t, 1);
  unsigned char *buf = calloc((size_t)(dims[0] * dims[1] + 1), es);
  if (!buf) return ox_node_fail(im, n, RLX_ERR_NOMEM, "out of memory");
  for (int64_t i = 0; i < dims[0]; i++) {
    int64_t j = i + k;
    if (j < 0 || j >= dims[1]) continue;
    unsigned char *p = buf + (size_t)(i * dims[1] + j) * es;
    switch (t) {
    case RLX_F32: { float one = 1; memcpy(p, &one, 4); break; }
    case RLX_F64: { double one = 1; memcpy(p, &one, 8); break; }
    case RLX_F16: { uint16_t h = rlx_f32_to_f16(1); memcpy(p, &h, 2); break; }
    case RLX_BF16: { uint16_t h = rlx_f32_to_bf16(1); memcpy(p, &h, 2); break; }
    case RLX_I32: { int32_t one = 1; memcpy(p, &one, 4); break; }
    case RLX_I64: { int64_t one = 1; memcpy(p, &one, 8); break; }
    default: p[0] = 1;
    }
  }
  rlx_node y = rlx_constant(im->g, t, 2, dims, buf);
  free(buf);
  return ox_set_out(im, n, 0, y);
}

rlx_status ox_op_space_depth(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node x = IN(0);
  NEED(x);
  int64_t d[RLX_MAX_RANK], b = ox_attr_int(n, "blocksize", 0);
  int r = rlx_node_type(g, x, NULL, d);
  if (r != 4 || b <= 0) return ox_node_fail(im, n, RLX_ERR_INVALID, "rank %d, blocksize %lld", r, (long long)b);
  for (int i = 1; i < 4; i++)
    if (ir_dim_is_sym(d[i])) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "symbolic channel or spatial dims");
  int64_t N = d[0], C = d[1], H = d[2], W = d[3];
  if (is(n, "SpaceToDepth")) {
    if (H % b || W % b) return ox_node_fail(im, n, RLX_ERR_SHAPE, "spatial dims not multiples of %lld", (long long)b);
    int64_t s6[6] = {N, C, H / b, b, W / b, b}, p[6] = {0, 3, 5, 1, 2, 4}, o[4] = {N, C * b * b, H / b, W / b};
    if (!strcmp(ox_attr_str(n, "mode", "DCR"), "CRD")) {
      int64_t cp[6] = {0, 1, 3, 5, 2, 4};
      memcpy(p, cp, sizeof p);
    }
    return ox_set_out(im, n, 0, rlx_reshape(g, rlx_transpose(g, rlx_reshape(g, x, 6, s6), 6, p), 4, o));
  }
  if (C % (b * b)) return ox_node_fail(im, n, RLX_ERR_SHAPE, "channels not a multiple of %lld", (long long)(b * b));
  int crd = !strcmp(ox_attr_str(n, "mode", "DCR"), "CRD");
  int64_t s6[6] = {N, b, b, C / (b * b), H, W}, p[6] = {0, 3, 4, 1, 5, 2}, o[4] = {N, C / (b * b), H * b, W * b};
  if (crd) {
    int64_t c6[6] = {N, C / (b * b), b, b, H, W}, cp[6] = {0, 1, 4, 2, 5, 3};
    memcpy(s6, c6, sizeof s6);
    memcpy(p, cp, sizeof p);
  }
  return ox_set_out(im, n, 0, rlx_reshape(g, rlx_transpose(g, rlx_reshape(g, x, 6, s6), 6, p), 4, o));
}

/* GatherElements: out[..i..] = data[..idx[..i..]..] along axis, as a one-hot
 * of the indices (over the axis) times data, summed over the axis (data
 * sliced to the indices' extent in the other dims, its axis moved last
 * and a 1 left in its place). Exact for finite data. */
rlx_status ox_op_gather_elements(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node x = IN(0), idx;
  NEED(x);
  idx = IN(1);
  NEED(idx);
  int64_t xd[RLX_MAX_RANK], id[RLX_MAX_RANK];
  rlx_dtype t;
  int r = rlx_node_type(g, x, &t, xd);
  if (rlx_node_type(g, idx, NULL, id) != r) return ox_node_fail(im, n, RLX_ERR_INVALID, "indices of another rank");
  int64_t a = ox_attr_int(n, "axis", 0);
  if (a < 0) a += r;
  if (a < 0 || a >= r) return ox_node_fail(im, n, RLX_ERR_INVALID, "axis out of range");
  int64_t st[RLX_MAX_RANK], en[RLX_MAX_RANK], sp[RLX_MAX_RANK], perm[RLX_MAX_RANK], lifted[RLX_MAX_RANK];
  for (int i = 0; i < r; i++) {
    if (ir_dim_is_sym(xd[i]) || ir_dim_is_sym(id[i])) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "symbolic dims");
    st[i] = 0, sp[i] = 1, en[i] = i == a ? xd[i] : id[i];
  }
  int64_t depth = xd[a];
  rlx_node data = rlx_slice(g, x, r, st, en, sp);
  for (int i = 0, k = 0; i < r; i++)
    if (i != a) perm[k++] = i;
  perm[r - 1] = a;
  for (int i = 0; i < r; i++) lifted[i] = i == a ? 1 : id[i];
  lifted[r] = depth;
  data = rlx_reshape(g, rlx_transpose(g, data, r, perm), r + 1, lifted);
  rlx_node fixed = rlx_where(g, rlx_compare(g, RLX_CMP_LT, idx, ox_scalar_like(im, idx, 0)),
                             rlx_add(g, idx, ox_scalar_like(im, idx, (double)depth)), idx);
  rlx_node oh = rlx_one_hot(g, fixed, depth, t);
  int64_t last = r;
  return ox_set_out(im, n, 0, rlx_reduce(g, RLX_REDUCE_SUM, rlx_mul(g, data, oh), 1, &last, 0));
}
