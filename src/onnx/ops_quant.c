/* ops_quant.c — ONNX's integer and quantized linear ops, as float
 * arithmetic on dequantized values: MatMulInteger and ConvInteger (the
 * products of x - zero point in F64, exact for the sums of 8-bit products
 * any real model has, then int32), QLinearMatMul and QLinearConv
 * (dequantize, the float product, requantize: round half to even,
 * saturate). The convolutions reuse the Conv importer on the dequantized
 * operands.
 */
#include "onnx.h"

#include <stdio.h>
#include <string.h>

static int is(const ox_node *n, const char *op) { return !strcmp(n->op_type, op); }

/* A per-tensor or per-axis parameter p ([C] or [1]) shaped to broadcast
 * against a rank-r tensor with C at axis. */
static rlx_node along(ox_importer *im, rlx_node p, int r, int axis) {
  int64_t pd[RLX_MAX_RANK], shape[RLX_MAX_RANK];
  int pr = rlx_node_type(im->g, p, NULL, pd);
  if (pr == 0 || (pr == 1 && pd[0] == 1) || pr != 1 || axis < 0 || axis >= r) return p;
  for (int i = 0; i < r; i++) shape[i] = i == axis ? pd[0] : 1;
  return rlx_reshape(im->g, p, r, shape);
}

/* (x - zero point) in dtype t; input zi absent: x alone. */
static rlx_node centered(ox_importer *im, const ox_node *n, int xi, int zi, rlx_dtype t, int axis) {
  rlx_node x = IN(xi);
  if (x < 0) return -1;
  int r = rlx_node_type(im->g, x, NULL, NULL);
  x = rlx_cast(im->g, x, t);
  if (!ox_has_in(n, zi)) return x;
  rlx_node z = IN(zi);
  return z < 0 ? -1 : rlx_sub(im->g, x, along(im, rlx_cast(im->g, z, t), r, axis));
}

/* x quantized to dtype q with scale and zero point inputs si, zi. */
static rlx_node requantize(ox_importer *im, const ox_node *n, rlx_node y, int si, int zi, rlx_dtype ft) {
  rlx_node s = IN(si);
  if (s < 0) return -1;
  rlx_dtype q = RLX_U8;
  rlx_node z = ox_has_in(n, zi) ? IN(zi) : -1;
  if (z >= 0) rlx_node_type(im->g, z, &q, NULL);
  y = rlx_activation(im->g, RLX_ACT_ROUND, rlx_div(im->g, y, rlx_cast(im->g, s, ft)));
  if (z >= 0) y = rlx_add(im->g, y, rlx_cast(im->g, z, ft));
  return rlx_cast(im->g, rlx_clamp(im->g, y, q == RLX_I8 ? -128 : 0, q == RLX_I8 ? 127 : 255), q);
}

/* Runs the importer of op_type on the nodes in[] with n's attributes
 * (the values get names of their own); the result, or -1. */
static rlx_node import_as(ox_importer *im, const ox_node *n, const char *op_type, int k, const rlx_node *in) {
  const char **names = ox_alloc(im->arena, (size_t)(k + 1) * sizeof *names);
  const size_t stamp = im->count;   /* the table only grows: unique within the import */
  if (!names) return -1;
  for (int i = 0; i <= k; i++) {
    char buf[48], *s;
    snprintf(buf, sizeof buf, "\x01%s.%zu.%d", op_type, stamp, i);
    if (!(s = ox_alloc(im->arena, strlen(buf) + 1))) return -1;
    names[i] = strcpy(s, buf);
    ox_node leaf = {.name = n->name, .op_type = op_type, .domain = "", .outputs = &names[i], .n_outputs = 1};
    if (i < k && ox_set_out(im, &leaf, 0, in[i])) return -1;
  }
  ox_node call = {.name = n->name, .op_type = op_type, .domain = "", .inputs = names, .n_inputs = k,
                  .outputs = &names[k], .n_outputs = 1, .attrs = n->attrs, .n_attrs = n->n_attrs};
  const ox_op_row *row = ox_find_op(op_type, "", im->opset);
  if (!row || row->run(im, &call)) return -1;
  const ox_value *v = ox_lookup(im, names[k]);
  return v ? v->node : -1;
}

/* MatMulInteger(A, B, a_zp, b_zp) and ConvInteger(x, w, x_zp, w_zp): int32. */
rlx_status ox_op_integer_product(ox_importer *im, const ox_node *n) {
  int conv = is(n, "ConvInteger");
  rlx_node a = centered(im, n, 0, 2, RLX_F64, conv ? 1 : -1);
  NEED(a);
  int br = rlx_node_type(im->g, IN(1), NULL, NULL);
  /* MatMulInteger's b_zero_point is per column (the last axis); ConvInteger's per output channel */
  rlx_node b = centered(im, n, 1, 3, RLX_F64, conv ? 0 : br - 1);
  NEED(b);
  rlx_node y = conv ? import_as(im, n, "Conv", 2, (rlx_node[]){a, b}) : rlx_matmul(im->g, a, b);
  NEED(y);
  return ox_set_out(im, n, 0, rlx_cast(im->g, y, RLX_I32));
}

/* QLinearMatMul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp) and
 * QLinearConv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias). */
rlx_status ox_op_qlinear(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  int conv = is(n, "QLinearConv");
  rlx_dtype st = RLX_F32;
  rlx_node sa = IN(1), sb = IN(4);
  NEED(sa);
  NEED(sb);
  rlx_node_type(g, sa, &st, NULL);
  if (!ir_is_float(st)) return ox_node_fail(im, n, RLX_ERR_DTYPE, "scales of %s", rlx_dtype_name(st));
  const rlx_dtype ft = RLX_F32;   /* computed in F32 whatever the scales' dtype, as onnxruntime */
  int ar = rlx_node_type(g, IN(0), NULL, NULL), br = rlx_node_type(g, IN(3), NULL, NULL);
  /* a's scale and zero point per row, b's per column (QLinearMatMul); w's per output channel */
  int a_axis = conv ? 1 : ar - 2, b_axis = conv ? 0 : br - 1;
  rlx_node a = centered(im, n, 0, 2, ft, a_axis);
  NEED(a);
  rlx_node b = centered(im, n, 3, 5, ft, b_axis);
  NEED(b);
  a = rlx_mul(g, a, along(im, rlx_cast(g, sa, ft), ar, a_axis));
  b = rlx_mul(g, b, along(im, rlx_cast(g, sb, ft), br, b_axis));
  rlx_node y;
  if (conv) {
    rlx_node in[3] = {a, b, -1};
    int k = 2;
    if (ox_has_in(n, 8)) {   /* int32 bias of scale x_scale * w_scale, zero point 0 */
      rlx_node bias = IN(8);
      NEED(bias);
      in[k++] = rlx_mul(g, rlx_cast(g, bias, ft), rlx_mul(g, rlx_cast(g, sa, ft), rlx_cast(g, sb, ft)));
    }
    y = import_as(im, n, "Conv", k, in);
  } else {
    y = rlx_matmul(g, a, b);
  }
  NEED(y);
  y = requantize(im, n, y, 6, 7, ft);
  NEED(y);
  return ox_set_out(im, n, 0, y);
}
