/* expand.c — ops rebuilt from primitives for differentiation: the
 * normalizers, attention, Rope with differentiable tables, pooling,
 * LogMel, the losses and the fused ops. Each expansion computes what the
 * op computes (up to rounding: it is evaluated in the op's dtype where the
 * kernel works in double), and the primitives' rules differentiate it
 * (ad_vjp_expanded / ad_jvp_expanded). Where the op's value picks one
 * element (a max pool), the expansion reads the op's own output through a
 * comparison, so the derivative goes exactly where the kernel's choice
 * went. */
#include "autodiff.h"
#include "../pass/pass.h"
#include "../ir/mel.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#define K(v) ad_scalar(c, t, (v))

/* [C] -> [C, 1, ..., 1] against an [N, C, ...] tensor of rank `rank`. */
static rlx_node channel_view(ad_ctx *c, rlx_node v, int rank) {
  int64_t dims[RLX_MAX_RANK];
  dims[0] = ad_type(c, v).shape.d[0];
  for (int i = 1; i < rank - 1; i++) dims[i] = 1;
  return rlx_reshape(c->g, v, rank - 1, dims);
}

/* (x - mean) * rsqrt(var + eps) over axes [from, rank) of x, biased variance. */
static rlx_node standardize(ad_ctx *c, rlx_node x, int from, double eps) {
  rlx_graph *g = c->g;
  rlx_dtype t = ad_type(c, x).dtype;
  int rank = ad_type(c, x).shape.rank;
  int64_t axes[RLX_MAX_RANK];
  int na = 0;
  for (int i = from; i < rank; i++) axes[na++] = i;
  rlx_node xc = rlx_sub(g, x, rlx_reduce(g, RLX_REDUCE_MEAN, x, na, axes, 1));
  rlx_node var = rlx_reduce(g, RLX_REDUCE_MEAN, rlx_activation(g, RLX_ACT_SQUARE, xc), na, axes, 1);
  return rlx_mul(g, xc, rlx_activation(g, RLX_ACT_RSQRT, rlx_add(g, var, K(eps))));
}

rlx_node ad_expand_layer_norm(ad_ctx *c, const ir_node *n) {
  rlx_node xhat = standardize(c, n->in[0], (int)n->a.axis, n->a.eps);
  return rlx_add(c->g, rlx_mul(c->g, xhat, n->in[1]), n->in[2]);
}

rlx_node ad_expand_rms_norm(ad_ctx *c, const ir_node *n) {
  rlx_graph *g = c->g;
  rlx_node x = n->in[0];
  ir_type tx = ad_type(c, x);
  rlx_dtype t = tx.dtype;
  int64_t axes[RLX_MAX_RANK];
  int na = 0;
  for (int i = (int)n->a.axis; i < tx.shape.rank; i++) axes[na++] = i;
  rlx_node ms = rlx_reduce(g, RLX_REDUCE_MEAN, rlx_activation(g, RLX_ACT_SQUARE, x), na, axes, 1);
  rlx_node xhat = rlx_mul(g, x, rlx_activation(g, RLX_ACT_RSQRT, rlx_add(g, ms, K(n->a.eps))));
  return rlx_add(g, rlx_mul(g, xhat, n->in[1]), n->in[2]);
}

/* Statistics over each (n, group) of C/groups channels x spatial. */
rlx_node ad_expand_group_norm(ad_ctx *c, const ir_node *n) {
  rlx_graph *g = c->g;
  rlx_node x = n->in[0];
  ir_shape s = ad_type(c, x).shape;
  int64_t grouped[3] = {s.d[0], n->a.groups, -1};
  rlx_node xhat = rlx_reshape(g, standardize(c, rlx_reshape(g, x, 3, grouped), 2, n->a.eps), s.rank, s.d);
  return rlx_add(g, rlx_mul(g, xhat, channel_view(c, n->in[1], s.rank)), channel_view(c, n->in[2], s.rank));
}

rlx_node ad_expand_batch_norm(ad_ctx *c, const ir_node *n) {
  rlx_graph *g = c->g;
  ir_type tx = ad_type(c, n->in[0]);
  rlx_dtype t = tx.dtype;
  int r = tx.shape.rank;
  rlx_node rstd = rlx_activation(g, RLX_ACT_RSQRT, rlx_add(g, channel_view(c, n->in[2], r), K(n->a.eps)));
  rlx_node xhat = rlx_mul(g, rlx_sub(g, n->in[0], channel_view(c, n->in[1], r)), rstd);
  return rlx_add(g, rlx_mul(g, xhat, channel_view(c, n->in[3], r)), channel_view(c, n->in[4], r));
}

/* ---------------------------------------------------------------- attention */

static rlx_node swap_last2(ad_ctx *c, rlx_node v, int rank) {
  int64_t perm[RLX_MAX_RANK];
  for (int i = 0; i < rank; i++) perm[i] = i;
  perm[rank - 2] = rank - 1;
  perm[rank - 1] = rank - 2;
  return rlx_transpose(c->g, v, rank, perm);
}

/* q, k or v in [B, heads, L, D]. */
static rlx_node heads_first(ad_ctx *c, const ir_node *n, rlx_node v, int64_t heads) {
  ir_shape s = ad_type(c, v).shape;
  const int64_t perm[4] = {0, 2, 1, 3};
  if (s.rank == 4 && n->a.layout == RLX_LAYOUT_BHSD) return v;
  if (s.rank == 3) {
    int64_t dims[4] = {s.d[0], s.d[1], heads, n->a.head_dim};
    v = rlx_reshape(c->g, v, 4, dims);
  }
  return rlx_transpose(c->g, v, 4, perm);
}

/* Whether query i of S sees key j of T (bottom-right aligned, as the kernel). */
static rlx_node visible_keys(ad_ctx *c, const ir_node *n, int64_t S, int64_t T) {
  rlx_graph *g = c->g;
  int64_t st[2] = {S, T};
  rlx_node i = rlx_iota(g, RLX_I64, 2, st, 0), j = rlx_iota(g, RLX_I64, 2, st, 1);
  rlx_node last = rlx_add(g, i, ad_scalar(c, RLX_I64, (double)(T - S)));
  rlx_node vis = rlx_compare(g, RLX_CMP_LE, j, last);
  if (n->a.mask == RLX_MASK_SLIDING_WINDOW) {
    rlx_node first = rlx_sub(g, last, ad_scalar(c, RLX_I64, (double)n->a.window));
    vis = ad_and(c, vis, rlx_compare(g, RLX_CMP_GT, j, first));
  }
  return vis;
}

/* scores = q k^T * scale [B, H, S, T] (grouped-query heads read their kv
 * head through a reshape, not a copy), softcap, mask, softmax over keys,
 * times v. A query row whose keys are all masked gives zeros, as the
 * kernel: its scores are replaced before the softmax and its weights
 * zeroed after, so no NaN reaches the gradient. */
rlx_node ad_expand_attention(ad_ctx *c, const ir_node *n) {
  rlx_graph *g = c->g;
  ir_type tq = ad_type(c, n->in[0]), tk = ad_type(c, n->in[1]);
  rlx_dtype t = tq.dtype;
  const int rank = tq.shape.rank, bhsd = rank == 4 && n->a.layout == RLX_LAYOUT_BHSD;
  const int seq_ax = bhsd ? 2 : 1;
  const int64_t H = n->a.num_heads, KVH = n->a.num_kv_heads, D = n->a.head_dim;
  const int64_t B = tq.shape.d[0], S = tq.shape.d[seq_ax], T = tk.shape.d[seq_ax];
  rlx_node q = heads_first(c, n, n->in[0], H), k = heads_first(c, n, n->in[1], KVH);
  rlx_node v = heads_first(c, n, n->in[2], KVH);
  int64_t grouped[4] = {B, KVH, -1, D}, scores4[4] = {B, H, S, T}, scores_g[4] = {B, KVH, -1, T};
  int64_t out4[4] = {B, H, S, D};
  rlx_node s = rlx_matmul(g, rlx_reshape(g, q, 4, grouped), swap_last2(c, k, 4));
  s = rlx_mul(g, rlx_reshape(g, s, 4, scores4), K(n->a.score_scale > 0 ? n->a.score_scale : 1.0 / sqrt((double)D)));
  if (n->a.softcap > 0)
    s = rlx_mul(g, rlx_activation(g, RLX_ACT_TANH, rlx_mul(g, s, K(1.0 / n->a.softcap))), K(n->a.softcap));
  rlx_node p;
  int64_t last_axis = 3;
  if (n->a.mask == RLX_MASK_NONE) {
    p = rlx_softmax(g, s, -1);
  } else {
    if (n->a.mask == RLX_MASK_CUSTOM) {
      rlx_node m = n->in[3];
      if (t != RLX_F32) m = rlx_cast(g, m, t);
      s = rlx_add(g, s, m);
    } else {
      if (ir_dim_is_sym(S) || ir_dim_is_sym(T))
        return ad_unsupported(c, n, "causal / sliding-window attention over symbolic lengths"), -1;
      s = rlx_where(g, visible_keys(c, n, S, T), s, K(-INFINITY));
    }
    rlx_node row_ok = rlx_compare(g, RLX_CMP_GT, rlx_reduce(g, RLX_REDUCE_MAX, s, 1, &last_axis, 1), K(-INFINITY));
    p = rlx_where(g, row_ok, rlx_softmax(g, rlx_where(g, row_ok, s, K(0)), -1), K(0));
  }
  rlx_node o = rlx_reshape(g, rlx_matmul(g, rlx_reshape(g, p, 4, scores_g), v), 4, out4);
  if (bhsd) return o;
  const int64_t perm[4] = {0, 2, 1, 3};
  o = rlx_transpose(g, o, 4, perm);
  return rank == 3 ? rlx_reshape(g, o, 3, tq.shape.d) : o;
}

/* ---------------------------------------------------------------- rope */

/* Rope(x, cos, sin) from primitives: the pairs (x0, x1) of the first n_rot
 * dims of each head become (x0 c - x1 s, x0 s + x1 c). */
rlx_node ad_expand_rope(ad_ctx *c, const ir_node *n) {
  rlx_graph *g = c->g;
  ir_type tx = ad_type(c, n->in[0]), tc = ad_type(c, n->in[1]);
  const int64_t D = n->a.head_dim, nr = n->a.n_rot, half = nr / 2;
  const int64_t B = tx.shape.d[0], S = tx.shape.d[1];
  const int neox = n->a.rope_mode == RLX_ROPE_NEOX;
  int64_t x4[4] = {B, S, -1, D}, pairs[5] = {B, S, -1, half, 2}, halves[4] = {B, S, -1, half};
  int64_t col[5] = {B, S, -1, half, 1}, rot[4] = {B, S, -1, nr};
  rlx_node x = rlx_reshape(g, n->in[0], 4, x4);
  rlx_node xr = nr < D ? rlx_narrow(g, x, 3, 0, nr) : x, x0, x1;
  if (neox) {
    x0 = rlx_narrow(g, xr, 3, 0, half);
    x1 = rlx_narrow(g, xr, 3, half, half);
  } else {
    rlx_node xp = rlx_reshape(g, xr, 5, pairs);
    x0 = rlx_reshape(g, rlx_narrow(g, xp, 4, 0, 1), 4, halves);
    x1 = rlx_reshape(g, rlx_narrow(g, xp, 4, 1, 1), 4, halves);
  }
  /* tables [S, half] or [B, S, half] broadcast over heads */
  int64_t tab[4] = {B, S, 1, half};
  int tr = tc.shape.rank + 1;
  const int64_t *tdims = tc.shape.rank == 2 ? tab + 1 : tab;
  rlx_node cs = rlx_reshape(g, n->in[1], tr, tdims), sn = rlx_reshape(g, n->in[2], tr, tdims);
  if (tc.dtype != tx.dtype) {
    cs = rlx_cast(g, cs, tx.dtype);
    sn = rlx_cast(g, sn, tx.dtype);
  }
  rlx_node y0 = rlx_sub(g, rlx_mul(g, x0, cs), rlx_mul(g, x1, sn));
  rlx_node y1 = rlx_add(g, rlx_mul(g, x0, sn), rlx_mul(g, x1, cs));
  rlx_node yr;
  if (neox) {
    rlx_node ys[2] = {y0, y1};
    yr = rlx_concat(g, 2, ys, 3);
  } else {
    rlx_node ys[2] = {rlx_reshape(g, y0, 5, col), rlx_reshape(g, y1, 5, col)};
    yr = rlx_reshape(g, rlx_concat(g, 2, ys, 4), 4, rot);
  }
  if (nr < D) {
    rlx_node parts[2] = {yr, rlx_narrow(g, x, 3, nr, D - nr)};
    yr = rlx_concat(g, 2, parts, 3);
  }
  return rlx_reshape(g, yr, tx.shape.rank, tx.shape.d);
}

/* ---------------------------------------------------------------- pooling */

/* Pool as a sum over the kernel taps of strided slices of the padded
 * input. avg: the sum over the divisor (the window, or its non-pad
 * elements). max: each tap contributes where it holds the output value
 * and no earlier tap did, which is the kernel's first-maximum choice. */
rlx_node ad_expand_pool(ad_ctx *c, const ir_node *n) {
  rlx_graph *g = c->g;
  rlx_node x = n->in[0];
  ir_type tx = ad_type(c, x);
  rlx_dtype t = tx.dtype;
  const int nd = (int)n->a.ndim, rank = tx.shape.rank, is_max = n->a.pool == RLX_POOL_MAX;
  const ir_shape *out = &n->out[0].shape;
  for (int i = 0; i < nd; i++)
    if (ir_dim_is_sym(tx.shape.d[2 + i]))
      return ad_unsupported(c, n, "Pool over symbolic spatial dims"), -1;
  int64_t before[RLX_MAX_RANK] = {0}, after[RLX_MAX_RANK] = {0};
  int padded = 0;
  for (int i = 0; i < nd; i++) {
    before[2 + i] = n->a.pad.v[i];
    after[2 + i] = n->a.pad.v[nd + i];
    padded |= before[2 + i] || after[2 + i];
  }
  rlx_node xp = padded ? rlx_pad(g, x, rank, before, after, is_max ? -INFINITY : 0.0) : x;
  /* ones over the spatial dims, padded with zeros: the avg divisor's taps */
  rlx_node ones = -1;
  if (!is_max && !n->a.count_include_pad && padded) {
    ir_type sp = tx;
    sp.shape.d[0] = sp.shape.d[1] = 1;
    ones = rlx_pad(g, ad_fill(c, &sp, 1.0), rank, before, after, 0.0);
  }
  int64_t taps = 1, k[2] = {1, 1};
  for (int i = 0; i < nd; i++) taps *= (k[i] = n->a.kernel.v[i]);
  rlx_node total = -1, count = -1, claimed = -1;
  for (int64_t tap = 0; tap < taps; tap++) {
    int64_t starts[RLX_MAX_RANK] = {0}, ends[RLX_MAX_RANK] = {INT64_MAX, INT64_MAX}, steps[RLX_MAX_RANK] = {1, 1};
    int64_t off[2], rest = tap; /* the tap's offset in the kernel, row-major */
    for (int i = nd - 1; i >= 0; i--) {
      off[i] = rest % k[i];
      rest /= k[i];
    }
    for (int i = 0; i < nd; i++) {
      int64_t o = off[i];
      starts[2 + i] = o;
      steps[2 + i] = n->a.stride.v[i];
      ends[2 + i] = o + n->a.stride.v[i] * (out->d[2 + i] - 1) + 1;
    }
    rlx_node win = rlx_slice(g, xp, rank, starts, ends, steps);
    if (is_max) {
      rlx_node hit = rlx_compare(g, RLX_CMP_EQ, win, n->id);
      rlx_node first = claimed < 0 ? hit : ad_and(c, hit, ad_not(c, claimed));
      claimed = claimed < 0 ? hit : ad_or(c, claimed, hit);
      total = ad_add(c, total, rlx_where(g, first, win, K(0)));
    } else {
      total = ad_add(c, total, win);
      if (ones >= 0) count = ad_add(c, count, rlx_slice(g, ones, rank, starts, ends, steps));
    }
  }
  if (is_max) return total;
  return rlx_div(g, total, count >= 0 ? count : K((double)taps));
}

/* ---------------------------------------------------------------- LogMel */

/* Frames of the reflect-padded audio gathered by index, Hann-windowed, a
 * DFT as two matmuls (cos, -sin), power, the mel matmul, log10 of the
 * clamped value. */
rlx_node ad_expand_log_mel(ad_ctx *c, const ir_node *n) {
  rlx_graph *g = c->g;
  const ir_attrs *a = &n->a;
  ir_type tx = ad_type(c, n->in[0]);
  rlx_dtype t = tx.dtype;
  const int64_t T = tx.shape.d[1], n_fft = a->n_fft, half = n_fft / 2, bins = half + 1, nm = a->n_mels;
  if (ir_dim_is_sym(T)) return ad_unsupported(c, n, "LogMel of symbolic length"), -1;
  const int64_t frames = n->out[0].shape.d[2];
  const double pi = 3.14159265358979323846;
  size_t n_idx = (size_t)(frames * n_fft), n_dft = (size_t)(n_fft * bins);
  double *idx = malloc(n_idx * sizeof *idx), *cosm = malloc(n_dft * sizeof *cosm);
  double *sinm = malloc(n_dft * sizeof *sinm), *win = malloc((size_t)n_fft * sizeof *win);
  double *fbt = malloc((size_t)(bins * nm) * sizeof *fbt), *hz = malloc((size_t)(nm + 2) * sizeof *hz);
  rlx_node y = -1;
  if (!idx || !cosm || !sinm || !win || !fbt || !hz) {
    ir_fail(g, n, RLX_ERR_NOMEM, "autodiff: out of memory expanding LogMel");
    goto done;
  }
  for (int64_t f = 0; f < frames; f++)
    for (int64_t j = 0; j < n_fft; j++) {
      int64_t s = f * a->hop + j - half;
      if (s < 0) s = -s;
      if (s >= T) s = 2 * (T - 1) - s;
      idx[f * n_fft + j] = (double)s;
    }
  for (int64_t j = 0; j < n_fft; j++) {
    win[j] = 0.5 - 0.5 * cos(2.0 * pi * (double)j / (double)n_fft);
    for (int64_t k = 0; k < bins; k++) {
      double ang = 2.0 * pi * (double)((j * k) % n_fft) / (double)n_fft;
      cosm[j * bins + k] = cos(ang);
      sinm[j * bins + k] = -sin(ang);
    }
  }
  ir_mel_filterbank(a, bins, fbt, 1, nm, hz); /* bins x n_mels, for power @ fbt */
  int64_t fi[2] = {frames, n_fft}, dft[2] = {n_fft, bins}, fb[2] = {bins, nm};
  rlx_node fr = rlx_gather(g, n->in[0], ad_constant(c, RLX_I64, 2, fi, idx), 1); /* [B, frames, n_fft] */
  fr = rlx_mul(g, fr, ad_constant(c, t, 1, &n_fft, win));
  rlx_node re = rlx_matmul(g, fr, ad_constant(c, t, 2, dft, cosm));
  rlx_node im = rlx_matmul(g, fr, ad_constant(c, t, 2, dft, sinm));
  rlx_node power = rlx_add(g, rlx_activation(g, RLX_ACT_SQUARE, re), rlx_activation(g, RLX_ACT_SQUARE, im));
  rlx_node mel = rlx_matmul(g, power, ad_constant(c, t, 2, fb, fbt)); /* [B, frames, n_mels] */
  const int64_t perm[3] = {0, 2, 1};
  mel = rlx_max(g, rlx_transpose(g, mel, 3, perm), K(1e-10));
  y = rlx_mul(g, rlx_activation(g, RLX_ACT_LOG, mel), K(1.0 / log(10.0)));
done:
  free(idx);
  free(cosm);
  free(sinm);
  free(win);
  free(fbt);
  free(hz);
  return y;
}

/* ---------------------------------------------------------------- losses */

/* The label-smoothed mean of torch's cross_entropy: per target,
 * -sum_c log p_c * ((1 - eps) onehot_c + eps / C), averaged over the
 * targets that are not ignore_index (0 when all are). */
rlx_node ad_expand_cross_entropy(ad_ctx *c, const ir_node *n) {
  rlx_graph *g = c->g;
  rlx_node logits = n->in[0], target = n->in[1];
  ir_type tl = ad_type(c, logits), tt = ad_type(c, target);
  rlx_dtype t = tl.dtype;
  const int axis = (int)n->a.axis, rank = tl.shape.rank;
  const int64_t C = tl.shape.d[axis];
  const double eps = n->a.label_smoothing;
  if (ir_dim_is_sym(C)) return ad_unsupported(c, n, "CrossEntropy over a symbolic class count"), -1;
  rlx_node logp = rlx_log_softmax(g, logits, axis);
  rlx_node w = ad_axis_last(c, rlx_one_hot(g, target, C, t), rank, axis, 0);
  if (eps > 0) w = rlx_add(g, rlx_mul(g, w, K(1 - eps)), K(eps / (double)C));
  int64_t ax = axis;
  rlx_node per = rlx_activation(g, RLX_ACT_NEG, rlx_reduce(g, RLX_REDUCE_SUM, rlx_mul(g, logp, w), 1, &ax, 0));
  rlx_node valid = rlx_compare(g, RLX_CMP_NE, target, ad_scalar(c, tt.dtype, (double)n->a.ignore_index));
  per = rlx_where(g, valid, per, K(0));
  rlx_node count = rlx_reduce(g, RLX_REDUCE_SUM, rlx_cast(g, valid, t), 0, NULL, 0);
  return rlx_div(g, rlx_reduce(g, RLX_REDUCE_SUM, per, 0, NULL, 0), rlx_max(g, count, K(1)));
}

/* mean((a - b)^2) over the broadcast shape. */
rlx_node ad_expand_mse_loss(ad_ctx *c, const ir_node *n) {
  rlx_node d = rlx_sub(c->g, n->in[0], n->in[1]);
  return rlx_reduce(c->g, RLX_REDUCE_MEAN, rlx_activation(c->g, RLX_ACT_SQUARE, d), 0, NULL, 0);
}

/* ---------------------------------------------------------------- fused ops */

rlx_node ad_expand_fused(ad_ctx *c, const ir_node *n) {
  if (!c->src || n->id >= c->n_fwd)
    return ad_unsupported(c, n, "a fused op made while differentiating"), -1;
  rlx_node src_id = c->orig[n->id];
  if (!pass_can_decompose(c->src, src_id))
    return ad_unsupported(c, n, "this fused op has no decomposition for its shapes"), -1;
  return pass_decompose(c->g, c->src, src_id, n->in);
}
