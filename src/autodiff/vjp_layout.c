/* vjp_layout.c — vector-Jacobian rules of the layout and data-movement
 * ops. Each is the op's adjoint: a reshape back, a transpose by the
 * inverse permutation, slices padded back into zeros, gathers scattered
 * back (duplicates accumulate), broadcasts summed. */
#include "autodiff.h"

#include <stdint.h>

rlx_status ad_vjp_Reshape(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  ir_shape s = ad_type(c, n->in[0]).shape;
  return ad_accum(c, n->in[0], 0, rlx_reshape(c->g, gout[0], s.rank, s.d));
}

rlx_status ad_vjp_Expand(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  ir_shape s = ad_type(c, n->in[0]).shape;
  return ad_accum(c, n->in[0], 0, ad_reduce_to(c, gout[0], &s));
}

rlx_status ad_vjp_Transpose(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  int64_t inv[RLX_MAX_RANK];
  for (int i = 0; i < n->a.perm.n; i++) inv[n->a.perm.v[i]] = i;
  return ad_accum(c, n->in[0], 0, rlx_transpose(c->g, gout[0], n->a.perm.n, inv));
}

/* v padded with zeros by before[axis] / after[axis] on one axis. */
static rlx_node pad_axis(ad_ctx *c, rlx_node v, int rank, int axis, int64_t before, int64_t after) {
  if (before == 0 && after == 0) return v;
  int64_t b[RLX_MAX_RANK] = {0}, e[RLX_MAX_RANK] = {0};
  b[axis] = before;
  e[axis] = after;
  return rlx_pad(c->g, v, rank, b, e, 0.0);
}

rlx_status ad_vjp_Narrow(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  ir_type tx = ad_type(c, n->in[0]);
  int axis = (int)n->a.axis;
  int64_t dim = tx.shape.d[axis], start = n->a.start, len = n->a.len;
  rlx_node gx;
  if (!ir_dim_is_sym(dim)) {
    gx = pad_axis(c, gout[0], tx.shape.rank, axis, start, dim - start - len);
  } else if (start >= 0) { /* a symbolic dim: write the gradient into zeros */
    gx = rlx_update_slice(c->g, ad_fill(c, &tx, 0.0), gout[0], ad_scalar(c, RLX_I64, (double)start), axis);
  } else {
    return ad_unsupported(c, n, "Narrow with a negative start on a symbolic dim");
  }
  return ad_accum(c, n->in[0], 0, gx);
}

/* v [.., m, ..] with step - 1 zeros after each element along axis:
 * [.., m * step, ..]. */
static rlx_node interleave_zeros(ad_ctx *c, const ir_node *n, rlx_node v, int axis, int64_t step) {
  ir_shape s = ad_type(c, v).shape;
  if (s.rank == RLX_MAX_RANK) return ad_unsupported(c, n, "strided Slice of a rank-8 tensor"), -1;
  ir_shape wide = {s.rank + 1, {0}};
  for (int i = 0, j = 0; i < s.rank; i++) {
    wide.d[j++] = s.d[i];
    if (i == axis) wide.d[j++] = 1;
  }
  rlx_node r = pad_axis(c, rlx_reshape(c->g, v, wide.rank, wide.d), wide.rank, axis + 1, 0, step - 1);
  s.d[axis] *= step;
  return rlx_reshape(c->g, r, s.rank, s.d);
}

/* The slice's elements go back to start + i * step; the rest is zero. */
rlx_status ad_vjp_Slice(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  ir_type tx = ad_type(c, n->in[0]);
  const int rank = tx.shape.rank;
  int64_t before[RLX_MAX_RANK] = {0}, after[RLX_MAX_RANK] = {0};
  int padded = 0;
  rlx_node r = gout[0];
  for (int i = 0; i < rank; i++) {
    int64_t dim = tx.shape.d[i], step = n->a.steps.v[i], start = n->a.starts.v[i], m = n->out[0].shape.d[i];
    if (ir_dim_is_sym(dim)) {
      if (start == 0 && n->a.ends.v[i] == INT64_MAX && step == 1) continue;
      return ad_unsupported(c, n, "a partial Slice of a symbolic dim");
    }
    int64_t len = m;
    if (step > 1 && m > 0) {
      r = interleave_zeros(c, n, r, i, step);
      len = m * step;
      if (start + len > dim) {
        r = rlx_narrow(c->g, r, i, 0, dim - start);
        len = dim - start;
      }
    }
    before[i] = start;
    after[i] = dim - start - len;
    padded |= before[i] || after[i];
  }
  if (padded) r = rlx_pad(c->g, r, rank, before, after, 0.0);
  return ad_accum(c, n->in[0], 0, r);
}

rlx_status ad_vjp_Concat(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  int axis = (int)n->a.axis;
  int64_t offset = 0;
  rlx_status st = RLX_OK;
  for (int k = 0; st == RLX_OK && k < n->n_in; k++) {
    int64_t len = ad_type(c, n->in[k]).shape.d[axis];
    if (ad_active(c, n->in[k])) {
      if (ir_dim_is_sym(len) || offset < 0) return ad_unsupported(c, n, "Concat along a symbolic dim");
      st = ad_accum(c, n->in[k], 0, rlx_narrow(c->g, gout[0], axis, offset, len));
    }
    offset = offset < 0 || ir_dim_is_sym(len) ? -1 : offset + len;
  }
  return st;
}

rlx_status ad_vjp_Pad(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  ir_type tx = ad_type(c, n->in[0]);
  int64_t starts[RLX_MAX_RANK], ends[RLX_MAX_RANK], steps[RLX_MAX_RANK];
  for (int i = 0; i < tx.shape.rank; i++) {
    int64_t dim = tx.shape.d[i], b = n->a.before.v[i];
    steps[i] = 1;
    starts[i] = b;
    ends[i] = ir_dim_is_sym(dim) ? INT64_MAX : b + dim;
    if (ir_dim_is_sym(dim) && (b || n->a.after.v[i])) return ad_unsupported(c, n, "Pad of a symbolic dim");
  }
  return ad_accum(c, n->in[0], 0, rlx_slice(c->g, gout[0], tx.shape.rank, starts, ends, steps));
}

/* Rows gathered several times get the sum of their gradients. */
rlx_status ad_vjp_Gather(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  ir_type tt = ad_type(c, n->in[0]);
  rlx_node gt = rlx_scatter_add(c->g, ad_fill(c, &tt, 0.0), n->in[1], gout[0], (int)n->a.axis);
  return ad_accum(c, n->in[0], 0, gt);
}

rlx_status ad_vjp_ScatterAdd(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  rlx_status st = ad_active(c, n->in[0]) ? ad_accum(c, n->in[0], 0, gout[0]) : RLX_OK;
  if (st == RLX_OK && ad_active(c, n->in[2]))
    st = ad_accum(c, n->in[2], 0, rlx_gather(c->g, gout[0], n->in[1], (int)n->a.axis));
  return st;
}

/* The written rows of x get no gradient; the update gets those rows of
 * the gradient, gathered at start + [0, len). */
rlx_status ad_vjp_UpdateSlice(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  ir_type tu = ad_type(c, n->in[1]);
  int axis = (int)n->a.axis;
  rlx_status st = RLX_OK;
  if (ad_active(c, n->in[0]))
    st = ad_accum(c, n->in[0], 0, rlx_update_slice(c->g, gout[0], ad_fill(c, &tu, 0.0), n->in[2], axis));
  if (st == RLX_OK && ad_active(c, n->in[1])) {
    int64_t len = tu.shape.d[axis];
    rlx_node start = rlx_cast(c->g, rlx_reshape(c->g, n->in[2], 0, NULL), RLX_I64);
    rlx_node rows = rlx_add(c->g, rlx_iota(c->g, RLX_I64, 1, &len, 0), start);
    st = ad_accum(c, n->in[1], 0, rlx_gather(c->g, gout[0], rows, axis));
  }
  return st;
}

rlx_status ad_vjp_Tri(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  return ad_accum(c, n->in[0], 0, ad_same_op(c, n, gout));
}

rlx_status ad_vjp_GetOutput(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  return ad_accum(c, n->in[0], (int)n->a.index, gout[0]);
}

/* Domain-adversarial training: the forward identity sends -scale times
 * the gradient back. */
rlx_status ad_vjp_GradientReversal(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  return ad_accum(c, n->in[0], 0, ad_scale(c, gout[0], -n->a.scale));
}
