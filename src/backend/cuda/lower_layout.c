/* lower_layout.c — data movement: views the planner had to copy, box
 * copies (Expand, Transpose, Narrow, Slice, Concat, Pad, resizes), the
 * UpdateSlice of a cache row, Gather, Iota, OneHot, Tri. */
#include "cuda_plan.h"

#include <math.h>
#include <string.h>

/* The bytes of v stored as one element of plain dtype t (cpu_set's rules). */
static uint64_t element_bits(rlx_dtype t, double v) {
  uint64_t bits = 0;
  switch (t) {
  case RLX_F32: { float f = (float)v; memcpy(&bits, &f, 4); break; }
  case RLX_F16: bits = rlx_f32_to_f16((float)v); break;
  case RLX_BF16: bits = rlx_f32_to_bf16((float)v); break;
  case RLX_F64: memcpy(&bits, &v, 8); break;
  case RLX_BOOL: bits = v != 0; break;
  default: {
    double lo = t == RLX_I8 ? -128.0 : t == RLX_U8 ? 0.0 : t == RLX_I32 ? -2147483648.0 : -9223372036854775808.0;
    double hi = t == RLX_I8 ? 127.0 : t == RLX_U8 ? 255.0 : t == RLX_I32 ? 2147483647.0 : 9223372036854775807.0;
    int64_t i = isnan(v) ? 0 : v <= lo ? (int64_t)lo : v >= hi ? (t == RLX_I64 ? INT64_MAX : (int64_t)hi) : (int64_t)v;
    bits = (uint64_t)i;
    if (t != RLX_I64) bits &= t == RLX_I32 ? 0xffffffffull : 0xffull;
  }
  }
  return bits;
}

static void copy_coalesce(cu_copy_args *a) {
  int64_t nd[CU_MAX_RANK], ss[CU_MAX_RANK], ds[CU_MAX_RANK];
  uint8_t sh[CU_MAX_RANK];
  int nr = 0;
  for (int d = a->rank - 1; d >= 0; d--) {
    if (a->dims[d] == 1) continue;
    if (nr > 0 && !a->shift[d] && !sh[nr - 1] && a->src_stride[d] == ss[nr - 1] * nd[nr - 1] &&
        a->dst_stride[d] == ds[nr - 1] * nd[nr - 1]) {
      nd[nr - 1] *= a->dims[d];
      continue;
    }
    nd[nr] = a->dims[d], ss[nr] = a->src_stride[d], ds[nr] = a->dst_stride[d], sh[nr] = a->shift[d];
    nr++;
  }
  if (a->numel == 0) return;
  a->rank = nr;
  for (int i = 0; i < nr; i++) {
    a->dims[i] = nd[nr - 1 - i];
    a->src_stride[i] = ss[nr - 1 - i];
    a->dst_stride[i] = ds[nr - 1 - i];
    a->shift[i] = sh[nr - 1 - i];
  }
}

/* A box copy of `dims` from src (strides ss, shifts) to dst (strides ds, offset). */
static rlx_status emit_copy(cuda_plan *pl, const ir_node *n, int rank, const int64_t *dims, const void *src,
                            const int64_t *ss, const uint8_t *shift, void *dst, const int64_t *ds, int64_t dst_off,
                            size_t es, cu_copy_args **made) {
  cuda_step *s = cuda_new_step(pl, ST_COPY, n);
  cu_copy_args *a = s ? cuda_new_args(s, sizeof *a) : NULL;
  if (!a) return cuda_nomem(n);
  a->rank = rank;
  a->es = (int)es;
  a->pdl = pl->pdl;
  a->numel = 1;
  for (int i = 0; i < rank; i++) {
    a->dims[i] = dims[i];
    a->src_stride[i] = ss[i];
    a->dst_stride[i] = ds[i];
    a->shift[i] = shift ? shift[i] : 0;
    a->numel *= dims[i];
  }
  a->src = src;
  a->dst = dst;
  a->dst_off = dst_off;
  if (made) *made = a;
  else copy_coalesce(a);
  return RLX_OK;
}

static rlx_status emit_memcpy(cuda_plan *pl, const ir_node *n, void *dst, const void *src, size_t bytes) {
  if (!bytes || dst == src) return RLX_OK;
  cuda_step *s = cuda_new_step(pl, ST_MEMCPY, n);
  if (!s) return cuda_nomem(n);
  s->dst = dst, s->src = src, s->bytes = bytes;
  return RLX_OK;
}

/* t's shape s into d, as words for a block dtype (claims: whole rows moved
 * along an axis before the last): the last dim counts the widest words
 * that divide a row's bytes. Returns the size of an element or word. */
static size_t word_shape(rlx_dtype t, const ir_shape *s, int64_t *d) {
  memcpy(d, s->d, sizeof(int64_t) * (size_t)s->rank);
  if (!is_block(t) || s->rank == 0) return elem_size(t);
  const int64_t bytes = (int64_t)rlx_dtype_nbytes(t, d[s->rank - 1]);
  const int64_t w = bytes % 8 == 0 ? 8 : bytes % 4 == 0 ? 4 : bytes % 2 == 0 ? 2 : 1;
  d[s->rank - 1] = bytes / w;
  return (size_t)w;
}

rlx_status cuda_lower_layout(cuda_plan *pl, const ir_node *n) {
  const rlx_graph *g = pl->g;
  const ir_type *out = &n->out[0], *x = n->n_in ? ir_in(g, n, 0) : NULL;
  const int r = out->shape.rank;
  int64_t od[RLX_MAX_RANK], xd[RLX_MAX_RANK];
  const size_t es = word_shape(out->dtype, &out->shape, od);
  int64_t ss[RLX_MAX_RANK], ds[RLX_MAX_RANK], xs[RLX_MAX_RANK];
  cuda_contig_strides(r, od, ds);
  if (x) word_shape(x->dtype, &x->shape, xd), cuda_contig_strides(x->shape.rank, xd, xs);
  uint8_t *dst = out_ptr(pl, n), *src = x ? in_ptr(pl, n, 0) : NULL;
  switch (n->op) {
  case RLX_OP_Reshape:
  case RLX_OP_StopGradient:
  case RLX_OP_GetOutput:
  case RLX_OP_Cast: /* same dtype (a view the planner had to copy) */
    return emit_memcpy(pl, n, dst, src, rlx_dtype_nbytes(out->dtype, numel_of(out)));
  case RLX_OP_Assign: /* the value, input 1 (in place, plan_memory.c: a view, no copy) */
    return emit_memcpy(pl, n, dst, in_ptr(pl, n, 1), rlx_dtype_nbytes(out->dtype, numel_of(out)));
  case RLX_OP_Expand:
    cuda_bcast_strides(&x->shape, r, out->shape.d, ss);
    return emit_copy(pl, n, r, out->shape.d, src, ss, NULL, dst, ds, 0, es, NULL);
  case RLX_OP_Transpose:
    for (int k = 0; k < r; k++) ss[k] = xs[n->a.perm.v[k]];
    return emit_copy(pl, n, r, out->shape.d, src, ss, NULL, dst, ds, 0, es, NULL);
  case RLX_OP_Narrow:
    return emit_copy(pl, n, r, od, src + (size_t)(n->a.start * xs[n->a.axis]) * es, xs, NULL, dst, ds, 0,
                     es, NULL);
  case RLX_OP_Slice: {
    int64_t off = 0;
    for (int k = 0; k < r; k++) {
      off += n->a.starts.v[k] * xs[k];
      ss[k] = out->shape.d[k] > 1 ? xs[k] * n->a.steps.v[k] : 0;
    }
    return emit_copy(pl, n, r, out->shape.d, src + (size_t)off * es, ss, NULL, dst, ds, 0, es, NULL);
  }
  case RLX_OP_Concat: {
    int64_t at = 0;
    for (int i = 0; i < n->n_in; i++) {
      const ir_type *t = ir_in(g, n, i);
      cuda_contig_strides(t->shape.rank, t->shape.d, ss);
      rlx_status st = emit_copy(pl, n, r, t->shape.d, in_ptr(pl, n, i), ss, NULL, dst, ds, at * ds[n->a.axis], es, NULL);
      if (st) return st;
      at += t->shape.d[n->a.axis];
    }
    return RLX_OK;
  }
  case RLX_OP_Pad: {
    cuda_step *s = cuda_new_step(pl, ST_FILL, n);
    if (!s) return cuda_nomem(n);
    s->dst = dst, s->es = (int)es, s->n0 = numel_of(out), s->bits = element_bits(out->dtype, n->a.value);
    int64_t off = 0;
    for (int k = 0; k < r; k++) off += n->a.before.v[k] * ds[k];
    return emit_copy(pl, n, r, x->shape.d, src, xs, NULL, dst, ds, off, es, NULL);
  }
  case RLX_OP_ResizeNearest2x:
  case RLX_OP_TransformRegion: {
    uint8_t shift[RLX_MAX_RANK] = {0};
    shift[2] = shift[3] = (uint8_t)(n->op == RLX_OP_ResizeNearest2x ? 1 : n->a.transforms.n);
    return emit_copy(pl, n, r, out->shape.d, src, xs, shift, dst, ds, 0, es, NULL);
  }
  case RLX_OP_UpdateSlice: {
    const ir_type *upd = ir_in(g, n, 1), *start = ir_in(g, n, 2);
    rlx_status st = emit_memcpy(pl, n, dst, src, rlx_dtype_nbytes(out->dtype, numel_of(out)));
    if (st) return st;
    int64_t ud[RLX_MAX_RANK], us[RLX_MAX_RANK];
    word_shape(upd->dtype, &upd->shape, ud);
    cuda_contig_strides(upd->shape.rank, ud, us);
    /* the update through the Cast it absorbed (cuda_lower_node left the Cast out) */
    const ir_node *cast = &g->nodes[n->in[1]];
    const int through = cast->op == RLX_OP_Cast && pl->cast_into[cast->id] == n->id;
    cu_copy_args *a;
    st = emit_copy(pl, n, r, ud, through ? in_ptr(pl, cast, 0) : in_ptr(pl, n, 1), us, NULL, dst, ds, 0,
                   es, &a);
    if (st) return st;
    if (through) a->convert = 1, a->src_dtype = ir_in(g, cast, 0)->dtype, a->dst_dtype = out->dtype;
    a->dyn = in_ptr(pl, n, 2);
    a->dyn_dtype = start->dtype;
    a->dyn_mul = ds[n->a.axis];
    a->dyn_max = x->shape.d[n->a.axis] - upd->shape.d[n->a.axis];
    a->node = n->id;
    a->err = pl->err_dev;
    pl->has_err = 1;
    copy_coalesce(a);
    cuda_fuse_site site = {.bytes = rlx_dtype_nbytes(out->dtype, numel_of(out))};
    if (!cuda_fuse(pl, CUDA_FUSE_QMV_CACHE, n, &site)) cuda_fuse(pl, CUDA_FUSE_UPDATE_JOIN, n, &site);
    return RLX_OK;
  }
  case RLX_OP_Gather: {
    const ir_type *idx = ir_in(g, n, 1);
    cuda_step *s = cuda_new_step(pl, ST_GATHER, n);
    cu_gather_args *a = s ? cuda_new_args(s, sizeof *a) : NULL;
    if (!a) return cuda_nomem(n);
    const int axis = (int)n->a.axis;
    a->outer = 1, a->inner = 1;
    for (int i = 0; i < axis; i++) a->outer *= x->shape.d[i];
    for (int i = axis + 1; i < x->shape.rank; i++) a->inner *= x->shape.d[i];
    a->len = x->shape.d[axis];
    a->n_idx = numel_of(idx);
    a->table = src, a->idx = in_ptr(pl, n, 1), a->out = dst;
    a->es = (int)es, a->idx_dtype = idx->dtype, a->node = n->id, a->err = pl->err_dev;
    if (is_block(x->dtype)) { /* rows of whole blocks (claims): moved as the widest words that divide them */
      const int64_t bytes = (int64_t)rlx_dtype_nbytes(x->dtype, a->inner);
      a->es = bytes % 8 == 0 ? 8 : bytes % 4 == 0 ? 4 : bytes % 2 == 0 ? 2 : 1;
      a->inner = bytes / a->es;
    }
    pl->has_err = 1;
    return RLX_OK;
  }
  case RLX_OP_Iota: {
    cuda_step *s = cuda_new_step(pl, ST_IOTA, n);
    if (!s) return cuda_nomem(n);
    int64_t inner = 1;
    for (int i = (int)n->a.axis + 1; i < r; i++) inner *= out->shape.d[i];
    s->dst = dst, s->dtype = out->dtype, s->n0 = numel_of(out), s->n1 = r ? out->shape.d[n->a.axis] : 1, s->n2 = inner;
    return RLX_OK;
  }
  case RLX_OP_OneHot: {
    cuda_step *s = cuda_new_step(pl, ST_ONE_HOT, n);
    if (!s) return cuda_nomem(n);
    s->src = src, s->dtype = x->dtype, s->dst = dst, s->es = (int)es, s->bits = element_bits(out->dtype, 1.0);
    s->n0 = numel_of(x), s->n1 = n->a.depth;
    return RLX_OK;
  }
  case RLX_OP_Tri: {
    cuda_step *s = cuda_new_step(pl, ST_TRI, n);
    if (!s) return cuda_nomem(n);
    int64_t rows = out->shape.d[r - 2], cols = out->shape.d[r - 1];
    int64_t k = n->a.k < -rows - 1 ? -rows - 1 : n->a.k > cols + 1 ? cols + 1 : n->a.k;
    s->src = src, s->dst = dst, s->es = (int)es, s->n0 = rows * cols != 0 ? numel_of(out) / (rows * cols) : 0;
    s->n1 = rows, s->n2 = cols, s->flag = n->a.upper != 0, s->n3 = k;
    return RLX_OK;
  }
  default: return rlx_set_error(RLX_ERR_INTERNAL, "CUDA: %s is not a layout op", ir_ops[n->op].name);
  }
}
