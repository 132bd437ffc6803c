/* ops_attention.c — ONNX Attention (opset 23 on). 3-D inputs are made
 * [B, H, S, D]; past keys and values are concatenated in front (and are
 * the present outputs); attn_mask (bool: true attends, or additive),
 * is_causal (top-left after the past: query i sees keys j <= past + i),
 * and the windows become one additive F32 mask. rlx's Attention op runs it
 * when it can; otherwise (value heads of another size, softcap with a
 * mask, the qk_matmul_output) it is built from MatMul, Softmax and
 * elementwise ops, softcap before the mask. nonpad_kv_seqlen is
 * RLX_ERR_UNSUPPORTED. */
#include "onnx.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define IN(i) ox_in(im, n, i)
#define NEED(v) do { if ((v) < 0) return im->err ? im->err : ox_check(im, n, -1); } while (0)

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
  if (ox_has_in(n, 6)) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "nonpad_kv_seqlen (an external KV cache)");
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
  }
  mask = add_mask(g, mask, structural_mask(im, n, s, tk, past));
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
