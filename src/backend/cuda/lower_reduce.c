/* lower_reduce.c — reductions (Reduce, ArgMax/ArgMin, Cumsum), Softmax and
 * LogSoftmax, and the norms (LayerNorm, RmsNorm and their residual forms). */
#include "cuda_plan.h"


rlx_status cuda_lower_reduce(cuda_plan *pl, const ir_node *n) {
  const ir_type *x = ir_in(pl->g, n, 0);
  int64_t xs[RLX_MAX_RANK];
  cuda_contig_strides(x->shape.rank, x->shape.d, xs);
  if (n->op == RLX_OP_Softmax || n->op == RLX_OP_LogSoftmax) {
    cuda_step *s = cuda_new_step(pl, ST_SOFTMAX, n);
    if (!s) return cuda_nomem(n);
    int axis = (int)n->a.axis;
    s->src = in_ptr(pl, n, 0), s->dst = out_ptr(pl, n), s->dtype = x->dtype, s->flag = n->op == RLX_OP_LogSoftmax;
    s->n0 = 1, s->n2 = 1;
    for (int i = 0; i < axis; i++) s->n0 *= x->shape.d[i];
    for (int i = axis + 1; i < x->shape.rank; i++) s->n2 *= x->shape.d[i];
    s->n1 = x->shape.d[axis];
    return RLX_OK;
  }
  cuda_step *s = cuda_new_step(pl, ST_REDUCE, n);
  cu_reduce_args *a = s ? cuda_new_args(s, sizeof *a) : NULL;
  if (!a) return cuda_nomem(n);
  a->x = in_ptr(pl, n, 0), a->out = out_ptr(pl, n);
  a->x_dtype = x->dtype, a->out_dtype = n->out[0].dtype;
  uint8_t reduced[RLX_MAX_RANK] = {0};
  switch (n->op) {
  case RLX_OP_Reduce:
    a->kind = CU_RED_REDUCE, a->op = (int)n->a.reduce;
    for (int i = 0; i < n->a.axes.n; i++) reduced[n->a.axes.v[i]] = 1;
    break;
  case RLX_OP_ArgMax:
  case RLX_OP_ArgMin:
  case RLX_OP_Cumsum:
    a->kind = n->op == RLX_OP_ArgMax ? CU_RED_ARGMAX : n->op == RLX_OP_ArgMin ? CU_RED_ARGMIN : CU_RED_CUMSUM;
    if (x->shape.rank) reduced[n->a.axis] = 1;
    a->exclusive = n->a.exclusive != 0, a->reverse = n->a.reverse != 0;
    break;
  default: return rlx_set_error(RLX_ERR_INTERNAL, "CUDA: %s is not a reduction", ir_ops[n->op].name);
  }
  a->n_out = 1, a->count = 1;
  for (int i = 0; i < x->shape.rank; i++) {
    if (reduced[i]) {
      a->rdims[a->rrank] = x->shape.d[i], a->rstride[a->rrank++] = xs[i];
      a->count *= x->shape.d[i];
      a->cum_stride = xs[i];
    } else {
      a->kdims[a->krank] = x->shape.d[i], a->kstride[a->krank++] = xs[i];
      a->n_out *= x->shape.d[i];
    }
  }
  if (a->kind == CU_RED_CUMSUM && !x->shape.rank) a->cum_stride = 0;
  if (a->n_out > 0x7fffffff) return rlx_set_error(RLX_ERR_UNSUPPORTED, "CUDA: %s with %lld outputs", ir_ops[n->op].name, (long long)a->n_out);
  return RLX_OK;
}

/* The launch arguments of norm node n (cuda_lower_norm; and the norm_quant
 * fusion, where a product's x quantization computes the RmsNorm). */
void cuda_norm_args(const cuda_plan *pl, const ir_node *n, cu_norm_args *a) {
  const ir_type *x = ir_in(pl->g, n, 0);
  a->x = in_ptr(pl, n, 0), a->out = out_ptr(pl, n), a->dtype = x->dtype, a->eps = n->a.eps;
  if (n->op == RLX_OP_LayerNorm || n->op == RLX_OP_RmsNorm) {
    a->rms = n->op == RLX_OP_RmsNorm;
    a->len = 1;
    for (int i = (int)n->a.axis; i < x->shape.rank; i++) a->len *= x->shape.d[i];
    a->gamma = in_ptr(pl, n, 1), a->beta = in_ptr(pl, n, 2);
  } else {
    int hb = n->a.has_bias != 0;
    a->rms = n->op == RLX_OP_FusedResidualRmsNorm;
    a->len = x->shape.d[x->shape.rank - 1];
    a->res = in_ptr(pl, n, 1);
    a->bias = hb ? in_ptr(pl, n, 2) : NULL;
    a->gamma = in_ptr(pl, n, 2 + hb), a->beta = in_ptr(pl, n, 3 + hb);
  }
  a->rows = a->len ? numel_of(x) / a->len : 0;
}

rlx_status cuda_lower_norm(cuda_plan *pl, const ir_node *n) {
  cuda_step *s = cuda_new_step(pl, ST_NORM, n);
  cu_norm_args *a = s ? cuda_new_args(s, sizeof *a) : NULL;
  if (!a) return cuda_nomem(n);
  cuda_norm_args(pl, n, a);
  a->pdl = pl->pdl;
  return RLX_OK;
}
