/* k_matmul.c — MatMul: NumPy matmul semantics (rank-1 operands, broadcast
 * batch dims). F32, F16 and BF16 run on the packed SGEMM (gemm.h: F16/BF16
 * converted to F32 while packing, accumulation in F32, the result rounded
 * once to the output dtype); F64 in double through cpu_matmul_f64, which
 * other kernels reuse. */
#include "cpu.h"
#include "gemm.h"
#include "linalg_rows.h"

#include <stdlib.h>

rlx_status cpu_matmul_f64(const double *a, const double *b, double *c, int64_t M, int64_t K,
                          int64_t N) {
  if (M < 0 || K < 0 || N < 0)
    return rlx_set_error(RLX_ERR_INVALID, "cpu_matmul_f64: negative size %lldx%lld @ %lldx%lld",
                         (long long)M, (long long)K, (long long)K, (long long)N);
  for (int64_t i = 0; i < M; i++) {
    double *crow = c + i * N;
    for (int64_t j = 0; j < N; j++) crow[j] = 0.0;
    /* i-k-j order: the inner loop walks rows of b and c contiguously. */
    for (int64_t kk = 0; kk < K; kk++) {
      double aik = a[i * K + kk];
      const double *brow = b + kk * N;
      for (int64_t j = 0; j < N; j++) crow[j] += aik * brow[j];
    }
  }
  return RLX_OK;
}

/* Matrix strides of an operand's batch dims aligned to the output's batch
 * dims (in whole matrices): leading missing dims and size-1 dims get 0. */
static void batch_strides(int rank, const int64_t *dims, int out_rank, int64_t *strides) {
  int64_t s = 1;
  for (int i = out_rank - 1; i >= 0; i--) {
    int j = rank - out_rank + i;
    if (j < 0 || dims[j] == 1) {
      strides[i] = 0;
    } else {
      strides[i] = s;
      s *= dims[j];
    }
  }
}

/* F64: the double reference loop, one batch matrix at a time. */
static rlx_status matmul_f64(const ir_node *n, const cpu_tensor *ta, const cpu_tensor *tb,
                             cpu_tensor *out, int64_t batch, int64_t M, int64_t K, int64_t N,
                             const int64_t *a_off, const int64_t *b_off) {
  rlx_status st = RLX_OK;
  double *a = cpu_load_f64(ta), *b = cpu_load_f64(tb);
  double *c = malloc((size_t)out->numel * sizeof(double));
  if (!a || !b || !c) {
    st = rlx_set_error(RLX_ERR_NOMEM, "MatMul (node %d): out of memory", n->id);
    goto done;
  }
  for (int64_t bi = 0; bi < batch && st == RLX_OK; bi++)
    st = cpu_matmul_f64(a + a_off[bi], b + b_off[bi], c + bi * M * N, M, K, N);
  if (st == RLX_OK) cpu_store_f64(out, c);
done:
  free(a);
  free(b);
  free(c);
  return st;
}

rlx_status cpu_MatMul(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  const cpu_tensor *ta = &in[0], *tb = &in[1];
  /* Rank-1 operands act as [1, K] and [K, 1]; the output omits that dim,
   * which leaves the row-major layout of [..., M, N] unchanged. */
  int64_t M = ta->rank == 1 ? 1 : ta->d[ta->rank - 2];
  int64_t K = ta->d[ta->rank - 1];
  int64_t N = tb->rank == 1 ? 1 : tb->d[tb->rank - 1];
  int a_batch_rank = ta->rank > 2 ? ta->rank - 2 : 0;
  int b_batch_rank = tb->rank > 2 ? tb->rank - 2 : 0;
  int batch_rank = a_batch_rank > b_batch_rank ? a_batch_rank : b_batch_rank;

  int64_t batch_dims[RLX_MAX_RANK], a_str[RLX_MAX_RANK], b_str[RLX_MAX_RANK];
  int64_t batch = 1;
  for (int i = 0; i < batch_rank; i++) {
    int ia = a_batch_rank - batch_rank + i, ib = b_batch_rank - batch_rank + i;
    int64_t da = ia >= 0 ? ta->d[ia] : 1, db = ib >= 0 ? tb->d[ib] : 1;
    batch_dims[i] = da == 1 ? db : da;
    batch *= batch_dims[i];
  }
  if (out->numel == 0) return RLX_OK;
  batch_strides(a_batch_rank, ta->d, batch_rank, a_str);
  batch_strides(b_batch_rank, tb->d, batch_rank, b_str);

  /* element offsets of each batch's matrices in a and b */
  int64_t *a_off = malloc((size_t)batch * 2 * sizeof *a_off), *b_off = a_off + batch;
  if (!a_off) return rlx_set_error(RLX_ERR_NOMEM, "MatMul (node %d): out of memory", n->id);
  int a_flat = 1, b_shared = 1; /* a's batches back to back; one b for all */
  for (int64_t bi = 0; bi < batch; bi++) {
    int64_t oa = 0, ob = 0, rest = bi;
    for (int i = batch_rank - 1; i >= 0; i--) {
      int64_t idx = rest % batch_dims[i];
      rest /= batch_dims[i];
      oa += idx * a_str[i];
      ob += idx * b_str[i];
    }
    a_off[bi] = oa * M * K;
    b_off[bi] = ob * K * N;
    a_flat &= a_off[bi] == bi * M * K;
    b_shared &= b_off[bi] == 0;
  }

  rlx_status st = RLX_OK;
  if (out->dtype == RLX_F64) {
    st = matmul_f64(n, ta, tb, out, batch, M, K, N, a_off, b_off);
    free(a_off);
    return st;
  }
  float *c = out->dtype == RLX_F32 ? out->data : malloc((size_t)out->numel * sizeof(float));
  if (!c) {
    free(a_off);
    return rlx_set_error(RLX_ERR_NOMEM, "MatMul (node %d): out of memory", n->id);
  }
  gemm_operand a = {ta->data, ta->dtype, 0, K, 0, a_off};
  gemm_operand b = {tb->data, tb->dtype, tb->transposed, tb->transposed ? K : N, 0, b_off};
  if (a_flat && b_shared) {
    /* [..., M, K] @ [K, N]: one GEMM over every row of a */
    a.batch_offsets = b.batch_offsets = NULL;
    cpu_gemm_prepacked(ctx, 1, batch * M, N, K, &a, &b, tb->prepack, c, N, 0, NULL);
  } else {
    cpu_gemm(ctx, batch, M, N, K, &a, &b, c, N, M * N, NULL);
  }
  if (c != out->data) {
    cpu_store_f32(out, c);
    free(c);
  }
  free(a_off);
  return st;
}
