/* autodiff.h — internals of reverse mode (rlx_grad, grad.c) and forward
 * mode (rlx_jvp, jvp.c) over rlx graphs.
 *
 * Both modes build one new graph: a copy of the forward nodes followed by
 * the derivative nodes, which are ordinary ops (the result is compiled,
 * fused and memory-planned like any graph). A derivative is a node id, or
 * -1 for an exact zero (nothing is built for it).
 *
 * Rules. Every op whose ops.def row says differentiable = 1 has a
 * vector-Jacobian rule ad_vjp_<Id> (vjp_*.c) and a Jacobian-vector rule
 * ad_jvp_<Id> (jvp_*.c); both tables below are generated from ops.def, so
 * a missing rule fails the link. Ops with differentiable = 0 have none:
 * no gradient flows through them (StopGradient, Compare, ArgMax, ...).
 * A rule builds the derivative with the ops of ops.def; ops whose
 * derivative is easiest said through their meaning (the normalizers,
 * attention, pooling, the losses, the fused ops) are "expanded": rebuilt
 * from primitives (expand.c) and the primitives' rules run over that
 * expansion (ad_vjp_expanded / ad_jvp_expanded).
 */
#ifndef RLX_AUTODIFF_H
#define RLX_AUTODIFF_H

#include "../ir/ir.h"

typedef struct ad_ctx ad_ctx;

/* ---------------------------------------------------------------- the rule tables */

/* gout[o]: the gradient of output o of n (-1: zero). The rule adds the
 * gradients of n's inputs with ad_accum. n is a copy of the node (the
 * graph's node array moves while rules add nodes). */
typedef rlx_status (*ad_vjp_fn)(ad_ctx *c, const ir_node *n, const rlx_node *gout);
/* Sets tout[o], the tangent of output o of n (-1: zero), from the tangents
 * of n's inputs (ad_deriv). */
typedef rlx_status (*ad_jvp_fn)(ad_ctx *c, const ir_node *n, rlx_node *tout);

#define AD_RULE_0(Id)
#define AD_RULE_1(Id)                                                          \
  rlx_status ad_vjp_##Id(ad_ctx *c, const ir_node *n, const rlx_node *gout); \
  rlx_status ad_jvp_##Id(ad_ctx *c, const ir_node *n, rlx_node *tout);
#define RLX_OP(Id, min_in, max_in, n_out, cat, diff, attrs) AD_RULE_##diff(Id)
#include "../ir/ops.def"
#undef RLX_OP
#undef AD_RULE_0
#undef AD_RULE_1

/* [op]: the rule, NULL for an op that is not differentiable. */
extern const ad_vjp_fn ad_vjp_rules[RLX_OP_COUNT];
extern const ad_jvp_fn ad_jvp_rules[RLX_OP_COUNT];

/* ---------------------------------------------------------------- the context */

struct ad_ctx {
  rlx_graph *g;           /* the graph being built */
  int reverse;            /* 1: deriv holds gradients (rlx_grad); 0: tangents (rlx_jvp) */
  rlx_node *deriv;        /* [cap * IR_MAX_OUTPUTS], -1: zero */
  unsigned char *active;  /* [cap]: the node depends on a seed through differentiable ops */
  int cap, n_known;       /* arrays sized for cap nodes; active known below n_known */
  /* The user's graph and, for each forward copy (id < n_fwd), its node
   * there: fused ops are decomposed from the user's graph (pass_decompose
   * reads a source graph that must not grow while it writes). */
  const rlx_graph *src;
  const rlx_node *orig;
  int n_fwd;
};

/* Sizes the arrays for every node of c->g (new slots: zero derivative,
 * not active). */
rlx_status ad_reserve(ad_ctx *c);
/* Whether node id depends on a seed (a wrt node of rlx_grad, a primal of
 * rlx_jvp) through differentiable ops and has a float type: only such
 * nodes get derivatives. Nodes added by rules are classified on demand. */
int ad_active(ad_ctx *c, rlx_node id);
/* The derivative of output `slot` of node id (-1: zero). */
rlx_node ad_deriv(ad_ctx *c, rlx_node id, int slot);
/* Reverse mode: adds gradient gr (-1: nothing) to output `slot` of node
 * id. gr must have the node's type: a mismatch is RLX_ERR_INTERNAL naming
 * the rule's op (a bug in a rule, never silently broadcast). Returns the
 * graph's sticky status. */
rlx_status ad_accum(ad_ctx *c, rlx_node id, int slot, rlx_node gr);
/* The status of the graph being built (a builder's sticky error). */
rlx_status ad_status(const ad_ctx *c);

/* An expansion: rebuilds node n from primitives over n's inputs and
 * returns the node standing for n's output 0 (-1 with the error recorded
 * in c->g). An expansion may read n's own output only through
 * non-differentiable ops (masks): n's derivative is already consumed. */
typedef rlx_node (*ad_expand_fn)(ad_ctx *c, const ir_node *n);
/* The rule of an expanded op: the reverse (forward) sweep over the nodes
 * the expansion added, seeded with n's gradient (tangents). */
rlx_status ad_vjp_expanded(ad_ctx *c, const ir_node *n, const rlx_node *gout, ad_expand_fn expand);
rlx_status ad_jvp_expanded(ad_ctx *c, const ir_node *n, rlx_node *tout, ad_expand_fn expand);

/* The sweeps over nodes [lo, hi) of c->g: reverse (gradients from the
 * highest id down) and forward (tangents in node order). */
rlx_status ad_sweep_reverse(ad_ctx *c, rlx_node lo, rlx_node hi);
rlx_status ad_sweep_forward(ad_ctx *c, rlx_node lo, rlx_node hi);

/* ---------------------------------------------------------------- expansions (expand.c) */

rlx_node ad_expand_layer_norm(ad_ctx *c, const ir_node *n);
rlx_node ad_expand_rms_norm(ad_ctx *c, const ir_node *n);
rlx_node ad_expand_group_norm(ad_ctx *c, const ir_node *n);
rlx_node ad_expand_batch_norm(ad_ctx *c, const ir_node *n);
rlx_node ad_expand_attention(ad_ctx *c, const ir_node *n);
rlx_node ad_expand_rope(ad_ctx *c, const ir_node *n);
rlx_node ad_expand_pool(ad_ctx *c, const ir_node *n);
rlx_node ad_expand_log_mel(ad_ctx *c, const ir_node *n);
rlx_node ad_expand_cross_entropy(ad_ctx *c, const ir_node *n);
rlx_node ad_expand_mse_loss(ad_ctx *c, const ir_node *n);
/* A fused op through pass_decompose. */
rlx_node ad_expand_fused(ad_ctx *c, const ir_node *n);

/* ---------------------------------------------------------------- graph helpers (build.c) */

/* The type of node id (a copy: the node array moves as nodes are added). */
ir_type  ad_type(const ad_ctx *c, rlx_node id);
/* A rank-0 constant v in dtype t (floats round, integers truncate). */
rlx_node ad_scalar(ad_ctx *c, rlx_dtype t, double v);
/* A constant of dtype t and static dims from n = prod(dims) doubles. */
rlx_node ad_constant(ad_ctx *c, rlx_dtype t, int rank, const int64_t *dims, const double *v);
/* v broadcast to shape s (v itself when it has that shape). */
rlx_node ad_expand_to(ad_ctx *c, rlx_node v, const ir_shape *s);
/* Zeros / a fill value of type t. */
rlx_node ad_fill(ad_ctx *c, const ir_type *t, double v);
/* Sums v down to shape s, the inverse of broadcasting s to v's shape:
 * leading axes and axes where s has 1 are summed, then reshaped. */
rlx_node ad_reduce_to(ad_ctx *c, rlx_node v, const ir_shape *s);
/* a + b where either may be -1 (zero). */
rlx_node ad_add(ad_ctx *c, rlx_node a, rlx_node b);
/* v * k for a constant k in v's dtype (v itself for k = 1). */
rlx_node ad_scale(ad_ctx *c, rlx_node v, double k);
/* Node n rebuilt on other inputs, same attributes (a linear op applied to
 * derivatives). */
rlx_node ad_same_op(ad_ctx *c, const ir_node *n, const rlx_node *inputs);
/* Logical not / and / or of bool nodes. */
rlx_node ad_not(ad_ctx *c, rlx_node b);
rlx_node ad_and(ad_ctx *c, rlx_node a, rlx_node b);
rlx_node ad_or(ad_ctx *c, rlx_node a, rlx_node b);
/* Moves axis `axis` of v (rank `rank`) to the end (to = 1) or from the
 * end back to `axis` (to = 0); v itself when axis is already last. */
rlx_node ad_axis_last(ad_ctx *c, rlx_node v, int rank, int axis, int to);
/* The descriptor of a Conv / ConvTranspose node's attributes. */
rlx_conv_desc ad_conv_desc(const ir_node *n);
/* Fails the graph with RLX_ERR_UNSUPPORTED: a derivative this version
 * cannot express (named in the message). Returns the status. */
rlx_status ad_unsupported(ad_ctx *c, const ir_node *n, const char *what);

/* ---------------------------------------------------------------- derivative pieces shared by both modes (partials.c) */

/* The derivative of an elementwise output w.r.t. one input, as
 * factor * k where mask holds (0 elsewhere): f -1 means 1, k 0 with f -1
 * means the partial is zero, mask -1 means everywhere. */
typedef struct {
  rlx_node f;
  double k;
  rlx_node mask;
} ad_partial;

/* Partials of an elementwise node (Activation, Binary, Where, Clamp,
 * FakeQuantize) w.r.t. each input k that ad_active says is active (the
 * others are left zero). */
rlx_status ad_elementwise_partials(ad_ctx *c, const ir_node *n, ad_partial *p);
/* v times the partial p (-1 when p is zero or v is -1). */
rlx_node ad_apply_partial(ad_ctx *c, rlx_node v, const ad_partial *p);

/* Reduce: y = sum over the reduced axes of w * x for a weight w of x's
 * shape (broadcastable): 1 for sum (w = -1), 1/count for mean, the
 * tie-split argmax mask for max / min, the product of the others for
 * prod. */
rlx_node ad_reduce_weight(ad_ctx *c, const ir_node *n);
/* x's shape with the reduced axes of Reduce n kept as 1. */
ir_shape ad_reduce_keep_shape(const ad_ctx *c, const ir_node *n);
/* Softmax's Jacobian (symmetric) applied to v: y * (v - sum(v * y)). */
rlx_node ad_softmax_jacobian(ad_ctx *c, const ir_node *n, rlx_node v);

/* Flat indices of a take-along-axis: for idx of x's shape with dim `axis`
 * replaced by k (TopK's indices), the I64 positions [R * k] into x
 * flattened with `axis` moved last ([R * len]). Static shapes only. */
rlx_node ad_flat_along_axis(ad_ctx *c, rlx_node idx, const ir_shape *x, int axis);

/* Rope's inverse rotation applied to v (the transpose of Rope, which is
 * orthogonal in x). */
rlx_node ad_rope_inverse(ad_ctx *c, const ir_node *n, rlx_node v);

#endif /* RLX_AUTODIFF_H */
