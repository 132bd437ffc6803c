/* k_fused.c — CPU kernels of the fused ops (FusedMatMulBiasAct,
 * FusedResidualLN, FusedResidualRmsNorm, FusedSwiGLU, ElementwiseRegion,
 * BatchElementwiseRegion, TransformRegion, FusedAttentionBlock).
 *
 * Each computes what its decomposition into primitive ops computes. F32,
 * F16 and BF16 run the fast paths — cpu_gemm with its epilogue, the f32 norm
 * rows, the chain evaluator (one pass over memory per region), the tiled
 * attention kernel — in f32 with the storage dtype converted at the edges.
 * F64 (and chains with integer or F64 steps) run the reference: the same
 * scalar and row routines the primitive kernels use (elementwise_math.h,
 * norm_rows.h, linalg_rows.h), floats in double rounded once on store,
 * except inside elementwise regions, where every step is rounded to its own
 * dtype as the unfused op would store it. Semantics: the comments at the
 * ops' inference (infer_fused.c).
 */
#include "cpu.h"
#include "chain_eval.h"
#include "elementwise_math.h"
#include "gemm.h"
#include "linalg_rows.h"
#include "norm_rows.h"
#include "vec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* count doubles (at least one, so a zero-size buffer is not NULL). */
static double *alloc_f64(int64_t count) {
  return malloc((size_t)(count > 0 ? count : 1) * sizeof(double));
}

/* ---------------------------------------------------------------- FusedMatMulBiasAct */

/* F32 results of a fast path (f32 scratch) stored into t's dtype, rows in
 * parallel. */
typedef struct {
  const cpu_vec_ops *vo;
  const float *src;
  cpu_tensor *t;
  int64_t row;
} store_job;

static void store_rows(void *arg, int64_t begin, int64_t end, int thread) {
  (void)thread;
  store_job *J = arg;
  size_t es = (size_t)ir_dtypes[J->t->dtype].size;
  J->vo->store((char *)J->t->data + (size_t)(begin * J->row) * es, J->t->dtype, J->src + begin * J->row,
               (end - begin) * J->row);
}

static void store_f32_to(cpu_ctx *ctx, cpu_tensor *t, const float *src, int64_t row) {
  store_job J = {cpu_vec(), src, t, row};
  cpu_parallel_for(ctx, t->numel / row, cpu_vec_grain(row), store_rows, &J);
}

/* A matrix of a cpu_gemm call: t's storage, rows of ld elements. */
static gemm_operand gemm_matrix(const cpu_tensor *t, int64_t ld) {
  return (gemm_operand){t->data, t->dtype, 0, ld, 0, NULL};
}

/* F32/F16/BF16: one cpu_gemm with bias + activation in its epilogue (F16 /
 * BF16 operands converted while packed); F32 results land in out directly. */
static rlx_status matmul_bias_act_fast(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  const int64_t K = in[1].d[0], N = in[1].d[1], M = out->numel / N;
  const cpu_vec_ops *vo = cpu_vec();
  float *bias = malloc((size_t)N * sizeof *bias);
  float *c = out->dtype == RLX_F32 ? out->data : malloc((size_t)out->numel * sizeof *c);
  if (!bias || !c) {
    free(bias);
    if (c != out->data) free(c);
    return rlx_set_error(RLX_ERR_NOMEM, "FusedMatMulBiasAct (node %d): out of memory", n->id);
  }
  vo->load(bias, in[2].data, in[2].dtype, N);
  gemm_operand a = gemm_matrix(&in[0], K), w = gemm_matrix(&in[1], N);
  if (in[1].transposed) w = (gemm_operand){in[1].data, in[1].dtype, 1, K, 0, NULL}; /* stored [N, K] */
  gemm_epilogue ep = {.bias = bias, .act = (rlx_act)n->a.act, .alpha = (float)n->a.alpha};
  cpu_gemm_prepacked(ctx, 1, M, N, K, &a, &w, in[1].prepack, c, N, 0, &ep);
  if (c != out->data) {
    store_f32_to(ctx, out, c, N);
    free(c);
  }
  free(bias);
  return RLX_OK;
}

rlx_status cpu_FusedMatMulBiasAct(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in,
                                  cpu_tensor *out) {
  const cpu_tensor *bias = &in[2];
  int64_t K = in[1].d[0], N = in[1].d[1];
  if (out->numel == 0) return RLX_OK;
  if (out->dtype != RLX_F64) return matmul_bias_act_fast(ctx, n, in, out);
  int64_t M = out->numel / N; /* every row of a, batch dims flattened: w is shared */
  double *a = cpu_load_f64(&in[0]), *w = cpu_load_f64(&in[1]), *c = alloc_f64(out->numel);
  rlx_status st = RLX_OK;
  if (!a || !w || !c) {
    st = rlx_set_error(RLX_ERR_NOMEM, "FusedMatMulBiasAct (node %d): out of memory", n->id);
    goto done;
  }
  if ((st = cpu_matmul_f64(a, w, c, M, K, N)) != RLX_OK) goto done;
  for (int64_t i = 0; i < out->numel; i++)
    cpu_set(out, i, cpu_act_apply((rlx_act)n->a.act, c[i] + cpu_get(bias, i % N), n->a.alpha));
done:
  free(a);
  free(w);
  free(c);
  return st;
}

/* ---------------------------------------------------------------- FusedResidualLN / RmsNorm */

static rlx_status residual_norm(const ir_node *n, const cpu_tensor *in, cpu_tensor *out, int rms) {
  int has_bias = n->a.has_bias != 0;
  const cpu_tensor *x = &in[0], *res = &in[1];
  int64_t len = x->d[x->rank - 1];
  if (out->numel == 0) return RLX_OK;
  double *row = alloc_f64(len), *bias = has_bias ? cpu_load_f64(&in[2]) : NULL;
  double *gamma = cpu_load_f64(&in[2 + has_bias]), *beta = cpu_load_f64(&in[3 + has_bias]);
  rlx_status st = RLX_OK;
  if (!row || (has_bias && !bias) || !gamma || !beta) {
    st = rlx_set_error(RLX_ERR_NOMEM, "%s (node %d): out of memory", ir_ops[n->op].name, n->id);
    goto done;
  }
  for (int64_t r = 0; r < out->numel / len; r++) {
    for (int64_t j = 0; j < len; j++) {
      int64_t i = r * len + j;
      row[j] = cpu_get(x, i) + cpu_get(res, i) + (bias ? bias[j] : 0.0);
    }
    if (rms) cpu_rms_norm_row(row, len, gamma, beta, n->a.eps);
    else cpu_layer_norm_row(row, len, gamma, beta, n->a.eps);
    for (int64_t j = 0; j < len; j++) cpu_set(out, r * len + j, row[j]);
  }
done:
  free(row);
  free(bias);
  free(gamma);
  free(beta);
  return st;
}

/* F32/F16/BF16: rows of x + res (+ bias) in f32, normalized in place,
 * stored: one pass per row, rows in parallel. */
typedef struct {
  const cpu_vec_ops *vo;
  const cpu_tensor *x, *res;
  cpu_tensor *out;
  const float *bias, *gamma, *beta; /* f32 [len]; bias may be NULL */
  int64_t len;
  double eps;
  int rms;
  float *scratch; /* per thread: 2 * len */
} residual_norm_job;

static void residual_norm_rows(void *arg, int64_t begin, int64_t end, int thread) {
  residual_norm_job *J = arg;
  const cpu_vec_ops *vo = J->vo;
  const int64_t len = J->len;
  const rlx_dtype dt = J->x->dtype;
  const size_t es = (size_t)ir_dtypes[dt].size;
  float *row = J->scratch + thread * 2 * len, *other = row + len;
  for (int64_t r = begin; r < end; r++) {
    size_t off = (size_t)(r * len) * es;
    const void *x = (const char *)J->x->data + off, *res = (const char *)J->res->data + off;
    void *dst = (char *)J->out->data + off;
    float *y = dt == RLX_F32 ? dst : row; /* F32: summed and normalized in out itself */
    if (dt == RLX_F32) {
      vo->binary(RLX_BIN_ADD, x, 1, res, 1, y, len);
    } else {
      vo->load(row, x, dt, len);
      vo->load(other, res, dt, len);
      vo->binary(RLX_BIN_ADD, row, 1, other, 1, row, len);
    }
    if (J->bias) vo->binary(RLX_BIN_ADD, y, 1, J->bias, 1, y, len);
    if (J->rms) cpu_rms_norm_row_f32(y, y, len, J->gamma, J->beta, J->eps);
    else cpu_layer_norm_row_f32(y, y, len, J->gamma, J->beta, J->eps);
    if (dt != RLX_F32) vo->store(dst, dt, row, len);
  }
}

static rlx_status residual_norm_fast(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out,
                                     int rms) {
  int has_bias = n->a.has_bias != 0;
  residual_norm_job J = {.vo = cpu_vec(), .x = &in[0], .res = &in[1], .out = out,
                         .len = in[0].d[in[0].rank - 1], .eps = n->a.eps, .rms = rms};
  if (out->numel == 0) return RLX_OK;
  const int threads = cpu_ctx_threads(ctx);
  float *buf = malloc((size_t)(J.len * (3 + 2 * threads)) * sizeof(float));
  if (!buf) return rlx_set_error(RLX_ERR_NOMEM, "%s (node %d): out of memory", ir_ops[n->op].name, n->id);
  if (has_bias) J.vo->load(buf, in[2].data, in[2].dtype, J.len);
  J.vo->load(buf + J.len, in[2 + has_bias].data, in[2 + has_bias].dtype, J.len);
  J.vo->load(buf + 2 * J.len, in[3 + has_bias].data, in[3 + has_bias].dtype, J.len);
  J.bias = has_bias ? buf : NULL;
  J.gamma = buf + J.len;
  J.beta = buf + 2 * J.len;
  J.scratch = buf + 3 * J.len;
  cpu_parallel_for(ctx, out->numel / J.len, cpu_vec_grain(J.len), residual_norm_rows, &J);
  free(buf);
  return RLX_OK;
}

rlx_status cpu_FusedResidualLN(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in,
                               cpu_tensor *out) {
  if (in[0].dtype != RLX_F64) return residual_norm_fast(ctx, n, in, out, 0);
  return residual_norm(n, in, out, 0);
}

rlx_status cpu_FusedResidualRmsNorm(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in,
                                    cpu_tensor *out) {
  if (in[0].dtype != RLX_F64) return residual_norm_fast(ctx, n, in, out, 1);
  return residual_norm(n, in, out, 1);
}

/* ---------------------------------------------------------------- FusedSwiGLU */

/* F32/F16/BF16 in and out: silu(gate) * up per row, vectorized. */
typedef struct {
  const cpu_vec_ops *vo;
  const cpu_tensor *x;
  cpu_tensor *out;
  int64_t half;
  float *scratch; /* per thread: 2 * half */
} swiglu_job;

static void swiglu_rows(void *arg, int64_t begin, int64_t end, int thread) {
  swiglu_job *J = arg;
  const cpu_vec_ops *vo = J->vo;
  const int64_t h = J->half;
  const size_t in_es = (size_t)ir_dtypes[J->x->dtype].size, out_es = (size_t)ir_dtypes[J->out->dtype].size;
  float *gate = J->scratch + thread * 2 * h, *up = gate + h;
  for (int64_t r = begin; r < end; r++) {
    const char *src = (const char *)J->x->data + (size_t)(2 * h * r) * in_es;
    vo->load(gate, src, J->x->dtype, h);
    vo->load(up, src + (size_t)h * in_es, J->x->dtype, h);
    vo->act(RLX_ACT_SILU, 0.0f, gate, gate, h);
    vo->binary(RLX_BIN_MUL, gate, 1, up, 1, gate, h);
    vo->store((char *)J->out->data + (size_t)(h * r) * out_es, J->out->dtype, gate, h);
  }
}

rlx_status cpu_FusedSwiGLU(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  const cpu_tensor *x = &in[0];
  int64_t half = out->d[out->rank - 1];
  if (out->numel == 0) return RLX_OK;
  if (x->dtype != RLX_F64 && out->dtype != RLX_F64) {
    swiglu_job J = {.vo = cpu_vec(), .x = x, .out = out, .half = half};
    J.scratch = malloc((size_t)(2 * half * cpu_ctx_threads(ctx)) * sizeof(float));
    if (!J.scratch) return rlx_set_error(RLX_ERR_NOMEM, "FusedSwiGLU (node %d): out of memory", n->id);
    cpu_parallel_for(ctx, out->numel / half, cpu_vec_grain(2 * half), swiglu_rows, &J);
    free(J.scratch);
    return RLX_OK;
  }
  for (int64_t r = 0; r < out->numel / half; r++)
    for (int64_t j = 0; j < half; j++) {
      double gate = cpu_get(x, 2 * half * r + j), up = cpu_get(x, 2 * half * r + half + j);
      cpu_set(out, r * half + j, cpu_act_apply(RLX_ACT_SILU, gate, 0.0) * up);
    }
  return RLX_OK;
}

/* ---------------------------------------------------------------- regions */

/* One region input as the chain reads it: an element of the region's
 * output maps to an element of t through broadcasting and, with up2x,
 * through the resize_nearest_2x prologue (row y, column x of the upsampled
 * plane is row y/2, column x/2 of t), so nothing is materialized and every
 * dtype is read exactly. */
typedef struct {
  const cpu_tensor *t;
  int up2x;
  int64_t vdim[RLX_MAX_RANK];   /* dims the chain sees (H and W doubled with up2x) */
  int64_t stride[RLX_MAX_RANK]; /* contiguous strides of t */
} region_input;

/* A chain being evaluated one output element at a time. Each live step
 * (one the output depends on) holds its value at the current element in a
 * one-element tensor of the step's dtype, written with cpu_set/cpu_set_i —
 * so its rounding, wrapping and saturation are the unfused op's store. */
typedef struct {
  const ir_chain *chain;
  int n_ins;
  region_input *ins;
  unsigned char *in_live; /* per input: read by a live step */
  int64_t *offs;          /* per input: element offset for the current output element */
  unsigned char *live;    /* per step */
  uint64_t *cell_data;    /* per step: storage of its one element */
  cpu_tensor *cells;      /* per step: the one-element tensor over cell_data */
} region;

static void region_free(region *r) {
  free(r->ins);
  free(r->in_live);
  free(r->offs);
  free(r->live);
  free(r->cell_data);
  free(r->cells);
}

/* Allocates r for n's chain over n_ins region inputs and marks the live
 * steps and inputs (inference checked every reference). */
static rlx_status region_init(region *r, const ir_node *n, int n_ins) {
  const ir_chain *c = &n->a.chain;
  memset(r, 0, sizeof *r);
  r->chain = c;
  r->n_ins = n_ins;
  r->ins = calloc((size_t)n_ins, sizeof *r->ins);
  r->in_live = calloc((size_t)n_ins, 1);
  r->offs = calloc((size_t)n_ins, sizeof *r->offs);
  r->live = calloc((size_t)c->n, 1);
  r->cell_data = calloc((size_t)c->n, sizeof *r->cell_data);
  r->cells = calloc((size_t)c->n, sizeof *r->cells);
  if (!r->ins || !r->in_live || !r->offs || !r->live || !r->cell_data || !r->cells) {
    region_free(r);
    return rlx_set_error(RLX_ERR_NOMEM, "%s (node %d): out of memory", ir_ops[n->op].name, n->id);
  }
  r->live[c->n - 1] = 1;
  for (int j = c->n - 1; j >= 0; j--) {
    if (!r->live[j]) continue;
    const rlx_region_step *s = &c->s[j];
    int binary = s->kind == RLX_STEP_BIN || s->kind == RLX_STEP_CMP;
    for (int o = 0; o < 1 + binary; o++) {
      int k = o ? s->b : s->a;
      if (k >= 0) r->in_live[k] = 1;
      else r->live[-k - 1] = 1;
    }
  }
  return RLX_OK;
}

/* Binds region input 0 to `first` (read through the prologue when up2x)
 * and inputs 1.. to rest[0..n_ins-2], and types the step cells. */
static void region_bind(region *r, const cpu_tensor *first, const cpu_tensor *rest, int up2x) {
  for (int k = 0; k < r->n_ins; k++) {
    region_input *ri = &r->ins[k];
    ri->t = k == 0 ? first : &rest[k - 1];
    ri->up2x = k == 0 && up2x;
    cpu_strides(ri->t->rank, ri->t->d, ri->stride);
    for (int i = 0; i < ri->t->rank; i++) ri->vdim[i] = ri->t->d[i] * (ri->up2x && i >= 2 ? 2 : 1);
  }
  for (int j = 0; j < r->chain->n; j++) {
    const rlx_region_step *s = &r->chain->s[j];
    rlx_dtype t = s->a >= 0 ? r->ins[s->a].t->dtype : r->cells[-s->a - 1].dtype;
    if (s->kind == RLX_STEP_CMP) t = RLX_BOOL;
    if (s->kind == RLX_STEP_CAST) t = s->to;
    cpu_tensor *cell = &r->cells[j];
    memset(cell, 0, sizeof *cell);
    cell->data = &r->cell_data[j];
    cell->dtype = t;
    cell->numel = 1;
    cell->nbytes = (size_t)ir_dtypes[t].size;
  }
}

/* Dims of the chain's result with the current binding: the broadcast of
 * the live inputs as the chain sees them. Returns the rank. */
static int region_result_dims(const region *r, int64_t *dims) {
  int rank = 0;
  for (int k = 0; k < r->n_ins; k++)
    if (r->in_live[k] && r->ins[k].t->rank > rank) rank = r->ins[k].t->rank;
  for (int i = 0; i < rank; i++) dims[i] = 1;
  for (int k = 0; k < r->n_ins; k++) {
    const region_input *ri = &r->ins[k];
    if (!r->in_live[k]) continue;
    for (int i = 0; i < ri->t->rank; i++)
      if (ri->vdim[i] != 1) dims[rank - ri->t->rank + i] = ri->vdim[i];
  }
  return rank;
}

/* Element offset in ri->t of the output element at multi-index idx (of an
 * output of rank `rank`). */
static int64_t region_input_offset(const region_input *ri, const int64_t *idx, int rank) {
  int64_t off = 0;
  int lead = rank - ri->t->rank;
  for (int i = 0; i < ri->t->rank; i++) {
    if (ri->vdim[i] == 1) continue; /* broadcast */
    int64_t v = idx[lead + i];
    off += (ri->up2x && i >= 2 ? v / 2 : v) * ri->stride[i];
  }
  return off;
}

/* Operand k of a step: region input k at the current element, or step
 * -k-1's cell. */
static const cpu_tensor *region_operand(const region *r, int k, int64_t *at) {
  if (k >= 0) {
    *at = r->offs[k];
    return r->ins[k].t;
  }
  *at = 0;
  return &r->cells[-k - 1];
}

/* Computes one step into its cell, as the primitive op's kernel does. */
static void region_step(const region *r, int j) {
  const rlx_region_step *s = &r->chain->s[j];
  cpu_tensor *cell = &r->cells[j];
  int64_t ia, ib = 0;
  const cpu_tensor *ta = region_operand(r, s->a, &ia), *tb = NULL;
  if (s->kind == RLX_STEP_BIN || s->kind == RLX_STEP_CMP) tb = region_operand(r, s->b, &ib);
  int fl = ir_is_float(ta->dtype);
  switch (s->kind) {
  case RLX_STEP_ACT:
    if (fl) cpu_set(cell, 0, cpu_act_apply((rlx_act)s->op, cpu_get(ta, ia), s->alpha));
    else cpu_set_i(cell, 0, cpu_act_apply_i((rlx_act)s->op, cpu_get_i(ta, ia)));
    break;
  case RLX_STEP_BIN:
    if (fl) cpu_set(cell, 0, cpu_binop_apply_f((rlx_binop)s->op, cpu_get(ta, ia), cpu_get(tb, ib)));
    else cpu_set_i(cell, 0, cpu_binop_apply_i((rlx_binop)s->op, cpu_get_i(ta, ia), cpu_get_i(tb, ib)));
    break;
  case RLX_STEP_CMP:
    cpu_set_i(cell, 0, fl ? cpu_cmp_apply((rlx_cmpop)s->op, cpu_get(ta, ia), cpu_get(tb, ib))
                          : cpu_cmp_apply_i((rlx_cmpop)s->op, cpu_get_i(ta, ia), cpu_get_i(tb, ib)));
    break;
  case RLX_STEP_CAST:
    /* Cast: through double when either side is a float (float -> int
     * truncates and saturates, -> BOOL is != 0), else exact int64 (wraps).
     * F64 -> F16/BF16 rounds through F32 here (cpu_set), where the Cast
     * kernel rounds once: they can differ by one ulp on a double rounding. */
    if (fl || ir_is_float(cell->dtype)) cpu_set(cell, 0, cpu_get(ta, ia));
    else cpu_set_i(cell, 0, cpu_get_i(ta, ia));
    break;
  default:
    break;
  }
}

/* Evaluates the bound chain at every element of out (the chain's result
 * dims, out's dtype) and copies the last step's cell into out. */
static void region_run(const region *r, cpu_tensor *out) {
  const int last = r->chain->n - 1;
  size_t esize = (size_t)ir_dtypes[out->dtype].size;
  int64_t idx[RLX_MAX_RANK];
  for (int64_t i = 0; i < out->numel; i++) {
    cpu_unravel(i, out->rank, out->d, idx);
    for (int k = 0; k < r->n_ins; k++)
      if (r->in_live[k]) r->offs[k] = region_input_offset(&r->ins[k], idx, out->rank);
    for (int j = 0; j <= last; j++)
      if (r->live[j]) region_step(r, j);
    memcpy((char *)out->data + (size_t)i * esize, &r->cell_data[last], esize);
  }
}

/* The chain of n bound to `first` and rest[0 .. n_ins-2], as chain_eval.h
 * takes it; ins: n_ins pointers of storage. */
static cpu_chain region_chain(const ir_node *n, const cpu_tensor *first, const cpu_tensor *rest, int n_ins,
                              const cpu_tensor **ins) {
  ins[0] = first;
  for (int k = 1; k < n_ins; k++) ins[k] = &rest[k - 1];
  return (cpu_chain){&n->a.chain, n_ins, ins, n->a.prologue == RLX_PROLOGUE_RESIZE_NEAREST_2X};
}

rlx_status cpu_ElementwiseRegion(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in,
                                 cpu_tensor *out) {
  const cpu_tensor **ins = malloc((size_t)n->n_in * sizeof *ins);
  if (!ins) return rlx_set_error(RLX_ERR_NOMEM, "ElementwiseRegion (node %d): out of memory", n->id);
  cpu_chain c = region_chain(n, &in[0], &in[1], n->n_in, ins);
  rlx_status st = RLX_OK;
  if (cpu_chain_supported(&c, out->dtype)) {
    st = cpu_chain_run(ctx, &c, out);
  } else {
    region r;
    st = region_init(&r, n, n->n_in);
    if (st == RLX_OK) {
      region_bind(&r, &in[0], &in[1], c.up2x);
      region_run(&r, out);
      region_free(&r);
    }
  }
  free(ins);
  return st;
}

/* The chain runs once per batch input b (region inputs: in[b], then the
 * shared in[nb..]); result b fills the next rows of out (concatenation on
 * axis 0 is a contiguous block of rows). Every binding runs through the
 * chain evaluator when it takes all of them, else through the reference. */
rlx_status cpu_BatchElementwiseRegion(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in,
                                      cpu_tensor *out) {
  int nb = (int)n->a.num_batch_inputs, n_ins = n->n_in - nb + 1;
  const cpu_tensor **ins = malloc((size_t)n_ins * sizeof *ins);
  region r;
  rlx_status st = ins ? region_init(&r, n, n_ins) : RLX_ERR_NOMEM;
  if (st != RLX_OK) {
    free(ins);
    return st == RLX_ERR_NOMEM && !ins ? rlx_set_error(st, "BatchElementwiseRegion (node %d): out of memory", n->id)
                                       : st;
  }
  int fast = 1;
  for (int b = 0; fast && b < nb; b++) {
    cpu_chain c = region_chain(n, &in[b], &in[nb], n_ins, ins);
    fast = cpu_chain_supported(&c, out->dtype);
  }
  size_t esize = (size_t)ir_dtypes[out->dtype].size;
  int64_t row_numel = 1, row = 0;
  for (int i = 1; i < out->rank; i++) row_numel *= out->d[i];
  int fits = 1;
  for (int b = 0; fits && st == RLX_OK && b < nb; b++) {
    cpu_chain c = region_chain(n, &in[b], &in[nb], n_ins, ins);
    region_bind(&r, &in[b], &in[nb], c.up2x);
    cpu_tensor part = *out;
    fits = region_result_dims(&r, part.d) == out->rank && row + part.d[0] <= out->d[0];
    for (int i = 1; fits && i < out->rank; i++) fits = part.d[i] == out->d[i];
    if (!fits) break;
    part.data = (char *)out->data + (size_t)(row * row_numel) * esize;
    part.numel = part.d[0] * row_numel;
    part.nbytes = (size_t)part.numel * esize;
    if (fast) st = cpu_chain_run(ctx, &c, &part);
    else region_run(&r, &part);
    row += part.d[0];
  }
  region_free(&r);
  free(ins);
  if (st != RLX_OK) return st;
  if (!fits || row != out->d[0])
    return rlx_set_error(RLX_ERR_INTERNAL, "BatchElementwiseRegion (node %d): the results do not tile "
                         "the output", n->id);
  return RLX_OK;
}

/* ---------------------------------------------------------------- TransformRegion */

/* Each output element is copied (as bytes: every dtype exact) from the
 * input element found by mapping its coordinates back through the
 * transforms, last first: resize_nearest_2x maps row y, column x to y/2,
 * x/2 of the same [n, c] plane. */
rlx_status cpu_TransformRegion(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in,
                               cpu_tensor *out) {
  (void)ctx;
  const cpu_tensor *x = &in[0];
  size_t esize = (size_t)ir_dtypes[x->dtype].size;
  int64_t h = x->d[2], w = x->d[3], oh = out->d[2], ow = out->d[3];
  for (int64_t i = 0; i < out->numel; i++) {
    int64_t col = i % ow, rowi = i / ow % oh, plane = i / (ow * oh);
    for (int t = n->a.transforms.n - 1; t >= 0; t--) {
      col /= 2; /* resize_nearest_2x, the only transform (checked by inference) */
      rowi /= 2;
    }
    int64_t src = (plane * h + rowi) * w + col;
    memcpy((char *)out->data + (size_t)i * esize, (const char *)x->data + (size_t)src * esize, esize);
  }
  return RLX_OK;
}

/* ---------------------------------------------------------------- FusedAttentionBlock */

/* F32/F16/BF16: the projections through cpu_gemm (x and the weights read
 * in their dtype), rope and the tiled attention kernel on f32 buffers, the
 * output projection straight into out when it is F32. */
static rlx_status attention_block_fast(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  const ir_attrs *a = &n->a;
  const int64_t B = in[0].d[0], S = in[0].d[1], hidden = in[0].d[2], E = out->d[2];
  const int64_t qd = a->num_heads * a->head_dim, kvd = a->num_kv_heads * a->head_dim, rows = B * S;
  const int64_t half = a->n_rot / 2;
  const size_t q_n = (size_t)(rows * qd), kv_n = (size_t)(rows * kvd);
  const size_t table_n = n->n_in == 7 ? (size_t)in[5].numel : 0; /* [S or B*S, n_rot/2] */
  /* Q, K, V, attention output, cos, sin, and the result unless out is F32 */
  size_t total = 2 * q_n + 2 * kv_n + 2 * table_n + (out->dtype == RLX_F32 ? 0 : (size_t)out->numel);
  float *buf = malloc((total ? total : 1) * sizeof *buf);
  if (!buf) return rlx_set_error(RLX_ERR_NOMEM, "FusedAttentionBlock (node %d): out of memory", n->id);
  float *q = buf, *k = q + q_n, *v = k + kv_n, *att = v + kv_n, *cos_t = att + q_n, *sin_t = cos_t + table_n;
  float *y = out->dtype == RLX_F32 ? out->data : sin_t + table_n;
  gemm_operand x = gemm_matrix(&in[0], hidden);
  gemm_operand wq = gemm_matrix(&in[1], qd), wk = gemm_matrix(&in[2], kvd), wv = gemm_matrix(&in[3], kvd);
  cpu_gemm_prepacked(ctx, 1, rows, qd, hidden, &x, &wq, in[1].prepack, q, qd, 0, NULL);
  cpu_gemm_prepacked(ctx, 1, rows, kvd, hidden, &x, &wk, in[2].prepack, k, kvd, 0, NULL);
  cpu_gemm_prepacked(ctx, 1, rows, kvd, hidden, &x, &wv, in[3].prepack, v, kvd, 0, NULL);
  if (n->n_in == 7) {
    /* one [S, n_rot/2] table for every batch, or one per batch */
    int64_t table_batch_stride = in[5].rank == 3 ? S * half : 0;
    cpu_vec()->load(cos_t, in[5].data, in[5].dtype, (int64_t)table_n);
    cpu_vec()->load(sin_t, in[6].data, in[6].dtype, (int64_t)table_n);
    cpu_rope_apply_f32(q, B, S, a->num_heads, a->head_dim, a->n_rot, (rlx_rope_mode)a->rope_mode, cos_t,
                       sin_t, table_batch_stride);
    cpu_rope_apply_f32(k, B, S, a->num_kv_heads, a->head_dim, a->n_rot, (rlx_rope_mode)a->rope_mode, cos_t,
                       sin_t, table_batch_stride);
  }
  cpu_attention_params p;
  cpu_attention_params_from_attrs(&p, a);
  p.batch = B;
  p.q_len = S;
  p.kv_len = S;
  rlx_status st = cpu_attention_fast(ctx, &p, RLX_F32, RLX_F32, q, k, v, NULL, att);
  if (st == RLX_OK) {
    gemm_operand ao = {att, RLX_F32, 0, qd, 0, NULL}, wo = gemm_matrix(&in[4], E);
    cpu_gemm_prepacked(ctx, 1, rows, E, qd, &ao, &wo, in[4].prepack, y, E, 0, NULL);
    if (out->dtype != RLX_F32) store_f32_to(ctx, out, y, E);
  }
  free(buf);
  return st;
}

rlx_status cpu_FusedAttentionBlock(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in,
                                   cpu_tensor *out) {
  const ir_attrs *a = &n->a;
  const int64_t B = in[0].d[0], S = in[0].d[1], hidden = in[0].d[2], E = out->d[2];
  const int64_t qd = a->num_heads * a->head_dim, kvd = a->num_kv_heads * a->head_dim;
  const int64_t rows = B * S;
  if (out->numel == 0) return RLX_OK;
  if (out->dtype != RLX_F64) return attention_block_fast(ctx, n, in, out);
  enum { X, WQ, WK, WV, WO, COS, SIN, Q, K, V, ATT, Y, N_BUF };
  double *buf[N_BUF] = {0};
  int n_load = n->n_in;
  for (int i = 0; i < n_load; i++) buf[i] = cpu_load_f64(&in[i]);
  buf[Q] = alloc_f64(rows * qd);
  buf[K] = alloc_f64(rows * kvd);
  buf[V] = alloc_f64(rows * kvd);
  buf[ATT] = alloc_f64(rows * qd);
  buf[Y] = alloc_f64(rows * E);
  rlx_status st = RLX_OK;
  for (int i = 0; i < N_BUF; i++)
    if (!buf[i] && (i >= Q || i < n_load)) {
      st = rlx_set_error(RLX_ERR_NOMEM, "FusedAttentionBlock (node %d): out of memory", n->id);
      goto done;
    }
  if ((st = cpu_matmul_f64(buf[X], buf[WQ], buf[Q], rows, hidden, qd)) != RLX_OK ||
      (st = cpu_matmul_f64(buf[X], buf[WK], buf[K], rows, hidden, kvd)) != RLX_OK ||
      (st = cpu_matmul_f64(buf[X], buf[WV], buf[V], rows, hidden, kvd)) != RLX_OK)
    goto done;
  if (n->n_in == 7) {
    /* one [S, n_rot/2] table for every batch, or one per batch */
    int64_t table_batch_stride = in[COS].rank == 3 ? S * (a->n_rot / 2) : 0;
    cpu_rope_apply_f64(buf[Q], B, S, a->num_heads, a->head_dim, a->n_rot, (rlx_rope_mode)a->rope_mode,
                       buf[COS], buf[SIN], table_batch_stride);
    cpu_rope_apply_f64(buf[K], B, S, a->num_kv_heads, a->head_dim, a->n_rot,
                       (rlx_rope_mode)a->rope_mode, buf[COS], buf[SIN], table_batch_stride);
  }
  cpu_attention_params p;
  cpu_attention_params_from_attrs(&p, a);
  p.batch = B;
  p.q_len = S;
  p.kv_len = S;
  if ((st = cpu_attention_f64(&p, buf[Q], buf[K], buf[V], buf[ATT])) != RLX_OK ||
      (st = cpu_matmul_f64(buf[ATT], buf[WO], buf[Y], rows, qd, E)) != RLX_OK)
    goto done;
  cpu_store_f64(out, buf[Y]);
done:
  for (int i = 0; i < N_BUF; i++) free(buf[i]);
  return st;
}
