/* k_quant.c — DequantMatMul, Quantize, Dequantize, FakeQuantize. The block
 * formats themselves live in quant_blocks.c and the quantized dot products
 * in qdot_*.c; these kernels walk rows. */
#include "bgemm.h"
#include "cpu.h"
#include "gemm.h"
#include "qdot.h"
#include "qpack.h"
#include "quant_blocks.h"
#include "vec.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>

/* Product of all dims but the last: the number of rows of a [..., K] tensor. */
static int64_t outer_rows(const cpu_tensor *t) {
  int64_t r = 1;
  for (int i = 0; i + 1 < t->rank; i++) r *= t->d[i];
  return r;
}

static rlx_status nomem(const ir_node *n) {
  return rlx_set_error(RLX_ERR_NOMEM, "%s (node %d): out of memory", ir_ops[n->op].name, n->id);
}

/* Row r of a float tensor [rows, K] as F32: the data itself for F32, else
 * converted into buf (F64 rounded to nearest). */
static const float *f32_row(const cpu_tensor *t, int64_t r, int64_t K, float *buf) {
  if (t->dtype == RLX_F32) return (const float *)t->data + r * K;
  if (t->dtype == RLX_F64) {
    const double *src = (const double *)t->data + r * K;
    for (int64_t k = 0; k < K; k++) buf[k] = (float)src[k];
  } else {
    cpu_vec()->load(buf, (const char *)t->data + (size_t)(r * K) * (size_t)ir_dtypes[t->dtype].size,
                    t->dtype, K);
  }
  return buf;
}

/* ---------------------------------------------------------------- DequantMatMul */

/* The reference: x [M, K] @ dequant(w [N, K])^T, one dequantized (or
 * widened) row of w at a time, accumulated in double from x as given (not quantized). Serial
 * and slow; chosen by RLX_QMATMUL_REF=1 (for testing the fast path). */
static rlx_status dequant_matmul_ref(const ir_node *n, const cpu_tensor *x, const cpu_tensor *w,
                                     cpu_tensor *out) {
  const int64_t N = w->d[0], K = w->d[1], M = outer_rows(x);
  const size_t row_bytes = rlx_dtype_nbytes(w->dtype, K);
  rlx_status st = RLX_OK;
  double *xv = cpu_load_f64(x), *acc = malloc((size_t)out->numel * sizeof *acc);
  float *wrow = malloc((size_t)(K ? K : 1) * sizeof *wrow);
  if (!xv || !acc || !wrow) {
    st = nomem(n);
    goto done;
  }
  for (int64_t j = 0; j < N; j++) {
    const uint8_t *wr = (const uint8_t *)w->data + (size_t)j * row_bytes;
    if (qdot_widens(w->dtype)) {
      f32_row(w, j, K, wrow);
    } else if (quant_dequantize_row(w->dtype, wr, wrow, K)) {
      st = rlx_set_error(RLX_ERR_INTERNAL, "DequantMatMul (node %d): cannot decode %s rows of %lld",
                         n->id, rlx_dtype_name(w->dtype), (long long)K);
      goto done;
    }
    for (int64_t i = 0; i < M; i++) {
      const double *xr = xv + i * K;
      double s = 0.0;
      for (int64_t k = 0; k < K; k++) s += xr[k] * wrow[k];
      acc[i * N + j] = s;
    }
  }
  cpu_store_f64(out, acc);
done:
  free(xv);
  free(acc);
  free(wrow);
  return st;
}

static pthread_once_t ref_once = PTHREAD_ONCE_INIT;
static int use_ref;
static void read_ref_flag(void) { use_ref = ir_env_flag("RLX_QMATMUL_REF", 0); }

/* Bytes of weights a task streams per tile pass: a slice of weight rows
 * this size stays in L2 while every tile of activation rows (L1) meets it. */
#define QMM_SLICE_BYTES (96 * 1024)
/* Smallest share of weight bytes a parallel chunk gets (thread wake-up and
 * chunk hand-out cost about as much as streaming this). */
#define QMM_MIN_CHUNK_BYTES (16 * 1024)

typedef struct {
  const qdot_ops *q;
  qdot_fn dot;
  const cpu_tensor *x;
  rlx_dtype wt;
  const uint8_t *w;
  size_t w_row, act_row;
  int64_t M, N, K;
  int packed;         /* w meets act in its 16-row groups (qpack.h) */
  const uint8_t *act; /* M activation rows (x itself for F32 x and F16/BF16 w) */
  float *xbuf;     /* K floats per thread: non-F32 x rows as F32 */
  float *y;        /* [M, N] F32 */
} qmm_job;

/* Activation rows [begin, end): x row -> F32 -> Q8 blocks (or F32 rows). */
static void qmm_quantize(void *arg, int64_t begin, int64_t end, int thread) {
  const qmm_job *J = arg;
  float *buf = J->xbuf ? J->xbuf + (size_t)thread * (size_t)J->K : NULL;
  for (int64_t i = begin; i < end; i++) {
    const float *row = f32_row(J->x, i, J->K, buf);
    uint8_t *dst = (uint8_t *)J->act + (size_t)i * J->act_row;
    if (J->packed) qpack_quantize_row(J->q, J->wt, row, (qdot_q8_0 *)dst, J->K);
    else qdot_quantize_row(J->q, J->wt, row, dst, J->K);
  }
}

/* Output columns (weight rows) [begin, end) for every activation row: per
 * slice of weight rows, per tile of up to QDOT_MAX_ROWS activation rows,
 * each weight row is decoded once for the whole tile. */
static void qmm_rows(void *arg, int64_t begin, int64_t end, int thread) {
  (void)thread;
  const qmm_job *J = arg;
  const int64_t nb = J->K / ir_dtypes[J->wt].block;
  int64_t slice = (int64_t)(QMM_SLICE_BYTES / (J->w_row ? J->w_row : 1));
  if (slice < 1) slice = 1;
  for (int64_t j0 = begin; j0 < end; j0 += slice) {
    const int64_t j1 = j0 + slice < end ? j0 + slice : end;
    for (int64_t i0 = 0; i0 < J->M; i0 += QDOT_MAX_ROWS) {
      const int nr = (int)(J->M - i0 < QDOT_MAX_ROWS ? J->M - i0 : QDOT_MAX_ROWS);
      const uint8_t *act = J->act + (size_t)i0 * J->act_row;
      for (int64_t j = j0; j < j1; j++)
        J->dot(nb, J->w + (size_t)j * J->w_row, act, J->act_row, nr, J->y + i0 * J->N + j, J->N);
    }
  }
}

/* Fewest rows of x for which a weight without a prepack slot is packed
 * for one call (a pass over w that the GEMM over the groups repays). */
#define QPACK_MIN_ROWS 16

/* The slot's packed copy of w (shared by all plans over the same
 * weights), packed when it holds none. */
static qpack *slot_pack(cpu_ctx *ctx, gemm_prepack *slot, const cpu_tensor *w) {
  const int64_t N = w->d[0], K = w->d[1];
  qpack *p = gemm_prepack_other(slot, w->data);
  if (!p && (p = qpack_acquire(ctx, w->dtype, w->data, N, K)))
    gemm_prepack_set_other(slot, w->data, p, qpack_bytes(w->dtype, N, K), qpack_release);
  return p;
}

int cpu_dequant_prepack(cpu_ctx *ctx, gemm_prepack *slot, const cpu_tensor *w) {
  pthread_once(&ref_once, read_ref_flag);
  if (use_ref || w->rank != 2 || !rlx_dtype_is_block(w->dtype) || qdot_widens(w->dtype) || !qpack_supported(w->dtype))
    return 0;
  return slot_pack(ctx, slot, w) != NULL;
}

/* The 16-row groups of w (qpack.h) where this CPU has kernels for them:
 * the slot's copy, packed on first use unless the plan's backend packed
 * it ahead (cpu_dequant_prepack); with no slot a copy for this call only
 * (*temp = 1), for prefill shapes. */
static qpack *packed_weight(cpu_ctx *ctx, const cpu_tensor *w, int64_t M, int *temp) {
  const int64_t N = w->d[0], K = w->d[1];
  *temp = 0;
  if (!qpack_supported(w->dtype)) return NULL;
  if (w->prepack) return slot_pack(ctx, w->prepack, w);
  if (M < QPACK_MIN_ROWS) return NULL;
  *temp = 1;
  return qpack_new(ctx, w->dtype, w->data, N, K);
}

/* y [M, N] F32 into out of another float dtype. */
static void store_from_f32(cpu_tensor *out, const float *y) {
  if (out->dtype == RLX_F64) {
    for (int64_t i = 0; i < out->numel; i++) ((double *)out->data)[i] = y[i];
  } else {
    cpu_vec()->store(out->data, out->dtype, y, out->numel);
  }
}

/* F16/BF16 w and more rows than a dot pass serves (prefill): F32 x on AMX
 * BF16 tiles where they run (bgemm.h), else for BF16 w under
 * RLX_FLAG_BF16_MATH x rounded to BF16 on vdpbf16ps where the CPU has it,
 * else the SGEMM, which widens w to F32 while it packs it (a panel of rows
 * at a time, into its own buffers: w itself is never expanded) and reuses
 * each packed panel for all of x's rows. F64 x is rounded to F32 first
 * (the GEMM's operands are F32, F16 or BF16). */
static rlx_status dequant_matmul_gemm(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *x,
                                      const cpu_tensor *w, cpu_tensor *out) {
  const int64_t N = w->d[0], K = w->d[1], M = outer_rows(x);
  const int out_f32 = out->dtype == RLX_F32, x_f64 = x->dtype == RLX_F64;
  float *xf = x_f64 ? malloc((size_t)M * (size_t)K * sizeof(float) + 1) : NULL;
  float *y = out_f32 ? out->data : malloc((size_t)out->numel * sizeof(float));
  rlx_status st = RLX_OK;
  if ((x_f64 && !xf) || !y) {
    st = nomem(n);
    goto done;
  }
  for (int64_t i = 0; x_f64 && i < M * K; i++) xf[i] = (float)((const double *)x->data)[i];
  if ((w->dtype == RLX_BF16 || w->dtype == RLX_F16) && (x_f64 || x->dtype == RLX_F32) && bgemm_amx_supported()) {
    if (bgemm_amx(ctx, M, N, K, xf ? xf : x->data, w->data, w->dtype, y)) st = nomem(n);
    else if (!out_f32) store_from_f32(out, y);
    goto done;
  }
  if (w->dtype == RLX_BF16 && (x_f64 || x->dtype == RLX_F32) && (cpu_ctx_flags(ctx) & RLX_FLAG_BF16_MATH) &&
      bgemm_avx512_supported()) {
    if (bgemm_avx512(ctx, M, N, K, xf ? xf : x->data, w->data, y)) st = nomem(n);
    else if (!out_f32) store_from_f32(out, y);
    goto done;
  }
  const gemm_operand a = {.data = xf ? (const void *)xf : x->data, .dtype = xf ? RLX_F32 : x->dtype,
                          .trans = 0, .ld = K};
  const gemm_operand b = {.data = w->data, .dtype = w->dtype, .trans = 1, .ld = K};
  cpu_gemm(ctx, 1, M, N, K, &a, &b, y, N, 0, NULL);
  if (!out_f32) store_from_f32(out, y);
done:
  free(xf);
  if (!out_f32) free(y);
  return st;
}

/* x [M, K] @ dequant(w [N, K])^T without expanding w: x quantized once to
 * 8-bit blocks (qdot.h), then integer block dot products, threaded over
 * the rows of w. F16/BF16/F64 x is converted to F32 rows first, the result
 * is computed in F32 and stored in x's dtype. F16/BF16 w: the same walk
 * over w's rows with float dot products against x's F32 rows (x itself
 * when it is F32) for up to QDOT_MAX_ROWS rows (decode: one stream over
 * w), the SGEMM for more (dequant_matmul_gemm). Packable weights
 * (qpack.h) meet x's Q8_0 rows in the GEMM over their 16-row groups. */
rlx_status cpu_DequantMatMul(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in,
                             cpu_tensor *out) {
  const cpu_tensor *x = &in[0], *w = &in[1];
  if (out->numel == 0) return RLX_OK;
  pthread_once(&ref_once, read_ref_flag);
  if (use_ref) return dequant_matmul_ref(n, x, w, out);
  const int64_t N = w->d[0], K = w->d[1], M = outer_rows(x);
  const int widens = qdot_widens(w->dtype);
  if (widens && M > QDOT_MAX_ROWS) return dequant_matmul_gemm(ctx, n, x, w, out);
  const qdot_ops *q = qdot_best();
  qmm_job J = {.q = q, .dot = q->dot[w->dtype], .x = x, .wt = w->dtype, .w = w->data,
               .w_row = rlx_dtype_nbytes(w->dtype, K), .act_row = qdot_act_row_bytes(w->dtype, K),
               .M = M, .N = N, .K = K};
  if (!J.dot)
    return rlx_set_error(RLX_ERR_INTERNAL, "DequantMatMul (node %d): no kernel for %s weights",
                         n->id, rlx_dtype_name(w->dtype));
  int temp_pack = 0;
  qpack *pk = widens ? NULL : packed_weight(ctx, w, M, &temp_pack);
  if (pk) { /* the groups take qdot_q8_0 blocks whatever w's block */
    J.packed = 1;
    J.act_row = qdot_act_row_bytes(RLX_Q8_0, K);
  }
  const int threads = cpu_ctx_threads(ctx);
  const int out_f32 = out->dtype == RLX_F32;
  /* F32 rows of x serve F16/BF16 weights as they are (K = 0: x may have
   * no data) */
  const int x_as_act = widens && x->dtype == RLX_F32 && K > 0;
  uint8_t *act = x_as_act ? NULL : malloc(J.act_row * (size_t)M + 1);
  J.act = x_as_act ? x->data : act;
  J.xbuf = x->dtype == RLX_F32 ? NULL : malloc((size_t)threads * (size_t)K * sizeof(float) + 1);
  J.y = out_f32 ? out->data : malloc((size_t)out->numel * sizeof(float));
  rlx_status st = RLX_OK;
  if (!J.act || (x->dtype != RLX_F32 && !J.xbuf) || !J.y) {
    st = nomem(n);
    goto done;
  }
  /* about 8 KiB of activations per quantization chunk: the few rows of a
   * batched decode step split over the threads too, where one thread
   * quantizing them kept the others waiting */
  const int64_t xgrain = 1 + (int64_t)(2048 / (K ? K : 1));
  if (!x_as_act) cpu_parallel_for(ctx, M, xgrain, qmm_quantize, &J);
  if (pk) {
    if (qpack_matmul(ctx, pk, (const qdot_q8_0 *)J.act, M, J.y)) {
      st = nomem(n);
      goto done;
    }
  } else {
    const int64_t grain = 1 + (int64_t)(QMM_MIN_CHUNK_BYTES / ((size_t)M * J.w_row + 1));
    cpu_parallel_for(ctx, N, grain, qmm_rows, &J);
  }
  if (!out_f32) store_from_f32(out, J.y);
done:
  if (temp_pack) qpack_free(pk);
  free(act);
  free(J.xbuf);
  if (!out_f32) free(J.y);
  return st;
}

/* Quantize / Dequantize: rows of the last dim, each a whole number of blocks. */
rlx_status cpu_Quantize(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  (void)ctx;
  const cpu_tensor *x = &in[0];
  const int64_t K = x->rank ? x->d[x->rank - 1] : 1;
  if (x->numel == 0) return RLX_OK;
  const int64_t rows = x->numel / K;
  const size_t row_bytes = rlx_dtype_nbytes(out->dtype, K);
  float *buf = malloc((size_t)K * sizeof *buf);
  if (!buf) return nomem(n);
  rlx_status st = RLX_OK;
  for (int64_t r = 0; r < rows && st == RLX_OK; r++)
    if (quant_quantize_row(out->dtype, f32_row(x, r, K, buf),
                           (uint8_t *)out->data + (size_t)r * row_bytes, K))
      st = rlx_set_error(RLX_ERR_INTERNAL, "Quantize (node %d): cannot encode %s rows of %lld",
                         n->id, rlx_dtype_name(out->dtype), (long long)K);
  free(buf);
  return st;
}

rlx_status cpu_Dequantize(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  (void)ctx;
  const cpu_tensor *x = &in[0];
  const int64_t K = x->rank ? x->d[x->rank - 1] : 1;
  if (x->numel == 0) return RLX_OK;
  const int64_t rows = x->numel / K;
  const size_t row_bytes = rlx_dtype_nbytes(x->dtype, K);
  for (int64_t r = 0; r < rows; r++)
    if (quant_dequantize_row(x->dtype, (const uint8_t *)x->data + (size_t)r * row_bytes,
                             (float *)out->data + r * K, K))
      return rlx_set_error(RLX_ERR_INTERNAL, "Dequantize (node %d): cannot decode %s rows of %lld",
                           n->id, rlx_dtype_name(x->dtype), (long long)K);
  return RLX_OK;
}

/* ---------------------------------------------------------------- FakeQuantize */

static int one_element(const cpu_tensor *t) {
  return t->rank == 0 || (t->rank == 1 && t->d[0] == 1);
}

/* Zero point c as an integer-valued double: integers exactly, floats
 * rounded to nearest (ties to even). */
static double zero_point_at(const cpu_tensor *z, int64_t c) {
  if (z->dtype == RLX_I32 || z->dtype == RLX_I64) return (double)cpu_get_i(z, c);
  return nearbyint(cpu_get(z, c));
}

/* Semantics: ir_infer_FakeQuantize. Computed in double for every dtype. */
rlx_status cpu_FakeQuantize(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in,
                            cpu_tensor *out) {
  (void)ctx;
  const cpu_tensor *x = &in[0], *scale = &in[1], *zp = &in[2];
  const int bits = (int)n->a.bits;
  const double qmin = n->a.symmetric ? -ldexp(1.0, bits - 1) : 0.0;
  const double qmax = n->a.symmetric ? ldexp(1.0, bits - 1) - 1.0 : ldexp(1.0, bits) - 1.0;
  const int per_tensor = one_element(scale) && one_element(zp);
  int64_t outer = 1, len = 1, inner = 1;
  if (!per_tensor) cpu_axis_split(x, (int)n->a.axis, &outer, &len, &inner);
  for (int64_t i = 0; i < x->numel; i++) {
    const int64_t c = per_tensor ? 0 : (i / inner) % len;
    const double s = cpu_get(scale, c), z = n->a.symmetric ? 0.0 : zero_point_at(zp, c);
    double q = nearbyint(cpu_get(x, i) / s) + z;
    /* comparisons, not fmin/fmax, so a NaN stays NaN */
    q = q < qmin ? qmin : q > qmax ? qmax : q;
    cpu_set(out, i, (q - z) * s);
  }
  return RLX_OK;
}
