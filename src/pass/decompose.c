/* decompose.c — every fused op of ops.def written back as the primitive
 * ops it stands for (OPS.md rows 49-56 and 65, the semantics at each op's
 * inference in infer_fused.c and infer_conv.c). Legalization uses this for
 * a backend that does not claim a fused op, so any graph runs on any
 * backend that has the primitives.
 *
 *   FusedMatMulBiasAct(a, w, bias)       act(MatMul(a, w) + bias)
 *   FusedConv(x, w, bias, [res])          Clamp(act(Conv(x, w, bias) [+ res]), lo, hi)
 *   FusedResidualLN(x, res, [bias,] g, b)   LayerNorm(x + res [+ bias], g, b, axis -1)
 *   FusedResidualRmsNorm(...)             RmsNorm(...) the same way
 *   FusedSwiGLU(x)                        silu(Narrow(x, -1, 0, n)) * Narrow(x, -1, n, n), [Cast]
 *   ElementwiseRegion(ins)                one Activation / Binary / Cast / Compare per live
 *                                         step [after ResizeNearest2x of input 0]
 *   BatchElementwiseRegion(ins)           the chain per batch input, Concat on axis 0
 *   TransformRegion(x)                    one ResizeNearest2x per transform
 *   FusedAttentionBlock(x, wq, wk, wv, wo, [cos, sin])
 *                                         MatMul(Attention(Rope(x wq), Rope(x wk), x wv), wo)
 *
 * Values: the elementwise regions and TransformRegion decompose exactly
 * (a region rounds every step to its dtype, as the primitives store it).
 * The others round each intermediate to the dtype where the fused kernel
 * rounds once, which for f16 / bf16 stays within the dtype's tolerance;
 * where rounding would cost more than that, the decomposition widens: the
 * residual norms add and normalize f16 / bf16 in f32 (the fused op does
 * not round the sum), and FusedSwiGLU computes in its cast_to dtype when
 * that is wider. */
#include "pass.h"

#include <math.h>
#include <stdlib.h>

int pass_has_decomposition(int op) {
  switch (op) {
  case RLX_OP_FusedMatMulBiasAct:
  case RLX_OP_FusedConv:
  case RLX_OP_FusedResidualLN:
  case RLX_OP_FusedResidualRmsNorm:
  case RLX_OP_FusedSwiGLU:
  case RLX_OP_ElementwiseRegion:
  case RLX_OP_BatchElementwiseRegion:
  case RLX_OP_TransformRegion:
  case RLX_OP_FusedAttentionBlock:
    return 1;
  default:
    return 0;
  }
}

int pass_can_decompose(const rlx_graph *g, rlx_node id) {
  if (!g || id < 0 || id >= g->n_nodes) return 0;
  const ir_node *n = &g->nodes[id];
  if (!pass_has_decomposition(n->op)) return 0;
  if (n->op == RLX_OP_FusedSwiGLU) {
    /* Narrow takes static bounds: the halves of a symbolic dim are not expressible */
    const ir_shape *x = &g->nodes[n->in[0]].out[0].shape;
    return !ir_dim_is_sym(x->d[x->rank - 1]);
  }
  return 1;
}

static rlx_node act_node(rlx_graph *g, int64_t act, double alpha, rlx_node x) {
  if (act == RLX_ACT_NONE) return x;
  return act == RLX_ACT_LEAKY_RELU ? rlx_leaky_relu(g, x, alpha) : rlx_activation(g, (rlx_act)act, x);
}

static rlx_dtype dtype_of(const rlx_graph *g, rlx_node x) { return g->nodes[x].out[0].dtype; }

static int is_half(rlx_dtype t) { return t == RLX_F16 || t == RLX_BF16; }

/* x in f32 when it is f16 / bf16, else x. */
static rlx_node widen(rlx_graph *g, rlx_node x) {
  return is_half(dtype_of(g, x)) ? rlx_cast(g, x, RLX_F32) : x;
}

static rlx_node matmul_bias_act(rlx_graph *g, const ir_node *n, const rlx_node *in) {
  rlx_node y = rlx_add(g, rlx_matmul(g, in[0], in[1]), in[2]);
  return act_node(g, n->a.act, n->a.alpha, y);
}

static rlx_node fused_conv(rlx_graph *g, const ir_node *n, const rlx_node *in) {
  rlx_conv_desc d = {.ndim = (int)n->a.ndim, .groups = n->a.groups};
  for (int i = 0; i < d.ndim; i++) {
    d.stride[i] = n->a.stride.v[i];
    d.dilation[i] = n->a.dilation.v[i];
  }
  for (int i = 0; i < 2 * d.ndim; i++) d.pad[i] = n->a.pad.v[i];
  rlx_node y = rlx_conv(g, in[0], in[1], in[2], &d);
  if (n->n_in == 4) y = rlx_add(g, y, in[3]);
  y = act_node(g, n->a.act, n->a.alpha, y);
  return n->a.lo > -INFINITY || n->a.hi < INFINITY ? rlx_clamp(g, y, n->a.lo, n->a.hi) : y;
}

static rlx_node residual_norm(rlx_graph *g, const ir_node *n, const rlx_node *in) {
  int has_bias = n->a.has_bias != 0;
  rlx_dtype t = dtype_of(g, in[0]);
  rlx_node sum = rlx_add(g, widen(g, in[0]), widen(g, in[1]));
  if (has_bias) sum = rlx_add(g, sum, widen(g, in[2]));
  rlx_node gamma = widen(g, in[2 + has_bias]), beta = widen(g, in[3 + has_bias]);
  rlx_node y = n->op == RLX_OP_FusedResidualLN ? rlx_layer_norm(g, sum, gamma, beta, -1, n->a.eps)
                                              : rlx_rms_norm(g, sum, gamma, beta, -1, n->a.eps);
  return is_half(t) ? rlx_cast(g, y, t) : y;
}

/* Computed in the wider of x's dtype and cast_to (f32 between two half
 * types, neither of which holds the other), so a cast to a wider type gets
 * the wider result the fused op computes. */
static rlx_node swiglu(rlx_graph *g, const ir_node *n, const rlx_node *in) {
  const ir_shape *x = &g->nodes[in[0]].out[0].shape;
  rlx_dtype t = dtype_of(g, in[0]), out = n->a.cast_to >= 0 ? (rlx_dtype)n->a.cast_to : t;
  rlx_dtype compute = ir_dtypes[out].size > ir_dtypes[t].size ? out : t;
  if (out != t && ir_dtypes[compute].size == 2) compute = RLX_F32;
  rlx_node xc = compute == t ? in[0] : rlx_cast(g, in[0], compute);
  int axis = x->rank - 1;
  int64_t half = x->d[axis] / 2; /* static: pass_can_decompose */
  rlx_node gate = rlx_narrow(g, xc, axis, 0, half), up = rlx_narrow(g, xc, axis, half, half);
  rlx_node y = rlx_mul(g, rlx_activation(g, RLX_ACT_SILU, gate), up);
  return compute == out ? y : rlx_cast(g, y, out);
}

/* The chain of a region over region inputs ins[0..n_ins): input 0 through
 * the prologue, then one primitive per step the last step depends on. */
static rlx_node chain(rlx_graph *g, const ir_node *n, const rlx_node *ins, int n_ins) {
  const ir_chain *c = &n->a.chain;
  rlx_node *vals = malloc((size_t)c->n * sizeof *vals);
  unsigned char *live = calloc((size_t)c->n, 1);
  if (!vals || !live) {
    free(vals);
    free(live);
    return ir_fail(g, NULL, RLX_ERR_NOMEM, "decompose %s: out of memory", ir_ops[n->op].name);
  }
  rlx_node first = ins[0];
  if (n->a.prologue == RLX_PROLOGUE_RESIZE_NEAREST_2X) first = rlx_resize_nearest2x(g, first);
  live[c->n - 1] = 1;
  for (int j = c->n - 1; j >= 0; j--) {
    if (!live[j]) continue;
    const rlx_region_step *s = &c->s[j];
    if (s->a < 0) live[-s->a - 1] = 1;
    if ((s->kind == RLX_STEP_BIN || s->kind == RLX_STEP_CMP) && s->b < 0) live[-s->b - 1] = 1;
  }
  for (int j = 0; j < c->n; j++) {
    if (!live[j]) continue;
    const rlx_region_step *s = &c->s[j];
#define OPERAND(k) ((k) < 0 ? vals[-(k) - 1] : (k) == 0 ? first : (k) < n_ins ? ins[k] : -1)
    rlx_node a = OPERAND(s->a), b = s->kind == RLX_STEP_BIN || s->kind == RLX_STEP_CMP ? OPERAND(s->b) : -1;
#undef OPERAND
    switch (s->kind) {
    case RLX_STEP_ACT: vals[j] = act_node(g, s->op, s->alpha, a); break;
    case RLX_STEP_BIN: vals[j] = rlx_binary(g, (rlx_binop)s->op, a, b); break;
    case RLX_STEP_CMP: vals[j] = rlx_compare(g, (rlx_cmpop)s->op, a, b); break;
    case RLX_STEP_CAST: vals[j] = rlx_cast(g, a, s->to); break;
    default: vals[j] = -1; break;
    }
  }
  rlx_node r = vals[c->n - 1];
  free(vals);
  free(live);
  return r;
}

static rlx_node batch_region(rlx_graph *g, const ir_node *n, const rlx_node *in) {
  int nb = (int)n->a.num_batch_inputs, n_ins = n->n_in - nb + 1;
  rlx_node *ins = malloc((size_t)n_ins * sizeof *ins), *parts = malloc((size_t)nb * sizeof *parts);
  rlx_node r = -1;
  if (!ins || !parts) {
    r = ir_fail(g, NULL, RLX_ERR_NOMEM, "decompose BatchElementwiseRegion: out of memory");
  } else {
    for (int k = 1; k < n_ins; k++) ins[k] = in[nb + k - 1];
    for (int b = 0; b < nb; b++) {
      ins[0] = in[b];
      parts[b] = chain(g, n, ins, n_ins);
    }
    r = nb == 1 ? parts[0] : rlx_concat(g, nb, parts, 0);
  }
  free(ins);
  free(parts);
  return r;
}

static rlx_node transform_region(rlx_graph *g, const ir_node *n, const rlx_node *in) {
  rlx_node x = in[0];
  for (int i = 0; i < n->a.transforms.n; i++) x = rlx_resize_nearest2x(g, x); /* the only transform */
  return x;
}

static rlx_node attention_block(rlx_graph *g, const ir_node *n, const rlx_node *in) {
  const ir_attrs *a = &n->a;
  rlx_node q = rlx_matmul(g, in[0], in[1]), k = rlx_matmul(g, in[0], in[2]), v = rlx_matmul(g, in[0], in[3]);
  if (n->n_in == 7) {
    rlx_rope_desc rd = {(int)a->head_dim, (int)a->n_rot, (rlx_rope_mode)a->rope_mode, a->base, a->scale};
    q = rlx_rope_cos_sin(g, q, in[5], in[6], &rd);
    k = rlx_rope_cos_sin(g, k, in[5], in[6], &rd);
  }
  rlx_attention_desc ad = {(int)a->num_heads, (int)a->num_kv_heads, (int)a->head_dim, (rlx_mask_kind)a->mask,
                           (int)a->window, a->score_scale, a->softcap, RLX_LAYOUT_BSHD};
  return rlx_matmul(g, rlx_attention(g, q, k, v, -1, &ad), in[4]);
}

rlx_node pass_decompose(rlx_graph *dst, const rlx_graph *src, rlx_node id, const rlx_node *inputs) {
  if (!dst || !src || id < 0 || id >= src->n_nodes || (src->nodes[id].n_in && !inputs)) {
    rlx_set_error(RLX_ERR_INVALID, "pass_decompose: bad arguments");
    return -1;
  }
  const ir_node *n = &src->nodes[id];
  if (!pass_can_decompose(src, id))
    return ir_fail(dst, n, RLX_ERR_UNSUPPORTED, "has no decomposition into primitive ops%s",
                   pass_has_decomposition(n->op) ? " for these shapes" : "");
  switch (n->op) {
  case RLX_OP_FusedMatMulBiasAct: return matmul_bias_act(dst, n, inputs);
  case RLX_OP_FusedConv: return fused_conv(dst, n, inputs);
  case RLX_OP_FusedResidualLN:
  case RLX_OP_FusedResidualRmsNorm: return residual_norm(dst, n, inputs);
  case RLX_OP_FusedSwiGLU: return swiglu(dst, n, inputs);
  case RLX_OP_ElementwiseRegion: return chain(dst, n, inputs, n->n_in);
  case RLX_OP_BatchElementwiseRegion: return batch_region(dst, n, inputs);
  case RLX_OP_TransformRegion: return transform_region(dst, n, inputs);
  case RLX_OP_FusedAttentionBlock: return attention_block(dst, n, inputs);
  default: return -1; /* pass_can_decompose said no */
  }
}
