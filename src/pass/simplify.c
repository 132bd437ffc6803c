/* simplify.c — algebraic simplification: rewrites that give exactly the
 * value of the original (dtype and shape included), never "close enough".
 *
 *   x + 0, 0 + x, x - 0, x * 1, 1 * x, x / 1   -> x   (the constant all 0 / 1
 *       and the result the shape of x: an x + 0 that broadcasts x to a
 *       bigger shape stays. Floats keep signed zeros exact, as compilers do
 *       without fast-math: x + 0 needs the zero to be -0 (-0 + +0 is +0,
 *       which 1/x tells from -0), x - 0 needs +0.)
 *   Cast to x's own dtype -> x; Cast(Cast(x, T1), T2) -> Cast(x, T2) when T1
 *       holds every value of x's dtype exactly (so the inner cast changes
 *       no value; a cast's result depends only on the value it is given)
 *   Transpose by the identity -> x; Transpose(Transpose(x, p), q) -> one
 *       Transpose by the composed permutation (or x)
 *   Reshape to x's shape -> x; Reshape(Reshape(x, d1), d2) -> Reshape(x, d2)
 *       (the element count is the same, so d2 means the same on x)
 *   Expand to x's shape -> x; Expand(Expand(x, d1), d2) -> Expand(x, d2)
 *   Narrow / Slice (steps 1) that keep the whole shape, Pad by nothing,
 *       Concat of one input, Clamp to [-inf, inf], Where(c, a, a) of a's
 *       shape, StopGradient (identity when running) -> the input
 *   neg(neg x) -> x; relu(relu x) -> relu x; abs(abs x), abs(neg x) -> abs x
 *
 * Nodes are rewritten in order, so a rewrite sees its inputs already
 * simplified and a chain collapses in one sweep (three transposes become
 * one). Nodes left unread by a rewrite are dropped by the next DCE.
 * *changed counts the nodes rewritten. */
#include "pass.h"

#include <stdlib.h>
#include <string.h>

/* Element i of a constant of a plain dtype, as a double. */
static double const_elem(const ir_node *c, int64_t i) {
  const unsigned char *p = c->a.data.p;
  size_t sz = (size_t)ir_dtypes[c->out[0].dtype].size;
  p += (size_t)i * sz;
  switch (c->out[0].dtype) {
  case RLX_F32: { float v; memcpy(&v, p, sizeof v); return v; }
  case RLX_F64: { double v; memcpy(&v, p, sizeof v); return v; }
  case RLX_F16: { uint16_t v; memcpy(&v, p, sizeof v); return ir_f16_to_f32(v); }
  case RLX_BF16: { uint16_t v; memcpy(&v, p, sizeof v); return ir_bf16_to_f32(v); }
  case RLX_I8: return (int8_t)*p;
  case RLX_U8: case RLX_BOOL: return *p;
  case RLX_I32: { int32_t v; memcpy(&v, p, sizeof v); return v; }
  case RLX_I64: { int64_t v; memcpy(&v, p, sizeof v); return (double)v; }
  default: return NAN;
  }
}

/* Is dst node c a non-empty constant whose every element is v, with v's
 * sign when v is a zero of a float dtype? */
static int const_all(const rlx_graph *g, rlx_node id, double v) {
  const ir_node *c = &g->nodes[id];
  if (c->op != RLX_OP_Constant || ir_is_block(c->out[0].dtype)) return 0;
  int64_t numel = ir_numel(&c->out[0].shape);
  if (numel <= 0) return 0;
  int check_sign = v == 0 && ir_is_float(c->out[0].dtype);
  for (int64_t i = 0; i < numel; i++) {
    double e = const_elem(c, i);
    if (!(e == v) || (check_sign && signbit(e) != signbit(v))) return 0;
  }
  return 1;
}

/* Does dtype `wide` hold every value of dtype `t` exactly? */
static int holds_exactly(rlx_dtype wide, rlx_dtype t) {
  if (wide == t || t == RLX_BOOL) return 1;
  switch (t) {
  case RLX_I8: /* |v| <= 128: within every float's exact integers */
    return wide == RLX_I32 || wide == RLX_I64 || ir_is_float(wide);
  case RLX_U8: /* 0..255: 8 significant bits, as many as bf16 has */
    return wide == RLX_I32 || wide == RLX_I64 || ir_is_float(wide);
  case RLX_I32: return wide == RLX_I64 || wide == RLX_F64;
  case RLX_F16: case RLX_BF16: return wide == RLX_F32 || wide == RLX_F64;
  case RLX_F32: return wide == RLX_F64;
  default: return 0;
  }
}

static int shape_same(const ir_type *a, const ir_type *b) { return ir_shape_eq(&a->shape, &b->shape); }

/* x op c -> x and c op x -> x for the identities of Binary. */
static rlx_node simplify_binary(const rlx_graph *g, const rlx_graph *src, const ir_node *n,
                                const rlx_node *in) {
  const ir_type *out = &n->out[0];
  int left_x = shape_same(out, ir_in(src, n, 0)), right_x = shape_same(out, ir_in(src, n, 1));
  switch (n->a.binop) {
  case RLX_BIN_ADD: /* x + -0 is x for every x; integers have one zero */
    if (left_x && const_all(g, in[1], -0.0)) return in[0];
    if (right_x && const_all(g, in[0], -0.0)) return in[1];
    break;
  case RLX_BIN_SUB: /* x - +0 is x for every x */
    if (left_x && const_all(g, in[1], 0.0)) return in[0];
    break;
  case RLX_BIN_MUL:
    if (left_x && const_all(g, in[1], 1)) return in[0];
    if (right_x && const_all(g, in[0], 1)) return in[1];
    break;
  case RLX_BIN_DIV:
    if (left_x && const_all(g, in[1], 1)) return in[0];
    break;
  default: break;
  }
  return -1;
}

static int is_identity_perm(const ir_ilist *p) {
  for (int i = 0; i < p->n; i++)
    if (p->v[i] != i) return 0;
  return 1;
}

static rlx_node simplify_transpose(rlx_graph *g, const ir_node *n, const rlx_node *in) {
  if (is_identity_perm(&n->a.perm)) return in[0];
  const ir_node *inner = &g->nodes[in[0]];
  if (inner->op != RLX_OP_Transpose) return -1;
  /* y = transpose(u, p): y.d[i] = u.d[p[i]]; z = transpose(y, q): z.d[i] = u.d[p[q[i]]] */
  int64_t perm[RLX_MAX_RANK];
  ir_ilist composed = {n->a.perm.n, {0}};
  for (int i = 0; i < n->a.perm.n; i++) composed.v[i] = perm[i] = inner->a.perm.v[n->a.perm.v[i]];
  rlx_node u = inner->in[0];
  return is_identity_perm(&composed) ? u : rlx_transpose(g, u, composed.n, perm);
}

/* Reshape / Expand: to the input's shape -> input; of the same op -> one. */
static rlx_node simplify_reshape_expand(rlx_graph *g, const rlx_graph *src, const ir_node *n,
                                        const rlx_node *in) {
  if (shape_same(&n->out[0], ir_in(src, n, 0))) return in[0];
  const ir_node *inner = &g->nodes[in[0]];
  if (inner->op != n->op) return -1;
  rlx_node u = inner->in[0];
  if (ir_shape_eq(&n->out[0].shape, &g->nodes[u].out[0].shape)) return u;
  return n->op == RLX_OP_Reshape ? rlx_reshape(g, u, n->a.dims.n, n->a.dims.v)
                                 : rlx_expand(g, u, n->a.dims.n, n->a.dims.v);
}

static rlx_node simplify_cast(rlx_graph *g, const rlx_graph *src, const ir_node *n, const rlx_node *in) {
  rlx_dtype to = (rlx_dtype)n->a.to;
  if (to == ir_in(src, n, 0)->dtype) return in[0];
  const ir_node *inner = &g->nodes[in[0]];
  if (inner->op != RLX_OP_Cast) return -1;
  rlx_node u = inner->in[0];
  rlx_dtype t0 = g->nodes[u].out[0].dtype;
  if (!holds_exactly((rlx_dtype)inner->a.to, t0)) return -1;
  return to == t0 ? u : rlx_cast(g, u, to);
}

static rlx_node simplify_activation(rlx_graph *g, const ir_node *n, const rlx_node *in) {
  const ir_node *inner = &g->nodes[in[0]];
  if (inner->op != RLX_OP_Activation) return -1;
  int64_t outer_act = n->a.act, inner_act = inner->a.act;
  if (outer_act == RLX_ACT_NEG && inner_act == RLX_ACT_NEG) return inner->in[0];
  if ((outer_act == RLX_ACT_RELU || outer_act == RLX_ACT_ABS) && inner_act == outer_act) return in[0];
  if (outer_act == RLX_ACT_ABS && inner_act == RLX_ACT_NEG)
    return rlx_activation(g, RLX_ACT_ABS, inner->in[0]);
  return -1;
}

static int all_zero(const ir_ilist *l) {
  for (int i = 0; i < l->n; i++)
    if (l->v[i] != 0) return 0;
  return 1;
}

static int all_one(const ir_ilist *l) {
  for (int i = 0; i < l->n; i++)
    if (l->v[i] != 1) return 0;
  return 1;
}

/* The dst node that replaces src node n (inputs mapped to in), or -1 to
 * copy n as it is. New nodes are built in g. */
static rlx_node simplify_node(rlx_graph *g, const rlx_graph *src, const ir_node *n, const rlx_node *in) {
  const ir_type *out = &n->out[0];
  switch (n->op) {
  case RLX_OP_Binary: return simplify_binary(g, src, n, in);
  case RLX_OP_Cast: return simplify_cast(g, src, n, in);
  case RLX_OP_Transpose: return simplify_transpose(g, n, in);
  case RLX_OP_Reshape: case RLX_OP_Expand: return simplify_reshape_expand(g, src, n, in);
  case RLX_OP_Activation: return simplify_activation(g, n, in);
  case RLX_OP_Narrow: return shape_same(out, ir_in(src, n, 0)) ? in[0] : -1;
  case RLX_OP_Slice: return all_one(&n->a.steps) && shape_same(out, ir_in(src, n, 0)) ? in[0] : -1;
  case RLX_OP_Pad: return all_zero(&n->a.before) && all_zero(&n->a.after) ? in[0] : -1;
  case RLX_OP_Concat: return n->n_in == 1 ? in[0] : -1;
  case RLX_OP_Clamp: return isinf(n->a.lo) && n->a.lo < 0 && isinf(n->a.hi) && n->a.hi > 0 ? in[0] : -1;
  case RLX_OP_Where: return in[1] == in[2] && shape_same(out, ir_in(src, n, 1)) ? in[1] : -1;
  case RLX_OP_StopGradient: return in[0];
  default: return -1;
  }
}

rlx_status pass_simplify(const rlx_graph *in, const pass_options *opt, rlx_graph **out, int *changed) {
  (void)opt;
  *out = NULL;
  *changed = 0;
  rlx_node *map = malloc(((size_t)in->n_nodes + 1) * sizeof *map);
  rlx_graph *g = ir_graph_new_like(in);
  if (!map || !g) {
    free(map);
    rlx_graph_free(g);
    return rlx_set_error(RLX_ERR_NOMEM, "simplify: out of memory");
  }
  rlx_node small[8];
  for (int i = 0; i < in->n_nodes && !g->err; i++) {
    const ir_node *n = &in->nodes[i];
    rlx_node *ins = n->n_in <= 8 ? small : malloc((size_t)n->n_in * sizeof *ins);
    if (!ins) {
      ir_fail(g, NULL, RLX_ERR_NOMEM, "simplify: out of memory");
      break;
    }
    for (int k = 0; k < n->n_in; k++) ins[k] = map[n->in[k]];
    rlx_node r = ir_ops[n->op].category == RLX_CAT_LEAF ? -1 : simplify_node(g, in, n, ins);
    if (r >= 0) (*changed)++;
    else if (!g->err) r = ir_copy_node(g, in, i, ins);
    map[i] = r;
    if (ins != small) free(ins);
  }
  rlx_status st = g->err ? rlx_graph_status(g) : ir_set_outputs_mapped(g, in, map);
  free(map);
  if (st) {
    rlx_graph_free(g);
    return st;
  }
  *out = g;
  return RLX_OK;
}
