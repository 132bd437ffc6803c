/* ops_misc.c — importers of ONNX ops rlx has no single op for, built from
 * its ops: TopK, Swish, SwiGLU, IsInf, Shrink, LpNormalization, Hardmax, OneHot,
 * EyeLike, SpaceToDepth / DepthToSpace, GatherElements; ai.onnx.ml Binarizer
 * and ArrayFeatureExtractor; Det. */
#include "onnx.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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
    if (ox_ints_sym(im, kv, 1)) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "K " OX_SYM_HINT);
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
  if (is(n, "Swish") || is(n, "SwiGLU")) {   /* SwiGLU: Swish(a) * b */
    r = rlx_mul(g, x, rlx_activation(g, RLX_ACT_SIGMOID, rlx_mul(g, x, K(ox_attr_float(n, "alpha", 1.0)))));
    if (is(n, "SwiGLU")) {
      rlx_node b = IN(1);
      NEED(b);
      r = rlx_mul(g, r, b);
    }
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
  rlx_node zero = ox_scalar_like(im, x, 0);   /* a zero vector stays zero (the reference), not 0/0 */
  return ox_set_out(im, n, 0, rlx_where(g, rlx_compare(g, RLX_CMP_EQ, norm, zero), zero, rlx_div(g, x, norm)));
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
  ox_value *dv = ox_in_known(im, n, 1), *vv = ox_in_known(im, n, 2);
  if (!dv || dv->numel != 1 || !vv || vv->numel != 2)
    return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "depth and values not known at import");
  if (ox_ints_sym(im, dv->ints, 1)) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "depth " OX_SYM_HINT);
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
    ox_store(t, buf, i * dims[1] + j, 1, 1);
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

/* GatherND(data, indices [..., k], batch_dims): each index tuple picks a
 * slice of data, as one Gather of flat indices (the tuple dotted with the
 * strides of the k indexed dims, negatives counted from the end, plus the
 * batch row's offset) from data seen as [batch * indexed, rest...]. */
rlx_status ox_op_gather_nd(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node x = IN(0), idx;
  NEED(x);
  idx = IN(1);
  NEED(idx);
  int64_t xd[RLX_MAX_RANK], id[RLX_MAX_RANK];
  int r = rlx_node_type(g, x, NULL, xd), q = rlx_node_type(g, idx, NULL, id);
  int64_t bd = ox_attr_int(n, "batch_dims", 0), k = q > 0 ? id[q - 1] : -1;
  if (q < 1 || bd < 0 || bd >= q || ir_dim_is_sym(k) || k < 1 || bd + k > r)
    return ox_node_fail(im, n, RLX_ERR_INVALID, "indices of rank %d with %lld per tuple, batch_dims %lld, data of rank %d", q,
                        (long long)k, (long long)bd, r);
  for (int i = 0; i < r; i++)
    if (ir_dim_is_sym(xd[i])) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "symbolic dims");
  idx = rlx_cast(g, idx, RLX_I64);
  int64_t outer[RLX_MAX_RANK], batch = 1, block = 1, stride = 1;
  for (int i = 0; i < q - 1; i++) outer[i] = id[i];
  for (int64_t i = 0; i < bd; i++) batch *= xd[i];
  for (int64_t i = bd; i < bd + k; i++) block *= xd[i];
  rlx_node flat = -1;
  for (int64_t j = k - 1; j >= 0; j--) {   /* the tuple's last index varies fastest */
    int64_t dim = xd[bd + j];
    rlx_node c = rlx_reshape(g, rlx_narrow(g, idx, q - 1, j, 1), q - 1, outer);
    c = rlx_where(g, rlx_compare(g, RLX_CMP_LT, c, ox_scalar(im, RLX_I64, 0)), rlx_add(g, c, ox_scalar(im, RLX_I64, (double)dim)), c);
    c = rlx_mul(g, c, ox_scalar(im, RLX_I64, (double)stride));
    flat = flat < 0 ? c : rlx_add(g, flat, c);
    stride *= dim;
  }
  if (bd > 0) {   /* + the batch row times the indexed block: a [b..., 1...] constant */
    int64_t bdims[RLX_MAX_RANK];
    for (int i = 0; i < q - 1; i++) bdims[i] = i < bd ? id[i] : 1;
    int64_t *off = malloc((size_t)(batch + 1) * sizeof *off);
    if (!off) return ox_node_fail(im, n, RLX_ERR_NOMEM, "out of memory");
    for (int64_t b = 0; b < batch; b++) off[b] = b * block;
    rlx_node oc = rlx_constant(g, RLX_I64, q - 1, bdims, off);
    free(off);
    flat = rlx_add(g, flat, oc);
  }
  int64_t dd[RLX_MAX_RANK];
  int dr = 0;
  dd[dr++] = batch * block;
  for (int i = (int)(bd + k); i < r; i++) dd[dr++] = xd[i];
  return ox_set_out(im, n, 0, rlx_gather(g, rlx_reshape(g, x, dr, dd), flat, 0));
}

/* data with the rows of flat (a [P, rest...] view's row numbers) replaced
 * (reduction "none") or summed into ("add") by upd [flat..., rest...], as
 * ScatterAdd: none takes data where no row lands, else the sum of the
 * updates landing there (one each, as ONNX requires of none); mul, max
 * and min in turn. */
enum { SCATTER_NONE, SCATTER_ADD, SCATTER_MUL, SCATTER_MAX, SCATTER_MIN };

/* Reductions mul, max and min: one update after the other (the rows it
 * lands on combined with it), so at most 4096 updates over 2^26 elements. */
static rlx_node scatter_in_turn(ox_importer *im, const ox_node *n, rlx_node data, rlx_node flat, rlx_node upd, int red) {
  rlx_graph *g = im->g;
  int64_t fd[RLX_MAX_RANK], dd[RLX_MAX_RANK], ud[RLX_MAX_RANK], ones[RLX_MAX_RANK], nupd = 1, numel = 1;
  int fr = rlx_node_type(g, flat, NULL, fd), dr = rlx_node_type(g, data, NULL, dd);
  for (int i = 0; i < fr; i++) nupd *= fd[i];
  for (int i = 0; i < dr; i++) numel *= dd[i], ones[i] = 1, ud[i] = dd[i];
  if (nupd > 4096 || nupd * numel > ((int64_t)1 << 26))
    return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a reduction of %lld updates into %lld elements", (long long)nupd, (long long)numel), -1;
  ud[0] = nupd;
  rlx_node f1 = rlx_reshape(g, flat, 1, &nupd), u = rlx_reshape(g, upd, dr, ud), pos = rlx_iota(g, RLX_I64, dr, dd, 0);
  for (int64_t k = 0; k < nupd; k++) {
    rlx_node at = rlx_compare(g, RLX_CMP_EQ, pos, rlx_reshape(g, rlx_narrow(g, f1, 0, k, 1), dr, ones));
    rlx_node uk = rlx_narrow(g, u, 0, k, 1);
    rlx_node v = red == SCATTER_MUL ? rlx_mul(g, data, uk) : red == SCATTER_MAX ? rlx_max(g, data, uk) : rlx_min(g, data, uk);
    data = rlx_where(g, at, v, data);
  }
  return data;
}

static rlx_node scatter_rows(ox_importer *im, const ox_node *n, rlx_node data, rlx_node flat, rlx_node upd, int red) {
  rlx_graph *g = im->g;
  if (red >= SCATTER_MUL) return scatter_in_turn(im, n, data, flat, upd, red);
  if (red == SCATTER_ADD) return rlx_scatter_add(g, data, flat, upd, 0);
  rlx_node zero = rlx_mul(g, data, ox_scalar_like(im, data, 0));
  rlx_node sum = rlx_scatter_add(g, zero, flat, upd, 0);
  rlx_node hit = rlx_scatter_add(g, zero, flat, rlx_add(g, rlx_mul(g, upd, ox_scalar_like(im, upd, 0)), ox_scalar_like(im, upd, 1)), 0);
  return rlx_where(g, rlx_compare(g, RLX_CMP_NE, hit, zero), sum, data);
}

/* ONNX's reduction attribute (SCATTER_*); -1 (failed) for another. */
static int scatter_reduction(ox_importer *im, const ox_node *n) {
  static const char *const names[] = {"none", "add", "mul", "max", "min"};
  const char *red = ox_attr_str(n, "reduction", "none");
  for (int i = 0; i < 5; i++)
    if (!strcmp(red, names[i])) return i;
  ox_node_fail(im, n, RLX_ERR_INVALID, "reduction %s", red);
  return -1;
}

/* Non-negative I64 indices: negatives counted from the end of dim. */
static rlx_node wrap_index(ox_importer *im, rlx_node idx, int64_t dim) {
  rlx_graph *g = im->g;
  idx = rlx_cast(g, idx, RLX_I64);
  return rlx_where(g, rlx_compare(g, RLX_CMP_LT, idx, ox_scalar(im, RLX_I64, 0)),
                   rlx_add(g, idx, ox_scalar(im, RLX_I64, (double)dim)), idx);
}

/* ScatterElements (and Scatter): data flattened, each update's element
 * index its coordinates with the index in place of the axis coordinate. */
rlx_status ox_op_scatter_elements(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  int red = scatter_reduction(im, n);
  if (red < 0) return im->err;
  rlx_node x = IN(0), idx, upd;
  NEED(x);
  idx = IN(1);
  NEED(idx);
  upd = IN(2);
  NEED(upd);
  int64_t xd[RLX_MAX_RANK], id[RLX_MAX_RANK];
  int r = rlx_node_type(g, x, NULL, xd);
  if (rlx_node_type(g, idx, NULL, id) != r || r < 1) return ox_node_fail(im, n, RLX_ERR_INVALID, "indices of another rank");
  int64_t a = ox_attr_int(n, "axis", 0);
  if (a < 0) a += r;
  if (a < 0 || a >= r) return ox_node_fail(im, n, RLX_ERR_INVALID, "axis out of range");
  int64_t numel = 1, nupd = 1, stride[RLX_MAX_RANK];
  for (int i = r - 1; i >= 0; i--) {
    if (ir_dim_is_sym(xd[i]) || ir_dim_is_sym(id[i])) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "symbolic dims");
    stride[i] = numel;
    numel *= xd[i];
    nupd *= id[i];
  }
  int64_t *off = malloc((size_t)(nupd + 1) * sizeof *off);   /* the offsets of the other coordinates */
  if (!off) return ox_node_fail(im, n, RLX_ERR_NOMEM, "out of memory");
  for (int64_t e = 0; e < nupd; e++) {
    int64_t rest = e, o = 0;
    for (int i = r - 1; i >= 0; i--) {
      if (i != a) o += (rest % id[i]) * stride[i];
      rest /= id[i];
    }
    off[e] = o;
  }
  rlx_node oc = rlx_constant(g, RLX_I64, r, id, off);
  free(off);
  rlx_node flat = rlx_add(g, oc, rlx_mul(g, wrap_index(im, idx, xd[a]), ox_scalar(im, RLX_I64, (double)stride[a])));
  rlx_node y = scatter_rows(im, n, rlx_reshape(g, x, 1, &numel), rlx_reshape(g, flat, 1, &nupd), rlx_reshape(g, upd, 1, &nupd), red);
  NEED(y);
  return ox_set_out(im, n, 0, rlx_reshape(g, y, r, xd));
}

/* ScatterND(data, indices [..., k], updates): the index tuples as rows of
 * data seen as [indexed, rest...] (as GatherND). */
rlx_status ox_op_scatter_nd(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  int red = scatter_reduction(im, n);
  if (red < 0) return im->err;
  rlx_node x = IN(0), idx, upd;
  NEED(x);
  idx = IN(1);
  NEED(idx);
  upd = IN(2);
  NEED(upd);
  int64_t xd[RLX_MAX_RANK], id[RLX_MAX_RANK];
  int r = rlx_node_type(g, x, NULL, xd), q = rlx_node_type(g, idx, NULL, id);
  int64_t k = q > 0 ? id[q - 1] : -1;
  if (q < 1 || ir_dim_is_sym(k) || k < 1 || k > r)
    return ox_node_fail(im, n, RLX_ERR_INVALID, "indices of rank %d with %lld per tuple for data of rank %d", q, (long long)k, r);
  for (int i = 0; i < r; i++)
    if (ir_dim_is_sym(xd[i])) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "symbolic dims");
  int64_t outer[RLX_MAX_RANK], stride = 1, dd[RLX_MAX_RANK];
  for (int i = 0; i < q - 1; i++) outer[i] = id[i];
  rlx_node flat = -1;
  for (int64_t j = k - 1; j >= 0; j--) {
    rlx_node c = wrap_index(im, rlx_reshape(g, rlx_narrow(g, idx, q - 1, j, 1), q - 1, outer), xd[j]);
    c = rlx_mul(g, c, ox_scalar(im, RLX_I64, (double)stride));
    flat = flat < 0 ? c : rlx_add(g, flat, c);
    stride *= xd[j];
  }
  int dr = 0;
  dd[dr++] = stride;
  for (int i = (int)k; i < r; i++) dd[dr++] = xd[i];
  rlx_node y = scatter_rows(im, n, rlx_reshape(g, x, dr, dd), flat, upd, red);
  NEED(y);
  return ox_set_out(im, n, 0, rlx_reshape(g, y, r, xd));
}

/* ai.onnx.ml Binarizer: 1 where x > threshold, else 0, in x's dtype. */
rlx_status ox_op_binarizer(ox_importer *im, const ox_node *n) {
  rlx_node x = IN(0);
  NEED(x);
  rlx_node gt = rlx_compare(im->g, RLX_CMP_GT, x, ox_scalar_like(im, x, ox_attr_float(n, "threshold", 0)));
  return ox_set_out(im, n, 0, rlx_where(im->g, gt, ox_scalar_like(im, x, 1), ox_scalar_like(im, x, 0)));
}

/* ai.onnx.ml ArrayFeatureExtractor: the elements of x's last axis at the
 * indices y ([1, k] for a 1-D x). */
rlx_status ox_op_array_feature_extractor(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node x = IN(0), y = IN(1);
  NEED(x);
  NEED(y);
  int64_t xd[RLX_MAX_RANK], yd[RLX_MAX_RANK];
  int r = rlx_node_type(g, x, NULL, xd), yr = rlx_node_type(g, y, NULL, yd);
  int64_t k = 1;
  for (int i = 0; i < yr; i++) k *= yd[i];
  if (r < 1 || ir_dim_is_sym(k)) return ox_node_fail(im, n, RLX_ERR_SHAPE, "x of rank %d, indices of a symbolic size", r);
  rlx_node out = rlx_gather(g, x, rlx_reshape(g, y, 1, &k), r - 1);
  return ox_set_out(im, n, 0, r == 1 ? rlx_reshape(g, out, 2, (int64_t[]){1, k}) : out);
}

/* Det of [..., n, n] for n <= 5: the sum over permutations of the signed
 * products of their elements, in F64 (larger n is RLX_ERR_UNSUPPORTED). */
rlx_status ox_op_det(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node x = IN(0);
  NEED(x);
  int64_t xd[RLX_MAX_RANK];
  rlx_dtype t;
  int r = rlx_node_type(g, x, &t, xd);
  if (r < 2 || xd[r - 1] != xd[r - 2] || !ir_is_float(t)) return ox_node_fail(im, n, RLX_ERR_SHAPE, "a float [..., n, n] input");
  int64_t m = xd[r - 1];
  if (ir_dim_is_sym(m) || m < 1 || m > 5) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a determinant of order %lld (at most 5)", (long long)m);
  rlx_node e[5][5], xf = rlx_cast(g, x, RLX_F64);
  for (int i = 0; i < m; i++)
    for (int j = 0; j < m; j++)
      e[i][j] = rlx_reshape(g, rlx_narrow(g, rlx_narrow(g, xf, r - 2, i, 1), r - 1, j, 1), r - 2, xd);
  int p[5] = {0, 1, 2, 3, 4}, c[5] = {0}, sign = 1;
  rlx_node det = -1;
  for (int k = 0;;) {   /* Heap's algorithm: each permutation once, its sign flipping with each swap */
    rlx_node term = e[0][p[0]];
    for (int i = 1; i < m; i++) term = rlx_mul(g, term, e[i][p[i]]);
    det = det < 0 ? term : sign > 0 ? rlx_add(g, det, term) : rlx_sub(g, det, term);
    while (k < m && c[k] >= k) c[k++] = 0;
    if (k >= m) break;
    int a = k % 2 ? c[k] : 0, tmp = p[a];
    p[a] = p[k], p[k] = tmp;
    sign = -sign;
    c[k]++;
    k = 1;
  }
  return ox_set_out(im, n, 0, rlx_cast(g, det, t));
}
