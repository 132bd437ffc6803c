/* cuda_fuse.c — the CUDA backend's own fusions: launches that stand for
 * several nodes (a residual add in its product's GEMM, the GLU, the norm
 * and the rope in a GEMV launch, a cast in the cache copy, launches joined
 * into one). They are not graph rewrites of the pass layer (fuse.h): what
 * they make is a launch of this backend, not a node the CPU could run, and
 * most of them are decided only once the memory planner has placed the
 * buffers (the planner may give an output the bytes of an input the
 * launch still reads).
 *
 * One table, a row per fusion (cuda_fusion in cuda_plan.h): its name
 * (RLX_TRACE counts), its match, run over the graph before lowering (it
 * marks the nodes the fusion may take; NULL where the fusion is decided at
 * lowering alone, from the launch just emitted), and its emit, which a
 * lowering calls through cuda_fuse where the fusion may apply (1: taken).
 * RLX_CUDA_FUSE=0 turns every row off: no match runs and cuda_fuse takes
 * nothing, so each node gets launches of its own. */
#include "cuda_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Node j adds no launch to a run: a leaf, a view, absorbed by its
 * consumers, or folded (run once at set-up). */
static int launches_nothing(const cuda_plan *pl, int j) {
  return ir_ops[pl->g->nodes[j].op].category == RLX_CAT_LEAF || pl->mem.view[j] || pl->skip[j] || pl->folded[j];
}

/* No node strictly between from and to launches, but `except` (-1: none):
 * a launch at from's place may then stand for one at to's. */
static int quiet_between(const cuda_plan *pl, int from, int to, int except) {
  for (int j = from + 1; j < to; j++)
    if (j != except && !launches_nothing(pl, j)) return 0;
  return 1;
}

/* Residual adds a GEMM can compute in its epilogue: add = MatMul + r (either
 * side) with r of the add's shape and dtype (no broadcasting), the MatMul
 * (or DequantMatMul) a single product over all rows (rank-2 weight, at
 * least 16 rows, or at most CU_GEMV_MAX_M: the decode GEMV kernels add it
 * in theirs; 9-15 rows go to cuBLASLt without it), read only by the add,
 * and nothing that runs between the two (so the GEMM may run at the
 * product's place and its operands are still intact). emit_residual_gemm
 * checks the buffers at lowering. */
#define RESID_MIN_ROWS 16
static void match_residual_gemm(cuda_plan *pl, const int *uses) {
  const rlx_graph *g = pl->g;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    if (n->op != RLX_OP_Binary || n->a.binop != RLX_BIN_ADD || n->n_in != 2 || pl->folded[i] || pl->mem.view[i])
      continue;
    for (int side = 0; side < 2; side++) {
      const int mm = n->in[side], r = n->in[1 - side];
      const ir_node *m = &g->nodes[mm];
      const int dq = m->op == RLX_OP_DequantMatMul; /* w [N, K] */
      if ((m->op != RLX_OP_MatMul && !dq) || mm == r || uses[mm] != 1 || pl->folded[mm] || pl->resid_add[mm] >= 0)
        continue;
      const ir_type *ta = ir_in(g, m, 0), *tb = ir_in(g, m, 1), *tr = &g->nodes[r].out[0];
      const int64_t cols = tb->shape.rank == 2 ? tb->shape.d[dq ? 0 : 1] : 0, rows = cols ? numel_of(&m->out[0]) / cols : 0;
      /* decode rows (the GEMV kernels add it in their epilogue) or GEMM rows */
      if (tb->shape.rank != 2 || ta->shape.rank < 2 || tr->dtype != n->out[0].dtype ||
          !ir_shape_eq(&tr->shape, &n->out[0].shape) || !ir_shape_eq(&m->out[0].shape, &n->out[0].shape) ||
          (rows > CU_GEMV_MAX_M && rows < RESID_MIN_ROWS))
        continue;
      if (!quiet_between(pl, mm, i, -1)) continue;
      pl->resid_add[mm] = i;
      break;
    }
  }
}

/* The product d of MatMul n written straight into the residual add that
 * reads it (match_residual_gemm chose the pair): D = A B + other operand,
 * cuBLASLt's C input with beta 1. Taken only when the add's buffer does
 * not overlap A or B (the planner may hand the add the bytes of a tensor
 * that dies at the product) and is the other operand's exactly or not at
 * all; 1 when d now writes the add (then marked done). */
static int emit_residual_gemm(cuda_plan *pl, const ir_node *n, cuda_fuse_site *s) {
  cuda_gemm_desc *d = s->d;
  const int add_id = pl->resid_add[n->id];
  if (add_id < 0) return 0;
  const ir_node *add = &pl->g->nodes[add_id];
  const int other = add->in[0] == n->id ? 1 : 0;
  const size_t es = elem_size(d->dtype);
  const size_t a_bytes = (size_t)(d->M * d->K) * es, b_bytes = (size_t)(d->K * d->N) * es,
               c_bytes = (size_t)(d->M * d->N) * es;
  uint8_t *out = out_ptr(pl, add);
  const uint8_t *res = in_ptr(pl, add, other);
  if (!out || !res || ranges_overlap(out, c_bytes, d->a, a_bytes) || ranges_overlap(out, c_bytes, d->b, b_bytes) ||
      (out != res && ranges_overlap(out, c_bytes, res, c_bytes)))
    return 0;
  d->c = out;
  d->resid = res;
  pl->add_done[add_id] = 1;
  return 1;
}

/* SwiGLU regions a GEMV computes with the products they read (glu in
 * cu_gemv_args): an ElementwiseRegion [act.silu(i0), bin.mul(s0, i1)]
 * without prologue over gate = i0 and up = i1, two products of one x
 * (DequantMatMuls, or MatMuls) by weights of one shape and dtype, each read
 * only by the region, with at most CU_GEMV_MAX_M rows and no residual add
 * of their own, and nothing launching between the first product and the
 * region but the second (so the launch may run at the first's place).
 * emit_glu_gemv checks the weights' layout and the buffers at lowering. */
static void match_glu_gemv(cuda_plan *pl, const int *uses) {
  const rlx_graph *g = pl->g;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *r = &g->nodes[i];
    if (r->op != RLX_OP_ElementwiseRegion || r->n_in != 2 || r->a.prologue != RLX_PROLOGUE_NONE ||
        r->a.chain.n != 2 || pl->folded[i] || pl->mem.view[i])
      continue;
    const rlx_region_step *s0 = &r->a.chain.s[0], *s1 = &r->a.chain.s[1];
    if (s0->kind != RLX_STEP_ACT || s0->op != RLX_ACT_SILU || s0->a != 0 || s1->kind != RLX_STEP_BIN ||
        s1->op != RLX_BIN_MUL || !((s1->a == -1 && s1->b == 1) || (s1->a == 1 && s1->b == -1)))
      continue;
    const int gi = r->in[0], ui = r->in[1];
    const ir_node *gate = &g->nodes[gi], *up = &g->nodes[ui];
    if (gi == ui || gate->op != up->op || (gate->op != RLX_OP_MatMul && gate->op != RLX_OP_DequantMatMul) ||
        gate->in[0] != up->in[0] || uses[gi] != 1 || uses[ui] != 1 || pl->folded[gi] || pl->folded[ui] ||
        pl->resid_add[gi] >= 0 || pl->resid_add[ui] >= 0)
      continue;
    const ir_type *wg = ir_in(g, gate, 1), *wu = ir_in(g, up, 1);
    if (wg->dtype != wu->dtype || !ir_shape_eq(&wg->shape, &wu->shape) || wg->shape.rank != 2 ||
        !ir_shape_eq(&gate->out[0].shape, &r->out[0].shape) || !ir_shape_eq(&up->out[0].shape, &r->out[0].shape) ||
        numel_of(&r->out[0]) / wg->shape.d[gate->op == RLX_OP_DequantMatMul ? 0 : 1] > CU_GEMV_MAX_M)
      continue;
    if (quiet_between(pl, gi < ui ? gi : ui, i, gi < ui ? ui : gi)) pl->glu_region[gi] = pl->glu_region[ui] = i;
  }
}

/* The weight of a glu product as the GEMV reads it: [N, K] (NULL: it reads
 * this one as [K, N], which glu does not take). */
static const void *glu_weight(cuda_plan *pl, const ir_node *p) {
  int trans = 1;
  const void *w = p->op == RLX_OP_DequantMatMul ? in_ptr(pl, p, 1) : cuda_matmul_b(pl, p, 1, &trans);
  return trans ? w : NULL;
}

/* Product n (site->d, taken by the GEMV; the first of a gate|up pair that
 * match_glu_gemv chose) and its partner as one glu launch writing their
 * region's output: 1 (emitted, the partner and the region marked done), 0
 * where the buffers do not allow it (the region's output overlaps x: the
 * planner may give it the bytes of an x that dies at the second product)
 * or the partner's weight is not aligned for the kernel; both products
 * and the region then lower as they are. */
static int emit_glu_gemv(cuda_plan *pl, const ir_node *n, cuda_fuse_site *site) {
  if (pl->glu_region[n->id] < 0) return 0;
  const cuda_gemm_desc *d = site->d;
  const rlx_dtype w_dtype = site->w_dtype;
  const ir_node *r = &pl->g->nodes[pl->glu_region[n->id]];
  const ir_node *gate = &pl->g->nodes[r->in[0]], *up = &pl->g->nodes[r->in[1]];
  const ir_node *partner = gate == n ? up : gate;
  const void *wg = glu_weight(pl, gate), *wu = glu_weight(pl, up);
  uint8_t *out = out_ptr(pl, r);
  const size_t es = elem_size(d->dtype);
  pl->glu_region[partner->id] = -1; /* decided here, for both */
  if (!wg || !wu || !d->b_trans || d->bias || d->act != RLX_ACT_NONE || !out ||
      !cu_gemv_supported(d->dtype, w_dtype, d->M, d->N, d->K, 1, d->a, wu) ||
      !cu_gemv_supported(d->dtype, w_dtype, d->M, d->N, d->K, 1, d->a, wg) ||
      ranges_overlap(out, (size_t)(d->M * d->N) * es, d->a, (size_t)(d->M * d->K) * es))
    return 0;
  cu_gemv_args norm = {0};
  cuda_fuse(pl, CUDA_FUSE_GEMV_NORM, n, &(cuda_fuse_site){.d = site->d, .out = out, .args = &norm});
  cuda_step *s = cuda_new_step(pl, ST_GEMV, n);
  cu_gemv_args *a = s ? cuda_new_args(s, sizeof *a) : NULL;
  if (!a) return (site->st = cuda_nomem(n)), 1;
  *a = norm;
  a->x = d->a, a->dtype = d->dtype, a->w_dtype = w_dtype, a->act = RLX_ACT_NONE, a->w_trans = 1, a->glu = 1;
  a->M = d->M, a->K = d->K, a->pdl = pl->pdl, a->nseg = 2;
  a->seg[0].w = wg, a->seg[0].out = out, a->seg[0].N = d->N;
  a->seg[1].w = wu, a->seg[1].N = d->N;
  size_t part = 0, counters = 0;
  cu_gemv_plan(a, &part, &counters); /* [N, K]: no split, no scratch */
  pl->add_done[partner->id] = pl->add_done[r->id] = 1;
  return 1;
}

/* 1 when node id is a Constant whose bytes are all zero (an RmsNorm's
 * beta that the LLM graphs give as zeros). */
static int zero_constant(const rlx_graph *g, rlx_node id) {
  const ir_node *c = &g->nodes[id];
  if (c->op != RLX_OP_Constant) return 0;
  const size_t bytes = rlx_dtype_nbytes(c->out[0].dtype, numel_of(&c->out[0]));
  const uint8_t *p = c->a.data.p;
  for (size_t i = 0; i < bytes; i++)
    if (p[i]) return 0;
  return 1;
}

/* The RmsNorm launched just before product n (site->d: w [N, K], M <=
 * CU_GEMV_MAX_M) that computes n's x, taken into the GEMV launch that n
 * starts (cu_gemv_args.norm): its step is removed and 1 returned, with the
 * norm fields of site->args set. Where the norm has no residual or bias
 * input and its beta is zeros, its rows are n's rows, and its buffers are
 * 16-byte aligned and apart, also from n's output site->out (the planner
 * may give that the bytes of the norm's input, which the launch still
 * reads: every output that joins the launch is checked so,
 * cuda_norm_overlaps). */
static int emit_gemv_norm(cuda_plan *pl, const ir_node *n, cuda_fuse_site *site) {
  const cuda_gemm_desc *d = site->d;
  const void *out = site->out;
  cu_gemv_args *a = site->args;
  cuda_step *s = cuda_joinable_step(pl, n, ST_NORM);
  const cu_norm_args *na = s ? s->args : NULL;
  const ir_node *norm = s ? &pl->g->nodes[s->node] : NULL;
  const size_t x_bytes = (size_t)(d->M * d->K) * elem_size(d->dtype), out_bytes = (size_t)(d->M * d->N) * elem_size(d->dtype);
  if (!na || !d->b_trans || !na->rms || na->res || na->bias || na->out != d->a || na->rows != d->M || na->len != d->K ||
      na->dtype != (int)d->dtype || norm->op != RLX_OP_RmsNorm || (norm->n_in > 2 && !zero_constant(pl->g, norm->in[2])) ||
      ((uintptr_t)na->x | (uintptr_t)na->gamma | (uintptr_t)na->out) % 16 || ranges_overlap(na->x, x_bytes, na->out, x_bytes) ||
      ranges_overlap(na->x, x_bytes, out, out_bytes))
    return 0;
  a->norm = 1, a->norm_x = na->x, a->norm_gamma = na->gamma, a->norm_eps = na->eps;
  free(s->args);
  pl->n_steps--;
  return 1;
}

/* 1 when launch a computes a norm (emit_gemv_norm) whose input overlaps the
 * bytes [p, p + bytes) that would be written in it. */
int cuda_norm_overlaps(const cu_gemv_args *a, const void *p, size_t bytes) {
  return a->norm && ranges_overlap(a->norm_x, (size_t)(a->M * a->K) * elem_size((rlx_dtype)a->dtype), p, bytes);
}

/* Node x, or what it reshapes where it is a Reshape read once that the
 * planner made a view (the same bytes), and so on down. */
static int below_reshapes(const cuda_plan *pl, const int *uses, int x) {
  while (pl->g->nodes[x].op == RLX_OP_Reshape && uses[x] == 1 && pl->mem.view[x]) x = pl->g->nodes[x].in[0];
  return x;
}

/* Ropes whose x is a product (MatMul, DequantMatMul; or its reshape)
 * that only the Rope reads: at decode rows the product's GEMV launch
 * (float or integer) may write the rotated values instead (emit_gemv_rope
 * decides at lowering, where it knows the launch and the buffers). */
static void match_gemv_rope(cuda_plan *pl, const int *uses) {
  const rlx_graph *g = pl->g;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    if (n->op != RLX_OP_Rope || pl->folded[i] || pl->mem.view[i]) continue;
    const int x = below_reshapes(pl, uses, n->in[0]);
    const ir_node *p = &g->nodes[x];
    if ((p->op == RLX_OP_MatMul || p->op == RLX_OP_DequantMatMul) && uses[x] == 1 && !pl->folded[x] &&
        !pl->mem.view[x] && pl->resid_add[x] < 0)
      pl->rope_gemv[i] = 1;
  }
}

/* The bytes of Rope r's tables, or of its positions. */
static size_t rope_table_bytes(const cu_rope_args *r) {
  if (!r->cos) return (size_t)((r->pos_batched ? r->B : 1) * r->S) * (r->pos_dtype == RLX_I64 ? 8 : 4);
  return (size_t)((r->table_batched ? r->B : 1) * r->S * (r->n_rot / 2)) * elem_size((rlx_dtype)r->table_dtype);
}

/* Rope r as its product's launch applies it (cu_gemv_rope). */
static cu_gemv_rope gemv_rope_of(const cu_rope_args *r) {
  return (cu_gemv_rope){1, r->neox, r->table_dtype, r->table_batched, r->D, r->n_rot, r->S, r->cos, r->sin,
                        r->pos, r->pos_dtype, r->pos_batched, r->base, r->scale};
}

/* Rope n (marked by match_gemv_rope) applied by the float GEMV launch just
 * before it, which computes n's x as one of its segments (q's or k's
 * product, with the others of its x): that segment then writes n's
 * output, rotated, and n launches nothing. Where the kernel takes it
 * (cu_gemv_rope_fits), and with n's output apart from everything else the
 * launch reads and writes (the planner may give it the bytes of x, which
 * is dead at n but read by the launch). 1 when joined. */
static int emit_float_gemv_rope(cuda_plan *pl, const ir_node *n, const cu_rope_args *r) {
  cuda_step *s = cuda_joinable_step(pl, n, ST_GEMV);
  cu_gemv_args *a = s ? s->args : NULL;
  if (!a || a->dtype != r->dtype || a->M != r->B * r->S) return 0;
  int k = 0;
  while (k < a->nseg && !(a->seg[k].out == r->x && !a->seg[k].rope.on)) k++;
  if (k == a->nseg || a->seg[k].N != r->H * r->D) return 0;
  const size_t es = elem_size((rlx_dtype)a->dtype), out_bytes = (size_t)(a->M * a->seg[k].N) * es;
  const size_t table_bytes = rope_table_bytes(r);
  if (ranges_overlap(r->out, out_bytes, a->x, (size_t)(a->M * a->K) * es) || cuda_norm_overlaps(a, r->out, out_bytes) ||
      ranges_overlap(r->out, out_bytes, r->cos ? r->cos : r->pos, table_bytes) ||
      (r->sin && ranges_overlap(r->out, out_bytes, r->sin, table_bytes)))
    return 0;
  for (int j = 0; j < a->nseg; j++) {
    const cu_gemv_seg *o = &a->seg[j];
    const size_t ob = (size_t)(a->M * o->N) * es;
    if ((j != k && ranges_overlap(r->out, out_bytes, o->out, ob)) || (o->bias && ranges_overlap(r->out, out_bytes, o->bias, (size_t)o->N * es)) ||
        (o->resid && ranges_overlap(r->out, out_bytes, o->resid, ob)))
      return 0;
  }
  cu_gemv_rope *g = &a->seg[k].rope;
  *g = gemv_rope_of(r);
  if (!cu_gemv_rope_fits(a, k)) {
    memset(g, 0, sizeof *g);
    return 0;
  }
  a->seg[k].out = r->out;
  return 1;
}

/* The integer GEMV launch among the steps up to `from` (only integer
 * GEMVs of the same folding after it: a layer's q|k and its v of another
 * scheme) with a segment writing `out` and no cache write yet (*k: its
 * index), where none of those launches reads or writes [p, p + bytes)
 * otherwise (x's levels, the other outputs, residuals): that segment may
 * then write p at its launch's place, ahead of the launches after it.
 * NULL if none. */
static cu_qmv_args *qmv_writer(cuda_plan *pl, int folded, int from, const void *out, const void *p, size_t bytes, int *k) {
  cu_qmv_args *found = NULL;
  *k = -1;
  for (int i = from; i >= 0 && !found; i--) {
    cuda_step *s = &pl->steps[i];
    if (s->kind != ST_QMV || s->folded != folded) return NULL;
    cu_qmv_args *a = s->args;
    const size_t es = elem_size((rlx_dtype)a->out_dtype);
    if (ranges_overlap(p, bytes, a->qx, cu_qx_bytes(a->M, a->K))) return NULL;
    for (int j = 0; j < a->nseg; j++) {
      const size_t ob = (size_t)(a->M * a->seg[j].N) * es;
      if (a->seg[j].out == out && !a->seg[j].cache.dst && !found) *k = j, found = a;
      else if (ranges_overlap(p, bytes, a->seg[j].out, ob)) return NULL;
      if (a->seg[j].resid && ranges_overlap(p, bytes, a->seg[j].resid, ob)) return NULL;
    }
  }
  return found;
}

/* The same for the integer GEMV (its direct kernels, cu_qmv_rope_fits),
 * the launch that computes x among the last ones (qmv_writer): n's output
 * and its tables apart from what those launches read and write. */
static int emit_qmv_rope(cuda_plan *pl, const ir_node *n, const cu_rope_args *r) {
  if (!pl->n_steps) return 0;
  const size_t out_bytes = (size_t)(r->B * r->S * r->H * r->D) * elem_size((rlx_dtype)r->dtype);
  int k;
  cu_qmv_args *a = qmv_writer(pl, pl->folded[n->id], pl->n_steps - 1, r->x, r->out, out_bytes, &k);
  if (!a || a->out_dtype != r->dtype || a->M != r->B * r->S || a->seg[k].rope.on || a->seg[k].N != r->H * r->D)
    return 0;
  /* the tables (or positions) are read at the launch's place: nothing from it on may write them */
  const size_t table_bytes = rope_table_bytes(r);
  const void *tables[2] = {r->cos ? r->cos : r->pos, r->sin};
  for (int t = 0; t < 2; t++) {
    int kt;
    if (tables[t] && (ranges_overlap(r->out, out_bytes, tables[t], table_bytes) ||
                      ranges_overlap(r->x, out_bytes, tables[t], table_bytes) ||
                      qmv_writer(pl, pl->folded[n->id], pl->n_steps - 1, r->x, tables[t], table_bytes, &kt) != a))
      return 0;
  }
  a->seg[k].rope = gemv_rope_of(r);
  if (!cu_qmv_rope_fits(a, k)) {
    memset(&a->seg[k].rope, 0, sizeof a->seg[k].rope);
    return 0;
  }
  a->seg[k].out = r->out;
  return 1;
}

/* Rope n (site->args: its rope) applied by the GEMV launch before it. */
static int emit_gemv_rope(cuda_plan *pl, const ir_node *n, cuda_fuse_site *site) {
  if (!pl->rope_gemv[n->id]) return 0;
  return emit_float_gemv_rope(pl, n, site->args) || emit_qmv_rope(pl, n, site->args);
}

/* Rope n (site->args) joined to the launch of the rope just before it
 * (k's after q's): the same positions or tables, geometry and dtype,
 * nothing run between, and n's buffers apart from the other's (x and out
 * may be one buffer: in place). 1 when joined. */
static int emit_rope_join(cuda_plan *pl, const ir_node *n, cuda_fuse_site *site) {
  const cu_rope_args *mine = site->args;
  cuda_step *s = cuda_joinable_step(pl, n, ST_ROPE);
  cu_rope_args *a = s ? s->args : NULL;
  if (!a || a->H2 || a->dtype != mine->dtype || a->D != mine->D || a->n_rot != mine->n_rot || a->neox != mine->neox ||
      a->B != mine->B || a->S != mine->S || a->pos != mine->pos || a->cos != mine->cos || a->sin != mine->sin ||
      a->pos_dtype != mine->pos_dtype || a->pos_batched != mine->pos_batched || a->table_dtype != mine->table_dtype ||
      a->table_batched != mine->table_batched || a->base != mine->base || a->scale != mine->scale)
    return 0;
  const size_t b1 = (size_t)(a->B * a->S * a->H * a->D) * elem_size((rlx_dtype)a->dtype),
               b2 = (size_t)(mine->B * mine->S * mine->H * mine->D) * elem_size((rlx_dtype)a->dtype);
  if (ranges_overlap(mine->x, b2, a->x, b1) || ranges_overlap(mine->x, b2, a->out, b1) ||
      ranges_overlap(mine->out, b2, a->x, b1) || ranges_overlap(mine->out, b2, a->out, b1))
    return 0;
  a->x2 = mine->x, a->out2 = mine->out, a->H2 = mine->H;
  return 1;
}

/* Casts an UpdateSlice can do as it copies (cu_copy_args.convert): one
 * of F32/F16/BF16 to another, read only by the UpdateSlice as its update,
 * with nothing launching between the two (so the Cast's input is intact
 * when the copy runs). emit_cast_update checks the buffers at lowering. */
static int is_half_or_f32(rlx_dtype t) { return t == RLX_F32 || t == RLX_F16 || t == RLX_BF16; }

static void match_cast_update(cuda_plan *pl, const int *uses) {
  const rlx_graph *g = pl->g;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *u = &g->nodes[i];
    if (u->op != RLX_OP_UpdateSlice || pl->folded[i] || pl->mem.view[i]) continue;
    const int c = u->in[1];
    const ir_node *cast = &g->nodes[c];
    if (cast->op != RLX_OP_Cast || uses[c] != 1 || u->in[0] == c || u->in[2] == c || pl->folded[c] ||
        pl->mem.view[c] || !is_half_or_f32(ir_in(g, cast, 0)->dtype) || !is_half_or_f32(cast->out[0].dtype) ||
        ir_in(g, cast, 0)->dtype == cast->out[0].dtype)
      continue;
    if (quiet_between(pl, c, i, -1)) pl->cast_into[c] = i;
  }
}

/* Whether Cast n (marked by match_cast_update) is left to its UpdateSlice:
 * where that one's output does not overlap the Cast's input (the planner
 * may give the UpdateSlice, when not in place, the bytes of an input that
 * dies at the Cast). Else the mark goes and the Cast runs. */
static int emit_cast_update(cuda_plan *pl, const ir_node *n, cuda_fuse_site *site) {
  (void)site;
  if (pl->cast_into[n->id] < 0) return 0;
  const ir_node *u = &pl->g->nodes[pl->cast_into[n->id]];
  const ir_type *x = ir_in(pl->g, n, 0);
  if (!ranges_overlap(out_ptr(pl, u), rlx_dtype_nbytes(u->out[0].dtype, numel_of(&u->out[0])), in_ptr(pl, n, 0),
                      rlx_dtype_nbytes(x->dtype, numel_of(x))))
    return 1;
  pl->cast_into[n->id] = -1;
  return 0;
}

/* UpdateSlices whose update, through the Cast it absorbs (cast_into) and
 * reshapes, is read by nothing else and comes from a DequantMatMul,
 * directly or through a Rope its GEMV may apply (rope_gemv): the integer GEMV may
 * then store the row into the cache itself (emit_qmv_cache decides at
 * lowering, where it knows the launches and the buffers). */
static void match_qmv_cache(cuda_plan *pl, const int *uses) {
  const rlx_graph *g = pl->g;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *u = &g->nodes[i];
    if (u->op != RLX_OP_UpdateSlice || pl->folded[i] || pl->mem.view[i]) continue;
    int src = below_reshapes(pl, uses, u->in[1]);
    if (g->nodes[src].op == RLX_OP_Cast && pl->cast_into[src] == i) src = below_reshapes(pl, uses, g->nodes[src].in[0]);
    const ir_node *p = &g->nodes[src];
    if (uses[src] == 1 && !pl->folded[src] && !pl->mem.view[src] &&
        (p->op == RLX_OP_DequantMatMul || (p->op == RLX_OP_Rope && pl->rope_gemv[src])))
      pl->qmv_cache[i] = 1;
  }
}

/* UpdateSlice n (marked by match_qmv_cache), whose copy is the step just
 * emitted, done instead by the integer GEMV launch among the steps before
 * it that computes the update (qmv_writer: the copy's source), the cache
 * (site->bytes) apart from what the launches from it on read and write,
 * so that the row is written ahead of its place only where nothing reads
 * it. The copy one contiguous run of the update's rows, in place (no copy
 * of the whole cache before it), from an output of one row of x, converted
 * only from the GEMV's dtype. 1 when taken: the copy's step goes. */
static int emit_qmv_cache(cuda_plan *pl, const ir_node *n, cuda_fuse_site *site) {
  if (!pl->qmv_cache[n->id] || pl->n_steps < 2 || out_ptr(pl, n) != in_ptr(pl, n, 0)) return 0;
  cuda_step *cs = &pl->steps[pl->n_steps - 1];
  const cu_copy_args *c = cs->args;
  if (cs->kind != ST_COPY || !c->dyn || c->src2 || c->rank != 1 || c->src_stride[0] != 1 || c->dst_stride[0] != 1 ||
      c->shift[0])
    return 0;
  int k;
  cu_qmv_args *a = qmv_writer(pl, cs->folded, pl->n_steps - 2, c->src, c->dst, site->bytes, &k);
  if (!a || a->M != 1 || a->seg[k].resid || c->numel != a->seg[k].N || c->dyn_max > INT32_MAX) return 0;
  const int src_dtype = c->convert ? c->src_dtype : a->out_dtype, dst_dtype = c->convert ? c->dst_dtype : a->out_dtype;
  if (src_dtype != a->out_dtype || (size_t)c->es != elem_size((rlx_dtype)dst_dtype) ||
      (a->out_dtype != RLX_F32 && a->out_dtype != RLX_F16 && a->out_dtype != RLX_BF16) ||
      (dst_dtype != RLX_F32 && dst_dtype != RLX_F16 && dst_dtype != RLX_BF16))
    return 0;
  a->seg[k].cache = (cu_cache_write){c->dst, c->dyn, c->dyn_dtype, dst_dtype, c->node, c->dst_off, c->dyn_mul, c->dyn_max, c->err};
  free(cs->args);
  pl->n_steps--;
  return 1;
}

/* The Casts around an Attention in F16 or BF16 over F32 activations (an
 * LLM's 16-bit KV cache: q rounded to the cache's dtype before, the
 * output widened after), which the split-key decode kernel does itself
 * (cu_attn_args q_f32, out_f32) with the bits of their launches: q's Cast
 * from F32 read only by the Attention, nothing launching between the two
 * (the Cast's input is intact at the Attention's place), and the Cast to
 * F32 that is the Attention's only reader, nothing launching between.
 * Marked here (cast_into: the Attention); the Attention's lowering
 * decides (emit_attn_cast), and cuda_lower_node leaves a marked Cast to
 * it. */
static void match_attn_cast(cuda_plan *pl, const int *uses) {
  const rlx_graph *g = pl->g;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    const rlx_dtype t = n->out[0].dtype;
    if (n->op != RLX_OP_Attention || (t != RLX_F16 && t != RLX_BF16) || pl->folded[i] || pl->mem.view[i]) continue;
    const ir_node *q = &g->nodes[n->in[0]];
    if (q->op == RLX_OP_Cast && ir_in(g, q, 0)->dtype == RLX_F32 && uses[q->id] == 1 && !pl->folded[q->id] &&
        !pl->mem.view[q->id] && quiet_between(pl, q->id, i, -1))
      pl->cast_into[q->id] = i;
    for (int j = i + 1; j < g->n_nodes && uses[i] == 1; j++) {
      const ir_node *c = &g->nodes[j];
      if (c->n_in < 1 || c->in[0] != i) {
        if (launches_nothing(pl, j)) continue;
        break;
      }
      if (c->op == RLX_OP_Cast && c->out[0].dtype == RLX_F32 && !pl->folded[j] && !pl->mem.view[j]) pl->cast_into[j] = i;
      break;
    }
  }
}

/* Attention n's Casts (match_attn_cast), taken by its launch (site->args)
 * where the split-key decode kernel runs it and the buffers allow: the
 * output it then writes (the Cast's, F32) apart from q, K, V and the
 * mask it reads (the planner may give either Cast's output the bytes of
 * a tensor that dies at the Attention). A Cast not taken loses its mark
 * and launches (q's: cuda_lower_attention launches it first). 1 when
 * either is taken. */
static int emit_attn_cast(cuda_plan *pl, const ir_node *n, cuda_fuse_site *site) {
  const rlx_graph *g = pl->g;
  cu_attn_args *a = site->args;
  const ir_node *qc = &g->nodes[n->in[0]], *oc = NULL;
  for (int j = n->id + 1; j < g->n_nodes && !oc; j++)
    if (pl->cast_into[j] == n->id) oc = &g->nodes[j];
    else if (!launches_nothing(pl, j)) break;
  int take_q = qc->op == RLX_OP_Cast && pl->cast_into[qc->id] == n->id, take_o = oc != NULL;
  const size_t es = elem_size((rlx_dtype)a->dtype), q_n = (size_t)numel_of(ir_in(g, n, 0)), o_n = (size_t)numel_of(&n->out[0]);
  const ir_type *kt = ir_in(g, n, 1), *vt = ir_in(g, n, 2);
  const size_t k_bytes = rlx_dtype_nbytes(kt->dtype, numel_of(kt)), v_bytes = rlx_dtype_nbytes(vt->dtype, numel_of(vt));
  const size_t m_bytes = n->n_in > 3 ? rlx_dtype_nbytes(ir_in(g, n, 3)->dtype, numel_of(ir_in(g, n, 3))) : 0;
  while ((take_q || take_o) && a->splits > 0) {
    const void *q = take_q ? in_ptr(pl, qc, 0) : a->q;
    const void *out = take_o ? out_ptr(pl, oc) : a->out;
    const size_t qb = q_n * (take_q ? 4 : es), ob = o_n * (take_o ? 4 : es);
    if (!ranges_overlap(out, ob, q, qb) &&
        (!take_o || (!ranges_overlap(out, ob, a->k, k_bytes) && !ranges_overlap(out, ob, a->v, v_bytes) &&
                     !(m_bytes && ranges_overlap(out, ob, a->mask, m_bytes)))))
      break;
    if (take_o) take_o = 0;
    else take_q = 0;
  }
  if (a->splits <= 0) take_q = take_o = 0;
  if (qc->op == RLX_OP_Cast && pl->cast_into[qc->id] == n->id && !take_q) pl->cast_into[qc->id] = -1;
  if (oc && !take_o) pl->cast_into[oc->id] = -1;
  if (take_q) a->q = in_ptr(pl, qc, 0), a->q_f32 = 1;
  if (take_o) a->out = out_ptr(pl, oc), a->out_f32 = 1;
  pl->fused[CUDA_FUSE_ATTN_CAST] += take_q + take_o - (take_q || take_o); /* cuda_fuse counts one */
  return take_q || take_o;
}

/* The UpdateSlice copy just emitted (the last step) joined to the launch
 * of the one before it as its second part (cu_copy_args.src2: a layer's V
 * row after its K row): that one an UpdateSlice's copy too (nothing ran
 * between, so both are in place: a copy of the whole tensor would have
 * come between), the same geometry and types, no part 2 yet, and neither
 * reading what the other writes (site->bytes: each destination tensor).
 * 1 when joined.
 * Llama-3-8B bf16 through the LLM API on the H200: 5.009-5.052 ms a
 * decode step, against 5.038-5.071 with a launch each. */
static int emit_update_join(cuda_plan *pl, const ir_node *n, cuda_fuse_site *site) {
  const size_t dst_bytes = site->bytes;
  (void)n;
  if (pl->n_steps < 2) return 0;
  cuda_step *s = &pl->steps[pl->n_steps - 1], *p = &pl->steps[pl->n_steps - 2];
  cu_copy_args *b = s->args, *a = p->kind == ST_COPY && p->folded == s->folded ? p->args : NULL;
  if (!a || !a->dyn || a->src2 || a->rank != b->rank || a->es != b->es || a->numel != b->numel ||
      a->dst_off != b->dst_off || a->dyn_dtype != b->dyn_dtype || a->dyn_mul != b->dyn_mul ||
      a->dyn_max != b->dyn_max || a->convert != b->convert || a->src_dtype != b->src_dtype ||
      a->dst_dtype != b->dst_dtype || memcmp(a->dims, b->dims, sizeof a->dims) ||
      memcmp(a->src_stride, b->src_stride, sizeof a->src_stride) ||
      memcmp(a->dst_stride, b->dst_stride, sizeof a->dst_stride) || memcmp(a->shift, b->shift, sizeof a->shift))
    return 0;
  const size_t src_bytes = (size_t)b->numel * (size_t)(b->convert ? ir_dtypes[b->src_dtype].size : b->es);
  if (ranges_overlap(a->dst, dst_bytes, b->dst, dst_bytes) || ranges_overlap(a->dst, dst_bytes, b->src, src_bytes) ||
      ranges_overlap(b->dst, dst_bytes, a->src, src_bytes) || ranges_overlap(a->dst, dst_bytes, b->dyn, 8) ||
      ranges_overlap(b->dst, dst_bytes, a->dyn, 8))
    return 0;
  a->src2 = b->src, a->dst2 = b->dst, a->dyn2 = b->dyn, a->node2 = b->node;
  free(s->args);
  pl->n_steps--;
  return 1;
}

/* RmsNorms (and FusedResidualRmsNorms without the sum as an output) of
 * decode rows read only by DequantMatMuls on the integer path, with those
 * products the next launching nodes: the x quantization of the first
 * product normalizes the rows itself (cu_quant_x's has_norm), the others
 * reuse its levels, and the norm neither launches nor gets a buffer
 * (skip). The norm's inputs are then read at the first product's place,
 * where nothing has run since the norm's. */
/* Node i is read only as x by DequantMatMuls on the integer path, and
 * the first of them is the next node that launches, then each the next
 * after the one before (their x quantization is done once, at the first). */
static int read_by_qmv_only(const cuda_plan *pl, const int *uses, int i) {
  const rlx_graph *g = pl->g;
  int found = 0, ok = uses[i] >= 1;
  for (int j = i + 1; ok && j < g->n_nodes && found < uses[i]; j++) {
    const ir_node *c = &g->nodes[j];
    int reads = 0;
    for (int k = 0; k < c->n_in; k++) reads += c->in[k] == i;
    if (reads) {
      ok = c->op == RLX_OP_DequantMatMul && reads == 1 && c->in[0] == i && !pl->folded[j] &&
           cu_quant_supported(ir_in(g, c, 1)->dtype);
      found += reads;
    } else {
      ok = launches_nothing(pl, j);
    }
  }
  return ok && found == uses[i];
}

/* A float dtype the x quantization reads, rows of len (a multiple of 32) at decode rows. */
static int quant_x_rows(rlx_dtype t, const ir_type *x, int64_t len) {
  return (t == RLX_F32 || t == RLX_F16 || t == RLX_BF16) && len >= 32 && len % 32 == 0 &&
         numel_of(x) / len <= CU_QMM_MAX_M;
}

static void match_norm_quant(cuda_plan *pl, const int *uses) {
  const rlx_graph *g = pl->g;
  if (pl->qmm_exact) return;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    if ((n->op != RLX_OP_RmsNorm && n->op != RLX_OP_FusedResidualRmsNorm) || n->n_out != 1 || pl->folded[i] ||
        pl->mem.view[i])
      continue;
    const ir_type *x = ir_in(g, n, 0);
    const int64_t len = x->shape.rank ? x->shape.d[x->shape.rank - 1] : 0;
    if (!quant_x_rows(x->dtype, x, len) || n->out[0].dtype != x->dtype ||
        (n->op == RLX_OP_RmsNorm && n->a.axis != x->shape.rank - 1))
      continue;
    if (read_by_qmv_only(pl, uses, i)) pl->skip[i] = 1;
  }
}

/* The x quantization of DequantMatMul n (site->args) normalizes the rows
 * of the RmsNorm that match_norm_quant left to it (which then does not
 * launch): 1 when n's x is such a norm. */
static int emit_norm_quant(cuda_plan *pl, const ir_node *n, cuda_fuse_site *site) {
  const ir_node *xn = &pl->g->nodes[n->in[0]];
  cu_quant_x_args *qa = site->args;
  if (!pl->skip[xn->id] || (xn->op != RLX_OP_RmsNorm && xn->op != RLX_OP_FusedResidualRmsNorm)) return 0;
  qa->has_norm = 1;
  cuda_norm_args(pl, xn, &qa->norm);
  /* a zero beta (the LLM graphs') adds nothing; without one, the
   * quantization may leave the rows' factor to the products */
  const int beta = xn->op == RLX_OP_RmsNorm ? 2 : 3 + (xn->a.has_bias != 0);
  if (xn->n_in > beta && zero_constant(pl->g, xn->in[beta])) qa->norm.beta = NULL;
  return 1;
}

/* The SwiGLU node n computes (a CU_SWIGLU_ kind): FusedSwiGLU over x
 * [rows, 2 len], or the ElementwiseRegion [act.silu(i0), bin.mul(s0, i1)]
 * without prologue over gate and up of its output's shape; its input and
 * output of one float dtype; 0 for anything else. */
static int swiglu_kind(const rlx_graph *g, const ir_node *n) {
  const ir_type *out = &n->out[0];
  if (n->n_out != 1 || out->shape.rank < 1) return CU_SWIGLU_NONE;
  const int64_t len = out->shape.d[out->shape.rank - 1];
  if (n->op == RLX_OP_FusedSwiGLU) {
    const ir_type *x = ir_in(g, n, 0);
    return x->dtype == out->dtype && quant_x_rows(out->dtype, out, len) && x->shape.d[x->shape.rank - 1] == 2 * len
               ? CU_SWIGLU_FUSED
               : CU_SWIGLU_NONE;
  }
  if (n->op != RLX_OP_ElementwiseRegion || n->n_in != 2 || n->a.prologue != RLX_PROLOGUE_NONE || n->a.chain.n != 2)
    return CU_SWIGLU_NONE;
  const rlx_region_step *s0 = &n->a.chain.s[0], *s1 = &n->a.chain.s[1];
  if (s0->kind != RLX_STEP_ACT || s0->op != RLX_ACT_SILU || s0->a != 0 || s1->kind != RLX_STEP_BIN ||
      s1->op != RLX_BIN_MUL || !((s1->a == -1 && s1->b == 1) || (s1->a == 1 && s1->b == -1)))
    return CU_SWIGLU_NONE;
  for (int k = 0; k < 2; k++) {
    const ir_type *in = ir_in(g, n, k);
    if (in->dtype != out->dtype || !ir_shape_eq(&in->shape, &out->shape)) return CU_SWIGLU_NONE;
  }
  return quant_x_rows(out->dtype, out, len) ? CU_SWIGLU_REGION : CU_SWIGLU_NONE;
}

/* SwiGLUs of decode rows read only by DequantMatMuls on the integer path,
 * those products the next launching nodes (as match_norm_quant's norms):
 * the x quantization of the first computes silu(gate) * up itself, the
 * others reuse its levels, and the SwiGLU neither launches nor gets a
 * buffer (skip). A region that match_glu_gemv gave to its products'
 * GEMV stays theirs (packed weights never take that GEMV). */
static void match_swiglu_quant(cuda_plan *pl, const int *uses) {
  const rlx_graph *g = pl->g;
  if (pl->qmm_exact) return;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    if (pl->folded[i] || pl->mem.view[i] || !swiglu_kind(g, n) ||
        (n->op == RLX_OP_ElementwiseRegion && pl->glu_region[n->in[0]] == i &&
         !rlx_dtype_is_block(ir_in(g, &g->nodes[n->in[0]], 1)->dtype)))
      continue;
    if (read_by_qmv_only(pl, uses, i)) pl->skip[i] = 1;
  }
}

/* The x quantization of DequantMatMul n (site->args) computes the SwiGLU
 * that match_swiglu_quant left to it: 1 when n's x is such a node. */
static int emit_swiglu_quant(cuda_plan *pl, const ir_node *n, cuda_fuse_site *site) {
  const ir_node *xn = &pl->g->nodes[n->in[0]];
  cu_quant_x_args *qa = site->args;
  const int kind = pl->skip[xn->id] ? swiglu_kind(pl->g, xn) : CU_SWIGLU_NONE;
  if (kind == CU_SWIGLU_NONE) return 0;
  const uint8_t *x = in_ptr(pl, xn, 0);
  qa->swiglu = kind, qa->x = x;
  if (kind == CU_SWIGLU_FUSED) qa->x2 = x + (size_t)qa->K * elem_size(qa->x_dtype), qa->x_rs = 2 * qa->K;
  else qa->x2 = in_ptr(pl, xn, 1), qa->x_rs = qa->K;
  return 1;
}

/* A product operand that is a param, a constant or folded from them (read
 * through a skipped weight transpose): no launch of the plan writes it. */
static int weight_ready(const cuda_plan *pl, rlx_node id) {
  const ir_node *w = &pl->g->nodes[id];
  if (pl->skip[id]) w = &pl->g->nodes[w->in[0]];
  return w->op == RLX_OP_Param || w->op == RLX_OP_Constant || pl->folded[w->id];
}

/* Product n (site->d, after the residual add it may write; weights of
 * site->w_dtype, activation alpha site->alpha) right after another GEMV
 * launch of the same x (q, k, v) joins it as one more segment
 * (site->joined): it then runs at the other's place, which is safe where
 * nothing ran between (an absorbed residual add did: the planner may give
 * this output the bytes of the add's operand) and the weights and bias
 * are params (nothing the launch itself writes). */
static int emit_gemv_shared_x(cuda_plan *pl, const ir_node *n, cuda_fuse_site *site) {
  const cuda_gemm_desc *d = site->d;
  cuda_step *s = cuda_joinable_step(pl, n, ST_GEMV);
  const cu_gemv_args *a = s ? s->args : NULL;
  if (!a || a->glu || a->nseg == CU_GEMV_MAX_SEG || a->x != d->a || a->dtype != (int)d->dtype ||
      a->w_dtype != (int)site->w_dtype || a->M != d->M || a->K != d->K || a->w_trans != d->b_trans || a->act != d->act ||
      a->alpha != (float)site->alpha || d->resid || a->seg[0].resid || !weight_ready(pl, n->in[1]) ||
      (n->n_in > 2 && !weight_ready(pl, n->in[2])) ||
      cuda_norm_overlaps(a, d->c, (size_t)(d->M * d->N) * elem_size(d->dtype)))
    return 0;
  site->joined = s;
  return 1;
}

/* The same for the integer GEMV: DequantMatMul n (site->d, of weights
 * site->w_dtype) right after another of the same quantized x. */
static int emit_qmv_shared_x(cuda_plan *pl, const ir_node *n, cuda_fuse_site *site) {
  const cuda_gemm_desc *d = site->d;
  cuda_step *s = cuda_joinable_step(pl, n, ST_QMV);
  const cu_qmv_args *a = s ? s->args : NULL;
  if (!a || a->nseg == CU_QMV_MAX_SEG || a->scheme != (int)site->w_dtype || a->out_dtype != (int)d->dtype || d->resid ||
      a->seg[0].resid || !weight_ready(pl, n->in[1]))
    return 0;
  site->joined = s;
  return 1;
}

/* ---------------------------------------------------------------- the table */

static const struct {
  const char *name;
  void (*match)(cuda_plan *pl, const int *uses); /* NULL: decided at lowering alone */
  int (*emit)(cuda_plan *pl, const ir_node *n, cuda_fuse_site *s);
} fusions[CUDA_FUSE_COUNT] = {
  /* matched in the enum's order: the norm's skip mark first
   * (quiet_between reads it), the residual adds before the matches that
   * leave their products alone, the glu regions before swiglu_quant */
  [CUDA_FUSE_NORM_QUANT] = {"norm_quant", match_norm_quant, emit_norm_quant},
  [CUDA_FUSE_RESIDUAL_GEMM] = {"residual_gemm", match_residual_gemm, emit_residual_gemm},
  [CUDA_FUSE_GLU_GEMV] = {"glu_gemv", match_glu_gemv, emit_glu_gemv},
  [CUDA_FUSE_SWIGLU_QUANT] = {"swiglu_quant", match_swiglu_quant, emit_swiglu_quant},
  [CUDA_FUSE_GEMV_ROPE] = {"gemv_rope", match_gemv_rope, emit_gemv_rope},
  [CUDA_FUSE_CAST_UPDATE] = {"cast_update", match_cast_update, emit_cast_update},
  [CUDA_FUSE_QMV_CACHE] = {"qmv_cache", match_qmv_cache, emit_qmv_cache},
  [CUDA_FUSE_ATTN_CAST] = {"attn_cast", match_attn_cast, emit_attn_cast},
  [CUDA_FUSE_GEMV_NORM] = {"gemv_norm", NULL, emit_gemv_norm},
  [CUDA_FUSE_GEMV_SHARED_X] = {"gemv_shared_x", NULL, emit_gemv_shared_x},
  [CUDA_FUSE_QMV_SHARED_X] = {"qmv_shared_x", NULL, emit_qmv_shared_x},
  [CUDA_FUSE_ROPE_JOIN] = {"rope_join", NULL, emit_rope_join},
  [CUDA_FUSE_UPDATE_JOIN] = {"update_join", NULL, emit_update_join},
};

void cuda_fuse_match(cuda_plan *pl, const int *uses) {
  if (!pl->fuse) return;
  for (int f = 0; f < CUDA_FUSE_COUNT; f++)
    if (fusions[f].match) fusions[f].match(pl, uses);
}

int cuda_fuse(cuda_plan *pl, cuda_fusion f, const ir_node *n, cuda_fuse_site *s) {
  if (!pl->fuse || !fusions[f].emit(pl, n, s)) return 0;
  pl->fused[f]++;
  return 1;
}

/* RLX_TRACE: how many times each fusion was taken in this plan. */
void cuda_fuse_trace(const cuda_plan *pl) {
  fprintf(stderr, "rlx: cuda fusions of \"%s\"%s", pl->g->name ? pl->g->name : "", pl->fuse ? ":" : ": off (RLX_CUDA_FUSE=0)");
  for (int f = 0; f < CUDA_FUSE_COUNT && pl->fuse; f++) fprintf(stderr, " %s %d", fusions[f].name, pl->fused[f]);
  fputc('\n', stderr);
}
