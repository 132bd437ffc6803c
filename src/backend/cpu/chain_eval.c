/* chain_eval.c — block evaluation of elementwise chains (chain_eval.h). */
#include "chain_eval.h"
#include "vec.h"

#include <stdlib.h>
#include <string.h>

static int f32_domain(rlx_dtype t) {
  return t == RLX_F32 || t == RLX_F16 || t == RLX_BF16 || t == RLX_BOOL;
}

/* Liveness (steps the last one depends on, and the inputs they read) and
 * the dtype of every step, as the unfused ops would type them. */
static void chain_analyze(const cpu_chain *c, unsigned char *in_live, unsigned char *live, rlx_dtype *step_t) {
  const ir_chain *ch = c->chain;
  memset(in_live, 0, (size_t)c->n_ins);
  memset(live, 0, (size_t)ch->n);
  live[ch->n - 1] = 1;
  for (int j = ch->n - 1; j >= 0; j--) {
    if (!live[j]) continue;
    const rlx_region_step *s = &ch->s[j];
    int binary = s->kind == RLX_STEP_BIN || s->kind == RLX_STEP_CMP;
    for (int o = 0; o < 1 + binary; o++) {
      int k = o ? s->b : s->a;
      if (k >= 0) in_live[k] = 1;
      else live[-k - 1] = 1;
    }
  }
  for (int j = 0; j < ch->n; j++) {
    const rlx_region_step *s = &ch->s[j];
    rlx_dtype t = s->a >= 0 ? c->ins[s->a]->dtype : step_t[-s->a - 1];
    if (s->kind == RLX_STEP_CMP) t = RLX_BOOL;
    if (s->kind == RLX_STEP_CAST) t = s->to;
    step_t[j] = t;
  }
}

/* Scratch for chain_analyze: in_live, live, step dtypes. */
typedef struct {
  unsigned char *in_live, *live;
  rlx_dtype *step_t;
} chain_info;

static int chain_info_new(const cpu_chain *c, chain_info *ci) {
  ci->in_live = malloc((size_t)c->n_ins + 1);
  ci->live = malloc((size_t)c->chain->n + 1);
  ci->step_t = malloc(((size_t)c->chain->n + 1) * sizeof *ci->step_t);
  if (!ci->in_live || !ci->live || !ci->step_t) return 0;
  chain_analyze(c, ci->in_live, ci->live, ci->step_t);
  return 1;
}

static void chain_info_free(chain_info *ci) {
  free(ci->in_live);
  free(ci->live);
  free(ci->step_t);
}

int cpu_chain_supported(const cpu_chain *c, rlx_dtype out_dtype) {
  if (c->chain->n < 1 || !f32_domain(out_dtype)) return 0;
  chain_info ci;
  int ok = chain_info_new(c, &ci);
  for (int k = 0; ok && k < c->n_ins; k++) ok = !ci.in_live[k] || f32_domain(c->ins[k]->dtype);
  for (int j = 0; ok && j < c->chain->n; j++) ok = !ci.live[j] || f32_domain(ci.step_t[j]);
  chain_info_free(&ci);
  return ok;
}

/* Dim i of input k as the chain sees it (doubled H, W under up2x). */
static int64_t seen_dim(const cpu_chain *c, int k, int i) {
  const cpu_tensor *t = c->ins[k];
  return t->d[i] * (c->up2x && k == 0 && i >= 2 ? 2 : 1);
}

/* ---------------------------------------------------------------- evaluation */

typedef struct {
  const cpu_chain *c;
  const cpu_vec_ops *vo;
  chain_info ci;
  int rank;                   /* collapsed output dims */
  int64_t dims[RLX_MAX_RANK];
  int64_t (*stride)[RLX_MAX_RANK]; /* per input: element stride per collapsed dim */
  unsigned char half[RLX_MAX_RANK]; /* dim indexes input 0 at idx / 2 (up2x) */
  int64_t len, blocks;        /* innermost dim; blocks per row of it */
  /* Rows shorter than half a block go several to an item (rpi rows; 1:
   * items are blocks of one row), so short rows do not pay an item's cost
   * each. full[k]: input k has the output's layout (one pointer serves the
   * item); its other inputs are gathered row by row. */
  int64_t rpi, n_rows;
  unsigned char *full;
  cpu_tensor *out;
  float *scratch;             /* per thread: scratch_floats */
  int64_t scratch_floats;
} chain_job;

/* A block operand: p[i] for i < w, or p[0] for every i when scalar. */
typedef struct {
  const float *p;
  int scalar;
} operand;

/* n elements of t's storage at src as f32 (BOOL: 0 / 1). */
static void load_f32(const cpu_vec_ops *vo, float *dst, const cpu_tensor *t, const void *src, int64_t n) {
  if (t->dtype == RLX_BOOL) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n; i++) dst[i] = b[i] != 0;
  } else {
    vo->load(dst, src, t->dtype, n);
  }
}

static void store_f32(const cpu_vec_ops *vo, cpu_tensor *t, void *dst, const float *src, int64_t n) {
  if (t->dtype == RLX_BOOL) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < n; i++) b[i] = src[i] != 0;
  } else {
    vo->store(dst, t->dtype, src, n);
  }
}

static operand load_input(const chain_job *J, int k, int64_t off, int64_t c0, int64_t w, float *buf, float *tmp) {
  const cpu_tensor *t = J->c->ins[k];
  const size_t es = (size_t)ir_dtypes[t->dtype].size;
  const int inner = J->rank - 1;
  const int64_t st = J->stride[k][inner];
  const char *base = (const char *)t->data;
  if (st == 0) {
    load_f32(J->vo, buf, t, base + (size_t)off * es, 1);
    return (operand){buf, 1};
  }
  if (k == 0 && J->half[inner]) { /* element c reads input c / 2 */
    int64_t first = c0 / 2, count = (c0 + w - 1) / 2 - first + 1;
    load_f32(J->vo, tmp, t, base + (size_t)(off + first * st) * es, count);
    for (int64_t i = 0; i < w; i++) buf[i] = tmp[(c0 + i) / 2 - first];
    return (operand){buf, 0};
  }
  const char *src = base + (size_t)(off + c0) * es;
  if (t->dtype == RLX_F32) return (operand){(const float *)(const void *)src, 0};
  load_f32(J->vo, buf, t, src, w);
  return (operand){buf, 0};
}

/* Input k over rows [row0, row0 + nrows) of a multi-row item, as an
 * operand of nrows * len elements. */
static operand load_rows(const chain_job *J, int k, int64_t row0, int64_t nrows, float *buf) {
  const cpu_tensor *t = J->c->ins[k];
  const size_t es = (size_t)ir_dtypes[t->dtype].size;
  const char *base = (const char *)t->data;
  const int inner = J->rank - 1;
  const int64_t len = J->len, st = J->stride[k][inner];
  if (J->full[k]) {
    const char *src = base + (size_t)(row0 * len) * es;
    if (t->dtype == RLX_F32) return (operand){(const float *)(const void *)src, 0};
    load_f32(J->vo, buf, t, src, nrows * len);
    return (operand){buf, 0};
  }
  int all_zero = st == 0;
  for (int i = 0; all_zero && i < inner; i++) all_zero = J->stride[k][i] == 0;
  if (all_zero) { /* one value for the whole tensor */
    load_f32(J->vo, buf, t, base, 1);
    return (operand){buf, 1};
  }
  if (J->rank == 2 && t->dtype == RLX_F32) { /* [rows, len]: one row stride, no odometer */
    const int64_t s0 = J->stride[k][0];
    const float *src = (const float *)(const void *)base + row0 * s0;
    for (int64_t q = 0; q < nrows; q++) {
      float *dst = buf + q * len;
      if (st == 0) {
        const float v = src[q * s0];
        for (int64_t i = 0; i < len; i++) dst[i] = v;
      } else {
        for (int64_t i = 0; i < len; i++) dst[i] = src[q * s0 + i];
      }
    }
    return (operand){buf, 0};
  }
  int64_t idx[RLX_MAX_RANK], r = row0;
  for (int i = J->rank - 2; i >= 0; i--) {
    idx[i] = r % J->dims[i];
    r /= J->dims[i];
  }
  for (int64_t q = 0; q < nrows; q++) {
    int64_t off = 0;
    for (int i = J->rank - 2; i >= 0; i--) off += idx[i] * J->stride[k][i];
    float *dst = buf + q * len;
    if (t->dtype == RLX_F32) { /* no conversion call per short row */
      const float *src = (const float *)(const void *)base + off;
      for (int64_t i = 0; i < len; i++) dst[i] = src[i * st];
    } else if (st == 0) {
      load_f32(J->vo, dst, t, base + (size_t)off * es, 1);
      for (int64_t i = 1; i < len; i++) dst[i] = dst[0];
    } else {
      load_f32(J->vo, dst, t, base + (size_t)off * es, len);
    }
    for (int i = J->rank - 2; i >= 0 && ++idx[i] == J->dims[i]; i--) idx[i] = 0;
  }
  return (operand){buf, 0};
}

static void chain_blocks(void *arg, int64_t begin, int64_t end, int thread) {
  const chain_job *J = arg;
  const cpu_chain *c = J->c;
  const ir_chain *ch = c->chain;
  const cpu_vec_ops *vo = J->vo;
  const int n_ins = c->n_ins, last = ch->n - 1;
  float *in_buf = J->scratch + thread * J->scratch_floats;
  float *step_buf = in_buf + (int64_t)n_ins * CHAIN_BLOCK, *tmp = step_buf + (int64_t)ch->n * CHAIN_BLOCK;
  operand ops_local[16], *ops = n_ins + ch->n <= 16 ? ops_local : (operand *)(void *)(tmp + CHAIN_BLOCK);
  operand *in_op = ops, *step_op = ops + n_ins;
  const size_t out_es = (size_t)ir_dtypes[J->out->dtype].size;
  const int direct_out = J->out->dtype == RLX_F32 && J->ci.step_t[last] == RLX_F32;
  const float zero = 0.0f;
  for (int64_t item = begin; item < end; item++) {
    const int multi = J->rpi > 1;
    const int64_t row = multi ? item * J->rpi : item / J->blocks, c0 = multi ? 0 : item % J->blocks * CHAIN_BLOCK;
    const int64_t nrows = multi ? (J->n_rows - row < J->rpi ? J->n_rows - row : J->rpi) : 1;
    const int64_t w = multi ? nrows * J->len : J->len - c0 < CHAIN_BLOCK ? J->len - c0 : CHAIN_BLOCK;
    for (int k = 0; k < n_ins; k++) {
      if (!J->ci.in_live[k]) continue;
      if (multi) {
        in_op[k] = load_rows(J, k, row, nrows, in_buf + (int64_t)k * CHAIN_BLOCK);
        continue;
      }
      int64_t off = 0, r = row;
      for (int i = J->rank - 2; i >= 0; i--) {
        int64_t idx = r % J->dims[i];
        r /= J->dims[i];
        off += (k == 0 && J->half[i] ? idx / 2 : idx) * J->stride[k][i];
      }
      in_op[k] = load_input(J, k, off, c0, w, in_buf + (int64_t)k * CHAIN_BLOCK, tmp);
    }
    for (int j = 0; j <= last; j++) {
      if (!J->ci.live[j]) continue;
      const rlx_region_step *s = &ch->s[j];
      const rlx_dtype t = J->ci.step_t[j];
      operand a = s->a >= 0 ? in_op[s->a] : step_op[-s->a - 1], b = a;
      int binary = s->kind == RLX_STEP_BIN || s->kind == RLX_STEP_CMP;
      if (binary) b = s->b >= 0 ? in_op[s->b] : step_op[-s->b - 1];
      operand res = {step_buf + (int64_t)j * CHAIN_BLOCK, a.scalar && b.scalar};
      /* the last step of an F32 output computes straight into out (each
       * lane reads its operands before the store: safe in place too) */
      if (j == last && direct_out && !res.scalar && s->kind != RLX_STEP_CAST)
        res.p = (float *)(void *)((char *)J->out->data + (size_t)(row * J->len + c0) * out_es);
      float *y = (float *)res.p;
      const int64_t n = res.scalar ? 1 : w;
      switch (s->kind) {
      case RLX_STEP_ACT: vo->act((rlx_act)s->op, (float)s->alpha, a.p, y, n); break;
      case RLX_STEP_BIN: vo->binary((rlx_binop)s->op, a.p, !a.scalar, b.p, !b.scalar, y, n); break;
      case RLX_STEP_CMP: vo->compare((rlx_cmpop)s->op, a.p, !a.scalar, b.p, !b.scalar, y, n); break;
      case RLX_STEP_CAST: {
        rlx_dtype from = s->a >= 0 ? c->ins[s->a]->dtype : J->ci.step_t[-s->a - 1];
        if (t == RLX_BOOL) vo->compare(RLX_CMP_NE, a.p, !a.scalar, &zero, 0, y, n);
        else if (t == RLX_F32 || t == from || from == RLX_BOOL) res = a; /* exact: the value as it is */
        else memcpy(y, a.p, (size_t)n * sizeof *y);
        break;
      }
      default: break;
      }
      if ((t == RLX_F16 || t == RLX_BF16) && res.p == y) vo->round(y, t, n);
      step_op[j] = res;
    }
    const operand r = step_op[last];
    char *dst = (char *)J->out->data + (size_t)(row * J->len + c0) * out_es;
    if ((const void *)r.p == (void *)dst) continue; /* computed in place */
    const float *src = r.p;
    if (r.scalar) {
      for (int64_t i = 0; i < w; i++) tmp[i] = r.p[0];
      src = tmp;
    }
    store_f32(vo, J->out, dst, src, w);
  }
}

rlx_status cpu_chain_run(cpu_ctx *ctx, const cpu_chain *c, cpu_tensor *out) {
  if (out->numel == 0) return RLX_OK;
  chain_job J = {.c = c, .vo = cpu_vec(), .out = out};
  const int n_ins = c->n_ins, R = out->rank;
  J.stride = malloc((size_t)(n_ins > 0 ? n_ins : 1) * sizeof *J.stride);
  if (!J.stride || !chain_info_new(c, &J.ci)) {
    free(J.stride);
    chain_info_free(&J.ci);
    return rlx_set_error(RLX_ERR_NOMEM, "elementwise chain: out of memory");
  }
  /* strides of every input against out's dims, size-1 output dims dropped
   * and neighbours merged where every live input allows it */
  for (int k = 0; k < n_ins; k++) {
    const cpu_tensor *t = c->ins[k];
    int64_t own[RLX_MAX_RANK];
    cpu_strides(t->rank, t->d, own);
    for (int i = 0; i < R; i++) {
      int ti = t->rank - R + i;
      J.stride[k][i] = (ti < 0 || seen_dim(c, k, ti) == 1) ? 0 : own[ti];
    }
  }
  int rank = 0;
  for (int i = 0; i < R; i++) {
    if (out->d[i] == 1) continue;
    int ti0 = n_ins > 0 ? c->ins[0]->rank - R + i : -1;
    unsigned char half = c->up2x && ti0 >= 2; /* input 0's H or W under the prologue */
    int merge = rank > 0 && !half && !J.half[rank - 1];
    for (int k = 0; merge && k < n_ins; k++)
      merge = !J.ci.in_live[k] || J.stride[k][rank - 1] == J.stride[k][i] * out->d[i];
    if (merge) {
      J.dims[rank - 1] *= out->d[i];
      for (int k = 0; k < n_ins; k++) J.stride[k][rank - 1] = J.stride[k][i];
    } else {
      J.dims[rank] = out->d[i];
      J.half[rank] = half;
      for (int k = 0; k < n_ins; k++) J.stride[k][rank] = J.stride[k][i];
      rank++;
    }
  }
  if (rank == 0) { /* a single element */
    J.dims[0] = 1;
    J.half[0] = 0;
    for (int k = 0; k < n_ins; k++) J.stride[k][0] = 0;
    rank = 1;
  }
  J.rank = rank;
  J.len = J.dims[rank - 1];
  J.blocks = (J.len + CHAIN_BLOCK - 1) / CHAIN_BLOCK;
  J.n_rows = out->numel / J.len;
  J.rpi = c->up2x || J.len > CHAIN_BLOCK / 2 ? 1 : CHAIN_BLOCK / J.len;
  J.full = calloc((size_t)n_ins + 1, 1);
  if (!J.full) {
    free(J.stride);
    chain_info_free(&J.ci);
    return rlx_set_error(RLX_ERR_NOMEM, "elementwise chain: out of memory");
  }
  for (int k = 0; k < n_ins; k++) { /* the output's own strides */
    int64_t want = 1;
    J.full[k] = 1;
    for (int i = rank - 1; i >= 0 && J.full[k]; want *= J.dims[i--]) J.full[k] = J.stride[k][i] == want;
  }
  const int threads = cpu_ctx_threads(ctx);
  int64_t n_ops = n_ins + c->chain->n;
  J.scratch_floats = (n_ins + c->chain->n + 1) * (int64_t)CHAIN_BLOCK;
  if (n_ops > 16) J.scratch_floats += (n_ops * (int64_t)sizeof(operand) + 3) / 4;
  J.scratch_floats = (J.scratch_floats + 15) / 16 * 16;
  J.scratch = malloc((size_t)(J.scratch_floats * threads) * sizeof(float));
  rlx_status st = RLX_OK;
  if (!J.scratch) {
    st = rlx_set_error(RLX_ERR_NOMEM, "elementwise chain: out of memory");
  } else {
    int64_t item = J.rpi > 1 ? J.rpi * J.len : J.len < CHAIN_BLOCK ? J.len : CHAIN_BLOCK;
    int64_t items = J.rpi > 1 ? (J.n_rows + J.rpi - 1) / J.rpi : J.n_rows * J.blocks;
    cpu_parallel_for(ctx, items, cpu_vec_grain(item), chain_blocks, &J);
  }
  free(J.full);
  free(J.scratch);
  free(J.stride);
  chain_info_free(&J.ci);
  return st;
}
