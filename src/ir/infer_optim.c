/* infer_optim.c — builders and shape inference of the training ops: the
 * optimizer steps SgdStep and AdamWStep (pure: they compute a param's new
 * value and its optimizer state's) and Assign, which makes the runtime
 * write a value into a Param after each run — so one run of a training
 * graph is one step. */
#include "ir.h"

#include <math.h>

/* A learning rate or step count: one element (rank 0 or [1]). */
static int check_scalar(rlx_graph *g, ir_node *n, int i, const char *what, int allow_int) {
  const ir_type *t = ir_in(g, n, i);
  int one = t->shape.rank == 0 || (t->shape.rank == 1 && t->shape.d[0] == 1);
  if (!ir_is_float(t->dtype) && !(allow_int && (t->dtype == RLX_I32 || t->dtype == RLX_I64)))
    return ir_fail(g, n, RLX_ERR_DTYPE, "%s has dtype %s; expected a float%s", what, rlx_dtype_name(t->dtype),
                   allow_int ? " or i32 / i64" : "");
  if (!one) {
    char b[IR_SHAPE_STR_CAP];
    return ir_fail(g, n, RLX_ERR_SHAPE, "%s %s must have one element", what, ir_shape_str(g, &t->shape, b, sizeof b));
  }
  return 0;
}

/* Input i has the type want (dtype and shape). */
static int check_like(rlx_graph *g, ir_node *n, int i, const char *what, const ir_type *want) {
  const ir_type *t = ir_in(g, n, i);
  if (ir_type_eq(t, want)) return 0;
  char a[IR_SHAPE_STR_CAP], b[IR_SHAPE_STR_CAP];
  return ir_fail(g, n, t->dtype != want->dtype ? RLX_ERR_DTYPE : RLX_ERR_SHAPE, "%s is %s%s; expected %s%s", what,
                 rlx_dtype_name(t->dtype), ir_shape_str(g, &t->shape, a, sizeof a), rlx_dtype_name(want->dtype),
                 ir_shape_str(g, &want->shape, b, sizeof b));
}

static int finite_at_least(rlx_graph *g, ir_node *n, const char *what, double v, double lo) {
  if (isfinite(v) && v >= lo) return 0;
  return ir_fail(g, n, RLX_ERR_INVALID, "%s %g must be finite and >= %g", what, v, lo);
}

/* ---------------------------------------------------------------- SgdStep */

rlx_node rlx_sgd_step(rlx_graph *g, rlx_node param, rlx_node grad, rlx_node velocity, rlx_node lr, double momentum,
                      double weight_decay, int nesterov, rlx_node *new_velocity) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.momentum = momentum;
  a.weight_decay = weight_decay;
  a.nesterov = nesterov != 0;
  rlx_node in[] = {param, grad, velocity, lr};
  rlx_node r = ir_add_node(g, RLX_OP_SgdStep, 4, in, &a);
  if (new_velocity) *new_velocity = r < 0 ? -1 : rlx_get_output(g, r, 1);
  return r;
}

/* torch.optim.SGD (dampening 0) on one param, from zero-initialized
 * velocity:
 *   g = grad + weight_decay * param
 *   velocity' = momentum * velocity + g                 (momentum > 0)
 *   param' = param - lr * (nesterov ? g + momentum * velocity' : velocity')
 * With momentum 0 the step is param - lr * g and velocity' = velocity.
 * Outputs: param', velocity'. grad and velocity have param's type (a float
 * type); lr has one element of a float type. momentum and weight_decay are
 * finite and >= 0; nesterov needs momentum > 0. */
int ir_infer_SgdStep(rlx_graph *g, ir_node *n) {
  const ir_type *p = ir_in(g, n, 0);
  if (!ir_is_float(p->dtype))
    return ir_fail(g, n, RLX_ERR_DTYPE, "param dtype %s is not a float type", rlx_dtype_name(p->dtype));
  if (check_like(g, n, 1, "grad", p) || check_like(g, n, 2, "velocity", p) || check_scalar(g, n, 3, "lr", 0) ||
      finite_at_least(g, n, "momentum", n->a.momentum, 0) ||
      finite_at_least(g, n, "weight_decay", n->a.weight_decay, 0))
    return -1;
  if (n->a.nesterov && n->a.momentum <= 0)
    return ir_fail(g, n, RLX_ERR_INVALID, "nesterov needs momentum > 0, got %g", n->a.momentum);
  n->out[0] = n->out[1] = *p;
  return 0;
}

/* ---------------------------------------------------------------- AdamWStep */

rlx_node rlx_adamw_step(rlx_graph *g, rlx_node param, rlx_node grad, rlx_node moments, rlx_node lr, rlx_node step,
                        double beta1, double beta2, double eps, double weight_decay, rlx_node *new_moments) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.beta1 = beta1;
  a.beta2 = beta2;
  a.eps = eps;
  a.weight_decay = weight_decay;
  rlx_node in[] = {param, grad, moments, lr, step};
  rlx_node r = ir_add_node(g, RLX_OP_AdamWStep, 5, in, &a);
  if (new_moments) *new_moments = r < 0 ? -1 : rlx_get_output(g, r, 1);
  return r;
}

/* torch.optim.AdamW on one param; moments [2, param dims...] holds the
 * first moment m (index 0) and the second v (index 1), zero-initialized;
 * step t >= 1 counts the steps including this one (a run-time error
 * otherwise):
 *   param *= 1 - lr * weight_decay
 *   m' = beta1 m + (1 - beta1) grad,  v' = beta2 v + (1 - beta2) grad^2
 *   param' = param - lr / (1 - beta1^t) * m' / (sqrt(v') / sqrt(1 - beta2^t) + eps)
 * Outputs: param', moments'. grad has param's type, moments its dtype;
 * lr has one element of a float type, step one element of a float type,
 * i32 or i64. beta1, beta2 in [0, 1); eps and weight_decay finite, >= 0. */
int ir_infer_AdamWStep(rlx_graph *g, ir_node *n) {
  const ir_type *p = ir_in(g, n, 0);
  if (!ir_is_float(p->dtype))
    return ir_fail(g, n, RLX_ERR_DTYPE, "param dtype %s is not a float type", rlx_dtype_name(p->dtype));
  if (p->shape.rank >= RLX_MAX_RANK)
    return ir_fail(g, n, RLX_ERR_SHAPE, "param rank %d leaves no room for the moments' leading 2", p->shape.rank);
  ir_type mt = *p;
  mt.shape.rank = p->shape.rank + 1;
  mt.shape.d[0] = 2;
  for (int i = 0; i < p->shape.rank; i++) mt.shape.d[i + 1] = p->shape.d[i];
  if (check_like(g, n, 1, "grad", p) || check_like(g, n, 2, "moments", &mt) || check_scalar(g, n, 3, "lr", 0) ||
      check_scalar(g, n, 4, "step", 1) || finite_at_least(g, n, "eps", n->a.eps, 0) ||
      finite_at_least(g, n, "weight_decay", n->a.weight_decay, 0))
    return -1;
  if (!(n->a.beta1 >= 0 && n->a.beta1 < 1 && n->a.beta2 >= 0 && n->a.beta2 < 1))
    return ir_fail(g, n, RLX_ERR_INVALID, "beta1 %g and beta2 %g must be in [0, 1)", n->a.beta1, n->a.beta2);
  n->out[0] = *p;
  n->out[1] = mt;
  return 0;
}

/* ---------------------------------------------------------------- Assign */

rlx_node rlx_assign(rlx_graph *g, rlx_node param, rlx_node value) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  rlx_node in[] = {param, value};
  return ir_add_node(g, RLX_OP_Assign, 2, in, &a);
}

/* Assign(param, value): the output is value; after each run of the graph
 * the session stores value as the param's data (what the run read is the
 * old value: every node of one run sees the params as they were bound).
 * The target must be a Param and value must have its exact type. An
 * Assign must be a graph output (so the passes keep it), and a param may
 * be assigned once (both checked by rlx_compile). */
int ir_infer_Assign(rlx_graph *g, ir_node *n) {
  const ir_node *target = &g->nodes[n->in[0]];
  if (target->op != RLX_OP_Param)
    return ir_fail(g, n, RLX_ERR_INVALID, "the target is %s (node %d), not a Param", ir_ops[target->op].name,
                   target->id);
  if (check_like(g, n, 1, "value", &target->out[0])) return -1;
  n->out[0] = target->out[0];
  return 0;
}
