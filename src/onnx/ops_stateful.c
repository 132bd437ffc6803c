/* ops_stateful.c — the ops of recurrent decoders (Mamba, Gated DeltaNet)
 * that carry a state from one call to the next: CausalConvWithState and
 * LinearAttention (opset 27). Both compute in F32 and return the input's
 * dtype; LinearAttention's recurrence is unrolled over the sequence, whose
 * length must be known at import. */
#include "onnx.h"

#include <math.h>
#include <string.h>

/* CausalConvWithState(input [B, C, L], weight [C, 1, K], bias?, past [B, C, K-1]?):
 * the depthwise convolution of past ++ input (zeros without past), as K
 * shifted slices times their weight column; present = the last K-1 positions. */
rlx_status ox_op_causal_conv(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node x = IN(0), w = IN(1);
  NEED(x);
  NEED(w);
  int64_t xd[RLX_MAX_RANK], wd[RLX_MAX_RANK];
  rlx_dtype t;
  if (rlx_node_type(g, x, &t, xd) != 3 || rlx_node_type(g, w, NULL, wd) != 3 || wd[0] != xd[1] || wd[1] != 1 || wd[2] < 1)
    return ox_node_fail(im, n, RLX_ERR_SHAPE, "input must be [B, C, L] and weight [C, 1, K]");
  for (int i = 0; i < 3; i++)
    if (ir_dim_is_sym(xd[i]) || ir_dim_is_sym(wd[i])) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "symbolic dims");
  int64_t B = xd[0], C = xd[1], L = xd[2], Kw = wd[2];
  rlx_node xf = rlx_cast(g, x, RLX_F32), past;
  if (ox_has_in(n, 3)) {
    past = IN(3);
    NEED(past);
    past = rlx_cast(g, past, RLX_F32);
  } else {
    past = rlx_expand(g, ox_scalar(im, RLX_F32, 0), 3, (int64_t[]){B, C, Kw - 1});
  }
  rlx_node padded = Kw > 1 ? rlx_concat(g, 2, (rlx_node[]){past, xf}, 2) : xf, y = -1;
  rlx_node wf = rlx_cast(g, w, RLX_F32);
  for (int64_t j = 0; j < Kw; j++) {
    rlx_node col = rlx_reshape(g, rlx_narrow(g, wf, 2, j, 1), 3, (int64_t[]){1, C, 1});
    rlx_node term = rlx_mul(g, rlx_narrow(g, padded, 2, j, L), col);
    y = y < 0 ? term : rlx_add(g, y, term);
  }
  if (ox_has_in(n, 2)) {
    rlx_node b = IN(2);
    NEED(b);
    y = rlx_add(g, y, rlx_reshape(g, rlx_cast(g, b, RLX_F32), 3, (int64_t[]){1, C, 1}));
  }
  const char *act = ox_attr_str(n, "activation", "none");
  if (!strcmp(act, "silu") || !strcmp(act, "swish")) y = rlx_activation(g, RLX_ACT_SILU, y);
  else if (strcmp(act, "none")) return ox_node_fail(im, n, RLX_ERR_INVALID, "activation \"%s\"", act);
  rlx_status st = ox_set_out(im, n, 0, rlx_cast(g, y, t));
  if (st || n->n_outputs < 2) return st;
  rlx_node present = rlx_slice(g, padded, 3, (int64_t[]){0, 0, L}, (int64_t[]){B, C, L + Kw - 1}, (int64_t[]){1, 1, 1});
  return ox_set_out(im, n, 1, rlx_cast(g, present, t));
}

/* Step t of a packed [B, T, H * d] input as [B, H, rows, cols] (F32). */
static rlx_node step(ox_importer *im, rlx_node x, int64_t t, int64_t B, int64_t H, int64_t rows, int64_t cols) {
  return rlx_reshape(im->g, rlx_cast(im->g, rlx_narrow(im->g, x, 1, t, 1), RLX_F32), 4, (int64_t[]){B, H, rows, cols});
}

/* LinearAttention: per step, with S [B, H_kv, d_k, d_v] and S' = exp(g) S
 * (S without a decay), linear/gated: S = S' + k v^T; delta/gated_delta:
 * S = S' + beta k (v - S'^T k)^T; then o = scale q^T S, each group of
 * q_num_heads / kv_num_heads query heads reading its KV head's state. */
rlx_status ox_op_linear_attention(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node q = IN(0), k = IN(1), v = IN(2);
  NEED(q);
  NEED(k);
  NEED(v);
  int64_t qd[RLX_MAX_RANK], kd[RLX_MAX_RANK], vd[RLX_MAX_RANK], dd[RLX_MAX_RANK], bd[RLX_MAX_RANK];
  rlx_dtype t;
  int64_t hq = ox_attr_int(n, "q_num_heads", 0), hk = ox_attr_int(n, "kv_num_heads", 0);
  if (rlx_node_type(g, q, &t, qd) != 3 || rlx_node_type(g, k, NULL, kd) != 3 || rlx_node_type(g, v, NULL, vd) != 3)
    return ox_node_fail(im, n, RLX_ERR_SHAPE, "query, key and value must be [B, T, H * d]");
  for (int i = 0; i < 3; i++)
    if (ir_dim_is_sym(qd[i]) || ir_dim_is_sym(kd[i]) || ir_dim_is_sym(vd[i]))
      return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "symbolic dims (the sequence is unrolled)");
  if (hq < 1 || hk < 1 || hq % hk || qd[2] % hq || vd[2] % hk || kd[2] != qd[2] / hq * hk || kd[1] != qd[1] || vd[1] != qd[1])
    return ox_node_fail(im, n, RLX_ERR_SHAPE, "q_num_heads %lld, kv_num_heads %lld for query, key, value of last dims %lld, %lld, %lld",
                        (long long)hq, (long long)hk, (long long)qd[2], (long long)kd[2], (long long)vd[2]);
  int64_t B = qd[0], T = qd[1], dk = qd[2] / hq, dv = vd[2] / hk, G = hq / hk;
  if (T > 4096) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a sequence of %lld steps (at most 4096 unrolled)", (long long)T);
  const char *rule = ox_attr_str(n, "update_rule", "gated_delta");
  int gated = !strcmp(rule, "gated") || !strcmp(rule, "gated_delta"), delta = !strcmp(rule, "delta") || !strcmp(rule, "gated_delta");
  if (!gated && !delta && strcmp(rule, "linear")) return ox_node_fail(im, n, RLX_ERR_INVALID, "update_rule \"%s\"", rule);
  rlx_node decay = -1, beta = -1, s;
  if (gated) {
    if (!ox_has_in(n, 4)) return ox_node_fail(im, n, RLX_ERR_INVALID, "update_rule %s without decay", rule);
    NEED(decay = IN(4));
    if (rlx_node_type(g, decay, NULL, dd) != 3 || (dd[2] != hk && dd[2] != hk * dk))
      return ox_node_fail(im, n, RLX_ERR_SHAPE, "decay must be [B, T, H_kv] or [B, T, H_kv * d_k]");
  }
  if (delta) {
    if (!ox_has_in(n, 5)) return ox_node_fail(im, n, RLX_ERR_INVALID, "update_rule %s without beta", rule);
    NEED(beta = IN(5));
    if (rlx_node_type(g, beta, NULL, bd) != 3 || (bd[2] != hk && bd[2] != 1))
      return ox_node_fail(im, n, RLX_ERR_SHAPE, "beta must be [B, T, H_kv] or [B, T, 1]");
  }
  if (ox_has_in(n, 3)) {
    NEED(s = IN(3));
    s = rlx_cast(g, s, RLX_F32);
  } else {
    s = rlx_expand(g, ox_scalar(im, RLX_F32, 0), 4, (int64_t[]){B, hk, dk, dv});
  }
  double scale = ox_attr_float(n, "scale", 0);
  if (scale == 0) scale = 1 / sqrt((double)dk);
  rlx_node *outs = ox_alloc(im->arena, (size_t)T * sizeof *outs);
  if (!outs) return ox_node_fail(im, n, RLX_ERR_NOMEM, "out of memory");
  for (int64_t i = 0; i < T; i++) {
    rlx_node kt = step(im, k, i, B, hk, dk, 1), vt = step(im, v, i, B, hk, 1, dv);
    if (gated) s = rlx_mul(g, s, rlx_activation(g, RLX_ACT_EXP, step(im, decay, i, B, hk, dd[2] == hk ? 1 : dk, 1)));
    if (delta) {
      rlx_node kts = rlx_matmul(g, rlx_reshape(g, kt, 4, (int64_t[]){B, hk, 1, dk}), s);   /* (S'^T k)^T: [B, H, 1, dv] */
      rlx_node bt = step(im, beta, i, B, bd[2], 1, 1);
      vt = rlx_mul(g, rlx_sub(g, vt, kts), bt);
    }
    s = rlx_add(g, s, rlx_mul(g, kt, vt));
    rlx_node qt = step(im, q, i, B, hk, G, dk);
    outs[i] = rlx_reshape(g, rlx_matmul(g, qt, s), 3, (int64_t[]){B, 1, hq * dv});
  }
  rlx_node o = T == 1 ? outs[0] : rlx_concat(g, (int)T, outs, 1);
  rlx_status st = ox_set_out(im, n, 0, rlx_cast(g, rlx_mul(g, o, ox_scalar(im, RLX_F32, scale)), t));
  return st || n->n_outputs < 2 ? st : ox_set_out(im, n, 1, rlx_cast(g, s, t));
}
