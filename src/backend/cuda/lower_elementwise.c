/* lower_elementwise.c — elementwise ops, regions, SwiGLU, BatchNorm and a
 * product's or a convolution's unfused epilogue, lowered to programs of the elementwise
 * interpreter (cu_ew_args: broadcast strides, a chain of steps). */
#include "cuda_plan.h"

#include <math.h>
#include <string.h>

static void ew_begin(cu_ew_args *a, const ir_type *out, void *out_dev) {
  memset(a, 0, sizeof *a);
  a->rank = out->shape.rank;
  memcpy(a->dims, out->shape.d, sizeof a->dims);
  a->numel = ir_numel(&out->shape);
  a->out = out_dev;
  a->out_dtype = (uint8_t)out->dtype;
}

/* Adds a program input read with the given strides (over the output's
 * dims); returns its index. The caller checked the count. */
static int ew_input(cu_ew_args *a, const void *p, rlx_dtype t, const int64_t *stride, uint8_t half) {
  int k = a->n_in++;
  a->in[k] = p;
  a->in_dtype[k] = (uint8_t)t;
  memcpy(a->stride[k], stride, sizeof a->stride[k]);
  a->half[k] = half;
  return k;
}

/* An input of shape s broadcast to the output. */
static int ew_input_bcast(cu_ew_args *a, const void *p, const ir_type *t) {
  int64_t st[RLX_MAX_RANK];
  cuda_bcast_strides(&t->shape, a->rank, a->dims, st);
  return ew_input(a, p, t->dtype, st, 0);
}

static cu_ew_step *ew_step(cu_ew_args *a, int kind, int op, rlx_dtype in_dtype, rlx_dtype dtype, int x, int y, int z) {
  cu_ew_step *s = &a->s[a->n_steps++];
  memset(s, 0, sizeof *s);
  s->kind = (uint8_t)kind;
  s->op = (uint8_t)op;
  s->in_dtype = (uint8_t)in_dtype;
  s->dtype = (uint8_t)dtype;
  s->a = (int8_t)x, s->b = (int8_t)y, s->c = (int8_t)z;
  return s;
}

/* Drops size-1 dims and merges dims every input walks contiguously, so
 * the common case (no broadcasting) is one flat loop. */
static void ew_coalesce(cu_ew_args *a) {
  int64_t nd[CU_MAX_RANK], ns[CU_EW_MAX_IN][CU_MAX_RANK];
  uint8_t nh[CU_EW_MAX_IN] = {0};
  int nr = 0;
  for (int d = a->rank - 1; d >= 0; d--) {
    if (a->dims[d] == 1) continue;
    int merge = nr > 0;
    for (int k = 0; merge && k < a->n_in; k++)
      merge = !((a->half[k] >> d) & 1) && !((nh[k] >> (nr - 1)) & 1) && a->stride[k][d] == ns[k][nr - 1] * nd[nr - 1];
    if (merge) {
      nd[nr - 1] *= a->dims[d];
      continue;
    }
    nd[nr] = a->dims[d];
    for (int k = 0; k < a->n_in; k++) {
      ns[k][nr] = a->stride[k][d];
      nh[k] = (uint8_t)(nh[k] | ((a->half[k] >> d) & 1) << nr);
    }
    nr++;
  }
  if (a->numel == 0) return;
  a->rank = nr;
  for (int i = 0; i < nr; i++) {
    a->dims[i] = nd[nr - 1 - i];
    for (int k = 0; k < a->n_in; k++) a->stride[k][i] = ns[k][nr - 1 - i];
  }
  for (int k = 0; k < a->n_in; k++) {
    uint8_t h = 0;
    for (int i = 0; i < nr; i++) h = (uint8_t)(h | ((nh[k] >> (nr - 1 - i)) & 1) << i);
    a->half[k] = h;
  }
  a->contiguous = 1;
  for (int k = 0; k < a->n_in; k++)
    if (nr > 1 || a->half[k] || (nr == 1 && a->stride[k][0] != 1)) a->contiguous = 0;
}

static rlx_status emit_ew(cuda_plan *pl, const ir_node *n, const cu_ew_args *a) {
  cuda_step *s = cuda_new_step(pl, ST_EW, n);
  cu_ew_args *blob = s ? cuda_new_args(s, sizeof *blob) : NULL;
  if (!blob) return cuda_nomem(n);
  *blob = *a;
  blob->pdl = pl->pdl;
  ew_coalesce(blob);
  return RLX_OK;
}

static rlx_dtype compute_dtype(rlx_dtype t) { return t == RLX_F64 ? RLX_F64 : RLX_F32; }

/* An integral double saturated into [lo, hi] (k_elementwise.c's saturate_i). */
static int64_t saturate_int(double v, int64_t lo, int64_t hi) {
  if (v <= (double)lo) return lo;
  if (v >= (double)hi) return hi;
  return (int64_t)v;
}

/* A region chain over the program inputs already added (region input k is
 * program input k), as k_fused.c types it. */
static void ew_chain(cu_ew_args *a, const ir_chain *c) {
  rlx_dtype types[CU_EW_MAX_STEPS];
  for (int j = 0; j < c->n; j++) {
    const rlx_region_step *r = &c->s[j];
    rlx_dtype ta = r->a >= 0 ? (rlx_dtype)a->in_dtype[r->a] : types[-r->a - 1];
    rlx_dtype t = r->kind == RLX_STEP_CMP ? RLX_BOOL : r->kind == RLX_STEP_CAST ? r->to : ta;
    int kind = r->kind == RLX_STEP_ACT ? CU_STEP_ACT : r->kind == RLX_STEP_BIN ? CU_STEP_BIN
             : r->kind == RLX_STEP_CMP ? CU_STEP_CMP : CU_STEP_CAST;
    cu_ew_step *s = ew_step(a, kind, r->op, ta, t, r->a, r->b, 0);
    s->f0 = r->alpha;
    types[j] = t;
  }
}

/* Region inputs of a (Batch)ElementwiseRegion: first (through the resize
 * prologue) then rest[0..n_rest). */
static void ew_region_inputs(cuda_plan *pl, cu_ew_args *a, const ir_node *n, int first, const int *rest, int n_rest) {
  const rlx_graph *g = pl->g;
  const ir_type *t0 = ir_in(g, n, first);
  if (n->a.prologue == RLX_PROLOGUE_RESIZE_NEAREST_2X) {
    /* input 0 is seen as [N, C, 2H, 2W]: index along H and W halved */
    int64_t own[RLX_MAX_RANK], st[RLX_MAX_RANK];
    cuda_contig_strides(4, t0->shape.d, own);
    int lead = a->rank - 4;
    uint8_t half = 0;
    for (int i = 0; i < a->rank; i++) {
      int j = i - lead;
      int64_t vd = j < 0 ? 1 : t0->shape.d[j] * (j >= 2 ? 2 : 1);
      st[i] = j < 0 || vd == 1 ? 0 : own[j];
      if (j >= 2) half = (uint8_t)(half | 1u << i);
    }
    ew_input(a, in_ptr(pl, n, first), t0->dtype, st, half);
  } else {
    ew_input_bcast(a, in_ptr(pl, n, first), t0);
  }
  for (int i = 0; i < n_rest; i++) ew_input_bcast(a, in_ptr(pl, n, rest[i]), ir_in(g, n, rest[i]));
}

rlx_status cuda_lower_elementwise(cuda_plan *pl, const ir_node *n) {
  const rlx_graph *g = pl->g;
  const ir_type *out = &n->out[0], *x = ir_in(g, n, 0);
  cu_ew_args a;
  ew_begin(&a, out, out_ptr(pl, n));
  for (int i = 0; i < n->n_in; i++) ew_input_bcast(&a, in_ptr(pl, n, i), ir_in(g, n, i));
  cu_ew_step *s;
  switch (n->op) {
  case RLX_OP_Activation:
    s = ew_step(&a, CU_STEP_ACT, (int)n->a.act, x->dtype, out->dtype, 0, 0, 0);
    s->f0 = n->a.alpha;
    break;
  case RLX_OP_Binary: ew_step(&a, CU_STEP_BIN, (int)n->a.binop, x->dtype, out->dtype, 0, 1, 0); break;
  case RLX_OP_Compare: ew_step(&a, CU_STEP_CMP, (int)n->a.cmpop, x->dtype, RLX_BOOL, 0, 1, 0); break;
  case RLX_OP_Where: ew_step(&a, CU_STEP_WHERE, 0, x->dtype, out->dtype, 0, 1, 2); break;
  case RLX_OP_Cast: ew_step(&a, CU_STEP_CAST, 0, x->dtype, out->dtype, 0, 0, 0); break;
  case RLX_OP_Clamp: {
    s = ew_step(&a, CU_STEP_CLAMP, 0, x->dtype, out->dtype, 0, 0, 0);
    s->f0 = n->a.lo, s->f1 = n->a.hi;
    if (!ir_is_float(x->dtype)) { /* the CPU's integer bounds: ceil(lo), floor(hi), saturated to the dtype */
      int64_t tl = x->dtype == RLX_I8 ? INT8_MIN : x->dtype == RLX_U8 ? 0 : x->dtype == RLX_I32 ? INT32_MIN : INT64_MIN;
      int64_t th = x->dtype == RLX_I8 ? INT8_MAX : x->dtype == RLX_U8 ? UINT8_MAX : x->dtype == RLX_I32 ? INT32_MAX : INT64_MAX;
      s->i0 = saturate_int(ceil(n->a.lo), tl, th);
      s->i1 = saturate_int(floor(n->a.hi), tl, th);
    }
    break;
  }
  default: return rlx_set_error(RLX_ERR_INTERNAL, "CUDA: %s is not elementwise", ir_ops[n->op].name);
  }
  return emit_ew(pl, n, &a);
}

rlx_status cuda_lower_region(cuda_plan *pl, const ir_node *n) {
  int rest[CU_EW_MAX_IN];
  if (n->op == RLX_OP_ElementwiseRegion) {
    cu_ew_args a;
    ew_begin(&a, &n->out[0], out_ptr(pl, n));
    for (int i = 1; i < n->n_in; i++) rest[i - 1] = i;
    ew_region_inputs(pl, &a, n, 0, rest, n->n_in - 1);
    ew_chain(&a, &n->a.chain);
    return emit_ew(pl, n, &a);
  }
  /* BatchElementwiseRegion: one program per batch input, each writing the next rows */
  const int nb = (int)n->a.num_batch_inputs, n_rest = n->n_in - nb;
  for (int i = 0; i < n_rest; i++) rest[i] = nb + i;
  const ir_type *out = &n->out[0];
  int64_t row = 1, at = 0;
  for (int i = 1; i < out->shape.rank; i++) row *= out->shape.d[i];
  for (int b = 0; b < nb; b++) {
    const ir_type *tb = ir_in(pl->g, n, b);
    /* this batch's result has dim 0 of the broadcast of its inputs (the
     * prologue doubles only H and W) */
    int64_t d0 = 1;
    for (int k = 0; k <= n_rest; k++) {
      const ir_type *t = k == 0 ? tb : ir_in(pl->g, n, rest[k - 1]);
      if (t->shape.rank == out->shape.rank && t->shape.d[0] != 1) d0 = t->shape.d[0];
    }
    ir_type part = *out;
    part.shape.d[0] = d0;
    cu_ew_args a;
    ew_begin(&a, &part, out_ptr(pl, n) + (size_t)(at * row) * elem_size(out->dtype));
    ew_region_inputs(pl, &a, n, b, rest, n_rest);
    ew_chain(&a, &n->a.chain);
    rlx_status st = emit_ew(pl, n, &a);
    if (st) return st;
    at += d0;
  }
  return RLX_OK;
}

/* silu(x[..., :n]) * x[..., n:] computed in F32 (F64 when x or the result is), rounded once. */
rlx_status cuda_lower_swiglu(cuda_plan *pl, const ir_node *n) {
  const ir_type *x = ir_in(pl->g, n, 0), *out = &n->out[0];
  const int64_t half = out->shape.d[out->shape.rank - 1];
  if (x->dtype != RLX_F64 && out->dtype != RLX_F64) {
    cuda_step *s = cuda_new_step(pl, ST_SWIGLU, n);
    if (!s) return cuda_nomem(n);
    s->src = in_ptr(pl, n, 0), s->dtype = x->dtype, s->dst = out_ptr(pl, n), s->dtype2 = out->dtype;
    s->n0 = half ? numel_of(out) / half : 0, s->n1 = half;
    s->flag = pl->pdl;
    return RLX_OK;
  }
  ir_type view = {out->dtype, {2, {half ? numel_of(out) / half : 0, half}}};
  cu_ew_args a;
  ew_begin(&a, &view, out_ptr(pl, n));
  const int64_t st[RLX_MAX_RANK] = {2 * half, 1};
  uint8_t *p = in_ptr(pl, n, 0);
  int gate = ew_input(&a, p, x->dtype, st, 0);
  int up = ew_input(&a, p + (size_t)half * elem_size(x->dtype), x->dtype, st, 0);
  rlx_dtype ct = out->dtype == RLX_F64 ? RLX_F64 : compute_dtype(x->dtype);
  ew_step(&a, CU_STEP_ACT, RLX_ACT_SILU, x->dtype, ct, gate, 0, 0);
  ew_step(&a, CU_STEP_BIN, RLX_BIN_MUL, ct, ct, -1, up, 0);
  ew_step(&a, CU_STEP_CAST, 0, ct, out->dtype, -2, 0, 0);
  return emit_ew(pl, n, &a);
}

/* (x - mean[c]) / sqrt(var[c] + eps) * gamma[c] + beta[c], in F32 (F64). */
rlx_status cuda_lower_batch_norm(cuda_plan *pl, const ir_node *n) {
  const ir_type *x = ir_in(pl->g, n, 0);
  cu_ew_args a;
  ew_begin(&a, &n->out[0], out_ptr(pl, n));
  ew_input_bcast(&a, in_ptr(pl, n, 0), x);
  int64_t st[RLX_MAX_RANK] = {0};
  st[1] = 1; /* the channel dim */
  for (int i = 1; i < 5; i++) ew_input(&a, in_ptr(pl, n, i), x->dtype, st, 0);
  rlx_dtype ct = compute_dtype(x->dtype);
  ew_step(&a, CU_STEP_CAST, 0, x->dtype, ct, 0, 0, 0);            /* s0 = x */
  ew_step(&a, CU_STEP_CAST, 0, x->dtype, ct, 1, 0, 0);            /* s1 = mean */
  ew_step(&a, CU_STEP_BIN, RLX_BIN_SUB, ct, ct, -1, -2, 0);       /* s2 = x - mean */
  ew_step(&a, CU_STEP_CAST, 0, x->dtype, ct, 2, 0, 0);            /* s3 = var */
  cu_ew_step *e = ew_step(&a, CU_STEP_CONST, 0, ct, ct, 0, 0, 0); /* s4 = eps */
  double eps = ct == RLX_F32 ? (double)(float)n->a.eps : n->a.eps;
  memcpy(&e->i0, &eps, sizeof eps);
  ew_step(&a, CU_STEP_BIN, RLX_BIN_ADD, ct, ct, -4, -5, 0);       /* s5 = var + eps */
  ew_step(&a, CU_STEP_ACT, RLX_ACT_SQRT, ct, ct, -6, 0, 0);       /* s6 */
  ew_step(&a, CU_STEP_BIN, RLX_BIN_DIV, ct, ct, -3, -7, 0);       /* s7 = s2 / s6 */
  ew_step(&a, CU_STEP_CAST, 0, x->dtype, ct, 3, 0, 0);            /* s8 = gamma */
  ew_step(&a, CU_STEP_BIN, RLX_BIN_MUL, ct, ct, -8, -9, 0);       /* s9 */
  ew_step(&a, CU_STEP_CAST, 0, x->dtype, ct, 4, 0, 0);            /* s10 = beta */
  ew_step(&a, CU_STEP_BIN, RLX_BIN_ADD, ct, ct, -10, -11, 0);     /* s11 */
  ew_step(&a, CU_STEP_CAST, 0, ct, x->dtype, -12, 0, 0);
  return emit_ew(pl, n, &a);
}

/* The part of a product's epilogue cuBLASLt could not fuse, in place:
 * out = act(out [+ bias]); or, for a product with K = 0 (out is not
 * read), out = act(bias) broadcast over the rows. */
rlx_status cuda_emit_bias_act(cuda_plan *pl, const ir_node *n, int act, double alpha, int read_out, const void *bias) {
  const ir_type *out = &n->out[0];
  const int64_t N = out->shape.d[out->shape.rank - 1];
  ir_type view = {out->dtype, {2, {N ? numel_of(out) / N : 0, N}}};
  cu_ew_args a;
  ew_begin(&a, &view, out_ptr(pl, n));
  const int64_t full[RLX_MAX_RANK] = {N, 1}, row[RLX_MAX_RANK] = {0, 1};
  int v = -1;
  if (read_out) v = ew_input(&a, out_ptr(pl, n), out->dtype, full, 0);
  if (bias) {
    int b = ew_input(&a, bias, out->dtype, row, 0);
    if (v < 0) v = b;
    else ew_step(&a, CU_STEP_BIN, RLX_BIN_ADD, out->dtype, out->dtype, v, b, 0), v = -a.n_steps;
  }
  if (act != RLX_ACT_NONE) ew_step(&a, CU_STEP_ACT, act, out->dtype, out->dtype, v, 0, 0)->f0 = alpha;
  if (a.n_steps == 0) ew_step(&a, CU_STEP_CAST, 0, out->dtype, out->dtype, v, 0, 0);
  return emit_ew(pl, n, &a);
}

/* A convolution's epilogue, in place on its NCHW output: out =
 * clamp(act(out + bias[c] [+ resid]), lo, hi), in F32 (the convolutions
 * are F32), rounded once. */
rlx_status cuda_emit_conv_epilogue(cuda_plan *pl, const ir_node *n, const void *bias, const void *resid, int act,
                                   double alpha, double lo, double hi) {
  const ir_type *out = &n->out[0];
  const int64_t C = out->shape.d[1], S = C ? numel_of(out) / (out->shape.d[0] * C) : 0;
  ir_type view = {out->dtype, {3, {out->shape.d[0], C, S}}};
  cu_ew_args a;
  ew_begin(&a, &view, out_ptr(pl, n));
  const int64_t full[RLX_MAX_RANK] = {C * S, S, 1}, chan[RLX_MAX_RANK] = {0, 1, 0};
  const rlx_dtype t = out->dtype;
  int v = ew_input(&a, out_ptr(pl, n), t, full, 0);
  if (bias) ew_step(&a, CU_STEP_BIN, RLX_BIN_ADD, t, t, v, ew_input(&a, bias, t, chan, 0), 0), v = -a.n_steps;
  if (resid) ew_step(&a, CU_STEP_BIN, RLX_BIN_ADD, t, t, v, ew_input(&a, resid, t, full, 0), 0), v = -a.n_steps;
  if (act != RLX_ACT_NONE) ew_step(&a, CU_STEP_ACT, act, t, t, v, 0, 0)->f0 = alpha, v = -a.n_steps;
  if (!(isinf(lo) && lo < 0 && isinf(hi) && hi > 0)) {
    cu_ew_step *c = ew_step(&a, CU_STEP_CLAMP, 0, t, t, v, 0, 0);
    c->f0 = lo, c->f1 = hi;
  }
  if (a.n_steps == 0) return RLX_OK;
  return emit_ew(pl, n, &a);
}
