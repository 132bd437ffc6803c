/* ops_data_dependent.c — ONNX ops whose output shape depends on the values
 * of an input: NonZero, Unique, Compress.
 *
 * rlx plans static shapes, so these are computed at import from a known
 * input (a constant, a folded shape computation, or a value input: the
 * model then builds its graph per set of those values, docs/ONNX.md).
 * The output of NonZero and Unique is itself known and folds onward;
 * Compress needs only its condition known and gathers from data that may
 * be computed at run time. On data computed at run time they are
 * RLX_ERR_UNSUPPORTED, saying why (docs/OPS.md, "Data-dependent shapes").
 */
#include "onnx.h"

#include <stdlib.h>
#include <string.h>

/* Input i's known contents, or a failure saying why they must be known. */
static const ox_value *known_in(ox_importer *im, const ox_node *n, int i, const char *what, rlx_status *st) {
  const ox_value *v = ox_in_known(im, n, i);
  *st = v ? RLX_OK
          : ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "%s not known at import (its values decide the output's "
                         "shape: a constant or a model input only)", what);
  return v;
}

static double elem(const ox_value *v, int64_t i) { return v->ints ? (double)v->ints[i] : v->reals[i]; }

rlx_status ox_op_nonzero(ox_importer *im, const ox_node *n) {
  rlx_status st;
  const ox_value *x = known_in(im, n, 0, "the input", &st);
  if (!x) return st;
  int64_t nnz = 0, r = x->rank ? x->rank : 1;
  for (int64_t i = 0; i < x->numel; i++) nnz += elem(x, i) != 0;
  int64_t *out = ox_alloc(im->arena, (size_t)(r * nnz + 1) * sizeof *out);
  if (!out) return ox_node_fail(im, n, RLX_ERR_NOMEM, "out of memory");
  for (int64_t i = 0, j = 0; i < x->numel; i++) {
    if (elem(x, i) == 0) continue;
    int64_t rest = i;   /* the coordinates of flat index i, last dim fastest */
    for (int d = (int)r - 1; d >= 0; d--) {
      int64_t dim = x->rank ? x->dims[d] : 1;
      out[d * nnz + j] = rest % dim;
      rest /= dim;
    }
    j++;
  }
  int64_t dims[2] = {r, nnz};
  return ox_set_out_known(im, n, 0, RLX_I64, 2, dims, out, NULL);
}

/* Unique's input seen as [outer, len, inner] around the axis (no axis:
 * [1, numel, 1]); slice j is its elements of index j along the axis. */
typedef struct {
  const ox_value *x;
  int64_t outer, len, inner;
} slices;

/* Sorts a[0..n) stably by cmp(ctx, x, y) (a merge sort through tmp). */
typedef int (*cmp_fn)(const void *ctx, int64_t x, int64_t y);
static void merge_sort(int64_t *a, int64_t *tmp, int64_t n, cmp_fn cmp, const void *ctx) {
  for (int64_t w = 1; w < n; w *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * w) {
      int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, i = lo, j = mid, k = lo;
      while (i < mid && j < hi) tmp[k++] = cmp(ctx, a[j], a[i]) < 0 ? a[j++] : a[i++];
      while (i < mid) tmp[k++] = a[i++];
      while (j < hi) tmp[k++] = a[j++];
    }
    memcpy(a, tmp, (size_t)n * sizeof *a);
  }
}

static int cmp_index(const void *ctx, int64_t x, int64_t y) {
  const int64_t *v = ctx;
  return v[x] < v[y] ? -1 : v[x] > v[y];
}

static int cmp_slices(const void *ctx, int64_t a, int64_t b) {
  const slices *s = ctx;
  for (int64_t o = 0; o < s->outer; o++)
    for (int64_t i = 0; i < s->inner; i++) {
      double va = elem(s->x, (o * s->len + a) * s->inner + i), vb = elem(s->x, (o * s->len + b) * s->inner + i);
      if (va != vb) return va < vb ? -1 : 1;
    }
  return 0;
}

rlx_status ox_op_unique(ox_importer *im, const ox_node *n) {
  rlx_status st;
  const ox_value *x = known_in(im, n, 0, "the input", &st);
  if (!x) return st;
  const ox_attr *axis_attr = ox_attr_get(n, "axis");
  int64_t axis = axis_attr ? axis_attr->i : 0;
  if (axis_attr && axis < 0) axis += x->rank;
  if (axis_attr && (axis < 0 || axis >= x->rank))
    return ox_node_fail(im, n, RLX_ERR_INVALID, "axis %lld out of range for rank %d", (long long)axis_attr->i, x->rank);
  slices s = {x, 1, x->numel, 1};
  if (axis_attr) {
    s.len = x->dims[axis];
    for (int d = 0; d < x->rank; d++)
      if (d < axis) s.outer *= x->dims[d];
      else if (d > axis) s.inner *= x->dims[d];
  }
  /* The slices sorted stably: runs of equal ones are the uniques in
   * ascending (lexicographic) order, each run starting at its first
   * occurrence. */
  const size_t nb = (size_t)(s.len + 1) * 8;
  int64_t *first = ox_alloc(im->arena, nb), *inverse = ox_alloc(im->arena, nb), *counts = ox_alloc(im->arena, nb);
  int64_t *rank_of = ox_alloc(im->arena, nb), *sorted = ox_alloc(im->arena, nb), *tmp = ox_alloc(im->arena, nb);
  int64_t *order = ox_alloc(im->arena, nb);
  if (!first || !inverse || !counts || !rank_of || !sorted || !tmp || !order)
    return ox_node_fail(im, n, RLX_ERR_NOMEM, "out of memory");
  for (int64_t j = 0; j < s.len; j++) sorted[j] = j;
  merge_sort(sorted, tmp, s.len, cmp_slices, &s);
  int64_t k = 0;
  for (int64_t p = 0; p < s.len; p++) {
    if (p == 0 || cmp_slices(&s, sorted[p - 1], sorted[p])) first[k] = sorted[p], counts[k++] = 0;
    inverse[sorted[p]] = k - 1;
    counts[k - 1]++;
  }
  /* sorted (the default) keeps that order; else by first occurrence */
  for (int64_t u = 0; u < k; u++) order[u] = u;
  if (!ox_attr_int(n, "sorted", 1)) merge_sort(order, tmp, k, cmp_index, first);
  for (int64_t p = 0; p < k; p++) rank_of[order[p]] = p;
  int64_t ydims[RLX_MAX_RANK], yn = s.outer * k * s.inner;
  int yr = axis_attr ? x->rank : 1;
  for (int d = 0; d < yr; d++) ydims[d] = axis_attr && d != axis ? x->dims[d] : k;
  int64_t *yi = ox_alloc(im->arena, (size_t)(yn + 1) * 8), *idx = ox_alloc(im->arena, (size_t)(k + 1) * 8);
  int64_t *cnt = ox_alloc(im->arena, (size_t)(k + 1) * 8), *inv = ox_alloc(im->arena, (size_t)(s.len + 1) * 8);
  double *yr_ = ox_alloc(im->arena, (size_t)(yn + 1) * 8);
  if (!yi || !idx || !cnt || !inv || !yr_) return ox_node_fail(im, n, RLX_ERR_NOMEM, "out of memory");
  for (int64_t p = 0; p < k; p++) {
    int64_t j = first[order[p]];
    idx[p] = j;
    cnt[p] = counts[order[p]];
    for (int64_t o = 0; o < s.outer; o++)
      for (int64_t i = 0; i < s.inner; i++) {
        int64_t src = (o * s.len + j) * s.inner + i, dst = (o * k + p) * s.inner + i;
        if (x->ints) yi[dst] = x->ints[src];
        else yr_[dst] = x->reals[src];
      }
  }
  for (int64_t j = 0; j < s.len; j++) inv[j] = rank_of[inverse[j]];
  st = ox_set_out_known(im, n, 0, x->dtype, yr, ydims, x->ints ? yi : NULL, x->ints ? NULL : yr_);
  if (!st) st = ox_set_out_known(im, n, 1, RLX_I64, 1, &k, idx, NULL);
  if (!st) st = ox_set_out_known(im, n, 2, RLX_I64, 1, &s.len, inv, NULL);
  if (!st) st = ox_set_out_known(im, n, 3, RLX_I64, 1, &k, cnt, NULL);
  return st;
}

/* Does box q suppress box p (IoU above the threshold)? In float, as
 * ONNX's reference; b points at 4 coordinates each. */
static int nms_suppress(const float *p, const float *q, int center, float thr) {
  float x1[2], x2[2], y1[2], y2[2];   /* [min, max] of each box */
  const float *b[2] = {p, q};
  for (int k = 0; k < 2; k++) {
    if (center) {
      x1[k] = b[k][0] - b[k][2] / 2, x2[k] = b[k][0] + b[k][2] / 2;
      y1[k] = b[k][1] - b[k][3] / 2, y2[k] = b[k][1] + b[k][3] / 2;
    } else {   /* [y1, x1, y2, x2], corners in either order */
      x1[k] = b[k][1] < b[k][3] ? b[k][1] : b[k][3], x2[k] = b[k][1] < b[k][3] ? b[k][3] : b[k][1];
      y1[k] = b[k][0] < b[k][2] ? b[k][0] : b[k][2], y2[k] = b[k][0] < b[k][2] ? b[k][2] : b[k][0];
    }
  }
  float ix1 = x1[0] > x1[1] ? x1[0] : x1[1], ix2 = x2[0] < x2[1] ? x2[0] : x2[1];
  float iy1 = y1[0] > y1[1] ? y1[0] : y1[1], iy2 = y2[0] < y2[1] ? y2[0] : y2[1];
  if (ix2 <= ix1 || iy2 <= iy1) return 0;
  float inter = (ix2 - ix1) * (iy2 - iy1);
  float a0 = (x2[0] - x1[0]) * (y2[0] - y1[0]), a1 = (x2[1] - x1[1]) * (y2[1] - y1[1]), uni = a0 + a1 - inter;
  if (inter <= 0 || a0 <= 0 || a1 <= 0 || uni <= 0) return 0;
  return inter / uni > thr;
}

static int cmp_falling(const void *ctx, int64_t x, int64_t y) {
  const float *v = ctx;
  return v[x] > v[y] ? -1 : v[x] < v[y];
}

/* NonMaxSuppression of known boxes [B, N, 4] and scores [B, C, N]: per
 * batch and class, the boxes by falling score (ties: lower index first)
 * that no box kept before overlaps by more than iou_threshold, at most
 * max_output_boxes_per_class; [selected, 3] (batch, class, box). */
rlx_status ox_op_nms(ox_importer *im, const ox_node *n) {
  rlx_status st;
  const ox_value *bx = known_in(im, n, 0, "boxes", &st);
  if (!bx) return st;
  const ox_value *sc = known_in(im, n, 1, "scores", &st);
  if (!sc) return st;
  const ox_value *opt[3] = {NULL, NULL, NULL};
  const char *what[3] = {"max_output_boxes_per_class", "iou_threshold", "score_threshold"};
  for (int i = 0; i < 3; i++)
    if (ox_has_in(n, 2 + i) && !(opt[i] = known_in(im, n, 2 + i, what[i], &st))) return st;
  if (bx->rank != 3 || bx->dims[2] != 4 || sc->rank != 3 || sc->dims[0] != bx->dims[0] || sc->dims[2] != bx->dims[1])
    return ox_node_fail(im, n, RLX_ERR_SHAPE, "boxes [B, N, 4] and scores [B, C, N] expected");
  int64_t B = bx->dims[0], N = bx->dims[1], C = sc->dims[1];
  int64_t max_out = opt[0] && opt[0]->numel ? (int64_t)elem(opt[0], 0) : 0;
  float iou = opt[1] && opt[1]->numel ? (float)elem(opt[1], 0) : 0;
  int has_score = opt[2] && opt[2]->numel;
  float score_thr = has_score ? (float)elem(opt[2], 0) : 0;
  int center = (int)ox_attr_int(n, "center_point_box", 0);
  float *boxes = ox_alloc(im->arena, (size_t)(B * N * 4 + 1) * sizeof *boxes);
  if (N > (1 << 16)) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "%lld boxes (at most 65536)", (long long)N);
  int64_t *order = ox_alloc(im->arena, (size_t)(N + 1) * 8), *kept = ox_alloc(im->arena, (size_t)(N + 1) * 8);
  int64_t *tmp = ox_alloc(im->arena, (size_t)(N + 1) * 8);
  float *score = ox_alloc(im->arena, (size_t)(N + 1) * sizeof *score);
  int64_t *out = ox_alloc(im->arena, (size_t)(B * C * (max_out < N ? (max_out > 0 ? max_out : 0) : N) * 3 + 1) * 8);
  if (!boxes || !order || !kept || !out || !tmp || !score) return ox_node_fail(im, n, RLX_ERR_NOMEM, "out of memory");
  for (int64_t i = 0; i < B * N * 4; i++) boxes[i] = (float)elem(bx, i);
  int64_t m = 0;
  for (int64_t b = 0; b < B; b++)
    for (int64_t c = 0; c < C; c++) {
      const int64_t s0 = (b * C + c) * N;
      int64_t cand = 0, nk = 0;
      for (int64_t i = 0; i < N; i++) {
        score[i] = (float)elem(sc, s0 + i);
        if (!has_score || score[i] > score_thr) order[cand++] = i;
      }
      merge_sort(order, tmp, cand, cmp_falling, score);   /* stable: ties by index */
      for (int64_t k = 0; k < cand && nk < max_out; k++) {
        const float *bk = boxes + (b * N + order[k]) * 4;
        int keep = 1;
        for (int64_t j = 0; j < nk && keep; j++) keep = !nms_suppress(bk, boxes + (b * N + kept[j]) * 4, center, iou);
        if (!keep) continue;
        kept[nk++] = order[k];
        out[m * 3] = b, out[m * 3 + 1] = c, out[m * 3 + 2] = order[k];
        m++;
      }
    }
  int64_t dims[2] = {m, 3};
  return ox_set_out_known(im, n, 0, RLX_I64, 2, dims, out, NULL);
}

/* Compress: the slices of data along axis (flattened without one) where
 * the known condition holds, as a gather of those indices. */
rlx_status ox_op_compress(ox_importer *im, const ox_node *n) {
  rlx_status st;
  rlx_node x = IN(0);
  NEED(x);
  const ox_value *c = known_in(im, n, 1, "the condition", &st);
  if (!c) return st;
  int64_t dims[RLX_MAX_RANK];
  int r = rlx_node_type(im->g, x, NULL, dims);
  const ox_attr *axis_attr = ox_attr_get(n, "axis");
  int64_t axis = axis_attr ? axis_attr->i : 0;
  if (!axis_attr) {
    int64_t numel = 1;
    for (int d = 0; d < r; d++) numel *= dims[d];
    x = rlx_reshape(im->g, x, 1, &numel);
    r = 1;
    dims[0] = numel;
  } else if (axis < 0) {
    axis += r;
  }
  if (axis < 0 || axis >= r) return ox_node_fail(im, n, RLX_ERR_INVALID, "axis %lld out of range for rank %d", (long long)axis, r);
  if (ir_dim_is_sym(dims[axis])) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a symbolic dim along the axis");
  if (c->rank != 1 || c->numel > dims[axis])
    return ox_node_fail(im, n, RLX_ERR_INVALID, "a condition of %lld elements for a dim of %lld", (long long)c->numel,
                        (long long)dims[axis]);
  int64_t *idx = ox_alloc(im->arena, (size_t)(c->numel + 1) * 8), m = 0;
  if (!idx) return ox_node_fail(im, n, RLX_ERR_NOMEM, "out of memory");
  for (int64_t i = 0; i < c->numel; i++)
    if (elem(c, i) != 0) idx[m++] = i;
  rlx_node ic = rlx_constant(im->g, RLX_I64, 1, &m, idx);
  return ox_set_out(im, n, 0, rlx_gather(im->g, x, ic, (int)axis));
}
