/* lower_matmul.c — matrix products: MatMul and FusedMatMulBiasAct through
 * the GEMV kernels at decode rows or cuBLASLt (cuda_matmul.c), and
 * DequantMatMul of packed blocks (the integer GEMV, or weights decoded
 * into the plan's scratch) or of 16-bit weights. */
#include "cuda_plan.h"

#include <stdlib.h>

/* A product of few rows (decode) through the GEMV kernels, where they take
 * it (b of w_dtype: d's dtype, or a DequantMatMul's 16-bit weights): 1
 * (emitted), 0 (not taken: the caller uses cuBLASLt), or an error. */
static int emit_gemv(cuda_plan *pl, const ir_node *n, const cuda_gemm_desc *d, rlx_dtype w_dtype, double alpha,
                     rlx_status *st) {
  *st = RLX_OK;
  if (d->batch != 1 || d->pa || !cu_gemv_supported(d->dtype, w_dtype, d->M, d->N, d->K, d->b_trans, d->a, d->b))
    return 0;
  cuda_gemm_desc r = *d;
  cuda_fuse_site site = {.d = &r, .w_dtype = w_dtype, .alpha = alpha};
  if (cuda_fuse(pl, CUDA_FUSE_GLU_GEMV, n, &site)) return (*st = site.st), 1;
  /* the residual add that reads the product, computed in its epilogue (r
   * then writes it); a product right after another of the same x (q, k, v)
   * may join that one's launch as one more segment */
  cuda_fuse(pl, CUDA_FUSE_RESIDUAL_GEMM, n, &site);
  cuda_step *s = cuda_fuse(pl, CUDA_FUSE_GEMV_SHARED_X, n, &site) ? site.joined : NULL;
  cu_gemv_args *a = s ? s->args : NULL;
  if (!a) {
    cu_gemv_args norm = {0};
    cuda_fuse(pl, CUDA_FUSE_GEMV_NORM, n, &(cuda_fuse_site){.d = &r, .out = r.c, .args = &norm});
    s = cuda_new_step(pl, ST_GEMV, n);
    if (!s || !(a = cuda_new_args(s, sizeof *a))) return (*st = cuda_nomem(n)), 1;
    *a = norm;
    a->x = d->a, a->dtype = d->dtype, a->w_dtype = w_dtype, a->act = d->act, a->alpha = (float)alpha;
    a->w_trans = d->b_trans;
    a->M = d->M, a->K = d->K, a->pdl = pl->pdl;
  }
  cu_gemv_seg *g = &a->seg[a->nseg++];
  g->w = d->b, g->bias = d->bias, g->out = r.c, g->resid = r.resid, g->N = d->N;
  size_t part = 0, counters = 0;
  cu_gemv_plan(a, &part, &counters);
  if (s->dev_scratch) { /* the split's scratch for all segments, anew */
    cudaFree(s->dev_scratch);
    s->dev_scratch = NULL;
  }
  float *pp = NULL;
  unsigned *cp = NULL;
  if (counters) *st = cuda_step_scratch(s, part, counters, &pp, &cp);
  cu_gemv_set_scratch(a, pp, cp);
  return 1;
}

static rlx_status emit_gemm(cuda_plan *pl, const ir_node *n, const cuda_gemm_desc *d, int *fused) {
  cuda_step *s = cuda_new_step(pl, ST_GEMM, n);
  if (!s) return cuda_nomem(n);
  cuda_gemm *gm;
  rlx_status st = cuda_gemm_prepare(d, pl->workspace, &gm, fused);
  if (st) return st;
  s->args = gm;
  return RLX_OK;
}

/* The product operand b of node n: a [K, N] tensor, or read through a
 * skipped transpose as [N, K] (b_trans). */
const void *cuda_matmul_b(cuda_plan *pl, const ir_node *n, int k, int *b_trans) {
  rlx_node src = n->in[k];
  *b_trans = 0;
  if (pl->skip[src]) {
    *b_trans = 1;
    return in_ptr(pl, &pl->g->nodes[src], 0);
  }
  return in_ptr(pl, n, k);
}

rlx_status cuda_lower_matmul(cuda_plan *pl, const ir_node *n) {
  const rlx_graph *g = pl->g;
  const ir_type *ta = ir_in(g, n, 0), *tb = ir_in(g, n, 1), *out = &n->out[0];
  const int64_t M = ta->shape.rank == 1 ? 1 : ta->shape.d[ta->shape.rank - 2], K = ta->shape.d[ta->shape.rank - 1];
  const int64_t N = tb->shape.rank == 1 ? 1 : tb->shape.d[tb->shape.rank - 1];
  const int64_t total = numel_of(out);
  if (total == 0) return RLX_OK;
  if (K == 0) {
    cuda_step *s = cuda_new_step(pl, ST_MEMSET, n);
    if (!s) return cuda_nomem(n);
    s->dst = out_ptr(pl, n), s->bytes = rlx_dtype_nbytes(out->dtype, total);
    return RLX_OK;
  }
  cuda_gemm_desc d = {0};
  d.dtype = out->dtype, d.K = K, d.N = N, d.tf32 = pl->tf32, d.act = RLX_ACT_NONE;
  d.a = in_ptr(pl, n, 0), d.c = out_ptr(pl, n);
  d.b = cuda_matmul_b(pl, n, 1, &d.b_trans);
  const int a_br = ta->shape.rank > 2 ? ta->shape.rank - 2 : 0, b_br = tb->shape.rank > 2 ? tb->shape.rank - 2 : 0;
  const int64_t batch = total / (M * N);
  int fused;
  if (b_br == 0) { /* one weight for every row of a: a single product over all rows */
    d.M = M * batch, d.batch = 1;
    rlx_status st;
    if (!pl->no_gemv && emit_gemv(pl, n, &d, d.dtype, 0.0, &st)) return st;
    cuda_fuse(pl, CUDA_FUSE_RESIDUAL_GEMM, n, &(cuda_fuse_site){.d = &d});
    return emit_gemm(pl, n, &d, &fused);
  }
  /* batch offsets (in matrices) of a and b per output matrix, as the CPU computes them */
  const int br = a_br > b_br ? a_br : b_br;
  int64_t bd[RLX_MAX_RANK], sa[RLX_MAX_RANK], sb[RLX_MAX_RANK];
  for (int i = 0; i < br; i++) {
    int ia = a_br - br + i, ib = b_br - br + i;
    int64_t da = ia >= 0 ? ta->shape.d[ia] : 1, db = ib >= 0 ? tb->shape.d[ib] : 1;
    bd[i] = da == 1 ? db : da;
  }
  for (int pass = 0; pass < 2; pass++) {
    const ir_type *t = pass ? tb : ta;
    int rank = pass ? b_br : a_br;
    int64_t *str = pass ? sb : sa, s = 1;
    for (int i = br - 1; i >= 0; i--) {
      int j = rank - br + i;
      if (j < 0 || t->shape.d[j] == 1) str[i] = 0;
      else str[i] = s, s *= t->shape.d[j];
    }
  }
  int64_t *oa = malloc((size_t)batch * sizeof *oa), *ob = malloc((size_t)batch * sizeof *ob);
  if (!oa || !ob) {
    free(oa), free(ob);
    return cuda_nomem(n);
  }
  int affine = 1;
  for (int64_t bi = 0; bi < batch; bi++) {
    int64_t rest = bi, xa = 0, xb = 0;
    for (int i = br - 1; i >= 0; i--) {
      int64_t idx = rest % bd[i];
      rest /= bd[i];
      xa += idx * sa[i], xb += idx * sb[i];
    }
    oa[bi] = xa, ob[bi] = xb;
    if (bi > 0 && (xa != bi * oa[1] || xb != bi * ob[1])) affine = 0;
  }
  rlx_status st;
  d.M = M;
  const size_t es = elem_size(out->dtype);
  if (affine && batch < 0x7fffffff) {
    d.batch = batch;
    d.stride_a = batch > 1 ? oa[1] * M * K : 0;
    d.stride_b = batch > 1 ? ob[1] * K * N : 0;
    d.stride_c = M * N;
    st = emit_gemm(pl, n, &d, &fused);
  } else { /* broadcasting that no single stride expresses: one product per output matrix */
    const void **pa = malloc((size_t)batch * sizeof *pa), **pb = malloc((size_t)batch * sizeof *pb);
    void **pc = malloc((size_t)batch * sizeof *pc);
    if (!pa || !pb || !pc) {
      st = cuda_nomem(n);
    } else {
      for (int64_t bi = 0; bi < batch; bi++) {
        pa[bi] = (const uint8_t *)d.a + (size_t)(oa[bi] * M * K) * es;
        pb[bi] = (const uint8_t *)d.b + (size_t)(ob[bi] * K * N) * es;
        pc[bi] = (uint8_t *)d.c + (size_t)(bi * M * N) * es;
      }
      d.batch = 1, d.n_ptrs = (int)batch, d.pa = pa, d.pb = pb, d.pc = pc;
      st = emit_gemm(pl, n, &d, &fused);
    }
    free(pa), free(pb), free(pc);
  }
  free(oa), free(ob);
  return st;
}

rlx_status cuda_lower_fused_matmul(cuda_plan *pl, const ir_node *n) {
  const ir_type *tw = ir_in(pl->g, n, 1), *out = &n->out[0];
  const int64_t K = tw->shape.d[0], N = tw->shape.d[1], total = numel_of(out);
  if (total == 0) return RLX_OK;
  if (K == 0) return cuda_emit_bias_act(pl, n, (int)n->a.act, n->a.alpha, 0, in_ptr(pl, n, 2));
  cuda_gemm_desc d = {0};
  d.dtype = out->dtype, d.M = total / N, d.N = N, d.K = K, d.batch = 1, d.tf32 = pl->tf32;
  d.a = in_ptr(pl, n, 0), d.c = out_ptr(pl, n), d.bias = in_ptr(pl, n, 2), d.act = (int)n->a.act;
  d.b = cuda_matmul_b(pl, n, 1, &d.b_trans);
  int fused;
  rlx_status st;
  if (!pl->no_gemv && emit_gemv(pl, n, &d, d.dtype, n->a.alpha, &st)) return st;
  st = emit_gemm(pl, n, &d, &fused);
  if (st || fused == CUDA_FUSED_ALL) return st;
  return cuda_emit_bias_act(pl, n, (int)n->a.act, n->a.alpha, 1, fused == CUDA_FUSED_NONE ? d.bias : NULL);
}

/* Whether DequantMatMul n of 16-bit weights widens them into the plan's
 * scratch: under x of another dtype, where the GEMV does not take it. */
static int half_weight_widened(const cuda_plan *pl, const ir_node *n, int64_t M, int64_t K) {
  const rlx_dtype xt = ir_in(pl->g, n, 0)->dtype, wt = ir_in(pl->g, n, 1)->dtype;
  return xt != wt && (pl->no_gemv || M > CU_GEMV_MAX_M || K % 8 != 0);
}

/* Whether DequantMatMul n runs as a BF16 product (emit_bf16_gemm): F32 x
 * at prefill rows (past the decode kernels' M), with BF16 or block
 * weights; F16 weights, and every product under RLX_QMATMUL_REF=1 (the
 * reference), keep the exact F32 product. */
static int bf16_prefill(const cuda_plan *pl, const ir_node *n, int64_t M, int64_t K) {
  const rlx_dtype xt = ir_in(pl->g, n, 0)->dtype, wt = ir_in(pl->g, n, 1)->dtype;
  if (xt != RLX_F32 || pl->qmm_exact) return 0;
  if (wt == RLX_BF16) return half_weight_widened(pl, n, M, K) && M > CU_GEMV_MAX_M;
  return rlx_dtype_is_block(wt) && M > CU_QMM_MAX_M;
}

/* Bytes of the BF16 product's scratch: the decoded weights (block w; 256-
 * byte aligned), then x rounded to BF16. */
static size_t bf16_weights_bytes(const ir_type *w) {
  if (!rlx_dtype_is_block(w->dtype)) return 0;
  return ((size_t)(w->shape.d[0] * w->shape.d[1]) * 2 + 255) & ~(size_t)255;
}

/* DequantMatMul n of F32 x [M, K] at prefill rows on the tensor cores in
 * BF16, as llama.cpp's CUDA prefill rounds its operands: x rounded to BF16
 * into the scratch, block weights decoded to BF16 there (BF16 weights read
 * in place), F32 accumulation and output. A product of F32 operands would
 * run on the F32 units at a twelfth of the BF16 rate and read decoded
 * weights twice as wide. */
static rlx_status emit_bf16_gemm(cuda_plan *pl, const ir_node *n, int64_t M, int64_t N, int64_t K) {
  const ir_type *w = ir_in(pl->g, n, 1);
  const size_t wbytes = bf16_weights_bytes(w);
  if (wbytes + (size_t)(M * K) * 2 > pl->scratch_bytes)
    return rlx_set_error(RLX_ERR_INTERNAL, "CUDA: node %d: the scratch holds no BF16 operands", n->id);
  pl->qx_valid = 0; /* the scratch no longer holds a quantized x */
  char *scr = pl->scratch;
  cuda_gemm_desc d = {0};
  d.dtype = RLX_F32, d.ab_bf16 = 1, d.M = M, d.N = N, d.K = K, d.batch = 1, d.b_trans = 1;
  d.a = scr + wbytes, d.b = wbytes ? (const void *)scr : in_ptr(pl, n, 1), d.c = out_ptr(pl, n);
  d.act = RLX_ACT_NONE;
  cuda_step *s = wbytes ? cuda_new_step(pl, ST_DEQUANT, n) : NULL;
  if (wbytes && !s) return cuda_nomem(n);
  if (s) s->src = in_ptr(pl, n, 1), s->dtype = w->dtype, s->dst = scr, s->dtype2 = RLX_BF16, s->n0 = N, s->n1 = K;
  if (!(s = cuda_new_step(pl, ST_DEQUANT, n))) return cuda_nomem(n);
  s->src = in_ptr(pl, n, 0), s->dtype = RLX_F32, s->dst = scr + wbytes, s->dtype2 = RLX_BF16, s->n0 = M, s->n1 = K;
  cuda_fuse(pl, CUDA_FUSE_RESIDUAL_GEMM, n, &(cuda_fuse_site){.d = &d});
  int fused;
  return emit_gemm(pl, n, &d, &fused);
}

/* DequantMatMul n as a cuBLASLt product with w [N, K] read as op T: w as
 * it is (16-bit w under x of its dtype), or with decode, first decoded
 * (blocks) or widened (16-bit) into the plan's scratch in x's dtype. */
static rlx_status emit_weight_gemm(cuda_plan *pl, const ir_node *n, int64_t M, int64_t N, int64_t K, int decode) {
  const ir_type *x = ir_in(pl->g, n, 0), *w = ir_in(pl->g, n, 1);
  cuda_gemm_desc d = {0};
  d.dtype = x->dtype, d.M = M, d.N = N, d.K = K, d.batch = 1, d.b_trans = 1, d.tf32 = pl->tf32;
  d.a = in_ptr(pl, n, 0), d.b = in_ptr(pl, n, 1), d.c = out_ptr(pl, n), d.act = RLX_ACT_NONE;
  if (decode) {
    if ((size_t)(N * K) * elem_size(x->dtype) > pl->scratch_bytes)
      return rlx_set_error(RLX_ERR_INTERNAL, "CUDA: node %d: the scratch holds no decoded weights", n->id);
    pl->qx_valid = 0; /* the scratch no longer holds a quantized x */
    cuda_step *s = cuda_new_step(pl, ST_DEQUANT, n);
    if (!s) return cuda_nomem(n);
    s->src = d.b, s->dtype = w->dtype, s->dst = pl->scratch, s->dtype2 = x->dtype, s->n0 = N, s->n1 = K;
    d.b = pl->scratch;
  }
  cuda_fuse(pl, CUDA_FUSE_RESIDUAL_GEMM, n, &(cuda_fuse_site){.d = &d});
  int fused;
  return emit_gemm(pl, n, &d, &fused);
}

/* DequantMatMul of F16/BF16 weights w [N, K] (a 16-bit GGUF matrix read in
 * place), the CPU's rule: x as given times the widened weights, F32
 * accumulation. At decode rows the GEMV widens w in registers as it
 * streams (2 bytes an element read); at more rows cuBLASLt reads w as op T,
 * first widened into the plan's scratch when x has another dtype (F32 x:
 * an exact F32 product). */
static rlx_status lower_half_weight_matmul(cuda_plan *pl, const ir_node *n, int64_t M, int64_t N, int64_t K) {
  const ir_type *x = ir_in(pl->g, n, 0), *w = ir_in(pl->g, n, 1);
  if (bf16_prefill(pl, n, M, K)) return emit_bf16_gemm(pl, n, M, N, K);
  if (half_weight_widened(pl, n, M, K)) return emit_weight_gemm(pl, n, M, N, K, 1);
  cuda_gemm_desc d = {0};
  d.dtype = x->dtype, d.M = M, d.N = N, d.K = K, d.batch = 1, d.b_trans = 1;
  d.a = in_ptr(pl, n, 0), d.b = in_ptr(pl, n, 1), d.c = out_ptr(pl, n), d.act = RLX_ACT_NONE;
  rlx_status st;
  if (!pl->no_gemv && emit_gemv(pl, n, &d, w->dtype, 0.0, &st)) return st;
  if (w->dtype != x->dtype)
    return rlx_set_error(RLX_ERR_INTERNAL, "CUDA: node %d (DequantMatMul of %s): the GEMV did not take it", n->id,
                         rlx_dtype_name(w->dtype));
  return emit_weight_gemm(pl, n, M, N, K, 0);
}

rlx_status cuda_lower_quant(cuda_plan *pl, const ir_node *n) {
  const ir_type *x = ir_in(pl->g, n, 0), *out = &n->out[0];
  if (n->op == RLX_OP_Dequantize || n->op == RLX_OP_Quantize) {
    const int64_t K = x->shape.rank ? x->shape.d[x->shape.rank - 1] : 1;
    cuda_step *s = cuda_new_step(pl, n->op == RLX_OP_Quantize ? ST_QUANTIZE : ST_DEQUANT, n);
    if (!s) return cuda_nomem(n);
    s->src = in_ptr(pl, n, 0), s->dtype = x->dtype, s->dst = out_ptr(pl, n), s->dtype2 = out->dtype;
    s->n0 = K ? numel_of(x) / K : 0, s->n1 = K;
    return RLX_OK;
  }
  const ir_type *w = ir_in(pl->g, n, 1);
  const int64_t N = w->shape.d[0], K = w->shape.d[1], M = numel_of(out) / (N ? N : 1);
  if (numel_of(out) == 0) return RLX_OK;
  if (K == 0) {
    cuda_step *s = cuda_new_step(pl, ST_MEMSET, n);
    if (!s) return cuda_nomem(n);
    s->dst = out_ptr(pl, n), s->bytes = rlx_dtype_nbytes(out->dtype, numel_of(out));
    return RLX_OK;
  }
  if (!rlx_dtype_is_block(w->dtype)) return lower_half_weight_matmul(pl, n, M, N, K);
  if (M <= CU_QMM_MAX_M && pl->qmm_exact) {
    cuda_step *s = cuda_new_step(pl, ST_QMM, n);
    if (!s) return cuda_nomem(n);
    s->src = in_ptr(pl, n, 0), s->dtype = x->dtype, s->aux = in_ptr(pl, n, 1), s->dtype2 = w->dtype;
    s->dst = out_ptr(pl, n), s->n0 = M, s->n1 = N, s->n2 = K;
    return RLX_OK;
  }
  if (M <= CU_QMM_MAX_M) {
    /* decode: x quantized into the scratch once for consecutive products
     * of the same x (q, k, v of a layer), then the integer GEMV */
    const size_t xslot = plan_input_slot(n, 0);
    const int folded = pl->folded[n->id];
    if (!pl->qx_valid || pl->qx_slot != xslot || pl->qx_folded != folded || pl->qx_M != M || pl->qx_K != K) {
      cuda_step *q = cuda_new_step(pl, ST_QUANT_X, n);
      cu_quant_x_args *qa = q ? cuda_new_args(q, sizeof *qa) : NULL;
      if (!qa) return cuda_nomem(n);
      qa->x = in_ptr(pl, n, 0), qa->x_dtype = x->dtype, qa->qx = pl->scratch, qa->M = M, qa->K = K;
      qa->pdl = pl->pdl;
      cuda_fuse(pl, CUDA_FUSE_NORM_QUANT, n, &(cuda_fuse_site){.args = qa});   /* the RmsNorm of x, here */
      cuda_fuse(pl, CUDA_FUSE_SWIGLU_QUANT, n, &(cuda_fuse_site){.args = qa}); /* or the SwiGLU of x */
      pl->qx_valid = 1, pl->qx_slot = xslot, pl->qx_folded = folded, pl->qx_M = M, pl->qx_K = K;
      pl->qx_norm_ssq = cu_quant_x_norm_deferred(qa) ? cu_qx_ssq(pl->scratch, M, K) : NULL;
      pl->qx_norm_eps = (float)qa->norm.eps;
    }
    /* the residual add that reads the product, computed in its epilogue */
    cuda_gemm_desc r = {0};
    r.dtype = out->dtype, r.M = M, r.N = N, r.K = K, r.a = in_ptr(pl, n, 0), r.b = in_ptr(pl, n, 1);
    r.c = out_ptr(pl, n);
    cuda_fuse_site site = {.d = &r, .w_dtype = w->dtype};
    cuda_fuse(pl, CUDA_FUSE_RESIDUAL_GEMM, n, &site);
    /* a product right after another of the same quantized x (q, k, v)
     * may join its launch as one more segment */
    cuda_step *prev = cuda_fuse(pl, CUDA_FUSE_QMV_SHARED_X, n, &site) ? site.joined : NULL;
    cu_qmv_args *a = prev ? prev->args : NULL;
    if (!a) {
      cuda_step *s = cuda_new_step(pl, ST_QMV, n);
      if (!s || !(a = cuda_new_args(s, sizeof *a))) return cuda_nomem(n);
      a->qx = pl->scratch, a->scheme = w->dtype, a->out_dtype = out->dtype, a->M = M, a->K = K;
      a->pdl = pl->pdl, a->norm_ssq = pl->qx_norm_ssq, a->norm_eps = pl->qx_norm_eps;
    }
    a->seg[a->nseg].w = in_ptr(pl, n, 1), a->seg[a->nseg].out = r.c, a->seg[a->nseg].resid = r.resid;
    a->seg[a->nseg].N = N;
    a->nseg++;
    cu_qmv_plan(a);
    return RLX_OK;
  }
  /* prefill: dequantize into the plan's scratch, then a tensor-core product with w^T */
  if (bf16_prefill(pl, n, M, K)) return emit_bf16_gemm(pl, n, M, N, K);
  return emit_weight_gemm(pl, n, M, N, K, 1);
}

/* Bytes of scratch node n needs (0: none): its dequantized or widened
 * weights (large M) or its quantized x (small M). */
size_t cuda_quant_scratch_bytes(const cuda_plan *pl, const ir_node *n) {
  if (n->op != RLX_OP_DequantMatMul) return 0;
  const ir_type *x = ir_in(pl->g, n, 0), *w = ir_in(pl->g, n, 1);
  const int64_t N = w->shape.d[0], K = w->shape.d[1];
  const int64_t M = N ? numel_of(&n->out[0]) / N : 0;
  if (!K || !M) return 0;
  if (bf16_prefill(pl, n, M, K)) return bf16_weights_bytes(w) + (size_t)(M * K) * 2;
  const size_t widened = (size_t)(N * K) * elem_size(x->dtype);
  if (!rlx_dtype_is_block(w->dtype)) return half_weight_widened(pl, n, M, K) ? widened : 0;
  return M > CU_QMM_MAX_M ? widened : cu_qx_bytes(M, K);
}
