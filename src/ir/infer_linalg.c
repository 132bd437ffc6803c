/* infer_linalg.c — builders and shape inference of MatMul, Attention, Rope,
 * CrossEntropy and MseLoss. */
#include "ir.h"

#include <math.h>
#include <string.h>

/* ---------------------------------------------------------------- helpers */

/* A builder argument that cannot become an attribute (a NULL descriptor):
 * reported against the node the call would have made. */
static rlx_node fail_null_desc(rlx_graph *g, int op) {
  if (!g) {
    rlx_set_error(RLX_ERR_INVALID, "%s: graph is NULL", ir_ops[op].name);
    return -1;
  }
  if (g->err) return rlx_graph_status(g), -1;
  ir_node tmp;
  memset(&tmp, 0, sizeof tmp);
  tmp.op = op;
  tmp.id = g->n_nodes;
  return ir_fail(g, &tmp, RLX_ERR_INVALID, "descriptor is NULL");
}

/* Largest num_heads / head_dim accepted. */
#define IR_ATTN_MAX (1 << 24)

static int is_finite(double v) { return !isnan(v) && !isinf(v); }

/* ---------------------------------------------------------------- MatMul */

rlx_node rlx_matmul(rlx_graph *g, rlx_node a, rlx_node b) {
  ir_attrs at;
  ir_attrs_init_defaults(&at);
  rlx_node in[] = {a, b};
  return ir_add_node(g, RLX_OP_MatMul, 2, in, &at);
}

/* numpy.matmul: a rank-1 a is [1, K] and a rank-1 b is [K, 1], that dim
 * dropped from the result (both rank 1: a rank-0 dot product); rank 0 is
 * rejected. Both operands must have the same float dtype. */
int ir_infer_MatMul(rlx_graph *g, ir_node *n) {
  const ir_type *ta = ir_in(g, n, 0), *tb = ir_in(g, n, 1);
  if (!ir_is_float(ta->dtype) || ta->dtype != tb->dtype)
    return ir_fail(g, n, RLX_ERR_DTYPE, "operands must share one float dtype, got %s and %s",
                   rlx_dtype_name(ta->dtype), rlx_dtype_name(tb->dtype));
  const ir_shape *sa = &ta->shape, *sb = &tb->shape;
  if (sa->rank < 1 || sb->rank < 1)
    return ir_fail(g, n, RLX_ERR_SHAPE, "operands must have rank >= 1, got a %s and b %s",
                   IR_SHAPE_S(g, sa), IR_SHAPE_S(g, sb));
  int64_t K = sa->d[sa->rank - 1];
  int64_t Kb = sb->rank == 1 ? sb->d[0] : sb->d[sb->rank - 2];
  if (!ir_dims_compatible(K, Kb))
    return ir_fail(g, n, RLX_ERR_SHAPE, "inner dims differ: a %s @ b %s", IR_SHAPE_S(g, sa),
                   IR_SHAPE_S(g, sb));
  ir_shape ba = {0}, bb = {0}, out;
  ba.rank = sa->rank > 2 ? sa->rank - 2 : 0;
  bb.rank = sb->rank > 2 ? sb->rank - 2 : 0;
  memcpy(ba.d, sa->d, (size_t)ba.rank * sizeof ba.d[0]);
  memcpy(bb.d, sb->d, (size_t)bb.rank * sizeof bb.d[0]);
  if (!ir_broadcast(g, &ba, &bb, &out))
    return ir_fail(g, n, RLX_ERR_SHAPE, "batch dims do not broadcast: a %s @ b %s",
                   IR_SHAPE_S(g, sa), IR_SHAPE_S(g, sb));
  if (sa->rank >= 2) out.d[out.rank++] = sa->d[sa->rank - 2];
  if (sb->rank >= 2) out.d[out.rank++] = sb->d[sb->rank - 1];
  n->out[0].dtype = ta->dtype;
  n->out[0].shape = out;
  return 0;
}

/* ---------------------------------------------------------------- Attention */

rlx_node rlx_attention(rlx_graph *g, rlx_node q, rlx_node k, rlx_node v, rlx_node mask,
                       const rlx_attention_desc *d) {
  if (!d) return fail_null_desc(g, RLX_OP_Attention);
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.num_heads = d->num_heads;
  a.num_kv_heads = d->num_kv_heads;
  a.head_dim = d->head_dim;
  a.mask = d->mask_kind;
  a.window = d->window;
  a.score_scale = d->score_scale;
  a.softcap = d->softcap;
  a.layout = d->layout;
  rlx_node in[] = {q, k, v, mask};
  /* A failed mask node (-1) is reported by its own sticky error; without
   * one, inference names the missing mask input. */
  return ir_add_node(g, RLX_OP_Attention, mask >= 0 ? 4 : 3, in, &a);
}

/* Decisions where OPS.md is silent: num_kv_heads 0 means num_heads and
 * head_dim 0 is taken from q (both normalized in place); k and v must have
 * q's dtype; the custom mask is F32 of rank <= 4; v has head_dim too (the
 * output has q's shape); score_scale and softcap must be finite (<= 0 means
 * off); layout must be a valid name even for rank 3, where it is ignored. */
int ir_infer_Attention(rlx_graph *g, ir_node *n) {
  const ir_type *tq = ir_in(g, n, 0), *tk = ir_in(g, n, 1), *tv = ir_in(g, n, 2);
  const ir_shape *q = &tq->shape, *k = &tk->shape, *v = &tv->shape;
  ir_attrs *a = &n->a;
  /* k and v: q's float dtype, or (a quantized KV cache) one GGUF block
   * dtype under an F32 q, each head's row whole blocks (checked below) */
  const int block_kv = ir_dtype_valid(tk->dtype) && ir_is_block(tk->dtype);
  if (!ir_is_float(tq->dtype) || tv->dtype != tk->dtype ||
      (block_kv ? tq->dtype != RLX_F32 : tk->dtype != tq->dtype))
    return ir_fail(g, n, RLX_ERR_DTYPE, "q, k, v must share one float dtype (or k and v one block dtype under an "
                   "f32 q), got %s, %s, %s", rlx_dtype_name(tq->dtype), rlx_dtype_name(tk->dtype),
                   rlx_dtype_name(tv->dtype));
  if ((q->rank != 3 && q->rank != 4) || k->rank != q->rank || v->rank != q->rank)
    return ir_fail(g, n, RLX_ERR_SHAPE, "q, k, v must all be rank 3 or all rank 4, got q %s, k %s, v %s",
                   IR_SHAPE_S(g, q), IR_SHAPE_S(g, k), IR_SHAPE_S(g, v));
  if (a->mask < 0 || a->mask >= RLX_MASK_COUNT)
    return ir_fail(g, n, RLX_ERR_INVALID, "mask kind %lld is not a mask kind", (long long)a->mask);
  if (a->layout < 0 || a->layout >= RLX_LAYOUT_COUNT)
    return ir_fail(g, n, RLX_ERR_INVALID, "layout %lld is not a layout", (long long)a->layout);
  if ((a->mask == RLX_MASK_CUSTOM) != (n->n_in == 4))
    return ir_fail(g, n, RLX_ERR_INVALID, "a mask input is given iff the mask kind is custom "
                   "(mask %s, %d inputs)", ir_mask_names[a->mask], n->n_in);
  if (a->mask == RLX_MASK_SLIDING_WINDOW && a->window <= 0)
    return ir_fail(g, n, RLX_ERR_INVALID, "sliding_window needs window > 0, got %lld",
                   (long long)a->window);
  if (!is_finite(a->score_scale) || !is_finite(a->softcap))
    return ir_fail(g, n, RLX_ERR_INVALID, "score_scale %g and softcap %g must be finite",
                   a->score_scale, a->softcap);
  if (a->num_kv_heads == 0) a->num_kv_heads = a->num_heads;
  if (a->num_heads <= 0 || a->num_kv_heads <= 0 || a->num_heads % a->num_kv_heads)
    return ir_fail(g, n, RLX_ERR_INVALID,
                   "num_heads %lld must be a positive multiple of num_kv_heads %lld",
                   (long long)a->num_heads, (long long)a->num_kv_heads);

  const int bhsd = q->rank == 4 && a->layout == RLX_LAYOUT_BHSD;
  const int seq_ax = bhsd ? 2 : 1, head_ax = bhsd ? 1 : 2;
  if (a->head_dim == 0) {
    int64_t last = q->d[q->rank - 1];
    if (!ir_dim_is_sym(last) && (q->rank == 4 || last % a->num_heads == 0))
      a->head_dim = q->rank == 4 ? last : last / a->num_heads;
  }
  if (a->head_dim <= 0)
    return ir_fail(g, n, RLX_ERR_INVALID, "head_dim %lld must be > 0 (0: taken from q %s)",
                   (long long)a->head_dim, IR_SHAPE_S(g, q));
  /* bounds keep heads * head_dim (and the kernels' index math) far from overflow */
  if (a->num_heads > IR_ATTN_MAX || a->head_dim > IR_ATTN_MAX)
    return ir_fail(g, n, RLX_ERR_INVALID, "num_heads %lld or head_dim %lld exceeds %d",
                   (long long)a->num_heads, (long long)a->head_dim, IR_ATTN_MAX);
  if (block_kv && a->head_dim % ir_dtypes[tk->dtype].block)
    return ir_fail(g, n, RLX_ERR_SHAPE, "head_dim %lld is not a multiple of %s's block of %d: a head's row of k "
                   "and v must be whole blocks", (long long)a->head_dim, rlx_dtype_name(tk->dtype),
                   (int)ir_dtypes[tk->dtype].block);

  const ir_shape *kv[2] = {k, v};
  int ok = 1;
  for (int i = 0; i < 2; i++) {
    ok = ok && ir_dims_compatible(kv[i]->d[0], q->d[0]) && ir_dims_compatible(kv[i]->d[seq_ax], k->d[seq_ax]);
    if (q->rank == 3)
      ok = ok && ir_dims_compatible(kv[i]->d[2], a->num_kv_heads * a->head_dim);
    else
      ok = ok && ir_dims_compatible(kv[i]->d[head_ax], a->num_kv_heads) &&
           ir_dims_compatible(kv[i]->d[3], a->head_dim);
  }
  if (q->rank == 3)
    ok = ok && ir_dims_compatible(q->d[2], a->num_heads * a->head_dim);
  else
    ok = ok && ir_dims_compatible(q->d[head_ax], a->num_heads) && ir_dims_compatible(q->d[3], a->head_dim);
  if (!ok)
    return ir_fail(g, n, RLX_ERR_SHAPE,
                   "q %s, k %s, v %s do not fit %s layout with num_heads %lld, num_kv_heads "
                   "%lld, head_dim %lld and one batch and key length",
                   IR_SHAPE_S(g, q), IR_SHAPE_S(g, k), IR_SHAPE_S(g, v),
                   q->rank == 3 ? "[B,S,H*D]" : bhsd ? "[B,H,S,D]" : "[B,S,H,D]",
                   (long long)a->num_heads, (long long)a->num_kv_heads, (long long)a->head_dim);

  if (n->n_in == 4) {
    const ir_type *tm = ir_in(g, n, 3);
    if (tm->dtype != RLX_F32)
      return ir_fail(g, n, RLX_ERR_DTYPE, "custom mask must be f32, got %s",
                     rlx_dtype_name(tm->dtype));
    const ir_shape full = {4, {q->d[0], a->num_heads, q->d[seq_ax], k->d[seq_ax]}};
    const ir_shape *m = &tm->shape;
    ok = m->rank <= 4;
    for (int i = 0; ok && i < m->rank; i++) {
      int64_t md = m->d[i], fd = full.d[4 - m->rank + i];
      ok = md == 1 || ir_dims_compatible(md, fd);
    }
    if (!ok)
      return ir_fail(g, n, RLX_ERR_SHAPE, "custom mask %s does not broadcast to [B,H,S,T] %s",
                     IR_SHAPE_S(g, m), IR_SHAPE_S(g, &full));
  }
  n->out[0] = *tq;
  return 0;
}

/* ---------------------------------------------------------------- Rope */

static void rope_attrs(ir_attrs *a, const rlx_rope_desc *d) {
  ir_attrs_init_defaults(a);
  a->head_dim = d->head_dim;
  a->n_rot = d->n_rot;
  a->rope_mode = d->mode;
  a->base = d->base;
  a->scale = d->scale;
}

rlx_node rlx_rope(rlx_graph *g, rlx_node x, rlx_node pos, const rlx_rope_desc *d) {
  if (!d) return fail_null_desc(g, RLX_OP_Rope);
  ir_attrs a;
  rope_attrs(&a, d);
  rlx_node in[] = {x, pos};
  return ir_add_node(g, RLX_OP_Rope, 2, in, &a);
}

rlx_node rlx_rope_cos_sin(rlx_graph *g, rlx_node x, rlx_node cos, rlx_node sin,
                          const rlx_rope_desc *d) {
  if (!d) return fail_null_desc(g, RLX_OP_Rope);
  ir_attrs a;
  rope_attrs(&a, d);
  rlx_node in[] = {x, cos, sin};
  return ir_add_node(g, RLX_OP_Rope, 3, in, &a);
}

/* Inputs (x, pos) or (x, cos, sin). Decisions where OPS.md is silent:
 * head_dim 0 is taken from a rank-4 x and n_rot 0 means head_dim (both
 * normalized in place); base and scale must be finite and > 0 with pos
 * (they are unused with tables); cos and sin share one shape and one dtype,
 * x's or F32. */
int ir_infer_Rope(rlx_graph *g, ir_node *n) {
  const ir_type *tx = ir_in(g, n, 0);
  const ir_shape *x = &tx->shape;
  ir_attrs *a = &n->a;
  if (!ir_is_float(tx->dtype))
    return ir_fail(g, n, RLX_ERR_DTYPE, "x dtype %s is not a float type", rlx_dtype_name(tx->dtype));
  if (x->rank != 3 && x->rank != 4)
    return ir_fail(g, n, RLX_ERR_SHAPE, "x must be [B,S,H*D] or [B,S,H,D], got %s", IR_SHAPE_S(g, x));
  if (a->rope_mode < 0 || a->rope_mode >= RLX_ROPE_COUNT)
    return ir_fail(g, n, RLX_ERR_INVALID, "mode %lld is not a rope mode", (long long)a->rope_mode);
  int64_t last = x->d[x->rank - 1];
  if (a->head_dim == 0 && x->rank == 4 && !ir_dim_is_sym(last)) a->head_dim = last;
  if (a->head_dim <= 0)
    return ir_fail(g, n, RLX_ERR_INVALID, "head_dim %lld must be > 0 (0: taken from a rank-4 x)",
                   (long long)a->head_dim);
  if (x->rank == 4 ? !ir_dims_compatible(last, a->head_dim)
                   : !ir_dim_is_sym(last) && last % a->head_dim != 0)
    return ir_fail(g, n, RLX_ERR_SHAPE, "x %s does not hold heads of head_dim %lld",
                   IR_SHAPE_S(g, x), (long long)a->head_dim);
  if (a->n_rot == 0) a->n_rot = a->head_dim;
  if (a->n_rot < 0 || a->n_rot % 2 || a->n_rot > a->head_dim)
    return ir_fail(g, n, RLX_ERR_INVALID, "n_rot %lld must be even and in (0, head_dim %lld]",
                   (long long)a->n_rot, (long long)a->head_dim);

  if (n->n_in == 2) {
    const ir_type *tp = ir_in(g, n, 1);
    const ir_shape *p = &tp->shape;
    if (tp->dtype != RLX_I32 && tp->dtype != RLX_I64)
      return ir_fail(g, n, RLX_ERR_DTYPE, "pos must be i32 or i64, got %s", rlx_dtype_name(tp->dtype));
    int ok = p->rank == 1 ? ir_dims_compatible(p->d[0], x->d[1])
           : p->rank == 2 && ir_dims_compatible(p->d[0], x->d[0]) && ir_dims_compatible(p->d[1], x->d[1]);
    if (!ok)
      return ir_fail(g, n, RLX_ERR_SHAPE, "pos %s must be [S] or [B,S] for x %s", IR_SHAPE_S(g, p),
                     IR_SHAPE_S(g, x));
    if (!is_finite(a->base) || a->base <= 0 || !is_finite(a->scale) || a->scale <= 0)
      return ir_fail(g, n, RLX_ERR_INVALID, "base %g and scale %g must be finite and > 0",
                     a->base, a->scale);
  } else {
    const ir_type *tc = ir_in(g, n, 1), *ts = ir_in(g, n, 2);
    const ir_shape *c = &tc->shape;
    if (tc->dtype != ts->dtype || (tc->dtype != tx->dtype && tc->dtype != RLX_F32))
      return ir_fail(g, n, RLX_ERR_DTYPE, "cos and sin must both be f32 or x's dtype %s, got %s and %s",
                     rlx_dtype_name(tx->dtype), rlx_dtype_name(tc->dtype), rlx_dtype_name(ts->dtype));
    int ok = ir_shape_eq(c, &ts->shape);
    if (c->rank == 2)
      ok = ok && ir_dims_compatible(c->d[0], x->d[1]) && ir_dims_compatible(c->d[1], a->n_rot / 2);
    else
      ok = ok && c->rank == 3 && ir_dims_compatible(c->d[0], x->d[0]) &&
           ir_dims_compatible(c->d[1], x->d[1]) && ir_dims_compatible(c->d[2], a->n_rot / 2);
    if (!ok)
      return ir_fail(g, n, RLX_ERR_SHAPE,
                     "cos %s and sin %s must both be [S, n_rot/2] or [B, S, n_rot/2] for x %s "
                     "and n_rot %lld", IR_SHAPE_S(g, c), IR_SHAPE_S(g, &ts->shape), IR_SHAPE_S(g, x),
                     (long long)a->n_rot);
  }
  n->out[0] = *tx;
  return 0;
}

/* ---------------------------------------------------------------- losses */

rlx_node rlx_cross_entropy(rlx_graph *g, rlx_node logits, rlx_node target, int axis,
                           int64_t ignore_index, double label_smoothing) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.axis = axis;
  a.ignore_index = ignore_index;
  a.label_smoothing = label_smoothing;
  rlx_node in[] = {logits, target};
  return ir_add_node(g, RLX_OP_CrossEntropy, 2, in, &a);
}

/* PyTorch semantics with the class dim at `axis` (normalized in place):
 * target has logits' shape without that axis. label_smoothing in [0, 1].
 * Decision: when every target is ignore_index the loss is 0 (PyTorch gives
 * NaN). An out-of-range target is a run-time error of the kernel. */
int ir_infer_CrossEntropy(rlx_graph *g, ir_node *n) {
  const ir_type *tl = ir_in(g, n, 0), *tt = ir_in(g, n, 1);
  const ir_shape *l = &tl->shape, *t = &tt->shape;
  if (!ir_is_float(tl->dtype))
    return ir_fail(g, n, RLX_ERR_DTYPE, "logits dtype %s is not a float type", rlx_dtype_name(tl->dtype));
  if (tt->dtype != RLX_I32 && tt->dtype != RLX_I64)
    return ir_fail(g, n, RLX_ERR_DTYPE, "target must be i32 or i64, got %s", rlx_dtype_name(tt->dtype));
  if (l->rank < 1)
    return ir_fail(g, n, RLX_ERR_SHAPE, "logits must have a class axis, got %s", IR_SHAPE_S(g, l));
  int ax = ir_norm_axis(n->a.axis, l->rank);
  if (ax < 0)
    return ir_fail(g, n, RLX_ERR_SHAPE, "axis %lld out of range for logits %s", (long long)n->a.axis,
                   IR_SHAPE_S(g, l));
  n->a.axis = ax;
  int ok = t->rank == l->rank - 1;
  for (int i = 0; ok && i < t->rank; i++) ok = ir_dims_compatible(t->d[i], l->d[i < ax ? i : i + 1]);
  if (!ok)
    return ir_fail(g, n, RLX_ERR_SHAPE, "target %s must be logits %s without axis %d", IR_SHAPE_S(g, t),
                   IR_SHAPE_S(g, l), ax);
  if (!(n->a.label_smoothing >= 0 && n->a.label_smoothing <= 1))
    return ir_fail(g, n, RLX_ERR_INVALID, "label_smoothing %g must be in [0, 1]", n->a.label_smoothing);
  n->out[0].dtype = tl->dtype;
  n->out[0].shape.rank = 0;
  return 0;
}

rlx_node rlx_mse_loss(rlx_graph *g, rlx_node a, rlx_node b) {
  ir_attrs at;
  ir_attrs_init_defaults(&at);
  rlx_node in[] = {a, b};
  return ir_add_node(g, RLX_OP_MseLoss, 2, in, &at);
}

/* Decisions where OPS.md is silent: a and b broadcast by NumPy rules and
 * the mean is over the broadcast shape (as torch.nn.functional.mse_loss);
 * both share one float dtype; an empty broadcast shape gives 0. */
int ir_infer_MseLoss(rlx_graph *g, ir_node *n) {
  const ir_type *ta = ir_in(g, n, 0), *tb = ir_in(g, n, 1);
  if (!ir_is_float(ta->dtype) || ta->dtype != tb->dtype)
    return ir_fail(g, n, RLX_ERR_DTYPE, "a and b must share one float dtype, got %s and %s",
                   rlx_dtype_name(ta->dtype), rlx_dtype_name(tb->dtype));
  ir_shape out;
  if (!ir_broadcast(g, &ta->shape, &tb->shape, &out))
    return ir_fail(g, n, RLX_ERR_SHAPE, "a %s and b %s do not broadcast", IR_SHAPE_S(g, &ta->shape),
                   IR_SHAPE_S(g, &tb->shape));
  n->out[0].dtype = ta->dtype;
  n->out[0].shape.rank = 0;
  return 0;
}
