/* test_cuda_gemm.c — the CUDA backend's matrix products against the CPU
 * backend on random data: cuBLASLt products (strided and broadcast
 * batches), the GEMV kernels of decode rows (both weight layouts, a split
 * along K, epilogues, segments of one x), and the fusions into a GEMV
 * launch (the GLU, the rope, the RmsNorm) against the same graph with the
 * backend's fusions off (RLX_CUDA_FUSE=0). Skips (exit 77) without a CUDA
 * device. */
#include "cuda_backend_test.h"

static void test_matmul(void) {
  static const rlx_dtype types[] = {RLX_BF16, RLX_F16, RLX_F32, RLX_F64};
  for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
    rlx_dtype t = types[ti];
    /* [2,3,M,K] @ [3,K,N]: a strided batch with a broadcast b */
    {
      rlx_graph *g = rlx_graph_new("batched");
      int64_t ad[4] = {2, 3, 37, 72}, bd[3] = {3, 72, 41};
      rlx_node a = rlx_input(g, "a", t, 4, ad), b = rlx_input(g, "b", t, 3, bd);
      rlx_node y = rlx_matmul(g, a, b);
      rlx_graph_set_outputs(g, 1, &y);
      bound_leaf l[2] = {{"a", 0, random_tensor(t, 2 * 3 * 37 * 72, 1.0), 2 * 3 * 37 * 72 * dtype_size(t)},
                         {"b", 0, random_tensor(t, 3 * 72 * 41, 0.2), 3 * 72 * 41 * dtype_size(t)}};
      compare("matmul batched broadcast", g, l, 2, t);
      free(l[0].data), free(l[1].data);
      rlx_graph_free(g);
    }
    /* [2,1,M,K] @ [1,3,K,N]: broadcasting no single stride expresses */
    {
      rlx_graph *g = rlx_graph_new("crossed");
      int64_t ad[4] = {2, 1, 9, 24}, bd[4] = {1, 3, 24, 10};
      rlx_node a = rlx_input(g, "a", t, 4, ad), b = rlx_input(g, "b", t, 4, bd);
      rlx_node y = rlx_matmul(g, a, b);
      rlx_graph_set_outputs(g, 1, &y);
      bound_leaf l[2] = {{"a", 0, random_tensor(t, 2 * 9 * 24, 1.0), 2 * 9 * 24 * dtype_size(t)},
                         {"b", 0, random_tensor(t, 3 * 24 * 10, 0.3), 3 * 24 * 10 * dtype_size(t)}};
      compare("matmul crossed broadcast", g, l, 2, t);
      free(l[0].data), free(l[1].data);
      rlx_graph_free(g);
    }
    /* x @ transpose(W) + bias with gelu_tanh and silu epilogues (W [N, K] param, read as op T) */
    for (int act = 0; act < 2; act++) {
      rlx_graph *g = rlx_graph_new("linear");
      int64_t xd[3] = {3, 50, 96}, wd[2] = {136, 96}, bd[1] = {136};
      int64_t perm[2] = {1, 0};
      rlx_node x = rlx_input(g, "x", t, 3, xd), w = rlx_param(g, "w", t, 2, wd), b = rlx_param(g, "b", t, 1, bd);
      rlx_node y = rlx_fused_matmul_bias_act(g, x, rlx_transpose(g, w, 2, perm), b,
                                             act ? RLX_ACT_SILU : RLX_ACT_GELU_TANH, 0);
      rlx_graph_set_outputs(g, 1, &y);
      bound_leaf l[3] = {{"x", 0, random_tensor(t, 3 * 50 * 96, 1.0), 3 * 50 * 96 * dtype_size(t)},
                         {"w", 1, random_tensor(t, 136 * 96, 0.1), 136 * 96 * dtype_size(t)},
                         {"b", 1, random_tensor(t, 136, 1.0), 136 * dtype_size(t)}};
      compare(act ? "linear silu (transposed weight)" : "linear gelu_tanh (transposed weight)", g, l, 3, t);
      for (int i = 0; i < 3; i++) free(l[i].data);
      rlx_graph_free(g);
    }
  }
}

/* Products of few rows (the GEMV kernels): both weight layouts, a split
 * along K, bias + activation epilogues; every run of a session gives the
 * same bytes (the split's counters are left ready for the next run). */
static void test_gemv(void) {
  static const rlx_dtype types[] = {RLX_BF16, RLX_F16, RLX_F32};
  static const struct { int M, N, K, trans, act; } cases[] = {
      {1, 136, 520, 0, -1}, {3, 72, 1000, 0, -1}, {8, 2048, 64, 0, -1}, {1, 77, 264, 1, -1},
      {5, 40, 1024, 1, -1}, {1, 96, 776, 0, RLX_ACT_SILU}, {4, 33, 136, 1, RLX_ACT_GELU_TANH}};
  for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
    rlx_dtype t = types[ti];
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
      const int M = cases[c].M, N = cases[c].N, K = cases[c].K;
      rlx_graph *g = rlx_graph_new("gemv");
      int64_t xd[2] = {M, K}, wd[2] = {cases[c].trans ? N : K, cases[c].trans ? K : N}, bd[1] = {N}, perm[2] = {1, 0};
      rlx_node x = rlx_input(g, "x", t, 2, xd), w = rlx_param(g, "w", t, 2, wd);
      if (cases[c].trans) w = rlx_transpose(g, w, 2, perm);
      rlx_node y = cases[c].act < 0 ? rlx_matmul(g, x, w)
                                    : rlx_fused_matmul_bias_act(g, x, w, rlx_param(g, "b", t, 1, bd),
                                                                (rlx_act)cases[c].act, 0);
      rlx_graph_set_outputs(g, 1, &y);
      bound_leaf l[3] = {{"x", 0, random_tensor(t, (int64_t)M * K, 1.0), (size_t)M * K * dtype_size(t)},
                         {"w", 1, random_tensor(t, (int64_t)N * K, 0.1), (size_t)N * K * dtype_size(t)},
                         {"b", 1, random_tensor(t, N, 1.0), (size_t)N * dtype_size(t)}};
      const int nl = cases[c].act < 0 ? 2 : 3;
      char what[96];
      snprintf(what, sizeof what, "gemv M=%d N=%d K=%d%s%s", M, N, K, cases[c].trans ? " (w^T)" : "",
               cases[c].act < 0 ? "" : " + bias act");
      compare(what, g, l, nl, t);
      /* runs of one session, and the op-by-op launches: the same bytes */
      rlx_options cu = {RLX_DEVICE_CUDA, 0, 0, 0, NULL};
      rlx_session *s = NULL;
      size_t ob = (size_t)M * N * dtype_size(t);
      void *r1 = malloc(ob), *r2 = malloc(ob);
      int ok = rlx_compile(g, &cu, &s) == RLX_OK;
      for (int i = 0; ok && i < nl; i++)
        ok = (l[i].param ? rlx_set_param(s, l[i].name, l[i].data, l[i].nbytes)
                         : rlx_set_input(s, l[i].name, l[i].data, l[i].nbytes)) == RLX_OK;
      ok = ok && rlx_run(s) == RLX_OK && rlx_output(s, 0, r1, ob) == RLX_OK && rlx_run(s) == RLX_OK &&
           rlx_output(s, 0, r2, ob) == RLX_OK;
      CHECK(ok && !memcmp(r1, r2, ob), "%s (%s): two runs of a session give the same bytes (%s)", what,
            rlx_dtype_name(t), ok ? "" : rlx_last_error());
      rlx_session_free(s);
      setenv("RLX_CUDA_GRAPH", "0", 1);
      size_t eb = 0;
      void *eager = run_graph(g, RLX_DEVICE_CUDA, l, nl, 0, &eb);
      unsetenv("RLX_CUDA_GRAPH");
      CHECK(eager && eb == ob && !memcmp(eager, r1, ob), "%s (%s): graph replay == op by op", what, rlx_dtype_name(t));
      free(eager), free(r1), free(r2);
      for (int i = 0; i < 3; i++) free(l[i].data);
      rlx_graph_free(g);
    }
  }
}

/* Three products of one x at decode sizes: the first two share a launch
 * (segments), the third absorbs the residual add after it (epilogue), on
 * both weight layouts, against the CPU; replay == op by op. */
static void test_gemv_segments(void) {
  static const rlx_dtype types[] = {RLX_BF16, RLX_F32};
  for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++)
    for (int trans = 0; trans < 2; trans++)
      for (int M = 1; M <= 3; M += 2) {
        const rlx_dtype t = types[ti];
        const int K = 2056, N[3] = {136, 72, 200};
        rlx_graph *g = rlx_graph_new("gemv_segments");
        int64_t xd[2] = {M, K}, rd[2] = {M, N[2]}, perm[2] = {1, 0};
        rlx_node x = rlx_input(g, "x", t, 2, xd), y[3];
        static const char *names[3] = {"w0", "w1", "w2"};
        for (int i = 0; i < 3; i++) {
          int64_t wd[2] = {trans ? N[i] : K, trans ? K : N[i]};
          rlx_node w = rlx_param(g, names[i], t, 2, wd);
          y[i] = rlx_matmul(g, x, trans ? rlx_transpose(g, w, 2, perm) : w);
        }
        y[2] = rlx_add(g, y[2], rlx_input(g, "r", t, 2, rd));
        rlx_graph_set_outputs(g, 3, y);
        bound_leaf l[5] = {{"x", 0, random_tensor(t, (int64_t)M * K, 1.0), (size_t)M * K * dtype_size(t)},
                           {"w0", 1, random_tensor(t, (int64_t)N[0] * K, 0.1), (size_t)N[0] * K * dtype_size(t)},
                           {"w1", 1, random_tensor(t, (int64_t)N[1] * K, 0.1), (size_t)N[1] * K * dtype_size(t)},
                           {"w2", 1, random_tensor(t, (int64_t)N[2] * K, 0.1), (size_t)N[2] * K * dtype_size(t)},
                           {"r", 0, random_tensor(t, (int64_t)M * N[2], 1.0), (size_t)M * N[2] * dtype_size(t)}};
        char what[96];
        snprintf(what, sizeof what, "gemv segments %s M=%d%s", rlx_dtype_name(t), M, trans ? " (w^T)" : "");
        for (int o = 0; o < 3; o++) compare_replay(what, g, l, 5, o, t, 0.0);
        for (int i = 0; i < 5; i++) free(l[i].data);
        rlx_graph_free(g);
      }
}

/* silu(x @ wg) * (x @ wu) at decode rows (an MLP's gate and up
 * projections): one GEMV launch writes the region (glu) — against the CPU,
 * replay == op by op, the two products and the region launched apart
 * (RLX_CUDA_FUSE=0: three launches). Weights as a 16-bit GGUF's
 * (DequantMatMul, F32 or 16-bit x) and as F32 params read transposed
 * (MatMul). With the up projection also an output, the glu is not taken
 * (the two products share a launch, the region has its own) and the
 * outputs still agree. */
static void test_glu_gemv(void) {
  static const struct { rlx_dtype w, x; } kinds[] = {{RLX_BF16, RLX_F32}, {RLX_F16, RLX_F16}, {RLX_F32, RLX_F32}};
  for (size_t ki = 0; ki < sizeof kinds / sizeof *kinds; ki++)
    for (int M = 1; M <= 3; M += 2)
      for (int up_out = 0; up_out < 2; up_out++) {
        const rlx_dtype wt = kinds[ki].w, t = kinds[ki].x;
        const int64_t K = 2056, N = 136;
        rlx_graph *g = rlx_graph_new("glu_gemv");
        int64_t xd[2] = {M, K}, wd[2] = {N, K}, perm[2] = {1, 0};
        rlx_node x = rlx_input(g, "x", t, 2, xd), p[2];
        static const char *names[2] = {"wg", "wu"};
        for (int i = 0; i < 2; i++) {
          rlx_node w = rlx_param(g, names[i], wt, 2, wd);
          p[i] = wt == RLX_F32 ? rlx_matmul(g, x, rlx_transpose(g, w, 2, perm)) : rlx_dequant_matmul(g, x, w);
        }
        rlx_node y[2] = {rlx_mul(g, rlx_activation(g, RLX_ACT_SILU, p[0]), p[1]), p[1]};
        rlx_graph_set_outputs(g, 1 + up_out, y);
        bound_leaf l[3] = {{"x", 0, random_tensor(t, M * K, 1.0), (size_t)(M * K) * dtype_size(t)},
                           {"wg", 1, random_tensor(wt, N * K, 0.1), (size_t)(N * K) * dtype_size(wt)},
                           {"wu", 1, random_tensor(wt, N * K, 0.1), (size_t)(N * K) * dtype_size(wt)}};
        char what[96];
        snprintf(what, sizeof what, "glu gemv %s w, %s x, M=%d%s", rlx_dtype_name(wt), rlx_dtype_name(t), M,
                 up_out ? " (up an output)" : "");
        for (int o = 0; o <= up_out; o++) compare_replay(what, g, l, 3, o, t, 0.0);
        for (int o = 0; o <= up_out; o++) compare_unfused(what, g, l, 3, o, t);
        const int64_t fused = device_launches(g), apart = unfused_launches(g);
        CHECK(fused == (up_out ? 2 : 1) && apart == 3, "%s: %lld launches (apart: %lld)", what, (long long)fused,
              (long long)apart);
        for (int i = 0; i < 3; i++) free(l[i].data);
        rlx_graph_free(g);
      }
}

/* Rope by tables (or by positions) of q and k where each is a product at
 * decode rows (q, k and v of one x, a layer's projections): the products'
 * GEMV launch writes q and k rotated, and the ropes launch nothing.
 * Against the CPU, replay == op by op, and against the products and ropes
 * launched apart (RLX_CUDA_FUSE=0: five launches), one launch in all.
 * Pairs (2i, 2i+1), NEOX pairs and a pass-through (n_rot < D); weights as
 * a 16-bit GGUF's (DequantMatMul) or F32 params read transposed (MatMul);
 * B 1 and 2 (batched tables or positions). With k's product also an
 * output, k's rope launches. */
static void test_gemv_rope(void) {
  static const struct { rlx_dtype w, x; } kinds[] = {{RLX_BF16, RLX_F32}, {RLX_F16, RLX_F16}, {RLX_F32, RLX_F32}};
  for (size_t ki = 0; ki < sizeof kinds / sizeof *kinds; ki++)
    for (int form = 0; form < 4; form++) /* normal, NEOX, normal with a pass-through; NEOX by positions */
      for (int shape = 0; shape < 3; shape++) /* B 1 S 1; B 1 S 3; B 2 S 3 (batched tables) */
        for (int k_out = 0; k_out < 2; k_out++) {
          const rlx_dtype wt = kinds[ki].w, t = kinds[ki].x;
          const int64_t B = shape == 2 ? 2 : 1, S = shape ? 3 : 1, K = 264, D = 64, H[3] = {4, 2, 2};
          rlx_rope_desc d = {D, form == 2 ? 48 : D, form % 2 ? RLX_ROPE_NEOX : RLX_ROPE_NORMAL, 10000.0, 1.0};
          const int64_t half = d.n_rot / 2, rows = (shape == 2 ? B : 1) * S;
          rlx_graph *g = rlx_graph_new("gemv_rope");
          int64_t xd[3] = {B, S, K}, td[3] = {B, S, half}, perm[2] = {1, 0};
          rlx_node x = rlx_input(g, "x", t, 3, xd), p[3];
          int64_t pd[2] = {B, S};
          rlx_node c = -1, sn = -1, pos = -1;
          if (form == 3) {
            pos = rlx_input(g, "pos", RLX_I32, shape == 2 ? 2 : 1, shape == 2 ? pd : pd + 1);
          } else {
            c = rlx_input(g, "cos", t, shape == 2 ? 3 : 2, shape == 2 ? td : td + 1);
            sn = rlx_input(g, "sin", t, shape == 2 ? 3 : 2, shape == 2 ? td : td + 1);
          }
          static const char *names[3] = {"wq", "wk", "wv"};
          for (int i = 0; i < 3; i++) {
            int64_t wd[2] = {H[i] * D, K};
            rlx_node w = rlx_param(g, names[i], wt, 2, wd);
            p[i] = wt == RLX_F32 ? rlx_matmul(g, x, rlx_transpose(g, w, 2, perm)) : rlx_dequant_matmul(g, x, w);
          }
          rlx_node y[4] = {form == 3 ? rlx_rope(g, p[0], pos, &d) : rlx_rope_cos_sin(g, p[0], c, sn, &d),
                           form == 3 ? rlx_rope(g, p[1], pos, &d) : rlx_rope_cos_sin(g, p[1], c, sn, &d), p[2], p[1]};
          rlx_graph_set_outputs(g, 3 + k_out, y);
          const size_t table_bytes = (size_t)(rows * half) * dtype_size(t);
          uint8_t *tab = malloc(2 * table_bytes); /* cos, then sin, as t */
          int32_t posv[6];
          for (int64_t r = 0; r < rows; r++) {
            posv[r] = (int32_t)(40 + 7 * r);
            for (int64_t j = 0; j < half; j++) {
              const double th = (double)posv[r] * pow(10000.0, -2.0 * (double)j / (double)d.n_rot);
              store_as(t, tab, r * half + j, cos(th)), store_as(t, tab, (rows + r) * half + j, sin(th));
            }
          }
          bound_leaf l[6] = {{"x", 0, random_tensor(t, B * S * K, 1.0), (size_t)(B * S * K) * dtype_size(t)},
                             {"cos", 0, tab, table_bytes},
                             {"sin", 0, tab + table_bytes, table_bytes}};
          for (int i = 0; i < 3; i++)
            l[3 + i] = (bound_leaf){names[i], 1, random_tensor(wt, H[i] * D * K, 0.1), (size_t)(H[i] * D * K) * dtype_size(wt)};
          int nl = 6;
          if (form == 3) /* positions for the tables */
            l[1] = (bound_leaf){"pos", 0, posv, sizeof(int32_t) * (size_t)rows}, l[2] = l[5], nl = 5;
          char what[112];
          snprintf(what, sizeof what, "gemv rope %s w, %s x, form %d, B=%lld S=%lld%s", rlx_dtype_name(wt),
                   rlx_dtype_name(t), form, (long long)B, (long long)S, k_out ? " (k's product an output)" : "");
          for (int o = 0; o < 3 + k_out; o++) compare_replay(what, g, l, nl, o, t, 0.0);
          for (int o = 0; o < 3 + k_out; o++) compare_unfused(what, g, l, nl, o, t);
          const int64_t fused = device_launches(g), apart = unfused_launches(g);
          /* the products' launch, and k's rope where k's product is also an output */
          CHECK(fused == 1 + k_out && apart == 5, "%s: %lld launches (apart: %lld)", what, (long long)fused,
                (long long)apart);
          free(l[0].data), free(tab);
          for (int i = 2; i < nl; i++)
            if (i > 2 || form == 3) free(l[i].data);
          rlx_graph_free(g);
        }
}

/* RmsNorm (beta zeros, as the LLM graphs give it) of decode rows read by
 * products: the products' GEMV launch computes the norm, and the norm
 * launches nothing. q, k and v of one x (three segments), and a gate and
 * up pair (glu); 16-bit GGUF weights (DequantMatMul, F32 or 16-bit x)
 * and F32 params read transposed (MatMul). Against the CPU, replay == op
 * by op, within the tolerance of the norm and products launched apart
 * (RLX_CUDA_FUSE=0: the sums run in another order; four launches), one
 * launch in all. With the norm's output also an output (the launch writes
 * it too), with a beta of ones (not taken: the norm launches before the
 * products' launch), and with the
 * norm's input computed (x + x, which dies at the norm: the planner may
 * give its bytes to a product's output, which the launch must then not
 * write while it reads them; results only). */
static void test_gemv_norm(void) {
  static const struct { rlx_dtype w, x; } kinds[] = {{RLX_BF16, RLX_F32}, {RLX_F16, RLX_F16}, {RLX_F32, RLX_F32}};
  for (size_t ki = 0; ki < sizeof kinds / sizeof *kinds; ki++)
    for (int glu = 0; glu < 2; glu++)
      for (int M = 1; M <= 3; M += 2)
        for (int variant = 0; variant < 4; variant++) { /* plain; norm an output; beta of ones; x computed */
          const rlx_dtype wt = kinds[ki].w, t = kinds[ki].x;
          const int64_t K = 1032, N[3] = {variant == 3 ? K : 256, 128, 136};
          rlx_graph *g = rlx_graph_new("gemv_norm");
          int64_t xd[2] = {M, K}, vd[1] = {K}, perm[2] = {1, 0};
          void *betav = calloc((size_t)K, dtype_size(t));
          if (variant == 2)
            for (int64_t i = 0; i < K; i++) store_as(t, betav, i, 1.0);
          rlx_node x = rlx_input(g, "x", t, 2, xd), gamma = rlx_param(g, "gamma", t, 1, vd);
          rlx_node h = rlx_rms_norm(g, variant == 3 ? rlx_add(g, x, x) : x, gamma, rlx_constant(g, t, 1, vd, betav), -1, 1e-5);
          free(betav);
          static const char *names[3] = {"w0", "w1", "w2"};
          rlx_node p[3];
          const int np = glu ? 2 : 3;
          for (int i = 0; i < np; i++) {
            int64_t wd[2] = {glu ? (variant == 3 ? K : 264) : N[i], K};
            rlx_node w = rlx_param(g, names[i], wt, 2, wd);
            p[i] = wt == RLX_F32 ? rlx_matmul(g, h, rlx_transpose(g, w, 2, perm)) : rlx_dequant_matmul(g, h, w);
          }
          rlx_node y[4];
          int n_out = 0;
          if (glu) y[n_out++] = rlx_mul(g, rlx_activation(g, RLX_ACT_SILU, p[0]), p[1]);
          else
            for (int i = 0; i < 3; i++) y[n_out++] = p[i];
          if (variant == 1) y[n_out++] = h;
          rlx_graph_set_outputs(g, n_out, y);
          bound_leaf l[5] = {{"x", 0, random_tensor(t, M * K, 1.0), (size_t)(M * K) * dtype_size(t)},
                             {"gamma", 1, random_tensor(t, K, 1.0), (size_t)K * dtype_size(t)}};
          for (int i = 0; i < np; i++) {
            const int64_t rows = glu ? (variant == 3 ? K : 264) : N[i];
            l[2 + i] = (bound_leaf){names[i], 1, random_tensor(wt, rows * K, 0.1), (size_t)(rows * K) * dtype_size(wt)};
          }
          char what[112];
          snprintf(what, sizeof what, "gemv norm %s w, %s x, %s, M=%d%s", rlx_dtype_name(wt), rlx_dtype_name(t),
                   glu ? "glu" : "q|k|v", M,
                   variant == 1 ? " (norm an output)" : variant == 2 ? " (beta ones)" : variant == 3 ? " (x computed)" : "");
          for (int o = 0; o < n_out; o++) compare_replay(what, g, l, 2 + np, o, t, 0.0);
          for (int o = 0; o < n_out; o++) compare_unfused(what, g, l, 2 + np, o, t);
          const int64_t fused = device_launches(g), apart = unfused_launches(g);
          CHECK(fused > 0 && (variant == 3 || (fused == (variant == 2 ? 2 : 1) && apart == 4)),
                "%s: %lld launches (apart: %lld)", what, (long long)fused, (long long)apart);
          for (int i = 0; i < 2 + np; i++) free(l[i].data);
          rlx_graph_free(g);
        }
}

int main(void) {
  if (!cuda_backend_test_begin()) return CUDA_SKIP;
  test_matmul();
  test_gemv();
  test_gemv_segments();
  test_glu_gemv();
  test_gemv_rope();
  test_gemv_norm();
  return check_report();
}
