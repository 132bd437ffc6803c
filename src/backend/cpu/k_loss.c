/* k_loss.c — CrossEntropy and MseLoss: scalar means, computed in double
 * (F32 CrossEntropy: exponentials in f32, sums in double). */
#include "cpu.h"
#include "vec.h"

#include <math.h>
#include <stdlib.h>

/* F32 logits with the classes innermost: rows threaded over the pool, the
 * exponentials in f32 (vec.h), every sum in double. Per thread: its
 * partial total and count, and the first out-of-range target it met. */
typedef struct {
  const float *x;
  const cpu_tensor *targets;
  int64_t C, ignore;
  double eps;
  double *total;   /* [threads] */
  int64_t *count;  /* [threads] */
  int64_t *bad;    /* [threads]: first bad row, or -1 */
  float *scratch;  /* C floats per thread */
} ce_job;

static void ce_rows_f32(void *arg, int64_t begin, int64_t end, int thread) {
  const ce_job *J = arg;
  const cpu_vec_ops *vo = cpu_vec();
  const int64_t C = J->C;
  float *e = J->scratch + thread * C;
  double total = 0.0;
  int64_t count = 0;
  for (int64_t r = begin; r < end; r++) {
    const int64_t t = cpu_get_i(J->targets, r);
    if (t == J->ignore) continue;
    if (t < 0 || t >= C) {
      if (J->bad[thread] < 0) J->bad[thread] = r;
      continue;
    }
    const float *row = J->x + r * C;
    const float mx = vo->max(row, C);
    const double lse = (double)mx + log(vo->exp_shift_sum(row, mx, e, C));
    const double nll = lse - (double)row[t];
    const double smooth = J->eps != 0 ? (double)C * lse - vo->sum(row, C) : 0.0; /* sum_c -log p_c */
    total += (1.0 - J->eps) * nll + J->eps / (double)C * smooth;
    count++;
  }
  J->total[thread] += total;
  J->count[thread] += count;
}

static rlx_status bad_target(const ir_node *n, const cpu_tensor *tt, int64_t ti, int64_t C) {
  return rlx_set_error(RLX_ERR_INVALID, "CrossEntropy (node %d): target %lld at index %lld out of range [0, %lld)",
                       n->id, (long long)cpu_get_i(tt, ti), (long long)ti, (long long)C);
}

static rlx_status cross_entropy_f32(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out,
                                    int64_t rows, int64_t C) {
  const int threads = cpu_ctx_threads(ctx);
  double *total = calloc((size_t)threads, sizeof *total);
  int64_t *count = calloc((size_t)threads, sizeof *count), *bad = malloc((size_t)threads * sizeof *bad);
  float *scratch = malloc((size_t)(threads * C) * sizeof *scratch + 1);
  rlx_status st = RLX_OK;
  if (!total || !count || !bad || !scratch) {
    st = rlx_set_error(RLX_ERR_NOMEM, "CrossEntropy (node %d): out of memory", n->id);
  } else {
    for (int k = 0; k < threads; k++) bad[k] = -1;
    ce_job J = {in[0].data, &in[1], C, n->a.ignore_index, n->a.label_smoothing, total, count, bad, scratch};
    cpu_parallel_for(ctx, rows, cpu_vec_grain(C), ce_rows_f32, &J);
    int64_t first_bad = -1, n_total = 0;
    double sum = 0.0;
    for (int k = 0; k < threads; k++) {
      if (bad[k] >= 0 && (first_bad < 0 || bad[k] < first_bad)) first_bad = bad[k];
      sum += total[k];
      n_total += count[k];
    }
    if (first_bad >= 0)
      st = bad_target(n, &in[1], first_bad, C);
    else
      cpu_set(out, 0, n_total > 0 ? sum / (double)n_total : 0.0);
  }
  free(total);
  free(count);
  free(bad);
  free(scratch);
  return st;
}

/* Mean over non-ignored targets of (1 - eps) * nll + eps/C * sum_c(-log p_c),
 * the label-smoothed loss of torch.nn.functional.cross_entropy. */
rlx_status cpu_CrossEntropy(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in,
                            cpu_tensor *out) {
  const cpu_tensor *tl = &in[0], *tt = &in[1];
  const double eps = n->a.label_smoothing;
  int64_t outer, C, inner;
  cpu_axis_split(tl, (int)n->a.axis, &outer, &C, &inner);
  if (tl->dtype == RLX_F32 && inner == 1 && C > 0) return cross_entropy_f32(ctx, n, in, out, outer, C);
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
        return bad_target(n, tt, ti, C);
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
