/* lower_spatial.c — the spatial ops over NCHW: Conv, FusedConv and
 * ConvTranspose as a cuDNN call (cuda_conv.c) and, where the op has one,
 * an elementwise epilogue (bias, residual, activation, clamp) in place on
 * its output; Pool, Resize and GroupNorm as the kernels of k_spatial.cu. */
#include "cuda_plan.h"

#include <math.h>

/* x [N, C, spatial] of 1 or 2 spatial dims as [N, C, H, W] (1-D: H = 1). */
static void as_4d(const ir_shape *s, int64_t *d) {
  d[0] = s->d[0], d[1] = s->d[1];
  d[2] = s->rank == 4 ? s->d[2] : 1;
  d[3] = s->d[s->rank - 1];
}

/* Index i of a spatial attribute list of a 1-D op as its 2-D form's
 * (H = 1: stride and dilation 1, no pad). */
static int64_t attr2(const ir_ilist *l, int nd, int i, int64_t h_value) {
  if (nd == 2) return l->n ? l->v[i] : 1;
  return i == 0 ? h_value : l->n ? l->v[0] : 1;
}

static rlx_status lower_conv(cuda_plan *pl, const ir_node *n) {
  const ir_type *x = ir_in(pl->g, n, 0), *w = ir_in(pl->g, n, 1), *y = &n->out[0];
  const int nd = (int)n->a.ndim;
  cuda_conv_desc d = {0};
  int64_t xd[4], yd[4];
  as_4d(&x->shape, xd);
  as_4d(&y->shape, yd);
  d.transposed = n->op == RLX_OP_ConvTranspose, d.tf32 = pl->tf32;
  d.N = xd[0], d.C = xd[1], d.H = xd[2], d.W = xd[3];
  d.K = yd[1], d.OH = yd[2], d.OW = yd[3];
  d.R = nd == 2 ? w->shape.d[2] : 1, d.S = w->shape.d[w->shape.rank - 1];
  d.groups = n->a.groups;
  for (int i = 0; i < 2; i++) {
    d.stride[i] = attr2(&n->a.stride, nd, i, 1);
    d.dilation[i] = attr2(&n->a.dilation, nd, i, 1);
    d.pad[i] = nd == 2 ? n->a.pad.v[i] : i == 0 ? 0 : n->a.pad.v[0];
  }
  d.x = in_ptr(pl, n, 0), d.w = in_ptr(pl, n, 1), d.y = out_ptr(pl, n);
  rlx_status st;
  if (!pl->cudnn && (st = cuda_cudnn_create(&pl->cudnn, pl->stream))) return st;
  cuda_step *s = cuda_new_step(pl, ST_CONV, n);
  if (!s) return cuda_nomem(n);
  size_t ws = 0;
  cuda_conv *conv = NULL;
  st = cuda_conv_prepare(&d, pl->cudnn, &conv, &ws);
  s->args = conv;
  if (st) return st;
  if (ws > pl->conv_ws_bytes) { /* nothing has run yet: the larger buffer replaces the old one */
    if (pl->conv_ws) cudaFree(pl->conv_ws);
    pl->conv_ws = NULL, pl->conv_ws_bytes = 0;
    if ((st = cuda_alloc_dev(&pl->conv_ws, ws, "cuDNN's workspace"))) return st;
    pl->conv_ws_bytes = ws;
  }
  const int has_bias = n->n_in >= 3;
  if (n->op != RLX_OP_FusedConv)
    return has_bias ? cuda_emit_conv_epilogue(pl, n, in_ptr(pl, n, 2), NULL, RLX_ACT_NONE, 0, -INFINITY, INFINITY)
                    : RLX_OK;
  return cuda_emit_conv_epilogue(pl, n, in_ptr(pl, n, 2), n->n_in >= 4 ? in_ptr(pl, n, 3) : NULL, (int)n->a.act,
                                 n->a.alpha, n->a.lo, n->a.hi);
}

static rlx_status lower_pool(cuda_plan *pl, const ir_node *n) {
  const ir_type *x = ir_in(pl->g, n, 0), *y = &n->out[0];
  const int nd = (int)n->a.ndim;
  int64_t xd[4], yd[4];
  as_4d(&x->shape, xd);
  as_4d(&y->shape, yd);
  cuda_step *s = cuda_new_step(pl, ST_POOL, n);
  cu_pool_args *a = s ? cuda_new_args(s, sizeof *a) : NULL;
  if (!a) return cuda_nomem(n);
  a->x = in_ptr(pl, n, 0), a->y = out_ptr(pl, n), a->dtype = x->dtype;
  a->is_max = n->a.pool == RLX_POOL_MAX, a->count_include_pad = n->a.count_include_pad != 0;
  a->planes = xd[0] * xd[1], a->ih = xd[2], a->iw = xd[3], a->oh = yd[2], a->ow = yd[3];
  a->kh = attr2(&n->a.kernel, nd, 0, 1), a->kw = attr2(&n->a.kernel, nd, 1, 1);
  a->sh = attr2(&n->a.stride, nd, 0, 1), a->sw = attr2(&n->a.stride, nd, 1, 1);
  a->ph = nd == 2 ? n->a.pad.v[0] : 0, a->pw = nd == 2 ? n->a.pad.v[1] : n->a.pad.v[0];
  return RLX_OK;
}

static rlx_status lower_resize(cuda_plan *pl, const ir_node *n) {
  const ir_type *x = ir_in(pl->g, n, 0), *y = &n->out[0];
  cuda_step *s = cuda_new_step(pl, ST_RESIZE, n);
  cu_resize_args *a = s ? cuda_new_args(s, sizeof *a) : NULL;
  if (!a) return cuda_nomem(n);
  a->x = in_ptr(pl, n, 0), a->y = out_ptr(pl, n), a->dtype = x->dtype;
  a->bilinear = n->a.resize_mode == RLX_RESIZE_BILINEAR, a->align_corners = n->a.align_corners != 0;
  a->planes = x->shape.d[0] * x->shape.d[1], a->ih = x->shape.d[2], a->iw = x->shape.d[3];
  a->oh = y->shape.d[2], a->ow = y->shape.d[3];
  return RLX_OK;
}

static rlx_status lower_group_norm(cuda_plan *pl, const ir_node *n) {
  const ir_type *x = ir_in(pl->g, n, 0);
  cuda_step *s = cuda_new_step(pl, ST_GROUP_NORM, n);
  cu_group_norm_args *a = s ? cuda_new_args(s, sizeof *a) : NULL;
  if (!a) return cuda_nomem(n);
  a->x = in_ptr(pl, n, 0), a->gamma = in_ptr(pl, n, 1), a->beta = in_ptr(pl, n, 2), a->y = out_ptr(pl, n);
  a->dtype = x->dtype, a->eps = n->a.eps;
  a->n = x->shape.d[0], a->groups = n->a.groups, a->cpg = x->shape.d[1] / n->a.groups, a->spatial = 1;
  for (int i = 2; i < x->shape.rank; i++) a->spatial *= x->shape.d[i];
  return RLX_OK;
}

rlx_status cuda_lower_spatial(cuda_plan *pl, const ir_node *n) {
  switch (n->op) {
  case RLX_OP_Pool: return lower_pool(pl, n);
  case RLX_OP_Resize: return lower_resize(pl, n);
  case RLX_OP_GroupNorm: return lower_group_norm(pl, n);
  default: return lower_conv(pl, n);
  }
}
