/* ops_attention.c — ONNX Attention (opset 23 on). 3-D inputs are made
 * [B, H, S, D]; past keys and values are concatenated in front (and are
 * the present outputs); attn_mask (bool: true attends, or additive),
 * is_causal (top-left after the past: query i sees keys j <= past + i),
 * and the windows become one additive F32 mask. rlx's Attention op runs it
 * when it can; otherwise (value heads of another size, softcap with a
 * mask, the qk_matmul_output) it is built from MatMul, Softmax and
 * elementwise ops, softcap before the mask. nonpad_kv_seqlen (the valid
 * keys of each batch row of an external cache) masks the keys past it. */
#include "onnx.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* [B, S, H*D] -> [B, H, S, D] */
static rlx_node heads_first(rlx_graph *g, rlx_node x, int64_t h) {
  int64_t d[RLX_MAX_RANK];
  rlx_node_type(g, x, NULL, d);
  int64_t four[4] = {d[0], d[1], h, d[2] / h};
  static const int64_t perm[4] = {0, 2, 1, 3};
  return rlx_transpose(g, rlx_reshape(g, x, 4, four), 4, perm);
}

/* [B, Hk, T, D] -> [B, Hk * rep, T, D], each kv head repeated rep times in place. */
static rlx_node repeat_heads(rlx_graph *g, rlx_node x, int64_t rep) {
  if (rep == 1) return x;
  int64_t d[RLX_MAX_RANK];
  rlx_node_type(g, x, NULL, d);
  int64_t five[5] = {d[0], d[1], 1, d[2], d[3]}, big[5] = {d[0], d[1], rep, d[2], d[3]}, four[4] = {d[0], d[1] * rep, d[2], d[3]};
  return rlx_reshape(g, rlx_expand(g, rlx_reshape(g, x, 5, five), 5, big), 4, four);
}

/* The [S, T] additive mask of is_causal and the windows; -1 when none applies. */
static rlx_node structural_mask(ox_importer *im, const ox_node *n, int64_t s, int64_t t, int64_t past) {
  int causal = (int)ox_attr_int(n, "is_causal", 0);
  int64_t left = ox_attr_int(n, "left_window_size", -1), right = ox_attr_int(n, "right_window_size", -1);
  if (!causal && left < 0 && right < 0) return -1;
  if (s * t > (1 << 24)) return -1;
  float *m = malloc((size_t)(s * t) * sizeof *m);
  if (!m) return -1;
  for (int64_t i = 0; i < s; i++)
    for (int64_t j = 0; j < t; j++) {
      int64_t at = past + i;
      int ok = (!causal || j <= at) && (left < 0 || j >= at - left) && (right < 0 || j <= at + right);
      m[i * t + j] = ok ? 0.0f : -INFINITY;
    }
  int64_t md[2] = {s, t};
  rlx_node c = rlx_constant(im->g, RLX_F32, 2, md, m);
  free(m);
  return c;
}

/* Positions 0..len-1 as an I64 constant of rank 4 along axis. */
static rlx_node iota4(rlx_graph *g, int64_t len, int axis) {
  int64_t d[4] = {1, 1, 1, 1};
  d[axis] = len;
  int64_t *v = malloc((size_t)(len + 1) * sizeof *v);
  if (!v) return -1;
  for (int64_t j = 0; j < len; j++) v[j] = j;
  rlx_node c = rlx_constant(g, RLX_I64, 4, d, v);
  free(v);
  return c;
}

/* The [B, 1, S, T] additive mask of an external cache of len[b] valid
 * keys: key j < len[b], and is_causal and the windows aligned so that
 * query i sits at position len[b] - S + i (ONNX's offset-aligned causal
 * mask; the offset may be negative). */
static rlx_node nonpad_mask(ox_importer *im, const ox_node *n, rlx_node len, int64_t b, int64_t s, int64_t t) {
  rlx_graph *g = im->g;
  int64_t b1[4] = {b, 1, 1, 1};
  len = rlx_reshape(g, len, 4, b1);
  rlx_node j = iota4(g, t, 3), i = iota4(g, s, 2);
  if (j < 0 || i < 0) return -1;
  rlx_node ok = rlx_compare(g, RLX_CMP_LT, j, len);
  rlx_node at = rlx_add(g, i, rlx_sub(g, len, ox_scalar(im, RLX_I64, (double)s)));   /* [B, 1, S, 1] */
  rlx_node no = rlx_compare(g, RLX_CMP_NE, len, len);
  int64_t left = ox_attr_int(n, "left_window_size", -1), right = ox_attr_int(n, "right_window_size", -1);
  if (ox_attr_int(n, "is_causal", 0)) ok = rlx_where(g, rlx_compare(g, RLX_CMP_LE, j, at), ok, no);
  if (left >= 0) ok = rlx_where(g, rlx_compare(g, RLX_CMP_GE, j, rlx_sub(g, at, ox_scalar(im, RLX_I64, (double)left))), ok, no);
  if (right >= 0) ok = rlx_where(g, rlx_compare(g, RLX_CMP_LE, j, rlx_add(g, at, ox_scalar(im, RLX_I64, (double)right))), ok, no);
  return rlx_where(g, ok, ox_scalar(im, RLX_F32, 0), ox_scalar(im, RLX_F32, -INFINITY));
}

static rlx_node add_mask(rlx_graph *g, rlx_node a, rlx_node b) { return a < 0 ? b : b < 0 ? a : rlx_add(g, a, b); }

rlx_status ox_op_attention(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node q = IN(0), k, v;
  NEED(q);
  k = IN(1);
  NEED(k);
  v = IN(2);
  NEED(v);
  int64_t qd[RLX_MAX_RANK], kd[RLX_MAX_RANK], vd[RLX_MAX_RANK];
  rlx_dtype t;
  int r = rlx_node_type(g, q, &t, qd);
  int64_t hq, hk;
  if (r == 3) {
    hq = ox_attr_int(n, "q_num_heads", 0), hk = ox_attr_int(n, "kv_num_heads", 0);
    rlx_node_type(g, k, NULL, kd);
    rlx_node_type(g, v, NULL, vd);
    if (hq <= 0 || hk <= 0 || qd[2] % hq || kd[2] % hk || vd[2] % hk)
      return ox_node_fail(im, n, RLX_ERR_INVALID, "q_num_heads / kv_num_heads do not divide the hidden sizes");
    q = heads_first(g, q, hq), k = heads_first(g, k, hk), v = heads_first(g, v, hk);
  } else if (r != 4) {
    return ox_node_fail(im, n, RLX_ERR_INVALID, "rank %d", r);
  }
  rlx_node_type(g, q, NULL, qd);
  rlx_node_type(g, k, NULL, kd);
  rlx_node_type(g, v, NULL, vd);
  hq = qd[1], hk = kd[1];
  int64_t d = qd[3], dv = vd[3], s = qd[2], past = 0;
  if (ir_dim_is_sym(hq) || ir_dim_is_sym(hk) || ir_dim_is_sym(d) || ir_dim_is_sym(dv))
    return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "symbolic head counts or head sizes");
  if (hk <= 0 || hq <= 0 || hq % hk) return ox_node_fail(im, n, RLX_ERR_INVALID, "%lld query heads for %lld kv heads", (long long)hq, (long long)hk);
  if (ox_has_in(n, 4) != ox_has_in(n, 5)) return ox_node_fail(im, n, RLX_ERR_INVALID, "past_key without past_value");
  if (ox_has_in(n, 4)) {
    rlx_node pk = IN(4), pv;
    NEED(pk);
    pv = IN(5);
    NEED(pv);
    int64_t pd[RLX_MAX_RANK];
    rlx_node_type(g, pk, NULL, pd);
    past = pd[2];
    rlx_node ks[2] = {pk, k}, vs[2] = {pv, v};
    k = rlx_concat(g, 2, ks, 2);
    v = rlx_concat(g, 2, vs, 2);
    rlx_status st = ox_set_out(im, n, 1, k);
    if (!st) st = ox_set_out(im, n, 2, v);
    if (st) return st;
  }
  int64_t tk = kd[2] + past;
  if (ir_dim_is_sym(s) || ir_dim_is_sym(tk)) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "symbolic sequence lengths");
  rlx_node mask = -1;
  if (ox_has_in(n, 3)) {
    mask = IN(3);
    NEED(mask);
    rlx_dtype mt;
    rlx_node_type(g, mask, &mt, NULL);
    if (mt == RLX_BOOL) mask = rlx_where(g, mask, ox_scalar(im, RLX_F32, 0), ox_scalar(im, RLX_F32, -INFINITY));
    else if (mt != RLX_F32) mask = rlx_cast(g, mask, RLX_F32);
    int64_t md[RLX_MAX_RANK], before[RLX_MAX_RANK] = {0}, after[RLX_MAX_RANK] = {0};
    int mr = rlx_node_type(g, mask, NULL, md);
    if (mr >= 1 && !ir_dim_is_sym(md[mr - 1]) && md[mr - 1] < tk) {   /* a shorter mask: the keys past it masked */
      after[mr - 1] = tk - md[mr - 1];
      mask = rlx_pad(g, mask, mr, before, after, -INFINITY);
    }
  }
  if (ox_has_in(n, 6)) {
    rlx_node len = IN(6);
    NEED(len);
    mask = add_mask(g, mask, nonpad_mask(im, n, rlx_cast(g, len, RLX_I64), qd[0], s, tk));
  } else {
    mask = add_mask(g, mask, structural_mask(im, n, s, tk, past));
  }
  double scale = ox_attr_float(n, "scale", 0), softcap = ox_attr_float(n, "softcap", 0);
  int want_qk = n->n_outputs > 3 && n->outputs[3][0];
  rlx_node y;
  if (dv == d && !want_qk && (softcap <= 0 || mask < 0)) {
    rlx_attention_desc ad = {.num_heads = (int)hq, .num_kv_heads = (int)hk, .head_dim = (int)d,
                             .mask_kind = mask >= 0 ? RLX_MASK_CUSTOM : RLX_MASK_NONE,
                             .score_scale = scale, .softcap = softcap, .layout = RLX_LAYOUT_BHSD};
    y = rlx_attention(g, q, k, v, mask, &ad);
  } else {
    static const int64_t kt[4] = {0, 1, 3, 2};
    rlx_node kr = repeat_heads(g, k, hq / hk), vr = repeat_heads(g, v, hq / hk);
    rlx_node qk = rlx_mul(g, rlx_matmul(g, q, rlx_transpose(g, kr, 4, kt)),
                          ox_scalar(im, t, scale > 0 ? scale : 1.0 / sqrt((double)d)));
    rlx_node stage[4];   /* the qk_matmul_output modes: QK, softcapped, masked, softmax */
    stage[0] = qk;
    if (softcap > 0)
      qk = rlx_mul(g, rlx_activation(g, RLX_ACT_TANH, rlx_div(g, qk, ox_scalar(im, t, softcap))), ox_scalar(im, t, softcap));
    stage[1] = qk;
    if (mask >= 0) qk = rlx_add(g, qk, t == RLX_F32 ? mask : rlx_cast(g, mask, t));
    stage[2] = qk;
    rlx_node p = rlx_softmax(g, qk, 3);
    if (mask >= 0)   /* a row with every key masked attends to nothing: zeros, not NaN */
      p = rlx_where(g, rlx_compare(g, RLX_CMP_NE, p, p), ox_scalar(im, t, 0), p);
    stage[3] = p;
    y = rlx_matmul(g, p, vr);
    if (want_qk) {
      int64_t mode = ox_attr_int(n, "qk_matmul_output_mode", 0);
      if (mode < 0 || mode > 3) return ox_node_fail(im, n, RLX_ERR_INVALID, "qk_matmul_output_mode %lld", (long long)mode);
      rlx_status st = ox_set_out(im, n, 3, stage[mode]);
      if (st) return st;
    }
  }
  if (r == 3) {   /* back to [B, S, H*Dv] */
    static const int64_t perm[4] = {0, 2, 1, 3};
    int64_t three[3] = {qd[0], s, hq * dv};
    y = rlx_reshape(g, rlx_transpose(g, y, 4, perm), 3, three);
  }
  return ox_set_out(im, n, 0, y);
}

/* RotaryEmbedding (opset 23): x as [B, S, H, D] (from [B, H, S, D], or
 * [B, S, H*D] with num_heads); the first rotary_embedding_dim of each head
 * rotated by the cos/sin caches (gathered by position_ids when given),
 * in halves or interleaved pairs; the rest passes. */
rlx_status ox_op_rotary_embedding(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node x = IN(0), cs, sn;
  NEED(x);
  cs = IN(1);
  NEED(cs);
  sn = IN(2);
  NEED(sn);
  int64_t xd[RLX_MAX_RANK], d4[4];
  int r = rlx_node_type(g, x, NULL, xd);
  static const int64_t swap[4] = {0, 2, 1, 3};
  if (r == 4) {
    x = rlx_transpose(g, x, 4, swap);
    d4[0] = xd[0], d4[1] = xd[2], d4[2] = xd[1], d4[3] = xd[3];
  } else if (r == 3) {
    int64_t h = ox_attr_int(n, "num_heads", 0);
    if (h <= 0 || ir_dim_is_sym(xd[2]) || xd[2] % h) return ox_node_fail(im, n, RLX_ERR_INVALID, "num_heads %lld for a hidden size of %lld", (long long)h, (long long)xd[2]);
    d4[0] = xd[0], d4[1] = xd[1], d4[2] = h, d4[3] = xd[2] / h;
    x = rlx_reshape(g, x, 4, d4);
  } else {
    return ox_node_fail(im, n, RLX_ERR_INVALID, "rank %d (3 or 4)", r);
  }
  int64_t rot = ox_attr_int(n, "rotary_embedding_dim", 0), hd = d4[3];
  if (rot == 0) rot = hd;
  if (ir_dim_is_sym(hd) || rot <= 0 || rot > hd || rot % 2) return ox_node_fail(im, n, RLX_ERR_INVALID, "rotary_embedding_dim %lld for heads of %lld", (long long)rot, (long long)hd);
  if (ox_has_in(n, 3)) {
    rlx_node pos = IN(3);
    NEED(pos);
    cs = rlx_gather(g, cs, pos, 0);
    sn = rlx_gather(g, sn, pos, 0);
  }
  int64_t cd[RLX_MAX_RANK];
  int cr = rlx_node_type(g, cs, NULL, cd);
  if (cr != 3 || cd[2] != rot / 2) return ox_node_fail(im, n, RLX_ERR_SHAPE, "caches of rank %d, last dim %lld; [B, S, %lld] expected", cr, (long long)cd[cr - 1], (long long)(rot / 2));
  int64_t c4[4] = {cd[0], cd[1], 1, rot / 2};
  cs = rlx_reshape(g, cs, 4, c4);
  sn = rlx_reshape(g, sn, 4, c4);
  rlx_node xr = rot == hd ? x : rlx_narrow(g, x, 3, 0, rot), x1, x2;
  int inter = (int)ox_attr_int(n, "interleaved", 0);
  int64_t d5[5] = {d4[0], d4[1], d4[2], rot / 2, 2}, h4[4] = {d4[0], d4[1], d4[2], rot / 2};
  if (inter) {
    rlx_node p = rlx_reshape(g, xr, 5, d5);
    x1 = rlx_reshape(g, rlx_narrow(g, p, 4, 0, 1), 4, h4);
    x2 = rlx_reshape(g, rlx_narrow(g, p, 4, 1, 1), 4, h4);
  } else {
    x1 = rlx_narrow(g, xr, 3, 0, rot / 2);
    x2 = rlx_narrow(g, xr, 3, rot / 2, rot / 2);
  }
  rlx_node re = rlx_sub(g, rlx_mul(g, cs, x1), rlx_mul(g, sn, x2));
  rlx_node im_ = rlx_add(g, rlx_mul(g, sn, x1), rlx_mul(g, cs, x2));
  rlx_node y;
  if (inter) {
    int64_t e5[5] = {d4[0], d4[1], d4[2], rot / 2, 1}, r4[4] = {d4[0], d4[1], d4[2], rot};
    rlx_node pair[2] = {rlx_reshape(g, re, 5, e5), rlx_reshape(g, im_, 5, e5)};
    y = rlx_reshape(g, rlx_concat(g, 2, pair, 4), 4, r4);
  } else {
    rlx_node halves[2] = {re, im_};
    y = rlx_concat(g, 2, halves, 3);
  }
  if (rot < hd) {
    rlx_node parts[2] = {y, rlx_narrow(g, x, 3, rot, hd - rot)};
    y = rlx_concat(g, 2, parts, 3);
  }
  y = r == 4 ? rlx_transpose(g, y, 4, swap) : rlx_reshape(g, y, 3, xd);
  return ox_set_out(im, n, 0, y);
}
