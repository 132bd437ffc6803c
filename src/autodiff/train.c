/* train.c — rlx_train_graph: a gradient graph (rlx_grad) followed by one
 * optimizer step per param and the Assigns that write the new params and
 * optimizer state back, so one run of the result is one training step. */
#include "autodiff.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The node of gg that is the Param named name (rlx_grad copies every
 * leaf of the forward graph), or -1. */
static rlx_node param_named(const rlx_graph *gg, const char *name) {
  for (int i = 0; i < gg->n_nodes; i++)
    if (gg->nodes[i].op == RLX_OP_Param && !strcmp(gg->nodes[i].a.name, name)) return i;
  return -1;
}

/* A state Param "<param>.<what>" of dtype t and the given dims. */
static rlx_node state_param(rlx_graph *gg, const char *param, const char *what, rlx_dtype t, int rank,
                            const int64_t *dims) {
  char name[512];
  snprintf(name, sizeof name, "%s.%s", param, what);
  return rlx_param(gg, name, t, rank, dims);
}

static rlx_status check_args(const rlx_graph *g, int n_params, const rlx_node *params, const rlx_optimizer *opt) {
  if (!g || !opt || n_params < 0 || (n_params > 0 && !params))
    return rlx_set_error(RLX_ERR_INVALID, "rlx_train_graph: NULL graph, optimizer or params");
  if (opt->kind != RLX_OPTIM_SGD && opt->kind != RLX_OPTIM_ADAMW)
    return rlx_set_error(RLX_ERR_INVALID, "rlx_train_graph: optimizer kind %d unknown", (int)opt->kind);
  for (int k = 0; k < n_params; k++) {
    if (params[k] < 0 || params[k] >= g->n_nodes || g->nodes[params[k]].op != RLX_OP_Param)
      return rlx_set_error(RLX_ERR_INVALID, "rlx_train_graph: params[%d] = %d is not a Param of the graph", k,
                           (int)params[k]);
    for (int j = 0; j < k; j++)
      if (params[j] == params[k])
        return rlx_set_error(RLX_ERR_INVALID, "rlx_train_graph: param \"%s\" is given twice",
                             g->nodes[params[k]].a.name);
  }
  return RLX_OK;
}

rlx_status rlx_train_graph(const rlx_graph *g, rlx_node loss, int n_params, const rlx_node *params,
                           const rlx_optimizer *opt, rlx_graph **train_graph) {
  if (!train_graph) return rlx_set_error(RLX_ERR_INVALID, "rlx_train_graph: train_graph is NULL");
  *train_graph = NULL;
  rlx_status st = check_args(g, n_params, params, opt);
  if (st) return st;
  rlx_graph *gg = NULL;
  if ((st = rlx_grad(g, loss, n_params, params, &gg))) return st;
  /* outputs: the loss, each param's Assign, then the state's */
  rlx_node *outs = malloc((size_t)(3 * n_params + 2) * sizeof *outs), *state = outs ? outs + 1 + n_params : NULL;
  if (!outs) {
    rlx_graph_free(gg);
    return rlx_set_error(RLX_ERR_NOMEM, "rlx_train_graph: out of memory");
  }
  int n_state = 0;
  outs[0] = gg->outputs[0];
  rlx_node lr = rlx_input(gg, "lr", RLX_F32, 0, NULL), step = -1;
  if (opt->kind == RLX_OPTIM_ADAMW) { /* the 1-based count of this step */
    rlx_node taken = rlx_param(gg, "adamw.step", RLX_I64, 0, NULL);
    int64_t one = 1;
    step = rlx_add(gg, taken, rlx_constant(gg, RLX_I64, 0, NULL, &one));
    state[n_state++] = rlx_assign(gg, taken, step);
  }
  for (int k = 0; k < n_params && !gg->err; k++) {
    const ir_node *src = &g->nodes[params[k]];
    const ir_type *t = &src->out[0];
    rlx_node p = param_named(gg, src->a.name), grad = gg->outputs[1 + k], new_p, new_state = -1, st_param = -1;
    if (opt->kind == RLX_OPTIM_SGD) {
      /* without momentum the velocity is unused: the gradient stands in */
      if (opt->momentum > 0) st_param = state_param(gg, src->a.name, "velocity", t->dtype, t->shape.rank, t->shape.d);
      new_p = rlx_sgd_step(gg, p, grad, st_param >= 0 ? st_param : grad, lr, opt->momentum, opt->weight_decay,
                           opt->nesterov, &new_state);
    } else {
      int64_t dims[RLX_MAX_RANK] = {2};
      for (int i = 0; i < t->shape.rank && i + 1 < RLX_MAX_RANK; i++) dims[i + 1] = t->shape.d[i];
      st_param = state_param(gg, src->a.name, "moments", t->dtype, t->shape.rank + 1, dims);
      new_p = rlx_adamw_step(gg, p, grad, st_param, lr, step, opt->beta1, opt->beta2, opt->eps, opt->weight_decay,
                             &new_state);
    }
    outs[1 + k] = rlx_assign(gg, p, new_p);
    if (st_param >= 0) state[n_state++] = rlx_assign(gg, st_param, new_state);
  }
  st = gg->err ? rlx_graph_status(gg) : rlx_graph_set_outputs(gg, 1 + n_params + n_state, outs);
  free(outs);
  if (st) {
    rlx_graph_free(gg);
    return st;
  }
  *train_graph = gg;
  return RLX_OK;
}
