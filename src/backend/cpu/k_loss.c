/* k_loss.c — CrossEntropy and MseLoss: scalar means, computed in double. */
#include "cpu.h"

#include <math.h>
#include <stdlib.h>

/* Mean over non-ignored targets of (1 - eps) * nll + eps/C * sum_c(-log p_c),
 * the label-smoothed loss of torch.nn.functional.cross_entropy. */
rlx_status cpu_CrossEntropy(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in,
                            cpu_tensor *out) {
  (void)ctx;
  const cpu_tensor *tl = &in[0], *tt = &in[1];
  const double eps = n->a.label_smoothing;
  int64_t outer, C, inner;
  cpu_axis_split(tl, (int)n->a.axis, &outer, &C, &inner);
  double *logits = cpu_load_f64(tl);
  if (!logits)
    return rlx_set_error(RLX_ERR_NOMEM, "CrossEntropy (node %d): out of memory", n->id);

  double total = 0.0;
  int64_t count = 0;
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t r = 0; r < inner; r++) {
      int64_t ti = o * inner + r;
      int64_t t = cpu_get_i(tt, ti);
      if (t == n->a.ignore_index) continue;
      if (t < 0 || t >= C) {
        free(logits);
        return rlx_set_error(RLX_ERR_INVALID,
                             "CrossEntropy (node %d): target %lld at index %lld out of range "
                             "[0, %lld)",
                             n->id, (long long)t, (long long)ti, (long long)C);
      }
      const double *row = logits + o * C * inner + r; /* class c at row[c * inner] */
      double mx = -INFINITY, sum = 0.0, sum_logits = 0.0;
      for (int64_t c = 0; c < C; c++)
        if (row[c * inner] > mx) mx = row[c * inner];
      for (int64_t c = 0; c < C; c++) {
        sum += exp(row[c * inner] - mx);
        sum_logits += row[c * inner];
      }
      double lse = mx + log(sum);
      double nll = lse - row[t * inner];
      double smooth = (double)C * lse - sum_logits; /* sum_c -log p_c */
      total += (1.0 - eps) * nll + eps / (double)C * smooth;
      count++;
    }
  }
  free(logits);
  cpu_set(out, 0, count > 0 ? total / (double)count : 0.0);
  return RLX_OK;
}

/* Mean of (a - b)^2 over the broadcast shape of a and b. */
rlx_status cpu_MseLoss(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  (void)ctx;
  (void)n;
  const cpu_tensor *ta = &in[0], *tb = &in[1];
  int rank = ta->rank > tb->rank ? ta->rank : tb->rank;
  int64_t dims[RLX_MAX_RANK] = {0}, sa[RLX_MAX_RANK], sb[RLX_MAX_RANK], numel = 1;
  for (int i = 0; i < rank; i++) {
    int ia = ta->rank - rank + i, ib = tb->rank - rank + i;
    int64_t da = ia >= 0 ? ta->d[ia] : 1, db = ib >= 0 ? tb->d[ib] : 1;
    dims[i] = da == 1 ? db : da;
    numel *= dims[i];
  }
  cpu_bcast_strides(ta, rank, dims, sa);
  cpu_bcast_strides(tb, rank, dims, sb);
  double total = 0.0;
  for (int64_t f = 0; f < numel; f++) {
    double d = cpu_get(ta, cpu_offset(f, rank, dims, sa)) - cpu_get(tb, cpu_offset(f, rank, dims, sb));
    total += d * d;
  }
  cpu_set(out, 0, numel > 0 ? total / (double)numel : 0.0);
  return RLX_OK;
}
