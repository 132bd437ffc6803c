/* test_qpack.c — quantized weights repacked into 16-row groups (qpack.h)
 * and the GEMM over them, against dequantize (quant_blocks.c, bit-exact
 * with ggml) + dot in double of the same 8-bit activations.
 *
 * For Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K and Q6_K: weights
 * quantized from normal values by the reference codec and random bytes
 * (every level, every 6-bit scale, Q8_0's -128), odd N (padding lanes), K of 1 .. 6 super-blocks, M from 1
 * (decode) to 37 (every tile height of the 6- and 12-row kernels, several
 * tiles and a ragged last one),
 * with the context's threads (CTest: RLX_THREADS 1 and 2); then
 * cpu_DequantMatMul with a prepack slot (packed once, the same copy on the
 * next call, dropped by a reset) and without (packed per prefill call);
 * then a session whose weight is packed ahead of its first run
 * (rt_session_prepare) against one that packs it in that run.
 * Tolerance: 1e-6 x sum_k |xq_k| (|w_k| + max |w| of w_k's block), as in
 * test_qdot.c. The kernels are this CPU's best (qpack_kernel: on AMD
 * with AVX-VNNI a 1-row Q4_K or Q6_K takes its tile; and AMX tiles for
 * whole tiles of 16 rows where cpu_amx_int8() allows them);
 * CTest runs it again with RLX_NO_AMX, RLX_NO_AVX512 (AVX-VNNI) and
 * RLX_NO_VNNI too (vpmaddubsw).
 * Skips (77) on a CPU without AVX2.
 */
#include "backend/cpu/cpu.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/qdot.h"
#include "backend/cpu/qpack.h"
#include "backend/cpu/quant_blocks.h"
#include "check.h"
#include "cpu_matrix.h"
#include "rng.h"
#include "runtime/runtime.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const rlx_dtype TYPES[] = {RLX_Q4_0, RLX_Q4_1, RLX_Q5_0, RLX_Q5_1, RLX_Q8_0, RLX_Q4_K, RLX_Q5_K, RLX_Q6_K};
#define N_TYPES ((int)(sizeof TYPES / sizeof TYPES[0]))

/* N rows of K: quantized normal values, or random bytes with sane fp16
 * scales (d, and Q4_1's m / Q4_K's dmin). */
static uint8_t *make_weights(rlx_dtype t, int64_t N, int64_t K, int random_bytes) {
  const size_t row = rlx_dtype_nbytes(t, K), bsz = ir_dtypes[t].size;
  uint8_t *w = malloc(row * (size_t)N + 1);
  float *f = malloc((size_t)K * sizeof *f);
  for (int64_t r = 0; r < N; r++) {
    if (!random_bytes) {
      for (int64_t k = 0; k < K; k++) f[k] = (float)normal_value();
      quant_quantize_row(t, f, w + (size_t)r * row, K);
      continue;
    }
    for (size_t i = 0; i < row; i++) w[(size_t)r * row + i] = (uint8_t)rng_next();
    for (size_t b = 0; b < row / bsz; b++) {
      uint8_t *blk = w + (size_t)r * row + b * bsz;
      const uint16_t d = ir_f32_to_f16((float)(0.01 + 0.02 * (rng_next() % 100) / 100.0));
      const uint16_t m = ir_f32_to_f16((float)(-0.05 + 0.1 * (rng_next() % 100) / 100.0));
      memcpy(blk + (t == RLX_Q6_K ? 208 : 0), &d, 2);
      if (t == RLX_Q4_1 || t == RLX_Q5_1 || t == RLX_Q4_K || t == RLX_Q5_K) memcpy(blk + 2, &m, 2);
    }
  }
  free(f);
  return w;
}

/* M activation rows of K as the qdot_q8_0 blocks of w, and their values in
 * xq (Q6_K's levels are stored + 128, unsigned). */
static qdot_q8_0 *make_act(rlx_dtype t, int64_t M, int64_t K, float *x, double *xq) {
  qdot_q8_0 *a = malloc((size_t)(M * K / QDOT_QK) * sizeof *a + 1);
  for (int64_t i = 0; i < M * K; i++) x[i] = (float)normal_value();
  for (int64_t i = 0; i < M; i++) qpack_quantize_row(qdot_best(), t, x + i * K, a + i * (K / QDOT_QK), K);
  const int flip = t == RLX_Q6_K ? 0x80 : 0;
  for (int64_t i = 0; i < M * K; i++)
    xq[i] = (double)a[i / QDOT_QK].d * (int8_t)(uint8_t)((uint8_t)a[i / QDOT_QK].qs[i % QDOT_QK] ^ flip);
  if (t == RLX_Q4_K || t == RLX_Q5_K || t == RLX_Q6_K) /* s holds the block's level sum: check it here */
    for (int64_t b = 0; b < M * K / QDOT_QK; b++) {
      int sum = 0;
      for (int e = 0; e < QDOT_QK; e++) sum += (int8_t)(uint8_t)((uint8_t)a[b].qs[e] ^ flip);
      CHECK(a[b].s == (float)sum, "%s activation block %lld: sum %g, want %d", rlx_dtype_name(t), (long long)b,
            (double)a[b].s, sum);
    }
  return a;
}

/* y [M, N] against dequantized w and xq; returns the outputs off. */
static int compare(rlx_dtype t, const uint8_t *w, const double *xq, const float *y, int64_t M, int64_t N,
                   int64_t K, const char *what) {
  float *wf = malloc((size_t)K * sizeof *wf);
  int bad = 0;
  for (int64_t j = 0; j < N; j++) {
    quant_dequantize_row(t, w + (size_t)j * rlx_dtype_nbytes(t, K), wf, K);
    for (int64_t i = 0; i < M; i++) {
      double want = 0, mag = 0;
      for (int64_t b = 0; b < K / QDOT_QK; b++) {
        double amax = 0;
        for (int e = 0; e < QDOT_QK; e++) amax = fmax(amax, fabs(wf[b * QDOT_QK + e]));
        for (int e = 0; e < QDOT_QK; e++) {
          const int64_t k = b * QDOT_QK + e;
          want += wf[k] * xq[i * K + k];
          mag += fabs(xq[i * K + k]) * (fabs(wf[k]) + amax);
        }
      }
      const double got = y[i * N + j];
      if (!(fabs(got - want) <= 1e-6 * mag) && bad++ < 3)
        printf("  %s %s M %lld N %lld K %lld at [%lld, %lld]: got %.9g want %.9g\n", rlx_dtype_name(t), what,
               (long long)M, (long long)N, (long long)K, (long long)i, (long long)j, got, want);
    }
  }
  free(wf);
  return bad;
}

static void test_gemm(cpu_ctx *ctx, rlx_dtype t, int64_t M, int64_t N, int64_t K, int random_bytes) {
  uint8_t *w = make_weights(t, N, K, random_bytes);
  float *x = malloc((size_t)(M * K) * sizeof *x), *y = malloc((size_t)(M * N) * sizeof *y);
  double *xq = malloc((size_t)(M * K) * sizeof *xq);
  qdot_q8_0 *act = make_act(t, M, K, x, xq);
  qpack *p = qpack_new(ctx, t, w, N, K);
  CHECK(p != NULL, "%s N %lld K %lld: not packed", rlx_dtype_name(t), (long long)N, (long long)K);
  if (p) {
    CHECK(qpack_matmul(ctx, p, act, M, y) == 0, "%s: out of memory", rlx_dtype_name(t));
    const int bad = compare(t, w, xq, y, M, N, K, random_bytes ? "random bytes" : "quantized");
    CHECK(bad == 0, "%s M %lld N %lld K %lld: %d outputs off", rlx_dtype_name(t), (long long)M, (long long)N,
          (long long)K, bad);
  }
  qpack_free(p);
  free(w);
  free(x);
  free(y);
  free(xq);
  free(act);
}

/* cpu_DequantMatMul of F32 x with and without a prepack slot. */
static void test_kernel(cpu_ctx *ctx, rlx_dtype t) {
  const int64_t N = 37, K = 512;
  uint8_t *w = make_weights(t, N, K, 0);
  gemm_prepack *slot = gemm_prepack_new();
  ir_node node;
  memset(&node, 0, sizeof node);
  node.op = RLX_OP_DequantMatMul;
  static const int64_t rows[] = {1, 3, 20, 1};
  for (int c = 0; c < 5; c++) {
    const int64_t M = rows[c % 4];
    float *x = malloc((size_t)(M * K) * sizeof *x), *y = malloc((size_t)(M * N) * sizeof *y);
    double *xq = malloc((size_t)(M * K) * sizeof *xq);
    qdot_q8_0 *act = make_act(t, M, K, x, xq); /* the same levels the kernel makes of x */
    cpu_tensor in[2], out;
    set_matrix(&in[0], x, RLX_F32, M, K);
    set_matrix(&in[1], w, t, N, K);
    set_matrix(&out, y, RLX_F32, M, N);
    in[1].prepack = c < 4 ? slot : NULL; /* call 4: no slot, prefill rows */
    if (c == 4) {
      free(x), free(y), free(xq), free(act);
      const int64_t Mp = 20;
      x = malloc((size_t)(Mp * K) * sizeof *x), y = malloc((size_t)(Mp * N) * sizeof *y);
      xq = malloc((size_t)(Mp * K) * sizeof *xq);
      act = make_act(t, Mp, K, x, xq);
      set_matrix(&in[0], x, RLX_F32, Mp, K);
      set_matrix(&out, y, RLX_F32, Mp, N);
    }
    const size_t held_before = gemm_prepack_bytes(slot);
    rlx_status st = cpu_DequantMatMul(ctx, &node, in, &out);
    CHECK(st == RLX_OK, "%s call %d: %s", rlx_dtype_name(t), c, rlx_last_error());
    const int64_t m = out.d[0];
    const int bad = compare(t, w, xq, y, m, N, K, "DequantMatMul");
    CHECK(bad == 0, "%s DequantMatMul call %d (M %lld): %d outputs off", rlx_dtype_name(t), c, (long long)m, bad);
    if (c == 0)
      CHECK(gemm_prepack_bytes(slot) == qpack_bytes(t, N, K), "%s: slot holds %zu bytes, want %zu",
            rlx_dtype_name(t), gemm_prepack_bytes(slot), qpack_bytes(t, N, K));
    if (c == 1 || c == 2) CHECK(gemm_prepack_bytes(slot) == held_before, "%s: repacked", rlx_dtype_name(t));
    if (c == 2) {
      gemm_prepack_reset(slot);
      CHECK(gemm_prepack_bytes(slot) == 0, "%s: reset left %zu bytes", rlx_dtype_name(t), gemm_prepack_bytes(slot));
    }
    free(x), free(y), free(xq), free(act);
  }
  gemm_prepack_free(slot);
  free(w);
}

/* A session's weight packed ahead (rt_session_prepare, what the LLM
 * loader calls): the copy is made before the first run, that run packs
 * nothing more, and its outputs are the bits of a session that packs at
 * its first run. */
static void test_prepare(rlx_dtype t) {
  const int64_t N = 37, K = 512, M = 20;
  const size_t wbytes = rlx_dtype_nbytes(t, K) * (size_t)N, want = qpack_bytes(t, N, K);
  uint8_t *w = make_weights(t, N, K, 0);
  float *x = malloc((size_t)(M * K) * sizeof *x), *y[2];
  for (int64_t i = 0; i < M * K; i++) x[i] = (float)normal_value();
  for (int pre = 0; pre < 2; pre++) {
    y[pre] = calloc((size_t)(M * N), sizeof(float));
    /* two names: the second session must not take the first one's idle plan and packed copy */
    rlx_graph *g = rlx_graph_new(pre ? "qpack_prepare_ahead" : "qpack_prepare_at_run");
    const rlx_node xi = rlx_input(g, "x", RLX_F32, 2, (const int64_t[]){M, K});
    const rlx_node out = rlx_dequant_matmul(g, xi, rlx_param(g, "w", t, 2, (const int64_t[]){N, K}));
    rlx_graph_set_outputs(g, 1, &out);
    const rlx_options o = {RLX_DEVICE_CPU, 0, 0, 0, NULL};
    rlx_session *s = NULL;
    rlx_status st = rlx_compile(g, &o, &s);
    if (st == RLX_OK) st = rlx_set_param_ref(s, "w", w, wbytes);
    const size_t before = gemm_prepack_total_bytes();
    if (st == RLX_OK && pre) st = rt_session_prepare(s);
    const size_t ahead = gemm_prepack_total_bytes() - before;
    if (st == RLX_OK) st = rlx_set_input(s, "x", x, (size_t)(M * K) * sizeof *x);
    if (st == RLX_OK) st = rlx_run(s);
    if (st == RLX_OK) st = rlx_output(s, 0, y[pre], (size_t)(M * N) * sizeof(float));
    CHECK(st == RLX_OK, "%s prepare %d: %s", rlx_dtype_name(t), pre, rlx_last_error());
    CHECK(ahead == (pre ? want : 0), "%s prepare %d: %zu bytes packed ahead, want %zu", rlx_dtype_name(t), pre,
          ahead, pre ? want : 0);
    CHECK(gemm_prepack_total_bytes() - before == want, "%s prepare %d: %zu bytes packed after the run, want %zu",
          rlx_dtype_name(t), pre, gemm_prepack_total_bytes() - before, want);
    rlx_session_free(s);
    rlx_graph_free(g);
  }
  CHECK(memcmp(y[0], y[1], (size_t)(M * N) * sizeof(float)) == 0, "%s: packed ahead, other outputs",
        rlx_dtype_name(t));
  free(y[0]), free(y[1]), free(x), free(w);
}

int main(void) {
  rng_seed(0x9E3779B97F4A7C15ull);
  int any = 0;
  for (int i = 0; i < N_TYPES; i++) any |= qpack_supported(TYPES[i]);
  if (!any) {
    printf("no packed kernels on this CPU (AVX2): skipped\n");
    return 77;
  }
  cpu_ctx *ctx = cpu_ctx_new(0);
  printf("qpack: %d threads\n", cpu_ctx_threads(ctx));
  static const int64_t shapes[][3] = {{1, 16, 256},  {1, 45, 512},  {2, 17, 256},   {5, 33, 768},  {6, 1, 256},
                                      {7, 64, 512},  {13, 31, 1536}, {4, 200, 256},  {19, 40, 512}, {3, 20, 256},
                                      {8, 17, 512},  {9, 33, 256},   {10, 16, 768},  {11, 18, 256}, {12, 40, 512},
                                      {25, 19, 512}, {37, 17, 256}};
  for (int ti = 0; ti < N_TYPES; ti++) {
    if (!qpack_supported(TYPES[ti])) continue;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
      for (int rb = 0; rb < 2; rb++) test_gemm(ctx, TYPES[ti], shapes[s][0], shapes[s][1], shapes[s][2], rb);
    test_kernel(ctx, TYPES[ti]);
    test_prepare(TYPES[ti]);
  }
  cpu_ctx_free(ctx);
  return check_report();
}
