/* infer_fused.c — builders and shape inference of the fused ops
 * (FusedMatMulBiasAct, FusedResidualLN, FusedResidualRmsNorm, FusedSwiGLU,
 * ElementwiseRegion, BatchElementwiseRegion, TransformRegion,
 * FusedAttentionBlock). The fusion passes make these; they can also be
 * built directly. Each one computes what its decomposition into the
 * primitive ops computes (OPS.md rows 49-56). */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- helpers */

static int is_plain(rlx_dtype t) { return ir_dtype_valid(t) && !ir_is_block(t); }

/* A builder argument that cannot become an attribute: reported against
 * the node the call would have made (sticky errors stay first). */
static rlx_node fail_unbuilt(rlx_graph *g, int op, const char *what) {
  if (!g) {
    rlx_set_error(RLX_ERR_INVALID, "%s: graph is NULL", ir_ops[op].name);
    return -1;
  }
  if (g->err) return rlx_graph_status(g), -1;
  ir_node tmp;
  memset(&tmp, 0, sizeof tmp);
  tmp.op = op;
  tmp.id = g->n_nodes;
  return ir_fail(g, &tmp, RLX_ERR_INVALID, "%s", what);
}

/* [N, C, H, W] -> [N, C, 2H, 2W] in place (ResizeNearest2x). */
static int resize2x_shape(rlx_graph *g, ir_node *n, ir_shape *s, const char *what) {
  if (s->rank != 4) {
    char bs[IR_SHAPE_STR_CAP];
    return ir_fail(g, n, RLX_ERR_SHAPE, "%s %s must be [N, C, H, W] for resize_nearest_2x", what,
                   ir_shape_str(g, s, bs, sizeof bs));
  }
  s->d[2] = ir_dim_mul(g, s->d[2], 2);
  s->d[3] = ir_dim_mul(g, s->d[3], 2);
  return 0;
}

/* ---------------------------------------------------------------- FusedMatMulBiasAct */

rlx_node rlx_fused_matmul_bias_act(rlx_graph *g, rlx_node a, rlx_node w, rlx_node bias,
                                   rlx_act act, double alpha) {
  ir_attrs at;
  ir_attrs_init_defaults(&at);
  at.act = act;
  at.alpha = alpha;
  rlx_node in[] = {a, w, bias};
  return ir_add_node(g, RLX_OP_FusedMatMulBiasAct, 3, in, &at);
}

/* act(a @ w + bias): a [..., M, K] (rank >= 1; rank 1 is [K] as in NumPy
 * matmul, giving [N]), w [K, N] (not batched), bias [N]; one float dtype.
 * act may be none; alpha is leaky_relu's slope (finite). Output [..., M, N]. */
int ir_infer_FusedMatMulBiasAct(rlx_graph *g, ir_node *n) {
  if (n->a.act < 0 || n->a.act >= RLX_ACT_COUNT)
    return ir_fail(g, n, RLX_ERR_INVALID, "act %lld unknown", (long long)n->a.act);
  if (n->a.act == RLX_ACT_LEAKY_RELU && !isfinite(n->a.alpha))
    return ir_fail(g, n, RLX_ERR_INVALID, "leaky_relu alpha must be finite, got %g", n->a.alpha);
  if (ir_require_float_inputs(g, n, n->n_in) < 0) return -1;
  const ir_type *a = ir_in(g, n, 0), *w = ir_in(g, n, 1), *bias = ir_in(g, n, 2);
  int r = a->shape.rank;
  if (r < 1 || w->shape.rank != 2 || bias->shape.rank != 1 ||
      !ir_dims_compatible(a->shape.d[r - 1], w->shape.d[0]) ||
      !ir_dims_compatible(w->shape.d[1], bias->shape.d[0])) {
    char ba[IR_SHAPE_STR_CAP], bw[IR_SHAPE_STR_CAP], bb[IR_SHAPE_STR_CAP];
    return ir_fail(g, n, RLX_ERR_SHAPE, "a %s, w %s, bias %s are not [..., K], [K, N], [N]",
                   ir_shape_str(g, &a->shape, ba, sizeof ba), ir_shape_str(g, &w->shape, bw, sizeof bw),
                   ir_shape_str(g, &bias->shape, bb, sizeof bb));
  }
  n->out[0] = *a;
  n->out[0].shape.d[r - 1] = w->shape.d[1];
  return 0;
}

/* ---------------------------------------------------------------- FusedResidualLN / RmsNorm */

static rlx_node residual_norm(rlx_graph *g, int op, rlx_node x, rlx_node res, rlx_node bias,
                              rlx_node gamma, rlx_node beta, double eps) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.has_bias = bias >= 0;
  a.eps = eps;
  rlx_node with_bias[] = {x, res, bias, gamma, beta}, without[] = {x, res, gamma, beta};
  return bias >= 0 ? ir_add_node(g, op, 5, with_bias, &a) : ir_add_node(g, op, 4, without, &a);
}

rlx_node rlx_fused_residual_ln(rlx_graph *g, rlx_node x, rlx_node res, rlx_node bias,
                               rlx_node gamma, rlx_node beta, double eps) {
  return residual_norm(g, RLX_OP_FusedResidualLN, x, res, bias, gamma, beta, eps);
}

rlx_node rlx_fused_residual_rms_norm(rlx_graph *g, rlx_node x, rlx_node res, rlx_node bias,
                                     rlx_node gamma, rlx_node beta, double eps) {
  return residual_norm(g, RLX_OP_FusedResidualRmsNorm, x, res, bias, gamma, beta, eps);
}

/* Norm(x + res [+ bias]) over the last axis (LayerNorm or RmsNorm with
 * axis -1), then * gamma + beta. Inputs (x, res, [bias,] gamma, beta):
 * 5 exactly when has_bias (RLX_ERR_INVALID otherwise); x and res have one
 * shape (rank >= 1, no broadcasting); bias, gamma, beta are [last dim];
 * one float dtype. The sum is not rounded to the dtype before the norm.
 * eps finite and >= 0. */
static int infer_residual_norm(rlx_graph *g, ir_node *n) {
  if (n->n_in != 4 + (n->a.has_bias != 0))
    return ir_fail(g, n, RLX_ERR_INVALID, "has_bias=%s needs %d inputs, got %d",
                   n->a.has_bias ? "true" : "false", n->a.has_bias ? 5 : 4, n->n_in);
  if (!(n->a.eps >= 0) || isinf(n->a.eps))
    return ir_fail(g, n, RLX_ERR_INVALID, "eps %g must be finite and >= 0", n->a.eps);
  if (ir_require_float_inputs(g, n, n->n_in) < 0) return -1;
  const ir_type *x = ir_in(g, n, 0), *res = ir_in(g, n, 1);
  char bx[IR_SHAPE_STR_CAP], bs[IR_SHAPE_STR_CAP];
  if (x->shape.rank < 1 || !ir_shapes_compatible(&x->shape, &res->shape))
    return ir_fail(g, n, RLX_ERR_SHAPE, "x %s and res %s must have one shape of rank >= 1",
                   ir_shape_str(g, &x->shape, bx, sizeof bx),
                   ir_shape_str(g, &res->shape, bs, sizeof bs));
  int64_t last = x->shape.d[x->shape.rank - 1];
  static const char *const names[] = {"bias", "gamma", "beta"};
  for (int i = 2; i < n->n_in; i++) {
    const ir_shape *s = &ir_in(g, n, i)->shape;
    if (s->rank != 1 || !ir_dims_compatible(s->d[0], last))
      return ir_fail(g, n, RLX_ERR_SHAPE, "%s %s must be [last dim] of x %s",
                     names[i - n->n_in + 3], ir_shape_str(g, s, bs, sizeof bs),
                     ir_shape_str(g, &x->shape, bx, sizeof bx));
  }
  n->out[0] = *x;
  return 0;
}

int ir_infer_FusedResidualLN(rlx_graph *g, ir_node *n) { return infer_residual_norm(g, n); }
int ir_infer_FusedResidualRmsNorm(rlx_graph *g, ir_node *n) { return infer_residual_norm(g, n); }

/* ---------------------------------------------------------------- FusedSwiGLU */

rlx_node rlx_fused_swiglu(rlx_graph *g, rlx_node x, int cast_to) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.cast_to = cast_to;
  rlx_node in[] = {x};
  return ir_add_node(g, RLX_OP_FusedSwiGLU, 1, in, &a);
}

/* silu(x[..., :n]) * x[..., n:] for float x [..., 2n] (rank >= 1; an odd
 * last dim is RLX_ERR_SHAPE). Output [..., n] in cast_to (a float dtype;
 * another dtype is RLX_ERR_DTYPE) or x's dtype when cast_to is none (-1).
 * Computed in double and rounded once to the output dtype. */
int ir_infer_FusedSwiGLU(rlx_graph *g, ir_node *n) {
  const ir_type *x = ir_in(g, n, 0);
  int64_t to = n->a.cast_to;
  if (to != -1 && !ir_dtype_valid(to))
    return ir_fail(g, n, RLX_ERR_INVALID, "cast_to %lld is not a dtype", (long long)to);
  if (to != -1 && !ir_is_float(to))
    return ir_fail(g, n, RLX_ERR_DTYPE, "cast_to %s is not a float type", rlx_dtype_name((rlx_dtype)to));
  if (!ir_is_float(x->dtype))
    return ir_fail(g, n, RLX_ERR_DTYPE, "x dtype %s is not a float type", rlx_dtype_name(x->dtype));
  int r = x->shape.rank;
  char bx[IR_SHAPE_STR_CAP];
  int64_t last = r ? ir_dim_resolve(g, x->shape.d[r - 1]) : 0;
  if (r < 1 || (!ir_dim_is_sym(last) && last % 2 != 0))
    return ir_fail(g, n, RLX_ERR_SHAPE, "x %s must be [..., 2n] (rank >= 1, even last dim)",
                   ir_shape_str(g, &x->shape, bx, sizeof bx));
  n->out[0] = *x;
  n->out[0].dtype = to == -1 ? x->dtype : (rlx_dtype)to;
  n->out[0].shape.d[r - 1] = ir_dim_is_sym(last) ? ir_dim_anon(g) : last / 2;
  return 0;
}

/* ---------------------------------------------------------------- regions */

/* Copies steps into heap attrs; n_steps <= 0 or NULL steps leave an empty
 * chain, which inference rejects. Returns 0 on NOMEM (recorded in g). */
static int chain_attr(rlx_graph *g, int op, int n_steps, const rlx_region_step *steps, ir_attrs *a) {
  if (n_steps <= 0 || !steps) return 1;
  if (!(a->chain.s = malloc((size_t)n_steps * sizeof *steps))) {
    ir_fail(g, NULL, RLX_ERR_NOMEM, "%s: out of memory", ir_ops[op].name);
    return 0;
  }
  memcpy(a->chain.s, steps, (size_t)n_steps * sizeof *steps);
  a->chain.n = n_steps;
  return 1;
}

rlx_node rlx_elementwise_region(rlx_graph *g, int n_in, const rlx_node *ins, int n_steps,
                                const rlx_region_step *steps, rlx_prologue prologue) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.prologue = prologue;
  if (g && !g->err && !chain_attr(g, RLX_OP_ElementwiseRegion, n_steps, steps, &a)) return -1;
  return ir_add_node(g, RLX_OP_ElementwiseRegion, n_in, ins, &a);
}

rlx_node rlx_batch_elementwise_region(rlx_graph *g, int n_in, const rlx_node *ins,
                                      int num_batch_inputs, int n_steps,
                                      const rlx_region_step *steps, rlx_prologue prologue) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.num_batch_inputs = num_batch_inputs;
  a.prologue = prologue;
  if (g && !g->err && !chain_attr(g, RLX_OP_BatchElementwiseRegion, n_steps, steps, &a)) return -1;
  return ir_add_node(g, RLX_OP_BatchElementwiseRegion, n_in, ins, &a);
}

/* Type of chain operand k of step `step` (see infer_chain); NULL after
 * recording the error. */
static const ir_type *chain_operand(rlx_graph *g, ir_node *n, int step, int k, const ir_type *ins,
                                    int n_ins, const ir_type *steps) {
  if (k >= 0 && k < n_ins) return &ins[k];
  if (k < 0 && -(int64_t)k - 1 < step) return &steps[-(int64_t)k - 1];
  if (k >= 0)
    ir_fail(g, n, RLX_ERR_INVALID, "step %d reads region input i%d, but the region has %d inputs",
            step, k, n_ins);
  else
    ir_fail(g, n, RLX_ERR_INVALID, "step %d reads step s%lld, which is not an earlier step", step,
            -(long long)k - 1);
  return NULL;
}

/* The activations that take I8/U8/I32/I64 (as the Activation op). */
static int act_takes_int(int act) {
  return act == RLX_ACT_NEG || act == RLX_ACT_ABS || act == RLX_ACT_SIGN ||
         act == RLX_ACT_SQUARE || act == RLX_ACT_RELU;
}

/* Type of one step from its operand types (tb NULL for act and cast), with
 * the dtype rules of the primitive op it stands for (infer_elementwise.c):
 * act as Activation (floats; neg, abs, sign, square, relu also on
 * I8/U8/I32/I64; not none; leaky_relu alpha finite), bin as Binary (one
 * dtype; BOOL only max and min), cmp as Compare (one dtype, -> BOOL), cast
 * as Cast (to any plain dtype). Binary steps broadcast. */
static int infer_step(rlx_graph *g, ir_node *n, int i, const rlx_region_step *s,
                      const ir_type *ta, const ir_type *tb, ir_type *out) {
  *out = *ta;
  rlx_dtype t = ta->dtype;
  if (tb && tb->dtype != t)
    return ir_fail(g, n, RLX_ERR_DTYPE, "step %d operands have dtypes %s and %s (no implicit promotion)",
                   i, rlx_dtype_name(t), rlx_dtype_name(tb->dtype));
  switch (s->kind) {
  case RLX_STEP_ACT:
    if (s->op <= RLX_ACT_NONE || s->op >= RLX_ACT_COUNT)
      return ir_fail(g, n, RLX_ERR_INVALID, "step %d: act %s is not an activation", i,
                     s->op == RLX_ACT_NONE ? "none" : "(out of range)");
    if (s->op == RLX_ACT_LEAKY_RELU && !isfinite(s->alpha))
      return ir_fail(g, n, RLX_ERR_INVALID, "step %d: leaky_relu alpha must be finite, got %g", i,
                     s->alpha);
    if (!ir_is_float(t) && !(ir_is_int(t) && act_takes_int(s->op)))
      return ir_fail(g, n, RLX_ERR_DTYPE, "step %d: act.%s does not take %s", i,
                     ir_act_names[s->op], rlx_dtype_name(t));
    return 0;
  case RLX_STEP_CAST:
    if (!is_plain(s->to))
      return ir_fail(g, n, RLX_ERR_DTYPE, "step %d: cast to %s (plain dtypes only)", i,
                     rlx_dtype_name(s->to));
    out->dtype = s->to;
    return 0;
  case RLX_STEP_BIN:
    if (s->op < 0 || s->op >= RLX_BIN_COUNT)
      return ir_fail(g, n, RLX_ERR_INVALID, "step %d: bin op %d unknown", i, s->op);
    if (t == RLX_BOOL && s->op != RLX_BIN_MAX && s->op != RLX_BIN_MIN)
      return ir_fail(g, n, RLX_ERR_DTYPE, "step %d: bin.%s does not take bool (only max, min)", i,
                     ir_binop_names[s->op]);
    break;
  case RLX_STEP_CMP:
    if (s->op < 0 || s->op >= RLX_CMP_COUNT)
      return ir_fail(g, n, RLX_ERR_INVALID, "step %d: cmp op %d unknown", i, s->op);
    out->dtype = RLX_BOOL;
    break;
  default:
    return ir_fail(g, n, RLX_ERR_INVALID, "step %d has unknown kind %d", i, (int)s->kind);
  }
  if (!ir_broadcast(g, &ta->shape, &tb->shape, &out->shape)) {
    char ba[IR_SHAPE_STR_CAP], bb[IR_SHAPE_STR_CAP];
    return ir_fail(g, n, RLX_ERR_SHAPE, "step %d: operand shapes %s and %s do not broadcast", i,
                   ir_shape_str(g, &ta->shape, ba, sizeof ba), ir_shape_str(g, &tb->shape, bb, sizeof bb));
  }
  return 0;
}

/* Types every step of n's chain over the region inputs `ins` (typed by
 * infer_step) and gives the last step's type in *out. Operands are region
 * inputs (k >= 0: ik) or earlier steps (k < 0: step -k-1); at least one
 * step. The fields a step kind does not use (b of act and cast, op of
 * cast, to of everything but cast, alpha of everything but act leaky_relu)
 * are normalized to 0, so equal chains compare and hash equal. */
static int infer_chain(rlx_graph *g, ir_node *n, const ir_type *ins, int n_ins, ir_type *out) {
  ir_chain *c = &n->a.chain;
  if (c->n < 1 || !c->s) return ir_fail(g, n, RLX_ERR_INVALID, "chain has no steps");
  ir_type *st = malloc((size_t)c->n * sizeof *st);
  if (!st) return ir_fail(g, n, RLX_ERR_NOMEM, "out of memory");
  int rc = 0;
  for (int i = 0; i < c->n && rc == 0; i++) {
    rlx_region_step *s = &c->s[i];
    int binary = s->kind == RLX_STEP_BIN || s->kind == RLX_STEP_CMP;
    if (!binary) s->b = 0;
    if (s->kind != RLX_STEP_CAST) s->to = (rlx_dtype)0;
    if (s->kind == RLX_STEP_CAST) s->op = 0;
    if (!(s->kind == RLX_STEP_ACT && s->op == RLX_ACT_LEAKY_RELU)) s->alpha = 0;
    const ir_type *ta = chain_operand(g, n, i, s->a, ins, n_ins, st), *tb = NULL;
    if (!ta || (binary && !(tb = chain_operand(g, n, i, s->b, ins, n_ins, st))))
      rc = -1;
    else
      rc = infer_step(g, n, i, s, ta, tb, &st[i]);
  }
  if (rc == 0) *out = st[c->n - 1];
  free(st);
  return rc;
}

static int check_region_inputs(rlx_graph *g, ir_node *n) {
  if (n->a.prologue < 0 || n->a.prologue >= RLX_PROLOGUE_COUNT)
    return ir_fail(g, n, RLX_ERR_INVALID, "prologue %lld unknown", (long long)n->a.prologue);
  for (int i = 0; i < n->n_in; i++)
    if (!is_plain(ir_in(g, n, i)->dtype))
      return ir_fail(g, n, RLX_ERR_DTYPE, "input %d dtype %s is not a plain dtype", i,
                     rlx_dtype_name(ir_in(g, n, i)->dtype));
  return 0;
}

/* ElementwiseRegion{chain, prologue}(in_0..in_{N-1}), N >= 1: region input
 * k is in_k, except that prologue resize_nearest_2x first turns in_0
 * [N, C, H, W] into [N, C, 2H, 2W]. The chain is typed by infer_chain; the
 * output is the last step. Each step's value is rounded to its own dtype
 * (as the primitive ops would store it), so a region computes what its
 * chain of primitive ops computes. */
int ir_infer_ElementwiseRegion(rlx_graph *g, ir_node *n) {
  if (check_region_inputs(g, n) < 0) return -1;
  ir_type *ins = malloc((size_t)n->n_in * sizeof *ins);
  if (!ins) return ir_fail(g, n, RLX_ERR_NOMEM, "out of memory");
  for (int i = 0; i < n->n_in; i++) ins[i] = *ir_in(g, n, i);
  int rc = 0;
  if (n->a.prologue == RLX_PROLOGUE_RESIZE_NEAREST_2X) rc = resize2x_shape(g, n, &ins[0].shape, "input 0");
  if (rc == 0) rc = infer_chain(g, n, ins, n->n_in, &n->out[0]);
  free(ins);
  return rc;
}

/* BatchElementwiseRegion{chain, num_batch_inputs = nb, prologue}
 * (in_0..in_{N-1}), 1 <= nb <= N (RLX_ERR_INVALID otherwise):
 * in_0..in_{nb-1} are the batch inputs, in_nb..in_{N-1} are shared. For each
 * batch input b in order, the chain runs as one ElementwiseRegion with the
 * N - nb + 1 region inputs (in_b, in_nb, ..., in_{N-1}): i0 is batch input b
 * (the prologue, if any, applies to it, never to shared inputs) and i1.. are
 * the shared inputs. The nb results must agree in dtype (RLX_ERR_DTYPE), in
 * rank (>= 1) and in every dim but dim 0 (RLX_ERR_SHAPE); the output is their
 * concatenation along axis 0 (dim 0 = sum of the results' dim 0). */
int ir_infer_BatchElementwiseRegion(rlx_graph *g, ir_node *n) {
  if (check_region_inputs(g, n) < 0) return -1;
  int64_t nb = n->a.num_batch_inputs;
  if (nb < 1 || nb > n->n_in)
    return ir_fail(g, n, RLX_ERR_INVALID, "num_batch_inputs %lld out of range [1, %d]", (long long)nb,
                   n->n_in);
  int n_ins = n->n_in - (int)nb + 1;
  ir_type *ins = malloc((size_t)n_ins * sizeof *ins);
  if (!ins) return ir_fail(g, n, RLX_ERR_NOMEM, "out of memory");
  for (int i = 1; i < n_ins; i++) ins[i] = *ir_in(g, n, (int)nb + i - 1);
  int rc = 0;
  ir_type *out = &n->out[0];
  for (int b = 0; b < nb && rc == 0; b++) {
    ir_type r;
    ins[0] = *ir_in(g, n, b);
    if (n->a.prologue == RLX_PROLOGUE_RESIZE_NEAREST_2X &&
        (rc = resize2x_shape(g, n, &ins[0].shape, "batch input")) < 0)
      break;
    if ((rc = infer_chain(g, n, ins, n_ins, &r)) < 0) break;
    char br[IR_SHAPE_STR_CAP], bo[IR_SHAPE_STR_CAP];
    if (r.shape.rank < 1) {
      rc = ir_fail(g, n, RLX_ERR_SHAPE, "result %s of batch input %d has no axis 0 to concatenate on",
                   ir_shape_str(g, &r.shape, br, sizeof br), b);
      break;
    }
    if (b == 0) {
      *out = r;
      continue;
    }
    if (r.dtype != out->dtype) {
      rc = ir_fail(g, n, RLX_ERR_DTYPE, "result of batch input %d is %s, result of batch input 0 is %s",
                   b, rlx_dtype_name(r.dtype), rlx_dtype_name(out->dtype));
      break;
    }
    int agree = r.shape.rank == out->shape.rank;
    for (int i = 1; agree && i < r.shape.rank; i++) agree = ir_dims_compatible(r.shape.d[i], out->shape.d[i]);
    if (!agree) {
      rc = ir_fail(g, n, RLX_ERR_SHAPE, "result %s of batch input %d does not concatenate on axis 0 with %s",
                   ir_shape_str(g, &r.shape, br, sizeof br), b, ir_shape_str(g, &out->shape, bo, sizeof bo));
      break;
    }
    out->shape.d[0] = ir_dim_add(g, out->shape.d[0], r.shape.d[0]);
  }
  free(ins);
  return rc;
}

/* ---------------------------------------------------------------- TransformRegion */

rlx_node rlx_transform_region(rlx_graph *g, rlx_node x, int n, const int *transforms) {
  if (n < 1 || n > RLX_MAX_RANK || !transforms)
    return fail_unbuilt(g, RLX_OP_TransformRegion, "needs 1 to 8 transforms and a non-NULL array");
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.transforms.n = n;
  for (int i = 0; i < n; i++) a.transforms.v[i] = transforms[i];
  rlx_node in[] = {x};
  return ir_add_node(g, RLX_OP_TransformRegion, 1, in, &a);
}

/* Applies the transforms to x in order: 1 to RLX_MAX_RANK entries, each
 * resize_nearest_2x (x [N, C, H, W], any plain dtype); none or an unknown
 * value is RLX_ERR_INVALID. */
int ir_infer_TransformRegion(rlx_graph *g, ir_node *n) {
  const ir_type *x = ir_in(g, n, 0);
  const ir_ilist *t = &n->a.transforms;
  if (t->n < 1 || t->n > RLX_MAX_RANK)
    return ir_fail(g, n, RLX_ERR_INVALID, "%d transforms (1 to %d)", t->n, RLX_MAX_RANK);
  if (!is_plain(x->dtype))
    return ir_fail(g, n, RLX_ERR_DTYPE, "x dtype %s is not a plain dtype", rlx_dtype_name(x->dtype));
  n->out[0] = *x;
  for (int i = 0; i < t->n; i++) {
    if (t->v[i] != RLX_PROLOGUE_RESIZE_NEAREST_2X)
      return ir_fail(g, n, RLX_ERR_INVALID, "transform %d is %s, not resize_nearest_2x", i,
                     t->v[i] == RLX_PROLOGUE_NONE ? "none" : "(out of range)");
    if (resize2x_shape(g, n, &n->out[0].shape, "x") < 0) return -1;
  }
  return 0;
}

/* ---------------------------------------------------------------- FusedAttentionBlock */

rlx_node rlx_fused_attention_block(rlx_graph *g, rlx_node x, rlx_node wq, rlx_node wk,
                                   rlx_node wv, rlx_node wo, rlx_node cos, rlx_node sin,
                                   const rlx_attention_desc *att, const rlx_rope_desc *rope) {
  int tables = cos >= 0 || sin >= 0;
  if (!att || (tables && !rope))
    return fail_unbuilt(g, RLX_OP_FusedAttentionBlock, "attention desc is NULL, or rope desc is NULL with tables");
  if (tables && rope->head_dim != 0 && rope->head_dim != att->head_dim)
    return fail_unbuilt(g, RLX_OP_FusedAttentionBlock, "rope head_dim differs from the attention head_dim");
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.num_heads = att->num_heads;
  a.num_kv_heads = att->num_kv_heads;
  a.head_dim = att->head_dim;
  a.mask = att->mask_kind;
  a.window = att->window;
  a.score_scale = att->score_scale;
  a.softcap = att->softcap;
  if (tables) {
    a.n_rot = rope->n_rot;
    a.rope_mode = rope->mode;
    a.base = rope->base;
    a.scale = rope->scale;
  }
  /* A missing half of the tables leaves 6 inputs, which inference rejects. */
  rlx_node in[7] = {x, wq, wk, wv, wo};
  int n_in = 5;
  if (cos >= 0) in[n_in++] = cos;
  if (sin >= 0) in[n_in++] = sin;
  return ir_add_node(g, RLX_OP_FusedAttentionBlock, n_in, in, &a);
}

/* Largest num_heads / head_dim accepted (as Attention's). */
#define FUSED_ATTN_MAX (1 << 24)

/* One self-attention block over x [B, S, hidden]:
 *   q = x @ wq, k = x @ wk, v = x @ wv   (wq [hidden, H*D], wk and wv
 *       [hidden, KVH*D]; q, k, v in Attention's rank-3 [B, S, heads*D] layout)
 *   with (cos, sin): Rope in its cos/sin form (n_rot, mode) on q and on k
 *   a = Attention(q, k, v) with num_heads H, num_kv_heads KVH, head_dim D,
 *       mask, window, score_scale, softcap, key length T = S
 *   out = a @ wo   (wo [H*D, E]; E is usually hidden but need not be)
 * Output [B, S, E]. Attributes as Attention's: num_kv_heads 0 means H,
 * head_dim 0 is taken from wq ([hidden, H*D]); mask none, causal or
 * sliding_window (custom is RLX_ERR_INVALID: the block has no mask input);
 * score_scale and softcap finite, <= 0 meaning 1/sqrt(D) and off. Rope
 * tables as Rope's: cos and sin have one shape, [S, n_rot/2] or
 * [B, S, n_rot/2], and one dtype, F32 or x's; n_rot 0 means D, else even in
 * (0, D]; base and scale are unused (the tables hold the angles), and
 * without tables n_rot and mode are unused too. x and the four weights
 * share one float dtype. Computed in double, rounded once to the output. */
int ir_infer_FusedAttentionBlock(rlx_graph *g, ir_node *n) {
  ir_attrs *a = &n->a;
  if (n->n_in == 6)
    return ir_fail(g, n, RLX_ERR_INVALID, "takes both rope tables (cos and sin) or neither");
  const ir_type *x = ir_in(g, n, 0);
  for (int i = 1; i < 5; i++)
    if (ir_in(g, n, i)->dtype != x->dtype || !ir_is_float(x->dtype))
      return ir_fail(g, n, RLX_ERR_DTYPE, "x and the weights must share one float dtype, got %s and %s",
                     rlx_dtype_name(x->dtype), rlx_dtype_name(ir_in(g, n, i)->dtype));
  if (a->mask < 0 || a->mask >= RLX_MASK_COUNT || a->mask == RLX_MASK_CUSTOM)
    return ir_fail(g, n, RLX_ERR_INVALID, "mask %s: want none, causal or sliding_window (no mask input)",
                   a->mask == RLX_MASK_CUSTOM ? "custom" : "(out of range)");
  if (a->mask == RLX_MASK_SLIDING_WINDOW && a->window <= 0)
    return ir_fail(g, n, RLX_ERR_INVALID, "sliding_window needs window > 0, got %lld",
                   (long long)a->window);
  if (!isfinite(a->score_scale) || !isfinite(a->softcap))
    return ir_fail(g, n, RLX_ERR_INVALID, "score_scale %g and softcap %g must be finite",
                   a->score_scale, a->softcap);
  if (a->num_kv_heads == 0) a->num_kv_heads = a->num_heads;
  if (a->num_heads <= 0 || a->num_kv_heads <= 0 || a->num_heads % a->num_kv_heads)
    return ir_fail(g, n, RLX_ERR_INVALID, "num_heads %lld must be a positive multiple of num_kv_heads %lld",
                   (long long)a->num_heads, (long long)a->num_kv_heads);
  const ir_shape *wq = &ir_in(g, n, 1)->shape;
  if (a->head_dim == 0 && wq->rank == 2 && !ir_dim_is_sym(wq->d[1]) && wq->d[1] % a->num_heads == 0)
    a->head_dim = wq->d[1] / a->num_heads;
  if (a->head_dim <= 0 || a->num_heads > FUSED_ATTN_MAX || a->head_dim > FUSED_ATTN_MAX)
    return ir_fail(g, n, RLX_ERR_INVALID, "num_heads %lld and head_dim %lld must be in [1, %d] "
                   "(head_dim 0: taken from wq)", (long long)a->num_heads, (long long)a->head_dim,
                   FUSED_ATTN_MAX);
  char b0[IR_SHAPE_STR_CAP], b1[IR_SHAPE_STR_CAP];
  if (x->shape.rank != 3)
    return ir_fail(g, n, RLX_ERR_SHAPE, "x %s must be [B, S, hidden]",
                   ir_shape_str(g, &x->shape, b0, sizeof b0));
  int64_t hidden = x->shape.d[2], qd = a->num_heads * a->head_dim, kvd = a->num_kv_heads * a->head_dim;
  static const char *const wnames[] = {"wq", "wk", "wv", "wo"};
  for (int i = 1; i < 5; i++) {
    const ir_shape *s = &ir_in(g, n, i)->shape;
    int64_t rows = i == 4 ? qd : hidden, cols = i == 1 ? qd : kvd;
    if (s->rank != 2 || !ir_dims_compatible(s->d[0], rows) || (i < 4 && !ir_dims_compatible(s->d[1], cols)))
      return ir_fail(g, n, RLX_ERR_SHAPE, "%s %s does not fit x %s with num_heads %lld, num_kv_heads %lld, "
                     "head_dim %lld", wnames[i - 1], ir_shape_str(g, s, b1, sizeof b1),
                     ir_shape_str(g, &x->shape, b0, sizeof b0), (long long)a->num_heads,
                     (long long)a->num_kv_heads, (long long)a->head_dim);
  }
  if (n->n_in == 7) {
    if (a->rope_mode < 0 || a->rope_mode >= RLX_ROPE_COUNT)
      return ir_fail(g, n, RLX_ERR_INVALID, "rope mode %lld unknown", (long long)a->rope_mode);
    if (a->n_rot == 0) a->n_rot = a->head_dim;
    if (a->n_rot < 0 || a->n_rot % 2 || a->n_rot > a->head_dim)
      return ir_fail(g, n, RLX_ERR_INVALID, "n_rot %lld must be even and in (0, head_dim %lld]",
                     (long long)a->n_rot, (long long)a->head_dim);
    const ir_type *c = ir_in(g, n, 5), *s = ir_in(g, n, 6);
    if (c->dtype != s->dtype || (c->dtype != x->dtype && c->dtype != RLX_F32))
      return ir_fail(g, n, RLX_ERR_DTYPE, "cos and sin must both be f32 or x's dtype %s, got %s and %s",
                     rlx_dtype_name(x->dtype), rlx_dtype_name(c->dtype), rlx_dtype_name(s->dtype));
    const ir_shape *cs = &c->shape;
    int lead = cs->rank - 2;
    int fits = (cs->rank == 2 || cs->rank == 3) && ir_shape_eq(cs, &s->shape) &&
               ir_dims_compatible(cs->d[lead], x->shape.d[1]) &&
               ir_dims_compatible(cs->d[lead + 1], a->n_rot / 2) &&
               (cs->rank == 2 || ir_dims_compatible(cs->d[0], x->shape.d[0]));
    if (!fits)
      return ir_fail(g, n, RLX_ERR_SHAPE, "cos %s and sin %s must both be [S, n_rot/2] or "
                     "[B, S, n_rot/2] for x %s and n_rot %lld",
                     ir_shape_str(g, cs, b1, sizeof b1),
                     ir_shape_str(g, &s->shape, (char[IR_SHAPE_STR_CAP]){0}, IR_SHAPE_STR_CAP),
                     ir_shape_str(g, &x->shape, b0, sizeof b0), (long long)a->n_rot);
  }
  n->out[0] = *x;
  n->out[0].shape.d[2] = ir_in(g, n, 4)->shape.d[1];
  return 0;
}
