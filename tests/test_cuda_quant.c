/* test_cuda_quant.c — the CUDA backend's packed and 16-bit weights against
 * the CPU backend: DequantMatMul on both of its paths (decode GEMV,
 * dequantize + GEMM), the default integer decode path (x quantized to 8
 * bits, with and without the RmsNorm or the SwiGLU in its quantization),
 * 16-bit GGUF matrices read in place, and rows of a block table gathered.
 * Skips (exit 77) without a CUDA device. */
#include "cuda_backend_test.h"

/* Packed weights made by the CPU's Quantize, then DequantMatMul on both
 * CUDA paths: M <= 8 (the fused decode kernel) and M > 8 (dequantize + GEMM). */
static void test_dequant_matmul(void) {
  static const rlx_dtype schemes[] = {RLX_Q4_0, RLX_Q4_1, RLX_Q8_0, RLX_Q4_K, RLX_Q6_K};
  static const rlx_dtype types[] = {RLX_F32, RLX_BF16};
  const int64_t N = 72, K = 512;
  for (size_t si = 0; si < sizeof schemes / sizeof *schemes; si++) {
    rlx_dtype q = schemes[si];
    rlx_graph *qg = rlx_graph_new("quantize");
    int64_t wd[2] = {N, K};
    rlx_node w = rlx_input(qg, "w", RLX_F32, 2, wd);
    rlx_node qw = rlx_quantize(qg, w, q);
    rlx_graph_set_outputs(qg, 1, &qw);
    float *wf = random_tensor(RLX_F32, N * K, 1.0);
    bound_leaf wl = {"w", 0, wf, sizeof(float) * (size_t)(N * K)};
    size_t qbytes = 0;
    void *packed = run_graph(qg, RLX_DEVICE_CPU, &wl, 1, 0, &qbytes);
    CHECK(packed != NULL, "quantize to %s", rlx_dtype_name(q));
    for (size_t ti = 0; packed && ti < sizeof types / sizeof *types; ti++) {
      rlx_dtype t = types[ti];
      for (int M = 1; M <= 19; M += M == 1 ? 2 : 16) { /* 1, 3: the decode kernel; 19: dequantize + GEMM */
        rlx_graph *g = rlx_graph_new("dequant_matmul");
        int64_t xd[2] = {M, K};
        rlx_node x = rlx_input(g, "x", t, 2, xd), pw = rlx_param(g, "w", q, 2, wd);
        rlx_node y = rlx_dequant_matmul(g, x, pw);
        rlx_graph_set_outputs(g, 1, &y);
        bound_leaf l[2] = {{"x", 0, random_tensor(t, M * K, 1.0), (size_t)(M * K) * dtype_size(t)},
                           {"w", 1, packed, qbytes}};
        char what[96];
        snprintf(what, sizeof what, "dequant_matmul %s M=%d", rlx_dtype_name(q), M);
        /* M > 8 dequantizes w to BF16 (F32 x: x rounded to BF16 too, F32
         * accumulation and output) or to x's dtype for a tensor-core product
         * (as llama.cpp's cuBLAS path): the weights, x, and with BF16 x
         * cuBLASLt's partial sums (split-K, as PyTorch allows by default)
         * are rounded to 8 bits, each rounding up to 2^-9 of a partial of
         * about sqrt(K) |x||w| (x, w ~ 1: 0.044 at K = 512); four of those
         * bound what the H200 showed (0.11 to 0.17 where |y| is small) */
        double extra = M > 8 ? 4 * ldexp(1.0, -9) * sqrt((double)K) : 0.0;
        compare_tol(what, g, l, 2, t, extra);
        free(l[0].data);
        rlx_graph_free(g);
      }
    }
    free(packed);
    free(wf);
    rlx_graph_free(qg);
  }
}

/* DequantMatMul of 16-bit weights (GGUF F16/BF16 matrices read in place)
 * under x of their dtype or F32: at decode rows the GEMV widening w as it
 * streams, two products of one x joined in a launch and the residual add
 * in the second's epilogue; at 19 rows, or K not a multiple of 8, cuBLASLt
 * on w as given or widened into the scratch. Against the CPU; replay ==
 * op by op. */
static void test_dequant_matmul_16bit(void) {
  static const rlx_dtype wtypes[] = {RLX_F16, RLX_BF16};
  static const int64_t Ks[] = {4104, 100}, Ms[] = {1, 3, 19};
  for (size_t wi = 0; wi < 2; wi++)
    for (int same = 0; same < 2; same++)
      for (size_t ki = 0; ki < 2; ki++)
        for (size_t mi = 0; mi < 3; mi++) {
          const rlx_dtype wt = wtypes[wi], t = same ? wt : RLX_F32;
          const int64_t K = Ks[ki], M = Ms[mi], N[2] = {136, 72};
          rlx_graph *g = rlx_graph_new("dequant_matmul_16bit");
          int64_t xd[2] = {M, K}, rd[2] = {M, N[1]}, w0d[2] = {N[0], K}, w1d[2] = {N[1], K};
          rlx_node x = rlx_input(g, "x", t, 2, xd);
          rlx_node y[2] = {rlx_dequant_matmul(g, x, rlx_param(g, "w0", wt, 2, w0d)),
                           rlx_dequant_matmul(g, x, rlx_param(g, "w1", wt, 2, w1d))};
          y[1] = rlx_add(g, y[1], rlx_input(g, "r", t, 2, rd));
          rlx_graph_set_outputs(g, 2, y);
          bound_leaf l[4] = {{"x", 0, random_tensor(t, M * K, 1.0), (size_t)(M * K) * dtype_size(t)},
                             {"w0", 1, random_tensor(wt, N[0] * K, 0.1), (size_t)(N[0] * K) * dtype_size(wt)},
                             {"w1", 1, random_tensor(wt, N[1] * K, 0.1), (size_t)(N[1] * K) * dtype_size(wt)},
                             {"r", 0, random_tensor(t, M * N[1], 1.0), (size_t)(M * N[1]) * dtype_size(t)}};
          char what[96];
          snprintf(what, sizeof what, "dequant_matmul %s w, %s x, M=%lld K=%lld", rlx_dtype_name(wt),
                   rlx_dtype_name(t), (long long)M, (long long)K);
          /* 16-bit x at 19 rows: cuBLASLt's split-K partials rounded as in
           * test_dequant_matmul; F32 x under BF16 w there: x rounded to BF16 */
          const int rounded = M > 8 && wt == RLX_BF16;
          const double extra = rounded ? 4 * ldexp(1.0, -9) * sqrt((double)K) * 0.1 : 0.0;
          for (int o = 0; o < 2; o++) compare_replay(what, g, l, 4, o, t, extra);
          for (int i = 0; i < 4; i++) free(l[i].data);
          rlx_graph_free(g);
        }
}

/* Random weights [N, K] packed by the CPU's Quantize into scheme q (the
 * malloc'ed bytes, *bytes of them) and, in *dequant, those packed weights
 * as floats (the CPU's Dequantize). NULL on failure (checked). */
static void *packed_weights(rlx_dtype q, int64_t N, int64_t K, size_t *bytes, float **dequant) {
  int64_t wd[2] = {N, K};
  rlx_graph *qg = rlx_graph_new("quantize");
  rlx_node qw = rlx_quantize(qg, rlx_input(qg, "w", RLX_F32, 2, wd), q);
  rlx_node outs[2] = {qw, rlx_dequantize(qg, qw)};
  rlx_graph_set_outputs(qg, 2, outs);
  float *wf = random_tensor(RLX_F32, N * K, 1.0);
  bound_leaf wl = {"w", 0, wf, sizeof(float) * (size_t)(N * K)};
  size_t dbytes = 0;
  void *packed = run_graph(qg, RLX_DEVICE_CPU, &wl, 1, 0, bytes);
  *dequant = run_graph(qg, RLX_DEVICE_CPU, &wl, 1, 1, &dbytes);
  CHECK(packed && *dequant, "quantize and dequantize %s", rlx_dtype_name(q));
  free(wf);
  rlx_graph_free(qg);
  if (!packed || !*dequant) {
    free(packed), free(*dequant);
    *dequant = NULL;
    return NULL;
  }
  return packed;
}

/* x's levels as the integer decode path makes them (qdot_q8_0's rule:
 * per 32 elements d = amax / 127, levels roundf(x / d)), as doubles. */
static void quantize_levels(const double *x, double *xq, int64_t n) {
  for (int64_t b = 0; b < n; b += 32) {
    float amax = 0.f;
    for (int j = 0; j < 32; j++) amax = fabsf((float)x[b + j]) > amax ? fabsf((float)x[b + j]) : amax;
    const float d = amax / 127, id = d != 0.f ? 1.f / d : 0.f;
    for (int j = 0; j < 32; j++) {
      float v = (float)x[b + j] * id;
      v = v > 127.f ? 127.f : v < -127.f ? -127.f : v;
      xq[b + j] = (double)d * roundf(v);
    }
  }
}

/* Rows of a block table (a GGUF embedding) gathered on the device, then
 * dequantized: the same floats as the CPU's, exactly. */
static void test_block_gather(void) {
  static const rlx_dtype schemes[] = {RLX_Q8_0, RLX_Q4_K, RLX_Q6_K};
  const int64_t V = 40, E = 512;
  for (size_t si = 0; si < sizeof schemes / sizeof *schemes; si++) {
    size_t bytes = 0;
    float *dq = NULL;
    void *packed = packed_weights(schemes[si], V, E, &bytes, &dq);
    if (!packed) continue;
    rlx_graph *g = rlx_graph_new("block_gather");
    int64_t td[2] = {V, E}, id[1] = {5};
    rlx_node rows = rlx_gather(g, rlx_param(g, "table", schemes[si], 2, td), rlx_input(g, "idx", RLX_I32, 1, id), 0);
    rlx_node y = rlx_dequantize(g, rows);
    rlx_graph_set_outputs(g, 1, &y);
    int32_t idx[5] = {3, 39, 0, 3, 17};
    bound_leaf l[2] = {{"table", 1, packed, bytes}, {"idx", 0, idx, sizeof idx}};
    size_t cb = 0, gb = 0;
    void *cpu = run_graph(g, RLX_DEVICE_CPU, l, 2, 0, &cb), *gpu = run_graph(g, RLX_DEVICE_CUDA, l, 2, 0, &gb);
    CHECK(cpu && gpu && cb == gb && cb == 5 * E * sizeof(float) && !memcmp(cpu, gpu, cb),
          "gather of %s rows, dequantized: the CPU's floats", rlx_dtype_name(schemes[si]));
    rlx_session *sess = NULL;
    rlx_options o = {RLX_DEVICE_CUDA, 0, 0, 0, NULL};
    rlx_session_stats st = {0};
    CHECK(rlx_compile(g, &o, &sess) == RLX_OK && rlx_session_get_stats(sess, &st) == RLX_OK && st.fallback_nodes == 0,
          "gather of %s rows: on the device (%lld nodes on the CPU)", rlx_dtype_name(schemes[si]),
          (long long)st.fallback_nodes);
    rlx_session_free(sess);
    free(cpu), free(gpu), free(packed), free(dq);
    rlx_graph_free(g);
  }
}

/* The default small-M DequantMatMul (x quantized to 8 bits per 32, integer
 * dot products) against the product of the dequantized weights (the CPU's
 * Dequantize) with those 8-bit levels of x, in double: the same function,
 * so only the F32 sums and the output rounding differ. Two products of one
 * x (one launch of two segments), a residual add in the epilogue at odd
 * M. Ragged shapes: N
 * not a multiple of a block's 4 rows (M = 1) or 16 (the tensor-core
 * kernel from M = 3, Q6_K's from 2: its tiles across the segments'
 * seam), rows 2-byte
 * aligned (18, 34, 210-byte blocks), chunks of the weight stream cut
 * short, K split unevenly over the warps. And the
 * quantization's own error against the exact product stays inside its a
 * priori bound sum_k |w_k| d_k / 2 (so the levels are what they claim). */
static void test_dequant_matmul_int8(void) {
  static const rlx_dtype schemes[] = {RLX_Q4_0, RLX_Q4_1, RLX_Q8_0, RLX_Q4_K, RLX_Q6_K};
  static const rlx_dtype types[] = {RLX_F32, RLX_BF16, RLX_F16};
  static const int Ms[] = {1, 2, 3, 8};
  setenv("RLX_QMATMUL_REF", "0", 1);
  for (size_t si = 0; si < sizeof schemes / sizeof *schemes; si++) {
    const rlx_dtype q = schemes[si];
    const int64_t N = 37, K = q == RLX_Q4_K || q == RLX_Q6_K ? 256 * 9 : 32 * 67;
    int64_t wd[2] = {N, K};
    size_t qbytes = 0;
    float *wdq = NULL;
    void *packed = packed_weights(q, N, K, &qbytes, &wdq);
    for (size_t ti = 0; packed && wdq && ti < sizeof types / sizeof *types; ti++) {
      const rlx_dtype t = types[ti];
      for (size_t mi = 0; mi < sizeof Ms / sizeof *Ms; mi++) {
        const int M = Ms[mi];
        /* y = x w^T (+ r at odd M: the add is computed in the product's
         * epilogue), then x w2^T (w2: the same bytes, another param): the
         * second product joins the first's launch as a second segment */
        rlx_graph *g = rlx_graph_new("dequant_matmul_int8");
        int64_t xd[2] = {M, K}, yd[2] = {M, N};
        const int resid = M % 2;
        rlx_node xn = rlx_input(g, "x", t, 2, xd);
        rlx_node y = rlx_dequant_matmul(g, xn, rlx_param(g, "w", q, 2, wd));
        if (resid) y = rlx_add(g, y, rlx_input(g, "r", t, 2, yd));
        rlx_node outs2[2] = {y, rlx_dequant_matmul(g, xn, rlx_param(g, "w2", q, 2, wd))};
        rlx_graph_set_outputs(g, 2, outs2);
        void *xv = random_tensor(t, M * K, 1.0), *rv = random_tensor(t, M * N, 1.0);
        bound_leaf l[4] = {{"x", 0, xv, (size_t)(M * K) * dtype_size(t)},
                           {"w", 1, packed, qbytes},
                           {"w2", 1, packed, qbytes},
                           {"r", 0, rv, (size_t)(M * N) * dtype_size(t)}};
        size_t gb = 0, gb2 = 0;
        void *got = run_graph(g, RLX_DEVICE_CUDA, l, resid ? 4 : 3, 0, &gb);
        void *got2 = run_graph(g, RLX_DEVICE_CUDA, l, resid ? 4 : 3, 1, &gb2);
        CHECK(got && got2 && gb == (size_t)(M * N) * dtype_size(t) && gb2 == gb, "dequant_matmul int8 %s %s M=%d runs",
              rlx_dtype_name(q), rlx_dtype_name(t), M);
        double *x = malloc(sizeof(double) * (size_t)(M * K)), *xq = malloc(sizeof(double) * (size_t)(M * K));
        for (int64_t i = 0; i < M * K; i++) x[i] = rlx_value_as_f64(t, xv, i);
        quantize_levels(x, xq, M * K);
        double worst = 0, worst_q = 0;
        for (int m = 0; got && got2 && m < M; m++)
          for (int64_t nn = 0; nn < N; nn++) {
            double ref = 0, mag = 0, exact = 0, bound = 0;
            for (int64_t k = 0; k < K; k++) {
              const double wk = wdq[nn * K + k];
              ref += wk * xq[m * K + k], mag += fabs(wk * xq[m * K + k]), exact += wk * x[m * K + k];
            }
            for (int64_t b = 0; b < K; b += 32) {
              double amax = 0, sw = 0;
              for (int j = 0; j < 32; j++) {
                amax = fabs(x[m * K + b + j]) > amax ? fabs(x[m * K + b + j]) : amax;
                sw += fabs(wdq[nn * K + b + j]);
              }
              bound += sw * amax / 127 / 2;
            }
            /* F32 sums of K terms, then one rounding to t */
            const double rr = resid ? rlx_value_as_f64(t, rv, m * N + nn) : 0.0;
            const double ulp = t == RLX_F32 ? 1e-6 : t == RLX_F16 ? ldexp(1.0, -11) : ldexp(1.0, -8);
            for (int o = 0; got && got2 && o < 2; o++) {
              const double g = rlx_value_as_f64(t, o ? got2 : got, m * N + nn), want = ref + (o ? 0.0 : rr);
              const double tol = 1e-5 * mag + ulp * (fabs(want) + fabs(ref)) + 1e-6;
              const double r = fabs(g - want) / tol;
              worst = isnan(g) || r > worst ? (isnan(g) ? INFINITY : r) : worst;
            }
            const double rq = fabs(ref - exact) / (bound * (1 + 1e-6) + 1e-12);
            worst_q = rq > worst_q ? rq : worst_q;
          }
        CHECK(worst <= 1.0, "dequant_matmul int8 %s %s M=%d: worst error %.3g of tolerance", rlx_dtype_name(q),
              rlx_dtype_name(t), M, worst);
        CHECK(worst_q <= 1.0, "dequant_matmul int8 %s %s M=%d: quantization error %.3g of its bound", rlx_dtype_name(q),
              rlx_dtype_name(t), M, worst_q);
        free(x), free(xq), free(got), free(got2), free(xv), free(rv);
        rlx_graph_free(g);
      }
    }
    free(packed), free(wdq);
  }
  setenv("RLX_QMATMUL_REF", "1", 1);
}

/* The worst error of got [M, N] (t) against the exact products of hx
 * [M, K] (double) by wdq [N, K], over the a-priori bound of the integer
 * path: x's 8-bit levels (sum |w| amax / 127 / 2 per 32) plus hx's
 * rounding to t (2 ulp of t per element) and the output's. */
static double levels_worst(const double *hx, const float *wdq, const void *got, rlx_dtype t, int M, int64_t N,
                           int64_t K, double ulp) {
  double worst = got ? 0 : INFINITY;
  for (int m = 0; got && m < M; m++)
    for (int64_t nn = 0; nn < N; nn++) {
      double y = 0, bound = 0;
      for (int64_t b = 0; b < K; b += 32) {
        double amax = 0;
        for (int j = 0; j < 32; j++) amax = fabs(hx[m * K + b + j]) > amax ? fabs(hx[m * K + b + j]) : amax;
        for (int j = 0; j < 32; j++) {
          const double w = wdq[nn * K + b + j], hv = hx[m * K + b + j];
          y += w * hv;
          bound += fabs(w) * ((amax * (1 + 2 * ulp)) / 127 / 2 + 2 * ulp * fabs(hv));
        }
      }
      const double gy = rlx_value_as_f64(t, got, m * N + nn);
      const double r = fabs(gy - y) / (bound * 1.01 + ulp * fabs(y) + 1e-6);
      worst = isnan(gy) || r > worst ? (isnan(gy) ? INFINITY : r) : worst;
    }
  return worst;
}

/* An RmsNorm read only by two DequantMatMuls at decode rows: the products'
 * x quantization normalizes the rows itself (no norm launch), or, with a
 * zero constant beta (the LLM graphs'), quantizes x * gamma and leaves
 * the rows' factor to the products. Against the exact products
 * of the exact norm in double, within the a-priori bound: 8-bit levels
 * (sum |w| d / 2 per 32) plus the norm's rounding to t (2 ulp of t per
 * element, F32 sums in another order) and the output's. Q4_K and Q4_0
 * take the direct kernels at M = 1, Q6_K the ring kernel, M = 3 the
 * tensor-core kernel. */
static void norm_dequant_matmul_k(rlx_dtype q, int64_t K) {
  static const rlx_dtype types[] = {RLX_F32, RLX_BF16};
  const int64_t N = 45;
  int64_t wd[2] = {N, K}, ev[1] = {K};
  size_t qbytes = 0;
  float *wdq = NULL;
  void *packed = packed_weights(q, N, K, &qbytes, &wdq);
  setenv("RLX_QMATMUL_REF", "0", 1);
  for (size_t ti = 0; packed && wdq && ti < sizeof types / sizeof *types; ti++)
    for (int zero_beta = 0; zero_beta < 2; zero_beta++)
    for (int M = 1; M <= 3; M += 2) {
      const rlx_dtype t = types[ti];
      const double eps = 1e-5, ulp = t == RLX_F32 ? ldexp(1.0, -23) : ldexp(1.0, -8);
      rlx_graph *g = rlx_graph_new("norm_dequant_matmul");
      int64_t xd[2] = {M, K};
      void *zeros = calloc((size_t)K, dtype_size(t));
      rlx_node beta = zero_beta ? rlx_constant(g, t, 1, ev, zeros) : rlx_param(g, "beta", t, 1, ev);
      free(zeros);
      rlx_node h = rlx_rms_norm(g, rlx_input(g, "x", t, 2, xd), rlx_param(g, "gamma", t, 1, ev), beta, -1, eps);
      rlx_node ys[2] = {rlx_dequant_matmul(g, h, rlx_param(g, "w", q, 2, wd)),
                        rlx_dequant_matmul(g, h, rlx_param(g, "w2", q, 2, wd))};
      rlx_graph_set_outputs(g, 2, ys);
      void *xv = random_tensor(t, M * K, 1.0), *gv = random_tensor(t, K, 1.0), *bv = random_tensor(t, K, 0.1);
      if (zero_beta) memset(bv, 0, (size_t)K * dtype_size(t));
      bound_leaf l[5] = {{"x", 0, xv, (size_t)(M * K) * dtype_size(t)}, {"gamma", 1, gv, (size_t)K * dtype_size(t)},
                         {"w", 1, packed, qbytes}, {"w2", 1, packed, qbytes}, {"beta", 1, bv, (size_t)K * dtype_size(t)}};
      double *hx = malloc(sizeof(double) * (size_t)(M * K));
      for (int m = 0; m < M; m++) {
        double ss = 0;
        for (int64_t k = 0; k < K; k++) ss += rlx_value_as_f64(t, xv, m * K + k) * rlx_value_as_f64(t, xv, m * K + k);
        const double r = 1 / sqrt(ss / K + eps);
        for (int64_t k = 0; k < K; k++)
          hx[m * K + k] = rlx_value_as_f64(t, xv, m * K + k) * r * rlx_value_as_f64(t, gv, k) + rlx_value_as_f64(t, bv, k);
      }
      for (int o = 0; o < 2; o++) {
        size_t gb = 0;
        void *got = run_graph(g, RLX_DEVICE_CUDA, l, zero_beta ? 4 : 5, o, &gb);
        const double worst = levels_worst(hx, wdq, got, t, M, N, K, ulp);
        CHECK(worst <= 1.0, "rms_norm -> dequant_matmul %s %s K=%lld M=%d%s output %d: worst error %.3g of the bound",
              rlx_dtype_name(q), rlx_dtype_name(t), (long long)K, M, zero_beta ? " zero beta" : "", o, worst);
        free(got);
      }
      free(hx), free(xv), free(gv), free(bv);
      rlx_graph_free(g);
    }
  setenv("RLX_QMATMUL_REF", "1", 1);
  free(packed), free(wdq);
}

/* K 8448: a row of three chunks of the kernel's 1024 x 4 elements, the last one partial */
static void test_dequant_matmul_norm(void) {
  norm_dequant_matmul_k(RLX_Q4_K, 512);
  norm_dequant_matmul_k(RLX_Q4_K, 8448);
  norm_dequant_matmul_k(RLX_Q4_0, 8448);
  norm_dequant_matmul_k(RLX_Q6_K, 512);
}

/* A SwiGLU of decode rows read only by a DequantMatMul: the product's x
 * quantization computes silu(gate) * up itself (no SwiGLU launch), as
 * FusedSwiGLU over x [M, 2K] (form 0) and as silu(gate) * up of two inputs
 * (form 1, an ElementwiseRegion after the passes). Against the exact
 * product of the exact SwiGLU in double within levels_worst's bound, with
 * RLX_TRACE counting the fusion and a launch fewer than with the backend's
 * fusions off. */
static void test_swiglu_dequant_matmul(void) {
  static const rlx_dtype types[] = {RLX_F32, RLX_BF16};
  const rlx_dtype q = RLX_Q8_0;
  const int64_t N = 45, K = 512;
  int64_t wd[2] = {N, K};
  size_t qbytes = 0;
  float *wdq = NULL;
  void *packed = packed_weights(q, N, K, &qbytes, &wdq);
  setenv("RLX_QMATMUL_REF", "0", 1);
  for (size_t ti = 0; packed && wdq && ti < sizeof types / sizeof *types; ti++)
    for (int form = 0; form < 2; form++)
      for (int M = 1; M <= 3; M += 2) {
        const rlx_dtype t = types[ti];
        const double ulp = t == RLX_F32 ? ldexp(1.0, -23) : ldexp(1.0, -8);
        const size_t es = dtype_size(t), row = (size_t)K * es;
        rlx_graph *g = rlx_graph_new("swiglu_dequant_matmul");
        int64_t xd[2] = {M, 2 * K}, hd[2] = {M, K};
        rlx_node h;
        if (form == 0) h = rlx_fused_swiglu(g, rlx_input(g, "x", t, 2, xd), -1);
        else h = rlx_mul(g, rlx_activation(g, RLX_ACT_SILU, rlx_input(g, "gate", t, 2, hd)), rlx_input(g, "up", t, 2, hd));
        rlx_node y = rlx_dequant_matmul(g, h, rlx_param(g, "w", q, 2, wd));
        rlx_graph_set_outputs(g, 1, &y);
        uint8_t *gv = random_tensor(t, M * K, 2.0), *uv = random_tensor(t, M * K, 1.0), *xv = malloc(2 * M * row);
        for (int m = 0; xv && m < M; m++) {
          memcpy(xv + 2 * m * row, gv + m * row, row);
          memcpy(xv + (2 * m + 1) * row, uv + m * row, row);
        }
        bound_leaf l[3] = {{"w", 1, packed, qbytes}, {"x", 0, xv, 2 * M * row}, {"gate", 0, gv, M * row}};
        if (form == 1) l[1] = (bound_leaf){"up", 0, uv, M * row};
        double *hx = malloc(sizeof(double) * (size_t)(M * K));
        for (int64_t e = 0; hx && e < M * K; e++) {
          const double gx = rlx_value_as_f64(t, gv, e);
          hx[e] = gx / (1 + exp(-gx)) * rlx_value_as_f64(t, uv, e);
        }
        char what[64];
        snprintf(what, sizeof what, "swiglu (form %d) -> dequant_matmul %s M=%d", form, rlx_dtype_name(t), M);
        size_t gb = 0;
        void *got = hx && xv ? run_graph(g, RLX_DEVICE_CUDA, l, form ? 3 : 2, 0, &gb) : NULL;
        const double worst = levels_worst(hx, wdq, got, t, M, N, K, ulp);
        CHECK(worst <= 1.0, "%s: worst error %.3g of the bound", what, worst);
        const char *trace = strstr(cuda_compile_trace(g), " swiglu_quant ");
        const int64_t fused = device_launches(g), apart = unfused_launches(g);
        CHECK(trace && atoi(trace + 14) == 1 && fused > 0 && apart == fused + 1,
              "%s: swiglu_quant taken once (%.16s), %lld launches (fusions off: %lld)", what, trace ? trace : "no count",
              (long long)fused, (long long)apart);
        free(got), free(hx), free(gv), free(uv), free(xv);
        rlx_graph_free(g);
      }
  setenv("RLX_QMATMUL_REF", "1", 1);
  free(packed), free(wdq);
}

/* A decode step's q, k and v products of one x on the integer path, with
 * q's and k's Ropes and the K and V rows written into their caches
 * (through a Cast for an F16 cache, directly for an F32 one), as the LLM
 * graphs build them: the products' launch applies the Ropes and writes the
 * cache rows itself, so that a step launches x's quantization and the
 * products only (v of Q6_K on the ring kernel in its own launch). Ropes by
 * tables (pairs (2i, 2i+1)) and by positions (NEOX, with and without a
 * pass-through). Against the CPU within the 8-bit levels' bound (x is
 * quantized per 32 here, per 256 for the CPU's K-quants), against the same
 * graph with the backend's fusions off (one launch a node) within the
 * output's tolerance, replay == op by op; a start past the cache is the
 * UpdateSlice's error. */
static void test_qmv_rope_cache(void) {
  static const struct { rlx_dtype qk, v; } schemes[] = {
      {RLX_Q4_0, RLX_Q4_0}, {RLX_Q8_0, RLX_Q8_0}, {RLX_Q4_K, RLX_Q4_K}, {RLX_Q4_K, RLX_Q6_K}};
  const int64_t K = 512, D = 64, H = 4, Hkv = 2, T = 24, qd = H * D, kvd = Hkv * D;
  setenv("RLX_QMATMUL_REF", "0", 1);
  for (size_t si = 0; si < sizeof schemes / sizeof *schemes; si++)
    for (int form = 0; form < 3; form++) /* tables; positions NEOX; positions NEOX with a pass-through */
      for (int f16 = 0; f16 < 2; f16++) {
        const rlx_dtype ct = f16 ? RLX_F16 : RLX_F32;
        const int bad = si == 0 && form == 0 && f16; /* a start past the cache */
        size_t qb = 0, kb = 0, vb = 0;
        float *qdq = NULL, *kdq = NULL, *vdq = NULL;
        void *wq = packed_weights(schemes[si].qk, qd, K, &qb, &qdq), *wk = packed_weights(schemes[si].qk, kvd, K, &kb, &kdq);
        void *wv = packed_weights(schemes[si].v, kvd, K, &vb, &vdq);
        rlx_rope_desc d = {D, form == 2 ? 48 : D, form ? RLX_ROPE_NEOX : RLX_ROPE_NORMAL, 10000.0, 1.0};
        const int64_t half = d.n_rot / 2;
        rlx_graph *g = rlx_graph_new("qmv_rope_cache");
        int64_t xd[3] = {1, 1, K}, td[2] = {1, half}, cd[3] = {1, T, kvd}, one[1] = {1}, wdq[2] = {qd, K}, wdk[2] = {kvd, K};
        rlx_node x = rlx_input(g, "x", RLX_F32, 3, xd), start = rlx_input(g, "start", RLX_I32, 0, NULL);
        rlx_node q = rlx_dequant_matmul(g, x, rlx_param(g, "wq", schemes[si].qk, 2, wdq));
        rlx_node k = rlx_dequant_matmul(g, x, rlx_param(g, "wk", schemes[si].qk, 2, wdk));
        rlx_node v = rlx_dequant_matmul(g, x, rlx_param(g, "wv", schemes[si].v, 2, wdk));
        if (form == 0) {
          rlx_node c = rlx_input(g, "cos", RLX_F32, 2, td), sn = rlx_input(g, "sin", RLX_F32, 2, td);
          q = rlx_rope_cos_sin(g, q, c, sn, &d), k = rlx_rope_cos_sin(g, k, c, sn, &d);
        } else {
          rlx_node pos = rlx_input(g, "pos", RLX_I32, 1, one);
          q = rlx_rope(g, q, pos, &d), k = rlx_rope(g, k, pos, &d);
        }
        rlx_node kc = rlx_param(g, "kc", ct, 3, cd), vc = rlx_param(g, "vc", ct, 3, cd);
        rlx_node uk = rlx_update_slice(g, kc, f16 ? rlx_cast(g, k, ct) : k, start, 1);
        rlx_node uv = rlx_update_slice(g, vc, f16 ? rlx_cast(g, v, ct) : v, start, 1);
        rlx_node outs[5] = {q, uk, uv, rlx_assign(g, kc, uk), rlx_assign(g, vc, uv)};
        rlx_graph_set_outputs(g, 5, outs);
        float *tab = malloc(sizeof(float) * (size_t)(2 * half));
        int32_t s0 = bad ? (int32_t)T : 17, p0 = 1000 + 7 * (int32_t)si;
        for (int64_t j = 0; j < half; j++) {
          const double th = (double)p0 * pow(10000.0, -2.0 * (double)j / (double)d.n_rot);
          tab[j] = (float)cos(th), tab[half + j] = (float)sin(th);
        }
        float *xv = random_tensor(RLX_F32, K, 1.0);
        bound_leaf l[9] = {{"x", 0, xv, sizeof(float) * (size_t)K},
                           {"start", 0, &s0, sizeof s0},
                           {"wq", 1, wq, qb},
                           {"wk", 1, wk, kb},
                           {"wv", 1, wv, vb},
                           {"kc", 1, random_tensor(ct, T * kvd, 1.0), (size_t)(T * kvd) * dtype_size(ct)},
                           {"vc", 1, random_tensor(ct, T * kvd, 1.0), (size_t)(T * kvd) * dtype_size(ct)},
                           {"cos", 0, tab, sizeof(float) * (size_t)half},
                           {"sin", 0, tab + half, sizeof(float) * (size_t)half}};
        if (form) l[7] = (bound_leaf){"pos", 0, &p0, sizeof p0};
        const int nl = form ? 8 : 9;
        char what[112];
        snprintf(what, sizeof what, "qmv rope cache %s|%s, %s, %s cache", rlx_dtype_name(schemes[si].qk),
                 rlx_dtype_name(schemes[si].v), form == 0 ? "tables" : form == 1 ? "positions neox" : "positions neox n_rot 48",
                 rlx_dtype_name(ct));
        if (bad) {
          size_t gb = 0;
          void *gpu = run_graph(g, RLX_DEVICE_CUDA, l, nl, 1, &gb);
          char want[64];
          snprintf(want, sizeof want, "): start %d out of range", (int)T);
          CHECK(!gpu && strstr(rlx_last_error(), "UpdateSlice (node") && strstr(rlx_last_error(), want),
                "%s: fails naming the update: %s", what, rlx_last_error());
          free(gpu);
        } else {
          /* |error| of a product from the levels of x: each 32 (the CPU's
           * K-quants: 256) elements within d / 2 = amax / 254 of x, times
           * |w| summed; a rotated value mixes two products */
          double worst = 0, *half_level = calloc((size_t)(K / 256), sizeof(double)); /* amax / 254 of each 256 of x */
          for (int64_t kk = 0; half_level && kk < K; kk++) half_level[kk / 256] = fmax(half_level[kk / 256], fabs(xv[kk]) / 254);
          const float *dq[3] = {qdq, kdq, vdq};
          const int64_t rows[3] = {qd, kvd, kvd};
          for (int p = 0; p < 3 && qdq && kdq && vdq && half_level; p++)
            for (int64_t r = 0; r < rows[p]; r++) {
              double e = 0;
              for (int64_t kk = 0; kk < K; kk++) e += fabs(dq[p][r * K + kk]) * half_level[kk / 256];
              worst = fmax(worst, 2 * e);
            }
          free(half_level);
          for (int o = 0; o < 3; o++) compare_replay(what, g, l, nl, o, o ? ct : RLX_F32, 2 * worst);
          for (int o = 0; o < 3; o++) compare_unfused(what, g, l, nl, o, o ? ct : RLX_F32);
          const int64_t fused = device_launches(g), apart = unfused_launches(g);
          const int64_t want = schemes[si].v == schemes[si].qk ? 2 : 3;
          CHECK(fused == want && apart > fused + 3, "%s: %lld launches (fusions off: %lld)", what, (long long)fused,
                (long long)apart);
        }
        free(xv), free(tab), free(l[5].data), free(l[6].data);
        free(wq), free(wk), free(wv), free(qdq), free(kdq), free(vdq);
        rlx_graph_free(g);
      }
  setenv("RLX_QMATMUL_REF", "1", 1);
}

int main(void) {
  if (!cuda_backend_test_begin()) return CUDA_SKIP;
  test_dequant_matmul();
  test_dequant_matmul_16bit();
  test_block_gather();
  test_dequant_matmul_int8();
  test_dequant_matmul_norm();
  test_swiglu_dequant_matmul();
  test_qmv_rope_cache();
  return check_report();
}
