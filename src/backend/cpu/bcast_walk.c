/* bcast_walk.c — see bcast_walk.h. */
#include "bcast_walk.h"

void bcast_walk_init(bcast_walk *w, const cpu_tensor *out, int n_ops, const cpu_tensor *const *ops) {
  const int R = out->rank;
  int64_t st[BCAST_MAX_OPS][RLX_MAX_RANK];
  w->n_ops = n_ops;
  for (int k = 0; k < n_ops; k++) cpu_bcast_strides(ops[k], R, out->d, st[k]);
  int rank = 0;
  for (int i = 0; i < R; i++) {
    if (out->d[i] == 1) continue;
    int merge = rank > 0;
    for (int k = 0; merge && k < n_ops; k++) merge = w->stride[k][rank - 1] == st[k][i] * out->d[i];
    if (merge) {
      w->dims[rank - 1] *= out->d[i];
      for (int k = 0; k < n_ops; k++) w->stride[k][rank - 1] = st[k][i];
    } else {
      w->dims[rank] = out->d[i];
      for (int k = 0; k < n_ops; k++) w->stride[k][rank] = st[k][i];
      rank++;
    }
  }
  if (rank == 0) { /* one element */
    w->dims[0] = 1;
    for (int k = 0; k < n_ops; k++) w->stride[k][0] = 0;
    rank = 1;
  }
  w->rank = rank;
  w->len = w->dims[rank - 1];
  w->rows = w->len ? out->numel / w->len : 0;
}

void bcast_walk_seek(const bcast_walk *w, int64_t row, int64_t *idx, int64_t *off) {
  for (int k = 0; k < w->n_ops; k++) off[k] = 0;
  for (int i = w->rank - 2; i >= 0; i--) {
    idx[i] = row % w->dims[i];
    row /= w->dims[i];
    for (int k = 0; k < w->n_ops; k++) off[k] += idx[i] * w->stride[k][i];
  }
}

void bcast_walk_next(const bcast_walk *w, int64_t *idx, int64_t *off) {
  for (int i = w->rank - 2; i >= 0; i--) {
    for (int k = 0; k < w->n_ops; k++) off[k] += w->stride[k][i];
    if (++idx[i] < w->dims[i]) return;
    for (int k = 0; k < w->n_ops; k++) off[k] -= w->stride[k][i] * w->dims[i];
    idx[i] = 0;
  }
}
