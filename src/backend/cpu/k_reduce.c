/* k_reduce.c — CPU kernels: Reduce, ArgMax, ArgMin, Cumsum, TopK.
 *
 * Floats accumulate in double; integers in 64 bits with wrap-around (done in
 * uint64_t so overflow is defined), then stored in the output dtype. Reduce
 * sum / mean / max / min of F32/F16/BF16 over axes that merge into one
 * contiguous run runs vectorized and threaded (reduce_fast); the rest is
 * the reference loop. */
#include "cpu.h"
#include "vec.h"

#include <math.h>
#include <stdlib.h>

static void *alloc_scratch(int64_t count, size_t elem, const ir_node *n) {
  void *p = malloc((size_t)(count > 0 ? count : 1) * elem);
  if (!p) rlx_set_error(RLX_ERR_NOMEM, "%s (node %d): no memory for scratch", ir_ops[n->op].name,
                        n->id);
  return p;
}

/* ---------------------------------------------------------------- Reduce */

/* f: float ops; u: integer sum/prod (wrapping); s: integer max/min. */
typedef union { double f; uint64_t u; int64_t s; } reduce_acc;

static reduce_acc acc_init(int64_t op, int is_int) {
  reduce_acc a;
  switch (op) {
  case RLX_REDUCE_PROD:
    if (is_int) a.u = 1; else a.f = 1.0;
    break;
  case RLX_REDUCE_MAX:
    if (is_int) a.s = INT64_MIN; else a.f = -INFINITY;
    break;
  case RLX_REDUCE_MIN:
    if (is_int) a.s = INT64_MAX; else a.f = INFINITY;
    break;
  default:
    if (is_int) a.u = 0; else a.f = 0.0;
    break;
  }
  return a;
}

static void acc_float(reduce_acc *a, int64_t op, double v) {
  switch (op) {
  case RLX_REDUCE_PROD: a->f *= v; break;
  /* NaN propagates, as NumPy's max/min. */
  case RLX_REDUCE_MAX: if (isnan(v) || v > a->f) a->f = v; break;
  case RLX_REDUCE_MIN: if (isnan(v) || v < a->f) a->f = v; break;
  default: a->f += v; break;
  }
}

static void acc_int(reduce_acc *a, int64_t op, int64_t v) {
  switch (op) {
  case RLX_REDUCE_PROD: a->u *= (uint64_t)v; break;
  case RLX_REDUCE_MAX: if (v > a->s) a->s = v; break;
  case RLX_REDUCE_MIN: if (v < a->s) a->s = v; break;
  default: a->u += (uint64_t)v; break;
  }
}

/* ---- the fast path: x seen as [outer, len, inner] with the len axis
 * reduced (the reduced axes, once size-1 axes are dropped, are adjacent).
 * inner == 1: each output is a row of len, split into REDUCE_CHUNK pieces
 * whose partial results are combined in order; inner > 1: items are
 * REDUCE_COLS-wide column blocks of one [len, inner] slab. Sums in double. */
#define REDUCE_CHUNK 32768
#define REDUCE_COLS 256

typedef struct {
  const cpu_vec_ops *vo;
  const cpu_tensor *x;
  int64_t op, len, inner, chunks, col_blocks;
  double *part;   /* row case: [outer * chunks] partial results */
  float *scratch; /* per thread: scratch_floats */
  int64_t scratch_floats;
  cpu_tensor *out;
  double count;
} reduce_job;

static int reduce_is_sum(int64_t op) { return op == RLX_REDUCE_SUM || op == RLX_REDUCE_MEAN; }

static void reduce_row_chunks(void *arg, int64_t begin, int64_t end, int thread) {
  reduce_job *J = arg;
  const size_t es = (size_t)ir_dtypes[J->x->dtype].size;
  float *buf = J->scratch + thread * J->scratch_floats;
  for (int64_t item = begin; item < end; item++) {
    int64_t row = item / J->chunks, j0 = item % J->chunks * REDUCE_CHUNK;
    int64_t w = J->len - j0 < REDUCE_CHUNK ? J->len - j0 : REDUCE_CHUNK;
    const void *src = (const char *)J->x->data + (size_t)(row * J->len + j0) * es;
    const float *v = src;
    if (J->x->dtype != RLX_F32) {
      J->vo->load(buf, src, J->x->dtype, w);
      v = buf;
    }
    J->part[item] = reduce_is_sum(J->op) ? J->vo->sum(v, w)
                    : J->op == RLX_REDUCE_MAX ? J->vo->max(v, w) : J->vo->min(v, w);
  }
}

static void reduce_col_blocks(void *arg, int64_t begin, int64_t end, int thread) {
  reduce_job *J = arg;
  const cpu_vec_ops *vo = J->vo;
  const size_t es = (size_t)ir_dtypes[J->x->dtype].size;
  float *row = J->scratch + thread * J->scratch_floats, *res = row + REDUCE_COLS;
  double *acc = (double *)(void *)(res + REDUCE_COLS);
  for (int64_t item = begin; item < end; item++) {
    int64_t o = item / J->col_blocks, c0 = item % J->col_blocks * REDUCE_COLS;
    int64_t w = J->inner - c0 < REDUCE_COLS ? J->inner - c0 : REDUCE_COLS;
    for (int64_t c = 0; c < w; c++) {
      acc[c] = 0.0;
      res[c] = J->op == RLX_REDUCE_MAX ? -INFINITY : INFINITY;
    }
    for (int64_t j = 0; j < J->len; j++) {
      vo->load(row, (const char *)J->x->data + (size_t)((o * J->len + j) * J->inner + c0) * es,
               J->x->dtype, w);
      if (reduce_is_sum(J->op)) vo->acc_sum(acc, row, w);
      else if (J->op == RLX_REDUCE_MAX) vo->acc_max(res, row, w);
      else vo->acc_min(res, row, w);
    }
    if (reduce_is_sum(J->op))
      for (int64_t c = 0; c < w; c++) res[c] = (float)(J->op == RLX_REDUCE_MEAN ? acc[c] / J->count : acc[c]);
    vo->store((char *)J->out->data + (size_t)(o * J->inner + c0) * es, J->out->dtype, res, w);
  }
}

/* Splits x around its reduced axes into [outer, len, inner]; 0 when the
 * reduced axes (ignoring size-1 axes) are not one adjacent run. */
static int reduce_split(const cpu_tensor *x, const ir_node *n, int64_t *outer, int64_t *len,
                        int64_t *inner) {
  int reduced[RLX_MAX_RANK] = {0};
  for (int i = 0; i < n->a.axes.n; i++) reduced[n->a.axes.v[i]] = 1;
  int first = -1, last = -1;
  for (int i = 0; i < x->rank; i++)
    if (reduced[i] && x->d[i] != 1) {
      if (first < 0) first = i;
      last = i;
    }
  *outer = *len = *inner = 1;
  for (int i = 0; i < x->rank; i++) {
    if (x->d[i] == 1) continue;
    if (first >= 0 && i >= first && i <= last) {
      if (!reduced[i]) return 0;
      *len *= x->d[i];
    } else if (first < 0 || i < first) {
      *outer *= x->d[i];
    } else {
      *inner *= x->d[i];
    }
  }
  return 1;
}

static rlx_status reduce_fast(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *x, cpu_tensor *out,
                              int64_t count, int *done) {
  reduce_job J = {.vo = cpu_vec(), .x = x, .op = n->a.reduce, .out = out, .count = (double)count};
  int64_t outer;
  *done = 0;
  if (x->rank == 0 || x->numel == 0 || count == 0 || !reduce_split(x, n, &outer, &J.len, &J.inner))
    return RLX_OK;
  int threads = cpu_ctx_threads(ctx);
  *done = 1;
  if (J.inner == 1) {
    J.chunks = (J.len + REDUCE_CHUNK - 1) / REDUCE_CHUNK;
    J.scratch_floats = J.len < REDUCE_CHUNK ? J.len : REDUCE_CHUNK;
    J.part = malloc((size_t)(outer * J.chunks) * sizeof *J.part);
  } else {
    J.col_blocks = (J.inner + REDUCE_COLS - 1) / REDUCE_COLS;
    J.scratch_floats = 4 * REDUCE_COLS; /* row, result, double accumulators */
  }
  J.scratch_floats = (J.scratch_floats + 15) / 16 * 16;
  J.scratch = malloc((size_t)(J.scratch_floats * threads) * sizeof(float));
  if (!J.scratch || (J.inner == 1 && !J.part)) {
    free(J.scratch);
    free(J.part);
    return rlx_set_error(RLX_ERR_NOMEM, "Reduce (node %d): no memory for scratch", n->id);
  }
  if (J.inner > 1) {
    cpu_parallel_for(ctx, outer * J.col_blocks, cpu_vec_grain(J.len * REDUCE_COLS), reduce_col_blocks, &J);
  } else {
    int64_t item_elems = J.len < REDUCE_CHUNK ? J.len : REDUCE_CHUNK;
    cpu_parallel_for(ctx, outer * J.chunks, cpu_vec_grain(item_elems), reduce_row_chunks, &J);
    for (int64_t o = 0; o < outer; o++) {
      double r = J.part[o * J.chunks];
      for (int64_t c = 1; c < J.chunks; c++) {
        double v = J.part[o * J.chunks + c];
        if (reduce_is_sum(J.op)) r += v;
        else if (isnan(r) || isnan(v)) r = isnan(r) ? r : v;
        else if (J.op == RLX_REDUCE_MAX ? v > r : v < r) r = v;
      }
      J.part[o] = J.op == RLX_REDUCE_MEAN ? r / J.count : r;
    }
    for (int64_t o = 0; o < outer; o++) cpu_set(out, o, J.part[o]);
  }
  free(J.scratch);
  free(J.part);
  return RLX_OK;
}

rlx_status cpu_Reduce(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  const cpu_tensor *x = &in[0];
  int64_t op = n->a.reduce;
  int is_int = ir_is_int(x->dtype);

  /* Strides of the output seen with x's rank: reduced axes get stride 0. */
  int64_t kept[RLX_MAX_RANK], ostr[RLX_MAX_RANK];
  int64_t count = 1;
  for (int i = 0; i < x->rank; i++) kept[i] = x->d[i];
  for (int i = 0; i < n->a.axes.n; i++) {
    int64_t ax = n->a.axes.v[i];
    count *= x->d[ax];
    kept[ax] = 1;
  }
  cpu_strides(x->rank, kept, ostr);
  for (int i = 0; i < n->a.axes.n; i++) ostr[n->a.axes.v[i]] = 0;
  if (count == 0 && out->numel > 0 && (op == RLX_REDUCE_MAX || op == RLX_REDUCE_MIN))
    return rlx_set_error(RLX_ERR_SHAPE, "Reduce (node %d): %s over a zero-size axis", n->id,
                         ir_reduce_names[op]);

  if (!is_int && x->dtype != RLX_F64 && op != RLX_REDUCE_PROD) {
    int done;
    rlx_status st = reduce_fast(ctx, n, x, out, count, &done);
    if (st != RLX_OK || done) return st;
  }

  reduce_acc *acc = alloc_scratch(out->numel, sizeof *acc, n);
  if (!acc) return RLX_ERR_NOMEM;
  for (int64_t o = 0; o < out->numel; o++) acc[o] = acc_init(op, is_int);
  for (int64_t i = 0; i < x->numel; i++) {
    int64_t o = cpu_offset(i, x->rank, x->d, ostr);
    if (is_int) acc_int(&acc[o], op, cpu_get_i(x, i));
    else acc_float(&acc[o], op, cpu_get(x, i));
  }
  for (int64_t o = 0; o < out->numel; o++) {
    if (is_int && (op == RLX_REDUCE_MAX || op == RLX_REDUCE_MIN)) cpu_set_i(out, o, acc[o].s);
    else if (is_int) cpu_set_i(out, o, (int64_t)acc[o].u);
    else cpu_set(out, o, op == RLX_REDUCE_MEAN ? acc[o].f / (double)count : acc[o].f);
  }
  free(acc);
  return RLX_OK;
}

/* ---------------------------------------------------------------- ArgMax / ArgMin */

/* Does v replace the current best? Strict comparisons keep the first index
 * on ties; the first NaN wins and stays (NumPy). */
static int arg_better_float(double v, double best, int want_max) {
  if (isnan(best)) return 0;
  if (isnan(v)) return 1;
  return want_max ? v > best : v < best;
}

/* F32 in, I64 out, without branches on the data (pool windows of relu
 * outputs tie and alternate at random, which a branch mispredicts): a
 * running max / min as a select and the index through a mask. A row with
 * a NaN is redone by the rule of arg_better_float. */
typedef struct {
  const float *x;
  int64_t *y;
  int64_t len, inner;
  int want_max;
} arg_job;

static int64_t arg_row_nan(const float *x, int64_t len, int64_t inner, int want_max) {
  int64_t best = 0;
  for (int64_t j = 1; j < len; j++)
    if (arg_better_float(x[j * inner], x[best * inner], want_max)) best = j;
  return best;
}

static void arg_rows_f32(void *arg, int64_t begin, int64_t end, int thread) {
  (void)thread;
  const arg_job *J = arg;
  const int64_t len = J->len, inner = J->inner;
  const float sign = J->want_max ? 1.0f : -1.0f; /* argmin is argmax of -x */
  if (inner == 1 && len == 4) { /* 2x2 pool windows: unrolled */
    for (int64_t r = begin; r < end; r++) {
      const float *x = J->x + r * 4;
      const float a = sign * x[0], b = sign * x[1], c = sign * x[2], d = sign * x[3];
      /* index updates through masks: a ?: here compiles to a branch */
      int64_t best = b > a;
      float bv = b > a ? b : a;
      best += (2 - best) & -(int64_t)(c > bv);
      bv = c > bv ? c : bv;
      best += (3 - best) & -(int64_t)(d > bv);
      const int nan = (a != a) | (b != b) | (c != c) | (d != d);
      J->y[r] = nan ? arg_row_nan(x, 4, 1, J->want_max) : best;
    }
    return;
  }
  int64_t o = begin / inner, i = begin % inner;
  for (int64_t r = begin; r < end; r++, i = i + 1 == inner ? (o++, 0) : i + 1) {
    const float *x = J->x + o * len * inner + i;
    float bv = sign * x[0];
    int64_t best = 0;
    int nan = bv != bv;
    for (int64_t j = 1; j < len; j++) {
      const float v = sign * x[j * inner];
      best += (j - best) & -(int64_t)(v > bv);
      bv = v > bv ? v : bv;
      nan |= v != v;
    }
    J->y[r] = nan ? arg_row_nan(x, len, inner, J->want_max) : best;
  }
}

static rlx_status arg_reduce(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *x, cpu_tensor *out,
                             int want_max) {
  int64_t outer, len, inner;
  cpu_axis_split(x, (int)n->a.axis, &outer, &len, &inner);
  if (x->dtype == RLX_F32 && out->dtype == RLX_I64 && len > 0) {
    arg_job J = {x->data, out->data, len, inner, want_max};
    cpu_parallel_for(ctx, outer * inner, cpu_vec_grain(len), arg_rows_f32, &J);
    return RLX_OK;
  }
  int is_float = ir_is_float(x->dtype);
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t i = 0; i < inner; i++) {
      int64_t base = o * len * inner + i, best = 0;
      if (is_float) {
        double bv = cpu_get(x, base);
        for (int64_t j = 1; j < len; j++) {
          double v = cpu_get(x, base + j * inner);
          if (arg_better_float(v, bv, want_max)) { bv = v; best = j; }
        }
      } else {
        int64_t bv = cpu_get_i(x, base);
        for (int64_t j = 1; j < len; j++) {
          int64_t v = cpu_get_i(x, base + j * inner);
          if (want_max ? v > bv : v < bv) { bv = v; best = j; }
        }
      }
      cpu_set_i(out, o * inner + i, best);
    }
  }
  return RLX_OK;
}

rlx_status cpu_ArgMax(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  return arg_reduce(ctx, n, &in[0], &out[0], 1);
}

rlx_status cpu_ArgMin(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  return arg_reduce(ctx, n, &in[0], &out[0], 0);
}

/* ---------------------------------------------------------------- Cumsum */

rlx_status cpu_Cumsum(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  (void)ctx;
  const cpu_tensor *x = &in[0];
  int64_t outer, len, inner;
  cpu_axis_split(x, (int)n->a.axis, &outer, &len, &inner);
  int is_int = ir_is_int(x->dtype);
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t i = 0; i < inner; i++) {
      double sum = 0.0;
      uint64_t isum = 0;
      for (int64_t s = 0; s < len; s++) {
        int64_t j = n->a.reverse ? len - 1 - s : s;
        int64_t at = (o * len + j) * inner + i;
        /* exclusive: store the sum before adding this element */
        if (n->a.exclusive) {
          if (is_int) cpu_set_i(out, at, (int64_t)isum); else cpu_set(out, at, sum);
        }
        if (is_int) isum += (uint64_t)cpu_get_i(x, at); else sum += cpu_get(x, at);
        if (!n->a.exclusive) {
          if (is_int) cpu_set_i(out, at, (int64_t)isum); else cpu_set(out, at, sum);
        }
      }
    }
  }
  return RLX_OK;
}

/* ---------------------------------------------------------------- TopK */

typedef struct {
  double f;      /* float key */
  int64_t i;     /* integer key (exact for I64) */
  int64_t idx;   /* position along the axis */
} topk_item;

/* Descending by key, NaN above every number, then ascending index: a total
 * order, so qsort's instability does not matter. */
static int cmp_topk_float(const void *pa, const void *pb) {
  const topk_item *a = pa, *b = pb;
  int an = isnan(a->f), bn = isnan(b->f);
  if (an != bn) return an ? -1 : 1;
  if (!an && a->f != b->f) return a->f > b->f ? -1 : 1;
  return (a->idx > b->idx) - (a->idx < b->idx);
}

static int cmp_topk_int(const void *pa, const void *pb) {
  const topk_item *a = pa, *b = pb;
  if (a->i != b->i) return a->i > b->i ? -1 : 1;
  return (a->idx > b->idx) - (a->idx < b->idx);
}

rlx_status cpu_TopK(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  (void)ctx;
  const cpu_tensor *x = &in[0];
  cpu_tensor *values = &out[0], *indices = &out[1];
  int64_t outer, len, inner, k = n->a.k;
  cpu_axis_split(x, (int)n->a.axis, &outer, &len, &inner);
  if (k < 1 || k > len)
    return rlx_set_error(RLX_ERR_SHAPE, "TopK (node %d): k %lld out of range for dim %lld",
                         n->id, (long long)k, (long long)len);
  int is_int = ir_is_int(x->dtype);
  topk_item *row = alloc_scratch(len, sizeof *row, n);
  if (!row) return RLX_ERR_NOMEM;
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t i = 0; i < inner; i++) {
      for (int64_t j = 0; j < len; j++) {
        int64_t at = (o * len + j) * inner + i;
        row[j].idx = j;
        if (is_int) { row[j].i = cpu_get_i(x, at); row[j].f = 0.0; }
        else { row[j].f = cpu_get(x, at); row[j].i = 0; }
      }
      qsort(row, (size_t)len, sizeof *row, is_int ? cmp_topk_int : cmp_topk_float);
      for (int64_t j = 0; j < k; j++) {
        int64_t at = (o * k + j) * inner + i;
        if (is_int) cpu_set_i(values, at, row[j].i); else cpu_set(values, at, row[j].f);
        cpu_set_i(indices, at, row[j].idx);
      }
    }
  }
  free(row);
  return RLX_OK;
}
