/* ops_misc.c — importers of ONNX ops rlx has no single op for, built from
 * its ops: TopK, Swish, IsInf, Shrink, LpNormalization, Hardmax, OneHot,
 * EyeLike, SpaceToDepth / DepthToSpace, Attention, GatherElements. */
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

/* Attention (opset 23): rlx's Attention with a custom additive mask built
 * from ONNX's attn_mask (bool: true attends) and is_causal (ONNX aligns the
 * causal mask top-left, after the past: query i sees keys j <= past + i), past keys and values
 * concatenated in front. Outside rlx's op: softcap together with a mask
 * (ONNX caps after adding the mask), the qk_matmul_output, windows,
 * nonpad_kv_seqlen, and value heads of another size than key heads. */
rlx_status ox_op_attention(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  if ((n->n_outputs > 3 && n->outputs[3][0]) || ox_has_in(n, 6) || ox_attr_int(n, "left_window_size", -1) != -1 ||
      ox_attr_int(n, "right_window_size", -1) != -1)
    return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "qk_matmul_output, nonpad_kv_seqlen or a window");
  rlx_node q = IN(0), k, v;
  NEED(q);
  k = IN(1);
  NEED(k);
  v = IN(2);
  NEED(v);
  int64_t qd[RLX_MAX_RANK], kd[RLX_MAX_RANK], vd[RLX_MAX_RANK];
  rlx_dtype t;
  int r = rlx_node_type(g, q, &t, qd);
  rlx_node_type(g, k, NULL, kd);
  rlx_node_type(g, v, NULL, vd);
  int64_t hq, hk, d, s, tk;
  if (r == 4) {
    hq = qd[1], hk = kd[1], d = qd[3], s = qd[2], tk = kd[2];
    if (vd[3] != d) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "value heads of size %lld, key heads of %lld", (long long)vd[3], (long long)d);
  } else if (r == 3) {
    hq = ox_attr_int(n, "q_num_heads", 0), hk = ox_attr_int(n, "kv_num_heads", 0);
    if (hq <= 0 || hk <= 0 || qd[2] % hq || kd[2] % hk) return ox_node_fail(im, n, RLX_ERR_INVALID, "q_num_heads / kv_num_heads");
    d = qd[2] / hq, s = qd[1], tk = kd[1];
    if (vd[2] / hk != d) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "value heads of another size than key heads");
    if (ox_has_in(n, 4)) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "past keys with 3-D inputs");
  } else {
    return ox_node_fail(im, n, RLX_ERR_INVALID, "rank %d", r);
  }
  int64_t past = 0;   /* query i sits at position past + i */
  if (ox_has_in(n, 4) != ox_has_in(n, 5)) return ox_node_fail(im, n, RLX_ERR_INVALID, "past_key without past_value");
  if (ox_has_in(n, 4)) {
    rlx_node pk = IN(4), pv;
    NEED(pk);
    pv = IN(5);
    NEED(pv);
    int64_t pd[RLX_MAX_RANK];
    rlx_node_type(g, pk, NULL, pd);
    past = pd[2];
    tk += past;
    rlx_node ks[2] = {pk, k}, vs[2] = {pv, v};
    k = rlx_concat(g, 2, ks, 2);
    v = rlx_concat(g, 2, vs, 2);
    rlx_status st = ox_set_out(im, n, 1, k);
    if (!st) st = ox_set_out(im, n, 2, v);
    if (st) return st;
  }
  double softcap = ox_attr_float(n, "softcap", 0);
  int causal = (int)ox_attr_int(n, "is_causal", 0), has_mask = ox_has_in(n, 3);
  if (softcap > 0 && (has_mask || causal)) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "softcap with a mask");
  if (ir_dim_is_sym(s) || ir_dim_is_sym(tk)) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "symbolic sequence lengths");
  rlx_node mask = -1;
  if (has_mask) {
    mask = IN(3);
    NEED(mask);
    rlx_dtype mt;
    rlx_node_type(g, mask, &mt, NULL);
    if (mt == RLX_BOOL)
      mask = rlx_where(g, mask, ox_scalar(im, RLX_F32, 0), ox_scalar(im, RLX_F32, -INFINITY));
    else if (mt != RLX_F32)
      mask = rlx_cast(g, mask, RLX_F32);
  }
  if (causal) {
    if (s * tk > (1 << 24)) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a causal mask of %lld x %lld", (long long)s, (long long)tk);
    float *cm = malloc((size_t)(s * tk) * sizeof *cm);
    if (!cm) return ox_node_fail(im, n, RLX_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < s; i++)
      for (int64_t j = 0; j < tk; j++) cm[i * tk + j] = j <= i + past ? 0.0f : -INFINITY;
    int64_t md[2] = {s, tk};
    rlx_node c = rlx_constant(g, RLX_F32, 2, md, cm);
    free(cm);
    mask = mask >= 0 ? rlx_add(g, mask, c) : c;
  }
  rlx_attention_desc ad = {.num_heads = (int)hq, .num_kv_heads = (int)hk, .head_dim = (int)d,
                           .mask_kind = mask >= 0 ? RLX_MASK_CUSTOM : RLX_MASK_NONE,
                           .score_scale = ox_attr_float(n, "scale", 0), .softcap = softcap,
                           .layout = RLX_LAYOUT_BHSD};
  (void)t;
  return ox_set_out(im, n, 0, rlx_attention(g, q, k, v, mask, &ad));
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
