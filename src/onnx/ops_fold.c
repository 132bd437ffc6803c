/* ops_fold.c — ops that move elements to positions computed per element:
 * Col2Im (the sum of column blocks back into an image: one ScatterAdd of
 * positions computed at import) and ReverseSequence (each batch row's
 * first sequence_lens steps reversed: one Gather of positions computed
 * from the run-time lengths), MaxUnpool (a ScatterAdd of the run-time
 * indices) and TensorScatter (a Gather of the update by write position). */
#include "onnx.h"

#include <string.h>

/* Col2Im(input [N, C * prod(block), L], image_shape, block_shape) ->
 * [N, C, image...]: block element k of column l lands at l's window
 * origin plus k's dilated offset, less the begin pads; outside the image
 * it is dropped (scattered to a spare row). */
rlx_status ox_op_col2im(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node x = IN(0);
  NEED(x);
  int64_t xd[RLX_MAX_RANK], ni, nb;
  rlx_dtype t;
  const int64_t *img = ox_in_ints(im, n, 1, &ni), *blk = ox_in_ints(im, n, 2, &nb);
  if (!img || !blk) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "image_shape and block_shape not known at import");
  if (ox_ints_sym(im, img, ni) || ox_ints_sym(im, blk, nb))
    return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "image_shape or block_shape " OX_SYM_HINT);
  int nd = (int)ni;
  if (rlx_node_type(g, x, &t, xd) != 3 || nb != ni || nd < 1 || nd > RLX_MAX_RANK - 2 || ir_dim_is_sym(xd[0]) ||
      ir_dim_is_sym(xd[1]) || ir_dim_is_sym(xd[2]))
    return ox_node_fail(im, n, RLX_ERR_SHAPE, "input must be a static [N, C * prod(block_shape), L], image and block of one length");
  const ox_attr *st = ox_attr_get(n, "strides"), *di = ox_attr_get(n, "dilations"), *pa = ox_attr_get(n, "pads");
  if ((st && st->n_ints != nd) || (di && di->n_ints != nd) || (pa && pa->n_ints != 2 * nd))
    return ox_node_fail(im, n, RLX_ERR_INVALID, "strides/dilations/pads of the wrong length");
  int64_t K = 1, P = 1, L = 1, cnt[RLX_MAX_RANK], s[RLX_MAX_RANK], d[RLX_MAX_RANK], pb[RLX_MAX_RANK];
  for (int i = 0; i < nd; i++) {
    s[i] = st ? st->ints[i] : 1;
    d[i] = di ? di->ints[i] : 1;
    pb[i] = pa ? pa->ints[i] : 0;
    int64_t pe = pa ? pa->ints[nd + i] : 0;
    if (img[i] < 1 || blk[i] < 1 || s[i] < 1 || d[i] < 1 || pb[i] < 0 || pe < 0 || img[i] > (1 << 20) || blk[i] > (1 << 20) ||
        d[i] > (1 << 20) || pb[i] > (1 << 20) || pe > (1 << 20))
      return ox_node_fail(im, n, RLX_ERR_INVALID, "image %lld, block %lld, stride, dilation or pads out of range", (long long)img[i],
                          (long long)blk[i]);
    cnt[i] = (img[i] + pb[i] + pe - d[i] * (blk[i] - 1) - 1) / s[i] + 1;
    K *= blk[i];
    P *= img[i];
    L *= cnt[i] > 0 ? cnt[i] : 0;
    if (K > (1 << 24) || P > (1 << 24) || L > (1 << 24)) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "too many blocks");
  }
  int64_t N = xd[0], C = K ? xd[1] / K : 0;
  if (!K || xd[1] % K || xd[2] != L)
    return ox_node_fail(im, n, RLX_ERR_SHAPE, "input [%lld, %lld, %lld] for %lld-element blocks at %lld positions", (long long)N,
                        (long long)xd[1], (long long)xd[2], (long long)K, (long long)L);
  if (K * L > (1 << 24)) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "too many blocks");
  int64_t *pos = ox_alloc(im->arena, (size_t)(K * L + 1) * sizeof *pos);
  if (!pos) return ox_node_fail(im, n, RLX_ERR_NOMEM, "out of memory");
  for (int64_t k = 0; k < K; k++)
    for (int64_t l = 0; l < L; l++) {
      int64_t flat = 0, kr = k, lr = l, inside = 1;
      for (int i = nd - 1, scale = 1; i >= 0; scale *= (int)img[i], i--) {
        int64_t kk = kr % blk[i], ll = lr % cnt[i], p = ll * s[i] + kk * d[i] - pb[i];
        kr /= blk[i];
        lr /= cnt[i];
        inside &= p >= 0 && p < img[i];
        flat += p * scale;
      }
      pos[k * L + l] = inside ? flat : P;
    }
  /* input as [K * L, N * C] rows, scattered into [P + 1, N * C] */
  int64_t kl = K * L, nc = N * C, spare = P + 1;
  rlx_node rows = rlx_reshape(g, rlx_transpose(g, rlx_reshape(g, x, 4, (int64_t[]){N, C, K, L}), 4, (int64_t[]){2, 3, 0, 1}), 2,
                              (int64_t[]){kl, nc});
  rlx_node base = rlx_expand(g, ox_scalar(im, t, 0), 2, (int64_t[]){spare, nc});
  rlx_node y = rlx_scatter_add(g, base, rlx_constant(g, RLX_I64, 1, &kl, pos), rows, 0);
  int64_t yd[RLX_MAX_RANK], perm[RLX_MAX_RANK];
  for (int i = 0; i < nd; i++) yd[i] = img[i], perm[2 + i] = i;
  yd[nd] = N;
  yd[nd + 1] = C;
  perm[0] = nd;
  perm[1] = nd + 1;
  y = rlx_reshape(g, rlx_narrow(g, y, 0, 0, P), nd + 2, yd);
  return ox_set_out(im, n, 0, rlx_transpose(g, y, nd + 2, perm));
}

/* ReverseSequence(x, sequence_lens): along time_axis, the first
 * sequence_lens[b] steps of batch row b reversed, the rest kept. */
rlx_status ox_op_reverse_sequence(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node x = IN(0), lens = IN(1);
  NEED(x);
  NEED(lens);
  int64_t xd[RLX_MAX_RANK];
  int r = rlx_node_type(g, x, NULL, xd);
  int64_t ta = ox_attr_int(n, "time_axis", 0), ba = ox_attr_int(n, "batch_axis", 1);
  if (r < 2 || !((ta == 0 && ba == 1) || (ta == 1 && ba == 0)))
    return ox_node_fail(im, n, RLX_ERR_INVALID, "time_axis %lld, batch_axis %lld of a rank-%d x", (long long)ta, (long long)ba, r);
  int64_t rest = 1;
  for (int i = 0; i < r; i++)
    if (ir_dim_is_sym(xd[i])) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "symbolic dims");
  for (int i = 2; i < r; i++) rest *= xd[i];
  int64_t B = xd[ba], T = xd[ta], perm[RLX_MAX_RANK];
  for (int i = 0; i < r; i++) perm[i] = i;
  perm[0] = ba;
  perm[1] = ta;
  rlx_node xb = ta ? x : rlx_transpose(g, x, r, perm);   /* [B, T, ...] */
  rlx_node table = rlx_reshape(g, xb, 2, (int64_t[]){B * T, rest});
  rlx_node tt = rlx_iota(g, RLX_I64, 2, (int64_t[]){B, T}, 1), bb = rlx_iota(g, RLX_I64, 2, (int64_t[]){B, T}, 0);
  rlx_node len = rlx_reshape(g, rlx_cast(g, lens, RLX_I64), 2, (int64_t[]){B, 1});
  rlx_node src = rlx_where(g, rlx_compare(g, RLX_CMP_LT, tt, len), rlx_sub(g, rlx_sub(g, len, ox_scalar(im, RLX_I64, 1)), tt), tt);
  rlx_node flat = rlx_add(g, rlx_mul(g, bb, ox_scalar(im, RLX_I64, (double)T)), src);
  int64_t bd[RLX_MAX_RANK];
  bd[0] = B;
  bd[1] = T;
  for (int i = 2; i < r; i++) bd[i] = xd[i];
  rlx_node y = rlx_reshape(g, rlx_gather(g, table, flat, 0), r, bd);
  return ox_set_out(im, n, 0, ta ? y : rlx_transpose(g, y, r, perm));
}

/* MaxUnpool(X, I, output_shape?): zeros of the unpooled shape with each
 * element of X at its index in I (flat over the whole output, as MaxPool's
 * Indices are): one ScatterAdd. */
rlx_status ox_op_max_unpool(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node x = IN(0), idx = IN(1);
  NEED(x);
  NEED(idx);
  int64_t xd[RLX_MAX_RANK], yd[RLX_MAX_RANK], cnt;
  rlx_dtype t;
  int r = rlx_node_type(g, x, &t, xd);
  const ox_attr *ks = ox_attr_get(n, "kernel_shape"), *st = ox_attr_get(n, "strides"), *pa = ox_attr_get(n, "pads");
  int nd = r - 2;
  if (nd < 1 || !ks || ks->n_ints != nd || (st && st->n_ints != nd) || (pa && pa->n_ints != 2 * nd))
    return ox_node_fail(im, n, RLX_ERR_INVALID, "kernel_shape/strides/pads of the wrong length for a rank-%d input", r);
  int64_t total = 1, m = 1;
  for (int i = 0; i < r; i++) {
    if (ir_dim_is_sym(xd[i])) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "symbolic dims");
    yd[i] = i < 2 ? xd[i] : (xd[i] - 1) * (st ? st->ints[i - 2] : 1) + ks->ints[i - 2] - (pa ? pa->ints[i - 2] + pa->ints[nd + i - 2] : 0);
    m *= xd[i];
  }
  for (int i = 0; i < r; i++) {
    if (yd[i] < 1 || yd[i] > ((int64_t)1 << 30) || total > ((int64_t)1 << 30) / yd[i])
      return ox_node_fail(im, n, RLX_ERR_INVALID, "an output dim of %lld", (long long)yd[i]);
    total *= yd[i];
  }
  rlx_node base = rlx_expand(g, ox_scalar(im, t, 0), 1, &total);
  rlx_node y = rlx_reshape(g, rlx_scatter_add(g, base, rlx_reshape(g, idx, 1, &m), rlx_reshape(g, x, 1, &m), 0), r, yd);
  if (ox_has_in(n, 2)) {   /* a larger output_shape: the unpooled block padded at the end */
    const int64_t *os = ox_in_ints(im, n, 2, &cnt);
    int64_t before[RLX_MAX_RANK] = {0}, after[RLX_MAX_RANK];
    if (!os || cnt != r) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "output_shape not known at import");
    if (ox_ints_sym(im, os, cnt)) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "output_shape " OX_SYM_HINT);
    for (int i = 0; i < r; i++)
      if ((after[i] = os[i] - yd[i]) < 0 || os[i] > ((int64_t)1 << 30))
        return ox_node_fail(im, n, RLX_ERR_INVALID, "output_shape dim %d of %lld, below the unpooled %lld", i, (long long)os[i], (long long)yd[i]);
    y = rlx_pad(g, y, r, before, after, 0);
  }
  return ox_set_out(im, n, 0, y);
}

/* TensorScatter(past, update, write_indices?): past with each batch row's
 * update written along axis from its write index (mod the length when
 * circular): position s takes update[s - w[b]] when that is in range, a
 * Gather of update laid out as [B * S_update, rest]. */
rlx_status ox_op_tensor_scatter(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node past = IN(0), upd = IN(1);
  NEED(past);
  NEED(upd);
  int64_t pd[RLX_MAX_RANK], ud[RLX_MAX_RANK];
  int r = rlx_node_type(g, past, NULL, pd);
  int64_t axis = ox_attr_int(n, "axis", -2);
  if (axis < 0) axis += r;
  if (rlx_node_type(g, upd, NULL, ud) != r || axis < 1 || axis >= r)
    return ox_node_fail(im, n, RLX_ERR_SHAPE, "past and update of ranks %d and %d, axis %lld", r, rlx_node_type(g, upd, NULL, NULL),
                        (long long)ox_attr_int(n, "axis", -2));
  int64_t rest = 1, perm[RLX_MAX_RANK], moved[RLX_MAX_RANK], mask_dims[RLX_MAX_RANK];
  for (int i = 0; i < r; i++) {
    if (ir_dim_is_sym(pd[i]) || ir_dim_is_sym(ud[i])) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "symbolic dims");
    if (i != axis && pd[i] != ud[i]) return ox_node_fail(im, n, RLX_ERR_SHAPE, "past and update differ in dim %d", i);
    if (i != axis && i) rest *= pd[i];
    mask_dims[i] = i == 0 ? pd[0] : i == axis ? pd[axis] : 1;
  }
  int64_t B = pd[0], S = pd[axis], U = ud[axis];
  if (U > S) return ox_node_fail(im, n, RLX_ERR_SHAPE, "an update of %lld steps into %lld", (long long)U, (long long)S);
  /* update as [B, U, the other dims in order] */
  for (int i = 0, k = 2; i < r; i++) {
    if (i == 0 || i == axis) continue;
    perm[k++] = i;
  }
  perm[0] = 0;
  perm[1] = axis;
  for (int i = 0; i < r; i++) moved[i] = pd[perm[i]];
  rlx_node table = rlx_reshape(g, rlx_transpose(g, upd, r, perm), 2, (int64_t[]){B * U, rest});
  rlx_node pos = rlx_iota(g, RLX_I64, 2, (int64_t[]){B, S}, 1), row = rlx_iota(g, RLX_I64, 2, (int64_t[]){B, S}, 0), rel = pos;
  if (ox_has_in(n, 2)) {
    rlx_node w = IN(2);
    NEED(w);
    rel = rlx_sub(g, pos, rlx_reshape(g, rlx_cast(g, w, RLX_I64), 2, (int64_t[]){B, 1}));
  }
  if (!strcmp(ox_attr_str(n, "mode", "linear"), "circular")) rel = rlx_mod(g, rel, ox_scalar(im, RLX_I64, (double)S));
  rlx_node inside = rlx_where(g, rlx_compare(g, RLX_CMP_GE, rel, ox_scalar(im, RLX_I64, 0)),
                              rlx_compare(g, RLX_CMP_LT, rel, ox_scalar(im, RLX_I64, (double)U)), rlx_compare(g, RLX_CMP_NE, pos, pos));
  rlx_node flat = rlx_add(g, rlx_mul(g, row, ox_scalar(im, RLX_I64, (double)U)), rlx_clamp(g, rel, 0, (double)(U - 1)));
  moved[1] = S;
  rlx_node got = rlx_reshape(g, rlx_gather(g, table, flat, 0), r, moved);
  int64_t inv[RLX_MAX_RANK];
  for (int i = 0; i < r; i++) inv[perm[i]] = i;
  got = rlx_transpose(g, got, r, inv);
  return ox_set_out(im, n, 0, rlx_where(g, rlx_reshape(g, inside, r, mask_dims), got, past));
}
